/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The sysfs power driver backend (power_driver.h; the core is power_driver.c).
 *
 * The sysfs write path, for every knob:
 *   1. refuse without I/O if the knob is gone, someone else's, its class
 *      is disabled (until the class's backoff lets one write through), or
 *      this exact value was rejected before (EINVAL is not going to change);
 *   2. read the current value; not what we last wrote -> someone else
 *      changed it: the knob is theirs from then on (never written again,
 *      -ESTALE; its journal record is kept, so restore puts the original back
 *      only if the knob holds our value again); equal to the wanted one ->
 *      done, no record;
 *   3. journal (original, current, wanted) durably; journal error -> no write;
 *   4. one write() of "value\n", checked;
 *   5. read back, journaled (journal_note_actual(): the record is verified);
 *      different -> clamped: the journal learns the actual value (restore must
 *      still recognise it as ours), -ERANGE is returned.  If the read-back
 *      cannot be journaled, the value read in 2 is written back and the
 *      journal error returned.
 * Errno actions are in power_driver.h and docs/power-driver.md.
 *
 * Perf level arithmetic: level m (permille) is cpuinfo_min + m * (cpuinfo_max -
 * cpuinfo_min) / 1000, snapped up to an available frequency where the driver
 * lists them.  The cap never goes below the policy's floor (scaling_min_freq
 * as we know it).
 */
#define POWER_DRIVER_BACKEND /* struct power_driver (power_driver.h) */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "log.h"
#include "power_driver.h"

#define VALUE_MAX 64

/*
 * A class disabled by EACCES/EPERM/EROFS is not given up for good: lockdown
 * can be lifted, a read-only bind mount remounted, a container given the
 * capability.  One write of the class is let through after 1 s, then after
 * 2, 4, ... capped at 5 minutes, for as long as the denial lasts.
 */
#define CLASS_BACKOFF ((struct backoff) { 1 * NSEC_PER_SEC, 300 * NSEC_PER_SEC, UINT_MAX })

/* Log at debug and hand the event to the caller (who decides what the operator hears). */
static void emit_event(struct power_driver *drv, const struct power_event *ev)
{
        char msg[512];

        power_event_format(ev, msg, sizeof(msg));
        log_debug("%s", msg);
        if (drv->cfg.on_event)
                drv->cfg.on_event(drv->cfg.event_userdata, ev);
}

/* ---------------------------------------------------------------- sysfs I/O */

ssize_t power_sysfs_default_read(void *userdata, const char *path, char *buf, size_t size)
{
        size_t got = 0;
        int fd;

        if (size < 2)
                return -EINVAL;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n = read(fd, buf + got, size - 1 - got);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        n = -errno;
                        close(fd);
                        return n;
                }
                if (n == 0)
                        break;
                got += (size_t) n;
                if (got == size - 1) {
                        close(fd);
                        return -EFBIG;
                }
        }
        close(fd);
        buf[got] = '\0';
        return (ssize_t) got;
}

int power_sysfs_default_write(void *userdata, const char *path, const char *data, size_t len)
{
        struct statfs sfs;
        struct stat st;
        ssize_t n;
        int fd, r = 0;

        fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        if (fstatfs(fd, &sfs) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        if (S_ISREG(st.st_mode) && sfs.f_type != SYSFS_MAGIC) {
                /*
                 * Not sysfs: a fixture tree (or one bind-mounted over
                 * /sys/devices/system/cpu).  Replace the file atomically so
                 * that an interrupted write never leaves a half value, as
                 * a sysfs store never does.
                 */
                char tmp[PATH_MAX];
                int tfd;

                close(fd);
                r = path_printf(tmp, sizeof(tmp), "%s.vp-tmp.%d", path, (int) getpid());
                if (r < 0)
                        return r;
                tfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 07777);
                if (tfd < 0)
                        return -errno;
                n = write(tfd, data, len);
                r = n < 0 ? -errno : (size_t) n != len ? -EIO : 0;
                if (close(tfd) < 0 && r == 0)
                        r = -errno;
                if (r == 0 && rename(tmp, path) < 0)
                        r = -errno;
                if (r < 0)
                        unlink(tmp);
                return r;
        }
        n = write(fd, data, len);
        if (n < 0)
                r = -errno;
        else if ((size_t) n != len)
                r = -EIO;
        if (close(fd) < 0 && r == 0 && errno != EINTR)
                r = -errno;
        return r;
}

static const struct power_sysfs_io default_io = {
        power_sysfs_default_read, power_sysfs_default_write, NULL,
};
static struct power_sysfs_io cur_io = {
        power_sysfs_default_read, power_sysfs_default_write, NULL,
};

void power_driver_sysfs_set_io(const struct power_sysfs_io *io)
{
        cur_io = io ? *io : default_io;
}

int power_driver_sysfs_knob_read(const char *root, const char *relpath, char *buf, size_t size)
{
        char path[PATH_MAX];
        int r = path_printf(path, sizeof(path), "%s/%s", root ? root : "/sys", relpath);

        if (r < 0)
                return r;
        return (int) cur_io.read(cur_io.userdata, path, buf, size);
}

int power_driver_sysfs_knob_write(const char *root, const char *relpath, const char *value)
{
        char path[PATH_MAX];
        int r = path_printf(path, sizeof(path), "%s/%s", root ? root : "/sys", relpath);

        if (r < 0)
                return r;
        return cur_io.write(cur_io.userdata, path, value, strlen(value));
}

static bool value_eq(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);

        while (la > 0 && (a[la - 1] == '\n' || a[la - 1] == ' '))
                la--;
        while (lb > 0 && (b[lb - 1] == '\n' || b[lb - 1] == ' '))
                lb--;
        return la == lb && memcmp(a, b, la) == 0;
}

/* ---------------------------------------------------------------- sysfs backend */

struct knob {
        char *path; /* relative to the root */
        enum power_knob_class cls;
        bool gone;
        bool foreign;             /* changed by someone else: theirs, never written again */
        bool ours_valid;          /* ours[] holds what the knob read back after our last write */
        char ours[VALUE_MAX];
        char rejected[VALUE_MAX]; /* last value the kernel refused with EINVAL */
        char pending[VALUE_MAX];  /* value to retry (EBUSY) */
        struct retry_state retry;
};

struct policy {
        unsigned id;
        cpuset_t cpus;
        uint32_t cpuinfo_min_khz, cpuinfo_max_khz;
        uint32_t *avail_khz; /* ascending */
        size_t n_avail;
        uint32_t cap_khz, floor_khz;
        struct knob kmin, kmax, kepp;
        bool has_epp;
};

struct scpu {
        bool present;
        int policy; /* index or -1 */
        unsigned n_states;
        struct knob *idle; /* per state "disable" */
        struct knob qos;
        bool has_qos;
};

struct sysfs {
        char *root;
        struct policy *policies;
        size_t n_policies;
        struct scpu *cpus;
        unsigned n_cpus;
};

static int knob_init(struct knob *k, enum power_knob_class cls, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int knob_init(struct knob *k, enum power_knob_class cls, const char *fmt, ...)
{
        va_list ap;
        int r;

        *k = (struct knob) { .cls = cls };
        va_start(ap, fmt);
        r = vasprintf(&k->path, fmt, ap);
        va_end(ap);
        if (r < 0) {
                k->path = NULL;
                return -ENOMEM;
        }
        return 0;
}

static bool sysfs_exists(const struct sysfs *s, const char *rel)
{
        char path[PATH_MAX];

        if (path_printf(path, sizeof(path), "%s/%s", s->root, rel) < 0)
                return false;
        return access(path, F_OK) == 0;
}

static int sysfs_read_str(const struct sysfs *s, const char *rel, char *buf, size_t size)
{
        int r = power_driver_sysfs_knob_read(s->root, rel, buf, size);

        if (r < 0)
                return r;
        while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' '))
                buf[--r] = '\0';
        return r;
}

static int sysfs_read_u32(const struct sysfs *s, const char *rel, uint32_t *ret)
{
        char buf[64];
        int r = sysfs_read_str(s, rel, buf, sizeof(buf));

        if (r < 0)
                return r;
        return parse_u32(buf, ret);
}

static void knob_clear_pending(struct power_driver *drv, struct knob *k)
{
        if (k->retry.pending)
                drv->pending_retries--;
        retry_reset(&k->retry);
        k->pending[0] = '\0';
}

/* Apply the documented action for errno r on knob k.  Returns r. */
static int knob_error(struct power_driver *drv, struct knob *k, const char *value, int r)
{
        struct power_driver_stats *st = &drv->stats;

        switch (-r) {
        case EINVAL:
        case ERANGE:
        case EOVERFLOW:
                st->rejected++;
                snprintf(k->rejected, sizeof(k->rejected), "%s", value);
                knob_clear_pending(drv, k);
                log_debug_errno(r, "%s: value %s rejected: %m", k->path, value);
                break;
        case EBUSY:
        case EAGAIN:
        case EINTR: {
                bool was;

                st->busy++;
                if (k->retry.pending && !value_eq(k->pending, value))
                        knob_clear_pending(drv, k); /* a new value restarts the backoff */
                was = k->retry.pending;
                if (retry_schedule(&k->retry, &drv->cfg.backoff, drv->now, NULL)) {
                        if (!was)
                                drv->pending_retries++;
                        snprintf(k->pending, sizeof(k->pending), "%s", value);
                } else {
                        emit_event(drv, &(struct power_event) { .type = POWER_EVENT_GAVE_UP, .path = k->path,
                                                                .value = value, .cls = k->cls, .error = r,
                                                                .attempts = k->retry.attempts });
                        st->gave_up++;
                        if (was)
                                drv->pending_retries--;
                        retry_reset(&k->retry);
                        k->pending[0] = '\0';
                }
                break;
        }
        case EACCES:
        case EPERM:
        case EROFS:
                st->denied++;
                knob_clear_pending(drv, k);
                (void) retry_schedule(&drv->class_retry[k->cls], &CLASS_BACKOFF, drv->now, NULL);
                if (!drv->class_disabled[k->cls]) {
                        drv->class_disabled[k->cls] = true;
                        emit_event(drv, &(struct power_event) {
                                .type = POWER_EVENT_CLASS_DISABLED, .path = k->path, .value = value,
                                .cls = k->cls, .error = r,
                                .retry_in_ns = drv->class_retry[k->cls].next_ns - drv->now });
                } else
                        log_debug_errno(r, "%s: still %m; next %s write let through in %" PRId64 " ms", k->path,
                                        power_knob_class_to_string(k->cls),
                                        (drv->class_retry[k->cls].next_ns - drv->now) / NSEC_PER_MSEC);
                break;
        case ENOENT:
        case ENODEV:
        case ENXIO:
                st->gone++;
                knob_clear_pending(drv, k);
                k->gone = true;
                log_debug("%s: gone, dropping the knob", k->path);
                break;
        default:
                st->other_errors++;
                knob_clear_pending(drv, k);
                emit_event(drv, &(struct power_event) { .type = POWER_EVENT_WRITE_FAILED, .path = k->path,
                                                        .value = value, .cls = k->cls, .error = r });
                break;
        }
        drv->last.error = r;
        return r;
}

/*
 * Does the knob hold what we last made it hold?  Known in memory after a
 * write of ours that read back; else the journal's last record says (before
 * or after: the write may or may not have happened).  A knob without a
 * record was never written by us and is free to take.
 */
static bool knob_is_ours(struct power_driver *drv, const struct knob *k, const char *cur)
{
        const char *before, *after;

        if (k->ours_valid)
                return value_eq(cur, k->ours);
        if (journal_last_values(drv->cfg.journal, JOURNAL_KIND_SYSFS, k->path, &before, &after) <= 0)
                return true;
        return value_eq(cur, after) || value_eq(cur, before);
}

/*
 * Someone else changed the knob: let it go for good (see power_driver.h).  Its
 * journal record stays: restore leaves a value other than the record's, and
 * puts the original back if the other party later restores what it found
 * (our value).  Closing the record would lose the original for good.
 */
static int knob_foreign(struct power_driver *drv, struct knob *k, const char *cur)
{
        const char *before = NULL, *after = NULL;
        char ours[VALUE_MAX], found[VALUE_MAX];

        snprintf(found, sizeof(found), "%.*s", (int) strcspn(cur, "\n"), cur);
        if (k->ours_valid)
                snprintf(ours, sizeof(ours), "%s", k->ours);
        else if (journal_last_values(drv->cfg.journal, JOURNAL_KIND_SYSFS, k->path, &before, &after) > 0)
                snprintf(ours, sizeof(ours), "%.*s", (int) strcspn(after, "\n"), after);
        else
                ours[0] = '\0';
        k->foreign = true;
        k->ours_valid = false;
        knob_clear_pending(drv, k);
        drv->stats.foreign++;
        snprintf(drv->last.actual, sizeof(drv->last.actual), "%s", found);
        log_debug("%s: holds %s, we last wrote %s: changed by someone else, letting it go", k->path, found, ours);
        if (drv->cfg.on_foreign)
                drv->cfg.on_foreign(drv->cfg.foreign_userdata, k->path, ours, found);
        return drv->last.error = -POWER_KNOB_FOREIGN;
}

/*
 * Our write was made but its read-back could not be journaled (ENOSPC, EIO):
 * the knob may hold a value the journal does not know.  Put back what it held
 * (prev, the record's "before") and return the journal error, as for a record
 * that could not be made before the write.  If that fails too, the record is
 * still unverified, and restore takes whatever the knob holds as ours.
 */
/*
 * The write failed: what the knob holds now (the record's before, normally) is
 * journaled as the verified state.  Left unverified, the record would make
 * restore take whatever the knob holds later as ours, and put the original
 * over another tool's value set long after this write.  A knob that cannot be
 * read back keeps the unverified record (and a failure to record is counted).
 */
static void knob_verify_failed(struct power_driver *drv, struct knob *k)
{
        struct sysfs *s = drv->priv;
        char cur[VALUE_MAX + 2];

        if (power_driver_sysfs_knob_read(s->root, k->path, cur, sizeof(cur)) < 0)
                return;
        if (journal_note_actual(drv->cfg.journal, JOURNAL_KIND_SYSFS, k->path, cur) < 0) {
                drv->stats.journal_errors++;
                return;
        }
        snprintf(k->ours, sizeof(k->ours), "%.*s", (int) strcspn(cur, "\n"), cur);
        k->ours_valid = true;
}

static int knob_undo(struct power_driver *drv, struct knob *k, const char *prev, const char *value, int error)
{
        struct sysfs *s = drv->priv;
        char cur[VALUE_MAX + 2];
        int r;

        drv->stats.journal_errors++;
        r = power_driver_sysfs_knob_write(s->root, k->path, prev);
        if (r >= 0)
                r = power_driver_sysfs_knob_read(s->root, k->path, cur, sizeof(cur));
        if (r < 0)
                log_debug_errno(r, "%s: the journal cannot record the value read back, and %.*s cannot be put back "
                                "either: %m", k->path, (int) strcspn(prev, "\n"), prev);
        else {
                snprintf(drv->last.actual, sizeof(drv->last.actual), "%.*s", (int) strcspn(cur, "\n"), cur);
                snprintf(k->ours, sizeof(k->ours), "%s", drv->last.actual);
                k->ours_valid = true;
                log_debug("%s: the journal cannot record the value read back, %.*s put back (reads %s)", k->path,
                          (int) strcspn(prev, "\n"), prev, drv->last.actual);
        }
        emit_event(drv, &(struct power_event) { .type = POWER_EVENT_JOURNAL_FAILED, .path = k->path,
                                                .value = value, .cls = k->cls, .error = error });
        return drv->last.error = error;
}

static int knob_write(struct power_driver *drv, struct knob *k, const char *value)
{
        struct sysfs *s = drv->priv;
        struct power_driver_stats *st = &drv->stats;
        char cur[VALUE_MAX + 2], prev[VALUE_MAX + 2], data[VALUE_MAX + 2];
        bool probe = false;
        int r;

        drv->last = (struct power_write_info) { 0 };
        snprintf(drv->last.path, sizeof(drv->last.path), "%s", k->path);
        snprintf(drv->last.wanted, sizeof(drv->last.wanted), "%s", value);
        if (k->gone)
                return drv->last.error = -ENOENT;
        if (k->foreign) {
                st->foreign_refused++;
                knob_clear_pending(drv, k);
                return drv->last.error = -POWER_KNOB_FOREIGN;
        }
        if (drv->class_disabled[k->cls]) {
                if (!retry_due(&drv->class_retry[k->cls], drv->now)) {
                        st->class_disabled++;
                        return drv->last.error = -EACCES;
                }
                /* The backoff is over: this write finds out whether the denial still holds. */
                st->class_retries++;
                probe = true;
        }
        if (k->rejected[0] && value_eq(k->rejected, value)) {
                st->rejected_cached++;
                return drv->last.error = -EINVAL;
        }
        if (strlen(value) >= VALUE_MAX)
                return drv->last.error = -E2BIG;

        r = power_driver_sysfs_knob_read(s->root, k->path, cur, sizeof(cur));
        if (r < 0)
                return knob_error(drv, k, value, r);
        if (!knob_is_ours(drv, k, cur))
                return knob_foreign(drv, k, cur);
        if (value_eq(cur, value)) {
                st->skipped++;
                knob_clear_pending(drv, k);
                snprintf(drv->last.actual, sizeof(drv->last.actual), "%s", value);
                return 0;
        }
        r = journal_before_write(drv->cfg.journal, JOURNAL_KIND_SYSFS, k->path, cur, value);
        if (r < 0) {
                st->journal_errors++;
                emit_event(drv, &(struct power_event) { .type = POWER_EVENT_JOURNAL_FAILED, .path = k->path,
                                                        .value = value, .cls = k->cls, .error = r });
                return drv->last.error = r;
        }
        /* Until the read-back is journaled: the knob holds the record's before, after, or what
         * the kernel made of after. */
        k->ours_valid = false;
        snprintf(prev, sizeof(prev), "%s", cur);
        snprintf(data, sizeof(data), "%s\n", value);
        r = power_driver_sysfs_knob_write(s->root, k->path, data);
        if (r < 0) {
                knob_verify_failed(drv, k);
                return knob_error(drv, k, value, r);
        }
        if (probe) {
                drv->class_disabled[k->cls] = false;
                retry_reset(&drv->class_retry[k->cls]);
                st->class_reenabled++;
                emit_event(drv, &(struct power_event) { .type = POWER_EVENT_CLASS_ENABLED, .path = k->path,
                                                        .value = value, .cls = k->cls });
        }
        r = power_driver_sysfs_knob_read(s->root, k->path, cur, sizeof(cur));
        if (r < 0)
                return knob_error(drv, k, value, r);
        knob_clear_pending(drv, k);
        r = journal_note_actual(drv->cfg.journal, JOURNAL_KIND_SYSFS, k->path, cur);
        if (r < 0)
                return knob_undo(drv, k, prev, value, r);
        snprintf(drv->last.actual, sizeof(drv->last.actual), "%.*s", (int) strcspn(cur, "\n"), cur);
        snprintf(k->ours, sizeof(k->ours), "%s", drv->last.actual);
        k->ours_valid = true;
        if (!value_eq(cur, value)) {
                st->clamped++;
                log_debug("%s: wrote %s, kernel holds %s (clamped)", k->path, value, drv->last.actual);
                return drv->last.error = -ERANGE;
        }
        st->writes++;
        return 0;
}

/*
 * Lift our constraint from a knob: write back the original recorded in the
 * journal if we ever changed it; a knob we never wrote is left alone (an
 * administrator's own setting, e.g. a state disabled at boot, is not ours).
 */
static int knob_release(struct power_driver *drv, struct knob *k)
{
        const char *orig = journal_original(drv->cfg.journal, JOURNAL_KIND_SYSFS, k->path);
        char v[VALUE_MAX];

        if (!orig)
                return 0;
        snprintf(v, sizeof(v), "%.*s", (int) strcspn(orig, "\n"), orig);
        return knob_write(drv, k, v);
}

static int knob_write_u32(struct power_driver *drv, struct knob *k, uint32_t v)
{
        char buf[16];

        snprintf(buf, sizeof(buf), "%" PRIu32, v);
        return knob_write(drv, k, buf);
}

static void knob_free(struct knob *k)
{
        free(k->path);
        k->path = NULL;
}

static int parse_u32_list(const char *s, uint32_t **ret, size_t *ret_n)
{
        uint32_t *v = NULL;
        size_t n = 0;
        char *copy = strdup(s), *save = NULL;

        if (!copy)
                return -ENOMEM;
        for (char *t = strtok_r(copy, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
                uint32_t x;
                uint32_t *nv;
                if (parse_u32(t, &x) < 0)
                        continue;
                nv = realloc(v, (n + 1) * sizeof(*v));
                if (!nv) {
                        free(v);
                        free(copy);
                        return -ENOMEM;
                }
                v = nv;
                /* insertion sort: the kernel lists them descending on some drivers */
                size_t i = n++;
                while (i > 0 && v[i - 1] > x) {
                        v[i] = v[i - 1];
                        i--;
                }
                v[i] = x;
        }
        free(copy);
        *ret = v;
        *ret_n = n;
        return 0;
}

static int load_policy(struct sysfs *s, unsigned id, struct policy *p)
{
        char rel[128], buf[4096];
        const char *base = "devices/system/cpu/cpufreq";
        uint32_t cur_min, cur_max;
        int r;

        *p = (struct policy) { .id = id };
        path_printf(rel, sizeof(rel), "%s/policy%u/related_cpus", base, id);
        r = sysfs_read_str(s, rel, buf, sizeof(buf));
        if (r < 0)
                return r;
        r = cpuset_parse_list(buf, &p->cpus);
        if (r < 0)
                return r;
        path_printf(rel, sizeof(rel), "%s/policy%u/cpuinfo_min_freq", base, id);
        if ((r = sysfs_read_u32(s, rel, &p->cpuinfo_min_khz)) < 0)
                return r;
        path_printf(rel, sizeof(rel), "%s/policy%u/cpuinfo_max_freq", base, id);
        if ((r = sysfs_read_u32(s, rel, &p->cpuinfo_max_khz)) < 0)
                return r;
        if (p->cpuinfo_max_khz <= p->cpuinfo_min_khz)
                return -EINVAL;
        path_printf(rel, sizeof(rel), "%s/policy%u/scaling_min_freq", base, id);
        if ((r = sysfs_read_u32(s, rel, &cur_min)) < 0)
                return r;
        path_printf(rel, sizeof(rel), "%s/policy%u/scaling_max_freq", base, id);
        if ((r = sysfs_read_u32(s, rel, &cur_max)) < 0)
                return r;
        p->floor_khz = cur_min;
        p->cap_khz = cur_max;
        path_printf(rel, sizeof(rel), "%s/policy%u/scaling_available_frequencies", base, id);
        if (sysfs_read_str(s, rel, buf, sizeof(buf)) >= 0) {
                r = parse_u32_list(buf, &p->avail_khz, &p->n_avail);
                if (r < 0)
                        return r;
        }
        path_printf(rel, sizeof(rel), "%s/policy%u/energy_performance_preference", base, id);
        p->has_epp = sysfs_exists(s, rel);
        if ((r = knob_init(&p->kmin, POWER_KNOB_CPUFREQ, "%s/policy%u/scaling_min_freq", base, id)) < 0 ||
            (r = knob_init(&p->kmax, POWER_KNOB_CPUFREQ, "%s/policy%u/scaling_max_freq", base, id)) < 0 ||
            (r = knob_init(&p->kepp, POWER_KNOB_CPUFREQ, "%s/policy%u/energy_performance_preference", base, id)) < 0)
                return r;
        return 0;
}

static void policy_free(struct policy *p)
{
        free(p->avail_khz);
        knob_free(&p->kmin);
        knob_free(&p->kmax);
        knob_free(&p->kepp);
}

static void sysfs_exit(struct power_driver *drv)
{
        struct sysfs *s = drv->priv;

        if (!s)
                return;
        for (size_t i = 0; i < s->n_policies; i++)
                policy_free(&s->policies[i]);
        free(s->policies);
        for (unsigned c = 0; c < s->n_cpus; c++) {
                for (unsigned i = 0; s->cpus[c].idle && i < s->cpus[c].n_states; i++)
                        knob_free(&s->cpus[c].idle[i]);
                free(s->cpus[c].idle);
                knob_free(&s->cpus[c].qos);
        }
        free(s->cpus);
        free(s->root);
        free(s);
        drv->priv = NULL;
}

static int scan_numbered(const char *dir, const char *prefix, unsigned *max_ret, unsigned **ret, size_t *ret_n)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        unsigned *v = NULL, mx = 0;
        size_t n = 0, pl = strlen(prefix);

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                uint32_t x;
                unsigned *nv;
                if (strncmp(de->d_name, prefix, pl) != 0 || parse_u32(de->d_name + pl, &x) < 0)
                        continue;
                nv = realloc(v, (n + 1) * sizeof(*v));
                if (!nv) {
                        free(v);
                        closedir(d);
                        return -ENOMEM;
                }
                v = nv;
                v[n++] = x;
                mx = MAX(mx, x + 1);
        }
        closedir(d);
        *ret = v;
        *ret_n = n;
        if (max_ret)
                *max_ret = mx;
        return 0;
}

/* A knob someone else owns from the start (power_driver_config.foreign_paths / _classes). */
static void knob_preset_foreign(struct power_driver *drv, struct knob *k)
{
        const struct power_driver_config *cfg = &drv->cfg;
        bool match = cfg->foreign_classes & (1u << k->cls);

        for (const char *const *p = cfg->foreign_paths; !match && p && *p; p++)
                match = strcmp(*p, k->path) == 0;
        if (!match || k->foreign)
                return;
        k->foreign = true;
        drv->stats.foreign++;
        log_debug("%s: someone else's from the start, never written", k->path);
}

static void sysfs_preset_foreign(struct power_driver *drv)
{
        struct sysfs *s = drv->priv;

        if (!drv->cfg.foreign_classes && !drv->cfg.foreign_paths)
                return;
        for (size_t i = 0; i < s->n_policies; i++) {
                knob_preset_foreign(drv, &s->policies[i].kmin);
                knob_preset_foreign(drv, &s->policies[i].kmax);
                if (s->policies[i].has_epp)
                        knob_preset_foreign(drv, &s->policies[i].kepp);
        }
        for (unsigned c = 0; c < s->n_cpus; c++) {
                for (unsigned i = 0; i < s->cpus[c].n_states; i++)
                        if (!s->cpus[c].idle[i].gone)
                                knob_preset_foreign(drv, &s->cpus[c].idle[i]);
                if (s->cpus[c].has_qos)
                        knob_preset_foreign(drv, &s->cpus[c].qos);
        }
        drv->cfg.foreign_paths = NULL; /* the caller's: only valid during init */
}

static int sysfs_init(struct power_driver *drv)
{
        const struct power_driver_config *cfg = &drv->cfg;
        struct sysfs *s;
        char dir[PATH_MAX];
        _cleanup_free_ unsigned *ids = NULL;
        size_t n = 0;
        unsigned mx = 0;
        int r;

        if (!cfg->journal)
                return log_debug_errno(-EINVAL, "sysfs power driver needs a journal");
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        drv->priv = s;
        s->root = strdup(cfg->sysfs_root ? cfg->sysfs_root : "/sys");
        if (!s->root) {
                r = -ENOMEM;
                goto fail;
        }

        /* CPUs */
        path_printf(dir, sizeof(dir), "%s/devices/system/cpu", s->root);
        r = scan_numbered(dir, "cpu", &mx, &ids, &n);
        if (r < 0) {
                log_debug_errno(r, "Failed to list %s: %m", dir);
                goto fail;
        }
        if (mx > VP_MAX_CPUS) {
                r = -E2BIG;
                goto fail;
        }
        s->n_cpus = mx;
        s->cpus = calloc(MAX(mx, 1u), sizeof(*s->cpus));
        if (!s->cpus) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < n; i++) {
                struct scpu *c = &s->cpus[ids[i]];
                _cleanup_free_ unsigned *st = NULL;
                size_t ns = 0;
                unsigned smax = 0;

                c->present = true;
                c->policy = -1;
                path_printf(dir, sizeof(dir), "%s/devices/system/cpu/cpu%u/cpuidle", s->root, ids[i]);
                if (scan_numbered(dir, "state", &smax, &st, &ns) == 0 && smax > 0) {
                        c->idle = calloc(smax, sizeof(*c->idle));
                        if (!c->idle) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        c->n_states = smax;
                        for (unsigned k = 0; k < smax; k++) {
                                r = knob_init(&c->idle[k], POWER_KNOB_CPUIDLE,
                                              "devices/system/cpu/cpu%u/cpuidle/state%u/disable", ids[i], k);
                                if (r < 0)
                                        goto fail;
                                if (!sysfs_exists(s, c->idle[k].path))
                                        c->idle[k].gone = true;
                        }
                }
                r = knob_init(&c->qos, POWER_KNOB_PM_QOS, "devices/system/cpu/cpu%u/power/pm_qos_resume_latency_us", ids[i]);
                if (r < 0)
                        goto fail;
                c->has_qos = sysfs_exists(s, c->qos.path);
        }

        /* cpufreq policies (absent directory: no cpufreq, not an error) */
        free(ids);
        ids = NULL;
        n = 0;
        path_printf(dir, sizeof(dir), "%s/devices/system/cpu/cpufreq", s->root);
        if (scan_numbered(dir, "policy", NULL, &ids, &n) == 0 && n > 0) {
                s->policies = calloc(n, sizeof(*s->policies));
                if (!s->policies) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (size_t i = 0; i < n; i++) {
                        struct policy *p = &s->policies[s->n_policies];
                        r = load_policy(s, ids[i], p);
                        if (r < 0) {
                                char pol[64];

                                snprintf(pol, sizeof(pol), "devices/system/cpu/cpufreq/policy%u", ids[i]);
                                emit_event(drv, &(struct power_event) { .type = POWER_EVENT_POLICY_UNREADABLE,
                                                                        .path = pol, .cls = POWER_KNOB_CPUFREQ,
                                                                        .error = r });
                                policy_free(p);
                                continue;
                        }
                        CPUSET_FOREACH(c, &p->cpus)
                                if ((unsigned) c < s->n_cpus)
                                        s->cpus[c].policy = (int) s->n_policies;
                        s->n_policies++;
                }
        }
        sysfs_preset_foreign(drv);
        return 0;
fail:
        sysfs_exit(drv);
        return r;
}

static struct policy *cpu_policy(struct power_driver *drv, unsigned cpu)
{
        struct sysfs *s = drv->priv;

        if (cpu >= s->n_cpus || !s->cpus[cpu].present || s->cpus[cpu].policy < 0)
                return NULL;
        return &s->policies[s->cpus[cpu].policy];
}

static uint32_t snap_up(const struct policy *p, uint32_t khz)
{
        for (size_t i = 0; i < p->n_avail; i++)
                if (p->avail_khz[i] >= khz)
                        return p->avail_khz[i];
        return MIN(khz, p->cpuinfo_max_khz);
}

/* Write the cap of a policy. */
static int policy_set_cap(struct power_driver *drv, struct policy *p, uint32_t khz)
{
        int r;

        khz = MAX(MIN(khz, p->cpuinfo_max_khz), MAX(p->cpuinfo_min_khz, p->floor_khz));
        r = knob_write_u32(drv, &p->kmax, khz);
        if (r == 0)
                p->cap_khz = khz;
        else if (r == -ERANGE) {
                uint32_t act;
                if (parse_u32(drv->last.actual, &act) == 0)
                        p->cap_khz = act;
        }
        return r;
}

static int sysfs_enter_idle(struct power_driver *drv, unsigned cpu, const struct power_idle_constraint *ic)
{
        struct sysfs *s = drv->priv;
        struct scpu *c;
        int ret = 0, r;

        if (cpu >= s->n_cpus || !s->cpus[cpu].present)
                return -ENOENT;
        c = &s->cpus[cpu];
        for (unsigned i = 0; i < c->n_states; i++) {
                bool disable = ic->deepest_state >= 0 && (int) i > ic->deepest_state;
                if (c->idle[i].gone)
                        continue;
                r = disable ? knob_write(drv, &c->idle[i], "1") : knob_release(drv, &c->idle[i]);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        if (c->has_qos) {
                char v[16];
                /* kernel: "0" = no constraint, "n/a" = no latency tolerated.  No
                 * limit: our own limit is lifted (back to the original). */
                if (ic->latency_us == 0)
                        snprintf(v, sizeof(v), "n/a");
                else
                        snprintf(v, sizeof(v), "%" PRId32, ic->latency_us);
                r = ic->latency_us < 0 ? knob_release(drv, &c->qos) : knob_write(drv, &c->qos, v);
                if (r < 0 && ret == 0)
                        ret = r;
        } else if (ic->latency_us >= 0 && ret == 0)
                ret = -EOPNOTSUPP;
        return ret;
}

static int sysfs_set_perf(struct power_driver *drv, unsigned cpu, const struct power_perf_request *req)
{
        struct policy *p = cpu_policy(drv, cpu);
        uint32_t cap = 0;
        bool set_cap = false;
        int r, ret = 0;

        if (!p)
                return -EOPNOTSUPP;
        if (req->flags & POWER_PERF_LEVEL) {
                uint32_t range = p->cpuinfo_max_khz - p->cpuinfo_min_khz;
                cap = snap_up(p, p->cpuinfo_min_khz + (uint32_t) ((uint64_t) range * MIN(req->level_permille, 1000u) / 1000));
                set_cap = true;
        }
        if (req->flags & POWER_PERF_MAX_KHZ) {
                cap = req->max_khz;
                set_cap = true;
        }
        if (req->flags & POWER_PERF_MIN_KHZ) {
                uint32_t floor = MAX(MIN(req->min_khz, p->cpuinfo_max_khz), p->cpuinfo_min_khz);
                /* order the two writes so min <= max holds at every step */
                if (set_cap && cap >= floor) {
                        if (floor > p->cap_khz) {
                                r = policy_set_cap(drv, p, cap);
                                if (r < 0)
                                        ret = r;
                                set_cap = false;
                        }
                }
                r = knob_write_u32(drv, &p->kmin, floor);
                if (r == 0)
                        p->floor_khz = floor;
                else {
                        uint32_t act;
                        if (r == -ERANGE && parse_u32(drv->last.actual, &act) == 0)
                                p->floor_khz = act;
                        if (ret == 0)
                                ret = r;
                }
        }
        if (set_cap) {
                r = policy_set_cap(drv, p, cap);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        if (req->flags & POWER_PERF_EPP) {
                if (!p->has_epp)
                        r = -EOPNOTSUPP;
                else
                        r = knob_write(drv, &p->kepp, req->epp);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

static int retry_knob(struct power_driver *drv, struct knob *k, nsec_t now)
{
        char v[VALUE_MAX];

        if (!retry_due(&k->retry, now))
                return 0;
        drv->stats.retries++;
        snprintf(v, sizeof(v), "%s", k->pending);
        return knob_write(drv, k, v);
}

static int sysfs_late_callback(struct power_driver *drv, nsec_t now)
{
        struct sysfs *s = drv->priv;
        int ret = 0, r;

        if (drv->pending_retries == 0)
                return 0;
        for (size_t i = 0; i < s->n_policies; i++) {
                struct policy *p = &s->policies[i];
                struct knob *ks[] = { &p->kmin, &p->kmax, &p->kepp };
                for (size_t k = 0; k < ELEMENTSOF(ks); k++)
                        if ((r = retry_knob(drv, ks[k], now)) < 0 && ret == 0)
                                ret = r;
        }
        for (unsigned c = 0; c < s->n_cpus; c++) {
                for (unsigned i = 0; i < s->cpus[c].n_states; i++)
                        if ((r = retry_knob(drv, &s->cpus[c].idle[i], now)) < 0 && ret == 0)
                                ret = r;
                if ((r = retry_knob(drv, &s->cpus[c].qos, now)) < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

int power_sysfs_get_info(const struct power_driver *drv, struct power_sysfs_info *ret)
{
        const struct sysfs *s = drv->priv;
        struct power_sysfs_info info = { 0 };

        if (drv->ops != &power_driver_sysfs_ops)
                return -EINVAL;
        info.n_policies = (unsigned) s->n_policies;
        for (unsigned c = 0; c < s->n_cpus; c++) {
                if (!s->cpus[c].present)
                        continue;
                info.n_cpus++;
                for (unsigned i = 0; i < s->cpus[c].n_states; i++)
                        info.n_idle_knobs += !s->cpus[c].idle[i].gone;
                info.n_pm_qos += s->cpus[c].has_qos;
        }
        for (size_t i = 0; i < s->n_policies; i++)
                info.has_epp |= s->policies[i].has_epp;
        *ret = info;
        return 0;
}

int power_sysfs_policy_cap_khz(const struct power_driver *drv, unsigned cpu, uint32_t *ret)
{
        struct policy *p;

        if (drv->ops != &power_driver_sysfs_ops)
                return -EINVAL;
        p = cpu_policy((struct power_driver *) drv, cpu);
        if (!p)
                return -ENOENT;
        *ret = p->cap_khz;
        return 0;
}

const struct power_driver_ops power_driver_sysfs_ops = {
        .name = "sysfs",
        .init = sysfs_init,
        .exit = sysfs_exit,
        .enter_idle = sysfs_enter_idle,
        .late_callback = sysfs_late_callback,
        .set_perf = sysfs_set_perf,
};
