/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the control socket shows: plain tables for people, JSON for scripts
 * (--json), and Prometheus text for metrics.  Pure formatting of a
 * snapshot of the daemon (daemon_view.h); no I/O.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "apply.h"
#include "coexist.h"
#include "config.h"
#include "daemon_view.h"
#include "energy_model.h"
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

static double pct(double ratio)
{
        return ratio * 100.0;
}

static void sources_string(unsigned sources, char *buf, size_t size)
{
        size_t len = 0;

        buf[0] = '\0';
        for (unsigned i = 0; i < VM_N_SOURCES; i++) {
                if (!(sources & (1u << i)))
                        continue;
                int n = snprintf(buf + len, size - len, "%s%s", len ? "," : "",
                                 vm_source_to_string((enum vm_source) (1u << i)));
                if (n < 0 || (size_t) n >= size - len)
                        break;
                len += (size_t) n;
        }
}

static void json_sources(struct strbuf *out, unsigned sources)
{
        bool first = true;

        strbuf_puts(out, "[");
        for (unsigned i = 0; i < VM_N_SOURCES; i++)
                if (sources & (1u << i)) {
                        strbuf_printf(out, "%s\"%s\"", first ? "" : ",",
                                      vm_source_to_string((enum vm_source) (1u << i)));
                        first = false;
                }
        strbuf_puts(out, "]");
}

/* JSON has no NaN: unknown values are null. */
static void json_ratio(struct strbuf *out, const char *key, bool valid, double v)
{
        if (valid && isfinite(v))
                strbuf_printf(out, "\"%s\":%.4f", key, v);
        else
                strbuf_printf(out, "\"%s\":null", key);
}

static unsigned total_vcpus(const struct daemon_view *d)
{
        unsigned n = 0;

        for (size_t i = 0; i < tracker_n_vms(d->tracker); i++)
                n += tracker_vm(d->tracker, i)->n_vcpus;
        return n;
}

/*
 * Why plans are not applied (NULL: they are), short for JSON ("why") and
 * long for the text status: an applier that failed to start must not read
 * like Apply = no, nor like one that applies.
 */
static const char *advisory_reason(const struct daemon_view *d, bool text)
{
        if (d->applier)
                return NULL;
        if (d->dry_run)
                return text ? "advisory, --dry-run: nothing on the host is changed" : "dry run";
        if (!d->em)
                return text ? "off, [Planner] Enabled = no: no plans" : "planner off";
        if (!d->cfg->planner_apply)
                return text ? "advisory, [Planner] Apply = no: plans are shown, not applied" : "Apply=no";
        if (d->counters->apply_start_errors > 0)
                return text ? "NOT APPLIED: the applier failed to start (see the log); plans stay advisory"
                            : "failed to start";
        return text ? "advisory: the applier has not started yet" : "not started";
}

/* The applier's state as a JSON object ("enabled":false when plans are advisory). */
static void render_apply_json(const struct daemon_view *d, struct strbuf *out)
{
        const struct apply_stats *a = &d->apply;

        if (!d->applier) {
                const struct apply_stats *s = &d->sim_apply;

                strbuf_printf(out, "{\"enabled\":false,\"why\":\"%s\",\"start_errors\":%" PRIu64,
                              advisory_reason(d, false), d->counters->apply_start_errors);
                /* a dry run's applier on the sim power driver: what it would do */
                if (d->simulated)
                        strbuf_printf(out, ",\"simulated\":{\"passes\":%" PRIu64 ",\"pins\":%" PRIu64
                                      ",\"pins_current\":%u,\"knob_changes\":%" PRIu64 "}",
                                      s->passes, s->pins, s->pins_current, s->knob_changes);
                strbuf_puts(out, "}");
                return;
        }
        strbuf_printf(out,
                      "{\"enabled\":true,\"requests\":%" PRIu64 ",\"superseded\":%" PRIu64 ",\"passes\":%" PRIu64
                      ",\"pins\":%" PRIu64 ",\"pins_current\":%u,\"pin_errors\":%" PRIu64 ",\"pin_retries\":%" PRIu64
                      ",\"pin_gave_up\":%" PRIu64 ",\"pin_gone\":%" PRIu64 ",\"pin_narrowed\":%" PRIu64
                      ",\"pin_released\":%" PRIu64 ",\"pin_widened\":%" PRIu64 ",\"pin_foreign\":%" PRIu64
                      ",\"pin_handed_back\":%" PRIu64 ",\"pins_foreign\":%u"
                      ",\"libvirt_connects\":%" PRIu64 ",\"libvirt_connect_errors\":%" PRIu64
                      ",\"knob_changes\":%" PRIu64 ",\"knob_errors\":%" PRIu64 ",\"last_error\":%d"
                      ",\"last_pass_ns\":%" PRId64 ",\"last_pass_cpu_ns\":%" PRId64
                      ",\"cpufreq_policies\":%u,\"pm_qos_knobs\":%u,\"sysfs_writes\":%u,\"sysfs_clamped\":%u"
                      ",\"sysfs_denied\":%u,\"sysfs_busy\":%u,\"journal_errors\":%u}",
                      a->requests, a->superseded, a->passes, a->pins, a->pins_current, a->pin_errors, a->pin_retries,
                      a->pin_gave_up, a->pin_gone, a->pin_narrowed, a->pin_released, a->pin_widened, a->pin_foreign,
                      a->pin_handed_back, a->pins_foreign, a->libvirt_connects,
                      a->libvirt_connect_errors, a->knob_changes, a->knob_errors, a->last_error, a->last_pass_ns,
                      a->last_pass_cpu_ns, a->driver_policies, a->driver_pm_qos, a->driver_writes, a->driver_clamped,
                      a->driver_denied, a->driver_busy, a->journal_errors);
}

/* Knob classes the power driver has disabled now (EACCES/EPERM/EROFS, retried with backoff), comma-separated. */
static void disabled_classes(unsigned mask, char *buf, size_t size)
{
        size_t n = 0;

        buf[0] = '\0';
        for (unsigned c = 0; c < _POWER_KNOB_CLASS_MAX; c++)
                if (mask & (1u << c))
                        n += (size_t) snprintf(buf + n, n < size ? size - n : 0, "%s%s", n ? "," : "",
                                               power_knob_class_to_string((enum power_knob_class) c));
}

/*
 * Knob ownership and write failures (docs/power-driver.md): knobs left to
 * someone else, failed and retried caps/limits, classes disabled by a denial,
 * and copies of corrupt journals kept in the state directory.
 */
static void render_knobs(const struct daemon_view *d, bool json, struct strbuf *out)
{
        const struct apply_stats *a = &d->apply; /* zeros without an applier */
        char newest[256] = "", classes[64];
        int corrupt = journal_count_corrupt_files(d->cfg->state_dir, newest, sizeof(newest));

        disabled_classes(a->driver_classes_disabled, classes, sizeof(classes));
        if (json) {
                strbuf_printf(out,
                              ",\"knobs\":{\"foreign\":%u,\"foreign_refused\":%" PRIu64 ",\"changes\":%" PRIu64
                              ",\"errors\":%" PRIu64 ",\"retries\":%" PRIu64 ",\"unsupported\":%" PRIu64
                              ",\"gone\":%" PRIu64 ",\"class_retries\":%u,\"classes_disabled\":",
                              a->driver_foreign, a->knob_foreign, a->knob_changes, a->knob_errors, a->knob_retries,
                              a->knob_unsupported, a->knob_gone, a->driver_class_retries);
                strbuf_json_string(out, classes);
                strbuf_puts(out, "}");
                coexist_render(d->coexist, (enum coexist_mode) d->cfg->other_tuners, true, out);
                strbuf_printf(out, ",\"journal\":{\"corrupt_files\":%d,\"newest_corrupt_file\":", MAX(corrupt, 0));
                strbuf_json_string(out, newest);
                strbuf_puts(out, "}");
                return;
        }
        if (d->applier)
                strbuf_printf(out,
                              "knobs:         %u left to others (changed by someone else), %" PRIu64
                              " caps/limits applied, %" PRIu64 " failed attempts (%" PRIu64 " retries)%s%s%s\n",
                              a->driver_foreign, a->knob_changes, a->knob_errors, a->knob_retries,
                              classes[0] ? ", denied: " : "", classes,
                              classes[0] ? " (retried with backoff)" : "");
        coexist_render(d->coexist, (enum coexist_mode) d->cfg->other_tuners, false, out);
        if (corrupt > 0)
                strbuf_printf(out, "journal:       %d corrupt journal file(s) kept in %s, newest %s: inspect, then remove\n",
                              corrupt, d->cfg->state_dir, newest);
}

/* Text status: whether plans are applied, QMP, control socket, reloads and hook notifications. */
static void render_status_more(const struct daemon_view *d, struct strbuf *out)
{
        const char *why = advisory_reason(d, true);

        if (why && d->simulated)
                strbuf_printf(out, "plans:         %s; on the sim power driver: %" PRIu64 " passes, %" PRIu64
                              " pins and %" PRIu64 " knob changes would have been made\n",
                              why, d->sim_apply.passes, d->sim_apply.pins, d->sim_apply.knob_changes);
        else if (why)
                strbuf_printf(out, "plans:         %s\n", why);
        else
                strbuf_printf(out,
                              "plans:         applied: %" PRIu64 " passes, %" PRIu64 " pins, %" PRIu64
                              " pin errors, %" PRIu64 " knob changes, %" PRIu64 " knob errors\n",
                              d->apply.passes, d->apply.pins, d->apply.pin_errors, d->apply.knob_changes,
                              d->apply.knob_errors);
        strbuf_printf(out,
                      "QMP:           %u socket%s, %" PRIu64 " queries, %" PRIu64 " errors (%u failing, %" PRIu64
                      " kept on their last answer, %" PRIu64 " gone)\n",
                      d->cfg->n_qmp_sockets, d->cfg->n_qmp_sockets == 1 ? "" : "s", d->counters->qmp_queries,
                      d->counters->qmp_errors, d->qmp_failing, d->counters->qmp_kept, d->counters->qmp_gone);
        strbuf_printf(out,
                      "control:       %" PRIu64 " requests, %" PRIu64 " denied, %" PRIu64 " refused (no slot), %" PRIu64
                      " errors\n",
                      d->counters->control.requests, d->counters->control.denied, d->counters->control.rejected,
                      d->counters->control.errors);
        strbuf_printf(out, "reloads:       %" PRIu64 " (%" PRIu64 " failed), %" PRIu64 " hook notifications\n",
                      d->counters->reloads, d->counters->reload_errors, d->counters->notifies);
        strbuf_printf(out, "CPU hotplug:   %" PRIu64 " topology re-reads, %" PRIu64 " failed\n",
                      d->counters->topology_changes, d->counters->topology_errors);
}

void render_status(const struct daemon_view *d, bool json, struct strbuf *out)
{
        const struct tracker_stats *ts = tracker_stats(d->tracker);
        const struct libvirt_src_stats *ls = &d->libvirt_stats; /* zeros without libvirt */
        double uptime_s = (double) (d->now - d->start_ns) / NSEC_PER_SEC;

        if (json) {
                strbuf_printf(out, "{\"version\":\"%s\",\"uptime_s\":%.1f,\"dry_run\":%s,", VMMPOWER_VERSION,
                              uptime_s, d->dry_run ? "true" : "false");
                strbuf_puts(out, "\"config\":");
                strbuf_json_string(out, d->config_path);
                strbuf_printf(out, ",\"period_ms\":%" PRId64 ",\"periods\":%" PRIu64 ",\"overruns\":%" PRIu64,
                              d->cfg->period_ns / NSEC_PER_MSEC, d->counters->periods, d->counters->overruns);
                strbuf_printf(out, ",\"vms\":%zu,\"vcpus\":%u,\"cpus_online\":%u", tracker_n_vms(d->tracker),
                              total_vcpus(d), cpuset_count(&d->topo->online));
                strbuf_printf(out,
                              ",\"libvirt\":{\"enabled\":%s,\"connected\":%s,\"connects\":%" PRIu64
                              ",\"disconnects\":%" PRIu64 ",\"connect_failures\":%" PRIu64
                              ",\"events\":%" PRIu64 ",\"reconciles\":%" PRIu64 ",\"errors\":%" PRIu64
                              ",\"metadata_events\":%" PRIu64 ",\"policies\":%" PRIu64 ",\"policy_invalid\":%" PRIu64
                              ",\"policy_errors\":%" PRIu64 "}",
                              d->libvirt ? "true" : "false", ls->connected ? "true" : "false", ls->connects,
                              ls->disconnects, ls->connect_failures, ls->events, ls->reconciles, ls->errors,
                              ls->metadata_events, ls->policies, ls->policy_invalid, ls->policy_errors);
                strbuf_printf(out,
                              ",\"tracker\":{\"sampler\":\"%s\",\"bpf_errors\":%" PRIu64
                              ",\"threads\":%zu,\"samples\":%" PRIu64 ",\"threads_gone\":%" PRIu64
                              ",\"threads_misnamed\":%" PRIu64 ",\"read_errors\":%" PRIu64 ",\"open_errors\":%" PRIu64 ",\"vms_added\":%" PRIu64
                              ",\"vms_removed\":%" PRIu64 ",\"last_sample_cpu_ns\":%" PRId64 "}",
                              tracker_sampler_name(d->tracker), ts->bpf_errors, tracker_n_threads(d->tracker),
                              ts->samples, ts->threads_gone, ts->threads_misnamed, ts->read_errors,
                              ts->open_errors, ts->vms_added, ts->vms_removed, ts->last_sample_cpu_ns);
                strbuf_printf(out,
                              ",\"procscan\":{\"scans\":%llu,\"vanished\":%llu,\"errors\":%llu,\"other_user\":%llu}"
                              ",\"qmp\":{\"sockets\":%u,\"queries\":%" PRIu64 ",\"errors\":%" PRIu64
                              ",\"kept\":%" PRIu64 ",\"gone\":%" PRIu64 ",\"failing\":%u}",
                              d->procscan_stats->scans, d->procscan_stats->vanished, d->procscan_stats->errors,
                              d->procscan_stats->other_user, d->cfg->n_qmp_sockets, d->counters->qmp_queries, d->counters->qmp_errors,
                              d->counters->qmp_kept, d->counters->qmp_gone, d->qmp_failing);
                strbuf_puts(out, ",\"apply\":");
                render_apply_json(d, out);
                render_knobs(d, true, out);
                strbuf_printf(out, ",\"hint_wakeups\":%" PRIu64 ",\"hint_replans\":%" PRIu64,
                              d->counters->hint_wakeups, d->counters->hint_replans);
                strbuf_printf(out,
                              ",\"control\":{\"requests\":%" PRIu64 ",\"denied\":%" PRIu64 ",\"errors\":%" PRIu64
                              ",\"rejected\":%" PRIu64
                              "},\"notifies\":%" PRIu64 ",\"reloads\":%" PRIu64 ",\"reload_errors\":%" PRIu64
                              ",\"topology_changes\":%" PRIu64 ",\"topology_errors\":%" PRIu64
                              ",\"last_period_cpu_ns\":%" PRId64 "}\n",
                              d->counters->control.requests, d->counters->control.denied,
                              d->counters->control.errors, d->counters->control.rejected, d->counters->notifies,
                              d->counters->reloads, d->counters->reload_errors, d->counters->topology_changes,
                              d->counters->topology_errors, d->counters->last_period_cpu_ns);
                return;
        }
        strbuf_printf(out, "vmmpowerd %s, up %.0f s%s\n", VMMPOWER_VERSION, uptime_s,
                      d->dry_run ? ", dry run (no host changes)" : "");
        strbuf_printf(out, "config:        %s%s\n", d->config_path,
                      access(d->config_path, F_OK) == 0 ? "" : " (absent: built-in defaults)");
        strbuf_printf(out, "period:        %" PRId64 " ms, %" PRIu64 " periods, %" PRIu64 " overruns\n",
                      d->cfg->period_ns / NSEC_PER_MSEC, d->counters->periods, d->counters->overruns);
        strbuf_printf(out, "host:          %u CPUs online, %u packages, %u cores, cpuidle %s\n",
                      cpuset_count(&d->topo->online), d->topo->n_packages, d->topo->n_cores,
                      d->topo->cpuidle_driver[0] ? d->topo->cpuidle_driver : "none");
        strbuf_printf(out, "VMs:           %zu VMs, %u vCPUs tracked\n", tracker_n_vms(d->tracker),
                      total_vcpus(d));
        if (d->libvirt)
                strbuf_printf(out,
                              "libvirt:       %s (%s), %" PRIu64 " connects, %" PRIu64 " events, %" PRIu64
                              " errors\n",
                              ls->connected ? "connected" : "disconnected", d->cfg->libvirt_uri, ls->connects,
                              ls->events, ls->errors);
        else
                strbuf_puts(out, "libvirt:       disabled\n");
        strbuf_printf(out, "procfs scan:   %s, %llu scans, %llu vanished mid-scan, %u QEMU-like of other users ignored\n",
                      d->cfg->proc_scan ? "on" : "off", d->procscan_stats->scans, d->procscan_stats->vanished,
                      d->procscan_stats->last_other_user);
        strbuf_printf(out,
                      "tracker:       %s sampler, %" PRIu64 " samples, %" PRIu64 " threads gone, %" PRIu64
                      " read errors, last period %.1f us CPU\n",
                      tracker_sampler_name(d->tracker), ts->samples, ts->threads_gone, ts->read_errors,
                      (double) d->counters->last_period_cpu_ns / NSEC_PER_USEC);
        render_status_more(d, out);
        render_knobs(d, false, out);
}

/* The VM's hint channel: connection, agent (guest bytes: escaped), counters. */
static void json_vm_hints(const struct daemon_view *d, const struct vm_load *vm, struct strbuf *out)
{
        struct hint_vm_status st;
        char agent[4 * HINT_AGENT_MAX + 1];
        uint64_t rejected = 0;

        if (!d->hints || hint_server_vm_status(d->hints, vm->info.pid, &st) < 0) {
                strbuf_puts(out, ",\"hints\":null");
                return;
        }
        for (unsigned r = 0; r < _HINT_REJECT_MAX; r++)
                rejected += st.counters.rejected[r];
        escape_bytes(st.agent, strlen(st.agent), agent, sizeof(agent));
        strbuf_printf(out, ",\"hints\":{\"connected\":%s,\"handshaked\":%s,\"agent\":",
                      st.connected ? "true" : "false", st.handshaked ? "true" : "false");
        strbuf_json_string(out, agent);
        strbuf_printf(out,
                      ",\"trust\":\"%s\",\"lines\":%" PRIu64 ",\"accepted\":%" PRIu64 ",\"clamped\":%" PRIu64
                      ",\"rejected\":%" PRIu64 ",\"resyncs\":%" PRIu64 ",\"actuations\":%" PRIu64
                      ",\"rate_limited\":%" PRIu64 ",\"connects\":%" PRIu64 ",\"disconnects\":%" PRIu64
                      ",\"read_throttles\":%" PRIu64 ",\"host_throttles\":%" PRIu64 ",\"stale\":%s"
                      ",\"stale_total\":%" PRIu64 ",\"boost_denied\":%" PRIu64 ",\"boost_granted_ms\":%.3f,\"welcomes_suppressed\":%" PRIu64
                      ",\"grants_sent\":%" PRIu64 ",\"limits_sent\":%" PRIu64 ",\"replies_dropped\":%" PRIu64
                      ",\"peer_mismatches\":%" PRIu64 ",\"path_conflicts\":%" PRIu64 "}",
                      hint_trust_to_string(st.policy.trust), st.counters.lines, st.counters.accepted,
                      st.counters.clamped, rejected, st.counters.resyncs, st.counters.actuations,
                      st.counters.rate_limited, st.io.connects, st.io.disconnects, st.io.read_throttles,
                      st.io.host_throttles, st.stale ? "true" : "false", st.counters.stale, st.counters.boost_denied,
                      (double) st.counters.boost_granted_ns / NSEC_PER_MSEC, st.counters.welcomes_suppressed, st.io.grants_sent, st.io.limits_sent,
                      st.io.replies_dropped, st.io.peer_mismatches, st.io.path_conflicts);
}

/* The online CPUs of the nodes of vp's memory binding the planner packs it on ("8-15,24-31"), "" if none. */
static void numa_cpus(const struct daemon_view *d, const struct vm_policy *vp, char *buf, size_t size)
{
        uint64_t nodes;
        cpuset_t cpus;

        buf[0] = 0;
        if (!d->topo || plan_input_numa_nodes(d->topo, vp->mem_nodeset, &nodes) < 0 || !nodes)
                return;
        cpuset_zero(&cpus);
        for (unsigned c = 0; c < d->topo->n_cpus; c++) {
                int n = d->topo->cpus[c].node;
                if (d->topo->cpus[c].present && d->topo->cpus[c].online && n >= 0 && n < 64 && (nodes >> n) & 1)
                        cpuset_set(&cpus, c);
        }
        if (cpuset_format_list(&cpus, buf, size) < 0)
                buf[0] = 0;
}

/* The vCPU indexes of vm whose pin someone else changed (d->foreign), as "0,2" (or a JSON array's body). */
static unsigned pinned_by_others(const struct daemon_view *d, const struct vm_load *vm, char *buf, size_t size)
{
        unsigned k = 0;
        size_t n = 0;

        buf[0] = '\0';
        for (unsigned j = 0; j < vm->n_vcpus && d->n_foreign; j++) {
                const struct vcpu_load *l = &vm->vcpus[j];
                int w;

                if (l->gone || !daemon_view_pinned_by_others(d, vm->info.pid, l->tid))
                        continue;
                w = snprintf(buf + n, size - n, "%s%u", k ? "," : "", l->index);
                if (w < 0 || (size_t) w >= size - n) {
                        buf[n] = '\0'; /* whole indexes only: the list stays valid JSON */
                        break;
                }
                n += (size_t) w;
                k++;
        }
        return k;
}

/* The VM's policy: where it came from, the placement mode and the effective hint policy. */
static void json_vm_policy(const struct daemon_view *d, const struct vm_load *vm, struct strbuf *out)
{
        const struct vm_policy *vp = &vm->info.policy;
        const struct hint_policy_override *o = &vp->hints;
        bool meta = vp->source == VM_POLICY_METADATA;
        struct hint_policy hp;

        if (vm_policy_hint_policy(vp, &d->cfg->hint_defaults, &hp) < 0)
                hp = d->cfg->hint_defaults;
        strbuf_printf(out, ",\"policy\":{\"source\":\"%s\",\"error\":", vm_policy_source_to_string(vp->source));
        if (vp->error[0])
                strbuf_json_string(out, vp->error);
        else
                strbuf_puts(out, "null");
        strbuf_printf(out,
                      ",\"placement\":\"%s\",\"hints\":{\"enabled\":%s,\"trust\":\"%s\",\"max_level\":%u,"
                      "\"boost_cap_ms\":%u,\"rate_per_sec\":%u,\"burst\":%u,\"half_life_ms\":%lld}",
                      place_mode_to_string(vp->place_mode), d->cfg->hints_enabled ? "true" : "false",
                      hint_trust_to_string(hp.trust), hp.max_level, hp.boost_cap_ms, hp.rate_per_sec, hp.burst,
                      (long long) (hp.half_life_ns / NSEC_PER_MSEC));
        {
                char pins[64], cpus[256];

                vm_pins_describe(vp->operator_pins, pins, sizeof(pins));
                strbuf_printf(out, ",\"manage_pins\":%s,\"operator_pins\":", vp->manage_pins ? "true" : "false");
                strbuf_json_string(out, pins);
                strbuf_printf(out, ",\"pins_left_alone\":%s,\"pinned_by_others\":[",
                              vp->pins_left_alone ? "true" : "false");
                pinned_by_others(d, vm, cpus, sizeof(cpus));
                strbuf_printf(out, "%s],\"numa_memory\":", cpus);
                if (vp->mem_nodeset[0]) {
                        strbuf_puts(out, "{\"nodeset\":");
                        strbuf_json_string(out, vp->mem_nodeset);
                        strbuf_puts(out, ",\"mode\":");
                        strbuf_json_string(out, vp->mem_mode);
                        /* the CPUs the planner packs it on; null: the binding cannot hold here */
                        strbuf_puts(out, ",\"planned_cpus\":");
                        numa_cpus(d, vp, cpus, sizeof(cpus));
                        if (cpus[0])
                                strbuf_json_string(out, cpus);
                        else
                                strbuf_puts(out, "null");
                        strbuf_puts(out, "}");
                } else
                        strbuf_puts(out, "null");
        }
        strbuf_puts(out, ",\"overrides\":[");
        /* What the metadata set; everything else is the host default. */
        {
                const char *set[8];
                size_t k = 0;

                if (meta && vp->has_place_mode)
                        set[k++] = "placement";
                if (meta && vp->has_manage_pins)
                        set[k++] = "manage_pins";
                if (meta && o->has_trust)
                        set[k++] = "trust";
                if (meta && o->has_max_level)
                        set[k++] = "max_level";
                if (meta && o->has_boost_cap_ms)
                        set[k++] = "boost_cap_ms";
                if (meta && o->has_rate_per_sec)
                        set[k++] = "rate_per_sec";
                if (meta && o->has_burst)
                        set[k++] = "burst";
                if (meta && o->has_half_life_ns)
                        set[k++] = "half_life_ms";
                for (size_t i = 0; i < k; i++)
                        strbuf_printf(out, "%s\"%s\"", i ? "," : "", set[i]);
        }
        strbuf_puts(out, "]}");
}

/* Text: one line under the VM's rows when its policy is not simply the host default. */
static void text_vm_policy(const struct daemon_view *d, const struct vm_load *vm, struct strbuf *out)
{
        const struct vm_policy *vp = &vm->info.policy;
        char what[256];

        if (vp->source == VM_POLICY_METADATA) {
                vm_policy_describe(vp, what, sizeof(what));
                strbuf_printf(out, "  policy: metadata: %s\n", what);
        } else if (vp->error[0])
                strbuf_printf(out, "  policy: default (metadata rejected: %s)\n", vp->error);
        if (vp->pins_left_alone) {
                vm_pins_describe(vp->operator_pins, what, sizeof(what));
                strbuf_printf(out, "  placement: exclude: pinned by the operator (%s in the persistent XML); "
                                   "manage-pins=yes in its metadata lets vmmpower pin it\n", what);
        }
        if (pinned_by_others(d, vm, what, sizeof(what)) > 0)
                strbuf_printf(out, "  placement: vCPU %s pinned by someone else since vmmpower pinned it: left to "
                                   "them (not planned, not restored) until it may run on all the CPUs it had before\n",
                              what);
        if (vp->mem_nodeset[0]) {
                numa_cpus(d, vp, what, sizeof(what));
                if (what[0])
                        strbuf_printf(out, "  memory: NUMA node(s) %s (%s): packed on CPUs %s\n", vp->mem_nodeset,
                                      vp->mem_mode, what);
                else
                        strbuf_printf(out, "  memory: NUMA node(s) %s (%s): no online CPU of these here, packed "
                                           "anywhere\n", vp->mem_nodeset, vp->mem_mode);
        }
}

void render_vms(const struct daemon_view *d, bool json, struct strbuf *out)
{
        size_t n = tracker_n_vms(d->tracker);
        struct hint_effective eff[VM_MAX_VCPUS];
        int n_eff;

        if (json)
                strbuf_puts(out, "{\"vms\":[");
        else
                strbuf_printf(out, "%-24s %8s %-18s %-5s %4s %8s %6s %6s %6s %6s %5s\n", "VM", "PID", "SOURCES",
                              "ACCEL", "VCPU", "TID", "UTIL%", "AVG%", "WAIT%", "HPOLL%", "HINT");
        for (size_t i = 0; i < n; i++) {
                const struct vm_load *vm = tracker_vm(d->tracker, i);
                char src[64];

                sources_string(vm->info.sources, src, sizeof(src));
                if (json) {
                        strbuf_printf(out, "%s{\"name\":", i ? "," : "");
                        strbuf_json_string(out, vm->info.name);
                        strbuf_puts(out, ",\"uuid\":");
                        strbuf_json_string(out, vm->info.uuid);
                        strbuf_printf(out, ",\"pid\":%d,\"libvirt_id\":%d,\"accel\":\"%s\",\"sources\":",
                                      (int) vm->info.pid, vm->info.libvirt_id,
                                      vm_accel_to_string(vm->info.accel));
                        json_sources(out, vm->info.sources);
                        json_vm_hints(d, vm, out);
                        json_vm_policy(d, vm, out);
                        strbuf_puts(out, ",\"vcpus\":[");
                }
                n_eff = d->hints ? hint_server_vm_state(d->hints, vm->info.pid, d->now, eff, ELEMENTSOF(eff)) : 0;
                for (unsigned j = 0; j < vm->n_vcpus; j++) {
                        const struct vcpu_load *v = &vm->vcpus[j];

                        if (json) {
                                strbuf_printf(out, "%s{\"index\":%d,\"tid\":%d,\"valid\":%s,\"gone\":%s,",
                                              j ? "," : "", v->index, (int) v->tid, v->valid ? "true" : "false",
                                              v->gone ? "true" : "false");
                                json_ratio(out, "util", v->valid, v->util);
                                strbuf_puts(out, ",");
                                json_ratio(out, "util_avg", v->valid, v->util_avg);
                                strbuf_puts(out, ",");
                                json_ratio(out, "wait_ratio", v->valid, v->wait_ratio);
                                strbuf_puts(out, ",");
                                json_ratio(out, "wait_avg", v->valid, v->wait_avg);
                                strbuf_puts(out, ",");
                                json_ratio(out, "halt_poll_ratio", v->valid && v->has_halt_poll,
                                           v->halt_poll_ratio);
                                strbuf_printf(out, ",\"run_ns\":%" PRIu64 ",\"wait_ns\":%" PRIu64,
                                              v->last.run_ns, v->last.wait_ns);
                                if (v->index >= 0 && v->index < n_eff)
                                        strbuf_printf(out,
                                                      ",\"hint\":{\"level\":%u,\"weight\":%u,\"util\":%u,"
                                                      "\"boosted\":%s,\"boost_level\":%u,\"may_actuate\":%s}}",
                                                      eff[v->index].level, eff[v->index].weight, eff[v->index].util,
                                                      eff[v->index].boosted ? "true" : "false", eff[v->index].boost_level,
                                                      eff[v->index].may_actuate ? "true" : "false");
                                else
                                        strbuf_puts(out, ",\"hint\":null}");
                                continue;
                        }
                        if (v->valid) {
                                strbuf_printf(out, "%-24.24s %8d %-18s %-5s %4d %8d %6.1f %6.1f %6.1f",
                                              j == 0 ? vm->info.name : "", (int) vm->info.pid, j == 0 ? src : "",
                                              vm_accel_to_string(vm->info.accel), v->index, (int) v->tid,
                                              pct(v->util), pct(v->util_avg), pct(v->wait_ratio));
                                if (v->has_halt_poll)
                                        strbuf_printf(out, " %6.1f", pct(v->halt_poll_ratio));
                                else
                                        strbuf_printf(out, " %6s", "-");
                                /* The guest's wish: its decayed level 0..1024, "B" while boosted. */
                                if (v->index >= 0 && v->index < n_eff && (eff[v->index].weight || eff[v->index].boosted))
                                        strbuf_printf(out, " %4u%s\n", eff[v->index].level,
                                                      eff[v->index].boosted ? "B" : " ");
                                else
                                        strbuf_printf(out, " %5s\n", "-");
                        } else
                                strbuf_printf(out, "%-24.24s %8d %-18s %-5s %4d %8d %6s %6s %6s %6s %5s\n",
                                              j == 0 ? vm->info.name : "", (int) vm->info.pid, j == 0 ? src : "",
                                              vm_accel_to_string(vm->info.accel), v->index, (int) v->tid,
                                              v->gone ? "gone" : "-", "-", "-", "-", "-");
                }
                if (json)
                        strbuf_puts(out, "]}");
                else
                        text_vm_policy(d, vm, out);
        }
        if (json)
                strbuf_puts(out, "]}\n");
}

void render_cpus(const struct daemon_view *d, bool json, struct strbuf *out)
{
        const struct topology *t = d->topo;
        bool first = true;

        if (json)
                strbuf_puts(out, "{\"cpus\":[");
        else {
                strbuf_printf(out, "%4s %4s %4s %5s %4s %4s %6s %6s", "CPU", "PKG", "DIE", "CORE", "LLC",
                              "NODE", "ONLINE", "BUSY%");
                if (t->n_cpus > 0)
                        for (unsigned s = 0; s < t->cpus[0].n_idle_states; s++)
                                strbuf_printf(out, " %9.9s%%", t->cpus[0].idle[s].name);
                strbuf_puts(out, "\n");
        }
        for (unsigned cpu = 0; cpu < t->n_cpus; cpu++) {
                const struct topo_cpu *c = &t->cpus[cpu];
                const struct pcpu_load *l = d->pcpu ? pcpu_stat_load(d->pcpu, cpu) : NULL;

                if (!c->present)
                        continue;
                if (json) {
                        strbuf_printf(out,
                                      "%s{\"cpu\":%u,\"package\":%d,\"die\":%d,\"core\":%d,\"llc\":%d,"
                                      "\"node\":%d,\"online\":%s,",
                                      first ? "" : ",", cpu, c->package_id, c->die_id, c->core_id, c->llc_id,
                                      c->node, c->online ? "true" : "false");
                        json_ratio(out, "busy", l != NULL, l ? l->busy_ratio : 0);
                        strbuf_puts(out, ",\"idle_states\":[");
                        for (unsigned s = 0; s < c->n_idle_states; s++) {
                                strbuf_printf(out, "%s{\"name\":", s ? "," : "");
                                strbuf_json_string(out, c->idle[s].name);
                                strbuf_printf(out, ",\"latency_us\":%u,\"residency_us\":%u,\"disabled\":%s,",
                                              c->idle[s].exit_latency_us, c->idle[s].target_residency_us,
                                              c->idle[s].disabled ? "true" : "false");
                                json_ratio(out, "share", l != NULL, l ? l->state_residency[s] : 0);
                                strbuf_puts(out, "}");
                        }
                        strbuf_puts(out, "]}");
                        first = false;
                        continue;
                }
                strbuf_printf(out, "%4u %4d %4d %5d %4d %4d %6s ", cpu, c->package_id, c->die_id, c->core_id,
                              c->llc_id, c->node, c->online ? "yes" : "no");
                if (l)
                        strbuf_printf(out, "%6.1f", pct(l->busy_ratio));
                else
                        strbuf_printf(out, "%6s", "-");
                for (unsigned s = 0; s < c->n_idle_states; s++)
                        if (l)
                                strbuf_printf(out, " %10.1f", pct(l->state_residency[s]));
                        else
                                strbuf_printf(out, " %10s", "-");
                strbuf_puts(out, "\n");
        }
        if (json)
                strbuf_puts(out, "]}\n");
}

void render_top(const struct daemon_view *d, struct strbuf *out)
{
        render_status(d, false, out);
        strbuf_puts(out, "\n");
        render_cpus(d, false, out);
        strbuf_puts(out, "\n");
        render_vms(d, false, out);
}

static const char *plan_vm_name(const struct daemon_view *d, pid_t pid)
{
        const struct vm_load *vm = tracker_find_vm(d->tracker, pid);

        return vm ? vm->info.name : "(gone)";
}

/* Does the host have cpuidle states / cpufreq policies the applier can act on? */
static bool host_has_cpuidle(const struct daemon_view *d)
{
        const char *drv = d->topo ? d->topo->cpuidle_driver : "";
        return drv[0] && strcmp(drv, "none") != 0;
}

static bool host_has_cpufreq(const struct daemon_view *d)
{
        return d->topo && d->topo->n_policies > 0;
}

static void plan_idle_limit(const struct daemon_view *d, unsigned cpu, char *buf, size_t size)
{
        const struct plan *p = d->plan;
        int s = p->cpu_idle_state[cpu];

        if (s < 0 || (unsigned) s >= d->em->model.n_idle)
                snprintf(buf, size, "-");
        else
                snprintf(buf, size, "%s", d->em->model.idle[s].name);
}

/* A NUMA node mask (plan_vcpu.nodes) as a list, "1" or "0-1"; "" for none (any node). */
static void node_list(uint64_t mask, char *buf, size_t size)
{
        cpuset_t set;

        buf[0] = 0;
        if (!mask)
                return;
        cpuset_zero(&set);
        for (unsigned n = 0; n < 64; n++)
                if ((mask >> n) & 1)
                        cpuset_set(&set, n);
        if (cpuset_format_list(&set, buf, size) < 0)
                buf[0] = 0;
}

/* Online CPUs of LLC g. */
static unsigned llc_cpus(const struct em_host *h, unsigned g)
{
        unsigned n = 0;

        for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++)
                n += h->cores[k].n_threads;
        return n;
}

/* Why pack set g has its size, in words (vmmpowerctl plan). */
static void plan_set_reason(const struct daemon_view *d, unsigned g, const struct plan_set *ps, char *buf,
                            size_t size)
{
        if (d->cfg->profile)
                snprintf(buf, size, "batch profile: its CPUs filled to HeadroomPercent %u%%", d->cfg->headroom_pct);
        else if (ps->pwait > ps->budget && g < d->em->n_llcs && ps->cpus >= llc_cpus(d->em, g))
                snprintf(buf, size, "over the budget with every CPU of its LLC: its load is more than the LLC "
                         "carries within the budget, no plan can grow it");
        else if (ps->pwait > ps->budget)
                snprintf(buf, size, "over the budget even at its level: grows at the next period");
        else if (ps->cpus > 1 && ps->pwait_less > ps->budget && ps->corr > 1.005)
                snprintf(buf, size, "fewest CPUs within the budget (%u would queue %.2f%%), the model x%.2f by the "
                         "measured wait%s", ps->cpus - 1, 100.0 * ps->pwait_less, ps->corr,
                         ps->corr <= ps->corr_floor + 0.005 ? " (held at its floor: it went over once)" : "");
        else if (ps->cpus > 1 && ps->pwait_less > ps->budget)
                snprintf(buf, size, "fewest CPUs within the budget (%u would queue %.2f%%)", ps->cpus - 1,
                         100.0 * ps->pwait_less);
        else if (ps->cpus > 1)
                snprintf(buf, size, "%u would do (%.2f%%): held by a large vCPU, the dwell or the move cap",
                         ps->cpus - 1, 100.0 * ps->pwait_less);
        else
                snprintf(buf, size, "one CPU");
}

static void render_plan_sets(const struct daemon_view *d, const struct plan *p, bool json, struct strbuf *out)
{
        bool first = true;

        if (!json)
                strbuf_printf(out, "\n%4s %5s %6s %8s %6s %9s %9s %6s %8s  %s\n", "LLC", "CPUS", "VCPUS", "DEMAND%",
                              "LEVEL", "P(QUEUE)", "MEASURED", "CORR", "BUDGET", "WHY");
        for (unsigned g = 0; g < p->n_llcs && p->set; g++) {
                const struct plan_set *ps = &p->set[g];
                char why[192];
                if (ps->cpus == 0)
                        continue;
                plan_set_reason(d, g, ps, why, sizeof(why));
                if (json) {
                        strbuf_printf(out,
                                      "%s{\"llc\":%u,\"cpus\":%u,\"vcpus\":%u,\"demand\":%.4f,\"level\":%u,"
                                      "\"pwait\":%.6f,\"pwait_one_less\":%.6f,\"measured\":%.6f,\"corr\":%.3f,"
                                      "\"corr_floor\":%.3f,\"budget\":%.6f,\"why\":",
                                      first ? "" : ",", g, ps->cpus, ps->vcpus, ps->demand, ps->level, ps->pwait,
                                      ps->pwait_less, ps->measured, ps->corr, ps->corr_floor, ps->budget);
                        strbuf_json_string(out, why);
                        strbuf_puts(out, "}");
                } else
                        strbuf_printf(out, "%4u %5u %6u %8.1f %6u %8.2f%% %8.2f%% %6.2f %7.2f%%  %s\n", g, ps->cpus,
                                      ps->vcpus, pct(ps->demand), ps->level, 100.0 * ps->pwait,
                                      100.0 * ps->measured, ps->corr, 100.0 * ps->budget, why);
                first = false;
        }
}

void render_plan(const struct daemon_view *d, bool json, struct strbuf *out)
{
        const struct plan *p = d->plan;

        if (!d->em) {
                strbuf_puts(out, json ? "{\"enabled\":false}\n" : "planner: disabled ([Planner] Enabled = no)\n");
                return;
        }
        if (!p) {
                strbuf_puts(out, json ? "{\"enabled\":true,\"plan\":null}\n" : "planner: no plan yet\n");
                return;
        }
        if (json) {
                strbuf_printf(out, "{\"enabled\":true,\"advisory\":%s,\"apply\":", d->applier ? "false" : "true");
                render_apply_json(d, out);
                strbuf_puts(out, ",\"model\":");
                strbuf_json_string(out, d->model_source);
                strbuf_printf(out,
                              ",\"decision\":\"%s\",\"plan_mw\":%.1f,\"spread_mw\":%.1f,\"prev_mw\":%.1f,"
                              "\"target_mw\":%.1f,\"n_active\":%u,\"moves\":%u,\"moves_deferred\":%u,"
                              "\"moves_capped\":%u,\"moves_dwell\":%u,\"moves_cooling\":%u,"
                              "\"forced_wake_cpu\":%d,\"pins_host_wide\":%s,\"plan_cpu_ns\":%" PRId64 ",\"reason\":",
                              plan_decision_to_string(p->why.decision), p->why.plan_mw, p->why.spread_mw,
                              p->why.prev_mw, p->why.target_mw, p->why.n_active, p->why.moves,
                              p->why.moves_deferred, p->why.moves_capped, p->why.moves_dwell, p->why.moves_cooling,
                              p->why.forced_wake_cpu,
                              p->sets_as_one ? "true" : "false",
                              d->counters->last_plan_cpu_ns);
                strbuf_json_string(out, p->why.text);
                strbuf_puts(out, ",\"cpus\":[");
                for (unsigned cpu = 0; cpu < p->n_cpus; cpu++) {
                        char idle[64];
                        plan_idle_limit(d, cpu, idle, sizeof(idle));
                        strbuf_printf(out, "%s{\"cpu\":%u,\"active\":%s,\"work\":%.4f,\"level\":%u,\"idle_limit\":",
                                      cpu ? "," : "", cpu, cpuset_isset(&p->active, cpu) ? "true" : "false",
                                      p->cpu_work[cpu], p->fdom_level[d->em->cpu_fdom[cpu]]);
                        strbuf_json_string(out, idle);
                        strbuf_printf(out, ",\"max_latency_us\":%u,\"max_khz\":%u}", p->cpu_max_latency_us[cpu],
                                      d->em->model.levels[p->fdom_level[d->em->cpu_fdom[cpu]]].freq_khz);
                }
                strbuf_puts(out, "],\"vcpus\":[");
                for (unsigned i = 0; i < p->n_vcpus && i < d->plan_in->n; i++) {
                        struct vcpu_ref r = vcpu_ref_of_key(p->vcpu_key[i]);
                        char nodes[64];
                        strbuf_printf(out, "%s{\"vm\":", i ? "," : "");
                        strbuf_json_string(out, plan_vm_name(d, r.pid));
                        strbuf_printf(out, ",\"pid\":%d,\"vcpu\":%u,\"util\":%.4f,\"wait\":%.4f,\"wait_avg\":%.4f,"
                                      "\"demand\":%.4f,\"cpu\":%d,\"alone\":%s,\"boost\":%s,\"numa_nodes\":",
                                      (int) r.pid, (unsigned) r.index, d->plan_in->v[i].util,
                                      d->plan_in->v[i].wait_ratio, d->plan_in->v[i].wait_avg, p->vcpu_demand[i],
                                      p->vcpu_cpu[i], p->vcpu_alone[i] ? "true" : "false",
                                      p->vcpu_boost[i] ? "true" : "false");
                        node_list(d->plan_in->v[i].nodes, nodes, sizeof(nodes));
                        if (nodes[0])
                                strbuf_json_string(out, nodes);
                        else
                                strbuf_puts(out, "null");
                        strbuf_puts(out, "}");
                }
                strbuf_printf(out, "],\"host_cpuidle\":%s,\"host_cpufreq\":%s,\"profile\":",
                              host_has_cpuidle(d) ? "true" : "false", host_has_cpufreq(d) ? "true" : "false");
                strbuf_json_string(out, d->cfg->profile ? "batch" : "latency");
                strbuf_puts(out, ",\"sets\":[");
                render_plan_sets(d, p, true, out);
                strbuf_puts(out, "]}\n");
                return;
        }
        strbuf_printf(out, "plan (%s): %s, %u of %u pCPUs active, %u moves (%u deferred: %u held by the move cap, "
                           "%u waiting for the dwell, %u held by the move cooldown)\n",
                      d->applier ? "applied" : d->dry_run ? "dry run: shown, not applied"
                      : d->counters->apply_start_errors > 0 ? "NOT APPLIED: the applier failed to start"
                                                           : "advisory: shown, not applied",
                      plan_decision_to_string(p->why.decision), p->why.n_active, cpuset_count(&d->topo->online),
                      p->why.moves, p->why.moves_deferred, p->why.moves_capped, p->why.moves_dwell,
                      p->why.moves_cooling);
        strbuf_printf(out, "modelled power: plan %.0f mW, spread %.0f mW, previous placement %.0f mW, best %.0f mW\n",
                      p->why.plan_mw, p->why.spread_mw, p->why.prev_mw, p->why.target_mw);
        strbuf_printf(out, "reason: %s\n", p->why.text);
        if (p->why.forced_wake_cpu >= 0)
                strbuf_printf(out, "forced wake: CPU %d for vCPU %u of %s\n", p->why.forced_wake_cpu,
                              (unsigned) vcpu_ref_of_key(p->why.forced_by_key).index,
                              plan_vm_name(d, vcpu_ref_of_key(p->why.forced_by_key).pid));
        strbuf_printf(out, "model: %s; planned in %.1f us CPU\n", d->model_source,
                      (double) d->counters->last_plan_cpu_ns / NSEC_PER_USEC);
        if (d->applier)
                strbuf_printf(out, "applied: %" PRIu64 " pins made, %" PRIu64 " failed attempts (%" PRIu64
                              " given up), %" PRIu64 " threads gone, %" PRIu64 " knob changes (%" PRIu64 " failed)\n",
                              d->apply.pins, d->apply.pin_errors, d->apply.pin_gave_up, d->apply.pin_gone,
                              d->apply.knob_changes, d->apply.knob_errors);
        if (d->applier && (d->apply.pin_widened || d->apply.pin_foreign))
                strbuf_printf(out, "pins checked: %" PRIu64 " found widened and made again, %" PRIu64
                              " changed by someone else and left to them (%u now, %" PRIu64 " handed back)\n",
                              d->apply.pin_widened, d->apply.pin_foreign, d->apply.pins_foreign,
                              d->apply.pin_handed_back);
        strbuf_puts(out, "\n");
        /* the model's idle states and levels are what the plan is scored with; a host with no cpuidle
         * driver or no cpufreq has none to apply: say so rather than show them as if they existed */
        if (!host_has_cpuidle(d))
                strbuf_printf(out, "this host has no cpuidle driver (\"%s\"): idle limits are not applied, "
                                   "DEEPEST-IDLE shows \"-\"\n", d->topo ? d->topo->cpuidle_driver : "");
        if (!host_has_cpufreq(d))
                strbuf_puts(out, "this host has no cpufreq: performance levels are not applied, LEVEL shows \"-\"\n");
        strbuf_printf(out, "%4s %6s %6s %6s %-16s %s\n", "CPU", "ACTIVE", "WORK%", "LEVEL", "DEEPEST-IDLE",
                      "MAX-EXIT-LATENCY");
        for (unsigned cpu = 0; cpu < p->n_cpus; cpu++) {
                char idle[64];
                if (!cpuset_isset(&d->topo->online, cpu))
                        continue;
                char level[16];
                plan_idle_limit(d, cpu, idle, sizeof(idle));
                if (!host_has_cpuidle(d))
                        snprintf(idle, sizeof(idle), "-");
                if (host_has_cpufreq(d))
                        snprintf(level, sizeof(level), "%u", p->fdom_level[d->em->cpu_fdom[cpu]]);
                else
                        snprintf(level, sizeof(level), "-");
                strbuf_printf(out, "%4u %6s %6.1f %6s %-16.16s ", cpu, cpuset_isset(&p->active, cpu) ? "yes" : "no",
                              pct(p->cpu_work[cpu]), level, idle);
                if (!host_has_cpuidle(d))
                        strbuf_puts(out, "-\n");
                else if (p->cpu_max_latency_us[cpu] == EM_LATENCY_ANY)
                        strbuf_puts(out, "any\n");
                else
                        strbuf_printf(out, "%u us\n", p->cpu_max_latency_us[cpu]);
        }
        strbuf_printf(out, "\npack sets (profile %s; P(QUEUE): predicted share of wake-ups that find every CPU "
                           "of the set busy; MEASURED: what its vCPUs' run-queue wait stands for):",
                      d->cfg->profile ? "batch" : "latency");
        render_plan_sets(d, p, false, out);
        strbuf_printf(out, "\n%-24s %4s %8s %4s %5s  %s\n", "VM", "VCPU", "AVG%", "CPU", "ALONE", "NODES");
        for (unsigned i = 0; i < p->n_vcpus && i < d->plan_in->n; i++) {
                struct vcpu_ref r = vcpu_ref_of_key(p->vcpu_key[i]);
                char nodes[64];

                node_list(d->plan_in->v[i].nodes, nodes, sizeof(nodes));
                strbuf_printf(out, "%-24.24s %4u %8.1f %4d %5s  %s\n", plan_vm_name(d, r.pid),
                              (unsigned) r.index, pct(d->plan_in->v[i].util), p->vcpu_cpu[i],
                              p->vcpu_alone[i] ? "yes" : "", nodes[0] ? nodes : "-");
        }
}
