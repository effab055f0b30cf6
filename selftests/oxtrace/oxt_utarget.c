// SPDX-License-Identifier: GPL-2.0
/*
 * The probed process of uprobe_test.c.  It reads one command a line from
 * stdin and answers "d\n" on stdout when it has done it, so that the test
 * waits on the pipe, never on time:
 *
 *   c N   call oxt_utarget_fn(42, 43) N times
 *   f N   fork a child that calls it N times; wait for the child
 *   e     exec this program again (a new address space; same pipes); the new
 *         image answers "d\n" when it is ready
 *   q     exit 0
 *
 * oxt_utarget_fn is what the test places its uprobes on: its file offset
 * comes from this binary's symbol table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long oxt_utarget_sink;

__attribute__((noinline, used)) long oxt_utarget_fn(long a, long b)
{
	/* an empty asm: the calls are not folded away */
	__asm__ volatile("" ::: "memory");
	oxt_utarget_sink += a + b;
	return a + b;
}

static void calls(long n)
{
	for (long i = 0; i < n; i++)
		oxt_utarget_fn(42, 43);
}

static void done(void)
{
	if (write(1, "d\n", 2) != 2)
		exit(2);
}

int main(int argc, char **argv)
{
	char line[64];

	setvbuf(stdin, NULL, _IONBF, 0);
	done();
	while (fgets(line, sizeof(line), stdin)) {
		long n = atol(line + 1);
		pid_t c;

		switch (line[0]) {
		case 'c':
			calls(n);
			break;
		case 'f':
			c = fork();
			if (c < 0)
				return 3;
			if (!c) {
				calls(n);
				_exit(0);
			}
			if (waitpid(c, NULL, 0) != c)
				return 4;
			break;
		case 'e':
			execl("/proc/self/exe", argv[0], (char *)NULL);
			return 5;
		case 'q':
			return 0;
		default:
			return 6;
		}
		done();
	}
	return 0;
}
