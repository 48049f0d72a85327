/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static enum log_level max_level = LOG_LEVEL_INFO;

void log_set_max_level(enum log_level level)
{
        max_level = level;
}

enum log_level log_get_max_level(void)
{
        return max_level;
}

int log_parse_level(const char *s, enum log_level *ret)
{
        static const struct {
                const char *name;
                enum log_level level;
        } table[] = {
                { "err", LOG_LEVEL_ERR },         { "error", LOG_LEVEL_ERR },
                { "warning", LOG_LEVEL_WARNING }, { "notice", LOG_LEVEL_NOTICE },
                { "info", LOG_LEVEL_INFO },       { "debug", LOG_LEVEL_DEBUG },
        };

        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                if (strcmp(s, table[i].name) == 0) {
                        *ret = table[i].level;
                        return 0;
                }
        return -EINVAL;
}

int log_internal(enum log_level level, int err, const char *fmt, ...)
{
        static const char *const names[] = {
                [LOG_LEVEL_ERR] = "error",   [LOG_LEVEL_WARNING] = "warning",
                [LOG_LEVEL_NOTICE] = "notice", [LOG_LEVEL_INFO] = "info",
                [LOG_LEVEL_DEBUG] = "debug",
        };
        int saved_errno = errno;
        char buf[2048];
        va_list ap;

        if (err < 0)
                err = -err;
        if (level > max_level)
                return -err;

        /* %m in fmt means strerror(err) */
        errno = err;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        if (getenv("JOURNAL_STREAM"))
                fprintf(stderr, "<%d>%s\n", (int) level, buf);
        else
                fprintf(stderr, "vmmpower %s: %s\n", names[level], buf);
        errno = saved_errno;
        return -err;
}
