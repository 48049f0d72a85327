/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "apply.h"
#include "control.h"
#include "journal.h"
#include "libvirt_src.h"
#include "util.h"

/*
 * What the renderers (render.c, metrics.c) draw from: a snapshot of the
 * daemon taken by daemon_view() on the loop's thread.  struct daemon itself
 * is private to daemon.c.
 *
 * The daemon's long-lived objects are borrowed through const pointers: they
 * belong to the loop, and the view is rendered on the loop's thread before
 * the next period changes them.  Statistics kept by other threads under
 * their locks (the applier's, the libvirt source's) are copied, once per
 * view: that is why daemon_view() takes a daemon that is not const.
 */

struct vp_config;
struct topology;
struct tracker;
struct pcpu_stat;
struct hint_server;
struct em_host;
struct plan;
struct plan_input;
struct coexist_report;
struct procscan_stats;
struct strbuf;

struct daemon_counters {
        uint64_t periods;
        uint64_t overruns;            /* timerfd expirations > 1: periods missed */
        uint64_t proc_scans;
        uint64_t qmp_queries, qmp_errors;
        uint64_t qmp_kept;            /* failed discovery queries whose VM stayed on its last answer */
        uint64_t qmp_gone;            /* last answers dropped because their QEMU process exited */
        uint64_t reloads, reload_errors;
        uint64_t topology_changes;    /* online CPU sets taken while running (CPU hotplug): topology read again */
        uint64_t topology_errors;     /* online checks or topology re-reads that failed (the old topology kept) */
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

struct daemon_view {
        nsec_t now;                     /* monotonic, when the view was taken */
        nsec_t start_ns;                /* monotonic */
        nsec_t start_realtime_ns;
        bool dry_run;                   /* --dry-run */
        const char *config_path;
        const struct vp_config *cfg;
        const struct topology *topo;
        const struct tracker *tracker;
        const struct pcpu_stat *pcpu;   /* NULL: no pCPU sampler */
        const struct hint_server *hints;/* NULL: no guest hint channels */
        const struct em_host *em;       /* NULL: planner off */
        const char *model_source;       /* model file, or "derived from sysfs" */
        const struct plan *plan;        /* the current plan, NULL before the first */
        const struct plan_input *plan_in; /* its inputs (plan_in->v[i] is its vCPU i) */
        const struct daemon_counters *counters;
        const struct coexist_report *coexist;
        const struct procscan_stats *procscan_stats;
        unsigned qmp_failing;           /* configured QMP sockets whose last query failed */
        bool topology_stale;            /* the online CPUs changed, or could not be read, and the topology
                                         * has not been read again yet (CPU hotplug: daemon.c topology_check) */
        bool applier;                   /* plans are applied (an applier runs); false: advisory */
        struct apply_stats apply;       /* copied from the applier; zeros without one */
        bool simulated;                 /* --dry-run: an applier runs on the sim power driver */
        struct apply_stats sim_apply;   /* copied from it: what would be done; zeros without one */
        bool libvirt;                   /* the libvirt source runs */
        struct libvirt_src_stats libvirt_stats; /* copied from it; zeros without one */
        const struct apply_thread *foreign; /* [n_foreign] threads whose pin someone else changed, sorted
                                             * (apply.h): left out of plans */
        size_t n_foreign;
};

/* Is thread tid of pid one whose pin someone else changed (v->foreign)? */
bool daemon_view_pinned_by_others(const struct daemon_view *v, pid_t pid, pid_t tid);

/* Renderers shared by the control socket, --once and the metrics textfile (render.c, metrics.c). */
void render_status(const struct daemon_view *v, bool json, struct strbuf *out);
void render_vms(const struct daemon_view *v, bool json, struct strbuf *out);
void render_cpus(const struct daemon_view *v, bool json, struct strbuf *out);
void render_top(const struct daemon_view *v, struct strbuf *out);
void render_metrics(const struct daemon_view *v, struct strbuf *out);
/* The pack sets of plan p (NULL: none) as Prometheus gauges, part of render_metrics(). */
void render_pack_set_metrics(const struct plan *p, struct strbuf *out);
void render_plan(const struct daemon_view *v, bool json, struct strbuf *out);
