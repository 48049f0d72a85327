/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Text table, CSV and SVG of a simulation result (docs/simulator.md "Output"). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

static double kwh(const struct sim_result *r, int p)
{
        return r->p[p].energy_j / 3.6e6;
}

static double gap_closed(const struct sim_result *r, int p)
{
        double b0 = r->p[SIM_B0].energy_j, lb = r->p[SIM_FLUID].energy_j;
        return b0 - lb > 0 ? (b0 - r->p[p].energy_j) / (b0 - lb) : NAN;
}

static bool runs(int p)
{
        return p < _SIM_RUN_MAX;
}

void sim_print_table(const struct sim_result *r, FILE *f)
{
        fprintf(f, "%u VMs, %u vCPUs on %u CPUs (%.2f:1), mean demand %.1f%% of a vCPU, %u intervals, %.0f vCPU-hours\n",
                r->n_vms, r->n_vcpus, r->n_cpus, (double) r->n_vcpus / r->n_cpus, 100 * r->mean_util, r->n_intervals,
                r->vcpu_hours);
        fprintf(f, "demand unit: a fully busy vCPU = %.3f of a CPU at the top level (perf level %u)\n", r->demand_scale,
                r->demand_level);
        if (r->want_vcpus)
                fprintf(f, "whole VMs: %u vCPUs against a target of %u (%u short; a VM that would go over is passed over)\n",
                        r->n_vcpus, r->want_vcpus, r->want_vcpus - MIN(r->n_vcpus, r->want_vcpus));
        fprintf(f, "%-11s %9s %7s %7s %8s %9s %9s %8s %9s %7s %9s %9s %7s %9s\n", "policy", "kWh", "vs_B0", "gap",
                "vs_fluid", "wait_p50", "wait_p99", "queued%", "wait_p999", "deep%", "migr/vCh", "moves/vCh", "undel%",
                "cpu_s");
        fprintf(f, "%-11s %9s %7s %7s %8s %9s %9s %8s %9s %7s %9s %9s %7s %9s\n", "", "", "", "closed", "", "us", "us",
                "wakes", "us", "wakes", "all", "placement", "demand", "decide");
        for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                const struct sim_policy_result *x = &r->p[p];
                fprintf(f, "%-11s %9.3f %6.1f%% %6.1f%% %+7.1f%%", sim_policy_name(p), kwh(r, p),
                        100.0 * x->energy_j / r->p[SIM_B0].energy_j, 100.0 * gap_closed(r, p),
                        100.0 * (x->energy_j / r->p[SIM_FLUID].energy_j - 1));
                if (runs(p))
                        fprintf(f, " %9.1f %9.1f %7.2f%% %9.1f %6.2f%% %9.2f %9.2f %6.2f%% %9.3f\n",
                                wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                                x->wakeups ? 100.0 * x->queued_wakeups / x->wakeups : 0.0,
                                wait_hist_percentile(&x->hist, 0.999) / 1e3,
                                x->wakeups ? 100.0 * x->deep_wakeups / x->wakeups : 0.0,
                                r->vcpu_hours > 0 ? x->migrations / r->vcpu_hours : 0.0,
                                r->vcpu_hours > 0 ? x->moves / r->vcpu_hours : 0.0,
                                r->demand_cpu_s > 0 ? 100.0 * x->overload_s / r->demand_cpu_s : 0.0,
                                x->decide_cpu_ns / 1e9);
                else
                        fprintf(f, " %9s %9s %8s %9s %7s %9s %9s %7s %9s\n", "-", "-", "-", "-", "-", "-", "-", "-",
                                "-");
        }
        fprintf(f, "vmmpower: %llu plans (%llu grow, %llu shrink; %llu with the pack sets pinned as one, %llu times "
                   "entered), %.2f ms CPU per plan, vCPUs on %.1f CPUs in %.2f LLCs on the mean; overload CPU-s:",
                (unsigned long long) r->p[SIM_VMM].decisions, (unsigned long long) r->p[SIM_VMM].grows,
                (unsigned long long) r->p[SIM_VMM].shrinks, (unsigned long long) r->p[SIM_VMM].host_wide,
                (unsigned long long) r->p[SIM_VMM].host_wide_entries,
                r->p[SIM_VMM].decisions ? r->p[SIM_VMM].decide_cpu_ns / 1e6 / r->p[SIM_VMM].decisions : 0.0,
                r->p[SIM_VMM].decisions ? (double) r->p[SIM_VMM].active_cpus / r->p[SIM_VMM].decisions : 0.0,
                r->p[SIM_VMM].decisions ? (double) r->p[SIM_VMM].active_llcs / r->p[SIM_VMM].decisions : 0.0);
        for (int p = 0; p < _SIM_RUN_MAX; p++)
                fprintf(f, " %s %.0f", sim_policy_name(p), r->p[p].overload_s);
        fprintf(f, "\nlat-bound: queueing budget %.2f%% of wake-ups (Erlang C), mean set %.1f CPUs; %u of %u intervals "
                   "where no placement meets it (the fluid bound counted there)",
                100.0 * r->queue_budget, r->latbound_cpus, r->latbound_infeasible, r->n_intervals);
        fprintf(f, "\nlat-bound per LLC (sets within an LLC, as the planner keeps them; a reference, not a bound): "
                   "%.1f%% of B0, mean sets %.1f CPUs in all; %u intervals where none meets it",
                r->p[SIM_B0].energy_j > 0 ? 100.0 * r->latbound_llc_j / r->p[SIM_B0].energy_j : 0.0,
                r->latbound_llc_cpus, r->latbound_llc_infeasible);
        for (unsigned o = 0; o < 2; o++)
                for (unsigned j = 0; j < SIM_N_REF; j++) {
                        const struct sim_ref_result *x = o ? &r->ref_one[j] : &r->ref[j];
                        if (x->windows == 0)
                                continue;
                        fprintf(f, "\n%s at %.2f%%, placed (--check-reference, %u windows; %u intervals without "
                                   "a placement): %.1f%% of B0; %.2f%% of its wake-ups queued, wait p50 %.1f us, "
                                   "p99 %.1f us",
                                o ? "lat-bound (one set)" : "lat-bound per LLC", 100.0 * x->budget, x->windows,
                                x->infeasible,
                                r->p[SIM_B0].energy_j > 0 ? 100.0 * x->energy_j / r->p[SIM_B0].energy_j : 0.0,
                                x->wakeups ? 100.0 * (double) x->queued_wakeups / (double) x->wakeups : 0.0,
                                wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3);
                }
        for (unsigned lag = 0; lag < 2; lag++) {
                const struct sim_ref_result *x = lag ? &r->binpack_lag : &r->binpack_placed;
                if (x->windows == 0)
                        continue;
                fprintf(f, "\nbinpack-ref placed%s (--check-binpack, %u windows), charged as a policy: %.1f%% of B0 "
                           "(the reference %.1f%%); %.2f%% of its wake-ups queued, wait p50 %.1f us, p99 %.1f us; "
                           "overload %.0f CPU-s",
                        lag ? " one interval late" : "", x->windows,
                        r->p[SIM_B0].energy_j > 0 ? 100.0 * x->energy_j / r->p[SIM_B0].energy_j : 0.0,
                        r->p[SIM_B0].energy_j > 0 ? 100.0 * r->p[SIM_BINPACK_REF].energy_j / r->p[SIM_B0].energy_j
                                                  : 0.0,
                        x->wakeups ? 100.0 * (double) x->queued_wakeups / (double) x->wakeups : 0.0,
                        wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                        x->overload_s);
        }
        if (r->binpack_fill_placed.windows > 0) {
                const struct sim_ref_result *x = &r->binpack_fill_placed;
                double b0 = r->p[SIM_B0].energy_j;
                fprintf(f, "\nbinpack-ref at %g%% of capacity (every CPU and core within the level headroom, "
                           "--check-binpack): %.1f%% of B0; placed, charged as a policy: %.1f%% of B0; %.2f%% of its "
                           "wake-ups queued, wait p50 %.1f us, p99 %.1f us; overload %.0f CPU-s",
                        100.0 * r->binpack_fill, b0 > 0 ? 100.0 * r->binpack_fill_j / b0 : 0.0,
                        b0 > 0 ? 100.0 * x->energy_j / b0 : 0.0,
                        x->wakeups ? 100.0 * (double) x->queued_wakeups / (double) x->wakeups : 0.0,
                        wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                        x->overload_s);
        }
        fprintf(f, "\nundelivered work: %s at %.0f mW per CPU (the top level's busy power over the shallowest idle "
                   "state's, with its share of the platform's busy power, over the PSU efficiency); charged kWh:",
                r->free_undelivered ? "not charged (--free-undelivered), would be" : "charged in kWh",
                r->undelivered_mw);
        for (int p = 0; p < _SIM_RUN_MAX; p++)
                fprintf(f, " %s %.3f", sim_policy_name(p), r->p[p].undelivered_j / 3.6e6);
        fprintf(f, "\nsimulated in %.1f s wall, %.1f s CPU, %llu burst events (window %.1f s per step, vmmpower's %.1f s)\n",
                r->wall_ns / 1e9, r->cpu_ns / 1e9, (unsigned long long) r->events, r->window_ns / 1e9,
                r->vmm_window_ns / 1e9);
}

/* A --check-binpack placement's CSV row: energy charged as a policy's, its waits, wake-ups, work
 * over capacity (as undelivered) and queued share; nothing for a placement not run. */
static void placed_row(FILE *f, const struct sim_result *r, const char *label, const char *name,
                       const struct sim_ref_result *x)
{
        double b0 = r->p[SIM_B0].energy_j, fl = r->p[SIM_FLUID].energy_j;
        double ej = x->energy_j, uj = x->overload_s * r->undelivered_mw / 1000.0;

        if (x->windows == 0)
                return;
        fprintf(f, "%s,%s,%u,%u,%u,%.3f,%.6f,%.6f,%.6f,%.6f,", label, name, r->n_vms, r->n_vcpus, r->n_cpus,
                r->vcpu_hours, ej / 3.6e6, b0 > 0 ? ej / b0 : NAN, b0 - fl > 0 ? (b0 - ej) / (b0 - fl) : NAN,
                fl > 0 ? ej / fl - 1 : NAN);
        fprintf(f, "%.3f,%.3f,%.3f,%llu,,,,,%.3f,,,,%.6f,%llu,%.6f,%.6f,0\n",
                wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                wait_hist_percentile(&x->hist, 0.999) / 1e3, (unsigned long long) x->wakeups, x->overload_s,
                r->demand_cpu_s > 0 ? x->overload_s / r->demand_cpu_s : 0.0, (unsigned long long) x->queued_wakeups,
                x->wakeups ? (double) x->queued_wakeups / x->wakeups : 0.0, uj / 3.6e6);
}

void sim_write_csv(const struct sim_result *r, const char *label, bool header, FILE *f)
{
        if (header)
                fprintf(f, "run,policy,vms,vcpus,cpus,vcpu_hours,energy_kwh,rel_b0,gap_closed,vs_fluid,"
                           "wait_p50_us,wait_p99_us,wait_p999_us,wakeups,deep_wakeups,deep_share,"
                           "migrations_per_vcpu_hour,decide_cpu_s,overload_cpu_s,grows,shrinks,"
                           "moves_per_vcpu_hour,undelivered_share,queued_wakeups,queued_share,undelivered_kwh,no_placement\n");
        for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                const struct sim_policy_result *x = &r->p[p];
                fprintf(f, "%s,%s,%u,%u,%u,%.3f,%.6f,%.6f,%.6f,%.6f,", label, sim_policy_name(p), r->n_vms, r->n_vcpus,
                        r->n_cpus, r->vcpu_hours, kwh(r, p), x->energy_j / r->p[SIM_B0].energy_j, gap_closed(r, p),
                        x->energy_j / r->p[SIM_FLUID].energy_j - 1);
                if (runs(p))
                        fprintf(f, "%.3f,%.3f,%.3f,%llu,%llu,%.6f,%.4f,%.6f,%.3f,%llu,%llu,%.4f,%.6f,%llu,%.6f,%.6f,\n",
                                wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                                wait_hist_percentile(&x->hist, 0.999) / 1e3, (unsigned long long) x->wakeups,
                                (unsigned long long) x->deep_wakeups,
                                x->wakeups ? (double) x->deep_wakeups / x->wakeups : 0.0,
                                r->vcpu_hours > 0 ? x->migrations / r->vcpu_hours : 0.0, x->decide_cpu_ns / 1e9,
                                x->overload_s, (unsigned long long) x->grows, (unsigned long long) x->shrinks,
                                r->vcpu_hours > 0 ? x->moves / r->vcpu_hours : 0.0,
                                r->demand_cpu_s > 0 ? x->overload_s / r->demand_cpu_s : 0.0,
                                (unsigned long long) x->queued_wakeups,
                                x->wakeups ? (double) x->queued_wakeups / x->wakeups : 0.0, x->undelivered_j / 3.6e6);
                else
                        fprintf(f, ",,,,,,,,,,,,,,,,\n");
        }
        /* the per-LLC reference (not a policy, not a bound): energy and its share of B0's; with
         * --check-reference also its placements' waits and queued wake-ups in the burst simulation,
         * and the same at the smaller budgets (rows lat-bound-llc@BUDGET%); then the lat-bound's
         * one set placed the same way (rows lat-bound-set, lat-bound-set@BUDGET%) */
        double b0 = r->p[SIM_B0].energy_j, fl = r->p[SIM_FLUID].energy_j;
        for (unsigned j = 0; j < 2 * SIM_N_REF; j++) {
                bool one = j >= SIM_N_REF;
                unsigned jj = one ? j - SIM_N_REF : j;
                const struct sim_ref_result *x = one ? &r->ref_one[jj] : &r->ref[jj];
                double ej = jj > 0 || one ? x->energy_j : r->latbound_llc_j;
                const char *base = one ? "lat-bound-set" : "lat-bound-llc";
                char name[48];
                if ((one || jj > 0) && x->windows == 0 && x->infeasible == 0)
                        break; /* no --check-reference */
                if (jj == 0)
                        snprintf(name, sizeof(name), "%s", base);
                else
                        snprintf(name, sizeof(name), "%s@%g%%", base, 100.0 * x->budget);
                fprintf(f, "%s,%s,%u,%u,%u,%.3f,%.6f,%.6f,%.6f,%.6f,", label, name, r->n_vms, r->n_vcpus, r->n_cpus,
                        r->vcpu_hours, ej / 3.6e6, b0 > 0 ? ej / b0 : NAN, b0 - fl > 0 ? (b0 - ej) / (b0 - fl) : NAN,
                        fl > 0 ? ej / fl - 1 : NAN);
                /* no_placement: its intervals without a placement (the fluid bound counted in its energy) */
                unsigned none = jj > 0 ? x->infeasible : one ? r->latbound_infeasible : r->latbound_llc_infeasible;
                if (x->windows > 0)
                        fprintf(f, "%.3f,%.3f,%.3f,%llu,,,,,,,,,,%llu,%.6f,,%u\n",
                                wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                                wait_hist_percentile(&x->hist, 0.999) / 1e3, (unsigned long long) x->wakeups,
                                (unsigned long long) x->queued_wakeups,
                                x->wakeups ? (double) x->queued_wakeups / x->wakeups : 0.0, none);
                else
                        fprintf(f, ",,,,,,,,,,,,,,,,%u\n", none);
        }
        /* --check-binpack: the bin-packing reference's placements simulated and charged as a policy
         * (its energy includes its undelivered work unless --free-undelivered, as a policy's), then
         * the same packing one interval late (row binpack-lagged); then the reference within the
         * level headroom (row binpack-ref@FILL%, its energy only) and its placements simulated
         * (row binpack-placed@FILL%) */
        placed_row(f, r, label, "binpack-placed", &r->binpack_placed);
        placed_row(f, r, label, "binpack-lagged", &r->binpack_lag);
        if (r->binpack_fill_placed.windows == 0)
                return;
        char name[48];
        double fj = r->binpack_fill_j;
        fprintf(f, "%s,binpack-ref@%g%%,%u,%u,%u,%.3f,%.6f,%.6f,%.6f,%.6f,,,,,,,,,,,,,,,,,\n", label,
                100.0 * r->binpack_fill, r->n_vms, r->n_vcpus, r->n_cpus, r->vcpu_hours, fj / 3.6e6,
                b0 > 0 ? fj / b0 : NAN, b0 - fl > 0 ? (b0 - fj) / (b0 - fl) : NAN, fl > 0 ? fj / fl - 1 : NAN);
        snprintf(name, sizeof(name), "binpack-placed@%g%%", 100.0 * r->binpack_fill);
        placed_row(f, r, label, name, &r->binpack_fill_placed);
}

static const char *const colours[_SIM_POLICY_MAX] = { "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e",
                                                      "#555555", "#8c564b", "#17becf" };
/* Every policy its own stroke, so that equal lines stay visible: B2 wide and pale under B0's thin dashes. */
static const char *const dashes[_SIM_POLICY_MAX] = { "", "7,4", "2,3", "", "10,3,2,3", "4,4", "12,4", "2,2" };
static const double widths[_SIM_POLICY_MAX] = { 2.5, 1.6, 1.8, 5.0, 1.6, 1.4, 1.4, 1.6 };
static const double opacity[_SIM_POLICY_MAX] = { 1, 1, 1, 0.45, 1, 1, 1, 1 };
/* Draw order: wide pale lines first. */
static const int draw_order[_SIM_POLICY_MAX] = { SIM_B2, SIM_FLUID, SIM_BINPACK_REF, SIM_LATBOUND, SIM_B1, SIM_B3,
                                                     SIM_B0, SIM_VMM };

#define SVG_SMOOTH_S 3600.0 /* centred moving average of the power plot */

static void svg_text(FILE *f, const char *t)
{
        for (const char *c = t; *c; c++) /* escape for XML */
                switch (*c) {
                case '<': fputs("&lt;", f); break;
                case '>': fputs("&gt;", f); break;
                case '&': fputs("&amp;", f); break;
                default: fputc(*c, f);
                }
}

/* An axis step of 1, 2 or 5 x 10^n giving about n_ticks ticks over span. */
static double nice_step(double span, int n_ticks)
{
        double raw = span > 0 ? span / n_ticks : 1, mag = pow(10, floor(log10(raw))), m = raw / mag;
        return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
}

static int svg_smooth_window(const struct sim_result *r)
{
        double iv_s = (double) r->interval_ns / 1e9;
        int w = iv_s > 0 ? (int) lround(SVG_SMOOTH_S / iv_s) : 1;
        if (w > (int) r->n_intervals / 6)
                w = (int) r->n_intervals / 6;
        return w < 1 ? 1 : w;
}

/* A horizontal bar chart of one value per running policy, at (x, y) of width w. */
static void svg_bars(FILE *f, double x, double y, double w, const char *caption, const double *v)
{
        double vmax = 0, bh = 22, lx = 80;
        for (int p = 0; p < _SIM_RUN_MAX; p++)
                vmax = fmax(vmax, isfinite(v[p]) ? v[p] : 0);
        double step = nice_step(vmax, 4), top = step * ceil(vmax / step);
        if (!(top > 0))
                top = 1;
        double bw = w - lx - 60;
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">", x, y);
        svg_text(f, caption);
        fputs("</text>\n", f);
        y += 12;
        for (double t = 0; t <= top * 1.0001; t += step) {
                double tx = x + lx + bw * t / top;
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", tx, y, tx,
                        y + _SIM_RUN_MAX * (bh + 6));
                fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#555\">", tx,
                        y + _SIM_RUN_MAX * (bh + 6) + 14);
                fprintf(f, "%g", t);
                fputs("</text>\n", f);
        }
        for (int p = 0; p < _SIM_RUN_MAX; p++) {
                double by = y + p * (bh + 6), len = isfinite(v[p]) ? bw * fmax(v[p], 0) / top : 0;
                fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%s</text>\n", x + lx - 6, by + bh / 2 + 4,
                        sim_policy_name(p));
                fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>\n", x + lx, by,
                        fmax(len, 1), bh, colours[p]);
                fprintf(f, "<text x=\"%.1f\" y=\"%.0f\">", x + lx + fmax(len, 1) + 4, by + bh / 2 + 4);
                if (isfinite(v[p]))
                        fprintf(f, "%.3g", v[p]);
                else
                        fputs("-", f);
                fputs("</text>\n", f);
        }
}

/*
 * Two panels: modelled power over the trace per policy (a centred moving average of SVG_SMOOTH_S, the
 * y axis fitted to the data, every policy its own colour and dash, labels at the right end pushed
 * apart so that equal lines keep both labels), and per running policy its wait p99 and the share of
 * the demand it did not deliver.
 */
int sim_write_svg(const struct sim_result *r, const char *title, FILE *f)
{
        const double W = 1060, L = 70, R = 270, T = 56, PH = 340, H = T + PH + 60 + 40 + _SIM_RUN_MAX * 28 + 50;
        double pw = W - L - R, ph = PH, ymin = INFINITY, ymax = -INFINITY;
        double hours = r->n_intervals * (double) r->interval_ns / 3.6e12;
        unsigned n = r->n_intervals;
        int win = svg_smooth_window(r);
        double *sm;

        if (n == 0)
                return -EINVAL;
        sm = calloc((size_t) _SIM_POLICY_MAX * n, sizeof(double));
        if (!sm)
                return -ENOMEM;
        for (int p = 0; p < _SIM_POLICY_MAX; p++)
                for (unsigned k = 0; k < n; k++) {
                        int a = (int) k - win / 2, b = a + win; /* [a, b) clipped to the trace */
                        double sum = 0;
                        a = a < 0 ? 0 : a;
                        b = b > (int) n ? (int) n : b;
                        for (int j = a; j < b; j++)
                                sum += r->p[p].interval_w[j];
                        sm[(size_t) p * n + k] = sum / (b - a);
                        ymin = fmin(ymin, sm[(size_t) p * n + k]);
                        ymax = fmax(ymax, sm[(size_t) p * n + k]);
                }
        /* the axis fitted to the data: nice ticks just around [ymin, ymax] */
        double step = nice_step(ymax - ymin > 0 ? ymax - ymin : fmax(ymax, 1) * 0.1, 5);
        double y0 = step * floor(ymin / step), y1 = step * ceil(ymax / step);
        if (y1 <= y0)
                y1 = y0 + step;
#define YPX(v) (T + ph - ph * ((v) - y0) / (y1 - y0))
        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
        fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"14\">", L);
        svg_text(f, title);
        fputs("</text>\n", f);
        fprintf(f, "<text x=\"%.0f\" y=\"42\" fill=\"#444\">Modelled power per policy, %d-minute centred moving "
                   "average (%u intervals of %.0f s); axis fitted to the data, not from 0</text>\n",
                L, (int) lround(win * (double) r->interval_ns / 60e9), n, (double) r->interval_ns / 1e9);
        for (double v = y0; v <= y1 + step * 1e-6; v += step) {
                double y = YPX(v);
                fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", L, y, L + pw, y);
                fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", L - 6, y + 4,
                        step < 1 ? 1 : 0, v);
        }
        double hstep = hours > 12 ? 3 : hours > 4 ? 1 : hours > 1 ? 0.5 : hours / 4;
        for (double hv = 0; hstep > 0 && hv <= hours + 1e-9; hv += hstep) {
                double x = L + pw * hv / hours;
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#f0f0f0\"/>\n", x, T, x, T + ph);
                fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n", x, T + ph + 18, hv);
        }
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">hours</text>\n", L + pw / 2, T + ph + 36);
        fprintf(f, "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">"
                   "modelled power (W)</text>\n", T + ph / 2, T + ph / 2);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T,
                pw, ph);
        for (int o = 0; o < _SIM_POLICY_MAX; o++) {
                int p = draw_order[o];
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-opacity=\"%.2f\"%s%s%s "
                           "stroke-linejoin=\"round\" points=\"",
                        colours[p], widths[p], opacity[p], dashes[p][0] ? " stroke-dasharray=\"" : "", dashes[p],
                        dashes[p][0] ? "\"" : "");
                for (unsigned k = 0; k < n; k++)
                        fprintf(f, "%.1f,%.1f ", L + pw * (k + 0.5) / n, YPX(sm[(size_t) p * n + k]));
                fputs("\"/>\n", f);
        }
        /* labels at the right end, in the order of the lines' last values, pushed at least 15 px apart */
        {
                int ord[_SIM_POLICY_MAX];
                double ly[_SIM_POLICY_MAX];
                for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                        ord[p] = p;
                        ly[p] = YPX(sm[(size_t) p * n + n - 1]);
                }
                for (int i = 1; i < _SIM_POLICY_MAX; i++) /* insertion sort by y */
                        for (int j = i; j > 0 && ly[ord[j]] < ly[ord[j - 1]]; j--) {
                                int t = ord[j];
                                ord[j] = ord[j - 1];
                                ord[j - 1] = t;
                        }
                double pos[_SIM_POLICY_MAX];
                for (int i = 0; i < _SIM_POLICY_MAX; i++)
                        pos[i] = i == 0 ? fmax(ly[ord[0]], T + 6) : fmax(ly[ord[i]], pos[i - 1] + 15);
                for (int i = _SIM_POLICY_MAX - 1; i >= 0; i--) /* and back inside the panel from below */
                        if (pos[i] > T + ph + 20 - 15 * (_SIM_POLICY_MAX - 1 - i))
                                pos[i] = T + ph + 20 - 15 * (_SIM_POLICY_MAX - 1 - i);
                for (int i = 0; i < _SIM_POLICY_MAX; i++) {
                        int p = ord[i];
                        double x0 = L + pw + 4;
                        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"0.8\" points=\"%.0f,%.1f %.0f,%.1f "
                                   "%.0f,%.1f\"/>\n", colours[p], L + pw, ly[p], x0 + 8, pos[i], x0 + 12, pos[i]);
                        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\" "
                                   "stroke-opacity=\"%.2f\"%s%s%s/>\n",
                                x0 + 14, pos[i], x0 + 44, pos[i], colours[p], fmin(widths[p], 4), opacity[p],
                                dashes[p][0] ? " stroke-dasharray=\"" : "", dashes[p], dashes[p][0] ? "\"" : "");
                        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" fill=\"%s\">%s %.2f kWh", x0 + 50, pos[i] + 4, colours[p],
                                sim_policy_name(p), r->p[p].energy_j / 3.6e6);
                        if (r->p[SIM_B0].energy_j > 0)
                                fprintf(f, " (%.1f%%)", 100 * r->p[p].energy_j / r->p[SIM_B0].energy_j);
                        fputs("</text>\n", f);
                }
        }
#undef YPX
        /* second panel: what the energy bought or cost */
        {
                double v[_SIM_RUN_MAX], u[_SIM_RUN_MAX], y = T + ph + 74;
                for (int p = 0; p < _SIM_RUN_MAX; p++) {
                        v[p] = r->p[p].hist.n ? wait_hist_percentile(&r->p[p].hist, 0.99) / 1e6 : NAN;
                        u[p] = r->demand_cpu_s > 0 ? 100 * r->p[p].overload_s / r->demand_cpu_s : NAN;
                }
                svg_bars(f, 10, y, (W - 20) / 2, "run-queue wait p99 per wake-up (ms)", v);
                svg_bars(f, 10 + (W - 20) / 2, y, (W - 20) / 2, "undelivered demand (% of the demand)", u);
        }
        fputs("</svg>\n", f);
        free(sm);
        return ferror(f) ? -EIO : 0;
}
