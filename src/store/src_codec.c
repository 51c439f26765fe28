/* src_codec.c — source blobs at rest: zstd-compressed when that saves
 * space, raw otherwise; and mkdir -p for the writers' directories. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "store.h"

int spy__src_pack(spy__buf *out, const char *p, size_t n) {
  out->len = 0;
  if (n >= 128) {
    size_t bound = ZSTD_compressBound(n);
    if (spy__buf_reserve(out, bound) == 0) {
      size_t z = ZSTD_compress(out->p, bound, p, n, 3);
      if (!ZSTD_isError(z) && z < n - n / 16) {
        out->len = z;
        return SPY__CODEC_ZSTD;
      }
    }
  }
  out->len = 0;
  spy__buf_put(out, p, n);
  return SPY__CODEC_RAW;
}

int spy__src_unpack(spy__buf *out, int codec, const void *p, size_t n,
                    size_t size) {
  out->len = 0;
  if (codec == SPY__CODEC_RAW) {
    spy__buf_put(out, p, n);
    return out->err;
  }
  if (codec != SPY__CODEC_ZSTD || size > ((size_t)1 << 31))
    return SPY_EBADVALUE;
  if (spy__buf_reserve(out, size + 1) < 0)
    return out->err;
  size_t r = ZSTD_decompress(out->p, size + 1, p, n);
  if (ZSTD_isError(r) || r != size)
    return SPY_EBADVALUE;
  out->len = r;
  return 0;
}

int spy__mkdirs(const char *path) {
  char tmp[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof tmp)
    return SPY_ENAMETOOLONG;
  memcpy(tmp, path, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
      return -errno;
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return -errno;
  return 0;
}
