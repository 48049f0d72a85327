/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "coexist.h"
#include "config.h"
#include "control.h"
#include "energy_model.h"
#include "event.h"
#include "guest_hint.h"
#include "journal.h"
#include "placement.h"
#include "plan_input.h"
#include "libvirt_src.h"
#include "pcpu_stat.h"
#include "procscan.h"
#include "topology.h"
#include "util.h"
#include "vcpu_track.h"

/*
 * The daemon: one thread runs an epoll loop over a signalfd, a periodic
 * timerfd (the control period), the control socket and the libvirt
 * source's eventfd.  Everything that may block for long lives on a thread
 * of its own: libvirt calls on the libvirt source's, QMP queries on the QMP
 * worker's (qmp_worker.h), knob writes on the applier's; the loop itself
 * only does pread()s of kept-open fds and short procfs scans.
 */

struct control_server;
struct qmp_worker;
struct applier;
struct apply_request;

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

struct daemon_counters {
        uint64_t periods;
        uint64_t overruns;            /* timerfd expirations > 1: periods missed */
        uint64_t proc_scans;
        uint64_t qmp_queries, qmp_errors;
        uint64_t qmp_kept;            /* failed discovery queries whose VM stayed on its last answer */
        uint64_t qmp_gone;            /* last answers dropped because their QEMU process exited */
        uint64_t reloads, reload_errors;
        uint64_t notifies;            /* hook notifications received */
        struct control_counters control; /* the control socket's (control.h) */
        uint64_t metrics_write_errors;
        uint64_t plans, plan_errors;
        uint64_t numa_ignored;        /* VMs of the last plan whose <numatune> nodes have no online CPU
                                       * here (or do not parse): packed anywhere, warned */
        uint64_t apply_start_errors;  /* the applier could not start (plans stayed advisory) */
        uint64_t hint_wakeups;        /* reads whose hints took a token (may actuate) */
        uint64_t hint_replans;        /* plans redone at once because of such hints */
        uint64_t qemu_hint_refused;   /* [QEMU] HintSocket paths refused (not a socket, owner, name), per period */
        uint64_t restore_runs, restore_errors; /* journal restores run by this daemon, failed as a whole */
        struct restore_stats restored; /* their entries by result, summed (metrics) */
        nsec_t last_plan_cpu_ns;      /* thread CPU time of the last plan_compute() */
        nsec_t last_period_cpu_ns;    /* thread CPU time of the last control period */
        nsec_t last_period_wall_ns;
};

struct daemon {
        struct daemon_options opts;
        struct vp_config cfg;
        char config_path[CONFIG_PATH_MAX];
        struct config_error reload_error; /* of the last failed reload, for its control reply; file "" if none */
        struct topology *topo;
        struct tracker *tracker;
        struct pcpu_stat *pcpu;
        struct libvirt_src *libvirt;
        struct hint_server *hints;/* guest hint channels (org.vmmpower.hint.0) */
        struct em_host *em;       /* energy model bound to the topology; NULL: planner off */
        char model_source[CONFIG_PATH_MAX]; /* model file, or "derived from sysfs" */
        struct plan *plan;        /* the current (advisory) plan, NULL before the first */
        struct plan_input plan_in;      /* the inputs of the current plan (plan_in.v[i] is its vCPU i) */
        struct plan_input plan_scratch; /* inputs being built for the next plan */
        struct applier *applier;  /* acts on the plan; NULL: advisory (Apply=no, --dry-run, no planner) */
        struct apply_request *apply_scratch; /* pins being built with the plan inputs */
        struct plan_actions *actions; /* plan_to_actions() output and scratch, kept across periods */
        bool running;             /* daemon_run() started (threads may be created) */
        int instance_fd;          /* instance.h: the lock on instance_dir, held for the daemon's life */
        char instance_dir[CONFIG_PATH_MAX]; /* the state directory locked (cfg.state_dir once running) */
        struct control_server *control;
        struct control_server *retired_control; /* replaced by a reload; freed after the epoll batch */
        bool batch_invalid;       /* a handler freed watches: stop dispatching this batch */
        bool metrics_failing;     /* in a streak of failed textfile writes */
        struct procscan_stats procscan_stats;
        struct vm_info qmp_cache[CONFIG_MAX_QMP]; /* last good answer per configured QMP socket */
        bool qmp_cache_valid[CONFIG_MAX_QMP];
        uint64_t qmp_cache_starttime[CONFIG_MAX_QMP]; /* of the answering process (0: unknown) */
        unsigned qmp_failing[CONFIG_MAX_QMP]; /* failed queries in a row per socket */
        struct qmp_worker *qmp_worker; /* QMP queries off the loop (NULL: run on it) */
        bool qmp_scan_due;        /* the next QMP batch asks every configured socket */
        struct daemon_counters counters;
        struct coexist_report coexist; /* other tuners and knobs set by others (coexist.h) */
        int epoll_fd, signal_fd, timer_fd, watchdog_fd;
        struct io_watch signal_watch, timer_watch, libvirt_watch, watchdog_watch; /* found with container_of */
        nsec_t start_ns;          /* monotonic */
        nsec_t start_realtime_ns;
        nsec_t last_period_ns;
        nsec_t next_scan_ns;
        bool scan_requested;
        bool libvirt_snapshot_seen;
        bool hint_replan;         /* hints took a token: plan again after this epoll batch */
        nsec_t last_hint_replan_ns;
        nsec_t qemu_hint_warned_ns;  /* last warning about a refused HintSocket path (one a minute) */
        bool quit;
        int exit_status;
};

int daemon_init(struct daemon *d, const struct daemon_options *opts);
int daemon_run(struct daemon *d);
void daemon_done(struct daemon *d);
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

/* Renderers shared by the control socket and --once (render.c). */
struct strbuf;
void render_status(const struct daemon *d, bool json, struct strbuf *out);
void render_vms(const struct daemon *d, bool json, struct strbuf *out);
void render_cpus(const struct daemon *d, bool json, struct strbuf *out);
void render_top(const struct daemon *d, struct strbuf *out);
void render_metrics(const struct daemon *d, struct strbuf *out);
/* The pack sets of plan p (NULL: none) as Prometheus gauges, part of render_metrics(). */
void render_pack_set_metrics(const struct plan *p, struct strbuf *out);
void render_plan(const struct daemon *d, bool json, struct strbuf *out);
