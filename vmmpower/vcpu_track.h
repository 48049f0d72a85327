/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util.h"
#include "vm.h"

/*
 * Load tracking of vCPU threads.
 *
 * The tracker keeps the merged inventory (every source's view of the VMs,
 * merged by QEMU pid) and, per vCPU thread, a kept-open fd on
 * <procfs>/<pid>/task/<tid>/schedstat read with pread() at offset 0 each
 * control period.  schedstat holds three numbers: on-CPU ns, run-queue wait
 * ns, timeslices.  Per period:
 *   util       = d(on-CPU ns - halt-poll ns) / d(wall ns)
 *   wait_ratio = d(wait ns) / d(wall ns)
 * and exponentially decayed averages of both (half-life in the config; the
 * constant and its reasoning are in vcpu_track.c).  ESRCH (or ENOENT) on a
 * kept fd means the thread is gone: normal, counted, not an error.
 *
 * Thread identity: a tid is opened only when its comm names that vCPU
 * ("CPU <index>/KVM" or "/TCG", QEMU's names under -name debug-threads=on)
 * and never again once the tracker saw it gone, so a source's out-of-date
 * list cannot make another thread of the process (or of another one) a vCPU.
 */

/* Default half-life of the decayed averages (config LoadHalfLife); reasoning in vcpu_track.c. */
#define TRACKER_DEFAULT_HALF_LIFE_NS (4 * NSEC_PER_SEC)

struct schedstat {
        uint64_t run_ns;
        uint64_t wait_ns;
        uint64_t timeslices;
};
/* Parse the content of a schedstat file ("123 456 7\n").  -EINVAL if malformed. */
int schedstat_parse(const char *s, struct schedstat *ret);

struct vcpu_load {
        int index;
        pid_t tid;
        bool valid;             /* at least two samples taken */
        bool gone;              /* thread exited; dropped at the next inventory update */
        struct schedstat last;  /* raw counters of the latest sample */
        uint64_t halt_poll_ns;  /* cumulative halt-poll ns if known (KVM stats), else 0 */
        bool has_halt_poll;
        double util;            /* last period, 0..1 (may exceed 1 by sampling jitter: clamped) */
        double wait_ratio;      /* last period */
        double halt_poll_ratio; /* last period, 0 when unknown */
        double util_avg;        /* decayed */
        double wait_avg;        /* decayed */
};

struct vm_load {
        struct vm_info info;    /* merged inventory entry */
        unsigned n_vcpus;       /* == info.n_vcpus */
        struct vcpu_load *vcpus;
        nsec_t first_seen_ns;
        /* another tracked VM has the same name and uuid (plain QEMUs started with one -name and
         * no -uuid, or a copied -uuid): metrics label it domain="NAME [pid N]" (metrics.c) */
        bool label_shared;
};

struct tracker_stats {
        uint64_t samples;        /* vCPU samples read successfully */
        uint64_t threads_gone;   /* vCPU threads seen exiting: ESRCH/ENOENT on the kept fd or at open,
                                  * or (BPF) their tid now names a thread with another start time */
        uint64_t threads_misnamed; /* tids not opened: the thread's comm is not "CPU <index>/KVM|TCG"
                                    * (a source's stale tid now used by another thread) */
        uint64_t read_errors;    /* other read or parse errors */
        uint64_t open_errors;
        uint64_t vms_added, vms_removed;
        nsec_t last_sample_cpu_ns; /* thread CPU time spent in the last tracker_sample() */
        uint64_t bpf_errors;     /* failed BPF passes or map updates (each switches to pread()) */
        /* Now, over the merged inventory: vCPUs with an index >= VM_MAX_VCPUS that are not
         * tracked (vm_info.n_vcpus_untracked, the highest count any source gives), and the
         * VMs that have some.  Each such VM is logged at warning once (and when its count changes). */
        uint64_t vcpus_untracked;
        uint64_t vms_with_untracked;
};

struct tracker;

/*
 * With procfs_root "/proc", tries the BPF sampler (schedstat_bpf.h) and, if it
 * cannot load, logs that once per process and samples with pread().
 */
int tracker_new(const char *procfs_root, nsec_t half_life_ns, struct tracker **ret);
void tracker_free(struct tracker *tr);

/*
 * Switch the BPF task-iterator sampler on (0, or -errno when it cannot load:
 * -EOPNOTSUPP without BPF support or with a procfs root other than /proc,
 * -EPERM, ...; the tracker then keeps pread()) or off (always 0).
 */
int tracker_use_bpf(struct tracker *tr, bool enable);
/* Which sampler the next tracker_sample() uses: true = BPF iterator. */
bool tracker_uses_bpf(const struct tracker *tr);
const char *tracker_sampler_name(const struct tracker *tr); /* "bpf-iter" or "pread" */

/*
 * Replace what one source knows (a full snapshot of that source; vms may be
 * NULL when n == 0).  The tracker merges all sources by pid, and a VM's vCPUs
 * by index (the first source in libvirt > QMP > proc order whose (index, tid)
 * is usable); VMs that no source reports any more are dropped, new vCPU
 * threads get fds opened.  Returns 0 or -errno (-ENOMEM); on error the
 * previous state is kept.
 */
int tracker_set_source(struct tracker *tr, enum vm_source source, const struct vm_info *vms, size_t n,
                       nsec_t now);

/* Sample every tracked vCPU thread.  Returns the number of vCPUs sampled. */
int tracker_sample(struct tracker *tr, nsec_t now);

/*
 * Capacity one vCPU ran at since the last sample (1..1024, 1024 = the top perf
 * level; 0 = unknown, taken as 1024), set before sampling: its busy time is
 * scaled by scale / 1024 (frequency invariance).  Kept until set again.
 */
void tracker_set_load_scale(struct tracker *tr, pid_t pid, int vcpu_index, unsigned scale);

/* Feed cumulative halt-poll ns of one vCPU (from KVM stats) before sampling. */
void tracker_set_halt_poll(struct tracker *tr, pid_t pid, int vcpu_index, uint64_t halt_poll_ns);

size_t tracker_n_vms(const struct tracker *tr);
const struct vm_load *tracker_vm(const struct tracker *tr, size_t i); /* sorted by name, then pid */
const struct vm_load *tracker_find_vm(const struct tracker *tr, pid_t pid);
const struct tracker_stats *tracker_stats(const struct tracker *tr);
size_t tracker_n_threads(const struct tracker *tr);

/* Pure arithmetic, exposed for tests: decay factor for dt with half-life h. */
double tracker_decay_alpha(nsec_t dt_ns, nsec_t half_life_ns);
