/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/*
 * One name for a vCPU from the tracker to the applier: the VM (its QEMU
 * process id, the identity every source agrees on) and the vCPU's index in
 * that VM.  The planner takes an opaque 64-bit key per vCPU (plan_vcpu.key,
 * plan_hint.key, plan.vcpu_key, why.forced_by_key); vcpu_ref_key() is the
 * only place that key is made and vcpu_ref_of_key() the only place it is
 * taken apart.  Keys order like (pid, index), so a plan's vCPUs sorted by key
 * are grouped by VM, lowest vCPU first.  An index fits 16 bits
 * (VM_MAX_VCPUS, 1024); a pid fits 32.
 */
struct vcpu_ref {
        pid_t pid;
        uint32_t index;
};

#define VCPU_REF_INDEX_BITS 16

static inline uint64_t vcpu_ref_key(struct vcpu_ref r)
{
        return ((uint64_t) (uint32_t) r.pid << VCPU_REF_INDEX_BITS) |
               (uint64_t) (r.index & ((1u << VCPU_REF_INDEX_BITS) - 1));
}

static inline struct vcpu_ref vcpu_ref_of_key(uint64_t key)
{
        return (struct vcpu_ref) {
                .pid = (pid_t) (key >> VCPU_REF_INDEX_BITS),
                .index = (uint32_t) (key & ((1u << VCPU_REF_INDEX_BITS) - 1)),
        };
}
