/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * track-bench: cost of one vCPU load sample, by method.
 *
 * Creates N sleeping threads (small stacks, blocked on a futex) in this
 * process and samples <procfs>/<pid>/task/<tid>/schedstat of every one of
 * them, R rounds per method, reporting the median round divided by N:
 *   tracker      tracker_sample() with pread(): kept fds + pread at offset 0 +
 *                parse + decay
 *   pread        the same reads without the tracker (kept fds, pread, parse)
 *   bpf-iter     one pass of the BPF task iterator (schedstat_bpf.c): every
 *                thread of this process in one read() loop, records counted;
 *                the pass also walks the host's other tasks
 *   tracker-bpf  tracker_sample() with the BPF iterator: the pass + matching
 *                records to vCPUs by tid + decay
 *   open-read    open + read + close + parse of each file every round
 *   io_uring     IORING_OP_READ at offset 0 on the kept fds, all submitted,
 *                all reaped, then parsed (procfs reads are punted to io-wq
 *                worker threads: their CPU time is in the "cpu" column,
 *                which is this process's CPU time)
 *   getppid      (baseline) one trivial system call, no file
 *   libvirt      virConnectGetAllDomainStats(VIR_DOMAIN_STATS_VCPU) on the
 *                running domains, divided by the number of vCPUs reported;
 *                "cpu" is this process plus libvirtd's threads (QEMU's own
 *                share, if any, is not counted)
 * Columns: ns/sample wall, ns/sample cpu, wall ratio to pread.  "cpu" is
 * the sampling thread's CPU time, except for io_uring (the whole process,
 * to include the io-wq workers; reading that clock walks all N threads, a
 * cost that lands partly in the measurement) and libvirt (see above).  This program
 * prints numbers; it asserts nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>
#include <liburing.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "schedstat_bpf.h"
#include "util.h"
#include "vcpu_track.h"

#define MAX_ROUNDS 101

static _Atomic int stop_word;
static _Atomic int n_started;
static pid_t *tids;

static void *sleeper(void *arg)
{
        size_t i = (size_t) arg;

        tids[i] = (pid_t) syscall(SYS_gettid);
        atomic_fetch_add(&n_started, 1);
        while (atomic_load(&stop_word) == 0)
                syscall(SYS_futex, &stop_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        return NULL;
}

static int cmp_nsec(const void *a, const void *b)
{
        nsec_t x = *(const nsec_t *) a, y = *(const nsec_t *) b;

        return (x > y) - (x < y);
}

static nsec_t median(nsec_t *v, int n)
{
        qsort(v, (size_t) n, sizeof(*v), cmp_nsec);
        return v[n / 2];
}

struct result {
        double wall_ns, cpu_ns; /* per sample */
        bool measured;
};

static double pread_wall_ref;

static void print_row(size_t threads, const char *method, const struct result *r, const char *note)
{
        if (!r->measured) {
                printf("%8zu  %-11s  %12s  %12s  %8s  %s\n", threads, method, "-", "-", "-", note ? note : "");
                return;
        }
        char t[24] = "-", ratio[24] = "-";

        if (threads > 0)
                snprintf(t, sizeof(t), "%zu", threads);
        if (pread_wall_ref > 0)
                snprintf(ratio, sizeof(ratio), "%.2fx", r->wall_ns / pread_wall_ref);
        printf("%8s  %-11s  %12.0f  %12.0f  %8s  %s\n", t, method, r->wall_ns, r->cpu_ns, ratio, note ? note : "");
}

/* Sum of run_ns over all threads of a process, from procfs; -errno on failure. */
static int64_t process_run_ns(pid_t pid)
{
        char path[64];
        int64_t sum = 0;
        struct dirent *de;
        DIR *d;

        snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
        d = opendir(path);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char rel[300], buf[96];
                struct schedstat st;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(rel, sizeof(rel), "%s/schedstat", de->d_name);
                if (read_small_file_at(dirfd(d), rel, buf, sizeof(buf)) < 0 || schedstat_parse(buf, &st) < 0)
                        continue;
                sum += (int64_t) st.run_ns;
        }
        closedir(d);
        return sum;
}

static pid_t find_libvirtd(void)
{
        static const char *const pidfiles[] = { "/run/libvirtd.pid", "/var/run/libvirtd.pid" };
        char buf[32];
        int pid;

        for (size_t i = 0; i < ELEMENTSOF(pidfiles); i++)
                if (read_small_file(pidfiles[i], buf, sizeof(buf)) > 0 && parse_int(buf, &pid) == 0 && pid > 0)
                        return pid;
        return 0;
}

static void silent_error(void *ud, virErrorPtr e)
{
}

static void bench_libvirt(const char *uri, int rounds)
{
        virDomainStatsRecordPtr *recs = NULL;
        nsec_t wall[MAX_ROUNDS], cpu[MAX_ROUNDS];
        struct result res = { 0 };
        long long vcpus = 0;
        virConnectPtr conn;
        pid_t lvd;
        int n;

        virSetErrorFunc(NULL, silent_error);
        conn = virConnectOpenReadOnly(uri);
        if (!conn) {
                printf("%8s  %-11s  libvirt: not measured (cannot connect to %s)\n", "-", "libvirt", uri);
                return;
        }
        n = virConnectGetAllDomainStats(conn, VIR_DOMAIN_STATS_VCPU, &recs,
                                        VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
        if (n > 0)
                for (int i = 0; i < n; i++)
                        for (int k = 0; k < recs[i]->nparams; k++)
                                if (strcmp(recs[i]->params[k].field, "vcpu.current") == 0)
                                        vcpus += recs[i]->params[k].value.ui;
        if (n >= 0)
                virDomainStatsRecordListFree(recs);
        if (n > 0 && vcpus == 0) {
                printf("%8s  %-11s  libvirt: not measured (%d running domains, no vcpu stats)\n", "-", "libvirt", n);
                virConnectClose(conn);
                return;
        }
        if (n <= 0) {
                printf("%8s  %-11s  libvirt: not measured (no running domains)\n", "-", "libvirt");
                virConnectClose(conn);
                return;
        }
        lvd = find_libvirtd();
        for (int r = 0; r < rounds; r++) {
                int64_t s0 = lvd > 0 ? process_run_ns(lvd) : 0;
                nsec_t c0 = process_cputime_ns(), w0 = now_ns();
                int k = virConnectGetAllDomainStats(conn, VIR_DOMAIN_STATS_VCPU, &recs,
                                                    VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
                nsec_t w1 = now_ns(), c1 = process_cputime_ns();
                int64_t s1 = lvd > 0 ? process_run_ns(lvd) : 0;

                if (k >= 0)
                        virDomainStatsRecordListFree(recs);
                wall[r] = w1 - w0;
                cpu[r] = (c1 - c0) + (s0 >= 0 && s1 >= s0 ? s1 - s0 : 0);
        }
        res.wall_ns = (double) median(wall, rounds) / (double) vcpus;
        res.cpu_ns = (double) median(cpu, rounds) / (double) vcpus;
        res.measured = true;
        {
                char note[128];
                snprintf(note, sizeof(note), "%d domains, %lld vCPUs%s", n, vcpus,
                         lvd > 0 ? ", cpu incl. libvirtd" : ", libvirtd cpu unknown");
                print_row((size_t) vcpus, "libvirt", &res, note);
        }
        virConnectClose(conn);
}

static int raise_nofile(size_t need)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        if (rl.rlim_cur >= need)
                return 0;
        if (rl.rlim_max < need)
                rl.rlim_max = need; /* needs CAP_SYS_RESOURCE */
        rl.rlim_cur = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        return 0;
}

/* tracker_sample() on the n sleepers, with pread() or the BPF iterator; res->measured false if BPF cannot load. */
static int bench_tracker(size_t n, struct vcpu_info *vcpus, int rounds, bool bpf, struct result *res, char *note,
                         size_t note_size)
{
        struct vm_info vm = { .pid = getpid(), .libvirt_id = -1, .n_vcpus = (unsigned) n, .vcpus = vcpus };
        nsec_t wall[MAX_ROUNDS], cpu[MAX_ROUNDS];
        struct tracker *tr = NULL;
        nsec_t t;
        int r;

        *res = (struct result) { 0 };
        strcpy(vm.name, "bench");
        r = tracker_new("/proc", 4 * NSEC_PER_SEC, &tr);
        if (r < 0)
                return r;
        r = tracker_use_bpf(tr, bpf);
        if (r < 0) {
                snprintf(note, note_size, "not measured: BPF sampler unavailable (%s)", strerror(-r));
                tracker_free(tr);
                return 0;
        }
        t = now_ns();
        r = tracker_set_source(tr, VM_SOURCE_PROC, &vm, 1, t);
        if (r < 0) {
                fprintf(stderr, "tracker_set_source: %s\n", strerror(-r));
                goto out;
        }
        nsec_t set_ns = now_ns() - t;
        /* the same inventory again: every fd carried over, no open */
        t = now_ns();
        r = tracker_set_source(tr, VM_SOURCE_PROC, &vm, 1, t);
        if (r < 0)
                goto out;
        nsec_t reset_ns = now_ns() - t;
        for (int k = 0; k < rounds; k++) {
                nsec_t c0 = thread_cputime_ns(), w0 = now_ns();
                int s = tracker_sample(tr, w0);
                wall[k] = now_ns() - w0;
                cpu[k] = thread_cputime_ns() - c0;
                if (s != (int) n || tracker_uses_bpf(tr) != bpf) {
                        const struct tracker_stats *ts = tracker_stats(tr);
                        fprintf(stderr, "tracker_sample (%s): %d of %zu (gone %llu, read errors %llu, open errors %llu, bpf errors %llu)\n",
                                tracker_sampler_name(tr), s, n, (unsigned long long) ts->threads_gone,
                                (unsigned long long) ts->read_errors, (unsigned long long) ts->open_errors,
                                (unsigned long long) ts->bpf_errors);
                        r = -EIO;
                        goto out;
                }
        }
        *res = (struct result) { (double) median(wall, rounds) / (double) n, (double) median(cpu, rounds) / (double) n,
                                 true };
        snprintf(note, note_size, "set_source %.1f ms (opens), again %.2f ms", (double) set_ns / 1e6,
                 (double) reset_ns / 1e6);
        r = 0;
out:
        tracker_free(tr);
        return r;
}

static void count_rec(const struct schedstat_bpf_rec *rec, void *userdata)
{
        (*(size_t *) userdata)++;
}

/* Raw BPF iterator passes over this process (n sleepers + the main thread). */
static void bench_bpf_iter(size_t n, int rounds, struct result *res, char *note, size_t note_size)
{
        nsec_t wall[MAX_ROUNDS], cpu[MAX_ROUNDS];
        struct schedstat_bpf *b = NULL;
        int r;

        *res = (struct result) { 0 };
        r = schedstat_bpf_new(&b);
        if (r >= 0)
                r = schedstat_bpf_track(b, getpid());
        if (r < 0) {
                snprintf(note, note_size, "not measured: %s", strerror(-r));
                schedstat_bpf_free(b);
                return;
        }
        for (int k = 0; k < rounds; k++) {
                size_t recs = 0;
                nsec_t c0 = thread_cputime_ns(), w0 = now_ns();
                r = schedstat_bpf_read(b, count_rec, &recs);
                wall[k] = now_ns() - w0;
                cpu[k] = thread_cputime_ns() - c0;
                if (r < 0 || recs < n) {
                        snprintf(note, note_size, "not measured: pass failed (%s, %zu records)",
                                 r < 0 ? strerror(-r) : "short", recs);
                        schedstat_bpf_free(b);
                        return;
                }
        }
        *res = (struct result) { (double) median(wall, rounds) / (double) n, (double) median(cpu, rounds) / (double) n,
                                 true };
        snprintf(note, note_size, "one read() pass, all tasks walked");
        schedstat_bpf_free(b);
}

static int bench_threads(size_t n, int rounds)
{
        pthread_t *th = calloc(n, sizeof(*th));
        char (*paths)[64] = calloc(n, sizeof(*paths));
        int *fds = calloc(n, sizeof(*fds));
        char (*bufs)[64] = calloc(n, sizeof(*bufs));
        struct vcpu_info *vcpus = calloc(n, sizeof(*vcpus));
        nsec_t wall[MAX_ROUNDS], cpu[MAX_ROUNDS];
        struct result res, tracker_res, tracker_bpf_res, bpf_res;
        char tracker_note[96], tracker_bpf_note[96], bpf_note[96];
        pthread_attr_t attr;
        pid_t pid = getpid();
        size_t created = 0;
        int r = 0;

        tids = calloc(n, sizeof(*tids));
        if (!th || !paths || !fds || !bufs || !vcpus || !tids) {
                r = -ENOMEM;
                goto out;
        }
        atomic_store(&stop_word, 0);
        atomic_store(&n_started, 0);
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 32 * 1024);
        for (; created < n; created++) {
                r = -pthread_create(&th[created], &attr, sleeper, (void *) created);
                if (r < 0) {
                        fprintf(stderr, "pthread_create #%zu: %s\n", created, strerror(-r));
                        goto out;
                }
        }
        pthread_attr_destroy(&attr);
        while ((size_t) atomic_load(&n_started) < n)
                usleep(1000);
        for (size_t i = 0; i < n; i++) {
                snprintf(paths[i], sizeof(paths[i]), "/proc/%d/task/%d/schedstat", (int) pid, (int) tids[i]);
                vcpus[i] = (struct vcpu_info) { .index = (int) i, .tid = tids[i] };
                fds[i] = -1;
        }

        /* the tracker (first: it holds its own fds, and RLIMIT_NOFILE may be < 2n) */
        r = bench_tracker(n, vcpus, rounds, false, &tracker_res, tracker_note, sizeof(tracker_note));
        if (r < 0)
                goto out;
        r = bench_tracker(n, vcpus, rounds, true, &tracker_bpf_res, tracker_bpf_note, sizeof(tracker_bpf_note));
        if (r < 0)
                goto out;
        bench_bpf_iter(n, rounds, &bpf_res, bpf_note, sizeof(bpf_note));

        /* pread on kept fds, no tracker */
        for (size_t i = 0; i < n; i++) {
                fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
                if (fds[i] < 0) {
                        r = -errno;
                        fprintf(stderr, "open %s: %m\n", paths[i]);
                        goto out;
                }
        }
        for (int k = 0; k < rounds; k++) {
                nsec_t c0 = thread_cputime_ns(), w0 = now_ns();
                for (size_t i = 0; i < n; i++) {
                        struct schedstat st;
                        if (pread_all0(fds[i], bufs[i], sizeof(bufs[i])) < 0 || schedstat_parse(bufs[i], &st) < 0)
                                abort();
                }
                wall[k] = now_ns() - w0;
                cpu[k] = thread_cputime_ns() - c0;
        }
        res = (struct result) { (double) median(wall, rounds) / (double) n, (double) median(cpu, rounds) / (double) n,
                                true };
        pread_wall_ref = res.wall_ns;
        print_row(n, "pread", &res, NULL);
        print_row(n, "tracker", &tracker_res, tracker_note);
        print_row(n, "bpf-iter", &bpf_res, bpf_note);
        print_row(n, "tracker-bpf", &tracker_bpf_res, tracker_bpf_note);

        /* open + read + close */
        for (int k = 0; k < rounds; k++) {
                nsec_t c0 = thread_cputime_ns(), w0 = now_ns();
                for (size_t i = 0; i < n; i++) {
                        struct schedstat st;
                        if (read_small_file(paths[i], bufs[i], sizeof(bufs[i])) < 0 ||
                            schedstat_parse(bufs[i], &st) < 0)
                                abort();
                }
                wall[k] = now_ns() - w0;
                cpu[k] = thread_cputime_ns() - c0;
        }
        res = (struct result) { (double) median(wall, rounds) / (double) n, (double) median(cpu, rounds) / (double) n,
                                true };
        print_row(n, "open-read", &res, NULL);

        /* io_uring */
        {
                struct io_uring ring;
                unsigned entries = n < 4096 ? (unsigned) n : 4096;

                r = io_uring_queue_init(entries, &ring, 0);
                if (r < 0) {
                        res = (struct result) { 0 };
                        print_row(n, "io_uring", &res, "io_uring_queue_init failed");
                } else {
                        for (int k = 0; k < rounds; k++) {
                                nsec_t c0 = process_cputime_ns(), w0 = now_ns();
                                size_t next = 0, done = 0, inflight = 0;

                                while (done < n) {
                                        struct io_uring_sqe *sqe;
                                        while (next < n && (sqe = io_uring_get_sqe(&ring))) {
                                                io_uring_prep_read(sqe, fds[next], bufs[next], sizeof(bufs[next]) - 1, 0);
                                                io_uring_sqe_set_data64(sqe, next);
                                                next++;
                                                inflight++;
                                        }
                                        r = io_uring_submit_and_wait(&ring, inflight > 0 ? 1 : 0);
                                        if (r < 0) {
                                                fprintf(stderr, "io_uring_submit: %s\n", strerror(-r));
                                                abort();
                                        }
                                        struct io_uring_cqe *cqe;
                                        unsigned head, seen = 0;
                                        io_uring_for_each_cqe(&ring, head, cqe) {
                                                size_t i = (size_t) io_uring_cqe_get_data64(cqe);
                                                struct schedstat st;
                                                if (cqe->res <= 0)
                                                        abort();
                                                bufs[i][cqe->res] = '\0';
                                                if (schedstat_parse(bufs[i], &st) < 0)
                                                        abort();
                                                seen++;
                                        }
                                        io_uring_cq_advance(&ring, seen);
                                        done += seen;
                                        inflight -= seen;
                                }
                                wall[k] = now_ns() - w0;
                                cpu[k] = process_cputime_ns() - c0;
                        }
                        io_uring_queue_exit(&ring);
                        res = (struct result) { (double) median(wall, rounds) / (double) n,
                                                (double) median(cpu, rounds) / (double) n, true };
                        print_row(n, "io_uring", &res, "cpu incl. io-wq workers");
                }
                r = 0;
        }

out:
        if (fds)
                for (size_t i = 0; i < n; i++)
                        if (fds[i] >= 0)
                                close(fds[i]);
        atomic_store(&stop_word, 1);
        syscall(SYS_futex, &stop_word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        for (size_t i = 0; i < created; i++)
                pthread_join(th[i], NULL);
        free(th);
        free(paths);
        free(fds);
        free(bufs);
        free(vcpus);
        free(tids);
        tids = NULL;
        return r;
}

/* Cost of a trivial system call on this machine, to read the table against. */
static void bench_syscall(int rounds)
{
        nsec_t wall[MAX_ROUNDS], cpu[MAX_ROUNDS];
        const int n = 10000;
        struct result res;

        for (int k = 0; k < rounds; k++) {
                nsec_t c0 = process_cputime_ns(), w0 = now_ns();
                for (int i = 0; i < n; i++)
                        (void) syscall(SYS_getppid);
                wall[k] = now_ns() - w0;
                cpu[k] = process_cputime_ns() - c0;
        }
        res = (struct result) { (double) median(wall, rounds) / n, (double) median(cpu, rounds) / n, true };
        pread_wall_ref = 0;
        print_row(0, "getppid", &res, "baseline: one trivial syscall");
}

static void help(void)
{
        printf("track-bench [OPTIONS]\n\n"
               "Cost of one vCPU schedstat sample by method (see the source for what is measured).\n\n"
               "  -t --threads LIST       thread counts, comma separated (default 100,1000,10000)\n"
               "  -r --rounds N           rounds per method, median reported (default 11, max %d)\n"
               "     --libvirt-uri URI    libvirt connection (default qemu:///system)\n"
               "     --no-libvirt         skip the libvirt measurement\n"
               "  -h --help\n", MAX_ROUNDS);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "threads", required_argument, NULL, 't' },
                { "rounds", required_argument, NULL, 'r' },
                { "libvirt-uri", required_argument, NULL, 'u' },
                { "no-libvirt", no_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *threads = "100,1000,10000", *uri = "qemu:///system";
        bool libvirt = true;
        int rounds = 11, c;

        while ((c = getopt_long(argc, argv, "t:r:h", opts, NULL)) >= 0)
                switch (c) {
                case 't':
                        threads = optarg;
                        break;
                case 'r':
                        if (parse_int(optarg, &rounds) < 0 || rounds < 1 || rounds > MAX_ROUNDS) {
                                fprintf(stderr, "bad --rounds: %s\n", optarg);
                                return 2;
                        }
                        break;
                case 'u':
                        uri = optarg;
                        break;
                case 'n':
                        libvirt = false;
                        break;
                case 'h':
                        help();
                        return 0;
                default:
                        return 2;
                }

        printf("%8s  %-11s  %12s  %12s  %8s  %s\n", "threads", "method", "ns/smp wall", "ns/smp cpu", "vs pread",
               "notes");
        bench_syscall(rounds);
        char *list = strdup(threads);
        if (!list)
                return 1;
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                uint32_t n;
                int r;

                if (parse_u32(tok, &n) < 0 || n == 0 || n > 100000) {
                        fprintf(stderr, "bad thread count: %s\n", tok);
                        free(list);
                        return 2;
                }
                r = raise_nofile((size_t) n + 64);
                if (r < 0) {
                        fprintf(stderr, "cannot raise RLIMIT_NOFILE to %u: %s\n", n + 64, strerror(-r));
                        free(list);
                        return 1;
                }
                r = bench_threads(n, rounds);
                if (r < 0) {
                        fprintf(stderr, "%u threads: %s\n", n, strerror(-r));
                        free(list);
                        return 1;
                }
        }
        free(list);
        if (libvirt)
                bench_libvirt(uri, rounds);
        else
                printf("%8s  %-11s  libvirt: not measured (--no-libvirt)\n", "-", "libvirt");
        return 0;
}
