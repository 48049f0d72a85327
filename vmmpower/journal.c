/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Knob journal (see journal.h for the contract, docs/power-driver.md for the
 * file format).
 *
 * Why one append-only file and not one file per knob written atomically:
 * an append costs one write() + one fdatasync(); an atomic per-knob file
 * costs create + write + fsync + rename + fsync(dir), i.e. two syncs and
 * four metadata operations per write, and thousands of files for a large
 * host (cpuidle states x CPUs).  The price of appending is that a crash can
 * tear the last record; every record therefore carries its length and a
 * CRC-32, and a record that fails either check is ignored (and cut off
 * before the next append).  The file is compacted (rewritten atomically
 * with one record per knob) when superseded records outnumber live ones.
 *
 * Why every record holds (original, before, after) and not just the
 * original: the record is durable before the knob is written, so after a
 * kill -9 the knob holds "before" (write not made), "after", or whatever the
 * kernel made of "after" (cpufreq clamps, a cpuset narrows a mask).  That
 * record is "unverified" (U) until the caller has read the knob back and
 * journal_note_actual() has appended the verified state (K): only then is
 * "anything else than before/after" someone else's change.  Restore takes any
 * value of a knob whose last record is unverified as ours.
 *
 * The verifying record is written but not fdatasync()ed: a write() that
 * returned survives kill -9 (page cache), and only a crash of the whole host
 * can lose it; that also resets every knob, and a lost K only makes restore
 * take more values as ours, never fewer.  So a knob change still costs one
 * sync.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"
#include "log.h"
#include "util.h"

#define JOURNAL_HEADER "vmmpower-journal 1\n"

struct entry {
        enum journal_kind kind;
        bool live;
        bool verified; /* last record K: the knob read back "after"; U: the write may have made anything */
        char *key;
        char *orig;
        char *before;
        char *after;
};

struct journal {
        char *dir;
        char *path;
        int dirfd;
        int fd; /* -1 until the first record */
        bool sync;
        off_t size;
        unsigned n_records; /* records in the file, for compaction */
        struct entry *entries;
        size_t n_entries, n_alloc, n_live;
        uint32_t *index; /* open addressing: entry index + 1, 0 = empty */
        size_t index_size;
        struct journal_load_stats load;
        char corrupt_file[64]; /* name (in dir) of the copy kept of a journal with corrupt records, "" = none */
        struct journal_corrupt_note *notes; /* corrupt records that still name a knob, for the caller to report */
        size_t n_notes;
        unsigned errors; /* records that could not be written (journal_error_count()) */
};

static int write_all(int fd, const char *data, size_t len);
static int rewrite(struct journal *j);

static const char *const kind_names[_JOURNAL_KIND_MAX] = {
        [JOURNAL_KIND_SYSFS] = "sysfs",
        [JOURNAL_KIND_AFFINITY] = "affinity",
        [JOURNAL_KIND_VCPUPIN] = "vcpupin",
};

const char *journal_kind_to_string(enum journal_kind k)
{
        return k < _JOURNAL_KIND_MAX ? kind_names[k] : NULL;
}

static int kind_from_string(const char *s, enum journal_kind *ret)
{
        for (int k = 0; k < _JOURNAL_KIND_MAX; k++)
                if (strcmp(s, kind_names[k]) == 0) {
                        *ret = (enum journal_kind) k;
                        return 0;
                }
        return -EINVAL;
}

unsigned journal_crc32(const void *data, size_t len)
{
        static uint32_t table[256];
        static bool init;
        const unsigned char *p = data;
        uint32_t crc = 0xffffffffu;

        if (!init) {
                for (uint32_t i = 0; i < 256; i++) {
                        uint32_t c = i;
                        for (int b = 0; b < 8; b++)
                                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
                        table[i] = c;
                }
                init = true;
        }
        for (size_t i = 0; i < len; i++)
                crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
        return crc ^ 0xffffffffu;
}

/* Values compare without trailing newline/blanks: sysfs reads end in '\n', writes need not. */
static bool value_eq(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);

        while (la > 0 && (a[la - 1] == '\n' || a[la - 1] == ' '))
                la--;
        while (lb > 0 && (b[lb - 1] == '\n' || b[lb - 1] == ' '))
                lb--;
        return la == lb && memcmp(a, b, la) == 0;
}

static uint64_t hash_key(enum journal_kind kind, const char *key)
{
        uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t) kind;

        for (const unsigned char *p = (const unsigned char *) key; *p; p++)
                h = (h ^ *p) * 0x100000001b3ull;
        return h;
}

static struct entry *lookup(const struct journal *j, enum journal_kind kind, const char *key)
{
        if (j->index_size == 0)
                return NULL;
        for (size_t i = hash_key(kind, key) & (j->index_size - 1);; i = (i + 1) & (j->index_size - 1)) {
                uint32_t v = j->index[i];
                if (v == 0)
                        return NULL;
                struct entry *e = &j->entries[v - 1];
                if (e->kind == kind && strcmp(e->key, key) == 0)
                        return e;
        }
}

static void index_insert(struct journal *j, size_t idx)
{
        const struct entry *e = &j->entries[idx];
        size_t i = hash_key(e->kind, e->key) & (j->index_size - 1);

        while (j->index[i] != 0)
                i = (i + 1) & (j->index_size - 1);
        j->index[i] = (uint32_t) idx + 1;
}

static void entry_clear(struct entry *e)
{
        free(e->key);
        free(e->orig);
        free(e->before);
        free(e->after);
        e->key = e->orig = e->before = e->after = NULL;
}

static int set_str(char **p, const char *s)
{
        char *c = strdup(s);
        if (!c)
                return -ENOMEM;
        free(*p);
        *p = c;
        return 0;
}

/* Find or create the entry for a key.  New entries are not live yet. */
static int get_entry(struct journal *j, enum journal_kind kind, const char *key, struct entry **ret)
{
        struct entry *e = lookup(j, kind, key);

        if (e) {
                *ret = e;
                return 0;
        }
        if (j->n_entries + 1 > j->index_size / 2) {
                size_t ns = j->index_size ? j->index_size * 2 : 64;
                uint32_t *ni = calloc(ns, sizeof(*ni));
                if (!ni)
                        return -ENOMEM;
                free(j->index);
                j->index = ni;
                j->index_size = ns;
                for (size_t i = 0; i < j->n_entries; i++)
                        index_insert(j, i);
        }
        if (j->n_entries == j->n_alloc) {
                size_t na = j->n_alloc ? j->n_alloc * 2 : 32;
                struct entry *ne = realloc(j->entries, na * sizeof(*ne));
                if (!ne)
                        return -ENOMEM;
                j->entries = ne;
                j->n_alloc = na;
        }
        e = &j->entries[j->n_entries];
        *e = (struct entry) { .kind = kind };
        e->key = strdup(key);
        if (!e->key)
                return -ENOMEM;
        index_insert(j, j->n_entries++);
        *ret = e;
        return 0;
}

static int entry_set(struct journal *j, struct entry *e, const char *orig, const char *before,
                     const char *after)
{
        int r;

        if ((r = set_str(&e->orig, orig)) < 0 || (r = set_str(&e->before, before)) < 0 ||
            (r = set_str(&e->after, after)) < 0)
                return r;
        if (!e->live) {
                e->live = true;
                j->n_live++;
        }
        return 0;
}

static void entry_drop(struct journal *j, struct entry *e)
{
        if (e->live) {
                e->live = false;
                j->n_live--;
        }
}

/* Field escaping: bytes <= ' ', >= 0x7f, '%' and '=' as %XX; the empty string as "=". */
static void put_field(struct strbuf *sb, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";

        strbuf_append(sb, " ", 1);
        if (!*s) {
                strbuf_append(sb, "=", 1);
                return;
        }
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p <= ' ' || *p >= 0x7f || *p == '%' || *p == '=') {
                        char esc[3] = { '%', hex[*p >> 4], hex[*p & 15] };
                        strbuf_append(sb, esc, 3);
                } else
                        strbuf_append(sb, (const char *) p, 1);
        }
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Decode one field in place (NUL-terminated token).  */
static int get_field(char *tok)
{
        char *o = tok;

        if (strcmp(tok, "=") == 0) {
                tok[0] = '\0';
                return 0;
        }
        for (char *p = tok; *p; p++) {
                if (*p == '%') {
                        int h = hexval(p[1]), l = h < 0 ? -1 : hexval(p[2]);
                        if (h < 0 || l < 0 || (h == 0 && l == 0))
                                return -EINVAL;
                        *o++ = (char) (h << 4 | l);
                        p += 2;
                } else if (*p == '=')
                        return -EINVAL;
                else
                        *o++ = *p;
        }
        *o = '\0';
        return 0;
}

static void build_record(struct strbuf *out, const struct entry *e, bool drop)
{
        struct strbuf p;

        strbuf_init(&p);
        strbuf_puts(&p, drop ? "D" : e->verified ? "K" : "U");
        put_field(&p, kind_names[e->kind]);
        put_field(&p, e->key);
        if (!drop) {
                put_field(&p, e->orig);
                put_field(&p, e->before);
                put_field(&p, e->after);
        }
        if (!p.oom)
                strbuf_printf(out, "%zu %08x %s\n", p.len, journal_crc32(p.data, p.len), p.data);
        else
                out->oom = true;
        strbuf_free(&p);
}

/* Apply one payload (already CRC-checked) to the table. */
static int apply_payload(struct journal *j, char *payload)
{
        char *tok[6], *save = NULL;
        size_t n = 0;
        enum journal_kind kind;
        struct entry *e;
        int r;

        for (char *t = strtok_r(payload, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                if (n == ELEMENTSOF(tok))
                        return -EINVAL;
                tok[n++] = t;
        }
        if (n < 3)
                return -EINVAL;
        for (size_t i = 1; i < n; i++)
                if (get_field(tok[i]) < 0)
                        return -EINVAL;
        if (kind_from_string(tok[1], &kind) < 0 || !*tok[2])
                return -EINVAL;
        if ((strcmp(tok[0], "K") == 0 || strcmp(tok[0], "U") == 0) && n == 6) {
                r = get_entry(j, kind, tok[2], &e);
                if (r < 0)
                        return r;
                r = entry_set(j, e, tok[3], tok[4], tok[5]);
                if (r == 0)
                        e->verified = tok[0][0] == 'K';
                return r;
        }
        if (strcmp(tok[0], "D") == 0 && n == 3) {
                e = lookup(j, kind, tok[2]);
                if (e)
                        entry_drop(j, e);
                return 0;
        }
        return -EINVAL;
}

/*
 * A complete record that failed its length/CRC check (or its syntax) in the
 * middle of the file.  Its original cannot be trusted, so no knob gets an
 * original from it; if its kind and key still read, say which knob it names
 * and its original as far as it reads, so that an operator can put it back by
 * hand (the whole file is kept aside: keep_corrupt_copy()).
 *
 * For a knob that also has good records (the original is theirs), the
 * corrupt record may be its last write: the knob may then hold that record's
 * "after".  It is taken as a value we may have produced (after = its after,
 * before = the last good after), so restore still recognises the knob as
 * ours.  A bit flip in that value only makes it match nothing: the knob then
 * reads as changed by someone else, as without this.  A later good record for
 * the key supersedes it as usual.
 */
static void add_note(struct journal *j, enum journal_kind kind, const char *key, const char *orig, bool salvaged)
{
        struct journal_corrupt_note *n;

        if (j->n_notes >= JOURNAL_CORRUPT_NOTES_MAX)
                return;
        if (!j->notes) {
                j->notes = calloc(JOURNAL_CORRUPT_NOTES_MAX, sizeof(*j->notes));
                if (!j->notes)
                        return;
        }
        n = &j->notes[j->n_notes++];
        n->kind = kind;
        n->salvaged = salvaged;
        snprintf(n->key, sizeof(n->key), "%s", key);
        snprintf(n->original, sizeof(n->original), "%s", orig);
}

static void salvage_corrupt(struct journal *j, const char *payload)
{
        _cleanup_free_ char *buf = strdup(payload);
        char *tok[6] = { NULL }, *save = NULL, key[256], orig[256];
        enum journal_kind kind;
        struct entry *e;
        size_t n = 0;

        if (!buf)
                return;
        for (char *t = strtok_r(buf, " ", &save); t && n < ELEMENTSOF(tok); t = strtok_r(NULL, " ", &save))
                tok[n++] = t;
        if (n < 3 || (strcmp(tok[0], "K") != 0 && strcmp(tok[0], "U") != 0) || kind_from_string(tok[1], &kind) < 0 ||
            get_field(tok[2]) < 0 || !*tok[2])
                return;
        j->load.corrupt_keys++;
        escape_bytes(tok[2], strlen(tok[2]), key, sizeof(key));
        e = lookup(j, kind, tok[2]);
        if (e && e->live && n == 6 && get_field(tok[5]) == 0 && strlen(tok[5]) < JOURNAL_VALUE_MAX) {
                char *after = strdup(tok[5]);

                if (after) {
                        free(e->before);
                        e->before = e->after;
                        e->after = after;
                        /* an unverified (U) last write may have left anything that write made */
                        e->verified = e->verified && tok[0][0] == 'K';
                        log_debug("Journal %s: a corrupt record for %s %s, which has good records: its original "
                                    "is kept, the value the corrupt record wrote is taken as ours", j->path,
                                    kind_names[kind], key);
                        add_note(j, kind, key, "", true);
                        return;
                }
        }
        if (n >= 4 && get_field(tok[3]) == 0)
                escape_bytes(tok[3], strlen(tok[3]), orig, sizeof(orig));
        else
                snprintf(orig, sizeof(orig), "(unreadable)");
        log_debug("Journal %s: a corrupt record names %s %s, original \"%s\" as far as it reads (unverified, "
                    "not restored from it)", j->path, kind_names[kind], key, orig);
        add_note(j, kind, key, orig, false);
}

/*
 * Parse the file content.  Returns the offset just past the last good
 * record (where the next append goes), or -errno.
 */
static ssize_t load(struct journal *j, char *data, size_t len)
{
        size_t hl = strlen(JOURNAL_HEADER), off, good;

        if (len < hl) {
                /* Created but the header never fully made it: an empty journal. */
                if (memcmp(data, JOURNAL_HEADER, len) != 0)
                        return -EBADMSG;
                return 0;
        }
        if (memcmp(data, JOURNAL_HEADER, hl) != 0)
                return -EBADMSG;
        off = good = hl;
        while (off < len) {
                char *nl = memchr(data + off, '\n', len - off);
                if (!nl) {
                        j->load.torn++;
                        break;
                }
                *nl = '\0';
                char *line = data + off, *sp1, *sp2;
                uint64_t plen, crc;
                bool ok = false;

                off = (size_t) (nl - data) + 1;
                sp1 = strchr(line, ' ');
                sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
                if (sp2) {
                        *sp1 = *sp2 = '\0';
                        char *payload = sp2 + 1;
                        ok = parse_u64(line, &plen) == 0 && strlen(sp1 + 1) == 8 &&
                             sscanf(sp1 + 1, "%8" SCNx64, &crc) == 1 && plen == strlen(payload) &&
                             crc == journal_crc32(payload, plen) && apply_payload(j, payload) == 0;
                }
                if (!ok) {
                        /* A torn record followed only by other garbage counts as torn. */
                        if (off >= len)
                                j->load.torn++;
                        else {
                                j->load.corrupt++;
                                if (sp2)
                                        salvage_corrupt(j, sp2 + 1);
                        }
                        continue;
                }
                j->load.records++;
                good = off;
        }
        return (ssize_t) good;
}

/* Leftovers of a compaction killed between writing the temp file and rename(). */
static void remove_stale_tmp(int dirfd)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct dirent *de;
        DIR *d;

        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strncmp(de->d_name, JOURNAL_FILE ".tmp.", strlen(JOURNAL_FILE ".tmp.")) == 0)
                        (void) unlinkat(dirfd, de->d_name, 0);
        closedir(d);
}

/*
 * A journal with corrupt records in the middle: keep the file as it was
 * (JOURNAL_CORRUPT_PREFIX + UTC time, never removed by vmmpower) before the
 * journal itself is rewritten with the good records only.  Best effort:
 * logged when it fails.
 */
static int keep_corrupt_copy(struct journal *j, const char *raw, size_t len)
{
        char name[sizeof(j->corrupt_file)], stamp[32];
        time_t t = time(NULL);
        struct tm tm;
        int fd = -1, r;

        if (!gmtime_r(&t, &tm) || strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm) == 0)
                return -EINVAL;
        for (unsigned i = 0; i < 100 && fd < 0; i++) {
                if (i == 0)
                        snprintf(name, sizeof(name), "%s%s", JOURNAL_CORRUPT_PREFIX, stamp);
                else
                        snprintf(name, sizeof(name), "%s%s.%u", JOURNAL_CORRUPT_PREFIX, stamp, i);
                fd = openat(j->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0 && errno != EEXIST)
                        return -errno;
        }
        if (fd < 0)
                return -EEXIST;
        r = write_all(fd, raw, len);
        if (r == 0 && (fsync(fd) < 0 || fsync(j->dirfd) < 0))
                r = -errno;
        close(fd);
        if (r < 0) {
                (void) unlinkat(j->dirfd, name, 0);
                return r;
        }
        snprintf(j->corrupt_file, sizeof(j->corrupt_file), "%s", name);
        return 0;
}

int journal_open(const char *state_dir, struct journal **ret)
{
        struct journal *j;
        char *data = NULL, *raw = NULL;
        size_t raw_len = 0;
        struct stat st;
        int r, fd = -1;

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->fd = -1;
        j->dirfd = -1;
        j->sync = true;
        j->dir = strdup(state_dir);
        if (!j->dir || asprintf(&j->path, "%s/%s", state_dir, JOURNAL_FILE) < 0) {
                j->path = NULL;
                r = -ENOMEM;
                goto fail;
        }
        if (mkdir(state_dir, 0700) < 0 && errno != EEXIST) {
                r = log_debug_errno(errno, "Failed to create state directory %s: %m", state_dir);
                goto fail;
        }
        j->dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (j->dirfd < 0) {
                r = -errno;
                goto fail;
        }
        /* One user at a time: the daemon, or `vmmpowerd --restore`, not both. */
        if (flock(j->dirfd, LOCK_EX | LOCK_NB) < 0) {
                r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                log_debug_errno(r, "Journal in %s is in use by another process: %m", state_dir);
                goto fail;
        }
        remove_stale_tmp(j->dirfd);
        fd = open(j->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno != ENOENT) {
                r = log_debug_errno(errno, "Failed to open %s: %m", j->path);
                goto fail;
        }
        if (fd >= 0) {
                ssize_t good;
                size_t got = 0;

                if (fstat(fd, &st) < 0) {
                        r = -errno;
                        goto fail;
                }
                data = malloc((size_t) st.st_size + 1);
                if (!data) {
                        r = -ENOMEM;
                        goto fail;
                }
                while (got < (size_t) st.st_size) {
                        ssize_t n = pread(fd, data + got, (size_t) st.st_size - got, (off_t) got);
                        if (n < 0) {
                                r = -errno;
                                goto fail;
                        }
                        if (n == 0)
                                break;
                        got += (size_t) n;
                }
                /* load() parses in place: keep the bytes in case they must be kept aside */
                raw = malloc(got + 1);
                if (!raw) {
                        r = -ENOMEM;
                        goto fail;
                }
                memcpy(raw, data, got);
                raw_len = got;
                good = load(j, data, got);
                if (good < 0) {
                        r = log_debug_errno((int) good, "%s is not a vmmpower journal, refusing to use it", j->path);
                        goto fail;
                }
                if (good == 0 || (size_t) good < got) {
                        /* Cut the torn tail (or a torn header) so appends stay parseable. */
                        if (ftruncate(fd, good) < 0) {
                                r = -errno;
                                goto fail;
                        }
                        if (good == 0) {
                                close(fd);
                                fd = -1;
                                (void) unlinkat(j->dirfd, JOURNAL_FILE, 0);
                        }
                }
                if (j->load.torn || j->load.corrupt)
                        log_debug("Journal %s: %u torn and %u corrupt record(s) ignored",
                                    j->path, j->load.torn, j->load.corrupt);
                j->size = good;
                j->n_records = j->load.records;
        }
        j->fd = fd;
        fd = -1;
        if (j->load.corrupt > 0) {
                /* Keep the evidence, then drop the corrupt records from the journal so
                 * that appends and the next open see only good ones (every good
                 * record's original is kept). */
                r = keep_corrupt_copy(j, raw, raw_len);
                if (r < 0)
                        log_debug_errno(r, "Journal %s: cannot keep a copy of the file with %u corrupt record(s): "
                                          "%m; the journal is left as it is", j->path, j->load.corrupt);
                else {
                        log_debug("Journal %s: %u corrupt record(s) in the middle, %u good record(s) kept; the file "
                                    "as it was is kept as %s/%s", j->path, j->load.corrupt, j->load.records, j->dir,
                                    j->corrupt_file);
                        r = rewrite(j);
                        if (r < 0)
                                log_debug_errno(r, "Journal %s: cannot rewrite it without the corrupt records: %m",
                                                  j->path);
                }
        }
        free(raw);
        free(data);
        *ret = j;
        return 0;
fail:
        if (fd >= 0)
                close(fd);
        free(raw);
        free(data);
        journal_free(j);
        return r;
}

struct journal *journal_free(struct journal *j)
{
        if (!j)
                return NULL;
        for (size_t i = 0; i < j->n_entries; i++)
                entry_clear(&j->entries[i]);
        free(j->entries);
        free(j->index);
        if (j->fd >= 0)
                close(j->fd);
        if (j->dirfd >= 0)
                close(j->dirfd);
        free(j->dir);
        free(j->path);
        free(j->notes);
        free(j);
        return NULL;
}

void journal_set_sync(struct journal *j, bool sync)
{
        j->sync = sync;
}

size_t journal_n_entries(const struct journal *j)
{
        return j->n_live;
}

void journal_get_load_stats(const struct journal *j, struct journal_load_stats *ret)
{
        *ret = j->load;
}

size_t journal_corrupt_notes(const struct journal *j, const struct journal_corrupt_note **ret)
{
        *ret = j->notes;
        return j->n_notes;
}

const char *journal_corrupt_file(const struct journal *j)
{
        return j->corrupt_file[0] ? j->corrupt_file : NULL;
}

int journal_count_corrupt_files(const char *state_dir, char *ret_newest, size_t size)
{
        size_t pl = strlen(JOURNAL_CORRUPT_PREFIX);
        char newest[256] = "";
        struct dirent *de;
        int n = 0;
        DIR *d;

        d = opendir(state_dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, JOURNAL_CORRUPT_PREFIX, pl) == 0) {
                        n++;
                        /* names carry the UTC time: the greatest is the newest */
                        if (strcmp(de->d_name, newest) > 0)
                                snprintf(newest, sizeof(newest), "%s", de->d_name);
                }
        closedir(d);
        if (ret_newest && size > 0)
                snprintf(ret_newest, size, "%s", newest);
        return n;
}

const char *journal_original(const struct journal *j, enum journal_kind kind, const char *key)
{
        const struct entry *e = lookup(j, kind, key);
        return e && e->live ? e->orig : NULL;
}

int journal_last_values(const struct journal *j, enum journal_kind kind, const char *key,
                        const char **ret_before, const char **ret_after)
{
        const struct entry *e = lookup(j, kind, key);

        if (!e || !e->live)
                return 0;
        *ret_before = e->before;
        *ret_after = e->after;
        return 1;
}

static int write_all(int fd, const char *data, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, data, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                data += n;
                len -= (size_t) n;
        }
        return 0;
}

/*
 * The file records go to.  Made (header, fdatasync, fsync of the directory) by
 * the first record; or, when j->fd was let go because the file at j->path is
 * no longer the one it points to (a compaction put a new file in place and
 * could not open it, or the empty journal could not be removed), that file is
 * opened again: it is ours (the directory is locked) and holds exactly what
 * the table holds.
 */
static int ensure_file(struct journal *j)
{
        size_t hl = strlen(JOURNAL_HEADER);
        struct stat st;
        int fd, r;

        if (j->fd >= 0)
                return 0;
        fd = open(j->path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno == EEXIST) {
                fd = open(j->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0)
                        return log_debug_errno(errno, "Failed to open %s again: %m", j->path);
                if (fstat(fd, &st) < 0) {
                        r = -errno;
                        close(fd);
                        return r;
                }
                if ((size_t) st.st_size >= hl) {
                        j->fd = fd;
                        j->size = st.st_size;
                        return 0;
                }
                /* shorter than its header (the empty journal we could not remove): start it again */
                if (ftruncate(fd, 0) < 0) {
                        r = -errno;
                        close(fd);
                        return r;
                }
        }
        if (fd < 0)
                return log_debug_errno(errno, "Failed to create %s: %m", j->path);
        r = write_all(fd, JOURNAL_HEADER, hl);
        if (r == 0 && j->sync && (fdatasync(fd) < 0 || fsync(j->dirfd) < 0))
                r = -errno;
        if (r < 0) {
                close(fd);
                (void) unlinkat(j->dirfd, JOURNAL_FILE, 0);
                return log_debug_errno(r, "Failed to initialise %s: %m", j->path);
        }
        j->fd = fd;
        j->size = (off_t) hl;
        j->n_records = 0;
        return 0;
}

/*
 * Free the entries that are no longer live (a key forgotten, restored, or
 * dropped by a D record): their values are of no use (a key seen again takes
 * its current value as the original) and a long-running daemon sees a new
 * key for every thread it pins.  Moves entries: no entry pointer may be held
 * across it.
 */
static void table_compact(struct journal *j)
{
        size_t w = 0, ns;

        if (j->n_live == j->n_entries)
                return;
        for (size_t i = 0; i < j->n_entries; i++) {
                if (!j->entries[i].live) {
                        entry_clear(&j->entries[i]);
                        continue;
                }
                if (w != i)
                        j->entries[w] = j->entries[i];
                w++;
        }
        j->n_entries = w;
        /* the smallest index get_entry() would have grown to for w entries */
        for (ns = 64; w + 1 > ns / 2; ns *= 2)
                ;
        if (ns < j->index_size) {
                uint32_t *ni = calloc(ns, sizeof(*ni));

                if (ni) {
                        free(j->index);
                        j->index = ni;
                        j->index_size = ns;
                }
        }
        memset(j->index, 0, j->index_size * sizeof(*j->index));
        for (size_t i = 0; i < w; i++)
                index_insert(j, i);
        if (j->n_alloc > 64 && j->n_alloc > 4 * w) {
                size_t na = MAX(2 * w, (size_t) 32);
                struct entry *ne = realloc(j->entries, na * sizeof(*ne));

                if (ne) {
                        j->entries = ne;
                        j->n_alloc = na;
                }
        }
}

static int rewrite(struct journal *j)
{
        struct strbuf sb;
        int r, fd;

        table_compact(j);
        if (j->n_live == 0) {
                if (j->fd >= 0) {
                        close(j->fd);
                        j->fd = -1;
                }
                /* If it cannot be removed, ensure_file() appends to it again (every record in it is dropped). */
                if (unlinkat(j->dirfd, JOURNAL_FILE, 0) < 0 && errno != ENOENT)
                        return -errno;
                if (j->sync)
                        (void) fsync(j->dirfd);
                return 0;
        }
        strbuf_init(&sb);
        strbuf_puts(&sb, JOURNAL_HEADER);
        for (size_t i = 0; i < j->n_entries; i++)
                if (j->entries[i].live)
                        build_record(&sb, &j->entries[i], false);
        if (sb.oom) {
                strbuf_free(&sb);
                return -ENOMEM;
        }
        r = write_file_atomic(j->path, sb.data, sb.len, 0600);
        if (r < 0) {
                /* not renamed: the old file is still the journal, and j->fd is its */
                strbuf_free(&sb);
                return r;
        }
        /*
         * The new file is in place: j->fd now points at the old one, unlinked.  A
         * record appended there would be reported durable and never be read again,
         * so it is let go whatever happens next; if the new file cannot be opened
         * now (EMFILE, ENFILE, ENOMEM), the next record opens it (ensure_file()) or
         * fails, and then its knob is not written.
         */
        if (j->fd >= 0) {
                close(j->fd);
                j->fd = -1;
        }
        j->size = (off_t) sb.len;
        j->n_records = (unsigned) j->n_live;
        strbuf_free(&sb);
        if (j->sync && fsync(j->dirfd) < 0)
                r = -errno;
        fd = open(j->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                int e = -errno;

                log_debug_errno(e, "Failed to open the rewritten %s (the next record opens it again): %m", j->path);
                return r < 0 ? r : e;
        }
        j->fd = fd;
        return r;
}

/* Compaction, best effort (the appended file is valid as it is).  Moves entries (table_compact()). */
static void maybe_compact(struct journal *j)
{
        if (j->n_records > 2 * j->n_live + 256)
                (void) rewrite(j);
}

static int append(struct journal *j, const struct entry *e, bool drop, bool sync)
{
        struct strbuf sb;
        int r;

        r = ensure_file(j);
        if (r < 0) {
                j->errors++;
                return r;
        }
        strbuf_init(&sb);
        build_record(&sb, e, drop);
        if (sb.oom) {
                strbuf_free(&sb);
                j->errors++;
                return -ENOMEM;
        }
        r = write_all(j->fd, sb.data, sb.len);
        if (r == 0 && sync && j->sync && fdatasync(j->fd) < 0)
                r = -errno;
        if (r < 0) {
                /* Never leave a half record in the middle of the file. */
                (void) ftruncate(j->fd, j->size);
                strbuf_free(&sb);
                j->errors++;
                return log_debug_errno(r, "Failed to append to %s: %m", j->path);
        }
        j->size += (off_t) sb.len;
        j->n_records++;
        strbuf_free(&sb);
        return 0;
}

static int check_value(const char *s)
{
        return strlen(s) < JOURNAL_VALUE_MAX ? 0 : -E2BIG;
}

/*
 * Append the state of a knob (orig NULL: the live entry's original, else
 * `before`) and make it the table's; on failure the table is left as it was.
 */
static int put_state(struct journal *j, enum journal_kind kind, const char *key, const char *orig,
                     const char *before, const char *after, bool verified, bool sync)
{
        struct entry *e, saved;
        int r;

        r = get_entry(j, kind, key, &e);
        if (r < 0)
                return r;
        saved = *e;
        e->orig = e->before = e->after = NULL;
        r = entry_set(j, e, orig ? orig : saved.live ? saved.orig : before, before, after);
        e->verified = verified;
        if (r == 0)
                r = append(j, e, false, sync);
        if (r < 0) {
                /* Keep the table equal to the file. */
                bool live_now = e->live;
                free(e->orig);
                free(e->before);
                free(e->after);
                e->orig = saved.orig;
                e->before = saved.before;
                e->after = saved.after;
                e->verified = saved.verified;
                if (live_now && !saved.live)
                        entry_drop(j, e);
                return r;
        }
        free(saved.orig);
        free(saved.before);
        free(saved.after);
        return 0;
}

int journal_before_write(struct journal *j, enum journal_kind kind, const char *key,
                         const char *current, const char *after)
{
        int r;

        if (kind >= _JOURNAL_KIND_MAX || !*key || strlen(key) >= JOURNAL_KEY_MAX ||
            check_value(current) < 0 || check_value(after) < 0)
                return -EINVAL;
        /* unverified until the caller has read the knob back (journal_note_actual()) */
        r = put_state(j, kind, key, NULL, current, after, false, true);
        maybe_compact(j);
        return r;
}

int journal_note_actual(struct journal *j, enum journal_kind kind, const char *key, const char *actual)
{
        struct entry *e = lookup(j, kind, key);
        _cleanup_free_ char *orig = NULL, *before = NULL, *after = NULL;
        bool same;
        int r;

        if (!e || !e->live)
                return -ENOENT;
        if (check_value(actual) < 0)
                return -EINVAL;
        same = value_eq(e->after, actual);
        if (same && e->verified)
                return 0;
        /* Read back as written: the same state, verified.  Else the knob holds "actual",
         * produced by our write of "after". */
        orig = strdup(e->orig);
        before = strdup(same ? e->before : e->after);
        after = strdup(same ? e->after : actual);
        if (!orig || !before || !after)
                return -ENOMEM;
        r = put_state(j, kind, key, orig, before, after, true, false);
        maybe_compact(j);
        return r;
}

int journal_forget(struct journal *j, enum journal_kind kind, const char *key)
{
        struct entry *e = lookup(j, kind, key);
        int r;

        if (!e || !e->live)
                return 0;
        r = append(j, e, true, true);
        if (r < 0)
                return r;
        entry_drop(j, e);
        maybe_compact(j);
        return 0;
}

bool journal_unverified(const struct journal *j, enum journal_kind kind, const char *key)
{
        const struct entry *e = lookup(j, kind, key);

        return e && e->live && !e->verified;
}

unsigned journal_error_count(const struct journal *j)
{
        return j->errors;
}

size_t journal_table_entries(const struct journal *j)
{
        return j->n_entries;
}

static bool is_gone(int r)
{
        return r == -ENOENT || r == -ESRCH || r == -ENODEV || r == -ENXIO;
}

enum restore_result { R_DONE, R_UNCHANGED, R_FOREIGN, R_GONE, R_FAILED, R_SKIPPED };

static enum restore_result restore_one(struct entry *e, const struct journal_knob_io *io)
{
        char cur[JOURNAL_VALUE_MAX + 2], esc[256], esc2[256];
        int r;

        if (!io->read || !io->write)
                return R_SKIPPED;
        r = io->read(io->userdata, e->key, cur, sizeof(cur));
        if (is_gone(r))
                return R_GONE;
        if (r < 0) {
                log_debug_errno(r, "Restore %s %s: read failed: %m", kind_names[e->kind], e->key);
                return R_FAILED;
        }
        if (value_eq(cur, e->orig))
                return R_UNCHANGED;
        if (!value_eq(cur, e->after) && !value_eq(cur, e->before)) {
                escape_bytes(cur, strlen(cur), esc, sizeof(esc));
                escape_bytes(e->after, strlen(e->after), esc2, sizeof(esc2));
                if (e->verified) {
                        log_debug("Restore %s %s: holds \"%s\", we wrote \"%s\"; changed by someone else, leaving it",
                                  kind_names[e->kind], e->key, esc, esc2);
                        return R_FOREIGN;
                }
                /* Killed between the write and its read-back: the kernel may have clamped it. */
                log_debug("Restore %s %s: holds \"%s\", our last write (\"%s\") was never read back: "
                          "taken as what it made", kind_names[e->kind], e->key, esc, esc2);
        }
        r = io->write(io->userdata, e->key, e->orig);
        if (is_gone(r))
                return R_GONE;
        if (r < 0) {
                log_debug_errno(r, "Restore %s %s: write failed: %m", kind_names[e->kind], e->key);
                return R_FAILED;
        }
        r = io->read(io->userdata, e->key, cur, sizeof(cur));
        if (is_gone(r))
                return R_GONE;
        if (r < 0)
                return R_FAILED;
        if (!value_eq(cur, e->orig)) {
                escape_bytes(cur, strlen(cur), esc, sizeof(esc));
                log_debug("Restore %s %s: read back \"%s\" after writing the original", kind_names[e->kind], e->key, esc);
                /* The knob now holds what our restore write produced: still ours. */
                (void) set_str(&e->before, cur);
                return R_FAILED;
        }
        return R_DONE;
}

int journal_restore(struct journal *j, const struct journal_knob_io io[_JOURNAL_KIND_MAX],
                    struct restore_stats *ret)
{
        struct restore_stats st = { .torn = j->load.torn + j->load.corrupt, .corrupt = j->load.corrupt };
        int r;

        /*
         * Two passes: a knob that failed may succeed once the others are
         * back (cpufreq: restoring scaling_min_freq above the current
         * scaling_max_freq is clamped until max is restored).
         */
        for (int pass = 0; pass < 2; pass++) {
                bool last = pass == 1;
                unsigned failed = 0;

                for (size_t i = 0; i < j->n_entries; i++) {
                        struct entry *e = &j->entries[i];
                        if (!e->live)
                                continue;
                        enum restore_result res = restore_one(e, &io[e->kind]);
                        switch (res) {
                        case R_DONE:
                                st.restored++;
                                break;
                        case R_UNCHANGED:
                                st.unchanged++;
                                break;
                        case R_FOREIGN:
                                st.foreign++;
                                break;
                        case R_GONE:
                                st.gone++;
                                break;
                        case R_SKIPPED:
                                if (last)
                                        st.skipped++;
                                continue;
                        case R_FAILED:
                                failed++;
                                if (last)
                                        st.failed++;
                                continue;
                        }
                        entry_drop(j, e);
                }
                if (failed == 0)
                        break;
        }
        /* Skipped entries on pass 0 with nothing failing: count them too. */
        if (st.skipped == 0)
                for (size_t i = 0; i < j->n_entries; i++)
                        if (j->entries[i].live && !(io[j->entries[i].kind].read && io[j->entries[i].kind].write))
                                st.skipped++;
        r = rewrite(j);
        if (r < 0)
                return log_debug_errno(r, "Failed to update %s after restore: %m", j->path);
        log_debug("Restore: %u restored, %u unchanged, %u changed by others (left), %u gone, %u failed, %u skipped",
                 st.restored, st.unchanged, st.foreign, st.gone, st.failed, st.skipped);
        snprintf(st.corrupt_file, sizeof(st.corrupt_file), "%s", j->corrupt_file);
        if (ret)
                *ret = st;
        return (int) j->n_live;
}
