/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Host topology reader.
 *
 * Everything comes from sysfs below a configurable root (the directory that
 * stands for /sys), so the same code reads the live host and the recorded
 * fixture trees in tests/data/topology/.  The rules, also written down in
 * docs/topology.md and in the field comments of topology.h:
 *
 *  - a file that does not exist (ENOENT/ENOTDIR) is data: the field gets its
 *    documented default.  Offline CPUs have no topology/ or cache/ directory
 *    on current kernels, single-node hosts may have no node/ directory, hosts
 *    without cpufreq have an empty cpufreq/ directory;
 *  - a file that exists but cannot be read is an error (-errno), and one that
 *    cannot be parsed is -EINVAL; both are logged with the path;
 *  - a CPU number >= VP_MAX_CPUS anywhere is -E2BIG.
 *
 * Domain counts (packages, dies, LLCs, cores, nodes) are taken over online
 * CPUs only, because offline CPUs publish no topology and would otherwise
 * show up as bogus one-CPU packages.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "topology.h"
#include "util.h"

#define ATTR_BUF_SIZE (64 * 1024) /* cpulists of a 4096-CPU host fit easily */
#define TOPO_MAX_CACHE_INDEX 16

struct loader {
        int dirfd;            /* the sysfs root */
        const char *root;     /* for messages */
        char *buf;            /* ATTR_BUF_SIZE */
};

/*
 * Read devices/... below the root.  Returns 1 if read (buf filled), 0 if the
 * file does not exist, -errno on other failures (logged).
 */
static int read_attr(struct loader *l, const char *path, char *buf, size_t size)
{
        ssize_t n;

        n = read_small_file_at(l->dirfd, path, buf, size);
        if (n == -ENOENT || n == -ENOTDIR)
                return 0;
        if (n < 0)
                return log_debug_errno((int) n, "Failed to read %s/%s: %m", l->root, path);
        return 1;
}

static int invalid(struct loader *l, const char *path, int r)
{
        char esc[128];

        escape_bytes(l->buf, strlen(l->buf), esc, sizeof(esc));
        if (r == -E2BIG)
                return log_debug_errno(E2BIG, "%s/%s: CPU number beyond VP_MAX_CPUS=%d: \"%s\"",
                                       l->root, path, VP_MAX_CPUS, esc);
        log_debug("%s/%s: cannot parse \"%s\"", l->root, path, esc);
        return -EINVAL;
}

/* Returns 1 if read, 0 if absent (ret untouched), negative on error. */
static int read_cpuset(struct loader *l, const char *path, cpuset_t *ret)
{
        int r = read_attr(l, path, l->buf, ATTR_BUF_SIZE);
        if (r <= 0)
                return r;
        r = cpuset_parse_list(l->buf, ret);
        if (r < 0)
                return invalid(l, path, r);
        return 1;
}

static int read_int(struct loader *l, const char *path, int *ret)
{
        int r = read_attr(l, path, l->buf, ATTR_BUF_SIZE);
        if (r <= 0)
                return r;
        if (parse_int(l->buf, ret) < 0)
                return invalid(l, path, -EINVAL);
        return 1;
}

static int read_u32(struct loader *l, const char *path, uint32_t *ret)
{
        int r = read_attr(l, path, l->buf, ATTR_BUF_SIZE);
        if (r <= 0)
                return r;
        if (parse_u32(l->buf, ret) < 0)
                return invalid(l, path, -EINVAL);
        return 1;
}

static int read_bool01(struct loader *l, const char *path, bool *ret)
{
        int r = read_attr(l, path, l->buf, ATTR_BUF_SIZE);
        if (r <= 0)
                return r;
        if (strcmp(l->buf, "0") == 0)
                *ret = false;
        else if (strcmp(l->buf, "1") == 0)
                *ret = true;
        else
                return invalid(l, path, -EINVAL);
        return 1;
}

/* A short single-line string; trailing blanks (sysfs lists end in ' ') dropped.
 * Too long or containing control bytes → -EINVAL. */
static int read_str(struct loader *l, const char *path, char *ret, size_t size)
{
        int r = read_attr(l, path, l->buf, ATTR_BUF_SIZE);
        size_t n;

        if (r <= 0)
                return r;
        n = strlen(l->buf);
        while (n > 0 && (l->buf[n - 1] == ' ' || l->buf[n - 1] == '\n'))
                l->buf[--n] = '\0';
        if (n >= size)
                return invalid(l, path, -EINVAL);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) l->buf[i] < 0x20 || l->buf[i] == 0x7f)
                        return invalid(l, path, -EINVAL);
        memcpy(ret, l->buf, n + 1);
        return 1;
}

static int cmp_uint(const void *a, const void *b)
{
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;
        return x < y ? -1 : x > y;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

/*
 * Numbers N of the entries "<prefix>N" of directory path, sorted.  A missing
 * directory gives 0 entries.  *ret is malloc'ed (may be NULL when 0).
 */
static int list_numbered(struct loader *l, const char *path, const char *prefix, unsigned **ret,
                         unsigned *n_ret)
{
        size_t plen = strlen(prefix), n = 0, alloc = 0;
        unsigned *v = NULL;
        struct dirent *de;
        DIR *d;
        int fd;

        fd = openat(l->dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT || errno == ENOTDIR) {
                        *ret = NULL;
                        *n_ret = 0;
                        return 0;
                }
                return log_debug_errno(errno, "Failed to open %s/%s: %m", l->root, path);
        }
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        while ((de = readdir(d))) {
                uint32_t num;

                if (strncmp(de->d_name, prefix, plen) != 0 || parse_u32(de->d_name + plen, &num) < 0)
                        continue;
                if (n == alloc) {
                        unsigned *nv;
                        alloc = alloc ? alloc * 2 : 64;
                        nv = realloc(v, alloc * sizeof(*v));
                        if (!nv) {
                                free(v);
                                closedir(d);
                                return -ENOMEM;
                        }
                        v = nv;
                }
                v[n++] = num;
        }
        closedir(d);
        if (n > 0)
                qsort(v, n, sizeof(*v), cmp_uint);
        *ret = v;
        *n_ret = (unsigned) n;
        return 0;
}

static int load_cpu_masks(struct loader *l, cpuset_t *possible, cpuset_t *present, cpuset_t *online)
{
        _cleanup_free_ unsigned *ids = NULL;
        unsigned n_ids = 0;
        cpuset_t dirs;
        int r;

        /* Default for possible/present: the cpuN directories that exist. */
        r = list_numbered(l, "devices/system/cpu", "cpu", &ids, &n_ids);
        if (r < 0)
                return r;
        cpuset_zero(&dirs);
        for (unsigned i = 0; i < n_ids; i++) {
                if (ids[i] >= VP_MAX_CPUS)
                        return log_debug_errno(E2BIG, "%s/devices/system/cpu/cpu%u: beyond VP_MAX_CPUS=%d",
                                               l->root, ids[i], VP_MAX_CPUS);
                cpuset_set(&dirs, ids[i]);
        }

        r = read_cpuset(l, "devices/system/cpu/possible", possible);
        if (r < 0)
                return r;
        if (r == 0)
                *possible = dirs;
        r = read_cpuset(l, "devices/system/cpu/present", present);
        if (r < 0)
                return r;
        if (r == 0)
                *present = dirs;
        r = read_cpuset(l, "devices/system/cpu/online", online);
        if (r < 0)
                return r;
        if (r == 0) {
                /* Default: present CPUs whose cpuN/online is not "0". */
                *online = *present;
                CPUSET_FOREACH(c, present) {
                        char p[64];
                        bool on;
                        path_printf(p, sizeof(p), "devices/system/cpu/cpu%d/online", c);
                        r = read_bool01(l, p, &on);
                        if (r < 0)
                                return r;
                        if (r > 0 && !on)
                                cpuset_clear(online, (unsigned) c);
                }
        }
        if (cpuset_empty(possible)) {
                log_debug("%s/devices/system/cpu: no CPUs found", l->root);
                return -ENOENT;
        }
        return 0;
}

static int load_cache(struct loader *l, struct topo_cpu *c)
{
        int best_level = -1;
        cpuset_t best;

        for (unsigned k = 0; k < TOPO_MAX_CACHE_INDEX; k++) {
                char p[128], type[32];
                cpuset_t shared;
                int level, r;

                path_printf(p, sizeof(p), "devices/system/cpu/cpu%u/cache/index%u/level", c->id, k);
                r = read_int(l, p, &level);
                if (r < 0)
                        return r;
                if (r == 0)
                        break; /* indexK are consecutive */
                path_printf(p, sizeof(p), "devices/system/cpu/cpu%u/cache/index%u/type", c->id, k);
                r = read_str(l, p, type, sizeof(type));
                if (r < 0)
                        return r;
                if (r == 0)
                        strcpy(type, "Unified");
                if (strcmp(type, "Instruction") == 0)
                        continue;
                path_printf(p, sizeof(p), "devices/system/cpu/cpu%u/cache/index%u/shared_cpu_list", c->id, k);
                cpuset_zero(&shared);
                cpuset_set(&shared, c->id);
                r = read_cpuset(l, p, &shared);
                if (r < 0)
                        return r;
                if (level > best_level) {
                        best_level = level;
                        best = shared;
                }
        }
        if (best_level >= 0) {
                c->llc_cpus = best;
                c->llc_id = cpuset_next(&best, 0);
        }
        return 0;
}

static int load_idle_states(struct loader *l, struct topo_cpu *c)
{
        for (unsigned k = 0; k < TOPO_MAX_IDLE_STATES; k++) {
                struct topo_idle_state *s = &c->idle[k];
                char base[96], p[128];
                uint32_t power;
                int r;

                path_printf(base, sizeof(base), "devices/system/cpu/cpu%u/cpuidle/state%u", c->id, k);
                *s = (struct topo_idle_state) { 0 };
                snprintf(s->name, sizeof(s->name), "state%u", k);

                path_printf(p, sizeof(p), "%s/latency", base);
                r = read_u32(l, p, &s->exit_latency_us);
                if (r < 0)
                        return r;
                if (r == 0) {
                        /* No latency: the state directory does not exist; states are consecutive. */
                        c->n_idle_states = k;
                        return 0;
                }
                path_printf(p, sizeof(p), "%s/name", base);
                r = read_str(l, p, s->name, sizeof(s->name));
                if (r < 0)
                        return r;
                path_printf(p, sizeof(p), "%s/desc", base);
                r = read_str(l, p, s->desc, sizeof(s->desc));
                if (r < 0)
                        return r;
                path_printf(p, sizeof(p), "%s/residency", base);
                r = read_u32(l, p, &s->target_residency_us);
                if (r < 0)
                        return r;
                path_printf(p, sizeof(p), "%s/disable", base);
                r = read_bool01(l, p, &s->disabled);
                if (r < 0)
                        return r;
                path_printf(p, sizeof(p), "%s/power", base);
                r = read_u32(l, p, &power);
                if (r < 0)
                        return r;
                if (r > 0 && power != 0 && power != UINT32_MAX) {
                        s->has_power = true;
                        s->power_mw = power;
                }
        }
        c->n_idle_states = TOPO_MAX_IDLE_STATES;
        return 0;
}

static int load_cpu(struct loader *l, struct topology *t, struct topo_cpu *c)
{
        char p[128];
        int r;

        c->present = cpuset_isset(&t->present, c->id);
        c->online = cpuset_isset(&t->online, c->id);
        c->package_id = -1;
        c->die_id = 0;
        c->cluster_id = -1;
        c->core_id = (int) c->id;
        c->llc_id = -1;
        c->node = 0;
        c->policy = -1;
        cpuset_zero(&c->smt_siblings);
        cpuset_set(&c->smt_siblings, c->id);
        cpuset_zero(&c->core_siblings); /* filled in later if absent */
        cpuset_zero(&c->die_cpus);
        c->llc_cpus = c->smt_siblings;

        path_printf(p, sizeof(p), "devices/system/cpu/cpu%u/online", c->id);
        r = read_bool01(l, p, &c->online);
        if (r < 0)
                return r;

#define RD(fn, name, dst)                                                                      \
        do {                                                                                   \
                path_printf(p, sizeof(p), "devices/system/cpu/cpu%u/topology/" name, c->id);   \
                r = fn(l, p, dst);                                                             \
                if (r < 0)                                                                     \
                        return r;                                                              \
        } while (0)

        RD(read_int, "physical_package_id", &c->package_id);
        RD(read_int, "die_id", &c->die_id);
        RD(read_int, "cluster_id", &c->cluster_id);
        RD(read_int, "core_id", &c->core_id);
        RD(read_cpuset, "thread_siblings_list", &c->smt_siblings);
        if (r == 0)
                RD(read_cpuset, "core_cpus_list", &c->smt_siblings);
        RD(read_cpuset, "core_siblings_list", &c->core_siblings);
        if (r == 0)
                RD(read_cpuset, "package_cpus_list", &c->core_siblings);
        RD(read_cpuset, "die_cpus_list", &c->die_cpus);
#undef RD

        r = load_cache(l, c);
        if (r < 0)
                return r;
        return load_idle_states(l, c);
}

static int load_nodes(struct loader *l, struct topology *t)
{
        _cleanup_free_ unsigned *ids = NULL;
        unsigned n = 0;
        int r;

        r = list_numbered(l, "devices/system/node", "node", &ids, &n);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < n; i++) {
                char p[64];
                cpuset_t cpus;

                path_printf(p, sizeof(p), "devices/system/node/node%u/cpulist", ids[i]);
                r = read_cpuset(l, p, &cpus);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                CPUSET_FOREACH(c, &cpus)
                        if ((unsigned) c < t->n_cpus)
                                t->cpus[c].node = (int) ids[i];
        }
        return 0;
}

static int load_policy(struct loader *l, struct topology *t, struct topo_cpufreq_policy *pol)
{
        char base[64], p[128];
        int r;

        path_printf(base, sizeof(base), "devices/system/cpu/cpufreq/policy%u", pol->id);
        cpuset_zero(&pol->related_cpus);
        if (pol->id < VP_MAX_CPUS)
                cpuset_set(&pol->related_cpus, pol->id);

#define RD(fn, name, ...)                                          \
        do {                                                       \
                path_printf(p, sizeof(p), "%s/" name, base);       \
                r = fn(l, p, __VA_ARGS__);                         \
                if (r < 0)                                         \
                        return r;                                  \
        } while (0)

        RD(read_cpuset, "related_cpus", &pol->related_cpus);
        pol->affected_cpus = pol->related_cpus;
        RD(read_cpuset, "affected_cpus", &pol->affected_cpus);
        RD(read_str, "scaling_driver", pol->driver, sizeof(pol->driver));
        RD(read_str, "scaling_governor", pol->governor, sizeof(pol->governor));
        RD(read_u32, "cpuinfo_min_freq", &pol->cpuinfo_min_khz);
        RD(read_u32, "cpuinfo_max_freq", &pol->cpuinfo_max_khz);
        RD(read_u32, "scaling_min_freq", &pol->scaling_min_khz);
        RD(read_u32, "scaling_max_freq", &pol->scaling_max_khz);
        RD(read_u32, "base_frequency", &pol->base_khz);
        RD(read_str, "energy_performance_preference", pol->epp, sizeof(pol->epp));
        pol->has_epp = r > 0;
        RD(read_str, "energy_performance_available_preferences", pol->available_epp,
           sizeof(pol->available_epp));
        RD(read_str, "scaling_available_governors", pol->available_governors,
           sizeof(pol->available_governors));
#undef RD

        path_printf(p, sizeof(p), "%s/scaling_available_frequencies", base);
        r = read_attr(l, p, l->buf, ATTR_BUF_SIZE);
        if (r < 0)
                return r;
        if (r > 0) {
                char *save = NULL;
                for (char *tok = strtok_r(l->buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
                        if (pol->n_freqs >= TOPO_MAX_FREQS) {
                                log_debug("%s/%s: more than %d frequencies", l->root, p, TOPO_MAX_FREQS);
                                return -EINVAL;
                        }
                        if (parse_u32(tok, &pol->freqs_khz[pol->n_freqs]) < 0) {
                                char e[64];
                                escape_bytes(tok, strlen(tok), e, sizeof(e));
                                log_debug("%s/%s: cannot parse frequency \"%s\"", l->root, p, e);
                                return -EINVAL;
                        }
                        pol->n_freqs++;
                }
                qsort(pol->freqs_khz, pol->n_freqs, sizeof(uint32_t), cmp_u32);
        }
        return 0;
}

static int load_cpufreq(struct loader *l, struct topology *t)
{
        _cleanup_free_ unsigned *ids = NULL;
        unsigned n = 0;
        int r;

        r = list_numbered(l, "devices/system/cpu/cpufreq", "policy", &ids, &n);
        if (r < 0)
                return r;
        if (n == 0)
                return 0;
        t->policies = calloc(n, sizeof(*t->policies));
        if (!t->policies)
                return -ENOMEM;
        for (unsigned i = 0; i < n; i++) {
                struct topo_cpufreq_policy *pol = &t->policies[t->n_policies];

                pol->id = ids[i];
                r = load_policy(l, t, pol);
                /* An inactive policy (every CPU of it offline): the kernel answers each read of
                 * its files with EBUSY (cpufreq.c show()).  Its CPUs are not planned; left out. */
                if (r == -EBUSY) {
                        log_debug("%s/devices/system/cpu/cpufreq/policy%u: inactive (its CPUs are offline), "
                                  "left out", l->root, ids[i]);
                        memset(pol, 0, sizeof(*pol));
                        continue;
                }
                if (r < 0)
                        return r;
                CPUSET_FOREACH(c, &pol->related_cpus)
                        if ((unsigned) c < t->n_cpus)
                                t->cpus[c].policy = (int) t->n_policies;
                t->n_policies++;
        }
        return 0;
}

/* Count distinct keys of up to 3 ints over online CPUs. */
struct key3 {
        int a, b, c;
};

static int cmp_key3(const void *x, const void *y)
{
        const struct key3 *p = x, *q = y;
        if (p->a != q->a)
                return p->a < q->a ? -1 : 1;
        if (p->b != q->b)
                return p->b < q->b ? -1 : 1;
        if (p->c != q->c)
                return p->c < q->c ? -1 : 1;
        return 0;
}

static unsigned count_distinct(struct key3 *keys, unsigned n)
{
        unsigned d = 0;

        if (n == 0)
                return 0;
        qsort(keys, n, sizeof(*keys), cmp_key3);
        d = 1;
        for (unsigned i = 1; i < n; i++)
                if (cmp_key3(&keys[i - 1], &keys[i]) != 0)
                        d++;
        return d;
}

static int compute_counts(struct topology *t)
{
        _cleanup_free_ struct key3 *k = calloc(t->n_cpus ? t->n_cpus : 1, sizeof(*k));
        unsigned n;

        if (!k)
                return -ENOMEM;
#define COUNT(dst, cond, A, B, C)                                          \
        do {                                                               \
                n = 0;                                                     \
                for (unsigned i = 0; i < t->n_cpus; i++) {                 \
                        const struct topo_cpu *c = &t->cpus[i];            \
                        if (!c->online || !(cond))                         \
                                continue;                                  \
                        k[n++] = (struct key3) { (A), (B), (C) };          \
                }                                                          \
                dst = count_distinct(k, n);                                \
        } while (0)

        COUNT(t->n_packages, true, c->package_id, 0, 0);
        COUNT(t->n_dies, true, c->package_id, c->die_id, 0);
        COUNT(t->n_llcs, c->llc_id >= 0, c->llc_id, 0, 0);
        COUNT(t->n_cores, true, c->package_id, c->die_id, c->core_id);
        COUNT(t->n_nodes, true, c->node, 0, 0);
#undef COUNT
        return 0;
}

/* smt with only the online CPUs of t. */
static void online_only(const struct topology *t, const cpuset_t *smt, cpuset_t *ret)
{
        cpuset_zero(ret);
        CPUSET_FOREACH(c, smt)
                if ((unsigned) c < t->n_cpus && t->cpus[c].online)
                        cpuset_set(ret, (unsigned) c);
}

/*
 * The kernel publishes one SMT sibling list per core, the same in each of its
 * threads.  Lists read while a CPU went on- or offline (cpu1 read "1,3", then
 * cpu1 offline, cpu3 read "3"), or a broken tree, disagree, and a CPU would
 * belong to two cores.  Compared over online CPUs (an offline CPU is in no
 * core): an online CPU whose list lacks itself, or names an online CPU whose
 * list differs, is reduced to itself.  The others keep their lists: every
 * member of such a list has the same list, so the cores stay disjoint.
 * Logged as a warning; the CPUs are in t->smt_inconsistent.
 */
static void fix_smt_siblings(struct loader *l, struct topology *t)
{
        cpuset_t a, b;
        char list[512];

        cpuset_zero(&t->smt_inconsistent);
        for (unsigned i = 0; i < t->n_cpus; i++) {
                bool ok;

                if (!t->cpus[i].online)
                        continue;
                online_only(t, &t->cpus[i].smt_siblings, &a);
                ok = cpuset_isset(&a, i);
                CPUSET_FOREACH(s, &a) {
                        if (!ok)
                                break;
                        if ((unsigned) s == i)
                                continue;
                        online_only(t, &t->cpus[s].smt_siblings, &b);
                        ok = cpuset_equal(&a, &b);
                }
                if (!ok)
                        cpuset_set(&t->smt_inconsistent, i);
        }
        if (cpuset_empty(&t->smt_inconsistent))
                return;
        CPUSET_FOREACH(c, &t->smt_inconsistent) {
                cpuset_zero(&t->cpus[c].smt_siblings);
                cpuset_set(&t->cpus[c].smt_siblings, (unsigned) c);
        }
        if (cpuset_format_list(&t->smt_inconsistent, list, sizeof(list)) < 0)
                snprintf(list, sizeof(list), "%u CPUs", cpuset_count(&t->smt_inconsistent));
        log_warning("%s/devices/system/cpu: the SMT sibling lists (thread_siblings_list) of CPU(s) %s disagree "
                    "with their siblings' (a CPU went on- or offline while they were read?): each is taken as "
                    "a core of its own", l->root, list);
}

int topology_load(const char *sysfs_root, struct topology **ret)
{
        struct loader l = { .dirfd = -1 };
        struct topology *t = NULL;
        int r, last;

        if (!sysfs_root || !*sysfs_root)
                sysfs_root = "/sys";
        l.root = sysfs_root;
        l.buf = malloc(ATTR_BUF_SIZE);
        t = calloc(1, sizeof(*t));
        if (!l.buf || !t) {
                r = -ENOMEM;
                goto fail;
        }
        if (strlen(sysfs_root) >= sizeof(t->root)) {
                r = log_debug_errno(ENAMETOOLONG, "sysfs root too long: %s", sysfs_root);
                goto fail;
        }
        strcpy(t->root, sysfs_root);
        l.dirfd = open(sysfs_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l.dirfd < 0) {
                r = log_debug_errno(errno, "Failed to open sysfs root %s: %m", sysfs_root);
                goto fail;
        }

        r = load_cpu_masks(&l, &t->possible, &t->present, &t->online);
        if (r < 0)
                goto fail;
        /* n_cpus = highest CPU number mentioned + 1 (possible normally covers the others). */
        last = -1;
        CPUSET_FOREACH(c, &t->possible) last = c;
        CPUSET_FOREACH(c, &t->present) last = MAX(last, c);
        CPUSET_FOREACH(c, &t->online) last = MAX(last, c);
        t->n_cpus = (unsigned) last + 1;
        t->cpus = calloc(t->n_cpus, sizeof(*t->cpus));
        if (!t->cpus) {
                r = -ENOMEM;
                goto fail;
        }
        for (unsigned i = 0; i < t->n_cpus; i++) {
                t->cpus[i].id = i;
                r = load_cpu(&l, t, &t->cpus[i]);
                if (r < 0)
                        goto fail;
                if (t->cpus[i].online)
                        cpuset_set(&t->online, i);
                else
                        cpuset_clear(&t->online, i);
        }
        /* Defaults that depend on other CPUs: package = CPUs with the same
         * physical_package_id (just {id} if that is unknown), die = package. */
        for (unsigned i = 0; i < t->n_cpus; i++) {
                struct topo_cpu *c = &t->cpus[i];

                if (cpuset_empty(&c->core_siblings)) {
                        cpuset_set(&c->core_siblings, i);
                        if (c->package_id >= 0)
                                for (unsigned j = 0; j < t->n_cpus; j++)
                                        if (t->cpus[j].package_id == c->package_id)
                                                cpuset_set(&c->core_siblings, j);
                }
                if (cpuset_empty(&c->die_cpus))
                        c->die_cpus = c->core_siblings;
        }
        fix_smt_siblings(&l, t);

        r = load_nodes(&l, t);
        if (r < 0)
                goto fail;
        r = load_cpufreq(&l, t);
        if (r < 0)
                goto fail;

        r = read_str(&l, "devices/system/cpu/cpuidle/current_driver", t->cpuidle_driver,
                     sizeof(t->cpuidle_driver));
        if (r < 0)
                goto fail;
        r = read_str(&l, "devices/system/cpu/cpuidle/current_governor", t->cpuidle_governor,
                     sizeof(t->cpuidle_governor));
        if (r == 0)
                r = read_str(&l, "devices/system/cpu/cpuidle/current_governor_ro", t->cpuidle_governor,
                             sizeof(t->cpuidle_governor));
        if (r < 0)
                goto fail;

        r = compute_counts(t);
        if (r < 0)
                goto fail;
        r = read_bool01(&l, "devices/system/cpu/smt/active", &t->smt_active);
        if (r < 0)
                goto fail;
        if (r == 0) {
                t->smt_active = false;
                for (unsigned i = 0; i < t->n_cpus; i++)
                        if (t->cpus[i].online && cpuset_count(&t->cpus[i].smt_siblings) > 1)
                                t->smt_active = true;
        }
        close(l.dirfd);
        free(l.buf);
        *ret = t;
        return 0;
fail:
        if (l.dirfd >= 0)
                close(l.dirfd);
        free(l.buf);
        topology_free(t);
        return r;
}

int topology_read_online(const char *sysfs_root, cpuset_t *ret)
{
        struct loader l = { .dirfd = -1 };
        cpuset_t possible, present, online;
        int r;

        if (!sysfs_root || !*sysfs_root)
                sysfs_root = "/sys";
        l.root = sysfs_root;
        l.buf = malloc(ATTR_BUF_SIZE);
        if (!l.buf)
                return -ENOMEM;
        l.dirfd = open(sysfs_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l.dirfd < 0)
                r = log_debug_errno(errno, "Failed to open sysfs root %s: %m", sysfs_root);
        else {
                r = read_cpuset(&l, "devices/system/cpu/online", &online);
                if (r == 0) /* no cpu/online: the default topology_load() takes */
                        r = load_cpu_masks(&l, &possible, &present, &online);
                close(l.dirfd);
        }
        free(l.buf);
        if (r < 0)
                return r;
        *ret = online;
        return 0;
}

void topology_free(struct topology *t)
{
        if (!t)
                return;
        free(t->cpus);
        free(t->policies);
        free(t);
}

static const char *fmt_set(const cpuset_t *s, char *buf, size_t size)
{
        if (cpuset_empty(s))
                return "-";
        if (cpuset_format_list(s, buf, size) < 0)
                return "?";
        return buf;
}

static const char *esc(const char *s, char *buf, size_t size)
{
        escape_bytes(s, strlen(s), buf, size);
        return buf;
}

void topology_dump(const struct topology *t, FILE *f)
{
        enum { B = 32768 };
        _cleanup_free_ char *bufs = malloc(4 * B);
        char *b1, *b2, *b3, *b4;
        char e1[512], e2[512];

        if (!bufs) {
                fprintf(f, "# out of memory\n");
                return;
        }
        b1 = bufs, b2 = bufs + B, b3 = bufs + 2 * B, b4 = bufs + 3 * B;

        fprintf(f, "# vmmpower topology v1\n");
        fprintf(f, "cpus n=%u possible=%s present=%s online=%s\n", t->n_cpus,
                fmt_set(&t->possible, b1, B), fmt_set(&t->present, b2, B),
                fmt_set(&t->online, b3, B));
        fprintf(f, "counts packages=%u dies=%u llcs=%u cores=%u nodes=%u smt_active=%d\n", t->n_packages,
                t->n_dies, t->n_llcs, t->n_cores, t->n_nodes, t->smt_active);
        fprintf(f, "cpuidle driver=\"%s\" governor=\"%s\"\n",
                esc(t->cpuidle_driver, e1, sizeof(e1)), esc(t->cpuidle_governor, e2, sizeof(e2)));
        for (unsigned i = 0; i < t->n_cpus; i++) {
                const struct topo_cpu *c = &t->cpus[i];

                fprintf(f,
                        "cpu %u present=%d online=%d package=%d die=%d cluster=%d core=%d llc=%d node=%d policy=%d "
                        "smt=%s package_cpus=%s die_cpus=%s llc_cpus=%s idle_states=%u\n",
                        c->id, c->present, c->online, c->package_id, c->die_id, c->cluster_id, c->core_id,
                        c->llc_id, c->node, c->policy, fmt_set(&c->smt_siblings, b1, B),
                        fmt_set(&c->core_siblings, b2, B), fmt_set(&c->die_cpus, b3, B),
                        fmt_set(&c->llc_cpus, b4, B), c->n_idle_states);
        }
        for (unsigned i = 0; i < t->n_cpus; i++) {
                const struct topo_cpu *c = &t->cpus[i];

                for (unsigned k = 0; k < c->n_idle_states; k++) {
                        const struct topo_idle_state *s = &c->idle[k];
                        fprintf(f, "idle cpu=%u state=%u name=\"%s\" desc=\"%s\" latency_us=%" PRIu32
                                " residency_us=%" PRIu32 " disabled=%d power_mw=",
                                c->id, k, esc(s->name, e1, sizeof(e1)), esc(s->desc, e2, sizeof(e2)),
                                s->exit_latency_us, s->target_residency_us, s->disabled);
                        if (s->has_power)
                                fprintf(f, "%" PRIu32 "\n", s->power_mw);
                        else
                                fprintf(f, "-\n");
                }
        }
        for (unsigned i = 0; i < t->n_policies; i++) {
                const struct topo_cpufreq_policy *p = &t->policies[i];

                fprintf(f, "policy %u related=%s affected=%s driver=\"%s\" governor=\"%s\"", p->id,
                        fmt_set(&p->related_cpus, b1, B), fmt_set(&p->affected_cpus, b2, B),
                        esc(p->driver, e1, sizeof(e1)), esc(p->governor, e2, sizeof(e2)));
                fprintf(f, " cpuinfo_khz=%" PRIu32 "-%" PRIu32 " scaling_khz=%" PRIu32 "-%" PRIu32
                        " base_khz=%" PRIu32 " freqs_khz=",
                        p->cpuinfo_min_khz, p->cpuinfo_max_khz, p->scaling_min_khz, p->scaling_max_khz,
                        p->base_khz);
                if (p->n_freqs == 0)
                        fprintf(f, "-");
                for (unsigned k = 0; k < p->n_freqs; k++)
                        fprintf(f, "%s%" PRIu32, k ? "," : "", p->freqs_khz[k]);
                fprintf(f, " epp=");
                if (p->has_epp)
                        fprintf(f, "\"%s\"", esc(p->epp, e1, sizeof(e1)));
                else
                        fprintf(f, "-");
                fprintf(f, " available_epp=\"%s\"", esc(p->available_epp, e1, sizeof(e1)));
                fprintf(f, " available_governors=\"%s\"\n", esc(p->available_governors, e1, sizeof(e1)));
        }
}

/* A synthetic Xeon-like host (topology.h); used by vmmpower-sim and plan-bench. */
int topology_synthetic(unsigned n_pkgs, unsigned per_pkg, struct topology **ret)
{
        static const struct topo_idle_state idle[] = {
                { "POLL", "", 0, 0, false, false, 0 },
                { "C1", "", 1, 1, false, false, 0 },
                { "C1E", "", 2, 4, false, false, 0 },
                { "C6", "", 290, 800, false, false, 0 },
        };
        unsigned n_cores = n_pkgs * per_pkg, n_cpus = 2 * n_cores;
        struct topology *t;

        if (n_pkgs == 0 || per_pkg == 0 || n_cpus > VP_MAX_CPUS)
                return -EINVAL;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->n_cpus = n_cpus;
        t->cpus = calloc(n_cpus, sizeof(*t->cpus));
        t->policies = calloc(n_cpus, sizeof(*t->policies));
        if (!t->cpus || !t->policies) {
                topology_free(t);
                return -ENOMEM;
        }
        snprintf(t->root, sizeof(t->root), "synth:%ux%u", n_pkgs, per_pkg);
        t->synthetic = true;
        t->n_policies = n_cpus;
        t->n_packages = n_pkgs;
        t->n_dies = n_pkgs;
        t->n_cores = n_cores;
        t->n_llcs = n_pkgs * ((per_pkg + 7) / 8);
        t->n_nodes = n_pkgs;
        t->smt_active = true;
        strcpy(t->cpuidle_driver, "intel_idle");
        strcpy(t->cpuidle_governor, "menu");
        for (unsigned i = 0; i < n_cpus; i++) {
                struct topo_cpu *c = &t->cpus[i];
                struct topo_cpufreq_policy *p = &t->policies[i];
                unsigned core = i % n_cores;

                c->id = i;
                c->present = c->online = true;
                c->package_id = (int) (core / per_pkg);
                c->die_id = 0;
                c->core_id = (int) (core % per_pkg);
                c->llc_id = (int) (c->package_id * 1000 + (core % per_pkg) / 8);
                c->node = c->package_id;
                c->policy = (int) i;
                c->cluster_id = -1;
                cpuset_zero(&c->smt_siblings);
                cpuset_set(&c->smt_siblings, core);
                cpuset_set(&c->smt_siblings, core + n_cores);
                c->n_idle_states = ELEMENTSOF(idle);
                memcpy(c->idle, idle, sizeof(idle));
                cpuset_set(&t->online, i);
                cpuset_set(&t->present, i);
                cpuset_set(&t->possible, i);

                p->id = i;
                cpuset_zero(&p->related_cpus);
                cpuset_set(&p->related_cpus, i);
                p->affected_cpus = p->related_cpus;
                strcpy(p->driver, "intel_pstate");
                strcpy(p->governor, "powersave");
                p->cpuinfo_min_khz = p->scaling_min_khz = 800000;
                p->cpuinfo_max_khz = p->scaling_max_khz = 3800000;
                p->base_khz = 2000000;
        }
        *ret = t;
        return 0;
}
