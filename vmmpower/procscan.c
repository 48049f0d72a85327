/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Plain QEMU discovery through procfs.
 *
 * What makes a process a VM: at least one of its threads other than the main
 * thread has a comm of exactly "CPU <n>/KVM" or "CPU <n>/TCG": decimal n, no
 * sign, no leading zero (except "0"), at most 8 digits.  QEMU names its vCPU
 * threads so with -name debug-threads=on (libvirt always passes it); QEMU
 * never runs a vCPU on its main thread, so a main thread with such a name
 * (a single-threaded process that renamed itself) does not count.  All vCPU
 * threads of one process must agree on the accelerator and have distinct
 * indexes, else the process is not taken for QEMU.  A vCPU with n >=
 * VM_MAX_VCPUS is not tracked: it is counted in vm_info.n_vcpus_untracked
 * (the VM is kept with its other vCPUs, and the tracker warns).
 *
 * Cheap filter.  Reading every thread's comm of every process costs one open
 * per thread on the host.  The main thread's comm ("qemu-system-x86",
 * "qemu-kvm") or the exe basename would be cheap but would miss a renamed
 * binary or "-name ...,process=FOO" (QEMU then renames its main thread), so
 * neither is used.  The filter used cannot produce a false negative: a QEMU
 * process has at least two threads (main loop + vCPU), and the link count of
 * a procfs <pid>/task directory is 2 + number of threads, so one stat() per
 * process skips every single-threaded process (most of a host's processes,
 * and every kernel thread) without opening anything.  A link count other
 * than exactly 3 (several threads, or a filesystem that reports 1 for
 * directories) means "look at the threads".  The same holds for the fixture
 * trees of the tests (each tid is a subdirectory).
 *
 * Trust.  Any user can name its threads "CPU 0/KVM" and its process after a
 * VM.  Such a process is taken for a VM only when its user (the effective
 * uid, owner of <pid>/task) is one of [QEMU] ProcScanUsers (by default root
 * and libvirt-qemu): otherwise any local user could have its threads tracked,
 * planned and pinned by a root daemon, take a real VM's name in the metrics
 * and cost the daemon a file descriptor and a read per fake vCPU and period.
 * Skipped ones are counted (stats->other_user).  libvirt and QMP are the
 * authoritative sources; the /proc scan is the fallback for plain QEMU and
 * its results are merged under theirs by pid.
 *
 * UUID: the argument after "-uuid" (or "--uuid"), when it is one
 * (8-4-4-4-12 hex digits; kept in lower case); the last one wins, as in
 * QEMU.  Otherwise "".
 *
 * Display name: the argument after "-name" (or "--name", which QEMU treats
 * the same) parsed like QEMU's option parser: "guest=NAME,..." or an implied
 * first value "NAME,...", with ",," standing for a literal comma; the last
 * guest= wins as in QEMU.  Otherwise (no -name, no guest, empty or too long
 * for VM_NAME_MAX) the name is "qemu-<pid>".
 *
 * Processes and threads that vanish between readdir() and the read (ENOENT,
 * ESRCH) are skipped and counted in stats->vanished; other read errors are
 * skipped and counted in stats->errors.  procscan_scan() returns the VMs
 * sorted by pid.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpuset.h"
#include "procscan.h"
#include "util.h"

#define CMDLINE_MAX (256u * 1024u)

int procscan_parse_vcpu_comm(const char *comm, int *index, enum vm_accel *accel)
{
        const char *p;
        enum vm_accel a;
        int n = 0;
        size_t digits = 0;

        if (strncmp(comm, "CPU ", 4) != 0)
                return -EINVAL;
        p = comm + 4;
        while (p[digits] >= '0' && p[digits] <= '9')
                digits++;
        if (digits == 0 || digits > 8 || (digits > 1 && p[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < digits; i++)
                n = n * 10 + (p[i] - '0');
        p += digits;
        if (strcmp(p, "/KVM") == 0)
                a = VM_ACCEL_KVM;
        else if (strcmp(p, "/TCG") == 0)
                a = VM_ACCEL_TCG;
        else
                return -EINVAL;

        *index = n;
        *accel = a;
        return n >= VM_MAX_VCPUS ? -ERANGE : 0;
}

static bool parse_pid_name(const char *s, pid_t *ret)
{
        int v;

        if (s[0] < '1' || s[0] > '9') /* also rejects "0", leading zeros and "." entries */
                return false;
        if (parse_int(s, &v) < 0 || v <= 0)
                return false;
        *ret = (pid_t) v;
        return true;
}

static int cmp_vcpu(const void *a, const void *b)
{
        const struct vcpu_info *x = a, *y = b;

        return (x->index > y->index) - (x->index < y->index);
}

static int cmp_vm_pid(const void *a, const void *b)
{
        const struct vm_info *x = a, *y = b;

        return (x->pid > y->pid) - (x->pid < y->pid);
}

static bool is_gone(int r)
{
        return r == -ENOENT || r == -ESRCH;
}

int procscan_parse_stat_cpu(const char *line)
{
        const char *p = strrchr(line, ')');
        int field = 2; /* ")" ends field 2, comm */

        if (!p)
                return -EINVAL;
        p++;
        while (*p) {
                char *end;
                long v;

                while (*p == ' ')
                        p++;
                if (!*p || *p == '\n')
                        break;
                if (++field == 39) {
                        errno = 0;
                        v = strtol(p, &end, 10);
                        if (errno || end == p || (*end != ' ' && *end != '\n' && *end) || v < 0 || v >= VP_MAX_CPUS)
                                return -EINVAL;
                        return (int) v;
                }
                p = strchrnul(p, ' ');
        }
        return -EINVAL;
}

int procscan_thread_cpu(const char *procfs_root, pid_t pid, pid_t tid)
{
        char path[PATH_MAX], buf[1024];
        ssize_t k;
        int r;

        r = path_printf(path, sizeof(path), "%s/%d/task/%d/stat", procfs_root, (int) pid, (int) tid);
        if (r < 0)
                return r;
        k = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
        if (k < 0)
                return k == -ENOENT ? -ESRCH : (int) k;
        return procscan_parse_stat_cpu(buf);
}

int procscan_vcpus_of(const char *procfs_root, struct vm_info *vm, struct procscan_stats *stats)
{
        struct procscan_stats dummy = { 0 };
        char path[PATH_MAX];
        struct vcpu_info *v = NULL;
        enum vm_accel accel = VM_ACCEL_UNKNOWN;
        size_t n = 0, alloc = 0;
        unsigned untracked = 0;
        struct dirent *de;
        DIR *d;
        int r;

        if (!stats)
                stats = &dummy;
        r = path_printf(path, sizeof(path), "%s/%d/task", procfs_root, (int) vm->pid);
        if (r < 0)
                return r;
        d = opendir(path);
        if (!d) {
                r = -errno;
                if (is_gone(r)) {
                        stats->vanished++;
                        return -ESRCH;
                }
                stats->errors++;
                return r;
        }
        while ((errno = 0, de = readdir(d))) {
                char rel[64], comm[32];
                enum vm_accel a;
                pid_t tid;
                ssize_t k;
                int index;

                if (!parse_pid_name(de->d_name, &tid) || tid == vm->pid)
                        continue;
                if (path_printf(rel, sizeof(rel), "%d/comm", (int) tid) < 0)
                        continue;
                k = read_small_file_at(dirfd(d), rel, comm, sizeof(comm));
                if (k < 0) {
                        if (is_gone((int) k))
                                stats->vanished++;
                        else if (k != -EFBIG) /* too long for a comm: not a vCPU */
                                stats->errors++;
                        continue;
                }
                r = procscan_parse_vcpu_comm(comm, &index, &a);
                if (r == -ERANGE) {
                        untracked++; /* a vCPU we cannot track: counted (vm.h) */
                        continue;
                }
                if (r < 0)
                        continue;
                if (accel != VM_ACCEL_UNKNOWN && a != accel) {
                        r = -EINVAL; /* mixed accelerators: not one QEMU */
                        goto fail;
                }
                accel = a;
                if (n == alloc) {
                        size_t na = alloc ? alloc * 2 : 8;
                        struct vcpu_info *nv = realloc(v, na * sizeof(*v));
                        if (!nv) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        v = nv;
                        alloc = na;
                }
                v[n++] = (struct vcpu_info) { .index = index, .tid = tid };
                if (n > VM_MAX_VCPUS) {
                        r = -EINVAL;
                        goto fail;
                }
        }
        if (errno != 0) {
                r = -errno;
                if (is_gone(r)) {
                        stats->vanished++;
                        r = -ESRCH;
                } else
                        stats->errors++;
                goto fail;
        }
        closedir(d);
        d = NULL;

        if (n > 1)
                qsort(v, n, sizeof(*v), cmp_vcpu);
        for (size_t i = 1; i < n; i++)
                if (v[i].index == v[i - 1].index) {
                        r = -EINVAL; /* duplicate vCPU index: not one QEMU */
                        goto fail;
                }

        free(vm->vcpus);
        vm->vcpus = v;
        vm->n_vcpus = (unsigned) n;
        vm->n_vcpus_untracked = untracked;
        vm->accel = accel;
        return 0;

fail:
        if (d)
                closedir(d);
        free(v);
        return r;
}

/*
 * Parse the value of -name like QEMU's opts parser (util/qemu-option.c): the
 * first element may be an implied "guest" value, elements are separated by
 * single commas, ",," is a literal comma in values.  Returns 0 and the name,
 * -ENOENT when there is no guest name, -ENAMETOOLONG.
 */
static int name_from_opts(const char *s, char *out, size_t size)
{
        bool first = true, found = false;
        char value[VM_NAME_MAX];
        int r = -ENOENT;

        while (*s) {
                size_t klen = strcspn(s, "=,");
                bool is_guest, implied = first && s[klen] != '=';
                size_t o = 0;
                bool too_long = false;

                first = false;
                if (!implied && s[klen] != '=') {
                        /* boolean flag "key" (or an empty element) */
                        s += klen;
                        if (*s == ',')
                                s++;
                        continue;
                }
                is_guest = implied || (klen == 5 && strncmp(s, "guest", 5) == 0);
                if (!implied)
                        s += klen + 1;
                /* value up to a single comma; ",," is a comma */
                for (;;) {
                        char c = *s;
                        if (c == '\0')
                                break;
                        if (c == ',') {
                                if (s[1] != ',') {
                                        s++;
                                        break;
                                }
                                s++; /* escaped comma */
                        }
                        if (o + 1 < sizeof(value))
                                value[o++] = c;
                        else
                                too_long = true;
                        s++;
                }
                value[o] = '\0';
                if (is_guest) {
                        found = true;
                        if (too_long || o + 1 > size)
                                r = -ENAMETOOLONG;
                        else if (o == 0)
                                r = -ENOENT;
                        else {
                                memcpy(out, value, o + 1);
                                r = 0;
                        }
                }
        }
        return found ? r : -ENOENT;
}

/* A canonical UUID (8-4-4-4-12 hex digits) into out[37], in lower case; false if s is none. */
static bool uuid_copy(const char *s, char out[37])
{
        if (strlen(s) != 36)
                return false;
        for (int i = 0; i < 36; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                char c = s[i];

                if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                        return false;
        }
        for (int i = 0; i < 36; i++)
                out[i] = (char) (s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
        out[36] = '\0';
        return true;
}

/* Read <pid>/cmdline and find the name (and the uuid).  Returns 0, -ENOENT (no name) or -errno. */
static int name_from_cmdline(const char *procfs_root, pid_t pid, char *out, size_t size, char uuid[37])
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -1;
        char path[PATH_MAX];
        size_t len = 0;
        int r;

        r = path_printf(path, sizeof(path), "%s/%d/cmdline", procfs_root, (int) pid);
        if (r < 0)
                return r;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(CMDLINE_MAX + 1);
        if (!buf)
                return -ENOMEM;
        while (len < CMDLINE_MAX) {
                ssize_t k = read(fd, buf + len, CMDLINE_MAX - len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                len += (size_t) k;
        }
        buf[len] = '\0'; /* a truncated last argument is cut, never read past */

        r = -ENOENT;
        for (size_t i = 0; i < len;) {
                const char *arg = buf + i;
                size_t alen = strnlen(arg, len - i);
                size_t next = i + alen + 1;

                if ((strcmp(arg, "-name") == 0 || strcmp(arg, "--name") == 0) && next < len && r == -ENOENT)
                        r = name_from_opts(buf + next, out, size) == 0 ? 0 : -EINVAL;
                if ((strcmp(arg, "-uuid") == 0 || strcmp(arg, "--uuid") == 0) && next < len)
                        (void) uuid_copy(buf + next, uuid);
                i = next;
        }
        return r == -EINVAL ? -ENOENT : r;
}

int procscan_users_resolve(const char *list, uid_t *uids, size_t max, struct procscan_users *users, char *unknown,
                           size_t unknown_size)
{
        size_t n = 0;

        if (unknown_size)
                unknown[0] = '\0';
        *users = (struct procscan_users) { .any = list[0] == '\0', .uids = uids };
        while (*list) {
                char word[64], buf[1024];
                size_t len = strcspn(list, " ");
                struct passwd pw, *found = NULL;
                uint32_t uid;

                if (len == 0 || len >= sizeof(word))
                        return -EINVAL;
                memcpy(word, list, len);
                word[len] = '\0';
                list += len + (list[len] == ' ');
                if (parse_u32(word, &uid) == 0 && uid != (uint32_t) -1)
                        ; /* a uid, known to the host or not */
                else if (getpwnam_r(word, &pw, buf, sizeof(buf), &found) == 0 && found)
                        uid = (uint32_t) pw.pw_uid;
                else {
                        if (unknown_size && !unknown[0])
                                snprintf(unknown, unknown_size, "%s", word);
                        continue;
                }
                if (n == max)
                        return -EINVAL;
                uids[n++] = (uid_t) uid;
        }
        users->n = n;
        return 0;
}

static bool user_allowed(const struct procscan_users *users, uid_t uid)
{
        if (!users || users->any)
                return true;
        for (size_t i = 0; i < users->n; i++)
                if (users->uids[i] == uid)
                        return true;
        return false;
}

int procscan_scan(const char *procfs_root, const struct procscan_users *users, struct vm_info **ret, size_t *n,
                  struct procscan_stats *stats)
{
        struct procscan_stats dummy = { 0 };
        struct vm_info *vms = NULL;
        size_t nv = 0, alloc = 0;
        struct dirent *de;
        DIR *d;
        int r;

        if (!stats)
                stats = &dummy;
        stats->scans++;
        stats->last_other_user = 0;
        d = opendir(procfs_root);
        if (!d)
                return -errno;

        while ((errno = 0, de = readdir(d))) {
                struct vm_info vm = { .libvirt_id = -1, .sources = VM_SOURCE_PROC };
                char rel[64];
                struct stat st;
                pid_t pid;

                if (!parse_pid_name(de->d_name, &pid))
                        continue;
                vm.pid = pid;
                if (path_printf(rel, sizeof(rel), "%d/task", (int) pid) < 0)
                        continue;
                if (fstatat(dirfd(d), rel, &st, 0) < 0) {
                        if (is_gone(-errno))
                                stats->vanished++;
                        else
                                stats->errors++;
                        continue;
                }
                if (!S_ISDIR(st.st_mode) || st.st_nlink == 3)
                        continue; /* exactly one thread: cannot be QEMU */

                r = procscan_vcpus_of(procfs_root, &vm, stats);
                if (r == -ENOMEM)
                        goto fail;
                if (r < 0 || vm.n_vcpus == 0) {
                        vm_info_done(&vm);
                        continue;
                }
                if (!user_allowed(users, st.st_uid)) {
                        stats->other_user++;
                        stats->last_other_user++;
                        stats->last_other_pid = pid;
                        stats->last_other_uid = st.st_uid;
                        vm_info_done(&vm);
                        continue;
                }
                r = name_from_cmdline(procfs_root, pid, vm.name, sizeof(vm.name), vm.uuid);
                if (r == -ENOMEM) {
                        vm_info_done(&vm);
                        goto fail;
                }
                if (r == -ESRCH) {
                        stats->vanished++;
                        vm_info_done(&vm);
                        continue;
                }
                if (r < 0)
                        snprintf(vm.name, sizeof(vm.name), "qemu-%d", (int) pid);

                if (nv == alloc) {
                        size_t na = alloc ? alloc * 2 : 8;
                        struct vm_info *t = realloc(vms, na * sizeof(*vms));
                        if (!t) {
                                vm_info_done(&vm);
                                r = -ENOMEM;
                                goto fail;
                        }
                        vms = t;
                        alloc = na;
                }
                vms[nv++] = vm;
        }
        if (errno != 0) {
                r = -errno;
                goto fail;
        }
        closedir(d);
        if (nv > 1)
                qsort(vms, nv, sizeof(*vms), cmp_vm_pid);
        *ret = vms;
        *n = nv;
        return 0;

fail:
        closedir(d);
        vm_info_free_array(vms, nv);
        return r;
}
