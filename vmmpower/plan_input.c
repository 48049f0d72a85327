/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Planner inputs from the configuration and the tracker (plan_input.h). */
#include "plan_input.h"

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
