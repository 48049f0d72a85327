/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * hint-bench: host-side latency of a guest hint, from the moment its line is
 * written into the host end of the channel until the daemon's view of the VM
 * (hint_server_vm_state()) reflects it.
 *
 * Setup as on a real host, minus QEMU: two listening unix sockets stand in
 * for QEMU's chardevs of two VMs; the guest_hint server connects to both and
 * is driven by the main thread's epoll loop, dispatched like daemon.c's (a
 * blocking epoll_wait, then every ready watch's callback).  After each
 * dispatch the loop checks the probed VM's state.
 *
 * A prober thread (VM "probe", 2 vCPUs) writes one "LEVEL 1 <level>\n" line,
 * alternating 128 and 896 so that every probe changes the state, notes the
 * CLOCK_MONOTONIC time just before write(2), and waits until the loop has
 * seen the effective level of vCPU 1 within 8 of the target; the loop records
 * the time it saw it.  Latency = seen - written: wakeup of the loop, read,
 * framing, parsing, state update and the lookup.
 *
 * Phases: idle; while a flooder thread writes valid, state-changing hints
 * ("LEVEL 0 1024" / "LEVEL 0 0") into the second VM's channel at a paced
 * 100,000 lines/s (batches every 1 ms); and with the flooder writing as fast
 * as it can.  For each: p50/p90/p99/max of the latency, the flood rate the
 * server actually consumed (its lines counter), and the loop thread's CPU
 * time as a share of one core.
 *
 * The loop also runs the daemon's once-per-second inventory update, which
 * refills each channel's read budget (HINT_READ_BYTES_PER_SEC): the
 * unthrottled flood is read at that budget, not at whatever the writer
 * manages.
 *
 * Prints numbers; asserts nothing.  Usage: hint-bench [SAMPLES [FLOOD_RATE]]
 * (defaults 5000, 100000 lines/s).  "lost": probes not seen within 1 s (a
 * phase gives up after 100; -1.0 means no sample).  A 2-CPU machine runs
 * three busy threads here: compare the phases with each other, not with a
 * dedicated host.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "event.h"
#include "guest_hint.h"
#include "util.h"

#define PID_PROBE 1001
#define PID_FLOOD 1002
#define FLOOD_BATCH_NS NSEC_PER_MSEC
#define PROBE_GAP_NS (200 * NSEC_PER_USEC)
#define LEVEL_TOLERANCE 8

struct bench {
        int epfd;
        struct hint_server *hs;
        int probe_fd, flood_fd;
        const struct vm_info *vms;       /* the inventory, handed over once per control period */
        size_t n_vms;

        /* probe handshake between the prober and the loop */
        _Atomic uint32_t probe_target;   /* 0: none pending */
        _Atomic nsec_t probe_sent_ns;
        _Atomic nsec_t probe_seen_ns;    /* 0 until the loop saw it */
        _Atomic bool stop_loop;

        /* flooder */
        _Atomic bool flood_on;
        _Atomic bool flood_exit;
        uint64_t flood_rate;             /* lines/s, 0 = as fast as possible */
        _Atomic uint64_t flood_lines_written;
        _Atomic uint64_t flood_lines_read;   /* server's counter, published by the loop */
};

static int listen_at(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static int write_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t k = write(fd, p, len);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                len -= (size_t) k;
        }
        return 0;
}

static void sleep_until(nsec_t t)
{
        struct timespec ts = { .tv_sec = t / NSEC_PER_SEC, .tv_nsec = t % NSEC_PER_SEC };

        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

/* The daemon's loop: dispatch, then look at the probed VM if a probe is pending. */
static void *loop_thread(void *userdata)
{
        struct bench *b = userdata;
        struct epoll_event ev[16];
        nsec_t next_period = now_ns() + NSEC_PER_SEC;

        while (!atomic_load(&b->stop_loop)) {
                int n = epoll_wait(b->epfd, ev, 16, 50);
                uint32_t target;

                /* The daemon's control period (1 s): the inventory update also refills every
                 * channel's read budget, so a flood past the budget waits for it, as on a host. */
                if (now_ns() >= next_period) {
                        (void) hint_server_update_vms(b->hs, b->vms, b->n_vms, now_ns());
                        next_period += NSEC_PER_SEC;
                }

                for (int i = 0; i < n; i++) {
                        struct io_watch *w = ev[i].data.ptr;
                        w->fn(w, ev[i].events);
                }
                if (n > 0) {
                        struct hint_vm_status st;

                        if (hint_server_vm_status(b->hs, PID_FLOOD, &st) == 0)
                                atomic_store(&b->flood_lines_read, st.counters.lines);
                }
                target = atomic_load(&b->probe_target);
                if (target != 0 && atomic_load(&b->probe_seen_ns) == 0) {
                        struct hint_effective e[2];
                        nsec_t now = now_ns();

                        if (hint_server_vm_state(b->hs, PID_PROBE, now, e, 2) == 2 &&
                            (e[1].level > target ? e[1].level - target : target - e[1].level) <= LEVEL_TOLERANCE)
                                atomic_store(&b->probe_seen_ns, now);
                }
        }
        return NULL;
}

static void *flood_thread(void *userdata)
{
        struct bench *b = userdata;
        static const char pair[] = "LEVEL 0 1024\nLEVEL 0 0\n";
        size_t pair_len = sizeof(pair) - 1;
        char *buf = malloc(64 * 1024);
        size_t cap = 64 * 1024 / pair_len;
        nsec_t next = now_ns();

        if (!buf)
                return NULL;
        for (size_t i = 0; i < cap; i++)
                memcpy(buf + i * pair_len, pair, pair_len);
        while (!atomic_load(&b->flood_exit)) {
                uint64_t rate = b->flood_rate;
                size_t pairs;

                if (!atomic_load(&b->flood_on)) {
                        usleep(1000);
                        next = now_ns();
                        continue;
                }
                /* lines per batch: rate lines/s in 1 ms batches; even, so the pair stays whole */
                pairs = rate ? (size_t) (rate * FLOOD_BATCH_NS / NSEC_PER_SEC / 2) : cap;
                if (pairs == 0)
                        pairs = 1;
                if (pairs > cap)
                        pairs = cap;
                if (write_all(b->flood_fd, buf, pairs * pair_len) < 0)
                        break;
                atomic_fetch_add(&b->flood_lines_written, 2 * pairs);
                if (rate) {
                        next += FLOOD_BATCH_NS;
                        sleep_until(next);
                }
        }
        free(buf);
        return NULL;
}

static int cmp_nsec(const void *a, const void *b)
{
        nsec_t x = *(const nsec_t *) a, y = *(const nsec_t *) b;

        return x < y ? -1 : x > y;
}

static double pct_us(const nsec_t *sorted, size_t n, double p)
{
        if (n == 0)
                return -1;
        size_t i = (size_t) (p / 100.0 * (double) (n - 1) + 0.5);

        return (double) sorted[i] / 1e3;
}

/* One phase: samples probes; prints a table row. */
static int run_phase(struct bench *b, const char *name, bool flood, uint64_t rate, size_t samples,
                     pthread_t loop)
{
        nsec_t *lat = calloc(samples, sizeof(nsec_t));
        uint64_t flood_lines0, written0;
        nsec_t t0, t1, cpu0, cpu1;
        clockid_t loop_clock;
        struct timespec ts;
        size_t n = 0, timeouts = 0;
        static uint32_t next_level = 128;

        if (!lat)
                return -ENOMEM;
        if (pthread_getcpuclockid(loop, &loop_clock) != 0) {
                free(lat);
                return -EINVAL;
        }
        b->flood_rate = rate;
        atomic_store(&b->flood_on, flood);
        if (flood)
                usleep(200 * 1000); /* let the flood reach its steady state */

        flood_lines0 = atomic_load(&b->flood_lines_read);
        written0 = atomic_load(&b->flood_lines_written);
        clock_gettime(loop_clock, &ts);
        cpu0 = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
        t0 = now_ns();
        while (n < samples && timeouts < 100) {
                char line[32];
                int len = snprintf(line, sizeof(line), "LEVEL 1 %u\n", next_level);
                nsec_t deadline, seen;

                atomic_store(&b->probe_seen_ns, 0);
                atomic_store(&b->probe_target, next_level);
                atomic_store(&b->probe_sent_ns, now_ns());
                if (write_all(b->probe_fd, line, (size_t) len) < 0) {
                        free(lat);
                        return -EIO;
                }
                deadline = now_ns() + NSEC_PER_SEC;
                while ((seen = atomic_load(&b->probe_seen_ns)) == 0 && now_ns() < deadline)
                        sched_yield();
                atomic_store(&b->probe_target, 0);
                if (seen == 0)
                        timeouts++;
                else
                        lat[n++] = seen - atomic_load(&b->probe_sent_ns);
                next_level = next_level == 128 ? 896 : 128;
                sleep_until(now_ns() + PROBE_GAP_NS);
        }
        t1 = now_ns();
        clock_gettime(loop_clock, &ts);
        cpu1 = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
        {
                double secs = (double) (t1 - t0) / 1e9;
                uint64_t consumed = atomic_load(&b->flood_lines_read) - flood_lines0;
                uint64_t written = atomic_load(&b->flood_lines_written) - written0;

                qsort(lat, n, sizeof(*lat), cmp_nsec);
                printf("%-22s %7zu %8.1f %8.1f %8.1f %9.1f %12.0f %12.0f %8.1f%% %5zu\n", name, n,
                       pct_us(lat, n, 50), pct_us(lat, n, 90), pct_us(lat, n, 99), pct_us(lat, n, 100),
                       (double) written / secs, (double) consumed / secs,
                       100.0 * (double) (cpu1 - cpu0) / (double) (t1 - t0), timeouts);
        }
        atomic_store(&b->flood_on, false);
        usleep(100 * 1000);
        free(lat);
        return 0;
}

int main(int argc, char **argv)
{
        struct bench b = { .epfd = -1 };
        char dir[] = "/tmp/hint-bench-XXXXXX";
        char path_probe[108], path_flood[108];
        struct vm_info vms[2] = {
                /* libvirt's, as a channel socket libvirt listens on: the bench's own listeners are not
                 * these pids, which the peer check of a [QEMU] HintSocket channel would refuse */
                { .pid = PID_PROBE, .libvirt_id = -1, .n_vcpus = 2, .name = "probe", .sources = VM_SOURCE_LIBVIRT },
                { .pid = PID_FLOOD, .libvirt_id = -1, .n_vcpus = 2, .name = "flood", .sources = VM_SOURCE_LIBVIRT },
        };
        size_t samples = 5000;
        uint64_t rate = 100000, v;
        int lfd_probe, lfd_flood, r;
        pthread_t loop, flooder;

        if (argc > 1) {
                if (parse_u64(argv[1], &v) < 0 || v == 0 || v > 10000000) {
                        fprintf(stderr, "usage: hint-bench [SAMPLES [FLOOD_RATE]]\n");
                        return 2;
                }
                samples = (size_t) v;
        }
        if (argc > 2 && parse_u64(argv[2], &rate) < 0) {
                fprintf(stderr, "usage: hint-bench [SAMPLES [FLOOD_RATE]]\n");
                return 2;
        }
        if (!mkdtemp(dir))
                return 1;
        snprintf(path_probe, sizeof(path_probe), "%s/probe.sock", dir);
        snprintf(path_flood, sizeof(path_flood), "%s/flood.sock", dir);
        snprintf(vms[0].hint_socket, sizeof(vms[0].hint_socket), "%s", path_probe);
        snprintf(vms[1].hint_socket, sizeof(vms[1].hint_socket), "%s", path_flood);
        lfd_probe = listen_at(path_probe);
        lfd_flood = listen_at(path_flood);
        b.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (lfd_probe < 0 || lfd_flood < 0 || b.epfd < 0) {
                fprintf(stderr, "setup failed\n");
                return 1;
        }
        b.vms = vms;
        b.n_vms = 2;
        r = hint_server_new(b.epfd, NULL, NULL, NULL, &b.hs);
        if (r < 0 || hint_server_update_vms(b.hs, vms, 2, now_ns()) < 0) {
                fprintf(stderr, "hint server: %s\n", strerror(-r));
                return 1;
        }
        b.probe_fd = accept4(lfd_probe, NULL, NULL, SOCK_CLOEXEC);
        b.flood_fd = accept4(lfd_flood, NULL, NULL, SOCK_CLOEXEC);
        if (b.probe_fd < 0 || b.flood_fd < 0) {
                fprintf(stderr, "accept: %m\n");
                return 1;
        }
        if (pthread_create(&loop, NULL, loop_thread, &b) != 0 ||
            pthread_create(&flooder, NULL, flood_thread, &b) != 0)
                return 1;
        if (write_all(b.probe_fd, "HELLO 1 vcpus=2 agent=bench-probe\n", 34) < 0 ||
            write_all(b.flood_fd, "HELLO 1 vcpus=2 agent=bench-flood\n", 34) < 0)
                return 1;
        usleep(100 * 1000);

        printf("hint-bench: %zu samples per phase; latency = write(2) of one LEVEL line -> "
               "hint_server_vm_state() shows it (us)\n", samples);
        printf("%-22s %7s %8s %8s %8s %9s %12s %12s %9s %5s\n", "phase", "samples", "p50", "p90", "p99",
               "max", "flood_wr/s", "flood_rd/s", "loop_cpu", "lost");
        r = run_phase(&b, "idle", false, 0, samples, loop);
        if (r >= 0) {
                char name[32];
                snprintf(name, sizeof(name), "flood %" PRIu64 "/s", rate);
                r = run_phase(&b, name, true, rate, samples, loop);
        }
        if (r >= 0)
                r = run_phase(&b, "flood max", true, 0, samples, loop);

        atomic_store(&b.flood_exit, true);
        pthread_join(flooder, NULL);
        atomic_store(&b.stop_loop, true);
        pthread_join(loop, NULL);
        {
                struct hint_vm_status sp, sf;

                if (hint_server_vm_status(b.hs, PID_PROBE, &sp) == 0 &&
                    hint_server_vm_status(b.hs, PID_FLOOD, &sf) == 0)
                        printf("server counters: probe lines %" PRIu64 " accepted %" PRIu64 " rejected-free=%s; "
                               "flood lines %" PRIu64 " accepted %" PRIu64 " read events %" PRIu64
                               " (max %" PRIu64 " B)\n",
                               sp.counters.lines, sp.counters.accepted,
                               sp.counters.lines == sp.counters.accepted ? "yes" : "no", sf.counters.lines,
                               sf.counters.accepted, sf.io.read_events, sf.io.read_chunk_max);
        }
        hint_server_free(b.hs);
        close(b.probe_fd);
        close(b.flood_fd);
        close(lfd_probe);
        close(lfd_flood);
        close(b.epfd);
        (void) unlink(path_probe);
        (void) unlink(path_flood);
        (void) rmdir(dir);
        return r < 0 ? 1 : 0;
}
