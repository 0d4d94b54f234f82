/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srpart: just enough of block/partitions/check.h and the kernel around it
 * to compile one partition parser (a copy of the kernel's own file, placed
 * next to this header) as a host program under ASan and UBSan.
 *
 * read_part_sector() is modelled on the kernel's: it reads the whole 4 KiB
 * page-cache page that holds 512-byte sector n into its own heap block and
 * returns a pointer to the sector inside it, so a parser that reads past the
 * end of the page reads past the end of the heap block, which ASan reports.
 */
#ifndef SRPART_CHECK_H
#define SRPART_CHECK_H
#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uint16_t __be16;
typedef uint32_t __be32;
typedef uint64_t __be64;
typedef uint16_t __le16;
typedef uint32_t __le32;
typedef uint64_t __le64;
typedef u64 sector_t;

#define be16_to_cpu(x) be16toh(x)
#define be32_to_cpu(x) be32toh(x)
#define be64_to_cpu(x) be64toh(x)
#define le16_to_cpu(x) le16toh(x)
#define le32_to_cpu(x) le32toh(x)
#define le64_to_cpu(x) le64toh(x)

#define PAGE_SIZE 4096
#define PAGE_SECTORS (PAGE_SIZE / 512)
#define SECTOR_SIZE 512
#define BDEVNAME_SIZE 32

#define min_t(type, x, y) ((type)(x) < (type)(y) ? (type)(x) : (type)(y))
#define max_t(type, x, y) ((type)(x) > (type)(y) ? (type)(x) : (type)(y))

size_t srpart_strlcat(char *dst, const char *src, size_t size);
#define strlcat srpart_strlcat

struct gendisk {
	sector_t capacity;	/* 512-byte sectors */
};

static inline sector_t get_capacity(struct gendisk *disk)
{
	return disk->capacity;
}

struct parsed_partitions {
	struct gendisk *disk;
	char name[BDEVNAME_SIZE];
	struct {
		sector_t from;
		sector_t size;
		int flags;
	} *parts;
	int next;
	int limit;
	bool access_beyond_eod;
	char *pp_buf;
};

typedef struct {
	void *v;
} Sector;

void *read_part_sector(struct parsed_partitions *state, sector_t n, Sector *p);

static inline void put_dev_sector(Sector p)
{
	free(p.v);
}

static inline void
put_partition(struct parsed_partitions *p, int n, sector_t from, sector_t size)
{
	if (n < p->limit) {
		char tmp[1 + BDEVNAME_SIZE + 10 + 1];

		p->parts[n].from = from;
		p->parts[n].size = size;
		snprintf(tmp, sizeof(tmp), " %s%d", p->name, n);
		strlcat(p->pp_buf, tmp, PAGE_SIZE);
	}
}

int PARSER(struct parsed_partitions *state);
#endif
