/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * The wait model of the planner: how likely a waking vCPU is to find every
 * CPU of its pack set busy (it then waits in the run queue).
 *
 * A pack set of c CPUs that the kernel balances (a waking vCPU goes to an
 * idle CPU of its set, an idle CPU pulls a waiting vCPU) is one queue with c
 * servers.  With Poisson wake-ups and exponential bursts (M/M/c) the share of
 * wake-ups that queue is the Erlang C formula C(c, A), A = the set's demand
 * in CPUs (the offered load, < c).  For general bursts (M/G/c) the
 * Allen-Cunneen approximation scales the M/M/c mean wait by
 * (ca^2 + cs^2) / 2, ca and cs the coefficients of variation of the
 * inter-arrival and burst times; the planner applies the same factor to the
 * queueing probability (queue_pwait), a conservative reading for cs > 1
 * (the probability itself moves less than the mean wait).
 *
 * Computed through the Erlang B recursion B(k) = A B(k-1) / (k + A B(k-1)),
 * C = c B / (c - A (1 - B)): no factorials or powers, stable for any c (the
 * tests check c up to 512 against the closed form in long double).
 */

/* Erlang B blocking probability for c servers and offered load A >= 0 (1 when c == 0). */
double queue_erlang_b(unsigned c, double A);

/* Erlang C: share of arrivals that wait, M/M/c; 1 when A >= c (or A is NaN), 0 when A <= 0. */
double queue_erlang_c(unsigned c, double A);

/*
 * Finite population (the machine-repair model M/M/c//n): n vCPUs, each busy a
 * share u of the time when it does not wait, on c CPUs.  A vCPU waking finds
 * the others in the steady state of the n - 1 others (arrival theorem), so
 * the share of wake-ups that queue is P(at least c of the n - 1 others are
 * runnable): 0 when n <= c, and C(c, A) in the limit of many small vCPUs of
 * total A.  A pack set holds tens of vCPUs, not thousands: Erlang C's
 * infinite population overstates its wait (a set of c vCPUs on c CPUs never
 * queues; C(c, A) says it does).  Each vCPU's offered load r = u / (1 - u)
 * (u clamped to 0.999).  Terms rescaled as they grow: stable for any n.
 */
double queue_pwait_finite(unsigned c, unsigned n, double u);

/*
 * The set model the planner uses: A CPUs of demand carried by vCPUs whose
 * demand-weighted mean size is dbar, i.e. n = round(A / dbar) vCPUs of dbar
 * (at least 1), times factor, at most 1.
 */
double queue_set_pwait(unsigned c, double A, double dbar, double factor);

/*
 * queue_set_pwait through a memo of queue_pwait_finite's results: a plan asks
 * the same (c, n, u) of many sets and candidates (about two thirds of its
 * calls at 1,000 vCPUs on 256 CPUs), each an O(n) sum.  Direct-mapped, keyed
 * by the exact arguments, so a hit returns what the call would.  A zeroed
 * struct is an empty memo; it holds no pointers.
 */
#define QUEUE_MEMO_SLOTS 512
struct queue_memo {
        struct {
                unsigned c, n;
                uint64_t ubits;
                double p;
                bool used;
        } slot[QUEUE_MEMO_SLOTS];
        unsigned long hits, misses;
};
double queue_set_pwait_memo(struct queue_memo *m, unsigned c, double A, double dbar, double factor);

/*
 * Largest demand A of vCPUs of size dbar (n x dbar for the largest n) that a
 * set of c CPUs carries with queue_set_pwait <= budget; at least c x dbar
 * (c vCPUs on c CPUs never queue).  O(n log n).
 */
double queue_set_max_load(unsigned c, double dbar, double budget, double factor);

/* Allen-Cunneen factor (ca2 + cs2) / 2; a negative or NaN squared CV reads as 1 (exponential). */
double queue_ac_factor(double ca2, double cs2);

/* min(1, factor x C(c, A)): the planner's predicted queueing probability. */
double queue_pwait(unsigned c, double A, double factor);

/*
 * Least c (<= c_max) with queue_pwait(c, A, factor) <= budget; c_max + 1 if
 * none.  0 when A <= 0.  O(c).
 */
unsigned queue_servers_for(double A, double budget, double factor, unsigned c_max);

/*
 * Largest offered load A < c with queue_pwait(c, A, factor) <= budget (by
 * bisection to 1e-6 of c); 0 when c == 0 or budget <= 0.
 */
double queue_max_load(unsigned c, double budget, double factor);

/*
 * The queueing probability a set's measured run-queue wait stands for, by
 * the M/M/c relation mean wait = C S / (c - A): with W the sum over its
 * vCPUs of wait time / wall time (= C A / (c - A)), C = W (c - A) / A,
 * clamped to 0..1 (1 when A >= c).  0 when A <= 0.
 */
double queue_measured_pwait(unsigned c, double A, double W);
