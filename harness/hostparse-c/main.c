// SPDX-License-Identifier: GPL-2.0
/*
 * srpart: run one kernel partition parser (built with -DPARSER=<fn>) on an
 * image file, as check_partition() would on a disk of that size.
 *
 *   hostparse IMAGE [LIMIT]
 *
 * prints "result R" (the parser's return value), "part SLOT START SIZE" for
 * every slot the parser filled (512-byte sectors, as the kernel counts) and
 * "line TEXT" (what the kernel would print after the disk name).
 */
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include "check.h"

static int image_fd;
static sector_t image_sectors;

size_t srpart_strlcat(char *dst, const char *src, size_t size)
{
	size_t d = strnlen(dst, size), s = strlen(src);

	if (d < size) {
		size_t n = s < size - d - 1 ? s : size - d - 1;

		memcpy(dst + d, src, n);
		dst[d + n] = '\0';
	}
	return d + s;
}

void *read_part_sector(struct parsed_partitions *state, sector_t n, Sector *p)
{
	unsigned char *page;
	off_t first = (off_t)(n / PAGE_SECTORS) * PAGE_SIZE;

	p->v = NULL;
	if (n >= image_sectors) {
		state->access_beyond_eod = true;
		return NULL;
	}
	page = calloc(1, PAGE_SIZE);
	if (!page)
		return NULL;
	if (pread(image_fd, page, PAGE_SIZE, first) < 0) {
		free(page);
		return NULL;
	}
	p->v = page;
	return page + (n % PAGE_SECTORS) * SECTOR_SIZE;
}

int main(int argc, char **argv)
{
	static struct gendisk disk;
	struct parsed_partitions state = { .name = "sr0", .disk = &disk };
	struct stat st;
	int i, r;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s IMAGE [LIMIT]\n", argv[0]);
		return 2;
	}
	image_fd = open(argv[1], O_RDONLY);
	if (image_fd < 0 || fstat(image_fd, &st) < 0) {
		perror(argv[1]);
		return 2;
	}
	image_sectors = st.st_size / 512;
	disk.capacity = image_sectors;
	state.limit = argc == 3 ? atoi(argv[2]) : 256;	/* DISK_MAX_PARTS */
	state.parts = calloc(state.limit, sizeof(state.parts[0]));
	state.pp_buf = calloc(1, PAGE_SIZE);
	if (!state.parts || !state.pp_buf)
		return 2;
	r = PARSER(&state);
	printf("result %d\n", r);
	for (i = 1; i < state.limit; i++)
		if (state.parts[i].size)
			printf("part %d %llu %llu\n", i,
			       (unsigned long long)state.parts[i].from,
			       (unsigned long long)state.parts[i].size);
	state.pp_buf[strcspn(state.pp_buf, "\n")] = '\0';
	printf("line %s\n", state.pp_buf);
	free(state.parts);
	free(state.pp_buf);
	return 0;
}
