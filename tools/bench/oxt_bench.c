// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_bench: the workloads of `make bench`, timed from inside.
 *
 *   oxt_bench read THREADS CALLS SIZE   read(/dev/zero, buf, SIZE) CALLS times per thread
 *   oxt_bench keys N                    read(/dev/null, buf, j) for j = 0..N-1: N distinct arg2
 *
 * SIZE sets the latency of ksys_read (clear_user of SIZE bytes), so SIZE=1 is a
 * tight syscall loop and a large SIZE a function with a controlled latency.
 * Thread i is pinned to CPU i % n (n CPUs allowed); all start together after a
 * barrier.  Prints one line:
 *
 *   ns_per_call=N elapsed_ns=N calls=N
 *
 * ns_per_call is the mean over threads of (thread's time / its calls): the cost of
 * one call as each CPU sees it, comparable between 1 and 4 threads.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long calls, size, ncpu;
static pthread_barrier_t start;
static double *per_call;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void *reader(void *arg)
{
	long id = (long)arg;
	char *buf = malloc(size);
	int fd = open("/dev/zero", O_RDONLY);
	cpu_set_t set;
	unsigned long long t0;

	CPU_ZERO(&set);
	CPU_SET(id % ncpu, &set);
	if (!buf || fd < 0 || sched_setaffinity(0, sizeof(set), &set)) {
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
	if (argc == 5 && !strcmp(argv[1], "read")) {
		long threads = atol(argv[2]);
		pthread_t *th = calloc(threads, sizeof(*th));

		calls = atol(argv[3]);
		size = atol(argv[4]);
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
	fprintf(stderr, "usage: oxt_bench read THREADS CALLS SIZE | keys N\n");
	return 2;
}
