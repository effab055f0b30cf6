// SPDX-License-Identifier: GPL-2.0
/*
 * The USDT workload (usdt_test.sh): <sys/sdt.h> probes of provider oxt, each with a
 * semaphore.
 *
 *   oxt_usdt N [FILE]   (with FILE: print "ready", wait until FILE exists) then for
 *                       i = 1..N: oxt:fire(i, 3 * i) only if enabled (its semaphore),
 *                       oxt:always(i), oxt:neg(-i, (char)i); print "guarded=G", G the
 *                       number of times oxt:fire's guard found it enabled.
 */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

unsigned short oxt_fire_semaphore __attribute__((unused, section(".probes")));
unsigned short oxt_always_semaphore __attribute__((unused, section(".probes")));
unsigned short oxt_neg_semaphore __attribute__((unused, section(".probes")));
#define OXT_FIRE_ENABLED() __builtin_expect(oxt_fire_semaphore, 0)

int main(int argc, char **argv)
{
	int n, i, guarded = 0;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: oxt_usdt N [FILE]\n");
		return 2;
	}
	n = atoi(argv[1]);
	if (argc == 3) {
		printf("ready\n");
		fflush(stdout);
		while (access(argv[2], F_OK))
			usleep(10000);
	}
	for (i = 1; i <= n; i++) {
		if (OXT_FIRE_ENABLED()) {
			guarded++;
			DTRACE_PROBE2(oxt, fire, i, (long)i * 3);
		}
		DTRACE_PROBE1(oxt, always, i);
		DTRACE_PROBE2(oxt, neg, -i, (signed char)i);
	}
	printf("guarded=%d\n", guarded);
	return 0;
}
