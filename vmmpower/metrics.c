/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Prometheus text exposition format (version 0.0.4).  Served by
 * `vmmpowerctl metrics` and written atomically to the node-exporter
 * textfile collector directory when [Metrics] TextfilePath is set.  Label
 * values are escaped as the format requires (backslash, quote, newline);
 * VM names come from libvirt or the QEMU command line and are not trusted.
 *
 * Per-VM series carry the labels prometheus-libvirt-exporter uses, domain
 * (the libvirt name) and uuid, plus vcpu for per-vCPU series: they join with
 * libvirt_* series of the same host.  No pid label: it changes on every VM
 * restart and would start a new series each time.  Watts are modelled by the
 * energy model (docs/energy-model.md), not measured.  The list of metrics and
 * what a fleet engine does with them: docs/fleet.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "apply.h"
#include "config.h"
#include "daemon_view.h"
#include "guest_hint.h"
#include "journal.h"
#include "libvirt_src.h"
#include "pcpu_stat.h"
#include "placement.h"
#include "plan_input.h"
#include "power_driver.h"
#include "procscan.h"
#include "topology.h"
#include "vcpu_track.h"
#include "version.h"

static void label_value(struct strbuf *out, const char *s)
{
        for (; *s; s++) {
                if (*s == '\\')
                        strbuf_puts(out, "\\\\");
                else if (*s == '"')
                        strbuf_puts(out, "\\\"");
                else if (*s == '\n')
                        strbuf_puts(out, "\\n");
                else
                        strbuf_append(out, s, 1);
        }
}

static void header(struct strbuf *out, const char *name, const char *type, const char *help)
{
        strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * domain="NAME",uuid="UUID" (no braces): a VM's identity as libvirt exporters label it.  Two VMs
 * with one name and uuid (plain QEMUs with one -name and no -uuid; libvirt refuses both) would
 * write the same series twice, and node-exporter's textfile collector drops a file with a
 * duplicate series whole: their domain says which pid it is, "NAME [pid N]".
 */
static void vm_labels(struct strbuf *out, const struct vm_load *vm)
{
        strbuf_puts(out, "domain=\"");
        label_value(out, vm->info.name);
        if (vm->label_shared)
                strbuf_printf(out, " [pid %d]", (int) vm->info.pid);
        strbuf_puts(out, "\",uuid=\"");
        label_value(out, vm->info.uuid);
        strbuf_puts(out, "\"");
}

static void vcpu_labels(struct strbuf *out, const struct vm_load *vm, const struct vcpu_load *v)
{
        strbuf_puts(out, "{");
        vm_labels(out, vm);
        strbuf_printf(out, ",vcpu=\"%d\"}", v->index);
}

typedef double (*vcpu_value_fn)(const struct vcpu_load *v, bool *ok);

static double v_util(const struct vcpu_load *v, bool *ok)
{
        *ok = v->valid;
        return v->util;
}
static double v_util_avg(const struct vcpu_load *v, bool *ok)
{
        *ok = v->valid;
        return v->util_avg;
}
static double v_wait(const struct vcpu_load *v, bool *ok)
{
        *ok = v->valid;
        return v->wait_ratio;
}
static double v_wait_avg(const struct vcpu_load *v, bool *ok)
{
        *ok = v->valid;
        return v->wait_avg;
}
static double v_halt_poll(const struct vcpu_load *v, bool *ok)
{
        *ok = v->valid && v->has_halt_poll;
        return v->halt_poll_ratio;
}
static double v_run_s(const struct vcpu_load *v, bool *ok)
{
        *ok = v->valid || v->last.run_ns > 0;
        return (double) v->last.run_ns / NSEC_PER_SEC;
}
static double v_wait_s(const struct vcpu_load *v, bool *ok)
{
        *ok = v->valid || v->last.run_ns > 0;
        return (double) v->last.wait_ns / NSEC_PER_SEC;
}

static void vcpu_family(const struct daemon_view *d, struct strbuf *out, const char *name, const char *type,
                        const char *help, vcpu_value_fn fn)
{
        header(out, name, type, help);
        for (size_t i = 0; i < tracker_n_vms(d->tracker); i++) {
                const struct vm_load *vm = tracker_vm(d->tracker, i);
                for (unsigned j = 0; j < vm->n_vcpus; j++) {
                        bool ok;
                        double val = fn(&vm->vcpus[j], &ok);
                        if (!ok)
                                continue;
                        strbuf_puts(out, name);
                        vcpu_labels(out, vm, &vm->vcpus[j]);
                        /* Counters keep ns resolution: %.6g would lose it past ~11 days. */
                        strbuf_printf(out, strcmp(type, "counter") == 0 ? " %.9f\n" : " %.6g\n", val);
                }
        }
}

static void counter(struct strbuf *out, const char *name, const char *help, uint64_t v)
{
        header(out, name, "counter", help);
        strbuf_printf(out, "%s %" PRIu64 "\n", name, v);
}

static void gauge(struct strbuf *out, const char *name, const char *help, double v)
{
        header(out, name, "gauge", help);
        strbuf_printf(out, "%s %.6g\n", name, v);
}

static void render_vcpu_metrics(const struct daemon_view *d, struct strbuf *out)
{
        vcpu_family(d, out, "vmmpower_vcpu_utilization_ratio", "gauge",
                    "On-CPU share of the last control period, halt polling excluded.", v_util);
        vcpu_family(d, out, "vmmpower_vcpu_utilization_avg_ratio", "gauge",
                    "Decayed average of vmmpower_vcpu_utilization_ratio.", v_util_avg);
        vcpu_family(d, out, "vmmpower_vcpu_wait_ratio", "gauge",
                    "Run-queue wait per wall time over the last period (what the guest sees as steal).",
                    v_wait);
        vcpu_family(d, out, "vmmpower_vcpu_wait_avg_ratio", "gauge",
                    "Decayed run-queue wait per wall time ([Tracking] LoadHalfLife), compared with "
                    "vmmpower_wait_budget_ratio by the planner.", v_wait_avg);
        vcpu_family(d, out, "vmmpower_vcpu_halt_poll_ratio", "gauge",
                    "KVM halt polling per wall time over the last period, where KVM publishes it.",
                    v_halt_poll);
        vcpu_family(d, out, "vmmpower_vcpu_run_seconds_total", "counter",
                    "On-CPU time of the vCPU thread (schedstat).", v_run_s);
        vcpu_family(d, out, "vmmpower_vcpu_wait_seconds_total", "counter",
                    "Run-queue wait of the vCPU thread (schedstat).", v_wait_s);
}

static void render_cpu_metrics(const struct daemon_view *d, struct strbuf *out)
{
        const struct topology *t = d->topo;

        header(out, "vmmpower_cpu_busy_ratio", "gauge", "Busy share of the last period per pCPU (/proc/stat).");
        for (unsigned cpu = 0; cpu < t->n_cpus; cpu++) {
                const struct pcpu_load *l = d->pcpu ? pcpu_stat_load(d->pcpu, cpu) : NULL;
                if (l)
                        strbuf_printf(out, "vmmpower_cpu_busy_ratio{cpu=\"%u\"} %.6g\n", cpu, l->busy_ratio);
        }
        header(out, "vmmpower_cpu_idle_state_residency_ratio", "gauge",
               "Share of the last period each pCPU spent in each cpuidle state.");
        for (unsigned cpu = 0; cpu < t->n_cpus; cpu++) {
                const struct pcpu_load *l = d->pcpu ? pcpu_stat_load(d->pcpu, cpu) : NULL;
                if (!l)
                        continue;
                for (unsigned s = 0; s < t->cpus[cpu].n_idle_states; s++) {
                        strbuf_printf(out, "vmmpower_cpu_idle_state_residency_ratio{cpu=\"%u\",state=\"", cpu);
                        label_value(out, t->cpus[cpu].idle[s].name);
                        strbuf_printf(out, "\"} %.6g\n", l->state_residency[s]);
                }
        }
        header(out, "vmmpower_cpu_idle_state_seconds_total", "counter",
               "Time each pCPU spent in each cpuidle state (cpuidle stateN/time).");
        for (unsigned cpu = 0; cpu < t->n_cpus; cpu++) {
                const struct pcpu_sample *raw = d->pcpu ? pcpu_stat_raw(d->pcpu, cpu) : NULL;
                if (!raw)
                        continue;
                for (unsigned s = 0; s < raw->n_states && s < t->cpus[cpu].n_idle_states; s++) {
                        strbuf_printf(out, "vmmpower_cpu_idle_state_seconds_total{cpu=\"%u\",state=\"", cpu);
                        label_value(out, t->cpus[cpu].idle[s].name);
                        strbuf_printf(out, "\"} %.6f\n", (double) raw->state_time_us[s] / 1e6);
                }
        }
}

static uint64_t hint_family_value(size_t f, const struct hint_vm_status *st)
{
        uint64_t v = 0;

        switch (f) {
        case 0: return st->connected;
        case 1: return st->counters.lines;
        case 2: return st->counters.accepted;
        case 3: return st->counters.clamped;
        case 4:
                for (unsigned r = 0; r < _HINT_REJECT_MAX; r++)
                        v += st->counters.rejected[r];
                return v;
        case 5: return st->counters.actuations;
        case 6: return st->counters.rate_limited;
        case 7: return st->counters.boost_denied;
        case 8: return st->counters.stale;
        default: return st->io.grants_sent;
        }
}

static void render_hint_metrics(const struct daemon_view *d, struct strbuf *out)
{
        static const struct {
                const char *name, *type, *help;
        } fam[] = {
                { "vmmpower_hint_connected", "gauge", "1 while the VM's hint channel is connected." },
                { "vmmpower_hint_lines_total", "counter", "Lines received on the VM's hint channel." },
                { "vmmpower_hint_accepted_total", "counter", "Hints accepted (possibly clamped)." },
                { "vmmpower_hint_clamped_total", "counter", "Hints accepted with a value clamped by policy." },
                { "vmmpower_hint_rejected_total", "counter", "Lines rejected (syntax, range, vCPU, trust...)." },
                { "vmmpower_hint_actuations_total", "counter", "Hints that got a token and may actuate." },
                { "vmmpower_hint_rate_limited_total", "counter", "State-changing hints over the token bucket." },
                { "vmmpower_hint_boost_denied_total", "counter", "Boosts (or parts) over the VM's boost budget." },
                { "vmmpower_hint_stale_total", "counter", "Handshakes marked stale after a silence." },
                { "vmmpower_hint_grants_total", "counter", "GRANT lines sent to the guest." },
        };

        if (!d->hints)
                return;
        for (size_t f = 0; f < ELEMENTSOF(fam); f++) {
                header(out, fam[f].name, fam[f].type, fam[f].help);
                for (size_t i = 0; i < hint_server_n_vms(d->hints); i++) {
                        struct hint_vm_status st;
                        const struct vm_load *vm;

                        if (hint_server_vm_status_at(d->hints, i, &st) < 0 ||
                            !(vm = tracker_find_vm(d->tracker, st.pid)))
                                continue;
                        strbuf_printf(out, "%s{", fam[f].name);
                        vm_labels(out, vm);
                        strbuf_printf(out, "} %" PRIu64 "\n", hint_family_value(f, &st));
                }
        }
}

/*
 * Online pCPUs packed vCPUs may use: online minus the CPUs the plan gives a
 * spread, dedicated (with its SMT siblings) or excluded vCPU.  The plan's
 * vCPUs are in the order of d->plan_in->v (its inputs).
 */
static unsigned packable_cpus(const struct daemon_view *d)
{
        const struct plan *p = d->plan;
        cpuset_t set = d->topo->online;

        for (unsigned i = 0; p && i < p->n_vcpus && i < d->plan_in->n; i++) {
                int c = p->vcpu_cpu[i];

                if (c < 0 || (unsigned) c >= d->topo->n_cpus || d->plan_in->v[i].mode == PLACE_PACK)
                        continue;
                cpuset_clear(&set, (unsigned) c);
                if (d->plan_in->v[i].mode != PLACE_DEDICATED)
                        continue;
                for (int s = cpuset_next(&d->topo->cpus[c].smt_siblings, 0); s >= 0;
                     s = cpuset_next(&d->topo->cpus[c].smt_siblings, (unsigned) s + 1))
                        cpuset_clear(&set, (unsigned) s);
        }
        return cpuset_count(&set);
}

/* One gauge per pack set with CPUs (label llc): the double at offset off of its struct plan_set. */
static void set_gauge(struct strbuf *out, const struct plan *p, const char *name, const char *help, size_t off)
{
        header(out, name, "gauge", help);
        for (unsigned g = 0; g < p->n_llcs; g++)
                if (p->set[g].cpus > 0)
                        strbuf_printf(out, "%s{llc=\"%u\"} %.6g\n", name, g,
                                      *(const double *) ((const char *) &p->set[g] + off));
}

/*
 * The wait model's word on each LLC's pack set of the plan p (placement.h
 * struct plan_set; latency profile: [Planner] QueueBudgetPercent), only for
 * sets with CPUs: a set without CPUs has nothing to queue on, and a 0 there
 * would read as "no wake-up queued".  llc is the planner's LLC index, the LLC
 * column of `vmmpowerctl plan`.  "measured" is the share of wake-ups the
 * run-queue wait of the set's vCPUs stands for (the previous plan's set);
 * predicted, the model's for the set as planned, its correction included.
 */
void render_pack_set_metrics(const struct plan *p, struct strbuf *out)
{
        static const char *const kinds[] = { "predicted", "measured" };
        bool any = false;

        for (unsigned g = 0; p && p->set && g < p->n_llcs; g++)
                any |= p->set[g].cpus > 0;
        if (!any)
                return;
        header(out, "vmmpower_pack_set_cpus", "gauge", "CPUs in the LLC's pack set of the current plan.");
        for (unsigned g = 0; g < p->n_llcs; g++)
                if (p->set[g].cpus > 0)
                        strbuf_printf(out, "vmmpower_pack_set_cpus{llc=\"%u\"} %u\n", g, p->set[g].cpus);
        header(out, "vmmpower_pack_set_queued_ratio", "gauge",
               "Share of the pack set's vCPU wake-ups that find every CPU of the set busy: predicted by the wait "
               "model for the current plan, or measured (what its vCPUs' run-queue wait stands for).");
        for (unsigned g = 0; g < p->n_llcs; g++)
                for (unsigned k = 0; k < 2 && p->set[g].cpus > 0; k++) {
                        double v = k ? p->set[g].measured : p->set[g].pwait;
                        if (isfinite(v))
                                strbuf_printf(out, "vmmpower_pack_set_queued_ratio{llc=\"%u\",kind=\"%s\"} %.6g\n",
                                              g, kinds[k], v);
                }
        set_gauge(out, p, "vmmpower_pack_set_queue_budget_ratio",
                  "Share of wake-ups the pack set may queue: [Planner] QueueBudgetPercent or a tighter VM's budget.",
                  offsetof(struct plan_set, budget));
        set_gauge(out, p, "vmmpower_pack_set_model_correction",
                  "Closed-loop correction of the wait model for the pack set (1 = as modelled, up to 16).",
                  offsetof(struct plan_set, corr));
}

/* The plan in watts and pCPUs: what a fleet engine reads (docs/fleet.md). */
static void render_plan_metrics(const struct daemon_view *d, struct strbuf *out)
{
        const struct plan *p = d->plan;

        gauge(out, "vmmpower_cpus_online", "Online pCPUs of the host.", cpuset_count(&d->topo->online));
        gauge(out, "vmmpower_plans_applied",
              "1 while plans are applied to the host; 0 while advisory (dry run, Apply = no, applier not started).",
              d->applier ? 1 : 0);
        gauge(out, "vmmpower_dry_run", "1 when the daemon runs with --dry-run (nothing on the host is changed).",
              d->dry_run ? 1 : 0);
        gauge(out, "vmmpower_numa_binding_ignored_vms",
              "VMs whose <numatune> memory nodes have no online CPU here (or do not parse): packed on any node.",
              (double) d->counters->numa_ignored);
        gauge(out, "vmmpower_wait_budget_ratio",
              "Run-queue wait per wall time a vCPU may have before the plan grows ([Planner] WaitBudgetPercent).",
              d->cfg->wait_budget_pct / 100.0);
        if (!p)
                return; /* planner off or no plan yet: no modelled watts */
        render_pack_set_metrics(p, out);
        gauge(out, "vmmpower_plan_watts",
              "Modelled host power (energy model, not measured) of the current plan under the current load.",
              p->why.plan_mw / 1000.0);
        gauge(out, "vmmpower_spread_watts",
              "Modelled host power of spreading the same vCPUs one per core (what the host would draw unpacked).",
              p->why.spread_mw / 1000.0);
        gauge(out, "vmmpower_target_watts",
              "Modelled host power of the best placement found, applied once its saving has held for ShrinkDwell.",
              p->why.target_mw / 1000.0);
        gauge(out, "vmmpower_cpus_active", "pCPUs the current plan keeps active (hosting vCPUs).",
              cpuset_count(&p->active));
        gauge(out, "vmmpower_cpus_packable",
              "Online pCPUs packed vCPUs may use (none of them holds a spread, dedicated or excluded vCPU).",
              packable_cpus(d));
}

static void render_apply_metrics(const struct daemon_view *d, struct strbuf *out)
{
        /* Every family in every mode (dry run and Apply = no: zeros), so rules
         * and dashboards see the same series whether plans are applied or not. */
        const struct apply_stats a = d->apply;

        counter(out, "vmmpower_apply_pins_total", "vCPU pins changed by the applier (read back equal).", a.pins);
        counter(out, "vmmpower_apply_pin_errors_total", "Failed vCPU pin attempts (retried with backoff).",
                a.pin_errors);
        counter(out, "vmmpower_apply_pin_gave_up_total", "vCPU pins given up after the retries.", a.pin_gave_up);
        counter(out, "vmmpower_apply_knob_changes_total", "Frequency caps and idle limits asked of the power driver.",
                a.knob_changes);
        counter(out, "vmmpower_apply_knob_errors_total", "Frequency cap / idle limit changes that failed.",
                a.knob_errors);
        counter(out, "vmmpower_apply_journal_errors_total",
                "Journal records that could not be written: the pin or knob change was not made, or was undone.",
                a.journal_errors);
        gauge(out, "vmmpower_apply_pins", "vCPUs placed by the current plan.", a.pins_current);
        /* Pins checked against the kernel (apply.h): widened ones made again, changed ones let go. */
        counter(out, "vmmpower_apply_pins_widened_total",
                "Pinned threads found running on more CPUs than pinned (a CPU of theirs went offline, a cpuset "
                "changed): pinned again.", a.pin_widened);
        counter(out, "vmmpower_apply_pins_foreign_total",
                "Pins found changed by someone else (taskset, virsh vcpupin --live): left to them, not restored.",
                a.pin_foreign);
        gauge(out, "vmmpower_apply_pins_foreign",
              "Threads whose pin is someone else's now: their vCPUs are left out of plans.", a.pins_foreign);
        /* Knob ownership and write failures (docs/power-driver.md). */
        counter(out, "vmmpower_apply_knobs_foreign_total",
                "Knobs found changed by someone else: left to them, not written again, not restored.",
                a.driver_foreign);
        counter(out, "vmmpower_apply_knob_retries_total", "Frequency cap / idle limit writes retried after a failure.",
                a.knob_retries);
        counter(out, "vmmpower_apply_knob_unsupported_total", "Frequency caps / idle limits for which the host has no knob.",
                a.knob_unsupported);
        counter(out, "vmmpower_apply_knob_class_retries_total",
                "Writes let through to a knob class disabled by EACCES/EPERM/EROFS after its backoff.",
                a.driver_class_retries);
        header(out, "vmmpower_apply_knob_class_disabled", "gauge",
               "1 while writes of the knob class are denied (retried with backoff).");
        for (unsigned c = 0; c < _POWER_KNOB_CLASS_MAX; c++)
                strbuf_printf(out, "vmmpower_apply_knob_class_disabled{class=\"%s\"} %d\n",
                              power_knob_class_to_string((enum power_knob_class) c),
                              (a.driver_classes_disabled >> c) & 1 ? 1 : 0);
}

/* Journal restores this daemon ran (at start after a crash, when a reload stops the applier). */
static void render_restore_metrics(const struct daemon_view *d, struct strbuf *out)
{
        const struct restore_stats *r = &d->counters->restored;
        const struct {
                const char *result;
                unsigned v;
        } res[] = {
                { "restored", r->restored }, { "unchanged", r->unchanged }, { "foreign", r->foreign },
                { "gone", r->gone },         { "failed", r->failed },       { "skipped", r->skipped },
        };
        int corrupt = journal_count_corrupt_files(d->cfg->state_dir, NULL, 0);

        counter(out, "vmmpower_restore_runs_total", "Journal restores run by this daemon.", d->counters->restore_runs);
        counter(out, "vmmpower_restore_errors_total", "Journal restores that failed as a whole (journal unreadable).",
                d->counters->restore_errors);
        header(out, "vmmpower_restore_knobs_total", "counter",
               "Journal entries handled by restores, by result (failed and skipped stay in the journal).");
        for (size_t i = 0; i < ELEMENTSOF(res); i++)
                strbuf_printf(out, "vmmpower_restore_knobs_total{result=\"%s\"} %u\n", res[i].result, res[i].v);
        gauge(out, "vmmpower_journal_corrupt_files", "Copies of journals with corrupt records kept in the state directory.",
              MAX(corrupt, 0));
}

static void render_source_metrics(const struct daemon_view *d, struct strbuf *out)
{
        const struct tracker_stats *ts = tracker_stats(d->tracker);
        const struct libvirt_src_stats ls = d->libvirt_stats; /* zeros without libvirt */
        unsigned n_vcpus = 0;

        for (size_t i = 0; i < tracker_n_vms(d->tracker); i++)
                n_vcpus += tracker_vm(d->tracker, i)->n_vcpus;
        gauge(out, "vmmpower_vms", "VMs tracked.", (double) tracker_n_vms(d->tracker));
        gauge(out, "vmmpower_vcpus", "vCPU threads tracked.", (double) n_vcpus);
        gauge(out, "vmmpower_libvirt_connected", "1 while connected to libvirtd.", ls.connected ? 1 : 0);
        counter(out, "vmmpower_libvirt_connects_total", "Successful connections to libvirtd.", ls.connects);
        counter(out, "vmmpower_libvirt_disconnects_total", "Lost connections to libvirtd.", ls.disconnects);
        counter(out, "vmmpower_libvirt_events_total", "libvirt lifecycle events received.", ls.events);
        counter(out, "vmmpower_libvirt_errors_total", "Failed per-domain look-ups.", ls.errors);
        counter(out, "vmmpower_libvirt_metadata_events_total",
                "libvirt metadata-change events in the vmmpower namespace.", ls.metadata_events);
        gauge(out, "vmmpower_vm_policies", "Domains with a valid vmmpower policy in their metadata.",
              (double) ls.policies);
        counter(out, "vmmpower_vm_policy_invalid_total", "Rejected vmmpower policy metadata (host defaults used).",
                ls.policy_invalid);
        counter(out, "vmmpower_vm_policy_read_errors_total", "Failed reads of vmmpower policy metadata.",
                ls.policy_errors);
        counter(out, "vmmpower_vcpu_samples_total", "vCPU schedstat samples read.", ts->samples);
        counter(out, "vmmpower_vcpu_threads_gone_total", "vCPU threads seen exiting (ESRCH).", ts->threads_gone);
        counter(out, "vmmpower_vcpu_threads_misnamed_total",
                "Thread ids a source listed as vCPUs, not opened: the thread is not named as that vCPU (a stale id).",
                ts->threads_misnamed);
        counter(out, "vmmpower_vcpu_read_errors_total", "Failed vCPU schedstat reads other than ESRCH.",
                ts->read_errors);
        gauge(out, "vmmpower_vcpus_untracked", "vCPUs with an index >= 1024 (VM_MAX_VCPUS): not tracked, never pinned.",
              (double) ts->vcpus_untracked);
        gauge(out, "vmmpower_vms_with_untracked_vcpus", "VMs that have vCPUs counted in vmmpower_vcpus_untracked.",
              (double) ts->vms_with_untracked);
        counter(out, "vmmpower_procscan_scans_total", "procfs scans for QEMU processes.", d->procscan_stats->scans);
        counter(out, "vmmpower_procscan_vanished_total", "Processes or threads gone mid-scan.",
                d->procscan_stats->vanished);
        counter(out, "vmmpower_procscan_other_user_total",
                "Scans' QEMU-like processes run by a user not in [QEMU] ProcScanUsers (ignored).",
                d->procscan_stats->other_user);
        counter(out, "vmmpower_qmp_errors_total", "Failed QMP queries.", d->counters->qmp_errors);
}

static void render_daemon_metrics(const struct daemon_view *d, struct strbuf *out)
{
        header(out, "vmmpower_build_info", "gauge", "Always 1; the version of the running vmmpowerd as a label.");
        strbuf_puts(out, "vmmpower_build_info{version=\"");
        label_value(out, VMMPOWER_VERSION);
        strbuf_puts(out, "\"} 1\n");
        header(out, "vmmpower_start_time_seconds", "gauge", "Start time of the daemon since the Unix epoch.");
        strbuf_printf(out, "vmmpower_start_time_seconds %.3f\n", (double) d->start_realtime_ns / NSEC_PER_SEC);
        counter(out, "vmmpower_periods_total", "Control periods run.", d->counters->periods);
        counter(out, "vmmpower_hint_wakeups_total", "Hint reads whose hints took a token (trust = full).",
                d->counters->hint_wakeups);
        counter(out, "vmmpower_hint_replans_total", "Plans redone at once because of such hints.",
                d->counters->hint_replans);
        counter(out, "vmmpower_qemu_hint_refused_total",
                "Periods a plain-QEMU VM's [QEMU] HintSocket path was refused (not a socket, not owned by QEMU's user, bad name).",
                d->counters->qemu_hint_refused);
        if (d->hints) {
                struct hint_io_stats io;

                hint_server_totals(d->hints, NULL, &io);
                counter(out, "vmmpower_hint_host_throttles_total",
                        "Hint channel reads stopped by the host-wide read budget ([Hints] HostReadBytesPerSecond).",
                        io.host_throttles);
                counter(out, "vmmpower_hint_peer_mismatches_total",
                        "[QEMU] HintSocket connections not used: the socket's listener was not the VM's QEMU.",
                        io.peer_mismatches);
                counter(out, "vmmpower_hint_path_conflicts_total",
                        "Hint channel connects not tried: another VM's channel was connected to the same path.",
                        io.path_conflicts);
        }
        counter(out, "vmmpower_period_overruns_total", "Control periods missed.", d->counters->overruns);
        gauge(out, "vmmpower_period_cpu_seconds", "Daemon CPU time spent in the last control period.",
              (double) d->counters->last_period_cpu_ns / NSEC_PER_SEC);
        counter(out, "vmmpower_control_requests_total", "Control socket requests.", d->counters->control.requests);
        counter(out, "vmmpower_control_denied_total", "Control requests denied by peer credentials.",
                d->counters->control.denied);
        counter(out, "vmmpower_control_rejected_total", "Control connections refused for lack of a client slot.",
                d->counters->control.rejected);
        counter(out, "vmmpower_reload_errors_total", "Reloads rejected (bad configuration).",
                d->counters->reload_errors);
        counter(out, "vmmpower_topology_changes_total",
                "Changes of the online CPUs (CPU hotplug) taken while running: topology read again, plans made on the new CPUs.",
                d->counters->topology_changes);
        gauge(out, "vmmpower_topology_stale",
              "1 while the online CPUs changed, or could not be read, and the topology could not be read again (plans on the old one).",
              d->topology_stale ? 1.0 : 0.0);
        counter(out, "vmmpower_topology_errors_total",
                "Checks of the online CPUs, or topology re-reads after a change, that failed (the running topology was kept).",
                d->counters->topology_errors);
        counter(out, "vmmpower_metrics_write_errors_total", "Failed writes of the metrics textfile.",
                d->counters->metrics_write_errors);
}

void render_metrics(const struct daemon_view *d, struct strbuf *out)
{
        render_daemon_metrics(d, out);
        render_plan_metrics(d, out);
        render_vcpu_metrics(d, out);
        render_cpu_metrics(d, out);
        render_hint_metrics(d, out);
        render_source_metrics(d, out);
        render_apply_metrics(d, out);
        render_restore_metrics(d, out);
}
