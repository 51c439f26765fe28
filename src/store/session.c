/* session.c — a trace session: the queues between emitters and the writer
 * thread, and the writer loop (decode once, hash and dedup large payloads,
 * serialise once — JSON only for writers that want it — hand to the
 * writer, commit per batch).
 *
 * Lent payloads. A payload the application lends (spy_trace_text.release)
 * is queued as a reference (pointer, length, release, owner), not as its
 * bytes: the emitter copies nothing large and the ring holds far more
 * actions. The writer reads the bytes where they lie and releases them
 * once it has stored the action — the last HELD of them a little later
 * (at the next commit at the latest), so that a payload lent again
 * meanwhile, a hook's output as the next hook's input, is known by its
 * hash without hashing it again (held_put); what one thread
 * has lent and the writer not yet released is bounded (lend_bytes), and
 * beyond it, in the spill file (read back by another process after a
 * crash) and on a failed emit, the payload is copied and released on the
 * emitting thread. Only the session's own decoder takes the reference
 * (spy__trace_decode_lent); records from a file never do.
 *
 * Queues. Every emitting thread owns a single-producer byte ring of its
 * own (claimed on its first emit through a pthread key of the session, and
 * handed back when the thread exits so a later thread reuses it). An
 * emitter encodes its action once, straight into the free space of its
 * ring, with no lock; only when the record does not fit before the end of
 * the ring (a wrap) or the ring is full is it encoded again. Then one
 * atomic increment gives the record its sequence number (patched into its
 * header) and a release store of the ring's tail publishes it. A record
 * larger than a quarter of the ring is encoded to the heap and queued as a
 * pointer. No lock and no shared cache line but the sequence counter is
 * touched by two threads emitting at once.
 *
 * The writer thread merges the rings in sequence order (the store keeps one
 * order per session): it takes the record numbered next from whichever
 * ring holds it; a number taken but not yet published (its emitter is
 * between the increment and the store) is waited for briefly. A number
 * that never comes (a spill file record found damaged) is given up after
 * a bounded wait, counted lost and reported, so it cannot hold the trace
 * or a flush; a record given up on that comes after all is written late. Space
 * is handed back to each ring every 64 records. Emitters wake the writer
 * (futex) only when work appears after idleness or a gathering batch grows
 * large; a woken writer lets a batch gather for up to 2 ms, so a wake is
 * paid per batch, not per action. A batch is committed when it holds
 * batch_actions, is 100 ms old, or on a flush or close.
 *
 * Spill. A ring that is full does not make its emitter wait: the record is
 * encoded (once: the attempt in the ring told its size) into the queue's
 * memory spill block, counted in stats.spilled. Blocks are 2 MiB,
 * linked one producer to one consumer with release stores, faulted in
 * ahead by the writer thread and handed back by it through a free list
 * once read, so spilling allocates and faults nothing after a
 * block's first use (spill_bytes bounds the blocks held). The writer
 * merges the blocks in sequence order with the rings, so the trace stays
 * complete and ordered while the build runs on.
 *
 * Spill file. Beyond spill_bytes of memory, a queue goes to its spill file
 * (spill-<queue>.bin in the session directory, created on first use) and
 * stays there until the writer has read the file up to its end, so every
 * record of the queue after the switch is on disk: the ring and the memory
 * blocks only hold records older than the file's. The emitter encodes
 * each record (8-byte header: length and checksum, then the record) into
 * the queue's 2 MiB file buffer; a full buffer is queued (up to 8) for
 * the writer thread, which checksums and writes it out between batches,
 * every 64 records and at each commit (the buffer being filled too), so
 * the build thread makes no write; only with 8 full buffers waiting (a
 * writer that does not get to run) does the emitter write them itself.
 * No fsync. A killed process loses the records not written out yet (at
 * most the writer's last few batches' worth, none it had written: the
 * bytes are in the OS), an OS crash may lose more. The writer reads the
 * file back in sequence order with the rest (the bytes not written yet
 * straight from the buffers, under the queue's file lock, which only
 * spilling takes), records at each commit how far it has committed (the
 * header's resume offset) and punches the consumed blocks out; the file
 * is removed when the session ends. A process killed while
 * spilling leaves the file beside its store: spy_trace_recover adds the
 * records the store did not commit. Only when both bounds are used up
 * (spill_file_bytes on disk, or the file cannot be written) does the
 * emitter wait for ring space, counted in waits: a build trace loses
 * nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"
#include "platform/wallclock.h"
#include "spyglass/wire.h" /* spy_rd64, spy_wr64 */
#include "store.h"

#define MARK_WRAP 0u
#define MARK_HEAP 1u
#define HEAP_REC 16u
#define WAIT_IDLE 1u
#define WAIT_GATHER 2u
#define WAIT_GAP 3u
#define WAIT_PREP 4u         /* the store's set-up is to be tried again later */
#define GATHER_NS 2000000    /* a batch gathers for at most 2 ms */
#define COMMIT_NS 100000000  /* a batch stays open at most 100 ms */
#define GAP_NS 2000000000ull /* a number unpublished this long is given up */
#define GAP_DAMAGED_NS 1000000ull /* … once a spill record was unreadable */
#define GAP_WAITS 5   /* and the writer waited for it at least this often */
#define MAX_FAULTS 16 /* distinct failures counted separately */
/* spill file: a 4 KiB header block, then records (spill_hdr + record) */
#define SF_MAGIC "SPYSPIL1"
#define SF_DATA 4096u
#define SF_RESUME 16 /* offset of the u64 resume offset in the header */
#define SF_PUNCH ((uint64_t)4 << 20) /* punch consumed blocks per 4 MiB */
#define SF_READ ((size_t)1 << 20)    /* the writer reads ahead this much */
#define SF_BUF ((size_t)2 << 20)     /* spilled records gather in buffers … */
#define SF_QUEUE 8 /* … this many full ones wait for the writer */

/* A block of the memory spill: records spilled off a full ring, back to
 * back (each 8-aligned). The emitter fills its queue's last block and
 * publishes each record by a release store of pub; a full block is
 * followed by the next one (linked with a release store of next) and
 * never written again, so the writer, once it has read a block whose
 * next is set up to pub, hands it back on the queue's free list (a stack
 * only the writer pushes to and only the emitter empties, whole). Blocks
 * are reused for the session's life: no allocation per spilled record,
 * and a block is faulted in once. cap 0: the list's first stub; a record
 * larger than a block gets one of its own (freed once read). */
#define SB_BYTES ((size_t)2 << 20)
typedef struct sblk {
  _Atomic(struct sblk *) next;
  size_t cap;         /* bytes of data */
  _Atomic size_t pub; /* bytes of records published */
  size_t rd;          /* the writer's: bytes taken */
  _Alignas(8) uint8_t data[];
} sblk;

/* One emitting thread's ring. Positions are byte counts since creation
 * (the offset is the count modulo cap). */
#define LINE 64 /* what one thread writes stays off the other's lines */
typedef struct tq {
  struct tq *next; /* set before the queue is published */
  uint8_t *ring;
  size_t cap;
  _Atomic int owned; /* a live thread produces into it */
  /* the producer's: its tail, published, and its counters (single
   * writer: relaxed loads and stores; summed by spy_trace_get_stats) */
  _Alignas(LINE) _Atomic uint64_t tail;
  uint64_t ptail;
  sblk *sb_tail;  /* the memory spill's block being filled, */
  size_t sb_w;    /* its bytes used, */
  sblk *sb_spare; /* blocks handed back, taken off sb_free */
  _Atomic uint64_t emitted, queued_bytes, waits, wait_ns, spilled;
  _Atomic uint64_t spilled_disk, spilled_bytes, spill_fail;
  _Atomic uint64_t lent_bytes, lent_copied;
  uint64_t lent_out;      /* bytes lent, ever */
  const void *lent_owner; /* the owner of the last payload lent */
  uint64_t lent_seen;     /* lent_back as last loaded */
  _Atomic uint32_t space_wait;
  /* the spill file, the producer's side: fd (-1 none; set before f_len
   * is first published), the end of what it appended (on disk or still
   * in a buffer), sticky file mode */
  int fd, f_mode, f_nofile;
  uint32_t id;
  uint64_t f_wr;
  _Atomic uint64_t f_len; /* bytes appended, published (release) */
  /* under f_mu (the emitter appends, the writer reads and writes out):
   * the file bytes from f_disk on are not written yet: the full buffers
   * fq[0..fq_n) in order, then f_buf[0..f_blen); the writer takes the
   * oldest off the queue (f_disk moves past it) and writes it outside
   * the lock, so the emitter can always write the rest itself; spare
   * buffers in ffree; f_bad once a write failed (the buffers then keep
   * their bytes for the writer to read, a buffer whose write failed in
   * w_keep, and the file takes no more) */
  pthread_mutex_t f_mu;
  uint8_t *f_buf;
  size_t f_blen;
  uint64_t f_disk;
  int f_bad;
  struct fbuf {
    uint8_t *p;
    size_t len, cap;
  } w_keep; /* the writer's: [w_off, + len) failed to write */
  uint64_t w_off;
  struct fbuf fq[SF_QUEUE];
  int fq_n, ffree_n;
  uint8_t *ffree[SF_QUEUE + 2];
  /* handed back by the writer every 64 records */
  _Alignas(LINE) _Atomic uint64_t head;
  _Atomic uint32_t space_word;
  _Atomic uint64_t f_taken;   /* file bytes the writer has taken */
  _Atomic(sblk *) sb_free;    /* memory spill blocks the writer has read */
  _Atomic uint64_t lent_back; /* lent bytes the writer has released */
  _Atomic uint32_t sb_avail;  /* … blocks there and in sb_spare */
  int f_nbuf;                 /* spill file buffers that exist (f_mu) */
  /* the writer's own head (records taken) and its memory spill block
   * (the oldest not handed back) */
  _Alignas(LINE) uint64_t chead;
  uint64_t ctail; /* the tail as the writer last loaded it: it loads it
                     again only once it has taken everything up to it,
                     so the emitter's line stays in the emitter's cache */
  sblk *sb_head;  /* the oldest memory spill block not handed back */
  int populated;  /* its ring's pages are faulted in (rings_populate) */
  /* the writer's side of the spill file: next record's offset, a read
   * buffer holding file bytes [rb_off, rb_off + rb_len), how far it is
   * committed (recorded in the header) and punched out */
  uint64_t f_rd, rb_off, f_resume, f_punched;
  uint8_t *rb;
  size_t rb_len, rb_cap;
} tq;

/* Large buffers (rings, records of megabytes, spill blocks) are mapped
 * on their own and unmapped when done. Not in 2 MiB pages: on the VMs
 * measured, first touching fresh huge pages cost 4x what 4 KiB ones do
 * (0.1-0.2 GB/s against 0.4-0.7); what is touched once is kept and
 * reused instead (spill blocks and buffers), and the writer thread
 * faults spare ones in ahead of the emitter (spill_prefault). */
#define BIG_MIN ((size_t)4 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
static size_t big_len(size_t n) {
  return (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}
static void *big_alloc(size_t n) {
  if (n < BIG_MIN)
    return malloc(n);
  void *p = mmap(NULL, big_len(n), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  return p;
}
static void big_free(void *p, size_t n) {
  if (p && n < BIG_MIN)
    free(p);
  else if (p)
    munmap(p, big_len(n));
}

/* A counter only one thread adds to: no locked instruction. */
static void bump(_Atomic uint64_t *c, uint64_t by) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                        memory_order_relaxed);
}

/* Lent payloads are released at the commit after their action, all at
 * once (not one by one right behind the emitter, whose reference counts
 * and allocator the releases would contend with); a payload lent again
 * while one of the last HELD is still held (a hook's output as the next
 * hook's input) has the same bytes, so its hash is known. */
#define HELD 16

struct spy_trace {
  spy_trace_hot hot; /* first: read by the inline emitters */
  /* resolved desc */
  char *session_id, *cwd, *dir, *conninfo;
  const spy_trace_writer_ops *ops;
  void *ops_arg;
  uint32_t batch;
  size_t qcap, retry_bytes, spill_cap, lend_cap;
  uint64_t spill_file_cap;
  _Atomic size_t spill_bytes;    /* memory spill blocks held (reused) */
  _Atomic uint64_t spill_blocks; /* … allocated, ever */
  size_t sb_bytes;               /* a block's size (<= spill_cap) */
  _Atomic uint64_t file_pending; /* records in spill files not taken */
  _Atomic uint32_t nqueues;      /* queue ids */
  char *spill_dir;               /* where spill files go */
  int spill_parent_made;         /* its parent was made for it (postgres) */
  uint32_t delay_us;             /* SPY_TRACE_WRITER_DELAY_US (tests) */
  int discard;                   /* SPY_TRACE_DISCARD (bench) */
  uint32_t retry_ms;
  void (*on_error)(void *, int, const char *);
  void *on_error_arg;
  /* queues */
  pthread_key_t key;
  int key_made;
  uint64_t gen;         /* this session among all of the process's (tls_q) */
  pthread_mutex_t qmu;  /* adding queues, registering app kinds */
  _Atomic(tq *) queues; /* list, newest first; never shrinks */
  _Atomic uint32_t cur_build, builds;
  /* the actions' clock: read by the emitters, tended by the writer loop */
  _Alignas(LINE) spy__wallclock clock;
  _Alignas(LINE) _Atomic uint64_t seq;     /* last sequence number given */
  _Alignas(LINE) _Atomic uint32_t wr_word; /* the writer's futex word */
  _Atomic uint32_t wr_state;
  _Atomic int closing, flush_req;
  const spy_trace_kind *app_kinds[SPY_TRACE_MAX_APP_KINDS];
  spy_trace_tap tap;      /* bus_tap.c: live progress on the bus */
  _Atomic uint32_t n_app; /* entries below it are set and never change */
  /* flush and counters (under mu) */
  pthread_mutex_t mu;
  pthread_cond_t committed_cv;
  uint64_t committed_seq;
  spy_trace_stats st;
  struct {
    int err;
    uint64_t count;
    char msg[200];
  } faults[MAX_FAULTS];
  int nfaults;
  uint64_t faults_other;
  /* the writer loop's runner: its thread, or a thread that waits for the
   * trace (flush, destroy) and took the loop over (run_mu) */
  _Alignas(LINE) pthread_t thread;
  int thread_started, sync_made;
  int nice;            /* the writer thread's nice increment (0: none) */
  int ever_started;    /* the writer loop may run (the session is made) */
  _Atomic int handoff; /* the thread is asked to leave the loop */
  pthread_mutex_t run_mu;
  uint32_t uncommitted; /* actions taken since the last commit */
  int hurried;          /* a waiting thread runs the loop (hurry) */
  uint64_t last_commit;
  void *wstate;
  /* the writer's prepare (its slow set-up, on the writer loop's thread):
   * done (or the writer has none); given up on for the actions queued now
   * (taken and counted lost in unstored); failed for good; the next try
   * after a failure, and since when a flush or the end has waited */
  int prepared, prep_given_up, prep_failed;
  uint64_t prep_next_ns, prep_backoff_ns, prep_wait_since;
  _Atomic uint64_t unstored;
  uint64_t wseq; /* last sequence number handed to the writer */
  tq *last;      /* ring the previous record came from */
  /* numbers given up on (gap_skip), less those that came late after all;
   * damaged: a spill file record was unreadable (its number is then given
   * up on without the wait) */
  _Atomic uint64_t dropped;
  int damaged;
  uint64_t gap_since; /* when the writer began waiting for wseq + 1 */
  spy_trace_arena arena;
  spy__buf json;
  spy__hset seen; /* content hashes of the payloads stored */
  /* lent payloads: those of the record being written, and the last HELD
   * ones written, still referenced (held_put) */
  spy__lentv lentv;
  struct held {
    const char *p;
    size_t n;
    void *owner;
    void (*release)(void *owner);
    uint64_t hash[2];
    int hashed;
    tq *q;
    uint64_t bytes;
  } * held;
  uint32_t nheld, capheld;
};

static void default_report(void *arg, int err, const char *msg) {
  (void)arg;
  fprintf(stderr, "spyglass trace: %s (%s)\n", msg, spy_err_name(err));
}

/* Called by writers (cfg.report) and by the loop on a failed op. The first
 * occurrence of a failure (code and message) is passed on; repeats are
 * counted and reported once, with their count, when the session ends. */
static void report(void *ctx, int err, const char *msg) {
  spy_trace *t = ctx;
  int first = 1;
  pthread_mutex_lock(&t->mu);
  t->st.writer_errors++;
  int i = 0;
  while (i < t->nfaults &&
         (t->faults[i].err != err ||
          strncmp(t->faults[i].msg, msg, sizeof t->faults[i].msg - 1)))
    i++;
  if (i < t->nfaults) {
    t->faults[i].count++;
    first = 0;
  } else if (t->nfaults < MAX_FAULTS) {
    t->faults[i].err = err;
    t->faults[i].count = 1;
    snprintf(t->faults[i].msg, sizeof t->faults[i].msg, "%s", msg);
    t->nfaults++;
  } else {
    t->faults_other++;
    first = 0;
  }
  pthread_mutex_unlock(&t->mu);
  if (first)
    t->on_error(t->on_error_arg, err, msg);
}

/* At the end: one line per failure that happened more than once. */
static void report_repeats(spy_trace *t) {
  for (int i = 0; i < t->nfaults; i++)
    if (t->faults[i].count > 1) {
      char m[320];
      snprintf(m, sizeof m, "%s (%llu times in all)", t->faults[i].msg,
               (unsigned long long)t->faults[i].count);
      t->on_error(t->on_error_arg, t->faults[i].err, m);
    }
  if (t->faults_other) {
    char m[128];
    snprintf(m, sizeof m, "%llu more writer failures of other kinds",
             (unsigned long long)t->faults_other);
    t->on_error(t->on_error_arg, SPY_EIO, m);
  }
}

/* ---- dedup set ---------------------------------------------------------- */

/* Hashes every inline payload of the tree; stores first-seen ones. Every
 * payload is hashed: with the dispatching XXH3 (AVX2) a hash costs ~0.4
 * instructions a byte, less than keeping a copy of the last payload to
 * compare the next with (a copy per new payload plus a compare per
 * repeated one: 28 M of 42 M instructions on the demo build of tree-2000
 * went to them). */
/* The hash of a lent payload still held (same bytes, owner and length:
 * referenced, so unchanged), else a fresh one. */
static void hash_payload(spy_trace *t, spy_trace_val *v) {
  for (uint32_t i = 0; i < t->lentv.n; i++)
    if (t->lentv.v[i].val == v) {
      void *owner = t->lentv.v[i].owner;
      for (uint32_t k = t->nheld > HELD ? t->nheld - HELD : 0; k < t->nheld;
           k++) {
        const struct held *h = &t->held[k];
        if (h->p == v->u.s && h->n == v->n && h->owner == owner && h->hashed) {
          v->hash[0] = h->hash[0];
          v->hash[1] = h->hash[1];
          return;
        }
      }
      break;
    }
  spy_trace_hash(v->u.s, v->n, v->hash);
}

/* Releases one held payload. */
static void held_drop(struct held *h) {
  if (h->release) {
    h->release(h->owner);
    if (h->bytes)
      bump(&h->q->lent_back, h->bytes);
    h->release = NULL;
    h->p = NULL;
  }
}

/* The lent payloads of the record just written (t->lentv) are held until
 * the commit (released at once when the list cannot grow). */
static void held_put(spy_trace *t, tq *q) {
  for (uint32_t i = 0; i < t->lentv.n; i++) {
    const spy__lent *l = &t->lentv.v[i];
    if (t->nheld == t->capheld) {
      uint32_t cap = t->capheld ? t->capheld * 2 : 1024;
      struct held *nh = realloc(t->held, cap * sizeof *nh);
      if (nh) {
        t->held = nh;
        t->capheld = cap;
      }
    }
    struct held tmp, *h = t->nheld < t->capheld ? &t->held[t->nheld++] : &tmp;
    *h = (struct held){l->val->u.s, l->val->n,        l->owner, l->release,
                       {0, 0},      l->val->has_hash, q,        l->held};
    if (h->hashed) {
      h->hash[0] = l->val->hash[0];
      h->hash[1] = l->val->hash[1];
    }
    if (h == &tmp)
      held_drop(h);
  }
  t->lentv.n = 0;
}

/* Releases every held payload (at a commit, at the end). */
static void held_drop_all(spy_trace *t) {
  for (uint32_t k = 0; k < t->nheld; k++)
    held_drop(&t->held[k]);
  t->nheld = 0;
}

static int dedup(spy_trace *t, spy_trace_val *v, spy_trace_stats *st) {
  if (v->type == SPY_TV_SRC) {
    hash_payload(t, v);
    v->has_hash = 1;
    int fresh = spy__hset_add(&t->seen, v->hash);
    if (fresh < 0)
      return fresh;
    if (fresh) {
      if (t->ops->source) {
        int rc = t->ops->source(t->wstate, v->hash, v->u.s, v->n);
        if (rc < 0)
          return rc;
      }
      st->sources++;
      st->source_bytes += v->n;
    } else {
      st->sources_dup++;
      st->saved_bytes += v->n;
    }
  } else if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC) {
    for (uint32_t i = 0; i < v->n; i++) {
      int rc = dedup(t, (spy_trace_val *)&v->u.items[i], st);
      if (rc < 0)
        return rc;
    }
  }
  return 0;
}

static void sleep_us(uint32_t us) {
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Releases the payloads a record of q's memory queues (ring, heap,
 * memory spill) borrowed; what the emitter may lend again. */
static void release_lent(tq *q, const uint8_t *rec) {
  uint32_t len;
  memcpy(&len, rec, 4);
  uint64_t n = spy__trace_release_record(rec, len);
  if (n)
    bump(&q->lent_back, n);
}

/* Writes one record (rec: its encoded bytes). q: the memory queue it
 * comes from, whose lent payloads it may reference; NULL for a spill
 * file's record (from disk: it never references memory). Returns 1 when
 * the record's lent payloads are now held (released later), 0 when the
 * caller must release them. */
static int process(spy_trace *t, const uint8_t *rec, spy_trace_stats *st,
                   tq *q) {
  uint32_t len;
  memcpy(&len, rec, 4);
  spy_trace_arena_reset(&t->arena);
  spy_trace_action a;
  t->lentv.n = 0;
  int rc = q ? spy__trace_decode_lent(rec, len, &t->arena, &a, &t->lentv)
             : spy_trace_decode(rec, len, &t->arena, &a);
  /* a record that did not decode whole, or whose list is short, is
   * released by a walk of its bytes instead */
  int held = q && rc >= 0 && !t->lentv.lost;
  if (!held)
    t->lentv.n = 0;
  if (rc >= 0 && !a.kind) { /* an application kind: find its descriptor */
    uint32_t n = atomic_load_explicit(&t->n_app, memory_order_acquire);
    for (uint32_t i = 0; i < n && !a.kind; i++)
      if (strlen(t->app_kinds[i]->name) == a.name_len &&
          memcmp(t->app_kinds[i]->name, a.name, a.name_len) == 0)
        a.kind = t->app_kinds[i];
    if (a.kind)
      rc = spy_trace_check(a.kind, &a.fields);
  }
  if (rc >= 0 && !t->prep_given_up)
    rc = dedup(t, &a.fields, st);
  /* writers that store the binary record get no JSON */
  int json = !(t->ops->flags & SPY_TRACE_WRITER_RECORDS);
  uint64_t replaced = t->json.replaced;
  if (rc >= 0 && json) {
    t->json.len = 0;
    spy__trace_json(&t->json, t->session_id, &a);
    rc = t->json.err;
  }
  if (rc >= 0 && SPY_TRACE_UNLIKELY(t->prep_given_up)) {
    atomic_fetch_add(&t->unstored, 1); /* no store to write it to */
  } else if (rc >= 0) {
    spy_trace_record r = {&a, json ? t->json.p : NULL, json ? t->json.len : 0,
                          t->json.replaced - replaced};
    rc = t->ops->action(t->wstate, &r);
  }
  if (rc < 0)
    report(t, rc, "writing an action failed");
  st->written++;
  if (held)
    held_put(t, q);
  return held;
}

/* ---- the writer's side of the rings ----------------------------------- */

/* q's published tail, loaded again only when the writer has caught up
 * with the one it loaded last. */
static uint64_t ring_tail(tq *q) {
  if (q->chead >= q->ctail)
    q->ctail = atomic_load_explicit(&q->tail, memory_order_acquire);
  return q->ctail;
}

/* The next record of q at or after its writer head, skipping wrap marks;
 * NULL when q holds nothing more. *seq receives its number. */
static const uint8_t *peek(tq *q, uint64_t tail, uint64_t *seq) {
  while (q->chead < tail) {
    size_t pos = (size_t)(q->chead & (q->cap - 1));
    uint32_t m;
    memcpy(&m, q->ring + pos, 4);
    if (m == MARK_WRAP) {
      q->chead += q->cap - pos;
      continue;
    }
    const uint8_t *rec = q->ring + pos;
    if (m == MARK_HEAP)
      memcpy(&rec, q->ring + pos + 8, sizeof rec);
    *seq = spy_rd64(rec + 8);
    return q->ring + pos;
  }
  return NULL;
}

/* Hands the space of the records taken back to every ring and wakes an
 * emitter that waits for it. */
static void give_back(spy_trace *t) {
  for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next) {
    if (atomic_load_explicit(&q->head, memory_order_relaxed) == q->chead)
      continue;
    atomic_store(&q->head, q->chead); /* seq_cst: pairs with space_wait */
    if (atomic_load(&q->space_wait)) {
      atomic_fetch_add(&q->space_word, 1);
      spy__futex_wake((uint32_t *)&q->space_word, 1);
    }
  }
}

/* Bytes published and not yet taken, over every ring. */
static size_t pending_bytes(spy_trace *t) {
  size_t n = 0;
  for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next)
    n += (size_t)(atomic_load_explicit(&q->tail, memory_order_acquire) -
                  q->chead);
  return n;
}

/* Sleeps in `state` until wake_writer wakes the writer (which states an
 * emit wakes: wake_writer) or timeout_ns. */
static void writer_sleep(spy_trace *t, uint32_t state, int64_t timeout_ns) {
  uint32_t w = atomic_load(&t->wr_word);
  atomic_store(&t->wr_state, state); /* seq_cst: pairs with wake_writer */
  int more = atomic_load(&t->seq) > t->wseq;
  /* a flush or the end waits for what this sleep waits for (WAIT_PREP:
   * the set-up's next try), or ends it */
  int waiters = state != WAIT_PREP &&
                (atomic_load(&t->closing) || atomic_load(&t->flush_req));
  if (!(state == WAIT_IDLE && more) && !waiters && !atomic_load(&t->handoff))
    spy__futex_wait((uint32_t *)&t->wr_word, w, timeout_ns);
  atomic_store(&t->wr_state, 0);
}

static void fbuf_free(uint8_t *p, size_t cap);

/* Takes `bytes` of the memory spill bound (emitters and the writer may
 * race for it): 1, or 0 when it is used up. */
static int spill_reserve(spy_trace *t, size_t bytes) {
  size_t cur = atomic_load_explicit(&t->spill_bytes, memory_order_relaxed);
  do
    if (cur + bytes > t->spill_cap)
      return 0;
  while (!atomic_compare_exchange_weak_explicit(
      &t->spill_bytes, &cur, cur + bytes, memory_order_relaxed,
      memory_order_relaxed));
  return 1;
}

/* The writer hands a block to q's emitter. */
static void blk_push_free(tq *q, sblk *b) {
  sblk *old = atomic_load_explicit(&q->sb_free, memory_order_relaxed);
  do
    atomic_store_explicit(&b->next, old, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &q->sb_free, &old, b, memory_order_release, memory_order_relaxed));
  atomic_fetch_add_explicit(&q->sb_avail, 1, memory_order_relaxed);
}

/* A memory spill block the writer has read to its end: reused (on the
 * free list), or freed (a stub, a large record's own). */
static void blk_retire(spy_trace *t, tq *q, sblk *b) {
  if (!b->cap) {
    free(b);
  } else if (sizeof(sblk) + b->cap != t->sb_bytes) {
    atomic_fetch_sub(&t->spill_bytes, sizeof(sblk) + b->cap);
    fbuf_free((uint8_t *)b, sizeof(sblk) + b->cap);
  } else {
    b->rd = 0;
    blk_push_free(q, b);
  }
}

/* The oldest spilled record of q in memory, or NULL. */
static const uint8_t *blk_peek(spy_trace *t, tq *q) {
  for (;;) {
    sblk *b = q->sb_head;
    if (b->rd < atomic_load_explicit(&b->pub, memory_order_acquire))
      return b->data + b->rd;
    sblk *nx = atomic_load_explicit(&b->next, memory_order_acquire);
    /* next set: b is complete; its last records were published before */
    if (!nx || b->rd < atomic_load_explicit(&b->pub, memory_order_acquire))
      return nx ? b->data + b->rd : NULL;
    q->sb_head = nx;
    blk_retire(t, q, b);
  }
}

/* ---- spill files ---------------------------------------------------- */

static uint32_t sf_sum(const void *p, size_t n) {
  uint64_t h[2];
  spy_trace_hash(p, n, h);
  return (uint32_t)h[1];
}

static int pread_all(int fd, void *p, size_t n, uint64_t off) {
  while (n) {
    ssize_t r = pread(fd, p, n, (off_t)off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return r < 0 ? -errno : SPY_ETRUNCATED;
    p = (char *)p + r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

static void sf_path(const char *dir, uint32_t id, char *out, size_t cap) {
  snprintf(out, cap, "%s/spill-%u.bin", dir, id);
}

/* A spill buffer: SF_BUF bytes (reused), or a record's own (larger). */
static uint8_t *fbuf_alloc(size_t cap) {
  void *p = mmap(NULL, big_len(cap), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  return p;
}
static void fbuf_free(uint8_t *p, size_t cap) {
  if (p)
    munmap(p, big_len(cap));
}

/* Faults a fresh buffer in (on the writer thread, ahead of the emitter:
 * a first touch of fresh memory costs microseconds per page). */
static void prefault(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
    return;
#endif
  memset(p, 0, n);
}

/* Reads n appended bytes of q's spill file at off: what is on disk with
 * pread (outside the lock: written bytes do not change), what is not
 * written yet from the buffers that hold it. */
static int file_read(tq *q, uint8_t *out, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    uint64_t at = off + got;
    struct fbuf *kb = &q->w_keep; /* a write of it failed */
    if (kb->p && at >= q->w_off && at < q->w_off + kb->len) {
      size_t k = (size_t)(q->w_off + kb->len - at);
      if (k > n - got)
        k = n - got;
      memcpy(out + got, kb->p + (at - q->w_off), k);
      got += k;
      continue;
    }
    pthread_mutex_lock(&q->f_mu);
    uint64_t disk = q->f_disk;
    if (at >= disk) { /* the buffers hold it, in order */
      uint64_t pos = disk;
      for (int i = 0; i <= q->fq_n && got < n; i++) {
        const uint8_t *bp = i < q->fq_n ? q->fq[i].p : q->f_buf;
        size_t bl = i < q->fq_n ? q->fq[i].len : q->f_blen;
        uint64_t cur = off + got;
        if (cur < pos + bl) {
          size_t skip = (size_t)(cur - pos), k = bl - skip;
          if (k > n - got)
            k = n - got;
          memcpy(out + got, bp + skip, k);
          got += k;
        }
        pos += bl;
      }
      pthread_mutex_unlock(&q->f_mu);
      if (got < n)
        return SPY_EIO; /* beyond what was appended: cannot happen */
      continue;
    }
    pthread_mutex_unlock(&q->f_mu);
    size_t k = n - got;
    if (k > disk - at)
      k = (size_t)(disk - at);
    if (kb->p && at < q->w_off && k > q->w_off - at)
      k = (size_t)(q->w_off - at);
    int rc = pread_all(q->fd, out + got, k, at);
    if (rc < 0)
      return rc;
    got += k;
  }
  return 0;
}

/* Fills in the checksum of each record of a buffer (records back to
 * back: u32 length, u32 checksum, the record): the emitter leaves them
 * to whoever writes the buffer out. */
static void fbuf_sums(uint8_t *p, size_t len) {
  for (size_t at = 0; at + 8 <= len;) {
    uint32_t n;
    memcpy(&n, p + at, 4);
    if (at + 8 + n > len)
      break;
    uint32_t sum = sf_sum(p + at + 8, n);
    memcpy(p + at + 4, &sum, 4);
    at += 8 + (size_t)n;
  }
}

/* Writes len bytes of a buffer at off, checksums first. 0, or -1 when
 * the write failed (a full disk, an error: what it cut is truncated
 * away, so nothing of it counts as on disk). */
static int fbuf_write(tq *q, uint8_t *p, size_t len, uint64_t off, int cut) {
  fbuf_sums(p, len);
  size_t done = 0;
  while (done < len) {
    ssize_t w = pwrite(q->fd, p + done, len - done, (off_t)(off + done));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    done += (size_t)w;
  }
  if (done == len)
    return 0;
  /* cut back what it wrote of it, when nothing lies beyond (the writer's
   * buffer may have the emitter's written after it: the cut record then
   * stays, and spy_trace_recover stops there) */
  if (done && cut && ftruncate(q->fd, (off_t)off) != 0) {
  }
  return -1;
}

/* A buffer written out (under f_mu): it becomes a spare, or goes. */
static void fbuf_done(tq *q, struct fbuf b) {
  if (b.cap == SF_BUF && q->ffree_n < SF_QUEUE + 2)
    q->ffree[q->ffree_n++] = b.p;
  else {
    if (b.cap == SF_BUF)
      q->f_nbuf--;
    fbuf_free(b.p, b.cap);
  }
}

/* Takes q's oldest full buffer off the queue after its write (under
 * f_mu). */
static void fq_pop(tq *q) {
  struct fbuf b = q->fq[0];
  q->fq_n--;
  memmove(q->fq, q->fq + 1, (size_t)q->fq_n * sizeof q->fq[0]);
  q->f_disk += b.len;
  fbuf_done(q, b);
}

/* The writer writes q's full buffers out, oldest first, each taken off
 * the queue and written outside the lock (the emitter goes on appending
 * meanwhile); with `all` also the buffer being filled (under the lock:
 * once per commit). */
static void file_drain(tq *q, int all) {
  pthread_mutex_lock(&q->f_mu);
  /* a spare buffer faulted in here, not on the build thread; before the
   * writes, because it lets go of the lock: the buffer being filled must
   * be written only while no full buffer waits before it, or it would
   * take their place in the file */
  if (!q->ffree_n && q->f_nbuf < SF_QUEUE + 2 && !q->f_bad) {
    q->f_nbuf++;
    pthread_mutex_unlock(&q->f_mu);
    uint8_t *nb = fbuf_alloc(SF_BUF);
    if (nb)
      prefault(nb, SF_BUF);
    pthread_mutex_lock(&q->f_mu);
    if (nb && q->ffree_n < SF_QUEUE + 2)
      q->ffree[q->ffree_n++] = nb;
    else {
      q->f_nbuf--;
      fbuf_free(nb, SF_BUF);
    }
  }
  while (q->fq_n && !q->f_bad) {
    struct fbuf b = q->fq[0];
    uint64_t off = q->f_disk;
    q->fq_n--;
    memmove(q->fq, q->fq + 1, (size_t)q->fq_n * sizeof q->fq[0]);
    q->f_disk += b.len;
    pthread_mutex_unlock(&q->f_mu);
    int bad = fbuf_write(q, b.p, b.len, off, 0);
    pthread_mutex_lock(&q->f_mu);
    if (bad) { /* its bytes stay readable from memory */
      q->f_bad = 1;
      q->w_keep = b;
      q->w_off = off;
      bump(&q->spill_fail, 1);
    } else
      fbuf_done(q, b);
  }
  if (all && q->f_blen && !q->f_bad) {
    if (fbuf_write(q, q->f_buf, q->f_blen, q->f_disk, 1) < 0) {
      q->f_bad = 1;
      bump(&q->spill_fail, 1);
    } else {
      q->f_disk += q->f_blen;
      q->f_blen = 0;
    }
  }
  pthread_mutex_unlock(&q->f_mu);
}

/* The emitter finds the queue of full buffers full (a writer that does
 * not get to run): it writes them out itself (under f_mu), oldest first,
 * then the one it fills. -1 when a write failed. */
static int file_flush_self(tq *q) {
  if (q->f_bad)
    return -1;
  while (q->fq_n) {
    if (fbuf_write(q, q->fq[0].p, q->fq[0].len, q->f_disk, 1) < 0) {
      q->f_bad = 1;
      bump(&q->spill_fail, 1);
      return -1;
    }
    fq_pop(q);
  }
  if (q->f_blen) {
    if (fbuf_write(q, q->f_buf, q->f_blen, q->f_disk, 1) < 0) {
      q->f_bad = 1;
      bump(&q->spill_fail, 1);
      return -1;
    }
    q->f_disk += q->f_blen;
    q->f_blen = 0;
  }
  return 0;
}

/* The next record of q's spill file (in q->rb), or NULL when the file
 * holds nothing more that was published. *len receives its bytes on disk
 * (header included); *bad is set when it fails its checksum (the caller
 * skips it and counts it lost). */
static const uint8_t *file_peek(tq *q, uint64_t *seq, size_t *len, int *bad) {
  uint64_t end = atomic_load_explicit(&q->f_len, memory_order_acquire);
  *bad = 0;
  /* f_len first: 0 until file_open has set up fd and f_rd */
  if (!end || q->f_rd >= end)
    return NULL;
  for (int pass = 0; pass < 3; pass++) {
    uint64_t in = q->f_rd - q->rb_off;
    if (q->f_rd >= q->rb_off && in + 8 <= q->rb_len) {
      uint32_t n, sum;
      memcpy(&n, q->rb + in, 4);
      memcpy(&sum, q->rb + in + 4, 4);
      if (q->f_rd + 8 + n > end) { /* beyond what was published: damaged */
        *len = (size_t)(end - q->f_rd);
        *bad = 1;
        return q->rb;
      }
      if (in + 8 + n <= q->rb_len) {
        const uint8_t *rec = q->rb + in + 8;
        uint32_t rn = 0;
        if (n >= 16)
          memcpy(&rn, rec, 4);
        *len = 8 + (size_t)n;
        /* the checksum is for spy_trace_recover (a record cut by a
         * kill); what this process appended and published is whole, and
         * may not be summed yet (it is when it is written out) */
        (void)sum;
        *bad = n < 16 || rn != n;
        *seq = *bad ? 0 : spy_rd64(rec + 8);
        return rec;
      }
      if (8 + (size_t)n > q->rb_cap) {
        uint8_t *nb = realloc(q->rb, 8 + (size_t)n);
        if (!nb)
          return NULL;
        q->rb = nb;
        q->rb_cap = 8 + (size_t)n;
      }
    }
    if (!q->rb) {
      if (!(q->rb = malloc(SF_READ)))
        return NULL;
      q->rb_cap = SF_READ;
    }
    size_t want = q->rb_cap;
    if (want > end - q->f_rd)
      want = (size_t)(end - q->f_rd);
    if (file_read(q, q->rb, want, q->f_rd) < 0)
      return NULL;
    q->rb_off = q->f_rd;
    q->rb_len = want;
  }
  return NULL;
}

/* Once a queue spills to memory, the writer keeps two fresh blocks
 * faulted in on its free list (within spill_bytes), so the emitter
 * seldom touches fresh memory. */
static void spill_prefault(spy_trace *t) {
  if (!t->sb_bytes)
    return;
  for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next) {
    if (!atomic_load_explicit(&q->spilled, memory_order_relaxed) ||
        atomic_load_explicit(&q->sb_avail, memory_order_relaxed) >= 2 ||
        !spill_reserve(t, t->sb_bytes))
      continue;
    sblk *b = (sblk *)fbuf_alloc(t->sb_bytes);
    if (!b) {
      atomic_fetch_sub(&t->spill_bytes, t->sb_bytes);
      continue;
    }
    prefault(b, t->sb_bytes);
    b->cap = t->sb_bytes - sizeof(sblk);
    b->rd = 0;
    atomic_fetch_add(&t->spill_blocks, 1);
    blk_push_free(q, b);
  }
}

/* The writer writes the spill buffers the emitters filled out (between
 * batches and every 64 records). */
static void files_drain(spy_trace *t) {
  spill_prefault(t);
  if (!atomic_load(&t->file_pending))
    return;
  for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next)
    if (atomic_load_explicit(&q->f_len, memory_order_acquire))
      file_drain(q, 0);
}

/* After a commit: the header's resume offset moves to what the writer has
 * taken (all of it is committed now), and consumed space is punched out. */
static void files_committed(spy_trace *t) {
  for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next) {
    /* f_len first: it publishes what the emitter set up in file_open */
    if (!atomic_load_explicit(&q->f_len, memory_order_acquire))
      continue;
    /* what the emitter gathered goes to disk at least once per commit:
     * a killed process loses at most that much of it */
    file_drain(q, 1);
    if (q->f_rd <= q->f_resume)
      continue;
    uint8_t b[8];
    spy_wr64(b, q->f_rd);
    if (pwrite(q->fd, b, 8, SF_RESUME) == 8)
      q->f_resume = q->f_rd;
    uint64_t upto = q->f_resume & ~(uint64_t)(SF_DATA - 1);
    if (!q->f_punched)
      q->f_punched = SF_DATA;
    if (upto >= q->f_punched + SF_PUNCH) {
      (void)fallocate(q->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      (off_t)q->f_punched, (off_t)(upto - q->f_punched));
      q->f_punched = upto;
    }
  }
}

/* Takes the record numbered t->wseq + 1 into *slot: 1, or 0 when it is
 * not published yet. A record numbered lower is taken too (one the writer
 * gave up on that came late after all: *late is set). *spilled is set
 * when it comes from a spill block (1) or a spill file (2; *flen its bytes
 * there, *bad when damaged: its number is not known). */
static int take_next(spy_trace *t, const uint8_t **slot, tq **from,
                     int *spilled, size_t *flen, int *bad, int *late) {
  uint64_t want = t->wseq + 1, seq = 0;
  *spilled = 0;
  if (atomic_load(&t->file_pending))
    for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
         q = q->next) {
      const uint8_t *rec = file_peek(q, &seq, flen, bad);
      if (rec && (*bad || seq <= want)) {
        *slot = rec;
        *from = q;
        *spilled = 2;
        *late = !*bad && seq < want;
        return 1;
      }
    }
  if (atomic_load_explicit(&t->spill_blocks, memory_order_relaxed))
    for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
         q = q->next) {
      const uint8_t *r = blk_peek(t, q);
      if (r && (seq = spy_rd64(r + 8)) <= want) {
        *slot = r;
        *from = q;
        *spilled = 1;
        *late = seq < want;
        return 1;
      }
    }
  tq *q = t->last;
  if (q) { /* threads emit in runs: try the last ring first */
    uint64_t tail = ring_tail(q);
    const uint8_t *p = peek(q, tail, &seq);
    if (p && seq <= want) {
      *slot = p;
      *from = q;
      *late = seq < want;
      return 1;
    }
  }
  for (q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next) {
    if (q == t->last)
      continue;
    uint64_t tail = ring_tail(q);
    const uint8_t *p = peek(q, tail, &seq);
    if (p && seq <= want) {
      *slot = p;
      *from = q;
      t->last = q;
      *late = seq < want;
      return 1;
    }
  }
  return 0;
}

/* The number t->wseq + 1 was given to an emitter and is not published.
 * Normally its emitter is between the increment and the store, or was
 * preempted there: the writer waits. After GAP_NS (GAP_DAMAGED_NS once a
 * spill file record was unreadable, until the writer catches up: the
 * numbers were likely the lost records') it gives the
 * number up, counted in dropped and reported, so a record that never
 * comes cannot hold the trace and the flushes waiting for it; if it comes
 * after all it is written late (take_next) and counted back. Returns 1
 * when the number was given up on. */
static int gap_skip(spy_trace *t, uint32_t *gaps) {
  uint32_t n = ++*gaps;
  if (n < 64) {
    sched_yield();
    return 0;
  }
  /* a wait may end early (a wake, a flush), and one long wait may be a
   * process stopped (^Z) and continued: both a time and a count */
  uint64_t now = spy__mono_ns();
  if (n == 64)
    t->gap_since = now;
  if (n < 64 + GAP_WAITS ||
      now - t->gap_since < (t->damaged ? GAP_DAMAGED_NS : GAP_NS)) {
    writer_sleep(t, WAIT_GAP, 200000);
    return 0;
  }
  report(t, SPY_EIO,
         "an action was numbered but never queued; counted lost (written "
         "late if it comes)");
  atomic_fetch_add(&t->dropped, 1);
  t->wseq++;
  *gaps = 0;
  return 1;
}

/* Hands one record to the writer, or (SPY_TRACE_DISCARD, a bench knob
 * that isolates the emitting side's cost) only counts it. */
static void take_one(spy_trace *t, const uint8_t *rec, spy_trace_stats *st,
                     tq *q, int from_file) {
  int held = 0;
  if (SPY_TRACE_UNLIKELY(t->discard)) { /* releases as a writer does */
    st->written++;
    if (!from_file) {
      uint32_t len;
      memcpy(&len, rec, 4);
      spy_trace_action a;
      spy_trace_arena_reset(&t->arena);
      if ((held = spy__trace_decode_lent(rec, len, &t->arena, &a, &t->lentv) >=
                      0 &&
                  !t->lentv.lost))
        held_put(t, q);
    }
  } else
    held = process(t, rec, st, from_file ? NULL : q);
  if (!from_file && !held) /* the writer is done with the lent bytes */
    release_lent(q, rec);
}

static void rings_populate(spy_trace *t);

/* Runs the writer's prepare (ops->prepare: the store's slow set-up, kept
 * off spy_trace_create so the build does not wait for it): 1 when the
 * loop may take records (the store is set up, or prep_given_up: they are
 * counted lost), 0 to wait until t->prep_next_ns. A failure that may pass
 * (SPY_EAGAIN, SPY_ECONNREFUSED: the server away or busy) is tried again,
 * backing off from 50 ms to 1 s; once a flush (until) or the session's
 * end has waited retry_ms for it, the records queued are taken and
 * counted lost, so no wait hangs, and the set-up is tried again for the
 * later ones (as a writer drops the batches beyond its retry budget while
 * its server is away). Any other failure is for good: every action is
 * counted lost. */
static int writer_prepare(spy_trace *t, uint64_t until) {
  uint64_t now = spy__mono_ns();
  int waited_for =
      until || atomic_load(&t->closing) || atomic_load(&t->flush_req);
  if (t->prep_failed)
    return 1;
  if (now >= t->prep_next_ns) {
    int rc = t->ops->prepare(t->wstate);
    if (rc == 0) {
      t->prepared = 1;
      t->prep_given_up = 0;
      return 1;
    }
    if (rc != SPY_EAGAIN && rc != SPY_ECONNREFUSED) {
      report(t, rc,
             "the store could not be set up: the session's actions are lost");
      t->prep_given_up = t->prep_failed = 1;
      return 1;
    }
    report(t, rc, "setting the store up failed; retrying");
    t->prep_backoff_ns =
        t->prep_backoff_ns ? t->prep_backoff_ns * 2 : (uint64_t)50000000;
    if (t->prep_backoff_ns > 1000000000u)
      t->prep_backoff_ns = 1000000000u;
    now = spy__mono_ns();
    t->prep_next_ns = now + t->prep_backoff_ns;
  }
  if (!waited_for) {
    t->prep_wait_since = 0;
    t->prep_given_up = 0; /* later actions wait for the set-up again */
  } else if (!t->prep_wait_since)
    t->prep_wait_since = now;
  else if (now - t->prep_wait_since >= (uint64_t)t->retry_ms * 1000000u) {
    if (!t->prep_given_up)
      report(t, SPY_EIO,
             "the store could not be set up in time: the actions queued "
             "are lost");
    t->prep_given_up = 1;
  }
  return t->prep_given_up;
}

/* A record given up on may have come late (only looked for then). */
static int late_waiting(spy_trace *t) {
  if (!atomic_load_explicit(&t->dropped, memory_order_relaxed))
    return 0;
  const uint8_t *slot;
  tq *q;
  int spilled, bad = 0, late = 0;
  size_t flen;
  return take_next(t, &slot, &q, &spilled, &flen, &bad, &late) && (late || bad);
}

/* The writer loop, on whichever thread runs it: returns when the session
 * closes and everything is written, when the thread is asked to hand the
 * loop over (t->handoff), or (until > 0) once every action up to `until`
 * is committed. */
static void writer_loop(spy_trace *t, uint64_t until) {
  uint32_t uncommitted = t->uncommitted;
  uint64_t last_commit = t->last_commit;
  for (;;) {
    t->uncommitted = uncommitted;
    t->last_commit = last_commit;
    if (atomic_load(&t->handoff) || (until && t->committed_seq >= until))
      return;
    if (SPY_TRACE_UNLIKELY(!t->prepared) && !writer_prepare(t, until)) {
      /* the records wait in their queues (and spill) meanwhile; the
       * sleep ends early only for a forced wake (a handoff, a flush, an
       * emitter out of room), not for each emit: an emitter's wake is a
       * system call on the build's thread */
      int64_t wait = (int64_t)(t->prep_next_ns - spy__mono_ns());
      if (wait > 0)
        writer_sleep(t, WAIT_PREP, wait);
      continue;
    }
    if (atomic_load(&t->seq) == t->wseq && !late_waiting(t)) { /* caught up */
      t->damaged = 0; /* every number is accounted for */
      if (uncommitted == 0 && atomic_exchange(&t->flush_req, 0)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->committed_cv);
        pthread_mutex_unlock(&t->mu);
      }
      if (uncommitted == 0) {
        if (atomic_load(&t->closing))
          break;
        writer_sleep(t, WAIT_IDLE, 1000000000);
        /* let a batch gather (bounded latency) unless it is large */
        if (!atomic_load(&t->closing) && !atomic_load(&t->flush_req) &&
            pending_bytes(t) < t->qcap / 8)
          writer_sleep(t, WAIT_GATHER, GATHER_NS);
        continue;
      }
      /* caught up with a batch open: commit it when it is old enough, so
       * a slow build's trickle makes one commit per COMMIT_NS, not one per
       * action (each commit of an SQL store writes whole pages) */
      uint64_t since = spy__mono_ns() - last_commit;
      if (since < COMMIT_NS && !atomic_load(&t->closing) &&
          !atomic_load(&t->flush_req)) {
        writer_sleep(t, WAIT_GATHER, (int64_t)(COMMIT_NS - since));
        continue;
      }
    }
    spy_trace_stats st = {0};
    uint64_t busy0 = spy__mono_ns(), cpu0 = spy__thread_cpu_ns();
    spy__wallclock_tend(&t->clock, busy0);
    rings_populate(t);
    files_drain(t);
    uint32_t n = 0, gaps = 0;
    /* the numbers given so far, loaded again only when the writer has
     * taken them all (the counter's line is the emitters') */
    uint64_t given = atomic_load(&t->seq);
    /* a thread waiting for the trace commits in larger batches: each
     * commit of an SQL store writes every page it dirtied (the sources
     * key's pages are all over), and nothing else runs meanwhile */
    uint32_t batch = t->hurried ? t->batch * 4 : t->batch;
    while (n < batch &&
           (t->wseq < given || (given = atomic_load(&t->seq)) > t->wseq ||
            late_waiting(t))) {
      const uint8_t *slot;
      tq *q;
      int spilled, bad = 0, late = 0;
      size_t flen = 0;
      if (!take_next(t, &slot, &q, &spilled, &flen, &bad, &late)) {
        if (t->wseq < atomic_load(&t->seq))
          gap_skip(t, &gaps);
        else /* only a late record was looked for */
          break;
        continue;
      }
      gaps = 0;
      if (spilled == 2) { /* from the spill file */
        if (bad) {
          report(t, SPY_EIO, "a spill file record is damaged; lost");
          t->damaged = 1;
        } else
          take_one(t, slot, &st, q, 1);
        q->f_rd += flen;
        atomic_store_explicit(&q->f_taken, q->f_rd, memory_order_release);
        atomic_fetch_sub(&t->file_pending, 1);
        if (bad)
          continue;         /* its number, not known, is waited for as a gap */
      } else if (spilled) { /* the record becomes the list's stub */
        uint32_t rn;
        memcpy(&rn, slot, 4);
        take_one(t, slot, &st, q, 0);
        q->sb_head->rd += ((size_t)rn + 7u) & ~(size_t)7u;
      } else {
        uint32_t m;
        memcpy(&m, slot, 4);
        const uint8_t *rec = slot;
        uint8_t *heap = NULL;
        if (m == MARK_HEAP) {
          memcpy(&heap, slot + 8, sizeof heap);
          rec = heap;
        }
        take_one(t, rec, &st, q, 0);
        if (heap) {
          uint32_t hn;
          memcpy(&hn, heap, 4);
          big_free(heap, hn);
        }
        q->chead += m == MARK_HEAP ? HEAP_REC : ((size_t)m + 3u) & ~(size_t)3u;
      }
      if (SPY_TRACE_UNLIKELY(late)) /* given up on, and here after all */
        atomic_fetch_sub(&t->dropped, 1);
      else
        t->wseq++;
      n++;
      if (t->delay_us)
        sleep_us(t->delay_us);
      if ((n & 63) == 0) { /* hand space back early: an emitter may wait */
        give_back(t);
        files_drain(t);
        /* a writer that is behind still commits every COMMIT_NS: what a
         * killed process loses stays bounded in time */
        if (spy__mono_ns() - last_commit >= COMMIT_NS ||
            atomic_load(&t->handoff))
          break;
      }
    }
    give_back(t);
    uint64_t now = spy__mono_ns();
    pthread_mutex_lock(&t->mu);
    t->st.written += st.written;
    t->st.sources += st.sources;
    t->st.sources_dup += st.sources_dup;
    t->st.source_bytes += st.source_bytes;
    t->st.saved_bytes += st.saved_bytes;
    pthread_mutex_unlock(&t->mu);
    /* commit when asked to, or the batch is full or old: a writer that is
     * behind commits per batch_actions, not per round */
    uncommitted += n;
    if (uncommitted &&
        (uncommitted >= batch || now - last_commit >= COMMIT_NS ||
         atomic_load(&t->flush_req) || atomic_load(&t->closing))) {
      int rc =
          t->ops->commit && !t->prep_given_up ? t->ops->commit(t->wstate) : 0;
      if (rc < 0)
        report(t, rc, "committing a batch failed");
      else if (t->spill_dir)
        files_committed(t);
      held_drop_all(t);
      uncommitted = 0;
      last_commit = spy__mono_ns();
      pthread_mutex_lock(&t->mu);
      t->committed_seq = t->wseq;
      pthread_cond_broadcast(&t->committed_cv);
      t->st.writer_ns += spy__mono_ns() - busy0;
      t->st.writer_cpu_ns += spy__thread_cpu_ns() - cpu0;
      pthread_mutex_unlock(&t->mu);
    } else {
      pthread_mutex_lock(&t->mu);
      t->st.writer_ns += spy__mono_ns() - busy0;
      t->st.writer_cpu_ns += spy__thread_cpu_ns() - cpu0;
      pthread_mutex_unlock(&t->mu);
    }
  }
  t->uncommitted = 0;
  held_drop_all(t);
  pthread_mutex_lock(&t->mu);
  t->committed_seq = t->wseq;
  pthread_cond_broadcast(&t->committed_cv);
  pthread_mutex_unlock(&t->mu);
}

/* ---- the trace threads' share of the CPUs ------------------------------
 * The build must not wait for its trace, and on a machine with few cores
 * it does when the trace's threads take the cores it needs: on 2 CPUs the
 * build, the writer and the packer are three runnable threads on two
 * cores. So the packer runs inside the writer on <= 2 CPUs (one trace
 * thread: the build keeps a core), and the writer thread runs at a lower
 * priority (nice + TRACE_NICE): beside the build it gives way, on an idle
 * core it runs at full speed. A low priority alone would starve the trace
 * beside other busy programs (a test suite beside `yes` loops), so a
 * thread that waits for the trace (spy_trace_flush, spy_trace_destroy)
 * takes the writer loop over and runs it at its own priority, then (a
 * flush) starts a fresh writer thread. While nobody waits, a starved
 * writer falls behind and the queues spill: the build runs on, nothing
 * is lost. */
#define TRACE_NICE 5

static int cpus_usable(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int spy__trace_cpus(void) { return cpus_usable(); }

int spy__trace_pack_inline(void) {
  const char *e = getenv("SPY_TRACE_PACK_INLINE");
  if (e && *e)
    return atoi(e) != 0;
  return cpus_usable() <= 2;
}

static void *writer_main(void *arg) {
  spy_trace *t = arg;
  pthread_setname_np(pthread_self(), "spy-trace-wr");
  if (t->nice > 0) { /* relative to the thread that made it */
    pid_t tid = gettid();
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, (id_t)tid);
    if (cur != -1 || errno == 0)
      setpriority(PRIO_PROCESS, (id_t)tid,
                  cur + t->nice > 19 ? 19 : cur + t->nice);
  }
  writer_loop(t, 0);
  return NULL;
}

/* Starts the writer thread (the caller's priority, lowered in it). */
static int writer_start(spy_trace *t) {
  atomic_store(&t->handoff, 0);
  t->thread_started = pthread_create(&t->thread, NULL, writer_main, t) == 0;
  return t->thread_started ? 0 : SPY_EAGAIN;
}

static void wake_writer(spy_trace *t, int force, size_t used, size_t cap);

/* Stops the writer thread at its next batch boundary (under run_mu): the
 * caller then runs the loop itself. */
static void writer_stop(spy_trace *t) {
  if (!t->thread_started)
    return;
  atomic_store(&t->handoff, 1); /* seq_cst: pairs with writer_sleep */
  wake_writer(t, 1, 0, 1);
  pthread_join(t->thread, NULL);
  t->thread_started = 0;
  atomic_store(&t->handoff, 0);
}

/* ---- emit ------------------------------------------------------------------
 */

/* calloc for the types with cache-line members. */
static void *zalloc_lines(size_t n) {
  void *p = aligned_alloc(LINE, n);
  if (p)
    memset(p, 0, n);
  return p;
}

static tq *tq_new(size_t cap) {
  tq *q = zalloc_lines(sizeof *q);
  if (!q)
    return NULL;
  q->cap = cap;
  q->fd = -1;
  pthread_mutex_init(&q->f_mu, NULL);
  q->ring = big_alloc(cap);
  q->sb_head = q->sb_tail = calloc(1, sizeof(sblk));
  if (!q->ring || !q->sb_head) {
    big_free(q->ring, cap);
    free(q->sb_head);
    pthread_mutex_destroy(&q->f_mu);
    free(q);
    return NULL;
  }
  /* its pages are faulted in by the writer thread (ring_populate), not
   * on the emitting thread */
  return q;
}

/* The writer faults a new ring's pages in, once, so the emitting thread
 * does not (2,048 faults for the default 8 MiB: milliseconds on a VM).
 * MADV_POPULATE_WRITE only maps the pages: bytes the emitter has already
 * written stay. Without it (Linux < 5.14) the emitter faults them. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static void rings_populate(spy_trace *t) {
  for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next)
    if (!q->populated) {
      q->populated = 1;
      if (q->cap >= BIG_MIN) /* mapped on its own: page-aligned */
        madvise(q->ring, big_len(q->cap), MADV_POPULATE_WRITE);
    }
}

/* pthread key destructor: the thread is gone, its ring is free to reuse. */
static void tq_release(void *p) {
  atomic_store_explicit(&((tq *)p)->owned, 0, memory_order_release);
}

/* The calling thread's ring: a free one, or a new one (once per thread). */
static tq *claim_queue(spy_trace *t) {
  pthread_mutex_lock(&t->qmu);
  tq *q = atomic_load_explicit(&t->queues, memory_order_relaxed);
  for (; q; q = q->next) {
    int free_ = 0;
    if (atomic_compare_exchange_strong_explicit(
            &q->owned, &free_, 1, memory_order_acquire, memory_order_relaxed))
      break;
  }
  if (!q && (q = tq_new(t->qcap))) {
    q->owned = 1;
    q->id = atomic_fetch_add(&t->nqueues, 1);
    q->next = atomic_load_explicit(&t->queues, memory_order_relaxed);
    atomic_store_explicit(&t->queues, q, memory_order_release);
  }
  pthread_mutex_unlock(&t->qmu);
  if (q && pthread_setspecific(t->key, q) != 0) {
    tq_release(q);
    q = NULL;
  }
  return q;
}

/* Makes an application kind known to the writer before its first record;
 * SPY_ERANGE when the session already knows SPY_TRACE_MAX_APP_KINDS. */
static int app_kind(spy_trace *t, const spy_trace_kind *kind) {
  uint32_t n = atomic_load_explicit(&t->n_app, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (t->app_kinds[i] == kind)
      return 0;
  int rc = 0;
  pthread_mutex_lock(&t->qmu);
  n = atomic_load_explicit(&t->n_app, memory_order_relaxed);
  uint32_t i = 0;
  while (i < n && t->app_kinds[i] != kind)
    i++;
  if (i == n) {
    if (n < SPY_TRACE_MAX_APP_KINDS) {
      t->app_kinds[n] = kind;
      atomic_store_explicit(&t->n_app, n + 1, memory_order_release);
    } else
      rc = SPY_ERANGE;
  }
  pthread_mutex_unlock(&t->qmu);
  return rc;
}

/* After an emit's seq_cst increment of t->seq: that and this seq_cst load
 * pair with writer_sleep's store of its state and load of t->seq, so a
 * writer going to sleep either sees the new number or is woken here. */
static void wake_writer(spy_trace *t, int force, size_t used, size_t cap) {
  uint32_t s = atomic_load(&t->wr_state);
  if (s == 0 || (s == WAIT_GATHER && !force && used < cap / 8) ||
      (s == WAIT_PREP && !force))
    return;
  if (atomic_compare_exchange_strong(&t->wr_state, &s, 0)) {
    atomic_fetch_add(&t->wr_word, 1);
    spy__futex_wake((uint32_t *)&t->wr_word, 1);
  }
}

/* Waits until the writer hands space of q back (head moves from `head`). */
static void wait_space(spy_trace *t, tq *q, uint64_t head) {
  atomic_thread_fence(memory_order_seq_cst); /* no increment came before */
  wake_writer(t, 1, 0, 1);
  uint32_t w = atomic_load(&q->space_word);
  atomic_store(&q->space_wait, 1); /* seq_cst: pairs with give_back */
  if (atomic_load(&q->head) == head)
    spy__futex_wait((uint32_t *)&q->space_word, w, 10000000);
  atomic_store(&q->space_wait, 0);
}

/* A hook call's Start record takes its time now, as its emit ends (the
 * header's time, after length, id and seq). */
static inline void late_ts(spy_trace *t, uint8_t *rec, int late) {
  if (late)
    spy_wr64(rec + 16, spy__wallclock_us(&t->clock));
}

/* A block for a spilled record of `slot` bytes (a block handed back, a
 * new one within spill_bytes, or for a large record one of its own),
 * linked after q's last; NULL when memory is used up. */
static sblk *blk_next(spy_trace *t, tq *q, size_t slot) {
  sblk *b = NULL;
  size_t bytes = t->sb_bytes;
  if (bytes && sizeof(sblk) + slot <= bytes) {
    if (!q->sb_spare)
      q->sb_spare =
          atomic_exchange_explicit(&q->sb_free, NULL, memory_order_acquire);
    if ((b = q->sb_spare)) {
      q->sb_spare = atomic_load_explicit(&b->next, memory_order_relaxed);
      atomic_fetch_sub_explicit(&q->sb_avail, 1, memory_order_relaxed);
    }
  } else
    bytes = sizeof(sblk) + slot;
  if (!b) {
    if (!t->sb_bytes || !spill_reserve(t, bytes))
      return NULL;
    if (!(b = (sblk *)fbuf_alloc(bytes))) {
      atomic_fetch_sub(&t->spill_bytes, bytes);
      return NULL;
    }
    b->cap = bytes - sizeof(sblk);
    atomic_fetch_add(&t->spill_blocks, 1);
  }
  atomic_store_explicit(&b->next, NULL, memory_order_relaxed);
  atomic_store_explicit(&b->pub, 0, memory_order_relaxed);
  atomic_store_explicit(&q->sb_tail->next, b, memory_order_release);
  q->sb_tail = b;
  q->sb_w = 0;
  return b;
}

/* Creates q's spill file with its header block. 0 or a negative code. */
static int file_open(spy_trace *t, tq *q) {
  /* postgres: <cwd>/.spyglass/<session> is made for the spill alone;
   * whatever of it this session made goes when it ends (destroy) */
  pthread_mutex_lock(&t->qmu); /* queues of two threads may spill */
  if (!(t->ops->flags & SPY_TRACE_WRITER_MKDIR) && !t->spill_parent_made) {
    char up[4200];
    snprintf(up, sizeof up, "%s", t->spill_dir);
    char *sl = strrchr(up, '/');
    struct stat sb;
    if (sl && sl != up) {
      *sl = 0;
      t->spill_parent_made = stat(up, &sb) != 0 ? 1 : -1;
    }
  }
  int rc = spy__mkdirs(t->spill_dir);
  pthread_mutex_unlock(&t->qmu);
  if (rc < 0)
    return rc;
  char path[4200];
  sf_path(t->spill_dir, q->id, path, sizeof path);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return -errno;
  uint8_t h[SF_DATA];
  memset(h, 0, sizeof h);
  memcpy(h, SF_MAGIC, 8);
  uint32_t ver = 1, sl = (uint32_t)strlen(t->session_id);
  memcpy(h + 8, &ver, 4);
  memcpy(h + 12, &q->id, 4);
  spy_wr64(h + SF_RESUME, SF_DATA);
  spy_wr64(h + 24, spy__wall_us());
  if (sl > 200)
    sl = 200;
  memcpy(h + 32, &sl, 4);
  memcpy(h + 36, t->session_id, sl);
  if (pwrite(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
    rc = errno ? -errno : SPY_EIO;
    close(fd);
    unlink(path);
    return rc;
  }
  q->fd = fd;
  q->f_wr = SF_DATA;
  q->f_disk = SF_DATA;
  q->f_resume = SF_DATA;
  q->f_rd = SF_DATA;
  atomic_store_explicit(&q->f_taken, SF_DATA, memory_order_relaxed);
  atomic_store_explicit(&q->f_len, SF_DATA, memory_order_release);
  return 0;
}

/* Room for k more full buffers in q's queue (under f_mu): up to
 * SF_QUEUE; beyond, the emitter writes them out itself. 0, or -1 (a
 * write failed: the caller waits for ring space). */
static int fq_room(tq *q, int k) {
  return q->fq_n + k <= SF_QUEUE ? 0 : file_flush_self(q);
}

/* Memory is used up (or q is in file mode): appends the record to q's
 * spill file: encoded once, straight into the buffer the queue fills
 * (reused 2 MiB buffers); a full buffer is queued for the writer thread,
 * which writes it out (checksums and all) at its next batch, so the
 * build thread makes no write. Only when SF_QUEUE full buffers wait (a
 * writer that does not run) does the emitter write them itself. Returns
 * 0, a negative code, or 1 when the file cannot take it (no file, its
 * bound reached, a write failed): the caller waits for ring space. */
static int file_emit(spy_trace *t, tq *q, const spy_trace_kind *kind,
                     const void *act, uint64_t ts, uint32_t build, int late,
                     spy__lend *ld) {
  if (!t->spill_dir)
    return 1;
  /* the file is read by another process (recovery): its records are the
   * public form, measured here — the queues' form may be smaller (no kind
   * name) or larger; lent payloads go in as bytes, released by the
   * caller */
  int64_t n = spy_trace_encode(kind, act, 0, ts, build, NULL, 0);
  if (n < 0)
    return (int)n;
  size_t need = (size_t)n;
  if (q->fd < 0) {
    if (q->f_nofile) /* the file could not be made */
      return 1;
    int rc = file_open(t, q);
    if (rc < 0) {
      q->f_nofile = 1;
      bump(&q->spill_fail, 1);
      return 1;
    }
  }
  pthread_mutex_lock(&q->f_mu);
  int rc = 1;
  uint64_t live =
      q->f_wr - atomic_load_explicit(&q->f_taken, memory_order_acquire);
  size_t total = 8 + need;
  if (q->f_bad || live + total > t->spill_file_cap)
    goto out;
  /* the buffer being filled is queued when the record does not fit (a
   * large record gets a buffer of its own, queued after it) */
  if (q->f_blen && (q->f_blen + total > SF_BUF || total > SF_BUF)) {
    if (fq_room(q, 1 + (total > SF_BUF)) < 0)
      goto out;
    if (q->f_blen) {
      q->fq[q->fq_n++] = (struct fbuf){q->f_buf, q->f_blen, SF_BUF};
      q->f_buf = NULL;
      q->f_blen = 0;
    }
  }
  uint8_t *at;
  if (total > SF_BUF) {
    if (fq_room(q, 1) < 0)
      goto out;
    if (!(at = fbuf_alloc(total)))
      goto out;
  } else {
    if (!q->f_buf) {
      if (q->ffree_n)
        q->f_buf = q->ffree[--q->ffree_n];
      else if ((q->f_buf = fbuf_alloc(SF_BUF)))
        q->f_nbuf++;
      else
        goto out;
    }
    at = q->f_buf + q->f_blen;
  }
  spy_trace_encode(kind, act, 0, ts, build, at + 8, need);
  late_ts(t, at + 8, late);
  uint64_t seq = atomic_fetch_add(&t->seq, 1) + 1;
  spy_wr64(at + 16, seq);
  uint32_t hdr[2] = {(uint32_t)need, 0}; /* summed when written out */
  memcpy(at, hdr, 8);
  if (total > SF_BUF)
    q->fq[q->fq_n++] = (struct fbuf){at, total, total};
  else
    q->f_blen += total;
  rc = 0;
  q->f_wr += total;
  atomic_fetch_add(&t->file_pending, 1); /* before it can be seen */
  atomic_store_explicit(&q->f_len, q->f_wr, memory_order_release);
  bump(&q->spilled_disk, 1);
  bump(&q->spilled_bytes, total);
  q->f_mode = 1;
  ld->on = 0;
out:
  pthread_mutex_unlock(&q->f_mu);
  if (rc)
    return rc;
  bump(&q->emitted, 1);
  bump(&q->spilled, 1);
  bump(&q->queued_bytes, (uint64_t)need);
  wake_writer(t, 1, 0, 1);
  return 0;
}

/* A record that references lent payloads is published. */
static inline void lent_taken(tq *q, const spy__lend *ld) {
  if (ld->on && ld->bytes) {
    q->lent_owner = ld->owner;
    q->lent_out += ld->held;
    bump(&q->lent_bytes, ld->bytes);
  }
}

/* The ring is full: encodes the action into q's memory spill block, or
 * beyond the memory bound into q's spill file. need: the record's size
 * when known, else 0. Returns 0, a negative code, or 1 when
 * both bounds are used up (the caller waits for ring space). */
static int spill_emit(spy_trace *t, tq *q, const spy_trace_kind *kind,
                      const void *act, uint64_t ts, uint32_t build, int late,
                      int64_t need, spy__lend *ld) {
  ld->owner = q->lent_owner;
  if (!need) /* not encoded yet (an attempt in the ring knows it) */
    need = spy__trace_encode_lend(kind, act, 0, ts, build, NULL, 0, ld);
  if (need < 0)
    return (int)need;
  size_t slot = ((size_t)need + 7u) & ~(size_t)7u;
  sblk *b = q->sb_tail;
  if (q->f_mode || (b->cap - q->sb_w < slot && !(b = blk_next(t, q, slot))))
    return file_emit(t, q, kind, act, ts, build, late, ld);
  uint8_t *at = b->data + q->sb_w;
  ld->owner = q->lent_owner;
  spy__trace_encode_lend(kind, act, 0, ts, build, at, (size_t)need, ld);
  lent_taken(q, ld);
  late_ts(t, at, late);
  uint64_t seq = atomic_fetch_add(&t->seq, 1) + 1;
  spy_wr64(at + 8, seq);
  q->sb_w += slot;
  atomic_store_explicit(&b->pub, q->sb_w, memory_order_release);
  bump(&q->emitted, 1);
  bump(&q->spilled, 1);
  bump(&q->queued_bytes, (uint64_t)need);
  wake_writer(t, 1, 0, 1);
  return 0;
}

/* Room to lend more of the application's bytes: lend_cap bounds what
 * the writer has not released yet (its count loaded again only when the
 * bound seems reached, so the writer's line stays in its cache). */
static int lend_room(spy_trace *t, tq *q) {
  if (q->lent_out - q->lent_seen < t->lend_cap)
    return 1;
  q->lent_seen = atomic_load_explicit(&q->lent_back, memory_order_relaxed);
  return q->lent_out - q->lent_seen < t->lend_cap;
}

static int emit_queued(spy_trace *t, tq *q, const spy_trace_kind *kind,
                       const void *act, spy__lend *ld);

/* The emitting thread's queue of the session it emitted into last: a
 * thread-local read instead of pthread_getspecific's lookup (~20
 * instructions of an emit's ~600). gen tells sessions apart (a new one
 * may get a freed one's address); a queue is given back only when its
 * thread ends (the key's destructor) or its session does. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
  uint64_t gen;
  tq *q;
} tls_q;

int spy_trace_emit(spy_trace *t, const spy_trace_kind *kind, const void *act) {
  if (!t || !t->hot.enabled)
    return 0;
  if (!kind)
    return SPY_EINVAL;
  int rc = SPY_ECLOSED;
  spy__lend ld = {0, NULL, 0, 0};
  tq *q = NULL;
  if (!atomic_load_explicit(&t->closing, memory_order_relaxed)) {
    if (__builtin_expect(tls_q.gen == t->gen, 1))
      q = tls_q.q;
    else if ((q = pthread_getspecific(t->key)) || (q = claim_queue(t))) {
      tls_q.gen = t->gen;
      tls_q.q = q;
    }
    rc = q ? 0 : SPY_ENOMEM;
  }
  if (rc == 0 && kind->id == 0)
    rc = app_kind(t, kind);
  if (rc == 0) {
    ld.on = lend_room(t, q);
    rc = emit_queued(t, q, kind, act, &ld);
  }
  /* lent payloads the queue does not reference (copied, or not queued)
   * are the caller's again */
  if ((rc < 0 || !ld.on) && spy__trace_release_act(kind, act) && rc == 0)
    bump(&q->lent_copied, 1);
  return rc;
}

/* Queues the action in q: its ring, else its memory spill, else its spill
 * file, else waits for ring space. *lend: lent payloads may be referenced
 * (cleared when they were copied). */
static int emit_queued(spy_trace *t, tq *q, const spy_trace_kind *kind,
                       const void *act, spy__lend *ld) {
  uint32_t build = atomic_load_explicit(&t->cur_build, memory_order_relaxed);
  /* a hook call's duration is End's time minus Start's: End's is taken
   * as the emit begins, Start's once the record is encoded (after any
   * wait or spill), just before it is published, so the tracer's own
   * work lies outside the measured call */
  int late = kind->role == SPY_ROLE_HOOK_START;
  /* one clock read per emit: a Start's is its late one (late_ts) */
  uint64_t ts = late ? 0 : spy__wallclock_us(&t->clock);
  if (t->tap.gate &&
      (__atomic_load_n(t->tap.gate, __ATOMIC_RELAXED) & t->tap.mask)) {
    if (late)
      ts = spy__wallclock_us(&t->clock);
    t->tap.action(t->tap.ctx, kind, act, ts, build);
  }
  if (SPY_TRACE_UNLIKELY(q->f_mode)) {
    /* the queue spills to its file until the writer has read it all */
    if (atomic_load_explicit(&q->f_taken, memory_order_acquire) == q->f_wr)
      q->f_mode = 0;
    else {
      int rc = spill_emit(t, q, kind, act, ts, build, late, 0, ld);
      if (rc <= 0)
        return rc;
      q->f_mode = 0; /* the file takes no more: the ring, waiting */
    }
  }
  uint64_t tail = q->ptail;
  uint64_t head = atomic_load_explicit(&q->head, memory_order_acquire);
  uint8_t *heap = NULL;
  int64_t need = 0;
  size_t slot = 0, pos;
  uint64_t w0 = 0;
  for (;;) {
    pos = (size_t)(tail & (q->cap - 1));
    size_t contig = q->cap - pos, space = q->cap - (size_t)(tail - head);
    size_t room = contig < space ? contig : space;
    if (!heap) {
      ld->owner = q->lent_owner;
      need = spy__trace_encode_lend(kind, act, 0, ts, build, q->ring + pos,
                                    room, ld);
      if (need < 0)
        return (int)need;
      slot = ((size_t)need + 3u) & ~(size_t)3u;
      if (slot <= room)
        break; /* encoded in place: the common case */
      if (slot > q->cap / 4) {
        if (!(heap = big_alloc((size_t)need)))
          return SPY_ENOMEM;
        ld->owner = q->lent_owner;
        spy__trace_encode_lend(kind, act, 0, ts, build, heap, (size_t)need, ld);
        slot = HEAP_REC;
        continue;
      }
    } else if (slot <= room)
      break;
    if (contig < slot && space >= contig + slot) {
      /* too little before the end: mark it, start again at offset 0 */
      uint32_t z = MARK_WRAP;
      memcpy(q->ring + pos, &z, 4);
      tail += contig;
      continue;
    }
    if (!w0) {
      int rc = spill_emit(t, q, kind, act, ts, build, late, need, ld);
      if (rc <= 0) {
        big_free(heap, (size_t)need);
        return rc;
      }
      w0 = spy__mono_ns();
      bump(&q->waits, 1);
    }
    wait_space(t, q, head);
    head = atomic_load_explicit(&q->head, memory_order_acquire);
  }
  if (w0)
    bump(&q->wait_ns, spy__mono_ns() - w0);
  uint8_t *at = q->ring + pos;
  if (heap) {
    uint32_t m = MARK_HEAP;
    memcpy(at, &m, 4);
    memcpy(at + 8, &heap, sizeof heap);
  }
  late_ts(t, heap ? heap : at, late);
  uint64_t seq = atomic_fetch_add(&t->seq, 1) + 1;
  spy_wr64((heap ? heap : at) + 8, seq);
  q->ptail = tail + slot;
  atomic_store_explicit(&q->tail, q->ptail, memory_order_release);
  lent_taken(q, ld);
  bump(&q->emitted, 1);
  bump(&q->queued_bytes, (uint64_t)need);
  /* wake the writer once when work appears, and once more when a
   * gathering batch grows large; not per action */
  wake_writer(t, 0, (size_t)(q->ptail - head), q->cap);
  return 0;
}

int spy_trace_set_tap(spy_trace *t, const spy_trace_tap *tap) {
  if (!t)
    return SPY_EINVAL;
  t->tap = tap ? *tap : (spy_trace_tap){0};
  return 0;
}

/* Tells the writer a thread waits for the trace (on) or no longer does. */
static void hurry(spy_trace *t, int on) {
  t->hurried = on;
  if (t->ops->hurry && t->wstate)
    t->ops->hurry(t->wstate, on);
}

int spy_trace_flush(spy_trace *t) {
  if (!t || !t->hot.enabled)
    return 0;
  uint64_t want = atomic_load(&t->seq);
  if (t->nice > 0 && pthread_mutex_trylock(&t->run_mu) == 0) {
    /* the low-priority writer's work runs here, at the caller's priority
     * (a second flusher waits for this one's commits below) */
    pthread_mutex_lock(&t->mu);
    int behind = t->committed_seq < want;
    pthread_mutex_unlock(&t->mu);
    if (behind && t->ever_started && !atomic_load(&t->closing)) {
      writer_stop(t);
      atomic_store(&t->flush_req, 1);
      hurry(t, 1);
      writer_loop(t, want);
      hurry(t, 0);
      if (writer_start(t) < 0)
        report(t, SPY_EAGAIN,
               "cannot restart the writer thread; the trace "
               "is written when the session is flushed or "
               "ends");
    }
    pthread_mutex_unlock(&t->run_mu);
  }
  pthread_mutex_lock(&t->mu);
  while (t->committed_seq < want && !atomic_load(&t->closing)) {
    atomic_store(&t->flush_req, 1);
    wake_writer(t, 1, 0, 1);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 50000000; /* re-asks: a wake may race with a sleep */
    if (dl.tv_nsec >= 1000000000) {
      dl.tv_sec++;
      dl.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&t->committed_cv, &t->mu, &dl);
  }
  int rc = t->committed_seq >= want ? 0 : SPY_ECLOSED;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int spy_trace_build_begin(spy_trace *t) {
  if (!t || !t->hot.enabled)
    return 0;
  uint32_t b = atomic_fetch_add(&t->builds, 1) + 1;
  atomic_store(&t->cur_build, b);
  int rc = spy_emit_build_start(t, &(spy_act_build_start){0});
  return rc < 0 ? rc : (int)b;
}

int spy_trace_build_end(spy_trace *t) {
  if (!t || !t->hot.enabled)
    return 0;
  return spy_emit_build_end(t, &(spy_act_build_end){0});
}

/* ---- lifecycle
 * ---------------------------------------------------------------- */

static char *dupstr(const char *s) { return s ? strdup(s) : NULL; }

static void make_session_id(spy_trace *t, char out[64]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t seed[3] = {(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                      (uint64_t)getpid(), (uint64_t)(uintptr_t)t};
  uint64_t h[2];
  spy_trace_hash(seed, sizeof seed, h);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  snprintf(out, 64, "%04d%02d%02d-%02d%02d%02d-%08x", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           (unsigned)h[1]);
}

int spy_trace_create(spy_trace **out, const spy_trace_desc *desc) {
  if (!out)
    return SPY_EINVAL;
  *out = NULL;
  spy_trace_desc d = desc ? *desc : (spy_trace_desc){0};
  spy_trace *t = zalloc_lines(sizeof *t);
  if (!t)
    return SPY_ENOMEM;
  if (!d.enabled) {
    *out = t;
    return 0;
  }
  const spy_trace_writer_ops *ops =
      d.ops ? d.ops : spy_trace_writer_find(d.writer ? d.writer : "jsonl");
  if (!ops || !ops->open || !ops->action || !ops->close ||
      ((ops->flags & SPY_TRACE_WRITER_CONNINFO) && !d.conninfo)) {
    free(t);
    return SPY_EINVAL;
  }
  int has_dir = !(ops->flags & SPY_TRACE_WRITER_CONNINFO);
  char idbuf[64];
  if (!d.session_id)
    make_session_id(t, idbuf);
  t->session_id = strdup(d.session_id ? d.session_id : idbuf);
  char cwdbuf[4096];
  if (!d.cwd)
    d.cwd = getcwd(cwdbuf, sizeof cwdbuf) ? cwdbuf : ".";
  t->cwd = strdup(d.cwd);
  if (has_dir) {
    if (d.dir)
      t->dir = strdup(d.dir);
    else if (t->cwd && t->session_id) {
      size_t n = strlen(t->cwd) + strlen(t->session_id) + 16;
      if ((t->dir = malloc(n)))
        snprintf(t->dir, n, "%s/.spyglass/%s", t->cwd, t->session_id);
    }
  }
  t->conninfo = dupstr(d.conninfo);
  spy__wallclock_init(&t->clock);
  t->ops = ops;
  t->ops_arg = d.ops_arg;
  t->batch = d.batch_actions ? d.batch_actions : 4096;
  t->retry_bytes = d.retry_bytes ? d.retry_bytes : (size_t)64 << 20;
  t->retry_ms = d.retry_ms ? d.retry_ms : 10000;
  t->on_error = d.on_error ? d.on_error : default_report;
  t->on_error_arg = d.on_error_arg;
  t->qcap = d.queue_bytes ? d.queue_bytes : (size_t)8 << 20;
  t->spill_cap = d.spill_bytes ? d.spill_bytes : (size_t)64 << 20;
  t->spill_file_cap =
      d.spill_file_bytes ? d.spill_file_bytes : (uint64_t)4 << 30;
  t->lend_cap = d.lend_bytes ? d.lend_bytes : (size_t)256 << 20;
  /* test and debug knobs (trace.h) */
  const char *e;
  if ((e = getenv("SPY_TRACE_QUEUE_BYTES")) && *e)
    t->qcap = (size_t)strtoull(e, NULL, 10);
  if ((e = getenv("SPY_TRACE_SPILL_BYTES")) && *e)
    t->spill_cap = (size_t)strtoull(e, NULL, 10);
  if ((e = getenv("SPY_TRACE_SPILL_FILE_BYTES")) && *e)
    t->spill_file_cap = strtoull(e, NULL, 10);
  if ((e = getenv("SPY_TRACE_BATCH_ACTIONS")) && *e && atoi(e) > 0)
    t->batch = (uint32_t)atoi(e);
  if ((e = getenv("SPY_TRACE_LEND_BYTES")) && *e)
    t->lend_cap = (size_t)strtoull(e, NULL, 10);
  if (t->lend_cap <= 1)
    t->lend_cap = 0; /* lend nothing */
  if ((e = getenv("SPY_TRACE_WRITER_DELAY_US")) && *e)
    t->delay_us = (uint32_t)strtoul(e, NULL, 10);
  if ((e = getenv("SPY_TRACE_DISCARD")) && *e)
    t->discard = atoi(e);
  t->nice = TRACE_NICE;
  if ((e = getenv("SPY_TRACE_NICE")) && *e)
    t->nice = atoi(e);
  if (t->qcap < 65536)
    t->qcap = 65536;
  /* a power of two: a ring offset is a mask, not a division */
  t->qcap = (size_t)1 << (63 - __builtin_clzll((unsigned long long)t->qcap));
  /* memory spill blocks: 2 MiB, or all of a smaller bound in one */
  t->sb_bytes = t->spill_cap >= SB_BYTES ? SB_BYTES
                : t->spill_cap >= 16384  ? t->spill_cap & ~(size_t)7u
                                         : 0;
  t->qcap &= ~(size_t)3u;
  if (t->spill_file_cap > 1) {
    if (t->dir)
      t->spill_dir = strdup(t->dir);
    else if (t->cwd && t->session_id) { /* postgres: beside the build */
      size_t n = strlen(t->cwd) + strlen(t->session_id) + 16;
      if ((t->spill_dir = malloc(n)))
        snprintf(t->spill_dir, n, "%s/.spyglass/%s", t->cwd, t->session_id);
    }
  }
  /* one ring ready for the first emitting thread */
  tq *first = tq_new(t->qcap);
  atomic_store(&t->queues, first);
  atomic_store(&t->nqueues, 1); /* first is queue 0 */
  if (!t->session_id || !t->cwd || (has_dir && !t->dir) ||
      (d.conninfo && !t->conninfo) || !first) {
    spy_trace_destroy(t);
    return SPY_ENOMEM;
  }
  if (pthread_key_create(&t->key, tq_release) != 0) {
    spy_trace_destroy(t);
    return SPY_EAGAIN;
  }
  t->key_made = 1;
  static _Atomic uint64_t sessions_made;
  t->gen = atomic_fetch_add(&sessions_made, 1) + 1;
  pthread_mutex_init(&t->mu, NULL);
  pthread_mutex_init(&t->qmu, NULL);
  pthread_mutex_init(&t->run_mu, NULL);
  pthread_cond_init(&t->committed_cv, NULL);
  t->sync_made = 1;
  t->hot.enabled = -1; /* sync objects exist; not yet emitting */

  int rc = 0;
  if (t->dir && (ops->flags & SPY_TRACE_WRITER_MKDIR))
    rc = spy__mkdirs(t->dir);
  spy_trace_writer_cfg cfg = {t->dir,     t->conninfo,    t->session_id,
                              t->cwd,     t->retry_bytes, t->retry_ms,
                              t->ops_arg, report,         t};
  if (rc == 0)
    rc = ops->open(&t->wstate, &cfg);
  t->prepared = !ops->prepare; /* the rest on the writer's thread */
  t->last_commit = spy__mono_ns();
  if (rc == 0)
    rc = writer_start(t);
  t->ever_started = rc == 0;
  if (rc < 0) {
    if (t->wstate)
      ops->close(t->wstate);
    t->wstate = NULL;
    spy_trace_destroy(t);
    return rc;
  }
  t->hot.enabled = 1;
  *out = t;
  return 0;
}

int64_t spy_trace_destroy(spy_trace *t) {
  if (!t)
    return 0;
  int64_t lost = 0;
  if (t->ever_started && t->nice > 0) {
    /* the rest of the writer's work runs here, at the caller's priority */
    pthread_mutex_lock(&t->run_mu);
    writer_stop(t);
    atomic_store(&t->closing, 1);
    hurry(t, 1);
    writer_loop(t, 0);
    pthread_mutex_unlock(&t->run_mu);
  } else if (t->thread_started) {
    atomic_store(&t->closing, 1);
    wake_writer(t, 1, 0, 1);
    pthread_join(t->thread, NULL);
  }
  if (t->wstate) {
    lost = t->ops->close(t->wstate);
    if (lost < 0)
      lost = 0;
  }
  lost += (int64_t)atomic_load(&t->dropped);
  lost += (int64_t)atomic_load(&t->unstored);
  if (t->sync_made) {
    report_repeats(t);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->qmu);
    pthread_mutex_destroy(&t->run_mu);
    pthread_cond_destroy(&t->committed_cv);
  }
  if (t->key_made)
    pthread_key_delete(t->key);
  held_drop_all(t); /* (the loop's end dropped them: a disabled session
                       or a failed create never held any) */
  for (tq *q = atomic_load(&t->queues), *nx; q; q = nx) {
    nx = q->next;
    if (q->fd >= 0) { /* the writer has taken every record: not needed */
      char path[4200];
      close(q->fd);
      sf_path(t->spill_dir, q->id, path, sizeof path);
      unlink(path);
      if (!(t->ops->flags & SPY_TRACE_WRITER_MKDIR) &&
          rmdir(t->spill_dir) == 0 && t->spill_parent_made == 1) {
        /* made for the spill only: removed when empty, and its parent
         * (<cwd>/.spyglass) when this session made it and it is empty */
        char *sl = strrchr(t->spill_dir, '/');
        if (sl && sl != t->spill_dir) {
          *sl = 0;
          rmdir(t->spill_dir);
          *sl = '/';
        }
      }
    }
    free(q->rb);
    fbuf_free(q->f_buf, SF_BUF);
    fbuf_free(q->w_keep.p, q->w_keep.cap);
    for (int i = 0; i < q->fq_n; i++)
      fbuf_free(q->fq[i].p, q->fq[i].cap);
    for (int i = 0; i < q->ffree_n; i++)
      fbuf_free(q->ffree[i], SF_BUF);
    pthread_mutex_destroy(&q->f_mu);
    big_free(q->ring, q->cap);
    sblk *lists[3] = {q->sb_head, q->sb_spare, atomic_load(&q->sb_free)};
    for (int i = 0; i < 3; i++)
      for (sblk *b = lists[i], *bn; b; b = bn) {
        bn = atomic_load(&b->next);
        if (b->cap)
          fbuf_free((uint8_t *)b, sizeof(sblk) + b->cap);
        else
          free(b);
      }
    free(q);
  }
  spy_trace_arena_free(&t->arena);
  spy__buf_free(&t->json);
  spy__hset_free(&t->seen);
  free(t->lentv.v);
  free(t->held);
  free(t->session_id);
  free(t->cwd);
  free(t->dir);
  free(t->conninfo);
  free(t->spill_dir);
  free(t);
  return lost;
}

const char *spy_trace_session_id(const spy_trace *t) {
  return t ? t->session_id : NULL;
}
const char *spy_trace_dir(const spy_trace *t) { return t ? t->dir : NULL; }
const char *spy_trace_writer_name(const spy_trace *t) {
  return t && t->ops ? t->ops->name : NULL;
}

void spy_trace_get_stats(spy_trace *t, spy_trace_stats *out) {
  memset(out, 0, sizeof *out);
  if (!t || !t->hot.enabled)
    return;
  pthread_mutex_lock(&t->mu);
  *out = t->st;
  pthread_mutex_unlock(&t->mu);
  for (tq *q = atomic_load_explicit(&t->queues, memory_order_acquire); q;
       q = q->next) {
    out->emitted += atomic_load_explicit(&q->emitted, memory_order_relaxed);
    out->queued_bytes +=
        atomic_load_explicit(&q->queued_bytes, memory_order_relaxed);
    out->waits += atomic_load_explicit(&q->waits, memory_order_relaxed);
    out->wait_ns += atomic_load_explicit(&q->wait_ns, memory_order_relaxed);
    out->spilled += atomic_load_explicit(&q->spilled, memory_order_relaxed);
    out->spilled_disk +=
        atomic_load_explicit(&q->spilled_disk, memory_order_relaxed);
    out->spilled_bytes +=
        atomic_load_explicit(&q->spilled_bytes, memory_order_relaxed);
    out->lent_bytes +=
        atomic_load_explicit(&q->lent_bytes, memory_order_relaxed);
    out->lent_copied +=
        atomic_load_explicit(&q->lent_copied, memory_order_relaxed);
    out->spill_fails +=
        atomic_load_explicit(&q->spill_fail, memory_order_relaxed);
  }
  out->builds = atomic_load(&t->builds);
  out->spill_blocks = atomic_load(&t->spill_blocks);
  if (t->ops->lost && t->wstate)
    out->lost = t->ops->lost(t->wstate);  /* read-only counter of the writer */
  out->lost += atomic_load(&t->dropped);  /* and the numbers given up on */
  out->lost += atomic_load(&t->unstored); /* and a store never set up */
  if (t->ops->busy_ns && t->wstate)
    out->packer_ns = t->ops->busy_ns(t->wstate); /* thread-safe */
}

/* ---- recovery of a killed session's spill files ------------------------- */

/* One spill file read in order from its resume offset. */
typedef struct rcur {
  int fd;
  uint64_t off, size, seq;
  uint8_t *rec;
  size_t cap;
  int live; /* rec holds the next record */
} rcur;

/* Reads the next record of c; 0 at the end (counted torn when cut). */
static int rcur_next(rcur *c, uint64_t *torn) {
  c->live = 0;
  if (c->off + 8 > c->size) {
    if (c->off < c->size)
      (*torn)++;
    return 0;
  }
  uint32_t h[2];
  if (pread_all(c->fd, h, 8, c->off) < 0 || h[0] < 16 ||
      c->off + 8 + h[0] > c->size) {
    (*torn)++;
    return 0;
  }
  if (h[0] > c->cap) {
    uint8_t *nb = realloc(c->rec, h[0]);
    if (!nb)
      return SPY_ENOMEM;
    c->rec = nb;
    c->cap = h[0];
  }
  uint32_t rn;
  if (pread_all(c->fd, c->rec, h[0], c->off + 8) < 0 ||
      sf_sum(c->rec, h[0]) != h[1] || (memcpy(&rn, c->rec, 4), rn != h[0])) {
    (*torn)++;
    return 0;
  }
  c->seq = spy_rd64(c->rec + 8);
  c->off += 8 + (uint64_t)h[0];
  c->live = 1;
  return 1;
}

/* Cuts a JSON-lines file after its last complete line. */
static int cut_to_line(const char *path) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -errno;
  struct stat sb;
  int rc = fstat(fd, &sb) == 0 ? 0 : -errno;
  off_t end = rc == 0 ? sb.st_size : 0;
  char b[4096];
  while (rc == 0 && end > 0) {
    off_t from = end > (off_t)sizeof b ? end - (off_t)sizeof b : 0;
    if (pread_all(fd, b, (size_t)(end - from), (uint64_t)from) < 0) {
      rc = SPY_EIO;
      break;
    }
    size_t i = (size_t)(end - from);
    while (i > 0 && b[i - 1] != '\n')
      i--;
    if (i > 0) {
      end = from + (off_t)i;
      break;
    }
    end = from;
  }
  if (rc == 0 && end < sb.st_size && ftruncate(fd, end) != 0)
    rc = -errno;
  close(fd);
  return rc;
}

/* Adds the content hashes a decoded tree refers to. */
static int seen_add(spy__hset *s, const spy_trace_val *v) {
  if ((v->type == SPY_TV_SRC || v->type == SPY_TV_SRCREF) && v->has_hash)
    return spy__hset_add(s, v->hash) < 0 ? SPY_ENOMEM : 0;
  if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC)
    for (uint32_t i = 0; i < v->n; i++)
      if (seen_add(s, &v->u.items[i]) < 0)
        return SPY_ENOMEM;
  return 0;
}

static int recover_err(char *err, size_t cap, int rc, const char *fmt,
                       const char *a) {
  if (err && cap)
    snprintf(err, cap, fmt, a);
  return rc;
}

int spy_trace_recover(const char *dir, const char *conninfo,
                      spy_trace_recovery *out, char *err, size_t errcap) {
  spy_trace_recovery rv = {0};
  if (out)
    *out = rv;
  if (err && errcap)
    err[0] = 0;
  if (!dir || !out)
    return SPY_EINVAL;
  /* the spill files and their session */
  DIR *dd = opendir(dir);
  if (!dd)
    return recover_err(err, errcap, -errno, "%s: cannot open", dir);
  rcur *cur = NULL;
  size_t nc = 0;
  char sid[201] = "", path[4200];
  int rc = 0;
  struct dirent *de;
  while (rc == 0 && (de = readdir(dd))) {
    unsigned id;
    char tail;
    if (sscanf(de->d_name, "spill-%u.bi%c", &id, &tail) != 2 || tail != 'n')
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t h[236];
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || pread_all(fd, h, sizeof h, 0) < 0 ||
        memcmp(h, SF_MAGIC, 8) != 0) {
      if (fd >= 0)
        close(fd);
      rc =
          recover_err(err, errcap, SPY_EBADVALUE, "%s: not a spill file", path);
      break;
    }
    uint32_t sl;
    memcpy(&sl, h + 32, 4);
    if (sl > 200)
      sl = 200;
    char s1[201];
    memcpy(s1, h + 36, sl);
    s1[sl] = 0;
    if (sid[0] && strcmp(sid, s1) != 0) {
      close(fd);
      rc = recover_err(err, errcap, SPY_EBADVALUE,
                       "%s: spill files of two sessions", dir);
      break;
    }
    snprintf(sid, sizeof sid, "%s", s1);
    rcur *nb = realloc(cur, (nc + 1) * sizeof *cur);
    if (!nb) {
      close(fd);
      rc = SPY_ENOMEM;
      break;
    }
    cur = nb;
    cur[nc] = (rcur){
        .fd = fd, .off = spy_rd64(h + SF_RESUME), .size = (uint64_t)sb.st_size};
    if (cur[nc].off < SF_DATA)
      cur[nc].off = SF_DATA;
    nc++;
  }
  closedir(dd);
  rv.files = (uint32_t)nc;
  spy_trace *t = NULL;
  if (rc == 0 && nc == 0)
    goto done;
  /* the store beside them */
  const char *wname = "postgres";
  if (rc == 0 && !conninfo) {
    struct stat sb;
    snprintf(path, sizeof path, "%s/trace.db", dir);
    if (stat(path, &sb) == 0)
      wname = "sqlite";
    else {
      snprintf(path, sizeof path, "%s/logs.json", dir);
      if (stat(path, &sb) == 0)
        wname = "jsonl";
      else
        rc = recover_err(err, errcap, SPY_ENOENT,
                         "%s: spill files but no store (trace.db or "
                         "logs.json; for postgres give the server)",
                         dir);
    }
  }
  if (rc == 0 && strcmp(wname, "jsonl") == 0) {
    snprintf(path, sizeof path, "%s/logs.json", dir);
    rc = cut_to_line(path);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (rc == 0)
      rc = cut_to_line(path);
    if (rc < 0)
      recover_err(err, errcap, rc, "%s: cannot cut the last line", dir);
  }
  if (rc == 0 && !(t = zalloc_lines(sizeof *t)))
    rc = SPY_ENOMEM;
  if (rc == 0) {
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->qmu, NULL);
    pthread_cond_init(&t->committed_cv, NULL);
    t->sync_made = 1;
    t->ops = spy_trace_writer_find(wname);
    t->on_error = default_report;
    t->session_id = strdup(sid);
    t->cwd = strdup(dir);
    t->dir = conninfo ? NULL : strdup(dir);
    t->conninfo = dupstr(conninfo);
    if (!t->session_id || !t->cwd || (!conninfo && !t->dir) ||
        (conninfo && !t->conninfo))
      rc = SPY_ENOMEM;
  }
  /* what the store committed: its last action, and the payloads it has */
  if (rc == 0) {
    spy_trace_reader *r = NULL;
    rc = spy_trace_reader_open(conninfo ? conninfo : dir, sid, &r);
    spy_trace_action a;
    int k;
    while (rc == 0 && (k = spy_trace_reader_next(r, &a)) > 0) {
      if (a.seq > rv.committed)
        rv.committed = a.seq;
      rc = seen_add(&t->seen, &a.fields);
    }
    if (rc == 0 && k < 0)
      rc = k;
    if (rc < 0)
      recover_err(err, errcap, rc, "%s",
                  r ? spy_trace_reader_error(r) : "cannot read the store");
    spy_trace_reader_close(r);
  }
  if (rc == 0) {
    spy_trace_writer_cfg cfg = {t->dir, t->conninfo, t->session_id,
                                t->cwd, 64u << 20,   10000,
                                NULL,   report,      t};
    rc = t->ops->open(&t->wstate, &cfg);
    if (rc == 0 && t->ops->prepare)
      rc = t->ops->prepare(t->wstate);
    if (rc < 0)
      recover_err(err, errcap, rc, "%s: the writer cannot reopen the store",
                  dir);
  }
  /* the records beyond it, merged in sequence order */
  for (size_t i = 0; rc == 0 && i < nc; i++)
    if ((rc = rcur_next(&cur[i], &rv.torn)) > 0)
      rc = 0;
  uint64_t last = rv.committed;
  uint32_t batch = 0;
  spy_trace_stats st = {0};
  while (rc == 0) {
    rcur *m = NULL;
    for (size_t i = 0; i < nc; i++)
      if (cur[i].live && (!m || cur[i].seq < m->seq))
        m = &cur[i];
    if (!m)
      break;
    if (m->seq <= last) /* committed already (or a repeat) */
      rv.skipped++;
    else {
      rv.lost += m->seq - last - 1;
      process(t, m->rec, &st, NULL);
      rv.recovered++;
      last = m->seq;
      if (++batch == 4096) {
        if (t->ops->commit && (rc = t->ops->commit(t->wstate)) < 0)
          recover_err(err, errcap, rc, "%s: a commit failed", dir);
        batch = 0;
      }
    }
    int k = rcur_next(m, &rv.torn);
    if (k < 0)
      rc = k;
  }
  if (rc == 0 && batch && t->ops->commit &&
      (rc = t->ops->commit(t->wstate)) < 0)
    recover_err(err, errcap, rc, "%s: a commit failed", dir);
done:
  if (t) {
    int64_t ns = spy_trace_destroy(t);
    rv.not_stored = ns;
  }
  for (size_t i = 0; i < nc; i++) {
    close(cur[i].fd);
    free(cur[i].rec);
  }
  free(cur);
  if (rc == 0 && nc) { /* all in the store now: the files go */
    DIR *d2 = opendir(dir);
    while (d2 && (de = readdir(d2))) {
      unsigned id;
      char tail;
      if (sscanf(de->d_name, "spill-%u.bi%c", &id, &tail) == 2 && tail == 'n') {
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
      }
    }
    if (d2)
      closedir(d2);
  }
  *out = rv;
  return rc < 0 ? rc : 0;
}
