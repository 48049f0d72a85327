/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's event loop and control period.
 *
 * Start-up and reload share one path, daemon_apply_config(): it builds
 * everything that depends on the configuration (topology, tracker, pCPU
 * sampler, control socket, libvirt source) for the new configuration and
 * only then swaps it in, so a reload with a bad file or an unreadable sysfs
 * keeps the running state whole.  The part read from the host's CPUs
 * (host_build(), host_commit()) is also what a CPU hotplug rebuilds.
 *
 * Each control period (a periodic CLOCK_MONOTONIC timerfd):
 *   1. discovery, when due: procfs scan every ProcScanInterval (or at once
 *      after a hook notification), QMP queries of configured sockets;
 *      libvirt snapshots arrive on their own eventfd whenever libvirt says
 *      something changed;
 *   2. sampling: every vCPU's schedstat through kept fds (its load scaled by
 *      the plan it ran under), then the hotplug check: the online CPUs
 *      compared with those the topology was read after, the topology read
 *      again when they differ (topology_check()); the plan; every pCPU's
 *      /proc/stat line and cpuidle residency;
 *   3. output: metrics textfile, watchdog ping.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "coexist.h"
#include "config.h"
#include "control.h"
#include "daemon.h"
#include "daemon_view.h"
#include "apply.h"
#include "energy_model.h"
#include "guest_hint.h"
#include "journal.h"
#include "journal_builtin.h"
#include "event.h"
#include "instance.h"
#include "libvirt_src.h"
#include "log.h"
#include "pcpu_stat.h"
#include "placement.h"
#include "plan_actions.h"
#include "plan_input.h"
#include "procscan.h"
#include "qemu_hint.h"
#include "qmp.h"
#include "qmp_worker.h"
#include "sd_notify.h"
#include "topology.h"
#include "vcpu_track.h"
#include "version.h"

/* In --once mode, how long to wait for libvirt's first snapshot before
 * reporting without it (libvirtd down is reported, not waited for). */
#define ONCE_LIBVIRT_WAIT_NS (5 * NSEC_PER_SEC)
#define HINT_REPLAN_MIN_NS (100 * NSEC_PER_MSEC) /* hint-driven plans, at most 10/s in all */

struct control_server;
struct qmp_worker;
struct applier;
struct apply_request;

struct daemon {
        struct daemon_options opts;
        struct vp_config cfg;
        char config_path[CONFIG_PATH_MAX];
        struct config_error reload_error; /* of the last failed reload, for its control reply; file "" if none */
        struct topology *topo;
        cpuset_t topo_online;     /* topology_read_online() just before topo was read (hotplug check) */
        unsigned topo_fail_streak; /* failed hotplug checks or topology re-reads in a row (0: the topology
                                    * holds); the next try waits 2^min(n - 1, 5) periods, at most 60 s */
        nsec_t topo_retry_ns;     /* no check before (CLOCK_MONOTONIC) while failing */
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
        struct applier *retiring_applier; /* stopped by a reload, restoring its journal on its thread */
        struct apply_request *apply_scratch; /* pins being built with the plan inputs */
        struct apply_thread *foreign; /* threads whose pin someone else changed (the applier's, as of the
                                       * last plan): their vCPUs are left out of plans */
        size_t n_foreign;
        struct plan_actions *actions; /* plan_to_actions() output and scratch, kept across periods */
        bool running;             /* daemon_run() started (threads may be created) */
        int instance_fd;          /* instance.h: the lock on instance_dir, held for the daemon's life */
        char instance_dir[CONFIG_PATH_MAX]; /* the state directory locked (cfg.state_dir once running) */
        struct control_server *control;
        struct control_server *retired_control; /* replaced by a reload; freed after the epoll batch */
        bool batch_invalid;       /* a handler freed watches: stop dispatching this batch */
        bool metrics_failing;     /* in a streak of failed textfile writes */
        struct procscan_stats procscan_stats;
        uid_t scan_uids[CONFIG_MAX_SCAN_USERS]; /* ProcScanUsers resolved at the last (re)load */
        struct procscan_users scan_users;
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

static void qmp_cache_clear(struct daemon *d);
static int log_restore(const char *state_dir, int r, const struct restore_stats *st);
static int restore_journal(const struct vp_config *cfg, struct restore_stats *ret);
static void start_applier(struct daemon *d);
static void write_textfile(struct daemon *d);

/* A guest's hints took a token (trust = full, within its bucket): they may
 * change the plan.  The hint state is already updated; the plan is redone
 * right after this epoll batch (at most every HINT_REPLAN_MIN_NS), so a
 * go_faster reaches the host without waiting for the period.  The per-VM
 * token bucket bounds how often one guest can cause this. */
static void hint_wakeup(pid_t pid, int n_actuations, void *userdata)
{
        struct daemon *d = userdata;

        d->counters.hint_wakeups++;
        d->hint_replan = true;
}

/*
 * [Hints] from the configuration (start-up and reload): Enabled = no closes
 * every hint channel, otherwise the host defaults apply to every VM without
 * per-VM metadata.  Freeing the server frees watches: the epoll batch ends.
 */
static int hints_configure(struct daemon *d, nsec_t now)
{
        const struct hint_policy *p = &d->cfg.hint_defaults;
        int r;

        if (!d->cfg.hints_enabled) {
                if (d->hints)
                        log_info("Guest hints disabled ([Hints] Enabled = no): hint channels closed.");
                hint_server_free(d->hints);
                d->hints = NULL;
                d->batch_invalid = true;
                return 0;
        }
        if (d->hints)
                r = hint_server_set_defaults(d->hints, p, now);
        else
                r = hint_server_new(d->epoll_fd, p, hint_wakeup, d, &d->hints);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the guest hint server: %m");
        hint_server_set_host_read_budget(d->hints, d->cfg.hint_host_read_bytes_per_sec);
        log_debug("Guest hint defaults: trust %s, max level %u, boost cap %u ms, %u hints/s, burst %u, "
                  "half-life %lld ms.", hint_trust_to_string(p->trust), p->max_level, p->boost_cap_ms,
                  p->rate_per_sec, p->burst, (long long) (p->half_life_ns / NSEC_PER_MSEC));
        return 0;
}

/*
 * A plain-QEMU VM (not a libvirt domain) has no channel record: with
 * [QEMU] HintSocket set, its channel is the pattern filled with the VM's name,
 * if that is a socket owned by the QEMU process's user (qemu_hint.h).  Returns
 * info, or tmp: a shallow copy of info with hint_socket set.  Runs every
 * period for every such VM (a stat of the socket and of /proc/<pid>), relies
 * on the hint server's own connect backoff; refusals are counted
 * (vmmpower_qemu_hint_refused_total) and warned about once a minute.
 * A VM without a channel shows "hints": null in vmmpowerctl vms.
 */
static const struct vm_info *qemu_hint_vm(struct daemon *d, const struct vm_info *info, struct vm_info *tmp)
{
        int r;

        if (!d->cfg.qemu_hint_socket[0] || info->hint_socket[0] || (info->sources & VM_SOURCE_LIBVIRT))
                return info;
        *tmp = *info;
        r = qemu_hint_socket(d->cfg.qemu_hint_socket, d->cfg.procfs_root, info, tmp->hint_socket,
                             sizeof(tmp->hint_socket));
        if (r < 0) {
                /* -ENOENT: this VM has no channel there, the common case; the
                 * others are refusals: counted, and a warning at most once a
                 * minute (the same refusal repeats every period). */
                if (r != -ENOENT && r != -ESRCH) {
                        nsec_t now = now_ns();

                        d->counters.qemu_hint_refused++;
                        if (!d->qemu_hint_warned_ns || now - d->qemu_hint_warned_ns >= 60 * NSEC_PER_SEC) {
                                d->qemu_hint_warned_ns = now;
                                log_warning_errno(r, "Not connecting to the hint socket of QEMU VM \"%s\" (pid %d) "
                                                  "from [QEMU] HintSocket: %m (%" PRIu64 " refusals so far; "
                                                  "warned once a minute)",
                                                  info->name, (int) info->pid, d->counters.qemu_hint_refused);
                        } else
                                log_debug_errno(r, "No hint channel for QEMU VM \"%s\" (pid %d) from HintSocket: %m",
                                                info->name, (int) info->pid);
                }
                return info;
        }
        return tmp;
}

/*
 * Hint channels follow the inventory: a connection per VM whose channel
 * socket is known (libvirt live XML, or [QEMU] HintSocket for plain QEMU:
 * qemu_hint_vm()), closed when the VM goes, reconnected
 * with backoff.  Each VM's policy is the host defaults with its metadata's
 * overrides (vm_info.policy), set every period so that a metadata change or a
 * reload takes effect within one period (a guest learns the new values at its
 * next handshake).  Closing frees watches: the epoll batch ends.
 */
static void hints_period(struct daemon *d, nsec_t now)
{
        if (!d->hints)
                return;
        hint_server_update_begin(d->hints);
        for (size_t i = 0; i < tracker_n_vms(d->tracker); i++) {
                const struct vm_info *info = &tracker_vm(d->tracker, i)->info;
                struct hint_policy p;
                struct vm_info with_socket;

                info = qemu_hint_vm(d, info, &with_socket);
                if (hint_server_update_vm(d->hints, info, now) < 0)
                        continue;
                /* -ENOENT: no hint channel; the merge cannot fail for a parsed policy. */
                if (info->policy.source == VM_POLICY_METADATA &&
                    vm_policy_hint_policy(&info->policy, &d->cfg.hint_defaults, &p) == 0)
                        (void) hint_server_set_vm_policy(d->hints, info->pid, &p, now);
                else
                        (void) hint_server_set_vm_policy(d->hints, info->pid, NULL, now);
        }
        hint_server_update_end(d->hints, now);
        d->batch_invalid = true;
}

/* plan_input_sources callbacks: where a vCPU thread runs, a VM's hints, a NUMA binding that cannot hold. */
static int input_thread_cpu(void *userdata, pid_t pid, pid_t tid)
{
        const struct daemon *d = userdata;

        return procscan_thread_cpu(d->cfg.procfs_root, pid, tid);
}

static int apply_thread_cmp(const void *a, const void *b)
{
        const struct apply_thread *x = a, *y = b;

        if (x->pid != y->pid)
                return x->pid < y->pid ? -1 : 1;
        return x->tid < y->tid ? -1 : x->tid > y->tid;
}

bool daemon_view_pinned_by_others(const struct daemon_view *v, pid_t pid, pid_t tid)
{
        struct apply_thread key = { pid, tid };

        return v->n_foreign && bsearch(&key, v->foreign, v->n_foreign, sizeof(key), apply_thread_cmp);
}

static bool input_pinned_by_others(void *userdata, pid_t pid, pid_t tid)
{
        const struct daemon *d = userdata;
        struct apply_thread key = { pid, tid };

        return d->n_foreign && bsearch(&key, d->foreign, d->n_foreign, sizeof(key), apply_thread_cmp);
}

/* The applier's list of threads pinned by someone else, for this period's plan (kept on failure). */
static void refresh_foreign(struct daemon *d)
{
        struct apply_thread *l = NULL;
        size_t n = 0;

        if (!d->applier || d->opts.dry_run) { /* not acting (a dry run pins nothing) */
                free(d->foreign);
                d->foreign = NULL;
                d->n_foreign = 0;
                return;
        }
        if (applier_foreign_threads(d->applier, &l, &n) < 0)
                return;
        free(d->foreign);
        d->foreign = l;
        d->n_foreign = n;
}

static int input_vm_hints(void *userdata, pid_t pid, nsec_t now, struct hint_effective *ret, size_t max)
{
        const struct daemon *d = userdata;

        return hint_server_vm_state(d->hints, pid, now, ret, max);
}

/* Warned when such VMs become more than the last plan had. */
static void input_numa_ignored(void *userdata, const struct vm_load *vm, int error)
{
        const struct daemon *d = userdata;

        if (d->plan_scratch.numa_ignored > d->counters.numa_ignored)
                log_warning_errno(error, "VM \"%s\": memory bound to NUMA node(s) \"%s\", %s: packed on "
                                  "any node, ignoring.", vm->info.name, vm->info.policy.mem_nodeset,
                                  error == -ENOENT                              ? "which have no online CPU here"
                                  : strcmp(vm->info.policy.mem_nodeset, "?") == 0 ? "a list over 255 bytes or not printable"
                                                                                   : "a list that does not parse");
}

/* Plans reach the host (an applier on the sysfs driver; a dry run's applier only simulates). */
static bool acting(const struct daemon *d)
{
        return d->applier && !d->opts.dry_run;
}

/*
 * Close the hint loop: tell every guest what each of its vCPUs is given, the
 * capacity of its domain's level in the applied plan (0..1024, 1024 = the top
 * level; the guest's cpufreq module makes it the vCPU's current frequency).
 * A plan that is not applied grants nothing.  The hint server sends only
 * changes, at most every HINT_GRANT_INTERVAL_NS per VM, and everything again
 * after a new handshake.
 */
static void hints_grant(struct daemon *d, const struct plan *p, nsec_t now)
{
        const struct em_host *h = d->em;

        if (!d->hints || !acting(d) || !h || !p)
                return;
        for (unsigned i = 0; i < p->n_vcpus; i++) {
                int c = p->vcpu_cpu[i];
                struct vcpu_ref r;
                uint32_t level;

                if (c < 0 || (unsigned) c >= p->n_cpus || (unsigned) c >= h->n_cpus)
                        continue;
                level = em_capacity(&h->model, p->fdom_level[h->cpu_fdom[c]]) * HINT_LEVEL_MAX / EM_CAPACITY_SCALE;
                r = vcpu_ref_of_key(p->vcpu_key[i]);
                (void) hint_server_set_grant(d->hints, r.pid, r.index, MIN(level, (uint32_t) HINT_LEVEL_MAX));
        }
        hint_server_send_grants(d->hints, now);
}

int daemon_load_config(const struct daemon_options *opts, struct vp_config *c, struct config_error *err)
{
        const char *path = opts->config_path ? opts->config_path : VMMPOWER_SYSCONFDIR "/vmmpower.conf";
        struct vp_config n;
        int r;

        config_defaults(&n);
        /* The default file may be absent (defaults apply); a file named on
         * the command line must exist. */
        r = config_load(path, NULL, opts->config_path == NULL, &n, err);
        if (r < 0)
                return r;
        if (opts->sysfs_root)
                snprintf(n.sysfs_root, sizeof(n.sysfs_root), "%s", opts->sysfs_root);
        if (opts->procfs_root)
                snprintf(n.procfs_root, sizeof(n.procfs_root), "%s", opts->procfs_root);
        if (opts->control_socket)
                snprintf(n.control_socket, sizeof(n.control_socket), "%s", opts->control_socket);
        if (opts->log_level_set)
                n.log_level = opts->log_level;
        *c = n;
        return 0;
}

static int arm_timer(struct daemon *d)
{
        struct itimerspec its = {
                .it_interval = { .tv_sec = d->cfg.period_ns / NSEC_PER_SEC,
                                 .tv_nsec = d->cfg.period_ns % NSEC_PER_SEC },
        };

        its.it_value = its.it_interval;
        return timerfd_settime(d->timer_fd, 0, &its, NULL) < 0 ? -errno : 0;
}

static void libvirt_event(struct io_watch *w, uint32_t events)
{
        struct daemon *d = container_of(w, struct daemon, libvirt_watch);
        struct vm_info *vms = NULL;
        size_t n = 0;
        int r;

        if (!d->libvirt)
                return;
        r = libvirt_src_take(d->libvirt, &vms, &n);
        if (r <= 0) {
                if (r < 0)
                        log_warning_errno(r, "Failed to take libvirt snapshot: %m, ignoring.");
                return;
        }
        r = tracker_set_source(d->tracker, VM_SOURCE_LIBVIRT, vms, n, now_ns());
        if (r < 0)
                log_warning_errno(r, "Failed to apply libvirt snapshot: %m, keeping the previous one.");
        else
                d->libvirt_snapshot_seen = true;
        vm_info_free_array(vms, n);
}

static int start_libvirt(struct daemon *d)
{
        int r;

        if (!d->cfg.libvirt_enabled)
                return 0;
        r = libvirt_src_start(d->cfg.libvirt_uri, d->cfg.libvirt_run_dir, d->cfg.procfs_root, &d->libvirt);
        if (r < 0)
                return log_error_errno(r, "Failed to start libvirt source: %m");
        r = io_watch_add(d->epoll_fd, &d->libvirt_watch, libvirt_src_fd(d->libvirt), EPOLLIN, libvirt_event);
        if (r < 0) {
                libvirt_src_stop(d->libvirt);
                d->libvirt = NULL;
                return r;
        }
        return 0;
}

static void stop_libvirt(struct daemon *d)
{
        if (!d->libvirt)
                return;
        io_watch_del(d->epoll_fd, &d->libvirt_watch);
        libvirt_src_stop(d->libvirt);
        d->libvirt = NULL;
        /* Disabled or reconfigured: what it said no longer holds. */
        if (d->tracker && tracker_set_source(d->tracker, VM_SOURCE_LIBVIRT, NULL, 0, now_ns()) < 0)
                log_warning("Failed to clear the libvirt source.");
}

/* The energy model for topo (failures logged at level). */
static int load_energy_model(const struct vp_config *cfg, const struct topology *topo, enum log_level level,
                             struct em_host **ret)
{
        struct energy_model *m = calloc(1, sizeof(*m));
        struct em_error err = { 0 };
        int r;

        if (!m)
                return -ENOMEM;
        if (cfg->model_file[0]) {
                r = energy_model_parse_file(cfg->model_file, m, &err);
                if (r < 0) {
                        if (err.line > 0)
                                log_full_errno(level, 0, "%s:%u: %s", err.file, err.line, err.message);
                        else
                                log_full_errno(level, 0, "%s: %s", cfg->model_file, err.message);
                }
        } else {
                r = energy_model_from_topology(topo, m);
                if (r < 0)
                        log_full_errno(level, r, "Failed to derive an energy model from sysfs: %m");
        }
        if (r == 0) {
                /* a model for another host (its levels outside this host's cpufreq range) is refused, named */
                r = em_host_check(topo, m, &err);
                if (r < 0)
                        log_full_errno(level, 0, "%s: %s",
                                       cfg->model_file[0] ? cfg->model_file : "the model derived from sysfs",
                                       err.message);
        }
        if (r == 0) {
                r = em_host_new(topo, m, ret);
                if (r < 0)
                        log_full_errno(level, r, "The energy model does not fit this host's topology: %m");
        }
        free(m);
        return r;
}

/* An applier runs: on the host, or with --dry-run on the sim power driver (whatever Apply says). */
static bool want_applier(const struct daemon *d, const struct vp_config *cfg, bool have_model)
{
        return cfg->planner_enabled && (cfg->planner_apply || d->opts.dry_run) && have_model;
}

static bool qmp_config_changed(const struct vp_config *a, const struct vp_config *b)
{
        if (a->n_qmp_sockets != b->n_qmp_sockets || strcmp(a->procfs_root, b->procfs_root) != 0)
                return true;
        for (unsigned i = 0; i < a->n_qmp_sockets && i < CONFIG_MAX_QMP; i++)
                if (strcmp(a->qmp_sockets[i], b->qmp_sockets[i]) != 0)
                        return true;
        return false;
}

static bool applier_config_changed(const struct vp_config *a, const struct vp_config *b)
{
        return strcmp(a->state_dir, b->state_dir) != 0 || strcmp(a->sysfs_root, b->sysfs_root) != 0 ||
               a->libvirt_enabled != b->libvirt_enabled || strcmp(a->libvirt_uri, b->libvirt_uri) != 0;
}

/* What a restore did, counted for metrics (vmmpower_restore_*) and said. */
static int count_restore(struct daemon *d, const char *state_dir, int r, const struct restore_stats *st)
{
        d->counters.restore_runs++;
        if (r < 0)
                d->counters.restore_errors++;
        d->counters.restored.restored += st->restored;
        d->counters.restored.unchanged += st->unchanged;
        d->counters.restored.foreign += st->foreign;
        d->counters.restored.gone += st->gone;
        d->counters.restored.failed += st->failed;
        d->counters.restored.skipped += st->skipped;
        return log_restore(state_dir, r, st);
}

/* [QEMU] ProcScanUsers as uids, at start and each reload (the users of the host may have changed). */
static void resolve_scan_users(struct daemon *d)
{
        char unknown[64];

        /* the syntax was checked with the configuration: only names can be missing here */
        if (procscan_users_resolve(d->cfg.proc_scan_users, d->scan_uids, ELEMENTSOF(d->scan_uids), &d->scan_users,
                                   unknown, sizeof(unknown)) < 0)
                d->scan_users = (struct procscan_users) { .uids = d->scan_uids }; /* nobody's */
        if (unknown[0])
                log_info("ProcScanUsers: no user '%s' on this host (and maybe others), left out.", unknown);
}

/*
 * Stop acting: the applier's thread ends and puts every knob it touched
 * back (applier_stop), off the loop: a libvirt connection and the sysfs
 * writes of a restore may take seconds.  reap_applier() collects it; no
 * applier starts before (the journal is the retiring one's until then).
 */
static void retire_applier(struct daemon *d)
{
        if (!d->applier)
                return;
        applier_stop(d->applier);
        d->retiring_applier = d->applier;
        d->applier = NULL;
        apply_request_free(d->apply_scratch);
        d->apply_scratch = NULL;
}

/* The retired applier, once its restore is done (wait: block until then), then the applier the configuration wants. */
static void reap_applier(struct daemon *d, bool wait)
{
        struct applier *a = d->retiring_applier;
        struct restore_stats st = { 0 };
        struct apply_stats as;
        int r = 0;

        if (!a || !applier_stopped(a, wait, &r, &st))
                return;
        applier_get_stats(a, &as);
        if (!as.simulated) /* a dry run's applier restores nothing: no restore to count */
                (void) count_restore(d, applier_state_dir(a), r, &st);
        applier_free(a);
        d->retiring_applier = NULL;
        start_applier(d);
}

static void start_applier(struct daemon *d)
{
        struct apply_config ac = {
                .state_dir = d->cfg.state_dir,
                .sysfs_root = d->cfg.sysfs_root,
                .libvirt_uri = d->cfg.libvirt_enabled ? d->cfg.libvirt_uri : NULL,
                .journal_sync = true,
                .foreign_classes = coexist_foreign_classes(&d->coexist),
        };
        _cleanup_free_ const char **foreign = NULL;
        int r;

        if (d->applier || d->retiring_applier || !d->running || !want_applier(d, &d->cfg, d->em != NULL))
                return;
        if (d->opts.dry_run) {
                ac.simulate = true;
                ac.n_cpus = d->em->n_cpus;
                ac.sim_max_khz = plan_level_khz(d->em, d->em->model.n_levels - 1);
        }
        foreign = coexist_foreign_paths(&d->coexist);
        if (!foreign) {
                d->counters.apply_start_errors++;
                log_warning("Plans stay advisory: out of memory.");
                return;
        }
        ac.foreign_paths = foreign;
        r = applier_new(&ac, &d->applier);
        if (r < 0) {
                d->counters.apply_start_errors++;
                log_warning("Plans stay advisory: the applier could not start.");
        }
}

/*
 * One daemon per state directory (instance.h), and never one that takes a
 * live control socket over (a daemon with another state directory but the
 * same ControlSocket).  Returns the lock fd or -errno, logged.
 */
static int take_instance_lock(const struct vp_config *cfg, bool starting)
{
        const char *then = starting ? "exiting" : "keeping the running configuration";
        pid_t owner = 0;
        int fd = instance_lock(cfg->state_dir, &owner);

        if (fd == -EBUSY) {
                if (owner > 0)
                        log_error("Another vmmpowerd (pid %d) is running with state directory %s; %s.", (int) owner,
                                  cfg->state_dir, then);
                else
                        log_error("Another vmmpowerd is running with state directory %s; %s.", cfg->state_dir, then);
                return -EBUSY;
        }
        if (fd < 0)
                return log_error_errno(fd, "Failed to lock %s/%s: %m", cfg->state_dir, INSTANCE_LOCK_FILE);
        return fd;
}

/* ---- The control server's view of the daemon (control.h: struct control_ops) ---- */

static void control_status(void *userdata, bool json, struct strbuf *out)
{
        struct daemon_view v;

        daemon_view(userdata, now_ns(), &v);
        render_status(&v, json, out);
}

static void control_vms(void *userdata, bool json, struct strbuf *out)
{
        struct daemon_view v;

        daemon_view(userdata, now_ns(), &v);
        render_vms(&v, json, out);
}

static void control_cpus(void *userdata, bool json, struct strbuf *out)
{
        struct daemon_view v;

        daemon_view(userdata, now_ns(), &v);
        render_cpus(&v, json, out);
}

static void control_plan(void *userdata, bool json, struct strbuf *out)
{
        struct daemon_view v;

        daemon_view(userdata, now_ns(), &v);
        render_plan(&v, json, out);
}

static void control_top(void *userdata, struct strbuf *out)
{
        struct daemon_view v;

        daemon_view(userdata, now_ns(), &v);
        render_top(&v, out);
}

static void control_metrics(void *userdata, struct strbuf *out)
{
        struct daemon_view v;

        daemon_view(userdata, now_ns(), &v);
        render_metrics(&v, out);
}

static void control_notify(void *userdata)
{
        struct daemon *d = userdata;

        d->counters.notifies++;
        daemon_request_scan(d);
}

/* "FILE:LINE: message; running configuration kept", one line of printable ASCII. */
static void reload_error_message(const struct config_error *err, char *buf, size_t size)
{
        if (!err->file[0])
                snprintf(buf, size, "reload failed, running configuration kept (see the daemon's log)");
        else if (err->line > 0)
                snprintf(buf, size, "%s:%u: %s; running configuration kept", err->file, err->line, err->message);
        else
                snprintf(buf, size, "%s: %s; running configuration kept", err->file, err->message);
        for (char *p = buf; *p; p++)
                if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                        *p = '?';
}

/* The reply's message holds a whole path and a parser message, as it did before the ops table. */
_Static_assert(CONTROL_ERROR_MAX >= CONFIG_PATH_MAX + 384, "CONTROL_ERROR_MAX too small for reload errors");

static int control_reload(void *userdata, char *msg, size_t size)
{
        struct daemon *d = userdata;
        int r = daemon_reload(d);

        if (r < 0)
                reload_error_message(&d->reload_error, msg, size);
        return r;
}

static const struct control_ops control_ops = {
        .status = control_status,
        .vms = control_vms,
        .cpus = control_cpus,
        .plan = control_plan,
        .top = control_top,
        .metrics = control_metrics,
        .notify = control_notify,
        .reload = control_reload,
};

static int check_control_socket_free(const char *path)
{
        pid_t owner = 0;
        int r = control_socket_live(path, &owner);

        if (r < 0)
                return log_error_errno(r, "Failed to check control socket %s: %m", path);
        if (r == 0)
                return 0;
        if (owner > 0)
                log_error("Control socket %s is served by another process (pid %d), not replacing it.", path,
                          (int) owner);
        else
                log_error("Control socket %s is served by another process, not replacing it.", path);
        return -EADDRINUSE;
}

/*
 * What is read from the host's CPUs: the topology, the pCPU sampler and the
 * energy model bound to them, built together (at start, at each reload, and
 * when the online CPUs change under the running daemon: topology_check())
 * and swapped in together by host_commit().
 */
struct host_state {
        cpuset_t online;          /* topology_read_online(), read before the topology */
        struct topology *topo;
        struct pcpu_stat *pcpu;
        struct em_host *em;       /* NULL: planner off */
};

static void host_state_done(struct host_state *h)
{
        em_host_free(h->em);
        pcpu_stat_free(h->pcpu);
        topology_free(h->topo);
        *h = (struct host_state) { 0 };
}

/* Read the host for cfg into *ret (failures logged at level); on failure *ret holds nothing. */
static int host_build(const struct vp_config *cfg, enum log_level level, struct host_state *ret)
{
        struct host_state h = { 0 };
        int r;

        /* The online set first: a CPU going on- or offline while the topology is
         * read makes the next check differ, and the topology is read again. */
        r = topology_read_online(cfg->sysfs_root, &h.online);
        if (r >= 0)
                r = topology_load(cfg->sysfs_root, &h.topo);
        if (r < 0) {
                log_full_errno(level, r, "Failed to read the host topology below %s: %m (--log-level=debug names the file)",
                               cfg->sysfs_root);
                goto fail;
        }
        r = pcpu_stat_new(h.topo, cfg->procfs_root, cfg->sysfs_root, &h.pcpu);
        if (r < 0) {
                log_full_errno(level, r, "Failed to set up pCPU sampling: %m");
                goto fail;
        }
        if (cfg->planner_enabled) {
                r = load_energy_model(cfg, h.topo, level, &h.em);
                if (r < 0)
                        goto fail;
        }
        *ret = h;
        return 0;
fail:
        host_state_done(&h);
        return r;
}

/* Swap h in (h is left empty).  A new topology or model invalidates the previous plan. */
static void host_commit(struct daemon *d, const struct vp_config *cfg, struct host_state *h)
{
        topology_free(d->topo);
        d->topo = h->topo;
        d->topo_online = h->online;
        em_host_free(d->em);
        d->em = h->em;
        plan_free(d->plan);
        d->plan = NULL;
        snprintf(d->model_source, sizeof(d->model_source), "%s",
                 cfg->model_file[0] ? cfg->model_file : "derived from sysfs");
        pcpu_stat_free(d->pcpu);
        d->pcpu = h->pcpu;
        *h = (struct host_state) { 0 };
        d->topo_fail_streak = 0;
}

/*
 * Build what depends on the configuration.  On success the daemon runs with
 * cfg; on failure nothing changed.  starting: first call (no threads yet).
 */
static int daemon_apply_config(struct daemon *d, const struct vp_config *cfg, bool starting)
{
        const struct vp_config *old = &d->cfg;
        struct host_state host = { 0 };
        struct tracker *tracker = NULL;
        struct control_server *control = NULL;
        struct coexist_report coexist;
        bool new_tracker, new_control, new_libvirt;
        int r, lock_fd = -1;

        new_tracker = starting || strcmp(old->procfs_root, cfg->procfs_root) != 0 ||
                      old->load_half_life_ns != cfg->load_half_life_ns;
        new_control = starting || strcmp(old->control_socket, cfg->control_socket) != 0 ||
                      strcmp(old->control_group, cfg->control_group) != 0;
        new_libvirt = !starting && (old->libvirt_enabled != cfg->libvirt_enabled ||
                                    strcmp(old->libvirt_uri, cfg->libvirt_uri) != 0 ||
                                    strcmp(old->libvirt_run_dir, cfg->libvirt_run_dir) != 0 ||
                                    strcmp(old->procfs_root, cfg->procfs_root) != 0);

        if (mkdir(cfg->state_dir, 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create %s: %m", cfg->state_dir);
        /* At start the lock is taken by daemon_init(); a reload that moves the
         * state directory takes the new one before anything else. */
        if (!starting && strcmp(old->state_dir, cfg->state_dir) != 0) {
                lock_fd = take_instance_lock(cfg, false);
                if (lock_fd < 0)
                        return lock_fd;
        }

        /* Other tuners and knobs set by others: after the start-up restore, so the
         * knobs hold the host's values; a reload under a running applier keeps
         * the start's knob findings (the knobs hold ours now), and so does one
         * while a retired applier is still putting them back (some may still
         * hold ours: scanned now, they would read as someone else's). */
        r = coexist_check(cfg->procfs_root, cfg->sysfs_root, (enum coexist_mode) cfg->other_tuners,
                          starting || (!acting(d) && !d->retiring_applier), &coexist);
        if (r < 0)
                goto fail;

        r = host_build(cfg, LOG_LEVEL_ERR, &host);
        if (r < 0)
                goto fail;
        if (new_tracker) {
                r = tracker_new(cfg->procfs_root, cfg->load_half_life_ns, &tracker);
                if (r < 0) {
                        log_error_errno(r, "Failed to set up the tracker: %m");
                        goto fail;
                }
        }
        if (new_control) {
                /* The new socket replaces the old one's path (it unlinks and
                 * binds); the old one keeps its fd until the commit.  A path
                 * that is new to us must not be another daemon's live socket. */
                if (starting || strcmp(old->control_socket, cfg->control_socket) != 0) {
                        r = check_control_socket_free(cfg->control_socket);
                        if (r < 0)
                                goto fail;
                }
                r = control_server_new(cfg->control_socket, cfg->control_group, d->epoll_fd, &control_ops, d,
                                       &d->counters.control, &control);
                if (r < 0)
                        goto fail;
        }

        /* Commit. */
        if (d->applier && (!want_applier(d, cfg, host.em != NULL) || applier_config_changed(old, cfg) ||
                           coexist_foreign_classes(&coexist) != coexist_foreign_classes(&d->coexist)))
                retire_applier(d);
        if (!coexist.knobs_scanned)
                coexist_report_move_knobs(&coexist, &d->coexist);
        coexist_report_clear(&d->coexist);
        d->coexist = coexist;
        host_commit(d, cfg, &host);
        if (new_tracker) {
                tracker_free(d->tracker);
                d->tracker = tracker;
                d->libvirt_snapshot_seen = false;
        }
        if (new_control) {
                /* The old server may be the one running this reload (a client's
                 * "reload" request): retire it, the loop frees it after the batch. */
                if (d->control && strcmp(old->control_socket, cfg->control_socket) == 0)
                        control_server_forget_path(d->control);
                control_server_free(d->retired_control);
                d->retired_control = d->control;
                d->control = control;
        }
        d->batch_invalid = true; /* watches may be gone: end this epoll batch */
        /* QMP answers stand across a reload that keeps the sockets (and the procfs they refer to). */
        if (starting || qmp_config_changed(old, cfg))
                qmp_cache_clear(d);
        if (new_libvirt)
                stop_libvirt(d);
        if (lock_fd >= 0) {
                instance_unlock(d->instance_fd, d->instance_dir);
                d->instance_fd = lock_fd;
                snprintf(d->instance_dir, sizeof(d->instance_dir), "%s", cfg->state_dir);
        }
        d->cfg = *cfg;
        resolve_scan_users(d);
        log_set_max_level(cfg->log_level);
        if (!starting) {
                r = arm_timer(d);
                if (r < 0)
                        log_error_errno(r, "Failed to re-arm the period timer: %m");
                if (new_libvirt || (new_tracker && d->libvirt)) {
                        stop_libvirt(d);
                        (void) start_libvirt(d); /* logged; the daemon keeps running without */
                }
                start_applier(d);
        }
        d->scan_requested = true;
        return 0;
fail:
        coexist_report_clear(&coexist);
        if (lock_fd >= 0)
                instance_unlock(lock_fd, cfg->state_dir);
        control_server_free(control);
        tracker_free(tracker);
        host_state_done(&host);
        return r;
}

/* Journal restores of a running daemon (at start, after a crash). */
static int restore_journal_counted(struct daemon *d, const struct vp_config *cfg)
{
        struct restore_stats st = { 0 };
        int r = restore_journal(cfg, &st);

        return count_restore(d, cfg->state_dir, r, &st);
}

int daemon_restore_journal(const struct vp_config *cfg)
{
        struct restore_stats st;

        return daemon_restore_journal_stats(cfg, &st);
}

/* What a journal restore did, said once (by whoever ran it: the loop, or the applier's thread). */
static int log_restore(const char *state_dir, int r, const struct restore_stats *st)
{
        if (r < 0)
                return log_error_errno(r, "Failed to restore the journal in %s: %m", state_dir);
        if (st->restored + st->unchanged + st->foreign + st->gone + st->failed + st->skipped + st->torn > 0)
                log_notice("Journal %s: %u restored, %u already original, %u changed by someone else (left), "
                           "%u gone, %u failed, %u kept for later, %u torn records ignored.",
                           state_dir, st->restored, st->unchanged, st->foreign, st->gone, st->failed, st->skipped,
                           st->torn);
        if (r > 0)
                log_warning("%d journal entries could not be restored yet and are kept in %s.", r, state_dir);
        return r;
}

/* The journal under cfg's state directory, restored; not logged. */
static int restore_journal(const struct vp_config *cfg, struct restore_stats *ret)
{
        virConnectPtr conn = NULL;
        int r;

        /* vCPU pins made through libvirt are put back through libvirt; without a
         * connection those entries stay in the journal for a later restore. */
        if (cfg->libvirt_enabled)
                conn = virConnectOpen(cfg->libvirt_uri);
        r = journal_restore_all(cfg->state_dir, cfg->sysfs_root, conn, ret);
        if (conn)
                virConnectClose(conn);
        return r;
}

int daemon_restore_journal_stats(const struct vp_config *cfg, struct restore_stats *ret)
{
        *ret = (struct restore_stats) { 0 };
        return log_restore(cfg->state_dir, restore_journal(cfg, ret), ret);
}

static void log_config_error(const struct config_error *err)
{
        if (err->line > 0)
                log_error("%s:%u: %s", err->file, err->line, err->message);
        else
                log_error("%s: %s", err->file, err->message);
}

int daemon_reload(struct daemon *d)
{
        char old_textfile[CONFIG_PATH_MAX];
        struct config_error err = { 0 };
        struct vp_config cfg;
        int r;

        (void) notify_send("RELOADING=1");
        d->counters.reloads++;
        snprintf(old_textfile, sizeof(old_textfile), "%s", d->cfg.metrics_textfile);
        r = daemon_load_config(&d->opts, &cfg, &err);
        if (r == 0)
                r = daemon_apply_config(d, &cfg, false);
        else
                log_config_error(&err);
        d->reload_error = err; /* file "" unless the configuration itself was at fault */
        if (r == 0)
                (void) hints_configure(d, now_ns()); /* logged; keeps the previous hint state */
        if (r < 0) {
                d->counters.reload_errors++;
                log_error("Reload failed, keeping the running configuration.");
        } else {
                log_info("Configuration reloaded from %s.", d->config_path);
                /* The textfile follows [Metrics] TextfilePath at once: a moved or
                 * disabled one is removed, the current one rewritten. */
                if (old_textfile[0] && strcmp(old_textfile, d->cfg.metrics_textfile) != 0 &&
                    unlink(old_textfile) < 0 && errno != ENOENT)
                        log_warning_errno(errno, "Failed to remove the old metrics textfile %s: %m, ignoring.",
                                          old_textfile);
                write_textfile(d);
        }
        (void) notify_send("READY=1");
        return r;
}

void daemon_request_scan(struct daemon *d)
{
        d->scan_requested = true;
        if (d->libvirt)
                libvirt_src_request_reconcile(d->libvirt);
}

/* Field 22 of <procfs>/<pid>/stat: tells a QEMU process from a later one with its pid.
 * -ESRCH when the process is gone or a zombie. */
static int process_starttime(const char *procfs_root, pid_t pid, uint64_t *ret)
{
        char path[CONFIG_PATH_MAX + 32], buf[1024], *p, *save = NULL;
        ssize_t n;
        int field = 2;

        if (path_printf(path, sizeof(path), "%s/%d/stat", procfs_root, (int) pid) < 0)
                return -ENAMETOOLONG;
        n = read_small_file(path, buf, sizeof(buf));
        if (n < 0)
                return n == -ENOENT ? -ESRCH : (int) n;
        p = strrchr(buf, ')'); /* comm may hold spaces and ')' */
        if (!p)
                return -EINVAL;
        for (char *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                if (++field == 3 && (strcmp(t, "Z") == 0 || strcmp(t, "X") == 0))
                        return -ESRCH; /* exited, not reaped yet */
                if (field == 22)
                        return parse_u64(t, ret) < 0 ? -EINVAL : 0;
        }
        return -EINVAL;
}

/* Does the process that gave socket i's last answer still run? */
static bool qmp_answer_alive(const struct daemon *d, unsigned i)
{
        uint64_t st;
        int r = process_starttime(d->cfg.procfs_root, d->qmp_cache[i].pid, &st);

        if (r == -ESRCH)
                return false;
        /* Unreadable: keep it (the tracker drops vCPUs whose threads are gone). */
        return r < 0 || d->qmp_cache_starttime[i] == 0 || st == d->qmp_cache_starttime[i];
}

/*
 * QMP discovery, and the halt-poll time of KVM VMs with a QMP socket, on the
 * QMP worker's thread (qmp_worker.h): a query blocks for up to QMPTimeout
 * (QEMU's monitor serves one client at a time: anyone holding it makes ours
 * time out), so the loop hands each period a batch to the worker when the
 * previous one has been taken, and takes the answers at a later period; it
 * never waits on a monitor.  KVM halt polling is on-CPU time the guest did not
 * ask for, published per vCPU only through KVM's binary stats, which QEMU
 * serves as query-stats (tracker_set_halt_poll takes it out of the vCPU's
 * load).  What discovery publishes is every socket's last good answer, as
 * long as the QEMU process that gave it runs: a query that fails keeps the VM
 * on its last answer; it is dropped only when that process is gone.  The
 * first failure of a streak and the recovery are logged; every failure is
 * counted.
 */
static void qmp_vm_answer(struct daemon *d, struct qmp_job *j)
{
        unsigned i = j->slot;
        const char *sock = j->socket;

        if (j->result < 0) {
                d->counters.qmp_errors++;
                if (d->qmp_cache_valid[i] && qmp_answer_alive(d, i)) {
                        d->counters.qmp_kept++;
                        if (d->qmp_failing[i] == 0)
                                log_warning_errno(j->result, "QMP query of %s failed: %m; keeping VM %s (pid %d) "
                                                  "on its last answer while its QEMU process runs.",
                                                  sock, d->qmp_cache[i].name, (int) d->qmp_cache[i].pid);
                } else if (d->qmp_failing[i] == 0)
                        log_full_errno(d->qmp_cache_valid[i] ? LOG_LEVEL_INFO : LOG_LEVEL_NOTICE, j->result,
                                       "QMP query of %s failed: %m; will retry every scan.", sock);
                d->qmp_failing[i]++;
                return;
        }
        if (d->qmp_failing[i] > 0)
                log_info("QMP socket %s answers again after %u failed queries.", sock, d->qmp_failing[i]);
        d->qmp_failing[i] = 0;
        vm_info_done(&d->qmp_cache[i]);
        d->qmp_cache[i] = j->vm; /* moved: the job keeps nothing to free */
        j->vm = (struct vm_info) { 0 };
        d->qmp_cache_valid[i] = true;
        if (process_starttime(d->cfg.procfs_root, d->qmp_cache[i].pid, &d->qmp_cache_starttime[i]) < 0)
                d->qmp_cache_starttime[i] = 0;
}

/* The QMP source for the tracker: every live last answer (asked[i]: socket i answered or failed now). */
static void qmp_publish(struct daemon *d, const bool *asked, nsec_t now)
{
        struct vm_info vms[CONFIG_MAX_QMP];
        unsigned n_sock = MIN(d->cfg.n_qmp_sockets, CONFIG_MAX_QMP);
        size_t n = 0;
        int r;

        for (unsigned i = 0; i < n_sock; i++) {
                if (!d->qmp_cache_valid[i])
                        continue;
                /* A last answer stands until its process is gone (answered this pass: it runs). */
                if (d->qmp_failing[i] > 0 || !asked[i]) {
                        if (!qmp_answer_alive(d, i)) {
                                log_info("QEMU process %d of QMP socket %s is gone.", (int) d->qmp_cache[i].pid,
                                         d->cfg.qmp_sockets[i]);
                                d->counters.qmp_gone++;
                                vm_info_done(&d->qmp_cache[i]);
                                d->qmp_cache_valid[i] = false;
                                continue;
                        }
                }
                vms[n++] = d->qmp_cache[i]; /* shallow: the tracker copies */
        }
        r = tracker_set_source(d->tracker, VM_SOURCE_QMP, n ? vms : NULL, n, now);
        if (r < 0)
                log_warning_errno(r, "Failed to apply QMP results: %m");
}

/* A KVM VM's halt-poll time per vCPU onto the tracker. */
static void qmp_halt_poll_answer(struct daemon *d, const struct qmp_job *j)
{
        const struct vm_load *vm;

        if (j->result < 0) {
                d->counters.qmp_errors++;
                return;
        }
        vm = tracker_find_vm(d->tracker, j->pid);
        for (unsigned k = 0; vm && j->result > 0 && k < vm->n_vcpus; k++) {
                int idx = vm->vcpus[k].index;
                if (idx >= 0 && idx < VM_MAX_VCPUS && j->halt_poll_ns[idx] != UINT64_MAX)
                        tracker_set_halt_poll(d->tracker, vm->info.pid, idx, j->halt_poll_ns[idx]);
        }
}

/* The answers of a finished batch: discovery (then published) and halt-poll times. */
static void qmp_answers(struct daemon *d, struct qmp_job *jobs, size_t n, nsec_t now)
{
        unsigned n_sock = MIN(d->cfg.n_qmp_sockets, CONFIG_MAX_QMP);
        bool asked[CONFIG_MAX_QMP] = { false }, discovery = false;

        for (size_t k = 0; k < n; k++) {
                struct qmp_job *j = &jobs[k];

                if (j->kind == QMP_JOB_HALT_POLL) {
                        qmp_halt_poll_answer(d, j);
                        continue;
                }
                discovery = true;
                /* a reload may have changed the sockets since the batch left */
                if (j->slot >= n_sock || strcmp(d->cfg.qmp_sockets[j->slot], j->socket) != 0)
                        continue;
                asked[j->slot] = true;
                qmp_vm_answer(d, j);
        }
        if (discovery)
                qmp_publish(d, asked, now);
}

/* Take the worker's finished batch, if any. */
static void qmp_collect(struct daemon *d, nsec_t now)
{
        struct qmp_job *jobs;
        size_t n;

        if (d->qmp_worker && qmp_worker_take(d->qmp_worker, &jobs, &n) > 0) {
                qmp_answers(d, jobs, n, now);
                qmp_jobs_free(jobs, n);
        }
}

/*
 * The next batch, when the worker is free: every configured socket when a
 * discovery scan is due, and each KVM VM with a QMP socket for its halt-poll
 * time.  Without a worker (it failed to start, or before daemon_run) the
 * batch runs here, on the loop.
 */
static void qmp_dispatch(struct daemon *d, nsec_t now)
{
        unsigned n_sock = d->qmp_scan_due ? MIN(d->cfg.n_qmp_sockets, CONFIG_MAX_QMP) : 0;
        size_t n = n_sock, k = 0;
        struct qmp_job *jobs;

        if (d->qmp_worker && qmp_worker_busy(d->qmp_worker))
                return;
        for (size_t i = 0; i < tracker_n_vms(d->tracker); i++) {
                const struct vm_load *vm = tracker_vm(d->tracker, i);
                n += vm->info.accel == VM_ACCEL_KVM && vm->info.qmp_socket[0];
        }
        if (n == 0) {
                if (d->qmp_scan_due) /* no sockets (any more): the source is empty */
                        qmp_publish(d, (bool[CONFIG_MAX_QMP]) { false }, now);
                d->qmp_scan_due = false;
                return;
        }
        jobs = calloc(n, sizeof(*jobs));
        if (!jobs)
                return;
        for (unsigned i = 0; i < n_sock; i++, k++) {
                jobs[k].kind = QMP_JOB_VM;
                jobs[k].slot = i;
                snprintf(jobs[k].socket, sizeof(jobs[k].socket), "%s", d->cfg.qmp_sockets[i]);
        }
        for (size_t i = 0; i < tracker_n_vms(d->tracker) && k < n; i++) {
                const struct vm_load *vm = tracker_vm(d->tracker, i);

                if (vm->info.accel != VM_ACCEL_KVM || !vm->info.qmp_socket[0])
                        continue;
                jobs[k].kind = QMP_JOB_HALT_POLL;
                jobs[k].pid = vm->info.pid;
                snprintf(jobs[k].socket, sizeof(jobs[k].socket), "%s", vm->info.qmp_socket);
                k++;
        }
        d->counters.qmp_queries += k;
        d->qmp_scan_due = false;
        if (d->qmp_worker && qmp_worker_submit(d->qmp_worker, jobs, k, d->cfg.qmp_timeout_ns) == 0)
                return;
        qmp_jobs_run(jobs, k, d->cfg.qmp_timeout_ns);
        qmp_answers(d, jobs, k, now);
        qmp_jobs_free(jobs, k);
}

static void qmp_cache_clear(struct daemon *d)
{
        for (unsigned i = 0; i < CONFIG_MAX_QMP; i++) {
                vm_info_done(&d->qmp_cache[i]);
                d->qmp_cache_valid[i] = false;
                d->qmp_cache_starttime[i] = 0;
                d->qmp_failing[i] = 0;
        }
}

static void discover(struct daemon *d, nsec_t now)
{
        int r;

        if (d->cfg.proc_scan) {
                struct vm_info *vms = NULL;
                size_t n = 0;

                unsigned before = d->procscan_stats.last_other_user;

                r = procscan_scan(d->cfg.procfs_root, &d->scan_users, &vms, &n, &d->procscan_stats);
                if (r < 0)
                        log_warning_errno(r, "procfs scan failed: %m, keeping the previous view.");
                else {
                        if (d->procscan_stats.last_other_user > before)
                                log_notice("procfs scan: %u process(es) with QEMU vCPU threads run by a user not in "
                                           "[QEMU] ProcScanUsers, ignored (e.g. pid %d, uid %u).",
                                           d->procscan_stats.last_other_user, (int) d->procscan_stats.last_other_pid,
                                           (unsigned) d->procscan_stats.last_other_uid);
                        r = tracker_set_source(d->tracker, VM_SOURCE_PROC, vms, n, now);
                        if (r < 0)
                                log_warning_errno(r, "Failed to apply procfs scan: %m");
                        vm_info_free_array(vms, n);
                }
        } else if (tracker_set_source(d->tracker, VM_SOURCE_PROC, NULL, 0, now) < 0)
                log_warning("Failed to clear the procfs source.");
        d->qmp_scan_due = true; /* the QMP sockets: in the next batch (qmp_dispatch) */
        d->next_scan_ns = now + d->cfg.proc_scan_interval_ns;
        d->scan_requested = false;
}

static void write_textfile(struct daemon *d)
{
        struct daemon_view v;
        struct strbuf sb;
        int r;

        if (!d->cfg.metrics_textfile[0])
                return;
        daemon_view(d, now_ns(), &v);
        strbuf_init(&sb);
        render_metrics(&v, &sb);
        /* No fsync: the rename is atomic, and a metrics file lost in a crash is
         * rewritten within a period; fsync would stall the loop on a slow disk. */
        r = sb.oom ? -ENOMEM : write_file_atomic_nosync(d->cfg.metrics_textfile, sb.data, sb.len, 0644);
        if (r < 0) {
                d->counters.metrics_write_errors++;
                /* Log the first failure of a streak only: this runs every period. */
                if (!d->metrics_failing)
                        log_warning_errno(r, "Failed to write metrics to %s: %m, will retry every period.",
                                          d->cfg.metrics_textfile);
                d->metrics_failing = true;
        } else if (d->metrics_failing) {
                log_info("Metrics textfile %s written again.", d->cfg.metrics_textfile);
                d->metrics_failing = false;
        }
        strbuf_free(&sb);
}

/*
 * Frequency invariance (load_scale): a vCPU's busy time in the period that
 * ends now ran at the capacity of the perf level the applied plan gave its
 * pCPU's frequency domain (the cap the applier wrote); the tracker scales it
 * by that capacity, so that util is in the planner's unit (1.0 = a CPU at the
 * top level) whatever the cap was.  Unscaled without an applier (advisory
 * plans: the caps are not ours), for a vCPU the plan did not place, and on a
 * pCPU without a cpufreq policy (a ModelFile's levels on a host without
 * cpufreq: nothing was capped, the pCPU ran at its one speed).
 */
static void feed_load_scale(struct daemon *d)
{
        const struct plan *p = acting(d) ? d->plan : NULL;

        for (size_t i = 0; i < tracker_n_vms(d->tracker); i++) {
                const struct vm_load *vm = tracker_vm(d->tracker, i);
                for (unsigned j = 0; j < vm->n_vcpus; j++)
                        tracker_set_load_scale(d->tracker, vm->info.pid, vm->vcpus[j].index, 0);
        }
        if (!p || !d->em)
                return;
        for (unsigned i = 0; i < p->n_vcpus; i++) {
                int c = p->vcpu_cpu[i]; /* plan_load_scale() checks it against the model's host */
                struct vcpu_ref r = vcpu_ref_of_key(p->vcpu_key[i]);

                if (c >= 0 && (!d->topo || (unsigned) c >= d->topo->n_cpus || d->topo->cpus[c].policy < 0))
                        continue;
                tracker_set_load_scale(d->tracker, r.pid, (int) r.index, plan_load_scale(d->em, p, i));
        }
}

/*
 * Hand the plan to the applier: vCPU pins, frequency caps, idle limits, as
 * plan_to_actions() gives them (the simulator takes the same), in the pins
 * input_pins() made for the plan's inputs.
 */
static void submit_plan(struct daemon *d, const struct plan_policy *pol, const struct plan *p, size_t n)
{
        struct apply_request *req = d->apply_scratch;
        const struct plan_actions *act;
        size_t w = 0, n_vcpu_pins;

        if (!d->actions)
                d->actions = calloc(1, sizeof(*d->actions));
        if (!d->actions || plan_to_actions(d->em, pol, d->plan, d->plan_in.v, d->plan_in.n, p, d->plan_scratch.v, n,
                                           d->actions) < 0) {
                log_warning("Applier: out of memory building the pin sets; this period's plan is not applied.");
                return;
        }
        act = d->actions;
        d->apply_scratch = NULL;
        for (size_t i = 0; i < act->n_vcpus; i++) {
                int cpu = act->pin[i].cpu;

                if (cpu == -1)
                        continue; /* not placed */
                req->pins[w] = req->pins[i];
                /* an excluded VM is let go: any pin we made goes back to its original */
                req->pins[w].cpu = cpu == PLAN_PIN_RELEASE ? APPLY_RELEASE : cpu;
                req->pins[w].set = act->set[i];
                w++;
        }
        /* The emulator threads of each VM (libvirt: its emulator pin; plain QEMU: the main
         * thread, which runs the main loop) follow the VM's first placed vCPU, so that a
         * packed VM does not keep waking a pCPU the plan put to sleep; they are let go only
         * with every vCPU of the VM (one vCPU left out, pinned by someone else, does not
         * take the emulator with it).  Inputs are grouped by VM, lowest vCPU first. */
        n_vcpu_pins = w;
        for (size_t i = 0; i < n_vcpu_pins; i++) {
                struct apply_pin *e;
                size_t k = i;

                if (i > 0 && req->pins[i - 1].pid == req->pins[i].pid)
                        continue;
                for (size_t x = i; x < n_vcpu_pins && req->pins[x].pid == req->pins[i].pid; x++)
                        if (req->pins[x].cpu >= 0) {
                                k = x;
                                break;
                        }
                e = &req->pins[w++];
                *e = req->pins[k];
                e->emulator = true;
                /* whichever vCPU it follows, the same pin (the applier matches pins by vCPU index too) */
                e->vcpu = ACTUATOR_EMULATOR;
                e->tid = e->uuid[0] ? 0 : e->pid;
        }
        req->n_pins = w;
        for (unsigned c = 0; c < req->n_cpus && c < act->n_cpus; c++) {
                if (!act->cpu[c].online)
                        continue;
                cpuset_set(&req->online, c);
                req->cpu_max_khz[c] = act->cpu[c].max_khz;
                req->cpu_latency_us[c] = act->cpu[c].latency_us;
        }
        applier_submit(d->applier, req);
}

/*
 * The apply request's vCPU pins for the plan inputs in, at the same
 * positions: libvirt's domains are pinned through libvirt, the rest by
 * affinity.  NULL without an applier or memory.
 */
static struct apply_request *input_pins(struct daemon *d, const struct plan_input *in)
{
        struct apply_request *req;
        const struct vm_load *vm = NULL;

        if (!d->applier)
                return NULL;
        req = apply_request_new(in->n + tracker_n_vms(d->tracker), d->em->n_cpus);
        for (size_t i = 0; req && i < in->n; i++) {
                struct vcpu_ref r = vcpu_ref_of_key(in->v[i].key);
                struct apply_pin *p = &req->pins[i];

                if (!vm || vm->info.pid != r.pid)
                        vm = tracker_find_vm(d->tracker, r.pid);
                if (vm && (vm->info.sources & VM_SOURCE_LIBVIRT) && vm->info.uuid[0])
                        snprintf(p->uuid, sizeof(p->uuid), "%s", vm->info.uuid);
                p->pid = r.pid;
                p->tid = in->tid[i];
                p->vcpu = r.index;
                p->cpu = -1;
        }
        return req;
}

/*
 * One plan: the planner's whole input from the tracker and the hint server
 * (plan_input_build: each VM's mode, budget and NUMA nodes, the CPU of every
 * excluded vCPU and of every vCPU the plan in force does not know, the
 * guests' hints), the plan, its application.  The inputs are built in the
 * scratch input and swapped in with the plan, so that the plan shown always
 * goes with its own inputs.
 */
static void plan_period(struct daemon *d, nsec_t now)
{
        struct plan_policy pol;
        struct plan *next = NULL;
        const struct vm_load **vms;
        size_t n_vms = tracker_n_vms(d->tracker);
        struct plan_input *in = &d->plan_scratch;
        struct plan_input_sources src = {
                .topo = d->topo,
                .n_cpus = d->em ? d->em->n_cpus : 0,
                .prev = d->plan,
                .now = now,
                .thread_cpu = input_thread_cpu,
                .pinned_by_others = input_pinned_by_others,
                .vm_hints = d->hints ? input_vm_hints : NULL,
                .numa_ignored = input_numa_ignored,
                .userdata = d,
        };
        nsec_t cpu0;
        int r;

        if (!d->em)
                return;
        vms = calloc(n_vms ? n_vms : 1, sizeof(*vms));
        if (!vms) {
                d->counters.plan_errors++;
                return;
        }
        for (size_t i = 0; i < n_vms; i++)
                vms[i] = tracker_vm(d->tracker, i);
        refresh_foreign(d);
        r = plan_input_build(in, vms, n_vms, &src);
        free(vms);
        if (r < 0) {
                d->counters.plan_errors++;
                return;
        }
        /* the pins that go with the inputs, in the same order (plan arrays follow the inputs) */
        apply_request_free(d->apply_scratch);
        d->apply_scratch = input_pins(d, in);
        d->counters.numa_ignored = in->numa_ignored;
        plan_policy_from_config(&d->cfg, &pol);
        cpu0 = thread_cputime_ns();
        r = plan_compute(d->em, &pol, in->v, in->n, in->hints, in->n_hints, d->plan, now, &next);
        d->counters.last_plan_cpu_ns = thread_cputime_ns() - cpu0;
        if (r < 0) {
                if (d->counters.plan_errors++ == 0)
                        log_warning_errno(r, "Planning failed: %m, keeping the previous plan.");
                return;
        }
        d->counters.plans++;
        if (!d->plan || next->why.decision != PLAN_KEEP || next->why.n_active != d->plan->why.n_active) {
                /* A decision that moves vCPUs is worth a line at info level when it is acted on,
                 * and in a dry run (that is what a dry run is for). */
                bool moved = next->why.moves > 0 && (d->applier || d->opts.dry_run);

                log_full_errno(moved ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG, 0,
                         "%sPlan: %s, %u active pCPUs, %u vCPU moves, modelled %.0f mW (spread %.0f mW): %s",
                         d->opts.dry_run ? "Dry run: " : "", plan_decision_to_string(next->why.decision),
                         next->why.n_active, next->why.moves, next->why.plan_mw, next->why.spread_mw,
                         next->why.text);
        }
        if (d->applier && d->apply_scratch)
                submit_plan(d, &pol, next, in->n);
        hints_grant(d, next, now);
        plan_free(d->plan);
        d->plan = next;
        plan_input_swap(&d->plan_in, &d->plan_scratch);
}

/* A cpulist for a log line: "0-3,8", "-" for none, "N CPUs" when too long for buf. */
static const char *online_list(const cpuset_t *s, char *buf, size_t size)
{
        if (cpuset_empty(s))
                snprintf(buf, size, "-");
        else if (cpuset_format_list(s, buf, size) < 0)
                snprintf(buf, size, "%u CPUs", cpuset_count(s));
        return buf;
}

/*
 * Does the applier's power driver, made for old, not fit new: a dry run's CPU count, or a cpufreq
 * policy it does not know (a CPU back online whose policy was inactive, so left out, when the
 * driver was made; related CPUs changed).  A policy that went inactive (every CPU of it offline:
 * topology.c leaves it out) is only no longer planned: the driver keeps it.
 */
static bool applier_outdated(const struct daemon *d, const struct host_state *new)
{
        const struct topology *a = d->topo, *b = new->topo;

        if (d->opts.dry_run && (!d->em || !new->em || d->em->n_cpus != new->em->n_cpus))
                return true;
        for (unsigned i = 0; i < b->n_policies; i++) {
                unsigned j = 0;
                while (j < a->n_policies && a->policies[j].id != b->policies[i].id)
                        j++;
                if (j == a->n_policies || !cpuset_equal(&a->policies[j].related_cpus, &b->policies[i].related_cpus))
                        return true;
        }
        return false;
}

/* A failed check or re-read: counted, logged once a streak, tried again after a backoff. */
static void topology_failed(struct daemon *d, nsec_t now)
{
        unsigned shift = MIN(d->topo_fail_streak, 5u);
        nsec_t wait = MIN(d->cfg.period_ns << shift, 60 * NSEC_PER_SEC);

        d->counters.topology_errors++;
        d->topo_fail_streak++;
        d->topo_retry_ns = now + wait;
}

/*
 * CPU hotplug: an operator or RAS daemon took a CPU offline or brought one
 * online under the running daemon.  Each period the online set is read (one
 * small sysfs file) and compared with the one the topology was read after;
 * when it differs, the topology, pCPU sampler and energy model are read
 * again through the start-up and reload path (host_build(), host_commit():
 * the previous plan is dropped, the next one is made on the CPUs online now,
 * so no vCPU is placed on a CPU that is gone and one that came back is used).
 * The applier keeps running and the new plan re-pins, unless its power
 * driver no longer fits the host (applier_outdated()): then it restores its
 * journal and a new one starts.  A failed check or re-read keeps the running
 * topology, is counted, logged once a streak, and retried after a backoff
 * (topology_failed()).
 */
static void topology_check(struct daemon *d, nsec_t t)
{
        char was[128], now[128];
        bool failing = d->topo_fail_streak > 0;
        struct host_state h;
        cpuset_t online;
        int r;

        if (failing && t < d->topo_retry_ns)
                return;
        r = topology_read_online(d->cfg.sysfs_root, &online);
        if (r >= 0 && cpuset_equal(&online, &d->topo_online)) {
                if (failing)
                        log_info("Online CPUs %s read again below %s, as the running topology has them.",
                                 online_list(&online, now, sizeof(now)), d->cfg.sysfs_root);
                d->topo_fail_streak = 0;
                return;
        }
        if (r < 0) {
                if (!failing)
                        log_warning_errno(r, "Failed to read the online CPUs below %s: %m; planning on CPUs %s as "
                                          "before, checking again with a backoff (up to 60 s).", d->cfg.sysfs_root,
                                          online_list(&d->topo_online, was, sizeof(was)));
                topology_failed(d, t);
                return;
        }
        r = host_build(&d->cfg, failing ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERR, &h); /* why: once a streak */
        if (r < 0) {
                if (!failing)
                        log_warning("Online CPUs changed from %s to %s, but the host topology could not be read "
                                    "again: planning on the old one, retrying with a backoff (up to 60 s).",
                                    online_list(&d->topo_online, was, sizeof(was)), online_list(&online, now, sizeof(now)));
                topology_failed(d, t);
                return;
        }
        d->counters.topology_changes++;
        log_notice("Online CPUs changed from %s to %s: host topology read again (%u cores, %u LLCs, %u packages "
                   "online); planning on the CPUs online now.", online_list(&d->topo_online, was, sizeof(was)),
                   online_list(&h.online, now, sizeof(now)), h.topo->n_cores, h.topo->n_llcs, h.topo->n_packages);
        if (d->applier && applier_outdated(d, &h)) {
                log_info("The applier's power driver was made for the old CPUs: restoring its journal, then "
                         "starting it again.");
                retire_applier(d); /* reap_applier() starts the new one once the restore is done */
        }
        host_commit(d, &d->cfg, &h);
}

void daemon_period(struct daemon *d, nsec_t now)
{
        nsec_t cpu0 = thread_cputime_ns();
        int r;

        if (d->scan_requested || now >= d->next_scan_ns)
                discover(d, now);
        qmp_collect(d, now);
        qmp_dispatch(d, now);
        feed_load_scale(d);
        (void) tracker_sample(d->tracker, now);
        /* after the sample: the last period's load is scaled by the plan it ran under */
        topology_check(d, now);
        hints_period(d, now);
        reap_applier(d, false);
        plan_period(d, now);
        r = pcpu_stat_sample(d->pcpu, now);
        if (r < 0)
                log_debug_errno(r, "pCPU sampling failed: %m");
        write_textfile(d);
        if (control_server_expire(d->control, now) > 0)
                d->batch_invalid = true;
        d->counters.periods++;
        d->counters.last_period_cpu_ns = thread_cputime_ns() - cpu0;
        d->counters.last_period_wall_ns = now_ns() - now;
        d->last_period_ns = now;
}

static void once_report(struct daemon *d)
{
        struct daemon_view v;
        struct strbuf sb;

        daemon_view(d, now_ns(), &v);
        strbuf_init(&sb);
        render_status(&v, false, &sb);
        strbuf_puts(&sb, "\n");
        render_cpus(&v, false, &sb);
        strbuf_puts(&sb, "\n");
        render_vms(&v, false, &sb);
        fputs(sb.data ? sb.data : "", stdout);
        fflush(stdout);
        strbuf_free(&sb);
}

static void timer_event(struct io_watch *w, uint32_t events)
{
        struct daemon *d = container_of(w, struct daemon, timer_watch);
        uint64_t expirations;
        nsec_t now;

        if (read(w->fd, &expirations, sizeof(expirations)) != sizeof(expirations))
                return;
        if (expirations > 1)
                d->counters.overruns += expirations - 1;
        now = now_ns();
        /* --once: wait (bounded) for libvirt's first snapshot, then two
         * periods so that every vCPU has a measured utilisation. */
        if (d->opts.once && d->libvirt && !d->libvirt_snapshot_seen && now - d->start_ns < ONCE_LIBVIRT_WAIT_NS)
                return;
        /* and for the QMP worker's first answers (each query is bounded by QMPTimeout) */
        if (d->opts.once && d->qmp_worker && qmp_worker_busy(d->qmp_worker) && d->counters.periods >= 1 &&
            !qmp_worker_wait(d->qmp_worker, d->cfg.qmp_timeout_ns * (MIN(d->cfg.n_qmp_sockets, CONFIG_MAX_QMP) + 1)))
                return;
        daemon_period(d, now);
        if (d->opts.once && d->counters.periods >= 2) {
                once_report(d);
                d->quit = true;
        }
}

/* The watchdog has a timer of its own at half of WatchdogSec, so that a long
 * ControlPeriod does not trip it; it proves the event loop turns. */
static void watchdog_event(struct io_watch *w, uint32_t events)
{
        uint64_t expirations;

        if (read(w->fd, &expirations, sizeof(expirations)) == sizeof(expirations))
                (void) notify_send("WATCHDOG=1");
}

static int start_watchdog(struct daemon *d)
{
        uint64_t usec = notify_watchdog_usec() / 2;
        struct itimerspec its = {
                .it_interval = { .tv_sec = (time_t) (usec / 1000000), .tv_nsec = (long) (usec % 1000000) * 1000 },
        };
        int fd, r;

        if (usec == 0)
                return 0;
        its.it_value = its.it_interval;
        fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (timerfd_settime(fd, 0, &its, NULL) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        r = io_watch_add(d->epoll_fd, &d->watchdog_watch, fd, EPOLLIN, watchdog_event);
        if (r < 0) {
                close(fd);
                return r;
        }
        d->watchdog_fd = fd;
        return 0;
}

static void signal_event(struct io_watch *w, uint32_t events)
{
        struct daemon *d = container_of(w, struct daemon, signal_watch);
        struct signalfd_siginfo si;

        if (read(w->fd, &si, sizeof(si)) != sizeof(si))
                return;
        switch (si.ssi_signo) {
        case SIGTERM:
        case SIGINT:
                log_info("Received %s, exiting.", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
                d->quit = true;
                break;
        case SIGHUP:
                log_info("Received SIGHUP, reloading configuration.");
                (void) daemon_reload(d);
                break;
        default:
                break;
        }
}

static int daemon_init(struct daemon *d, const struct daemon_options *opts)
{
        struct config_error err = { 0 };
        struct vp_config cfg;
        sigset_t mask;
        int r;

        *d = (struct daemon) { .epoll_fd = -1, .signal_fd = -1, .timer_fd = -1, .watchdog_fd = -1, .instance_fd = -1,
                               .opts = *opts };
        snprintf(d->config_path, sizeof(d->config_path), "%s",
                 opts->config_path ? opts->config_path : VMMPOWER_SYSCONFDIR "/vmmpower.conf");
        d->start_ns = now_ns();
        d->start_realtime_ns = now_realtime_ns();

        r = daemon_load_config(opts, &cfg, &err);
        if (r < 0) {
                log_config_error(&err);
                return r;
        }
        log_set_max_level(cfg.log_level);

        /* One daemon per state directory, in every mode (--dry-run and --once
         * too): before the journal, the control socket and the hint channels. */
        r = take_instance_lock(&cfg, true);
        if (r < 0)
                return r;
        d->instance_fd = r;
        snprintf(d->instance_dir, sizeof(d->instance_dir), "%s", cfg.state_dir);

        /* A journal left by a previous run that died: put the host back first.
         * Failures are logged and the entries kept; the daemon starts anyway. */
        if (!opts->dry_run)
                (void) restore_journal_counted(d, &cfg);

        d->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (d->epoll_fd < 0)
                return log_error_errno(errno, "epoll_create1 failed: %m");

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "sigprocmask failed: %m");
        signal(SIGPIPE, SIG_IGN);
        /* The signalfd itself is made in daemon_run(), after any daemonizing
         * fork: epoll does not report signals of a child on a signalfd its
         * parent created.  Until then the signals stay blocked and pending. */

        d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (d->timer_fd < 0)
                return log_error_errno(errno, "timerfd_create failed: %m");
        r = io_watch_add(d->epoll_fd, &d->timer_watch, d->timer_fd, EPOLLIN, timer_event);
        if (r < 0)
                return r;

        r = daemon_apply_config(d, &cfg, true);
        if (r < 0)
                return r;
        /* Guest hints: [Hints] defaults; per-VM metadata overrides them in hints_period(). */
        r = hints_configure(d, now_ns());
        if (r < 0)
                return r;
        log_info("Host: %u CPUs online, %u packages, %u cores, %u LLCs, cpuidle driver %s, %u cpufreq policies.",
                 cpuset_count(&d->topo->online), d->topo->n_packages, d->topo->n_cores, d->topo->n_llcs,
                 d->topo->cpuidle_driver[0] ? d->topo->cpuidle_driver : "none", d->topo->n_policies);
        return 0;
}

int daemon_run(struct daemon *d)
{
        uint64_t wd_usec;
        int r;

        /* Threads and the signalfd start here, after any daemonizing fork. */
        if (d->signal_fd < 0) {
                sigset_t mask;

                sigemptyset(&mask);
                sigaddset(&mask, SIGTERM);
                sigaddset(&mask, SIGINT);
                sigaddset(&mask, SIGHUP);
                d->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
                if (d->signal_fd < 0)
                        return log_error_errno(errno, "signalfd failed: %m");
                r = io_watch_add(d->epoll_fd, &d->signal_watch, d->signal_fd, EPOLLIN, signal_event);
                if (r < 0)
                        return log_error_errno(r, "Failed to watch the signalfd: %m");
        }
        r = start_libvirt(d);
        if (r < 0)
                log_warning("Continuing without libvirt discovery.");
        r = qmp_worker_new(&d->qmp_worker);
        if (r < 0)
                log_warning_errno(r, "Failed to start the QMP worker thread: %m; QMP queries run on the loop.");
        d->running = true;
        start_applier(d);
        r = arm_timer(d);
        if (r < 0)
                return log_error_errno(r, "Failed to arm the period timer: %m");
        /* First discovery and a first sample right away: utilisation needs two. */
        daemon_period(d, now_ns());

        wd_usec = notify_watchdog_usec();
        r = start_watchdog(d);
        if (r < 0)
                return log_error_errno(r, "Failed to start the watchdog timer (WatchdogSec=%llu us): %m",
                                       (unsigned long long) wd_usec);
        (void) notify_send("READY=1\nSTATUS=Tracking vCPUs");
        log_info("vmmpowerd running%s: period %lld ms, control socket %s.",
                 d->opts.dry_run ? " in dry-run mode" : "", (long long) (d->cfg.period_ns / NSEC_PER_MSEC),
                 d->cfg.control_socket);

        while (!d->quit) {
                struct epoll_event ev[16];
                int n = epoll_wait(d->epoll_fd, ev, (int) ELEMENTSOF(ev), -1);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(errno, "epoll_wait failed: %m");
                }
                /* A handler that frees watches (reload, client expiry) ends the
                 * batch: later entries may point at them.  epoll is level-triggered,
                 * so whatever was left is reported again. */
                d->batch_invalid = false;
                for (int i = 0; i < n && !d->quit && !d->batch_invalid; i++) {
                        struct io_watch *w = ev[i].data.ptr;
                        w->fn(w, ev[i].events);
                }
                control_server_free(d->retired_control);
                d->retired_control = NULL;
                if (d->hint_replan && !d->quit) {
                        nsec_t now = now_ns();

                        if (now - d->last_hint_replan_ns >= HINT_REPLAN_MIN_NS) {
                                d->hint_replan = false;
                                d->last_hint_replan_ns = now;
                                d->counters.hint_replans++;
                                plan_period(d, now);
                        }
                }
        }
        (void) notify_send("STOPPING=1");
        return 0;
}

static void daemon_done(struct daemon *d)
{
        d->running = false; /* reap_applier() starts no new applier */
        retire_applier(d);
        reap_applier(d, true);
        qmp_worker_free(d->qmp_worker); /* waits for the query in progress, at most QMPTimeout */
        d->qmp_worker = NULL;
        stop_libvirt(d);
        hint_server_free(d->hints);
        d->hints = NULL;
        qmp_cache_clear(d);
        plan_free(d->plan);
        d->plan = NULL;
        plan_input_done(&d->plan_in);
        plan_input_done(&d->plan_scratch);
        free(d->foreign);
        d->foreign = NULL;
        d->n_foreign = 0;
        if (d->actions)
                plan_actions_done(d->actions);
        free(d->actions);
        d->actions = NULL;
        em_host_free(d->em);
        d->em = NULL;
        control_server_free(d->control);
        d->control = NULL;
        control_server_free(d->retired_control);
        d->retired_control = NULL;
        tracker_free(d->tracker);
        d->tracker = NULL;
        pcpu_stat_free(d->pcpu);
        d->pcpu = NULL;
        coexist_report_clear(&d->coexist);
        topology_free(d->topo);
        d->topo = NULL;
        if (d->timer_fd >= 0)
                close(d->timer_fd);
        if (d->watchdog_fd >= 0)
                close(d->watchdog_fd);
        if (d->signal_fd >= 0)
                close(d->signal_fd);
        if (d->epoll_fd >= 0)
                close(d->epoll_fd);
        d->timer_fd = d->signal_fd = d->epoll_fd = d->watchdog_fd = -1;
        /* A stale textfile would report a stopped daemon's last plan as current;
         * only the daemon holding the instance lock wrote it. */
        if (d->instance_fd >= 0 && d->cfg.metrics_textfile[0] && unlink(d->cfg.metrics_textfile) < 0 &&
            errno != ENOENT)
                log_warning_errno(errno, "Failed to remove the metrics textfile %s: %m, ignoring.",
                                  d->cfg.metrics_textfile);
        /* Last: the next daemon may start once the host is restored and the socket gone. */
        instance_unlock(d->instance_fd, d->instance_dir);
        d->instance_fd = -1;
}

int daemon_new(const struct daemon_options *opts, struct daemon **ret)
{
        struct daemon *d = malloc(sizeof(*d));
        int r;

        if (!d)
                return log_error_errno(-ENOMEM, "Failed to allocate the daemon: %m");
        r = daemon_init(d, opts);
        if (r < 0) {
                daemon_free(d);
                return r;
        }
        *ret = d;
        return 0;
}

struct daemon *daemon_free(struct daemon *d)
{
        if (!d)
                return NULL;
        daemon_done(d);
        free(d);
        return NULL;
}

int daemon_exit_status(const struct daemon *d)
{
        return d->exit_status;
}

int daemon_write_pid(struct daemon *d)
{
        int r = instance_lock_write_pid(d->instance_fd);

        if (r < 0)
                log_warning_errno(r, "Failed to write the pid to %s/%s: %m, ignoring.", d->instance_dir,
                                  INSTANCE_LOCK_FILE);
        return r;
}

/* Configured QMP sockets whose last query failed. */
static unsigned qmp_failing_count(const struct daemon *d)
{
        unsigned n = 0;

        for (unsigned i = 0; i < d->cfg.n_qmp_sockets && i < CONFIG_MAX_QMP; i++)
                n += d->qmp_failing[i] > 0;
        return n;
}

void daemon_view(struct daemon *d, nsec_t now, struct daemon_view *ret)
{
        *ret = (struct daemon_view) {
                .now = now,
                .start_ns = d->start_ns,
                .start_realtime_ns = d->start_realtime_ns,
                .dry_run = d->opts.dry_run,
                .config_path = d->config_path,
                .cfg = &d->cfg,
                .topo = d->topo,
                .tracker = d->tracker,
                .pcpu = d->pcpu,
                .hints = d->hints,
                .em = d->em,
                .model_source = d->model_source,
                .plan = d->plan,
                .plan_in = &d->plan_in,
                .counters = &d->counters,
                .coexist = &d->coexist,
                .procscan_stats = &d->procscan_stats,
                .qmp_failing = qmp_failing_count(d),
                .topology_stale = d->topo_fail_streak > 0,
                .applier = acting(d),
                .simulated = d->applier && !acting(d),
                .libvirt = d->libvirt != NULL,
                .foreign = d->foreign,
                .n_foreign = d->n_foreign,
        };
        /* kept by the applier's and the libvirt source's threads under their locks: copied */
        if (d->applier)
                applier_get_stats(d->applier, ret->applier ? &ret->apply : &ret->sim_apply);
        if (d->libvirt)
                libvirt_src_get_stats(d->libvirt, &ret->libvirt_stats);
}
