/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for plain-QEMU discovery (procscan.h): the input is a
 * procfs tree (format in fuzz-tree.h; "<pid>/cmdline", "<pid>/task/<tid>/comm")
 * scanned with procscan_scan().  Thread names and command lines are chosen by
 * any local user, so this parser sees hostile bytes.  Checks what a scan
 * promises: VMs sorted by pid, each with a NUL-terminated non-empty name, at
 * least one vCPU, vCPU indexes strictly ascending below VM_MAX_VCPUS with
 * positive tids; and procscan_parse_vcpu_comm() (on the input's first line)
 * accepts (0, or -ERANGE from index VM_MAX_VCPUS up) exactly the names that
 * print back the same.
 * Seeds: fuzz/corpus/procscan/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-tree.h"
#include "log.h"
#include "procscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct procscan_stats st = { 0 };
        struct vm_info *vms = NULL;
        size_t n = 0;
        const char *root;
        char comm[64], back[64];
        enum vm_accel accel;
        int index, r;

        if (size > 64 * 1024)
                return 0;
        log_set_max_level((enum log_level) 0);

        snprintf(comm, sizeof(comm), "%.*s", (int) strnlen((const char *) data, size < 63 ? size : 63),
                 (const char *) data);
        comm[strcspn(comm, "\n")] = 0;
        r = procscan_parse_vcpu_comm(comm, &index, &accel);
        if (r == 0 || r == -ERANGE) {
                snprintf(back, sizeof(back), "CPU %d/%s", index, accel == VM_ACCEL_KVM ? "KVM" : "TCG");
                if (index < 0 || (index < VM_MAX_VCPUS) != (r == 0) || strcmp(back, comm) != 0)
                        abort();
        } else if (r != -EINVAL)
                abort();

        root = fuzz_tree_build("proc", data, size);
        if (procscan_scan(root, &vms, &n, &st) < 0)
                return 0;
        for (size_t i = 0; i < n; i++) {
                const struct vm_info *vm = &vms[i];

                if (vm->pid <= 0 || (i > 0 && vm->pid <= vms[i - 1].pid))
                        abort();
                if (strnlen(vm->name, sizeof(vm->name)) == 0 || strnlen(vm->name, sizeof(vm->name)) >= sizeof(vm->name))
                        abort();
                if (vm->n_vcpus == 0 || vm->n_vcpus > VM_MAX_VCPUS)
                        abort();
                for (unsigned k = 0; k < vm->n_vcpus; k++) {
                        if (vm->vcpus[k].tid <= 0 || vm->vcpus[k].index < 0 || vm->vcpus[k].index >= VM_MAX_VCPUS)
                                abort();
                        if (k > 0 && vm->vcpus[k].index <= vm->vcpus[k - 1].index)
                                abort();
                }
        }
        vm_info_free_array(vms, n);
        return 0;
}
