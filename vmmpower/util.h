/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

/*
 * Small helpers shared by every module.  Conventions (docs/CODING_STYLE.md):
 * functions return 0 or a positive count on success and -errno on failure,
 * and write their outputs only on success.
 */

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* The one time type: nanoseconds, CLOCK_MONOTONIC unless the name says otherwise. */
typedef int64_t nsec_t;
#define NSEC_PER_USEC ((nsec_t) 1000)
#define NSEC_PER_MSEC ((nsec_t) 1000000)
#define NSEC_PER_SEC ((nsec_t) 1000000000)

nsec_t now_ns(void); /* CLOCK_MONOTONIC */
nsec_t now_realtime_ns(void);
nsec_t thread_cputime_ns(void); /* CLOCK_THREAD_CPUTIME_ID */
nsec_t process_cputime_ns(void); /* CLOCK_PROCESS_CPUTIME_ID */

/*
 * Strict number parsing: the whole string (after optional trailing '\n')
 * must be the number, no sign for unsigned, no leading spaces, base 10.
 * Returns 0, -EINVAL (not a number) or -ERANGE.
 */
int parse_u64(const char *s, uint64_t *ret);
int parse_i64(const char *s, int64_t *ret);
int parse_u32(const char *s, uint32_t *ret);
int parse_int(const char *s, int *ret);
/* "1", "0.5", "12.25": a percentage with at most two decimals, in hundredths (at most 10,000,000).  -EINVAL otherwise. */
int parse_basis_points(const char *s, uint32_t *ret);
int parse_bool(const char *s, bool *ret); /* yes/no true/false on/off 1/0 */
/* "250ms", "1s", "2.5s", "500us", "100ns"; a bare number is rejected. */
int parse_duration_ns(const char *s, nsec_t *ret);

/*
 * Read a small file (sysfs attribute, procfs entry) at dirfd/path (path may
 * be absolute; dirfd may be AT_FDCWD) into buf, NUL-terminated, one trailing
 * newline stripped.  Returns the length, or -errno; -EFBIG if it does not fit.
 */
ssize_t read_small_file_at(int dirfd, const char *path, char *buf, size_t size);
ssize_t read_small_file(const char *path, char *buf, size_t size);

/* pread() at offset 0 into buf, NUL-terminated.  Returns length or -errno. */
ssize_t pread_all0(int fd, char *buf, size_t size);

/* Write a whole string with one write(2).  Returns 0 or -errno. */
int write_string_at(int dirfd, const char *path, const char *s);

/* Write file atomically: tmp file in the same dir, fsync, rename. */
int write_file_atomic(const char *path, const char *data, size_t len, mode_t mode);
/* The same without fsync (atomic, not durable): for files rewritten every period. */
int write_file_atomic_nosync(const char *path, const char *data, size_t len, mode_t mode);

/*
 * Grow the array *a (of elements of size bytes, *alloc of them) to at least
 * want elements with realloc; 0 (also when it is large enough), or -ENOMEM
 * (no memory, or want * size does not fit a size_t) with *a and *alloc unchanged.
 */
int array_grow(void **a, size_t *alloc, size_t want, size_t size);

/*
 * Make an untrusted name safe to show anywhere (tables, JSON, Prometheus
 * labels, logs): valid UTF-8 is kept, except control characters (C0, DEL,
 * C1); every invalid byte and every control character becomes '?'.  In place.
 */
void sanitize_name(char *s);

/* snprintf that returns -ENAMETOOLONG on truncation, else the length. */
int path_printf(char *buf, size_t size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * Escape untrusted bytes for logging: printable ASCII except '\\' and '"' as
 * is, everything else as \xNN.  Always NUL-terminates; truncates with "...".
 */
void escape_bytes(const void *data, size_t len, char *out, size_t out_size);

/* Growable string buffer for building replies and tables. */
struct strbuf {
        char *data;
        size_t len;
        size_t alloc;
        bool oom; /* sticky: an allocation failed, content is truncated */
};
void strbuf_init(struct strbuf *sb);
void strbuf_free(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_append(struct strbuf *sb, const char *s, size_t len);
void strbuf_puts(struct strbuf *sb, const char *s);
void strbuf_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s as a JSON string literal (with quotes), escaping as needed. */
void strbuf_json_string(struct strbuf *sb, const char *s);

static inline void freep(void *p)
{
        free(*(void **) p);
}
void closep(int *fd);
#define _cleanup_free_ __attribute__((cleanup(freep)))
#define _cleanup_close_ __attribute__((cleanup(closep)))
