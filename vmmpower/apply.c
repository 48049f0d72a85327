/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The applier (apply.h): desired state in, host changes out, on a thread of
 * its own so that a slow sysfs write or a libvirt call held up by a job lock
 * never stalls tracking or hint handling.
 *
 * Pins are kept sorted by (pid, tid).  A new request is merged with the
 * previous state: a pin whose target did not change and that was applied is
 * not touched again (no syscall, no libvirt call), so a steady plan costs
 * nothing per period.  Failed pins are retried with BACKOFF_DEFAULT; a thread
 * or domain that is gone is dropped, and its journal entry forgotten.  A
 * thread the new request no longer has (its VM shut down, or left the plan)
 * is let go as a VM in mode exclude is: a pin we made goes back to its
 * original and its entry is forgotten (a thread already gone: forgotten);
 * such a release is kept, retried like a pin, until it is done.
 *
 * Knobs (frequency cap, PM QoS limit per pCPU) are "applied" only when the
 * driver applied them (0, or -ERANGE: clamped or rejected, which the driver
 * remembers) or when retrying cannot help (no such knob, knob gone, knob
 * someone else's).  Any other failure (EBUSY after the driver's own retries,
 * EACCES while the class is disabled, a journal that cannot record: ENOSPC,
 * EIO) leaves the target pending: it is tried again on a later pass after
 * KNOB_BACKOFF, for as long as the plan wants it.  A new target is tried at
 * once.
 *
 * Pins made are checked against the kernel every pin_check_ns (apply.h):
 * the mask read back after the pin (pin_state.ref) against the thread's now.
 * Widened: pinned again in the same pass (a libvirt pin through libvirt, its
 * record unchanged, so not journaled again; one whose record libvirt changed
 * is someone's `virsh vcpupin` and let go).  A pin with a CPU offline is not
 * checked.  Changed otherwise at two checks in a row (pin_state.suspect, not
 * pinned over in between; the kernel's masks in a hotplug flap pass): let go, its
 * journal entry forgotten, and refused from then on (pin_state.foreign, kept
 * across requests for the same thread) until the thread may run on all the
 * CPUs it had before our first pin (the journal's original, kept in
 * pin_state.orig; every online CPU if it could not be read).  The pins let
 * go live on in FOREIGN_FILE for the next applier (reload, restart).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "apply.h"
#include "journal.h"
#include "journal_builtin.h"
#include "log.h"
#include "power_driver.h"
#include "retry.h"
#include "topology.h"

#define APPLY_IDLE_WAIT_NS (1 * NSEC_PER_SEC)     /* late_callback cadence without requests */
#define LIBVIRT_RETRY_MIN_NS (1 * NSEC_PER_SEC)
#define LIBVIRT_RETRY_MAX_NS (30 * NSEC_PER_SEC)
#define LAT_UNKNOWN INT32_MIN
/* Failed frequency caps / latency limits: 1 s, doubling, capped at 30 s, never given up. */
#define KNOB_BACKOFF ((struct backoff) { 1 * NSEC_PER_SEC, 30 * NSEC_PER_SEC, UINT_MAX })

struct knob_retry {
        struct retry_state retry;
        bool failed;            /* the last attempt at `target` failed: retry when due */
        int64_t target;         /* kHz or latency of that attempt */
};

struct pin_state {
        struct apply_pin want;
        int applied_cpu;           /* -1: not applied */
        bool done;                 /* applied, narrowed, or given up until the target changes */
        bool gone;                 /* thread or domain run found gone (entry forgotten) */
        bool dropped;              /* not in the request any more: a release, removed once done */
        uint64_t starttime;        /* plain QEMU: of the thread pinned (its journal key), 0 = not read yet */
        int dom_id;                /* libvirt: id of the domain run pinned (its journal key), 0 = none yet */
        struct retry_state retry;
        bool has_ref;              /* ref holds the thread's mask read after the pin was made */
        bool widened;              /* found wider than ref: pin again (libvirt: set again, see above) */
        bool foreign;              /* someone else changed the pin: theirs, refused until handed back */
        bool suspect;              /* found changed once (suspect_hash): theirs if so at the next check too;
                                    * not pinned meanwhile */
        uint64_t suspect_hash;
        bool held;                 /* a pin or release the plan asked for was held back while suspect */
        bool has_orig;             /* orig holds the thread's mask before vmmpower first pinned it */
        cpuset_t ref;
        cpuset_t orig;             /* of a foreign pin: handed back once the thread may run on all of these */
};

/* A foreign pin of an earlier applier (FOREIGN_FILE), until a request has its thread again. */
struct foreign_seed {
        pid_t pid, tid;
        uint64_t starttime;        /* plain QEMU: the thread's (0: a libvirt vCPU, whose thread it is not checked) */
        bool has_orig;
        bool taken;                /* a request had its thread (its state lives on there), or it is gone */
        cpuset_t orig;
};

/* The foreign pins, kept in the state directory so that a reload or a restart does not pin over them. */
#define FOREIGN_FILE "foreign-pins"
#define FOREIGN_MAGIC "vmmpower-foreign-pins 1"
#define FOREIGN_MAX 65536

struct applier {
        struct apply_config cfg;
        char *state_dir, *sysfs_root, *libvirt_uri;
        struct journal *journal;
        struct power_driver *drv;
        virConnectPtr conn;
        nsec_t conn_next_ns, conn_backoff_ns;

        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;       /* new request or quit (CLOCK_MONOTONIC) */
        pthread_cond_t idle_cond;  /* a pass finished, or the thread ended */
        struct apply_request *pending; /* under lock */
        uint64_t submitted, finished;  /* under lock: requests handed over / passes done over them */
        bool quit;                     /* under lock */
        bool restore_on_quit;          /* under lock: applier_stop() */
        bool stopped;                  /* under lock: the thread has ended (and restored, if asked) */
        int restore_result;            /* under lock, once stopped: journal_restore_all()'s */
        struct restore_stats restored; /* under lock, once stopped */
        struct apply_stats stats;      /* under lock (the thread copies its own counters in) */

        /* thread-only state */
        struct apply_stats work;
        struct pin_state *pins;
        size_t n_pins;
        unsigned n_cpus;
        uint32_t *applied_khz;
        int32_t *applied_lat;
        struct knob_retry *khz_retry, *lat_retry; /* [n_cpus] */
        struct retry_counters retry_counters;
        nsec_t check_next_ns;      /* next check of the pins made */
        cpuset_t online;           /* CPUs online now: the kernel's and the last request's (apply_pass()) */
        bool foreign_seen;         /* a pin was someone else's at the last pass: publish the list */
        struct foreign_seed *seeds; /* sorted by (pid, tid): foreign pins read at start (FOREIGN_FILE) */
        size_t n_seeds;
        char *foreign_saved;       /* FOREIGN_FILE's content as last written ("" or NULL: none) */

        struct apply_thread *foreign; /* under lock: applier_foreign_threads() */
        size_t n_foreign;
};

struct apply_request *apply_request_new(size_t n_pins, unsigned n_cpus)
{
        struct apply_request *r = calloc(1, sizeof(*r));

        if (!r)
                return NULL;
        r->n_pins = n_pins;
        r->n_cpus = n_cpus;
        r->pins = calloc(MAX(n_pins, (size_t) 1), sizeof(*r->pins));
        r->cpu_max_khz = calloc(MAX(n_cpus, 1u), sizeof(*r->cpu_max_khz));
        r->cpu_latency_us = calloc(MAX(n_cpus, 1u), sizeof(*r->cpu_latency_us));
        if (!r->pins || !r->cpu_max_khz || !r->cpu_latency_us) {
                apply_request_free(r);
                return NULL;
        }
        for (unsigned c = 0; c < n_cpus; c++)
                r->cpu_latency_us[c] = -1;
        return r;
}

void apply_request_free(struct apply_request *r)
{
        if (!r)
                return;
        free(r->pins);
        free(r->cpu_max_khz);
        free(r->cpu_latency_us);
        free(r);
}

static int pin_cmp(const void *a, const void *b)
{
        const struct apply_pin *x = a, *y = b;

        if (x->pid != y->pid)
                return x->pid < y->pid ? -1 : 1;
        if (x->tid != y->tid)
                return x->tid < y->tid ? -1 : 1;
        return 0;
}

/* ---- libvirt connection (thread only) ---- */

static virConnectPtr applier_conn(struct applier *a, nsec_t now)
{
        if (a->conn) {
                if (virConnectIsAlive(a->conn) == 1)
                        return a->conn;
                virConnectClose(a->conn);
                a->conn = NULL;
        }
        if (!a->libvirt_uri || now < a->conn_next_ns)
                return NULL;
        a->conn = virConnectOpen(a->libvirt_uri);
        if (a->conn) {
                a->work.libvirt_connects++;
                a->conn_backoff_ns = LIBVIRT_RETRY_MIN_NS;
                return a->conn;
        }
        a->work.libvirt_connect_errors++;
        if (a->work.libvirt_connect_errors == 1 || a->conn_backoff_ns >= LIBVIRT_RETRY_MAX_NS)
                log_warning("Applier: cannot connect to libvirt at %s; vCPU pins of libvirt domains wait.",
                            a->libvirt_uri);
        a->conn_backoff_ns = a->conn_backoff_ns ? MIN(a->conn_backoff_ns * 2, LIBVIRT_RETRY_MAX_NS)
                                                : LIBVIRT_RETRY_MIN_NS;
        a->conn_next_ns = now + a->conn_backoff_ns;
        return NULL;
}

/* ---- desired state merge (thread only) ---- */

static int pin_state_cmp(const void *a, const void *b)
{
        return pin_cmp(&((const struct pin_state *) a)->want, &((const struct pin_state *) b)->want);
}

/*
 * A pin of the previous state the new request does not have: let go (a
 * release, as for a VM in mode exclude), unless there is nothing to let go.
 */
static bool pin_to_release(const struct applier *a, const struct pin_state *o)
{
        if (a->cfg.simulate || o->gone)
                return false; /* nothing pinned; or gone, its entry forgotten */
        if (o->foreign || o->held)
                return true; /* kept, so that it stays theirs while its thread lives (check_pins()) */
        if (o->want.cpu == APPLY_RELEASE && o->done)
                return false; /* released (or given up: the restore at exit puts it back) */
        return true;
}

/*
 * Does the request pin libvirt vCPU (uuid, vcpu) of o under another thread?
 * A libvirt pin acts on the domain's vCPU, not on a thread: releasing o's
 * (its old tid) would undo the new pin of the same vCPU.
 */
static bool libvirt_vcpu_requested(const struct apply_request *req, const struct pin_state *o)
{
        if (!o->want.uuid[0])
                return false;
        for (size_t i = 0; i < req->n_pins; i++)
                if (req->pins[i].vcpu == o->want.vcpu && strcmp(req->pins[i].uuid, o->want.uuid) == 0)
                        return true;
        return false;
}

static int seed_cmp(const void *a, const void *b)
{
        const struct foreign_seed *x = a, *y = b;

        if (x->pid != y->pid)
                return x->pid < y->pid ? -1 : 1;
        return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Is the seed's thread still the one left to someone else (its starttime; a libvirt vCPU's: there)? */
static bool seed_alive(const struct foreign_seed *s)
{
        uint64_t st;

        return actuator_thread_starttime(s->pid, s->tid, &st) == 0 && (s->starttime == 0 || st == s->starttime);
}

/* A thread new to this applier that an earlier one left to someone else (FOREIGN_FILE): still theirs. */
static void take_seed(struct applier *a, struct pin_state *p)
{
        struct foreign_seed key = { .pid = p->want.pid, .tid = p->want.tid }, *s;

        if (a->n_seeds == 0 || p->want.tid <= 0 ||
            !(s = bsearch(&key, a->seeds, a->n_seeds, sizeof(key), seed_cmp)) || s->taken)
                return;
        p->foreign = p->done = true;
        p->starttime = s->starttime;
        p->has_orig = s->has_orig;
        p->orig = s->orig;
        s->taken = true;
}

static int merge_request(struct applier *a, struct apply_request *req)
{
        struct pin_state *n = calloc(MAX(req->n_pins + a->n_pins, (size_t) 1), sizeof(*n));
        size_t j = 0, kept = req->n_pins;

        if (!n)
                return -ENOMEM;
        qsort(req->pins, req->n_pins, sizeof(*req->pins), pin_cmp);
        for (size_t i = 0; i < req->n_pins; i++) {
                struct pin_state *p = &n[i];

                p->want = req->pins[i];
                p->applied_cpu = -1;
                while (j < a->n_pins && pin_cmp(&a->pins[j].want, &p->want) < 0)
                        j++;
                if (j < a->n_pins && pin_cmp(&a->pins[j].want, &p->want) == 0 &&
                    strcmp(a->pins[j].want.uuid, p->want.uuid) == 0 && a->pins[j].want.vcpu == p->want.vcpu) {
                        const struct pin_state *o = &a->pins[j];

                        p->applied_cpu = o->applied_cpu;
                        p->starttime = o->starttime;
                        p->dom_id = o->dom_id;
                        p->has_ref = o->has_ref;
                        p->ref = o->ref;
                        p->foreign = o->foreign;
                        p->suspect = o->suspect;
                        p->suspect_hash = o->suspect_hash;
                        p->held = o->held;
                        p->has_orig = o->has_orig;
                        p->orig = o->orig;
                        if (o->want.cpu == p->want.cpu && cpuset_equal(&o->want.set, &p->want.set) && !o->dropped) {
                                p->done = o->done;
                                p->gone = o->gone;
                                p->retry = o->retry;
                                p->widened = o->widened;
                        }
                } else
                        take_seed(a, p);
        }
        /* The threads the request no longer has: their pins are let go. */
        for (size_t i = 0; i < a->n_pins; i++) {
                const struct pin_state *o = &a->pins[i];
                struct pin_state *p;

                if (bsearch(&o->want, req->pins, req->n_pins, sizeof(*req->pins), pin_cmp) || !pin_to_release(a, o) ||
                    libvirt_vcpu_requested(req, o))
                        continue;
                p = &n[kept++];
                *p = *o;
                p->want.cpu = APPLY_RELEASE;
                p->dropped = true;
                if (!o->dropped) {
                        p->done = false;
                        retry_reset(&p->retry);
                }
        }
        qsort(n, kept, sizeof(*n), pin_state_cmp);
        free(a->pins);
        a->pins = n;
        a->n_pins = kept;
        a->work.pins_current = (unsigned) req->n_pins;

        if (req->n_cpus != a->n_cpus) {
                uint32_t *k = realloc(a->applied_khz, MAX(req->n_cpus, 1u) * sizeof(*k));
                int32_t *l;

                if (!k)
                        return -ENOMEM;
                a->applied_khz = k;
                l = realloc(a->applied_lat, MAX(req->n_cpus, 1u) * sizeof(*l));
                if (!l)
                        return -ENOMEM;
                a->applied_lat = l;
                for (int i = 0; i < 2; i++) {
                        struct knob_retry **kr = i ? &a->lat_retry : &a->khz_retry;
                        struct knob_retry *nk = realloc(*kr, MAX(req->n_cpus, 1u) * sizeof(**kr));
                        if (!nk)
                                return -ENOMEM;
                        *kr = nk;
                }
                for (unsigned c = a->n_cpus; c < req->n_cpus; c++) {
                        a->applied_khz[c] = 0;
                        a->applied_lat[c] = LAT_UNKNOWN;
                        a->khz_retry[c] = a->lat_retry[c] = (struct knob_retry) { 0 };
                }
                a->n_cpus = req->n_cpus;
        }
        return 0;
}

/* ---- one pass (thread only) ---- */

/* Put a pin we made back to its original (journal) and forget it: 1, 0 if we never pinned it, -errno. */
static int release_pin(struct applier *a, struct pin_state *p, nsec_t now)
{
        virConnectPtr conn;

        if (!p->want.uuid[0])
                return actuator_release_thread(a->journal, p->want.pid, p->want.tid, p->starttime);
        conn = applier_conn(a, now);
        return conn ? actuator_release_vcpu(a->journal, conn, p->want.uuid, p->want.vcpu, p->dom_id) : -ENOTCONN;
}

static void pin_name(const struct pin_state *p, char *buf, size_t size)
{
        if (p->want.uuid[0])
                snprintf(buf, size, "vCPU %u of domain %s (pid %d, tid %d)", p->want.vcpu, p->want.uuid,
                         (int) p->want.pid, (int) p->want.tid);
        else if (p->want.emulator)
                snprintf(buf, size, "the emulator of plain QEMU pid %d (its main thread)", (int) p->want.pid);
        else
                snprintf(buf, size, "vCPU %u of plain QEMU pid %d (tid %d)", p->want.vcpu, (int) p->want.pid,
                         (int) p->want.tid);
}

/*
 * Someone else changed the pin we made (found: the thread's mask, NULL if
 * libvirt's record told): theirs from now on, as a knob someone else wrote.
 * Its journal entry is forgotten, so that neither a release nor the restore
 * at exit puts our original over their pin.
 */
static uint64_t cpuset_hash(const cpuset_t *s)
{
        uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over the words */

        for (unsigned k = 0; k < VP_MAX_CPUS / 64; k++) {
                h ^= s->w[k];
                h *= 0x100000001b3ULL;
        }
        return h;
}

static void let_go(struct applier *a, struct pin_state *p, const cpuset_t *found)
{
        char key[96], name[160], ours[64] = "?", theirs[64] = "(libvirt's record changed)";
        int r;

        if (p->want.uuid[0])
                r = actuator_vcpu_key(p->want.uuid, p->dom_id, p->want.vcpu, key, sizeof(key));
        else
                r = actuator_thread_key(p->want.pid, p->want.tid, p->starttime, key, sizeof(key));
        if (r == 0) {
                const char *o = journal_original(a->journal,
                                                 p->want.uuid[0] ? JOURNAL_KIND_VCPUPIN : JOURNAL_KIND_AFFINITY, key);

                p->has_orig = o && cpuset_parse_list(o, &p->orig) == 0 && !cpuset_empty(&p->orig);
                r = journal_forget(a->journal, p->want.uuid[0] ? JOURNAL_KIND_VCPUPIN : JOURNAL_KIND_AFFINITY, key);
                if (r < 0)
                        log_warning_errno(r, "Applier: cannot forget the journal entry %s (restore may put our "
                                          "original back over their pin): %m", key);
        }
        p->foreign = true;
        p->done = true;
        p->widened = p->suspect = p->held = false;
        retry_reset(&p->retry);
        a->work.pin_foreign++;
        pin_name(p, name, sizeof(name));
        if (p->has_ref)
                (void) cpuset_format_list(&p->ref, ours, sizeof(ours));
        if (found)
                (void) cpuset_format_list(found, theirs, sizeof(theirs));
        log_notice("Applier: %s runs on CPUs %s where vmmpower pinned it to %s: pinned by someone else, leaving it "
                   "to them (not pinned again, not restored) until it may run on all the CPUs it had before "
                   "vmmpower pinned it again.",
                   name, theirs, ours);
}

/*
 * The CPUs online now: those of req (0..n_cpus-1 if it has none) that the
 * kernel also has online (devices/system/cpu/online under the sysfs root,
 * read each pass: the request may be a control period old).
 */
static void online_cpus(const struct applier *a, const struct apply_request *req, cpuset_t *ret)
{
        cpuset_t k;

        cpuset_zero(ret);
        if (req && !cpuset_empty(&req->online))
                *ret = req->online;
        else
                for (unsigned c = 0; c < a->n_cpus && c < VP_MAX_CPUS; c++)
                        cpuset_set(ret, c);
        if (topology_read_online(a->sysfs_root, &k) == 0 && !cpuset_empty(&k))
                for (unsigned w = 0; w < VP_MAX_CPUS / 64; w++)
                        ret->w[w] &= k.w[w];
}

/* Resolve a suspicion without a verdict (the pin's CPU went offline, the mask went back): a pin or
 * release held back meanwhile is made now. */
static void clear_suspect(struct pin_state *p)
{
        if (p->held) {
                p->done = false;
                retry_reset(&p->retry);
        }
        p->suspect = p->held = false;
}

/*
 * A pin let go: handed back once its thread may run on all the CPUs it had
 * before our first pin that are online (orig; every online CPU if that is
 * unknown or all offline): for a libvirt vCPU, libvirt's record of its pin
 * (a cgroup cpuset may keep the thread itself narrower), else the thread's
 * mask.  A thread found gone is marked so (the next request drops it).
 */
/*
 * A pin let go that holds vmmpower's own mask again (a cpuset narrowed and
 * widened back: from Linux 6.2 the kernel restores the mask asked for; a
 * libvirt record never changed): ours again, journaled again (original: the
 * one read when it was let go, else the online CPUs) so that the restore at
 * exit puts it back.  false if the journal cannot record it (left foreign).
 */
static bool take_back(struct applier *a, struct pin_state *p, const cpuset_t *online)
{
        enum journal_kind kind = p->want.uuid[0] ? JOURNAL_KIND_VCPUPIN : JOURNAL_KIND_AFFINITY;
        char key[96], orig_s[JOURNAL_VALUE_MAX], ref_s[JOURNAL_VALUE_MAX];
        int r;

        if (p->want.uuid[0])
                r = actuator_vcpu_key(p->want.uuid, p->dom_id, p->want.vcpu, key, sizeof(key));
        else
                r = actuator_thread_key(p->want.pid, p->want.tid, p->starttime, key, sizeof(key));
        if (r == 0 && (cpuset_format_list(p->has_orig ? &p->orig : online, orig_s, sizeof(orig_s)) < 0 ||
                       cpuset_format_list(&p->ref, ref_s, sizeof(ref_s)) < 0))
                r = -ENOBUFS;
        if (r == 0)
                r = journal_before_write(a->journal, kind, key, orig_s, ref_s);
        if (r == 0)
                r = journal_note_actual(a->journal, kind, key, ref_s);
        if (r < 0) {
                log_warning_errno(r, "Applier: cannot journal %s again (left to others): %m", key);
                return false;
        }
        return true;
}

static void check_foreign(struct applier *a, struct pin_state *p, const cpuset_t *online, nsec_t now)
{
        cpuset_t need, cur;
        char name[160];
        int r;

        need = *online;
        if (p->has_orig) {
                cpuset_t x = p->orig;
                for (unsigned k = 0; k < VP_MAX_CPUS / 64; k++)
                        x.w[k] &= online->w[k];
                if (!cpuset_empty(&x))
                        need = x;
        }
        r = actuator_thread_affinity(p->want.pid, p->want.tid, p->starttime, &cur);
        if (r == -ESRCH || r == -ENOENT) {
                p->gone = true;
                return;
        }
        if (r == 0 && p->want.uuid[0] && p->want.vcpu != ACTUATOR_EMULATOR) {
                virConnectPtr conn = applier_conn(a, now);
                r = conn ? actuator_vcpu_pin_info(conn, p->want.uuid, p->want.vcpu, p->dom_id, &cur) : -ENOTCONN;
        }
        if (r < 0)
                return;
        pin_name(p, name, sizeof(name));
        if (p->has_ref && cpuset_equal(&cur, &p->ref)) {
                if (!take_back(a, p, online))
                        return;
                p->foreign = false;
                p->done = false; /* as the plan wants it now */
                a->work.pin_handed_back++;
                log_info("Applier: %s holds vmmpower's pin again: vmmpower's again (journaled, restored at exit).",
                         name);
                return;
        }
        if (cpuset_empty(&need) || !cpuset_subset(&need, &cur))
                return;
        p->foreign = p->has_ref = false;
        p->done = false;
        a->work.pin_handed_back++;
        log_info("Applier: %s may run on all the CPUs it had before vmmpower pinned it again: vmmpower places it "
                 "again.", name);
}

/*
 * A pin as made (or one under suspicion, whatever the plan wants of it now):
 * true if found wider than made (pinned again in this pass).  One with a CPU
 * offline is not checked: the kernel moves its thread, the plan its vCPU.
 */
static bool check_made(struct applier *a, struct pin_state *p, const cpuset_t *online)
{
        cpuset_t cur;
        int r;

        if (!p->has_ref || (!p->suspect && (p->dropped || p->want.cpu < 0 || p->applied_cpu != p->want.cpu)))
                return false;
        if (!cpuset_subset(&p->ref, online)) {
                clear_suspect(p);
                return false;
        }
        /* one syscall; whose thread it is, read only when the mask differs */
        r = actuator_tid_affinity(p->want.tid, &cur);
        if (r == 0 && !cpuset_equal(&cur, &p->ref))
                r = actuator_thread_affinity(p->want.pid, p->want.tid, p->starttime, &cur);
        if (r == -ESRCH || r == -ENOENT) {
                p->gone = true; /* its entry goes with the next pin or release of it, or at the restore */
                a->work.pin_gone++;
                p->suspect = p->held = false;
                return false;
        }
        if (r < 0)
                return false;
        if (cpuset_equal(&cur, &p->ref)) {
                clear_suspect(p);
                return false;
        }
        if (cpuset_subset(&p->ref, &cur)) {
                if (p->held || !p->done) {
                        clear_suspect(p); /* the plan's new target (or release) is made, as any */
                        return false;
                }
                p->suspect = false;
                p->widened = true;
                p->done = false;
                retry_reset(&p->retry);
                return true;
        }
        /* changed: someone else's if still so at the next check (the kernel's masks in a hotplug
         * flap pass); not pinned over meanwhile */
        if (p->suspect && p->suspect_hash == cpuset_hash(&cur))
                let_go(a, p, &cur);
        else {
                p->suspect = true;
                p->suspect_hash = cpuset_hash(&cur);
        }
        return false;
}

/*
 * Every pin_check_ns: the kernel's mask of each thread we pinned against the
 * one read back after the pin (see the top); the pins let go, for a hand-back.
 */
static void check_pins(struct applier *a, nsec_t now)
{
        nsec_t every = a->cfg.pin_check_ns ? a->cfg.pin_check_ns : APPLY_PIN_CHECK_NS;
        const cpuset_t *online = &a->online;
        unsigned widened = 0;

        if (a->cfg.simulate || now < a->check_next_ns)
                return;
        a->check_next_ns = now + every;
        for (size_t i = 0; i < a->n_seeds; i++)
                if (!a->seeds[i].taken && !seed_alive(&a->seeds[i]))
                        a->seeds[i].taken = true; /* its thread is gone: nothing left to leave alone */
        for (size_t i = 0; i < a->n_pins; i++) {
                struct pin_state *p = &a->pins[i];

                if ((!p->done && !p->suspect) || p->gone || p->want.tid <= 0)
                        continue; /* a suspect one whatever the plan asks of it now: held until resolved */
                if (p->foreign)
                        check_foreign(a, p, online, now);
                else
                        widened += check_made(a, p, online);
        }
        if (widened == 0)
                return;
        a->work.pin_widened += widened;
        log_notice("Applier: %u pinned thread(s) found running on more CPUs than pinned (a CPU of theirs went "
                   "offline, or a cpuset changed): pinned again (%" PRIu64 " so far).", widened, a->work.pin_widened);
}

/*
 * Before a pin made earlier is moved or released: has its thread's mask
 * changed, and not by widening (nor because a CPU of it went offline)?  Then
 * it is suspect, as at a check, and held: a move must not overwrite a hand
 * pin that the next check would find.  One syscall per move.
 */
static bool changed_since(struct pin_state *p, const cpuset_t *online)
{
        cpuset_t cur, target;

        if (!p->has_ref || p->widened || p->want.tid <= 0 || !cpuset_subset(&p->ref, online) ||
            actuator_tid_affinity(p->want.tid, &cur) < 0 || cpuset_equal(&cur, &p->ref) ||
            cpuset_subset(&p->ref, &cur))
                return false;
        /* already what is about to be made (an earlier attempt that failed after taking effect) */
        cpuset_zero(&target);
        if (p->want.cpu >= 0 && p->want.cpu < VP_MAX_CPUS) {
                if (!cpuset_empty(&p->want.set))
                        target = p->want.set;
                else
                        cpuset_set(&target, (unsigned) p->want.cpu);
                if (cpuset_equal(&cur, &target))
                        return false;
        }
        p->suspect = true;
        p->suspect_hash = cpuset_hash(&cur);
        return true;
}

static void apply_pin_one(struct applier *a, struct pin_state *p, nsec_t now)
{
        cpuset_t want;
        int r;

        if (a->cfg.simulate) {
                /* a dry run pins nothing: it counts what it would pin (nothing to release), and has no journal */
                if (p->want.cpu >= 0 && p->want.cpu < VP_MAX_CPUS) {
                        a->work.pins++;
                        p->applied_cpu = p->want.cpu;
                }
                p->done = true;
                return;
        }
        if (p->foreign || p->suspect || changed_since(p, &a->online)) {
                p->done = true; /* someone else's pin: neither made nor put back (check_pins() hands it back) */
                p->held = p->suspect;
                return;
        }
        if (p->want.cpu == APPLY_RELEASE) {
                r = release_pin(a, p, now);
                if (r == 0) { /* never pinned by us: nothing to put back */
                        p->done = true;
                        p->has_ref = false;
                        retry_reset(&p->retry);
                        return;
                }
                if (r > 0 || r == -ERANGE) {
                        a->work.pin_released++;
                        p->applied_cpu = APPLY_RELEASE;
                        p->done = true;
                        p->has_ref = false; /* no pin of ours left to compare the thread with */
                        retry_reset(&p->retry);
                        return;
                }
        } else if (p->want.cpu < 0 || p->want.cpu >= VP_MAX_CPUS) {
                p->done = true;
                return;
        } else {
                cpuset_zero(&want);
                if (!cpuset_empty(&p->want.set))
                        want = p->want.set;
                else
                        cpuset_set(&want, (unsigned) p->want.cpu);
                if (p->want.uuid[0]) {
                        virConnectPtr conn = applier_conn(a, now);

                        if (!conn)
                                r = -ENOTCONN;
                        else if (p->widened && p->dom_id > 0)
                                r = actuator_repin_vcpu(conn, p->want.uuid, p->want.vcpu, p->dom_id, p->want.pid,
                                                        p->want.tid, &want);
                        else
                                r = actuator_pin_vcpu(a->journal, conn, p->want.uuid, p->want.vcpu, &p->dom_id, &want);
                        if (r == -ESTALE) {
                                /* libvirt records another pin than ours: someone's `virsh vcpupin` */
                                let_go(a, p, NULL);
                                return;
                        }
                } else {
                        /* the starttime of the thread first pinned: its journal key, and a tid
                         * reused by another thread is told apart (-ESRCH) */
                        r = p->starttime ? 0 : actuator_thread_starttime(p->want.pid, p->want.tid, &p->starttime);
                        if (r == 0)
                                r = actuator_pin_thread(a->journal, p->want.pid, p->want.tid, p->starttime, &want);
                }
                if (r == 0 || r == -ERANGE) {
                        if (r == -ERANGE) {
                                a->work.pin_narrowed++;
                                char name[160];
                                pin_name(p, name, sizeof(name));
                                log_debug("Applier: pin of %s to CPU %d was narrowed.", name, p->want.cpu);
                        } else
                                a->work.pins++;
                        p->applied_cpu = p->want.cpu;
                        p->done = true;
                        p->widened = false;
                        retry_reset(&p->retry);
                        /* what check_pins() compares with: the kernel's mask now (0: no thread to read,
                         * a libvirt emulator pin) */
                        p->has_ref = p->want.tid > 0 &&
                                     actuator_thread_affinity(p->want.pid, p->want.tid, p->starttime, &p->ref) == 0;
                        return;
                }
        }
        if (r == -ESRCH || r == -ENOENT) {
                a->work.pin_gone++; /* the next inventory drops it; the actuator forgot its entry */
                if (!p->dropped)
                        a->work.last_error = r; /* a VM that shut down is no error */
                p->done = true;
                p->gone = true;
                p->starttime = 0;
                p->dom_id = 0;
                return;
        }
        a->work.last_error = r;
        a->work.pin_errors++;
        if (a->work.pin_errors == 1 || (a->work.pin_errors & 1023) == 0)
                log_warning_errno(r, "Applier: pinning %s %u of %s (pid %d, tid %d) to CPU %d failed: %m "
                                  "(%" PRIu64 " pin failures so far; retried with backoff)",
                                  p->want.emulator ? "the emulator of VM" : "vCPU",
                                  p->want.emulator ? 0 : p->want.vcpu, p->want.uuid[0] ? p->want.uuid : "plain QEMU",
                                  (int) p->want.pid,
                                  (int) p->want.tid, p->want.cpu, a->work.pin_errors);
        if (p->want.uuid[0] && a->conn && virConnectIsAlive(a->conn) != 1) {
                virConnectClose(a->conn);
                a->conn = NULL;
        }
        if (retry_schedule(&p->retry, &BACKOFF_DEFAULT, now, &a->retry_counters))
                a->work.pin_retries++;
        else {
                a->work.pin_gave_up++;
                p->done = true; /* until the plan wants something else for it */
                if (p->widened)
                        p->has_ref = p->widened = false; /* not checked again until pinned anew: no loop */
        }
}

/* May the target be tried now?  A new target is; a failed one when its backoff is over. */
static bool knob_try_now(struct knob_retry *kr, int64_t target, nsec_t now, nsec_t *next)
{
        if (!kr->failed || kr->target != target) {
                *kr = (struct knob_retry) { .target = target };
                return true;
        }
        if (retry_due(&kr->retry, now))
                return true;
        *next = MIN(*next, kr->retry.next_ns);
        return false;
}

/*
 * Book one driver answer for a knob target.  Returns true when the target
 * counts as applied (done until the plan wants another value), false when
 * it stays pending and is retried after KNOB_BACKOFF.
 */
static bool knob_result(struct applier *a, struct knob_retry *kr, int r, bool is_change, nsec_t now, nsec_t *next)
{
        if (kr->failed)
                a->work.knob_retries++;
        switch (r) {
        case 0:
        case -ERANGE: /* clamped by the kernel, or the value rejected (the driver remembers it) */
                if (is_change)
                        a->work.knob_changes++;
                break;
        case -EOPNOTSUPP:
                a->work.knob_unsupported++;
                break;
        case -ENOENT:
        case -ENODEV:
                a->work.knob_gone++;
                break;
        case -POWER_KNOB_FOREIGN:
                a->work.knob_foreign++;
                break;
        case -EINVAL:
        case -EOVERFLOW:
        case -E2BIG:
                a->work.knob_errors++; /* rejected: the same value would be refused again */
                a->work.last_error = r;
                break;
        default:
                a->work.knob_errors++;
                a->work.last_error = r;
                kr->failed = true;
                (void) retry_schedule(&kr->retry, &KNOB_BACKOFF, now, NULL);
                *next = MIN(*next, kr->retry.next_ns);
                return false;
        }
        *kr = (struct knob_retry) { 0 };
        return true;
}

static nsec_t apply_knobs(struct applier *a, const struct apply_request *req, nsec_t now, nsec_t next)
{
        for (unsigned c = 0; c < req->n_cpus && c < a->n_cpus; c++) {
                uint32_t khz = req->cpu_max_khz[c];
                int32_t lat = req->cpu_latency_us[c];
                int r;

                /* A target that failed and then went back to the applied value is written
                 * once more: it supersedes a retry the driver may still hold (EBUSY). */
                if (khz && (khz != a->applied_khz[c] || a->khz_retry[c].failed) &&
                    knob_try_now(&a->khz_retry[c], khz, now, &next)) {
                        struct power_perf_request pr = { .flags = POWER_PERF_MAX_KHZ, .max_khz = khz };

                        r = power_driver_set_perf(a->drv, c, &pr);
                        if (knob_result(a, &a->khz_retry[c], r, true, now, &next))
                                a->applied_khz[c] = khz;
                }
                if ((lat != a->applied_lat[c] || a->lat_retry[c].failed) &&
                    knob_try_now(&a->lat_retry[c], lat, now, &next)) {
                        struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = lat };
                        /* lifting a limit never set (first plan, no limit) is no change */
                        bool is_change = a->applied_lat[c] != LAT_UNKNOWN || lat >= 0;

                        r = power_driver_enter_idle(a->drv, c, &ic);
                        if (r == -EOPNOTSUPP && lat < 0)
                                r = 0; /* no PM QoS knob: "no limit" holds */
                        if (knob_result(a, &a->lat_retry[c], r, is_change, now, &next))
                                a->applied_lat[c] = lat;
                }
        }
        return next;
}

static nsec_t apply_pass(struct applier *a, const struct apply_request *req, nsec_t now)
{
        nsec_t next = now + APPLY_IDLE_WAIT_NS;

        power_driver_set_now(a->drv, now);
        if (!a->cfg.simulate)
                online_cpus(a, req, &a->online);
        check_pins(a, now);
        for (size_t i = 0; i < a->n_pins; i++) {
                struct pin_state *p = &a->pins[i];

                if (p->done)
                        continue;
                if (p->retry.pending && !retry_due(&p->retry, now)) {
                        next = MIN(next, p->retry.next_ns);
                        continue;
                }
                apply_pin_one(a, p, now);
                if (!p->done && p->retry.pending)
                        next = MIN(next, p->retry.next_ns);
        }
        if (req)
                next = apply_knobs(a, req, now, next);
        (void) power_driver_late_callback(a->drv, now);
        return next;
}

static void publish_stats(struct applier *a, nsec_t t0, nsec_t cpu0)
{
        struct power_driver_stats *ds = power_driver_stats(a->drv);

        a->work.last_pass_ns = now_ns() - t0;
        a->work.last_pass_cpu_ns = thread_cputime_ns() - cpu0;
        a->work.driver_writes = ds->writes;
        a->work.driver_clamped = ds->clamped;
        a->work.driver_denied = ds->denied + ds->class_disabled;
        a->work.driver_busy = ds->busy;
        a->work.driver_foreign = ds->foreign;
        a->work.driver_class_retries = ds->class_retries;
        a->work.driver_pending_retries = power_driver_pending_retries(a->drv);
        a->work.journal_errors = a->journal ? journal_error_count(a->journal) : 0;
        a->work.driver_classes_disabled = 0;
        for (unsigned c = 0; c < _POWER_KNOB_CLASS_MAX; c++)
                if (power_driver_class_disabled(a->drv, (enum power_knob_class) c))
                        a->work.driver_classes_disabled |= 1u << c;
}

static void foreign_line(struct strbuf *sb, pid_t pid, pid_t tid, uint64_t starttime, bool has_orig,
                         const cpuset_t *orig)
{
        char list[JOURNAL_VALUE_MAX];

        if (!has_orig || cpuset_format_list(orig, list, sizeof(list)) < 0)
                snprintf(list, sizeof(list), "-");
        strbuf_printf(sb, "%d %d %" PRIu64 " %s\n", (int) pid, (int) tid, starttime, list);
}

/*
 * FOREIGN_FILE in the state directory: the foreign pins and the seeds not
 * taken yet, "PID TID STARTTIME ORIGINAL-CPULIST" a line, rewritten when
 * that changes (removed when there are none), so that the next applier (a
 * reload, a restart, a crash) leaves them to their owner too.
 */
static void foreign_save(struct applier *a)
{
        char path[PATH_MAX];
        struct strbuf sb;
        size_t n = 0;
        int r;

        if (a->cfg.simulate)
                return;
        strbuf_init(&sb);
        strbuf_puts(&sb, FOREIGN_MAGIC "\n");
        for (size_t i = 0; i < a->n_pins; i++) {
                const struct pin_state *p = &a->pins[i];
                if (p->foreign && !p->gone && n++ < FOREIGN_MAX)
                        foreign_line(&sb, p->want.pid, p->want.tid, p->starttime, p->has_orig, &p->orig);
        }
        for (size_t i = 0; i < a->n_seeds; i++)
                if (!a->seeds[i].taken && n++ < FOREIGN_MAX)
                        foreign_line(&sb, a->seeds[i].pid, a->seeds[i].tid, a->seeds[i].starttime,
                                     a->seeds[i].has_orig, &a->seeds[i].orig);
        if (sb.oom || (n == 0 ? !a->foreign_saved || !a->foreign_saved[0]
                              : a->foreign_saved && strcmp(a->foreign_saved, sb.data) == 0)) {
                strbuf_free(&sb);
                return;
        }
        path_printf(path, sizeof(path), "%s/" FOREIGN_FILE, a->state_dir);
        r = n == 0 ? (unlink(path) < 0 && errno != ENOENT ? -errno : 0)
                   : write_file_atomic(path, sb.data, sb.len, 0600);
        if (r < 0)
                /* not tried again until the set changes: a state directory that cannot be written
                 * would be logged every pass */
                log_warning_errno(r, "Applier: cannot write %s (a restart may pin over the pins left to others): %m",
                                  path);
        free(a->foreign_saved);
        a->foreign_saved = n == 0 ? NULL : sb.data; /* owned now */
        if (n == 0)
                strbuf_free(&sb);
}

/* One FOREIGN_FILE line into *s: 0, or -EINVAL (the line is skipped). */
static int foreign_parse(char *line, struct foreign_seed *s)
{
        char *f[4], *save = NULL;
        int pid, tid, k = 0;

        for (char *t = strtok_r(line, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
                if (k++ < 4)
                        f[k - 1] = t;
        *s = (struct foreign_seed) { 0 };
        if (k != 4 || parse_int(f[0], &pid) < 0 || parse_int(f[1], &tid) < 0 || pid <= 0 || tid <= 0 ||
            parse_u64(f[2], &s->starttime) < 0)
                return -EINVAL;
        s->pid = pid;
        s->tid = tid;
        if (strcmp(f[3], "-") != 0) {
                if (cpuset_parse_list(f[3], &s->orig) < 0 || cpuset_empty(&s->orig))
                        return -EINVAL;
                s->has_orig = true;
        }
        return 0;
}

/* At start: the foreign pins an earlier applier left (FOREIGN_FILE), those whose threads live. */
static void foreign_load(struct applier *a)
{
        char path[PATH_MAX], *line = NULL;
        size_t cap = 0, bad = 0, alloc = 0;
        ssize_t len;
        FILE *f;

        path_printf(path, sizeof(path), "%s/" FOREIGN_FILE, a->state_dir);
        f = fopen(path, "re");
        if (!f) {
                if (errno != ENOENT)
                        log_warning_errno(-errno, "Applier: cannot read %s: %m", path);
                return;
        }
        /* it is there: removed by the first foreign_save() if nothing in it holds */
        a->foreign_saved = strdup("?");
        len = getline(&line, &cap, f);
        if (len < 0 || strcmp(line, FOREIGN_MAGIC "\n") != 0)
                bad++;
        while (!bad && (len = getline(&line, &cap, f)) >= 0 && a->n_seeds < FOREIGN_MAX) {
                struct foreign_seed s;
                if (foreign_parse(line, &s) < 0) {
                        bad++;
                        continue;
                }
                if (!seed_alive(&s))
                        continue;
                if (array_grow((void **) &a->seeds, &alloc, a->n_seeds + 1, sizeof(s)) < 0)
                        break;
                a->seeds[a->n_seeds++] = s;
        }
        free(line);
        fclose(f);
        qsort(a->seeds, a->n_seeds, sizeof(*a->seeds), seed_cmp);
        if (bad)
                log_warning("Applier: %s: %zu line(s) not understood, skipped.", path, bad);
        if (a->n_seeds)
                log_info("Applier: %zu vCPU thread(s) pinned by someone else under an earlier run: left to them.",
                         a->n_seeds);
}

/*
 * The threads whose pins are someone else's, for applier_foreign_threads():
 * a new list when there are any or were at the last pass (NULL, 0 when none
 * now); *changed false when there is nothing to publish.
 */
static struct apply_thread *foreign_list(struct applier *a, size_t *n, bool *changed)
{
        struct apply_thread *l = NULL;
        size_t k = 0;

        *n = 0;
        *changed = false;
        for (size_t i = 0; i < a->n_pins; i++)
                k += a->pins[i].foreign && !a->pins[i].gone;
        a->work.pins_foreign = (unsigned) k;
        if (k == 0 && !a->foreign_seen)
                return NULL;
        *changed = true;
        a->foreign_seen = k > 0;
        if (k == 0 || !(l = calloc(k, sizeof(*l))))
                return NULL; /* none now; or no memory: none is published (their vCPUs are planned, not pinned) */
        for (size_t i = 0; i < a->n_pins; i++)
                if (a->pins[i].foreign && !a->pins[i].gone)
                        l[(*n)++] = (struct apply_thread) { a->pins[i].want.pid, a->pins[i].want.tid };
        return l;
}

/* The power driver found a knob changed by someone else: said once, here. */
static void applier_on_foreign(void *userdata, const char *path, const char *ours, const char *found)
{
        struct applier *a = userdata;
        char o[64], f[64];

        escape_bytes(ours, strlen(ours), o, sizeof(o));
        escape_bytes(found, strlen(found), f, sizeof(f));
        log_notice("%s/%s holds \"%s\", vmmpower last wrote \"%s\": changed by someone else, leaving it to them "
                   "(not written again, not restored).", a->sysfs_root, path, f, o);
}

/* What the sysfs driver has for the operator (given up, class disabled / enabled, failures): said here. */
static void applier_on_event(void *userdata, const struct power_event *ev)
{
        struct applier *a = userdata;
        char msg[512];

        power_event_format(ev, msg, sizeof(msg));
        log_full_errno(power_event_level(ev), 0, "%s/%s", a->sysfs_root, msg);
}

/*
 * applier_stop(), on the thread: close the driver and the journal, then
 * restore the journal as `vmmpowerd --restore` would, libvirt pins through
 * this thread's connection (opened now if there is none, whatever the backoff).
 */
static void stop_and_restore(struct applier *a)
{
        struct restore_stats st = { 0 };
        virConnectPtr conn = NULL;
        int r;

        a->drv = power_driver_free(a->drv);
        a->journal = journal_free(a->journal);
        if (a->cfg.simulate)
                return; /* nothing was changed, and the journal is not ours */
        if (a->libvirt_uri) {
                a->conn_next_ns = 0;
                conn = applier_conn(a, now_ns());
        }
        r = journal_restore_all(a->state_dir, a->sysfs_root, conn, &st);
        pthread_mutex_lock(&a->lock);
        a->restore_result = r;
        a->restored = st;
        pthread_mutex_unlock(&a->lock);
}

static void *applier_thread(void *userdata)
{
        struct applier *a = userdata;
        struct apply_request *cur = NULL;
        nsec_t next = now_ns();
        bool restore;

        pthread_mutex_lock(&a->lock);
        for (;;) {
                uint64_t taken;
                nsec_t now, t0, cpu0;
                struct apply_thread *foreign;
                size_t n_foreign;
                bool foreign_changed;

                while (!a->quit && !a->pending && now_ns() < next) {
                        struct timespec ts = { .tv_sec = next / NSEC_PER_SEC, .tv_nsec = next % NSEC_PER_SEC };
                        (void) pthread_cond_timedwait(&a->cond, &a->lock, &ts);
                }
                if (a->quit)
                        break;
                if (a->pending) {
                        apply_request_free(cur);
                        cur = a->pending;
                        a->pending = NULL;
                }
                taken = a->submitted;
                pthread_mutex_unlock(&a->lock);

                t0 = now = now_ns();
                cpu0 = thread_cputime_ns();
                if (cur && cur->pins) {
                        int r = merge_request(a, cur);
                        if (r < 0) {
                                a->work.last_error = r;
                                log_warning_errno(r, "Applier: cannot take the new desired state: %m");
                        }
                        /* merged: the pins now live in a->pins; keep the knobs part */
                        free(cur->pins);
                        cur->pins = NULL;
                        cur->n_pins = 0;
                }
                next = apply_pass(a, cur, now);
                a->work.passes++;
                publish_stats(a, t0, cpu0);
                foreign = foreign_list(a, &n_foreign, &foreign_changed);
                foreign_save(a);

                pthread_mutex_lock(&a->lock);
                if (foreign_changed) {
                        free(a->foreign);
                        a->foreign = foreign;
                        a->n_foreign = n_foreign;
                }
                a->work.requests = a->stats.requests;
                a->work.superseded = a->stats.superseded;
                a->stats = a->work;
                a->finished = taken;
                pthread_cond_broadcast(&a->idle_cond);
        }
        restore = a->restore_on_quit;
        pthread_mutex_unlock(&a->lock);
        apply_request_free(cur);
        if (restore)
                stop_and_restore(a);
        pthread_mutex_lock(&a->lock);
        a->stopped = true;
        pthread_cond_broadcast(&a->idle_cond);
        pthread_mutex_unlock(&a->lock);
        return NULL;
}

/* The dry run's driver: the sim backend, in memory. */
static int applier_start_sim(struct applier *a)
{
        struct power_driver_config dc = { .n_cpus = a->cfg.n_cpus, .sim_max_khz = a->cfg.sim_max_khz };
        int r;

        if (a->cfg.n_cpus == 0)
                return -EINVAL;
        r = power_driver_new("sim", &dc, &a->drv);
        if (r < 0)
                log_error_errno(r, "Failed to set up the sim power driver: %m");
        return r;
}

int applier_new(const struct apply_config *cfg, struct applier **ret)
{
        struct power_driver_config dc = { 0 };
        struct power_sysfs_info info = { 0 };
        pthread_condattr_t ca;
        struct applier *a;
        int r;

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->cfg = *cfg;
        a->state_dir = strdup(cfg->state_dir);
        a->sysfs_root = strdup(cfg->sysfs_root ? cfg->sysfs_root : "/sys");
        a->libvirt_uri = cfg->libvirt_uri ? strdup(cfg->libvirt_uri) : NULL;
        if (!a->state_dir || !a->sysfs_root || (cfg->libvirt_uri && !a->libvirt_uri)) {
                r = -ENOMEM;
                goto fail;
        }
        if (cfg->simulate) {
                r = applier_start_sim(a);
                if (r < 0)
                        goto fail;
                goto start;
        }
        r = journal_open(a->state_dir, &a->journal);
        if (r < 0) {
                log_error_errno(r, "Failed to open the journal in %s: %m", a->state_dir);
                goto fail;
        }
        journal_report_load(a->journal, a->state_dir);
        journal_set_sync(a->journal, cfg->journal_sync);
        foreign_load(a);
        dc.sysfs_root = a->sysfs_root;
        dc.journal = a->journal;
        dc.on_foreign = applier_on_foreign;
        dc.foreign_userdata = a;
        dc.on_event = applier_on_event;
        dc.event_userdata = a;
        dc.foreign_classes = cfg->foreign_classes;
        dc.foreign_paths = cfg->foreign_paths;
        r = power_driver_new("sysfs", &dc, &a->drv);
        if (r < 0) {
                log_error_errno(r, "Failed to set up the sysfs power driver under %s: %m", a->sysfs_root);
                goto fail;
        }
        a->work.driver_foreign = power_driver_stats(a->drv)->foreign;
        if (power_sysfs_get_info(a->drv, &info) == 0) {
                a->work.driver_policies = info.n_policies;
                a->work.driver_pm_qos = info.n_pm_qos;
        }
start:
        a->cfg.foreign_paths = NULL; /* the caller's, read above */
        a->work.simulated = cfg->simulate;
        a->stats = a->work;
        pthread_mutex_init(&a->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&a->cond, &ca);
        pthread_cond_init(&a->idle_cond, &ca);
        pthread_condattr_destroy(&ca);
        r = -pthread_create(&a->thread, NULL, applier_thread, a);
        if (r < 0) {
                pthread_cond_destroy(&a->cond);
                pthread_cond_destroy(&a->idle_cond);
                pthread_mutex_destroy(&a->lock);
                log_error_errno(r, "Failed to start the applier thread: %m");
                goto fail;
        }
        if (cfg->simulate)
                log_info("Applier (dry run): sim power driver for %u CPUs; no pin, no knob write, no journal.",
                         cfg->n_cpus);
        else
                log_info("Applier: journal in %s, %u cpufreq policies and %u PM QoS knobs under %s (%u left to "
                         "others from the start), libvirt pins %s.",
                         a->state_dir, info.n_policies, info.n_pm_qos, a->sysfs_root,
                         power_driver_stats(a->drv)->foreign, a->libvirt_uri ? a->libvirt_uri : "off");
        *ret = a;
        return 0;
fail:
        power_driver_free(a->drv);
        journal_free(a->journal);
        free(a->seeds);
        free(a->foreign_saved);
        free(a->state_dir);
        free(a->sysfs_root);
        free(a->libvirt_uri);
        free(a);
        return r;
}

void applier_free(struct applier *a)
{
        if (!a)
                return;
        pthread_mutex_lock(&a->lock);
        a->quit = true;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->thread, NULL);
        apply_request_free(a->pending);
        if (a->conn)
                virConnectClose(a->conn);
        power_driver_free(a->drv);
        journal_free(a->journal);
        pthread_cond_destroy(&a->cond);
        pthread_cond_destroy(&a->idle_cond);
        pthread_mutex_destroy(&a->lock);
        free(a->pins);
        free(a->foreign);
        free(a->seeds);
        free(a->foreign_saved);
        free(a->applied_khz);
        free(a->applied_lat);
        free(a->khz_retry);
        free(a->lat_retry);
        free(a->state_dir);
        free(a->sysfs_root);
        free(a->libvirt_uri);
        free(a);
}

void applier_stop(struct applier *a)
{
        pthread_mutex_lock(&a->lock);
        a->quit = true;
        a->restore_on_quit = true;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
}

bool applier_stopped(struct applier *a, bool wait, int *ret_result, struct restore_stats *ret)
{
        bool done;

        pthread_mutex_lock(&a->lock);
        while (wait && !a->stopped)
                pthread_cond_wait(&a->idle_cond, &a->lock);
        done = a->stopped;
        if (done && ret_result)
                *ret_result = a->restore_result;
        if (done && ret)
                *ret = a->restored;
        pthread_mutex_unlock(&a->lock);
        return done;
}

const char *applier_state_dir(const struct applier *a)
{
        return a->state_dir;
}

void applier_submit(struct applier *a, struct apply_request *r)
{
        struct apply_request *old;

        pthread_mutex_lock(&a->lock);
        old = a->pending;
        a->pending = r;
        a->submitted++;
        a->stats.requests++;
        if (old)
                a->stats.superseded++;
        pthread_cond_signal(&a->cond);
        pthread_mutex_unlock(&a->lock);
        apply_request_free(old);
}

void applier_get_stats(struct applier *a, struct apply_stats *ret)
{
        pthread_mutex_lock(&a->lock);
        *ret = a->stats;
        pthread_mutex_unlock(&a->lock);
}

int applier_foreign_threads(struct applier *a, struct apply_thread **ret, size_t *n)
{
        struct apply_thread *l = NULL;
        int r = 0;

        pthread_mutex_lock(&a->lock);
        if (a->n_foreign > 0 && (l = malloc(a->n_foreign * sizeof(*l))))
                memcpy(l, a->foreign, a->n_foreign * sizeof(*l));
        else if (a->n_foreign > 0)
                r = -ENOMEM;
        *n = l ? a->n_foreign : 0;
        pthread_mutex_unlock(&a->lock);
        *ret = l;
        return r;
}

int applier_wait_idle(struct applier *a, nsec_t timeout_ns)
{
        nsec_t until = now_ns() + timeout_ns;
        int r = 0;

        pthread_mutex_lock(&a->lock);
        while (a->finished < a->submitted || a->pending) {
                struct timespec ts = { .tv_sec = until / NSEC_PER_SEC, .tv_nsec = until % NSEC_PER_SEC };

                if (pthread_cond_timedwait(&a->idle_cond, &a->lock, &ts) == ETIMEDOUT) {
                        r = -ETIMEDOUT;
                        break;
                }
        }
        pthread_mutex_unlock(&a->lock);
        return r;
}
