/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hint_proto.h"
#include "util.h"
#include "vm.h"

/*
 * Guest hint channel, host side I/O (docs/protocol.md; the protocol logic is
 * hint_proto.h's struct hint_vm, this file only moves bytes).
 *
 * One client connection per VM to the host end of the VM's virtio-serial port
 * (vm_info.hint_socket: libvirt's per-domain channel socket, or a configured
 * QEMU chardev socket); QEMU is the listening side.  The VM is identified by
 * the pid the daemon's inventory gave together with that socket, never by
 * anything the guest writes, and the vCPU count that bounds every index is the
 * inventory's n_vcpus.  Two checks keep one VM's channel from being read as
 * another's:
 *  - a channel that is not a libvirt domain's (vm_info.sources without
 *    VM_SOURCE_LIBVIRT: a [QEMU] HintSocket path) is used only if the process
 *    listening on it is the VM's QEMU: SO_PEERCRED pid == vm_info.pid after
 *    connect, else the connection is closed and counted (peer_mismatches) and
 *    retried like a failed connect.  libvirt creates and listens on its
 *    channel sockets itself and passes them to QEMU, so there SO_PEERCRED
 *    names libvirt and is not checked.
 *  - no two VMs' channels are connected to one path at once: a VM whose path
 *    another VM's channel is connected (or connecting) to does not connect
 *    (path_conflicts), and tries again after its backoff.
 *  Both count as connect_failures too, and are warned about at most once a
 *  minute per VM.
 *
 * Everything is non-blocking and bounded:
 *  - connect(2) is non-blocking; a failed connect, EOF, ECONNRESET or EPIPE
 *    closes the socket and the next connect is tried by a later
 *    hint_server_update*() after a backoff (1 s doubling to 30 s, reset by a
 *    successful handshake).  The per-VM hint state survives reconnects and
 *    keeps decaying; the partial line of a closed connection is dropped.
 *  - reads are driven by the daemon's epoll set (struct io_watch), at most
 *    HINT_READ_CHUNK bytes per event, so one flooding guest cannot starve the
 *    loop (epoll is level-triggered: the rest is read at the next iteration,
 *    after the other ready fds).  A throttled channel (read budget used up)
 *    that hangs up or fails is closed at once: epoll reports the hang-up even
 *    without EPOLLIN, and only a read, which the budget forbids, would see it.
 *  - replies (WELCOME, ERR, LIMIT, GRANT) go to a per-VM output buffer of
 *    HINT_OUT_BYTES(n_vcpus) bytes written with non-blocking send(), room for
 *    a WELCOME with every vCPU's LIMIT and a GRANT for every vCPU at once; a
 *    reply line that does not fit is dropped and counted (a GRANT that did not
 *    fit is sent at the next round): a guest that does not read can neither
 *    block the daemon nor make it grow memory.
 *
 * Time: every entry point takes now; the epoll callback reads the clock
 * (hint_server_set_clock() replaces it in tests).
 */

#define HINT_READ_CHUNK 4096
/*
 * Output buffer of a VM: HINT_OUT_MAX bytes for the WELCOME and ERR lines,
 * plus HINT_OUT_PER_VCPU per vCPU for one LIMIT and one GRANT line
 * ("LIMIT 4095 1024 1024\n" is 21 bytes, "GRANT 4095 1024\n" 16): 162 KiB at
 * HINT_VCPUS_MAX vCPUs.  Sized by the host's vCPU count, never by the guest.
 */
#define HINT_OUT_MAX 2048
#define HINT_OUT_PER_VCPU 40
#define HINT_OUT_BYTES(n_vcpus) (HINT_OUT_MAX + (size_t) (n_vcpus) * HINT_OUT_PER_VCPU)
/*
 * Bytes per second read from one VM's channel (a token bucket holding at most
 * one second's worth).  2 MiB/s is about 160,000 hint lines/s, above any
 * sensible agent (powerhintd sends a few lines per vCPU per second) and
 * enough for a 100,000 hints/s flood to be read in full; past it the socket is
 * not read until the next period, so a guest cannot make the daemon spend
 * more than about 1% of a core (measured ~70 ns per line) on its bytes.
 */
#define HINT_READ_BYTES_PER_SEC (2u << 20)
/*
 * Host-wide read budget (all VMs together), bytes per second; 0 turns it off.
 * The per-VM budget bounds one guest; this bounds a host with many hostile
 * ones: 4 MiB/s is about 380,000 hint lines/s, ~2.6% of a core at the
 * measured ~70 ns per line, whatever the number of VMs.  So that a flood
 * cannot delay well-behaved agents (a few hundred bytes per second), each
 * channel may read HINT_READ_FREE_BYTES per second outside the host budget.
 * The default, HINT_HOST_READ_BYTES_PER_SEC_DEFAULT, is in hint_proto.h (the
 * configuration's [Hints] HostReadBytesPerSecond).
 */
#define HINT_READ_FREE_BYTES 4096u
/* GRANT lines to one VM: the changed ones at most this often. */
#define HINT_GRANT_INTERVAL_NS (500 * NSEC_PER_MSEC)
#define HINT_RECONNECT_MIN_NS (1 * NSEC_PER_SEC)
#define HINT_RECONNECT_MAX_NS (30 * NSEC_PER_SEC)
#define HINT_LOG_INTERVAL_NS (60 * NSEC_PER_SEC)

struct hint_server;

/* Called after a read that produced hints which took a token (may actuate now). */
typedef void (*hint_actuate_cb)(pid_t pid, int n_actuations, void *userdata);

/* Server-wide I/O counters (the protocol counters are per VM, struct hint_counters). */
struct hint_io_stats {
        uint64_t connects;          /* connections established */
        uint64_t connect_failures;  /* connect(2) failed (ENOENT, ECONNREFUSED, EAGAIN, ...), or refused below */
        uint64_t disconnects;       /* established connections closed (EOF, reset, error, VM gone) */
        uint64_t read_events;       /* reads that returned data */
        uint64_t read_chunk_max;    /* largest single read, <= HINT_READ_CHUNK */
        uint64_t reply_bytes;       /* bytes written to guests */
        uint64_t replies_dropped;   /* reply lines dropped: output buffer full */
        uint64_t write_errors;      /* send() errors other than EAGAIN */
        uint64_t read_throttles;    /* times reading stopped: HINT_READ_BYTES_PER_SEC used up */
        uint64_t host_throttles;    /* times reading stopped: the host-wide budget used up */
        uint64_t grants_sent;       /* GRANT lines queued */
        uint64_t limits_sent;       /* LIMIT lines queued outside a WELCOME (policy change) */
        uint64_t peer_mismatches;   /* connected, but not to the VM's QEMU (SO_PEERCRED pid): closed */
        uint64_t path_conflicts;    /* not connected: another VM's channel is connected to the path */
};

struct hint_vm_status {
        pid_t pid;
        char socket[108];
        uint32_t n_vcpus;           /* the host's count */
        bool connected;
        bool handshaked;
        bool stale;                 /* the handshake went stale (silence, HINT_STALE_NS) */
        uint32_t guest_vcpus;       /* from HELLO, clamped to n_vcpus */
        char agent[HINT_AGENT_MAX + 1]; /* guest bytes (validated charset); escape before showing */
        struct hint_policy policy;
        size_t out_len;             /* reply bytes waiting */
        size_t out_max;             /* output buffer size, HINT_OUT_BYTES(n_vcpus) */
        nsec_t next_connect_ns;     /* when disconnected */
        struct hint_counters counters;
        struct hint_io_stats io;
};

/*
 * defaults: the host policy for VMs without an override (NULL: hint_policy_init()).
 * cb may be NULL.  Returns 0 or -errno.
 */
int hint_server_new(int epoll_fd, const struct hint_policy *defaults, hint_actuate_cb cb, void *userdata,
                    struct hint_server **ret);
void hint_server_free(struct hint_server *hs); /* closes everything; NULL ok */
/* Tests: the clock read by the epoll callbacks (NULL: now_ns()). */
void hint_server_set_clock(struct hint_server *hs, nsec_t (*clock)(void *userdata), void *userdata);

/*
 * Inventory update.  Either the whole list at once, or begin / one call per VM
 * / end (for iterating the tracker without building an array).  VMs with an
 * empty hint_socket or n_vcpus == 0 are ignored; VMs not reported between
 * begin and end are closed and forgotten.  Due (re)connects are tried at the
 * end, after those are closed (a VM gone lets go of its socket path at once).
 */
int hint_server_update_vms(struct hint_server *hs, const struct vm_info *vms, size_t n, nsec_t now);
void hint_server_update_begin(struct hint_server *hs);
int hint_server_update_vm(struct hint_server *hs, const struct vm_info *vm, nsec_t now);
void hint_server_update_end(struct hint_server *hs, nsec_t now);

/*
 * Host-wide read budget in bytes per second (0: none; default
 * HINT_HOST_READ_BYTES_PER_SEC_DEFAULT).
 */
void hint_server_set_host_read_budget(struct hint_server *hs, uint32_t bytes_per_sec);

/* Host defaults changed (reload): applied to every VM without an override. */
int hint_server_set_defaults(struct hint_server *hs, const struct hint_policy *p, nsec_t now);
/* Per-VM override (domain metadata); NULL returns the VM to the defaults.  -ENOENT if unknown. */
int hint_server_set_vm_policy(struct hint_server *hs, pid_t pid, const struct hint_policy *p, nsec_t now);

/*
 * The planner's view: per-vCPU decayed hint state of the VM at now, for
 * vCPUs 0..min(n, the VM's n_vcpus)-1.  Returns the number filled, or -ENOENT.
 */
int hint_server_vm_state(const struct hint_server *hs, pid_t pid, nsec_t now, struct hint_effective *ret,
                         size_t n);
/* The protocol state itself (NULL if unknown), e.g. for hint_vm_effective(). */
const struct hint_vm *hint_server_hint_vm(const struct hint_server *hs, pid_t pid);

/*
 * What the host gives vCPU vcpu of VM pid now (0..1024; HINT_GRANT_NONE: not
 * known, nothing is sent).  Stored; hint_server_send_grants() sends the
 * changed ones to each handshaked guest, at most every HINT_GRANT_INTERVAL_NS,
 * and all of them again after each WELCOME (a new connection, or a restarted
 * agent on the same one: the host cannot tell, so every answered HELLO
 * counts; WELCOMEs are at most every HINT_WELCOME_INTERVAL_NS).
 * -ENOENT / -ERANGE.
 */
#define HINT_GRANT_NONE UINT16_MAX
int hint_server_set_grant(struct hint_server *hs, pid_t pid, uint32_t vcpu, uint32_t level);
void hint_server_send_grants(struct hint_server *hs, nsec_t now);

/* Host -> guest: queue LIMIT / GRANT (dropped and counted if the buffer is full). */
int hint_server_send_limit(struct hint_server *hs, pid_t pid, uint32_t vcpu, uint32_t min_level,
                           uint32_t max_level);
int hint_server_send_grant(struct hint_server *hs, pid_t pid, uint32_t vcpu, uint32_t level);

/* Metrics: VMs in pid order; totals summed over VMs (including forgotten ones for io). */
size_t hint_server_n_vms(const struct hint_server *hs);
int hint_server_vm_status_at(const struct hint_server *hs, size_t i, struct hint_vm_status *ret);
int hint_server_vm_status(const struct hint_server *hs, pid_t pid, struct hint_vm_status *ret);
void hint_server_totals(const struct hint_server *hs, struct hint_counters *counters, struct hint_io_stats *io);
