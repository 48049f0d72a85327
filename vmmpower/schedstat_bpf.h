/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Sampling of schedstat counters through a BPF task iterator
 * (schedstat.bpf.c): one read() pass returns the counters of every thread
 * of every tracked process, instead of one pread() per thread on
 * /proc/<pid>/task/<tid>/schedstat.  The counters are the very fields that
 * file prints.  Needs a kernel with BTF, CAP_BPF+CAP_PERFMON (root) and a
 * build with libbpf (meson option bpf); otherwise schedstat_bpf_new()
 * fails and the caller keeps the pread() path.
 */

struct schedstat_bpf_rec {
        uint32_t tid;
        uint32_t tgid;
        uint64_t run_ns;        /* se.sum_exec_runtime */
        uint64_t wait_ns;       /* sched_info.run_delay */
        uint64_t timeslices;    /* sched_info.pcount */
        uint64_t start_ns;      /* start_time: CLOCK_MONOTONIC ns at fork (tells a reused tid) */
};

struct schedstat_bpf;

/* Is the BPF path compiled in at all? */
bool schedstat_bpf_built(void);

/*
 * Load and attach the iterator and check it sees this process's threads with
 * the same ids as getpid()/gettid() (same pid namespace).  -EOPNOTSUPP when
 * built without BPF or in another pid namespace, else the -errno of the load
 * (-EPERM, -ENOENT without BTF, ...).
 */
int schedstat_bpf_new(struct schedstat_bpf **ret);
void schedstat_bpf_free(struct schedstat_bpf *s);

/* Add or remove a process (tgid) whose threads are reported.  0 or -errno. */
int schedstat_bpf_track(struct schedstat_bpf *s, pid_t pid);
int schedstat_bpf_untrack(struct schedstat_bpf *s, pid_t pid);

/*
 * One pass: calls cb for every thread of every tracked process.  Allocates
 * nothing.  Returns the number of records or -errno (then cb may already
 * have been called for some records).
 */
typedef void (*schedstat_bpf_cb)(const struct schedstat_bpf_rec *rec, void *userdata);
int schedstat_bpf_read(struct schedstat_bpf *s, schedstat_bpf_cb cb, void *userdata);
