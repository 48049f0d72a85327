/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

void vm_info_done(struct vm_info *vm)
{
        if (!vm)
                return;
        free(vm->vcpus);
        vm->vcpus = NULL;
        vm->n_vcpus = 0;
}

void vm_info_free_array(struct vm_info *vms, size_t n)
{
        if (!vms)
                return;
        for (size_t i = 0; i < n; i++)
                vm_info_done(&vms[i]);
        free(vms);
}

int vm_info_copy(struct vm_info *dst, const struct vm_info *src)
{
        struct vcpu_info *v = NULL;

        if (src->n_vcpus > 0) {
                v = malloc(src->n_vcpus * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                memcpy(v, src->vcpus, src->n_vcpus * sizeof(*v));
        }
        *dst = *src;
        dst->vcpus = v;
        return 0;
}

const char *vm_accel_to_string(enum vm_accel a)
{
        switch (a) {
        case VM_ACCEL_KVM:
                return "kvm";
        case VM_ACCEL_TCG:
                return "tcg";
        default:
                return "unknown";
        }
}

const char *vm_source_to_string(enum vm_source s)
{
        switch (s) {
        case VM_SOURCE_LIBVIRT:
                return "libvirt";
        case VM_SOURCE_PROC:
                return "proc";
        case VM_SOURCE_QMP:
                return "qmp";
        default:
                return "unknown";
        }
}
