/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vCPU load tracking.
 *
 * Inventory.  Each discovery source (libvirt, /proc scan, QMP) hands the
 * tracker a full snapshot of what it knows; the tracker keeps one array per
 * source, sorted by QEMU pid, and merges them by pid into one array of VMs,
 * also sorted by pid (lookups are binary searches: no O(n^2) at 10,000
 * threads).  For one pid:
 *   - name, UUID, libvirt id: libvirt wins, then QMP, then the /proc scan;
 *   - sources: the union of the bits of every source that reports the pid;
 *   - the vCPU list: merged by vCPU index, each from the first source in
 *     libvirt > QMP > proc order whose (index, tid) is usable, one vCPU per
 *     thread (a tid a better source lists under another index is not taken
 *     again).  A source's list may be out of date (libvirt raises no event
 *     for setvcpus --live; the QMP source keeps a VM's last good answer): so
 *     a vCPU hot-plugged after libvirt's last snapshot comes from the /proc
 *     scan, and libvirt's stale entry for an unplugged one is ignored.
 * Thread identity.  A tid not carried over is opened only when its comm is
 * "CPU <index>/KVM" or "CPU <index>/TCG" (open_vcpu()), and a (index, tid)
 * seen gone or refused is never opened again while a source lists it
 * (vm_entry.refused): a stale tid may belong to another thread of the QEMU
 * by now (pid wrap), which must not be sampled and pinned as the vCPU.
 * tracker_set_source() builds the whole new state aside (new arrays, new
 * fds) and swaps it in only when everything succeeded; on -ENOMEM the old
 * state is untouched and the fds opened meanwhile are closed.
 *
 * Sampling.  One fd per vCPU thread, opened once on
 * <procfs>/<pid>/task/<tid>/schedstat (O_RDONLY|O_CLOEXEC) and read with
 * pread() at offset 0 every period: about 1-2 us per thread against ~6 us for
 * open+read+close (bench/track_bench.c measures it).  An fd is carried over
 * an inventory update when the vCPU keeps its index and tid; a changed tid
 * gets a new fd.  ESRCH (and ENOENT) on read means the thread exited: the
 * vCPU is marked gone and counted, and dropped from the VM at the next
 * inventory update (never reopened); a VM with vCPUs that are all gone is
 * dropped in the same tracker_sample() call, so a destroyed VM disappears
 * within one period even before libvirt's lifecycle event arrives.  A tid
 * reused by another thread is no problem here: the kept fd refers to the
 * thread it was opened on and returns ESRCH.  The hot path allocates nothing
 * and logs nothing: it updates counters in struct tracker_stats.
 *
 * BPF sampling (schedstat_bpf.c).  When the procfs root is the real /proc
 * and the BPF task iterator loads (root, kernel BTF, libbpf at build time),
 * one read() pass over the iterator returns the same three counters for
 * every thread of every tracked QEMU process: a few hundred ns per thread
 * instead of one pread() syscall each.  Userspace keeps the set of tracked
 * QEMU pids in the BPF map (updated at inventory changes and drops) and an
 * open-addressing hash tid -> vCPU (capacity a power of two >= 2x the
 * threads, allocated at inventory updates, rebuilt in place after a drop), so
 * matching a record is O(1).  A tracked thread absent from the pass has
 * exited: the same "gone" as ESRCH on its fd.  A record matches on (tid,
 * tgid), which another thread of the same QEMU may have taken: the record
 * carries the task's start time, stored at the first sight (when one pread()
 * on the kept fd vouches that the thread it was opened on still lives) and
 * compared at every pass; another start time is "gone" too
 * (bpf_same_thread()).  The kept fds stay open in BPF mode: they are the
 * fallback when a pass fails (logged once, pread() from then on) and that
 * first-sight check.  If the iterator cannot load, the tracker logs that
 * once and uses pread().
 *
 * Per period, for one vCPU thread, with dt the wall time between samples:
 *   util            = (d run_ns - d halt_poll_ns) / dt x scale / 1024
 *                                                          clamped to [0, 1]
 *   wait_ratio      = d wait_ns / dt                       clamped to [0, 1]
 *   halt_poll_ratio = d halt_poll_ns / dt                  clamped to [0, 1]
 * Halt polling (KVM spinning in the host before a vCPU sleeps) is on-CPU time
 * that is idle for the guest, so it is subtracted when known.  scale is the
 * capacity the thread ran at in the period (tracker_set_load_scale(), 1024 =
 * the top level, and when not set): busy time at half the top frequency is
 * half the work, so util is frequency-invariant, in the planner's unit.  wait_ratio is
 * the run-queue delay of one thread; a single thread cannot wait longer than
 * the wall time, so its bound is 1 (a per-VM sum would be bounded by n_vcpus).
 *
 * Decayed averages: an exponentially weighted moving average corrected for
 * irregular periods,
 *   avg += alpha * (x - avg),   alpha = 1 - 2^(-dt / half_life)
 * so that the weight of a sample halves every half_life of wall time whatever
 * the period is (alpha(dt = half_life) = 0.5; two periods of dt weigh exactly
 * like one of 2*dt).  The first valid period initialises the average.
 * Default half-life: 4 s (TRACKER_DEFAULT_HALF_LIFE_NS).  With the 1 s
 * control period a step change reaches 50% of its size in 4 periods and 84%
 * in about 10, so the planner reacts within a few seconds, while a single
 * one-period spike moves the average by only alpha(1 s) = 16%: not enough to
 * cross the planner's hysteresis band and re-place a VM.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "procscan.h"
#include "schedstat_bpf.h"
#include "vcpu_track.h"

struct vcpu_priv {
        int fd;               /* -1 once gone or when opening failed */
        bool have_prev;       /* one sample taken (the next one gives a rate) */
        bool carried;         /* scratch for tracker_set_source() */
        bool start_known;     /* start_ns is this thread's (BPF) */
        bool retry;           /* fd < 0: the open failed, not for a gone thread (tried again) */
        nsec_t last_ns;       /* time of the previous sample */
        uint64_t prev_halt_poll_ns;
        uint64_t seen_gen;    /* BPF pass that last reported this thread */
        uint64_t start_ns;    /* task->start_time at the first BPF sight */
        uint16_t scale;       /* capacity for the next sample, 1..1024; 0 = not set (1024) */
};

/* A (vCPU index, tid) pair; sorted by index, then tid. */
struct vcpu_id {
        int index;
        pid_t tid;
};

/* Slot of the tid hash (BPF sampling); empty when v == NULL. */
struct tid_slot {
        pid_t tid;
        pid_t pid;
        struct vcpu_load *v;
        struct vcpu_priv *p;
};

struct vm_entry {
        struct vm_load load;  /* first: tracker_vm() returns &entry->load */
        struct vcpu_priv *priv; /* load.n_vcpus entries */
        /* (index, tid) pairs seen gone or refused for their name, never opened again; kept while a
         * source still lists them (a stale list), so at most the number of pairs the sources list */
        struct vcpu_id *refused;
        unsigned n_refused;
};

struct source_state {
        struct vm_info *vms;  /* sorted by pid, unique pids */
        size_t n;
};

struct tracker {
        char *procfs_root;
        nsec_t half_life_ns;
        struct source_state sources[VM_N_SOURCES];
        struct vm_entry *vms; /* sorted by pid */
        size_t n_vms;
        size_t *order;        /* indexes into vms, sorted by name then pid */
        size_t n_threads;
        struct tracker_stats stats;
        /* alpha cache: consecutive vCPUs nearly always share dt */
        nsec_t alpha_dt_ns;
        double alpha;
        /* BPF sampling; bpf == NULL: pread() on the kept fds */
        struct schedstat_bpf *bpf;
        struct tid_slot *tids; /* tids_cap slots, a power of two */
        size_t tids_cap;
        bool tids_dirty;      /* a VM was dropped: rebuild before the next pass */
        uint64_t gen;
        nsec_t pass_now;
        bool misnamed_logged;  /* the first refused vCPU name was logged at warning */
};

int schedstat_parse(const char *s, struct schedstat *ret)
{
        uint64_t v[3];
        const char *p = s;

        for (int i = 0; i < 3; i++) {
                char field[21];
                size_t len = 0;

                while (p[len] >= '0' && p[len] <= '9')
                        len++;
                if (len == 0 || len >= sizeof(field))
                        return -EINVAL;
                memcpy(field, p, len);
                field[len] = '\0';
                if (parse_u64(field, &v[i]) < 0)
                        return -EINVAL;
                p += len;
                if (i < 2) {
                        if (*p != ' ')
                                return -EINVAL;
                        p++;
                }
        }
        if (*p == '\n')
                p++;
        if (*p != '\0')
                return -EINVAL;

        *ret = (struct schedstat) { .run_ns = v[0], .wait_ns = v[1], .timeslices = v[2] };
        return 0;
}

double tracker_decay_alpha(nsec_t dt_ns, nsec_t half_life_ns)
{
        if (dt_ns <= 0)
                return 0.0;
        if (half_life_ns <= 0)
                return 1.0;
        return 1.0 - exp2(-(double) dt_ns / (double) half_life_ns);
}

static double clamp(double x, double lo, double hi)
{
        return x < lo ? lo : x > hi ? hi : x;
}

static bool is_real_proc(const char *root)
{
        return strcmp(root, "/proc") == 0 || strcmp(root, "/proc/") == 0;
}

static size_t tids_cap_for(size_t n_threads)
{
        size_t cap = 16;

        while (cap < 2 * n_threads)
                cap *= 2;
        return cap;
}

static size_t tid_hash(pid_t tid, size_t cap)
{
        return (size_t) (((uint32_t) tid * UINT32_C(2654435761)) >> 7) & (cap - 1);
}

/* Fill the tid hash from the current VMs (alive threads only); fits by construction. */
static void tids_rebuild(struct tracker *tr)
{
        if (!tr->tids)
                return;
        memset(tr->tids, 0, tr->tids_cap * sizeof(*tr->tids));
        for (size_t i = 0; i < tr->n_vms; i++) {
                struct vm_entry *e = &tr->vms[i];

                for (unsigned k = 0; k < e->load.n_vcpus; k++) {
                        size_t h;

                        if (e->priv[k].fd < 0)
                                continue;
                        h = tid_hash(e->load.vcpus[k].tid, tr->tids_cap);
                        while (tr->tids[h].v)
                                h = (h + 1) & (tr->tids_cap - 1);
                        tr->tids[h] = (struct tid_slot) { .tid = e->load.vcpus[k].tid, .pid = e->load.info.pid,
                                                          .v = &e->load.vcpus[k], .p = &e->priv[k] };
                }
        }
        tr->tids_dirty = false;
}

static void tracker_bpf_stop(struct tracker *tr)
{
        schedstat_bpf_free(tr->bpf);
        tr->bpf = NULL;
        free(tr->tids);
        tr->tids = NULL;
        tr->tids_cap = 0;
}

int tracker_use_bpf(struct tracker *tr, bool enable)
{
        struct schedstat_bpf *b = NULL;
        struct tid_slot *tids;
        size_t cap;
        int r;

        if (!enable) {
                tracker_bpf_stop(tr);
                return 0;
        }
        if (tr->bpf)
                return 0;
        if (!is_real_proc(tr->procfs_root))
                return -EOPNOTSUPP; /* a fixture tree: the kernel's threads are not its threads */
        r = schedstat_bpf_new(&b);
        if (r < 0)
                return r;
        for (size_t i = 0; i < tr->n_vms; i++) {
                r = schedstat_bpf_track(b, tr->vms[i].load.info.pid);
                if (r < 0) {
                        schedstat_bpf_free(b);
                        return r;
                }
        }
        cap = tids_cap_for(tr->n_threads);
        tids = calloc(cap, sizeof(*tids));
        if (!tids) {
                schedstat_bpf_free(b);
                return -ENOMEM;
        }
        tr->bpf = b;
        tr->tids = tids;
        tr->tids_cap = cap;
        tids_rebuild(tr);
        return 0;
}

bool tracker_uses_bpf(const struct tracker *tr)
{
        return tr->bpf != NULL;
}

const char *tracker_sampler_name(const struct tracker *tr)
{
        return tr->bpf ? "bpf-iter" : "pread";
}

int tracker_new(const char *procfs_root, nsec_t half_life_ns, struct tracker **ret)
{
        struct tracker *tr;

        if (!procfs_root || half_life_ns <= 0)
                return -EINVAL;
        tr = calloc(1, sizeof(*tr));
        if (!tr)
                return -ENOMEM;
        tr->procfs_root = strdup(procfs_root);
        if (!tr->procfs_root) {
                free(tr);
                return -ENOMEM;
        }
        tr->half_life_ns = half_life_ns;
        tr->alpha_dt_ns = -1;
        if (is_real_proc(procfs_root)) {
                static bool logged = false;
                int r = tracker_use_bpf(tr, true);

                if (r < 0 && !logged) {
                        log_info_errno(r, "BPF schedstat sampler unavailable (%m), sampling with pread()");
                        logged = true;
                }
        }
        *ret = tr;
        return 0;
}

static void vm_entry_done(struct vm_entry *e, bool close_fds)
{
        if (e->priv && close_fds)
                for (unsigned i = 0; i < e->load.n_vcpus; i++)
                        if (e->priv[i].fd >= 0)
                                close(e->priv[i].fd);
        free(e->priv);
        free(e->refused);
        free(e->load.vcpus);
        vm_info_done(&e->load.info);
}

static void source_state_done(struct source_state *s)
{
        vm_info_free_array(s->vms, s->n);
        *s = (struct source_state) { 0 };
}

void tracker_free(struct tracker *tr)
{
        if (!tr)
                return;
        for (size_t i = 0; i < tr->n_vms; i++)
                vm_entry_done(&tr->vms[i], true);
        free(tr->vms);
        free(tr->order);
        for (size_t i = 0; i < VM_N_SOURCES; i++)
                source_state_done(&tr->sources[i]);
        tracker_bpf_stop(tr);
        free(tr->procfs_root);
        free(tr);
}

static int source_slot(enum vm_source source)
{
        switch (source) {
        case VM_SOURCE_LIBVIRT:
                return 0;
        case VM_SOURCE_QMP:
                return 1;
        case VM_SOURCE_PROC:
                return 2;
        default:
                return -EINVAL;
        }
}
/* Slots are in priority order: libvirt, QMP, proc. */
static const enum vm_source slot_source[VM_N_SOURCES] = { VM_SOURCE_LIBVIRT, VM_SOURCE_QMP, VM_SOURCE_PROC };

static int cmp_vcpu_index(const void *a, const void *b)
{
        const struct vcpu_info *x = a, *y = b;

        return (x->index > y->index) - (x->index < y->index);
}

static const struct vm_info *source_find(const struct source_state *s, pid_t pid)
{
        size_t lo = 0, hi = s->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s->vms[mid].pid < pid)
                        lo = mid + 1;
                else if (s->vms[mid].pid > pid)
                        hi = mid;
                else
                        return &s->vms[mid];
        }
        return NULL;
}

static struct vm_entry *entries_find(struct vm_entry *v, size_t n, pid_t pid)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v[mid].load.info.pid < pid)
                        lo = mid + 1;
                else if (v[mid].load.info.pid > pid)
                        hi = mid;
                else
                        return &v[mid];
        }
        return NULL;
}

static ssize_t vcpu_find(const struct vm_load *l, int index)
{
        size_t lo = 0, hi = l->n_vcpus;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (l->vcpus[mid].index < index)
                        lo = mid + 1;
                else if (l->vcpus[mid].index > index)
                        hi = mid;
                else
                        return (ssize_t) mid;
        }
        return -1;
}

struct pid_idx {
        pid_t pid;
        size_t idx;
};

static int cmp_pid_idx(const void *a, const void *b)
{
        const struct pid_idx *x = a, *y = b;

        if (x->pid != y->pid)
                return (x->pid > y->pid) - (x->pid < y->pid);
        return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Deep copy of a source snapshot, sorted by pid (the first of duplicate pids wins), vCPUs by index. */
static int source_state_build(const struct vm_info *vms, size_t n, struct source_state *ret)
{
        _cleanup_free_ struct pid_idx *keys = NULL;
        struct vm_info *copy;
        size_t m = 0, k = 0;
        int r;

        if (n == 0) {
                *ret = (struct source_state) { 0 };
                return 0;
        }
        keys = malloc(n * sizeof(*keys));
        copy = calloc(n, sizeof(*copy));
        if (!keys || !copy) {
                free(copy);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (vms[i].pid > 0 && (vms[i].n_vcpus == 0 || vms[i].vcpus))
                        keys[k++] = (struct pid_idx) { .pid = vms[i].pid, .idx = i };
        qsort(keys, k, sizeof(*keys), cmp_pid_idx);
        for (size_t i = 0; i < k; i++) {
                if (i > 0 && keys[i].pid == keys[i - 1].pid)
                        continue;
                r = vm_info_copy(&copy[m], &vms[keys[i].idx]);
                if (r < 0) {
                        vm_info_free_array(copy, m);
                        return r;
                }
                copy[m].name[sizeof(copy[m].name) - 1] = '\0';
                copy[m].uuid[sizeof(copy[m].uuid) - 1] = '\0';
                copy[m].qmp_socket[sizeof(copy[m].qmp_socket) - 1] = '\0';
                copy[m].hint_socket[sizeof(copy[m].hint_socket) - 1] = '\0';
                copy[m].policy.error[sizeof(copy[m].policy.error) - 1] = '\0';
                if (copy[m].n_vcpus > 1) {
                        struct vcpu_info *v = copy[m].vcpus;
                        unsigned w = 1;

                        qsort(v, copy[m].n_vcpus, sizeof(*v), cmp_vcpu_index);
                        for (unsigned j = 1; j < copy[m].n_vcpus; j++)
                                if (v[j].index != v[w - 1].index)
                                        v[w++] = v[j]; /* one entry per vCPU index */
                        copy[m].n_vcpus = w;
                }
                m++;
        }
        *ret = (struct source_state) { .vms = copy, .n = m };
        return 0;
}

static int cmp_order(const void *a, const void *b, void *userdata)
{
        const struct vm_entry *v = userdata;
        const struct vm_info *x = &v[*(const size_t *) a].load.info, *y = &v[*(const size_t *) b].load.info;
        int c = strcmp(x->name, y->name);

        if (c != 0)
                return c;
        return (x->pid > y->pid) - (x->pid < y->pid);
}

/*
 * vm_load.label_shared of each VM: whether another has its name and uuid.  order sorts by name,
 * so such VMs are in one run of it; a run is a handful of VMs at most.
 */
static void mark_shared_labels(struct vm_entry *v, const size_t *order, size_t n)
{
        for (size_t i = 0; i < n; i++)
                v[i].load.label_shared = false;
        for (size_t a = 0, b; a < n; a = b) {
                const char *name = v[order[a]].load.info.name;
                for (b = a + 1; b < n && strcmp(v[order[b]].load.info.name, name) == 0; b++)
                        ;
                for (size_t x = a; x + 1 < b; x++)
                        for (size_t y = x + 1; y < b; y++)
                                if (strcmp(v[order[x]].load.info.uuid, v[order[y]].load.info.uuid) == 0)
                                        v[order[x]].load.label_shared = v[order[y]].load.label_shared = true;
        }
}

/* Is comm the name of pid's main thread? */
static bool same_as_main_comm(const struct tracker *tr, pid_t pid, const char *comm)
{
        char path[PATH_MAX], main_comm[32];

        return path_printf(path, sizeof(path), "%s/%d/comm", tr->procfs_root, (int) pid) >= 0 &&
               read_small_file(path, main_comm, sizeof(main_comm)) >= 0 && strcmp(main_comm, comm) == 0;
}

/*
 * Open <procfs>/<pid>/task/<tid>/schedstat for vCPU index, through the
 * task's directory so that the fd and the name check are about one thread
 * (a directory fd of a task that exited never reaches a new owner of its
 * tid).  The comm must be "CPU <index>/KVM" or "CPU <index>/TCG" (the names
 * procscan.c matches), or, for a QEMU run without -name debug-threads=on
 * (plain QEMU over QMP), the name of its main thread, which then every thread
 * has (the check cannot tell its threads apart, as before it): else
 * *misnamed, and -EPERM.  A tree without comm files
 * (test fixtures) is not checked; neither is a thread that exits in between
 * (ENOENT): its fd says so at the next sample.  Returns the fd or -errno.
 */
static int open_vcpu(const struct tracker *tr, pid_t pid, int index, pid_t tid, bool *misnamed)
{
        char path[PATH_MAX], comm[32];
        _cleanup_close_ int dfd = -1;
        enum vm_accel accel;
        ssize_t n;
        int fd, r, ci;

        *misnamed = false;
        r = path_printf(path, sizeof(path), "%s/%d/task/%d", tr->procfs_root, (int) pid, (int) tid);
        if (r < 0)
                return r;
        dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        fd = openat(dfd, "schedstat", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = read_small_file_at(dfd, "comm", comm, sizeof(comm));
        if (n == -ENOENT || n == -ESRCH)
                return fd;
        if (n >= 0 && procscan_parse_vcpu_comm(comm, &ci, &accel) == 0 && ci == index)
                return fd;
        if (n >= 0 && tid != pid && same_as_main_comm(tr, pid, comm))
                return fd; /* QEMU without -name debug-threads=on: every thread has the main thread's name */
        close(fd);
        if (n < 0 && n != -EFBIG)
                return (int) n;
        *misnamed = true;
        log_debug("Thread %d of pid %d is not named \"CPU %d/KVM\" or \"CPU %d/TCG\": not taken for vCPU %d.",
                  (int) tid, (int) pid, index, index, index);
        return -EPERM;
}

static int cmp_vcpu_id(const void *a, const void *b)
{
        const struct vcpu_id *x = a, *y = b;

        if (x->index != y->index)
                return (x->index > y->index) - (x->index < y->index);
        return (x->tid > y->tid) - (x->tid < y->tid);
}

/*
 * Did the tracker see (index, tid) of this VM gone, or refuse it for its
 * name?  Then it is never opened again: the tid may belong to another thread
 * by now.  A failed open for another reason (EMFILE, ...) is retried.
 */
static bool vcpu_refused(const struct vm_entry *old, int index, pid_t tid)
{
        const struct vcpu_id key = { .index = index, .tid = tid };
        ssize_t k;

        if (!old)
                return false;
        if (old->n_refused > 0 && bsearch(&key, old->refused, old->n_refused, sizeof(key), cmp_vcpu_id))
                return true;
        k = vcpu_find(&old->load, index);
        return k >= 0 && old->load.vcpus[k].tid == tid && old->priv[k].fd < 0 && !old->priv[k].retry;
}

/* One source's (index, tid) for a vCPU of the VM being merged. */
struct vcpu_cand {
        struct vcpu_info vi;
        int prio;      /* source slot: 0 libvirt, 1 QMP, 2 proc */
        bool refused;  /* vcpu_refused() */
        bool shadowed; /* a higher-priority source has its tid (under another index) */
};

static int cmp_cand_index(const void *a, const void *b)
{
        const struct vcpu_cand *x = a, *y = b;

        if (x->vi.index != y->vi.index)
                return (x->vi.index > y->vi.index) - (x->vi.index < y->vi.index);
        return (x->prio > y->prio) - (x->prio < y->prio);
}

static int cmp_cand_tid(const void *a, const void *b)
{
        const struct vcpu_cand *x = a, *y = b;

        if (x->vi.tid != y->vi.tid)
                return (x->vi.tid > y->vi.tid) - (x->vi.tid < y->vi.tid);
        return (x->prio > y->prio) - (x->prio < y->prio);
}

static bool same_vcpus(const struct vm_info *a, const struct vm_info *b)
{
        return a->n_vcpus == b->n_vcpus && memcmp(a->vcpus, b->vcpus, a->n_vcpus * sizeof(*a->vcpus)) == 0;
}

struct merge_counts {
        unsigned gone_opens, open_errs, misnamed;
        pid_t misnamed_pid, misnamed_tid; /* the first misnamed thread, for the log */
        int misnamed_index;
        char misnamed_vm[VM_NAME_MAX];
};

/*
 * The vCPU candidates of pid: every (index, tid) the sources list, one
 * source's list when the others list the same, sorted by index then
 * priority.  Returns the count, or -ENOMEM.
 */
static ssize_t vcpu_candidates(const struct vm_info *const per[VM_N_SOURCES], const struct vm_entry *old,
                               struct vcpu_cand **ret)
{
        struct vcpu_cand *cand;
        size_t n = 0, m = 0;
        int top = -1;
        bool multi = false;

        for (int s = 0; s < VM_N_SOURCES; s++)
                if (per[s] && per[s]->n_vcpus > 0) {
                        if (top < 0)
                                top = s;
                        n += per[s]->n_vcpus;
                }
        *ret = NULL;
        if (n == 0)
                return 0;
        cand = malloc(n * sizeof(*cand));
        if (!cand)
                return -ENOMEM;
        for (int s = top; s < VM_N_SOURCES; s++) {
                if (!per[s] || per[s]->n_vcpus == 0 || (s != top && same_vcpus(per[top], per[s])))
                        continue; /* the usual case: libvirt and the /proc scan agree */
                multi |= s != top;
                for (unsigned i = 0; i < per[s]->n_vcpus; i++) {
                        const struct vcpu_info *vi = &per[s]->vcpus[i];

                        cand[m++] = (struct vcpu_cand) { .vi = *vi, .prio = s,
                                                         .refused = vcpu_refused(old, vi->index, vi->tid) };
                }
        }
        if (multi) {
                /* One thread, one vCPU: a tid the best source with a usable pair for it lists is not
                 * taken from a lower source under another index (the sources may number differently). */
                qsort(cand, m, sizeof(*cand), cmp_cand_tid);
                for (size_t i = 0, j; i < m; i = j) {
                        int best = VM_N_SOURCES;

                        for (j = i; j < m && cand[j].vi.tid == cand[i].vi.tid; j++)
                                if (!cand[j].refused && cand[j].prio < best)
                                        best = cand[j].prio;
                        for (size_t k = i; k < j; k++)
                                cand[k].shadowed = cand[k].prio > best;
                }
                qsort(cand, m, sizeof(*cand), cmp_cand_index);
        }
        *ret = cand;
        return (ssize_t) m;
}

/* Merge what the sources (with `slot` replaced by `repl`) say about pid into *e. */
/* e->refused[0..nr): sorted, without duplicates, for vcpu_refused()'s bsearch; freed if empty. */
static void refused_finish(struct vm_entry *e, unsigned nr)
{
        if (nr > 1) {
                unsigned u = 1;

                qsort(e->refused, nr, sizeof(*e->refused), cmp_vcpu_id);
                for (unsigned i = 1; i < nr; i++)
                        if (cmp_vcpu_id(&e->refused[i], &e->refused[u - 1]) != 0)
                                e->refused[u++] = e->refused[i];
                nr = u;
        }
        e->n_refused = nr;
        if (nr == 0) {
                free(e->refused);
                e->refused = NULL;
        }
}

static int merge_one(const struct tracker *tr, const struct source_state *srcs, pid_t pid,
                     const struct vm_entry *old, nsec_t now, struct vm_entry *e, struct merge_counts *mc)
{
        const struct vm_info *per[VM_N_SOURCES], *nsrc = NULL;
        struct vm_info info = { .pid = pid, .libvirt_id = -1 };
        _cleanup_free_ struct vcpu_cand *cand = NULL;
        ssize_t m;
        unsigned n_ok = 0;

        for (int s = 0; s < VM_N_SOURCES; s++) {
                per[s] = source_find(&srcs[s], pid);
                if (!per[s])
                        continue;
                info.sources |= slot_source[s]; /* who reports it, not what it claims */
                if (!nsrc)
                        nsrc = per[s];
                if (per[s]->n_vcpus_untracked > info.n_vcpus_untracked)
                        info.n_vcpus_untracked = per[s]->n_vcpus_untracked;
                if (info.accel == VM_ACCEL_UNKNOWN)
                        info.accel = per[s]->accel;
                if (info.qmp_socket[0] == '\0')
                        memcpy(info.qmp_socket, per[s]->qmp_socket, sizeof(info.qmp_socket));
                if (info.hint_socket[0] == '\0')
                        memcpy(info.hint_socket, per[s]->hint_socket, sizeof(info.hint_socket));
        }
        if (!nsrc)
                return 0; /* no source knows it */
        memcpy(info.name, nsrc->name, sizeof(info.name));
        info.name[sizeof(info.name) - 1] = '\0';
        /* Names come from QEMU command lines (any local user can start a process
         * that looks like a VM) and from libvirt: make them safe for every output. */
        sanitize_name(info.name);
        memcpy(info.uuid, nsrc->uuid, sizeof(info.uuid));
        info.libvirt_id = per[0] ? per[0]->libvirt_id : -1;
        /* Per-VM policy lives in libvirt metadata: only libvirt's word counts. */
        if (per[0])
                info.policy = per[0]->policy;
        else
                vm_policy_init(&info.policy);
        if (info.name[0] == '\0')
                snprintf(info.name, sizeof(info.name), "qemu-%d", (int) pid);

        *e = (struct vm_entry) { 0 };
        e->load.first_seen_ns = old ? old->load.first_seen_ns : now;
        m = vcpu_candidates(per, old, &cand);
        if (m < 0)
                return (int) m;
        if (m > 0) {
                unsigned w = 0, nr = 0;

                info.vcpus = malloc((size_t) m * sizeof(*info.vcpus));
                e->load.vcpus = calloc((size_t) m, sizeof(*e->load.vcpus));
                e->priv = calloc((size_t) m, sizeof(*e->priv));
                e->refused = malloc((size_t) m * sizeof(*e->refused));
                if (!info.vcpus || !e->load.vcpus || !e->priv || !e->refused) {
                        free(info.vcpus);
                        free(e->load.vcpus);
                        free(e->priv);
                        free(e->refused);
                        *e = (struct vm_entry) { 0 };
                        return -ENOMEM;
                }
                /* per index, the first candidate (by source priority) that is neither refused nor shadowed */
                for (ssize_t i = 0, j; i < m; i = j) {
                        bool done = false;

                        for (j = i; j < m && cand[j].vi.index == cand[i].vi.index; j++) {
                                const struct vcpu_cand *c = &cand[j];
                                ssize_t k = old ? vcpu_find(&old->load, c->vi.index) : -1;
                                struct vcpu_load *v = &e->load.vcpus[w];
                                struct vcpu_priv *p = &e->priv[w];
                                bool misnamed;
                                int fd;

                                if (c->refused) {
                                        /* remembered while a source still lists it */
                                        e->refused[nr++] = (struct vcpu_id) { .index = c->vi.index, .tid = c->vi.tid };
                                        continue;
                                }
                                if (done || c->shadowed)
                                        continue;
                                /* (a source listing one tid twice must not share an fd) */
                                if (k >= 0 && old->load.vcpus[k].tid == c->vi.tid && old->priv[k].fd >= 0 &&
                                    !old->priv[k].carried) {
                                        info.vcpus[w++] = c->vi;
                                        *v = old->load.vcpus[k];
                                        *p = old->priv[k];
                                        p->carried = false;
                                        old->priv[k].carried = true;
                                        n_ok++;
                                        done = true;
                                        continue;
                                }
                                fd = open_vcpu(tr, pid, c->vi.index, c->vi.tid, &misnamed);
                                if (misnamed) {
                                        /* another thread has that tid now: never this pair again */
                                        e->refused[nr++] = (struct vcpu_id) { .index = c->vi.index, .tid = c->vi.tid };
                                        if (mc->misnamed++ == 0) {
                                                mc->misnamed_pid = pid;
                                                mc->misnamed_tid = c->vi.tid;
                                                mc->misnamed_index = c->vi.index;
                                                memcpy(mc->misnamed_vm, info.name, sizeof(mc->misnamed_vm));
                                        }
                                        continue; /* a lower source may know the right thread */
                                }
                                info.vcpus[w++] = c->vi;
                                *v = (struct vcpu_load) { .index = c->vi.index, .tid = c->vi.tid };
                                done = true;
                                if (fd < 0) {
                                        /* vanished before we could open it (or unreadable): gone */
                                        v->gone = true;
                                        p->fd = -1;
                                        if (fd == -ENOENT || fd == -ESRCH)
                                                mc->gone_opens++;
                                        else {
                                                mc->open_errs++;
                                                p->retry = true; /* EMFILE and the like: tried again */
                                        }
                                        continue;
                                }
                                p->fd = fd;
                                p->carried = true; /* opened here: close on failure */
                                n_ok++;
                        }
                }
                info.n_vcpus = w;
                refused_finish(e, nr);
        }
        e->load.info = info;
        e->load.n_vcpus = info.n_vcpus;
        if (m > 0 && n_ok == 0) {
                /*
                 * A reported VM none of whose threads can be read: a stale
                 * report of a destroyed VM, or threads all gone.  Not added.
                 */
                vm_entry_done(e, false);
                *e = (struct vm_entry) { 0 };
                return 0;
        }
        return 1;
}

static void entries_abort(struct vm_entry *v, size_t n)
{
        /* close only what was opened for the new state; carried fds belong to the old one */
        for (size_t i = 0; i < n; i++) {
                for (unsigned k = 0; k < v[i].load.n_vcpus; k++)
                        if (v[i].priv[k].carried && v[i].priv[k].fd >= 0)
                                close(v[i].priv[k].fd);
                vm_entry_done(&v[i], false);
        }
        free(v);
}

/*
 * Make the BPF map of tracked pids the pids of nv (both arrays sorted by
 * pid: one merge walk).  A failed map update (map full) falls back to pread().
 */
static void bpf_sync_pids(struct tracker *tr, const struct vm_entry *nv, size_t nn)
{
        size_t i = 0, j = 0;
        int r = 0;

        while (r >= 0 && (i < tr->n_vms || j < nn)) {
                pid_t a = i < tr->n_vms ? tr->vms[i].load.info.pid : 0;
                pid_t b = j < nn ? nv[j].load.info.pid : 0;

                if (j >= nn || (i < tr->n_vms && a < b)) {
                        r = schedstat_bpf_untrack(tr->bpf, a);
                        i++;
                } else if (i >= tr->n_vms || b < a) {
                        r = schedstat_bpf_track(tr->bpf, b);
                        j++;
                } else {
                        i++;
                        j++;
                }
        }
        if (r < 0) {
                log_warning_errno(r, "Failed to update the BPF map of tracked pids (%m), sampling with pread()");
                tr->stats.bpf_errors++;
                tracker_bpf_stop(tr);
        }
}

int tracker_set_source(struct tracker *tr, enum vm_source source, const struct vm_info *vms, size_t n,
                       nsec_t now)
{
        struct source_state srcs[VM_N_SOURCES], repl;
        struct vm_entry *nv = NULL;
        struct tid_slot *ntids = NULL;
        size_t *order = NULL, nn = 0, cap, n_threads = 0, ntids_cap = 0;
        struct merge_counts mc = { 0 };
        int slot, r;

        slot = source_slot(source);
        if (slot < 0)
                return slot;
        if (n > 0 && !vms)
                return -EINVAL;
        r = source_state_build(vms, n, &repl);
        if (r < 0)
                return r;
        memcpy(srcs, tr->sources, sizeof(srcs));
        srcs[slot] = repl;

        cap = 0;
        for (int s = 0; s < VM_N_SOURCES; s++)
                cap += srcs[s].n;
        if (cap > 0) {
                nv = calloc(cap, sizeof(*nv));
                order = calloc(cap, sizeof(*order));
                if (!nv || !order) {
                        r = -ENOMEM;
                        goto fail;
                }
        }

        /* k-way merge of the pid-sorted source arrays */
        {
                size_t pos[VM_N_SOURCES] = { 0 };
                for (;;) {
                        pid_t pid = 0;
                        bool any = false;

                        for (int s = 0; s < VM_N_SOURCES; s++)
                                if (pos[s] < srcs[s].n && (!any || srcs[s].vms[pos[s]].pid < pid)) {
                                        pid = srcs[s].vms[pos[s]].pid;
                                        any = true;
                                }
                        if (!any)
                                break;
                        for (int s = 0; s < VM_N_SOURCES; s++)
                                if (pos[s] < srcs[s].n && srcs[s].vms[pos[s]].pid == pid)
                                        pos[s]++;

                        const struct vm_entry *old = entries_find(tr->vms, tr->n_vms, pid);
                        r = merge_one(tr, srcs, pid, old, now, &nv[nn], &mc);
                        if (r < 0)
                                goto fail;
                        if (r > 0) {
                                const struct vm_info *ni = &nv[nn].load.info;

                                /* vCPUs over the limit: say so once per VM (and when the count changes) */
                                if (ni->n_vcpus_untracked > 0 &&
                                    (!old || old->load.info.n_vcpus_untracked != ni->n_vcpus_untracked))
                                        log_warning("VM \"%s\" (pid %d): %u vCPU(s) with an index of %d or more "
                                                    "are not tracked and never pinned (limit VM_MAX_VCPUS = %d).",
                                                    ni->name, (int) pid, ni->n_vcpus_untracked, VM_MAX_VCPUS,
                                                    VM_MAX_VCPUS);
                                n_threads += nv[nn].load.n_vcpus;
                                nn++;
                        }
                }
        }
        for (size_t i = 0; i < nn; i++)
                order[i] = i;
        if (nn > 1)
                qsort_r(order, nn, sizeof(*order), cmp_order, nv);
        mark_shared_labels(nv, order, nn);
        if (tr->bpf) {
                ntids_cap = tids_cap_for(n_threads);
                if (ntids_cap != tr->tids_cap) {
                        ntids = calloc(ntids_cap, sizeof(*ntids));
                        if (!ntids) {
                                r = -ENOMEM;
                                goto fail;
                        }
                }
                bpf_sync_pids(tr, nv, nn);
        }

        /* Commit: close the fds of the old state that were not carried over. */
        {
                uint64_t added = 0, removed = 0, untracked = 0, vms_untracked = 0;
                for (size_t i = 0; i < tr->n_vms; i++) {
                        struct vm_entry *o = &tr->vms[i];
                        for (unsigned k = 0; k < o->load.n_vcpus; k++)
                                if (!o->priv[k].carried && o->priv[k].fd >= 0)
                                        close(o->priv[k].fd);
                        if (!entries_find(nv, nn, o->load.info.pid))
                                removed++;
                        vm_entry_done(o, false);
                }
                for (size_t i = 0; i < nn; i++) {
                        for (unsigned k = 0; k < nv[i].load.n_vcpus; k++)
                                nv[i].priv[k].carried = false;
                        if (!entries_find(tr->vms, tr->n_vms, nv[i].load.info.pid))
                                added++;
                        untracked += nv[i].load.info.n_vcpus_untracked;
                        vms_untracked += nv[i].load.info.n_vcpus_untracked > 0;
                }
                tr->stats.vms_added += added;
                tr->stats.vcpus_untracked = untracked;
                tr->stats.vms_with_untracked = vms_untracked;
                tr->stats.vms_removed += removed;
        }
        free(tr->vms);
        free(tr->order);
        source_state_done(&tr->sources[slot]);
        tr->sources[slot] = repl;
        tr->vms = nv;
        tr->order = order;
        tr->n_vms = nn;
        tr->n_threads = n_threads;
        tr->stats.threads_gone += mc.gone_opens;
        tr->stats.open_errors += mc.open_errs;
        tr->stats.threads_misnamed += mc.misnamed;
        if (mc.misnamed > 0 && !tr->misnamed_logged) {
                log_warning("VM \"%s\" (pid %d): thread %d, listed as vCPU %d, is not named \"CPU %d/KVM\" or "
                            "\"CPU %d/TCG\": not tracked (a stale thread id now used by another thread, or QEMU "
                            "runs without -name debug-threads=on).  Further cases are only counted "
                            "(threads_misnamed).", mc.misnamed_vm, (int) mc.misnamed_pid,
                            (int) mc.misnamed_tid, mc.misnamed_index, mc.misnamed_index, mc.misnamed_index);
                tr->misnamed_logged = true;
        }
        if (ntids && tr->bpf) {
                free(tr->tids);
                tr->tids = ntids;
                tr->tids_cap = ntids_cap;
        } else
                free(ntids); /* the map update failed: pread() from now on */
        tids_rebuild(tr);
        return 0;

fail:
        for (size_t i = 0; i < tr->n_vms; i++)
                for (unsigned k = 0; k < tr->vms[i].load.n_vcpus; k++)
                        tr->vms[i].priv[k].carried = false;
        entries_abort(nv, nn);
        free(order);
        free(ntids);
        source_state_done(&repl);
        return r;
}

/* Forget a VM entirely (all its vCPU threads are gone).  No allocation. */
static void tracker_drop(struct tracker *tr, size_t idx)
{
        struct vm_entry *e = &tr->vms[idx];
        pid_t pid = e->load.info.pid;

        tr->n_threads -= e->load.n_vcpus;
        vm_entry_done(e, true);
        memmove(&tr->vms[idx], &tr->vms[idx + 1], (tr->n_vms - idx - 1) * sizeof(*tr->vms));
        {
                size_t w = 0;
                for (size_t i = 0; i < tr->n_vms; i++) {
                        if (tr->order[i] == idx)
                                continue;
                        tr->order[w++] = tr->order[i] > idx ? tr->order[i] - 1 : tr->order[i];
                }
        }
        tr->n_vms--;
        tr->stats.vms_removed++;
        if (tr->bpf) {
                (void) schedstat_bpf_untrack(tr->bpf, pid); /* a stale key only costs a filtered record */
                tr->tids_dirty = true;
        }

        /* The sources' reports of it are stale: a fresh snapshot may bring it back. */
        for (int s = 0; s < VM_N_SOURCES; s++) {
                struct source_state *src = &tr->sources[s];
                struct vm_info *vi = (struct vm_info *) source_find(src, pid);
                if (!vi)
                        continue;
                size_t k = (size_t) (vi - src->vms);
                vm_info_done(vi);
                memmove(&src->vms[k], &src->vms[k + 1], (src->n - k - 1) * sizeof(*src->vms));
                src->n--;
        }
}

static void mark_gone(struct tracker *tr, struct vcpu_load *v, struct vcpu_priv *p)
{
        close(p->fd);
        p->fd = -1;
        v->gone = true;
        tr->stats.threads_gone++;
}

/* New counters of one vCPU thread: rates and decayed averages. */
static void update_vcpu(struct tracker *tr, struct vcpu_load *v, struct vcpu_priv *p, struct schedstat st,
                        nsec_t now)
{
        tr->stats.samples++;

        if (p->have_prev && now > p->last_ns && st.run_ns >= v->last.run_ns && st.wait_ns >= v->last.wait_ns) {
                nsec_t dt = now - p->last_ns;
                double dtd = (double) dt;
                uint64_t d_run = st.run_ns - v->last.run_ns, d_wait = st.wait_ns - v->last.wait_ns, d_halt = 0;

                if (v->has_halt_poll && v->halt_poll_ns >= p->prev_halt_poll_ns)
                        d_halt = MIN(v->halt_poll_ns - p->prev_halt_poll_ns, d_run);
                v->util = clamp((double) (d_run - d_halt) / dtd * (p->scale ? p->scale / 1024.0 : 1.0), 0.0, 1.0);
                v->wait_ratio = clamp((double) d_wait / dtd, 0.0, 1.0);
                v->halt_poll_ratio = clamp((double) d_halt / dtd, 0.0, 1.0);
                if (!v->valid) {
                        v->util_avg = v->util;
                        v->wait_avg = v->wait_ratio;
                        v->valid = true;
                } else {
                        if (dt != tr->alpha_dt_ns) {
                                tr->alpha = tracker_decay_alpha(dt, tr->half_life_ns);
                                tr->alpha_dt_ns = dt;
                        }
                        v->util_avg += tr->alpha * (v->util - v->util_avg);
                        v->wait_avg += tr->alpha * (v->wait_ratio - v->wait_avg);
                }
        } else if (p->have_prev && now <= p->last_ns) {
                return; /* same instant: keep the previous baseline */
        }
        /* counters going backwards (tid reused by a new thread): restart the baseline */
        v->last = st;
        p->prev_halt_poll_ns = v->halt_poll_ns;
        p->last_ns = now;
        p->have_prev = true;
}

static void sample_vcpu(struct tracker *tr, struct vcpu_load *v, struct vcpu_priv *p, nsec_t now)
{
        char buf[96];
        struct schedstat st;
        ssize_t n;

        n = pread_all0(p->fd, buf, sizeof(buf));
        if (n == -ESRCH || n == -ENOENT) {
                mark_gone(tr, v, p);
                return;
        }
        if (n < 0 || schedstat_parse(buf, &st) < 0) {
                tr->stats.read_errors++;
                return;
        }
        update_vcpu(tr, v, p, st, now);
}

/*
 * Is the thread of this record the one the vCPU's fd was opened on?  A
 * record matches on (tid, tgid) only, and a thread of the same process may
 * have taken the tid of an exited vCPU thread.  At the first sight the kept
 * fd vouches for it (pread() fails with ESRCH once its thread exited, and a
 * live thread's tid is unique) and the record's start time is stored; from
 * then on a record with another start time is another thread.
 */
static bool bpf_same_thread(struct vcpu_priv *p, const struct schedstat_bpf_rec *rec)
{
        char buf[96];
        ssize_t n;

        if (p->start_known)
                return rec->start_ns == p->start_ns;
        n = pread_all0(p->fd, buf, sizeof(buf));
        if (n == -ESRCH || n == -ENOENT)
                return false;
        p->start_ns = rec->start_ns;
        p->start_known = true;
        return true;
}

static void bpf_record(const struct schedstat_bpf_rec *rec, void *userdata)
{
        struct tracker *tr = userdata;
        size_t mask = tr->tids_cap - 1;

        /* every slot with this tid: a source may list one thread under two indexes */
        for (size_t h = tid_hash((pid_t) rec->tid, tr->tids_cap); tr->tids[h].v; h = (h + 1) & mask) {
                struct tid_slot *s = &tr->tids[h];

                if (s->tid != (pid_t) rec->tid || s->pid != (pid_t) rec->tgid || s->p->seen_gen == tr->gen)
                        continue;
                if (!bpf_same_thread(s->p, rec))
                        continue; /* not seen: marked gone after the pass */
                s->p->seen_gen = tr->gen;
                update_vcpu(tr, s->v, s->p,
                            (struct schedstat) { .run_ns = rec->run_ns, .wait_ns = rec->wait_ns,
                                                 .timeslices = rec->timeslices },
                            tr->pass_now);
        }
}

/* One iterator pass; false when it failed (then the caller samples with pread()). */
static bool bpf_pass(struct tracker *tr, nsec_t now)
{
        int r;

        if (tr->tids_dirty)
                tids_rebuild(tr);
        tr->gen++;
        tr->pass_now = now;
        r = schedstat_bpf_read(tr->bpf, bpf_record, tr);
        if (r < 0) {
                log_warning_errno(r, "BPF schedstat pass failed (%m), sampling with pread() from now on");
                tr->stats.bpf_errors++;
                tracker_bpf_stop(tr);
                return false;
        }
        return true;
}

int tracker_sample(struct tracker *tr, nsec_t now)
{
        nsec_t cpu0 = thread_cputime_ns();
        bool via_bpf = tr->bpf && tr->n_threads > 0 && bpf_pass(tr, now);
        int sampled = 0;

        for (size_t i = 0; i < tr->n_vms;) {
                struct vm_entry *e = &tr->vms[i];
                unsigned alive = 0;

                for (unsigned k = 0; k < e->load.n_vcpus; k++) {
                        struct vcpu_load *v = &e->load.vcpus[k];
                        struct vcpu_priv *p = &e->priv[k];

                        if (p->fd < 0)
                                continue;
                        if (via_bpf) {
                                if (p->seen_gen == tr->gen)
                                        sampled++;
                                else
                                        mark_gone(tr, v, p); /* not in the pass: exited */
                        } else {
                                uint64_t before = tr->stats.samples;
                                sample_vcpu(tr, v, p, now);
                                if (tr->stats.samples != before)
                                        sampled++;
                        }
                        if (p->fd >= 0)
                                alive++;
                }
                if (e->load.n_vcpus > 0 && alive == 0) {
                        tracker_drop(tr, i);
                        continue;
                }
                i++;
        }
        tr->stats.last_sample_cpu_ns = thread_cputime_ns() - cpu0;
        return sampled;
}

/* vCPU vcpu_index of VM pid: its entry and slot, or NULL. */
static struct vm_entry *find_vcpu(struct tracker *tr, pid_t pid, int vcpu_index, ssize_t *k)
{
        struct vm_entry *e = entries_find(tr->vms, tr->n_vms, pid);

        if (!e)
                return NULL;
        *k = vcpu_find(&e->load, vcpu_index);
        return *k < 0 ? NULL : e;
}

void tracker_set_load_scale(struct tracker *tr, pid_t pid, int vcpu_index, unsigned scale)
{
        ssize_t k;
        struct vm_entry *e = find_vcpu(tr, pid, vcpu_index, &k);

        if (e)
                e->priv[k].scale = (uint16_t) (scale == 0 ? 0 : MIN(scale, 1024u));
}

void tracker_set_halt_poll(struct tracker *tr, pid_t pid, int vcpu_index, uint64_t halt_poll_ns)
{
        ssize_t k;
        struct vm_entry *e = find_vcpu(tr, pid, vcpu_index, &k);

        if (!e)
                return;
        if (!e->load.vcpus[k].has_halt_poll)
                e->priv[k].prev_halt_poll_ns = halt_poll_ns; /* first value is a baseline */
        e->load.vcpus[k].halt_poll_ns = halt_poll_ns;
        e->load.vcpus[k].has_halt_poll = true;
}

size_t tracker_n_vms(const struct tracker *tr)
{
        return tr->n_vms;
}

const struct vm_load *tracker_vm(const struct tracker *tr, size_t i)
{
        if (i >= tr->n_vms)
                return NULL;
        return &tr->vms[tr->order[i]].load;
}

const struct vm_load *tracker_find_vm(const struct tracker *tr, pid_t pid)
{
        struct vm_entry *e = entries_find(tr->vms, tr->n_vms, pid);

        return e ? &e->load : NULL;
}

const struct tracker_stats *tracker_stats(const struct tracker *tr)
{
        return &tr->stats;
}

size_t tracker_n_threads(const struct tracker *tr)
{
        return tr->n_threads;
}
