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
 * query-stats target=vcpu provider=kvm, fields halt_poll_success_ns +
 * halt_poll_fail_ns summed per vCPU.  Fills halt_poll_ns[vcpu_index] for
 * indices < n_max; returns number of vCPUs with stats, 0 when QEMU has none
 * (TCG), or -errno.  QEMU reports vCPUs by QOM path; the index is taken from
 * the path's matching query-cpus-fast entry.
 */
int qmp_query_halt_poll(const char *socket_path, nsec_t timeout_ns, uint64_t *halt_poll_ns, unsigned n_max);

/* Reply parsers, exposed for tests and fuzzing (input: one QMP reply object as text). */
int qmp_parse_cpus_fast(const char *json, struct vm_info *vm);
int qmp_parse_query_name(const char *json, char *name, size_t size);
int qmp_parse_halt_poll(const char *json, const struct vm_info *vm_with_qom_paths,
                        uint64_t *halt_poll_ns, unsigned n_max);
