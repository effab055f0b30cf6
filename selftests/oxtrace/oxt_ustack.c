// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_ustack: known user stacks for the ustack() tests, built with frame
 * pointers (the walk follows them).  Single-threaded; the read system call is
 * made here, not in libc, so the user PC at the call is in a known function
 * whatever libc's wrappers do.
 *
 *   oxt_ustack read N  main -> oxt_zero_mid -> oxt_zero_read: read(/dev/zero)
 *                      N times, then wait until killed
 *   oxt_ustack spin    main -> oxt_spin_mid -> oxt_spin_leaf in user mode and
 *                      main -> oxt_zero_mid -> oxt_zero_read in the kernel,
 *                      in turn, until killed
 *   oxt_ustack deep N  main -> oxt_deep N times (a recursion N frames deep) ->
 *                      oxt_zero_mid -> oxt_zero_read: one read, then wait until
 *                      killed
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A leaf gets no frame of its own at -O2 even so: asking for its address makes one. */
#define OXT_FRAME() __asm__ volatile("" : : "r"(__builtin_frame_address(0)))

static char buf[65536];
static volatile unsigned long sink;
static int fd;

__attribute__((noinline)) long oxt_zero_read(unsigned long len)
{
	long ret;

	OXT_FRAME();
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_read), "D"((long)fd), "S"(buf), "d"(len)
			 : "rcx", "r11", "memory");
	return ret;
}

__attribute__((noinline)) void oxt_zero_mid(unsigned long len)
{
	if (oxt_zero_read(len) != (long)len)
		exit(2);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void oxt_spin_leaf(unsigned long i)
{
	OXT_FRAME();
	for (unsigned long j = 0; j < 100000; j++)
		sink += (i + j) * 2654435761UL;
}

__attribute__((noinline)) void oxt_spin_mid(unsigned long i)
{
	oxt_spin_leaf(i);
	__asm__ volatile("" ::: "memory");
}

/* N frames of its own: the barrier after the call keeps it from being a tail call. */
__attribute__((noinline)) void oxt_deep(long n)
{
	if (n > 1)
		oxt_deep(n - 1);
	else
		oxt_zero_mid(1);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 1;
	fd = open("/dev/zero", O_RDONLY);
	if (fd < 0)
		return 1;
	if (!strcmp(argv[1], "read") && argc == 3) {
		for (long n = atol(argv[2]); n > 0; n--)
			oxt_zero_mid(1);
		for (;;)
			pause();
	}
	if (!strcmp(argv[1], "deep") && argc == 3) {
		oxt_deep(atol(argv[2]));
		for (;;)
			pause();
	}
	if (!strcmp(argv[1], "spin")) {
		for (unsigned long i = 0;; i++) {
			oxt_spin_mid(i);
			oxt_zero_mid(sizeof(buf));
		}
	}
	return 1;
}
