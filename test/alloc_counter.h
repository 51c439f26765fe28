/* alloc_counter.h — counts heap allocations made while `counting` is set
 * on the calling thread, by interposing malloc, calloc, realloc, free,
 * aligned_alloc and posix_memalign over glibc's own (__libc_*). Include it in
 * exactly one file of a test program, never in a sanitizer build (the sanitizer
 * owns malloc there). Set counting = 1 around the code under test and read
 * `allocs`. */
#ifndef SPY_TEST_ALLOC_COUNTER_H
#define SPY_TEST_ALLOC_COUNTER_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static _Thread_local volatile int counting;
static _Atomic long allocs;

void *malloc(size_t n) {
  if (counting)
    atomic_fetch_add(&allocs, 1);
  return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
  if (counting)
    atomic_fetch_add(&allocs, 1);
  return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
  if (counting)
    atomic_fetch_add(&allocs, 1);
  return __libc_realloc(p, n);
}
void free(void *p) {
  if (counting && p)
    atomic_fetch_add(&allocs, 1);
  __libc_free(p);
}
/* the aligned entry points the library uses, from the same allocator */
void *aligned_alloc(size_t align, size_t n) {
  if (counting)
    atomic_fetch_add(&allocs, 1);
  return __libc_memalign(align, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)))
    return EINVAL;
  if (counting)
    atomic_fetch_add(&allocs, 1);
  void *p = __libc_memalign(align, n);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}

#endif
