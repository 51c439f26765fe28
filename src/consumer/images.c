/* images.c — the consumer state's latest image per buffer: buffer:raw
 * frames copied in, buffer:chunk frames put together from their parts and
 * decoded with the registered video codec (codec.h), waiting for a key
 * frame after a join, a gap or a decode error; one image per buffer and
 * variant (the request it answers: PIXELS says which); only the buffers
 * and variants the state's owner asked for (image_filter) (consumer.h). */
#include <stdlib.h>
#include <string.h>

#include "consumer/images.h"
#include "spyglass/codec.h"
#include "spyglass/media.h"

/* Images kept at most: SPY_BUFFERS_MAX (32) buffers x 4 variants, so a
 * recording of every subscriber's variants fits and a hostile stream of
 * names does not grow the state without bound. */
#define IMAGES_MAX 128u

static int same_name(const spy_state_image *im, const char *name,
                     uint32_t len) {
  return strlen(im->name) == len && memcmp(im->name, name, len) == 0;
}

/* The image a frame's buffer and variant go to (made on first need). */
static spy_state_image *image_for(spy_state *s, const spy_pixels *px) {
  const char *name = px->name;
  uint32_t len = px->name_len;
  for (uint32_t i = 0; i < s->n_images; i++) {
    spy_state_image *im = &s->images[i];
    if (same_name(im, name, len) && im->mode == px->variant_mode &&
        (!px->variant_mode || (im->long_edge == px->variant_long_edge &&
                               im->display == px->display)))
      return im;
  }
  if (s->n_images >= IMAGES_MAX)
    return NULL; /* counted by the caller */
  if (s->n_images == s->images_cap) {
    uint32_t cap = s->images_cap ? s->images_cap * 2 : 4;
    spy_state_image *n = realloc(s->images, cap * sizeof *n);
    if (!n)
      return NULL;
    s->images = n;
    s->images_cap = cap;
  }
  spy_state_image *im = &s->images[s->n_images++];
  memset(im, 0, sizeof *im);
  memcpy(im->name, name, len);
  im->mode = px->variant_mode;
  im->long_edge = px->variant_long_edge;
  im->display = px->display;
  im->pixel_type = px->pixel_type;
  im->waiting_key = 1;
  return im;
}

static int fit(uint8_t **p, uint32_t *cap, uint32_t need) {
  if (*cap >= need)
    return 0;
  uint8_t *n = realloc(*p, need);
  if (!n)
    return SPY_ENOMEM;
  *p = n;
  *cap = need;
  return 0;
}

static void close_decoder(spy_state_image *im) {
  const spy_video_codec_ops *ops = im->dec_ops;
  if (im->dec && ops && ops->decoder_destroy)
    ops->decoder_destroy(im->dec);
  im->dec = NULL;
  im->dec_ops = NULL;
}

/* A whole payload: raw pixels or one encoded frame. */
static int complete(spy_state *s, spy_state_image *im, const spy_pixels *px,
                    const uint8_t *data, uint32_t len, uint64_t now_ms) {
  /* Bounded before anything is allocated: a chunk says its size. */
  if (!px->width || !px->height ||
      (uint64_t)px->width * px->height * 4 > SPY_PIXELS_TOTAL_MAX)
    return SPY_EBADVALUE;
  uint32_t need = px->width * px->height * 4;
  if (px->codec == SPY_CODEC_RGBA8) {
    if (len != need)
      return SPY_EBADVALUE;
    if (fit(&im->rgba, &im->rgba_cap, need))
      return SPY_ENOMEM;
    memcpy(im->rgba, data, len);
  } else {
    im->chunks++;
    const spy_video_codec_ops *ops = spy_video_codec_get(px->codec);
    if (!ops) {
      s->undecodable++;
      return 0;
    }
    if (px->key_frame)
      im->key_frames++;
    if (im->waiting_key && !px->key_frame) {
      im->skipped++;
      return 0;
    }
    if (px->key_frame && im->dec_ops != ops)
      close_decoder(im);
    if (!im->dec) {
      if (ops->decoder_create(&im->dec) < 0 || !im->dec)
        return SPY_ENOMEM;
      im->dec_ops = ops;
    }
    if (fit(&im->rgba, &im->rgba_cap, need))
      return SPY_ENOMEM;
    int rc = ops->decode(im->dec, data, len, im->rgba, px->width, px->height);
    if (rc == SPY_EAGAIN)
      return 0;
    if (rc < 0) {
      im->decode_errors++;
      im->waiting_key = 1;
      close_decoder(im); /* start over at the next key frame */
      return 0;
    }
    im->waiting_key = 0;
  }
  im->frame = px->frame;
  im->captured_ms = px->captured_ms;
  im->width = px->width;
  im->height = px->height;
  im->pixel_type = px->pixel_type;
  im->display = px->display;
  im->codec = px->codec;
  im->updated_ms = now_ms;
  im->images++;
  return 0;
}

/* Whether a request gets this frame's variant (a frame that does not say
 * its variant matches by name). */
static int answers(const spy_buffer_request *r, const spy_pixels *px) {
  const char *n = r->name;
  uint32_t nlen = n ? (r->name_len ? r->name_len : (uint32_t)strlen(n)) : 0;
  if (!n || nlen != px->name_len || memcmp(n, px->name, nlen) != 0)
    return 0;
  return !px->variant_mode ||
         (r->mode == px->variant_mode &&
          spy_variant_long_edge(r->mode, r->long_edge) ==
              px->variant_long_edge &&
          spy_display_resolve(px->pixel_type, r->display) == px->display);
}

/* Whether this state's owner asked for the frame's buffer and variant
 * (image_filter). */
static int asked(const spy_state *s, const spy_pixels *px) {
  for (uint32_t i = 0; i < s->n_image_names; i++)
    if (answers(&s->image_names[i], px))
      return 1;
  return 0;
}

int spy_state_apply_pixels(spy_state *s, const spy_frame *f, uint64_t now_ms) {
  spy_section sec;
  spy_pixels px;
  if (!spy_frame_find_section(f, SPY_SEC_PIXELS, &sec))
    return SPY_ENOSECTION;
  int rc = spy_get_pixels(&sec, &px);
  if (rc < 0)
    return rc;
  if ((f->type == SPY_MSG_BUFFER_RAW) != (px.codec == SPY_CODEC_RGBA8))
    return SPY_EBADVALUE;
  if (s->image_filter && !asked(s, &px)) {
    s->images_ignored++; /* another subscriber's buffer or variant */
    return 0;
  }
  spy_state_image *im = image_for(s, &px);
  if (!im) {
    s->images_ignored++; /* IMAGES_MAX, or out of memory */
    return s->n_images >= IMAGES_MAX ? 0 : SPY_ENOMEM;
  }
  if (!px.part_total)
    return complete(s, im, &px, px.data, px.data_len, now_ms);
  if (px.part_offset == 0) {
    if (im->part_len && im->part_len < im->part_total)
      im->parts_lost++; /* the one before never finished */
    if (fit(&im->part, &im->part_cap, px.part_total))
      return SPY_ENOMEM;
    im->part_len = 0;
    im->part_total = px.part_total;
    im->part_frame = px.frame;
  } else if (px.part_offset != im->part_len || px.frame != im->part_frame ||
             px.part_total != im->part_total) {
    if (im->part_len) /* a part went missing: drop the payload */
      im->parts_lost++;
    im->part_len = im->part_total = 0;
    if (px.codec != SPY_CODEC_RGBA8)
      im->waiting_key = 1;
    return 0;
  }
  memcpy(im->part + im->part_len, px.data, px.data_len);
  im->part_len += px.data_len;
  if (im->part_len < im->part_total)
    return 0;
  im->part_len = im->part_total = 0;
  return complete(s, im, &px, im->part, px.part_total, now_ms);
}

void spy_state_pixels_gap(spy_state *s) {
  for (uint32_t i = 0; i < s->n_images; i++) {
    spy_state_image *im = &s->images[i];
    if (im->codec != SPY_CODEC_RGBA8 || im->dec)
      im->waiting_key = 1;
    if (im->part_len)
      im->parts_lost++;
    im->part_len = im->part_total = 0;
  }
}

const spy_state_image *spy_state_image_find(const spy_state *s,
                                            const char *name) {
  for (uint32_t i = 0; name && i < s->n_images; i++)
    if (strcmp(s->images[i].name, name) == 0)
      return &s->images[i];
  return NULL;
}

const spy_state_image *
spy_state_image_find_variant(const spy_state *s, const spy_buffer_request *r) {
  for (uint32_t i = 0; r && r->name && i < s->n_images; i++) {
    const spy_state_image *im = &s->images[i];
    spy_pixels px = {.name = im->name,
                     .name_len = (uint32_t)strlen(im->name),
                     .pixel_type = im->pixel_type,
                     .display = im->display,
                     .variant_mode = im->mode,
                     .variant_long_edge = im->long_edge};
    if (answers(r, &px))
      return im;
  }
  return NULL;
}

void spy__state_images_free(spy_state *s) {
  for (uint32_t i = 0; i < s->n_images; i++) {
    close_decoder(&s->images[i]);
    free(s->images[i].rgba);
    free(s->images[i].part);
  }
  free(s->images);
  s->images = NULL;
  s->n_images = s->images_cap = 0;
}
