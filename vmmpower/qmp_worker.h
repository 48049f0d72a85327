/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"
#include "vm.h"

/*
 * QMP queries off the daemon's loop.  A query blocks for up to QMPTimeout
 * (QEMU's monitor serves one client at a time: whoever holds it makes ours
 * wait), so the loop hands a batch of them to one worker thread and takes
 * the answers at a later period; it never waits on a monitor itself.  One
 * batch at a time: a batch is submitted only when the previous one has been
 * taken.
 */
enum qmp_job_kind {
        QMP_JOB_VM,        /* qmp_query_vm(): discovery of a configured socket */
        QMP_JOB_HALT_POLL, /* qmp_query_halt_poll(): a KVM VM's halt-poll time per vCPU */
};

struct qmp_job {
        enum qmp_job_kind kind;
        char socket[108];
        unsigned slot;             /* the caller's: VM, the configured socket's index */
        pid_t pid;                 /* the caller's: HALT_POLL, the VM asked */
        /* answers, filled by the worker */
        int result;                /* the query's return (>= 0) or -errno */
        struct vm_info vm;         /* VM: the answer when result >= 0 (qmp_jobs_free frees it) */
        uint64_t *halt_poll_ns;    /* HALT_POLL: [VM_MAX_VCPUS], UINT64_MAX = no stats for the vCPU */
};

struct qmp_worker;

/* Start the worker thread: 0 or -errno. */
int qmp_worker_new(struct qmp_worker **ret);
/* Stop it: waits for the query in progress (at most its timeout); frees what was not taken. */
void qmp_worker_free(struct qmp_worker *w);
/* Whether a batch is submitted and not yet taken (running, or done and waiting). */
bool qmp_worker_busy(const struct qmp_worker *w);
/*
 * Hand jobs[0..n) (malloc'ed; the worker owns them until taken) to the worker,
 * each query with timeout_ns.  -EBUSY while a batch is not taken (jobs stay the
 * caller's), 0 otherwise.
 */
int qmp_worker_submit(struct qmp_worker *w, struct qmp_job *jobs, size_t n, nsec_t timeout_ns);
/* The finished batch, if any: 1 with it in *ret, its size in *n (free with qmp_jobs_free), 0 if none. */
int qmp_worker_take(struct qmp_worker *w, struct qmp_job **ret, size_t *n);
/* Wait until the batch in flight is finished or timeout_ns passed: true if finished (or none). */
bool qmp_worker_wait(struct qmp_worker *w, nsec_t timeout_ns);
/* Run jobs[0..n) here, in this thread (no worker): what the worker does with a batch. */
void qmp_jobs_run(struct qmp_job *jobs, size_t n, nsec_t timeout_ns);
void qmp_jobs_free(struct qmp_job *jobs, size_t n);
