/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cpuset.h"

unsigned cpuset_count(const cpuset_t *s)
{
        unsigned n = 0;

        for (size_t i = 0; i < VP_MAX_CPUS / 64; i++)
                n += (unsigned) __builtin_popcountll(s->w[i]);
        return n;
}

bool cpuset_equal(const cpuset_t *a, const cpuset_t *b)
{
        return memcmp(a, b, sizeof(*a)) == 0;
}

bool cpuset_empty(const cpuset_t *s)
{
        for (size_t i = 0; i < VP_MAX_CPUS / 64; i++)
                if (s->w[i])
                        return false;
        return true;
}

int cpuset_next(const cpuset_t *s, unsigned from)
{
        for (unsigned i = from / 64; i < VP_MAX_CPUS / 64 && from < VP_MAX_CPUS; i++) {
                uint64_t w = s->w[i];
                if (i == from / 64)
                        w &= ~UINT64_C(0) << (from % 64);
                if (w)
                        return (int) (i * 64 + (unsigned) __builtin_ctzll(w));
        }
        return -1;
}

static int parse_cpu(const char **p, unsigned *ret)
{
        unsigned v = 0;
        const char *s = *p;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
                v = v * 10 + (unsigned) (*s - '0');
                if (v >= VP_MAX_CPUS)
                        return -E2BIG;
        }
        *p = s;
        *ret = v;
        return 0;
}

int cpuset_parse_list(const char *s, cpuset_t *ret)
{
        cpuset_t set;
        const char *p = s;
        int r;

        cpuset_zero(&set);
        if (*p == '\0' || strcmp(p, "\n") == 0) {
                *ret = set;
                return 0;
        }
        for (;;) {
                unsigned a, b;

                r = parse_cpu(&p, &a);
                if (r < 0)
                        return r;
                b = a;
                if (*p == '-') {
                        p++;
                        r = parse_cpu(&p, &b);
                        if (r < 0)
                                return r;
                        if (b < a)
                                return -EINVAL;
                }
                for (unsigned c = a; c <= b; c++)
                        cpuset_set(&set, c);
                if (*p == ',') {
                        p++;
                        continue;
                }
                if (*p == '\n')
                        p++;
                if (*p != '\0')
                        return -EINVAL;
                break;
        }
        *ret = set;
        return 0;
}

int cpuset_format_list(const cpuset_t *s, char *buf, size_t size)
{
        size_t len = 0;
        int cpu = cpuset_next(s, 0);

        if (size == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        while (cpu >= 0) {
                int end = cpu;
                while (end + 1 < VP_MAX_CPUS && cpuset_isset(s, (unsigned) end + 1))
                        end++;
                int n = end > cpu ? snprintf(buf + len, size - len, "%s%d-%d", len ? "," : "", cpu, end)
                                  : snprintf(buf + len, size - len, "%s%d", len ? "," : "", cpu);
                if (n < 0 || (size_t) n >= size - len)
                        return -ENOBUFS;
                len += (size_t) n;
                cpu = end + 1 < VP_MAX_CPUS ? cpuset_next(s, (unsigned) end + 1) : -1;
        }
        return (int) len;
}
