/* cmd_decode.c — `spyglass decode [FILE|-]`: reads a stream of wire frames
 * and prints one JSON object per frame. On malformed input it names the
 * byte offset and the reason on stderr and exits 2. Memory use is bounded
 * by SPY_FRAME_MAX whatever the input claims. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "frame_json.h"
#include "opts.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: spyglass decode [FILE|-]\n\n"
          "Reads wire frames back to back from FILE (or standard input) and\n"
          "prints each as one JSON object per line: type, timestamp, sequence\n"
          "and every section decoded.\n\n"
          "exit codes: 0 all frames decoded, 1 FILE cannot be read,\n"
          "            2 malformed input (offset and reason on stderr)\n");
}

/* Reads exactly n bytes unless the stream ends; returns bytes read. */
static size_t read_full(FILE *in, void *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    size_t r = fread((char *)p + got, 1, n - got, in);
    if (r == 0)
      break;
    got += r;
  }
  return got;
}

static int malformed(size_t off, int err, const char *what) {
  fprintf(stderr, "spyglass decode: malformed input at byte %zu: %s (%s)%s%s\n",
          off, spy_strerror(err), spy_err_name(err), what ? ": " : "",
          what ? what : "");
  return EXIT_USAGE;
}

int cmd_decode(int argc, char **argv) {
  const char *path = "-";
  int rc = cli_parse("decode", argc, argv, NULL, 0, &path, 1, NULL, help);
  if (rc)
    return rc == 1 ? EXIT_OK : EXIT_USAGE;
  FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  struct stat st;
  if (in && fstat(fileno(in), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(in);
    in = NULL;
    errno = EISDIR;
  }
  if (!in) {
    fprintf(stderr, "spyglass decode: cannot open %s: %s\n", path,
            strerror(errno));
    return EXIT_FAIL;
  }
  size_t cap = 64 * 1024, off = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    fprintf(stderr, "spyglass decode: out of memory\n");
    if (in != stdin)
      fclose(in);
    return EXIT_FAIL;
  }
  json_out j;
  char *text = NULL;
  size_t text_len = 0;
  for (;;) {
    size_t got = read_full(in, buf, SPY_FRAME_HEADER_BYTES);
    if (got == 0)
      break;
    if (got < SPY_FRAME_HEADER_BYTES) {
      rc = malformed(off + got, SPY_ETRUNCATED, "stream ends inside a header");
      break;
    }
    int len = spy_frame_peek_len(buf, got);
    if (len < 0) {
      rc = malformed(off, len, "frame header");
      break;
    }
    if ((size_t)len > cap) {
      uint8_t *nb = realloc(buf, (size_t)len); /* ≤ SPY_FRAME_MAX */
      if (!nb) {
        fprintf(stderr, "spyglass decode: out of memory\n");
        rc = EXIT_FAIL;
        break;
      }
      buf = nb;
      cap = (size_t)len;
    }
    size_t body = read_full(in, buf + got, (size_t)len - got);
    if (body < (size_t)len - got) {
      rc = malformed(off + got + body, SPY_ETRUNCATED,
                     "stream ends inside a frame");
      break;
    }
    spy_frame f;
    size_t bad = 0;
    int err = spy_frame_decode(buf, (size_t)len, &f, &bad);
    if (err < 0) {
      rc = malformed(off + bad, err, NULL);
      break;
    }
    /* Render into memory first so a bad section prints nothing partial. */
    FILE *mem = open_memstream(&text, &text_len);
    if (!mem) {
      rc = EXIT_FAIL;
      break;
    }
    jw_init(&j, mem);
    err = frame_to_json(&j, &f, off, &bad);
    fclose(mem);
    if (err < 0) {
      rc = malformed(off + bad, err, "section");
      break;
    }
    fwrite(text, 1, text_len, stdout);
    fputc('\n', stdout);
    free(text);
    text = NULL;
    off += (size_t)len;
  }
  if (rc == EXIT_OK && ferror(in)) {
    fprintf(stderr, "spyglass decode: cannot read %s: %s\n", path,
            strerror(errno));
    rc = EXIT_FAIL;
  }
  free(text);
  free(buf);
  if (in != stdin)
    fclose(in);
  if (fflush(stdout) != 0 && rc == EXIT_OK)
    rc = EXIT_FAIL;
  return rc;
}
