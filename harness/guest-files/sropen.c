// SPDX-License-Identifier: GPL-2.0
/*
 * sropen: open a block device the moment it can be opened at all, as a
 * user space that watches /dev would, and say how the open ended.
 *
 *   sropen DEV r|rw
 *
 * Retries (busy, no sleep, at most 30 s) while the open fails with ENOENT
 * (no node yet) or ENXIO (node, no block device yet), so it lands inside
 * device_add_disk() whenever the drive being added lets it.  A blocking
 * open (no O_NONBLOCK): what cdrom_open() does for data.  Prints "ok" or
 * the errno name (EROFS, ENOMEDIUM, ...) and closes the device.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec t0, t;
	int fd, flags;

	if (argc != 3 || (strcmp(argv[2], "r") && strcmp(argv[2], "rw"))) {
		fprintf(stderr, "usage: sropen DEV r|rw\n");
		return 2;
	}
	flags = (strcmp(argv[2], "rw") ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		fd = open(argv[1], flags);
		if (fd >= 0 || (errno != ENOENT && errno != ENXIO))
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 30) {
			printf("timeout\n");
			return 1;
		}
	}
	if (fd < 0) {
		switch (errno) {
		case EROFS: printf("EROFS\n"); break;
		case ENOMEDIUM: printf("ENOMEDIUM\n"); break;
		case EBUSY: printf("EBUSY\n"); break;
		default: printf("%s\n", strerror(errno));
		}
		return 0;
	}
	printf("ok\n");
	close(fd);
	return 0;
}
