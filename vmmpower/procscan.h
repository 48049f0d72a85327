/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

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
        unsigned long long vanished; /* pid or tid gone between readdir and read */
        unsigned long long errors;   /* other read errors (skipped) */
};

/*
 * Parse a thread comm.  Returns 0 and sets *index and *accel for a vCPU thread
 * name, -ERANGE (and sets both) for a vCPU name whose index is >= VM_MAX_VCPUS
 * (not tracked: counted in vm_info.n_vcpus_untracked), -EINVAL otherwise.
 */
int procscan_parse_vcpu_comm(const char *comm, int *index, enum vm_accel *accel);

/*
 * Scan <procfs_root> for every QEMU process.  *ret gets an array of n VMs
 * (sources = VM_SOURCE_PROC, libvirt_id = -1), vCPUs sorted by index.
 */
int procscan_scan(const char *procfs_root, struct vm_info **ret, size_t *n, struct procscan_stats *stats);

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
