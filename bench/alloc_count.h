/* alloc_count.h — counts heap allocations made by the calling thread
 * between start and stop, by interposing malloc, calloc, realloc and free
 * in the spyglass tool (not in sanitizer builds, where the sanitizer owns
 * malloc: there alloc_count_available() is 0 and the counts are 0). */
#ifndef SPY_BENCH_ALLOC_COUNT_H
#define SPY_BENCH_ALLOC_COUNT_H

int alloc_count_available(void);
void alloc_count_start(void);
/* Calls to malloc/calloc/realloc/free on this thread since start. */
long alloc_count_stop(void);

#endif
