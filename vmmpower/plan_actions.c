/* SPDX-License-Identifier: GPL-2.0-or-later */
/* From a plan to its actions: pins, frequency caps, idle limits (plan_actions.h). */
#include <errno.h>
#include <stdlib.h>
#include <sys/types.h>

#include "plan_actions.h"
#include "util.h"

uint32_t plan_level_khz(const struct em_host *h, unsigned level)
{
        return level < h->model.n_levels ? h->model.levels[level].freq_khz : 0;
}

int32_t plan_latency_knob(uint32_t max_latency_us)
{
        return max_latency_us == EM_LATENCY_ANY ? -1 : (int32_t) MIN(max_latency_us, (uint32_t) INT32_MAX);
}

void plan_cpu_knobs(const struct em_host *h, unsigned level, uint32_t max_latency_us, struct plan_cpu_action *a)
{
        a->level = (uint8_t) level;
        a->max_khz = plan_level_khz(h, level);
        a->latency_us = plan_latency_knob(max_latency_us);
}

void plan_actions_done(struct plan_actions *act)
{
        free(act->pin);
        free(act->set);
        free(act->prev_set);
        free(act->cpu);
        *act = (struct plan_actions) { 0 };
}

/* Room for n_v pins and their sets, prev_n sets of prev's pins, the host's CPUs. */
static int actions_reserve(struct plan_actions *act, size_t n_v, size_t prev_n, unsigned n_cpus)
{
        size_t pins = act->alloc, sets = act->alloc, cpus = act->cpu_alloc;

        if (array_grow((void **) &act->pin, &pins, n_v, sizeof(*act->pin)) < 0 ||
            array_grow((void **) &act->set, &sets, n_v, sizeof(*act->set)) < 0 ||
            array_grow((void **) &act->prev_set, &act->prev_alloc, prev_n, sizeof(*act->prev_set)) < 0 ||
            array_grow((void **) &act->cpu, &cpus, n_cpus, sizeof(*act->cpu)) < 0)
                return -ENOMEM;
        act->alloc = pins;
        act->cpu_alloc = (unsigned) cpus;
        return 0;
}

/* The pin target of vCPU i of plan p, inputs v: its CPU, PLAN_PIN_RELEASE, or -1. */
static int pin_cpu(const struct plan *p, const struct plan_vcpu *v, size_t i)
{
        if (i >= p->n_vcpus)
                return -1;
        return v[i].mode == PLACE_EXCLUDE ? PLAN_PIN_RELEASE : p->vcpu_cpu[i];
}

/*
 * Index in prev of the vCPU of key (-1: none).  Both plans follow the
 * tracker's order, so the search starts where the last one matched
 * (*cursor) and seldom goes further.
 */
static ssize_t prev_index(const struct plan *prev, size_t prev_n, uint64_t key, size_t *cursor)
{
        size_t n = MIN(prev_n, (size_t) prev->n_vcpus);

        for (size_t k = 0; k < n; k++) {
                size_t j = (*cursor + k) % n;
                if (prev->vcpu_key[j] == key) {
                        *cursor = j + 1;
                        return (ssize_t) j;
                }
        }
        return -1;
}

static int vcpu_actions(const struct em_host *h, const struct plan_policy *pol,
                        const struct plan *prev, const struct plan_vcpu *prev_v, size_t prev_n,
                        const struct plan *next, const struct plan_vcpu *v, size_t n_v,
                        struct plan_actions *act)
{
        size_t cursor = 0;
        int r;

        r = plan_pin_sets(h, pol, next, v, n_v, act->set);
        if (r >= 0 && prev)
                r = plan_pin_sets(h, pol, prev, prev_v, prev_n, act->prev_set);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_v; i++) {
                struct plan_pin *pin = &act->pin[i];
                ssize_t j = prev && i < next->n_vcpus ? prev_index(prev, prev_n, next->vcpu_key[i], &cursor) : -1;
                int was = j >= 0 ? pin_cpu(prev, prev_v, (size_t) j) : -1;

                pin->cpu = pin_cpu(next, v, i);
                if (pin->cpu < 0)
                        cpuset_zero(&act->set[i]);
                pin->changed = pin->cpu != was ||
                               (pin->cpu >= 0 && !cpuset_equal(&act->set[i], &act->prev_set[j]));
                act->n_pins_changed += pin->changed;
        }
        return 0;
}

int plan_to_actions(const struct em_host *h, const struct plan_policy *pol,
                    const struct plan *prev, const struct plan_vcpu *prev_v, size_t prev_n,
                    const struct plan *next, const struct plan_vcpu *v, size_t n_v,
                    struct plan_actions *act)
{
        bool same_host = prev && prev->n_cpus == h->n_cpus && prev->n_fdoms == h->n_fdoms;
        int r;

        act->n_vcpus = 0;
        act->n_cpus = 0;
        act->n_pins_changed = 0;
        act->n_cpus_changed = 0;
        if (!prev_v)
                prev_n = 0; /* a previous plan of no vCPUs (its knobs still count) */
        r = actions_reserve(act, n_v, prev ? prev_n : 0, h->n_cpus);
        if (r >= 0)
                r = vcpu_actions(h, pol, prev, prev_v, prev_n, next, v, n_v, act);
        if (r < 0) {
                act->n_pins_changed = 0;
                return r;
        }
        act->n_vcpus = n_v;
        act->n_cpus = h->n_cpus;
        for (unsigned c = 0; c < h->n_cpus; c++) {
                struct plan_cpu_action *a = &act->cpu[c];
                unsigned f = h->cpu_fdom[c];

                *a = (struct plan_cpu_action) { .online = h->cpu_core[c] >= 0 && c < next->n_cpus };
                if (!a->online)
                        continue;
                plan_cpu_knobs(h, next->fdom_level[f], next->cpu_max_latency_us[c], a);
                a->level_changed = !same_host || prev->fdom_level[f] != next->fdom_level[f];
                a->latency_changed = !same_host || prev->cpu_max_latency_us[c] != next->cpu_max_latency_us[c];
                act->n_cpus_changed += a->level_changed || a->latency_changed;
        }
        return 0;
}
