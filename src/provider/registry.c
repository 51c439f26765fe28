/* registry.c — named values, kept in wire form.
 *
 * Each entry owns a slot in one arena holding its encoded SET entry (see
 * spy_delta_encode_entry); a set rewrites the value bytes in place and
 * bumps the entry's version only if the bytes changed, so a flush copies
 * changed entries into the frame with one memcpy each. Lookup by name is an
 * open-addressing hash table, fronted by a cache keyed by the name's
 * pointer (string literals hit it every time; the content is still
 * compared, so a reused buffer with a new name cannot alias).
 *
 * The typed by-handle setters (provider.h) do not come here on each set:
 * they store the value's bits into the entry's slot, and the flush applies
 * the slots (spy__registry_apply) before it encodes, so a frame that sets
 * a value many times pays a plain store each time and the compare and
 * rewrite once per flush. Every other store to an entry cancels its
 * pending slot, so the last set wins whichever way it came.
 */
#include <stdlib.h>
#include <string.h>

#include "provider/provider_internal.h"

#define PAD4(n) (((n) + 3u) & ~(uint32_t)3u)

int spy__registry_init(registry *r, uint32_t cap, uint32_t string_max) {
  memset(r, 0, sizeof *r);
  r->cap = cap;
  r->string_max = string_max;
  uint32_t vmax = string_max > 32 ? string_max : 32;
  r->slot_bytes = PAD4(8 + SPY_KEY_MAX + vmax);
  uint32_t tsize = 16;
  while (tsize < cap * 2)
    tsize <<= 1;
  r->table_mask = tsize - 1;
  r->e = calloc(cap, sizeof *r->e);
  r->arena = calloc(cap, r->slot_bytes);
  r->table = malloc(tsize * sizeof *r->table);
  r->slots = calloc(cap, sizeof *r->slots);
  if (!r->e || !r->arena || !r->table || !r->slots)
    return SPY_ENOMEM;
  memset(r->table, 0xFF, tsize * sizeof *r->table);
  for (uint32_t i = 0; i < cap; i++)
    r->e[i].enc = r->arena + (size_t)i * r->slot_bytes;
  for (int i = 0; i < NAME_CACHE; i++)
    r->cache[i].idx = -1;
  return 0;
}

void spy__registry_free(registry *r) {
  free(r->e);
  free(r->arena);
  free(r->table);
  free(r->slots);
  memset(r, 0, sizeof *r);
}

/* strcmp for short names, inline: the call costs more than the compare. */
static inline int same_name(const char *a, const char *b) {
  while (*a && *a == *b) {
    a++;
    b++;
  }
  return *a == *b;
}

static uint32_t hash_name(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

int spy__registry_lookup(registry *r, const char *name, int register_it,
                         int wanted_default) {
  if (!name)
    return SPY_EINVAL;
  /* Fibonacci hashing of the pointer: neighbouring literals (a few bytes
   * apart in .rodata) land in different slots. */
  uint32_t ci =
      (uint32_t)(((uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ull) >>
                 (64 - NAME_CACHE_BITS));
  int32_t hit = r->cache[ci].idx;
  if (r->cache[ci].ptr == name && hit >= 0 && same_name(r->e[hit].name, name))
    return hit;
  size_t n = strlen(name);
  if (n == 0 || n > SPY_KEY_MAX)
    return SPY_EINVAL;
  uint32_t h = hash_name(name, n);
  uint32_t count = atomic_load_explicit(&r->count, memory_order_relaxed);
  for (uint32_t probe = 0;; probe++) {
    uint32_t slot = (h + probe) & r->table_mask;
    int32_t idx = r->table[slot];
    if (idx < 0) {
      if (!register_it)
        return SPY_ENOENT;
      if (count >= r->cap)
        return SPY_ENOSPC;
      reg_entry *e = &r->e[count];
      memcpy(e->name, name, n + 1);
      e->name_len = (uint32_t)n;
      e->kind = SPY_VAL_NONE;
      e->version = e->sent_version = 0;
      e->meta_sent = 0;
      r->slots[count].kind = 0; /* a set through an unregistered handle */
      atomic_store_explicit(&e->wanted, (uint8_t)wanted_default,
                            memory_order_relaxed);
      r->table[slot] = (int32_t)count;
      /* Publish: the service reads names of entries below count. */
      atomic_store_explicit(&r->count, count + 1, memory_order_release);
      idx = (int32_t)count;
    } else if (r->e[idx].name_len != n ||
               memcmp(r->e[idx].name, name, n) != 0) {
      continue;
    }
    r->cache[ci].ptr = name;
    r->cache[ci].idx = idx;
    return idx;
  }
}

/* Sizes of fixed kinds (wire.h), inline for the store's fast path. */
static const int8_t kind_size[] = {0, 8, 8, 8, 16, 24, 32, 8, 1, -1, -1};

/* Encodes v into entry e's slot (a new kind, a string, the first set): off
 * the setters' fast path, so that they stay small enough to inline and
 * build no frame for its scratch. */
__attribute__((noinline)) static void store_encode(registry *r, reg_entry *e,
                                                   const spy_value *v) {
  spy_value cut = *v;
  if ((v->kind == SPY_VAL_STRING || v->kind == SPY_VAL_BLOB) &&
      cut.v.s.len > r->string_max)
    cut.v.s.len = r->string_max;
  uint8_t tmp[8 + SPY_KEY_MAX + 512];
  uint8_t *out = r->slot_bytes <= sizeof tmp ? tmp : NULL;
  if (!out) {
    /* A large string_max: encode straight into the slot. */
    int len = spy_delta_encode_entry(e->enc, r->slot_bytes, SPY_DELTA_SET,
                                     e->name, e->name_len, &cut);
    if (len > 0) {
      e->enc_len = (uint32_t)len;
      e->kind = v->kind;
      e->version++;
    }
    return;
  }
  int len = spy_delta_encode_entry(out, r->slot_bytes, SPY_DELTA_SET, e->name,
                                   e->name_len, &cut);
  if (len <= 0)
    return;
  if (e->kind == v->kind && (uint32_t)len == e->enc_len &&
      memcmp(out, e->enc, (size_t)len) == 0)
    return; /* unchanged */
  memcpy(e->enc, out, (size_t)len);
  e->enc_len = (uint32_t)len;
  e->kind = v->kind;
  e->version++;
}

static inline void store(registry *r, int i, const spy_value *v) {
  if (i < 0 ||
      (uint32_t)i >= atomic_load_explicit(&r->count, memory_order_relaxed) ||
      v->kind >= sizeof kind_size)
    return;
  reg_entry *e = &r->e[i];
  int size = kind_size[v->kind];
  if (size <= 0 && v->kind != SPY_VAL_STRING && v->kind != SPY_VAL_BLOB)
    return;             /* unknown kind or NONE */
  r->slots[i].kind = 0; /* this set comes after any pending typed one */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (v->kind == e->kind && size > 0) {
    /* Same fixed kind: compare and rewrite the value bytes in place, with
     * fixed-size word moves (a memcmp call costs more than the rest). */
    uint8_t *dst = e->enc + 8 + e->name_len;
    if (size == 1) {
      uint8_t b = v->v.b ? 1 : 0;
      if (*dst != b) {
        *dst = b;
        e->version++;
      }
      return;
    }
    int changed = 0;
    const uint8_t *src = (const uint8_t *)&v->v;
    for (int k = 0; k < size; k += 8) {
      uint64_t a, b;
      memcpy(&a, src + k, 8);
      memcpy(&b, dst + k, 8);
      if (a != b) {
        memcpy(dst + k, &a, 8);
        changed = 1;
      }
    }
    e->version += (uint32_t)changed;
    return;
  }
#endif
  store_encode(r, e, v);
}

void spy__registry_store(registry *r, int i, const spy_value *v) {
  store(r, i, v);
}

/* The hot-path setters (provider.h), here so the store inlines. The
 * inline callers checked that the registry is watched (this frame's copy
 * of the watch word). */
void spy__value_set(spy_provider *p, const char *name, const spy_value *v) {
  int i = spy__registry_lookup(
      &p->reg, name, 1,
      atomic_load_explicit(&p->reg_all_wanted, memory_order_relaxed));
  if (i >= 0)
    store(&p->reg, i, v);
}

void spy__value_set_at(spy_provider *p, int handle, const spy_value *v) {
  store(&p->reg, handle, v);
}

/* Entry i holds a value of this kind already (every set after the
 * first): its bytes in the wire form are compared and rewritten in place,
 * a few loads and a store, no spy_value built. 1 if done, 0 if the general
 * store has to do it. i < count. */
static inline int store_bits(registry *r, int i, uint8_t kind, uint64_t bits,
                             int size) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  reg_entry *e = &r->e[i];
  if (e->kind != kind)
    return 0;
  uint8_t *dst = e->enc + 8 + e->name_len;
  if (size == 1) {
    if (*dst != (uint8_t)bits) {
      *dst = (uint8_t)bits;
      e->version++;
    }
    return 1;
  }
  uint64_t old;
  memcpy(&old, dst, 8);
  if (old != bits) {
    memcpy(dst, &bits, 8);
    e->version++;
  }
  return 1;
#else
  (void)r, (void)i, (void)kind, (void)bits, (void)size;
  return 0;
#endif
}

void spy__registry_apply(registry *r) {
  uint32_t n = atomic_load_explicit(&r->count, memory_order_relaxed);
  struct spy__vslot *s = r->slots;
  for (uint32_t i = 0; i < n; i++) {
    if (!s[i].kind)
      continue;
    uint8_t kind = (uint8_t)s[i].kind;
    uint64_t bits = s[i].bits;
    s[i].kind = 0;
    if (store_bits(r, (int)i, kind, bits, kind == SPY_VAL_BOOL ? 1 : 8))
      continue;
    spy_value x = {.kind = kind};
    if (kind == SPY_VAL_BOOL)
      x.v.b = bits != 0;
    else
      memcpy(&x.v, &bits, 8); /* f[0], i or u: the first 8 bytes */
    store(r, (int)i, &x);
  }
}

/* The typed by-handle setters out of line (provider.h inlines the same
 * slot store): the value is built here, past the watched check. */
static void put_slot(spy_provider *p, int handle, uint8_t kind, uint64_t bits) {
  if (handle >= 0 && (uint32_t)handle < p->reg.cap) {
    p->reg.slots[handle].bits = bits;
    p->reg.slots[handle].kind = kind;
  }
}

void spy__value_set_f64_at(spy_provider *p, int handle, double v) {
  uint64_t bits;
  memcpy(&bits, &v, 8);
  put_slot(p, handle, SPY_VAL_FLOAT, bits);
}

void spy__value_set_i64_at(spy_provider *p, int handle, int64_t v) {
  put_slot(p, handle, SPY_VAL_INT, (uint64_t)v);
}

void spy__value_set_u64_at(spy_provider *p, int handle, uint64_t v) {
  put_slot(p, handle, SPY_VAL_UINT, v);
}

void spy__value_set_bool_at(spy_provider *p, int handle, int v) {
  put_slot(p, handle, SPY_VAL_BOOL, v != 0);
}

void spy__value_set_vec_at(spy_provider *p, int handle, double x, double y,
                           double z, double w, int n) {
  spy_value v = {.kind = (uint8_t)(SPY_VAL_FLOAT2 + (n - 2))};
  v.v.f[0] = x;
  v.v.f[1] = y;
  v.v.f[2] = z;
  v.v.f[3] = w;
  store(&p->reg, handle, &v);
}

void spy__registry_encode(registry *r, spy_frame_writer *w, int full) {
  size_t mark = w->len;
  spy_delta_writer d;
  spy_delta_begin(&d, w, SPY_SEC_REGISTRY, full ? SPY_DELTA_FULL : 0);
  uint32_t n = atomic_load_explicit(&r->count, memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    reg_entry *e = &r->e[i];
    int wanted = atomic_load_explicit(&e->wanted, memory_order_relaxed);
    if (wanted && e->version > 0) {
      if (full || e->version != e->sent_version || e->meta_sent) {
        spy_delta_put_encoded(&d, e->enc, e->enc_len, 1);
        e->sent_version = e->version;
        e->meta_sent = 0;
      }
    } else if (full || !e->meta_sent) {
      /* Outside every filter (or never set): name and kind only. */
      spy_value k = {.kind = e->kind ? e->kind : SPY_VAL_FLOAT};
      spy_delta_put(&d, SPY_DELTA_META, e->name, e->name_len, &k);
      e->meta_sent = 1;
      e->sent_version = 0; /* resend the value once it is wanted */
    }
  }
  spy_delta_end(&d);
  if (!full && d.count == 0 && !w->err) {
    w->len = mark; /* nothing changed: no section at all */
    w->sec_start = 0;
  }
}
