/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * QMP client: reply parsers on recorded QEMU 7.2 replies (tests/data/qmp),
 * malformed replies, a scripted fake QMP server (events, oversize, silence)
 * and a real paused TCG QEMU (qemu-system-x86_64 -S, 2 vCPUs).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "qmp.h"
#include "qmp_worker.h"
#include "util.h"

static char *load(const char *name)
{
        char path[512];
        static char buf[QMP_REPLY_MAX];
        ssize_t n;

        assert_true(path_printf(path, sizeof(path), "%s/qmp/%s", TEST_DATA_DIR, name) > 0);
        n = read_small_file(path, buf, sizeof(buf));
        assert_true(n > 0);
        return strdup(buf);
}

/* ---- parsers on recordings ---------------------------------------------- */

static void test_cpus_fast_recorded(void **state)
{
        const char *files[] = { "query-cpus-fast-tcg-2.json", "query-cpus-fast-kvm-2.json" };
        const pid_t tids[][2] = { { 2223, 2224 }, { 1665, 1666 } };

        for (size_t f = 0; f < ELEMENTSOF(files); f++) {
                _cleanup_free_ char *j = load(files[f]);
                struct vm_info vm = { .libvirt_id = -1 };

                assert_int_equal(qmp_parse_cpus_fast(j, &vm), 0);
                assert_int_equal(vm.n_vcpus, 2);
                for (unsigned i = 0; i < 2; i++) {
                        assert_int_equal(vm.vcpus[i].index, (int) i);
                        assert_int_equal(vm.vcpus[i].tid, tids[f][i]);
                }
                vm_info_done(&vm);
        }
}

static void test_cpus_fast_sorted(void **state)
{
        struct vm_info vm = {};

        assert_int_equal(qmp_parse_cpus_fast(
                "{\"return\": [{\"cpu-index\": 2, \"thread-id\": 30}, {\"cpu-index\": 0, \"thread-id\": 10},"
                " {\"cpu-index\": 1, \"thread-id\": 20}]}", &vm), 0);
        assert_int_equal(vm.n_vcpus, 3);
        for (unsigned i = 0; i < 3; i++) {
                assert_int_equal(vm.vcpus[i].index, (int) i);
                assert_int_equal(vm.vcpus[i].tid, 10 * (i + 1));
        }
        vm_info_done(&vm);

        assert_int_equal(qmp_parse_cpus_fast("{\"return\": []}", &vm), 0);
        assert_int_equal(vm.n_vcpus, 0);
        assert_null(vm.vcpus);
}

static void test_name_kvm_recorded(void **state)
{
        _cleanup_free_ char *n1 = load("query-name-tcg.json"), *n2 = load("query-name-kvm.json"),
                            *k1 = load("query-kvm-disabled.json"), *k2 = load("query-kvm-enabled.json");
        char name[VM_NAME_MAX] = "unchanged";
        enum vm_accel a = VM_ACCEL_UNKNOWN;

        assert_int_equal(qmp_parse_query_name(n1, name, sizeof(name)), 0);
        assert_string_equal(name, "t");
        assert_int_equal(qmp_parse_query_name(n2, name, sizeof(name)), 0);
        assert_string_equal(name, "k");
        assert_int_equal(qmp_parse_query_name("{\"return\": {}}", name, sizeof(name)), 0);
        assert_string_equal(name, "");
        assert_int_equal(qmp_parse_query_name("{\"return\": {\"name\": \"abcdef\"}}", name, 4), -ENOBUFS);
        assert_int_equal(qmp_parse_query_name("{\"return\": {\"name\": \"a\\u0000b\"}}", name, sizeof(name)), -EBADMSG);
        assert_int_equal(qmp_parse_query_name("{\"return\": {\"name\": 5}}", name, sizeof(name)), -EBADMSG);
        assert_string_equal(name, "");

        assert_int_equal(qmp_parse_query_kvm(k1, &a), 0);
        assert_int_equal(a, VM_ACCEL_TCG);
        assert_int_equal(qmp_parse_query_kvm(k2, &a), 0);
        assert_int_equal(a, VM_ACCEL_KVM);
        assert_int_equal(qmp_parse_query_kvm("{\"return\": {\"enabled\": 1, \"present\": true}}", &a), -EBADMSG);
        assert_int_equal(qmp_parse_query_kvm("{\"return\": {\"present\": true}}", &a), -EBADMSG);
        assert_int_equal(a, VM_ACCEL_KVM);
}

static void test_error_reply(void **state)
{
        _cleanup_free_ char *e = load("error-command-not-found.json");
        struct vm_info vm = {};
        char name[16];
        enum vm_accel a;
        uint64_t hp[4];

        assert_int_equal(qmp_parse_cpus_fast(e, &vm), -EREMOTEIO);
        assert_int_equal(qmp_parse_query_name(e, name, sizeof(name)), -EREMOTEIO);
        assert_int_equal(qmp_parse_query_kvm(e, &a), -EREMOTEIO);
        assert_int_equal(qmp_parse_halt_poll(e, "{\"return\": []}", hp, 4), -EREMOTEIO);
}

static void test_halt_poll_recorded(void **state)
{
        _cleanup_free_ char *cpus = load("query-cpus-fast-kvm-2.json"), *names = load("query-stats-kvm-names.json"),
                            *all = load("query-stats-kvm-all.json"), *nz = load("query-stats-kvm-all-nonzero.json"),
                            *tcg = load("query-stats-tcg-empty.json");
        uint64_t hp[4] = { 7, 7, 7, 7 };

        assert_int_equal(qmp_parse_halt_poll(names, cpus, hp, 4), 2);
        assert_true(hp[0] == 0 && hp[1] == 0 && hp[2] == 7 && hp[3] == 7);
        hp[0] = hp[1] = 7;
        assert_int_equal(qmp_parse_halt_poll(all, cpus, hp, 4), 2);
        assert_true(hp[0] == 0 && hp[1] == 0);

        /* device[0] is cpu-index 0, device[2] is cpu-index 1 */
        assert_int_equal(qmp_parse_halt_poll(nz, cpus, hp, 4), 2);
        assert_true(hp[0] == 1200000 + 34000);
        assert_true(hp[1] == 18446744073709551000ULL);

        /* n_max bounds the writes, the count still says how many had stats */
        hp[0] = hp[1] = 7;
        assert_int_equal(qmp_parse_halt_poll(nz, cpus, hp, 1), 2);
        assert_true(hp[0] == 1234000 && hp[1] == 7);

        hp[0] = 7;
        assert_int_equal(qmp_parse_halt_poll(tcg, cpus, hp, 4), 0);
        assert_true(hp[0] == 7);

        /* a stats entry for a qom-path query-cpus-fast does not know is ignored */
        assert_int_equal(qmp_parse_halt_poll(nz, "{\"return\": []}", hp, 4), 0);
}

/*
 * A vCPU whose kvm stats entry has no halt_poll_* values (an empty list, or
 * other stats only) has no stats: its entry is left as it was (qmp.h), not
 * set to 0, and it is not counted.
 */
static void test_halt_poll_entry_without_values(void **state)
{
        _cleanup_free_ char *cpus = load("query-cpus-fast-kvm-2.json");
        const char *empty = "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\","
                            " \"stats\": []}, {\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[2]\","
                            " \"stats\": [{\"name\": \"halt_poll_fail_ns\", \"value\": 5},"
                            " {\"name\": \"halt_poll_success_ns\", \"value\": 6}]}]}";
        const char *other = "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[2]\","
                            " \"stats\": [{\"name\": \"exits\", \"value\": 5}]}]}";
        uint64_t hp[2] = { UINT64_MAX, UINT64_MAX };

        assert_int_equal(qmp_parse_halt_poll(empty, cpus, hp, 2), 1);
        assert_true(hp[0] == UINT64_MAX); /* cpu-index 0: no values, untouched */
        assert_true(hp[1] == 11);
        hp[1] = 7;
        assert_int_equal(qmp_parse_halt_poll(other, cpus, hp, 2), 0);
        assert_true(hp[0] == UINT64_MAX && hp[1] == 7);
}

static void test_halt_poll_malformed(void **state)
{
        _cleanup_free_ char *cpus = load("query-cpus-fast-kvm-2.json");
        uint64_t hp[2] = { 7, 7 };
        const char *bad[] = {
                "{\"return\": {}}",
                "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\", \"stats\": 5}]}",
                "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\","
                " \"stats\": [{\"name\": \"halt_poll_success_ns\", \"value\": -1}]}]}",
                "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\","
                " \"stats\": [{\"name\": \"halt_poll_success_ns\", \"value\": [1, 2]}]}]}",
                "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\","
                " \"stats\": [{\"name\": \"halt_poll_success_ns\", \"value\": 1.5}]}]}",
                /* sum overflows uint64 */
                "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\","
                " \"stats\": [{\"name\": \"halt_poll_success_ns\", \"value\": 18446744073709551615},"
                " {\"name\": \"halt_poll_fail_ns\", \"value\": 1}]}]}",
                /* same vCPU twice */
                "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\", \"stats\": []},"
                " {\"provider\": \"kvm\", \"qom-path\": \"/machine/unattached/device[0]\", \"stats\": []}]}",
                "{\"return\": [{\"provider\": \"kvm\", \"stats\": []}]}",
                "{\"return\": [{\"provider\": 1, \"qom-path\": \"x\", \"stats\": []}]}",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(qmp_parse_halt_poll(bad[i], cpus, hp, 2), -EBADMSG);
                assert_true(hp[0] == 7 && hp[1] == 7);
        }
}

/* ---- malformed cpus-fast ------------------------------------------------ */

static void test_cpus_fast_malformed(void **state)
{
        _cleanup_free_ char *rec = load("query-cpus-fast-tcg-2.json");
        struct vm_info vm = { .n_vcpus = 0 };
        const char *bad[] = {
                "",
                "   ",
                "[]",
                "42",
                "{\"return\": {}}",
                "{\"return\": [1]}",
                "{\"return\": [{\"cpu-index\": \"0\", \"thread-id\": 10}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": \"10\"}]}",
                "{\"return\": [{\"cpu-index\": 0}]}",
                "{\"return\": [{\"thread-id\": 10}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": -10}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 0}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 4194305}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 99999999999999999999999}]}",
                "{\"return\": [{\"cpu-index\": -1, \"thread-id\": 10}]}",
                "{\"return\": [{\"cpu-index\": 1024, \"thread-id\": 10}]}",
                "{\"return\": [{\"cpu-index\": 0.0, \"thread-id\": 10}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10}, {\"cpu-index\": 0, \"thread-id\": 11}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10}, {\"cpu-index\": 1, \"thread-id\": 10}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10, \"qom-path\": 3}]}",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10}]} x",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10}]}{}",
                "{\"nothing\": []}",
        };
        struct strbuf sb;
        size_t half;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(qmp_parse_cpus_fast(bad[i], &vm), -EBADMSG);
                assert_int_equal(vm.n_vcpus, 0);
                assert_null(vm.vcpus);
        }

        /* every truncation of a real reply */
        half = strlen(rec);
        for (size_t l = 0; l + 2 < half; l++) {
                char *t = strndup(rec, l);

                assert_int_equal(qmp_parse_cpus_fast(t, &vm), -EBADMSG);
                free(t);
        }

        /* VM_MAX_VCPUS entries are fine, one more is not */
        for (unsigned n = VM_MAX_VCPUS; n <= VM_MAX_VCPUS + 1; n++) {
                strbuf_init(&sb);
                strbuf_puts(&sb, "{\"return\": [");
                for (unsigned i = 0; i < n; i++)
                        strbuf_printf(&sb, "%s{\"cpu-index\": %u, \"thread-id\": %u}", i ? ", " : "",
                                      n == VM_MAX_VCPUS ? i : i % VM_MAX_VCPUS, 1000 + i);
                strbuf_puts(&sb, "]}");
                assert_false(sb.oom);
                if (n == VM_MAX_VCPUS) {
                        assert_int_equal(qmp_parse_cpus_fast(sb.data, &vm), 0);
                        assert_int_equal(vm.n_vcpus, VM_MAX_VCPUS);
                        assert_int_equal(vm.vcpus[VM_MAX_VCPUS - 1].tid, 1000 + VM_MAX_VCPUS - 1);
                        vm_info_done(&vm);
                } else
                        assert_int_equal(qmp_parse_cpus_fast(sb.data, &vm), -EBADMSG);
                strbuf_free(&sb);
        }

        /* nesting bomb */
        strbuf_init(&sb);
        strbuf_puts(&sb, "{\"return\": ");
        for (int i = 0; i < 100000; i++)
                strbuf_puts(&sb, "[");
        assert_int_equal(qmp_parse_cpus_fast(sb.data, &vm), -EBADMSG);
        strbuf_free(&sb);

        /* larger than QMP_REPLY_MAX */
        strbuf_init(&sb);
        strbuf_puts(&sb, "{\"return\": [], \"pad\": \"");
        for (int i = 0; i < QMP_REPLY_MAX / 64 + 1; i++)
                strbuf_puts(&sb, "0123456789012345678901234567890123456789012345678901234567890123");
        strbuf_puts(&sb, "\"}");
        assert_int_equal(qmp_parse_cpus_fast(sb.data, &vm), -EMSGSIZE);
        strbuf_free(&sb);
}

/* ---- scripted fake server ----------------------------------------------- */

struct fake {
        int listen_fd;
        char path[108];
        const char *greeting;       /* NULL: never write anything */
        const char *const *replies; /* one per received line; may contain several messages */
        size_t n_replies;
        bool no_accept;
        pthread_t thread;
};

static void *fake_main(void *p)
{
        struct fake *f = p;
        char buf[4096];
        size_t len = 0, k = 0;
        int fd;

        if (f->no_accept)
                return NULL;
        fd = accept(f->listen_fd, NULL, NULL);
        if (fd < 0)
                return NULL;
        if (!f->greeting) {
                /* hold the connection open, silently, until the client goes away */
                while (read(fd, buf, sizeof(buf)) > 0)
                        ;
                close(fd);
                return NULL;
        }
        (void) !write(fd, f->greeting, strlen(f->greeting));
        for (;;) {
                ssize_t r = read(fd, buf + len, sizeof(buf) - len - 1);
                char *nl;

                if (r <= 0)
                        break;
                len += (size_t) r;
                while ((nl = memchr(buf, '\n', len))) {
                        size_t l = (size_t) (nl - buf) + 1;

                        memmove(buf, buf + l, len - l);
                        len -= l;
                        if (k >= f->n_replies)
                                goto done; /* script exhausted: hang up */
                        {
                                const char *rep = f->replies[k++];
                                size_t off = 0, rl = strlen(rep);

                                while (off < rl) {
                                        ssize_t w = write(fd, rep + off, rl - off);
                                        if (w <= 0)
                                                goto done;
                                        off += (size_t) w;
                                }
                        }
                }
        }
done:
        close(fd);
        return NULL;
}

static void fake_start(struct fake *f)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        snprintf(f->path, sizeof(f->path), "/tmp/vmmpower-test-qmp-%d.sock", (int) getpid());
        unlink(f->path);
        strcpy(sa.sun_path, f->path);
        f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(f->listen_fd >= 0);
        assert_int_equal(bind(f->listen_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(f->listen_fd, 4), 0);
        assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
        pthread_join(f->thread, NULL);
        close(f->listen_fd);
        unlink(f->path);
}

#define GREETING "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 7}}, \"capabilities\": [\"oob\"]}}\r\n"
#define EVENT "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": \"RESUME\"}\r\n"

static void test_fake_events_skipped(void **state)
{
        const char *const replies[] = {
                EVENT "{\"return\": {}}\r\n",
                EVENT EVENT "{\"return\": {\"name\": \"fake\\u001b[31m\"}}\r\n",
                "{\"return\": [{\"cpu-index\": 1, \"thread-id\": 20, \"qom-path\": \"/b\"},"
                " {\"cpu-index\": 0, \"thread-id\": 10, \"qom-path\": \"/a\"}]}\r\n" EVENT,
                EVENT "{\"return\": {\"enabled\": true, \"present\": true}}\n",
        };
        struct fake f = { .greeting = GREETING, .replies = replies, .n_replies = ELEMENTSOF(replies) };
        struct vm_info vm = {};

        fake_start(&f);
        assert_int_equal(qmp_query_vm(f.path, 5 * NSEC_PER_SEC, &vm), 0);
        fake_stop(&f);
        assert_int_equal(vm.pid, getpid()); /* SO_PEERCRED: the fake server is us */
        assert_string_equal(vm.name, "fake\x1b[31m");
        assert_string_equal(vm.qmp_socket, f.path);
        assert_int_equal(vm.accel, VM_ACCEL_KVM);
        assert_int_equal(vm.sources, VM_SOURCE_QMP);
        assert_int_equal(vm.libvirt_id, -1);
        assert_int_equal(vm.n_vcpus, 2);
        assert_int_equal(vm.vcpus[0].tid, 10);
        assert_int_equal(vm.vcpus[1].tid, 20);
        vm_info_done(&vm);
}

static void test_fake_halt_poll(void **state)
{
        const char *const replies[] = {
                "{\"return\": {}}\n",
                "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10, \"qom-path\": \"/a\"},"
                " {\"cpu-index\": 1, \"thread-id\": 20, \"qom-path\": \"/b\"}]}\n",
                EVENT "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/b\", \"stats\": ["
                "{\"name\": \"halt_poll_fail_ns\", \"value\": 5}, {\"name\": \"halt_poll_success_ns\", \"value\": 6}]}]}\n",
        };
        struct fake f = { .greeting = GREETING, .replies = replies, .n_replies = ELEMENTSOF(replies) };
        uint64_t hp[2] = { 99, 99 };

        fake_start(&f);
        assert_int_equal(qmp_query_halt_poll(f.path, 5 * NSEC_PER_SEC, hp, 2), 1);
        fake_stop(&f);
        assert_true(hp[0] == 99 && hp[1] == 11);
}

/*
 * The QMP worker (qmp_worker.h): a batch submitted while a monitor does not
 * answer leaves the caller free at once (submit returns, nothing to take,
 * the worker busy, a second batch refused with -EBUSY); the answer comes when
 * the query ends (here: the listening socket closed, which resets the queued
 * connection), as a failed job; then a batch of a discovery and a halt-poll
 * query answered by fake monitors comes back with both answers.
 */
static struct qmp_job *one_job(enum qmp_job_kind kind, const char *path)
{
        struct qmp_job *j = calloc(1, sizeof(*j));

        assert_non_null(j);
        j->kind = kind;
        j->slot = 7;
        j->pid = 4242;
        snprintf(j->socket, sizeof(j->socket), "%s", path);
        return j;
}

static void test_worker(void **state)
{
        struct qmp_worker *w;
        struct qmp_job *jobs, *got = NULL, *other;
        size_t n = 0;

        (void) state;
        assert_int_equal(qmp_worker_new(&w), 0);
        assert_false(qmp_worker_busy(w));
        {
                struct fake f = { .no_accept = true };

                fake_start(&f);
                jobs = one_job(QMP_JOB_VM, f.path);
                assert_int_equal(qmp_worker_submit(w, jobs, 1, 60 * NSEC_PER_SEC), 0);
                /* the query waits for a greeting that does not come: the caller does not */
                assert_true(qmp_worker_busy(w));
                assert_int_equal(qmp_worker_take(w, &got, &n), 0);
                other = one_job(QMP_JOB_VM, f.path);
                assert_int_equal(qmp_worker_submit(w, other, 1, NSEC_PER_SEC), -EBUSY);
                qmp_jobs_free(other, 1);
                fake_stop(&f); /* closes the listening socket: the queued connection is reset */
                assert_true(qmp_worker_wait(w, 30 * NSEC_PER_SEC));
                assert_int_equal(qmp_worker_take(w, &got, &n), 1);
                assert_int_equal(n, 1);
                assert_true(got[0].result < 0);
                assert_int_equal(got[0].slot, 7);
                qmp_jobs_free(got, n);
                assert_false(qmp_worker_busy(w));
        }
        {
                const char *const replies[] = {
                        "{\"return\": {}}\n",
                        "{\"return\": {\"name\": \"vm1\"}}\n",
                        "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10, \"qom-path\": \"/a\"}]}\n",
                        "{\"return\": {\"enabled\": true, \"present\": true}}\n",
                };
                struct fake f = { .greeting = GREETING, .replies = replies, .n_replies = ELEMENTSOF(replies) };

                fake_start(&f);
                assert_int_equal(qmp_worker_submit(w, one_job(QMP_JOB_VM, f.path), 1, 5 * NSEC_PER_SEC), 0);
                assert_true(qmp_worker_wait(w, 30 * NSEC_PER_SEC));
                fake_stop(&f);
                assert_int_equal(qmp_worker_take(w, &got, &n), 1);
                assert_int_equal(got[0].result, 0);
                assert_string_equal(got[0].vm.name, "vm1");
                assert_int_equal(got[0].vm.n_vcpus, 1);
                qmp_jobs_free(got, n);
        }
        {
                const char *const replies[] = {
                        "{\"return\": {}}\n",
                        "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 10, \"qom-path\": \"/a\"},"
                        " {\"cpu-index\": 1, \"thread-id\": 20, \"qom-path\": \"/b\"}]}\n",
                        "{\"return\": [{\"provider\": \"kvm\", \"qom-path\": \"/b\", \"stats\": ["
                        "{\"name\": \"halt_poll_fail_ns\", \"value\": 5}, {\"name\": \"halt_poll_success_ns\", \"value\": 6}]}]}\n",
                };
                struct fake f = { .greeting = GREETING, .replies = replies, .n_replies = ELEMENTSOF(replies) };

                fake_start(&f);
                assert_int_equal(qmp_worker_submit(w, one_job(QMP_JOB_HALT_POLL, f.path), 1, 5 * NSEC_PER_SEC), 0);
                assert_true(qmp_worker_wait(w, 30 * NSEC_PER_SEC));
                fake_stop(&f);
                assert_int_equal(qmp_worker_take(w, &got, &n), 1);
                assert_int_equal(got[0].result, 1);
                assert_true(got[0].halt_poll_ns[0] == UINT64_MAX && got[0].halt_poll_ns[1] == 11);
                assert_int_equal(got[0].pid, 4242);
                qmp_jobs_free(got, n);
        }
        /* freed with a batch in flight: waits for it, frees it */
        {
                struct fake f = { .no_accept = true };

                fake_start(&f);
                assert_int_equal(qmp_worker_submit(w, one_job(QMP_JOB_VM, f.path), 1, 200 * NSEC_PER_MSEC), 0);
                qmp_worker_free(w);
                fake_stop(&f);
        }
}

static void test_fake_errors(void **state)
{
        struct vm_info vm = {};

        /* error reply to qmp_capabilities */
        {
                const char *const replies[] = { "{\"error\": {\"class\": \"GenericError\", \"desc\": \"no\"}}\n" };
                struct fake f = { .greeting = GREETING, .replies = replies, .n_replies = 1 };

                fake_start(&f);
                assert_int_equal(qmp_query_vm(f.path, 5 * NSEC_PER_SEC, &vm), -EREMOTEIO);
                fake_stop(&f);
        }
        /* not a QMP greeting */
        {
                struct fake f = { .greeting = "{\"hello\": 1}\n" };

                fake_start(&f);
                assert_int_equal(qmp_query_vm(f.path, 5 * NSEC_PER_SEC, &vm), -EPROTO);
                fake_stop(&f);
        }
        /* garbage greeting */
        {
                struct fake f = { .greeting = "SSH-2.0-OpenSSH\r\n" };

                fake_start(&f);
                assert_int_equal(qmp_query_vm(f.path, 5 * NSEC_PER_SEC, &vm), -EBADMSG);
                fake_stop(&f);
        }
        /* the server hangs up after the greeting */
        {
                struct fake f = { .greeting = GREETING };

                fake_start(&f);
                assert_int_equal(qmp_query_vm(f.path, 5 * NSEC_PER_SEC, &vm), -ECONNRESET);
                fake_stop(&f);
        }
        /* no socket */
        assert_int_equal(qmp_query_vm("/nonexistent/qmp.sock", NSEC_PER_SEC, &vm), -ENOENT);
        assert_null(vm.vcpus);
}

static void test_fake_oversize(void **state)
{
        struct strbuf sb;
        struct vm_info vm = {};

        strbuf_init(&sb);
        strbuf_puts(&sb, GREETING "{\"pad\": \"");
        while (sb.len < QMP_REPLY_MAX + 8192)
                strbuf_puts(&sb, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        assert_false(sb.oom);
        {
                const char *const replies[] = { sb.data + strlen(GREETING) };
                struct fake f = { .greeting = GREETING, .replies = replies, .n_replies = 1 };

                fake_start(&f);
                assert_int_equal(qmp_query_vm(f.path, 5 * NSEC_PER_SEC, &vm), -EMSGSIZE);
                /* the fake blocks writing until the client closes; join after */
                fake_stop(&f);
        }
        strbuf_free(&sb);
}

static void test_fake_timeout(void **state)
{
        struct vm_info vm = {};
        nsec_t t0, dt;

        /* accepts and never writes */
        {
                struct fake f = { .greeting = NULL };

                fake_start(&f);
                t0 = now_ns();
                assert_int_equal(qmp_query_vm(f.path, 300 * NSEC_PER_MSEC, &vm), -ETIMEDOUT);
                dt = now_ns() - t0;
                fake_stop(&f);
                print_message("silent server: -ETIMEDOUT after %.1f ms (timeout 300 ms)\n", dt / 1e6);
                assert_true(dt >= 290 * NSEC_PER_MSEC && dt < 1000 * NSEC_PER_MSEC);
        }
        /* listens, never accepts: connect completes through the backlog, the greeting never comes */
        {
                struct fake f = { .no_accept = true };

                fake_start(&f);
                t0 = now_ns();
                assert_int_equal(qmp_query_halt_poll(f.path, 200 * NSEC_PER_MSEC, NULL, 0), -ETIMEDOUT);
                dt = now_ns() - t0;
                fake_stop(&f);
                assert_true(dt >= 190 * NSEC_PER_MSEC && dt < 1000 * NSEC_PER_MSEC);
        }
}

/* ---- real QEMU ---------------------------------------------------------- */

static int cmp_nsec(const void *a, const void *b)
{
        nsec_t x = *(const nsec_t *) a, y = *(const nsec_t *) b;

        return (x > y) - (x < y);
}

static void test_real_qemu(void **state)
{
        char sock[108], arg[160], comm[64], path[128];
        struct vm_info vm = {};
        nsec_t lat[20];
        uint64_t hp[2] = { 5, 5 };
        pid_t qpid;
        int r = -1, status;

        snprintf(sock, sizeof(sock), "/tmp/vmmpower-test-qemu-%d.sock", (int) getpid());
        unlink(sock);
        snprintf(arg, sizeof(arg), "unix:%s,server=on,wait=off", sock);
        qpid = fork();
        assert_true(qpid >= 0);
        if (qpid == 0) {
                int null = open("/dev/null", O_RDWR);

                dup2(null, STDIN_FILENO);
                dup2(null, STDOUT_FILENO);
                execlp("qemu-system-x86_64", "qemu-system-x86_64", "-accel", "tcg", "-name", "vmmpower-t,debug-threads=on",
                       "-smp", "2", "-m", "64", "-nographic", "-nodefaults", "-display", "none", "-S",
                       "-qmp", arg, (char *) NULL);
                _exit(127);
        }

        /* wait up to 20 s for the socket */
        for (int i = 0; i < 400; i++) {
                r = qmp_query_vm(sock, 2 * NSEC_PER_SEC, &vm);
                if (r == 0)
                        break;
                if (waitpid(qpid, &status, WNOHANG) == qpid)
                        fail_msg("qemu-system-x86_64 exited early (status %d)", status);
                usleep(50 * 1000);
        }
        assert_int_equal(r, 0);
        assert_int_equal(vm.pid, qpid);
        assert_string_equal(vm.name, "vmmpower-t");
        assert_int_equal(vm.accel, VM_ACCEL_TCG);
        assert_int_equal(vm.n_vcpus, 2);
        for (unsigned i = 0; i < 2; i++) {
                char want[32];

                assert_int_equal(vm.vcpus[i].index, (int) i);
                assert_true(vm.vcpus[i].tid != qpid);
                assert_true(path_printf(path, sizeof(path), "/proc/%d/task/%d/comm", (int) qpid, (int) vm.vcpus[i].tid) > 0);
                assert_true(read_small_file(path, comm, sizeof(comm)) > 0);
                snprintf(want, sizeof(want), "CPU %u/TCG", i);
                assert_string_equal(comm, want);
        }

        /* TCG: QEMU has no kvm stats provider, the list is empty */
        assert_int_equal(qmp_query_halt_poll(sock, 2 * NSEC_PER_SEC, hp, 2), 0);
        assert_true(hp[0] == 5 && hp[1] == 5);

        for (size_t i = 0; i < ELEMENTSOF(lat); i++) {
                struct vm_info v2 = {};
                nsec_t t0 = now_ns();

                assert_int_equal(qmp_query_vm(sock, 2 * NSEC_PER_SEC, &v2), 0);
                lat[i] = now_ns() - t0;
                assert_int_equal(v2.n_vcpus, 2);
                assert_int_equal(v2.vcpus[1].tid, vm.vcpus[1].tid);
                vm_info_done(&v2);
        }
        qsort(lat, ELEMENTSOF(lat), sizeof(lat[0]), cmp_nsec);
        print_message("qmp_query_vm against real QEMU 7.2 (TCG, -S, 2 vCPUs): median %.0f us, min %.0f us, max %.0f us (20 calls)\n",
                      lat[10] / 1e3, lat[0] / 1e3, lat[19] / 1e3);

        vm_info_done(&vm);
        kill(qpid, SIGKILL);
        assert_int_equal(waitpid(qpid, &status, 0), qpid);
        unlink(sock);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cpus_fast_recorded),
                cmocka_unit_test(test_cpus_fast_sorted),
                cmocka_unit_test(test_name_kvm_recorded),
                cmocka_unit_test(test_error_reply),
                cmocka_unit_test(test_halt_poll_recorded),
                cmocka_unit_test(test_halt_poll_entry_without_values),
                cmocka_unit_test(test_halt_poll_malformed),
                cmocka_unit_test(test_cpus_fast_malformed),
                cmocka_unit_test(test_fake_events_skipped),
                cmocka_unit_test(test_fake_halt_poll),
                cmocka_unit_test(test_worker),
                cmocka_unit_test(test_fake_errors),
                cmocka_unit_test(test_fake_oversize),
                cmocka_unit_test(test_fake_timeout),
                cmocka_unit_test(test_real_qemu),
        };

        signal(SIGPIPE, SIG_IGN);
        if (getenv("VMMPOWER_TEST_DEBUG"))
                log_set_max_level(LOG_LEVEL_DEBUG);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
