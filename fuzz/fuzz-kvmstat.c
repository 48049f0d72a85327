/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the KVM debugfs reader (kvmstat.h): the input is a
 * debugfs tree (format in fuzz-tree.h; "kvm/<pid>-<fd>/halt_poll_*_ns",
 * "kvm/<pid>-<fd>/vcpuN/pid"), read with kvmstat_list(), kvmstat_read_vm()
 * and kvmstat_vcpu_tids() for every VM found.  Checks: the list is sorted by
 * (pid, fd) with valid directory names, vCPU tids are positive and sorted by
 * index, and kvmstat_parse_dirname() accepts exactly the names that print
 * back the same.  Seeds: fuzz/corpus/kvmstat/ (tests/data/kvm-debugfs trees).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-tree.h"
#include "kvmstat.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct kvmstat_vm *vms = NULL, one;
        size_t n = 0;
        const char *root;
        char name[64], back[64];
        pid_t pid;
        int fd, r;

        if (size > 64 * 1024)
                return 0;
        log_set_max_level((enum log_level) 0);

        /* the directory-name parser on the first line of the input */
        snprintf(name, sizeof(name), "%.*s", (int) strnlen((const char *) data, size < 63 ? size : 63),
                 (const char *) data);
        name[strcspn(name, "\n")] = 0;
        if (kvmstat_parse_dirname(name, &pid, &fd) == 0) {
                snprintf(back, sizeof(back), "%d-%d", (int) pid, fd);
                if (pid <= 0 || fd < 0 || strcmp(back, name) != 0)
                        abort();
        }

        root = fuzz_tree_build("debug", data, size);
        r = kvmstat_list(root, &vms, &n);
        if (r < 0)
                return 0;
        for (size_t i = 0; i < n; i++) {
                struct vcpu_info *v = NULL;
                unsigned nv = 0;

                if (vms[i].pid <= 0 || vms[i].vm_fd < 0)
                        abort();
                if (i > 0 && (vms[i].pid < vms[i - 1].pid ||
                              (vms[i].pid == vms[i - 1].pid && vms[i].vm_fd <= vms[i - 1].vm_fd)))
                        abort();
                if (kvmstat_read_vm(root, vms[i].pid, &one) > 0 && one.pid != vms[i].pid)
                        abort();
                if (kvmstat_vcpu_tids(root, vms[i].pid, vms[i].vm_fd, &v, &nv) >= 0) {
                        for (unsigned k = 0; k < nv; k++) {
                                if (v[k].tid <= 0 || v[k].index < 0)
                                        abort();
                                if (k > 0 && v[k].index <= v[k - 1].index)
                                        abort();
                        }
                        free(v);
                }
        }
        free(vms);
        return 0;
}
