/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Trace parsers (trace.h).  Strict: every field is a whole decimal number,
 * names are printable ASCII without commas, every VM has the same number of
 * samples; the first error is reported as FILE:LINE: message and nothing is
 * returned.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define TRACE_MAX_LINE (1u << 20)
#define TRACE_MAX_INTERVALS 100000u
#define TRACE_HEADER "# vmmpower-trace v1 "

static int fail(struct sim_error *err, const char *file, unsigned line, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int fail(struct sim_error *err, const char *file, unsigned line, const char *fmt, ...)
{
        va_list ap;

        if (err) {
                snprintf(err->file, sizeof(err->file), "%s", file);
                err->line = line;
                va_start(ap, fmt);
                vsnprintf(err->message, sizeof(err->message), fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

void sim_trace_free(struct sim_trace *t)
{
        if (!t)
                return;
        free(t->name);
        free(t->vcpus);
        free(t->util);
        free(t);
}

/* Whole-field decimal: digits with at most one '.', 0..100.  Locale-independent. */
static int parse_pct(const char *s, size_t len, double *ret)
{
        double v = 0, scale = 0;
        bool digits = false;

        if (len == 0 || len > 16)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (c >= '0' && c <= '9') {
                        digits = true;
                        if (scale > 0) {
                                v += (c - '0') * scale;
                                scale /= 10;
                        } else
                                v = v * 10 + (c - '0');
                } else if (c == '.' && scale == 0)
                        scale = 0.1;
                else
                        return -EINVAL;
        }
        if (!digits || v > 100.0)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int parse_uint(const char *s, size_t len, unsigned max, unsigned *ret)
{
        unsigned long v = 0;

        if (len == 0 || len > 9)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v == 0 || v > max)
                return -ERANGE;
        *ret = (unsigned) v;
        return 0;
}

struct builder {
        unsigned n, alloc, n_intervals;
        char (*name)[TRACE_NAME_MAX];
        unsigned *vcpus;
        float *util;
};

static int builder_grow(struct builder *b)
{
        unsigned na = b->alloc ? b->alloc * 2 : 64;
        void *p;

        p = realloc(b->name, (size_t) na * sizeof(*b->name));
        if (!p)
                return -ENOMEM;
        b->name = p;
        p = realloc(b->vcpus, (size_t) na * sizeof(*b->vcpus));
        if (!p)
                return -ENOMEM;
        b->vcpus = p;
        p = realloc(b->util, (size_t) na * b->n_intervals * sizeof(float));
        if (!p)
                return -ENOMEM;
        b->util = p;
        b->alloc = na;
        return 0;
}

static size_t count_fields(const char *s, size_t len)
{
        size_t n = 1;
        for (size_t i = 0; i < len; i++)
                n += s[i] == ',';
        return n;
}

static int parse_line(struct builder *b, bool generic, const char *s, size_t len, const char *file,
                      unsigned lineno, struct sim_error *err)
{
        size_t nf = count_fields(s, len), first_u = generic ? 2 : 1;
        const char *p = s, *end = s + len;
        unsigned vcpus = 1;
        int r;

        if (nf < first_u + 1)
                return fail(err, file, lineno, "expected %s,u0,...: %zu field(s)", generic ? "name,vcpus" : "name",
                            nf);
        if (b->n_intervals == 0) {
                if (nf - first_u > TRACE_MAX_INTERVALS)
                        return fail(err, file, lineno, "too many samples (%zu, at most %u)", nf - first_u,
                                    TRACE_MAX_INTERVALS);
                b->n_intervals = (unsigned) (nf - first_u);
        } else if (nf - first_u != b->n_intervals)
                return fail(err, file, lineno, "%zu samples, the first VM has %u", nf - first_u, b->n_intervals);
        if (b->n == b->alloc) {
                r = builder_grow(b);
                if (r < 0)
                        return r;
        }
        for (size_t f = 0; f < nf; f++) {
                const char *q = memchr(p, ',', (size_t) (end - p));
                size_t fl = q ? (size_t) (q - p) : (size_t) (end - p);

                if (f == 0) {
                        if (fl == 0 || fl >= TRACE_NAME_MAX)
                                return fail(err, file, lineno, "VM name empty or longer than %d bytes",
                                            TRACE_NAME_MAX - 1);
                        for (size_t i = 0; i < fl; i++)
                                if (p[i] < 0x21 || p[i] > 0x7e)
                                        return fail(err, file, lineno, "VM name has a byte 0x%02x",
                                                    (unsigned char) p[i]);
                        memcpy(b->name[b->n], p, fl);
                        b->name[b->n][fl] = 0;
                } else if (generic && f == 1) {
                        if (parse_uint(p, fl, TRACE_MAX_VCPUS, &vcpus) < 0)
                                return fail(err, file, lineno, "vcpus \"%.*s\" is not an integer 1..%d",
                                            (int) MIN(fl, 16), p, TRACE_MAX_VCPUS);
                } else {
                        double v;
                        if (parse_pct(p, fl, &v) < 0)
                                return fail(err, file, lineno, "sample %zu \"%.*s\" is not a percentage 0..100",
                                            f - first_u, (int) MIN(fl, 16), p);
                        b->util[(size_t) b->n * b->n_intervals + (f - first_u)] = (float) (v / 100.0);
                }
                p = q ? q + 1 : end;
        }
        b->vcpus[b->n] = vcpus;
        b->n++;
        return 0;
}

static int parse_interval_header(const char *s, size_t len, nsec_t *ret)
{
        const char *key = "interval_s=";
        size_t hl = strlen(TRACE_HEADER), kl = strlen(key);
        unsigned v;

        if (len < hl + kl || memcmp(s + hl, key, kl) != 0)
                return -EINVAL;
        if (parse_uint(s + hl + kl, len - hl - kl, 86400, &v) < 0)
                return -EINVAL;
        *ret = (nsec_t) v * NSEC_PER_SEC;
        return 0;
}

int sim_trace_parse(const char *text, const char *file, struct sim_trace **ret, struct sim_error *err)
{
        struct builder b = { 0 };
        nsec_t interval_ns = 300 * NSEC_PER_SEC;
        bool generic = false;
        unsigned lineno = 0;
        const char *p = text;
        int r = 0;

        if (strncmp(text, TRACE_HEADER, strlen(TRACE_HEADER)) == 0)
                generic = true;
        while (*p) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);

                lineno++;
                if (len > 0 && p[len - 1] == '\r')
                        len--;
                if (len > TRACE_MAX_LINE) {
                        r = fail(err, file, lineno, "line longer than %u bytes", TRACE_MAX_LINE);
                        break;
                }
                if (lineno == 1 && generic) {
                        if (parse_interval_header(p, len, &interval_ns) < 0) {
                                r = fail(err, file, lineno, "expected \"%sinterval_s=N\" (N 1..86400)",
                                         TRACE_HEADER);
                                break;
                        }
                } else if (len > 0 && p[0] != '#') {
                        r = parse_line(&b, generic, p, len, file, lineno, err);
                        if (r < 0)
                                break;
                }
                if (!nl)
                        break;
                p = nl + 1;
        }
        if (r == 0 && b.n == 0)
                r = fail(err, file, 0, "no VM in the trace");
        if (r < 0) {
                if (r != -EINVAL && err)
                        fail(err, file, lineno, "%s", strerror(-r));
                free(b.name);
                free(b.vcpus);
                free(b.util);
                return r;
        }
        struct sim_trace *t = calloc(1, sizeof(*t));
        if (!t) {
                free(b.name);
                free(b.vcpus);
                free(b.util);
                return -ENOMEM;
        }
        *t = (struct sim_trace) { .n_vms = b.n, .n_intervals = b.n_intervals, .interval_ns = interval_ns,
                                  .name = b.name, .vcpus = b.vcpus, .util = b.util };
        *ret = t;
        return 0;
}

int sim_trace_load(const char *path, struct sim_trace **ret, struct sim_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, alloc = 0;
        FILE *f = fopen(path, "re");
        int r;

        if (!f) {
                r = -errno;
                if (err)
                        fail(err, path, 0, "cannot open: %s", strerror(-r));
                return r;
        }
        for (;;) {
                if (alloc - len < 65536) {
                        char *nb = realloc(buf, alloc + (1u << 20));
                        if (!nb) {
                                fclose(f);
                                return -ENOMEM;
                        }
                        buf = nb;
                        alloc += 1u << 20;
                }
                size_t n = fread(buf + len, 1, alloc - len - 1, f);
                len += n;
                if (n == 0)
                        break;
        }
        if (ferror(f)) {
                fclose(f);
                if (err)
                        fail(err, path, 0, "read error");
                return -EIO;
        }
        fclose(f);
        if (memchr(buf, 0, len)) {
                if (err)
                        fail(err, path, 0, "NUL byte in the file");
                return -EINVAL;
        }
        buf[len] = 0;
        return sim_trace_parse(buf, path, ret, err);
}
