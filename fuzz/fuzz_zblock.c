/* fuzz_zblock.c — libFuzzer target for the packed zone block decoder
 * (src/record/zblock.c): a recording file is external input. The first
 * byte picks what the rest is: a whole blob as stored in zone_block (odd)
 * or, so that the fuzzer reaches the column parser past zstd, the raw
 * columns of a block whose header and zstd frame this target writes
 * around them (even; the zone count from the next two bytes). Whatever
 * the bytes, the decoder refuses them or returns at most SPY_ZB_MAX zones
 * that re-encode and decode to the same zones. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "record/zblock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static spy_zb_dec dec, dec2;

static size_t put(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > (1u << 20))
    return 0;
  uint8_t *blob = NULL;
  size_t len = 0;
  if (data[0] & 1) {
    blob = malloc(size - 1 ? size - 1 : 1);
    if (!blob)
      return 0;
    memcpy(blob, data + 1, size - 1);
    len = size - 1;
  } else {
    if (size < 3)
      return 0;
    uint32_t n = (uint32_t)data[1] | (uint32_t)data[2] << 8;
    const uint8_t *raw = data + 3;
    size_t nraw = size - 3, bound = ZSTD_compressBound(nraw);
    blob = malloc(3 + 20 + bound);
    if (!blob)
      return 0;
    blob[0] = 'Z', blob[1] = 'B', blob[2] = 1;
    len = 3;
    len += put(blob + len, n);
    len += put(blob + len, nraw);
    size_t c = ZSTD_compress(blob + len, bound, raw, nraw, 1);
    if (ZSTD_isError(c)) {
      free(blob);
      return 0;
    }
    len += c;
  }
  uint32_t n;
  if (spy__zb_decode(&dec, blob, len, &n) == 0) {
    if (n == 0 || n > SPY_ZB_MAX)
      abort();
    /* what decodes re-encodes to the same zones */
    uint8_t *again;
    size_t alen;
    uint32_t n2;
    if (spy__zb_encode(dec.z, n, 1, &again, &alen) == 0) {
      if (spy__zb_decode(&dec2, again, alen, &n2) != 0 || n2 != n ||
          memcmp(dec.z, dec2.z, n * sizeof *dec.z) != 0)
        abort();
      free(again);
    }
  }
  free(blob);
  return 0;
}
