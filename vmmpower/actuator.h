/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpuset.h"
#include "journal.h"
#include "util.h"

/*
 * Placement actuator primitives.  Two ways to pin a vCPU:
 *
 *  - plain QEMU: sched_setaffinity() on the vCPU thread.  The thread is
 *    identified by (pid, tid, starttime), starttime being field 22 of
 *    /proc/<pid>/task/<tid>/stat, so that a tid reused by a new thread is
 *    never mistaken for the one we pinned (nor restored);
 *  - libvirt-managed VMs: virDomainPinVcpuFlags(..., VIR_DOMAIN_AFFECT_LIVE),
 *    visible in `virsh vcpupin`, never touching the persistent config.
 *    libvirt's cgroups are never written directly.
 *
 * Each primitive journals the original pinning before changing it, reads
 * the result back and reports a pin the kernel or libvirt narrowed (cpuset
 * cgroup, offline CPUs) as -ERANGE after recording the actual value.
 * Failures carry the real errno; a vanished thread/domain is -ESRCH/-ENOENT.
 */

/* procfs root for starttime lookups (default "/proc"; NULL resets).  Process-wide. */
int actuator_set_proc_root(const char *root);

/* Field 22 of <proc>/<pid>/task/<tid>/stat (clock ticks since boot). */
int actuator_thread_starttime(pid_t pid, pid_t tid, uint64_t *ret);

/* Journal key for a thread: "pid:tid:starttime". */
int actuator_thread_key(pid_t pid, pid_t tid, uint64_t starttime, char *buf, size_t size);

/*
 * Pin thread tid of process pid to cpus.  starttime: the value seen when
 * the thread was discovered (0: read it now).  -ESRCH if the thread is gone
 * or its starttime differs (tid reused); -ERANGE if the kernel applied a
 * different mask (recorded in the journal).  No write when already pinned so.
 */
int actuator_pin_thread(struct journal *j, pid_t pid, pid_t tid, uint64_t starttime, const cpuset_t *cpus);

/*
 * Pin vCPU `vcpu` of the running libvirt domain `uuid` (string form) live.
 * conn is a virConnectPtr.  -ENOENT: no such running domain or vCPU.
 * vcpu == ACTUATOR_EMULATOR pins the domain's emulator threads instead
 * (virDomainPinEmulator, live; journal key "uuid:emulator").
 */
#define ACTUATOR_EMULATOR UINT32_MAX
int actuator_pin_vcpu(struct journal *j, void *conn, const char *uuid, unsigned vcpu, const cpuset_t *cpus);

/* libvirt cpumap <-> cpuset (VIR_CPU_MAPLEN bytes, bit i = CPU i). */
int actuator_cpumap_to_cpuset(const unsigned char *map, size_t maplen, cpuset_t *ret);
int actuator_cpuset_to_cpumap(const cpuset_t *s, unsigned n_host_cpus, unsigned char *map, size_t maplen);

/* Journal I/O for restore (used by journal_restore_all()). */
void actuator_affinity_knob_io(struct journal_knob_io *ret);
void actuator_vcpupin_knob_io(void *conn, struct journal_knob_io *ret); /* conn NULL: no-op io */
