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

struct control_server;

/*
 * What the server asks of its owner (the daemon, or a test), with the
 * owner's userdata as first argument.  Every member is required: each
 * command of control_command_readonly() but "version" is one call.  The
 * server holds no state of the daemon's; requests are answered on the loop's
 * thread, between periods.
 */
struct control_ops {
        /* The read-only commands: append the reply body to out (json: "--json" given). */
        void (*status)(void *userdata, bool json, struct strbuf *out);
        void (*vms)(void *userdata, bool json, struct strbuf *out);
        void (*cpus)(void *userdata, bool json, struct strbuf *out);
        void (*plan)(void *userdata, bool json, struct strbuf *out);
        void (*top)(void *userdata, struct strbuf *out);     /* text only */
        void (*metrics)(void *userdata, struct strbuf *out); /* text only */
        /* "notify OPERATION DOMAIN" from the libvirt hook (logged by the server): rescan soon. */
        void (*notify)(void *userdata);
        /*
         * "reload": re-read the configuration.  0, or -errno with the reason
         * for the reply in msg (one line, NUL-terminated, at most size bytes).
         */
        int (*reload)(void *userdata, char *msg, size_t size);
};

/* Longest error message of a reply (after "ERR <errno-name> "). */
#define CONTROL_ERROR_MAX 640

/* What the server counts, in a struct of its owner's (kept across servers a reload replaces). */
struct control_counters {
        uint64_t requests;  /* request lines handled */
        uint64_t denied;    /* requests and connections refused by peer credentials */
        uint64_t errors;    /* requests answered ERR (malformed, unknown, failed) */
        uint64_t rejected;  /* connections refused for lack of a client slot */
};

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

/*
 * Listen at path (group: ControlGroup, NULL or "" for root only) in epoll_fd.
 * ops and counters must outlive the server; ops is not copied.
 */
int control_server_new(const char *path, const char *group, int epoll_fd, const struct control_ops *ops,
                       void *userdata, struct control_counters *counters, struct control_server **ret);
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

/*
 * Execute one parsed request through ops: 0 with the reply body in body, or
 * -errno (-ENOENT unknown command, -EINVAL wrong arguments, -EOPNOTSUPP
 * "--json" where not supported, or reload's error, whose message is then in
 * msg; msg is left alone otherwise).
 */
int control_execute(const struct control_ops *ops, void *userdata, const struct control_request *req,
                    struct strbuf *body, char *msg, size_t msg_size);
