/* fuzz_delta.c — libFuzzer target for the copy/insert delta decoder of
 * sources (src/store/src_delta.c, codec 3): a store's blobs are external
 * input. The first byte splits the rest into a base and a blob; the
 * decoder must refuse the blob or fill exactly the size it was asked for,
 * never reading or writing outside either. Then, so the fuzzer also
 * reaches the decoder through valid programs, the blob bytes are encoded
 * as a delta of the base (with no limit, then with the first blob's
 * length as the limit, which sends a raw program through zstd) and must
 * decode back to themselves, the encoder's portable loop making the same
 * blob as its AVX2 one. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/src_delta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static spy__delta enc, portable;
static void *dctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3)
    return 0;
  size_t nb = data[0] * (size - 3) / 255, want = data[1] * 16u;
  const char *base = (const char *)data + 2;
  const uint8_t *blob = data + 2 + nb;
  size_t nblob = size - 2 - nb;
  char *out = malloc(want ? want : 1);
  if (!out)
    return 0;
  spy__delta_decode(&dctx, blob, nblob, base, nb, out, want);
  free(out);
  size_t bound = spy__delta_bound(nblob);
  uint8_t *z = malloc(bound), *z2 = malloc(bound);
  char *back = malloc(nblob ? nblob : 1);
  if (z && z2 && back) {
    /* without a limit, then with the first result as the limit: a raw
     * program over it is tried as a zstd frame */
    size_t limit = bound + 1;
    for (int pass = 0; pass < 2; pass++) {
      long n = spy__delta_encode(&enc, base, nb, (const char *)blob, nblob, z,
                                 bound, limit);
      if (n > 0 &&
          (spy__delta_decode(&dctx, z, (size_t)n, base, nb, back, nblob) != 0 ||
           memcmp(back, blob, nblob) != 0))
        abort();
      /* the portable loop makes the same blob as the AVX2 one */
      portable.portable = 1;
      long n2 = spy__delta_encode(&portable, base, nb, (const char *)blob,
                                  nblob, z2, bound, limit);
      if (n2 != n || (n > 0 && memcmp(z, z2, (size_t)n) != 0))
        abort();
      if (n <= 0 || (size_t)n >= limit)
        break;
      limit = (size_t)n;
    }
  }
  free(z);
  free(z2);
  free(back);
  return 0;
}
