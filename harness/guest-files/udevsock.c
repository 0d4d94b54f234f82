// SPDX-License-Identifier: GPL-2.0
/*
 * udevsock: run PROGRAM (systemd-udevd) with udev's control socket made
 * here and handed over as systemd's socket activation hands it over
 * (LISTEN_FDS=1, LISTEN_PID, fd 3), made as systemd-udevd-control.socket
 * makes it: SOCK_SEQPACKET on /run/udev/control, PassCredentials=yes, the
 * default backlog.
 *
 * Started without systemd, udevd 252 binds the socket itself and sets
 * SO_PASSCRED only on each accepted connection, after accept4(). A message
 * a client sends in between carries no credentials: udevd reads it as uid
 * 65534, logs "Invalid sender uid 65534, ignoring message" and closes the
 * connection, and `udevadm settle` fails with "Failed to wait for daemon to
 * reply: Broken pipe" (once in a few hundred boots under TCG). With the
 * option on the listening socket every accepted socket has it from the
 * start. Its backlog of 0 also made a second client's connect() fail with
 * EAGAIN, which `udevadm settle` takes as "no udevd" and exits 0 without
 * waiting.
 *
 * usage: udevsock PROGRAM [ARG...]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CONTROL "/run/udev/control"
#define LISTEN_FD 3

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = CONTROL };
	int one = 1, fd;
	char pid[16];

	if (argc < 2) {
		fprintf(stderr, "usage: udevsock PROGRAM [ARG...]\n");
		return 2;
	}
	if (mkdir("/run/udev", 0755) < 0 && errno != EEXIST) {
		perror("udevsock: mkdir /run/udev");
		return 1;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0 ||
	    (unlink(CONTROL) < 0 && errno != ENOENT) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		perror("udevsock: " CONTROL);
		return 1;
	}
	if (fd != LISTEN_FD) {
		if (dup2(fd, LISTEN_FD) < 0) {
			perror("udevsock: dup2");
			return 1;
		}
		close(fd);
	}
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (setenv("LISTEN_FDS", "1", 1) < 0 || setenv("LISTEN_PID", pid, 1) < 0) {
		perror("udevsock: setenv");
		return 1;
	}
	execv(argv[1], argv + 1);
	fprintf(stderr, "udevsock: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
