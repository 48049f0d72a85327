/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the energy model file parser (energy_model.h,
 * ModelFile= in vmmpower.conf): the input is one model file.  Checks: an
 * error is -EINVAL with a message and a line inside the input; an accepted
 * model passes energy_model_validate(), and energy_model_write() of it parses
 * back to a model that writes the same text (the writer is the format's
 * reference).  Seeds: fuzz/corpus/energy_model/ (tests/data/models).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "energy_model.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *write_model(const struct energy_model *m, size_t *len)
{
        char *s = NULL;
        FILE *f = open_memstream(&s, len);

        if (!f)
                abort();
        energy_model_write(m, f);
        if (fclose(f) != 0)
                abort();
        return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct energy_model m, again;
        struct em_error err;
        size_t lines = 1, n1, n2;
        char *text, *w1, *w2;
        int r;

        if (size > 64 * 1024 || memchr(data, 0, size))
                return 0; /* a file with a NUL is read up to it: the same as this prefix */
        log_set_max_level((enum log_level) 0);
        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';
        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;

        memset(&err, 0, sizeof(err));
        r = energy_model_parse_string(text, "fuzz", &m, &err);
        free(text);
        if (r < 0) {
                if (r != -EINVAL && r != -ENOMEM)
                        abort();
                if (r == -EINVAL && (err.line > lines || err.message[0] == 0))
                        abort();
                return 0;
        }
        if (energy_model_validate(&m, &err) < 0)
                abort();
        w1 = write_model(&m, &n1);
        if (energy_model_parse_string(w1, "written", &again, &err) < 0)
                abort();
        w2 = write_model(&again, &n2);
        if (n1 != n2 || memcmp(w1, w2, n1) != 0)
                abort();
        free(w1);
        free(w2);
        return 0;
}
