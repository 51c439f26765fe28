/* line_diff.c — unified line diff (see line_diff.h). The texts are cut
 * into lines (each keeps its newline, so a last line without one differs
 * from the same line with one), each line hashed once; Myers' greedy
 * algorithm finds the shortest edit script, keeping the furthest-reaching
 * diagonals of every step (d² ints in all) so the script can be walked
 * back; the script is printed as hunks with 3 lines of context. */
#include "line_diff.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct line {
  const char *p;
  size_t n;
  uint64_t h;
} line;

typedef struct lines {
  line *v;
  size_t n;
} lines;

static int split(const char *s, size_t n, lines *out) {
  size_t cap = 16, k = 0;
  out->v = malloc(cap * sizeof *out->v);
  if (!out->v)
    return -1;
  for (size_t i = 0; i < n;) {
    const char *nl = memchr(s + i, '\n', n - i);
    size_t len = nl ? (size_t)(nl - (s + i)) + 1 : n - i;
    if (k == cap) {
      line *g = realloc(out->v, 2 * cap * sizeof *g);
      if (!g)
        return -1;
      out->v = g;
      cap *= 2;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t j = 0; j < len; j++)
      h = (h ^ (unsigned char)s[i + j]) * 1099511628211ull;
    out->v[k++] = (line){s + i, len, h};
    i += len;
  }
  out->n = k;
  return 0;
}

static int same(const line *a, const line *b) {
  return a->h == b->h && a->n == b->n && memcmp(a->p, b->p, a->n) == 0;
}

/* One edit: ' ' both, '-' a only, '+' b only; ai / bi the line indexes. */
typedef struct edit {
  char op;
  size_t ai, bi;
} edit;

/* The edit script of a → b into *out (forward order). Returns 0, 1 when
 * the script would be longer than LINE_DIFF_MAX_EDITS, -1 out of memory. */
static int myers(const lines *a, const lines *b, edit **out, size_t *nout) {
  long n = (long)a->n, m = (long)b->n, max = n + m;
  long dmax = max < LINE_DIFF_MAX_EDITS ? max : LINE_DIFF_MAX_EDITS;
  /* trace[d] holds V for k in -d..d at trace[d][k + d] */
  long **trace = calloc((size_t)dmax + 1, sizeof *trace);
  if (!trace)
    return -1;
  long dfound = -1;
  int rc = 0;
  for (long d = 0; d <= dmax && dfound < 0; d++) {
    long *v = malloc((size_t)(2 * d + 1) * sizeof *v);
    if (!v) {
      rc = -1;
      break;
    }
    trace[d] = v;
    const long *p = d ? trace[d - 1] : NULL;
    for (long k = -d; k <= d; k += 2) {
      long x;
      if (d == 0)
        x = 0;
      else if (k == -d || (k != d && p[k - 1 + d - 1] < p[k + 1 + d - 1]))
        x = p[k + 1 + d - 1];
      else
        x = p[k - 1 + d - 1] + 1;
      long y = x - k;
      while (x < n && y < m && same(&a->v[x], &b->v[y]))
        x++, y++;
      v[k + d] = x;
      if (x >= n && y >= m) {
        dfound = d;
        break;
      }
    }
  }
  if (rc == 0 && dfound < 0)
    rc = 1;
  if (rc == 0) {
    size_t cap = (size_t)(n + m) + 1, k = 0;
    edit *e = malloc(cap * sizeof *e);
    if (!e)
      rc = -1;
    long x = n, y = m;
    for (long d = dfound; e && d >= 0; d--) {
      long kk = x - y, px, py;
      if (d == 0)
        px = py = 0;
      else {
        const long *p = trace[d - 1];
        long pk =
            (kk == -d || (kk != d && p[kk - 1 + d - 1] < p[kk + 1 + d - 1]))
                ? kk + 1
                : kk - 1;
        px = p[pk + d - 1];
        py = px - pk;
      }
      /* the snake back to the step's end point */
      long sx = d == 0 ? 0 : (x - y == px - py + 1 ? px + 1 : px);
      while (x > sx) {
        x--, y--;
        e[k++] = (edit){' ', (size_t)x, (size_t)y};
      }
      if (d == 0)
        break;
      if (x == px + 1) /* a step right: a line of a deleted */
        e[k++] = (edit){'-', (size_t)px, (size_t)py};
      else /* a step down: a line of b inserted */
        e[k++] = (edit){'+', (size_t)px, (size_t)py};
      x = px, y = py;
    }
    if (e) {
      for (size_t i = 0; i < k / 2; i++) {
        edit t = e[i];
        e[i] = e[k - 1 - i];
        e[k - 1 - i] = t;
      }
      *out = e;
      *nout = k;
    }
  }
  for (long d = 0; d <= dmax; d++)
    free(trace[d]);
  free(trace);
  return rc;
}

static void put_line(FILE *f, char op, const line *l) {
  fputc(op, f);
  fwrite(l->p, 1, l->n, f);
  if (!l->n || l->p[l->n - 1] != '\n')
    fputs("\n\\ No newline at end of file\n", f);
}

static void hunks(FILE *f, const lines *a, const lines *b, const edit *e,
                  size_t ne) {
  enum { CTX = 3 };
  size_t i = 0;
  while (i < ne) {
    while (i < ne && e[i].op == ' ')
      i++;
    if (i == ne)
      break;
    size_t start = i >= CTX ? i - CTX : 0, end = i;
    /* extend while the next change is within 2 × CTX of equal lines */
    for (;;) {
      while (end < ne && e[end].op != ' ')
        end++;
      size_t eq = end;
      while (eq < ne && e[eq].op == ' ')
        eq++;
      if (eq < ne && eq - end <= 2 * CTX)
        end = eq;
      else {
        end = end + CTX < ne ? end + CTX : ne;
        break;
      }
    }
    size_t as = 0, bs = 0, ac = 0, bc = 0;
    int seen_a = 0, seen_b = 0;
    for (size_t j = start; j < end; j++) {
      if (e[j].op != '+') {
        if (!seen_a++)
          as = e[j].ai;
        ac++;
      }
      if (e[j].op != '-') {
        if (!seen_b++)
          bs = e[j].bi;
        bc++;
      }
    }
    if (!seen_a) /* an insertion only: the line before it */
      as = e[start].ai;
    if (!seen_b)
      bs = e[start].bi;
    fprintf(f, "@@ -%zu,%zu +%zu,%zu @@\n", ac ? as + 1 : as, ac,
            bc ? bs + 1 : bs, bc);
    for (size_t j = start; j < end; j++)
      put_line(f, e[j].op, e[j].op == '+' ? &b->v[e[j].bi] : &a->v[e[j].ai]);
    i = end;
  }
}

int line_diff(FILE *f, const char *a_name, const char *a, size_t an,
              const char *b_name, const char *b, size_t bn) {
  if (an == bn && memcmp(a, b, an) == 0)
    return 0;
  lines la = {0}, lb = {0};
  edit *e = NULL;
  size_t ne = 0;
  int rc = -1;
  if (split(a, an, &la) == 0 && split(b, bn, &lb) == 0) {
    rc = myers(&la, &lb, &e, &ne);
    if (rc == 1) { /* too many edits: every line replaced */
      ne = la.n + lb.n;
      e = malloc((ne ? ne : 1) * sizeof *e);
      rc = e ? 0 : -1;
      for (size_t i = 0; e && i < la.n; i++)
        e[i] = (edit){'-', i, 0};
      for (size_t i = 0; e && i < lb.n; i++)
        e[la.n + i] = (edit){'+', la.n, i};
    }
  }
  if (rc == 0) {
    fprintf(f, "--- %s\n+++ %s\n", a_name, b_name);
    hunks(f, &la, &lb, e, ne);
  }
  free(e);
  free(la.v);
  free(lb.v);
  return rc;
}
