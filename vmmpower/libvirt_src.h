/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util.h"
#include "vm.h"

/*
 * libvirt discovery.  A thread of its own runs libvirt's default event loop
 * (libvirt calls may block; they never run on the daemon's decision path).
 * It connects to the configured URI, registers lifecycle events and a close
 * callback, does a full reconcile on every connect and on every lifecycle
 * event, and reconnects with exponential backoff (1 s doubling to 30 s) when
 * libvirtd goes away.  Each reconcile publishes a full snapshot of the
 * running domains (name, UUID, id, QEMU pid, vCPU thread ids) and writes to
 * an eventfd the main loop polls.
 *
 * vCPU thread ids: from libvirt's domain status XML
 * (<run_dir>/<name>.xml, <vcpus><vcpu id='N' pid='TID'/>), falling back to
 * the QEMU process's vCPU thread names (procscan_vcpus_of).  The pid comes
 * from the status XML's <domstatus pid=...> (or <run_dir>/<name>.pid).
 *
 * Per-VM policy: virDomainGetMetadata(VIR_DOMAIN_METADATA_ELEMENT,
 * VM_POLICY_XMLNS, VIR_DOMAIN_AFFECT_LIVE) at every reconcile, which a
 * metadata-change event in that namespace also triggers; parsed by
 * vm_policy_parse_metadata() into vm_info.policy.  Rejected metadata leaves the
 * host defaults in place, is logged once per distinct content and counted.
 */

struct libvirt_src_stats {
        bool connected;
        uint64_t connects;      /* successful opens */
        uint64_t disconnects;   /* close callbacks / keepalive failures */
        uint64_t connect_failures;
        uint64_t events;        /* lifecycle events received */
        uint64_t reconciles;
        uint64_t errors;        /* failed per-domain look-ups (skipped) */
        /* Per-VM policy metadata (vm_policy.h) */
        uint64_t metadata_events;   /* metadata-change events for our namespace */
        uint64_t policies;          /* domains with a valid policy at the last reconcile */
        uint64_t policy_invalid;    /* rejected metadata, once per domain and distinct content */
        uint64_t policy_errors;     /* metadata reads that failed (last known policy kept) */
};

struct libvirt_src;

/* Start the thread.  procfs_root is used for the thread-name fallback. */
int libvirt_src_start(const char *uri, const char *run_dir, const char *procfs_root,
                      struct libvirt_src **ret);
/* Stop the thread, close the connection, free. NULL is fine. */
void libvirt_src_stop(struct libvirt_src *ls);
/* fd (eventfd) that becomes readable when a new snapshot is available. */
int libvirt_src_fd(const struct libvirt_src *ls);
/*
 * Drain the eventfd and take the latest snapshot.  Returns 1 and sets
 * *vms and *n (caller frees with vm_info_free_array) if a snapshot was published
 * since the last call, 0 if not, -errno on failure.  Nothing is published
 * while disconnected: the source keeps its last snapshot (VMs keep running
 * when libvirtd restarts) and the reconcile of the next connect replaces it.
 */
int libvirt_src_take(struct libvirt_src *ls, struct vm_info **vms, size_t *n);
/* Ask for a full reconcile soon (hook notification, SIGHUP). */
void libvirt_src_request_reconcile(struct libvirt_src *ls);
void libvirt_src_get_stats(struct libvirt_src *ls, struct libvirt_src_stats *ret);

/* Parse libvirt's domain status XML (exposed for tests). Fills pid and vcpus. */
int libvirt_parse_status_xml(const char *xml, size_t len, struct vm_info *vm);

/* The virtio-serial port name of the guest hint channel (docs/protocol.md). */
#define LIBVIRT_HINT_CHANNEL_NAME "org.vmmpower.hint.0"
/*
 * From a live domain XML (virDomainGetXMLDesc) or a status XML: the host socket
 * path of the hint channel (<channel type='unix'> with <target type='virtio'
 * name='org.vmmpower.hint.0'/>, <source mode='bind' path=.../>).  Returns 0 and
 * writes path, -ENOENT if there is no such channel, -ENODATA if it has no source
 * path, -ENAMETOOLONG if it does not fit size, -EBADMSG on bad XML or a path
 * that is not absolute or has control characters.
 */
int libvirt_parse_hint_channel(const char *xml, size_t len, char *path, size_t size);
