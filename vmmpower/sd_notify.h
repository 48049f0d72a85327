/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET (a path,
 * or an abstract socket when it starts with '@').  Returns 1 if sent, 0 when
 * not running under a notify-aware manager, -errno on failure.
 */
int notify_send(const char *state);
/* Watchdog interval from $WATCHDOG_USEC (only if $WATCHDOG_PID is unset or
 * our pid).  Returns 0 when no watchdog is configured. */
uint64_t notify_watchdog_usec(void);
