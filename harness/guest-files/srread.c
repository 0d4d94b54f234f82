// SPDX-License-Identifier: GPL-2.0
/*
 * srread: time a sequential read of a byte range, for `make bench`.
 *
 *   srread DEV OFFSET LENGTH [PASSES]    O_DIRECT, 1 MiB requests
 *
 * Reads the range PASSES times (default 1) and prints "BYTES NANOSECONDS"
 * for all passes together on one line. O_DIRECT so every byte comes
 * from the device through the block layer (a partition's remap included)
 * and not from the page cache. Exit status 1 on any error or short read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1 << 20)

int main(int argc, char **argv)
{
	struct timespec a, b;
	long long off, len, pos, done = 0;
	int passes = 1;
	void *buf;
	int fd;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: srread DEV OFFSET LENGTH [PASSES]\n");
		return 2;
	}
	off = atoll(argv[2]);
	len = atoll(argv[3]);
	if (argc == 5)
		passes = atoi(argv[4]);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign(&buf, 4096, CHUNK)) {
		fprintf(stderr, "srread: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (; passes > 0; passes--) {
		for (pos = 0; pos < len; ) {
			size_t want = len - pos < CHUNK ? len - pos : CHUNK;
			ssize_t n = pread(fd, buf, want, off + pos);

			if (n <= 0) {
				fprintf(stderr, "srread: %s at %lld: %s\n", argv[1], off + pos,
					n ? strerror(errno) : "end of device");
				return 1;
			}
			pos += n;
		}
		done += pos;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%lld %lld\n", done,
	       (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
	return 0;
}
