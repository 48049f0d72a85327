/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Placement actuator primitives (see actuator.h).
 *
 * Pinning sequence, for both backends: read the current mask, skip if it
 * is already what we want, journal (original, current, wanted) durably,
 * apply, read back and journal what was read (journal_note_actual()).  A
 * read-back that differs is so recorded as ours and returned as -ERANGE; one
 * that cannot be journaled is undone (the mask read first is applied again)
 * and the journal error returned.
 *
 * Journal entries end with the thread or the run of the domain they were
 * made for: a pin whose thread is found gone (or its tid reused), or whose
 * domain is found stopped or running again under another id, is forgotten
 * (journal_forget()); a pin put back to its original is forgotten too.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "actuator.h"
#include "log.h"

static char proc_root[PATH_MAX] = "/proc";

int actuator_set_proc_root(const char *root)
{
        return path_printf(proc_root, sizeof(proc_root), "%s", root ? root : "/proc") < 0 ? -ENAMETOOLONG : 0;
}

int actuator_thread_starttime(pid_t pid, pid_t tid, uint64_t *ret)
{
        char path[PATH_MAX + 64], buf[1024], *p, *save = NULL;
        ssize_t n;
        int field = 2;

        path_printf(path, sizeof(path), "%s/%d/task/%d/stat", proc_root, (int) pid, (int) tid);
        n = read_small_file(path, buf, sizeof(buf));
        if (n == -ENOENT)
                return -ESRCH;
        if (n < 0)
                return (int) n;
        /* comm (field 2) may contain spaces and ')': fields resume after the last ')'. */
        p = strrchr(buf, ')');
        if (!p)
                return -EINVAL;
        for (char *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                if (++field == 22)
                        return parse_u64(t, ret) < 0 ? -EINVAL : 0;
        }
        return -EINVAL;
}

int actuator_thread_key(pid_t pid, pid_t tid, uint64_t starttime, char *buf, size_t size)
{
        int r = path_printf(buf, size, "%d:%d:%" PRIu64, (int) pid, (int) tid, starttime);
        return r < 0 ? r : 0;
}

static int parse_thread_key(const char *key, pid_t *pid, pid_t *tid, uint64_t *st)
{
        char tmp[96], *a, *b;
        int p, t;

        if (strlen(key) >= sizeof(tmp))
                return -EINVAL;
        strcpy(tmp, key);
        a = strchr(tmp, ':');
        b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
                return -EINVAL;
        *a = *b = '\0';
        if (parse_int(tmp, &p) < 0 || parse_int(a + 1, &t) < 0 || parse_u64(b + 1, st) < 0 || p <= 0 || t <= 0)
                return -EINVAL;
        *pid = p;
        *tid = t;
        return 0;
}

static int get_affinity(pid_t tid, cpuset_t *ret)
{
        size_t sz = CPU_ALLOC_SIZE(VP_MAX_CPUS);
        cpu_set_t *m = CPU_ALLOC(VP_MAX_CPUS);

        if (!m)
                return -ENOMEM;
        CPU_ZERO_S(sz, m);
        if (sched_getaffinity(tid, sz, m) < 0) {
                int r = -errno;
                CPU_FREE(m);
                return r;
        }
        cpuset_zero(ret);
        for (unsigned c = 0; c < VP_MAX_CPUS; c++)
                if (CPU_ISSET_S(c, sz, m))
                        cpuset_set(ret, c);
        CPU_FREE(m);
        return 0;
}

static int set_affinity(pid_t tid, const cpuset_t *s)
{
        size_t sz = CPU_ALLOC_SIZE(VP_MAX_CPUS);
        cpu_set_t *m = CPU_ALLOC(VP_MAX_CPUS);
        int r = 0;

        if (!m)
                return -ENOMEM;
        CPU_ZERO_S(sz, m);
        CPUSET_FOREACH(c, s)
                CPU_SET_S((unsigned) c, sz, m);
        if (sched_setaffinity(tid, sz, m) < 0)
                r = -errno;
        CPU_FREE(m);
        return r;
}

/* The thread, if it is still the one identified by starttime. */
static int check_thread(pid_t pid, pid_t tid, uint64_t starttime)
{
        uint64_t st;
        int r = actuator_thread_starttime(pid, tid, &st);

        if (r < 0)
                return r;
        return st == starttime ? 0 : -ESRCH;
}

int actuator_tid_affinity(pid_t tid, cpuset_t *ret)
{
        return get_affinity(tid, ret);
}

int actuator_thread_affinity(pid_t pid, pid_t tid, uint64_t starttime, cpuset_t *ret)
{
        int r = 0;

        if (starttime != 0)
                r = check_thread(pid, tid, starttime);
        else {
                uint64_t st;
                r = actuator_thread_starttime(pid, tid, &st); /* a thread of pid, not any tid */
        }
        return r < 0 ? r : get_affinity(tid, ret);
}

/* A pin's thread or domain run is gone (r): its journal entry, if any, goes with it.  Returns r. */
static int forget_gone(struct journal *j, enum journal_kind kind, const char *key, int r)
{
        int k;

        if (r != -ESRCH && r != -ENOENT)
                return r;
        k = journal_forget(j, kind, key);
        if (k < 0)
                log_debug_errno(k, "Cannot forget %s %s (restore will find it gone): %m",
                                journal_kind_to_string(kind), key);
        return r;
}

/*
 * A pin that failed (not made): what it holds is journaled as the verified
 * state.  Left unverified, the record would make restore take any later mask
 * as ours and put the original over one another tool set after the failure.
 */
static void note_failed(struct journal *j, enum journal_kind kind, const char *key, const char *actual)
{
        int r = journal_note_actual(j, kind, key, actual);

        if (r < 0)
                log_debug_errno(r, "Cannot journal the mask of %s after a failed pin: %m", key);
}

int actuator_pin_thread(struct journal *j, pid_t pid, pid_t tid, uint64_t starttime, const cpuset_t *cpus)
{
        char key[96], cur_s[JOURNAL_VALUE_MAX], want_s[JOURNAL_VALUE_MAX], act_s[JOURNAL_VALUE_MAX];
        cpuset_t cur, act;
        int r;

        if (cpuset_empty(cpus))
                return -EINVAL;
        if (starttime == 0) {
                r = actuator_thread_starttime(pid, tid, &starttime);
                if (r < 0)
                        return r;
        } else {
                r = check_thread(pid, tid, starttime);
                if (r < 0) {
                        /* the thread of that starttime is gone (or its tid reused) */
                        actuator_thread_key(pid, tid, starttime, key, sizeof(key));
                        return forget_gone(j, JOURNAL_KIND_AFFINITY, key, r);
                }
        }
        actuator_thread_key(pid, tid, starttime, key, sizeof(key));
        r = get_affinity(tid, &cur);
        if (r < 0)
                return forget_gone(j, JOURNAL_KIND_AFFINITY, key, r);
        if (cpuset_equal(&cur, cpus))
                return 0;
        if (cpuset_format_list(&cur, cur_s, sizeof(cur_s)) < 0 ||
            cpuset_format_list(cpus, want_s, sizeof(want_s)) < 0)
                return -ENOBUFS;
        r = journal_before_write(j, JOURNAL_KIND_AFFINITY, key, cur_s, want_s);
        if (r < 0)
                return r;
        r = set_affinity(tid, cpus);
        if (r < 0) {
                /* not made: the mask it holds is journaled as verified (see note_failed()) */
                if (r != -ESRCH && r != -ENOENT && get_affinity(tid, &act) == 0 &&
                    cpuset_format_list(&act, act_s, sizeof(act_s)) >= 0)
                        note_failed(j, JOURNAL_KIND_AFFINITY, key, act_s);
                return forget_gone(j, JOURNAL_KIND_AFFINITY, key, r);
        }
        r = get_affinity(tid, &act);
        if (r < 0)
                return forget_gone(j, JOURNAL_KIND_AFFINITY, key, r);
        if (cpuset_format_list(&act, act_s, sizeof(act_s)) < 0)
                r = -ENOBUFS;
        else
                r = journal_note_actual(j, JOURNAL_KIND_AFFINITY, key, act_s);
        if (r < 0) {
                /* The mask it has may be unknown to the journal: put back the one it had. */
                int k = set_affinity(tid, &cur);

                if (k < 0)
                        log_debug_errno(k, "Cannot put back the affinity of %s after a journal error: %m", key);
                return r;
        }
        return cpuset_equal(&act, cpus) ? 0 : -ERANGE;
}

int actuator_release_thread(struct journal *j, pid_t pid, pid_t tid, uint64_t starttime)
{
        char key[96];
        const char *orig;
        cpuset_t s;
        int r;

        if (starttime == 0) {
                r = actuator_thread_starttime(pid, tid, &starttime);
                if (r < 0)
                        return r;
        }
        actuator_thread_key(pid, tid, starttime, key, sizeof(key));
        orig = journal_original(j, JOURNAL_KIND_AFFINITY, key);
        if (!orig)
                return 0;
        if (cpuset_parse_list(orig, &s) < 0 || cpuset_empty(&s))
                return -EINVAL;
        r = actuator_pin_thread(j, pid, tid, starttime, &s);
        if (r < 0)
                return r;
        r = journal_forget(j, JOURNAL_KIND_AFFINITY, key);
        return r < 0 ? r : 1;
}

static int affinity_read(void *userdata, const char *key, char *buf, size_t size)
{
        pid_t pid, tid;
        uint64_t st;
        cpuset_t s;
        int r;

        if (parse_thread_key(key, &pid, &tid, &st) < 0)
                return -EINVAL;
        r = check_thread(pid, tid, st);
        if (r < 0)
                return r;
        r = get_affinity(tid, &s);
        if (r < 0)
                return r;
        return cpuset_format_list(&s, buf, size);
}

static int affinity_write(void *userdata, const char *key, const char *value)
{
        pid_t pid, tid;
        uint64_t st;
        cpuset_t s;
        int r;

        if (parse_thread_key(key, &pid, &tid, &st) < 0 || cpuset_parse_list(value, &s) < 0)
                return -EINVAL;
        r = check_thread(pid, tid, st);
        if (r < 0)
                return r;
        return set_affinity(tid, &s);
}

void actuator_affinity_knob_io(struct journal_knob_io *ret)
{
        *ret = (struct journal_knob_io) { affinity_read, affinity_write, NULL };
}

/* ---- libvirt ---- */

int actuator_cpumap_to_cpuset(const unsigned char *map, size_t maplen, cpuset_t *ret)
{
        cpuset_t s;

        cpuset_zero(&s);
        for (size_t c = 0; c < maplen * 8; c++)
                if (map[c / 8] & (1u << (c % 8))) {
                        if (c >= VP_MAX_CPUS)
                                return -E2BIG;
                        cpuset_set(&s, (unsigned) c);
                }
        *ret = s;
        return 0;
}

int actuator_cpuset_to_cpumap(const cpuset_t *s, unsigned n_host_cpus, unsigned char *map, size_t maplen)
{
        if (maplen < (n_host_cpus + 7) / 8)
                return -ENOBUFS;
        memset(map, 0, maplen);
        CPUSET_FOREACH(c, s) {
                if ((unsigned) c >= n_host_cpus)
                        return -EINVAL;
                map[c / 8] |= (unsigned char) (1u << (c % 8));
        }
        return 0;
}

static int virt_errno(void)
{
        virErrorPtr e = virGetLastError();

        if (!e)
                return -EIO;
        switch (e->code) {
        case VIR_ERR_NO_DOMAIN:
        case VIR_ERR_OPERATION_INVALID: /* domain not running: its live pinning is gone */
                return -ENOENT;
        case VIR_ERR_INVALID_ARG:
                return -EINVAL;
        case VIR_ERR_OPERATION_DENIED:
        case VIR_ERR_AUTH_FAILED:
        case VIR_ERR_ACCESS_DENIED:
                return -EACCES;
        case VIR_ERR_OPERATION_TIMEOUT: /* job lock held (migration, snapshot): retry later */
        case VIR_ERR_AGENT_UNRESPONSIVE:
                return -EBUSY;
        case VIR_ERR_NO_SUPPORT:
                return -EOPNOTSUPP;
        default:
                return -EIO;
        }
}

struct vdom {
        virDomainPtr dom;
        int id; /* of this run of the domain */
        int n_host_cpus;
        size_t maplen;
};

int actuator_vcpu_key(const char *uuid, int dom_id, unsigned vcpu, char *buf, size_t size)
{
        int r = vcpu == ACTUATOR_EMULATOR ? path_printf(buf, size, "%s:%d:emulator", uuid, dom_id)
                                          : path_printf(buf, size, "%s:%d:%u", uuid, dom_id, vcpu);
        return r < 0 ? r : 0;
}

/*
 * The running domain uuid; with dom_id > 0 only the run of that id:
 * -ENOENT if the domain is gone, not running, or running again since (a new
 * run has a new id; its live pinning is its own, from its definition).
 */
static int vdom_open(virConnectPtr conn, const char *uuid, int dom_id, struct vdom *ret)
{
        unsigned id;
        int n;

        ret->dom = virDomainLookupByUUIDString(conn, uuid);
        if (!ret->dom)
                return virt_errno();
        id = virDomainGetID(ret->dom);
        if (id == (unsigned) -1 || id > INT_MAX || (dom_id > 0 && (unsigned) dom_id != id)) {
                virDomainFree(ret->dom);
                return -ENOENT;
        }
        ret->id = (int) id;
        n = virNodeGetCPUMap(conn, NULL, NULL, 0);
        if (n <= 0) {
                n = virt_errno();
                virDomainFree(ret->dom);
                return n;
        }
        ret->n_host_cpus = n;
        ret->maplen = (size_t) VIR_CPU_MAPLEN(n);
        return 0;
}

static int vdom_get_pin(struct vdom *d, unsigned vcpu, cpuset_t *ret)
{
        _cleanup_free_ unsigned char *maps = NULL;
        int n;

        if (vcpu == ACTUATOR_EMULATOR) {
                maps = calloc(1, d->maplen);
                if (!maps)
                        return -ENOMEM;
                if (virDomainGetEmulatorPinInfo(d->dom, maps, (int) d->maplen, VIR_DOMAIN_AFFECT_LIVE) < 0)
                        return virt_errno();
                return actuator_cpumap_to_cpuset(maps, d->maplen, ret);
        }
        if (vcpu >= 4096)
                return -ENOENT;
        maps = calloc(vcpu + 1, d->maplen);
        if (!maps)
                return -ENOMEM;
        n = virDomainGetVcpuPinInfo(d->dom, (int) vcpu + 1, maps, (int) d->maplen, VIR_DOMAIN_AFFECT_LIVE);
        if (n < 0)
                return virt_errno();
        if ((unsigned) n <= vcpu)
                return -ENOENT;
        return actuator_cpumap_to_cpuset(VIR_GET_CPUMAP(maps, d->maplen, vcpu), d->maplen, ret);
}

static int vdom_set_pin(struct vdom *d, unsigned vcpu, const cpuset_t *s)
{
        _cleanup_free_ unsigned char *map = calloc(1, d->maplen);
        int r;

        if (!map)
                return -ENOMEM;
        r = actuator_cpuset_to_cpumap(s, (unsigned) d->n_host_cpus, map, d->maplen);
        if (r < 0)
                return r;
        if (vcpu == ACTUATOR_EMULATOR) {
                if (virDomainPinEmulator(d->dom, map, (int) d->maplen, VIR_DOMAIN_AFFECT_LIVE) < 0)
                        return virt_errno();
                return 0;
        }
        if (virDomainPinVcpuFlags(d->dom, vcpu, map, (int) d->maplen, VIR_DOMAIN_AFFECT_LIVE) < 0)
                return virt_errno();
        return 0;
}

int actuator_pin_vcpu(struct journal *j, void *conn, const char *uuid, unsigned vcpu, int *dom_id,
                      const cpuset_t *cpus)
{
        char key[96], cur_s[JOURNAL_VALUE_MAX], want_s[JOURNAL_VALUE_MAX], act_s[JOURNAL_VALUE_MAX];
        int run = dom_id ? *dom_id : 0;
        struct vdom d;
        cpuset_t cur, act;
        int r, k;

        if (!conn || cpuset_empty(cpus))
                return -EINVAL;
        r = vdom_open(conn, uuid, run, &d);
        if (r < 0) {
                /* the run we pinned is over: so is its live pinning */
                if (run > 0 && r == -ENOENT && actuator_vcpu_key(uuid, run, vcpu, key, sizeof(key)) == 0)
                        forget_gone(j, JOURNAL_KIND_VCPUPIN, key, r);
                return r;
        }
        if (dom_id)
                *dom_id = d.id;
        r = actuator_vcpu_key(uuid, d.id, vcpu, key, sizeof(key));
        if (r < 0)
                goto out;
        r = vdom_get_pin(&d, vcpu, &cur);
        if (r < 0) {
                forget_gone(j, JOURNAL_KIND_VCPUPIN, key, r); /* no such vCPU (any more), or stopped */
                goto out;
        }
        if (cpuset_equal(&cur, cpus))
                goto out;
        if (cpuset_format_list(&cur, cur_s, sizeof(cur_s)) < 0 ||
            cpuset_format_list(cpus, want_s, sizeof(want_s)) < 0) {
                r = -ENOBUFS;
                goto out;
        }
        r = journal_before_write(j, JOURNAL_KIND_VCPUPIN, key, cur_s, want_s);
        if (r < 0)
                goto out;
        r = vdom_set_pin(&d, vcpu, cpus);
        if (r < 0) {
                if (r != -ESRCH && r != -ENOENT && vdom_get_pin(&d, vcpu, &act) == 0 &&
                    cpuset_format_list(&act, act_s, sizeof(act_s)) >= 0)
                        note_failed(j, JOURNAL_KIND_VCPUPIN, key, act_s);
                forget_gone(j, JOURNAL_KIND_VCPUPIN, key, r);
                goto out;
        }
        r = vdom_get_pin(&d, vcpu, &act);
        if (r < 0) {
                forget_gone(j, JOURNAL_KIND_VCPUPIN, key, r);
                goto out;
        }
        if (cpuset_format_list(&act, act_s, sizeof(act_s)) < 0)
                r = -ENOBUFS;
        else
                r = journal_note_actual(j, JOURNAL_KIND_VCPUPIN, key, act_s);
        if (r < 0) {
                /* The pin it has may be unknown to the journal: put back the one it had. */
                k = vdom_set_pin(&d, vcpu, &cur);
                if (k < 0)
                        log_debug_errno(k, "Cannot put back the pin of %s after a journal error: %m", key);
                goto out;
        }
        r = cpuset_equal(&act, cpus) ? 0 : -ERANGE;
out:
        virDomainFree(d.dom);
        return r;
}

int actuator_vcpu_pin_info(void *conn, const char *uuid, unsigned vcpu, int dom_id, cpuset_t *ret)
{
        struct vdom d;
        int r;

        if (!conn)
                return -EINVAL;
        r = vdom_open(conn, uuid, dom_id, &d);
        if (r < 0)
                return r;
        r = vdom_get_pin(&d, vcpu, ret);
        virDomainFree(d.dom);
        return r;
}

int actuator_repin_vcpu(void *conn, const char *uuid, unsigned vcpu, int dom_id, pid_t pid, pid_t tid,
                        const cpuset_t *cpus)
{
        struct vdom d;
        cpuset_t cur;
        int r;

        if (!conn || cpuset_empty(cpus) || vcpu == ACTUATOR_EMULATOR)
                return -EINVAL;
        r = vdom_open(conn, uuid, dom_id, &d);
        if (r < 0)
                return r;
        r = vdom_get_pin(&d, vcpu, &cur);
        if (r == 0 && !cpuset_equal(&cur, cpus))
                r = -ESTALE; /* libvirt records another pin: not the one to set again */
        if (r == 0)
                r = vdom_set_pin(&d, vcpu, cpus);
        virDomainFree(d.dom);
        if (r < 0)
                return r;
        r = actuator_thread_affinity(pid, tid, 0, &cur);
        if (r == 0 && !cpuset_equal(&cur, cpus)) {
                r = set_affinity(tid, cpus);
                if (r == 0)
                        r = get_affinity(tid, &cur);
        }
        if (r < 0)
                return r;
        return cpuset_equal(&cur, cpus) ? 0 : -ERANGE;
}

int actuator_release_vcpu(struct journal *j, void *conn, const char *uuid, unsigned vcpu, int dom_id)
{
        char key[96];
        const char *orig;
        struct vdom d;
        cpuset_t s;
        int r;

        if (!conn)
                return -EINVAL;
        if (dom_id <= 0) {
                r = vdom_open(conn, uuid, 0, &d);
                if (r < 0)
                        return r;
                dom_id = d.id;
                virDomainFree(d.dom);
        }
        r = actuator_vcpu_key(uuid, dom_id, vcpu, key, sizeof(key));
        if (r < 0)
                return r;
        orig = journal_original(j, JOURNAL_KIND_VCPUPIN, key);
        if (!orig)
                return 0;
        if (cpuset_parse_list(orig, &s) < 0 || cpuset_empty(&s))
                return -EINVAL;
        r = actuator_pin_vcpu(j, conn, uuid, vcpu, &dom_id, &s);
        if (r < 0)
                return r;
        r = journal_forget(j, JOURNAL_KIND_VCPUPIN, key);
        return r < 0 ? r : 1;
}

/*
 * "uuid:domid:vcpu" (vcpu a number or "emulator"); a journal of an older
 * vmmpowerd has "uuid:vcpu" (*dom_id 0: whichever run is live).
 */
static int parse_vcpu_key(const char *key, char *uuid, size_t size, int *dom_id, unsigned *vcpu)
{
        const char *c = strrchr(key, ':'), *u = strchr(key, ':');
        uint32_t v;
        int id = 0;

        if (!c || (size_t) (u - key) >= size)
                return -EINVAL;
        if (strcmp(c + 1, "emulator") == 0)
                v = ACTUATOR_EMULATOR;
        else if (parse_u32(c + 1, &v) < 0 || v == ACTUATOR_EMULATOR)
                return -EINVAL;
        if (u != c) {
                char num[16];

                if ((size_t) (c - u - 1) >= sizeof(num))
                        return -EINVAL;
                memcpy(num, u + 1, (size_t) (c - u - 1));
                num[c - u - 1] = '\0';
                if (parse_int(num, &id) < 0 || id <= 0)
                        return -EINVAL;
        }
        memcpy(uuid, key, (size_t) (u - key));
        uuid[u - key] = '\0';
        *dom_id = id;
        *vcpu = v;
        return 0;
}

static int vcpupin_read(void *userdata, const char *key, char *buf, size_t size)
{
        char uuid[80];
        unsigned vcpu;
        struct vdom d;
        cpuset_t s;
        int r, id;

        if (parse_vcpu_key(key, uuid, sizeof(uuid), &id, &vcpu) < 0)
                return -EINVAL;
        r = vdom_open(userdata, uuid, id, &d);
        if (r < 0)
                return r;
        r = vdom_get_pin(&d, vcpu, &s);
        virDomainFree(d.dom);
        if (r < 0)
                return r;
        return cpuset_format_list(&s, buf, size);
}

static int vcpupin_write(void *userdata, const char *key, const char *value)
{
        char uuid[80];
        unsigned vcpu;
        struct vdom d;
        cpuset_t s;
        int r, id;

        if (parse_vcpu_key(key, uuid, sizeof(uuid), &id, &vcpu) < 0 || cpuset_parse_list(value, &s) < 0)
                return -EINVAL;
        r = vdom_open(userdata, uuid, id, &d);
        if (r < 0)
                return r;
        r = vdom_set_pin(&d, vcpu, &s);
        virDomainFree(d.dom);
        return r;
}

void actuator_vcpupin_knob_io(void *conn, struct journal_knob_io *ret)
{
        if (conn)
                *ret = (struct journal_knob_io) { vcpupin_read, vcpupin_write, conn };
        else
                *ret = (struct journal_knob_io) { 0 };
}
