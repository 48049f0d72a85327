/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpuset.h"
#include "energy_model.h"
#include "placement.h"

/*
 * From a plan to the actions that carry it out: the one conversion
 * vmmpowerd's applier (daemon.c submit_plan -> struct apply_request) and
 * vmmpower-sim's sim power driver (sim.c vmm_period, drive_knobs) consume.
 *
 *   - per vCPU a pin: its planned CPU and the CPUs it may run on
 *     (plan_pin_sets(): its LLC's pack set, or its CPU alone), or
 *     PLAN_PIN_RELEASE for a vCPU of an excluded VM (any pin we made goes
 *     back to its original), or -1: not placed, nothing to do;
 *   - per CPU the frequency cap of its domain's perf level
 *     (plan_level_khz()) and its idle latency limit (plan_latency_knob());
 *
 * each with whether it changed from the previous plan.  A pin is compared
 * with the pin of the vCPU with the same key in prev (from prev's own
 * inputs, prev_v); a vCPU prev does not have is changed if it has a pin.
 * Without prev (or prev of another host), everything is changed.
 */

#define PLAN_PIN_RELEASE (-2)

struct plan_pin {
        int cpu;          /* target CPU, PLAN_PIN_RELEASE, or -1: not placed (no action) */
        bool changed;     /* cpu or set differ from prev's pin of the vCPU */
};

struct plan_cpu_action {
        bool online;      /* offline: nothing else is set */
        uint8_t level;    /* perf level of the CPU's frequency domain */
        uint32_t max_khz; /* its cap, plan_level_khz(): 0 = no frequency to write */
        int32_t latency_us; /* idle latency limit, plan_latency_knob(): -1 = none */
        bool level_changed, latency_changed;
};

struct plan_actions {
        size_t n_vcpus;            /* the inputs' n_v */
        struct plan_pin *pin;      /* [n_vcpus] */
        cpuset_t *set;             /* [n_vcpus] with pin.cpu >= 0: the CPUs it may run on, empty = cpu alone */
        size_t n_pins_changed;
        unsigned n_cpus;           /* the host's */
        struct plan_cpu_action *cpu; /* [n_cpus] */
        unsigned n_cpus_changed;   /* online CPUs with a level or latency change */
        /* kept across calls, so that a period does not allocate */
        cpuset_t *prev_set;
        size_t alloc, prev_alloc;
        unsigned cpu_alloc;
};

/*
 * Fill *act (arrays grown as needed, kept for the next call) from plan next
 * of inputs v[n_v] (the plan's arrays follow them), against plan prev of
 * inputs prev_v[prev_n] (prev may be NULL; prev_v NULL: no vCPUs).  0, or
 * -ENOMEM (*act then holds no actions: n_vcpus and n_cpus 0).
 */
int plan_to_actions(const struct em_host *h, const struct plan_policy *pol,
                    const struct plan *prev, const struct plan_vcpu *prev_v, size_t prev_n,
                    const struct plan *next, const struct plan_vcpu *v, size_t n_v,
                    struct plan_actions *act);
void plan_actions_done(struct plan_actions *act);

/*
 * The knob values of a perf level and an exit latency limit, as the power
 * drivers take them: a level's frequency cap in kHz, 0 when the model's
 * level has no frequency (a ModelFile's levels on a host without cpufreq:
 * nothing to write); an idle latency limit as power_driver enter_idle()
 * takes it, -1 for none (EM_LATENCY_ANY).  plan_cpu_knobs() sets a's
 * level, max_khz and latency_us from them (the simulator's baselines, which
 * have levels but no plan, use it too).
 */
uint32_t plan_level_khz(const struct em_host *h, unsigned level);
int32_t plan_latency_knob(uint32_t max_latency_us);
void plan_cpu_knobs(const struct em_host *h, unsigned level, uint32_t max_latency_us, struct plan_cpu_action *a);
