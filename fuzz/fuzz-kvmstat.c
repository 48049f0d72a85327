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

#define FUZZ_TREE_MEMFS
#include "fuzz-tree.h"
#include "kvmstat.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * List the VMs of the tree at root with their vCPUs, check what the calls
 * promise, and return what they found as text (malloc'ed) for the
 * memory-vs-disk comparison.
 */
static char *list_and_check(const char *root)
{
        struct kvmstat_vm *vms = NULL, one;
        size_t n = 0, len = 0;
        char *text = NULL;
        FILE *f;
        int r;

        f = open_memstream(&text, &len);
        if (!f)
                abort();
        r = kvmstat_list(root, &vms, &n);
        fprintf(f, "r %d\n", r < 0 ? r : 0);
        if (r < 0) {
                fclose(f);
                return text;
        }
        for (size_t i = 0; i < n; i++) {
                struct vcpu_info *v = NULL;
                unsigned nv = 0;

                if (vms[i].pid <= 0 || vms[i].vm_fd < 0)
                        abort();
                if (i > 0 && (vms[i].pid < vms[i - 1].pid ||
                              (vms[i].pid == vms[i - 1].pid && vms[i].vm_fd <= vms[i - 1].vm_fd)))
                        abort();
                fprintf(f, "vm %d-%d %d %llu %llu\n", (int) vms[i].pid, vms[i].vm_fd, vms[i].has_halt_poll,
                        (unsigned long long) vms[i].halt_poll_success_ns, (unsigned long long) vms[i].halt_poll_fail_ns);
                r = kvmstat_read_vm(root, vms[i].pid, &one);
                if (r > 0 && one.pid != vms[i].pid)
                        abort();
                fprintf(f, " read %d", r);
                if (r > 0)
                        fprintf(f, " %d %d %llu %llu", one.vm_fd, one.has_halt_poll,
                                (unsigned long long) one.halt_poll_success_ns,
                                (unsigned long long) one.halt_poll_fail_ns);
                r = kvmstat_vcpu_tids(root, vms[i].pid, vms[i].vm_fd, &v, &nv);
                fprintf(f, "\n tids %d:", r < 0 ? r : 0);
                if (r >= 0) {
                        for (unsigned k = 0; k < nv; k++) {
                                if (v[k].tid <= 0 || v[k].index < 0)
                                        abort();
                                if (k > 0 && v[k].index <= v[k - 1].index)
                                        abort();
                                fprintf(f, " %d=%d", v[k].index, (int) v[k].tid);
                        }
                        free(v);
                }
                fputc('\n', f);
        }
        free(vms);
        fclose(f);
        return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char name[64], back[64];
        pid_t pid;
        int fd;

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

        fuzz_tree_run("debug", data, size, list_and_check);
        return 0;
}
