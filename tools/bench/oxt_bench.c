// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_bench: the workloads of `make bench`, timed from inside.
 *
 *   oxt_bench read THREADS CALLS SIZE   read(/dev/zero, buf, SIZE) CALLS times per thread
 *   oxt_bench keys N                    read(/dev/null, buf, j) for j = 0..N-1: N distinct arg2
 *   oxt_bench spin THREADS BLOCKS       BLOCKS blocks of pure arithmetic per thread, no syscall
 *   oxt_bench ucall THREADS CALLS       oxt_ucall() CALLS times per thread (the uprobe pair)
 *   oxt_bench usdt THREADS CALLS        the USDT probe oxtbench:tick CALLS times per thread,
 *                                       behind its semaphore (the USDT pair)
 *   oxt_bench exited PID SECONDS        wait until process PID has exited, at most SECONDS:
 *                                       exit 0 when it has, 1 at the deadline, 2 on error
 *
 * SIZE sets the latency of ksys_read (clear_user of SIZE bytes), so SIZE=1 is a
 * tight syscall loop and a large SIZE a function with a controlled latency.
 * Thread i is pinned to CPU i % n (n CPUs allowed); all start together after a
 * barrier.  Prints one line:
 *
 *   ns_per_call=N elapsed_ns=N calls=N [cal_ns=N per_cal=N]
 *
 * ns_per_call is the mean over threads of (thread's time in its calls / their
 * number): the cost of one call as each CPU sees it, comparable between 1 and 4
 * threads.  For spin a "call" is one block of SPIN_ITERS iterations: what a
 * sampling probe (profile-997) takes from a CPU-bound program shows as a longer
 * block.
 *
 * The read loop also prices the machine it runs on.  A guest under an emulator
 * on a shared host runs its kernel at one speed for a few seconds, then 1.8x
 * slower (the same factor for every workload; plain arithmetic keeps its
 * speed), so a median over rounds mixes the two.  Every READ_BLOCK calls are
 * followed by a calibration block of CAL_CALLS pread()s of the same file and
 * size (one also comes first): the same path through the kernel, except
 * ksys_read, where the bench's probes are.  Both sample the same speeds, so
 * the ratio of a thread's time in read() to its time in pread(), per call, does
 * not depend on them: per_cal is its mean over threads.  cal_ns is the 10th
 * percentile of the pread() blocks' ns per call (the run's fast speed); the
 * report scales per_cal by one reference per workload for the whole boot.
 * Sums rather than a mean of per-block ratios: an interrupt in one short
 * calibration block must not weigh like a whole block.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* The note records the semaphore's address (oxtbench_tick_semaphore, below). */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#define SPIN_ITERS 100000
#define READ_BLOCK 1000
#define CAL_CALLS 100

/* The semaphore of oxtbench:tick: a tracer's uprobe counts it up while the probe is on. */
unsigned short oxtbench_tick_semaphore __attribute__((section(".probes"), used));

static long calls, size, ncpu, spin, ucall;
static pthread_barrier_t start;
static double *per_call, *per_cal;
/* Each thread's calibration blocks, ns per call: nblocks + 1 of them. */
static double **cal;
static long nblocks;

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

/* Times one calibration block: ns per pread() call. */
static double calibrate(int fd, char *buf)
{
	unsigned long long t0 = now_ns();

	for (long j = 0; j < CAL_CALLS; j++)
		if (pread(fd, buf, size, 0) != size)
			exit(1);
	return (double)(now_ns() - t0) / CAL_CALLS;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The uprobe pair's function: a call that does nearly nothing, kept out of line. */
__attribute__((noinline, used)) long oxt_ucall(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

/* ucall: CALLS calls of oxt_ucall; usdt: CALLS passes over the USDT site. */
static void *caller(void *arg)
{
	long id = (long)arg, x = id;
	volatile long sink;
	unsigned long long t0;

	pthread_barrier_wait(&start);
	t0 = now_ns();
	if (ucall == 1) {
		for (long j = 0; j < calls; j++)
			x = oxt_ucall(x);
	} else {
		for (long j = 0; j < calls; j++) {
			if (__builtin_expect(oxtbench_tick_semaphore, 0))
				STAP_PROBE1(oxtbench, tick, j);
			__asm__ volatile("" : "+r"(x));
		}
	}
	sink = x;
	(void)sink;
	per_call[id] = (double)(now_ns() - t0) / calls;
	return NULL;
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
	unsigned long long t1, t2;
	double *c = cal[id], ctot, busy = 0;

	CPU_ZERO(&set);
	CPU_SET(id % ncpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("oxt_bench");
		exit(1);
	}
	if (spin)
		return spinner(arg);
	if (ucall)
		return caller(arg);
	buf = malloc(size);
	fd = open("/dev/zero", O_RDONLY);
	if (!buf || fd < 0) {
		perror("oxt_bench");
		exit(1);
	}
	memset(buf, 1, size);
	pthread_barrier_wait(&start);
	c[0] = calibrate(fd, buf);
	ctot = c[0];
	for (long b = 0; b < nblocks; b++) {
		long n = b < nblocks - 1 ? READ_BLOCK : calls - b * READ_BLOCK;

		t1 = now_ns();
		for (long j = 0; j < n; j++)
			if (read(fd, buf, size) != size)
				exit(1);
		t2 = now_ns();
		busy += (double)(t2 - t1);
		c[b + 1] = calibrate(fd, buf);
		ctot += c[b + 1];
	}
	per_call[id] = busy / calls;
	per_cal[id] = busy / (ctot / (nblocks + 1)) / calls;
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
	if (argc == 4 && !strcmp(argv[1], "ucall"))
		ucall = 1;
	if (argc == 4 && !strcmp(argv[1], "usdt"))
		ucall = 2;
	if ((argc == 5 && !strcmp(argv[1], "read")) || (argc == 4 && !strcmp(argv[1], "spin")) ||
	    ucall) {
		long threads = atol(argv[2]);
		pthread_t *th = calloc(threads, sizeof(*th));

		spin = argc == 4 && !ucall;
		calls = atol(argv[3]);
		size = argc == 4 ? 1 : atol(argv[4]);
		per_call = calloc(threads, sizeof(*per_call));
		per_cal = calloc(threads, sizeof(*per_cal));
		cal = calloc(threads, sizeof(*cal));
		nblocks = (calls + READ_BLOCK - 1) / READ_BLOCK;
		if (threads < 1 || calls < 1 || size < 1 || !th || !per_call || !per_cal || !cal)
			return 2;
		for (long i = 0; i < threads; i++)
			if (!(cal[i] = calloc(nblocks + 1, sizeof(**cal))))
				return 1;
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
		printf("ns_per_call=%.1f elapsed_ns=%llu calls=%ld", sum / threads, t1 - t0,
		       calls * threads);
		if (!spin && !ucall) {
			long m = threads * (nblocks + 1), k = 0;
			double *all = calloc(m, sizeof(*all)), rsum = 0;

			if (!all)
				return 1;
			for (long i = 0; i < threads; i++) {
				rsum += per_cal[i];
				for (long b = 0; b <= nblocks; b++)
					all[k++] = cal[i][b];
			}
			qsort(all, m, sizeof(*all), cmp_double);
			printf(" cal_ns=%.1f per_cal=%.6f", all[m / 10], rsum / threads);
		}
		printf("\n");
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
	if (argc == 4 && !strcmp(argv[1], "exited")) {
		/* A pidfd polls readable once the process has exited, reaped or not. */
		int fd = syscall(SYS_pidfd_open, atoi(argv[2]), 0);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r;

		if (fd < 0)
			return errno == ESRCH ? 0 : 2;
		do
			r = poll(&p, 1, atoi(argv[3]) * 1000);
		while (r < 0 && errno == EINTR);
		return r > 0 ? 0 : r == 0 ? 1 : 2;
	}
	fprintf(stderr, "usage: oxt_bench read THREADS CALLS SIZE | keys N | spin THREADS BLOCKS"
		" | ucall THREADS CALLS | usdt THREADS CALLS | exited PID SECONDS\n");
	return 2;
}
