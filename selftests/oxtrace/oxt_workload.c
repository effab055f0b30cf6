// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_workload: a known number of calls into probed kernel functions, from
 * threads pinned to the CPUs, so that a test knows every count, sum and
 * histogram bucket exactly.
 *
 *   oxt_workload read  THREADS CALLS   read(/dev/zero, buf, 1 + j % 8) CALLS times per thread
 *   oxt_workload lseek THREADS CALLS   lseek(fd, j, SEEK_SET) CALLS times per thread
 *   oxt_workload spin  THREADS SECONDS reads as fast as possible, for the kill tests
 *   oxt_workload open  THREADS CALLS   open("/dev/null") and close it CALLS times per thread
 *   oxt_workload burn  THREADS 0       user-mode loop in oxt_burn_leaf() until killed
 *   oxt_workload fork  THREADS CALLS   fork() a child that exits at once, CALLS times per thread
 *
 * Thread i runs on the (i % n)-th CPU of n allowed.  Everything is started
 * together, and nothing but the calls above reads a file, so every read the
 * process makes is one of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *mode;
static long calls;
/* CPUs to spread over; from the affinity mask: sysconf() would read sysfs (a probed read). */
static long ncpu;
static pthread_barrier_t start;
static volatile unsigned long sink;

/* Known user functions for profile and stack tests: burn() -> burn_mid() -> burn_leaf(). */
__attribute__((noinline)) void oxt_burn_leaf(unsigned long i)
{
	sink += i * 2654435761UL;
}

__attribute__((noinline)) void oxt_burn_mid(unsigned long i)
{
	oxt_burn_leaf(i);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void oxt_burn(void)
{
	for (unsigned long i = 0;; i++)
		oxt_burn_mid(i);
}

static void *worker(void *arg)
{
	long id = (long)arg;
	char buf[16];
	cpu_set_t set;
	int fd = open("/dev/zero", O_RDONLY);

	CPU_ZERO(&set);
	CPU_SET(id % ncpu, &set);	/* CPUs are 0..n-1 in the guest */
	if (sched_setaffinity(0, sizeof(set), &set) || fd < 0) {
		perror("oxt_workload");
		exit(1);
	}
	pthread_barrier_wait(&start);
	if (!strcmp(mode, "read")) {
		for (long j = 0; j < calls; j++)
			if (read(fd, buf, 1 + j % 8) != 1 + j % 8)
				exit(1);
	} else if (!strcmp(mode, "open")) {
		for (long j = 0; j < calls; j++)
			close(open("/dev/null", O_RDONLY));
	} else if (!strcmp(mode, "fork")) {
		for (long j = 0; j < calls; j++) {
			pid_t c = fork();

			if (c == 0)
				_exit(0);
			if (c < 0 || waitpid(c, NULL, 0) != c)
				exit(1);
		}
	} else if (!strcmp(mode, "burn")) {
		oxt_burn();
	} else if (!strcmp(mode, "lseek")) {
		for (long j = 0; j < calls; j++)
			lseek(fd, j, SEEK_SET);
	} else {
		time_t end = time(NULL) + calls;

		while (time(NULL) < end)
			for (int k = 0; k < 1000; k++)
				read(fd, buf, 1);
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	long threads;
	pthread_t *th;

	if (argc != 4) {
		fprintf(stderr, "usage: oxt_workload read|lseek|spin|open|burn|fork THREADS CALLS\n");
		return 2;
	}
	cpu_set_t all;

	if (sched_getaffinity(0, sizeof(all), &all))
		return 1;
	ncpu = CPU_COUNT(&all);
	mode = argv[1];
	threads = atol(argv[2]);
	calls = atol(argv[3]);
	th = calloc(threads, sizeof(*th));
	pthread_barrier_init(&start, NULL, threads);
	for (long i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i))
			return 1;
	for (long i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return 0;
}
