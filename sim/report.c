/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Text table, CSV and SVG of a simulation result (docs/simulator.md "Output"). */
#include <errno.h>
#include <math.h>
#include <stdio.h>

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
        fprintf(f, "%-11s %9s %7s %7s %8s %9s %9s %9s %7s %9s %9s %7s %9s\n", "policy", "kWh", "vs_B0", "gap",
                "vs_fluid", "wait_p50", "wait_p99", "wait_p999", "deep%", "migr/vCh", "moves/vCh", "undel%", "cpu_s");
        fprintf(f, "%-11s %9s %7s %7s %8s %9s %9s %9s %7s %9s %9s %7s %9s\n", "", "", "", "closed", "", "us", "us", "us",
                "wakes", "all", "placement", "demand", "decide");
        for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                const struct sim_policy_result *x = &r->p[p];
                fprintf(f, "%-11s %9.3f %6.1f%% %6.1f%% %+7.1f%%", sim_policy_name(p), kwh(r, p),
                        100.0 * x->energy_j / r->p[SIM_B0].energy_j, 100.0 * gap_closed(r, p),
                        100.0 * (x->energy_j / r->p[SIM_FLUID].energy_j - 1));
                if (runs(p))
                        fprintf(f, " %9.1f %9.1f %9.1f %6.2f%% %9.2f %9.2f %6.2f%% %9.3f\n",
                                wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                                wait_hist_percentile(&x->hist, 0.999) / 1e3,
                                x->wakeups ? 100.0 * x->deep_wakeups / x->wakeups : 0.0,
                                r->vcpu_hours > 0 ? x->migrations / r->vcpu_hours : 0.0,
                                r->vcpu_hours > 0 ? x->moves / r->vcpu_hours : 0.0,
                                r->demand_cpu_s > 0 ? 100.0 * x->overload_s / r->demand_cpu_s : 0.0,
                                x->decide_cpu_ns / 1e9);
                else
                        fprintf(f, " %9s %9s %9s %7s %9s %9s %7s %9s\n", "-", "-", "-", "-", "-", "-", "-", "-");
        }
        fprintf(f, "vmmpower: %llu plans (%llu grow, %llu shrink), %.2f ms CPU per plan; overload CPU-s:",
                (unsigned long long) r->p[SIM_VMM].decisions, (unsigned long long) r->p[SIM_VMM].grows,
                (unsigned long long) r->p[SIM_VMM].shrinks,
                r->p[SIM_VMM].decisions ? r->p[SIM_VMM].decide_cpu_ns / 1e6 / r->p[SIM_VMM].decisions : 0.0);
        for (int p = 0; p < _SIM_RUN_MAX; p++)
                fprintf(f, " %s %.0f", sim_policy_name(p), r->p[p].overload_s);
        fprintf(f, "\nsimulated in %.1f s wall, %.1f s CPU, %llu burst events (window %.1f s per step, vmmpower's %.1f s)\n",
                r->wall_ns / 1e9, r->cpu_ns / 1e9, (unsigned long long) r->events, r->window_ns / 1e9,
                r->vmm_window_ns / 1e9);
}

void sim_write_csv(const struct sim_result *r, const char *label, bool header, FILE *f)
{
        if (header)
                fprintf(f, "run,policy,vms,vcpus,cpus,vcpu_hours,energy_kwh,rel_b0,gap_closed,vs_fluid,"
                           "wait_p50_us,wait_p99_us,wait_p999_us,wakeups,deep_wakeups,deep_share,"
                           "migrations_per_vcpu_hour,decide_cpu_s,overload_cpu_s,grows,shrinks,"
                           "moves_per_vcpu_hour,undelivered_share\n");
        for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                const struct sim_policy_result *x = &r->p[p];
                fprintf(f, "%s,%s,%u,%u,%u,%.3f,%.6f,%.6f,%.6f,%.6f,", label, sim_policy_name(p), r->n_vms, r->n_vcpus,
                        r->n_cpus, r->vcpu_hours, kwh(r, p), x->energy_j / r->p[SIM_B0].energy_j, gap_closed(r, p),
                        x->energy_j / r->p[SIM_FLUID].energy_j - 1);
                if (runs(p))
                        fprintf(f, "%.3f,%.3f,%.3f,%llu,%llu,%.6f,%.4f,%.6f,%.3f,%llu,%llu,%.4f,%.6f\n",
                                wait_hist_percentile(&x->hist, 0.50) / 1e3, wait_hist_percentile(&x->hist, 0.99) / 1e3,
                                wait_hist_percentile(&x->hist, 0.999) / 1e3, (unsigned long long) x->wakeups,
                                (unsigned long long) x->deep_wakeups,
                                x->wakeups ? (double) x->deep_wakeups / x->wakeups : 0.0,
                                r->vcpu_hours > 0 ? x->migrations / r->vcpu_hours : 0.0, x->decide_cpu_ns / 1e9,
                                x->overload_s, (unsigned long long) x->grows, (unsigned long long) x->shrinks,
                                r->vcpu_hours > 0 ? x->moves / r->vcpu_hours : 0.0,
                                r->demand_cpu_s > 0 ? x->overload_s / r->demand_cpu_s : 0.0);
                else
                        fprintf(f, ",,,,,,,,,,,,\n");
        }
}

static const char *const colours[_SIM_POLICY_MAX] = { "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e",
                                                      "#555555", "#8c564b" };

int sim_write_svg(const struct sim_result *r, const char *title, FILE *f)
{
        const double W = 900, H = 480, L = 70, R = 200, T = 40, B = 50;
        double pw = W - L - R, ph = H - T - B, ymax = 0, hours = r->n_intervals * (double) r->interval_ns / 3.6e12;

        if (r->n_intervals == 0)
                return -EINVAL;
        for (int p = 0; p < _SIM_POLICY_MAX; p++)
                for (unsigned k = 0; k < r->n_intervals; k++)
                        ymax = fmax(ymax, r->p[p].interval_w[k]);
        /* round the axis up to 1, 2 or 5 x 10^n */
        double mag = pow(10, floor(log10(ymax > 0 ? ymax : 1))), top = mag;
        while (top < ymax)
                top += top < 2 * mag ? mag : top < 5 * mag ? mag : 5 * mag;
        ymax = top;
        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
        fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"14\">", L);
        for (const char *c = title; *c; c++) /* escape for XML */
                switch (*c) {
                case '<': fputs("&lt;", f); break;
                case '>': fputs("&gt;", f); break;
                case '&': fputs("&amp;", f); break;
                default: fputc(*c, f);
                }
        fputs("</text>\n", f);
        for (int i = 0; i <= 5; i++) {
                double y = T + ph - ph * i / 5.0;
                fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y, L + pw, y);
                fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", L - 6, y + 4,
                        ymax * i / 5.0);
        }
        for (int i = 0; i <= 8; i++) {
                double x = L + pw * i / 8.0;
                fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f</text>\n", x, T + ph + 18,
                        hours * i / 8.0);
        }
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">hours</text>\n", L + pw / 2, H - 10);
        fprintf(f, "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">"
                   "modelled power (W)</text>\n", T + ph / 2, T + ph / 2);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T,
                pw, ph);
        for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"", colours[p],
                        p >= _SIM_RUN_MAX ? " stroke-dasharray=\"5,3\"" : "");
                for (unsigned k = 0; k < r->n_intervals; k++)
                        fprintf(f, "%.1f,%.1f ", L + pw * (k + 0.5) / r->n_intervals,
                                T + ph - ph * r->p[p].interval_w[k] / ymax);
                fputs("\"/>\n", f);
                double ly = T + 10 + 20 * p;
                fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"/>\n",
                        L + pw + 12, ly, L + pw + 36, ly, colours[p]);
                fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s %.2f kWh</text>\n", L + pw + 42, ly + 4,
                        sim_policy_name(p), r->p[p].energy_j / 3.6e6);
        }
        fputs("</svg>\n", f);
        return ferror(f) ? -EIO : 0;
}
