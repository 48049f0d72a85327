/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libvirt source: the status XML parser on fixtures (tests/data/libvirt) and
 * hostile input, and the whole source thread against libvirt's built-in test
 * driver (test:///default, no libvirtd needed): connect, reconcile, lifecycle
 * events, the status-XML path and the pid-file + thread-name fallback, a
 * transient domain re-created with the same UUID behind the source's back.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <libvirt/libvirt.h>

#include "libvirt_src.h"
#include "log.h"
#include "util.h"

static char *load(const char *name, size_t *len)
{
        char path[512];
        static char buf[256 * 1024];
        ssize_t n;

        assert_true(path_printf(path, sizeof(path), "%s/libvirt/%s", TEST_DATA_DIR, name) > 0);
        n = read_small_file(path, buf, sizeof(buf));
        assert_true(n > 0);
        *len = (size_t) n;
        return strdup(buf);
}

static int parse(const char *s, struct vm_info *vm)
{
        return libvirt_parse_status_xml(s, strlen(s), vm);
}

static void test_fixture(void **state)
{
        size_t len;
        _cleanup_free_ char *x = load("synth-9.0-tcg-2vcpu.xml", &len);
        struct vm_info vm = { .libvirt_id = 3 };

        assert_int_equal(libvirt_parse_status_xml(x, len, &vm), 0);
        assert_int_equal(vm.pid, 4242);
        assert_int_equal(vm.accel, VM_ACCEL_TCG);
        assert_int_equal(vm.n_vcpus, 2); /* not the decoy <vcpus> inside <domain> */
        assert_int_equal(vm.vcpus[0].index, 0);
        assert_int_equal(vm.vcpus[0].tid, 4250);
        assert_int_equal(vm.vcpus[1].index, 1);
        assert_int_equal(vm.vcpus[1].tid, 4251);
        assert_int_equal(vm.libvirt_id, 3); /* untouched */
        vm_info_done(&vm);

        /* every truncation: an error or a (consistent) parse, never a crash */
        for (size_t l = 0; l < len; l++) {
                struct vm_info v = {};
                int r = libvirt_parse_status_xml(x, l, &v);

                assert_true(r == 0 || r == -EBADMSG);
                if (r == 0)
                        assert_int_equal(v.pid, 4242);
                vm_info_done(&v);
        }
}

static void test_real_recording(void **state)
{
        size_t len;
        _cleanup_free_ char *x = load("real-9.0-tcg-2vcpu-paused.xml", &len);
        struct vm_info vm = {};

        assert_true(len > 9000);
        assert_int_equal(libvirt_parse_status_xml(x, len, &vm), 0);
        assert_int_equal(vm.pid, 3744);
        assert_int_equal(vm.accel, VM_ACCEL_TCG);
        assert_int_equal(vm.n_vcpus, 2);
        assert_int_equal(vm.vcpus[0].index, 0);
        assert_int_equal(vm.vcpus[0].tid, 3750);
        assert_int_equal(vm.vcpus[1].index, 1);
        assert_int_equal(vm.vcpus[1].tid, 3751);
        vm_info_done(&vm);
}

static void test_variants(void **state)
{
        struct vm_info vm = {};

        assert_int_equal(parse("<domstatus pid='77'><domain type='kvm' id='1'/></domstatus>", &vm), 0);
        assert_int_equal(vm.pid, 77);
        assert_int_equal(vm.n_vcpus, 0);
        assert_null(vm.vcpus);
        assert_int_equal(vm.accel, VM_ACCEL_KVM);

        assert_int_equal(parse("<domstatus pid='78'><vcpus>"
                               "<vcpu id='3' pid='13'/><vcpu id='0' pid='10'/><vcpu id='2' pid='12'/>"
                               "</vcpus></domstatus>", &vm), 0);
        assert_int_equal(vm.pid, 78);
        assert_int_equal(vm.n_vcpus, 3);
        assert_int_equal(vm.vcpus[0].index, 0);
        assert_int_equal(vm.vcpus[1].index, 2);
        assert_int_equal(vm.vcpus[2].index, 3);
        assert_int_equal(vm.vcpus[2].tid, 13);
        assert_int_equal(vm.accel, VM_ACCEL_KVM); /* no <domain>: left as it was */
        vm_info_done(&vm);

        /* VM_MAX_VCPUS vCPUs are fine, one more is not */
        for (unsigned n = VM_MAX_VCPUS; n <= VM_MAX_VCPUS + 1; n++) {
                struct strbuf sb;

                strbuf_init(&sb);
                strbuf_puts(&sb, "<domstatus pid='5'><vcpus>");
                for (unsigned i = 0; i < n; i++)
                        strbuf_printf(&sb, "<vcpu id='%u' pid='%u'/>", i % VM_MAX_VCPUS, 100 + i);
                strbuf_puts(&sb, "</vcpus></domstatus>");
                assert_int_equal(parse(sb.data, &vm), n == VM_MAX_VCPUS ? 0 : -EBADMSG);
                if (n == VM_MAX_VCPUS) {
                        assert_int_equal(vm.n_vcpus, VM_MAX_VCPUS);
                        vm_info_done(&vm);
                }
                strbuf_free(&sb);
        }
}

/*
 * More vCPUs than VM_MAX_VCPUS (a 1,030-vCPU domain): the VM is kept with
 * vCPUs 0..1023, the 6 others are counted as untracked, not dropped silently
 * with the whole VM.
 */
static void test_vcpu_limit(void **state)
{
        size_t len;
        _cleanup_free_ char *x = load("synth-9.0-tcg-1030vcpu.xml", &len);
        struct vm_info vm = {};

        assert_int_equal(libvirt_parse_status_xml(x, len, &vm), 0);
        assert_int_equal(vm.pid, 3744);
        assert_int_equal(vm.n_vcpus, VM_MAX_VCPUS);
        assert_int_equal(vm.n_vcpus_untracked, 6);
        assert_int_equal(vm.vcpus[0].index, 0);
        assert_int_equal(vm.vcpus[0].tid, 10000);
        assert_int_equal(vm.vcpus[VM_MAX_VCPUS - 1].index, VM_MAX_VCPUS - 1);
        assert_int_equal(vm.vcpus[VM_MAX_VCPUS - 1].tid, 10000 + VM_MAX_VCPUS - 1);
        vm_info_done(&vm);

        /* the count is of this parse, not carried over from an earlier one */
        vm = (struct vm_info) { .n_vcpus_untracked = 99 };
        assert_int_equal(parse("<domstatus pid='7'><vcpus><vcpu id='0' pid='8'/><vcpu id='4000' pid='9'/>"
                               "</vcpus></domstatus>", &vm), 0);
        assert_int_equal(vm.n_vcpus, 1);
        assert_int_equal(vm.n_vcpus_untracked, 1);
        vm_info_done(&vm);
        /* an untracked vCPU still needs a valid tid */
        vm = (struct vm_info) {};
        assert_int_equal(parse("<domstatus pid='7'><vcpus><vcpu id='1024' pid='0'/></vcpus></domstatus>", &vm),
                         -EBADMSG);
}

static void test_bad(void **state)
{
        const char *bad[] = {
                "",
                "garbage",
                "<domstatus pid='1'>",
                "<domstatus pid='1'></domstat>",
                "\x01\x02\x03<<>>",
                "<domain pid='1'/>",
                "<domstatus/>",
                "<domstatus pid=''/>",
                "<domstatus pid='abc'/>",
                "<domstatus pid='-5'/>",
                "<domstatus pid='0'/>",
                "<domstatus pid=' 12'/>",
                "<domstatus pid='4194305'/>",
                "<domstatus pid='99999999999999999999999999'/>",
                "<domstatus pid='1'><vcpus><vcpu id='0'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu pid='5'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu id='0' pid='0'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu id='0' pid='99999999999999999999'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu id='16777216' pid='5'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu id='-1' pid='5'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu id='0' pid='5'/><vcpu id='0' pid='6'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu id='0' pid='5'/><vcpu id='1' pid='5'/></vcpus></domstatus>",
                "<domstatus pid='1'><vcpus><vcpu id='0' pid='5'/></vcpus><vcpus><vcpu id='1' pid='6'/></vcpus></domstatus>",
                /* external entity: never loaded or substituted */
                "<?xml version='1.0'?><!DOCTYPE d [<!ENTITY e SYSTEM 'file:///proc/self/stat'>]>"
                "<domstatus pid='&e;'/>",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct vm_info vm = { .pid = 9, .accel = VM_ACCEL_UNKNOWN };

                if (parse(bad[i], &vm) != -EBADMSG)
                        fail_msg("accepted: %s", bad[i]);
                assert_int_equal(vm.pid, 9);
                assert_null(vm.vcpus);
                assert_int_equal(vm.accel, VM_ACCEL_UNKNOWN);
        }
        assert_int_equal(libvirt_parse_status_xml(NULL, 0, &(struct vm_info) {}), -EINVAL);
}

/* ---- the source thread against test:///default -------------------------- */

static int take_wait(struct libvirt_src *ls, struct vm_info **vms, size_t *n, int timeout_ms)
{
        nsec_t end = now_ns() + timeout_ms * NSEC_PER_MSEC;

        for (;;) {
                struct pollfd p = { .fd = libvirt_src_fd(ls), .events = POLLIN };
                int r = libvirt_src_take(ls, vms, n);

                if (r != 0)
                        return r;
                if (now_ns() >= end)
                        return 0;
                (void) poll(&p, 1, 100);
        }
}

static const struct vm_info *find(const struct vm_info *vms, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(vms[i].name, name) == 0)
                        return &vms[i];
        return NULL;
}

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;

static void *parked(void *p)
{
        pthread_setname_np(pthread_self(), "CPU 0/TCG");
        *(pid_t *) p = gettid();
        pthread_mutex_lock(&park_lock);
        pthread_mutex_unlock(&park_lock);
        return NULL;
}

static void test_source_test_driver(void **state)
{
        char dir[] = "/tmp/vmmpower-test-lvsrc-XXXXXX", path[512], buf[64];
        size_t len, n = 0;
        _cleanup_free_ char *x = load("synth-9.0-tcg-2vcpu.xml", &len);
        struct libvirt_src *ls = NULL;
        struct libvirt_src_stats st;
        struct vm_info *vms = NULL;
        const struct vm_info *v;
        virConnectPtr c;
        virDomainPtr d;
        char uuid[VIR_UUID_STRING_BUFLEN];
        pthread_t th;
        pid_t tid = 0;

        assert_non_null(mkdtemp(dir));
        /* "test" (the test driver's predefined running domain): status XML */
        assert_true(path_printf(path, sizeof(path), "%s/test.xml", dir) > 0);
        assert_int_equal(write_file_atomic(path, x, len, 0600), 0);

        assert_int_equal(libvirt_src_start("test:///default", dir, "/proc", &ls), 0);
        assert_int_equal(take_wait(ls, &vms, &n, 10000), 1);
        assert_int_equal(n, 1);
        v = find(vms, n, "test");
        assert_non_null(v);
        assert_int_equal(v->pid, 4242);
        assert_int_equal(v->n_vcpus, 2);
        assert_int_equal(v->vcpus[1].tid, 4251);
        assert_int_equal(v->sources, VM_SOURCE_LIBVIRT);
        assert_int_equal(strlen(v->uuid), 36);
        vm_info_free_array(vms, n);
        vms = NULL;
        assert_int_equal(libvirt_src_take(ls, &vms, &n), 0);

        libvirt_src_get_stats(ls, &st);
        assert_true(st.connected);
        assert_int_equal(st.connects, 1);
        assert_true(st.reconciles >= 1);
        assert_int_equal(st.errors, 0);

        /* A second domain with no status XML but a pid file: fallback through the
         * thread names of "QEMU" = this process, with one thread named CPU 0/TCG. */
        pthread_mutex_lock(&park_lock);
        assert_int_equal(pthread_create(&th, NULL, parked, &tid), 0);
        while (__atomic_load_n(&tid, __ATOMIC_SEQ_CST) == 0)
                usleep(1000);
        usleep(20000);
        assert_true(path_printf(path, sizeof(path), "%s/vmmp-fallback.pid", dir) > 0);
        snprintf(buf, sizeof(buf), "%d\n", (int) getpid());
        assert_int_equal(write_file_atomic(path, buf, strlen(buf), 0600), 0);

        c = virConnectOpen("test:///default");
        assert_non_null(c);
        d = virDomainCreateXML(c,
                "<domain type='test'><name>vmmp-fallback</name><memory>65536</memory>"
                "<os><type>hvm</type></os></domain>", 0);
        assert_non_null(d);
        assert_int_equal(virDomainGetUUIDString(d, uuid), 0);

        /* the lifecycle event brings a new snapshot without being asked */
        assert_int_equal(take_wait(ls, &vms, &n, 10000), 1);
        assert_int_equal(n, 2);
        v = find(vms, n, "vmmp-fallback");
        assert_non_null(v);
        assert_string_equal(v->uuid, uuid);
        assert_int_equal(v->libvirt_id, virDomainGetID(d));
        assert_int_equal(v->pid, getpid());
        assert_int_equal(v->n_vcpus, 1);
        assert_int_equal(v->vcpus[0].index, 0);
        assert_int_equal(v->vcpus[0].tid, tid);
        vm_info_free_array(vms, n);
        vms = NULL;

        libvirt_src_get_stats(ls, &st);
        assert_true(st.events >= 1);

        /* gone again: the next snapshot has one domain */
        assert_int_equal(virDomainDestroy(d), 0);
        virDomainFree(d);
        assert_int_equal(take_wait(ls, &vms, &n, 10000), 1);
        assert_int_equal(n, 1);
        assert_non_null(find(vms, n, "test"));
        vm_info_free_array(vms, n);
        vms = NULL;

        /* explicit request */
        libvirt_src_request_reconcile(ls);
        assert_int_equal(take_wait(ls, &vms, &n, 10000), 1);
        assert_int_equal(n, 1);
        vm_info_free_array(vms, n);
        vms = NULL;

        /* a domain without any thread information is counted and left out */
        unlink(path);
        d = virDomainCreateXML(c,
                "<domain type='test'><name>vmmp-nothing</name><memory>65536</memory>"
                "<os><type>hvm</type></os></domain>", 0);
        assert_non_null(d);
        assert_int_equal(take_wait(ls, &vms, &n, 10000), 1);
        assert_int_equal(n, 1);
        assert_null(find(vms, n, "vmmp-nothing"));
        vm_info_free_array(vms, n);
        libvirt_src_get_stats(ls, &st);
        assert_true(st.errors >= 1);
        virDomainDestroy(d);
        virDomainFree(d);
        virConnectClose(c);

        libvirt_src_stop(ls);
        pthread_mutex_unlock(&park_lock);
        pthread_join(th, NULL);

        assert_true(path_printf(path, sizeof(path), "%s/test.xml", dir) > 0);
        unlink(path);
        rmdir(dir);
}

/* Wait for a snapshot listing domain `name` with id `id`; its policy to *ret. */
static bool wait_domain(struct libvirt_src *ls, const char *name, int id, struct vm_policy *ret)
{
        nsec_t end = now_ns() + 10 * NSEC_PER_SEC;

        while (now_ns() < end) {
                struct vm_info *vms = NULL;
                const struct vm_info *v;
                size_t n = 0;
                bool found = false;

                if (take_wait(ls, &vms, &n, (int) ((end - now_ns()) / NSEC_PER_MSEC) + 1) != 1)
                        continue;
                v = find(vms, n, name);
                if (v && v->libvirt_id == id) {
                        *ret = v->policy;
                        found = true;
                }
                vm_info_free_array(vms, n);
                if (found)
                        return true;
        }
        return false;
}

/*
 * A transient domain destroyed and created again with the same UUID while
 * the source does not look (events are lost while it is disconnected from
 * libvirtd; here its thread is held in a reconcile, reading a FIFO): the new
 * run's definition counts, not the pins the old run's had.
 */
static void test_source_transient_recreated(void **state)
{
        static const char uuid[] = "5b9f0f3e-2d6a-4f1c-9a57-7d8e3c2b1a04";
        char dir[] = "/tmp/vmmpower-test-lvsrc-XXXXXX", test_xml[512], dom_xml[512], def[1024];
        size_t len;
        _cleanup_free_ char *x = load("synth-9.0-tcg-2vcpu.xml", &len);
        struct libvirt_src *ls = NULL;
        struct vm_policy pol;
        virConnectPtr c;
        virDomainPtr d;
        int old_id, new_id, wfd;

        assert_non_null(mkdtemp(dir));
        assert_true(path_printf(test_xml, sizeof(test_xml), "%s/test.xml", dir) > 0);
        assert_true(path_printf(dom_xml, sizeof(dom_xml), "%s/vmmp-transient.xml", dir) > 0);
        assert_int_equal(write_file_atomic(test_xml, x, len, 0600), 0);
        assert_int_equal(write_file_atomic(dom_xml, x, len, 0600), 0);
        assert_int_equal(libvirt_src_start("test:///default", dir, "/proc", &ls), 0);
        c = virConnectOpen("test:///default");
        assert_non_null(c);

        /* the first run: the operator pinned vCPU 0 */
        snprintf(def, sizeof(def),
                 "<domain type='test'><name>vmmp-transient</name><uuid>%s</uuid><memory>65536</memory>"
                 "<vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='0'/></cputune><os><type>hvm</type></os>"
                 "</domain>", uuid);
        d = virDomainCreateXML(c, def, 0);
        assert_non_null(d);
        old_id = virDomainGetID(d);
        assert_true(wait_domain(ls, "vmmp-transient", old_id, &pol));
        assert_int_equal(pol.operator_pins, VM_PIN_VCPUPIN);
        assert_true(pol.pins_left_alone);

        /* hold the source's thread in its next reconcile: test.xml is a FIFO it opens */
        assert_int_equal(unlink(test_xml), 0);
        assert_int_equal(mkfifo(test_xml, 0600), 0);
        libvirt_src_request_reconcile(ls);
        wfd = open(test_xml, O_WRONLY | O_CLOEXEC); /* returns once the reader is there */
        assert_true(wfd >= 0);

        /* meanwhile: destroyed, and created again with the same UUID, without pins */
        assert_int_equal(virDomainDestroy(d), 0);
        virDomainFree(d);
        snprintf(def, sizeof(def),
                 "<domain type='test'><name>vmmp-transient</name><uuid>%s</uuid><memory>65536</memory>"
                 "<vcpu>2</vcpu><os><type>hvm</type></os></domain>", uuid);
        d = virDomainCreateXML(c, def, 0);
        assert_non_null(d);
        new_id = virDomainGetID(d);
        assert_true(new_id != old_id);

        /* let it go on (a plain file for the reconciles after this one) */
        assert_int_equal(write_file_atomic(test_xml, x, len, 0600), 0);
        assert_int_equal(write(wfd, x, len), (ssize_t) len);
        assert_int_equal(close(wfd), 0);

        assert_true(wait_domain(ls, "vmmp-transient", new_id, &pol));
        assert_int_equal(pol.operator_pins, 0);
        assert_false(pol.pins_left_alone);

        virDomainDestroy(d);
        virDomainFree(d);
        virConnectClose(c);
        libvirt_src_stop(ls);
        unlink(test_xml);
        unlink(dom_xml);
        rmdir(dir);
}

static void test_source_unreachable(void **state)
{
        struct libvirt_src *ls = NULL;
        struct libvirt_src_stats st;
        struct vm_info *vms = NULL;
        size_t n;
        nsec_t t0;

        /* nothing listens there: connect fails, retried with backoff, stop is prompt */
        assert_int_equal(libvirt_src_start("qemu+unix:///system?socket=/nonexistent/libvirt-sock",
                                           "/nonexistent", "/proc", &ls), 0);
        /* t=0 and t=1 s: polled with a deadline, not a fixed sleep */
        for (nsec_t until = now_ns() + 10 * NSEC_PER_SEC;; usleep(20 * 1000)) {
                libvirt_src_get_stats(ls, &st);
                if (st.connect_failures >= 2 || now_ns() > until)
                        break;
        }
        assert_false(st.connected);
        assert_int_equal(st.connects, 0);
        assert_true(st.connect_failures >= 2);
        assert_int_equal(libvirt_src_take(ls, &vms, &n), 0);
        /* stop does not wait out the backoff (up to 30 s): printed, a hang is the test's timeout */
        t0 = now_ns();
        libvirt_src_stop(ls);
        printf("libvirt_src_stop during the connect backoff: %.1f ms\n", (double) (now_ns() - t0) / 1e6);
        libvirt_src_stop(NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fixture),
                cmocka_unit_test(test_real_recording),
                cmocka_unit_test(test_vcpu_limit),
                cmocka_unit_test(test_variants),
                cmocka_unit_test(test_bad),
                cmocka_unit_test(test_source_test_driver),
                cmocka_unit_test(test_source_transient_recreated),
                cmocka_unit_test(test_source_unreachable),
        };

        if (getenv("VMMPOWER_TEST_DEBUG"))
                log_set_max_level(LOG_LEVEL_DEBUG);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
