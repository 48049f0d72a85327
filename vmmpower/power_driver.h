/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpuset.h"
#include "journal.h"
#include "log.h"
#include "retry.h"
#include "util.h"

/*
 * Power driver: the actuator through which plans reach the host.  Of the
 * 2013 power-driver proposal's ops it keeps enter_idle (idle constraints)
 * and late_callback (deferred retries), plus set_perf for explicit limits;
 * the proposal's other decisions (which CPU to wake or put to sleep, faster,
 * slower, boost, load scale) are the planner's, one level up (why, and where
 * each is done: docs/power-driver.md).  One const ops table per backend,
 * validated once at registration like struct cpufreq_driver.  Backends:
 *
 *  - "sysfs": the real host, every path under a configurable sysfs root.
 *    cpufreq limits per policy (scaling_min_freq / scaling_max_freq,
 *    energy_performance_preference where present), cpuidle per-state
 *    `disable` per CPU, per-CPU PM QoS resume latency.
 *    Every write: journal first, then one checked write(), then read back
 *    and journal what was read (journal_note_actual(); if that cannot be
 *    recorded, the previous value is written back and the journal error
 *    returned): a read-back that differs (cpufreq clamps silently) is -ERANGE
 *    with the actual value in power_driver_last_write(), never success.  Errors are
 *    the real errno, each with a documented action (docs/power-driver.md):
 *      EINVAL/ERANGE/EOVERFLOW  value rejected: remembered for that knob,
 *                               the same value is not written again
 *      EBUSY/EAGAIN/EINTR       retried from late_callback with backoff
 *      EACCES/EPERM/EROFS       the knob class is disabled, logged once; one
 *                               write of the class is let through again after
 *                               a backoff (1 s, x2, capped at 5 min)
 *      ENOENT/ENODEV/ENXIO      CPU/policy gone: knob dropped
 *    Ownership: before every write (and every release) the knob's current
 *    value is compared with the value vmmpower last wrote to it (in memory,
 *    else the journal's before/after).  A knob that holds anything else was
 *    changed by someone else and belongs to them from then on: not written
 *    again (-ESTALE, POWER_KNOB_FOREIGN; in memory: its journal record is
 *    kept, so restore leaves their value but puts the original back if the
 *    knob holds ours again), counted (`foreign`), reported once through
 *    power_driver_config.on_foreign.  A knob vmmpower never wrote is free,
 *    unless the start-up coexistence check (coexist.h) found it set by
 *    someone else or written by a running tuner: such a knob is foreign
 *    from the start (power_driver_config.foreign_paths / foreign_classes).
 *  - "sim": records the requested state in memory and calls a hook after
 *    each change (the energy model is plugged in there).  No host writes.
 *
 * A "perf level" is a cap on a frequency domain: permille of the range
 * cpuinfo_min_freq..cpuinfo_max_freq, written as scaling_max_freq (snapped
 * to scaling_available_frequencies where the driver lists them).
 */

struct power_driver;

enum {
        POWER_PERF_LEVEL = 1 << 0,   /* level_permille -> scaling_max_freq */
        POWER_PERF_MIN_KHZ = 1 << 1, /* min_khz -> scaling_min_freq */
        POWER_PERF_MAX_KHZ = 1 << 2, /* max_khz -> scaling_max_freq */
        POWER_PERF_EPP = 1 << 3,     /* epp -> energy_performance_preference */
};

struct power_perf_request {
        unsigned flags;
        unsigned level_permille;
        uint32_t min_khz;
        uint32_t max_khz;
        char epp[32];
};

/*
 * "No limit" (-1) lifts our own limit: a state or PM QoS value that we changed
 * goes back to the original in the journal; one we never wrote is left alone.
 */
struct power_idle_constraint {
        int deepest_state;  /* deepest allowed cpuidle state index; -1 = no limit */
        int32_t latency_us; /* PM QoS resume latency limit; -1 = none; 0 = no wake latency at all */
};

struct power_driver_ops {
        const char *name; /* required */

        /* optional: discover the host, allocate private state */
        int (*init)(struct power_driver *drv);
        /* optional: free private state (never restores: that is the journal's job) */
        void (*exit)(struct power_driver *drv);

        /* required: idle constraint of one CPU (deepest state, wake latency) */
        int (*enter_idle)(struct power_driver *drv, unsigned cpu, const struct power_idle_constraint *c);
        /* optional: deferred work (retries); may block */
        int (*late_callback)(struct power_driver *drv, nsec_t now);
        /* required: explicit limits for the policy of cpu */
        int (*set_perf)(struct power_driver *drv, unsigned cpu, const struct power_perf_request *req);
};

struct power_event;

struct power_driver_config {
        const char *sysfs_root;   /* sysfs: default "/sys" */
        struct journal *journal;  /* sysfs: required */
        struct backoff backoff;   /* zero: BACKOFF_DEFAULT */
        unsigned n_cpus;          /* sim: number of CPUs (required) */
        uint32_t sim_max_khz;     /* sim: frequency at level 1000 (default 1000000) */
        /* sim: called after every state change of cpu */
        void (*sim_hook)(void *userdata, struct power_driver *drv, unsigned cpu);
        void *sim_userdata;
        /* sysfs, optional: a knob was found changed by someone else and is let go
         * (called once per knob; ours / found are raw bytes, not escaped) */
        void (*on_foreign)(void *userdata, const char *path, const char *ours, const char *found);
        void *foreign_userdata;
        /* sysfs, optional: what the operator should hear of (struct power_event); the
         * driver itself logs only at debug level.  Called from the op that saw it. */
        void (*on_event)(void *userdata, const struct power_event *ev);
        void *event_userdata;
        /* sysfs, optional: knobs that are someone else's from the start (coexist.h): every
         * knob of a class in foreign_classes (bit per enum power_knob_class) and each path
         * (relative to the root) in the NULL-terminated foreign_paths.  Never written, never
         * released, counted in stats.foreign; on_foreign is not called for them. */
        unsigned foreign_classes;
        const char *const *foreign_paths;
};

/* Returned for a write to a knob that someone else changed since our last write. */
#define POWER_KNOB_FOREIGN ESTALE

enum power_knob_class {
        POWER_KNOB_CPUFREQ,
        POWER_KNOB_CPUIDLE,
        POWER_KNOB_PM_QOS,
        _POWER_KNOB_CLASS_MAX,
};

struct power_driver_stats {
        unsigned writes;          /* written and read back equal */
        unsigned skipped;         /* knob already held the value: no write, no journal record */
        unsigned clamped;         /* read back differs (-ERANGE) */
        unsigned rejected;        /* EINVAL/ERANGE/EOVERFLOW from the write */
        unsigned rejected_cached; /* value known to be rejected: not written again */
        unsigned busy;            /* EBUSY/EAGAIN/EINTR */
        unsigned retries;         /* retries attempted from late_callback */
        unsigned gave_up;         /* retries exhausted */
        unsigned denied;          /* EACCES/EPERM/EROFS */
        unsigned class_disabled;  /* writes refused because their class is disabled */
        unsigned class_retries;   /* writes let through to a disabled class after its backoff */
        unsigned class_reenabled; /* classes enabled again by such a write succeeding */
        unsigned foreign;         /* knobs found changed by someone else: let go (journal record kept) */
        unsigned foreign_refused; /* writes not made because the knob is someone else's */
        unsigned gone;            /* ENOENT/ENODEV/ENXIO */
        unsigned journal_errors;  /* journal failed: write not made, or made and put back (read-back not recorded) */
        unsigned other_errors;
};

/*
 * Events of the sysfs driver for its caller to report (power_driver_config.on_event);
 * power_event_format() makes the message, the caller chooses the level.
 */
enum power_event_type {
        POWER_EVENT_GAVE_UP,           /* still busy after every retry: value given up */
        POWER_EVENT_CLASS_DISABLED,    /* permission denied: every write of the class refused until retry_in_ns */
        POWER_EVENT_CLASS_ENABLED,     /* a write let through to a disabled class succeeded: enabled again */
        POWER_EVENT_WRITE_FAILED,      /* an unexpected errno from a write (not retried) */
        POWER_EVENT_JOURNAL_FAILED,    /* the journal could not record the write: not written */
        POWER_EVENT_POLICY_UNREADABLE, /* init: a cpufreq policy that cannot be read is ignored */
};

struct power_event {
        enum power_event_type type;
        const char *path;  /* knob or policy directory, relative to the sysfs root */
        const char *value; /* the value being written, or NULL */
        enum power_knob_class cls;
        int error;         /* -errno, or 0 */
        unsigned attempts; /* GAVE_UP: retries made */
        nsec_t retry_in_ns; /* CLASS_DISABLED: until the next write is let through */
};

/* The message for ev (no trailing newline), e.g. "PATH: written; cpufreq writes are allowed again". */
void power_event_format(const struct power_event *ev, char *buf, size_t size);
/* The level the daemon's tools log ev at: info for CLASS_ENABLED, error for JOURNAL_FAILED, else warning. */
enum log_level power_event_level(const struct power_event *ev);

struct power_write_info {
        char path[256]; /* relative to the sysfs root */
        char wanted[64];
        char actual[64]; /* read back (when error == -ERANGE or 0) */
        int error;
};

/*
 * Validate ops (required members present) and add it to the registry.
 * -EINVAL (power_driver_validate() names the missing member; logged at debug), -EEXIST, -ENOSPC.
 * The built-in "sysfs" and "sim" are registered on first use.
 */
int power_driver_register(const struct power_driver_ops *ops);
/* Validation only: 0, or -EINVAL with *ret_missing = the member's name. */
int power_driver_validate(const struct power_driver_ops *ops, const char **ret_missing);

int power_driver_new(const char *name, const struct power_driver_config *cfg, struct power_driver **ret);
struct power_driver *power_driver_free(struct power_driver *drv);

/* The time used to schedule retries by ops that take no `now`. */
void power_driver_set_now(struct power_driver *drv, nsec_t now);

int power_driver_enter_idle(struct power_driver *drv, unsigned cpu, const struct power_idle_constraint *c);
int power_driver_late_callback(struct power_driver *drv, nsec_t now);
int power_driver_set_perf(struct power_driver *drv, unsigned cpu, const struct power_perf_request *req);

const char *power_driver_name(const struct power_driver *drv);
const struct power_driver_config *power_driver_get_config(const struct power_driver *drv);
void *power_driver_priv(const struct power_driver *drv);
void power_driver_set_priv(struct power_driver *drv, void *priv);
struct power_driver_stats *power_driver_stats(struct power_driver *drv);
const struct power_write_info *power_driver_last_write(const struct power_driver *drv);
bool power_driver_class_disabled(const struct power_driver *drv, enum power_knob_class c);
const char *power_knob_class_to_string(enum power_knob_class c);
/* Number of knobs with a retry pending. */
unsigned power_driver_pending_retries(const struct power_driver *drv);

/* ---- sysfs backend ---- */

/*
 * I/O seam: every sysfs read and write of the driver and of journal restore
 * goes through these.  read(): raw bytes NUL-terminated, returns length or
 * -errno.  write(): one write of data, 0 or -errno.  Tests install fault
 * injecting versions; NULL restores the default.  Default write on a
 * regular file outside sysfs (a fixture tree) replaces the file atomically
 * (tmp + rename, no fsync), as a sysfs store is atomic.
 */
struct power_sysfs_io {
        ssize_t (*read)(void *userdata, const char *path, char *buf, size_t size);
        int (*write)(void *userdata, const char *path, const char *data, size_t len);
        void *userdata;
};
void power_driver_sysfs_set_io(const struct power_sysfs_io *io);
ssize_t power_sysfs_default_read(void *userdata, const char *path, char *buf, size_t size);
int power_sysfs_default_write(void *userdata, const char *path, const char *data, size_t len);

/* Knob access for journal restore: relpath under root (NULL root = "/sys"). */
int power_driver_sysfs_knob_read(const char *root, const char *relpath, char *buf, size_t size);
int power_driver_sysfs_knob_write(const char *root, const char *relpath, const char *value);

/* What the sysfs backend found (for tests and `vmmpowerctl`). */
struct power_sysfs_info {
        unsigned n_policies;
        unsigned n_cpus;
        unsigned n_idle_knobs;
        unsigned n_pm_qos;
        bool has_epp;
};
int power_sysfs_get_info(const struct power_driver *drv, struct power_sysfs_info *ret);
/* Current cap of cpu's policy in kHz as the driver tracks it. */
int power_sysfs_policy_cap_khz(const struct power_driver *drv, unsigned cpu, uint32_t *ret);

/* ---- sim backend ---- */

struct power_sim_cpu {
        unsigned level_permille;   /* cap */
        unsigned min_permille;     /* floor */
        char epp[32];
        struct power_idle_constraint idle;
        uint64_t changes;
};
const struct power_sim_cpu *power_sim_cpu(const struct power_driver *drv, unsigned cpu);

extern const struct power_driver_ops power_driver_sysfs_ops;
extern const struct power_driver_ops power_driver_sim_ops;

#ifdef POWER_DRIVER_BACKEND
/*
 * For power_driver.c and its backends (power_driver_sysfs.c, power_driver_sim.c)
 * only, which define POWER_DRIVER_BACKEND before any #include: the driver object.
 * Everyone else holds a struct power_driver * and uses the functions above.
 */
struct power_driver {
        const struct power_driver_ops *ops;
        struct power_driver_config cfg;
        void *priv;
        nsec_t now;
        struct power_driver_stats stats;
        struct power_write_info last;
        bool class_disabled[_POWER_KNOB_CLASS_MAX];
        struct retry_state class_retry[_POWER_KNOB_CLASS_MAX]; /* when a disabled class is tried again */
        unsigned pending_retries;
};
#endif
