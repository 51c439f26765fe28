/* png_write.c — RGBA8 images as PNG files with libpng (png_write.h). */
#include "media/png/png_write.h"

#include <png.h>
#include <setjmp.h>

static void on_error(png_structp png, png_const_charp msg) {
  (void)msg;
  png_longjmp(png, 1);
}
static void on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

int spy__png_write_rgba8(FILE *f, const uint8_t *rgba, uint32_t w, uint32_t h,
                         int level) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL,
                                            on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return -1;
  }
  png_init_io(png, f);
  if (level >= 0) {
    png_set_compression_level(png, level > 9 ? 9 : level);
    png_set_filter(png, 0, PNG_FILTER_SUB);
  }
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (uint32_t y = 0; y < h; y++)
    png_write_row(png, (png_const_bytep)(rgba + (size_t)y * w * 4));
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return 0;
}
