/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "placement.h"
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

/* Key pid << 16 | vCPU index, VM = pid, util = decayed utilisation, wait = last period's. */
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
 * than the host's, the NUMA nodes of its memory (plan_input_numa_nodes).
 * Returns 0, or plan_input_numa_nodes()'s error for a binding that cannot
 * hold here (the VM then packed anywhere: the caller warns).
 */
int plan_input_apply_policy(const struct topology *topo, const struct vm_policy *pol, struct plan_vcpu *v, size_t n);

/*
 * Every wanted vCPU of vms[0..n_vms) in order; modes[i] is VM i's mode (NULL:
 * pack).  out has room for the sum of n_vcpus.  Returns the number written.
 */
size_t plan_inputs_from_vms(const struct vm_load *const *vms, size_t n_vms, const enum place_mode *modes,
                            struct plan_vcpu *out);

/*
 * Frequency invariance: the capacity (1..1024) at which vCPU i of an applied
 * plan ran, the capacity of its pCPU's domain level (the cap the applier
 * wrote), for tracker_set_load_scale(); 0 (unscaled) when the plan did not
 * place it or does not fit the host.
 */
unsigned plan_load_scale(const struct em_host *h, const struct plan *p, unsigned i);
