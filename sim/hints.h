/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hint_proto.h"
#include "trace.h"
#include "util.h"

/*
 * Guest hints replayed into vmmpower-sim (docs/simulator.md, "Hints"): a
 * script of lines `SECONDS VM MESSAGE`, MESSAGE one guest-to-host line of the
 * hint protocol (docs/protocol.md: HELLO, LEVEL, BOOST, ...), sent by the
 * run's VM number VM (0-based, in the order the run draws its VMs) at
 * SECONDS of simulated time from the run's start.  Each VM of the script gets
 * the daemon's own per-VM hint state (hint_vm_new / hint_vm_feed, under the
 * configuration's [Hints] policy: Trust = full for hints to act), and the
 * planner sees it through plan_input_build() as vmmpowerd's plan_period does.
 */
struct sim_hint_line {
        nsec_t at;
        unsigned vm;
        char *text;       /* the protocol line, without newline */
};

struct sim_hint_script {
        struct sim_hint_line *lines;
        size_t n;
};

/* Parse a script: 0, or -EINVAL with *err (times must not go back), -ENOMEM, -errno. */
int sim_hint_script_load(const char *path, struct sim_hint_script **ret, struct sim_error *err);
void sim_hint_script_free(struct sim_hint_script *s);

/* The replay of a script over a run's VMs: VM k is QEMU pid pid0 + k with vcpus[k] vCPUs. */
struct sim_hint_replay;
/* -EINVAL with *err when the script names a VM the run does not have, -ENOMEM. */
int sim_hint_replay_new(const struct sim_hint_script *s, const struct hint_policy *pol, uint32_t pid0,
                        const unsigned *vcpus, unsigned n_vms, struct sim_hint_replay **ret, struct sim_error *err);
void sim_hint_replay_free(struct sim_hint_replay *r);
/* Feed every line due by now (and pass time for each VM's handshake). */
void sim_hint_replay_advance(struct sim_hint_replay *r, nsec_t now);
/* plan_input_sources.vm_hints over a replay (userdata: the replay). */
int sim_hint_replay_vm_state(void *userdata, pid_t pid, nsec_t now, struct hint_effective *ret, size_t max);
/* Lines fed so far, and those that took a token (may actuate). */
void sim_hint_replay_counts(const struct sim_hint_replay *r, uint64_t *fed, uint64_t *actuating);
