/* vp9.c — libspyglass_vpx: VP9 encode and decode with libvpx behind the
 * codec table of codec.h.
 *
 * Encoder: realtime, one pass, no lag (g_lag_in_frames 0: every encode
 * returns its own frame), constant quality (VPX_Q), one thread; the speed
 * is picked from the size (faster presets for larger images, so 1280x720
 * keeps up on one core). Key frames only when the caller forces them (the
 * transport does: first frame, resize, new subscriber, every 2 s).
 * Colours: RGBA8 -> I420 with full-range BT.601 (signalled in the stream,
 * so a browser decoder maps it back the same way); alpha is not carried.
 * Decoder: I420 back to RGBA8 (alpha 255).
 */
#include <stdlib.h>
#include <string.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vpx_encoder.h>

#include "spyglass/vpx.h"
#include "spyglass/wire.h"

#define CQ_LEVEL 18 /* about 38-42 dB on rendered images */

typedef struct enc {
  vpx_codec_ctx_t ctx;
  vpx_image_t img;
  uint32_t w, h;
  int64_t pts, step;
} enc;

static uint8_t clamp8(int v) {
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Full-range BT.601, 16-bit fixed point. */
static void rgba_to_i420(const uint8_t *rgba, uint32_t w, uint32_t h,
                         vpx_image_t *img) {
  uint8_t *py = img->planes[0], *pu = img->planes[1], *pv = img->planes[2];
  int sy = img->stride[0], su = img->stride[1], sv = img->stride[2];
  for (uint32_t y = 0; y < h; y++) {
    const uint8_t *s = rgba + (size_t)y * w * 4;
    uint8_t *d = py + (size_t)y * (size_t)sy;
    for (uint32_t x = 0; x < w; x++, s += 4)
      d[x] =
          (uint8_t)((19595 * s[0] + 38470 * s[1] + 7471 * s[2] + 32768) >> 16);
  }
  for (uint32_t y = 0; y < (h + 1) / 2; y++)
    for (uint32_t x = 0; x < (w + 1) / 2; x++) {
      int r = 0, g = 0, b = 0, n = 0;
      for (uint32_t yy = 2 * y; yy < 2 * y + 2 && yy < h; yy++)
        for (uint32_t xx = 2 * x; xx < 2 * x + 2 && xx < w; xx++, n++) {
          const uint8_t *s = rgba + ((size_t)yy * w + xx) * 4;
          r += s[0], g += s[1], b += s[2];
        }
      r /= n, g /= n, b /= n;
      pu[(size_t)y * (size_t)su + x] =
          clamp8(128 + ((-11059 * r - 21709 * g + 32768 * b + 32768) >> 16));
      pv[(size_t)y * (size_t)sv + x] =
          clamp8(128 + ((32768 * r - 27439 * g - 5329 * b + 32768) >> 16));
    }
}

static void i420_to_rgba(const vpx_image_t *img, uint8_t *rgba, uint32_t w,
                         uint32_t h) {
  for (uint32_t y = 0; y < h; y++) {
    const uint8_t *py = img->planes[0] + (size_t)y * (size_t)img->stride[0];
    const uint8_t *pu = img->planes[1] + (size_t)(y / 2) * img->stride[1];
    const uint8_t *pv = img->planes[2] + (size_t)(y / 2) * img->stride[2];
    uint8_t *d = rgba + (size_t)y * w * 4;
    for (uint32_t x = 0; x < w; x++, d += 4) {
      int Y = py[x] << 16, u = pu[x / 2] - 128, v = pv[x / 2] - 128;
      d[0] = clamp8((Y + 91881 * v + 32768) >> 16);
      d[1] = clamp8((Y - 22554 * u - 46802 * v + 32768) >> 16);
      d[2] = clamp8((Y + 116130 * u + 32768) >> 16);
      d[3] = 255;
    }
  }
}

static int speed_for(uint32_t w, uint32_t h) {
  uint64_t px = (uint64_t)w * h;
  return px >= 1280u * 720u ? 8 : px >= 640u * 360u ? 7 : 6;
}

static void enc_destroy(void *p) {
  enc *e = p;
  if (!e)
    return;
  vpx_codec_destroy(&e->ctx);
  vpx_img_free(&e->img);
  free(e);
}

static int enc_create(void **out, uint32_t w, uint32_t h, uint32_t fps) {
  *out = NULL;
  if (!w || !h || w > 16384 || h > 16384)
    return SPY_EINVAL;
  enc *e = calloc(1, sizeof *e);
  if (!e)
    return SPY_ENOMEM;
  if (!vpx_img_alloc(&e->img, VPX_IMG_FMT_I420, w, h, 16)) {
    free(e);
    return SPY_ENOMEM;
  }
  vpx_codec_enc_cfg_t cfg;
  if (vpx_codec_enc_config_default(vpx_codec_vp9_cx(), &cfg, 0)) {
    vpx_img_free(&e->img);
    free(e);
    return SPY_EIO;
  }
  cfg.g_w = w;
  cfg.g_h = h;
  cfg.g_timebase.num = 1;
  cfg.g_timebase.den = 1000; /* ms */
  cfg.g_lag_in_frames = 0;
  cfg.g_pass = VPX_RC_ONE_PASS;
  cfg.g_threads = 1;
  cfg.g_error_resilient = 0;
  cfg.rc_end_usage = VPX_Q;
  cfg.rc_min_quantizer = 4;
  cfg.rc_max_quantizer = 40;
  cfg.kf_mode = VPX_KF_DISABLED; /* the caller forces key frames */
  if (vpx_codec_enc_init(&e->ctx, vpx_codec_vp9_cx(), &cfg, 0)) {
    vpx_img_free(&e->img);
    free(e);
    return SPY_EIO;
  }
  vpx_codec_control(&e->ctx, VP8E_SET_CPUUSED, speed_for(w, h));
  vpx_codec_control(&e->ctx, VP8E_SET_CQ_LEVEL, CQ_LEVEL);
  vpx_codec_control(&e->ctx, VP9E_SET_AQ_MODE, 0);
  vpx_codec_control(&e->ctx, VP9E_SET_COLOR_SPACE, VPX_CS_BT_601);
  vpx_codec_control(&e->ctx, VP9E_SET_COLOR_RANGE, VPX_CR_FULL_RANGE);
  e->w = w;
  e->h = h;
  e->step = fps ? 1000 / fps : 250;
  if (e->step < 1)
    e->step = 1;
  *out = e;
  return 0;
}

static int enc_encode(void *p, const uint8_t *rgba, int force_key, uint8_t *out,
                      size_t cap, size_t *len, int *key) {
  enc *e = p;
  *len = 0;
  *key = 0;
  rgba_to_i420(rgba, e->w, e->h, &e->img);
  if (vpx_codec_encode(&e->ctx, &e->img, e->pts, (unsigned long)e->step,
                       force_key ? VPX_EFLAG_FORCE_KF : 0, VPX_DL_REALTIME))
    return SPY_EIO;
  e->pts += e->step;
  vpx_codec_iter_t it = NULL;
  const vpx_codec_cx_pkt_t *pkt;
  int rc = 0;
  while ((pkt = vpx_codec_get_cx_data(&e->ctx, &it))) {
    if (pkt->kind != VPX_CODEC_CX_FRAME_PKT)
      continue;
    if (*len + pkt->data.frame.sz > cap) {
      rc = SPY_ENOBUFS;
      continue;
    }
    memcpy(out + *len, pkt->data.frame.buf, pkt->data.frame.sz);
    *len += pkt->data.frame.sz;
    if (pkt->data.frame.flags & VPX_FRAME_IS_KEY)
      *key = 1;
  }
  return rc;
}

static int dec_create(void **out) {
  vpx_codec_ctx_t *d = calloc(1, sizeof *d);
  *out = NULL;
  if (!d)
    return SPY_ENOMEM;
  vpx_codec_dec_cfg_t cfg = {.threads = 1};
  if (vpx_codec_dec_init(d, vpx_codec_vp9_dx(), &cfg, 0)) {
    free(d);
    return SPY_EIO;
  }
  *out = d;
  return 0;
}

static int dec_decode(void *p, const uint8_t *data, size_t len, uint8_t *rgba,
                      uint32_t w, uint32_t h) {
  vpx_codec_ctx_t *d = p;
  if (!len || len > SPY_PIXELS_TOTAL_MAX ||
      vpx_codec_decode(d, data, (unsigned)len, NULL, 0))
    return SPY_EBADVALUE;
  vpx_codec_iter_t it = NULL;
  vpx_image_t *img, *last = NULL;
  while ((img = vpx_codec_get_frame(d, &it)))
    last = img;
  if (!last)
    return SPY_EAGAIN;
  if (last->fmt != VPX_IMG_FMT_I420 || last->d_w != w || last->d_h != h)
    return SPY_EBADVALUE;
  i420_to_rgba(last, rgba, w, h);
  return 0;
}

static void dec_destroy(void *p) {
  if (!p)
    return;
  vpx_codec_destroy(p);
  free(p);
}

static const spy_video_codec_ops vp9_ops = {
    .name = "vp9",
    .codec = SPY_CODEC_VP9,
    .codec_string = "vp09.00.10.08",
    .encoder_create = enc_create,
    .encode = enc_encode,
    .encoder_destroy = enc_destroy,
    .decoder_create = dec_create,
    .decode = dec_decode,
    .decoder_destroy = dec_destroy,
};

const spy_video_codec_ops *spy_vpx_ops(void) { return &vp9_ops; }

int spy_vpx_register(void) { return spy_video_codec_register(&vp9_ops); }
