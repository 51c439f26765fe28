/* trace.h — structured trace actions to storage (the store layer).
 *
 * A trace session (spy_trace) is an object created from a desc: where the
 * traced program works, where the trace goes, which writer, and whether it
 * is enabled. Everything hangs off the session; two sessions never see each
 * other's actions and nothing is process-global.
 *
 * Emitting (spy_emit_<kind>) is the hot path. A disabled session costs one
 * predictable branch: nothing is built, copied or hashed. An enabled one
 * encodes the action once, in its wire form (docs/wire.md, TRACE) — a
 * lent payload (spy_trace_text.release) by reference only — into
 * the calling thread's own bounded byte queue (no lock: threads emitting
 * into one session do not wait for each other) and returns; a writer
 * thread takes the actions of every queue in sequence order, decodes each,
 * hashes large payloads (XXH3-128) so each is stored once per session,
 * serialises the action once — its JSON-lines form for the JSON-lines writer
 * and custom writers, its binary record (payloads by reference) for the SQL
 * writers — and hands it to the writer. When the queue is full the emitter
 * does not wait: the action is spilled to memory (spill_bytes) and beyond
 * that to an append-only spill file in the session directory, which the
 * writer reads back in order ("packed after"); a process killed while
 * spilling leaves it for spy_trace_recover. Only when both bounds are used
 * up does the emitter wait (counted): a build trace loses nothing.
 *
 * Writers: "jsonl" (default: Rolldown's devtools log format), "sqlite" and
 * "postgres", behind one table of function pointers (spy_trace_writer_ops);
 * an application may pass its own. Readers: spy_trace_reader over any of
 * the three stores.
 *
 * Link with spyglass_store (pkg-config spyglass-store); the core library
 * spyglass does not contain this layer.
 */
#ifndef SPYGLASS_TRACE_H
#define SPYGLASS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/error.h"
#include "spyglass/trace_catalog.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- field types and descriptors ---------------------------------------- */

typedef enum spy_tf {
  SPY_TF_STR = 1, /* const char *, NUL-terminated */
  SPY_TF_OSTR,    /* const char *, NULL = null */
  SPY_TF_SRC,     /* spy_trace_text: a large payload, stored once */
  SPY_TF_OSRC,    /* spy_trace_text, ptr NULL = null */
  SPY_TF_INT,     /* int64_t */
  SPY_TF_OINT,    /* int64_t, SPY_TRACE_NULL_INT = null */
  SPY_TF_BOOL,    /* int8_t, 0 or 1 */
  SPY_TF_OBOOL,   /* int8_t, 0, 1 or -1 = null */
  SPY_TF_LIST,    /* {const rec *items; uint32_t n;} */
  SPY_TF_OLIST,   /* same, items NULL = null */
  SPY_TF_STRS,    /* {const char *const *items; uint32_t n;} */
  SPY_TF_OSTRS,   /* same, items NULL = null */
  SPY_TF_INTS     /* {const int64_t *items; uint32_t n;} */
} spy_tf;

#define SPY_TRACE_NULL_INT INT64_MIN

/* A large payload (source text): ptr/len; need not be NUL-terminated.
 *
 * Copied or lent. With release NULL (the default) an emit copies the
 * bytes, and the caller may reuse them on return. With release set, the
 * payload is lent: an enabled session keeps the pointer instead of the
 * bytes (no copy on the emitting thread, no payload in the queue) and
 * calls release(owner) exactly once when it no longer reads them — on
 * the writer thread once the writer has stored the action, or on the
 * emitting thread when the session copied them after all (the lent bytes
 * outstanding reached spy_trace_desc.lend_bytes, the action went to the
 * spill file, or the emit failed). The bytes must not change until then;
 * a reference-counted buffer (take a reference, lend it with its unref
 * as release) is the usual owner. A disabled session never calls
 * release: take the reference inside `if (spy_trace_on(t))`. Encoded
 * for anything else (spy_trace_encode, the bus, a spill file) a lent
 * payload is copied like any other. */
typedef struct spy_trace_text {
  const char *ptr;
  size_t len;
  void (*release)(void *owner); /* NULL: copied at the emit */
  void *owner;
} spy_trace_text;

/* The layout every LIST / STRS / INTS member shares. */
typedef struct spy_trace_list {
  const void *items;
  uint32_t n;
} spy_trace_list;

/* What an action means to the reader (builds, hook calls, graphs). */
typedef enum spy_trace_role {
  SPY_ROLE_NONE = 0,
  SPY_ROLE_SESSION,
  SPY_ROLE_BUILD_START,
  SPY_ROLE_BUILD_END,
  SPY_ROLE_MODULES,
  SPY_ROLE_CHUNKS,
  SPY_ROLE_HOOK_START,
  SPY_ROLE_HOOK_END,
  SPY_ROLE_ASSETS
} spy_trace_role;

struct spy_trace_kind;
typedef struct spy_trace_field {
  const char *name;
  uint8_t type;                     /* spy_tf */
  uint32_t offset;                  /* in the C struct */
  const struct spy_trace_kind *rec; /* LIST / OLIST: the item record */
} spy_trace_field;

/* Describes an action kind or a nested record (id 0, role NONE). */
typedef struct spy_trace_kind {
  const char *name;  /* "HookTransformCallStart" (records: snake name) */
  const char *snake; /* "hook_transform_call_start" */
  uint16_t id;       /* wire id of a built-in kind; 0 = application kind */
  uint16_t role;     /* spy_trace_role */
  uint32_t nfields;
  uint32_t size; /* sizeof the C struct */
  const spy_trace_field *fields;
} spy_trace_kind;

/* ---- structs and descriptors derived from the catalog ------------------- */

#define SPY__M_STR(n, r) const char *n;
#define SPY__M_OSTR(n, r) const char *n;
#define SPY__M_SRC(n, r) spy_trace_text n;
#define SPY__M_OSRC(n, r) spy_trace_text n;
#define SPY__M_INT(n, r) int64_t n;
#define SPY__M_OINT(n, r) int64_t n;
#define SPY__M_BOOL(n, r) int8_t n;
#define SPY__M_OBOOL(n, r) int8_t n;
#define SPY__M_LIST(n, r)                                                      \
  struct {                                                                     \
    const struct spy_rec_##r *items;                                           \
    uint32_t n;                                                                \
  } n;
#define SPY__M_OLIST SPY__M_LIST
#define SPY__M_STRS(n, r)                                                      \
  struct {                                                                     \
    const char *const *items;                                                  \
    uint32_t n;                                                                \
  } n;
#define SPY__M_OSTRS SPY__M_STRS
#define SPY__M_INTS(n, r)                                                      \
  struct {                                                                     \
    const int64_t *items;                                                      \
    uint32_t n;                                                                \
  } n;
#define SPY__MEMBER(X, type, name, rec) SPY__M_##type(name, rec)

/* struct spy_rec_<snake> for each record; spy_rec_kind_<snake> describes it */
#define SPY__REC_STRUCT(snake, FIELDS)                                         \
  typedef struct spy_rec_##snake {                                             \
    FIELDS(SPY__MEMBER, _) char spy_end_;                                      \
  } spy_rec_##snake;                                                           \
  extern const spy_trace_kind spy_rec_kind_##snake;
SPY_TRACE_RECORDS(SPY__REC_STRUCT)

/* The opaque session; its first member is this public part so that the
 * inline emitters test `enabled` without a call. */
typedef struct spy_trace spy_trace;
typedef struct spy_trace_hot {
  int enabled;
} spy_trace_hot;

/* Application kinds one session accepts (SPY_ERANGE beyond). */
#define SPY_TRACE_MAX_APP_KINDS 64

/* The out-of-line part of every emit: encodes `act` (a struct described by
 * `kind`) once, into the calling thread's queue of the session (a thread's
 * first emit allocates its queue). Returns 0, SPY_EINVAL (a required
 * string is NULL, a string or list is too large), SPY_ERANGE (an
 * application kind beyond the SPY_TRACE_MAX_APP_KINDS the session knows;
 * nothing is queued), SPY_ENOMEM, SPY_ECLOSED (the session is being
 * destroyed). Thread-safe and lock-free: any number of threads may emit
 * into one session; each thread's actions are stored in its emit order.
 * A full queue spills (to reused memory blocks, then to the spill file,
 * which the writer thread writes out; no fsync); it waits, and counts the
 * wait, only when both spill bounds are used up. The action is copied —
 * but for lent payloads (spy_trace_text.release), which are referenced
 * until released: the caller's memory may be reused on return. */
int spy_trace_emit(spy_trace *t, const spy_trace_kind *kind, const void *act);

#if defined(__GNUC__)
#define SPY_TRACE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define SPY_TRACE_UNLIKELY(x) (x)
#endif

/* True if `t` records actions. Use it to skip preparing an expensive
 * action (building a module list) when nobody records. */
static inline int spy_trace_on(const spy_trace *t) {
  return SPY_TRACE_UNLIKELY(((const spy_trace_hot *)(const void *)t)->enabled);
}

/* Declares an action kind: struct spy_act_<snake>, its descriptor
 * spy_kind_<snake> and the typed emitter spy_emit_<snake>(t, &act), which
 * costs one branch on a disabled session. Applications use it for their
 * own kinds (with SPY_TRACE_DEFINE_KIND in one .c file); such kinds travel
 * with their name and, in the SQL stores, get their own tables like the
 * built-in ones (names must be lower-case SQL identifiers). */
#define SPY_TRACE_DECLARE_KIND(Name, snake, FIELDS)                            \
  typedef struct spy_act_##snake {                                             \
    FIELDS(SPY__MEMBER, _) char spy_end_;                                      \
  } spy_act_##snake;                                                           \
  extern const spy_trace_kind spy_kind_##snake;                                \
  static inline int spy_emit_##snake(spy_trace *t, const spy_act_##snake *a) { \
    if (!spy_trace_on(t))                                                      \
      return 0;                                                                \
    return spy_trace_emit(t, &spy_kind_##snake, a);                            \
  }

#define SPY__FIELD_DESC(st, type, fname, rec)                                  \
  {#fname, SPY_TF_##type, (uint32_t)offsetof(st, fname), &spy_rec_kind_##rec},
/* The `rec` of a field that is not a LIST: an empty record. */
extern const spy_trace_kind spy_rec_kind__;
/* Defines the descriptor of a kind declared with SPY_TRACE_DECLARE_KIND,
 * in one .c file. Its LIST fields may use the built-in records. */
#define SPY_TRACE_DEFINE_KIND(Name, snake, FIELDS)                             \
  static const spy_trace_field spy_fields_##snake[] = {                        \
      FIELDS(SPY__FIELD_DESC, spy_act_##snake){NULL, 0, 0, NULL}};             \
  const spy_trace_kind spy_kind_##snake = {                                    \
      #Name,                                                                   \
      #snake,                                                                  \
      0,                                                                       \
      SPY_ROLE_NONE,                                                           \
      sizeof spy_fields_##snake / sizeof spy_fields_##snake[0] - 1,            \
      sizeof(spy_act_##snake),                                                 \
      spy_fields_##snake};

#define SPY__ACT_DECL(id, Name, snake, role, FIELDS)                           \
  SPY_TRACE_DECLARE_KIND(Name, snake, FIELDS)
SPY_TRACE_ACTIONS(SPY__ACT_DECL)

/* The built-in kinds, indexed by wire id (1..SPY_TRACE_KIND_COUNT); [0]
 * is NULL. */
#define SPY__ACT_ONE(id, Name, snake, role, FIELDS) +1
#define SPY_TRACE_KIND_COUNT (0 SPY_TRACE_ACTIONS(SPY__ACT_ONE))
extern const spy_trace_kind *const spy_trace_kinds[SPY_TRACE_KIND_COUNT + 1];
/* The built-in kind named `name` ("BuildStart"), or NULL. */
const spy_trace_kind *spy_trace_kind_find(const char *name);

/* ---- decoded actions: a value tree --------------------------------------- */

typedef enum spy_tv {
  SPY_TV_NULL = 0,
  SPY_TV_FALSE = 1,
  SPY_TV_TRUE = 2,
  SPY_TV_INT = 3,
  SPY_TV_STR = 4,
  SPY_TV_SRC = 5,    /* a large payload, inline */
  SPY_TV_SRCREF = 6, /* a large payload by content hash only */
  SPY_TV_LIST = 7,
  SPY_TV_REC = 8
} spy_tv;

/* One decoded value. STR/SRC: s, n bytes (not NUL-terminated); SRC and
 * SRCREF carry the content hash in hash[] once it is known (has_hash);
 * LIST/REC: items, n values. */
typedef struct spy_trace_val {
  uint8_t type;
  uint8_t has_hash;
  uint32_t n;
  union {
    int64_t i;
    const char *s;
    const struct spy_trace_val *items;
  } u;
  uint64_t hash[2]; /* XXH3-128: high, low */
} spy_trace_val;

/* A decoded action. kind is NULL for a kind this build does not know;
 * name always holds its name. */
typedef struct spy_trace_action {
  const spy_trace_kind *kind;
  const char *name;
  uint32_t name_len;
  uint64_t seq;         /* per session, from 1 */
  uint64_t ts_us;       /* wall clock, µs since the epoch (read from the
                           CPU's counter, which the session keeps within
                           µs of CLOCK_REALTIME; SPY_TRACE_CLOCK=system:
                           clock_gettime at each emit) */
  uint32_t build;       /* build number in the session, 0 = none */
  spy_trace_val fields; /* a REC */
} spy_trace_action;

/* Arena for decoded trees: owned by whoever decodes, reset per action;
 * blocks never move, so pointers into it stay valid until the reset.
 * Zero-initialise; spy_trace_arena_free releases it. Not thread-safe. */
typedef struct spy_trace_arena {
  void *head; /* newest block */
  size_t used, cap;
} spy_trace_arena;
/* Returns n bytes aligned to 8, or NULL when memory runs out. */
void *spy_trace_arena_alloc(spy_trace_arena *a, size_t n);
void spy_trace_arena_reset(spy_trace_arena *a);
void spy_trace_arena_free(spy_trace_arena *a);

/* Encodes one action record (the TRACE section's unit, docs/wire.md) of a
 * struct described by `kind` into buf[0..cap). Returns the bytes it needs
 * or wrote (when > cap nothing useful was written: call again with a
 * bigger buffer), or SPY_EINVAL. Pure; thread-safe. */
int64_t spy_trace_encode(const spy_trace_kind *kind, const void *act,
                         uint64_t seq, uint64_t ts_us, uint32_t build,
                         void *buf, size_t cap);
/* Same from a decoded action (its fields tree). */
int64_t spy_trace_encode_action(const spy_trace_action *a, void *buf,
                                size_t cap);

/* Decodes one action record at p (n bytes available). Bounds-checked; the
 * tree lives in `arena` and points into p. Returns the record's length
 * (> 0), or SPY_ETRUNCATED, SPY_EBADSECTION (lengths disagree),
 * SPY_EBADVALUE (unknown value tag, nesting too deep, a known kind whose
 * fields do not match its declaration), SPY_ENOMEM. */
int spy_trace_decode(const void *p, size_t n, spy_trace_arena *arena,
                     spy_trace_action *out);

/* A TRACE section (SPY_SEC_TRACE, in a SPY_MSG_TRACE frame) carries one or
 * more records back to back. Iterates them: *off starts at 0; returns 1
 * and fills *out (tree in arena), 0 at the end, or the record's decode
 * error (the section is then malformed; stop). Needs spyglass/wire.h's
 * spy_section; pass its data and len. */
int spy_trace_section_next(const void *data, size_t len, size_t *off,
                           spy_trace_arena *arena, spy_trace_action *out);

/* Checks a decoded REC against a descriptor: field count and types.
 * Returns 0 or SPY_EBADVALUE. */
int spy_trace_check(const spy_trace_kind *kind, const spy_trace_val *rec);

/* The field `name` of a decoded action, or NULL. */
const spy_trace_val *spy_trace_get(const spy_trace_action *a, const char *name);

/* Hex content id (32 chars + NUL) of a hash pair. */
void spy_trace_hash_hex(const uint64_t hash[2], char out[33]);
/* Hashes a payload (XXH3-128). */
void spy_trace_hash(const void *p, size_t n, uint64_t out[2]);

/* ---- the JSON-lines form ------------------------------------------------ */

/* Formats a decoded action as its JSON-lines event (Rolldown's devtools
 * log form, no newline) into buf[0..cap). Always valid JSON: bytes that
 * are not UTF-8 become U+FFFD. Returns the bytes it needs or wrote (when >
 * cap nothing was written: call again with a bigger buffer) or
 * SPY_ENOMEM. Thread-safe. */
int64_t spy_trace_json_format(const spy_trace_action *a, const char *session_id,
                              char *buf, size_t cap);
/* Parses one JSON-lines event (a line of logs.json, no newline needed)
 * into a decoded action whose tree and strings live in `arena`. Returns 0,
 * 1 for a line that is a StringRef rather than an action, SPY_EBADVALUE
 * (not JSON, not an event, fields that do not match the kind's
 * declaration, an integer beyond int64) or SPY_ENOMEM. Thread-safe with
 * one arena per thread. */
int spy_trace_json_parse(const char *line, size_t n, spy_trace_arena *arena,
                         spy_trace_action *out);

/* ---- writers ------------------------------------------------------------- */

/* What the writer thread hands a writer. Everything is valid during the
 * call only. */
typedef struct spy_trace_record {
  const spy_trace_action *action; /* SRC values carry their hash */
  const char *json; /* the action's JSON-lines form, no newline; NULL for
                       a writer with SPY_TRACE_WRITER_RECORDS (it stores
                       the binary record) */
  size_t json_len;
  uint64_t json_replaced; /* bytes of the action that were not UTF-8 and
                             became U+FFFD in json */
} spy_trace_record;

typedef struct spy_trace_writer_cfg {
  const char *dir;      /* session directory (created) */
  const char *conninfo; /* postgres */
  const char *session_id;
  const char *cwd;
  size_t retry_bytes; /* postgres: bytes kept while unreachable */
  uint32_t retry_ms;  /* postgres: how long close keeps retrying */
  void *arg;          /* the desc's ops_arg */
  /* Report a failure (the writer keeps going where it can). */
  void (*report)(void *ctx, int err, const char *msg);
  void *report_ctx;
} spy_trace_writer_cfg;

/* A store writer. All calls come from the session's writer thread only.
 * open: creates the state; returns 0 or a negative code. source: a payload
 * seen for the first time in this session (id = content hash), called
 * before the action referring to it. action: one action. commit: the end
 * of a batch; a durable store makes everything before it durable. close:
 * flushes and frees (safe on a half-open state); returns the number of
 * actions it could not store (>= 0). lost (optional): actions given to the
 * writer that it has dropped so far. busy_ns (optional): time the writer's
 * own background threads have worked so far (the built-in SQL writers
 * compress payloads on one). hurry: see the member. Optional ops may be NULL.
 * flags: what the writer needs from the session (SPY_TRACE_WRITER_*; 0 for a
 * writer that takes the JSON form and makes its own directory if it wants one).
 */
#define SPY_TRACE_WRITER_RECORDS 1u  /* no JSON form: record.json is NULL */
#define SPY_TRACE_WRITER_MKDIR 2u    /* the session creates cfg.dir first */
#define SPY_TRACE_WRITER_CONNINFO 4u /* needs desc.conninfo; no cfg.dir */
typedef struct spy_trace_writer_ops {
  const char *name;
  int (*open)(void **state, const spy_trace_writer_cfg *cfg);
  int (*source)(void *state, const uint64_t hash[2], const char *p, size_t n);
  int (*action)(void *state, const spy_trace_record *r);
  int (*commit)(void *state);
  int64_t (*close)(void *state);
  uint64_t (*lost)(void *state);
  uint64_t (*busy_ns)(void *state);
  uint32_t flags; /* SPY_TRACE_WRITER_* */
  /* Optional. on = 1: a thread waits for the trace (spy_trace_flush,
   * spy_trace_destroy) and runs the writer's work itself, so the build is
   * not using the CPUs now and the writer may take more than one (the
   * built-in SQL writers pack payloads on a thread of their own then);
   * on = 0: the wait is over, the build may run again. */
  void (*hurry)(void *state, int on);
  /* Optional: the store's set-up that takes a while (creating tables,
   * registering the session), run on the writer's thread before its
   * first source or action, so that spy_trace_create (and the build
   * after it) does not wait for it: open then only checks what it must
   * refuse at once (the connection, a newer schema). A failure that may
   * pass (SPY_EAGAIN, SPY_ECONNREFUSED) is reported and tried again
   * (50 ms, backing off to 1 s) while the actions wait in their queues;
   * once a flush or the session's end has waited retry_ms for it, the
   * actions queued then are counted lost and later ones wait for the
   * set-up again. Any other error is for good: every action is counted
   * lost (close is still called). */
  int (*prepare)(void *state);
} spy_trace_writer_ops;

/* The built-in writer named `name` ("jsonl", "sqlite", "postgres") or
 * NULL. The table is constant. */
const spy_trace_writer_ops *spy_trace_writer_find(const char *name);

/* ---- sessions ------------------------------------------------------------ */

typedef struct spy_trace_desc {
  int enabled;          /* 0: every emit is one branch, nothing opened */
  const char *cwd;      /* the traced program's working dir; default getcwd() */
  const char *dir;      /* session dir; default <cwd>/.spyglass/<session-id> */
  const char *writer;   /* "jsonl" (default), "sqlite", "postgres" */
  const char *conninfo; /* postgres: libpq conninfo or URI */
  const spy_trace_writer_ops *ops; /* custom writer: overrides `writer` */
  void *ops_arg;                   /* passed to ops->open in cfg.arg */
  const char *session_id; /* default: generated, unique per process + time */
  size_t queue_bytes;     /* per emitting thread; default 8 MiB; min 64 KiB;
                            rounded down to a power of two */
  uint32_t batch_actions; /* actions per commit at most; default 4096 */
  size_t retry_bytes;     /* postgres buffering while away; default 64 MiB */
  uint32_t retry_ms;      /* postgres retry on close; default 10000 */
  /* Writer failures; default: a line on stderr. Called on the writer
   * thread. */
  void (*on_error)(void *arg, int err, const char *msg);
  void *on_error_arg;
  /* Bytes of actions held in memory off full queues and not yet taken by
   * the writer, at most (beyond it they go to the spill file); default
   * 64 MiB; 1 = none in memory. */
  size_t spill_bytes;
  /* Bytes of a queue's spill file not yet taken by the writer, at most
   * (beyond it, or when the file cannot be written, an emit waits for
   * queue space, counted in waits); default 4 GiB; 1 = no spill file.
   * Spill files (spill-<n>.bin) go in the session directory, for postgres
   * in <cwd>/.spyglass/<session-id>; they are removed when the session
   * ends, and spy_trace_recover reads one a killed process left. */
  uint64_t spill_file_bytes;
  /* Bytes of lent payloads (spy_trace_text.release) one emitting thread
   * may have outstanding, not yet released by the writer; beyond it a
   * lent payload is copied (and released at once) as if it were not
   * lent, so a writer that falls behind holds at most this much of the
   * application's memory per thread. Default 256 MiB; 1 = copy every
   * payload. */
  size_t lend_bytes;
} spy_trace_desc;

/* Environment knobs read by spy_trace_create (tests, debugging), each
 * overriding the desc: SPY_TRACE_QUEUE_BYTES, SPY_TRACE_SPILL_BYTES,
 * SPY_TRACE_SPILL_FILE_BYTES, SPY_TRACE_LEND_BYTES, SPY_TRACE_BATCH_ACTIONS,
 * and SPY_TRACE_WRITER_DELAY_US (the writer sleeps this long after each action:
 * a writer slower than the build). Also SPY_TRACE_NICE (the writer thread's
 * nice increment, default 5; 0: the build's priority) and SPY_TRACE_PACK_INLINE
 * (1: a SQL writer packs payloads on its own thread, 0: on a packer thread;
 * default: inline on
 * <= 2 usable CPUs, so the trace holds one runnable thread beside the
 * build). */

typedef struct spy_trace_stats {
  uint64_t emitted;       /* actions accepted by emit */
  uint64_t written;       /* actions handed to the writer */
  uint64_t lost;          /* actions not stored: the writer could not, or
                             the session gave up waiting for (a damaged
                             spill file record; see on_error) */
  uint64_t waits;         /* emits that found their queue full and waited */
  uint64_t wait_ns;       /* total time spent waiting */
  uint64_t queued_bytes;  /* bytes that went through the queue */
  uint64_t sources;       /* distinct payloads stored */
  uint64_t sources_dup;   /* payloads seen again and not stored */
  uint64_t source_bytes;  /* bytes of distinct payloads */
  uint64_t saved_bytes;   /* bytes not stored thanks to dedup */
  uint64_t writer_errors; /* failures the writer reported (each one; on_error
                             hears the first of a kind, and the count of
                             repeats when the session ends) */
  uint64_t writer_ns;     /* writer thread busy time: decode … commit (wall:
                             it includes waiting for a database's answer,
                             and for the CPU on a busy machine) */
  uint64_t packer_ns;     /* the writer's background threads' busy time */
  uint32_t builds;        /* builds begun */
  uint64_t spilled;       /* emits that found their queue full and spilled
                             the action (to memory or the spill file)
                             instead of waiting */
  uint64_t spilled_disk;  /* of them, the actions written to a spill file */
  uint64_t spilled_bytes; /* bytes written to spill files */
  uint64_t spill_fails;   /* spill files that could not be made or
                                written (a full disk): the emitter then
                                waits for queue space */
  uint64_t spill_blocks;  /* memory spill blocks allocated (2 MiB each, or
                             spill_bytes when smaller; a record larger
                             than a block gets one of its own): reused,
                             so this stays at most spill_bytes / 2 MiB
                             however much spills */
  uint64_t lent_bytes;    /* bytes of payloads lent (not copied) */
  uint64_t lent_copied;   /* emits whose lent payloads the session copied
                             after all (lend_bytes reached, the spill
                             file) */
  uint64_t writer_cpu_ns; /* CPU time of the same busy spells (the thread's
                             CPU clock, whichever thread ran the writer) */
} spy_trace_stats;

/* Creates a session. Enabled: resolves the defaults, creates the session
 * directory (jsonl, sqlite), opens the writer and starts the writer thread,
 * then emits nothing (call spy_trace_session_meta yourself). Disabled:
 * allocates the handle only. Returns 0 and *out, or SPY_EINVAL (unknown
 * writer, postgres without conninfo, out NULL), SPY_ENOMEM, a filesystem
 * error, or the writer's open error (SPY_EBADSCHEMA for a newer store).
 * The caller owns *out and frees it with spy_trace_destroy. */
int spy_trace_create(spy_trace **out, const spy_trace_desc *desc);

/* Drains the queues, closes the writer, joins the thread, frees. Returns
 * the number of actions that were not stored (0 if all were), or a
 * negative code. NULL is a no-op returning 0. Must not race with emits,
 * nor with the exit of a thread that emitted into the session. */
int64_t spy_trace_destroy(spy_trace *t);

/* Waits until every action emitted so far is committed by the writer.
 * The writer thread runs at a lower priority than the build (it gives way
 * to the build on a shared core); the waiting thread runs the writer's
 * pending work itself, at its own priority, then starts a fresh writer
 * thread (spy_trace_destroy likewise), so a trace starved of CPU by a
 * busy machine still completes at the caller's speed. Returns 0 or
 * SPY_ECLOSED. Thread-safe (a second caller waits for the first's
 * commits). */
int spy_trace_flush(spy_trace *t);

/* Begins a build: assigns the next build number (1, 2, …), makes it the
 * current build for later actions and emits BuildStart. Returns the build
 * number (> 0), 0 for a disabled session, or a negative code. */
int spy_trace_build_begin(spy_trace *t);
/* Emits BuildEnd for the current build. */
int spy_trace_build_end(spy_trace *t);

/* Effective values: the session id, session directory (NULL for
 * postgres), the writer's name. Valid until destroy. */
const char *spy_trace_session_id(const spy_trace *t);
const char *spy_trace_dir(const spy_trace *t);
const char *spy_trace_writer_name(const spy_trace *t);
/* Counters so far; thread-safe. */
void spy_trace_get_stats(spy_trace *t, spy_trace_stats *out);

/* What spy_trace_recover found and did. */
typedef struct spy_trace_recovery {
  uint32_t files;     /* spill files read */
  uint64_t committed; /* the store's last action (its seq) before */
  uint64_t recovered; /* spilled actions added to the store */
  uint64_t skipped;   /* spilled actions the store already held */
  uint64_t lost;      /* actions numbered between the store's last and the
                         last recovered that no spill file holds: they were
                         in memory when the process died */
  uint64_t torn;      /* spill records cut or damaged (the file's end when
                         the process died mid-write): not recovered */
  int64_t not_stored; /* actions the writer could not store */
} spy_trace_recovery;

/* Recovers the session a killed process left in `dir` (a JSON-lines or
 * SQLite session directory; for postgres the spill directory, with the
 * server in `conninfo`, else NULL): the actions its spill files hold
 * beyond what the store committed are added to the store in sequence
 * order (a JSON-lines file's cut last line is cut off first), then the
 * spill files are removed. Nothing to do (no spill file) is 0 with
 * files 0. Returns 0 or a negative code (SPY_ENOENT: no store beside
 * the spill files; SPY_EBADVALUE: not a spill file, files of different
 * sessions), with a message in err. Not concurrent with a writer of the
 * session. */
int spy_trace_recover(const char *dir, const char *conninfo,
                      spy_trace_recovery *out, char *err, size_t errcap);

/* ---- readers ------------------------------------------------------------- */

/* The store schema version this build writes and the newest it reads.
 * 5: as 4, but a sources row may also be a copy/insert delta of its base
 * (codec 3: copies of base ranges and literal bytes, far cheaper to make
 * than a zstd delta). 4: as 3, but an action is kept in its kind's table only:
 * the readers rebuild the action stream from the tables, and action_batches
 * keeps one row per writer batch with the records of only the actions the
 * tables cannot give back exactly (application kinds, text the store
 * would change). 3: one SQL table per action kind, derived from the catalog,
 * with the reference's tables as views, and a sources row may be a delta of
 * another payload named by its base_source_id (codec 2); 2: hand-made
 * relational tables, binary records in action_batches; 1: JSON lines in
 * action_batches. All are read (before 4 the reader replays action_batches);
 * writers refuse to add to a store of another version. */
#define SPY_TRACE_SCHEMA_VERSION 5

typedef struct spy_trace_reader spy_trace_reader;

/* Opens a store: a session directory holding logs.json (JSON-lines), a
 * trace.db file or a directory holding one (SQLite), or a postgres:// or
 * postgresql:// URI / "host=… " conninfo (PostgreSQL; session_id selects a
 * session, NULL = the latest). Returns 0, SPY_ENOENT, SPY_EBADSCHEMA (the
 * store was written by a newer schema), or another code. */
int spy_trace_reader_open(const char *store, const char *session_id,
                          spy_trace_reader **out);
void spy_trace_reader_close(spy_trace_reader *r);
/* The last error's message (never NULL). */
const char *spy_trace_reader_error(const spy_trace_reader *r);
/* What the reader read past, or NULL: e.g. a JSON-lines trace whose last
 * line was cut (the writer stopped mid-line) is read up to its last
 * complete line, and this names the file, the line and its byte offset.
 * Set during iteration; cleared by rewind. */
const char *spy_trace_reader_warning(const spy_trace_reader *r);

/* Iterates every action of the session in seq order. Returns 1 and fills
 * *a (valid until the next call), 0 at the end, or a negative code. SRC
 * values come back as SRCREF with their hash; fetch content with
 * spy_trace_reader_source. */
int spy_trace_reader_next(spy_trace_reader *r, spy_trace_action *a);
/* Restarts iteration. */
int spy_trace_reader_rewind(spy_trace_reader *r);

/* Fetches a payload by content hash into a buffer the reader owns (valid
 * until the next call). Returns 0, SPY_ENOENT. */
int spy_trace_reader_source(spy_trace_reader *r, const uint64_t hash[2],
                            const char **p, size_t *n);

typedef struct spy_trace_build_info {
  uint32_t build;
  uint64_t started_us, ended_us; /* 0 if not ended */
} spy_trace_build_info;
typedef struct spy_trace_hook_call {
  uint32_t build;
  const char *hook;   /* "transform", "load", "resolve_id", "render_chunk" */
  const char *plugin; /* plugin name */
  const char *module; /* module id / request, "" for render_chunk */
  const char *call_id;
  /* wall-clock us of the Start and End actions. The session takes End's
   * time as its emit begins and Start's as its emit ends (once the record
   * is encoded, after any wait for queue space or spill), so ended_us -
   * started_us covers the hook's own work and not the tracer's. It is
   * wall time: it includes what the hook's thread waited for the CPU. */
  uint64_t started_us, ended_us;
  int has_input, has_output;
  uint64_t input[2], output[2]; /* source hashes */
} spy_trace_hook_call;

/* Builds, modules, imports and hook calls: each callback is called once per
 * item (return nonzero to stop). Strings are valid during the call. */
int spy_trace_reader_builds(spy_trace_reader *r,
                            int (*cb)(void *, const spy_trace_build_info *),
                            void *arg);
int spy_trace_reader_modules(spy_trace_reader *r, uint32_t build,
                             int (*cb)(void *, const char *module,
                                       int is_external),
                             void *arg);
int spy_trace_reader_imports(spy_trace_reader *r, uint32_t build,
                             int (*cb)(void *, const char *from, const char *to,
                                       const char *kind),
                             void *arg);
int spy_trace_reader_hook_calls(spy_trace_reader *r,
                                int (*cb)(void *, const spy_trace_hook_call *),
                                void *arg);

/* Hook calls the store picks itself: only one build's, plugin's or
 * module's, in the order asked for, at most N (`spyglass trace hooks
 * --slowest N`). A SQLite store of schema 6 or later answers with one
 * query over its hook_calls table (filter, ORDER BY, LIMIT); the other
 * stores (JSON-lines, PostgreSQL, older SQLite stores) are replayed
 * action by action, the filter applied as each call ends and, with a
 * limit, only the best `limit` calls kept (a bounded heap): memory grows
 * with the limit and the calls in flight, not with the session. Every
 * store holding the same session gives the same answer.
 *
 * The order calls are reported in. Every order is total, so the answer
 * (and which calls a limit keeps) is the same from every store. */
typedef enum spy_trace_call_order {
  /* as the calls ended (spy_trace_reader_hook_calls's order) */
  SPY_TRACE_CALLS_ENDED = 0,
  /* as they started: started_us, ties by the Start action's seq */
  SPY_TRACE_CALLS_STARTED,
  /* longest first: ended_us - started_us (0 when negative) descending,
   * ties in start order as above */
  SPY_TRACE_CALLS_SLOWEST,
} spy_trace_call_order;

/* Which calls, in which order, how many. All zero: every ended call, in
 * the order they ended. The strings are the caller's, read during the
 * call only. */
typedef struct spy_trace_call_query {
  uint32_t build;             /* only this build's calls; 0: every build */
  const char *plugin;         /* only this plugin's; NULL: every plugin */
  const char *module;         /* only calls on this module (or request; ""
                                 matches render_chunk's); NULL: any */
  spy_trace_call_order order; /* default SPY_TRACE_CALLS_ENDED */
  uint64_t limit;             /* at most this many, the first in `order`;
                                 0: no limit */
} spy_trace_call_query;

/* Calls cb once per hook call of the session that matches q, in q's order,
 * at most q->limit times (return nonzero from cb to stop early). q NULL is
 * the all-zero query. The call's strings are valid during cb only. A call
 * that never ended is not reported. Returns 0, SPY_EINVAL (r NULL, an
 * unknown order), SPY_ENOMEM or another negative code with the reader's
 * error set (spy_trace_reader_error). Not thread-safe on one reader; it
 * moves the reader's position (rewind before spy_trace_reader_next). */
int spy_trace_reader_hook_calls_query(
    spy_trace_reader *r, const spy_trace_call_query *q,
    int (*cb)(void *, const spy_trace_hook_call *), void *arg);

typedef struct spy_trace_summary {
  uint64_t actions, builds, modules, chunks, hook_calls;
  uint64_t sources, source_bytes, stored_bytes, saved_bytes;
  int64_t lost;      /* actions the writer reported as not stored; -1 unknown */
  uint64_t replaced; /* bytes that were not UTF-8, made U+FFFD in the JSON
                        form (JSON-lines; SQL stores keep the bytes: 0) */
} spy_trace_summary;
/* Totals for `spyglass trace summary`. */
int spy_trace_reader_summary(spy_trace_reader *r, spy_trace_summary *out);

/* ---- publishing on the bus (bus_tap.c) ----------------------------------- */

/* A tap sees each action a session accepts, on the emitting thread, before
 * it is queued — but only while (*gate & mask) != 0 (one relaxed load and
 * a branch per emit otherwise). `action` must not block; `act` is the
 * caller's struct, valid during the call only; `ts` is the time as the
 * emit begins (for a hook's Start the store's time is taken after the
 * tap and the encode, so a live view's durations include them). */
typedef struct spy_trace_tap {
  const volatile uint64_t *gate; /* NULL: no tap */
  uint64_t mask;
  void (*action)(void *ctx, const spy_trace_kind *kind, const void *act,
                 uint64_t ts_us, uint32_t build);
  void *ctx;
} spy_trace_tap;
/* Sets (copies) or, with NULL, removes the session's tap. Returns 0 or
 * SPY_EINVAL (t NULL). Not concurrent with emits into the session. */
int spy_trace_set_tap(spy_trace *t, const spy_trace_tap *tap);

struct spy_provider;
/* Publishes the session's builds on the bus: each action also feeds the
 * provider's build feed (spyglass/trace_feed.h), which sends the live
 * progress of the current build to subscribers of SPY_FEAT_TRACE. Nothing
 * is collected while nobody subscribes. p NULL stops publishing. Call it
 * between emits (not concurrently with them), and stop (or destroy the
 * session) before destroying the provider. Returns 0, SPY_EINVAL (t NULL),
 * SPY_ENOMEM. A disabled session publishes nothing (returns 0). */
int spy_trace_publish(spy_trace *t, struct spy_provider *p);

#ifdef __cplusplus
}
#endif
#endif
