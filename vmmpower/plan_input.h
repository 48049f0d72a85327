/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "placement.h"
#include "vcpu_ref.h"
#include "vcpu_track.h"

/*
 * From what the daemon measures to what the planner takes: the one place
 * where the configuration becomes a struct plan_policy and a tracked vCPU
 * becomes a struct plan_vcpu.  vmmpowerd (daemon.c plan_period) and
 * vmmpower-sim (sim/sim.c) both go through these, so that the simulator
 * decides exactly as the daemon would.
 */

/* [Planner] keys -> planner policy (the rest at plan_policy_defaults()). */
void plan_policy_from_config(const struct vp_config *cfg, struct plan_policy *pol);

/* A vCPU enters the plan once it has a measured utilisation and while its thread lives. */
bool plan_input_wanted(const struct vcpu_load *v);

/* Key vcpu_ref_key(pid, index), VM = pid, util = decayed utilisation, wait = last period's, cur_cpu -1. */
struct plan_vcpu plan_input_from_vcpu(pid_t pid, const struct vcpu_load *v, enum place_mode mode);

struct topology;
/*
 * A domain's <numatune><memory nodeset> (vm_policy.mem_nodeset) as the
 * planner's node mask (plan_vcpu.nodes, bit n = node n): every mode bounds
 * (docs/coexistence.md).  0 with *ret = 0 for "" (no binding); -EINVAL for a
 * list that does not parse (also "?", a nodeset too long to keep); -ENOENT
 * when no online CPU of this host is in those nodes (nodes 64 and up are not
 * counted): *ret = 0, the caller warns and packs the VM anywhere.
 */
int plan_input_numa_nodes(const struct topology *topo, const char *nodeset, uint64_t *ret);

struct vm_policy;
/*
 * A VM's policy onto its plan inputs v[0..n): its queueing budget when tighter
 * than the host's, the NUMA nodes of its memory (plan_input_numa_nodes;
 * none when topo is NULL).  Returns 0, or plan_input_numa_nodes()'s error for a binding that cannot
 * hold here (the VM then packed anywhere: the caller warns).
 */
int plan_input_apply_policy(const struct topology *topo, const struct vm_policy *pol, struct plan_vcpu *v, size_t n);

/*
 * Frequency invariance: the capacity (1..1024) at which vCPU i of an applied
 * plan ran, the capacity of its pCPU's domain level (the cap the applier
 * wrote), for tracker_set_load_scale(); 0 (unscaled) when the plan did not
 * place it or does not fit the host.
 */
unsigned plan_load_scale(const struct em_host *h, const struct plan *p, unsigned i);

struct hint_effective;
/*
 * A guest's hint as the planner takes it, for the vCPU r (trust=full, live):
 * a level is the performance the guest wants while the vCPU runs, a floor for
 * its domain's level and never demand (an idle guest's agent sends its lowest
 * step, 128: that must cost nothing), fading with its weight toward no floor
 * (a dead agent asks for less and less).  A boost asks for the VM's
 * max_level: the top level and a shallow idle limit only when max_level is
 * 1024, otherwise a floor at max_level (0: nothing).  false when the hint
 * has no effect (advisory trust, no live hint).
 */
bool plan_hint_from_effective(struct vcpu_ref r, const struct hint_effective *e, struct plan_hint *ret);

/*
 * Where the planner's input comes from besides the tracked VMs (all optional).
 * vmmpowerd: /proc and the hint server; vmmpower-sim: its own state and a
 * replayed hint script.
 */
struct plan_input_sources {
        const struct topology *topo; /* NUMA nodes of the VMs' memory bindings (NULL: none) */
        unsigned n_cpus;             /* CPUs of the model's host: a cur_cpu outside is -1 */
        const struct plan *prev;     /* the plan in force: its vCPUs need no cur_cpu */
        nsec_t now;
        /* The CPU a vCPU thread runs on now, or < 0: asked for every excluded vCPU (its
         * load is counted there) and every vCPU the previous plan does not know (it stays
         * there until a plan has a reason to move it).  NULL: unknown. */
        int (*thread_cpu)(void *userdata, pid_t pid, pid_t tid);
        /* Is the vCPU thread pinned by someone else (the applier found the pin it made changed,
         * apply.h)?  Such a vCPU is planned as excluded, where it runs.  NULL: none is. */
        bool (*pinned_by_others)(void *userdata, pid_t pid, pid_t tid);
        /* A VM's decayed hint state per vCPU index 0..max-1 (hint_server_vm_state()):
         * the number filled, or < 0 for none.  NULL: no hints. */
        int (*vm_hints)(void *userdata, pid_t pid, nsec_t now, struct hint_effective *ret, size_t max);
        /* Called for a VM whose <numatune> binding cannot hold here (it is packed anywhere)
         * with plan_input_numa_nodes()'s error.  NULL: counted only. */
        void (*numa_ignored)(void *userdata, const struct vm_load *vm, int error);
        void *userdata;
};

/*
 * The planner's whole input for one period: one plan_vcpu per wanted vCPU of
 * the VMs in the order given, lowest index first (so grouped by VM), with
 * its thread, the VM's mode, queueing budget and NUMA nodes, its current CPU
 * where the planner needs it, and the hints of every VM.  Arrays are reused
 * across builds.
 */
struct plan_input {
        struct plan_vcpu *v;       /* [n] */
        pid_t *tid;                /* [n] the vCPU's thread */
        size_t n, alloc;
        struct plan_hint *hints;   /* [n_hints] */
        size_t n_hints, hints_alloc;
        size_t numa_ignored;       /* VMs whose NUMA binding cannot hold here */
        size_t n_pinned_by_others; /* vCPUs planned as excluded because someone else pinned them */
        struct hint_effective *eff;/* scratch, [VM_MAX_VCPUS] */
        uint64_t *known;           /* scratch: the previous plan's keys, sorted [n_known] */
        size_t n_known, known_alloc;
};

/* Build *in from vms[0..n_vms) (each VM's mode from its policy): 0 or -ENOMEM (in unchanged then). */
int plan_input_build(struct plan_input *in, const struct vm_load *const *vms, size_t n_vms,
                     const struct plan_input_sources *src);
void plan_input_done(struct plan_input *in);
/* Exchange two inputs (the plan shown goes with its own inputs). */
void plan_input_swap(struct plan_input *a, struct plan_input *b);
