/* rec_buffers.c — a recording's buffers (rec_buffers.h): the provider's
 * buffer:chunk frames (VP9) appended to an IVF file per buffer and size,
 * buffer:raw frames (display-ready RGBA8, full size or thumbnail) written
 * as one PNG each (libpng), and a chunk row for each.
 *
 * Files. In cfg.dir (`<db>.buffers/` beside a SQLite file unless
 * --buffers-dir says otherwise): `NAME-WxH.ivf`, `NAME-WxH-fFRAME.png`,
 * NAME with anything but [A-Za-z0-9._-] replaced by '_'. A file another
 * source of the same recording already made gets `-pUPID` before its
 * extension (two providers with a buffer of the same name). Files are
 * opened O_EXCL: a recorder never writes into a file it did not make.
 *
 * Durability. IVF chunks are written with one writev each (no stdio
 * buffer) and the header's frame count is rewritten after every chunk,
 * so a chunk's row, which is committed after its bytes were written,
 * always points at bytes in the file and a recorder killed with SIGKILL
 * leaves an IVF file that decodes with the count it says. A PNG's row
 * follows its fclose.
 *
 * Why the recorder's own IVF writer: the container is a 32-byte header
 * and a 12-byte header per frame (what vpxdec and ffprobe read); a library
 * for it would be more code than the format. */
#include "record/rec_buffers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "media/png/png_write.h"
#include "record/rec.h"
#include "spyglass/media.h"

#define MAX_FILES 64   /* IVF files open per provider (buffer x size) */
#define MAX_PARTS 16   /* payloads being put together at once */
#define NAME_CHARS 120 /* of a buffer name in a file name */
#define IVF_HEADER 32u
#define IVF_FRAME_HEADER 12u

typedef struct ivf_file {
  char buffer[SPY_KEY_MAX + 1];
  uint32_t w, h;
  int fd;
  uint64_t off;   /* bytes written */
  uint32_t count; /* frames in it */
  uint64_t t0_ms; /* captured_ms of its first chunk */
  uint64_t pts;   /* the last chunk's timestamp (ms from t0) */
  char path[64 + 2 * NAME_CHARS];
} ivf_file;

/* A payload arriving in parts (one per buffer at a time). */
typedef struct part_buf {
  char buffer[SPY_KEY_MAX + 1];
  uint64_t frame;
  uint32_t len, total, cap;
  uint8_t *data;
} part_buf;

/* A stream waiting for its next key frame (after a gap, at its start). */
typedef struct wait_key {
  char buffer[SPY_KEY_MAX + 1];
  int waiting;
} wait_key;

struct rec_bufs {
  const rec_bufs_cfg *cfg;
  ivf_file files[MAX_FILES];
  uint32_t nfiles;
  part_buf parts[MAX_PARTS];
  wait_key keys[MAX_FILES];
  uint32_t nkeys;
  uint64_t frames_lost_seen;
  int dir_made;
  int64_t upid;
  /* read by the recorder's stats from another thread */
  _Atomic uint64_t chunks, bytes, lost;
  int reported; /* one message on stderr per failing kind */
};

/* ---- configuration ------------------------------------------------------ */
/* out = a b c, or 1 when that does not fit (with room left for the file
 * names made inside it). */
static int join(char *out, size_t cap, const char *a, const char *b,
                const char *c) {
  size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
  if (la + lb + lc + 2 * NAME_CHARS + 64 >= cap)
    return 1;
  memcpy(out, a, la);
  memcpy(out + la, b, lb);
  memcpy(out + la + lb, c, lc + 1);
  return 0;
}

int spy__rec_bufs_cfg(rec_bufs_cfg *cfg, const spy_recorder_desc *d,
                      const char *sqlite_db, int64_t rec_id) {
  memset(cfg, 0, sizeof *cfg);
  if (!d->buffers || !*d->buffers)
    return 1;
  switch (d->buffer_mode) {
  case 0:
  case SPY_RECORD_BUFFERS_STREAM:
    cfg->wire_mode = SPY_BUFFER_STREAM;
    cfg->long_edge = 0; /* full size */
    cfg->mode_name = "stream";
    break;
  case SPY_RECORD_BUFFERS_RAW:
    cfg->wire_mode = SPY_BUFFER_THUMBNAIL;
    cfg->long_edge = SPY_IMAGE_MAX_EDGE; /* never smaller than the source */
    cfg->mode_name = "raw";
    break;
  case SPY_RECORD_BUFFERS_THUMB:
    cfg->wire_mode = SPY_BUFFER_THUMBNAIL;
    cfg->long_edge =
        (uint16_t)(d->buffer_long_edge ? d->buffer_long_edge : 256);
    cfg->mode_name = "thumb";
    break;
  default:
    fprintf(stderr, "spyglass record: unknown buffer mode %d\n",
            d->buffer_mode);
    return SPY_EINVAL;
  }
  if (d->buffer_long_edge > SPY_IMAGE_MAX_EDGE) {
    fprintf(stderr, "spyglass record: a long edge of at most %u px\n",
            SPY_IMAGE_MAX_EDGE);
    return SPY_EINVAL;
  }
  if (strcmp(d->buffers, "all") == 0) {
    cfg->all = 1;
  } else {
    uint32_t n = 1;
    for (const char *p = d->buffers; *p; p++)
      n += *p == ',';
    if (n > SPY_SUB_MAX_NAMES) {
      fprintf(stderr, "spyglass record: more than %u buffer names\n",
              SPY_SUB_MAX_NAMES);
      return SPY_EINVAL;
    }
    cfg->req = calloc(n, sizeof *cfg->req);
    if (!cfg->req)
      return SPY_ENOMEM;
    const char *p = d->buffers;
    while (*p) {
      size_t len = strcspn(p, ",");
      if (len == 0 || len > SPY_KEY_MAX) {
        fprintf(stderr,
                "spyglass record: --buffers: %s buffer name in '%s' (1 to "
                "%u bytes each, comma separated)\n",
                len ? "a too long" : "an empty", d->buffers, SPY_KEY_MAX);
        spy__rec_bufs_cfg_free(cfg);
        return SPY_EINVAL;
      }
      char *name = strndup(p, len);
      if (!name) {
        spy__rec_bufs_cfg_free(cfg);
        return SPY_ENOMEM;
      }
      cfg->req[cfg->n_req++] = (spy_buffer_request){
          .name = name, .mode = cfg->wire_mode, .long_edge = cfg->long_edge};
      p += len;
      if (*p == ',' && !*++p) {
        fprintf(stderr, "spyglass record: --buffers: '%s' ends with a comma\n",
                d->buffers);
        spy__rec_bufs_cfg_free(cfg);
        return SPY_EINVAL;
      }
    }
  }
  /* Where the files go, and how chunk.path names them: beside a SQLite
   * file by default, as a path relative to the file's directory, so the
   * two move together; otherwise absolute. */
  char cwd[2048] = "";
  const char *dir = d->buffers_dir, *base = NULL;
  char pgdir[64];
  if (!dir || !*dir) {
    if (sqlite_db) {
      base = strrchr(sqlite_db, '/');
      base = base ? base + 1 : sqlite_db;
    } else {
      snprintf(pgdir, sizeof pgdir, "recording-%lld.buffers",
               (long long)rec_id);
      dir = pgdir;
    }
  }
  int bad;
  if (base) {
    bad = join(cfg->dir, sizeof cfg->dir, sqlite_db, "", ".buffers") ||
          join(cfg->rel, sizeof cfg->rel, base, "", ".buffers");
  } else if (dir[0] == '/') {
    bad = join(cfg->dir, sizeof cfg->dir, dir, "", "") ||
          join(cfg->rel, sizeof cfg->rel, dir, "", "");
  } else {
    if (!getcwd(cwd, sizeof cwd)) {
      fprintf(stderr, "spyglass record: getcwd: %s\n", strerror(errno));
      spy__rec_bufs_cfg_free(cfg);
      return SPY_EIO;
    }
    bad = join(cfg->dir, sizeof cfg->dir, dir, "", "") ||
          join(cfg->rel, sizeof cfg->rel, cwd, "/", dir);
  }
  if (bad) {
    fprintf(stderr, "spyglass record: the buffers directory's name is too "
                    "long\n");
    spy__rec_bufs_cfg_free(cfg);
    return SPY_EINVAL;
  }
  return 0;
}

void spy__rec_bufs_cfg_free(rec_bufs_cfg *cfg) {
  for (uint32_t i = 0; cfg->req && i < cfg->n_req; i++)
    free((char *)cfg->req[i].name);
  free(cfg->req);
  cfg->req = NULL;
  cfg->n_req = 0;
}

int spy__rec_bufs_wanted(const rec_bufs_cfg *cfg, const spy_state *st,
                         spy_buffer_request **out) {
  *out = NULL;
  uint32_t n =
      st->buffers.n < SPY_SUB_MAX_NAMES ? st->buffers.n : SPY_SUB_MAX_NAMES;
  if (!n)
    return 0;
  spy_buffer_request *r = calloc(n, sizeof *r);
  if (!r)
    return -1;
  for (uint32_t i = 0; i < n; i++)
    r[i] = (spy_buffer_request){.name = st->buffers.e[i].name,
                                .mode = cfg->wire_mode,
                                .long_edge = cfg->long_edge};
  *out = r;
  return (int)n;
}

/* ---- per provider ---------------------------------------------------------
 */
rec_bufs *spy__rec_bufs_new(const rec_bufs_cfg *cfg) {
  rec_bufs *b = calloc(1, sizeof *b);
  if (b)
    b->cfg = cfg;
  return b;
}

static void fail_once(rec_bufs *b, int kind, const char *what,
                      const char *path) {
  if (b->reported & kind)
    return;
  b->reported |= kind;
  fprintf(stderr,
          "spyglass record: buffers: %s %s: %s (counted as lost "
          "from now on)\n",
          what, path, strerror(errno));
}

static void wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void wr16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

/* The buffer's name as a file name part. */
static void safe_name(char *out, const char *name, size_t len) {
  size_t k = 0;
  for (size_t i = 0; i < len && k < NAME_CHARS; i++) {
    char c = name[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '-' || c == '_' ||
             (c == '.' && k > 0);
    out[k++] = ok ? c : '_';
  }
  out[k] = 0;
}

/* Makes cfg.dir/<stem><ext> (O_EXCL), or with -pUPID if another source
 * made that one. Returns the fd (path in out) or -1. */
static int make_file(rec_bufs *b, const char *stem, const char *ext, char *out,
                     size_t cap) {
  if (!b->dir_made) {
    if (mkdir(b->cfg->dir, 0777) < 0 && errno != EEXIST) {
      fail_once(b, 1, "cannot make the directory", b->cfg->dir);
      return -1;
    }
    b->dir_made = 1;
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    char full[sizeof b->cfg->dir + 2 * NAME_CHARS + 64];
    if (attempt == 0)
      snprintf(out, cap, "%s%s", stem, ext);
    else
      snprintf(out, cap, "%s-p%lld%s", stem, (long long)b->upid, ext);
    snprintf(full, sizeof full, "%s/%s", b->cfg->dir, out);
    int fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0)
      return fd;
    if (errno != EEXIST || attempt == 1) {
      fail_once(b, 2, "cannot create", full);
      return -1;
    }
  }
  return -1;
}

static void ivf_close(ivf_file *f) {
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
}

static ivf_file *ivf_for(rec_bufs *b, const spy_pixels *px) {
  for (uint32_t i = 0; i < b->nfiles; i++) {
    ivf_file *f = &b->files[i];
    if (f->w == px->width && f->h == px->height &&
        strlen(f->buffer) == px->name_len &&
        memcmp(f->buffer, px->name, px->name_len) == 0)
      return f->fd >= 0 ? f : NULL;
  }
  if (b->nfiles == MAX_FILES)
    return NULL;
  if (px->width > 65535 || px->height > 65535)
    return NULL; /* not in IVF's 16-bit sizes (the wire allows 16384) */
  ivf_file *f = &b->files[b->nfiles++];
  memset(f, 0, sizeof *f);
  memcpy(f->buffer, px->name, px->name_len);
  f->w = px->width;
  f->h = px->height;
  char stem[NAME_CHARS + 40];
  char safe[NAME_CHARS + 1];
  safe_name(safe, px->name, px->name_len);
  snprintf(stem, sizeof stem, "%s-%ux%u", safe, px->width, px->height);
  f->fd = make_file(b, stem, ".ivf", f->path, sizeof f->path);
  if (f->fd < 0)
    return NULL;
  uint8_t h[IVF_HEADER] = {'D', 'K', 'I', 'F'};
  wr16(h + 4, 0);
  wr16(h + 6, IVF_HEADER);
  memcpy(h + 8, "VP90", 4);
  wr16(h + 12, (uint16_t)px->width);
  wr16(h + 14, (uint16_t)px->height);
  wr32(h + 16, 1000); /* time base 1/1000 s: pts in ms */
  wr32(h + 20, 1);
  wr32(h + 24, 0); /* frame count: rewritten after each chunk */
  if (write(f->fd, h, sizeof h) != (ssize_t)sizeof h) {
    fail_once(b, 4, "cannot write", f->path);
    ivf_close(f);
    return NULL;
  }
  f->off = IVF_HEADER;
  f->t0_ms = px->captured_ms;
  return f;
}

static int *waiting_for(rec_bufs *b, const char *name, uint32_t len) {
  for (uint32_t i = 0; i < b->nkeys; i++)
    if (strlen(b->keys[i].buffer) == len &&
        memcmp(b->keys[i].buffer, name, len) == 0)
      return &b->keys[i].waiting;
  if (b->nkeys == MAX_FILES)
    return NULL;
  wait_key *k = &b->keys[b->nkeys++];
  memset(k, 0, sizeof *k);
  memcpy(k->buffer, name, len);
  k->waiting = 1; /* a stream is recorded from a key frame */
  return &k->waiting;
}

/* Whether this recorder asked for the buffer (the channel also carries
 * other subscribers' buffers). */
static int asked(const rec_bufs *b, const spy_state *st, const spy_pixels *px) {
  const rec_bufs_cfg *c = b->cfg;
  int named = c->all;
  for (uint32_t i = 0; !named && i < c->n_req; i++)
    named = strlen(c->req[i].name) == px->name_len &&
            memcmp(c->req[i].name, px->name, px->name_len) == 0;
  if (!named)
    return 0;
  /* what this recorder's request makes (another subscriber may ask for
   * the same buffer in another mode or at another size): VP9 chunks for
   * a stream, RGBA8 images of the requested size otherwise; RGBA8 in
   * stream mode only from a provider that cannot encode (its metadata
   * says so) */
  int stream = c->wire_mode == SPY_BUFFER_STREAM;
  if (px->codec == SPY_CODEC_VP9)
    return stream;
  char name[SPY_KEY_MAX + 1];
  memcpy(name, px->name, px->name_len);
  name[px->name_len] = 0;
  const spy_state_entry *e = spy_state_find(&st->buffers, name);
  spy_buffer_meta m;
  if (!e || !e->has_value || spy_buffer_meta_decode(&e->value, &m) < 0)
    return !stream; /* size unknown yet: keep a thumbnail */
  if (stream)
    return m.mode == SPY_BUFFER_STREAM && m.codec == SPY_CODEC_RGBA8;
  uint32_t tw, th;
  spy_thumbnail_size(m.width, m.height, c->long_edge, &tw, &th);
  return tw == px->width && th == px->height;
}

static void chunk_row(rec_bufs *b, const spy_pixels *px, int64_t ts,
                      const char *path, uint64_t off, uint64_t len,
                      rec_emit_fn emit, void *ctx) {
  rec_row r;
  memset(&r, 0, sizeof r);
  r.stmt = S_CHUNK;
  cint(&r, b->upid);
  cint(&r, ts);
  ctake(&r, strndup(px->name, px->name_len));
  cint(&r, (int64_t)px->frame);
  cint(&r, px->width);
  cint(&r, px->height);
  const char *pt = spy_pixel_type_name(px->pixel_type);
  cconst(&r, pt ? pt : "?");
  cconst(&r, b->cfg->mode_name);
  cint(&r, px->key_frame);
  cconst(&r, px->codec == SPY_CODEC_VP9 ? "vp9" : "rgba8");
  size_t plen = strlen(b->cfg->rel) + 1 + strlen(path);
  char *p = malloc(plen + 1);
  if (p)
    snprintf(p, plen + 1, "%s/%s", b->cfg->rel, path);
  ctake(&r, p);
  cint(&r, (int64_t)off);
  cint(&r, (int64_t)len);
  emit(ctx, &r);
  b->chunks++;
  b->bytes += len;
}

static void put_ivf(rec_bufs *b, const spy_pixels *px, const uint8_t *data,
                    uint32_t len, int64_t ts, rec_emit_fn emit, void *ctx) {
  int *waiting = waiting_for(b, px->name, px->name_len);
  if (!waiting) {
    b->lost++;
    return;
  }
  if (*waiting && !px->key_frame) {
    b->lost++; /* not decodable without the frames before it */
    return;
  }
  ivf_file *f = ivf_for(b, px);
  if (!f) {
    b->lost++;
    return;
  }
  /* a file of another size (or a new one) starts at a key frame too */
  if (f->count == 0 && !px->key_frame) {
    b->lost++;
    *waiting = 1;
    return;
  }
  uint64_t pts = px->captured_ms >= f->t0_ms ? px->captured_ms - f->t0_ms : 0;
  if (f->count && pts <= f->pts)
    pts = f->pts + 1; /* strictly increasing, as players expect */
  uint8_t h[IVF_FRAME_HEADER];
  wr32(h, len);
  wr32(h + 4, (uint32_t)pts);
  wr32(h + 8, (uint32_t)(pts >> 32));
  struct iovec v[2] = {{h, sizeof h}, {(void *)data, len}};
  ssize_t w = writev(f->fd, v, 2);
  if (w != (ssize_t)(sizeof h + len)) {
    fail_once(b, 4, "cannot write", f->path);
    if (w > 0) /* a torn chunk: the file stays as it was */
      (void)!ftruncate(f->fd, (off_t)f->off);
    ivf_close(f);
    b->lost++;
    return;
  }
  uint64_t at = f->off + sizeof h;
  f->off += (uint64_t)w;
  f->count++;
  f->pts = pts;
  uint8_t cnt[4];
  wr32(cnt, f->count);
  if (pwrite(f->fd, cnt, 4, 24) != 4)
    fail_once(b, 8, "cannot update the header of", f->path);
  *waiting = 0;
  chunk_row(b, px, ts, f->path, at, len, emit, ctx);
}

/* One RGBA8 image as a PNG (fast compression: the recorder keeps up
 * with the provider, a smaller file matters less). Returns its size or
 * -1. */
static long write_png(int fd, const uint8_t *rgba, uint32_t w, uint32_t h) {
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    close(fd);
    return -1;
  }
  if (spy__png_write_rgba8(f, rgba, w, h, 1) < 0 || fflush(f) != 0) {
    fclose(f);
    return -1;
  }
  long size = ftell(f);
  return fclose(f) == 0 ? size : -1;
}

static void put_png(rec_bufs *b, const spy_pixels *px, const uint8_t *data,
                    uint32_t len, int64_t ts, rec_emit_fn emit, void *ctx) {
  if ((uint64_t)px->width * px->height * 4 != len || !px->width ||
      !px->height) {
    b->lost++; /* spy_get_pixels checked one frame's; parts are ours */
    return;
  }
  char safe[NAME_CHARS + 1], stem[NAME_CHARS + 64], path[2 * NAME_CHARS + 96];
  safe_name(safe, px->name, px->name_len);
  snprintf(stem, sizeof stem, "%s-%ux%u-f%llu", safe, px->width, px->height,
           (unsigned long long)px->frame);
  int fd = make_file(b, stem, ".png", path, sizeof path);
  if (fd < 0) {
    b->lost++;
    return;
  }
  long size = write_png(fd, data, px->width, px->height);
  if (size < 0) {
    errno = EIO;
    fail_once(b, 16, "cannot write", path);
    b->lost++;
    return;
  }
  chunk_row(b, px, ts, path, 0, (uint64_t)size, emit, ctx);
}

static part_buf *part_for(rec_bufs *b, const spy_pixels *px) {
  part_buf *free_slot = NULL;
  for (int i = 0; i < MAX_PARTS; i++) {
    part_buf *p = &b->parts[i];
    if (p->buffer[0] && strlen(p->buffer) == px->name_len &&
        memcmp(p->buffer, px->name, px->name_len) == 0)
      return p;
    if (!p->buffer[0] && !free_slot)
      free_slot = p;
  }
  if (free_slot) {
    memcpy(free_slot->buffer, px->name, px->name_len);
    free_slot->buffer[px->name_len] = 0;
  }
  return free_slot;
}

void spy__rec_bufs_frame(rec_bufs *b, const spy_frame *f, const spy_state *st,
                         int64_t upid, int64_t ts, rec_emit_fn emit,
                         void *ctx) {
  if (!b)
    return;
  b->upid = upid;
  if (st->frames_lost != b->frames_lost_seen) {
    /* frames went missing: a stream's next chunk may refer to one of
     * them; so may a payload being put together */
    b->frames_lost_seen = st->frames_lost;
    for (uint32_t i = 0; i < b->nkeys; i++)
      b->keys[i].waiting = 1;
    for (int i = 0; i < MAX_PARTS; i++)
      if (b->parts[i].len) {
        b->parts[i].len = b->parts[i].total = 0;
        b->lost++;
      }
  }
  spy_section sec;
  spy_pixels px;
  if (!spy_frame_find_section(f, SPY_SEC_PIXELS, &sec) ||
      spy_get_pixels(&sec, &px) < 0 ||
      (f->type == SPY_MSG_BUFFER_RAW) != (px.codec == SPY_CODEC_RGBA8)) {
    b->lost++;
    return;
  }
  if (!asked(b, st, &px))
    return; /* another subscriber's */
  const uint8_t *data = px.data;
  uint32_t len = px.data_len;
  if (px.part_total) {
    part_buf *p = part_for(b, &px);
    if (!p) {
      b->lost++;
      return;
    }
    if (px.part_offset == 0) {
      if (p->len) /* the one before never finished */
        b->lost++;
      if (p->cap < px.part_total) { /* bounded by SPY_PIXELS_TOTAL_MAX */
        uint8_t *n = realloc(p->data, px.part_total);
        if (!n) {
          p->len = p->total = 0;
          b->lost++;
          return;
        }
        p->data = n;
        p->cap = px.part_total;
      }
      p->len = 0;
      p->total = px.part_total;
      p->frame = px.frame;
    } else if (px.part_offset != p->len || px.frame != p->frame ||
               px.part_total != p->total) {
      if (p->len) {
        b->lost++; /* a part went missing: the payload is dropped */
        int *w = waiting_for(b, px.name, px.name_len);
        if (w && px.codec != SPY_CODEC_RGBA8)
          *w = 1;
      }
      p->len = p->total = 0;
      return;
    }
    memcpy(p->data + p->len, px.data, px.data_len);
    p->len += px.data_len;
    if (p->len < p->total)
      return;
    data = p->data;
    len = p->total;
    p->len = p->total = 0;
  }
  if (px.codec == SPY_CODEC_VP9)
    put_ivf(b, &px, data, len, ts, emit, ctx);
  else
    put_png(b, &px, data, len, ts, emit, ctx);
}

void spy__rec_bufs_end(rec_bufs *b) {
  if (!b)
    return;
  for (uint32_t i = 0; i < b->nfiles; i++) {
    ivf_file *f = &b->files[i];
    if (f->fd >= 0) {
      uint8_t cnt[4];
      wr32(cnt, f->count);
      if (pwrite(f->fd, cnt, 4, 24) != 4)
        fail_once(b, 8, "cannot update the header of", f->path);
    }
    ivf_close(f);
  }
  b->nfiles = 0;
  b->nkeys = 0;
  for (int i = 0; i < MAX_PARTS; i++) {
    b->parts[i].len = b->parts[i].total = 0;
    b->parts[i].buffer[0] = 0;
  }
}

void spy__rec_bufs_counts(const rec_bufs *b, uint64_t *chunks, uint64_t *bytes,
                          uint64_t *lost) {
  *chunks = b ? b->chunks : 0;
  *bytes = b ? b->bytes : 0;
  *lost = b ? b->lost : 0;
}

void spy__rec_bufs_free(rec_bufs *b) {
  if (!b)
    return;
  spy__rec_bufs_end(b);
  for (int i = 0; i < MAX_PARTS; i++)
    free(b->parts[i].data);
  free(b);
}
