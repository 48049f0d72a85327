/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Planner inputs from the configuration and the tracker (plan_input.h). */
#include <errno.h>

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
                .key = ((uint64_t) pid << 16) | (uint64_t) (v->index & 0xffff),
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
        if (pol->mem_nodeset[0])
                r = plan_input_numa_nodes(topo, pol->mem_nodeset, &nodes);
        for (size_t j = 0; j < n; j++)
                v[j].nodes = nodes;
        return r;
}

size_t plan_inputs_from_vms(const struct vm_load *const *vms, size_t n_vms, const enum place_mode *modes,
                            struct plan_vcpu *out)
{
        size_t n = 0;

        for (size_t i = 0; i < n_vms; i++)
                for (unsigned j = 0; j < vms[i]->n_vcpus; j++)
                        if (plan_input_wanted(&vms[i]->vcpus[j]))
                                out[n++] = plan_input_from_vcpu(vms[i]->info.pid, &vms[i]->vcpus[j],
                                                                modes ? modes[i] : PLACE_PACK);
        return n;
}

unsigned plan_load_scale(const struct em_host *h, const struct plan *p, unsigned i)
{
        int c;

        if (!p || i >= p->n_vcpus || p->n_cpus != h->n_cpus || p->n_fdoms != h->n_fdoms)
                return 0;
        c = p->vcpu_cpu[i];
        return c < 0 || (unsigned) c >= h->n_cpus ? 0 : plan_cpu_capacity(h, p, c);
}
