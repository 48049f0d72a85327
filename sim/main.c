/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vmmpower-sim: replay VM utilisation traces on a modelled host and compare
 * vmmpower's planner with baselines, a lower bound and a reference (vmmpower-sim(1),
 * docs/simulator.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "version.h"

static void help(void)
{
        printf("Usage: vmmpower-sim --trace FILE --topology DIR|synth:PxC [OPTIONS]\n\n"
               "Replay VM utilisation traces on a modelled host; compare vmmpower's planner with\n"
               "baselines B0..B3, the fluid lower bound, the bin-packing reference and the\n"
               "latency-constrained bound.\n\n"
               "  -t, --trace=PATH          the trace: a file, or for bitbrains a directory of per-VM files\n"
               "      --trace-format=F      vmmpower (default; its header line is required), planetlab or\n"
               "                            bitbrains (GWA-T-12); anything else is refused (docs/simulator.md)\n"
               "      --resample-s=S        bitbrains: the interval the rows are resampled to (default 300)\n"
               "      --vcpu-split=S        a multi-vCPU VM's demand over its vCPUs: concentrate[:PCT]\n"
               "                            (PCT%% spread evenly, the rest filled vCPU 0 first; default\n"
               "                            concentrate:25) or even\n"
               "      --demand-unit=U       what a trace's 100%% is: allcore (default: one CPU at the highest\n"
               "                            level the turbo table allows with every core busy) or top (one\n"
               "                            CPU at the top level)\n"
               "  -T, --topology=DIR        topology fixture / sysfs root, or synth:PxC\n"
               "  -m, --model=FILE          energy model file (default: derived from the topology)\n"
               "  -c, --config=FILE         vmmpower.conf whose [Planner] keys set the policy\n"
               "  -o, --oversub=R           vCPU:pCPU ratio (default 1)\n"
               "      --vms=N               exactly N VMs instead (overrides --oversub)\n"
               "                            (whole VMs only: the --oversub target is met with whole VMs,\n"
               "                            the nearest count not above it)\n"
               "  -s, --seed=N              seed (default 1)\n"
               "  -b, --burst-ms=MS         burst parameter B (default 10)\n"
               "      --burst-dist=D        exp, fixed or pareto (default exp)\n"
               "      --profile=P           the planner's [Planner] Profile: latency or batch (default: the\n"
               "                            configuration's)\n"
               "      --queue-budget-percent=PCT  its QueueBudgetPercent, 0.01..100: the share of wake-ups\n"
               "                            allowed to queue, which the latency-constrained bound\n"
               "                            (lat-bound) meets too\n"
               "      --period-ms=MS        planner period (default: the configuration's ControlPeriod)\n"
               "      --step-s=S            observation step (default 60)\n"
               "      --window-s=S          baselines' burst window per step (default max(1, 50 x B),\n"
               "                            at most the step; vmmpower's: at least 3 LoadHalfLife)\n"
               "      --intervals=N         only N trace intervals (default all)\n"
               "      --first-interval=N    start at interval N (default 0)\n"
               "      --no-resim            do not re-simulate cores the planner changed\n"
               "      --free-undelivered    do not charge the work a policy left undelivered in its kWh\n"
               "                            (default: charged as a busy CPU at the top level)\n"
               "      --check-reference     also run the per-LLC reference's placements and the lat-bound's\n"
               "                            sets through the burst simulation\n"
               "      --check-binpack       also run the bin-packing reference's placements through the burst\n"
               "                            simulation, charged as a policy (row binpack-placed), and the\n"
               "                            same packing one interval late (row binpack-lagged), and the\n"
               "                            reference within the level headroom (rows binpack-ref@FILL%%,\n"
               "                            binpack-placed@FILL%%; FILL = LevelHeadroomPercent)\n"
               "      --csv=FILE            append CSV rows (header when the file is new or empty)\n"
               "      --label=TEXT          run label in the CSV (default: trace,host,oversub,burst)\n"
               "      --svg=FILE            power over the day per policy\n"
               "      --progress / --no-progress  progress on stderr (default: when stderr is a terminal)\n"
               "      --power-curve         no simulation: print the model's power at SPECpower_ssj2008's\n"
               "                            load levels (active idle, 10..100%%) on the host (no --trace)\n"
               "      --hints=FILE          replay guest hints to the planner: lines SECONDS VM MESSAGE, MESSAGE a\n"
               "                            line of the hint protocol from the run's VM number VM (0-based),\n"
               "                            taken under the configuration's [Hints] policy (Trust = full acts)\n"
               "      --measured=FILE       with --power-curve: a measured curve (\"LOAD_PCT WATTS\" lines)\n"
               "                            printed beside it with the error per level\n"
               "  -h, --help                this help\n"
               "  -V, --version             version\n");
}

static int parse_pos_double(const char *s, double *ret)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || *end || !(v > 0) || !isfinite(v))
                return -EINVAL;
        *ret = v;
        return 0;
}

static void print_err(const struct sim_error *err)
{
        if (err->line)
                fprintf(stderr, "%s:%u: %s\n", err->file, err->line, err->message);
        else
                fprintf(stderr, "%s: %s\n", err->file, err->message);
}

/* --power-curve: the model at SPECpower's load levels, beside a measured curve when given. */
static int power_curve(const char *topo, const char *model, const char *measured)
{
        static const double std_pct[11] = { 0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100 };
        struct sim_error err = { 0 };
        struct sim_host host = { 0 };
        struct sim_measured ms = { 0 };
        struct sim_curve_point pt[SIM_MEASURED_MAX];
        double load[SIM_MEASURED_MAX], worst = 0;
        unsigned n = 11;
        int r;

        if (measured && sim_measured_load(measured, &ms, &err) < 0) {
                print_err(&err);
                return 1;
        }
        r = sim_host_load(topo, model, &host, &err);
        if (r < 0) {
                print_err(&err);
                return 1;
        }
        if (measured)
                n = ms.n;
        for (unsigned i = 0; i < n; i++)
                load[i] = (measured ? ms.load_pct[i] : std_pct[i]) / 100.0;
        r = sim_power_curve(host.em, load, n, pt);
        if (r < 0) {
                fprintf(stderr, "vmmpower-sim: %s\n", strerror(-r));
                sim_host_done(&host);
                return 1;
        }
        const struct energy_model *m = &host.em->model;
        printf("# host %s (%u packages, %u cores, %u CPUs), model %s; load = share of the full-load throughput "
               "(%.1f CPUs at the top level), uniform on every thread, least-power level\n",
               host.topo_name, host.em->n_pkgs, host.em->n_cores, host.em->n_online, host.model_name,
               pt[n - 1].load > 0 ? pt[n - 1].throughput / pt[n - 1].load : 0.0);
        printf("%5s %9s %9s %7s %11s %9s %9s %9s %8s %9s %6s\n", "load%", "model_W", "measured", "error", "level_MHz",
               "active_W", "idle_W", "domain_W", "wake_W", "platf+psu", "capped");
        for (unsigned i = 0; i < n; i++) {
                const struct sim_curve_point *p = &pt[i];
                char meas[16] = "-", e[16] = "-";
                if (measured) {
                        double x = p->mw / 1000.0 / ms.watts[i] - 1;
                        snprintf(meas, sizeof(meas), "%.1f", ms.watts[i]);
                        snprintf(e, sizeof(e), "%+.1f%%", 100 * x);
                        if (fabs(x) > worst)
                                worst = fabs(x);
                }
                char lv[24] = "-";
                if (p->level >= 0 && p->level_hi != p->level)
                        snprintf(lv, sizeof(lv), "%u/%u", m->levels[p->level].freq_khz / 1000,
                                 m->levels[p->level_hi].freq_khz / 1000);
                else if (p->level >= 0)
                        snprintf(lv, sizeof(lv), "%u", m->levels[p->level].freq_khz / 1000);
                printf("%5.0f %9.1f %9s %7s %11s %9.1f %9.1f %9.1f %8.1f %9.1f %6u\n", 100 * p->load, p->mw / 1000.0,
                       meas, e, lv, p->b.active_mw / 1000.0,
                       p->b.idle_mw / 1000.0, p->b.domain_mw / 1000.0, p->b.wake_mw / 1000.0,
                       (p->b.platform_mw + p->b.psu_loss_mw) / 1000.0, p->b.capped_pkgs);
        }
        if (measured)
                printf("# worst error %.1f%% over %u levels\n", 100 * worst, n);
        sim_host_done(&host);
        return 0;
}

static int bad(const char *opt, const char *val)
{
        fprintf(stderr, "vmmpower-sim: invalid %s: \"%s\"\n", opt, val);
        return 2;
}

int main(int argc, char **argv)
{
        enum { O_VMS = 256, O_DIST, O_PERIOD, O_STEP, O_WINDOW, O_INTERVALS, O_FIRST, O_NORESIM, O_CSV, O_LABEL, O_SVG,
               O_PROGRESS, O_NOPROGRESS, O_FREE_UNDELIVERED, O_CHECK_REF, O_CHECK_BINPACK, O_FORMAT, O_RESAMPLE, O_SPLIT, O_CURVE, O_MEASURED, O_HINTS, O_UNIT,
               O_PROFILE, O_QBUDGET };
        static const struct option opts[] = {
                { "trace", required_argument, NULL, 't' },
                { "trace-format", required_argument, NULL, O_FORMAT },
                { "resample-s", required_argument, NULL, O_RESAMPLE },
                { "vcpu-split", required_argument, NULL, O_SPLIT },
                { "demand-unit", required_argument, NULL, O_UNIT },
                { "topology", required_argument, NULL, 'T' },
                { "model", required_argument, NULL, 'm' },
                { "config", required_argument, NULL, 'c' },
                { "profile", required_argument, NULL, O_PROFILE },
                { "queue-budget-percent", required_argument, NULL, O_QBUDGET },
                { "oversub", required_argument, NULL, 'o' },
                { "vms", required_argument, NULL, O_VMS },
                { "seed", required_argument, NULL, 's' },
                { "burst-ms", required_argument, NULL, 'b' },
                { "burst-dist", required_argument, NULL, O_DIST },
                { "period-ms", required_argument, NULL, O_PERIOD },
                { "step-s", required_argument, NULL, O_STEP },
                { "window-s", required_argument, NULL, O_WINDOW },
                { "intervals", required_argument, NULL, O_INTERVALS },
                { "first-interval", required_argument, NULL, O_FIRST },
                { "no-resim", no_argument, NULL, O_NORESIM },
                { "csv", required_argument, NULL, O_CSV },
                { "label", required_argument, NULL, O_LABEL },
                { "svg", required_argument, NULL, O_SVG },
                { "progress", no_argument, NULL, O_PROGRESS },
                { "no-progress", no_argument, NULL, O_NOPROGRESS },
                { "free-undelivered", no_argument, NULL, O_FREE_UNDELIVERED },
                { "check-reference", no_argument, NULL, O_CHECK_REF },
                { "check-binpack", no_argument, NULL, O_CHECK_BINPACK },
                { "power-curve", no_argument, NULL, O_CURVE },
                { "measured", required_argument, NULL, O_MEASURED },
                { "hints", required_argument, NULL, O_HINTS },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *trace_path = NULL, *topo = NULL, *model = NULL, *config = NULL, *csv = NULL, *svg = NULL;
        const char *measured = NULL, *hints_path = NULL;
        struct sim_hint_script *hints = NULL;
        bool curve = false;
        char label[512] = "";
        struct sim_config cfg;
        enum sim_trace_format fmt = SIM_TRACE_VMMPOWER;
        nsec_t resample_ns = 300 * NSEC_PER_SEC;
        bool period_set = false, resample_set = false;
        int profile = -1;
        double qbudget = -1.0;
        double d;
        uint32_t u;
        uint64_t u64;
        int c, r;

        sim_config_defaults(&cfg);
        cfg.progress = isatty(STDERR_FILENO);
        while ((c = getopt_long(argc, argv, "t:T:m:c:o:s:b:hV", opts, NULL)) >= 0) {
                switch (c) {
                case 't': trace_path = optarg; break;
                case O_FORMAT:
                        r = sim_trace_format_from_string(optarg);
                        if (r < 0)
                                return bad("--trace-format (vmmpower, planetlab or bitbrains)", optarg);
                        fmt = (enum sim_trace_format) r;
                        break;
                case O_RESAMPLE:
                        if (parse_u32(optarg, &u) < 0 || u == 0 || u > 86400)
                                return bad("--resample-s (1..86400)", optarg);
                        resample_ns = (nsec_t) u * NSEC_PER_SEC;
                        resample_set = true;
                        break;
                case O_SPLIT:
                        if (strcmp(optarg, "even") == 0)
                                cfg.vcpu_balance = 1.0;
                        else if (strcmp(optarg, "concentrate") == 0)
                                cfg.vcpu_balance = 0.25;
                        else if (strncmp(optarg, "concentrate:", 12) == 0 && parse_u32(optarg + 12, &u) >= 0 &&
                                 u <= 100)
                                cfg.vcpu_balance = u / 100.0;
                        else
                                return bad("--vcpu-split (concentrate[:PCT] or even)", optarg);
                        break;
                case O_UNIT:
                        if (strcmp(optarg, "allcore") == 0)
                                cfg.demand_unit = SIM_DEMAND_ALLCORE;
                        else if (strcmp(optarg, "top") == 0)
                                cfg.demand_unit = SIM_DEMAND_TOP;
                        else
                                return bad("--demand-unit (allcore or top)", optarg);
                        break;
                case 'T': topo = optarg; break;
                case 'm': model = optarg; break;
                case 'c': config = optarg; break;
                case O_PROFILE:
                        profile = plan_profile_from_string(optarg);
                        if (profile < 0)
                                return bad("--profile (latency or batch)", optarg);
                        break;
                case O_QBUDGET:
                        if (parse_pos_double(optarg, &qbudget) < 0 || qbudget < 0.01 || qbudget > 100)
                                return bad("--queue-budget-percent (0.01..100)", optarg);
                        break;
                case 'o':
                        if (parse_pos_double(optarg, &cfg.oversub) < 0 || cfg.oversub > 64)
                                return bad("--oversub", optarg);
                        break;
                case O_VMS:
                        if (parse_u32(optarg, &u) < 0 || u == 0 || u > 1000000)
                                return bad("--vms", optarg);
                        cfg.n_vms = u;
                        break;
                case 's':
                        if (parse_u64(optarg, &u64) < 0)
                                return bad("--seed", optarg);
                        cfg.seed = u64;
                        break;
                case 'b':
                        if (parse_pos_double(optarg, &d) < 0 || d < 0.01 || d > 60000)
                                return bad("--burst-ms (0.01..60000)", optarg);
                        cfg.burst.mean_ns = d * 1e6;
                        break;
                case O_DIST:
                        r = burst_dist_from_string(optarg);
                        if (r < 0)
                                return bad("--burst-dist", optarg);
                        cfg.burst.dist = (enum burst_dist) r;
                        break;
                case O_PERIOD:
                        if (parse_pos_double(optarg, &d) < 0 || d < 1 || d > 3600000)
                                return bad("--period-ms", optarg);
                        cfg.plan_period_ns = (nsec_t) llround(d * 1e6);
                        period_set = true;
                        break;
                case O_STEP:
                        if (parse_pos_double(optarg, &d) < 0 || d > 86400)
                                return bad("--step-s", optarg);
                        cfg.step_ns = (nsec_t) llround(d * 1e9);
                        break;
                case O_WINDOW:
                        if (parse_pos_double(optarg, &d) < 0 || d > 86400)
                                return bad("--window-s", optarg);
                        cfg.window_ns = (nsec_t) llround(d * 1e9);
                        break;
                case O_INTERVALS:
                        if (parse_u32(optarg, &u) < 0 || u == 0)
                                return bad("--intervals", optarg);
                        cfg.n_intervals = u;
                        break;
                case O_FIRST:
                        if (parse_u32(optarg, &u) < 0)
                                return bad("--first-interval", optarg);
                        cfg.first_interval = u;
                        break;
                case O_NORESIM: cfg.resim_on_change = false; break;
                case O_CSV: csv = optarg; break;
                case O_LABEL: snprintf(label, sizeof(label), "%s", optarg); break;
                case O_SVG: svg = optarg; break;
                case O_PROGRESS: cfg.progress = true; break;
                case O_NOPROGRESS: cfg.progress = false; break;
                case O_FREE_UNDELIVERED: cfg.free_undelivered = true; break;
                case O_CHECK_REF: cfg.check_reference = true; break;
                case O_CHECK_BINPACK: cfg.check_binpack = true; break;
                case O_CURVE: curve = true; break;
                case O_MEASURED: measured = optarg; break;
                case O_HINTS: hints_path = optarg; break;
                case 'h': help(); return 0;
                case 'V': printf("vmmpower-sim %s\n", VMMPOWER_VERSION); return 0;
                default: return 2;
                }
        }
        if (curve || measured) {
                if (optind < argc || !curve || !topo || trace_path) {
                        fprintf(stderr, "vmmpower-sim: --power-curve needs --topology, takes no --trace, and "
                                        "--measured needs --power-curve (see --help)\n");
                        return 2;
                }
                return power_curve(topo, model, measured);
        }
        if (optind < argc || !trace_path || !topo) {
                fprintf(stderr, "vmmpower-sim: --trace and --topology are required (see --help)\n");
                return 2;
        }
        if (config) {
                struct vp_config vc;
                struct config_error cerr = { 0 };
                config_defaults(&vc);
                r = config_load(config, NULL, false, &vc, &cerr);
                if (r < 0) {
                        config_error_print(&cerr, stderr);
                        return 1;
                }
                sim_policy_from_config(&vc, &cfg.policy);
                cfg.hint_policy = vc.hint_defaults;
                cfg.half_life_ns = vc.load_half_life_ns;
                if (!period_set)
                        cfg.plan_period_ns = vc.period_ns;
        }
        if (period_set)
                cfg.policy.period_ns = cfg.plan_period_ns;
        /* the [Planner] keys Profile and QueueBudgetPercent, over the configuration's */
        if (profile >= 0)
                cfg.policy.profile = (enum plan_profile) profile;
        if (qbudget > 0.0)
                cfg.policy.queue_budget = qbudget / 100.0;
        cfg.queue_budget = cfg.policy.queue_budget; /* the lat-bound meets the planner's budget */
        if (resample_set && fmt != SIM_TRACE_BITBRAINS) {
                fprintf(stderr, "vmmpower-sim: --resample-s applies to --trace-format=bitbrains only\n");
                return 2;
        }

        struct sim_error err = { 0 };
        struct sim_trace *tr = NULL;
        struct sim_host host = { 0 };
        struct sim_result res;

        r = sim_trace_load_as(trace_path, fmt, resample_ns, &tr, &err);
        if (r < 0) {
                if (err.line)
                        fprintf(stderr, "%s:%u: %s\n", err.file, err.line, err.message);
                else
                        fprintf(stderr, "%s: %s\n", err.file, err.message);
                return 1;
        }
        if (hints_path) {
                r = sim_hint_script_load(hints_path, &hints, &err);
                if (r < 0) {
                        if (err.line)
                                fprintf(stderr, "%s:%u: %s\n", err.file, err.line, err.message);
                        else
                                fprintf(stderr, "%s: %s\n", err.file, r == -ENOMEM ? "out of memory" : err.message);
                        sim_trace_free(tr);
                        return 1;
                }
                cfg.hints = hints;
        }
        r = sim_host_load(topo, model, &host, &err);
        if (r < 0) {
                if (err.line)
                        fprintf(stderr, "%s:%u: %s\n", err.file, err.line, err.message);
                else
                        fprintf(stderr, "%s: %s\n", err.file, err.message);
                sim_trace_free(tr);
                sim_hint_script_free(hints);
                return 1;
        }
        if (!label[0]) {
                const char *b = strrchr(trace_path, '/');
                snprintf(label, sizeof(label), "%s;%s;%s;%g:1;%gms-%s", b ? b + 1 : trace_path, host.topo_name,
                         host.model_name, cfg.n_vms ? 0.0 : cfg.oversub, cfg.burst.mean_ns / 1e6,
                         burst_dist_to_string(cfg.burst.dist));
        }
        printf("vmmpower-sim: trace %s (%s, %u VMs, %u intervals of %lld s), host %s with model %s, seed %llu,\n"
               "  bursts %s B=%g ms, planner period %lld ms, step %lld s, vCPU split %s (%.0f%% balanced)\n",
               trace_path, sim_trace_format_to_string(fmt), tr->n_vms, tr->n_intervals, (long long) (tr->interval_ns / NSEC_PER_SEC), host.topo_name,
               host.model_name, (unsigned long long) cfg.seed, burst_dist_to_string(cfg.burst.dist),
               cfg.burst.mean_ns / 1e6, (long long) (cfg.plan_period_ns / NSEC_PER_MSEC),
               (long long) (cfg.step_ns / NSEC_PER_SEC), cfg.vcpu_balance >= 1 ? "even" : "concentrate",
               100 * cfg.vcpu_balance);
        r = sim_run(&host, tr, &cfg, &res);
        if (r < 0) {
                fprintf(stderr, "vmmpower-sim: simulation failed: %s%s\n", strerror(-r),
                        r == -EINVAL ? " (the step and the trace interval must be multiples of the period, the "
                                       "hint script's VMs within the run's)" : "");
                sim_hint_script_free(hints);
                sim_host_done(&host);
                sim_trace_free(tr);
                return 1;
        }
        sim_print_table(&res, stdout);
        if (hints)
                printf("hints: %s, %" PRIu64 " lines replayed, %" PRIu64 " hints that may actuate (Trust = %s)\n",
                       hints_path, res.hints_fed, res.hints_actuating, hint_trust_to_string(cfg.hint_policy.trust));
        if (csv) {
                FILE *f = fopen(csv, "ae");
                if (!f) {
                        fprintf(stderr, "vmmpower-sim: %s: %m\n", csv);
                        r = -errno;
                } else {
                        sim_write_csv(&res, label, ftell(f) == 0, f);
                        if (fclose(f) != 0) {
                                fprintf(stderr, "vmmpower-sim: %s: write failed\n", csv);
                                r = -EIO;
                        }
                }
        }
        if (svg && r >= 0) {
                FILE *f = fopen(svg, "we");
                if (!f) {
                        fprintf(stderr, "vmmpower-sim: %s: %m\n", svg);
                        r = -errno;
                } else {
                        int w = sim_write_svg(&res, label, f);
                        if (fclose(f) != 0 || w < 0) {
                                fprintf(stderr, "vmmpower-sim: %s: write failed\n", svg);
                                r = -EIO;
                        }
                }
        }
        sim_result_free(&res);
        sim_hint_script_free(hints);
        sim_host_done(&host);
        sim_trace_free(tr);
        return r < 0 ? 1 : 0;
}
