/* pprof.c — the profile written in pprof's protocol buffer format
 * (github.com/google/pprof, proto/profile.proto), uncompressed: pprof and
 * `go tool pprof` read it as it is.
 *
 * One Sample per site (table.h) with four values, as Go's heap profiles:
 * alloc_objects, alloc_space (every sample taken there since the start,
 * estimated), inuse_objects, inuse_space (those still live); inuse_space
 * is the default. Locations are the sites' return addresses less one (the
 * call instruction, so pprof names the line of the call), each in the
 * Mapping of /proc/self/maps' executable segment that holds it, so pprof
 * finds and symbolises the binaries itself. An object cache's samples
 * start with one more frame, a Function named "cache:NAME", and carry the
 * label cache=NAME. When sluice's own code is not known (a static link,
 * stack.c), drop_frames names its entry points for pprof to cut.
 *
 * Nothing here allocates with malloc: the encoder's buffers are os_map'd
 * (grown by copying), small messages are built on the stack, the maps
 * file is read with read(2). The sites are encoded under the prof lock;
 * the maps and the file are read and written after it.
 */
#define _GNU_SOURCE
#include "pprof.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../os/os.h"
#include "stack.h"
#include "table.h"

/* ---- an os_map'd byte buffer ------------------------------------------- */

struct buf {
    uint8_t *p;
    size_t len, cap;
    bool failed;
};

static bool buf_room(struct buf *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->len + n <= b->cap)
        return true;
    size_t nc = b->cap ? b->cap : (size_t)64 << 10;
    while (nc < b->len + n)
        nc *= 2;
    uint8_t *q = os_map(nc);
    if (!q) {
        b->failed = true;
        return false;
    }
    if (b->p) {
        memcpy(q, b->p, b->len);
        os_unmap(b->p, b->cap);
    }
    b->p = q;
    b->cap = nc;
    return true;
}

static void buf_put(struct buf *b, const void *d, size_t n)
{
    if (buf_room(b, n)) {
        memcpy(b->p + b->len, d, n);
        b->len += n;
    }
}

static void buf_free(struct buf *b)
{
    if (b->p)
        os_unmap(b->p, b->cap);
    *b = (struct buf){ 0 };
}

/* ---- protocol buffer encoding ------------------------------------------ */

enum { WIRE_VARINT = 0, WIRE_BYTES = 2 };

/* A small message, built on the stack: a sample (65 location ids), a
 * location, a mapping, a function, a value type, a label. */
struct msg {
    uint8_t d[1024];
    size_t n;
};

static void m_varint(struct msg *m, uint64_t v)
{
    while (v >= 0x80) {
        m->d[m->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    m->d[m->n++] = (uint8_t)v;
}
static void m_key(struct msg *m, unsigned field, unsigned wire) { m_varint(m, (uint64_t)field << 3 | wire); }
static void m_uint(struct msg *m, unsigned field, uint64_t v) /* proto3: zero is left out */
{
    if (v) {
        m_key(m, field, WIRE_VARINT);
        m_varint(m, v);
    }
}
static void m_sub(struct msg *m, unsigned field, const struct msg *sub)
{
    m_key(m, field, WIRE_BYTES);
    m_varint(m, sub->n);
    memcpy(m->d + m->n, sub->d, sub->n);
    m->n += sub->n;
}

/* A field of the Profile itself: key, length, bytes. */
static void put_field(struct buf *b, unsigned field, const void *d, size_t n)
{
    struct msg head = { .n = 0 };
    m_key(&head, field, WIRE_BYTES);
    m_varint(&head, n);
    buf_put(b, head.d, head.n);
    buf_put(b, d, n);
}
static void put_msg(struct buf *b, unsigned field, const struct msg *m) { put_field(b, field, m->d, m->n); }
static void put_uint(struct buf *b, unsigned field, uint64_t v)
{
    struct msg m = { .n = 0 };
    m_uint(&m, field, v);
    buf_put(b, m.d, m.n);
}

/* Profile's fields (profile.proto) */
enum {
    P_SAMPLE_TYPE = 1, P_SAMPLE, P_MAPPING, P_LOCATION, P_FUNCTION, P_STRING, P_DROP_FRAMES,
    P_TIME_NANOS = 9, P_PERIOD_TYPE = 11, P_PERIOD = 12, P_DEFAULT_SAMPLE_TYPE = 14,
};

/* ---- the string table --------------------------------------------------- */

struct strings {
    struct buf text; /* NUL-terminated strings */
    struct buf offs; /* uint32_t offsets into text, by index */
};

static uint32_t str_count(struct strings *t) { return (uint32_t)(t->offs.len / sizeof(uint32_t)); }

/* The index of s, added if new (a linear search: a profile has few
 * strings, the mapped files' names and the caches'). */
static uint64_t intern(struct strings *t, const char *s)
{
    uint32_t n = str_count(t);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off;
        memcpy(&off, t->offs.p + i * sizeof off, sizeof off);
        if (!strcmp((const char *)t->text.p + off, s))
            return i;
    }
    uint32_t off = (uint32_t)t->text.len;
    buf_put(&t->text, s, strlen(s) + 1);
    buf_put(&t->offs, &off, sizeof off);
    return n;
}

/* ---- locations: one id per address -------------------------------------- */

struct loc {
    uintptr_t addr; /* 0: empty */
    uint64_t id;
};
struct locs {
    struct buf mem;
    size_t cap; /* a power of two, at least twice the frames */
    uint64_t next_id;
};

static uint64_t loc_id(struct locs *l, uintptr_t a)
{
    struct loc *t = (struct loc *)(void *)l->mem.p;
    size_t i = (size_t)((a * 0x9e3779b97f4a7c15ull) >> 20) & (l->cap - 1);
    while (t[i].addr && t[i].addr != a)
        i = (i + 1) & (l->cap - 1);
    if (!t[i].addr) {
        t[i].addr = a;
        t[i].id = ++l->next_id;
    }
    return t[i].id;
}

/* ---- the samples, under the prof lock ----------------------------------- */

struct caches {
    uint64_t id[64], name[64]; /* an object cache's pseudo-frame: location id, name's string */
    unsigned n;
};

struct encoder {
    struct buf out;
    struct strings str;
    struct locs locs;
    struct caches caches;
    size_t frames; /* counting pass: frames of every site */
};

static void count_frames(struct prof_site *s, void *arg)
{
    ((struct encoder *)arg)->frames += s->nframes + 1;
}

static uint64_t round_value(double v) { return v <= 0 ? 0 : (uint64_t)(v + 0.5); }

/* The pseudo-location of cache NAME (its id). */
static uint64_t cache_loc(struct encoder *e, const char *cache)
{
    char name[PROF_NAME + 8] = "cache:";
    strncpy(name + 6, cache, PROF_NAME);
    name[sizeof name - 1] = 0;
    uint64_t str = intern(&e->str, name);
    for (unsigned i = 0; i < e->caches.n; i++)
        if (e->caches.name[i] == str)
            return e->caches.id[i];
    if (e->caches.n == 64)
        return 0;
    e->caches.name[e->caches.n] = str;
    e->caches.id[e->caches.n] = ++e->locs.next_id;
    return e->caches.id[e->caches.n++];
}

static void encode_site(struct prof_site *s, void *arg)
{
    struct encoder *e = arg;
    if (!s->samples)
        return;
    struct msg m = { .n = 0 }, ids = { .n = 0 }, vals = { .n = 0 };
    uint64_t cid = s->cache[0] ? cache_loc(e, s->cache) : 0;
    if (cid)
        m_varint(&ids, cid);
    for (uint32_t i = 0; i < s->nframes; i++)
        m_varint(&ids, loc_id(&e->locs, s->frames[i]));
    m_key(&m, 1, WIRE_BYTES); /* location_id, packed */
    m_varint(&m, ids.n);
    memcpy(m.d + m.n, ids.d, ids.n);
    m.n += ids.n;
    const double v[4] = { s->alloc_objects, s->alloc_bytes, s->live_objects, s->live_bytes };
    for (int i = 0; i < 4; i++)
        m_varint(&vals, round_value(v[i]));
    m_key(&m, 2, WIRE_BYTES); /* value, packed */
    m_varint(&m, vals.n);
    memcpy(m.d + m.n, vals.d, vals.n);
    m.n += vals.n;
    if (s->cache[0]) { /* label cache=NAME */
        struct msg label = { .n = 0 };
        char name[PROF_NAME];
        memcpy(name, s->cache, PROF_NAME);
        name[PROF_NAME - 1] = 0;
        m_uint(&label, 1, intern(&e->str, "cache"));
        m_uint(&label, 2, intern(&e->str, name));
        m_sub(&m, 3, &label);
    }
    put_msg(&e->out, P_SAMPLE, &m);
}

/* ---- mappings and locations, after the lock ----------------------------- */

struct mapping {
    uintptr_t lo, hi;
};

/* One line of /proc/self/maps: an executable segment of a file becomes a
 * Mapping (id: its index + 1 in *maps). */
static void map_line(struct encoder *e, struct buf *maps, const char *line)
{
    const char *s = line;
    uint64_t lo = os_parse_hex(&s);
    if (*s++ != '-')
        return;
    uint64_t hi = os_parse_hex(&s);
    if (*s++ != ' ' || s[2] != 'x')
        return;
    s += 5;
    uint64_t off = os_parse_hex(&s);
    for (int field = 0; field < 2 && *s; field++) { /* device, inode */
        while (*s == ' ')
            s++;
        while (*s && *s != ' ')
            s++;
    }
    while (*s == ' ')
        s++;
    if (*s != '/')
        return; /* anonymous, [vdso], [stack] */
    struct mapping m = { lo, hi };
    buf_put(maps, &m, sizeof m);
    struct msg msg = { .n = 0 };
    m_uint(&msg, 1, maps->len / sizeof m);
    m_uint(&msg, 2, lo);
    m_uint(&msg, 3, hi);
    m_uint(&msg, 4, off);
    m_uint(&msg, 5, intern(&e->str, s));
    put_msg(&e->out, P_MAPPING, &msg);
}

static void read_maps(struct encoder *e, struct buf *maps)
{
    int fd = os_open_read("/proc/self/maps");
    if (fd < 0)
        return;
    char chunk[4096], line[4096 + 64];
    size_t ll = 0;
    long got;
    while ((got = os_read(fd, chunk, sizeof chunk)) > 0)
        for (long i = 0; i < got; i++) {
            if (chunk[i] != '\n') {
                if (ll + 1 < sizeof line)
                    line[ll++] = chunk[i];
                continue;
            }
            line[ll] = 0;
            map_line(e, maps, line);
            ll = 0;
        }
    os_close(fd);
}

static void encode_locations(struct encoder *e, struct buf *maps)
{
    const struct mapping *mp = (const struct mapping *)(void *)maps->p;
    size_t nmaps = maps->len / sizeof *mp;
    const struct loc *t = (const struct loc *)(void *)e->locs.mem.p;
    for (size_t i = 0; i < e->locs.cap; i++) {
        if (!t[i].addr)
            continue;
        uintptr_t pc = t[i].addr - 1; /* a return address: the call is before it */
        struct msg m = { .n = 0 };
        m_uint(&m, 1, t[i].id);
        for (size_t k = 0; k < nmaps; k++)
            if (pc >= mp[k].lo && pc < mp[k].hi) {
                m_uint(&m, 2, k + 1);
                break;
            }
        m_uint(&m, 3, pc);
        put_msg(&e->out, P_LOCATION, &m);
    }
    for (unsigned i = 0; i < e->caches.n; i++) { /* cache:NAME, a function of its own */
        struct msg line = { .n = 0 }, loc = { .n = 0 }, fn = { .n = 0 };
        m_uint(&line, 1, i + 1); /* function_id */
        m_uint(&loc, 1, e->caches.id[i]);
        m_sub(&loc, 4, &line);
        put_msg(&e->out, P_LOCATION, &loc);
        m_uint(&fn, 1, i + 1);
        m_uint(&fn, 2, e->caches.name[i]);
        m_uint(&fn, 3, e->caches.name[i]);
        put_msg(&e->out, P_FUNCTION, &fn);
    }
}

static void value_type(struct encoder *e, unsigned field, const char *type, const char *unit)
{
    struct msg m = { .n = 0 };
    m_uint(&m, 1, intern(&e->str, type));
    m_uint(&m, 2, intern(&e->str, unit));
    put_msg(&e->out, field, &m);
}

/* What pprof drops when sluice's frames are in the stacks (a static link). */
static const char drop_regex[] =
    "malloc|calloc|realloc|reallocarray|aligned_alloc|memalign|posix_memalign|valloc|pvalloc|"
    "operator new.*|sl_malloc|sl_calloc|sl_realloc|sl_reallocarray|sl_aligned_alloc|sl_memalign|"
    "sl_posix_memalign|sl_valloc|sl_pvalloc|sl_alloc_bulk|sl_cache_alloc|sl_cache_alloc_bulk|"
    "alloc_large|alloc_prof|alloc_sampled|alloc_aligned|realloc_slow|realloc_prof|cache_alloc_slow|"
    "prof_record|prof_stack|backtrace";

static bool encode(struct encoder *e)
{
    e->str.text = (struct buf){ 0 };
    intern(&e->str, ""); /* string 0 is empty */
    value_type(e, P_SAMPLE_TYPE, "alloc_objects", "count");
    value_type(e, P_SAMPLE_TYPE, "alloc_space", "bytes");
    value_type(e, P_SAMPLE_TYPE, "inuse_objects", "count");
    value_type(e, P_SAMPLE_TYPE, "inuse_space", "bytes");
    prof_lock_take();
    prof_sites_each(count_frames, e);
    e->locs.cap = 64;
    while (e->locs.cap < 2 * e->frames)
        e->locs.cap *= 2;
    if (buf_room(&e->locs.mem, e->locs.cap * sizeof(struct loc))) {
        memset(e->locs.mem.p, 0, e->locs.cap * sizeof(struct loc));
        prof_sites_each(encode_site, e);
    }
    prof_lock_drop();
    if (e->locs.mem.failed)
        return false;
    struct buf maps = { 0 };
    read_maps(e, &maps);
    encode_locations(e, &maps);
    buf_free(&maps);
    value_type(e, P_PERIOD_TYPE, "space", "bytes");
    put_uint(&e->out, P_PERIOD, (uint64_t)prof_mean());
    put_uint(&e->out, P_DEFAULT_SAMPLE_TYPE, intern(&e->str, "inuse_space"));
    if (!prof_stack_in_sluice((uintptr_t)&encode))
        put_uint(&e->out, P_DROP_FRAMES, intern(&e->str, drop_regex));
    struct timespec ts;
    if (!clock_gettime(CLOCK_REALTIME, &ts))
        put_uint(&e->out, P_TIME_NANOS, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    for (uint32_t i = 0, n = str_count(&e->str); i < n; i++) {
        uint32_t off;
        memcpy(&off, e->str.offs.p + i * sizeof off, sizeof off);
        const char *s = (const char *)e->str.text.p + off;
        put_field(&e->out, P_STRING, s, strlen(s));
    }
    return !e->out.failed && !e->str.text.failed && !e->str.offs.failed;
}

int prof_write_file(const char *path)
{
    struct encoder e;
    memset(&e, 0, sizeof e);
    int err = 0;
    if (!encode(&e)) {
        err = ENOMEM;
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            err = errno;
        } else {
            for (size_t done = 0; done < e.out.len;) {
                ssize_t w = write(fd, e.out.p + done, e.out.len - done);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0) {
                    err = w < 0 ? errno : EIO;
                    break;
                }
                done += (size_t)w;
            }
            if (close(fd) && !err)
                err = errno;
        }
    }
    buf_free(&e.out);
    buf_free(&e.str.text);
    buf_free(&e.str.offs);
    buf_free(&e.locs.mem);
    return err;
}
