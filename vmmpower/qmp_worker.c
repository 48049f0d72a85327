/* SPDX-License-Identifier: GPL-2.0-or-later */
/* QMP queries on a worker thread (qmp_worker.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qmp.h"
#include "qmp_worker.h"

struct qmp_worker {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;   /* a batch submitted, a batch done, stop */
        struct qmp_job *jobs;  /* the batch, owned by the worker from submit to take */
        size_t n;
        nsec_t timeout_ns;
        bool submitted, done, stop;
};

static void run_job(struct qmp_job *j, nsec_t timeout_ns)
{
        switch (j->kind) {
        case QMP_JOB_VM:
                j->result = qmp_query_vm(j->socket, timeout_ns, &j->vm);
                break;
        case QMP_JOB_HALT_POLL:
                j->halt_poll_ns = malloc(VM_MAX_VCPUS * sizeof(*j->halt_poll_ns));
                if (!j->halt_poll_ns) {
                        j->result = -ENOMEM;
                        break;
                }
                for (unsigned k = 0; k < VM_MAX_VCPUS; k++)
                        j->halt_poll_ns[k] = UINT64_MAX;
                j->result = qmp_query_halt_poll(j->socket, timeout_ns, j->halt_poll_ns, VM_MAX_VCPUS);
                break;
        default:
                j->result = -EINVAL;
        }
}

static void *worker_main(void *arg)
{
        struct qmp_worker *w = arg;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (!w->stop && !(w->submitted && !w->done))
                        pthread_cond_wait(&w->cond, &w->lock);
                if (w->stop)
                        break;
                /* the batch is the worker's until done: run it unlocked */
                struct qmp_job *jobs = w->jobs;
                size_t n = w->n;
                nsec_t timeout = w->timeout_ns;

                pthread_mutex_unlock(&w->lock);
                for (size_t i = 0; i < n; i++) {
                        run_job(&jobs[i], timeout);
                        pthread_mutex_lock(&w->lock);
                        bool stop = w->stop;
                        pthread_mutex_unlock(&w->lock);
                        if (stop) {
                                for (size_t k = i + 1; k < n; k++)
                                        jobs[k].result = -ECANCELED;
                                break;
                        }
                }
                pthread_mutex_lock(&w->lock);
                w->done = true;
                pthread_cond_broadcast(&w->cond);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

int qmp_worker_new(struct qmp_worker **ret)
{
        struct qmp_worker *w = calloc(1, sizeof(*w));
        pthread_condattr_t ca;
        int r;

        *ret = NULL;
        if (!w)
                return -ENOMEM;
        pthread_mutex_init(&w->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&w->cond, &ca);
        pthread_condattr_destroy(&ca);
        r = pthread_create(&w->thread, NULL, worker_main, w);
        if (r != 0) {
                pthread_cond_destroy(&w->cond);
                pthread_mutex_destroy(&w->lock);
                free(w);
                return -r;
        }
        *ret = w;
        return 0;
}

void qmp_worker_free(struct qmp_worker *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        if (w->submitted)
                qmp_jobs_free(w->jobs, w->n);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
}

bool qmp_worker_busy(const struct qmp_worker *w)
{
        struct qmp_worker *m = (struct qmp_worker *) w; /* the lock only */
        bool b;

        pthread_mutex_lock(&m->lock);
        b = m->submitted;
        pthread_mutex_unlock(&m->lock);
        return b;
}

int qmp_worker_submit(struct qmp_worker *w, struct qmp_job *jobs, size_t n, nsec_t timeout_ns)
{
        int r = 0;

        pthread_mutex_lock(&w->lock);
        if (w->submitted)
                r = -EBUSY;
        else {
                w->jobs = jobs;
                w->n = n;
                w->timeout_ns = timeout_ns;
                w->submitted = true;
                w->done = false;
                pthread_cond_broadcast(&w->cond);
        }
        pthread_mutex_unlock(&w->lock);
        return r;
}

int qmp_worker_take(struct qmp_worker *w, struct qmp_job **ret, size_t *n)
{
        int r = 0;

        pthread_mutex_lock(&w->lock);
        if (w->submitted && w->done) {
                *ret = w->jobs;
                *n = w->n;
                w->jobs = NULL;
                w->n = 0;
                w->submitted = w->done = false;
                r = 1;
        }
        pthread_mutex_unlock(&w->lock);
        return r;
}

bool qmp_worker_wait(struct qmp_worker *w, nsec_t timeout_ns)
{
        struct timespec ts;
        bool finished;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ns / NSEC_PER_SEC;
        ts.tv_nsec += timeout_ns % NSEC_PER_SEC;
        if (ts.tv_nsec >= NSEC_PER_SEC) {
                ts.tv_sec++;
                ts.tv_nsec -= NSEC_PER_SEC;
        }
        pthread_mutex_lock(&w->lock);
        while (w->submitted && !w->done)
                if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) == ETIMEDOUT)
                        break;
        finished = !w->submitted || w->done;
        pthread_mutex_unlock(&w->lock);
        return finished;
}

void qmp_jobs_run(struct qmp_job *jobs, size_t n, nsec_t timeout_ns)
{
        for (size_t i = 0; i < n; i++)
                run_job(&jobs[i], timeout_ns);
}

void qmp_jobs_free(struct qmp_job *jobs, size_t n)
{
        for (size_t i = 0; jobs && i < n; i++) {
                if (jobs[i].kind == QMP_JOB_VM && jobs[i].result >= 0)
                        vm_info_done(&jobs[i].vm);
                free(jobs[i].halt_poll_ns);
        }
        free(jobs);
}
