/* src_pipe.c — source payloads packed on a thread of their own.
 *
 * Compressing every new payload (src_codec.c's packer) is most of a SQL
 * writer's work. The pipe moves it off the writer thread: the writer
 * submits a copy of each new payload and goes on inserting rows; a packer
 * thread compresses them in submission order (a delta needs the payload
 * before it); the finished rows come back to the writer, which inserts
 * them into its store through the sink, in the same order, on its own
 * thread (a database connection stays with one thread). Before a commit
 * the writer drains the pipe, so a committed batch holds every payload its
 * actions name.
 *
 * Bounded: at most PIPE_BYTES of payload wait for the packer; a submit
 * beyond that waits for room. A row the sink refuses (it did not reach
 * the store) must not become the base of a stored delta: the pipe
 * remembers it, restarts the chain, and packs any delta already made
 * against it again on its own. Without a thread (on <= 2 CPUs, or it
 * could not be started) the pipe packs inline, straight from the caller's
 * payload, and hands the row to the sink at once: no copy, no job. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store.h"

#define PIPE_BYTES ((size_t)8 << 20)

typedef struct job {
  struct job *next;
  int reset; /* a chain restart, not a payload */
  uint64_t hash[2];
  char *p; /* the payload (owned) */
  size_t n;
  /* the packed row */
  int err, codec, has_base;
  char id[33], base_id[33];
  char *blob;
  size_t blob_n;
} job;

struct spy__src_pipe {
  pthread_mutex_t mu;
  pthread_cond_t todo, done, room;
  job *in_head, *in_tail;   /* waiting for the packer */
  job *out_head, *out_tail; /* packed, waiting for the writer */
  size_t in_bytes;
  int busy, stop, threaded;
  int hurried; /* threaded for now only (spy__src_pipe_hurry) */
  pthread_t th;
  spy__src_packer *k;
  uint64_t busy_ns;
  spy__src_sink sink;
  void *arg;
  /* the writer's side: rows that did not reach the store */
  char (*poison)[33];
  size_t npoison, cappoison;
  void *cctx; /* re-packing a delta alone */
  spy__buf tmp;
};

/* Appends j to the list head..tail. */
static void push(job **head, job **tail, job *j) {
  j->next = NULL;
  if (*tail)
    (*tail)->next = j;
  else
    *head = j;
  *tail = j;
}

static uint64_t now_ns(void) { return spy__mono_ns(); }

/* Packs one job (on the packer thread, or inline). */
static void pack(spy__src_packer *k, job *j) {
  if (j->reset) {
    spy__src_packer_reset(k);
    return;
  }
  spy__cell c[5];
  j->err = spy__source_row(k, j->hash, j->p, j->n, j->id, c);
  if (j->err)
    return;
  j->codec = (int)c[2].i;
  j->has_base = c[3].kind != 0;
  if (j->has_base)
    memcpy(j->base_id, c[3].s, 32);
  j->base_id[32] = 0;
  j->blob_n = c[4].n;
  j->blob = malloc(j->blob_n ? j->blob_n : 1);
  if (!j->blob)
    j->err = SPY_ENOMEM;
  else
    memcpy(j->blob, c[4].s, j->blob_n);
}

static void *packer_main(void *arg) {
  spy__src_pipe *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->in_head && !q->stop)
      pthread_cond_wait(&q->todo, &q->mu);
    if (!q->in_head)
      break;
    job *j = q->in_head;
    q->in_head = j->next;
    if (!q->in_head)
      q->in_tail = NULL;
    q->busy = 1;
    pthread_mutex_unlock(&q->mu);
    uint64_t t0 = now_ns();
    pack(q->k, j);
    uint64_t dt = now_ns() - t0;
    pthread_mutex_lock(&q->mu);
    q->busy_ns += dt;
    q->busy = 0;
    q->in_bytes -= j->n;
    push(&q->out_head, &q->out_tail, j);
    pthread_cond_broadcast(&q->done);
    pthread_cond_signal(&q->room);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

spy__src_pipe *spy__src_pipe_new(spy__src_sink sink, void *arg) {
  spy__src_pipe *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  q->sink = sink;
  q->arg = arg;
  if (!(q->k = spy__src_packer_new())) {
    free(q);
    return NULL;
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->todo, NULL);
  pthread_cond_init(&q->done, NULL);
  pthread_cond_init(&q->room, NULL);
  q->threaded = !spy__trace_pack_inline() &&
                pthread_create(&q->th, NULL, packer_main, q) == 0;
  if (q->threaded)
    pthread_setname_np(q->th, "spy-trace-pack");
  return q;
}

static void free_job(job *j) {
  free(j->p);
  free(j->blob);
  free(j);
}

static int poisoned(const spy__src_pipe *q, const char *id) {
  for (size_t i = 0; i < q->npoison; i++)
    if (memcmp(q->poison[i], id, 32) == 0)
      return 1;
  return 0;
}

static void enqueue(spy__src_pipe *q, job *j);

/* Hands one packed row (cells c of the payload p[0..n)) to the sink, on
 * the writer's thread. */
static int deliver_row(spy__src_pipe *q, const uint64_t hash[2], const char *p,
                       size_t n, spy__cell c[5]) {
  int rc = 0;
  if (c[3].kind && poisoned(q, c[3].s)) { /* its base is not stored */
    c[2].i = spy__src_pack(&q->tmp, &q->cctx, p, n, 1);
    c[3] = (spy__cell){0, 0, NULL, 0};
    c[4] = (spy__cell){SPY__COL_BLOB, 0, q->tmp.p ? q->tmp.p : "", q->tmp.len};
    rc = q->tmp.err;
  }
  if (rc == 0)
    rc = q->sink(q->arg, hash, c);
  if (rc < 0) { /* not stored: never a base from now on */
    if (q->npoison == q->cappoison) {
      size_t ncap = q->cappoison ? q->cappoison * 2 : 16;
      char(*np)[33] = realloc(q->poison, ncap * sizeof *np);
      if (np) {
        q->poison = np;
        q->cappoison = ncap;
      }
    }
    if (q->npoison < q->cappoison) {
      memcpy(q->poison[q->npoison], c[0].s, 32);
      q->poison[q->npoison++][32] = 0;
    }
    job *r = calloc(1, sizeof *r);
    if (r) {
      r->reset = 1;
      enqueue(q, r);
    }
  }
  return rc;
}

/* Hands the row the packer thread made of j to the sink; frees j. */
static int deliver(spy__src_pipe *q, job *j) {
  int rc = j->err;
  if (rc == 0) {
    spy__cell c[5];
    c[0] = (spy__cell){SPY__COL_TEXT, 0, j->id, 32};
    c[1] = (spy__cell){SPY__COL_INT, (int64_t)j->n, NULL, 0};
    c[2] = (spy__cell){SPY__COL_INT, j->codec, NULL, 0};
    c[3] = j->has_base ? (spy__cell){SPY__COL_TEXT, 0, j->base_id, 32}
                       : (spy__cell){0, 0, NULL, 0};
    c[4] = (spy__cell){SPY__COL_BLOB, 0, j->blob, j->blob_n};
    rc = deliver_row(q, j->hash, j->p, j->n, c);
  }
  free_job(j);
  return rc;
}

/* Delivers every packed row; the first sink error is returned (the rest
 * are still delivered). */
static int deliver_all(spy__src_pipe *q, job *list) {
  int first = 0;
  while (list) {
    job *n = list->next;
    int rc = list->reset ? (free_job(list), 0) : deliver(q, list);
    if (rc < 0 && first == 0)
      first = rc;
    list = n;
  }
  return first;
}

static void enqueue(spy__src_pipe *q, job *j) {
  if (!q->threaded) { /* inline: packed now, delivered by the caller */
    pack(q->k, j);
    push(&q->out_head, &q->out_tail, j);
    return;
  }
  pthread_mutex_lock(&q->mu);
  while (q->in_bytes && q->in_bytes + j->n > PIPE_BYTES)
    pthread_cond_wait(&q->room, &q->mu);
  q->in_bytes += j->n;
  push(&q->in_head, &q->in_tail, j);
  pthread_cond_signal(&q->todo);
  pthread_mutex_unlock(&q->mu);
}

static job *take_out(spy__src_pipe *q, int wait_all) {
  if (q->threaded)
    pthread_mutex_lock(&q->mu);
  while (q->threaded && wait_all && (q->in_head || q->busy))
    pthread_cond_wait(&q->done, &q->mu);
  job *list = q->out_head;
  q->out_head = q->out_tail = NULL;
  if (q->threaded)
    pthread_mutex_unlock(&q->mu);
  return list;
}

int spy__src_pipe_submit(spy__src_pipe *q, const uint64_t hash[2],
                         const char *p, size_t n) {
  if (!q->threaded) { /* packed and delivered now: no copy of the payload */
    int first = deliver_all(q, take_out(q, 0)); /* chain restarts */
    char id[33];
    spy__cell c[5];
    int rc = spy__source_row(q->k, hash, p, n, id, c);
    if (rc == 0)
      rc = deliver_row(q, hash, p, n, c);
    int later = deliver_all(q, take_out(q, 0));
    return first ? first : rc ? rc : later;
  }
  job *j = calloc(1, sizeof *j);
  if (!j || !(j->p = malloc(n ? n : 1))) {
    free(j);
    return SPY_ENOMEM;
  }
  memcpy(j->p, p, n);
  j->n = n;
  j->hash[0] = hash[0];
  j->hash[1] = hash[1];
  enqueue(q, j);
  return deliver_all(q, take_out(q, 0));
}

int spy__src_pipe_drain(spy__src_pipe *q) {
  int first = 0;
  for (;;) { /* a refused row queues a chain restart: go round again */
    job *list = take_out(q, 1);
    if (!list)
      return first;
    int rc = deliver_all(q, list);
    if (rc < 0 && first == 0)
      first = rc;
  }
}

int spy__src_pipe_reset(spy__src_pipe *q) {
  int rc = spy__src_pipe_drain(q);
  spy__src_packer_reset(q->k); /* the packer is idle after a drain */
  return rc;
}

int spy__src_pipe_hurry(spy__src_pipe *q, int on) {
  int rc = 0;
  if (on && !q->threaded && spy__trace_cpus() > 1) {
    rc = deliver_all(q, take_out(q, 0)); /* chain restarts queued inline */
    q->stop = 0;
    q->threaded = q->hurried =
        pthread_create(&q->th, NULL, packer_main, q) == 0;
    if (q->threaded)
      pthread_setname_np(q->th, "spy-trace-pack");
  } else if (!on && q->hurried) {
    rc = spy__src_pipe_drain(q);
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_signal(&q->todo);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    q->threaded = q->hurried = 0;
    q->stop = 0;
  }
  return rc;
}

uint64_t spy__src_pipe_busy_ns(spy__src_pipe *q) {
  if (!q)
    return 0;
  pthread_mutex_lock(&q->mu);
  uint64_t v = q->busy_ns;
  pthread_mutex_unlock(&q->mu);
  return v;
}

void spy__src_pipe_free(spy__src_pipe *q) {
  if (!q)
    return;
  if (q->threaded) {
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_signal(&q->todo);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
  }
  for (job *j = q->in_head, *n; j; j = n) {
    n = j->next;
    free_job(j);
  }
  for (job *j = q->out_head, *n; j; j = n) {
    n = j->next;
    free_job(j);
  }
  spy__src_packer_free(q->k);
  spy__src_pack_free(&q->cctx);
  spy__buf_free(&q->tmp);
  free(q->poison);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->todo);
  pthread_cond_destroy(&q->done);
  pthread_cond_destroy(&q->room);
  free(q);
}
