/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * powerhintd's own strict parser of host -> guest lines (docs/protocol.md).
 * Self-contained (no host library) so that it builds statically for any
 * guest.  Lines are at most HOSTMSG_LINE_MAX bytes including '\n'; longer
 * lines and lines with a byte outside 0x20..0x7e are discarded up to the next
 * '\n'.
 */

#define HOSTMSG_LINE_MAX 128
#define HOSTMSG_LEVEL_MAX 1024
#define HOSTMSG_VCPUS_MAX 4096

enum hostmsg_type {
        HOSTMSG_WELCOME, /* WELCOME <version> key=value... */
        HOSTMSG_LIMIT,   /* LIMIT <vcpu> <min> <max> */
        HOSTMSG_GRANT,   /* GRANT <vcpu> <level> */
        HOSTMSG_ERR,     /* ERR <code> [text] */
};

struct hostmsg {
        enum hostmsg_type type;
        uint32_t vcpu;
        uint32_t level;              /* GRANT */
        uint32_t min_level, max_level; /* LIMIT; WELCOME: max_level */
        /* WELCOME */
        uint32_t version;
        uint32_t vcpus;
        uint32_t boost_cap_ms;
        uint32_t rate;
        uint32_t burst;
        char trust[16];
        /* ERR */
        char code[17];
        char text[HOSTMSG_LINE_MAX];
};

/* Parse one line without its '\n'.  Returns 0 or -EINVAL (-ERANGE for numbers out of range). */
int hostmsg_parse(const char *line, size_t len, struct hostmsg *ret);

enum hostmsg_event {
        HOSTMSG_EV_LINE,
        HOSTMSG_EV_DISCARD, /* oversized or bad byte: the line is being discarded */
};
typedef void (*hostmsg_cb)(enum hostmsg_event ev, const char *line, size_t len, void *userdata);

struct hostmsg_framer {
        char buf[HOSTMSG_LINE_MAX];
        size_t len;
        bool discarding;
        uint64_t discarded;
};

void hostmsg_framer_init(struct hostmsg_framer *f);
void hostmsg_framer_push(struct hostmsg_framer *f, const void *data, size_t n, hostmsg_cb cb, void *userdata);
void hostmsg_framer_reset(struct hostmsg_framer *f);
