/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the control socket's request parser (control.h):
 * the input is one request line as a client would send it (any local user
 * can connect), parsed with control_parse_request(), then classified with
 * control_command_readonly().  Checks what a
 * successful parse promises: 1..CONTROL_MAX_ARGS non-empty printable words
 * without spaces, pointing into the line, which joined with single spaces
 * give the request with its "--json" words taken out (and req.json set when
 * there was one).  Seeds: fuzz/corpus/control/.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct control_request req;
        char line[CONTROL_LINE_MAX + 1], orig[CONTROL_LINE_MAX + 1], joined[2 * CONTROL_LINE_MAX + 16];
        size_t len, jl = 0;
        int r, ro;

        if (size > CONTROL_LINE_MAX || memchr(data, 0, size))
                return 0; /* the server reads at most CONTROL_LINE_MAX bytes, and a NUL ends the line */
        memcpy(line, data, size);
        line[size] = 0;
        memcpy(orig, line, size + 1);
        len = strlen(orig);
        if (len > 0 && orig[len - 1] == '\n')
                orig[--len] = 0;

        r = control_parse_request(line, &req);
        if (r < 0) {
                if (r != -EINVAL && r != -E2BIG)
                        abort();
                return 0;
        }
        if (req.argc == 0 || req.argc > CONTROL_MAX_ARGS)
                abort();
        for (unsigned i = 0; i < req.argc; i++) {
                const char *w = req.argv[i];

                if (w < line || w >= line + size || w[0] == 0 || strcmp(w, "--json") == 0)
                        abort();
                for (const char *c = w; *c; c++)
                        if ((unsigned char) *c <= 0x20 || (unsigned char) *c >= 0x7f)
                                abort();
        }
        /* Rebuild the line: the words in order, --json where it stood is not
         * recorded, so compare with every --json removed from the original. */
        for (unsigned i = 0; i < req.argc; i++)
                jl += (size_t) snprintf(joined + jl, sizeof(joined) - jl, "%s%s", i ? " " : "", req.argv[i]);
        {
                char stripped[CONTROL_LINE_MAX + 1];
                size_t sl = 0;
                bool json = false;

                for (char *w = strtok(orig, " "); w; w = strtok(NULL, " ")) {
                        if (strcmp(w, "--json") == 0) {
                                json = true;
                                continue;
                        }
                        sl += (size_t) snprintf(stripped + sl, sizeof(stripped) - sl, "%s%s", sl ? " " : "", w);
                }
                if (json != req.json || strcmp(stripped, joined) != 0)
                        abort();
        }

        ro = control_command_readonly(req.argv[0]);
        if (ro < 0 && ro != -ENOENT)
                abort();
        return 0;
}
