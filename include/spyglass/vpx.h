/* vpx.h — libspyglass_vpx: VP9 (libvpx) behind codec.h's table. Link it
 * and call spy_vpx_register() once at start to stream buffers as VP9 and
 * decode them in consumers. Built with the CMake option SPY_WITH_VPX. */
#ifndef SPYGLASS_VPX_H
#define SPYGLASS_VPX_H

#include "spyglass/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers the VP9 codec (spy_video_codec_register). Returns 0. */
int spy_vpx_register(void);
/* The table itself (for tests that register and unregister it). */
const spy_video_codec_ops *spy_vpx_ops(void);

#ifdef __cplusplus
}
#endif
#endif
