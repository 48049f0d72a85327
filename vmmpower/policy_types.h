/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Policy vocabulary shared by discovery (a VM's policy, vm_policy.h) and the
 * planner (placement.h).  A leaf: it includes no header of ours, so that
 * discovery does not depend on the planner (tools/check-includes.py).
 */

/* How a vCPU may be placed (the VM's <vmmpower:placement mode=...>). */
enum place_mode {
        PLACE_PACK,       /* default: packed with others to save energy */
        PLACE_SPREAD,     /* each vCPU alone on a CPU, one per core, spread over packages/LLCs */
        PLACE_DEDICATED,  /* each vCPU owns a whole core (sibling kept free) */
        PLACE_EXCLUDE,    /* never moved; its load counts on cur_cpu */
        _PLACE_MODE_MAX,
};

/* "pack", "spread", "dedicated", "exclude"; "?" out of range. */
static inline const char *place_mode_to_string(enum place_mode m)
{
        static const char *const n[_PLACE_MODE_MAX] = { "pack", "spread", "dedicated", "exclude" };
        return (unsigned) m < _PLACE_MODE_MAX ? n[m] : "?";
}
