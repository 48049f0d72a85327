/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The wait model (queueing.h). */
#include <math.h>
#include <string.h>

#include "queueing.h"

double queue_erlang_b(unsigned c, double A)
{
        double B = 1.0;

        if (!(A > 0.0))
                return c == 0 ? 1.0 : 0.0;
        for (unsigned k = 1; k <= c; k++)
                B = A * B / ((double) k + A * B);
        return B;
}

double queue_erlang_c(unsigned c, double A)
{
        double B;

        if (!(A > 0.0))
                return A <= 0.0 ? 0.0 : 1.0; /* NaN: as saturated */
        if (A >= (double) c)
                return 1.0;
        B = queue_erlang_b(c, A);
        return (double) c * B / ((double) c - A * (1.0 - B));
}

double queue_ac_factor(double ca2, double cs2)
{
        if (!(ca2 >= 0.0))
                ca2 = 1.0;
        if (!(cs2 >= 0.0))
                cs2 = 1.0;
        return (ca2 + cs2) / 2.0;
}

double queue_pwait(unsigned c, double A, double factor)
{
        double p = queue_erlang_c(c, A);

        if (p <= 0.0)
                return 0.0;
        p *= factor > 0.0 ? factor : 1.0;
        return p > 1.0 ? 1.0 : p;
}

unsigned queue_servers_for(double A, double budget, double factor, unsigned c_max)
{
        double B = 1.0, f = factor > 0.0 ? factor : 1.0;

        if (!(A > 0.0))
                return 0;
        /* B(k) for every k, C(k) once k > A */
        for (unsigned k = 1; k <= c_max; k++) {
                B = A * B / ((double) k + A * B);
                if ((double) k <= A)
                        continue;
                double C = (double) k * B / ((double) k - A * (1.0 - B));
                if (f * C <= budget)
                        return k;
        }
        return c_max + 1;
}

double queue_max_load(unsigned c, double budget, double factor)
{
        double lo = 0.0, hi = (double) c;

        if (c == 0 || !(budget > 0.0))
                return 0.0;
        if (budget >= 1.0)
                return (double) c;
        while (hi - lo > 1e-6 * (double) c) {
                double mid = (lo + hi) / 2.0;
                if (queue_pwait(c, mid, factor) <= budget)
                        lo = mid;
                else
                        hi = mid;
        }
        return lo;
}

double queue_measured_pwait(unsigned c, double A, double W)
{
        double p;

        if (!(A > 0.0) || !(W > 0.0))
                return 0.0;
        if (A >= (double) c)
                return 1.0;
        p = W * ((double) c - A) / A;
        return p > 1.0 ? 1.0 : p;
}

double queue_pwait_finite(unsigned c, unsigned n, double u)
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
        /*
         * t_k = t_{k-1} (N - k + 1) r / min(k, c): k of the N others runnable.  Two loops, k < c
         * and k >= c, with the integers carried as doubles (exact below 2^53): the same sums, term
         * for term, as one loop with min(k, c) and a test for the tail in it.
         */
        double nk = (double) N, dc = (double) c, kk = 1.0;
        unsigned k = 1;
        for (; k <= N && k < c; k++, nk -= 1.0, kk += 1.0) {
                double ratio = nk * r / kk;
                t *= ratio;
                sum += t;
                /* past the mode the terms only fall: stop once they no longer count */
                if (ratio < 1.0 && t < 1e-17 * sum && t * (nk - 1.0) < 1e-17 * sum)
                        return tail / sum;
                if (t > 1e250) {
                        t *= 1e-250;
                        sum *= 1e-250;
                        tail *= 1e-250;
                }
        }
        for (; k <= N; k++, nk -= 1.0) {
                double ratio = nk * r / dc;
                t *= ratio;
                sum += t;
                tail += t;
                if (ratio < 1.0 && t < 1e-17 * sum)
                        break;
                if (t > 1e250) {
                        t *= 1e-250;
                        sum *= 1e-250;
                        tail *= 1e-250;
                }
        }
        return tail / sum;
}

static unsigned set_n(double A, double dbar)
{
        double n = A / dbar;
        if (!(n >= 1.0))
                return 1;
        return n > 4e9 ? 4000000000u : (unsigned) (n + 0.5);
}

static double pwait_finite_memo(struct queue_memo *m, unsigned c, unsigned n, double u)
{
        uint64_t ubits, h;

        if (!m)
                return queue_pwait_finite(c, n, u);
        memcpy(&ubits, &u, sizeof(ubits));
        h = (ubits ^ (ubits >> 29) ^ ((uint64_t) n << 17) ^ c) * 0x9e3779b97f4a7c15ULL;
        unsigned s = (unsigned) (h >> 55) % QUEUE_MEMO_SLOTS;
        if (m->slot[s].used && m->slot[s].c == c && m->slot[s].n == n && m->slot[s].ubits == ubits) {
                m->hits++;
                return m->slot[s].p;
        }
        m->misses++;
        m->slot[s].c = c;
        m->slot[s].n = n;
        m->slot[s].ubits = ubits;
        m->slot[s].p = queue_pwait_finite(c, n, u);
        m->slot[s].used = true;
        return m->slot[s].p;
}

double queue_set_pwait_memo(struct queue_memo *m, unsigned c, double A, double dbar, double factor)
{
        double p;

        if (!(A > 0.0))
                return 0.0;
        if (A >= (double) c)
                return 1.0;
        if (!(dbar > 0.0) || dbar > A)
                dbar = A;
        p = pwait_finite_memo(m, c, set_n(A, dbar), dbar);
        p *= factor > 0.0 ? factor : 1.0;
        return p > 1.0 ? 1.0 : p;
}

double queue_set_pwait(unsigned c, double A, double dbar, double factor)
{
        return queue_set_pwait_memo(NULL, c, A, dbar, factor);
}

double queue_set_max_load(unsigned c, double dbar, double budget, double factor)
{
        unsigned lo, hi;
        double f = factor > 0.0 ? factor : 1.0;

        if (c == 0)
                return 0.0;
        if (!(dbar > 0.0))
                dbar = 1e-3;
        if (dbar > 1.0)
                dbar = 1.0;
        /* n <= c never queues; n with n dbar >= c is saturated */
        lo = c;
        hi = (unsigned) ((double) c / dbar) + 1;
        if (hi <= lo)
                return (double) c * dbar;
        while (hi - lo > 1) {
                unsigned mid = lo + (hi - lo) / 2;
                double A = (double) mid * dbar;
                double p = A >= (double) c ? 1.0 : queue_pwait_finite(c, mid, dbar) * f;
                if (p <= budget)
                        lo = mid;
                else
                        hi = mid;
        }
        return (double) lo * dbar;
}
