/* catalog.c — the descriptors of every built-in record, action and hook,
 * derived from the X-macro lists in trace_catalog.h (names, field types,
 * struct offsets, the Start/End pair of each hook), and lookups over
 * them. */
#include <stddef.h>
#include <string.h>

#include "store.h"

const spy_trace_kind spy_rec_kind__ = {"", "", 0, SPY_ROLE_NONE, 0, 0, NULL};

#define REC_DESC(snake, FIELDS)                                                \
  static const spy_trace_field rec_fields_##snake[] = {                        \
      FIELDS(SPY__FIELD_DESC, spy_rec_##snake){NULL, 0, 0, NULL}};             \
  const spy_trace_kind spy_rec_kind_##snake = {                                \
      #snake,                                                                  \
      #snake,                                                                  \
      0,                                                                       \
      SPY_ROLE_NONE,                                                           \
      sizeof rec_fields_##snake / sizeof rec_fields_##snake[0] - 1,            \
      sizeof(spy_rec_##snake),                                                 \
      rec_fields_##snake};
SPY_TRACE_RECORDS(REC_DESC)

#define ACT_DESC(id, Name, snake, role, FIELDS)                                \
  static const spy_trace_field act_fields_##snake[] = {                        \
      FIELDS(SPY__FIELD_DESC, spy_act_##snake){NULL, 0, 0, NULL}};             \
  const spy_trace_kind spy_kind_##snake = {                                    \
      #Name,                                                                   \
      #snake,                                                                  \
      id,                                                                      \
      SPY_ROLE_##role,                                                         \
      sizeof act_fields_##snake / sizeof act_fields_##snake[0] - 1,            \
      sizeof(spy_act_##snake),                                                 \
      act_fields_##snake};
SPY_TRACE_ACTIONS(ACT_DESC)

/* Wire ids are 1..SPY_TRACE_KIND_COUNT, each once: an id beyond the count
 * does not fit the table below, a repeated one is -Woverride-init, and
 * with both ruled out the sum says none is missing. */
#define ACT_PTR(id, Name, snake, role, FIELDS) [id] = &spy_kind_##snake,
const spy_trace_kind *const spy_trace_kinds[SPY_TRACE_KIND_COUNT + 1] = {
    SPY_TRACE_ACTIONS(ACT_PTR)};
#define ACT_ID(id, Name, snake, role, FIELDS) +id
_Static_assert((0 SPY_TRACE_ACTIONS(ACT_ID)) ==
                   SPY_TRACE_KIND_COUNT * (SPY_TRACE_KIND_COUNT + 1) / 2,
               "catalog wire ids must be 1..SPY_TRACE_KIND_COUNT");

#define HOOK_DESC(hook, start, end, subject)                                   \
  {#hook, &spy_kind_##start, &spy_kind_##end, #subject},
const spy__hook spy__hooks[] = {
    SPY_TRACE_HOOKS(HOOK_DESC){NULL, NULL, NULL, NULL}};

const char *spy__hook_type(const spy_trace_kind *k) {
  for (const spy__hook *h = spy__hooks; k && h->hook; h++)
    if (h->start == k || h->end == k)
      return h->hook;
  return NULL;
}

const spy_trace_kind *spy_trace_kind_find(const char *name) {
  if (!name)
    return NULL;
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++)
    if (strcmp(spy_trace_kinds[i]->name, name) == 0)
      return spy_trace_kinds[i];
  return NULL;
}
