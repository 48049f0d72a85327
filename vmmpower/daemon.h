/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>

#include "log.h"
#include "util.h"

/*
 * The daemon: one thread runs an epoll loop over a signalfd, a periodic
 * timerfd (the control period), the control socket and the libvirt
 * source's eventfd.  Everything that may block for long lives on a thread
 * of its own: libvirt calls on the libvirt source's, QMP queries on the QMP
 * worker's (qmp_worker.h), knob writes on the applier's; the loop itself
 * only does pread()s of kept-open fds and short procfs scans.
 */

struct vp_config;
struct config_error;
struct restore_stats;
struct daemon_view;

struct daemon_options {
        const char *config_path;   /* NULL = default */
        const char *sysfs_root;    /* NULL = from config */
        const char *procfs_root;   /* NULL = from config */
        const char *control_socket;/* NULL = from config */
        bool dry_run;
        bool once;                 /* one period after discovery, print, exit */
        bool log_level_set;
        enum log_level log_level;
};

/* Private to daemon.c; renderers draw from a struct daemon_view (daemon_view.h). */
struct daemon;

/* Set the daemon up in *ret (configuration, instance lock, sockets); the daemon is freed on error. */
int daemon_new(const struct daemon_options *opts, struct daemon **ret);
int daemon_run(struct daemon *d);
/* Stop the threads, put the host back, release the instance lock; NULL is fine.  Returns NULL. */
struct daemon *daemon_free(struct daemon *d);
/* The exit status daemon_run() leaves for the process when it returns 0. */
int daemon_exit_status(const struct daemon *d);
/* After daemonizing: write this process's pid into the instance lock (a failure is logged). */
int daemon_write_pid(struct daemon *d);
/* A snapshot of the daemon for the renderers (daemon_view.h), taken at now (monotonic). */
void daemon_view(struct daemon *d, nsec_t now, struct daemon_view *ret);
/* Re-read the configuration through the start-up path; keeps the old one on error. */
int daemon_reload(struct daemon *d);
/* Ask for a discovery pass at the next period (hook notification). */
void daemon_request_scan(struct daemon *d);
/* One control period: discovery if due, sampling, metrics. */
void daemon_period(struct daemon *d, nsec_t now);
/*
 * Restore every knob recorded in the journal under cfg->state_dir (libvirt
 * vCPU pins through cfg's libvirt URI when it answers).  Used by
 * `vmmpowerd --restore` and at start-up after a crash.  Returns 0 when the
 * journal is empty afterwards, the number of entries kept, or -errno.
 */
int daemon_restore_journal(const struct vp_config *cfg);
/* The same, with what was done to each entry in *ret (zeroed when there is no journal). */
int daemon_restore_journal_stats(const struct vp_config *cfg, struct restore_stats *ret);
/* Load config + conf.d into *c, applying command-line overrides. */
int daemon_load_config(const struct daemon_options *opts, struct vp_config *c, struct config_error *err);
