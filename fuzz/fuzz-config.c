/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the configuration parser (config.h).  The input is
 * one configuration file.  Beyond "does not crash", it checks two
 * properties of the parser:
 *  - an error names a line that exists in the input (1..lines+1) or line 0
 *    only for the whole-config rule, has a message, and leaves the
 *    configuration untouched;
 *  - an accepted configuration, dumped with config_dump() and parsed again
 *    from the defaults, gives the same dump (the dump is a faithful,
 *    re-parseable description of the effective configuration).
 * Seeds: tests/data/config/{good,bad}/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dump(const struct vp_config *c, size_t *len)
{
        char *s = NULL;
        FILE *f = open_memstream(&s, len);

        if (!f)
                abort();
        config_dump(c, f);
        if (fclose(f) != 0)
                abort();
        return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct vp_config c, before, again;
        struct config_error err;
        size_t lines = 1, n1, n2;
        char *d1, *d2;
        int r;

        if (size > 64 * 1024)
                return 0;
        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';

        config_defaults(&c);
        before = c;
        memset(&err, 0, sizeof(err));
        r = config_parse_buffer("fuzz", (const char *) data, size, &c, &err);
        if (r < 0) {
                if (r != -EINVAL && r != -ENOMEM)
                        abort();
                if (err.line > lines || err.message[0] == '\0')
                        abort();
                if (memcmp(&c, &before, sizeof(c)) != 0)
                        abort();
                return 0;
        }

        d1 = dump(&c, &n1);
        config_defaults(&again);
        if (config_parse_buffer("dump", d1, n1, &again, &err) < 0)
                abort();
        d2 = dump(&again, &n2);
        if (n1 != n2 || memcmp(d1, d2, n1) != 0)
                abort();
        free(d1);
        free(d2);
        return 0;
}
