// SPDX-License-Identifier: GPL-2.0
/*
 * srread: time sequential reads of a byte range, for `make bench`.
 *
 *   srread DEV OFFSET LENGTH [PASSES]
 *       read the range PASSES times (default 1); prints "BYTES NS"
 *   srread DEV_A OFFSET_A DEV_B OFFSET_B LENGTH PASSES
 *       the same range through two devices, 1 MiB from A then 1 MiB from
 *       B (B first on odd chunks), so both see the same moment of a noisy
 *       host; prints "BYTES NS_A NS_B MEDIAN_A MEDIAN_B": bytes per device,
 *       total nanoseconds per device, and the median nanoseconds of one
 *       1 MiB request per device (a single host stall of tens of ms moves
 *       the totals by 20%, the medians not at all)
 *
 * O_DIRECT in 1 MiB requests, so every byte comes from the device through
 * the block layer (a partition's remap included), not the page cache.
 * Exit status 1 on any error or short read.
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

static void *buf;

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

static long long median(long long *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_ll);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int open_dev(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_DIRECT);

	if (fd < 0) {
		fprintf(stderr, "srread: %s: %s\n", dev, strerror(errno));
		exit(1);
	}
	return fd;
}

/* One chunk at pos from fd; returns the nanoseconds it took. */
static long long chunk(int fd, const char *dev, long long pos, size_t want)
{
	long long t = now_ns();
	ssize_t n = pread(fd, buf, want, pos);

	if (n != (ssize_t)want) {
		fprintf(stderr, "srread: %s at %lld: %s\n", dev, pos,
			n < 0 ? strerror(errno) : "short read");
		exit(1);
	}
	return now_ns() - t;
}

int main(int argc, char **argv)
{
	const char *dev[2];
	long long off[2], ns[2] = { 0, 0 }, len, pos, done = 0;
	long long *t[2];
	int fd[2], two = argc == 7, passes = 1, i, n = 0;

	if (argc != 4 && argc != 5 && argc != 7) {
		fprintf(stderr, "usage: srread DEV OFFSET LENGTH [PASSES]\n"
			"       srread DEV_A OFFSET_A DEV_B OFFSET_B LENGTH PASSES\n");
		return 2;
	}
	if (posix_memalign(&buf, 4096, CHUNK))
		return 1;
	for (i = 0; i <= two; i++) {
		dev[i] = argv[1 + 2 * i];
		off[i] = atoll(argv[2 + 2 * i]);
		fd[i] = open_dev(dev[i]);
	}
	len = atoll(argv[two ? 5 : 3]);
	if (argc >= 5)
		passes = atoi(argv[two ? 6 : 4]);
	t[0] = calloc((size_t)passes * (len / CHUNK + 1), sizeof(long long));
	t[1] = calloc((size_t)passes * (len / CHUNK + 1), sizeof(long long));
	if (!t[0] || !t[1])
		return 1;
	for (; passes > 0; passes--) {
		for (pos = 0; pos < len; pos += CHUNK) {
			size_t want = len - pos < CHUNK ? len - pos : CHUNK;
			int first = two && (pos / CHUNK) % 2;

			t[first][n] = chunk(fd[first], dev[first], off[first] + pos, want);
			ns[first] += t[first][n];
			if (two) {
				t[!first][n] = chunk(fd[!first], dev[!first], off[!first] + pos,
						     want);
				ns[!first] += t[!first][n];
			}
			n++;
		}
		done += len;
	}
	if (two)
		printf("%lld %lld %lld %lld %lld\n", done, ns[0], ns[1], median(t[0], n),
		       median(t[1], n));
	else
		printf("%lld %lld\n", done, ns[0]);
	return 0;
}
