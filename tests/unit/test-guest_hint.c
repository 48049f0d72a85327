/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest hint channel server (vmmpower/guest_hint.c) against a real unix
 * socket standing in for QEMU's chardev (listening side), driven by a real
 * epoll set dispatched like daemon.c's loop; plus the libvirt XML parser of
 * the channel path on a recorded live domain XML.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "event.h"
#include "guest_hint.h"
#include "libvirt_src.h"
#include "vcpu_track.h"

/*
 * The VMs' "QEMU" pids: a [QEMU] HintSocket channel (a VM without
 * VM_SOURCE_LIBVIRT) is used only when the pid listening on it is the VM's
 * (SO_PEERCRED), so each fake QEMU is a child process that calls listen(2) on
 * the sockets the test binds (struct qemu_stub).
 */
static pid_t pid_a, pid_b;
#define PID_A pid_a
#define PID_B pid_b

static nsec_t fake_now;

static nsec_t fake_clock(void *userdata)
{
        return fake_now;
}

/* A stand-in QEMU process: it calls listen(2) on the sockets it is sent, and nothing else. */
struct qemu_stub {
        pid_t pid;
        int ctl; /* SOCK_SEQPACKET to the child: a socket to listen on, one byte back */
};

struct fixture {
        char dir[64];
        char path_a[108], path_b[108];
        struct qemu_stub qemu_a, qemu_b;
        int lfd_a, lfd_b; /* listening "QEMU" sockets, listened on by qemu_a / qemu_b */
        int epfd;
        struct hint_server *hs;
        int actuate_calls, actuate_sum;
};

static void on_actuate(pid_t pid, int n, void *userdata)
{
        struct fixture *f = userdata;

        f->actuate_calls++;
        f->actuate_sum += n;
}

static void stub_start(struct qemu_stub *q)
{
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        q->pid = fork();
        assert_true(q->pid >= 0);
        if (q->pid == 0) {
                /* Only the control socket: no copy of the test's sockets may outlive their close(). */
                for (int fd = 3; fd < 1024; fd++)
                        if (fd != sv[1])
                                (void) close(fd);
                for (;;) {
                        char byte, cbuf[CMSG_SPACE(sizeof(int))];
                        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
                        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                                             .msg_controllen = sizeof(cbuf) };
                        struct cmsghdr *cm;
                        int fd;

                        if (recvmsg(sv[1], &mh, 0) <= 0 || !(cm = CMSG_FIRSTHDR(&mh)) || cm->cmsg_type != SCM_RIGHTS)
                                _exit(0);
                        memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
                        byte = listen(fd, 4) == 0 ? 'y' : 'n';
                        close(fd);
                        if (write(sv[1], &byte, 1) != 1)
                                _exit(1);
                }
        }
        close(sv[1]);
        q->ctl = sv[0];
}

static void stub_stop(struct qemu_stub *q)
{
        if (q->pid <= 0)
                return;
        close(q->ctl);
        (void) waitpid(q->pid, NULL, 0);
        q->pid = 0;
}

/* A "QEMU" chardev socket at path, listened on by q (its SO_PEERCRED pid is q->pid). */
static int listen_by(struct qemu_stub *q, const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

        assert_true(fd >= 0);
        strcpy(sa.sun_path, path);
        (void) unlink(path);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
        assert_int_equal(sendmsg(q->ctl, &mh, 0), 1);
        assert_int_equal(read(q->ctl, &byte, 1), 1);
        assert_int_equal(byte, 'y');
        return fd;
}

/* Accept the server's connection (must be pending), non-blocking. */
static int accept_peer(int lfd)
{
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        assert_true(fd >= 0);
        return fd;
}

static bool peer_pending(int lfd)
{
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* One iteration of the daemon's loop.  Returns the number of events dispatched. */
static int dispatch(int epfd, int timeout_ms)
{
        struct epoll_event ev[16];
        int n = epoll_wait(epfd, ev, 16, timeout_ms);

        assert_true(n >= 0);
        for (int i = 0; i < n; i++) {
                struct io_watch *w = ev[i].data.ptr;
                w->fn(w, ev[i].events);
        }
        return n;
}

/* dispatch() with the CPU time it took added to *cpu (the server's share of a flood). */
static int timed_dispatch(int epfd, nsec_t *cpu)
{
        nsec_t t = thread_cputime_ns();
        int n = dispatch(epfd, 0);

        *cpu += thread_cputime_ns() - t;
        return n;
}

static void drain(int epfd)
{
        for (int i = 0; i < 100 && dispatch(epfd, 10) > 0; i++)
                ;
}

static void peer_write(int fd, const char *s)
{
        size_t len = strlen(s);

        assert_int_equal(write(fd, s, len), (ssize_t) len);
}

static ssize_t peer_read(int fd, char *buf, size_t size)
{
        ssize_t k = read(fd, buf, size - 1);

        buf[k > 0 ? k : 0] = '\0';
        return k;
}

static struct vm_info make_vm(pid_t pid, const char *path, unsigned n_vcpus)
{
        struct vm_info vm = { .pid = pid, .libvirt_id = -1, .n_vcpus = n_vcpus };

        snprintf(vm.name, sizeof(vm.name), "vm-%d", (int) pid);
        snprintf(vm.hint_socket, sizeof(vm.hint_socket), "%s", path);
        return vm;
}

static void update_a(struct fixture *f, unsigned n_vcpus)
{
        struct vm_info vm = make_vm(PID_A, f->path_a, n_vcpus);

        assert_int_equal(hint_server_update_vms(f->hs, &vm, 1, fake_now), 0);
}

static struct hint_vm_status status_of(struct fixture *f, pid_t pid)
{
        struct hint_vm_status st;

        assert_int_equal(hint_server_vm_status(f->hs, pid, &st), 0);
        return st;
}

static int setup_policy(void **state, const struct hint_policy *p)
{
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        /* the stubs first: they must not inherit the test's sockets */
        stub_start(&f->qemu_a);
        stub_start(&f->qemu_b);
        pid_a = f->qemu_a.pid;
        pid_b = f->qemu_b.pid;
        strcpy(f->dir, "/tmp/test-guest_hint.XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->path_a, sizeof(f->path_a), "%s/a.sock", f->dir);
        snprintf(f->path_b, sizeof(f->path_b), "%s/b.sock", f->dir);
        f->lfd_a = listen_by(&f->qemu_a, f->path_a);
        f->lfd_b = -1;
        f->epfd = epoll_create1(EPOLL_CLOEXEC);
        assert_true(f->epfd >= 0);
        assert_int_equal(hint_server_new(f->epfd, p, on_actuate, f, &f->hs), 0);
        hint_server_set_clock(f->hs, fake_clock, NULL);
        fake_now = 1000 * NSEC_PER_SEC;
        *state = f;
        return 0;
}

static int setup(void **state)
{
        return setup_policy(state, NULL);
}

static int setup_full(void **state)
{
        struct hint_policy p;

        hint_policy_init(&p);
        p.trust = HINT_TRUST_FULL;
        return setup_policy(state, &p);
}

static int teardown(void **state)
{
        struct fixture *f = *state;

        hint_server_free(f->hs);
        close(f->epfd);
        if (f->lfd_a >= 0)
                close(f->lfd_a);
        if (f->lfd_b >= 0)
                close(f->lfd_b);
        stub_stop(&f->qemu_a);
        stub_stop(&f->qemu_b);
        (void) unlink(f->path_a);
        (void) unlink(f->path_b);
        (void) rmdir(f->dir);
        free(f);
        return 0;
}

static void test_handshake_and_hints(void **state)
{
        struct fixture *f = *state;
        struct hint_effective e[4];
        struct hint_vm_status st;
        char buf[512];
        int peer;

        update_a(f, 2);
        st = status_of(f, PID_A);
        assert_true(st.connected);
        assert_int_equal(st.io.connects, 1);
        peer = accept_peer(f->lfd_a);

        peer_write(peer, "\nHELLO 1 vcpus=2 agent=test/1\nLEVEL 0 900\nUTIL 1 300\nBOOST 1 200\n");
        drain(f->epfd);
        st = status_of(f, PID_A);
        assert_true(st.handshaked);
        assert_string_equal(st.agent, "test/1");
        assert_int_equal(st.counters.lines, 5);
        assert_int_equal(st.counters.accepted, 4);
        assert_int_equal(st.counters.handshakes, 1);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "WELCOME 1 vcpus=2 max_level=1024 boost_cap_ms=500 rate=10 burst=20 "
                                 "trust=advisory\nLIMIT 0 0 1024\nLIMIT 1 0 1024\n");

        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now, e, 4), 2);
        assert_int_equal(e[0].level, 900);
        assert_int_equal(e[0].weight, 1024);
        assert_false(e[0].boosted);
        assert_int_equal(e[1].util, 300);
        assert_true(e[1].boosted);
        assert_int_equal(e[1].boost_remaining_ns, 200 * NSEC_PER_MSEC);
        assert_false(e[1].may_actuate);

        /* One half-life later: faded to half ("no hint" is 0), boost over. */
        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now + 2 * NSEC_PER_SEC, e, 4), 2);
        assert_int_equal(e[0].weight, 512);
        assert_int_equal(e[0].level, 900 / 2);
        assert_false(e[1].boosted);

        /* Host -> guest. */
        assert_int_equal(hint_server_send_grant(f->hs, PID_A, 1, 700), 0);
        assert_int_equal(hint_server_send_limit(f->hs, PID_A, 0, 128, 896), 0);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "GRANT 1 700\nLIMIT 0 128 896\n");
        assert_int_equal(hint_server_send_grant(f->hs, PID_A, 2, 700), -ERANGE);
        assert_int_equal(hint_server_send_grant(f->hs, PID_B, 0, 700), -ENOENT);
        assert_null(hint_server_hint_vm(f->hs, PID_B));
        assert_int_equal(hint_server_vm_state(f->hs, PID_B, fake_now, e, 4), -ENOENT);

        /* Advisory trust: nothing may actuate, the callback never fired. */
        assert_int_equal(f->actuate_calls, 0);
        assert_int_equal(status_of(f, PID_A).counters.actuations, 0);

        /* The VM disappears from the inventory: closed, forgotten, totals kept. */
        assert_int_equal(hint_server_update_vms(f->hs, NULL, 0, fake_now), 0);
        assert_int_equal(hint_server_n_vms(f->hs), 0);
        assert_int_equal(peer_read(peer, buf, sizeof(buf)), 0); /* EOF at the peer */
        {
                struct hint_counters c;
                struct hint_io_stats io;

                hint_server_totals(f->hs, &c, &io);
                assert_int_equal(c.accepted, 4);
                assert_int_equal(io.connects, 1);
                assert_int_equal(io.disconnects, 1);
        }
        close(peer);
}

static void test_garbage_resync(void **state)
{
        struct fixture *f = *state;
        struct hint_effective e[2];
        struct hint_vm_status st;
        char big[400], buf[512];
        int peer;

        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        peer_write(peer, "LEVEL 0 100\n"); /* before HELLO */
        peer_write(peer, "HELLO 1 vcpus=2\nGARBAGE here\nLEVEL 0 01\nLEVEL 0 2000\nLEVEL 0 1\x01\n");
        memset(big, 'A', sizeof(big) - 2);
        big[sizeof(big) - 2] = '\n';
        big[sizeof(big) - 1] = '\0';
        peer_write(peer, big);
        peer_write(peer, "LEVEL 1 100\n");
        drain(f->epfd);

        st = status_of(f, PID_A);
        assert_int_equal(st.counters.rejected[HINT_REJECT_HANDSHAKE], 1);
        assert_int_equal(st.counters.rejected[HINT_REJECT_SYNTAX], 1);
        assert_int_equal(st.counters.rejected[HINT_REJECT_NUMBER], 1);
        assert_int_equal(st.counters.rejected[HINT_REJECT_RANGE], 1);
        assert_int_equal(st.counters.rejected[HINT_REJECT_CHAR], 1);
        assert_int_equal(st.counters.rejected[HINT_REJECT_OVERSIZED], 1);
        assert_int_equal(st.counters.oversized, 1);
        assert_int_equal(st.counters.resyncs, 2);
        assert_int_equal(st.counters.accepted, 2); /* HELLO, LEVEL 1 100 */
        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now, e, 2), 2);
        assert_int_equal(e[0].weight, 0); /* never a valid LEVEL 0 */
        assert_int_equal(e[0].level, 0);
        assert_int_equal(e[1].level, 100);
        assert_int_equal(e[1].weight, 1024);

        /* One ERR per second reached the guest (the handshake one), the rest were suppressed. */
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_non_null(strstr(buf, "ERR handshake"));
        assert_null(strstr(buf, "ERR syntax"));
        assert_int_equal(st.counters.errors_suppressed, 5);
        close(peer);
}

static void test_vcpu_bound(void **state)
{
        struct fixture *f = *state;
        struct hint_effective e[64];
        struct hint_vm_status st;
        char buf[512];
        int peer;

        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        peer_write(peer, "HELLO 1 vcpus=64\nLEVEL 2 100\nLEVEL 63 100\nBOOST 4095 100\nLEVEL 1 1000\n");
        drain(f->epfd);
        st = status_of(f, PID_A);
        assert_int_equal(st.n_vcpus, 2);
        assert_int_equal(st.guest_vcpus, 2);
        assert_int_equal(st.counters.clamped, 1);
        assert_int_equal(st.counters.rejected[HINT_REJECT_VCPU], 3);
        assert_int_equal(st.counters.accepted, 2);
        assert_int_equal(hint_server_hint_vm(f->hs, PID_A)->n_vcpus, 2);
        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now, e, 64), 2);
        assert_int_equal(e[1].level, 1000);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_non_null(strstr(buf, "WELCOME 1 vcpus=2 "));

        /* vCPU hot-plug in the inventory (not the guest) extends it. */
        update_a(f, 3);
        assert_int_equal(status_of(f, PID_A).n_vcpus, 3);
        peer_write(peer, "LEVEL 2 100\n");
        drain(f->epfd);
        assert_int_equal(status_of(f, PID_A).counters.rejected[HINT_REJECT_VCPU], 3);
        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now, e, 64), 3);
        assert_int_equal(e[2].level, 100);
        assert_int_equal(e[1].level, 1000); /* kept */
        close(peer);
}

static void test_disconnect_midline_reconnect(void **state)
{
        struct fixture *f = *state;
        struct hint_effective e[2];
        struct hint_vm_status st;
        nsec_t t0;
        int peer;

        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        peer_write(peer, "HELLO 1 vcpus=2\nLEVEL 0 800\nLEVEL 1 9");
        drain(f->epfd);
        close(peer);
        drain(f->epfd);
        t0 = fake_now;
        st = status_of(f, PID_A);
        assert_false(st.connected);
        assert_false(st.handshaked);
        assert_int_equal(st.counters.partial_dropped, 1);
        assert_int_equal(st.io.disconnects, 1);
        assert_int_equal(st.next_connect_ns, t0 + HINT_RECONNECT_MIN_NS); /* handshake reset the backoff */

        fake_now = t0 + HINT_RECONNECT_MIN_NS / 2;
        update_a(f, 2);
        assert_false(status_of(f, PID_A).connected);
        assert_false(peer_pending(f->lfd_a));

        fake_now = t0 + HINT_RECONNECT_MIN_NS;
        update_a(f, 2);
        st = status_of(f, PID_A);
        assert_true(st.connected);
        assert_int_equal(st.io.connects, 2);
        peer = accept_peer(f->lfd_a);
        /* "00\n" would complete "LEVEL 1 9" into "LEVEL 1 900" if the partial line had been kept. */
        peer_write(peer, "00\n");
        drain(f->epfd);
        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now, e, 2), 2);
        assert_int_equal(e[1].weight, 0);
        assert_int_equal(e[1].level, 0);
        /* State continued across the reconnect, faded by the elapsed second (800 x 2^-0.5). */
        assert_int_equal(e[0].weight, hint_decay_weight(HINT_RECONNECT_MIN_NS, HINT_DEFAULT_HALF_LIFE_NS));
        assert_true(e[0].level > 550 && e[0].level < 580);
        st = status_of(f, PID_A);
        assert_int_equal(st.counters.rejected[HINT_REJECT_SYNTAX], 1);

        /* The guest re-sends its state after the new handshake. */
        peer_write(peer, "\nHELLO 1 vcpus=2\nLEVEL 0 800\nLEVEL 1 900\n");
        drain(f->epfd);
        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now, e, 2), 2);
        assert_int_equal(e[0].level, 800);
        assert_int_equal(e[1].level, 900);
        assert_int_equal(status_of(f, PID_A).counters.handshakes, 2);
        close(peer);
}

static void test_peer_gone_backoff(void **state)
{
        struct fixture *f = *state;
        struct hint_vm_status st;
        nsec_t t0;
        int peer;

        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        /* QEMU goes away: connection and listening socket closed, path removed. */
        close(peer);
        close(f->lfd_a);
        f->lfd_a = -1;
        (void) unlink(f->path_a);
        drain(f->epfd);
        t0 = fake_now;
        st = status_of(f, PID_A);
        assert_false(st.connected);
        assert_int_equal(st.next_connect_ns, t0 + 1 * NSEC_PER_SEC);

        /* Failures double the delay: attempts at t0+1, t0+3, t0+7 only. */
        const nsec_t times_s[] = { 1, 2, 3, 4, 5, 6 };
        const uint64_t fails[] = { 1, 1, 2, 2, 2, 2 };
        for (size_t i = 0; i < ELEMENTSOF(times_s); i++) {
                fake_now = t0 + times_s[i] * NSEC_PER_SEC;
                update_a(f, 2);
                st = status_of(f, PID_A);
                assert_false(st.connected);
                assert_int_equal(st.io.connect_failures, fails[i]);
        }
        assert_int_equal(st.next_connect_ns, t0 + 7 * NSEC_PER_SEC);

        /* QEMU is back (a restarted guest): the next due attempt connects. */
        f->lfd_a = listen_by(&f->qemu_a, f->path_a);
        fake_now = t0 + 7 * NSEC_PER_SEC;
        update_a(f, 2);
        st = status_of(f, PID_A);
        assert_true(st.connected);
        assert_int_equal(st.io.connects, 2);
        assert_int_equal(st.io.connect_failures, 2);
        peer = accept_peer(f->lfd_a);
        peer_write(peer, "HELLO 1 vcpus=2\n");
        drain(f->epfd);
        assert_true(status_of(f, PID_A).handshaked);
        close(peer);
}

static void test_flood_bounded_and_rate_limited(void **state)
{
        struct fixture *f = *state;
        const size_t total = 1 << 20;
        char *data = malloc(total + 64);
        size_t len = 0, sent = 0, n_level = 0;
        struct hint_vm_status st, stb;
        struct vm_info vms[2];
        int peer, peer_b, iters = 0;
        bool b_sent = false, b_served_during_flood = false;
        nsec_t t0, cpu0, cpu, server_cpu = 0;

        assert_non_null(data);
        len += (size_t) sprintf(data, "HELLO 1 vcpus=2\n");
        while (len < total - 16) {
                len += (size_t) sprintf(data + len, "LEVEL %zu %zu\n", n_level % 2, 100 + n_level % 900);
                n_level++;
        }

        f->lfd_b = listen_by(&f->qemu_b, f->path_b);
        vms[0] = make_vm(PID_A, f->path_a, 2);
        vms[1] = make_vm(PID_B, f->path_b, 1);
        assert_int_equal(hint_server_update_vms(f->hs, vms, 2, fake_now), 0);
        assert_int_equal(hint_server_n_vms(f->hs), 2);
        peer = accept_peer(f->lfd_a);
        peer_b = accept_peer(f->lfd_b);

        t0 = fake_now;
        cpu0 = process_cputime_ns();
        while (sent < len || timed_dispatch(f->epfd, &server_cpu) > 0) {
                if (sent < len) {
                        ssize_t k = write(peer, data + sent, len - sent);

                        if (k > 0)
                                sent += (size_t) k;
                        else
                                assert_int_equal(errno, EAGAIN);
                }
                if (iters == 3) {
                        peer_write(peer_b, "HELLO 1 vcpus=1\nBOOST 0 100\n");
                        b_sent = true;
                }
                timed_dispatch(f->epfd, &server_cpu);
                if (b_sent && !b_served_during_flood && status_of(f, PID_B).counters.accepted == 2 &&
                    status_of(f, PID_A).counters.bytes < len)
                        b_served_during_flood = true;
                fake_now += NSEC_PER_MSEC; /* one loop iteration = 1 ms */
                iters++;
                assert_true(iters < 1000000);
        }
        cpu = process_cputime_ns() - cpu0;

        st = status_of(f, PID_A);
        assert_int_equal(st.counters.bytes, len);
        assert_int_equal(st.counters.accepted, n_level + 1);
        assert_int_equal(st.counters.lines, n_level + 1);
        assert_true(st.io.read_chunk_max <= HINT_READ_CHUNK);
        assert_true(st.io.read_events >= len / HINT_READ_CHUNK);
        /* Almost every LEVEL changes the stored value and asks for a token; the few that equal
         * the stored one (a rate-limited change is not stored) are free refreshes. */
        assert_true(st.counters.actuations + st.counters.rate_limited <= n_level);
        assert_true(st.counters.actuations + st.counters.rate_limited >= n_level * 99 / 100);
        {
                nsec_t elapsed = fake_now - t0;
                uint64_t max_tokens = HINT_DEFAULT_BURST +
                                      (uint64_t) (elapsed * HINT_DEFAULT_RATE_PER_SEC / NSEC_PER_SEC) + 1;

                assert_true(st.counters.actuations <= max_tokens);
                assert_true(st.counters.actuations >= HINT_DEFAULT_BURST);
                print_message("flood: %zu bytes, %zu hints, %" PRIu64 " reads (max %" PRIu64 " B), %d loop "
                              "iterations (%.3f s fake time), %" PRIu64 " actuations, %" PRIu64
                              " rate-limited; CPU %.1f ms total (test + server), server %.1f ms = %.1f ms per 100k hints\n",
                              len, n_level, st.io.read_events, st.io.read_chunk_max, iters,
                              (double) elapsed / NSEC_PER_SEC, st.counters.actuations,
                              st.counters.rate_limited, cpu / 1e6, server_cpu / 1e6,
                              server_cpu / 1e6 * 100000.0 / (double) n_level);
        }
        assert_int_equal(f->actuate_sum, st.counters.actuations + status_of(f, PID_B).counters.actuations);

        /* The other VM was served while A's flood was still being read. */
        assert_true(b_served_during_flood);
        stb = status_of(f, PID_B);
        assert_int_equal(stb.counters.accepted, 2);
        assert_int_equal(stb.counters.actuations, 1);
        close(peer);
        close(peer_b);
        free(data);
}

/* A guest writing faster than HINT_READ_BYTES_PER_SEC is read at that rate:
 * the rest waits in the socket until the budget refills at a later update. */
static void test_read_budget(void **state)
{
        struct fixture *f = *state;
        const size_t total = 4u << 20; /* more than 1.5 s of budget */
        char *data = malloc(total + 64);
        size_t len = 0, sent = 0;
        struct hint_vm_status st;
        uint64_t after_first, after_half;
        int peer, idle = 0;

        assert_non_null(data);
        len += (size_t) sprintf(data, "HELLO 1 vcpus=2\n");
        while (len < total - 16)
                len += (size_t) sprintf(data + len, "LEVEL 0 %zu\n", 100 + len % 900);
        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        assert_int_equal(fcntl(peer, F_SETFL, O_NONBLOCK), 0);
        /* Clock stands still: only the initial budget may be read. */
        while (idle < 50) {
                ssize_t k = sent < len ? write(peer, data + sent, len - sent) : 0;

                if (k > 0)
                        sent += (size_t) k;
                idle = dispatch(f->epfd, 10) > 0 || k > 0 ? 0 : idle + 1;
        }
        st = status_of(f, PID_A);
        after_first = st.counters.bytes;
        assert_int_equal(after_first, HINT_READ_BYTES_PER_SEC);
        assert_true(st.io.read_throttles >= 1);
        /* Half a second later (the daemon's next update), half the budget more. */
        fake_now += NSEC_PER_SEC / 2;
        update_a(f, 2);
        for (idle = 0; idle < 50;) {
                ssize_t k = sent < len ? write(peer, data + sent, len - sent) : 0;

                if (k > 0)
                        sent += (size_t) k;
                idle = dispatch(f->epfd, 10) > 0 || k > 0 ? 0 : idle + 1;
        }
        after_half = status_of(f, PID_A).counters.bytes;
        assert_int_equal(after_half - after_first, HINT_READ_BYTES_PER_SEC / 2);
        /* Enough time: everything is read, nothing was lost or rejected. */
        for (int i = 0; i < 4 && status_of(f, PID_A).counters.bytes < len; i++) {
                fake_now += NSEC_PER_SEC;
                update_a(f, 2);
                for (idle = 0; idle < 50;) {
                        ssize_t k = sent < len ? write(peer, data + sent, len - sent) : 0;

                        if (k > 0)
                                sent += (size_t) k;
                        idle = dispatch(f->epfd, 10) > 0 || k > 0 ? 0 : idle + 1;
                }
        }
        st = status_of(f, PID_A);
        assert_int_equal(st.counters.bytes, len);
        assert_int_equal(st.counters.rejected[HINT_REJECT_SYNTAX], 0);
        print_message("read budget: %zu bytes offered at once, %" PRIu64 " read at first, +%" PRIu64
                      " after 0.5 s, %" PRIu64 " throttles\n",
                      len, after_first, after_half - after_first, st.io.read_throttles);
        close(peer);
        free(data);
}

/* A flood over running time: the clock moves on between wake-ups, as it does in
 * the daemon.  The budget must still be spent in full chunks, not a few bytes per
 * wake-up (which a bucket refilled on every read would hand out), so the number
 * of reads stays near bytes / HINT_READ_CHUNK. */
static void test_read_budget_running_clock(void **state)
{
        struct fixture *f = *state;
        const size_t total = 12u << 20;
        const nsec_t period = NSEC_PER_SEC / 10, step = 20 * NSEC_PER_USEC;
        char *data = malloc(total + 64);
        size_t len = 0, sent = 0;
        struct hint_vm_status st;
        nsec_t next_update;
        uint64_t reads0, bytes0, max_reads;
        int peer, updates = 0;

        assert_non_null(data);
        len += (size_t) sprintf(data, "HELLO 1 vcpus=2\n");
        while (len < total - 16)
                len += (size_t) sprintf(data + len, "LEVEL 1 %zu\n", 100 + len % 900);
        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        assert_int_equal(fcntl(peer, F_SETFL, O_NONBLOCK), 0);
        st = status_of(f, PID_A);
        reads0 = st.io.read_events;
        bytes0 = st.counters.bytes;
        next_update = fake_now + period;
        /* Three simulated seconds: 20 us per wake-up, an update every 100 ms. */
        while (updates < 30) {
                ssize_t k = sent < len ? write(peer, data + sent, len - sent) : 0;

                if (k > 0)
                        sent += (size_t) k;
                if (dispatch(f->epfd, 0) > 0)
                        fake_now += step;
                else
                        fake_now = next_update; /* nothing to read: on to the period */
                if (fake_now >= next_update) {
                        update_a(f, 2);
                        updates++;
                        next_update += period;
                }
        }
        st = status_of(f, PID_A);
        /* Initial second's budget plus three seconds' refill, never more. */
        assert_true(st.counters.bytes - bytes0 <= 4 * (uint64_t) HINT_READ_BYTES_PER_SEC);
        assert_true(st.counters.bytes - bytes0 >= 3 * (uint64_t) HINT_READ_BYTES_PER_SEC);
        max_reads = (st.counters.bytes - bytes0) / HINT_READ_CHUNK + 2 * (uint64_t) updates + 8;
        print_message("read budget, running clock: %" PRIu64 " bytes in %" PRIu64 " reads (at most %" PRIu64
                      " allowed), %" PRIu64 " throttles\n",
                      st.counters.bytes - bytes0, st.io.read_events - reads0, max_reads, st.io.read_throttles);
        assert_true(st.io.read_events - reads0 <= max_reads);
        assert_int_equal(st.counters.rejected[HINT_REJECT_SYNTAX], 0);
        close(peer);
        free(data);
}

static void test_peer_never_reads(void **state)
{
        struct fixture *f = *state;
        const char *hello = "HELLO 1 vcpus=2\n";
        const size_t n_hello = (1 << 20) / 16;
        char *data = malloc(n_hello * 16);
        struct hint_vm_status st;
        size_t sent = 0, got = 0, n_grants = 0;
        char buf[65536];
        int peer, iters = 0;
        nsec_t t0 = fake_now;

        assert_non_null(data);
        for (size_t i = 0; i < n_hello; i++)
                memcpy(data + i * 16, hello, 16);
        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        /* A HELLO flood (1 ms of fake time per loop): WELCOME + LIMITs at most every
         * HINT_WELCOME_INTERVAL_NS, the rest counted, not answered. */
        while (sent < n_hello * 16) {
                ssize_t k = write(peer, data + sent, n_hello * 16 - sent);

                if (k > 0)
                        sent += (size_t) k;
                dispatch(f->epfd, 0);
                fake_now += NSEC_PER_MSEC;
                assert_true(++iters < 1000000);
        }
        drain(f->epfd);
        st = status_of(f, PID_A);
        assert_int_equal(st.counters.handshakes, n_hello);
        assert_true(st.counters.welcomes_suppressed >= n_hello - 1 - (uint64_t) ((fake_now - t0) / HINT_WELCOME_INTERVAL_NS));
        assert_true(st.counters.welcomes_suppressed < n_hello);
        print_message("HELLO flood: %zu HELLOs in %.3f s fake time, %" PRIu64 " answered, %" PRIu64 " reply bytes\n",
                      n_hello, (fake_now - t0) / 1e9, n_hello - st.counters.welcomes_suppressed,
                      st.io.reply_bytes + st.out_len);

        /* Replies to a guest that never reads (GRANTs every HINT_GRANT_INTERVAL_NS, each
         * different): the kernel buffer fills, then the bounded output buffer; the rest is
         * dropped and counted, the daemon does not grow. */
        for (int i = 0; i < 200000 && status_of(f, PID_A).io.replies_dropped == 0; i++) {
                assert_int_equal(hint_server_set_grant(f->hs, PID_A, 0, (uint32_t) (i % 1000)), 0);
                assert_int_equal(hint_server_set_grant(f->hs, PID_A, 1, (uint32_t) (i % 1000 + 1)), 0);
                fake_now += HINT_GRANT_INTERVAL_NS;
                hint_server_send_grants(f->hs, fake_now);
                n_grants += 2;
                dispatch(f->epfd, 0);
        }
        st = status_of(f, PID_A);
        assert_true(st.io.replies_dropped > 0);
        assert_int_equal(st.out_max, HINT_OUT_BYTES(2));
        assert_true(st.out_len <= st.out_max);
        assert_true(st.out_len > 0);
        assert_true(st.io.grants_sent > 0 && st.io.grants_sent <= n_grants);
        assert_true(st.io.reply_bytes < 4 << 20); /* what the kernel buffered */
        print_message("never-reading peer: %zu GRANTs due, %" PRIu64 " queued, %" PRIu64 " bytes written, %zu in "
                      "the buffer, %" PRIu64 " dropped\n", n_grants, st.io.grants_sent, st.io.reply_bytes,
                      st.out_len, st.io.replies_dropped);

        /* The guest starts reading: the queue drains through EPOLLOUT. */
        for (int i = 0; i < 10000; i++) {
                ssize_t k = read(peer, buf, sizeof(buf));

                if (k > 0)
                        got += (size_t) k;
                dispatch(f->epfd, 0);
                if (status_of(f, PID_A).out_len == 0 && k <= 0)
                        break;
        }
        st = status_of(f, PID_A);
        assert_int_equal(st.out_len, 0);
        assert_int_equal(got, st.io.reply_bytes);
        close(peer);
        free(data);
}

/* GRANT: sent on change, after the handshake, at most every HINT_GRANT_INTERVAL_NS, all
 * again after a new handshake; LIMIT: with the WELCOME and when the policy changes them. */
static void test_grant_and_limit(void **state)
{
        struct fixture *f = *state;
        struct hint_policy p;
        char buf[4096];
        int peer;

        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        assert_int_equal(hint_server_set_grant(f->hs, PID_A, 0, 700), 0);
        assert_int_equal(hint_server_set_grant(f->hs, PID_A, 2, 700), -ERANGE);
        assert_int_equal(hint_server_set_grant(f->hs, PID_A, 1, 1025), -ERANGE);
        assert_int_equal(hint_server_set_grant(f->hs, PID_B, 0, 1), -ENOENT);
        hint_server_send_grants(f->hs, fake_now); /* not handshaked: nothing */
        assert_int_equal(status_of(f, PID_A).io.grants_sent, 0);

        peer_write(peer, "HELLO 1 vcpus=2\n");
        drain(f->epfd);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_non_null(strstr(buf, "LIMIT 0 0 1024\nLIMIT 1 0 1024\n"));
        hint_server_send_grants(f->hs, fake_now);
        drain(f->epfd);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "GRANT 0 700\n");

        /* unchanged: nothing; changed within the interval: later */
        hint_server_send_grants(f->hs, fake_now + HINT_GRANT_INTERVAL_NS);
        assert_int_equal(status_of(f, PID_A).io.grants_sent, 1);
        assert_int_equal(hint_server_set_grant(f->hs, PID_A, 0, 500), 0);
        assert_int_equal(hint_server_set_grant(f->hs, PID_A, 1, 1024), 0);
        hint_server_send_grants(f->hs, fake_now + HINT_GRANT_INTERVAL_NS / 2);
        assert_int_equal(status_of(f, PID_A).io.grants_sent, 1);
        fake_now += HINT_GRANT_INTERVAL_NS;
        hint_server_send_grants(f->hs, fake_now);
        drain(f->epfd);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "GRANT 0 500\nGRANT 1 1024\n");

        /* a restarted agent on the same connection: its HELLO is answered (WELCOME, LIMITs)
         * and every GRANT is sent again; a HELLO that is not answered changes nothing */
        fake_now += HINT_WELCOME_INTERVAL_NS;
        peer_write(peer, "HELLO 1 vcpus=2\n");
        drain(f->epfd);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_non_null(strstr(buf, "WELCOME 1 "));
        peer_write(peer, "HELLO 1 vcpus=2\n"); /* within the WELCOME interval: not answered */
        drain(f->epfd);
        assert_int_equal(status_of(f, PID_A).counters.welcomes_suppressed, 1);
        fake_now += HINT_GRANT_INTERVAL_NS;
        hint_server_send_grants(f->hs, fake_now);
        drain(f->epfd);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "GRANT 0 500\nGRANT 1 1024\n");
        assert_int_equal(status_of(f, PID_A).io.grants_sent, 5);

        /* a policy change that moves the LIMITs is sent at once */
        hint_policy_init(&p);
        p.max_level = 640;
        assert_int_equal(hint_server_set_vm_policy(f->hs, PID_A, &p, fake_now), 0);
        drain(f->epfd);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "LIMIT 0 0 640\nLIMIT 1 0 640\n");
        assert_int_equal(hint_server_set_vm_policy(f->hs, PID_A, &p, fake_now), 0); /* the same: nothing */
        assert_int_equal(status_of(f, PID_A).io.limits_sent, 2);

        /* a silent guest goes stale; its next HELLO is a new handshake: every GRANT again */
        fake_now += HINT_STALE_NS;
        update_a(f, 2);
        assert_false(status_of(f, PID_A).handshaked);
        assert_true(status_of(f, PID_A).stale);
        assert_int_equal(status_of(f, PID_A).counters.stale, 1);
        peer_write(peer, "HELLO 1 vcpus=2\n");
        drain(f->epfd);
        assert_true(status_of(f, PID_A).handshaked);
        assert_false(status_of(f, PID_A).stale);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0); /* WELCOME + LIMITs */
        hint_server_send_grants(f->hs, fake_now);
        drain(f->epfd);
        assert_true(peer_read(peer, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "GRANT 0 500\nGRANT 1 1024\n");
        close(peer);
}

/* The host-wide read budget bounds many channels together; a channel's small free allowance
 * still gets through when a flood has used the budget up. */
static void test_host_read_budget(void **state)
{
        struct fixture *f = *state;
        const size_t chunk = 64 * 1024;
        char *data = malloc(chunk);
        struct vm_info vms[2];
        int peer, peer_b;
        uint64_t a_bytes;

        assert_non_null(data);
        for (size_t i = 0; i < chunk; i += 16)
                memcpy(data + i, "HELLO 1 vcpus=2\n", 16);
        hint_server_set_host_read_budget(f->hs, 256 * 1024);
        f->lfd_b = listen_by(&f->qemu_b, f->path_b);
        vms[0] = make_vm(PID_A, f->path_a, 2);
        vms[1] = make_vm(PID_B, f->path_b, 1);
        assert_int_equal(hint_server_update_vms(f->hs, vms, 2, fake_now), 0);
        peer = accept_peer(f->lfd_a);
        peer_b = accept_peer(f->lfd_b);
        assert_int_equal(fcntl(peer, F_SETFL, O_NONBLOCK), 0);
        /* A floods (fixed clock: no refill) far past the host budget */
        for (int i = 0; i < 2000; i++) {
                (void) write(peer, data, chunk);
                dispatch(f->epfd, 0);
        }
        a_bytes = status_of(f, PID_A).counters.bytes;
        assert_true(a_bytes <= 256 * 1024 + HINT_READ_FREE_BYTES);
        assert_true(a_bytes >= 256 * 1024);
        assert_true(status_of(f, PID_A).io.host_throttles > 0);
        /* B, well-behaved, is still read: its free allowance */
        peer_write(peer_b, "HELLO 1 vcpus=1\nLEVEL 0 300\n");
        drain(f->epfd);
        assert_true(status_of(f, PID_B).handshaked);
        print_message("host budget 256 KiB/s: flooding channel read %" PRIu64 " bytes, %" PRIu64
                      " host throttles; the other channel read %" PRIu64 " bytes\n", a_bytes,
                      status_of(f, PID_A).io.host_throttles, status_of(f, PID_B).counters.bytes);
        /* A period later the budget is back */
        fake_now += NSEC_PER_SEC;
        assert_int_equal(hint_server_update_vms(f->hs, vms, 2, fake_now), 0);
        drain(f->epfd);
        assert_true(status_of(f, PID_A).counters.bytes > a_bytes);
        close(peer);
        close(peer_b);
        free(data);
}

/*
 * A throttled channel whose QEMU goes away (the VM died after flooding past
 * its read budget): EPOLLIN is off while throttled, but epoll reports the
 * hang-up anyway, level-triggered.  The channel must be closed at once, not
 * make every epoll_wait() return at once until the next refill.  Both budgets:
 * the VM's own, then the host-wide one.
 */
static void test_throttled_hangup_closes(void **state)
{
        struct fixture *f = *state;
        static char junk[1 << 16];
        struct hint_vm_status st;

        memset(junk, '\n', sizeof(junk)); /* empty lines: valid, ignored */
        for (int mode = 0; mode < 2; mode++) {
                int peer, wakeups = 0;

                if (mode == 1) {
                        hint_server_set_host_read_budget(f->hs, 64 * 1024);
                        fake_now += 2 * NSEC_PER_SEC; /* past the reconnect backoff */
                }
                update_a(f, 2);
                peer = accept_peer(f->lfd_a);
                for (int i = 0; i < 100000; i++) {
                        ssize_t k = write(peer, junk, sizeof(junk));

                        dispatch(f->epfd, 0);
                        st = status_of(f, PID_A);
                        if ((mode == 0 ? st.io.read_throttles : st.io.host_throttles) > 0 && k < 0)
                                break;
                }
                st = status_of(f, PID_A);
                assert_true(st.connected);
                assert_true((mode == 0 ? st.io.read_throttles : st.io.host_throttles) > 0);
                assert_int_equal(st.io.disconnects, (uint64_t) mode);

                close(peer); /* the VM dies */
                for (int i = 0; i < 1000; i++)
                        if (dispatch(f->epfd, 0) > 0)
                                wakeups++;
                st = status_of(f, PID_A);
                print_message("%s budget used up, then hang-up: %d wake-ups in 1000 epoll_wait(0), connected %d, "
                              "%" PRIu64 " read throttles, %" PRIu64 " host throttles\n", mode == 0 ? "VM" : "host",
                              wakeups, st.connected, st.io.read_throttles, st.io.host_throttles);
                assert_false(st.connected);
                assert_int_equal(st.io.disconnects, (uint64_t) mode + 1);
                assert_true(wakeups <= 1);
                assert_int_equal(st.next_connect_ns, fake_now + (NSEC_PER_SEC << mode));
        }
        /* and the VM comes back: connected and read as before */
        fake_now += 4 * NSEC_PER_SEC;
        update_a(f, 2);
        assert_true(status_of(f, PID_A).connected);
}

/* Read what the server sent to peer until it has nothing more (the server is dispatched meanwhile). */
static size_t read_all(struct fixture *f, int peer, char *buf, size_t size)
{
        size_t len = 0;
        int idle = 0;

        while (idle < 3 && len < size - 1) {
                ssize_t k = read(peer, buf + len, size - 1 - len);

                if (k > 0) {
                        len += (size_t) k;
                        idle = 0;
                        continue;
                }
                idle = dispatch(f->epfd, 10) > 0 ? 0 : idle + 1;
        }
        buf[len] = '\0';
        return len;
}

static int count_lines(const char *buf, const char *prefix)
{
        int n = 0;
        size_t plen = strlen(prefix);

        for (const char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, prefix, plen) == 0)
                        n++;
        return n;
}

/*
 * A VM with more vCPUs than a fixed reply buffer holds lines for (200: its
 * WELCOME and LIMITs are 3.4 KB): every LIMIT and every GRANT arrives, and a
 * GRANT is counted sent per line queued, so when the guest stops reading the
 * lines that did not fit come later, each vCPU's last value arrives, and
 * nothing is sent twice.
 */
static void test_many_vcpus_replies(void **state)
{
        struct fixture *f = *state;
        const uint32_t n = 200;
        static char buf[1 << 20];
        static uint32_t want[200], last[200];
        struct hint_vm_status st;
        int peer, rounds = 0;
        uint64_t grant_lines = 0;

        update_a(f, n);
        peer = accept_peer(f->lfd_a);
        peer_write(peer, "HELLO 1 vcpus=200\n");
        read_all(f, peer, buf, sizeof(buf));
        assert_int_equal(count_lines(buf, "WELCOME 1 vcpus=200 "), 1);
        assert_int_equal(count_lines(buf, "LIMIT "), (int) n);
        assert_non_null(strstr(buf, "\nLIMIT 199 0 1024\n"));
        st = status_of(f, PID_A);
        assert_int_equal(st.io.replies_dropped, 0);
        assert_int_equal(st.out_max, HINT_OUT_BYTES(n));

        for (uint32_t v = 0; v < n; v++)
                assert_int_equal(hint_server_set_grant(f->hs, PID_A, v, 1024 - v), 0);
        fake_now += HINT_GRANT_INTERVAL_NS;
        hint_server_send_grants(f->hs, fake_now);
        read_all(f, peer, buf, sizeof(buf));
        assert_int_equal(count_lines(buf, "GRANT "), (int) n);
        assert_non_null(strstr(buf, "\nGRANT 199 825\n"));
        assert_int_equal(status_of(f, PID_A).io.grants_sent, n);
        /* nothing changed: nothing more */
        fake_now += HINT_GRANT_INTERVAL_NS;
        hint_server_send_grants(f->hs, fake_now);
        assert_int_equal(read_all(f, peer, buf, sizeof(buf)), 0);

        /* The guest stops reading while every grant changes each round: the socket and then
         * the buffer fill, lines are dropped and not marked sent. */
        assert_int_equal(fcntl(peer, F_SETFL, O_NONBLOCK), 0);
        while (status_of(f, PID_A).io.replies_dropped == 0) {
                rounds++;
                assert_true(rounds < 100000);
                for (uint32_t v = 0; v < n; v++) {
                        want[v] = (v + (uint32_t) rounds) % 1024;
                        assert_int_equal(hint_server_set_grant(f->hs, PID_A, v, want[v]), 0);
                }
                fake_now += HINT_GRANT_INTERVAL_NS;
                hint_server_send_grants(f->hs, fake_now);
                dispatch(f->epfd, 0);
        }
        /* It reads again: within a few rounds every vCPU's last value arrives. */
        for (uint32_t v = 0; v < n; v++)
                last[v] = UINT32_MAX;
        for (int i = 0; i < 8; i++) {
                size_t len = read_all(f, peer, buf, sizeof(buf));

                for (char *p = buf; p < buf + len;) {
                        char *nl = memchr(p, '\n', (size_t) (buf + len - p));
                        unsigned v, level;

                        assert_non_null(nl);
                        if (sscanf(p, "GRANT %u %u", &v, &level) == 2) {
                                assert_true(v < n);
                                last[v] = level;
                                grant_lines++;
                        }
                        p = nl + 1;
                }
                fake_now += HINT_GRANT_INTERVAL_NS;
                hint_server_send_grants(f->hs, fake_now);
        }
        for (uint32_t v = 0; v < n; v++)
                assert_int_equal(last[v], want[v]);
        st = status_of(f, PID_A);
        /* every GRANT counted as sent was on the wire (the first 200 read above) */
        assert_int_equal(st.out_len, 0);
        assert_int_equal(st.io.grants_sent, n + grant_lines);
        print_message("200 vCPUs: WELCOME + 200 LIMITs, 200 GRANTs; guest not reading for %d rounds: %" PRIu64
                      " lines dropped, then %" PRIu64 " GRANTs read, all last values\n", rounds,
                      st.io.replies_dropped, grant_lines);
        close(peer);
}

/* Accept the pending connections on lfd, as QEMU does one at a time: the first that is not closed already. */
static int accept_live(int lfd)
{
        for (int i = 0; i < 16; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                char c;

                if (fd < 0)
                        return -1;
                if (recv(fd, &c, 1, MSG_PEEK) < 0 && errno == EAGAIN)
                        return fd;
                close(fd); /* closed by the server: EOF */
        }
        return -1;
}

/*
 * Two VMs name the same hint socket (two QEMUs started with one -name under a
 * [QEMU] HintSocket pattern: the second took the path).  The guest behind the
 * socket must reach the VM whose QEMU listens on it and no other: the other
 * VM's connection is refused by SO_PEERCRED, and no two VMs' channels are
 * connected to one path.  libvirt's sockets are listened on by libvirt, not
 * QEMU: no peer check there, only the one-channel-per-path rule.
 */
static void test_shared_hint_socket(void **state)
{
        struct fixture *f = *state;
        struct hint_effective e[2];
        struct hint_vm_status sa, sb;
        struct vm_info vms[2];
        int peer;

        /* QEMU of VM B listens on the path both VMs name */
        close(f->lfd_a);
        f->lfd_a = listen_by(&f->qemu_b, f->path_a);
        vms[0] = make_vm(PID_A, f->path_a, 2);
        vms[1] = make_vm(PID_B, f->path_a, 2);
        assert_int_equal(hint_server_update_vms(f->hs, vms, 2, fake_now), 0);
        sa = status_of(f, PID_A);
        sb = status_of(f, PID_B);
        assert_false(sa.connected);
        assert_true(sb.connected);
        /* A either connected and was refused (SO_PEERCRED is B), or found B's channel there */
        assert_int_equal(sa.io.peer_mismatches + sa.io.path_conflicts, 1);
        assert_int_equal(sa.io.connect_failures, 1);
        assert_int_equal(sa.io.connects, 0);
        assert_int_equal(sb.io.peer_mismatches + sb.io.path_conflicts, 0);
        peer = accept_live(f->lfd_a);
        assert_true(peer >= 0);
        peer_write(peer, "HELLO 1 vcpus=2\nLEVEL 0 900\n");
        drain(f->epfd);
        assert_true(status_of(f, PID_B).handshaked);
        assert_false(status_of(f, PID_A).handshaked);
        assert_int_equal(hint_server_vm_state(f->hs, PID_B, fake_now, e, 2), 2);
        assert_int_equal(e[0].level, 900);
        assert_int_equal(hint_server_vm_state(f->hs, PID_A, fake_now, e, 2), 2);
        assert_int_equal(e[0].level, 0);

        /* B goes; A's next attempts still find B's QEMU there: refused each time, counted */
        fake_now += 2 * NSEC_PER_SEC;
        assert_int_equal(hint_server_update_vms(f->hs, vms, 1, fake_now), 0);
        sa = status_of(f, PID_A);
        assert_false(sa.connected);
        assert_int_equal(sa.io.peer_mismatches, 1 + (sa.io.path_conflicts == 0));
        assert_int_equal(sa.io.connect_failures, 2);
        close(peer);

        /* libvirt channels (libvirt listens, here "pid A"): not checked, but one VM per path */
        assert_int_equal(hint_server_update_vms(f->hs, NULL, 0, fake_now), 0);
        close(f->lfd_a);
        f->lfd_a = listen_by(&f->qemu_a, f->path_a);
        vms[0].sources = vms[1].sources = VM_SOURCE_LIBVIRT;
        vms[1].pid = PID_B;
        assert_int_equal(hint_server_update_vms(f->hs, vms, 2, fake_now), 0);
        sa = status_of(f, PID_A);
        sb = status_of(f, PID_B);
        assert_true(sa.connected != sb.connected);
        assert_int_equal(sa.io.peer_mismatches + sb.io.peer_mismatches, 0);
        assert_int_equal(sa.io.path_conflicts + sb.io.path_conflicts, 1);
        /* the holder goes: the other VM connects at its next attempt */
        fake_now += 2 * NSEC_PER_SEC;
        assert_int_equal(hint_server_update_vms(f->hs, sa.connected ? &vms[1] : &vms[0], 1, fake_now), 0);
        assert_int_equal(hint_server_n_vms(f->hs), 1);
        assert_true(status_of(f, sa.connected ? PID_B : PID_A).connected);
}

static void test_ignored_vms(void **state)
{
        struct fixture *f = *state;
        struct vm_info vms[3];

        vms[0] = make_vm(PID_A, "", 2);            /* no channel */
        vms[1] = make_vm(PID_B, f->path_b, 0);      /* vCPU count unknown */
        vms[2] = make_vm(PID_A + 1, f->path_b, 1);  /* no listener: connect fails, kept */
        assert_int_equal(hint_server_update_vms(f->hs, vms, 3, fake_now), 0);
        assert_int_equal(hint_server_n_vms(f->hs), 1);
        assert_int_equal(status_of(f, PID_A + 1).io.connect_failures, 1);
        assert_false(status_of(f, PID_A + 1).connected);
}

static void test_full_trust_actuates(void **state)
{
        struct fixture *f = *state;
        struct hint_vm_status st;
        struct hint_policy p;
        int peer;

        update_a(f, 2);
        peer = accept_peer(f->lfd_a);
        peer_write(peer, "HELLO 1 vcpus=2\nLEVEL 0 900\nLEVEL 0 900\nUTIL 0 5\nFASTER 1 10\n");
        drain(f->epfd);
        st = status_of(f, PID_A);
        assert_int_equal(st.counters.actuations, 2); /* the repeated LEVEL and UTIL are free */
        assert_int_equal(f->actuate_sum, 2);
        assert_int_equal(f->actuate_calls, 1);

        /* Per-VM override: trust none rejects. */
        hint_policy_init(&p);
        p.trust = HINT_TRUST_NONE;
        assert_int_equal(hint_server_set_vm_policy(f->hs, PID_A, &p, fake_now), 0);
        peer_write(peer, "LEVEL 0 100\n");
        drain(f->epfd);
        assert_int_equal(status_of(f, PID_A).counters.rejected[HINT_REJECT_TRUST], 1);
        assert_int_equal(hint_server_set_vm_policy(f->hs, PID_B, &p, fake_now), -ENOENT);
        /* Back to the defaults (full). */
        assert_int_equal(hint_server_set_vm_policy(f->hs, PID_A, NULL, fake_now), 0);
        assert_int_equal(status_of(f, PID_A).policy.trust, HINT_TRUST_FULL);
        close(peer);
}

/* ---- libvirt: the channel path from the domain XML ---- */

static char *read_data(const char *name, size_t *len)
{
        char path[512];
        FILE *fp;
        char *buf = malloc(1 << 20);

        snprintf(path, sizeof(path), "%s/libvirt/%s", TEST_DATA_DIR, name);
        fp = fopen(path, "re");
        assert_non_null(fp);
        assert_non_null(buf);
        *len = fread(buf, 1, (1 << 20) - 1, fp);
        buf[*len] = '\0';
        fclose(fp);
        return buf;
}

static void test_libvirt_hint_channel(void **state)
{
        char path[108];
        size_t len;
        char *xml = read_data("real-9.0-tcg-2vcpu-live-channel.xml", &len);

        assert_int_equal(libvirt_parse_hint_channel(xml, len, path, sizeof(path)), 0);
        assert_string_equal(path, "/var/lib/libvirt/qemu/channel/target/domain-22-vmmp-ghrec/org.vmmpower.hint.0");
        assert_int_equal(libvirt_parse_hint_channel(xml, len, path, 40), -ENAMETOOLONG);
        free(xml);

        /* A status XML (<domstatus><domain>) without a hint channel. */
        xml = read_data("real-9.0-tcg-2vcpu-paused.xml", &len);
        assert_int_equal(libvirt_parse_hint_channel(xml, len, path, sizeof(path)), -ENOENT);
        free(xml);

#define DOM(devs) "<domain type='qemu'><name>x</name><devices>" devs "</devices></domain>"
        static const struct {
                const char *xml;
                int r;
                const char *path;
        } cases[] = {
                { DOM("<channel type='unix'><source mode='bind' path='/a/guest.agent'/>"
                      "<target type='virtio' name='org.qemu.guest_agent.0'/></channel>"
                      "<channel type='pty'><source path='/dev/pts/1'/>"
                      "<target type='virtio' name='org.vmmpower.hint.0'/></channel>"
                      "<channel type='unix'><source mode='bind' path='/b/hint'/>"
                      "<target type='virtio' name='org.vmmpower.hint.0'/></channel>"),
                  0, "/b/hint" },
                { DOM("<channel type='unix'><target type='virtio' name='org.vmmpower.hint.0'/></channel>"),
                  -ENODATA, NULL },
                { DOM("<channel type='unix'><source mode='connect' path='/c'/>"
                      "<target type='virtio' name='org.vmmpower.hint.0'/></channel>"),
                  -ENODATA, NULL },
                { DOM("<channel type='unix'><source mode='bind' path='rel/x'/>"
                      "<target type='virtio' name='org.vmmpower.hint.0'/></channel>"),
                  -EBADMSG, NULL },
                { DOM("<channel type='unix'><source mode='bind' path='/x&#10;y'/>"
                      "<target type='virtio' name='org.vmmpower.hint.0'/></channel>"),
                  -EBADMSG, NULL },
                { DOM("<channel type='unix'><source mode='bind' path='/x'/>"
                      "<target type='guestfwd' name='org.vmmpower.hint.0'/></channel>"),
                  -ENOENT, NULL },
                { DOM(""), -ENOENT, NULL },
                { "<domain><devices>", -EBADMSG, NULL },
                { "<other/>", -EBADMSG, NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                strcpy(path, "unchanged");
                assert_int_equal(libvirt_parse_hint_channel(cases[i].xml, strlen(cases[i].xml), path,
                                                            sizeof(path)),
                                 cases[i].r);
                assert_string_equal(path, cases[i].path ? cases[i].path : "unchanged");
        }
}

/* The tracker's merge carries the channel path from the source that knows it (libvirt). */
static void test_tracker_carries_hint_socket(void **state)
{
        static const struct vcpu_info v[] = { { 0, 101 }, { 1, 102 } };
        struct vm_info lib = { .pid = 100, .libvirt_id = 3, .n_vcpus = 2, .vcpus = (struct vcpu_info *) v,
                               .sources = VM_SOURCE_LIBVIRT, .name = "web" };
        struct vm_info proc = { .pid = 100, .libvirt_id = -1, .n_vcpus = 1, .vcpus = (struct vcpu_info *) v,
                                .sources = VM_SOURCE_PROC, .name = "qemu-100" };
        struct tracker *tr;
        const struct vm_load *l;

        char root[] = "/tmp/test-guest_hint-proc.XXXXXX", path[256];

        /* a procfs fixture with the two vCPU threads' schedstat */
        assert_non_null(mkdtemp(root));
        for (int i = 0; i < 2; i++) {
                FILE *fp;

                snprintf(path, sizeof(path), "%s/100", root);
                (void) mkdir(path, 0755);
                snprintf(path, sizeof(path), "%s/100/task", root);
                (void) mkdir(path, 0755);
                snprintf(path, sizeof(path), "%s/100/task/%d", root, (int) v[i].tid);
                assert_int_equal(mkdir(path, 0755), 0);
                snprintf(path, sizeof(path), "%s/100/task/%d/schedstat", root, (int) v[i].tid);
                fp = fopen(path, "we");
                assert_non_null(fp);
                fputs("0 0 0\n", fp);
                fclose(fp);
        }
        strcpy(lib.hint_socket, "/var/lib/libvirt/qemu/channel/target/domain-3-web/org.vmmpower.hint.0");
        assert_int_equal(tracker_new(root, NSEC_PER_SEC, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &proc, 1, 0), 0);
        l = tracker_find_vm(tr, 100);
        assert_non_null(l);
        assert_string_equal(l->info.hint_socket, "");
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, NSEC_PER_SEC), 0);
        l = tracker_find_vm(tr, 100);
        assert_non_null(l);
        assert_string_equal(l->info.hint_socket, lib.hint_socket);
        assert_int_equal(l->info.n_vcpus, 2);
        tracker_free(tr);
        for (int i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "%s/100/task/%d/schedstat", root, (int) v[i].tid);
                (void) unlink(path);
                snprintf(path, sizeof(path), "%s/100/task/%d", root, (int) v[i].tid);
                (void) rmdir(path);
        }
        snprintf(path, sizeof(path), "%s/100/task", root);
        (void) rmdir(path);
        snprintf(path, sizeof(path), "%s/100", root);
        (void) rmdir(path);
        (void) rmdir(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_handshake_and_hints, setup, teardown),
                cmocka_unit_test_setup_teardown(test_garbage_resync, setup, teardown),
                cmocka_unit_test_setup_teardown(test_vcpu_bound, setup, teardown),
                cmocka_unit_test_setup_teardown(test_disconnect_midline_reconnect, setup, teardown),
                cmocka_unit_test_setup_teardown(test_peer_gone_backoff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_flood_bounded_and_rate_limited, setup_full, teardown),
                cmocka_unit_test_setup_teardown(test_read_budget, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_budget_running_clock, setup, teardown),
                cmocka_unit_test_setup_teardown(test_peer_never_reads, setup, teardown),
                cmocka_unit_test_setup_teardown(test_grant_and_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_host_read_budget, setup, teardown),
                cmocka_unit_test_setup_teardown(test_throttled_hangup_closes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_vcpus_replies, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shared_hint_socket, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ignored_vms, setup, teardown),
                cmocka_unit_test_setup_teardown(test_full_trust_actuates, setup_full, teardown),
                cmocka_unit_test(test_libvirt_hint_channel),
                cmocka_unit_test(test_tracker_carries_hint_socket),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
