/* line_diff.h — a unified diff of two texts, line by line (Myers' O(ND)
 * shortest edit script), for `spyglass trace module --diff`.
 *
 * Not thread-safe per call only in that it writes to one FILE; it keeps no
 * state between calls. */
#ifndef SPY_TOOL_LINE_DIFF_H
#define SPY_TOOL_LINE_DIFF_H

#include <stddef.h>
#include <stdio.h>

/* Longest edit script (lines inserted + deleted) line_diff computes; a
 * larger change is printed as one hunk replacing every line. */
#define LINE_DIFF_MAX_EDITS 4000

/* Writes the unified diff (3 lines of context, `---`/`+++` headers named
 * a_name and b_name) of a[0..an) → b[0..bn) to f; nothing when the texts
 * are equal. A last line without a newline is marked the way diff(1)
 * marks it. Returns 0, or -1 when memory ran out (nothing useful was
 * written). The texts need not be NUL-terminated and may hold any bytes. */
int line_diff(FILE *f, const char *a_name, const char *a, size_t an,
              const char *b_name, const char *b, size_t bn);

#endif
