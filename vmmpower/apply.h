/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "actuator.h"
#include "util.h"

struct restore_stats;

/*
 * The applier: turns the planner's decisions into host changes, off the
 * decision path (DESIGN §3, the seed's late_callback).  It owns a thread, the
 * journal, a sysfs power driver and, for libvirt domains, a libvirt
 * connection of its own.  The control loop hands it the desired state after
 * every plan (applier_submit(), never blocks on I/O); the thread compares it
 * with what it applied before and makes only the differences (a thread the
 * new state no longer has is let go as a VM in mode exclude is: a pin we made
 * goes back to its original; the journal entry of a pin put back, or of a
 * thread or domain run found gone, is forgotten):
 *
 *   - vCPU pins: libvirt domains live through virDomainPinVcpuFlags (shown by
 *     `virsh vcpupin`, persistent config untouched), plain QEMU through
 *     sched_setaffinity() on the vCPU thread (actuator.h);
 *   - frequency caps per pCPU's cpufreq policy (power_driver set_perf);
 *   - idle constraints per pCPU (PM QoS resume latency; released to the
 *     original value when the plan lifts it);
 *   - retries of transient failures with backoff (power driver late_callback
 *     and per-pin retry state; a frequency cap or latency limit whose write
 *     failed stays "not applied" and is tried again on later passes, 1 s
 *     doubling to 30 s, for as long as the plan wants it).
 *
 * A knob someone else changed since our last write is theirs (power_driver.h):
 * the applier logs it once at notice and leaves it.
 *
 * The pins it made are checked every APPLY_PIN_CHECK_NS (apply_config
 * pin_check_ns), one sched_getaffinity() per pinned thread: the kernel's
 * mask against the one read back when the pin was made.  A mask that now
 * holds more CPUs (the kernel widens a thread whose CPUs all went offline,
 * however briefly; a cpuset change) is pinned again at once; a pin with a
 * CPU offline is not checked.  Any other mask, found at two checks in a row
 * (and not pinned over between them), is someone else's pin (taskset,
 * `virsh vcpupin --live`): as for a knob, it
 * is theirs, never pinned again nor restored (its journal entry is
 * forgotten) while its thread lives, and the daemon leaves that vCPU out of
 * its plans (applier_foreign_threads()); a thread they let run on all the
 * CPUs it had before vmmpower's first pin (its journaled original) is handed
 * back.  The pins let go are kept in the state directory (foreign-pins), so
 * that the next applier (a reload that changes its settings, a restart)
 * leaves them too.
 *
 * Every knob is journaled before its first write (journal.h); restoring is
 * the applier's own on applier_stop(), else the daemon's once it is freed
 * (daemon_restore_journal()).  With apply_config.simulate (--dry-run) the
 * driver is the "sim" backend and nothing reaches the host.
 * A newer request replaces one the thread has not started yet: only the
 * latest desired state matters.
 */

struct apply_pin {
        char uuid[37];   /* libvirt domain, "" = plain QEMU (affinity of the thread) */
        pid_t pid, tid;  /* QEMU process and vCPU thread */
        unsigned vcpu;   /* vCPU index (libvirt's vcpu id); ACTUATOR_EMULATOR for an emulator pin */
        int cpu;         /* target pCPU, or APPLY_RELEASE: back to its original (journal), e.g. mode exclude */
        cpuset_t set;    /* with cpu >= 0: the CPUs it may run on (cpu among them); empty = cpu alone */
        bool emulator;   /* emulator threads: libvirt emulator pin (tid 0), or plain QEMU's main thread (tid == pid) */
};

#define APPLY_RELEASE (-2)

struct apply_request {
        size_t n_pins;
        struct apply_pin *pins;
        unsigned n_cpus;
        uint32_t *cpu_max_khz;   /* [n_cpus] frequency cap of the CPU's policy, 0 = leave alone */
        int32_t *cpu_latency_us; /* [n_cpus] PM QoS resume latency limit, -1 = no limit */
        cpuset_t online;         /* the host's online CPUs (empty: 0..n_cpus-1): a pin let go whose
                                  * original is not known is handed back once its thread may run on
                                  * all of them again */
};

struct apply_request *apply_request_new(size_t n_pins, unsigned n_cpus);
void apply_request_free(struct apply_request *r);

struct apply_config {
        const char *state_dir;    /* journal directory (/run/vmmpower) */
        const char *sysfs_root;   /* "/sys" */
        const char *libvirt_uri;  /* NULL: no libvirt pins (they are counted as failed) */
        bool journal_sync;        /* fdatasync each journal record (true outside tests) */
        /* knobs someone else owns from the start (coexist.h; power_driver_config) */
        unsigned foreign_classes;
        const char *const *foreign_paths; /* NULL-terminated, only read by applier_new() */
        /* vmmpowerd --dry-run: the "sim" power driver (n_cpus CPUs, level 1000 = sim_max_khz)
         * instead of sysfs, no journal, no pin made (a pin counts as made as asked): the whole
         * path from plan to knob values runs, nothing on the host changes */
        bool simulate;
        unsigned n_cpus;
        uint32_t sim_max_khz;
        nsec_t pin_check_ns;      /* how often the pins made are checked (0: APPLY_PIN_CHECK_NS) */
};

#define APPLY_PIN_CHECK_NS (5 * NSEC_PER_SEC)

struct apply_stats {
        uint64_t requests;        /* desired states received */
        uint64_t superseded;      /* replaced before the thread took them */
        uint64_t passes;          /* passes of the thread over a desired state */
        uint64_t pins;            /* pins changed and read back equal */
        uint64_t pin_errors;      /* failed attempts (any errno) */
        uint64_t pin_retries;     /* retries scheduled with backoff */
        uint64_t pin_gave_up;     /* retries exhausted */
        uint64_t pin_gone;        /* thread or domain gone (ESRCH/ENOENT) */
        uint64_t pin_narrowed;    /* kernel/libvirt applied another mask (-ERANGE) */
        uint64_t pin_released;    /* pins put back to their original (VM excluded, or left out of the state) */
        uint64_t pin_widened;     /* pins found running on more CPUs than pinned (hotplug, cpuset): pinned again */
        uint64_t pin_foreign;     /* pins found changed by someone else: let go */
        uint64_t pin_handed_back; /* of those, threads let run on all the CPUs they had before: taken back */
        unsigned pins_foreign;    /* threads whose pin is someone else's now */
        uint64_t libvirt_connects, libvirt_connect_errors;
        uint64_t knob_changes;    /* frequency caps / latency limits the power driver applied (or clamped) */
        uint64_t knob_errors;     /* failed attempts (any errno but the final ones below); retried */
        uint64_t knob_retries;    /* attempts that were retries of a failed target */
        uint64_t knob_unsupported; /* targets the driver has no knob for (EOPNOTSUPP): not counted as changes */
        uint64_t knob_gone;       /* knob gone (ENOENT): not retried */
        uint64_t knob_foreign;    /* targets refused because someone else owns the knob (ESTALE) */
        int last_error;           /* last errno (negative), 0 if none */
        nsec_t last_pass_ns;      /* wall time of the last pass */
        nsec_t last_pass_cpu_ns;  /* thread CPU time of the last pass */
        unsigned pins_current;    /* pins in the current desired state */
        unsigned driver_policies, driver_pm_qos; /* what the sysfs driver found */
        unsigned driver_writes, driver_clamped, driver_denied, driver_busy;
        unsigned driver_foreign;        /* knobs found changed by someone else and let go */
        unsigned driver_class_retries;  /* writes let through to a class disabled by EACCES/EPERM/EROFS */
        unsigned driver_classes_disabled; /* bit per enum power_knob_class disabled now */
        unsigned driver_pending_retries;  /* knobs with an EBUSY retry pending in the driver */
        unsigned journal_errors;  /* journal records that could not be written (pins and knobs: the change was
                                   * not made, or made and undone) */
        bool simulated;           /* apply_config.simulate: pins and knob changes are what would be done */
};

struct applier;

/* Opens the journal and the sysfs driver, starts the thread.  -errno, logged. */
int applier_new(const struct apply_config *cfg, struct applier **ret);
/* Stops the thread (finishing the pass in progress) and frees; never restores by
 * itself (after applier_stop(): waits for its restore to end). */
void applier_free(struct applier *a);
/*
 * Stop acting and put back every knob of the journal, on the applier's own
 * thread: the pass in progress ends, the driver and the journal are closed,
 * and the journal under the state directory is restored (journal_restore_all:
 * sysfs knobs, affinities, libvirt vCPU pins through a connection of that
 * thread).  Returns at once; requests submitted afterwards are dropped.  The
 * daemon's loop calls it on a reload so that no libvirt connection or sysfs
 * write runs on the loop.
 */
void applier_stop(struct applier *a);
/*
 * After applier_stop(): false while the restore runs (wait = false), true
 * once it is done, with journal_restore_all()'s result (entries kept, or
 * -errno) in *ret_result and what it did in *ret (either may be NULL).
 * wait = true blocks until then.  applier_free() is then immediate.
 */
bool applier_stopped(struct applier *a, bool wait, int *ret_result, struct restore_stats *ret);
const char *applier_state_dir(const struct applier *a);
/* Hand over a desired state (ownership moves to the applier). */
void applier_submit(struct applier *a, struct apply_request *r);
void applier_get_stats(struct applier *a, struct apply_stats *ret);
/* A thread whose pin someone else changed (apply.c): the daemon leaves its vCPU out of plans. */
struct apply_thread {
        pid_t pid, tid;
};
/*
 * The threads whose pins are someone else's now, sorted by (pid, tid), in a
 * new array (*ret, free()) as of the last pass; -ENOMEM.
 */
int applier_foreign_threads(struct applier *a, struct apply_thread **ret, size_t *n);

/* Wait until the thread has finished a pass over every request submitted so far (tests). */
int applier_wait_idle(struct applier *a, nsec_t timeout_ns);
