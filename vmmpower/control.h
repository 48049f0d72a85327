/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

/*
 * Control socket (docs/control-protocol.md).  One request line per
 * connection, at most CONTROL_LINE_MAX bytes: words separated by single
 * spaces, e.g. "vms --json\n".  The reply is "OK\n" followed by the body, or
 * "ERR <errno-name> <message>\n"; the server then closes the connection.
 * Peer credentials (SO_PEERCRED, SO_PEERGROUPS) decide: root may run every
 * command; members of the configured ControlGroup may run read-only ones.
 */

#define CONTROL_LINE_MAX 1024
#define CONTROL_MAX_ARGS 8
#define CONTROL_MAX_CLIENTS 64
#define CONTROL_ROOT_CLIENTS 16        /* of CONTROL_MAX_CLIENTS, only root may take these */
#define CONTROL_MAX_CLIENTS_PER_UID 8  /* per non-root uid */
#define CONTROL_CLIENT_TIMEOUT_NS (5 * NSEC_PER_SEC)
#define CONTROL_LOG_BURST 5            /* refusals logged per CONTROL_LOG_INTERVAL_NS, the rest counted */
#define CONTROL_LOG_INTERVAL_NS (10 * NSEC_PER_SEC)

struct daemon;
struct control_server;

struct control_request {
        unsigned argc;
        char *argv[CONTROL_MAX_ARGS]; /* point into the line buffer */
        bool json;                    /* "--json" was given (removed from argv) */
};

/* Split a request line in place.  -EINVAL for empty, too many words, bad bytes. */
int control_parse_request(char *line, struct control_request *req);
/* Is cmd read-only (allowed to ControlGroup members)?  -ENOENT for unknown commands. */
int control_command_readonly(const char *cmd);
/* Credential decision: uid 0 always; else readonly && (gid or one of groups == group_gid). */
bool control_peer_allowed(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups, gid_t group_gid,
                          bool have_group, bool readonly);

/*
 * May a new connection of uid take a client slot, with n_clients connected
 * now, n_same_uid of them from uid?  Root: while any slot is free.  Others:
 * not the CONTROL_ROOT_CLIENTS reserved for root, and at most
 * CONTROL_MAX_CLIENTS_PER_UID each; so no group member, however many
 * connections it opens, keeps root (reload, the libvirt hook's notify) out.
 */
bool control_slot_available(uid_t uid, unsigned n_clients, unsigned n_same_uid);

/* Log rate limit for refusals (denied requests, connections without a slot). */
struct control_ratelimit {
        nsec_t begin_ns;     /* start of the current interval */
        unsigned n;          /* lines logged in it */
        uint64_t suppressed; /* lines not logged in it */
};
/*
 * May one more line be logged at now?  At most CONTROL_LOG_BURST per
 * CONTROL_LOG_INTERVAL_NS.  When a new interval begins, *ret_suppressed is
 * the number of lines suppressed in the previous one (to report), else 0.
 */
bool control_ratelimit_test(struct control_ratelimit *rl, nsec_t now, uint64_t *ret_suppressed);

int control_server_new(struct daemon *d, const char *path, const char *group, int epoll_fd,
                       struct control_server **ret);
void control_server_free(struct control_server *cs);
/*
 * Does a server listen at path (a running daemon)?  1 with *ret_pid its pid
 * (SO_PEERCRED; 0 if not known), 0 if nothing does (no file, stale file),
 * or -errno.  A new daemon never replaces a live socket.
 */
int control_socket_live(const char *path, pid_t *ret_pid);
/* Let free() leave the socket path alone (a new server took it over). */
void control_server_forget_path(struct control_server *cs);
/* Drop clients idle longer than CONTROL_CLIENT_TIMEOUT_NS.  Returns how many were freed. */
unsigned control_server_expire(struct control_server *cs, nsec_t now);

/* Execute one parsed request against the daemon (used by the server and tests). */
int control_execute(struct daemon *d, const struct control_request *req, struct strbuf *body);
