/* diff_hooks.h — per-plugin hook time for `spyglass diff` (diff_hooks.c). */
#ifndef SPY_DIFF_HOOKS_H
#define SPY_DIFF_HOOKS_H

#include <stdio.h>

#include <sqlite3.h>

/* Writes one row per plugin found in both recordings' build_hook tables
 * (text rows like diff.c's, or JSON objects after *first's comma rule) and
 * returns the number of plugins whose hook time per call regressed. */
int spy__diff_hooks(sqlite3 *base, sqlite3 *cand, double thr, int json,
                    int *first, FILE *out);

#endif
