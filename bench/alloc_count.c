/* alloc_count.c — the allocation counter behind alloc_count.h: thin
 * wrappers over glibc's own entry points (every one that hands out a
 * block), counting only on a thread that asked to be counted. */
#include "alloc_count.h"

#include <errno.h>
#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPY_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPY_SANITIZED 1
#endif

static _Thread_local volatile int counting;
static _Thread_local volatile long count;

#ifndef SPY_SANITIZED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

void *malloc(size_t n);
void *calloc(size_t a, size_t b);
void *realloc(void *p, size_t n);
void free(void *p);
void *aligned_alloc(size_t align, size_t n);
void *memalign(size_t align, size_t n);
int posix_memalign(void **out, size_t align, size_t n);
void *valloc(size_t n);
void *pvalloc(size_t n);

void *malloc(size_t n) {
  if (counting)
    count++;
  return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
  if (counting)
    count++;
  return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
  if (counting)
    count++;
  return __libc_realloc(p, n);
}
void free(void *p) {
  if (counting && p)
    count++;
  __libc_free(p);
}
/* The aligned entry points too: every block this program frees must come
 * from the allocator its free goes to. Left to a preloaded allocator
 * (LD_PRELOAD=libjemalloc.so.2), aligned_alloc's blocks reached glibc's
 * free above and the program aborted. */
void *aligned_alloc(size_t align, size_t n) {
  if (counting)
    count++;
  return __libc_memalign(align, n);
}
void *memalign(size_t align, size_t n) {
  if (counting)
    count++;
  return __libc_memalign(align, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)))
    return EINVAL;
  if (counting)
    count++;
  void *p = __libc_memalign(align, n);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}
void *valloc(size_t n) {
  if (counting)
    count++;
  return __libc_valloc(n);
}
void *pvalloc(size_t n) {
  if (counting)
    count++;
  return __libc_pvalloc(n);
}
int alloc_count_available(void) { return 1; }
#else
int alloc_count_available(void) { return 0; }
#endif

void alloc_count_start(void) {
  count = 0;
  counting = 1;
}

long alloc_count_stop(void) {
  counting = 0;
  return count;
}
