/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <errno.h>
#include <stdarg.h>

/*
 * Logging.  Messages go to stderr with a syslog-style "<N>" prefix when
 * stderr is the journal (JOURNAL_STREAM set) and a plain "level: " prefix
 * otherwise.  Hot paths count, they do not log.
 *
 * log_*_errno() return -|err| so that callers can write
 *         return log_error_errno(r, "Failed to open %s: %m", path);
 * with %m expanding to strerror(err).
 */

enum log_level {
        LOG_LEVEL_ERR = 3,
        LOG_LEVEL_WARNING = 4,
        LOG_LEVEL_NOTICE = 5,
        LOG_LEVEL_INFO = 6,
        LOG_LEVEL_DEBUG = 7,
};

void log_set_max_level(enum log_level level);
enum log_level log_get_max_level(void);
int log_parse_level(const char *s, enum log_level *ret);

/* Returns -|err| (or 0 when err == 0). */
int log_internal(enum log_level level, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#define log_full_errno(level, err, ...) log_internal((level), (err), __VA_ARGS__)
#define log_debug(...)   log_internal(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_info(...)    log_internal(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_notice(...)  log_internal(LOG_LEVEL_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_error(...)   log_internal(LOG_LEVEL_ERR, 0, __VA_ARGS__)
#define log_debug_errno(err, ...)   log_internal(LOG_LEVEL_DEBUG, (err), __VA_ARGS__)
#define log_info_errno(err, ...)    log_internal(LOG_LEVEL_INFO, (err), __VA_ARGS__)
#define log_warning_errno(err, ...) log_internal(LOG_LEVEL_WARNING, (err), __VA_ARGS__)
#define log_error_errno(err, ...)   log_internal(LOG_LEVEL_ERR, (err), __VA_ARGS__)
