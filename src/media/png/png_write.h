/* png_write.h — RGBA8 images as PNG files (libpng), for `spyglass snap`
 * and the recorder's raw buffer images (src/record/rec_buffers.c). In its
 * own library, spyglass_png_static, like the VP9 codec in src/media/vpx:
 * the core library needs only libc and pthreads. */
#ifndef SPY_PNG_WRITE_H
#define SPY_PNG_WRITE_H

#include <stdint.h>
#include <stdio.h>

/* Writes w x h RGBA8 pixels (rows w * 4 bytes apart, w and h >= 1) to f,
 * which stays open (the caller flushes and closes it). level: the zlib
 * level 0..9 with the SUB filter alone (fast levels: adaptive filtering
 * costs more time than it saves bytes), or -1 for libpng's defaults (its
 * default level, every filter tried). Returns 0, or -1 on a write or
 * libpng error (nothing printed; f holds a partial file). Thread-safe
 * (no shared state). */
int spy__png_write_rgba8(FILE *f, const uint8_t *rgba, uint32_t w, uint32_t h,
                         int level);

#endif
