// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_mem: known user memory for the scratch memory tests (copyin and friends).
 *
 *   oxt_mem COUNT   write a struct oxt_rec to /dev/null COUNT times, the i-th with
 *                   a = i; then the string "oxt-path" once; then a struct oxt_fl
 *                   of known floats once; then 4 bytes from the unmapped address
 *                   0x10 once (/dev/null takes them unread).
 *
 * /dev/null never reads what it is given, so the bad pointer only reaches the
 * tracer's copyin(), which must fault without harm.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct oxt_rec {
	int a;
	short b;
	char name[6];
	long c;
};

/* 32 bytes on x86-64: float at 0, double at 8, long double at 16. */
struct oxt_fl {
	float f;
	double d;
	long double ld;
};

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 1;
	int fd = open("/dev/null", O_WRONLY);
	struct oxt_rec r = { .b = -2, .name = "oxt", .c = 0x1122334455667788L };
	static const char path[] = "oxt-path";
	struct oxt_fl fl = { .f = 0.1f, .d = -2.25, .ld = 3.0L };
	/* volatile: the compiler must not see (and refuse) the unmapped address. */
	const void *volatile bad = (const void *)0x10;

	if (fd < 0) {
		perror("oxt_mem");
		return 1;
	}
	for (long i = 0; i < count; i++) {
		r.a = i;
		if (write(fd, &r, sizeof(r)) != sizeof(r))
			return 1;
	}
	if (write(fd, path, sizeof(path)) != sizeof(path))
		return 1;
	if (write(fd, &fl, sizeof(fl)) != sizeof(fl))
		return 1;
	if (write(fd, bad, 4) != 4)
		return 1;
	return 0;
}
