/* catalog.c — the descriptors of every built-in record and action, derived
 * from the X-macro lists in trace_catalog.h (names, field types, struct
 * offsets), and lookups over them. */
#include <stddef.h>
#include <string.h>

#include "spyglass/trace.h"

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

#define ACT_PTR(id, Name, snake, role, FIELDS) [id] = &spy_kind_##snake,
const spy_trace_kind *const spy_trace_kinds[SPY_TRACE_KIND_COUNT + 1] = {
    SPY_TRACE_ACTIONS(ACT_PTR)};

const spy_trace_kind *spy_trace_kind_find(const char *name) {
  if (!name)
    return NULL;
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++)
    if (strcmp(spy_trace_kinds[i]->name, name) == 0)
      return spy_trace_kinds[i];
  return NULL;
}
