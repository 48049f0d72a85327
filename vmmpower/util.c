/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static nsec_t clock_ns(clockid_t id)
{
        struct timespec ts;

        if (clock_gettime(id, &ts) < 0)
                abort(); /* cannot fail for these clocks */
        return (nsec_t) ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

nsec_t now_ns(void)
{
        return clock_ns(CLOCK_MONOTONIC);
}

nsec_t now_realtime_ns(void)
{
        return clock_ns(CLOCK_REALTIME);
}

nsec_t thread_cputime_ns(void)
{
        return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

nsec_t process_cputime_ns(void)
{
        return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9'; /* locale-independent */
}

/* Length of s without one trailing newline. */
static size_t trimmed_len(const char *s)
{
        size_t n = strlen(s);

        if (n > 0 && s[n - 1] == '\n')
                n--;
        return n;
}

int parse_u64(const char *s, uint64_t *ret)
{
        size_t n = trimmed_len(s);
        uint64_t v = 0;

        if (n == 0 || n > 20)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!is_digit(s[i]))
                        return -EINVAL;
                unsigned d = (unsigned) (s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

int parse_i64(const char *s, int64_t *ret)
{
        bool neg = s[0] == '-';
        uint64_t v;
        int r;

        r = parse_u64(s + neg, &v);
        if (r < 0)
                return r;
        if (neg) {
                if (v > (uint64_t) INT64_MAX + 1)
                        return -ERANGE;
                *ret = v == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) v;
        } else {
                if (v > INT64_MAX)
                        return -ERANGE;
                *ret = (int64_t) v;
        }
        return 0;
}

int parse_u32(const char *s, uint32_t *ret)
{
        uint64_t v;
        int r = parse_u64(s, &v);

        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

int parse_int(const char *s, int *ret)
{
        int64_t v;
        int r = parse_i64(s, &v);

        if (r < 0)
                return r;
        if (v < INT_MIN || v > INT_MAX)
                return -ERANGE;
        *ret = (int) v;
        return 0;
}

int parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = { "1", "yes", "true", "on" };
        static const char *const no[] = { "0", "no", "false", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

int parse_duration_ns(const char *s, nsec_t *ret)
{
        static const struct {
                const char *suffix;
                nsec_t mult;
        } units[] = {
                { "ns", 1 }, { "us", NSEC_PER_USEC }, { "ms", NSEC_PER_MSEC },
                { "s", NSEC_PER_SEC }, { "min", 60 * NSEC_PER_SEC }, { "h", 3600 * NSEC_PER_SEC },
        };
        uint64_t whole = 0, frac = 0, frac_div = 1;
        const char *p = s;

        if (!is_digit(*p))
                return -EINVAL;
        for (; is_digit(*p); p++) {
                if (whole > (UINT64_MAX - 9) / 10)
                        return -ERANGE;
                whole = whole * 10 + (uint64_t) (*p - '0');
        }
        if (*p == '.') {
                p++;
                if (!is_digit(*p))
                        return -EINVAL;
                for (; is_digit(*p); p++)
                        if (frac_div < 1000000000) {
                                frac = frac * 10 + (uint64_t) (*p - '0');
                                frac_div *= 10;
                        }
        }
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                if (strcmp(p, units[i].suffix) != 0)
                        continue;
                /* in 128 bits: frac (< 10^9) times 3600 s in ns overflows 64 */
                unsigned __int128 m = (uint64_t) units[i].mult;
                unsigned __int128 t = (unsigned __int128) whole * m + (unsigned __int128) frac * m / frac_div;
                if (t > (unsigned __int128) INT64_MAX)
                        return -ERANGE;
                *ret = (nsec_t) t;
                return 0;
        }
        return -EINVAL;
}

ssize_t read_small_file_at(int dirfd, const char *path, char *buf, size_t size)
{
        ssize_t n;
        int fd;

        if (size < 2)
                return -EINVAL;
        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        /* to the end: a sysfs file over a page (a long cpulist) comes in several reads */
        for (size_t len = 0;;) {
                ssize_t k = read(fd, buf + len, size - len);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        n = -errno;
                        close(fd);
                        return n;
                }
                len += (size_t) k;
                if (k == 0 || len >= size) {
                        n = (ssize_t) len;
                        break;
                }
        }
        close(fd);
        if ((size_t) n >= size)
                return -EFBIG;
        buf[n] = '\0';
        if (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        return n;
}

ssize_t read_small_file(const char *path, char *buf, size_t size)
{
        return read_small_file_at(AT_FDCWD, path, buf, size);
}

ssize_t pread_all0(int fd, char *buf, size_t size)
{
        ssize_t n;

        if (size < 2)
                return -EINVAL;
        n = pread(fd, buf, size - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return n;
}

int write_string_at(int dirfd, const char *path, const char *s)
{
        size_t len = strlen(s);
        ssize_t n;
        int fd, r = 0;

        fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = write(fd, s, len);
        if (n < 0)
                r = -errno;
        else if ((size_t) n != len)
                r = -EIO;
        if (close(fd) < 0 && r == 0 && errno != EINTR)
                r = -errno;
        return r;
}

static int write_file_atomic_full(const char *path, const char *data, size_t len, mode_t mode, bool sync)
{
        char tmp[PATH_MAX];
        size_t off = 0;
        int fd, r;

        /* A fresh name, created exclusively (mkostemp: O_CREAT | O_EXCL, mode 0600 until
         * the fchmod below): whoever may write the directory (a textfile collector's, say)
         * cannot plant a symlink at a name we would open and have us write through it. */
        r = path_printf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
        if (r < 0)
                return r;
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        while (off < len) {
                ssize_t n = write(fd, data + off, len - off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        goto fail;
                }
                off += (size_t) n;
        }
        if (fchmod(fd, mode) < 0 || (sync && fsync(fd) < 0)) {
                r = -errno;
                goto fail;
        }
        if (close(fd) < 0) {
                fd = -1;
                r = -errno;
                goto fail;
        }
        fd = -1;
        if (rename(tmp, path) < 0) {
                r = -errno;
                goto fail;
        }
        return 0;
fail:
        if (fd >= 0)
                close(fd);
        unlink(tmp);
        return r;
}

int write_file_atomic(const char *path, const char *data, size_t len, mode_t mode)
{
        return write_file_atomic_full(path, data, len, mode, true);
}

int write_file_atomic_nosync(const char *path, const char *data, size_t len, mode_t mode)
{
        return write_file_atomic_full(path, data, len, mode, false);
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 if invalid. */
static size_t utf8_len(const unsigned char *p)
{
        unsigned char c = p[0];
        size_t n;
        uint32_t cp;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                n = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
                n = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
                n = 4, cp = c & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0; /* overlong, beyond Unicode, surrogate */
        if (cp >= 0x80 && cp <= 0x9f)
                return 0; /* C1 control characters */
        return n;
}

int array_grow(void **a, size_t *alloc, size_t want, size_t size)
{
        void *n;

        if (want <= *alloc)
                return 0;
        if (size && want > SIZE_MAX / size)
                return -ENOMEM; /* want * size would wrap */
        n = realloc(*a, want * size);
        if (!n)
                return -ENOMEM;
        *a = n;
        *alloc = want;
        return 0;
}

void sanitize_name(char *s)
{
        unsigned char *p = (unsigned char *) s;

        while (*p) {
                size_t n = utf8_len(p);
                if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
                        *p++ = '?';
                        continue;
                }
                p += n;
        }
}

int path_printf(char *buf, size_t size, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf, size, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t) n >= size)
                return -ENAMETOOLONG;
        return n;
}

void escape_bytes(const void *data, size_t len, char *out, size_t out_size)
{
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p = data;
        size_t o = 0;

        if (out_size == 0)
                return;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = p[i];
                bool plain = c >= 0x20 && c < 0x7f && c != '\\' && c != '"';
                size_t need = plain ? 1 : 4;

                if (o + need + 4 > out_size) {
                        if (o + 4 <= out_size) {
                                memcpy(out + o, "...", 3);
                                o += 3;
                        }
                        break;
                }
                if (plain)
                        out[o++] = (char) c;
                else {
                        out[o++] = '\\';
                        out[o++] = 'x';
                        out[o++] = hex[c >> 4];
                        out[o++] = hex[c & 15];
                }
        }
        out[o < out_size ? o : out_size - 1] = '\0';
}

void strbuf_init(struct strbuf *sb)
{
        *sb = (struct strbuf) { 0 };
}

void strbuf_free(struct strbuf *sb)
{
        free(sb->data);
        *sb = (struct strbuf) { 0 };
}

void strbuf_reset(struct strbuf *sb)
{
        sb->len = 0;
        sb->oom = false;
        if (sb->data)
                sb->data[0] = '\0';
}

static bool strbuf_reserve(struct strbuf *sb, size_t extra)
{
        size_t need;
        char *p;

        if (sb->oom)
                return false;
        need = sb->len + extra + 1;
        if (need <= sb->alloc)
                return true;
        size_t n = sb->alloc ? sb->alloc : 256;
        while (n < need)
                n *= 2;
        p = realloc(sb->data, n);
        if (!p) {
                sb->oom = true;
                return false;
        }
        sb->data = p;
        sb->alloc = n;
        return true;
}

void strbuf_append(struct strbuf *sb, const char *s, size_t len)
{
        if (!strbuf_reserve(sb, len))
                return;
        memcpy(sb->data + sb->len, s, len);
        sb->len += len;
        sb->data[sb->len] = '\0';
}

void strbuf_puts(struct strbuf *sb, const char *s)
{
        strbuf_append(sb, s, strlen(s));
}

void strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0 || !strbuf_reserve(sb, (size_t) n))
                return;
        va_start(ap, fmt);
        vsnprintf(sb->data + sb->len, (size_t) n + 1, fmt, ap);
        va_end(ap);
        sb->len += (size_t) n;
}

void strbuf_json_string(struct strbuf *sb, const char *s)
{
        strbuf_append(sb, "\"", 1);
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\') {
                        char e[2] = { '\\', (char) *p };
                        strbuf_append(sb, e, 2);
                } else if (*p < 0x20 || *p == 0x7f)
                        strbuf_printf(sb, "\\u%04x", *p);
                else
                        strbuf_append(sb, (const char *) p, 1);
        }
        strbuf_append(sb, "\"", 1);
}

void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

/* "1", "0.5", "12.25": a percentage with at most two decimals, in hundredths.  -EINVAL otherwise. */
int parse_basis_points(const char *s, uint32_t *ret)
{
        uint64_t v = 0;
        unsigned dec = 0;
        bool dot = false, digit = false;

        for (const char *q = s; *q; q++) {
                if (*q == '.' && !dot) {
                        dot = true;
                        continue;
                }
                if (*q < '0' || *q > '9' || (dot && dec == 2) || v > 1000000)
                        return -EINVAL;
                v = v * 10 + (uint64_t) (*q - '0');
                dec += dot;
                digit = true;
        }
        if (!digit)
                return -EINVAL;
        for (; dec < 2; dec++)
                v *= 10;
        *ret = (uint32_t) v;
        return 0;
}
