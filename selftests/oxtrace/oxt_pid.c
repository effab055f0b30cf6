// SPDX-License-Identifier: GPL-2.0
/*
 * The pid provider's workload (pid_test.sh): functions called a known number of times
 * with known arguments and return values, a shared library linked in (liboxtpid.so) and
 * one loaded through the dynamic loader (liboxtdl.so, from the lib/ beside it).
 *
 *   oxt_pid run N            call each function N times (i = 1..N), then exit
 *   oxt_pid wait FILE N      load liboxtdl.so, print "ready", wait until FILE exists, then
 *                            the same calls
 *   oxt_pid malloc N         N times malloc(12345), free() it and call getppid(), then exit
 *                            (the one-liners on libc: oneliners_test.sh)
 *
 * Per i: oxt_work(i, 10) returns i + 10; oxt_two_rets(i odd ? i : -i) returns 1 through
 * the ret at offset 0x9, -1 through the ret at 0xf; oxt_tail(i) tail-calls oxt_work(i + 1,
 * 10) with the jmp at offset 0x8; oxt_lib_square(i) returns i * i; oxt_dl_twice(i) 2 * i.
 * oxt_two_rets and oxt_tail are written in assembly so their offsets are known.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int oxt_lib_square(int x);
int oxt_two_rets(int x);
int oxt_tail(int x);

__attribute__((noipa)) int oxt_work(int a, int b)
{
	return a + b;
}

asm(".text\n"
    ".globl oxt_two_rets\n"
    ".type oxt_two_rets, @function\n"
    "oxt_two_rets:\n"
    "	test %edi, %edi\n"		/* 0x0: 2 bytes */
    "	js 1f\n"			/* 0x2: 2 bytes */
    "	mov $1, %eax\n"			/* 0x4: 5 bytes */
    "	ret\n"				/* 0x9 */
    "1:	mov $-1, %eax\n"		/* 0xa: 5 bytes */
    "	ret\n"				/* 0xf */
    ".size oxt_two_rets, .-oxt_two_rets\n"
    ".globl oxt_tail\n"
    ".type oxt_tail, @function\n"
    "oxt_tail:\n"
    "	add $1, %edi\n"			/* 0x0: 3 bytes */
    "	mov $10, %esi\n"		/* 0x3: 5 bytes */
    "	jmp oxt_work\n"			/* 0x8: the tail call */
    ".size oxt_tail, .-oxt_tail\n");

int main(int argc, char **argv)
{
	long (*twice)(long) = NULL;
	void *dl = NULL;
	long s = 0;
	int n, i;

	if (argc == 3 && !strcmp(argv[1], "malloc")) {
		n = atoi(argv[2]);
		for (i = 0; i < n; i++) {
			/* volatile: a malloc whose block is never used may be left out */
			void *volatile p = malloc(12345);

			free(p);
			s += getppid();
		}
		printf("done %d\n", s != 0);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "run")) {
		n = atoi(argv[2]);
	} else if (argc == 4 && !strcmp(argv[1], "wait")) {
		n = atoi(argv[3]);
		dl = dlopen("liboxtdl.so", RTLD_NOW);
		if (!dl) {
			fprintf(stderr, "oxt_pid: %s\n", dlerror());
			return 1;
		}
		printf("ready\n");
		fflush(stdout);
		while (access(argv[2], F_OK))
			usleep(10000);
	} else {
		fprintf(stderr, "usage: oxt_pid run N | oxt_pid wait FILE N | oxt_pid malloc N\n");
		return 2;
	}
	for (i = 1; i <= n; i++) {
		s += oxt_work(i, 10);
		s += oxt_two_rets(i % 2 ? i : -i);
		s += oxt_tail(i);
		s += oxt_lib_square(i);
	}
	if (!dl)
		dl = dlopen("liboxtdl.so", RTLD_NOW);
	if (dl)
		twice = (long (*)(long))dlsym(dl, "oxt_dl_twice");
	if (!twice) {
		fprintf(stderr, "oxt_pid: no oxt_dl_twice: %s\n", dlerror());
		return 1;
	}
	for (i = 1; i <= n; i++)
		s += twice(i);
	printf("sum=%ld\n", s);
	return 0;
}
