/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for plain-QEMU discovery (procscan.h): the input is a
 * procfs tree (format in fuzz-tree.h; "<pid>/cmdline", "<pid>/task/<tid>/comm")
 * scanned with procscan_scan(), served from memory (fuzz-memfs.c;
 * VMMPOWER_FUZZ_TREE_CHECK=1 also scans it on disk and compares).  Thread names and command lines are chosen by
 * any local user, so this parser sees hostile bytes.  Checks what a scan
 * promises: VMs sorted by pid, each with a NUL-terminated non-empty name, at
 * least one vCPU, vCPU indexes strictly ascending below VM_MAX_VCPUS with
 * positive tids; and procscan_parse_vcpu_comm() (on the input's first line)
 * accepts (0, or -ERANGE from index VM_MAX_VCPUS up) exactly the names that
 * print back the same.
 * procscan_parse_stat_cpu() on the whole input as a string returns -EINVAL
 * or a CPU below VP_MAX_CPUS.
 * Seeds: fuzz/corpus/procscan/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_TREE_MEMFS
#include "fuzz-tree.h"
#include "cpuset.h"
#include "log.h"
#include "procscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Scan the tree at root, check what a scan promises, and return what it
 * found as text (malloc'ed) for the memory-vs-disk comparison.
 */
static char *scan_and_check(const char *root)
{
        struct procscan_stats st = { 0 };
        struct vm_info *vms = NULL;
        size_t n = 0, len = 0;
        char *text = NULL;
        FILE *f;
        int r;

        f = open_memstream(&text, &len);
        if (!f)
                abort();
        r = procscan_scan(root, NULL, &vms, &n, &st);
        fprintf(f, "r %d vanished %llu errors %llu\n", r < 0 ? r : 0, st.vanished, st.errors);
        if (r < 0) {
                fclose(f);
                return text;
        }
        for (size_t i = 0; i < n; i++) {
                const struct vm_info *vm = &vms[i];

                if (vm->pid <= 0 || (i > 0 && vm->pid <= vms[i - 1].pid))
                        abort();
                if (strnlen(vm->name, sizeof(vm->name)) == 0 || strnlen(vm->name, sizeof(vm->name)) >= sizeof(vm->name))
                        abort();
                if (vm->n_vcpus == 0 || vm->n_vcpus > VM_MAX_VCPUS)
                        abort();
                fprintf(f, "vm %d %s:", (int) vm->pid, vm->name);
                for (unsigned k = 0; k < vm->n_vcpus; k++) {
                        if (vm->vcpus[k].tid <= 0 || vm->vcpus[k].index < 0 || vm->vcpus[k].index >= VM_MAX_VCPUS)
                                abort();
                        if (k > 0 && vm->vcpus[k].index <= vm->vcpus[k - 1].index)
                                abort();
                        fprintf(f, " %d=%d", vm->vcpus[k].index, (int) vm->vcpus[k].tid);
                }
                fputc('\n', f);
        }
        vm_info_free_array(vms, n);
        fclose(f);
        return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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

        /* the stat line parser (the CPU of an excluded vCPU) on the input as one string */
        {
                char *line = strndup((const char *) data, size < 4096 ? size : 4096);

                if (!line)
                        abort();
                r = procscan_parse_stat_cpu(line);
                if (r != -EINVAL && (r < 0 || r >= VP_MAX_CPUS))
                        abort();
                free(line);
        }
        fuzz_tree_run("proc", data, size, scan_and_check);
        return 0;
}
