/* cmd_snap.c — `spyglass snap [ID|NAME] BUFFER -o out.png`: subscribes to
 * one buffer of a live provider, waits for its first image and writes it
 * as a PNG (libpng), display-ready RGBA8 as the provider converted it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "media/png/png_write.h"
#include "opts.h"
#include "spyglass/consumer.h"
#include "spyglass/media.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: spyglass snap [ID|NAME] BUFFER -o OUT.png [--mode M]\n"
          "                     [--long-edge N] [--stream] [--timeout MS]\n"
          "                     [--dir DIR]\n\n"
          "Writes the next image of a provider's named buffer as a PNG.\n"
          "ID|NAME picks the provider (default: the first user provider).\n\n"
          "  -o, --out F     the PNG to write\n"
          "  --mode M        display mode: default, colors, normalize, mono,\n"
          "                  signed, alpha\n"
          "  --long-edge N   scale so the longer side is N px (1..16384;\n"
          "                  default: full size)\n"
          "  --stream        ask for the VP9 stream (lossy) instead of raw\n"
          "  --timeout MS    how long to wait for the image (default 10000)\n"
          "  --dir DIR       runtime directory\n\n"
          "exit codes: 0 written, 1 no image in time or the file cannot be\n"
          "            written, 2 bad usage\n");
}

/* Writes w x h RGBA8 to path. 0, or -1 with errno-style message printed. */
static int write_png(const char *path, const uint8_t *rgba, uint32_t w,
                     uint32_t h) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return -1;
  }
  if (spy__png_write_rgba8(f, rgba, w, h, -1) < 0) {
    fclose(f);
    fprintf(stderr, "spyglass snap: cannot write %s\n", path);
    return -1;
  }
  if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

int cmd_snap(int argc, char **argv) {
  const char *out = NULL, *mode = NULL, *dir = NULL;
  int long_edge = 0, stream = 0, timeout_ms = 10000;
  const cli_opt opts[] = {
      {"--out", CLI_STR, &out, 0, 0, 0, "a file name"},
      {"-o", CLI_STR, &out, 0, 0, 0, "a file name"},
      {"--mode", CLI_STR, &mode, 0, 0, 0, "a display mode"},
      {"--long-edge", CLI_INT, &long_edge, 1, 16384, 0, "a number of pixels"},
      {"--stream", CLI_FLAG, &stream, 0, 0, 0, NULL},
      {"--timeout", CLI_INT, &timeout_ms, 0, 600000, 0,
       "a number of milliseconds"},
      {"--dir", CLI_STR, &dir, 0, 0, 0, "a directory"},
  };
  const char *pos[2];
  int npos = 0;
  int rc = cli_parse("snap", argc, argv, opts, sizeof opts / sizeof opts[0],
                     pos, 2, &npos, help);
  if (rc)
    return rc == 1 ? EXIT_OK : EXIT_USAGE;
  if (npos < 1 || !out) {
    fprintf(stderr, "spyglass snap: wants a BUFFER name and -o OUT.png\n");
    return EXIT_USAGE;
  }
  int display = mode ? spy_display_parse(mode) : 0;
  if (display < 0) {
    fprintf(stderr,
            "spyglass snap: --mode wants default, colors, normalize, mono, "
            "signed or alpha, not '%s'\n",
            mode);
    return EXIT_USAGE;
  }
  const char *buffer = pos[npos - 1];
  if (strlen(buffer) > SPY_KEY_MAX) {
    fprintf(stderr, "spyglass snap: buffer name longer than %u bytes\n",
            SPY_KEY_MAX);
    return EXIT_USAGE;
  }
  spy_buffer_request req = {
      .name = buffer,
      .mode = (uint8_t)(stream ? SPY_BUFFER_STREAM : SPY_BUFFER_THUMBNAIL),
      .long_edge = (uint16_t)(long_edge ? long_edge
                              : stream  ? 0
                                        : 16384),
      .display = (uint8_t)display};
  spy_consumer_desc cd = {.want = npos == 2 ? pos[0] : NULL,
                          .dir = dir,
                          .features = SPY_FEAT_BUFFERS,
                          .no_clock_sync = 1,
                          .buffers = &req,
                          .n_buffers = 1};
  spy_consumer *c;
  rc = spy_consumer_create(&c, &cd);
  if (rc < 0) {
    fprintf(stderr, "spyglass snap: cannot open the bus: %s\n",
            spy_strerror(rc));
    return EXIT_FAIL;
  }
  const spy_state_image *im = NULL;
  int waited = 0, known = 0;
  while (waited <= timeout_ms) {
    spy_consumer_poll(c, 50);
    waited += 50;
    const spy_state *s = spy_consumer_state(c);
    known = known || spy_state_find(&s->buffers, buffer) != NULL;
    im = spy_state_image_find(s, buffer);
    if (im && im->images && im->rgba)
      break;
    im = NULL;
  }
  int code = EXIT_FAIL;
  if (!im) {
    const spy_state *s = spy_consumer_state(c);
    if (s->conn != SPY_CONN_CONNECTED)
      fprintf(stderr, "spyglass snap: no provider%s%s answered in %d ms\n",
              cd.want ? " " : "", cd.want ? cd.want : "", timeout_ms);
    else if (!known)
      fprintf(stderr,
              "spyglass snap: the provider has no buffer named '%s' (or "
              "sent no image of it in %d ms)\n",
              buffer, timeout_ms);
    else
      fprintf(stderr, "spyglass snap: no image of '%s' arrived in %d ms\n",
              buffer, timeout_ms);
  } else if (write_png(out, im->rgba, im->width, im->height) == 0) {
    printf("%s: %ux%u %s (%s, %s), frame %llu\n", out, im->width, im->height,
           buffer,
           spy_pixel_type_name(im->pixel_type)
               ? spy_pixel_type_name(im->pixel_type)
               : "?",
           spy_display_name(im->display) ? spy_display_name(im->display) : "?",
           (unsigned long long)im->frame);
    code = EXIT_OK;
  }
  spy_consumer_destroy(c);
  return code;
}
