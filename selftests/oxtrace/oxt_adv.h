/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the adversarial selftests (ioctl_fuzz, lifecycle_test): counts
 * scaled for make check or make stress, a seeded generator, LOAD of the
 * compiled images, workers firing probes on every CPU, and leak checks.
 */
#ifndef OXT_ADV_H
#define OXT_ADV_H

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/prctl.h>

#include "oxt_test.h"
#include "dynvar_images.h"

#define ADV_MAXCPUS 256

/* OXT_STRESS=1 (make stress) runs at length, else a few seconds of work under TCG. */
static inline long adv_count(long check, long stress)
{
	const char *s = getenv("OXT_STRESS");

	return s && *s && strcmp(s, "0") ? stress : check;
}

/* xorshift64*: OXT_SEED reproduces a run; the seed is logged. */
struct rng {
	__u64 s;
};

static inline __u64 adv_seed(void)
{
	const char *s = getenv("OXT_SEED");
	struct timespec ts;

	if (s && *s)
		return strtoull(s, NULL, 0) | 1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((__u64)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (__u64)ts.tv_sec) | 1;
}

static inline __u64 rnd(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dULL;
}

static inline __u64 below(struct rng *r, __u64 n)
{
	return n ? rnd(r) % n : 0;
}

/* LOAD a program of dynvar_images.h; returns 0 or -errno. */
static inline int adv_load(int fd, const struct dyn_prog *p)
{
	struct oxt_attach att[8];
	char names[8 * 64];
	size_t off = 0;
	struct oxt_load l;

	if (p->nattach > 8)
		return -E2BIG;
	for (unsigned int i = 0; i < p->nattach; i++) {
		size_t n = strlen(p->attach[i].func) + 1;

		att[i] = (struct oxt_attach){ .probe = p->attach[i].probe, .name = off };
		memcpy(names + off, p->attach[i].func, n);
		off += n;
	}
	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	l.image = (unsigned long)p->image;
	l.image_len = p->image_len;
	l.attach = (unsigned long)att;
	l.names = (unsigned long)names;
	l.nattach = p->nattach;
	l.names_len = off;
	return ioctl(fd, OXT_IOC_LOAD, &l) ? -errno : 0;
}

/* Workers pinned to every online CPU read(2) one byte at a time until told to stop. */
struct firing {
	pthread_t th[ADV_MAXCPUS];
	int n;
	volatile int stop;
	volatile __u64 reads;
	volatile int running;	/* workers in their loop (their fd is open) */
};

struct firing_arg {
	struct firing *f;
	int cpu;
};

static void *adv_fire(void *arg)
{
	struct firing_arg *a = arg;
	cpu_set_t set;
	char c;
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	CPU_ZERO(&set);
	CPU_SET(a->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	prctl(PR_SET_NAME, DYN_COMM, 0, 0, 0);
	__atomic_add_fetch(&a->f->running, 1, __ATOMIC_RELAXED);
	while (!a->f->stop && fd >= 0) {
		if (read(fd, &c, 1) == 1)
			__atomic_add_fetch(&a->f->reads, 1, __ATOMIC_RELAXED);
		else
			break;
	}
	if (fd >= 0)
		close(fd);
	free(a);
	return NULL;
}

/* Starts the workers; returns once every one is running its loop (and opens no more fds). */
static inline int adv_fire_start(struct firing *f)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < ncpu && i < ADV_MAXCPUS; i++) {
		struct firing_arg *a = malloc(sizeof(*a));

		if (!a)
			return -1;
		*a = (struct firing_arg){ .f = f, .cpu = i };
		if (pthread_create(&f->th[f->n], NULL, adv_fire, a)) {
			free(a);
			return -1;
		}
		f->n++;
	}
	/* bounded: a hang guard of ~300 s */
	for (int i = 0; i < 300000 && (f->running < f->n || f->reads < (__u64)f->n); i++)
		usleep(1000);
	return f->running == f->n && f->reads >= (__u64)f->n ? 0 : -1;
}

static inline void adv_fire_stop(struct firing *f)
{
	f->stop = 1;
	for (int i = 0; i < f->n; i++)
		pthread_join(f->th[i], NULL);
}

/* Kernel memory that a leaking consumer would grow, from /proc/meminfo (kB). */
struct mem {
	long vmalloc, slab, percpu;
};

static inline long adv_meminfo(const char *key)
{
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

static inline void adv_mem(struct mem *m)
{
	m->vmalloc = adv_meminfo("VmallocUsed");
	m->slab = adv_meminfo("Slab");
	m->percpu = adv_meminfo("Percpu");
}

/* Slack for the rest of the kernel (stacks, dentries, caches): a leak of 64 bytes per
 * operation over the counts of make stress exceeds it. */
#define ADV_SLACK_VMALLOC 512
#define ADV_SLACK_SLAB 2048
#define ADV_SLACK_PERCPU 128

static inline int adv_mem_ok(const struct mem *a, const struct mem *b)
{
	return b->vmalloc <= a->vmalloc + ADV_SLACK_VMALLOC && b->slab <= a->slab + ADV_SLACK_SLAB &&
	       b->percpu <= a->percpu + ADV_SLACK_PERCPU;
}

/*
 * Leak check after the work: until only `live` consumers are alive and memory is
 * back within the slack of `before` (freeing may be deferred: RCU, the cleaner,
 * workqueues), at most ~300 s, a hang guard.  Returns 0 when both hold; `after`
 * and `*consumers` say where things ended.
 */
static inline int adv_settle(const struct mem *before, struct mem *after, __u64 live,
			     __u64 *consumers)
{
	struct oxt_status s;

	for (int i = 0; i < 3000; i++) {
		int fd = oxt_open();

		*consumers = ~0ULL;
		if (fd >= 0 && !oxt_status(fd, &s))
			*consumers = s.live_consumers - 1;
		if (fd >= 0)
			close(fd);
		adv_mem(after);
		if (*consumers == live && adv_mem_ok(before, after))
			return 0;
		usleep(100 * 1000);
	}
	return -1;
}

#define ADV_LEAK_LOG(_metadata, what, a, b, consumers)                                         \
	TH_LOG("%s: consumers left %llu; VmallocUsed %ld -> %ld kB, Slab %ld -> %ld kB, "    \
	       "Percpu %ld -> %ld kB",                                                       \
	       what, (unsigned long long)(consumers), (a)->vmalloc, (b)->vmalloc, (a)->slab,  \
	       (b)->slab, (a)->percpu, (b)->percpu)

#endif
