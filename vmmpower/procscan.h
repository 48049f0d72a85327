/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "vm.h"

/*
 * Plain QEMU discovery through procfs.  A process is a QEMU VM when at least
 * one of its threads has a comm of exactly "CPU <n>/KVM" or "CPU <n>/TCG"
 * (QEMU names vCPU threads so under -name debug-threads=on; libvirt always
 * passes it).  No guessing from the command line: the only thing read from
 * cmdline is the exact argument after "-name" for a display name
 * ("guest=NAME,..." or "NAME,...").  Processes and threads that vanish
 * mid-scan are skipped and counted, not errors.
 */

struct procscan_stats {
        unsigned long long scans;
        unsigned long long vanished;   /* pid or tid gone between readdir and read */
        unsigned long long errors;     /* other read errors (skipped) */
        unsigned long long other_user; /* QEMU-like processes run by a user not allowed (skipped) */
        unsigned last_other_user;      /* of them, in the last scan */
        pid_t last_other_pid;          /* one of those: its pid and user (for the log) */
        uid_t last_other_uid;
};

/* Whose processes the scan takes for VMs ([QEMU] ProcScanUsers): any user, or these uids. */
struct procscan_users {
        bool any;
        size_t n;
        const uid_t *uids;
};

/*
 * Parse a thread comm.  Returns 0 and sets *index and *accel for a vCPU thread
 * name, -ERANGE (and sets both) for a vCPU name whose index is >= VM_MAX_VCPUS
 * (not tracked: counted in vm_info.n_vcpus_untracked), -EINVAL otherwise.
 */
int procscan_parse_vcpu_comm(const char *comm, int *index, enum vm_accel *accel);

/*
 * Resolve a ProcScanUsers value (names or decimal uids separated by single
 * spaces; "" = any user) into users (uids[] of at most max entries).  A name
 * with no user on this host is left out (the default names libvirt-qemu,
 * which a host without libvirt lacks) and reported through unknown/unknown_size
 * (the first such name, "" if none).  Returns 0, or -EINVAL for a malformed list.
 */
int procscan_users_resolve(const char *list, uid_t *uids, size_t max, struct procscan_users *users, char *unknown,
                           size_t unknown_size);

/*
 * Scan <procfs_root> for every QEMU process run by one of users (NULL: any
 * user; the owner of <pid>/task, the process's effective uid).  *ret gets an
 * array of n VMs (sources = VM_SOURCE_PROC, libvirt_id = -1), vCPUs sorted by
 * index, uuid from "-uuid" when given.  A QEMU-like process of another user is
 * skipped and counted in stats->other_user.
 */
int procscan_scan(const char *procfs_root, const struct procscan_users *users, struct vm_info **ret, size_t *n,
                  struct procscan_stats *stats);

/*
 * The CPU a thread last ran on: field 39 ("processor") of a /proc/<pid>/task/<tid>/stat line,
 * counted after the last ')' so that a comm with spaces or parentheses cannot shift it.
 * Returns the CPU (>= 0) or -EINVAL.
 */
int procscan_parse_stat_cpu(const char *line);
/* The same read from <procfs_root>/<pid>/task/<tid>/stat: the CPU, or -errno (-ESRCH: gone). */
int procscan_thread_cpu(const char *procfs_root, pid_t pid, pid_t tid);

/* Fill vm->vcpus (and accel) from the thread names of vm->pid.  -ESRCH if the process is gone. */
int procscan_vcpus_of(const char *procfs_root, struct vm_info *vm, struct procscan_stats *stats);
