/* test_error.c — error codes: every code has a message and a name, and
 * unknown codes still give a usable string. */
#include "spyglass/error.h"
#include "testlib.h"

TEST(every_code_has_message_and_name) {
#define X(name, value, msg)                                                    \
  CHECK_STR(spy_strerror(value), msg);                                         \
  CHECK_STR(spy_err_name(value), #name);
  SPY_ERRNO_MAP(X)
  SPY_PROTO_MAP(X)
#undef X
}

TEST(success_and_unknown_codes) {
  CHECK_STR(spy_strerror(0), "success");
  CHECK_STR(spy_err_name(0), "OK");
  CHECK_STR(spy_strerror(-424242), "unknown error -424242");
  CHECK_STR(spy_err_name(-424242), "UNKNOWN");
  CHECK(spy_strerror(12345) != NULL);
}

TEST(protocol_codes_do_not_collide_with_errno) {
  CHECK(SPY_ETRUNCATED < -1000 && SPY_EBADSEGMENT < -1000);
  CHECK_EQ(SPY_ENOMEM, -ENOMEM);
  CHECK_EQ(SPY_ETIMEDOUT, -ETIMEDOUT);
}

TEST_MAIN(TEST_CASE(every_code_has_message_and_name),
          TEST_CASE(success_and_unknown_codes),
          TEST_CASE(protocol_codes_do_not_collide_with_errno))
