// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_bench: the workloads of `make bench`, timed from inside.
 *
 *   oxt_bench read THREADS CALLS SIZE   read(/dev/zero, buf, SIZE) CALLS times per thread
 *   oxt_bench keys N                    read(/dev/null, buf, j) for j = 0..N-1: N distinct arg2
 *   oxt_bench spin THREADS BLOCKS       BLOCKS blocks of pure arithmetic per thread, no syscall
 *
 * SIZE sets the latency of ksys_read (clear_user of SIZE bytes), so SIZE=1 is a
 * tight syscall loop and a large SIZE a function with a controlled latency.
 * Thread i is pinned to CPU i % n (n CPUs allowed); all start together after a
 * barrier.  Prints one line:
 *
 *   ns_per_call=N elapsed_ns=N calls=N
 *
 * ns_per_call is the mean over threads of (thread's time / its calls): the cost of
 * one call as each CPU sees it, comparable between 1 and 4 threads.  For spin a
 * "call" is one block of SPIN_ITERS iterations: what a sampling probe (profile-997)
 * takes from a CPU-bound program shows as a longer block.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPIN_ITERS 100000

static long calls, size, ncpu, spin;
static pthread_barrier_t start;
static double *per_call;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* A block of arithmetic the compiler cannot fold away. */
static unsigned long spin_block(unsigned long x)
{
	for (long i = 0; i < SPIN_ITERS; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

static void *spinner(void *arg)
{
	long id = (long)arg;
	volatile unsigned long sink;
	unsigned long x = id;
	unsigned long long t0;

	pthread_barrier_wait(&start);
	t0 = now_ns();
	for (long j = 0; j < calls; j++)
		x = spin_block(x);
	sink = x;
	(void)sink;
	per_call[id] = (double)(now_ns() - t0) / calls;
	return NULL;
}

static void *reader(void *arg)
{
	long id = (long)arg;
	char *buf;
	int fd;
	cpu_set_t set;
	unsigned long long t0;

	CPU_ZERO(&set);
	CPU_SET(id % ncpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("oxt_bench");
		exit(1);
	}
	if (spin)
		return spinner(arg);
	buf = malloc(size);
	fd = open("/dev/zero", O_RDONLY);
	if (!buf || fd < 0) {
		perror("oxt_bench");
		exit(1);
	}
	memset(buf, 1, size);
	pthread_barrier_wait(&start);
	t0 = now_ns();
	for (long j = 0; j < calls; j++)
		if (read(fd, buf, size) != size)
			exit(1);
	per_call[id] = (double)(now_ns() - t0) / calls;
	close(fd);
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	cpu_set_t all;
	unsigned long long t0, t1;
	double sum = 0;

	if (sched_getaffinity(0, sizeof(all), &all))
		return 1;
	ncpu = CPU_COUNT(&all);
	if ((argc == 5 && !strcmp(argv[1], "read")) || (argc == 4 && !strcmp(argv[1], "spin"))) {
		long threads = atol(argv[2]);
		pthread_t *th = calloc(threads, sizeof(*th));

		spin = argc == 4;
		calls = atol(argv[3]);
		size = spin ? 1 : atol(argv[4]);
		per_call = calloc(threads, sizeof(*per_call));
		if (threads < 1 || calls < 1 || size < 1 || !th || !per_call)
			return 2;
		pthread_barrier_init(&start, NULL, threads);
		t0 = now_ns();
		for (long i = 0; i < threads; i++)
			if (pthread_create(&th[i], NULL, reader, (void *)i))
				return 1;
		for (long i = 0; i < threads; i++)
			pthread_join(th[i], NULL);
		t1 = now_ns();
		for (long i = 0; i < threads; i++)
			sum += per_call[i];
		printf("ns_per_call=%.1f elapsed_ns=%llu calls=%ld\n", sum / threads, t1 - t0,
		       calls * threads);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "keys")) {
		long n = atol(argv[2]);
		char buf[1];
		int fd = open("/dev/null", O_RDONLY);

		if (fd < 0)
			return 1;
		t0 = now_ns();
		for (long j = 0; j < n; j++)
			if (read(fd, buf, j) != 0)
				return 1;
		t1 = now_ns();
		printf("ns_per_call=%.1f elapsed_ns=%llu calls=%ld\n", (double)(t1 - t0) / n, t1 - t0,
		       n);
		return 0;
	}
	fprintf(stderr, "usage: oxt_bench read THREADS CALLS SIZE | keys N | spin THREADS BLOCKS\n");
	return 2;
}
