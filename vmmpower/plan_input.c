/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Planner inputs from the configuration and the tracker (plan_input.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hint_proto.h"
#include "plan_input.h"
#include "topology.h"
#include "vm_policy.h"

void plan_policy_from_config(const struct vp_config *cfg, struct plan_policy *pol)
{
        plan_policy_defaults(pol);
        pol->profile = cfg->profile ? PLAN_PROFILE_BATCH : PLAN_PROFILE_LATENCY;
        pol->queue_budget = cfg->queue_budget_bp / 10000.0;
        pol->headroom_pct = cfg->headroom_pct;
        pol->level_headroom_pct = cfg->level_headroom_pct;
        pol->wait_budget = cfg->wait_budget_pct / 100.0;
        pol->shrink_dwell_ns = cfg->shrink_dwell_ns;
        pol->move_cooldown_ns = cfg->move_cooldown_ns;
        pol->period_ns = cfg->period_ns;
        pol->max_moves = cfg->max_moves;
        pol->pin_single_cpu = cfg->pin_single_cpu;
        if (cfg->active_max_latency_us > 0)
                pol->active_max_latency_us = cfg->active_max_latency_us;
}

bool plan_input_wanted(const struct vcpu_load *v)
{
        return v->valid && !v->gone;
}

struct plan_vcpu plan_input_from_vcpu(pid_t pid, const struct vcpu_load *v, enum place_mode mode)
{
        return (struct plan_vcpu) {
                .key = vcpu_ref_key((struct vcpu_ref) { pid, (uint32_t) v->index }),
                .vm = (uint32_t) pid,
                .mode = mode,
                .util = v->util_avg,
                .util_last = v->util,
                .wait_ratio = v->wait_ratio,
                .wait_avg = v->wait_avg,
                .cur_cpu = -1,
        };
}

int plan_input_numa_nodes(const struct topology *topo, const char *nodeset, uint64_t *ret)
{
        cpuset_t nodes;
        uint64_t mask = 0, online = 0;
        int r;

        *ret = 0;
        if (!nodeset || !nodeset[0])
                return 0;
        r = cpuset_parse_list(nodeset, &nodes); /* the same list syntax: "0-1,3" */
        if (r < 0)
                return r;
        CPUSET_FOREACH(n, &nodes)
                if (n < 64)
                        mask |= UINT64_C(1) << n;
        for (unsigned c = 0; c < topo->n_cpus; c++)
                if (topo->cpus[c].present && topo->cpus[c].online && topo->cpus[c].node >= 0 &&
                    topo->cpus[c].node < 64)
                        online |= UINT64_C(1) << topo->cpus[c].node;
        if (!(mask & online))
                return -ENOENT;
        *ret = mask;
        return 0;
}

int plan_input_apply_policy(const struct topology *topo, const struct vm_policy *pol, struct plan_vcpu *v, size_t n)
{
        uint64_t nodes = 0;
        int r = 0;

        /* its queueing budget (libvirt metadata), when tighter than the host's: the planner decides */
        for (size_t j = 0; j < n && pol->queue_budget_bp; j++)
                v[j].queue_budget = pol->queue_budget_bp / 10000.0;
        if (pol->mem_nodeset[0] && topo)
                r = plan_input_numa_nodes(topo, pol->mem_nodeset, &nodes);
        for (size_t j = 0; j < n; j++)
                v[j].nodes = nodes;
        return r;
}

bool plan_hint_from_effective(struct vcpu_ref r, const struct hint_effective *e, struct plan_hint *ret)
{
        uint32_t floor = e->level;
        bool boost = e->boosted && e->boost_level >= HINT_LEVEL_MAX;

        if (e->boosted)
                floor = MAX(floor, e->boost_level);
        if (!e->may_actuate || (floor == 0 && !boost))
                return false;
        *ret = (struct plan_hint) {
                .key = vcpu_ref_key(r),
                .perf_floor = (double) floor / HINT_LEVEL_MAX,
                .boost = boost,
        };
        return true;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : (x > y);
}

/* in->known: the keys of plan p sorted, for plan_knows(). */
static int sort_known(struct plan_input *in, const struct plan *p)
{
        in->n_known = 0;
        if (!p || p->n_vcpus == 0)
                return 0;
        if (p->n_vcpus > in->known_alloc) {
                uint64_t *k = realloc(in->known, p->n_vcpus * sizeof(*k));
                if (!k)
                        return -ENOMEM;
                in->known = k;
                in->known_alloc = p->n_vcpus;
        }
        memcpy(in->known, p->vcpu_key, p->n_vcpus * sizeof(*in->known));
        qsort(in->known, p->n_vcpus, sizeof(*in->known), cmp_u64);
        in->n_known = p->n_vcpus;
        return 0;
}

static bool plan_knows(const struct plan_input *in, uint64_t key)
{
        return in->n_known && bsearch(&key, in->known, in->n_known, sizeof(key), cmp_u64);
}

/* The hints of VM pid onto in->hints. */
static int add_hints(struct plan_input *in, pid_t pid, const struct plan_input_sources *src)
{
        int k = src->vm_hints(src->userdata, pid, src->now, in->eff, VM_MAX_VCPUS);

        for (int j = 0; j < k && j < VM_MAX_VCPUS; j++) {
                struct plan_hint h;

                if (!plan_hint_from_effective((struct vcpu_ref) { pid, (uint32_t) j }, &in->eff[j], &h))
                        continue;
                if (in->n_hints == in->hints_alloc &&
                    array_grow((void **) &in->hints, &in->hints_alloc, in->hints_alloc ? 2 * in->hints_alloc : 64,
                         sizeof(*in->hints)) < 0)
                        return -ENOMEM;
                in->hints[in->n_hints++] = h;
        }
        return 0;
}

int plan_input_build(struct plan_input *in, const struct vm_load *const *vms, size_t n_vms,
                     const struct plan_input_sources *src)
{
        size_t want = 0, n = 0, tid_alloc = in->alloc;

        for (size_t i = 0; i < n_vms; i++)
                want += vms[i]->n_vcpus;
        in->n = in->n_hints = in->numa_ignored = in->n_pinned_by_others = 0;
        if (want > in->alloc) {
                struct plan_vcpu *v = realloc(in->v, want * sizeof(*v));
                pid_t *t;

                if (!v)
                        return -ENOMEM;
                in->v = v;
                t = realloc(in->tid, want * sizeof(*t));
                if (!t)
                        return -ENOMEM;
                in->tid = t;
                in->alloc = tid_alloc = want;
        }
        if (src->vm_hints && !in->eff && !(in->eff = calloc(VM_MAX_VCPUS, sizeof(*in->eff))))
                return -ENOMEM;
        if (src->thread_cpu && sort_known(in, src->prev) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n_vms; i++) {
                const struct vm_load *vm = vms[i];
                enum place_mode mode = vm->info.policy.place_mode; /* libvirt metadata, else pack */
                size_t k = 0;
                int r;

                for (unsigned j = 0; j < vm->n_vcpus; j++) {
                        const struct vcpu_load *l = &vm->vcpus[j];
                        struct plan_vcpu *v = &in->v[n + k];

                        if (!plan_input_wanted(l))
                                continue;
                        *v = plan_input_from_vcpu(vm->info.pid, l, mode);
                        if (mode != PLACE_EXCLUDE && src->pinned_by_others &&
                            src->pinned_by_others(src->userdata, vm->info.pid, l->tid)) {
                                v->mode = PLACE_EXCLUDE;
                                in->n_pinned_by_others++;
                        }
                        in->tid[n + k++] = l->tid;
                        if (src->thread_cpu && (v->mode == PLACE_EXCLUDE || !plan_knows(in, v->key))) {
                                int c = src->thread_cpu(src->userdata, vm->info.pid, l->tid);
                                v->cur_cpu = c >= 0 && (unsigned) c < src->n_cpus ? c : -1;
                        }
                }
                /* its queueing budget and the NUMA nodes of its memory (<numatune>); nodes with no
                 * online CPU here cannot bound it: then anywhere */
                r = plan_input_apply_policy(src->topo, &vm->info.policy, in->v + n, k);
                if (r < 0) {
                        in->numa_ignored++;
                        if (src->numa_ignored)
                                src->numa_ignored(src->userdata, vm, r);
                }
                n += k;
                if (src->vm_hints && add_hints(in, vm->info.pid, src) < 0)
                        return -ENOMEM;
        }
        in->n = n;
        return 0;
}

void plan_input_done(struct plan_input *in)
{
        free(in->v);
        free(in->tid);
        free(in->hints);
        free(in->eff);
        free(in->known);
        *in = (struct plan_input) { 0 };
}

void plan_input_swap(struct plan_input *a, struct plan_input *b)
{
        struct plan_input t = *a;

        *a = *b;
        *b = t;
}

unsigned plan_load_scale(const struct em_host *h, const struct plan *p, unsigned i)
{
        int c;

        if (!p || i >= p->n_vcpus || p->n_cpus != h->n_cpus || p->n_fdoms != h->n_fdoms)
                return 0;
        c = p->vcpu_cpu[i];
        return c < 0 || (unsigned) c >= h->n_cpus ? 0 : plan_cpu_capacity(h, p, c);
}
