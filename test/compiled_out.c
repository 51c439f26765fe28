/* compiled_out.c — built without SPY_ENABLE: every SPY_* macro must expand
 * to nothing, so calling them on a NULL provider is harmless, and the
 * handle types still compile. */
#undef SPY_ENABLE
#include "spyglass/provider.h"

int spy_test_compiled_out_calls(void);

int spy_test_compiled_out_calls(void) {
  spy_provider *p = NULL;
  spy_provider_desc desc = {.name = "types still valid"};
  int n = 0;
  (void)p;
  (void)desc;
  SPY_FRAME_BEGIN(p), n++;
  SPY_FRAME_END(p), n++;
  SPY_FRAME_SKIP(p, SPY_SKIP_IDLE), n++;
  SPY_COUNTER_SET(p, SPY_COUNTER_DRAWS, 1), n++;
  SPY_COUNTER_ADD(p, SPY_COUNTER_DRAWS, 1), n++;
  SPY_GPU_ISSUED(p, 1), n++;
  SPY_GPU_RESOLVED(p, 1, 2.0), n++;
  SPY_VALUE_F64(p, "x", 1.0), n++;
  SPY_VALUE_I64(p, "x", 1), n++;
  SPY_VALUE_BOOL(p, "x", 1), n++;
  SPY_VALUE_STR(p, "x", "y"), n++;
  return n;
}
