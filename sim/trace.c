/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Trace parsers (trace.h).  Strict: the format is the caller's, never
 * guessed from the data; every field is a whole decimal number, names are
 * printable ASCII without commas, every VM has the same number of samples;
 * the first error is reported as FILE:LINE: message and nothing is returned.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define TRACE_MAX_LINE (1u << 20)
#define TRACE_MAX_INTERVALS 100000u
#define TRACE_HEADER "# vmmpower-trace v1 "
/* The column header of the GWA-T-12 Bitbrains per-VM files (fastStorage and Rnd), fields separated by ";\t". */
#define BB_HEADER                                                                                                   \
        "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t"           \
        "Memory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\t"                       \
        "Disk write throughput [KB/s];\tNetwork received throughput [KB/s];\tNetwork transmitted throughput [KB/s]"
#define BB_FIELDS 11
#define BB_MAX_FILES 100000u

static const char *const format_names[_SIM_TRACE_FORMAT_MAX] = { "vmmpower", "planetlab", "bitbrains" };

int sim_trace_format_from_string(const char *s)
{
        for (int i = 0; i < _SIM_TRACE_FORMAT_MAX; i++)
                if (s && strcmp(s, format_names[i]) == 0)
                        return i;
        return -EINVAL;
}

const char *sim_trace_format_to_string(enum sim_trace_format f)
{
        return f < _SIM_TRACE_FORMAT_MAX ? format_names[f] : "?";
}

double sim_trace_vcpu_share(double u, unsigned n, unsigned j, double balance)
{
        double d, even, rest, before;

        if (n == 0 || j >= n)
                return 0;
        u = u < 0 ? 0 : u > 1 ? 1 : u;
        balance = balance < 0 ? 0 : balance > 1 ? 1 : balance;
        if (n == 1)
                return u;
        d = u * n;
        even = balance * u;          /* the balanced share, per vCPU */
        rest = d - even * n;         /* filled in vCPU order into each one's room, 1 - even */
        before = (1 - even) * j;     /* what vCPUs 0..j-1 took of it */
        return even + fmin(fmax(rest - before, 0), 1 - even);
}

int sim_fail(struct sim_error *err, const char *file, unsigned line, const char *fmt, ...)
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

/*
 * Whole-field non-negative decimal, locale-independent: "123", "0.25", "11703.99824"; at most
 * max_len characters, digits with at most one '.' (none when integer).
 */
static int parse_dec(const char *s, size_t len, size_t max_len, bool integer, double *ret)
{
        double v = 0, scale = 0;
        bool digits = false;

        if (len == 0 || len > max_len)
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
                } else if (c == '.' && scale == 0 && !integer)
                        scale = 0.1;
                else
                        return -EINVAL;
        }
        if (!digits)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* A utilisation in percent: a decimal (integer if asked) of at most 16 characters, 0..100. */
static int parse_pct(const char *s, size_t len, bool integer, double *ret)
{
        double v;
        int r = parse_dec(s, len, 16, integer, &v);

        if (r < 0)
                return r;
        if (v > 100.0)
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
                return sim_fail(err, file, lineno, "expected %s,u0,...: %zu field(s)", generic ? "name,vcpus" : "name",
                            nf);
        if (b->n_intervals == 0) {
                if (nf - first_u > TRACE_MAX_INTERVALS)
                        return sim_fail(err, file, lineno, "too many samples (%zu, at most %u)", nf - first_u,
                                    TRACE_MAX_INTERVALS);
                b->n_intervals = (unsigned) (nf - first_u);
        } else if (nf - first_u != b->n_intervals)
                return sim_fail(err, file, lineno, "%zu samples, the first VM has %u", nf - first_u, b->n_intervals);
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
                                return sim_fail(err, file, lineno, "VM name empty or longer than %d bytes",
                                            TRACE_NAME_MAX - 1);
                        for (size_t i = 0; i < fl; i++)
                                if (p[i] < 0x21 || p[i] > 0x7e)
                                        return sim_fail(err, file, lineno, "VM name has a byte 0x%02x",
                                                    (unsigned char) p[i]);
                        memcpy(b->name[b->n], p, fl);
                        b->name[b->n][fl] = 0;
                } else if (generic && f == 1) {
                        if (parse_uint(p, fl, TRACE_MAX_VCPUS, &vcpus) < 0)
                                return sim_fail(err, file, lineno, "vcpus \"%.*s\" is not an integer 1..%d",
                                            (int) MIN(fl, 16), p, TRACE_MAX_VCPUS);
                } else {
                        double v;
                        if (parse_pct(p, fl, !generic, &v) < 0)
                                return sim_fail(err, file, lineno, "sample %zu \"%.*s\" is not a %spercentage 0..100",
                                            f - first_u, (int) MIN(fl, 16), p, generic ? "" : "whole ");
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

/* PlanetLab or vmmpower format: one VM per line. */
static int parse_csv(const char *text, const char *file, bool generic, struct sim_trace **ret, struct sim_error *err)
{
        struct builder b = { 0 };
        nsec_t interval_ns = 300 * NSEC_PER_SEC;
        unsigned lineno = 0;
        const char *p = text;
        int r = 0;

        if (generic && strncmp(text, TRACE_HEADER, strlen(TRACE_HEADER)) != 0)
                return sim_fail(err, file, 1,
                            "expected \"%sinterval_s=N\" (the vmmpower format; state another with --trace-format)",
                            TRACE_HEADER);
        if (!generic && strncmp(text, TRACE_HEADER, strlen(TRACE_HEADER)) == 0)
                return sim_fail(err, file, 1, "a vmmpower-format header in a PlanetLab trace");
        while (*p) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);

                lineno++;
                if (len > 0 && p[len - 1] == '\r')
                        len--;
                if (len > TRACE_MAX_LINE) {
                        r = sim_fail(err, file, lineno, "line longer than %u bytes", TRACE_MAX_LINE);
                        break;
                }
                if (lineno == 1 && generic) {
                        if (parse_interval_header(p, len, &interval_ns) < 0) {
                                r = sim_fail(err, file, lineno, "expected \"%sinterval_s=N\" (N 1..86400)",
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
                r = sim_fail(err, file, 0, "no VM in the trace");
        if (r < 0) {
                if (r != -EINVAL && err)
                        sim_fail(err, file, lineno, "%s", strerror(-r));
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

/* ---- GWA-T-12 Bitbrains ------------------------------------------------------------------------ */

/* One VM's file: the rows in time order, the demand in cores (usage % x cores of the row). */
struct bb_series {
        char name[TRACE_NAME_MAX];
        char file[256];
        unsigned n, alloc, vcpus;
        double *t_s, *cores;
};

static void bb_free(struct bb_series *v)
{
        free(v->t_s);
        free(v->cores);
}

static int bb_row(struct bb_series *v, const char *s, size_t len, bool *ms, const char *file, unsigned lineno,
                  struct sim_error *err)
{
        const char *f[BB_FIELDS], *end = s + len, *p = s;
        size_t fl[BB_FIELDS];
        unsigned nf = 0;
        double ts, cores, pct;

        for (;;) {
                const char *q = memchr(p, ';', (size_t) (end - p));
                if (nf == BB_FIELDS)
                        return sim_fail(err, file, lineno, "more than %d fields", BB_FIELDS);
                f[nf] = p;
                fl[nf] = q ? (size_t) (q - p) : (size_t) (end - p);
                nf++;
                if (!q)
                        break;
                if (q + 1 >= end || q[1] != '\t')
                        return sim_fail(err, file, lineno, "field %u: expected \";\\t\" between fields", nf);
                p = q + 2;
        }
        if (nf != BB_FIELDS)
                return sim_fail(err, file, lineno, "%u field(s), expected %d separated by \";\\t\"", nf, BB_FIELDS);
        for (unsigned i = 0; i < fl[0]; i++)
                if (f[0][i] < '0' || f[0][i] > '9')
                        return sim_fail(err, file, lineno, "timestamp \"%.*s\" is not a whole number",
                                    (int) MIN(fl[0], 24), f[0]);
        if (fl[0] == 0 || fl[0] > 15 || parse_dec(f[0], fl[0], 40, false, &ts) < 0)
                return sim_fail(err, file, lineno,
                                "timestamp \"%.*s\" is not a whole number", (int) MIN(fl[0], 24), f[0]);
        if (v->n == 0)
                *ms = ts >= 1e11; /* 13 digits: milliseconds, as the header says; 10: seconds (the published files) */
        ts = *ms ? ts / 1000.0 : ts;
        if (v->n > 0 && !(ts > v->t_s[v->n - 1]))
                return sim_fail(err, file, lineno, "timestamp does not increase");
        unsigned c;
        if (parse_uint(f[1], fl[1], TRACE_MAX_VCPUS, &c) < 0)
                return sim_fail(err, file, lineno, "CPU cores \"%.*s\" is not an integer 1..%d",
                                (int) MIN(fl[1], 16), f[1], TRACE_MAX_VCPUS);
        cores = c;
        for (unsigned i = 2; i < BB_FIELDS; i++) {
                double x;
                if (parse_dec(f[i], fl[i], 40, false, &x) < 0)
                        return sim_fail(err, file, lineno, "field %u \"%.*s\" is not a non-negative decimal", i + 1,
                                    (int) MIN(fl[i], 16), f[i]);
        }
        if (parse_dec(f[4], fl[4], 40, false, &pct) < 0 || pct > 100.0)
                return sim_fail(err, file, lineno, "CPU usage [%%] \"%.*s\" is not a percentage 0..100",
                            (int) MIN(fl[4], 16), f[4]);
        if (v->n == v->alloc) {
                unsigned na = v->alloc ? v->alloc * 2 : 1024;
                double *a = realloc(v->t_s, na * sizeof(double)), *b;
                if (!a)
                        return -ENOMEM;
                v->t_s = a;
                b = realloc(v->cores, na * sizeof(double));
                if (!b)
                        return -ENOMEM;
                v->cores = b;
                v->alloc = na;
        }
        v->t_s[v->n] = ts;
        v->cores[v->n] = pct / 100.0 * cores;
        v->n++;
        if (c > v->vcpus)
                v->vcpus = c;
        return 0;
}

static int bb_parse(const char *text, const char *file, struct bb_series *v, struct sim_error *err)
{
        const char *p = text, *base = strrchr(file, '/');
        size_t hl = strlen(BB_HEADER), nl_len;
        unsigned lineno = 0;
        bool ms = false;
        int r = 0;

        base = base ? base + 1 : file;
        nl_len = strlen(base);
        if (nl_len > 4 && strcmp(base + nl_len - 4, ".csv") == 0)
                nl_len -= 4;
        if (nl_len == 0 || nl_len >= TRACE_NAME_MAX)
                return sim_fail(err, file, 0,
                                "VM name (the file name) empty or longer than %d bytes", TRACE_NAME_MAX - 1);
        memcpy(v->name, base, nl_len);
        v->name[nl_len] = 0;
        for (size_t i = 0; i < nl_len; i++)
                if (v->name[i] < 0x21 || v->name[i] > 0x7e || v->name[i] == ',')
                        v->name[i] = '_';
        snprintf(v->file, sizeof(v->file), "%s", file);
        while (*p) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);

                lineno++;
                if (len > 0 && p[len - 1] == '\r')
                        len--;
                if (len > TRACE_MAX_LINE)
                        return sim_fail(err, file, lineno, "line longer than %u bytes", TRACE_MAX_LINE);
                if (lineno == 1) {
                        if (len != hl || memcmp(p, BB_HEADER, hl) != 0)
                                return sim_fail(err, file, 1,
                                                "expected the Bitbrains column header \"Timestamp [ms];\\tCPU cores;\\t...\"");
                } else if (len > 0) {
                        r = bb_row(v, p, len, &ms, file, lineno, err);
                        if (r < 0) {
                                if (r != -EINVAL)
                                        sim_fail(err, file, lineno, "%s", strerror(-r));
                                return r;
                        }
                }
                if (!nl)
                        break;
                p = nl + 1;
        }
        if (v->n < 2)
                return sim_fail(err, file, lineno,
                                "%u row(s): at least 2 needed (a row holds until the next one)", v->n);
        return 0;
}

/* Sample-and-hold: row i holds from its timestamp to the next row's; the last row for the gap before it. */
static double bb_end(const struct bb_series *v, unsigned i)
{
        return i + 1 < v->n ? v->t_s[i + 1] : v->t_s[i] + (v->t_s[i] - v->t_s[i - 1]);
}

static int bb_resample(struct bb_series *vs, unsigned n, nsec_t interval_ns, struct sim_trace **ret,
                       struct sim_error *err)
{
        double start = -INFINITY, end = INFINITY, iv = (double) interval_ns / 1e9;
        unsigned late = 0, early = 0;
        struct sim_trace *t;

        for (unsigned k = 0; k < n; k++) {
                if (vs[k].t_s[0] > start) {
                        start = vs[k].t_s[0];
                        late = k;
                }
                if (bb_end(&vs[k], vs[k].n - 1) < end) {
                        end = bb_end(&vs[k], vs[k].n - 1);
                        early = k;
                }
        }
        double span = floor((end - start) / iv);
        if (!(span >= 1))
                return sim_fail(err, vs[late].file, 0, "starts at %.0f s, after %s ends (%.0f s): the files share no %g s interval",
                            start, vs[early].file, end, iv);
        unsigned n_int = span > TRACE_MAX_INTERVALS ? TRACE_MAX_INTERVALS : (unsigned) span;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->n_vms = n;
        t->n_intervals = n_int;
        t->interval_ns = interval_ns;
        t->name = calloc(n, sizeof(*t->name));
        t->vcpus = calloc(n, sizeof(unsigned));
        t->util = calloc((size_t) n * n_int, sizeof(float));
        if (!t->name || !t->vcpus || !t->util) {
                sim_trace_free(t);
                return -ENOMEM;
        }
        for (unsigned k = 0; k < n; k++) {
                const struct bb_series *v = &vs[k];
                unsigned i = 0;

                memcpy(t->name[k], v->name, TRACE_NAME_MAX);
                t->vcpus[k] = v->vcpus;
                for (unsigned q = 0; q < n_int; q++) {
                        double a = start + q * iv, b = a + iv, sum = 0;
                        while (i + 1 < v->n && bb_end(v, i) <= a)
                                i++;
                        for (unsigned j = i; j < v->n && v->t_s[j] < b; j++) {
                                double lo = fmax(a, v->t_s[j]), hi = fmin(b, bb_end(v, j));
                                if (hi > lo)
                                        sum += (hi - lo) * v->cores[j];
                        }
                        double u = sum / iv / v->vcpus;
                        t->util[(size_t) k * n_int + q] = (float) (u > 1 ? 1 : u);
                }
        }
        *ret = t;
        return 0;
}

static int read_text(const char *path, char **ret, struct sim_error *err)
{
        char *buf = NULL;
        size_t len = 0, alloc = 0;
        FILE *f = fopen(path, "re");
        int r;

        if (!f) {
                r = -errno;
                if (err)
                        sim_fail(err, path, 0, "cannot open: %s", strerror(-r));
                return r;
        }
        for (;;) {
                if (alloc - len < 65536) {
                        char *nb = realloc(buf, alloc + (1u << 20));
                        if (!nb) {
                                free(buf);
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
                free(buf);
                fclose(f);
                if (err)
                        sim_fail(err, path, 0, "read error");
                return -EIO;
        }
        fclose(f);
        if (memchr(buf, 0, len)) {
                free(buf);
                if (err)
                        sim_fail(err, path, 0, "NUL byte in the file");
                return -EINVAL;
        }
        buf[len] = 0;
        *ret = buf;
        return 0;
}

static int cmp_names(const void *a, const void *b)
{
        return strverscmp(*(char *const *) a, *(char *const *) b);
}

/* path: one file, or a directory of *.csv files (one VM each). */
static int bb_load(const char *path, nsec_t interval_ns, struct sim_trace **ret, struct sim_error *err)
{
        char **names = NULL;
        unsigned n = 0, alloc = 0;
        struct bb_series *vs = NULL;
        DIR *d = opendir(path);
        int r = 0;

        if (!d && errno != ENOTDIR) {
                r = -errno;
                if (err)
                        sim_fail(err, path, 0, "cannot open: %s", strerror(-r));
                return r;
        }
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        size_t l = strlen(de->d_name);
                        if (de->d_name[0] == '.' || l < 5 || strcmp(de->d_name + l - 4, ".csv") != 0)
                                continue;
                        if (n == BB_MAX_FILES) {
                                r = sim_fail(err, path, 0, "more than %u files", BB_MAX_FILES);
                                break;
                        }
                        if (n == alloc) {
                                unsigned na = alloc ? alloc * 2 : 256;
                                char **nn = realloc(names, na * sizeof(char *));
                                if (!nn) {
                                        r = -ENOMEM;
                                        break;
                                }
                                names = nn;
                                alloc = na;
                        }
                        if (asprintf(&names[n], "%s/%s", path, de->d_name) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        n++;
                }
                closedir(d);
                if (r == 0 && n == 0)
                        r = sim_fail(err, path, 0, "no *.csv file in the directory");
                if (r == 0)
                        qsort(names, n, sizeof(char *), cmp_names);
        } else {
                names = malloc(sizeof(char *));
                if (!names || !(names[0] = strdup(path)))
                        r = -ENOMEM;
                else
                        n = 1;
        }
        if (r == 0) {
                vs = calloc(n, sizeof(*vs));
                if (!vs)
                        r = -ENOMEM;
        }
        for (unsigned k = 0; r == 0 && k < n; k++) {
                char *text = NULL;
                r = read_text(names[k], &text, err);
                if (r == 0)
                        r = bb_parse(text, names[k], &vs[k], err);
                free(text);
        }
        if (r == 0)
                r = bb_resample(vs, n, interval_ns, ret, err);
        if (r < 0 && r != -EINVAL && err && !err->file[0])
                sim_fail(err, path, 0, "%s", strerror(-r));
        for (unsigned k = 0; k < n; k++) {
                if (vs)
                        bb_free(&vs[k]);
                free(names[k]);
        }
        free(vs);
        free(names);
        return r;
}

/* ---- entry points ------------------------------------------------------------------------------ */

int sim_trace_parse_as(const char *text, const char *file, enum sim_trace_format fmt, nsec_t resample_ns,
                       struct sim_trace **ret, struct sim_error *err)
{
        struct bb_series v = { 0 };
        int r;

        switch (fmt) {
        case SIM_TRACE_VMMPOWER: return parse_csv(text, file, true, ret, err);
        case SIM_TRACE_PLANETLAB: return parse_csv(text, file, false, ret, err);
        case SIM_TRACE_BITBRAINS:
                r = bb_parse(text, file, &v, err);
                if (r == 0)
                        r = bb_resample(&v, 1, resample_ns > 0 ? resample_ns : 300 * NSEC_PER_SEC, ret, err);
                bb_free(&v);
                return r;
        default: return -EINVAL;
        }
}

int sim_trace_parse(const char *text, const char *file, struct sim_trace **ret, struct sim_error *err)
{
        return sim_trace_parse_as(text, file, SIM_TRACE_VMMPOWER, 0, ret, err);
}

int sim_trace_load_as(const char *path, enum sim_trace_format fmt, nsec_t resample_ns, struct sim_trace **ret,
                      struct sim_error *err)
{
        char *buf = NULL;
        int r;

        if (fmt >= _SIM_TRACE_FORMAT_MAX)
                return -EINVAL;
        if (fmt == SIM_TRACE_BITBRAINS)
                return bb_load(path, resample_ns > 0 ? resample_ns : 300 * NSEC_PER_SEC, ret, err);
        r = read_text(path, &buf, err);
        if (r < 0)
                return r;
        r = sim_trace_parse_as(buf, path, fmt, resample_ns, ret, err);
        free(buf);
        return r;
}

int sim_trace_load(const char *path, struct sim_trace **ret, struct sim_error *err)
{
        return sim_trace_load_as(path, SIM_TRACE_VMMPOWER, 0, ret, err);
}
