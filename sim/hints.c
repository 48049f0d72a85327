/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Guest hints replayed into vmmpower-sim (hints.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hints.h"

#define HINT_SCRIPT_LINE_MAX 1024

struct sim_hint_replay {
        const struct sim_hint_script *s;
        size_t next;                /* the next line to feed */
        uint32_t pid0;
        unsigned n_vms;
        struct hint_vm **vm;        /* [n_vms], NULL for a VM the script does not name */
        uint64_t fed, actuating;
};

void sim_hint_script_free(struct sim_hint_script *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++)
                free(s->lines[i].text);
        free(s->lines);
        free(s);
}

/* One non-comment line into *ret (text allocated): 0 or -EINVAL with err. */
static int parse_line(char *p, const char *path, unsigned ln, struct sim_hint_line *ret, struct sim_error *err)
{
        char *end;
        double sec;
        unsigned long vm;

        errno = 0;
        sec = strtod(p, &end);
        if (end == p || errno || !isfinite(sec) || sec < 0 || sec > 1e9 || (*end != ' ' && *end != '\t'))
                return sim_fail(err, path, ln, "expected SECONDS VM MESSAGE (SECONDS a number >= 0)");
        p = end + strspn(end, " \t");
        errno = 0;
        vm = strtoul(p, &end, 10);
        if (end == p || errno || *p == '-' || vm > 1000000 || (*end != ' ' && *end != '\t'))
                return sim_fail(err, path, ln, "expected SECONDS VM MESSAGE (VM the run's VM number, 0-based)");
        p = end + strspn(end, " \t");
        if (!*p)
                return sim_fail(err, path, ln, "no protocol line after the VM number");
        *ret = (struct sim_hint_line) { .at = (nsec_t) llround(sec * 1e9), .vm = (unsigned) vm, .text = strdup(p) };
        return ret->text ? 0 : -ENOMEM;
}

static int load_file(FILE *f, const char *path, struct sim_hint_script **ret, struct sim_error *err)
{
        struct sim_hint_script *s;
        char buf[HINT_SCRIPT_LINE_MAX + 2];
        size_t alloc = 0;
        unsigned ln = 0;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        while (fgets(buf, sizeof(buf), f)) {
                size_t len = strlen(buf);
                char *p;

                ln++;
                if (len > HINT_SCRIPT_LINE_MAX || (len == HINT_SCRIPT_LINE_MAX + 1 && buf[len - 1] != '\n')) {
                        sim_hint_script_free(s);
                        return sim_fail(err, path, ln, "line longer than %d bytes", HINT_SCRIPT_LINE_MAX);
                }
                while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                        buf[--len] = '\0';
                p = buf + strspn(buf, " \t");
                if (!*p || *p == '#')
                        continue;
                if (s->n == alloc) {
                        size_t na = alloc ? 2 * alloc : 64;
                        struct sim_hint_line *l = realloc(s->lines, na * sizeof(*l));
                        if (!l) {
                                sim_hint_script_free(s);
                                return -ENOMEM;
                        }
                        s->lines = l;
                        alloc = na;
                }
                r = parse_line(p, path, ln, &s->lines[s->n], err);
                if (r < 0) {
                        sim_hint_script_free(s);
                        return r;
                }
                s->n++;
                if (s->n > 1 && s->lines[s->n - 1].at < s->lines[s->n - 2].at) {
                        sim_hint_script_free(s);
                        return sim_fail(err, path, ln, "time goes back (lines must be in time order)");
                }
        }
        if (ferror(f)) {
                sim_hint_script_free(s);
                return sim_fail(err, path, ln, "read error");
        }
        *ret = s;
        return 0;
}

int sim_hint_script_load(const char *path, struct sim_hint_script **ret, struct sim_error *err)
{
        FILE *f = fopen(path, "re");
        int r;

        *ret = NULL;
        if (!f) {
                r = -errno;
                sim_fail(err, path, 0, "cannot read: %s", strerror(-r));
                return r;
        }
        r = load_file(f, path, ret, err);
        fclose(f);
        return r;
}

int sim_hint_replay_new(const struct sim_hint_script *s, const struct hint_policy *pol, uint32_t pid0,
                        const unsigned *vcpus, unsigned n_vms, struct sim_hint_replay **ret, struct sim_error *err)
{
        struct sim_hint_replay *r = calloc(1, sizeof(*r));

        *ret = NULL;
        if (!r || !(r->vm = calloc(n_vms ? n_vms : 1, sizeof(*r->vm)))) {
                free(r);
                return -ENOMEM;
        }
        r->s = s;
        r->pid0 = pid0;
        r->n_vms = n_vms;
        for (size_t i = 0; i < s->n; i++) {
                unsigned k = s->lines[i].vm;

                if (k >= n_vms) {
                        sim_hint_replay_free(r);
                        return sim_fail(err, "hint script", 0, "line %zu names VM %u; the run has %u VMs", i + 1, k,
                                    n_vms);
                }
                if (!r->vm[k] && !(r->vm[k] = hint_vm_new(vcpus[k], pol, 0))) {
                        sim_hint_replay_free(r);
                        return errno == EINVAL ? sim_fail(err, "hint script", 0, "VM %u: %u vCPUs, or the [Hints] "
                                                                             "policy, refused by the hint protocol",
                                                      k, vcpus[k])
                                               : -ENOMEM;
                }
        }
        *ret = r;
        return 0;
}

void sim_hint_replay_free(struct sim_hint_replay *r)
{
        if (!r)
                return;
        for (unsigned k = 0; k < r->n_vms; k++)
                hint_vm_free(r->vm[k]);
        free(r->vm);
        free(r);
}

void sim_hint_replay_advance(struct sim_hint_replay *r, nsec_t now)
{
        struct strbuf line, reply;

        strbuf_init(&line);
        strbuf_init(&reply);
        for (; r->next < r->s->n && r->s->lines[r->next].at <= now; r->next++) {
                const struct sim_hint_line *l = &r->s->lines[r->next];
                int k;

                strbuf_reset(&line);
                strbuf_puts(&line, l->text);
                strbuf_puts(&line, "\n");
                strbuf_reset(&reply); /* WELCOMEs and ERRs go nowhere: the script does not read */
                k = hint_vm_feed(r->vm[l->vm], line.data, line.len, l->at, &reply);
                r->fed++;
                if (k > 0)
                        r->actuating += (uint64_t) k;
        }
        for (unsigned k = 0; k < r->n_vms; k++)
                if (r->vm[k])
                        (void) hint_vm_tick(r->vm[k], now);
        strbuf_free(&line);
        strbuf_free(&reply);
}

int sim_hint_replay_vm_state(void *userdata, pid_t pid, nsec_t now, struct hint_effective *ret, size_t max)
{
        const struct sim_hint_replay *r = userdata;
        unsigned k;
        size_t n = 0;

        if (pid < (pid_t) r->pid0 || (uint32_t) pid - r->pid0 >= r->n_vms)
                return -ENOENT;
        k = (uint32_t) pid - r->pid0;
        if (!r->vm[k])
                return -ENOENT;
        for (uint32_t j = 0; j < max && hint_vm_effective(r->vm[k], j, now, &ret[j]) == 0; j++)
                n = j + 1;
        return (int) n;
}

void sim_hint_replay_counts(const struct sim_hint_replay *r, uint64_t *fed, uint64_t *actuating)
{
        *fed = r->fed;
        *actuating = r->actuating;
}
