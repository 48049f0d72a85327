/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * KVM debugfs reader (see kvmstat.h for what the kernel exposes and why
 * per-vCPU halt polling comes from QMP instead).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmstat.h"
#include "util.h"

#define KVMSTAT_MAX_VMS 65536
#define KVMSTAT_PID_MAX 4194304

/* A decimal as the kernel prints it ("%d"): no sign, no leading zero but "0". */
static bool all_digits(const char *s, size_t n)
{
        if (n == 0 || n > 10 || (n > 1 && s[0] == '0'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

int kvmstat_parse_dirname(const char *name, pid_t *ret_pid, int *ret_fd)
{
        const char *dash;
        char p[16];
        uint32_t pid, fd;

        if (!name)
                return -EINVAL;
        dash = strchr(name, '-');
        if (!dash || !all_digits(name, (size_t) (dash - name)) || !all_digits(dash + 1, strlen(dash + 1)))
                return -EINVAL;
        memcpy(p, name, (size_t) (dash - name));
        p[dash - name] = 0;
        if (parse_u32(p, &pid) < 0 || parse_u32(dash + 1, &fd) < 0)
                return -EINVAL;
        if (pid == 0 || pid > KVMSTAT_PID_MAX || fd > INT32_MAX)
                return -EINVAL;
        *ret_pid = (pid_t) pid;
        *ret_fd = (int) fd;
        return 0;
}

static int open_kvm_dir(const char *debugfs_root)
{
        char path[4096];
        int r, fd;

        r = path_printf(path, sizeof(path), "%s/kvm", debugfs_root);
        if (r < 0)
                return r;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fd;
}

/* 0 and *ret, -ENOENT when absent, other -errno. */
static int read_u64_at(int dirfd, const char *name, uint64_t *ret)
{
        char buf[64];
        ssize_t n;

        n = read_small_file_at(dirfd, name, buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        if (parse_u64(buf, ret) < 0)
                return -EBADMSG;
        return 0;
}

static int read_vm_dir(int kvm_fd, const char *name, struct kvmstat_vm *vm)
{
        _cleanup_close_ int dfd = -1;
        uint64_t s, f;
        int r;

        dfd = openat(kvm_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        r = read_u64_at(dfd, "halt_poll_success_ns", &s);
        if (r == -ENOENT) {
                vm->has_halt_poll = false;
                vm->halt_poll_success_ns = vm->halt_poll_fail_ns = 0;
                return 0;
        }
        if (r < 0)
                return r;
        r = read_u64_at(dfd, "halt_poll_fail_ns", &f);
        if (r < 0)
                return r;
        vm->has_halt_poll = true;
        vm->halt_poll_success_ns = s;
        vm->halt_poll_fail_ns = f;
        return 0;
}

static int cmp_vm(const void *a, const void *b)
{
        const struct kvmstat_vm *x = a, *y = b;

        if (x->pid != y->pid)
                return (x->pid > y->pid) - (x->pid < y->pid);
        return (x->vm_fd > y->vm_fd) - (x->vm_fd < y->vm_fd);
}

/* Directory entries of <root>/kvm that name a VM (optionally only of pid), sorted. */
static int list_dirs(int kvm_fd, pid_t only_pid, struct kvmstat_vm **ret, size_t *ret_n)
{
        struct kvmstat_vm *vms = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        DIR *d;
        int fd;

        fd = dup(kvm_fd);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                struct kvmstat_vm vm = {};

                if (kvmstat_parse_dirname(de->d_name, &vm.pid, &vm.vm_fd) < 0)
                        continue; /* the global stat files, "." and ".." */
                if (only_pid > 0 && vm.pid != only_pid)
                        continue;
                if (n >= KVMSTAT_MAX_VMS)
                        break;
                if (n == alloc) {
                        size_t na = alloc ? alloc * 2 : 8;
                        struct kvmstat_vm *nv = realloc(vms, na * sizeof(*vms));

                        if (!nv) {
                                free(vms);
                                closedir(d);
                                return -ENOMEM;
                        }
                        vms = nv;
                        alloc = na;
                }
                vms[n++] = vm;
        }
        closedir(d);
        if (n > 0)
                qsort(vms, n, sizeof(*vms), cmp_vm);
        *ret = vms;
        *ret_n = n;
        return 0;
}

int kvmstat_list(const char *debugfs_root, struct kvmstat_vm **ret, size_t *ret_n)
{
        _cleanup_close_ int kfd = -1;
        struct kvmstat_vm *vms = NULL;
        size_t n = 0, k = 0;
        int r;

        if (!debugfs_root || !ret || !ret_n)
                return -EINVAL;
        kfd = open_kvm_dir(debugfs_root);
        if (kfd == -ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (kfd < 0)
                return kfd;
        r = list_dirs(kfd, 0, &vms, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                char name[32];

                snprintf(name, sizeof(name), "%d-%d", (int) vms[i].pid, vms[i].vm_fd);
                r = read_vm_dir(kfd, name, &vms[i]);
                if (r == -ENOENT)
                        continue; /* VM destroyed since readdir */
                if (r < 0) {
                        free(vms);
                        return r;
                }
                vms[k++] = vms[i];
        }
        *ret = vms;
        *ret_n = k;
        return 0;
}

int kvmstat_read_vm(const char *debugfs_root, pid_t pid, struct kvmstat_vm *ret)
{
        _cleanup_close_ int kfd = -1;
        _cleanup_free_ struct kvmstat_vm *vms = NULL;
        size_t n = 0;
        int r;

        if (!debugfs_root || !ret || pid <= 0)
                return -EINVAL;
        kfd = open_kvm_dir(debugfs_root);
        if (kfd == -ENOENT)
                return 0;
        if (kfd < 0)
                return kfd;
        r = list_dirs(kfd, pid, &vms, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                char name[32];

                snprintf(name, sizeof(name), "%d-%d", (int) vms[i].pid, vms[i].vm_fd);
                r = read_vm_dir(kfd, name, &vms[i]);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                *ret = vms[i];
                return (int) MIN(n, (size_t) INT32_MAX);
        }
        return 0;
}

static int cmp_vcpu(const void *a, const void *b)
{
        const struct vcpu_info *x = a, *y = b;

        return (x->index > y->index) - (x->index < y->index);
}

int kvmstat_vcpu_tids(const char *debugfs_root, pid_t pid, int vm_fd, struct vcpu_info **ret, unsigned *ret_n)
{
        char path[4096];
        struct vcpu_info *v = NULL;
        unsigned n = 0;
        struct dirent *de;
        DIR *d;
        int r;

        if (!debugfs_root || !ret || !ret_n || pid <= 0 || vm_fd < 0)
                return -EINVAL;
        r = path_printf(path, sizeof(path), "%s/kvm/%d-%d", debugfs_root, (int) pid, vm_fd);
        if (r < 0)
                return r;
        d = opendir(path);
        if (!d)
                return -errno;
        v = calloc(VM_MAX_VCPUS, sizeof(*v));
        if (!v) {
                closedir(d);
                return -ENOMEM;
        }
        while ((de = readdir(d))) {
                char sub[300];
                uint32_t idx;
                uint64_t tid;

                if (strncmp(de->d_name, "vcpu", 4) != 0 || !all_digits(de->d_name + 4, strlen(de->d_name + 4)))
                        continue;
                if (parse_u32(de->d_name + 4, &idx) < 0 || idx >= VM_MAX_VCPUS)
                        continue;
                snprintf(sub, sizeof(sub), "%s/pid", de->d_name);
                r = read_u64_at(dirfd(d), sub, &tid);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        goto fail;
                if (tid > KVMSTAT_PID_MAX) {
                        r = -EBADMSG;
                        goto fail;
                }
                if (tid == 0 || n >= VM_MAX_VCPUS)
                        continue;
                v[n++] = (struct vcpu_info) { .index = (int) idx, .tid = (pid_t) tid };
        }
        closedir(d);
        qsort(v, n, sizeof(*v), cmp_vcpu);
        *ret = v;
        *ret_n = n;
        return 0;
fail:
        closedir(d);
        free(v);
        return r;
}
