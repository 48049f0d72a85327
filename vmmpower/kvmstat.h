/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vm.h"

/*
 * KVM halt-polling statistics from debugfs, per VM.
 *
 * What the kernel offers (virt/kvm/kvm_main.c, checked against 6.x and on
 * this host's 6.18):
 *  - kvm_create_vm_debugfs() makes <debugfs>/kvm/<pid>-<vmfd>/ for each VM
 *    (the creating process's pid and the VM file descriptor number) and puts
 *    in it one file per VM stat and one file per vCPU stat.  A vCPU stat file
 *    there (halt_poll_success_ns, halt_poll_fail_ns, halt_wait_ns, ... from
 *    KVM_GENERIC_VCPU_STATS) reads the SUM over all vCPUs of the VM
 *    (kvm_get_stat_per_vcpu).
 *  - kvm_create_vcpu_debugfs() makes <pid>-<vmfd>/vcpu<N>/ holding only "pid"
 *    (the vCPU thread's tid; 0 until the vCPU first ran KVM_RUN) and the
 *    arch's files (x86: guest_mode, lapic_timer_advance_ns, tsc-offset,
 *    tsc-scaling-ratio*).  No per-vCPU halt-poll counters exist in debugfs.
 *  - Per-vCPU halt-poll counters exist only in the binary stats fd
 *    (KVM_GET_STATS_FD on the vCPU fd, which only QEMU holds); QEMU exposes
 *    them through QMP query-stats target=vcpu provider=kvm (qmp.h,
 *    qmp_query_halt_poll).  So: per-vCPU from QMP when there is a QMP socket,
 *    per-VM sums from here otherwise.
 *  - Under kernel lockdown (integrity/confidentiality) the stat files exist
 *    but every read fails with EPERM ("debugfs access is restricted"); this
 *    host is such a case.  That errno is returned as is.
 *
 * The debugfs root (normally /sys/kernel/debug) is a parameter so tests run
 * on fixture trees.  A missing <root>/kvm directory (debugfs not mounted, kvm
 * not loaded) means "no KVM VMs": 0, not an error.  A VM directory without
 * halt_poll_*_ns files (kernel before 5.x) reports has_halt_poll = false.
 */

struct kvmstat_vm {
        pid_t pid;                    /* from the directory name */
        int vm_fd;                    /* from the directory name */
        bool has_halt_poll;
        uint64_t halt_poll_success_ns; /* summed over the VM's vCPUs by the kernel */
        uint64_t halt_poll_fail_ns;
};

/* "<pid>-<fd>" as the kernel prints it (decimal, no leading zero): 0, or -EINVAL for any other name. */
int kvmstat_parse_dirname(const char *name, pid_t *pid, int *vm_fd);

/*
 * Read the halt-poll sums of the VM(s) created by process pid.  Returns the
 * number of VM directories of that pid (0: none; a QEMU has one), with *ret
 * filled from the first one (lowest vm fd), or -errno (EPERM under lockdown,
 * EBADMSG for a file that is not a number).
 */
int kvmstat_read_vm(const char *debugfs_root, pid_t pid, struct kvmstat_vm *ret);

/* All VM directories, sorted by (pid, vm_fd).  Caller frees *ret. */
int kvmstat_list(const char *debugfs_root, struct kvmstat_vm **ret, size_t *n);

/*
 * vCPU index -> tid from <pid>-<fd>/vcpu<N>/pid (tid 0 = never ran; such
 * vCPUs are left out).  *ret sorted by index, caller frees.
 */
int kvmstat_vcpu_tids(const char *debugfs_root, pid_t pid, int vm_fd, struct vcpu_info **ret, unsigned *n);
