// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * BPF task iterator: one record per thread of a tracked QEMU process.
 *
 * Reading the iterator's fd walks every task of the host once; for a task
 * whose tgid is a key of tracked_pids (filled by userspace, see
 * schedstat_bpf.c) it writes a fixed binary record with the three counters
 * /proc/<pid>/task/<tid>/schedstat prints (fs/proc/base.c,
 * proc_pid_schedstat(): se.sum_exec_runtime, sched_info.run_delay,
 * sched_info.pcount), read from the same fields, so both sampling paths give
 * identical numbers.  It also writes the task's start_time (CLOCK_MONOTONIC
 * ns at fork): a record matches a vCPU on (tid, tgid), and another thread of
 * the same process may have taken an exited vCPU thread's tid.  CO-RE: field
 * offsets are relocated at load time from the running kernel's BTF.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 65536);
        __type(key, __u32);
        __type(value, __u8);
} tracked_pids SEC(".maps");

/* Layout shared with struct schedstat_bpf_rec (schedstat_bpf.h). */
struct rec {
        __u32 tid;
        __u32 tgid;
        __u64 run_ns;
        __u64 wait_ns;
        __u64 timeslices;
        __u64 start_ns;
};

SEC("iter/task")
int dump_schedstat(struct bpf_iter__task *ctx)
{
        struct task_struct *task = ctx->task;
        struct rec r;
        __u32 tgid;

        if (!task)
                return 0;
        tgid = task->tgid;
        if (!bpf_map_lookup_elem(&tracked_pids, &tgid))
                return 0;
        r.tid = task->pid;
        r.tgid = tgid;
        r.run_ns = task->se.sum_exec_runtime;
        r.wait_ns = task->sched_info.run_delay;
        r.timeslices = task->sched_info.pcount;
        r.start_ns = task->start_time;
        bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
        return 0;
}
