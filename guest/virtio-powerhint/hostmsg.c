/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Host -> guest messages, parsed strictly: exact keywords, single spaces,
 * decimal numbers without sign or leading zeros, ranges checked.  WELCOME
 * carries key=value pairs; unknown keys are skipped so that a newer host can
 * add keys without a version bump, known keys must parse.  ERR text is kept
 * as printable ASCII only (the framer guarantees it).
 */
#include <errno.h>
#include <string.h>

#include "hostmsg.h"

struct fld {
        const char *p;
        size_t len;
};

static bool fld_is(const struct fld *f, const char *s)
{
        size_t n = strlen(s);

        return f->len == n && memcmp(f->p, s, n) == 0;
}

static int dec(const char *p, size_t len, uint32_t max, uint32_t *ret)
{
        uint64_t v = 0;

        if (len == 0 || len > 10 || (len > 1 && p[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (p[i] - '0');
        }
        if (v > max)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

#define MAXF 12

static int split(const char *line, size_t len, struct fld *f, size_t max_fields)
{
        size_t n = 0, start = 0;

        for (size_t i = 0; i <= len; i++) {
                if (i < len && line[i] != ' ')
                        continue;
                if (i == start || n == max_fields)
                        return -EINVAL;
                f[n].p = line + start;
                f[n].len = i - start;
                n++;
                start = i + 1;
        }
        return (int) n;
}

static int parse_welcome(const struct fld *f, int n, struct hostmsg *m)
{
        int r;

        if (n < 2)
                return -EINVAL;
        r = dec(f[1].p, f[1].len, UINT32_MAX, &m->version);
        if (r < 0)
                return r;
        m->max_level = HOSTMSG_LEVEL_MAX;
        for (int i = 2; i < n; i++) {
                const char *eq = memchr(f[i].p, '=', f[i].len);
                uint32_t *dst = NULL, max = UINT32_MAX;

                if (!eq || eq == f[i].p)
                        return -EINVAL;
                struct fld key = { f[i].p, (size_t) (eq - f[i].p) };
                const char *val = eq + 1;
                size_t vlen = f[i].len - key.len - 1;

                if (fld_is(&key, "vcpus"))
                        dst = &m->vcpus, max = HOSTMSG_VCPUS_MAX;
                else if (fld_is(&key, "max_level"))
                        dst = &m->max_level, max = HOSTMSG_LEVEL_MAX;
                else if (fld_is(&key, "boost_cap_ms"))
                        dst = &m->boost_cap_ms;
                else if (fld_is(&key, "rate"))
                        dst = &m->rate;
                else if (fld_is(&key, "burst"))
                        dst = &m->burst;
                else if (fld_is(&key, "trust")) {
                        if (vlen == 0 || vlen >= sizeof(m->trust))
                                return -EINVAL;
                        for (size_t j = 0; j < vlen; j++)
                                if (val[j] < 'a' || val[j] > 'z')
                                        return -EINVAL;
                        memcpy(m->trust, val, vlen);
                        m->trust[vlen] = 0;
                        continue;
                } else
                        continue; /* unknown key: a newer host */
                r = dec(val, vlen, max, dst);
                if (r < 0)
                        return r;
        }
        return 0;
}

int hostmsg_parse(const char *line, size_t len, struct hostmsg *ret)
{
        struct fld f[MAXF];
        struct hostmsg m = {};
        int n, r;

        if (!line || len == 0 || len >= HOSTMSG_LINE_MAX)
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) line[i] < 0x20 || (unsigned char) line[i] > 0x7e)
                        return -EINVAL;

        if (len > 4 && memcmp(line, "ERR ", 4) == 0) {
                /* ERR <code> [free text] */
                const char *code = line + 4, *sp = memchr(code, ' ', len - 4);
                size_t clen = sp ? (size_t) (sp - code) : len - 4;

                if (clen == 0 || clen >= sizeof(m.code))
                        return -EINVAL;
                for (size_t i = 0; i < clen; i++)
                        if (code[i] < 'a' || code[i] > 'z')
                                return -EINVAL;
                m.type = HOSTMSG_ERR;
                memcpy(m.code, code, clen);
                if (sp) {
                        size_t tlen = len - 4 - clen - 1;
                        memcpy(m.text, sp + 1, tlen);
                        m.text[tlen] = 0;
                }
                *ret = m;
                return 0;
        }

        n = split(line, len, f, MAXF);
        if (n < 1)
                return -EINVAL;
        if (fld_is(&f[0], "WELCOME")) {
                m.type = HOSTMSG_WELCOME;
                r = parse_welcome(f, n, &m);
        } else if (fld_is(&f[0], "GRANT")) {
                m.type = HOSTMSG_GRANT;
                if (n != 3)
                        return -EINVAL;
                r = dec(f[1].p, f[1].len, HOSTMSG_VCPUS_MAX - 1, &m.vcpu);
                if (r >= 0)
                        r = dec(f[2].p, f[2].len, HOSTMSG_LEVEL_MAX, &m.level);
        } else if (fld_is(&f[0], "LIMIT")) {
                m.type = HOSTMSG_LIMIT;
                if (n != 4)
                        return -EINVAL;
                r = dec(f[1].p, f[1].len, HOSTMSG_VCPUS_MAX - 1, &m.vcpu);
                if (r >= 0)
                        r = dec(f[2].p, f[2].len, HOSTMSG_LEVEL_MAX, &m.min_level);
                if (r >= 0)
                        r = dec(f[3].p, f[3].len, HOSTMSG_LEVEL_MAX, &m.max_level);
                if (r >= 0 && m.min_level > m.max_level)
                        r = -ERANGE;
        } else
                return -EINVAL;
        if (r < 0)
                return r;
        *ret = m;
        return 0;
}

void hostmsg_framer_init(struct hostmsg_framer *f)
{
        memset(f, 0, sizeof(*f));
}

void hostmsg_framer_push(struct hostmsg_framer *f, const void *data, size_t n, hostmsg_cb cb, void *userdata)
{
        const unsigned char *p = data;

        for (size_t i = 0; i < n; i++) {
                unsigned char c = p[i];

                if (c == '\n') {
                        if (!f->discarding)
                                cb(HOSTMSG_EV_LINE, f->buf, f->len, userdata);
                        f->discarding = false;
                        f->len = 0;
                        continue;
                }
                if (f->discarding)
                        continue;
                if (c < 0x20 || c > 0x7e || f->len >= HOSTMSG_LINE_MAX - 1) {
                        f->discarding = true;
                        f->len = 0;
                        f->discarded++;
                        cb(HOSTMSG_EV_DISCARD, NULL, 0, userdata);
                        continue;
                }
                f->buf[f->len++] = (char) c;
        }
}

void hostmsg_framer_reset(struct hostmsg_framer *f)
{
        f->len = 0;
        f->discarding = false;
}
