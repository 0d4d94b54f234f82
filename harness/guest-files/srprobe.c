// SPDX-License-Identifier: GPL-2.0
/*
 * srprobe: open each named block device the way udev's probes do
 * (cdrom_id, blkid: O_RDONLY|O_NONBLOCK|O_CLOEXEC), then close it.
 * Busybox cannot open with O_NONBLOCK, and a plain open of a CD drive
 * would close an open tray.  Exit status: number of failed opens.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int i, failed = 0;

	for (i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);

		if (fd < 0) {
			fprintf(stderr, "srprobe: %s: %s\n", argv[i], strerror(errno));
			failed++;
			continue;
		}
		close(fd);
	}
	return failed;
}
