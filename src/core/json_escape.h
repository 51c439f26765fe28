/* json_escape.h — the project's one JSON string escaper (internal; libc
 * only, so the core library, the store layer and the CLI all use it).
 *
 * Output is always valid JSON whatever the input bytes: `"` and `\` are
 * escaped, control bytes become \n \t \r or \u00XX, valid UTF-8 passes
 * through unchanged, and every byte that does not begin a valid UTF-8
 * sequence (a Latin-1 "é" saved as 0xE9, a lone continuation byte, an
 * overlong form, a surrogate) becomes \ufffd and is counted. Pure and
 * thread-safe. */
#ifndef SPY_CORE_JSON_ESCAPE_H
#define SPY_CORE_JSON_ESCAPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The most output bytes one input byte can produce (\u00XX, \ufffd). */
#define SPY__JSON_ESC_MAX 6

/* Length (1–4) of the valid UTF-8 sequence starting at p, n bytes left,
 * or 0 when the byte at p does not begin one. n must be > 0. */
size_t spy__utf8_seq(const unsigned char *p, size_t n);

/* How many bytes of s[0..n) spy__json_escape would replace with U+FFFD. */
uint64_t spy__utf8_invalid(const char *s, size_t n);

/* How many bytes s[0..n) begins with that the escaper copies as they
 * are (printable ASCII but `"` and `\`): 16 tested at a time. */
size_t spy__json_plain_len(const char *s, size_t n);

/* Escapes the body of a JSON string (no quotes) from s[0..n) into
 * out[0..cap): as much as fits, never splitting a sequence. Returns the
 * bytes written; *used receives the input bytes consumed (n when all fit,
 * which cap >= SPY__JSON_ESC_MAX * n guarantees) and *replaced, when not
 * NULL, grows by the bytes replaced with U+FFFD. Progress is guaranteed
 * when cap >= SPY__JSON_ESC_MAX. Bytes of out past the returned count
 * (within cap) may be overwritten: they are scratch. */
size_t spy__json_escape(char *out, size_t cap, const char *s, size_t n,
                        size_t *used, uint64_t *replaced);

/* Tests: turns the AVX2 loop (used where the CPU has AVX2) off (0) or
 * back on; returns whether it was on. Not while other threads escape. */
int spy__json_escape_avx2(int on);

/* n < 32 bytes from s to d, exactly: overlapping moves that read and
 * write only those bytes, inline (no call for a name or a few digits). */
static inline void spy__small_copy(char *d, const void *src, size_t n) {
  const unsigned char *s = src;
  if (n >= 16) {
    memcpy(d, s, 16);
    memcpy(d + n - 16, s + n - 16, 16);
  } else if (n >= 8) {
    memcpy(d, s, 8);
    memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4) {
    memcpy(d, s, 4);
    memcpy(d + n - 4, s + n - 4, 4);
  } else
    for (size_t k = 0; k < n; k++)
      d[k] = (char)s[k];
}

#endif
