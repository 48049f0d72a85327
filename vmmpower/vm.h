/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "vm_policy.h"

/*
 * What a discovery source knows of one VM: the QEMU process and its vCPU
 * threads.  A VM is identified on the host by its QEMU pid; sources are
 * merged by pid so that a libvirt domain that the /proc scan also finds is
 * counted once (libvirt's name and UUID win).
 */

#define VM_NAME_MAX 128
#define VM_MAX_VCPUS 1024 /* vCPU indexes 0..VM_MAX_VCPUS-1 are tracked; see n_vcpus_untracked */

enum vm_source {
        VM_SOURCE_LIBVIRT = 1u << 0, /* libvirt domain */
        VM_SOURCE_PROC = 1u << 1,    /* QEMU process found by vCPU thread names */
        VM_SOURCE_QMP = 1u << 2,     /* QEMU process reached through a configured QMP socket */
};
#define VM_SOURCE_ALL (VM_SOURCE_LIBVIRT | VM_SOURCE_PROC | VM_SOURCE_QMP)
#define VM_N_SOURCES 3

enum vm_accel {
        VM_ACCEL_UNKNOWN = 0,
        VM_ACCEL_KVM,
        VM_ACCEL_TCG,
};

struct vcpu_info {
        int index;   /* QEMU cpu-index, the N of "CPU N/KVM" */
        pid_t tid;
};

struct vm_info {
        pid_t pid;                  /* QEMU process */
        char name[VM_NAME_MAX];     /* libvirt name, QMP query-name, or -name guest=; else "qemu-<pid>" */
        char uuid[37];              /* "" when unknown */
        int libvirt_id;             /* -1 when not a libvirt domain */
        char qmp_socket[108];       /* "" when not known */
        char hint_socket[108];      /* guest hint channel (unix socket, host end); "" when not known */
        enum vm_accel accel;
        unsigned sources;           /* enum vm_source bits */
        unsigned n_vcpus;
        struct vcpu_info *vcpus;    /* n_vcpus entries, sorted by index */
        /*
         * vCPUs the source saw with an index >= VM_MAX_VCPUS: not in vcpus[],
         * so neither tracked nor pinned.  The VM itself is kept; the tracker
         * logs a warning per VM and metrics show the count
         * (vmmpower_vcpus_untracked).
         */
        unsigned n_vcpus_untracked;
        /*
         * Per-VM policy from the domain's libvirt metadata (vm_policy.h):
         * policy.place_mode (PLACE_PACK by default), policy.hints (overrides of
         * the [Hints] defaults), policy.source (default / metadata) and
         * policy.error (why metadata was rejected).  Host defaults for VMs not
         * from libvirt.
         */
        struct vm_policy policy;
};

void vm_info_done(struct vm_info *vm);  /* frees vcpus, keeps the struct */
void vm_info_free_array(struct vm_info *vms, size_t n);
int vm_info_copy(struct vm_info *dst, const struct vm_info *src);
const char *vm_accel_to_string(enum vm_accel a);
const char *vm_source_to_string(enum vm_source s);
