/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The control commands and which are read-only: shared by the server
 * (control.c) and vmmpowerctl, which links this file and util.c only (no
 * libvirt, libxml2, json-c or libbpf; see meson.build).
 */
#include <errno.h>
#include <string.h>

#include "control.h"

static const struct {
        const char *name;
        bool readonly;
} commands[] = {
        { "status", true }, { "vms", true },    { "cpus", true },    { "top", true },
        { "metrics", true }, { "version", true }, { "plan", true },    { "notify", false },
        { "reload", false },
};

int control_command_readonly(const char *cmd)
{
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(cmd, commands[i].name) == 0)
                        return commands[i].readonly;
        return -ENOENT;
}
