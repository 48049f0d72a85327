/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wait model (queueing.c): Erlang B/C against textbook values and the
 * closed form in long double, stability up to 512 servers, the inverse
 * (least servers for a budget, largest load for a size) and the measured
 * probability a set's wait stands for; the memo gives what the call does.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "queueing.h"

/* Closed form in long double: C = (A^c/c! c/(c-A)) / (sum_{k<c} A^k/k! + A^c/c! c/(c-A)), scaled terms. */
static long double erlang_c_closed(unsigned c, long double A)
{
        long double t = 1.0L, sum = 0.0L; /* t = A^k/k! e^-A would underflow: keep relative scale */
        long double lg = 0.0L;
        /* work in logs for large c */
        long double maxl = -INFINITY, terms[1024];
        for (unsigned k = 0; k <= c; k++) {
                terms[k] = (long double) k * logl(A) - lgammal((long double) k + 1.0L);
                if (terms[k] > maxl)
                        maxl = terms[k];
        }
        for (unsigned k = 0; k < c; k++)
                sum += expl(terms[k] - maxl);
        t = expl(terms[c] - maxl) * (long double) c / ((long double) c - A);
        (void) lg;
        return t / (sum + t);
}

static void test_erlang_textbook(void **state)
{
        (void) state;
        /* c = 1: C = rho */
        assert_true(fabs(queue_erlang_c(1, 0.5) - 0.5) < 1e-12);
        /* c = 2, A = 1: C = 1/3 */
        assert_true(fabs(queue_erlang_c(2, 1.0) - 1.0 / 3.0) < 1e-12);
        /* Erlang B c = 2, A = 1: 1/5 */
        assert_true(fabs(queue_erlang_b(2, 1.0) - 0.2) < 1e-12);
        /* edges */
        assert_true(queue_erlang_c(4, 4.0) == 1.0);
        assert_true(queue_erlang_c(4, 5.0) == 1.0);
        assert_true(queue_erlang_c(4, 0.0) == 0.0);
        assert_true(queue_erlang_c(4, NAN) == 1.0);
        assert_true(queue_erlang_c(0, 0.5) == 1.0);
}

static void test_erlang_stable_512(void **state)
{
        (void) state;
        unsigned cs[] = { 1, 3, 16, 64, 128, 256, 512 };
        double rhos[] = { 0.3, 0.7, 0.9, 0.99 };
        for (unsigned i = 0; i < sizeof(cs) / sizeof(cs[0]); i++)
                for (unsigned j = 0; j < sizeof(rhos) / sizeof(rhos[0]); j++) {
                        double A = rhos[j] * cs[i], got = queue_erlang_c(cs[i], A);
                        long double want = erlang_c_closed(cs[i], A);
                        assert_true(isfinite(got) && got >= 0.0 && got <= 1.0);
                        if (fabsl((long double) got - want) > 1e-9L * (want > 1e-3L ? want : 1e-3L)) {
                                fprintf(stderr, "c=%u A=%g got %.15g want %.15Lg\n", cs[i], A, got, want);
                                fail();
                        }
                }
        /* square-root staffing: at 90% load 1 in 100 wait on 512 servers, more than half on 16 */
        assert_true(queue_erlang_c(512, 460.8) < 0.02 && queue_erlang_c(16, 14.4) > 0.5);
}

static void test_inverse(void **state)
{
        (void) state;
        for (double A = 0.2; A < 200.0; A *= 1.7) {
                for (double f = 1.0; f <= 5.0; f += 2.0) {
                        unsigned c = queue_servers_for(A, 0.01, f, 512);
                        assert_true(c > A);
                        assert_true(queue_pwait(c, A, f) <= 0.01);
                        assert_true(c == 1 || queue_pwait(c - 1, A, f) > 0.01);
                        /* the largest load of that size holds A, and is the boundary */
                        double amax = queue_max_load(c, 0.01, f);
                        assert_true(amax >= A - 1e-6 * c);
                        assert_true(queue_pwait(c, amax, f) <= 0.01);
                        assert_true(queue_pwait(c, amax + 2e-6 * c, f) > 0.01);
                }
        }
        assert_int_equal(queue_servers_for(0.0, 0.01, 1.0, 64), 0);
        assert_int_equal(queue_servers_for(100.0, 0.01, 1.0, 64), 65); /* not reachable */
        /* larger sets run fuller at the same probability (pooling) */
        assert_true(queue_max_load(64, 0.01, 1.0) / 64 > queue_max_load(16, 0.01, 1.0) / 16 + 0.1);
        /* a burstier load needs more servers */
        assert_true(queue_servers_for(10.0, 0.01, queue_ac_factor(1.0, 9.0), 512) >
                    queue_servers_for(10.0, 0.01, queue_ac_factor(1.0, 1.0), 512));
        assert_true(queue_ac_factor(NAN, -1.0) == 1.0);
}

static void test_measured(void **state)
{
        (void) state;
        /* The M/M/c wait a set shows gives back C. */
        unsigned c = 8;
        double A = 5.0, C = queue_erlang_c(c, A), W = C * A / (c - A);
        assert_true(fabs(queue_measured_pwait(c, A, W) - C) < 1e-12);
        assert_true(queue_measured_pwait(c, 9.0, 0.1) == 1.0);
        assert_true(queue_measured_pwait(c, 0.0, 0.1) == 0.0);
        assert_true(queue_measured_pwait(c, 2.0, NAN) == 0.0);
}

/*
 * queue_pwait_finite() runs its sum as two loops (k < c, k >= c) with the integers carried as
 * doubles; the one loop it replaced, kept here as the reference, gives the same value bit for
 * bit over sets of 0..300 CPUs, 0..1200 vCPUs and utilisations from 0 to 0.999 and beyond.
 */
static double pwait_one_loop(unsigned c, unsigned n, double u)
{
        double r, t = 1.0, sum = 1.0, tail = c == 0 ? 1.0 : 0.0;
        unsigned N = n ? n - 1 : 0;

        if (n <= c)
                return 0.0;
        if (!(u > 0.0))
                return u <= 0.0 ? 0.0 : 1.0;
        if (u > 0.999)
                u = 0.999;
        r = u / (1.0 - u);
        for (unsigned k = 1; k <= N; k++) {
                double ratio = (double) (N - k + 1) * r / (double) (k < c ? k : c);
                t *= ratio;
                sum += t;
                if (k >= c)
                        tail += t;
                if (ratio < 1.0 && t < 1e-17 * sum && (k >= c || t * (double) (N - k) < 1e-17 * sum))
                        break;
                if (t > 1e250) {
                        t *= 1e-250;
                        sum *= 1e-250;
                        tail *= 1e-250;
                }
        }
        return tail / sum;
}

static void test_finite_two_loops(void **state)
{
        uint64_t rng = 99;
        unsigned long n_cmp = 0;

        (void) state;
        for (unsigned c = 1; c <= 300; c += c < 40 ? 1 : 13)
                for (unsigned n = 0; n <= 1200; n += n < 120 ? 1 : 29)
                        for (unsigned j = 0; j < 8; j++) {
                                rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                                double u = j == 0 ? 0.999 : j == 1 ? 1.5 : j == 2 ? 1e-9 : (double) (rng >> 11) / 9007199254740992.0;
                                double want = pwait_one_loop(c, n, u), got = queue_pwait_finite(c, n, u);
                                assert_memory_equal(&want, &got, sizeof(want));
                                n_cmp++;
                        }
        printf("# %lu values equal to the one-loop sum\n", n_cmp);
}

/*
 * The memo returns what queue_set_pwait does, bit for bit, also when more
 * distinct arguments than it has slots evict each other, and it is used:
 * the second pass over the same arguments hits.
 */
static void test_memo(void **state)
{
        (void) state;
        static struct queue_memo m;
        unsigned long x = 12345;
        for (int pass = 0; pass < 2; pass++) {
                unsigned long hits0 = m.hits;
                x = 12345;
                for (int i = 0; i < 4 * QUEUE_MEMO_SLOTS; i++) {
                        x = x * 6364136223846793005UL + 1442695040888963407UL;
                        unsigned c = 1 + (unsigned) (x >> 58);                /* 1..64 */
                        double A = (double) ((x >> 20) % 70000) / 1000.0;      /* 0..70 */
                        double dbar = (double) ((x >> 40) % 1000 + 1) / 1000.0;
                        double f = i % 3 ? 1.0 : 1.7;
                        double a = queue_set_pwait(c, A, dbar, f), b = queue_set_pwait_memo(&m, c, A, dbar, f);
                        assert_memory_equal(&a, &b, sizeof(a));
                        b = queue_set_pwait_memo(&m, c, A, dbar, f); /* right after: a hit */
                        assert_memory_equal(&a, &b, sizeof(a));
                }
                assert_true(m.hits > hits0 + QUEUE_MEMO_SLOTS);
        }
        assert_true(m.misses > QUEUE_MEMO_SLOTS);
        /* no memo: computed */
        assert_true(queue_set_pwait_memo(NULL, 8, 7.0, 0.5, 1.0) == queue_set_pwait(8, 7.0, 0.5, 1.0));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_erlang_textbook),
                cmocka_unit_test(test_erlang_stable_512),
                cmocka_unit_test(test_inverse),
                cmocka_unit_test(test_measured),
                cmocka_unit_test(test_memo),
                cmocka_unit_test(test_finite_two_loops),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
