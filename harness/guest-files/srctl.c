// SPDX-License-Identifier: GPL-2.0
/*
 * srctl: the block and CD-ROM ioctls the tests need and busybox lacks.
 *
 *   srctl rereadpt DEV                   BLKRRPART
 *   srctl addpart DEV N START SIZE       BLKPG_ADD_PARTITION (512-byte sectors)
 *   srctl delpart DEV N                  BLKPG_DEL_PARTITION
 *   srctl eject DEV                      CDROMEJECT
 *   srctl nocap CMD ARGS...              the same, without CAP_SYS_RAWIO
 *   srctl after FILE CMD ARGS...         open DEV and print "open", then run
 *                                        CMD on that open once FILE exists
 *                                        (an fd held across a media change)
 *
 * DEV is opened O_RDONLY|O_NONBLOCK, as udev and eject(1) do. Prints
 * "ok" or the errno name on one line; exit status 0 or the errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/blkpg.h>
#include <linux/capability.h>
#include <linux/cdrom.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case EBUSY: return "EBUSY";
	case EINVAL: return "EINVAL";
	case ENOTTY: return "ENOTTY";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENXIO: return "ENXIO";
	case ENOMEDIUM: return "ENOMEDIUM";
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	default: return strerror(e);
	}
}

static int drop_rawio(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (prctl(PR_CAPBSET_DROP, CAP_SYS_RAWIO, 0, 0, 0))
		return -1;
	if (syscall(SYS_capget, &h, d))
		return -1;
	d[0].effective &= ~(1u << CAP_SYS_RAWIO);
	d[0].permitted &= ~(1u << CAP_SYS_RAWIO);
	d[0].inheritable &= ~(1u << CAP_SYS_RAWIO);
	return syscall(SYS_capset, &h, d);
}

static int blkpg(int fd, int op, int n, long long start, long long size)
{
	struct blkpg_partition p = {
		.start = start * 512, .length = size * 512, .pno = n,
	};
	struct blkpg_ioctl_arg a = {
		.op = op, .datalen = sizeof(p), .data = &p,
	};

	return ioctl(fd, BLKPG, &a);
}

static int usage(void)
{
	fprintf(stderr, "usage: srctl [nocap] [after FILE] rereadpt|addpart|delpart|eject DEV [N [START SIZE]]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *after = NULL;
	int fd, r, i;

	if (argc > 1 && !strcmp(argv[1], "nocap")) {
		if (drop_rawio()) {
			perror("srctl: dropping CAP_SYS_RAWIO");
			return 1;
		}
		argv++;
		argc--;
	}
	if (argc > 2 && !strcmp(argv[1], "after")) {
		after = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc < 3)
		return usage();
	fd = open(argv[2], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		printf("%s\n", errname(errno));
		return errno;
	}
	if (after) {
		printf("open\n");
		fflush(stdout);
		for (i = 0; access(after, F_OK); i++) {
			if (i == 6000) {
				printf("srctl: %s did not appear within 60 s\n", after);
				return 1;
			}
			usleep(10000);
		}
	}
	if (!strcmp(argv[1], "rereadpt"))
		r = ioctl(fd, BLKRRPART, 0);
	else if (!strcmp(argv[1], "addpart") && argc == 6)
		r = blkpg(fd, BLKPG_ADD_PARTITION, atoi(argv[3]), atoll(argv[4]), atoll(argv[5]));
	else if (!strcmp(argv[1], "delpart") && argc == 4)
		r = blkpg(fd, BLKPG_DEL_PARTITION, atoi(argv[3]), 0, 0);
	else if (!strcmp(argv[1], "eject"))
		r = ioctl(fd, CDROMEJECT, 0);
	else
		return usage();
	if (r) {
		printf("%s\n", errname(errno));
		return errno;
	}
	printf("ok\n");
	return 0;
}
