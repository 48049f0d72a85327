/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "util.h"
#include "vm.h"

/*
 * Minimal QMP client for plain QEMU configured with a QMP socket
 * (-qmp unix:PATH,server=on,wait=off).  QMP serves one client at a time per
 * socket, so every call connects, negotiates (qmp_capabilities), asks, and
 * disconnects; it never holds the monitor.  Each call is bounded by a
 * timeout.  The QEMU pid comes from SO_PEERCRED, never from the reply.
 */

/* query-name + query-cpus-fast (+ SO_PEERCRED pid).  Fills vm (sources = VM_SOURCE_QMP). */
int qmp_query_vm(const char *socket_path, nsec_t timeout_ns, struct vm_info *ret);

/*
 * query-stats target=vcpu provider=kvm names=[halt_poll_success_ns,
 * halt_poll_fail_ns], summed per vCPU.  Fills halt_poll_ns[vcpu_index] for
 * indices < n_max (entries of vCPUs without stats are left untouched);
 * returns the number of vCPUs with stats, 0 when QEMU has none (TCG: QEMU
 * answers an empty list), or -errno.  QEMU reports vCPUs by QOM path; the
 * index is taken from the path's matching query-cpus-fast entry, so this
 * asks both in one connection.
 */
int qmp_query_halt_poll(const char *socket_path, nsec_t timeout_ns, uint64_t *halt_poll_ns, unsigned n_max);

/*
 * Reply parsers, exposed for tests and fuzzing.  Input: one QMP reply object
 * as text ({"return": ...} or {"error": ...}), NUL-terminated, at most
 * QMP_REPLY_MAX bytes.  Returns 0 (or a count) on success, -EBADMSG for
 * anything malformed (not JSON, trailing garbage, wrong types, negative or
 * out-of-range numbers, duplicate cpu-index/thread-id/qom-path, more than
 * VM_MAX_VCPUS entries), -EREMOTEIO for an {"error": ...} reply,
 * -EMSGSIZE when longer than QMP_REPLY_MAX.  Outputs written only on success.
 */
#define QMP_REPLY_MAX (1024 * 1024)

/* query-cpus-fast: fills vm->vcpus/n_vcpus (sorted by index); nothing else. */
int qmp_parse_cpus_fast(const char *json, struct vm_info *vm);
/* query-name: "" when QEMU runs without -name. */
int qmp_parse_query_name(const char *json, char *name, size_t size);
/* query-kvm: VM_ACCEL_KVM when "enabled" is true, else VM_ACCEL_TCG. */
int qmp_parse_query_kvm(const char *json, enum vm_accel *ret);
/*
 * query-stats (vcpu, kvm) matched to query-cpus-fast by qom-path; same
 * contract as qmp_query_halt_poll.
 */
int qmp_parse_halt_poll(const char *stats_json, const char *cpus_fast_json,
                        uint64_t *halt_poll_ns, unsigned n_max);
