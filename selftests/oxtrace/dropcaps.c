// SPDX-License-Identifier: GPL-2.0
/*
 * dropcaps PROG ARGS...: run PROG as root but without CAP_SYS_ADMIN and
 * CAP_PERFMON, dropped from the bounding set so that exec can't regain them.
 */
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <linux/capability.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: dropcaps PROG ARGS...\n");
		return 2;
	}
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) ||
	    prctl(PR_CAPBSET_DROP, CAP_PERFMON, 0, 0, 0)) {
		fprintf(stderr, "dropcaps: PR_CAPBSET_DROP: %s\n", strerror(errno));
		return 2;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "dropcaps: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
