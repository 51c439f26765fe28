/* schema.c — the SQL schema derived from the action catalog, and the rows
 * an action maps to (shared by the SQLite and PostgreSQL writers).
 *
 * Every action kind, built-in or declared by the application, gets a table
 * named after it (hook_transform_call_start) with one row per action: the
 * session key, seq, build_id and ts_us, then one column per field in
 * catalog order — a string TEXT, an integer or boolean INTEGER, a payload
 * its content id (<field>_source_id, a key of sources), a list of strings
 * or integers a JSON array, a list of records its length (<field>_count)
 * plus a child table <table>__<field> holding one row per element (i0 is
 * the element's index; a list nested in it adds i1, and so on). Adding a
 * field to the catalog adds its column and its insert: nothing in this
 * file names a kind. The reference's tables (hook_calls, modules, …) are
 * views over these (rows.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_escape.h"
#include "store.h"

/* Columns every table starts with; a kind's field may not reuse them. */
static const char *const fixed_cols[] = {
    "session", "seq", "build_id", "ts_us", "i0", "i1", "i2", "i3", NULL};
/* Names of the writers' own tables and views. */
static const char *const reserved_tables[] = {
    "sessions", "builds",         "modules",       "module_imports",
    "chunks",   "chunk_imports",  "sources",       "hook_calls",
    "assets",   "action_batches", "spyglass_meta", "session_rows",
    NULL};

static int ident_ok(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
          s[i] == '_'))
      return 0;
  return 1;
}

static int in_list(const char *s, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if (strcmp(s, list[i]) == 0)
      return 1;
  return 0;
}

static int is_list(uint8_t t) { return t == SPY_TF_LIST || t == SPY_TF_OLIST; }

/* Column suffix and type of a field (LIST: its count column). */
void spy__field_col(const spy_trace_field *f, const char **suffix, char *type) {
  *suffix = "";
  switch (f->type) {
  case SPY_TF_STR:
  case SPY_TF_OSTR: *type = SPY__COL_TEXT; break;
  case SPY_TF_SRC:
  case SPY_TF_OSRC:
    *suffix = "_source_id";
    *type = SPY__COL_TEXT;
    break;
  case SPY_TF_STRS:
  case SPY_TF_OSTRS:
  case SPY_TF_INTS: *type = SPY__COL_JSON; break;
  case SPY_TF_LIST:
  case SPY_TF_OLIST:
    *suffix = "_count";
    *type = SPY__COL_INT;
    break;
  default: *type = SPY__COL_INT;
  }
}

static int grow(void **p, int *cap, int need, size_t size) {
  if (need <= *cap)
    return 0;
  int ncap = *cap ? *cap * 2 : 32;
  while (ncap < need)
    ncap *= 2;
  void *n = realloc(*p, (size_t)ncap * size);
  if (!n)
    return SPY_ENOMEM;
  *p = n;
  *cap = ncap;
  return 0;
}

/* Checks a record's field names (and its nested records') before any of
 * its tables is added. */
static int rec_ok(const spy_trace_kind *rec, const char *table, int depth) {
  if (depth > 3 || !ident_ok(table, 63))
    return 0;
  for (uint32_t i = 0; i < rec->nfields; i++) {
    const spy_trace_field *f = &rec->fields[i];
    if (!ident_ok(f->name, 40) || in_list(f->name, fixed_cols))
      return 0;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(rec->fields[j].name, f->name) == 0)
        return 0;
    if (is_list(f->type)) {
      char child[256];
      snprintf(child, sizeof child, "%.120s__%.60s", table, f->name);
      if (!f->rec || !rec_ok(f->rec, child, depth + 1))
        return 0;
    }
  }
  return 1;
}

/* Adds the table of `rec` (and its children); returns its index. */
static int add_table(spy__schema *s, const spy_trace_kind *rec,
                     const char *name, int depth) {
  int rc = grow((void **)&s->t, &s->cap, s->n + 1, sizeof *s->t);
  if (rc)
    return rc;
  int idx = s->n++;
  spy__gtable *t = &s->t[idx];
  memset(t, 0, sizeof *t);
  t->rec = rec;
  t->depth = (uint8_t)depth;
  t->name = strdup(name);
  t->child = malloc((rec->nfields ? rec->nfields : 1) * sizeof *t->child);
  spy__buf cols = {0}, types = {0};
  spy__buf_puts(&cols, "session,seq,build_id");
  spy__buf_puts(&types, "III");
  if (depth == 0) {
    spy__buf_puts(&cols, ",ts_us");
    spy__buf_putc(&types, SPY__COL_INT);
  }
  for (int d = 0; d < depth; d++) {
    char ix[16];
    snprintf(ix, sizeof ix, ",i%d", d);
    spy__buf_puts(&cols, ix);
    spy__buf_putc(&types, SPY__COL_INT);
  }
  for (uint32_t i = 0; i < rec->nfields; i++) {
    const char *suffix;
    char type;
    spy__field_col(&rec->fields[i], &suffix, &type);
    spy__buf_putc(&cols, ',');
    spy__buf_puts(&cols, rec->fields[i].name);
    spy__buf_puts(&cols, suffix);
    spy__buf_putc(&types, type);
  }
  spy__buf_putc(&cols, 0);
  spy__buf_putc(&types, 0);
  t->cols = cols.p;
  t->types = types.p;
  t->ncols = (uint16_t)(types.len - 1);
  if (!t->name || !t->child || cols.err || types.err)
    return SPY_ENOMEM;
  if ((rc = grow((void **)&s->cells, &s->ccap, t->ncols, sizeof *s->cells)))
    return rc;
  for (uint32_t i = 0; i < rec->nfields; i++) {
    const spy_trace_field *f = &rec->fields[i];
    s->t[idx].child[i] = -1;
    if (!is_list(f->type))
      continue;
    char child[256];
    snprintf(child, sizeof child, "%.120s__%.60s", name, f->name);
    int c = add_table(s, f->rec, child, depth + 1);
    if (c < 0)
      return c;
    s->t[idx].child[i] = c; /* s->t may have moved */
  }
  return idx;
}

int spy__schema_root(spy__schema *s, const spy_trace_kind *k, int *fresh) {
  if (fresh)
    *fresh = 0;
  for (int i = 0; i < s->nkinds; i++)
    if (s->kinds[i].kind == k)
      return s->kinds[i].root;
  int rc = grow((void **)&s->kinds, &s->kcap, s->nkinds + 1, sizeof *s->kinds);
  if (rc)
    return rc;
  int root = -1;
  if (rec_ok(k, k->snake, 0) && !in_list(k->snake, reserved_tables)) {
    for (int i = 0; i < s->n; i++) /* another kind with the same name */
      if (strcmp(s->t[i].name, k->snake) == 0)
        goto refused;
    root = add_table(s, k, k->snake, 0);
    if (root < 0)
      return root;
  }
refused:
  s->kinds[s->nkinds].kind = k;
  s->kinds[s->nkinds].root = root;
  s->nkinds++;
  if (fresh)
    *fresh = 1;
  return root;
}

int spy__schema_init(spy__schema *s) {
  memset(s, 0, sizeof *s);
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++) {
    int rc = spy__schema_root(s, spy_trace_kinds[i], NULL);
    if (rc < 0) {
      spy__schema_free(s);
      return rc < -1 ? rc : SPY_EINVAL;
    }
  }
  s->nbuiltin = s->n;
  return 0;
}

void spy__schema_free(spy__schema *s) {
  for (int i = 0; i < s->n; i++) {
    free(s->t[i].name);
    free(s->t[i].cols);
    free(s->t[i].types);
    free(s->t[i].child);
  }
  free(s->t);
  free(s->kinds);
  free(s->cells);
  spy__buf_free(&s->text);
  memset(s, 0, sizeof *s);
}

/* ---- SQL text ------------------------------------------------------------ */

static const char *col_type(char t, int pg) {
  switch (t) {
  case SPY__COL_INT: return pg ? "BIGINT" : "INTEGER";
  case SPY__COL_BLOB: return pg ? "BYTEA" : "BLOB";
  case SPY__COL_JSON: return pg ? "JSONB" : "TEXT";
  default: return "TEXT";
  }
}

void spy__create_table_sql(spy__buf *b, const char *name, const char *cols,
                           const char *types, const char *key, int pg) {
  spy__buf_puts(b, "CREATE TABLE IF NOT EXISTS ");
  spy__buf_puts(b, name);
  spy__buf_putc(b, '(');
  const char *c = cols;
  for (size_t i = 0; types[i]; i++) {
    const char *e = strchr(c, ',');
    size_t n = e ? (size_t)(e - c) : strlen(c);
    if (i)
      spy__buf_putc(b, ',');
    spy__buf_put(b, c, n);
    spy__buf_putc(b, ' ');
    spy__buf_puts(b, col_type(types[i], pg));
    c += n + (e != NULL);
  }
  if (key) {
    spy__buf_puts(b, ",PRIMARY KEY(");
    spy__buf_puts(b, key);
    spy__buf_putc(b, ')');
  }
  spy__buf_puts(b, ");\n");
}

void spy__insert_sql(spy__buf *b, const char *verb, const char *name,
                     const char *cols, size_t ncols) {
  spy__buf_puts(b, verb);
  spy__buf_putc(b, ' ');
  spy__buf_puts(b, name);
  spy__buf_putc(b, '(');
  spy__buf_puts(b, cols);
  spy__buf_puts(b, ") VALUES(");
  for (size_t i = 0; i < ncols; i++)
    spy__buf_puts(b, i ? ",?" : "?");
  spy__buf_putc(b, ')');
}

void spy__schema_table_sql(const spy__schema *s, int ti, spy__buf *b, int pg) {
  const spy__gtable *t = &s->t[ti];
  spy__create_table_sql(b, t->name, t->cols, t->types, NULL, pg);
}

void spy__schema_index_sql(const spy__schema *s, int ti, spy__buf *b) {
  const spy__gtable *t = &s->t[ti];
  /* a child table is read by build and joined to its parent element */
  if (t->depth == 0)
    return;
  spy__buf_puts(b, "CREATE INDEX IF NOT EXISTS ");
  spy__buf_puts(b, t->name);
  spy__buf_puts(b, "_parent ON ");
  spy__buf_puts(b, t->name);
  spy__buf_puts(b, "(session,build_id,seq");
  for (int d = 0; d < t->depth; d++) {
    char ix[16];
    snprintf(ix, sizeof ix, ",i%d", d);
    spy__buf_puts(b, ix);
  }
  spy__buf_puts(b, ");\n");
}

void spy__schema_insert_sql(const spy__schema *s, int ti, spy__buf *b) {
  const spy__gtable *t = &s->t[ti];
  spy__insert_sql(b, "INSERT INTO", t->name, t->cols, t->ncols);
}

/* ---- rows ---------------------------------------------------------------- */

typedef struct walk {
  spy__schema *s;
  const spy_trace_action *a;
  spy__gsink sink;
  void *arg;
  uint32_t path[4];
} walk;

/* Text cells first record an offset into s->text (which may move while the
 * row is built); this turns them into pointers. */
#define TEXT_OFF ((const char *)1)

static void put_text_cell(spy__schema *s, spy__cell *c, size_t from) {
  c->kind = SPY__COL_TEXT;
  c->s = TEXT_OFF;
  c->i = (int64_t)from;
  c->n = s->text.len - from;
}

static void json_list(spy__buf *b, const spy_trace_val *v) {
  spy__buf_putc(b, '[');
  for (uint32_t i = 0; i < v->n; i++) {
    const spy_trace_val *it = &v->u.items[i];
    if (i)
      spy__buf_putc(b, ',');
    if (it->type == SPY_TV_INT)
      spy__buf_i64(b, it->u.i);
    else if (it->type == SPY_TV_STR)
      spy__json_str(b, it->u.s, it->n);
    else
      spy__buf_puts(b, "null");
  }
  spy__buf_putc(b, ']');
}

static int emit_rec(walk *w, int ti, const spy_trace_val *rec) {
  spy__schema *s = w->s;
  const spy__gtable *t = &s->t[ti];
  const spy_trace_kind *k = t->rec;
  spy__cell *c = s->cells;
  int n = 0;
  s->text.len = 0;
  c[n++] = (spy__cell){SPY__COL_INT, s->session, NULL, 0};
  c[n++] = (spy__cell){SPY__COL_INT, (int64_t)w->a->seq, NULL, 0};
  c[n++] = (spy__cell){SPY__COL_INT, w->a->build, NULL, 0};
  if (t->depth == 0)
    c[n++] = (spy__cell){SPY__COL_INT, (int64_t)w->a->ts_us, NULL, 0};
  for (int d = 0; d < t->depth; d++)
    c[n++] = (spy__cell){SPY__COL_INT, w->path[d], NULL, 0};
  for (uint32_t i = 0; i < k->nfields; i++) {
    const spy_trace_val *v =
        rec && rec->type == SPY_TV_REC && i < rec->n ? &rec->u.items[i] : NULL;
    spy__cell *o = &c[n++];
    *o = (spy__cell){0};
    if (!v)
      continue;
    switch (k->fields[i].type) {
    case SPY_TF_STR:
    case SPY_TF_OSTR:
      if (v->type == SPY_TV_STR) {
        *o = (spy__cell){SPY__COL_TEXT, 0, v->u.s, v->n};
        if (s->utf8_only && spy__utf8_invalid(v->u.s, v->n))
          s->inexact = 1; /* the server would get U+FFFD */
      }
      break;
    case SPY_TF_INT:
    case SPY_TF_OINT:
      if (v->type == SPY_TV_INT)
        *o = (spy__cell){SPY__COL_INT, v->u.i, NULL, 0};
      break;
    case SPY_TF_BOOL:
    case SPY_TF_OBOOL:
      if (v->type == SPY_TV_TRUE || v->type == SPY_TV_FALSE)
        *o = (spy__cell){SPY__COL_INT, v->type == SPY_TV_TRUE, NULL, 0};
      break;
    case SPY_TF_SRC:
    case SPY_TF_OSRC:
      if (v->has_hash) {
        size_t from = s->text.len;
        if (spy__buf_reserve(&s->text, 33) == 0) {
          spy_trace_hash_hex(v->hash, s->text.p + from);
          s->text.len += 32;
        }
        put_text_cell(s, o, from);
      }
      break;
    case SPY_TF_STRS:
    case SPY_TF_OSTRS:
    case SPY_TF_INTS:
      if (v->type == SPY_TV_LIST) {
        size_t from = s->text.len;
        uint64_t replaced = s->text.replaced;
        json_list(&s->text, v);
        put_text_cell(s, o, from);
        if (s->text.replaced != replaced)
          s->inexact = 1; /* JSON holds U+FFFD where the bytes were */
      }
      break;
    case SPY_TF_LIST:
    case SPY_TF_OLIST:
      if (v->type == SPY_TV_LIST)
        *o = (spy__cell){SPY__COL_INT, v->n, NULL, 0};
      break;
    }
  }
  if (s->text.err)
    return s->text.err;
  for (int i = 0; i < n; i++)
    if (c[i].kind == SPY__COL_TEXT && c[i].s == TEXT_OFF) {
      c[i].s = s->text.p + c[i].i;
      c[i].i = 0;
    }
  int rc = w->sink(w->arg, ti, c, n);
  if (rc < 0)
    return rc;
  /* then the children, element by element (the cells are reused) */
  for (uint32_t i = 0; i < k->nfields; i++) {
    int child = s->t[ti].child[i];
    const spy_trace_val *v =
        rec && rec->type == SPY_TV_REC && i < rec->n ? &rec->u.items[i] : NULL;
    if (child < 0 || !v || v->type != SPY_TV_LIST)
      continue;
    for (uint32_t j = 0; j < v->n; j++) {
      w->path[s->t[ti].depth] = j;
      if ((rc = emit_rec(w, child, &v->u.items[j])) < 0)
        return rc;
    }
  }
  return 0;
}

int spy__schema_rows(spy__schema *s, int root, const spy_trace_action *a,
                     spy__gsink sink, void *arg) {
  s->inexact = 0;
  if (root < 0)
    return 0;
  walk w = {s, a, sink, arg, {0}};
  s->inexact = 0;
  return emit_rec(&w, root, &a->fields);
}
