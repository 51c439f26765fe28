/* opts.c — the table-driven option parser every `spyglass` command uses
 * (opts.h): one convention, one wording for every refusal. */
#include "opts.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void refuse(const char *cmd, const cli_opt *o, const char *v) {
  char want[160];
  switch (o->kind) {
  case CLI_INT:
  case CLI_U64:
    snprintf(want, sizeof want, "%s %.0f..%.0f",
             o->unit ? o->unit : "an integer", o->min, o->max);
    break;
  case CLI_DOUBLE:
    snprintf(want, sizeof want, "%s %s%.10g..%.10g",
             o->unit ? o->unit : "a number", o->zero_ok ? "0 or " : "", o->min,
             o->max);
    break;
  case CLI_SIZE:
    snprintf(want, sizeof want, "WIDTHxHEIGHT, each %.0f..%.0f", o->min,
             o->max);
    break;
  case CLI_STRS:
    if (v && ((const cli_strs *)o->out)->n >= (uint32_t)o->max) {
      fprintf(stderr, "spyglass %s: %s is given at most %.0f times\n", cmd,
              o->name, o->max);
      return;
    }
    snprintf(want, sizeof want, "%s", o->unit ? o->unit : "a value");
    break;
  default: snprintf(want, sizeof want, "%s", o->unit ? o->unit : "a value");
  }
  if (v)
    fprintf(stderr, "spyglass %s: %s wants %s, not '%s'\n", cmd, o->name, want,
            v);
  else
    fprintf(stderr, "spyglass %s: %s wants %s\n", cmd, o->name, want);
}

/* A whole decimal integer (optional sign) into *out; 0 or -1. */
static int whole_ll(const char *v, long long *out) {
  if (!(isdigit((unsigned char)v[0]) ||
        ((v[0] == '-' || v[0] == '+') && isdigit((unsigned char)v[1]))))
    return -1;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end)
    return -1;
  *out = x;
  return 0;
}

static int whole_u32(const char *v, char **end, uint32_t max, uint32_t *out) {
  if (!isdigit((unsigned char)v[0]))
    return -1;
  errno = 0;
  unsigned long x = strtoul(v, end, 10);
  if (errno || x > max)
    return -1;
  *out = (uint32_t)x;
  return 0;
}

static int set_value(const cli_opt *o, const char *v) {
  long long i;
  switch (o->kind) {
  case CLI_STR: *(const char **)o->out = v; return 0;
  case CLI_STRS: {
    cli_strs *l = o->out;
    if (l->n >= (uint32_t)o->max)
      return -1;
    l->v[l->n++] = v;
    return 0;
  }
  case CLI_INT:
    if (whole_ll(v, &i) < 0 || (double)i < o->min || (double)i > o->max)
      return -1;
    *(int *)o->out = (int)i;
    return 0;
  case CLI_U64: {
    if (!isdigit((unsigned char)v[0]))
      return -1;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(v, &end, 10);
    if (errno || *end || (double)u < o->min || (double)u > o->max)
      return -1;
    *(uint64_t *)o->out = u;
    return 0;
  }
  case CLI_DOUBLE: {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(d))
      return -1;
    if (!(d == 0 && o->zero_ok) && (d < o->min || d > o->max))
      return -1;
    *(double *)o->out = d;
    return 0;
  }
  case CLI_SIZE: {
    uint32_t w, h;
    char *end;
    if (whole_u32(v, &end, UINT32_MAX, &w) < 0 || *end != 'x' ||
        whole_u32(end + 1, &end, UINT32_MAX, &h) < 0 || *end)
      return -1;
    if (w < o->min || w > o->max || h < o->min || h > o->max)
      return -1;
    ((uint32_t *)o->out)[0] = w;
    ((uint32_t *)o->out)[1] = h;
    return 0;
  }
  case CLI_FLAG: break;
  }
  return -1;
}

int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts,
              size_t nopts, const char **pos, int maxpos, int *npos,
              void (*help)(FILE *)) {
  int n = 0, options_end = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (options_end || a[0] != '-' || !a[1]) {
      if (n >= maxpos) {
        fprintf(stderr, "spyglass %s: unexpected argument '%s'\n", cmd, a);
        return 2;
      }
      pos[n++] = a;
      continue;
    }
    if (!strcmp(a, "--")) {
      options_end = 1;
      continue;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      help(stdout);
      return 1;
    }
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const cli_opt *o = NULL;
    for (size_t k = 0; k < nopts && !o; k++)
      if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len))
        o = &opts[k];
    if (!o) {
      fprintf(stderr,
              "spyglass %s: unknown option '%s' ('spyglass %s --help' "
              "lists them)\n",
              cmd, a, cmd);
      return 2;
    }
    if (o->kind == CLI_FLAG) {
      if (eq) {
        fprintf(stderr, "spyglass %s: %s takes no value\n", cmd, o->name);
        return 2;
      }
      *(int *)o->out = 1;
      continue;
    }
    const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
    /* "--session --json": the value is missing, it is not "--json" (a
     * negative number is still a value: its range check speaks) */
    if (v && !eq && v[0] == '-' && v[1] == '-') {
      v = NULL;
      i--;
    }
    if (!v || !*v) {
      refuse(cmd, o, NULL);
      return 2;
    }
    if (set_value(o, v) < 0) {
      refuse(cmd, o, v);
      return 2;
    }
  }
  if (npos)
    *npos = n;
  return 0;
}
