/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srpart-dkms: build the series' sr against a kernel that lacks the series'
 * block-layer patches (a distribution's stock kernel).
 *
 * GD_SKIP_PART_SCAN (patch 11) is missing: sr falls back to
 * GD_SUPPRESS_PART_SCAN, which the stock blk_add_partitions() tests as
 * well, so an unreadable medium is still not scanned; but the stock
 * disk_scan_partitions() also tests it before it opens the disk, so
 * BLKRRPART on a descriptor opened while an unreadable medium was in fails
 * with -EINVAL after a change to a readable one (reopen instead).
 *
 * GD_512_TABLES (patches 9-10) is missing: the stock msdos.c and efi.c read
 * every table in 2048-byte blocks, so a medium whose tables sr finds to be
 * in 512-byte sectors is not scanned at all (one kernel line says why).
 */
#include <linux/blkdev.h>

#ifndef GD_SKIP_PART_SCAN
#define SRPART_STOCK_BLOCK
#define GD_SKIP_PART_SCAN	GD_SUPPRESS_PART_SCAN
#endif
