// SPDX-License-Identifier: GPL-2.0
/*
 * The shape of ioctl_fuzz's threads_shared_private_swap_fork with no oxtrace
 * at all (Documentation/testing.rst, "The shared-fd fuzz failure"): threads
 * whose syscalls copy out into buffers that straddle into a PROT_NONE guard
 * page (uname, sysinfo, getrusage, fstat, clock_gettime, read and pread), each
 * checking a pattern on its own stack after every call; half of them on a
 * shared fd that a swapper thread replaces with dup2 and forks children that
 * use it, half on private fds.  A changed stack byte is the failure.
 *
 *   fork_guard_repro [-s SECONDS] [-t THREADS] [-n] [-c] [-b]
 *
 * -s: how long to run (default 60); -t: fuzzing threads (default 6); -n: no
 * fork; -c: a thread allocating, touching and freeing 48 MiB in a loop; -b:
 * the swapper also creates and closes a 256 KiB BPF array map (vmalloc and
 * vfree in the kernel) at every swap.
 * Exit 0 when no stack changed, 1 when one did (with where), 2 on setup errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define PAGE 4096UL
#define NSTK 1536		/* 12 KiB of checked stack: 3 to 4 pages */
#define MAXT 32

static int shared_fd;
static bool do_fork = true, do_bpf;
static volatile int stop;
static unsigned long swaps, forks, child_bad, maps;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long total_calls, total_efault, corrupt;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static uint64_t pat(int id, uint64_t gen, int i)
{
	return ((uint64_t)id << 56) ^ (gen << 20) ^ (uint64_t)i * 0x9e3779b97f4a7c15ULL;
}

/* The PFN of the page holding addr, from /proc/self/pagemap (0 if unknown). */
static uint64_t pfn_of(const void *addr)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd >= 0) {
		if (pread(fd, &e, 8, (uintptr_t)addr / PAGE * 8) != 8)
			e = 0;
		close(fd);
	}
	return e & ((1ULL << 55) - 1);
}

/* One call whose copy-out starts up to 512 bytes before guard, mostly running into it. */
static long straddle(uint64_t *r, unsigned char *guard, int fd, int statfd)
{
	size_t back = 1 + rnd(r) % 512;
	unsigned char *p = guard - back;
	struct timespec *ts;

	switch (rnd(r) % 8) {
	case 0:
		return syscall(SYS_uname, p);
	case 1:
		return syscall(SYS_sysinfo, p);
	case 2:
		return syscall(SYS_getrusage, RUSAGE_SELF, p);
	case 3:
		return syscall(SYS_fstat, fd, p);
	case 4:
		ts = (void *)(guard - 1 - rnd(r) % 16);
		return syscall(SYS_clock_gettime, CLOCK_MONOTONIC, ts);
	case 5:
		return read(fd, p, back + 1 + rnd(r) % 256);
	case 6:
		return pread(statfd, p, back + 1 + rnd(r) % 256, 0);
	default:
		/* a user store near the guard page, as the fuzzer fills its structs */
		memset(p, (int)rnd(r), back);
		return 0;
	}
}

struct thr {
	int id;
	bool own;
	time_t end;
};

static void *fuzz_thread(void *arg)
{
	struct thr *th = arg;
	volatile uint64_t stk[NSTK];
	uint64_t r = 0x9e3779b97f4a7c15ULL * (th->id + 1) | 1, gen = 0;
	unsigned long calls = 0, efault = 0;
	unsigned char *rw, *guard;
	int fd = -1, statfd;
	struct timespec now;

	/* 2 pages read-write, then a PROT_NONE guard page */
	rw = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rw == MAP_FAILED || mprotect(rw + 2 * PAGE, PAGE, PROT_NONE)) {
		perror("guard page");
		exit(2);
	}
	guard = rw + 2 * PAGE;
	statfd = open("/proc/self/stat", O_RDONLY);
	if (th->own)
		fd = open("/dev/zero", O_RDONLY);
	for (int i = 0; i < NSTK; i++)
		stk[i] = pat(th->id, gen, i);
	do {
		for (int k = 0; k < 64; k++) {
			long ret = straddle(&r, guard, th->own ? fd : shared_fd, statfd);

			calls++;
			if (ret < 0 && errno == EFAULT)
				efault++;
			for (int i = 0; i < NSTK; i++) {
				uint64_t want = pat(th->id, gen, i), got = stk[i];

				if (got == want)
					continue;
				pthread_mutex_lock(&report_lock);
				if (!corrupt++)
					printf("thread %d (%s fd), call %lu: stack %p (page offset %#lx) "
					       "%#018llx, want %#018llx; stack PFN %#llx, guard-side PFN %#llx\n",
					       th->id, th->own ? "private" : "shared", calls, &stk[i],
					       (unsigned long)((uintptr_t)&stk[i] % PAGE),
					       (unsigned long long)got, (unsigned long long)want,
					       (unsigned long long)pfn_of((void *)&stk[i]),
					       (unsigned long long)pfn_of(guard - 1));
				pthread_mutex_unlock(&report_lock);
				stk[i] = want;
			}
		}
		/* a new pattern now and then: the stack pages are written, as the fuzzer's are */
		gen++;
		for (int i = 0; i < NSTK; i++)
			stk[i] = pat(th->id, gen, i);
		if (th->own && gen % 4 == 0) {
			close(fd);
			fd = open("/dev/zero", O_RDONLY);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < th->end && !corrupt);
	if (fd >= 0)
		close(fd);
	close(statfd);
	munmap(rw, 3 * PAGE);
	pthread_mutex_lock(&report_lock);
	total_calls += calls;
	total_efault += efault;
	pthread_mutex_unlock(&report_lock);
	return NULL;
}

/* A BPF array map of 64 pages, created and closed: vmalloc and a deferred vfree. */
static void bpf_churn(void)
{
	union bpf_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4096;
	a.max_entries = 64;
	fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a));
	if (fd >= 0) {
		maps++;
		close(fd);
	}
}

/* Replaces the shared fd under the threads; forks children that read it and exit. */
static void *swapper(void *arg)
{
	uint64_t r = 0x5555;

	while (!stop) {
		int nfd = open("/dev/zero", O_RDONLY);

		if (nfd >= 0) {
			dup2(nfd, shared_fd);
			close(nfd);
			swaps++;
		}
		if (do_bpf)
			bpf_churn();
		if (do_fork && rnd(&r) % 8 == 0) {
			pid_t pid = fork();
			int st;

			if (pid == 0) {
				char buf[64];

				for (int i = 0; i < 16; i++)
					if (read(shared_fd, buf, sizeof(buf)) < 0 && errno != EBADF)
						_exit(1);
				if (rnd(&r) % 2)
					close(shared_fd);
				_exit(0);
			}
			if (pid > 0 && waitpid(pid, &st, 0) == pid) {
				forks++;
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					child_bad++;
			}
		}
		sched_yield();
	}
	return NULL;
}

/* Memory churn from the same process, like a dd bs=48M beside the test. */
static void *churn(void *arg)
{
	while (!stop) {
		size_t n = 48UL << 20;
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			continue;
		for (size_t o = 0; o < n; o += PAGE)
			p[o] = 1;
		munmap(p, n);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int secs = 60, nthr = 6, opt;
	bool do_churn = false;
	pthread_t th[MAXT], sw, ch;
	struct thr args[MAXT];
	struct timespec now;

	while ((opt = getopt(argc, argv, "s:t:ncb")) != -1) {
		switch (opt) {
		case 's': secs = atoi(optarg); break;
		case 't': nthr = atoi(optarg); break;
		case 'n': do_fork = false; break;
		case 'c': do_churn = true; break;
		case 'b': do_bpf = true; break;
		default:
			fprintf(stderr, "usage: %s [-s SECONDS] [-t THREADS] [-n] [-c] [-b]\n", argv[0]);
			return 2;
		}
	}
	if (nthr < 1 || nthr > MAXT)
		nthr = 6;
	setvbuf(stdout, NULL, _IOLBF, 0);
	shared_fd = open("/dev/zero", O_RDONLY);
	if (shared_fd < 0) {
		perror("/dev/zero");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (pthread_create(&sw, NULL, swapper, NULL) ||
	    (do_churn && pthread_create(&ch, NULL, churn, NULL)))
		return 2;
	for (int i = 0; i < nthr; i++) {
		args[i] = (struct thr){ .id = i, .own = i >= nthr / 2, .end = now.tv_sec + secs };
		if (pthread_create(&th[i], NULL, fuzz_thread, &args[i]))
			return 2;
	}
	for (int i = 0; i < nthr; i++)
		pthread_join(th[i], NULL);
	stop = 1;
	pthread_join(sw, NULL);
	if (do_churn)
		pthread_join(ch, NULL);
	printf("%s: %d threads, %lu calls (%lu EFAULT), %lu swaps, %lu forks (%lu bad), "
	       "%lu changed stack words, %lu BPF maps\n", corrupt ? "FAIL" : "ok", nthr, total_calls,
	       total_efault, swaps, forks, child_bad, corrupt, maps);
	return corrupt || child_bad ? 1 : 0;
}
