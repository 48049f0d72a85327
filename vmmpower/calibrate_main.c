/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vmmpower-calibrate: options, the real calib_ops (powercap energy files,
 * pinned busy-loop threads, CLOCK_MONOTONIC, SIGINT/SIGTERM), the
 * running-daemon check; the loop and the fit are in calibrate.c.
 *
 * The load: one thread per loaded CPU, pinned to it, named "vpcal-load".
 * Duty d of period T: the thread spins while (now - start) mod T < d T, then
 * sleeps (clock_nanosleep, absolute) to the next period.  Every thread keeps
 * the same phase (the same start), so partial loads on several CPUs overlap.
 * Its CPU time (the thread's CPU-time clock) is what the fit uses as the
 * achieved busy fraction: a CPU shared with other work shows less than d.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "calibrate.h"
#include "instance.h"
#include "journal_builtin.h"
#include "config.h"
#include "log.h"
#include "version.h"

#define SLEEP_SLICE_NS (20 * NSEC_PER_MSEC) /* how soon a signal is noticed */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
        stop_signal = sig;
}

/* ------------------------------------------------------------ real ops */

struct load_thread {
        pthread_t thread;
        clockid_t clock;
        unsigned cpu;
        uint16_t duty_permille;
        nsec_t period_ns, start_ns;
        uint64_t cpu0_ns;
        atomic_bool *quit;
        bool started;
};

struct real {
        const char *sysfs_root;
        const struct calib_zones *zones;
        struct load_thread *threads;
        unsigned n_threads;
        atomic_bool quit;
};

static void *load_main(void *arg)
{
        struct load_thread *lt = arg;
        nsec_t busy_ns = lt->period_ns * lt->duty_permille / 1000;
        volatile uint64_t spin = 0;

        while (!atomic_load_explicit(lt->quit, memory_order_relaxed)) {
                nsec_t now = now_ns(), phase = (now - lt->start_ns) % lt->period_ns;
                if (lt->duty_permille >= 1000 || phase < busy_ns) {
                        for (int i = 0; i < 1000; i++)
                                spin++;
                        continue;
                }
                nsec_t next = now - phase + lt->period_ns;
                struct timespec ts = { .tv_sec = next / NSEC_PER_SEC, .tv_nsec = next % NSEC_PER_SEC };
                (void) clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
        return NULL;
}

static uint64_t thread_clock_ns(clockid_t c)
{
        struct timespec ts;

        if (clock_gettime(c, &ts) < 0)
                return 0;
        return (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
}

static void real_load_stop(void *ud)
{
        struct real *rl = ud;

        atomic_store(&rl->quit, true);
        for (unsigned i = 0; i < rl->n_threads; i++)
                if (rl->threads[i].started)
                        pthread_join(rl->threads[i].thread, NULL);
        free(rl->threads);
        rl->threads = NULL;
        rl->n_threads = 0;
}

static int real_load_start(void *ud, const uint16_t *duty, unsigned n_cpus, nsec_t period_ns)
{
        struct real *rl = ud;
        nsec_t start = now_ns();
        unsigned n = 0;

        for (unsigned c = 0; c < n_cpus; c++)
                n += duty[c] > 0;
        atomic_store(&rl->quit, false);
        rl->threads = calloc(MAX(n, 1u), sizeof(*rl->threads));
        if (!rl->threads)
                return -ENOMEM;
        for (unsigned c = 0; c < n_cpus; c++) {
                struct load_thread *lt;
                pthread_attr_t attr;
                cpu_set_t set;
                int r;

                if (!duty[c])
                        continue;
                lt = &rl->threads[rl->n_threads++];
                *lt = (struct load_thread) { .cpu = c, .duty_permille = duty[c], .period_ns = period_ns,
                                             .start_ns = start, .quit = &rl->quit };
                CPU_ZERO(&set);
                CPU_SET(c, &set);
                pthread_attr_init(&attr);
                r = -pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
                if (r == 0)
                        r = -pthread_create(&lt->thread, &attr, load_main, lt);
                pthread_attr_destroy(&attr);
                if (r < 0)
                        return log_debug_errno(r, "Failed to start a load thread on CPU %u: %m", c);
                lt->started = true;
                (void) pthread_setname_np(lt->thread, "vpcal-load");
                r = -pthread_getcpuclockid(lt->thread, &lt->clock);
                if (r < 0)
                        return r;
                lt->cpu0_ns = thread_clock_ns(lt->clock);
        }
        return 0;
}

static int real_load_busy_ns(void *ud, uint64_t *ret, unsigned n_cpus)
{
        struct real *rl = ud;

        memset(ret, 0, n_cpus * sizeof(*ret));
        for (unsigned i = 0; i < rl->n_threads; i++)
                if (rl->threads[i].cpu < n_cpus)
                        ret[rl->threads[i].cpu] = thread_clock_ns(rl->threads[i].clock) - rl->threads[i].cpu0_ns;
        return 0;
}

static int real_read_energy(void *ud, uint64_t *ret)
{
        struct real *rl = ud;
        return calib_zones_read(rl->sysfs_root, rl->zones, ret);
}

static nsec_t real_now(void *ud)
{
        return now_ns();
}

static int real_sleep_until(void *ud, nsec_t deadline)
{
        for (;;) {
                nsec_t now = now_ns(), until;
                struct timespec ts;

                if (stop_signal)
                        return -EINTR;
                if (now >= deadline)
                        return 0;
                until = MIN(deadline, now + SLEEP_SLICE_NS);
                ts = (struct timespec) { .tv_sec = until / NSEC_PER_SEC, .tv_nsec = until % NSEC_PER_SEC };
                (void) clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
}

static const struct calib_ops real_ops = {
        .read_energy = real_read_energy,
        .load_start = real_load_start,
        .load_busy_ns = real_load_busy_ns,
        .load_stop = real_load_stop,
        .now = real_now,
        .sleep_until = real_sleep_until,
};

/* ------------------------------------------------------------ program */

/* 1: something accepts connections on the daemon's control socket. */
static int daemon_running(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        r = connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 ? 1 : 0;
        close(fd);
        return r;
}

/*
 * 1: a vmmpowerd holds the instance lock of this state directory (instance.h), *ret_pid its pid (0 if unknown).
 * The lock is held in every mode, also without a control socket (ControlSocket unset, or not bound yet).
 * Probed with a shared lock that is released at once: nothing is created.
 */
static int daemon_locked(const char *state_dir, pid_t *ret_pid)
{
        char path[PATH_MAX], buf[32];
        int fd, r;

        *ret_pid = 0;
        if (path_printf(path, sizeof(path), "%s/%s", state_dir, INSTANCE_LOCK_FILE) < 0)
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
                (void) flock(fd, LOCK_UN);
                r = 0;
        } else if (errno == EWOULDBLOCK) {
                ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
                int64_t pid;
                if (n > 0) {
                        buf[n] = '\0';
                        buf[strcspn(buf, "\n")] = '\0';
                        if (parse_i64(buf, &pid) == 0 && pid > 0 && pid <= INT32_MAX)
                                *ret_pid = (pid_t) pid;
                }
                r = 1;
        } else
                r = -errno;
        close(fd);
        return r;
}

static void help(void)
{
        printf("Usage: vmmpower-calibrate [OPTIONS]\n"
               "Fit this host's energy model from its powercap (RAPL) energy counters.\n"
               "Changes cpufreq limits, cpuidle states and PM QoS while it runs (journaled,\n"
               "restored on exit, on SIGINT/SIGTERM, and by vmmpowerd --restore after a crash).\n\n"
               "  -c --config PATH        vmmpowerd's configuration (default %s/vmmpower.conf):\n"
               "                          StateDirectory, SysfsRoot, ControlSocket, ModelFile\n"
               "  -m --base MODEL         model file giving the structure (default: the configuration's\n"
               "                          ModelFile, else derived from sysfs)\n"
               "  -o --output FILE        write the fitted model here (default: standard output)\n"
               "     --name NAME          Name of the fitted model: letters, digits, -_. (default calibrated)\n"
               "     --cpus LIST          CPUs the loads may run on (default: every online CPU)\n"
               "     --dwell DURATION     measured time per point (default 10s)\n"
               "     --settle DURATION    time after each change before measuring (default 2s)\n"
               "     --sample DURATION    counter reads at least this often (default 1s)\n"
               "     --period DURATION    duty-cycle period of partial loads (default 100ms)\n"
               "     --ignore-daemon      run although vmmpowerd answers on its control socket or holds its lock\n"
               "     --sysfs-root DIR     directory that stands for /sys\n"
               "     --state-dir DIR      journal directory (default: StateDirectory)\n"
               "     --control-socket P   vmmpowerd's control socket (default: ControlSocket)\n"
               "     --log-level LEVEL    err, warning, notice, info, debug\n"
               "  -V --version            print the version\n"
               "  -h --help               this help\n",
               VMMPOWER_SYSCONFDIR);
}

static int parse_duration_opt(const char *name, const char *s, nsec_t *ret)
{
        if (parse_duration_ns(s, ret) < 0 || *ret <= 0) {
                fprintf(stderr, "vmmpower-calibrate: invalid %s '%s' (e.g. 10s, 500ms)\n", name, s);
                return -EINVAL;
        }
        return 0;
}

/* The command line. */
struct cli {
        const char *config_path, *base_path, *output, *name;
        const char *sysfs_root, *state_dir, *socket_path;
        bool ignore_daemon, level_set;
        enum log_level level;
};

/* Parse argv into *o and cc's timings and CPUs.  -1: go on; else the exit status (0 after --help or --version). */
static int parse_args(int argc, char *argv[], struct cli *o, struct calib_config *cc)
{
        enum { ARG_NAME = 0x100, ARG_CPUS, ARG_DWELL, ARG_SETTLE, ARG_SAMPLE, ARG_PERIOD, ARG_IGNORE, ARG_SYSFS,
               ARG_STATE, ARG_SOCKET, ARG_LOGLEVEL };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "base", required_argument, NULL, 'm' },
                { "output", required_argument, NULL, 'o' },
                { "name", required_argument, NULL, ARG_NAME },
                { "cpus", required_argument, NULL, ARG_CPUS },
                { "dwell", required_argument, NULL, ARG_DWELL },
                { "settle", required_argument, NULL, ARG_SETTLE },
                { "sample", required_argument, NULL, ARG_SAMPLE },
                { "period", required_argument, NULL, ARG_PERIOD },
                { "ignore-daemon", no_argument, NULL, ARG_IGNORE },
                { "sysfs-root", required_argument, NULL, ARG_SYSFS },
                { "state-dir", required_argument, NULL, ARG_STATE },
                { "control-socket", required_argument, NULL, ARG_SOCKET },
                { "log-level", required_argument, NULL, ARG_LOGLEVEL },
                { "version", no_argument, NULL, 'V' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:m:o:Vh", options, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        o->config_path = optarg;
                        break;
                case 'm':
                        o->base_path = optarg;
                        break;
                case 'o':
                        o->output = optarg;
                        break;
                case ARG_NAME:
                        if (!energy_model_name_valid(optarg)) {
                                char shown[80];
                                escape_bytes(optarg, strlen(optarg), shown, sizeof(shown));
                                fprintf(stderr, "vmmpower-calibrate: invalid --name '%s' (1..63 letters, digits, "
                                        "'-', '_', '.', as the model file's Name)\n", shown);
                                return 2;
                        }
                        o->name = optarg;
                        break;
                case ARG_CPUS:
                        if (cpuset_parse_list(optarg, &cc->cpus) < 0 || cpuset_empty(&cc->cpus)) {
                                fprintf(stderr, "vmmpower-calibrate: invalid CPU list '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case ARG_DWELL:
                        if (parse_duration_opt("dwell", optarg, &cc->dwell_ns) < 0)
                                return 2;
                        break;
                case ARG_SETTLE:
                        if (parse_duration_ns(optarg, &cc->settle_ns) < 0) {
                                fprintf(stderr, "vmmpower-calibrate: invalid settle '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case ARG_SAMPLE:
                        if (parse_duration_opt("sample", optarg, &cc->sample_ns) < 0)
                                return 2;
                        break;
                case ARG_PERIOD:
                        if (parse_duration_opt("period", optarg, &cc->period_ns) < 0)
                                return 2;
                        break;
                case ARG_IGNORE:
                        o->ignore_daemon = true;
                        break;
                case ARG_SYSFS:
                        o->sysfs_root = optarg;
                        break;
                case ARG_STATE:
                        o->state_dir = optarg;
                        break;
                case ARG_SOCKET:
                        o->socket_path = optarg;
                        break;
                case ARG_LOGLEVEL:
                        if (log_parse_level(optarg, &o->level) < 0) {
                                fprintf(stderr, "vmmpower-calibrate: invalid log level '%s'\n", optarg);
                                return 2;
                        }
                        o->level_set = true;
                        break;
                case 'V':
                        printf("vmmpower-calibrate %s\n", VMMPOWER_VERSION);
                        return 0;
                case 'h':
                        help();
                        return 0;
                default:
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "vmmpower-calibrate: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        return -1;
}

/* vmmpowerd's configuration with the command line's overrides; the base model defaults to its ModelFile. */
static int load_config(struct cli *o, struct vp_config *vc)
{
        struct config_error cerr = { 0 };
        int r;

        config_defaults(vc);
        r = config_load(o->config_path ? o->config_path : VMMPOWER_SYSCONFDIR "/vmmpower.conf", NULL,
                        o->config_path == NULL, vc, &cerr);
        if (r < 0) {
                config_error_print(&cerr, stderr);
                return r;
        }
        if (!o->level_set)
                log_set_max_level(MIN(vc->log_level, LOG_LEVEL_NOTICE));
        if (o->sysfs_root)
                snprintf(vc->sysfs_root, sizeof(vc->sysfs_root), "%s", o->sysfs_root);
        if (o->state_dir)
                snprintf(vc->state_dir, sizeof(vc->state_dir), "%s", o->state_dir);
        if (o->socket_path)
                snprintf(vc->control_socket, sizeof(vc->control_socket), "%s", o->socket_path);
        if (!o->base_path && vc->model_file[0])
                o->base_path = vc->model_file;
        return 0;
}

/* The daemon's applier writes the same knobs every period: two writers fight.  -EBUSY unless ignore_daemon. */
static int check_no_daemon(const struct vp_config *vc, bool ignore_daemon)
{
        pid_t owner;

        if (daemon_running(vc->control_socket) > 0) {
                if (!ignore_daemon) {
                        log_error("vmmpowerd answers on %s: it would change the knobs this calibration holds. "
                                  "Stop it first (or pass --ignore-daemon with the planner's Apply = no).",
                                  vc->control_socket);
                        return -EBUSY;
                }
                log_warning("vmmpowerd answers on %s; --ignore-daemon given, going on.", vc->control_socket);
        } else if (daemon_locked(vc->state_dir, &owner) > 0) {
                if (!ignore_daemon) {
                        log_error("vmmpowerd (pid %d) holds %s/%s: it would change the knobs this calibration "
                                  "holds. Stop it first (or pass --ignore-daemon with the planner's Apply = no).",
                                  (int) owner, vc->state_dir, INSTANCE_LOCK_FILE);
                        return -EBUSY;
                }
                log_warning("vmmpowerd (pid %d) holds %s/%s; --ignore-daemon given, going on.", (int) owner,
                            vc->state_dir, INSTANCE_LOCK_FILE);
        }
        return 0;
}

/* The host: its topology (*ret_topo, the caller frees it), the base model, the powercap zones.  Logged. */
static int load_host(const struct vp_config *vc, const char *base_path, struct topology **ret_topo,
                     struct energy_model *base, struct calib_zones *zones)
{
        struct em_error merr = { 0 };
        int r;

        r = topology_load(vc->sysfs_root, ret_topo);
        if (r < 0)
                return log_error_errno(r, "Failed to read the topology below %s: %m (--log-level=debug names the file)",
                                       vc->sysfs_root);
        if (base_path) {
                r = energy_model_parse_file(base_path, base, &merr);
                if (r < 0) {
                        if (merr.line)
                                log_error("%s:%u: %s", merr.file, merr.line, merr.message);
                        else
                                log_error("%s: %s", merr.file, merr.message);
                        return r;
                }
        } else {
                r = energy_model_from_topology(*ret_topo, base);
                if (r < 0)
                        return log_error_errno(r, "Failed to derive a model from %s: %m", vc->sysfs_root);
        }
        r = calib_zones_discover(vc->sysfs_root, zones);
        if (r == -ENOENT)
                log_error("No powercap energy zone below %s/class/powercap (intel-rapl:N): "
                          "this host has no RAPL, or the intel_rapl_msr module is not loaded.", vc->sysfs_root);
        else if (r == -ENODATA)
                log_error("No package zone (name package-N) below %s/class/powercap.", vc->sysfs_root);
        else if (r < 0)
                log_error_errno(r, "Failed to read the powercap zones below %s: %m", vc->sysfs_root);
        return r < 0 ? r : 0;
}

static int open_journal(const struct vp_config *vc, struct journal **ret)
{
        int r = journal_open(vc->state_dir, ret);

        if (r == -EBUSY)
                log_error("The journal in %s is held by another process (vmmpowerd applying plans, or another "
                          "calibration). Stop it, or give a separate --state-dir.", vc->state_dir);
        else if (r < 0)
                log_error_errno(r, "Failed to open the journal in %s: %m", vc->state_dir);
        return r;
}

/* The fitted model to output (atomically replaced), or to standard output if NULL.  Logged. */
static int write_model(const char *output, const struct energy_model *fitted, const struct calib_report *rep,
                       const char *host)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f;
        int r;

        if (!output) {
                calib_model_write(fitted, rep, host, stdout);
                return 0;
        }
        f = open_memstream(&buf, &len);
        if (!f) {
                log_error("Out of memory.");
                return -ENOMEM;
        }
        calib_model_write(fitted, rep, host, f);
        fclose(f);
        r = write_file_atomic(output, buf, len, 0644);
        free(buf);
        if (r < 0)
                return log_error_errno(r, "Failed to write %s: %m", output);
        return 0;
}

int main(int argc, char *argv[])
{
        struct cli o = { .name = "calibrated", .level = LOG_LEVEL_NOTICE };
        struct calib_config cc = { .dwell_ns = 10 * NSEC_PER_SEC, .settle_ns = 2 * NSEC_PER_SEC,
                                   .sample_ns = NSEC_PER_SEC, .period_ns = 100 * NSEC_PER_MSEC };
        struct vp_config vc;
        struct energy_model base, fitted;
        struct calib_report *rep = NULL;
        struct topology *topo = NULL;
        struct journal *j = NULL;
        struct real rl = { 0 };
        struct sigaction sa = { .sa_handler = on_signal };
        char host[256] = "this host";
        int r, ret = 1;

        r = parse_args(argc, argv, &o, &cc);
        if (r >= 0)
                return r;
        log_set_max_level(o.level);
        if (load_config(&o, &vc) < 0)
                return 1;
        if (check_no_daemon(&vc, o.ignore_daemon) < 0)
                return 1;
        if (load_host(&vc, o.base_path, &topo, &base, &cc.zones) < 0)
                goto out;
        if (open_journal(&vc, &j) < 0)
                goto out;
        journal_report_load(j, vc.state_dir);

        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);

        rep = calloc(1, sizeof(*rep));
        if (!rep) {
                log_error("Out of memory.");
                goto out;
        }
        (void) gethostname(host, sizeof(host));
        rl.sysfs_root = vc.sysfs_root;
        rl.zones = &cc.zones;
        cc.sysfs_root = vc.sysfs_root;
        cc.topo = topo;
        cc.base = &base;
        cc.journal = j;
        cc.name = o.name;
        cc.ops = &real_ops;
        cc.ops_userdata = &rl;
        cc.progress = stderr;
        fprintf(stderr, "vmmpower-calibrate: %u powercap zone(s); journal %s/journal; dwell %.1fs, settle %.1fs\n",
                cc.zones.n, vc.state_dir, (double) cc.dwell_ns / NSEC_PER_SEC, (double) cc.settle_ns / NSEC_PER_SEC);
        r = calibrate_run(&cc, &fitted, rep);
        if (r < 0) {
                log_error("Calibration failed: %s", rep->error[0] ? rep->error : strerror(-r));
                log_notice("Knobs restored: %u, already original: %u, changed by someone else: %u, failed: %u.",
                           rep->restore.restored, rep->restore.unchanged, rep->restore.foreign, rep->restore.failed);
                if (r == -EINTR && stop_signal)
                        ret = 128 + stop_signal;
                goto out;
        }
        calib_report_print(rep, stderr);
        if (write_model(o.output, &fitted, rep, host) < 0)
                goto out;
        fprintf(stderr, "vmmpower-calibrate: done in %.1fs\n", (double) rep->elapsed_ns / NSEC_PER_SEC);
        ret = 0;
out:
        free(rep);
        journal_free(j);
        topology_free(topo);
        return ret;
}
