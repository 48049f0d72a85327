/* SPDX-License-Identifier: GPL-2.0-or-later */
/* An in-memory read-only tree below MEMFS_ROOT for the tree fuzz targets (fuzz-memfs.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define MEMFS_ROOT "/memfs"

/* Empty the tree (only the root directory left) and close every descriptor it handed out. */
void memfs_reset(void);
/* Add a file (is_file: content data[len]) or a directory at rel[rlen], like mkdir -p + open(O_CREAT|O_TRUNC). */
void memfs_add(const char *rel, size_t rlen, const char *data, size_t len, bool is_file);
