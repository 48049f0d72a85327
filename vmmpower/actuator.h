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
 * the result back and journals it, and reports a pin the kernel or libvirt
 * narrowed (cpuset cgroup, offline CPUs) as -ERANGE after recording the
 * actual value; a read-back the journal cannot record is undone (the pinning
 * read first is applied again) and the journal's -errno returned.
 * Failures carry the real errno; a vanished thread/domain is -ESRCH/-ENOENT,
 * and the journal entry of the thread or domain run found gone is forgotten.
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
 * or its starttime differs (tid reused: the entry of that starttime is
 * forgotten); -ERANGE if the kernel applied a different mask (recorded in the
 * journal).  No write when already pinned so.
 */
int actuator_pin_thread(struct journal *j, pid_t pid, pid_t tid, uint64_t starttime, const cpuset_t *cpus);

/*
 * Put a thread we pinned back to its journaled original and forget its entry
 * (starttime as above).  1 if put back, 0 if the journal has no pin of ours
 * for it; -ERANGE if the original was narrowed (the entry is kept); else as
 * actuator_pin_thread().
 */
int actuator_release_thread(struct journal *j, pid_t pid, pid_t tid, uint64_t starttime);

/*
 * Pin vCPU `vcpu` of the running libvirt domain `uuid` (string form) live.
 * conn is a virConnectPtr.  -ENOENT: no such running domain or vCPU.
 * vcpu == ACTUATOR_EMULATOR pins the domain's emulator threads instead
 * (virDomainPinEmulator, live).  The journal key carries the domain id of
 * the run (actuator_vcpu_key()): a domain shut down, its definition changed
 * and started again gets a new id, so the original of the new run is its own
 * and never the previous run's.  dom_id (may be NULL): in, the run pinned
 * before (0: whichever is running; another id: -ENOENT, and the entry of that
 * run is forgotten); out, the run pinned.
 */
#define ACTUATOR_EMULATOR UINT32_MAX
int actuator_pin_vcpu(struct journal *j, void *conn, const char *uuid, unsigned vcpu, int *dom_id,
                      const cpuset_t *cpus);

/*
 * The kernel's affinity of thread tid of process pid, as sched_getaffinity()
 * reads it (both kinds of pin end there).  starttime != 0: -ESRCH unless the
 * thread is still the one of that starttime.  For the applier's check of the
 * pins it made (apply.c): the kernel widens the mask of a thread whose CPUs
 * all went offline, and other tools may change it.
 */
int actuator_thread_affinity(pid_t pid, pid_t tid, uint64_t starttime, cpuset_t *ret);
/* sched_getaffinity() of tid alone, not checking whose thread it is (one syscall): -ESRCH if none. */
int actuator_tid_affinity(pid_t tid, cpuset_t *ret);

/*
 * A libvirt vCPU pin that libvirt still records as cpus but whose thread the
 * kernel let run wider (CPU hotplug, a cpuset change): set it again, through
 * libvirt (its cgroup too) and then on the thread itself if libvirt left it
 * as it was.  Nothing is journaled: the pin libvirt records does not change,
 * so the journal's entry for it stays true.  -ERANGE if the thread still
 * runs wider afterwards.
 */
int actuator_repin_vcpu(void *conn, const char *uuid, unsigned vcpu, int dom_id, pid_t pid, pid_t tid,
                        const cpuset_t *cpus);

/* libvirt's record of the live pin of vCPU vcpu of run dom_id (0: the running one): 0, -ENOENT, -errno. */
int actuator_vcpu_pin_info(void *conn, const char *uuid, unsigned vcpu, int dom_id, cpuset_t *ret);

/* As actuator_release_thread(), for a libvirt pin of run dom_id (0: the running one). */
int actuator_release_vcpu(struct journal *j, void *conn, const char *uuid, unsigned vcpu, int dom_id);

/* Journal key for a libvirt pin: "uuid:domid:vcpu", or "uuid:domid:emulator". */
int actuator_vcpu_key(const char *uuid, int dom_id, unsigned vcpu, char *buf, size_t size);

/* libvirt cpumap <-> cpuset (VIR_CPU_MAPLEN bytes, bit i = CPU i). */
int actuator_cpumap_to_cpuset(const unsigned char *map, size_t maplen, cpuset_t *ret);
int actuator_cpuset_to_cpumap(const cpuset_t *s, unsigned n_host_cpus, unsigned char *map, size_t maplen);

/* Journal I/O for restore (used by journal_restore_all()). */
void actuator_affinity_knob_io(struct journal_knob_io *ret);
void actuator_vcpupin_knob_io(void *conn, struct journal_knob_io *ret); /* conn NULL: no-op io */
