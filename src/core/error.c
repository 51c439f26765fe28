/* error.c — spy_strerror() and spy_err_name(), generated from the X-macro
 * tables in include/spyglass/error.h so the two can never disagree. */
#include "spyglass/error.h"

#include <stdio.h>

const char *spy_strerror(int err) {
  static _Thread_local char unknown[48];
  switch (err) {
  case 0: return "success";
#define SPY_ERR_CASE(name, value, msg)                                         \
  case value: return msg;
    SPY_ERRNO_MAP(SPY_ERR_CASE)
    SPY_PROTO_MAP(SPY_ERR_CASE)
#undef SPY_ERR_CASE
  default:
    snprintf(unknown, sizeof unknown, "unknown error %d", err);
    return unknown;
  }
}

const char *spy_err_name(int err) {
  switch (err) {
  case 0: return "OK";
#define SPY_ERR_CASE(name, value, msg)                                         \
  case value: return #name;
    SPY_ERRNO_MAP(SPY_ERR_CASE)
    SPY_PROTO_MAP(SPY_ERR_CASE)
#undef SPY_ERR_CASE
  default: return "UNKNOWN";
  }
}
