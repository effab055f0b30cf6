// SPDX-License-Identifier: GPL-2.0
/*
 * Dynamic variables in the kernel (Documentation/dynvar.rst): the classic
 * latency script under threads on every CPU (every return matched exactly
 * once), drops counted by state with a tiny dynvarsize (allocations + drops
 * = attempts), the cleaner's cross-calls, and the audits at STOP and release
 * (every chunk on exactly one list or chain).
 *
 * The programs are compiled by the tool's compiler into dynvar_images.h; the
 * test drives LOAD/GO/STOP/DYNSTAT itself so it can read its own consumer.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "oxt_adv.h"	/* oxt_test.h, dynvar_images.h and adv_load() */
#include "kselftest_harness.h"

/* The harness's 30 s per test is a time budget; this is only a hang guard. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 900

#define NTHREADS 8
#define NCALLS 500
#define MAXCPUS 256

struct worker {
	int cpu;
	int fd;
	pthread_barrier_t *start;
	int errors;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		w->errors++;
	/* the scripts' predicates select this name */
	prctl(PR_SET_NAME, DYN_COMM, 0, 0, 0);
	pthread_barrier_wait(w->start);
	for (int i = 0; i < NCALLS; i++)
		if (lseek(w->fd, 0, SEEK_SET) != 0)
			w->errors++;
	return NULL;
}

/* Sets the module parameter cleaner_kick ("Y" or "N"); 0 on success. */
static int set_cleaner_kick(const char *v)
{
	int fd = open("/sys/module/oxtrace/parameters/cleaner_kick", O_WRONLY | O_CLOEXEC);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, v, 1) == 1;
	close(fd);
	return ok ? 0 : -1;
}

/*
 * NTHREADS threads spread over the online CPUs, NCALLS lseek(2) each: the
 * scripts probe __x64_sys_lseek, entered exactly once per call (vfs_llseek
 * is inlined into it in this kernel, so it is no reliable probe point).
 */
static int workload(void)
{
	pthread_t th[NTHREADS];
	struct worker w[NTHREADS];
	pthread_barrier_t start;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int errors = 0;

	if (fd < 0)
		return -1;
	pthread_barrier_init(&start, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .cpu = i % ncpu, .fd = fd, .start = &start };
		if (pthread_create(&th[i], NULL, work, &w[i]))
			return -1;
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		errors += w[i].errors;
	}
	pthread_barrier_destroy(&start);
	close(fd);
	return errors;
}

struct dyn {
	struct oxt_dynstat st;
	struct oxt_dyn_cpu cpu[MAXCPUS];
	__u64 var_drops[16];
	struct oxt_dyn_cpu sum;
};

static int dynstat(int fd, struct dyn *d)
{
	memset(d, 0, sizeof(*d));
	d->st.size = sizeof(d->st);
	d->st.cpus = (unsigned long)d->cpu;
	d->st.ncpus = MAXCPUS;
	d->st.var_drops = (unsigned long)d->var_drops;
	d->st.nvars = 16;
	if (ioctl(fd, OXT_IOC_DYNSTAT, &d->st))
		return -errno;
	for (unsigned int c = 0; c < d->st.ncpus; c++) {
		d->sum.allocs += d->cpu[c].allocs;
		d->sum.frees += d->cpu[c].frees;
		d->sum.races += d->cpu[c].races;
		d->sum.drops_empty += d->cpu[c].drops_empty;
		d->sum.drops_dirty += d->cpu[c].drops_dirty;
		d->sum.drops_rinsing += d->cpu[c].drops_rinsing;
		d->sum.drops_size += d->cpu[c].drops_size;
		d->sum.contended += d->cpu[c].contended;
		d->sum.free += d->cpu[c].free;
		d->sum.clean += d->cpu[c].clean;
		d->sum.rinsing += d->cpu[c].rinsing;
		d->sum.dirty += d->cpu[c].dirty;
	}
	return 0;
}

static __u64 drops(const struct dyn *d)
{
	return d->sum.drops_empty + d->sum.drops_dirty + d->sum.drops_rinsing + d->sum.drops_size;
}

static __u64 audited(const struct dyn *d)
{
	return d->st.audit_free + d->st.audit_clean + d->st.audit_rinsing +
	       d->st.audit_dirty + d->st.audit_in_use;
}

/* Hits the kernel could not hand to the module: kretprobe instances, reentry. */
static __u64 missed(int fd)
{
	struct oxt_status s;

	return oxt_status(fd, &s) ? ~0ULL : s.missed;
}

/* A program without dynamic variables has no dynamic memory. */
TEST(no_dynamic_memory_without_dynamic_variables)
{
	struct dyn d;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, dynstat(fd, &d));
	EXPECT_EQ(0, d.st.flags);
	EXPECT_EQ(0, d.st.ncpus);
	d.st.reserved0 = 1;
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_DYNSTAT, &d.st));
	EXPECT_EQ(EINVAL, errno);
	close(fd);
}

/*
 * entry: self->ts = timestamp; return /self->ts/: use it, self->ts = 0.
 * Every entry of the workload allocates (the previous return freed the
 * variable) and every return frees exactly that variable: allocations =
 * frees = calls, nothing in use, no drop.  A return matched twice or not at
 * all would break one of the equalities.
 */
TEST(latency_every_return_matched_once)
{
	const __u64 n = (__u64)NTHREADS * NCALLS;
	struct dyn d;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, adv_load(fd, &dyn_prog_latency));
	ASSERT_EQ(0, dynstat(fd, &d));
	EXPECT_EQ(OXT_DYN_PRESENT, d.st.flags);
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_GO));
	ASSERT_EQ(0, workload());
	/* until the cleaner (101 Hz) has cleaned what the returns freed (300 s: a hang guard) */
	for (int i = 0; i < 300000; i++) {
		ASSERT_EQ(0, dynstat(fd, &d));
		if (d.st.cleaner_runs && d.st.passes && d.st.rinsed && !d.st.in_use)
			break;
		usleep(1000);
	}
	EXPECT_TRUE(d.st.flags & OXT_DYN_STARTED);
	EXPECT_EQ(9900990, d.st.cleanrate_ns);
	EXPECT_EQ(sysconf(_SC_NPROCESSORS_CONF), d.st.ncpus);
	EXPECT_EQ(0, missed(fd));
	EXPECT_EQ(n, d.sum.allocs);
	EXPECT_EQ(n, d.sum.frees);
	EXPECT_EQ(0, d.st.in_use);
	EXPECT_EQ(0, drops(&d));
	EXPECT_LE(1, d.st.high_water);
	/* frees make dirty chunks: the cleaner ran passes, two cross-calls each */
	EXPECT_LT(0, d.st.cleaner_runs);
	EXPECT_LT(0, d.st.passes);
	EXPECT_EQ(2 * d.st.passes, d.st.crosscalls);
	EXPECT_LT(0, d.st.rinsed);
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_STOP));
	ASSERT_EQ(0, dynstat(fd, &d));
	ASSERT_TRUE(d.st.flags & OXT_DYN_AUDITED);
	EXPECT_EQ(OXT_DYN_AUDIT_OK, d.st.audit_error);
	EXPECT_EQ(d.st.nchunks, audited(&d));
	EXPECT_EQ(0, d.st.audit_in_use);
	TH_LOG("latency: %llu calls, %llu chunks of %u B, %llu passes, %llu cross-calls, high water %llu",
	       (unsigned long long)n, (unsigned long long)d.st.nchunks, d.st.chunk_bytes,
	       (unsigned long long)d.st.passes, (unsigned long long)d.st.crosscalls,
	       (unsigned long long)d.st.high_water);
	close(fd);
}

/* a[timestamp, tid] = 1, never freed, 4 KiB: every chunk used, then EMPTY. */
TEST(tiny_memory_drops_when_empty)
{
	const __u64 n = (__u64)NTHREADS * NCALLS;
	struct dyn d;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, adv_load(fd, &dyn_prog_fill));
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_GO));
	ASSERT_EQ(0, workload());
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_STOP));
	ASSERT_EQ(0, dynstat(fd, &d));
	ASSERT_LT(0, d.st.nchunks);
	ASSERT_GT(n, d.st.nchunks);
	EXPECT_EQ(OXT_DSTATE_EMPTY, d.st.dstate);
	EXPECT_EQ(0, missed(fd));
	/* allocations + drops = attempts */
	EXPECT_EQ(n, d.sum.allocs + drops(&d));
	/* every chunk used; a chunk that lost an insertion race went dirty first */
	EXPECT_GE(d.st.nchunks, d.sum.allocs);
	EXPECT_LE(d.st.nchunks, d.sum.allocs + d.sum.races);
	EXPECT_EQ(0, d.sum.frees);
	EXPECT_LT(0, d.sum.drops_empty);
	if (!d.sum.races) {
		EXPECT_EQ(0, d.sum.drops_dirty);
		EXPECT_EQ(0, d.sum.drops_rinsing);
	}
	/* one variable, id 0: every drop is its drop */
	EXPECT_EQ(1, d.st.nvars);
	EXPECT_EQ(drops(&d), d.var_drops[0]);
	EXPECT_EQ(d.sum.allocs, d.st.in_use);
	EXPECT_EQ(d.sum.allocs, d.st.high_water);
	ASSERT_TRUE(d.st.flags & OXT_DYN_AUDITED);
	EXPECT_EQ(OXT_DYN_AUDIT_OK, d.st.audit_error);
	EXPECT_EQ(d.st.nchunks, audited(&d));
	EXPECT_EQ(d.sum.allocs, d.st.audit_in_use);
	close(fd);
}

/* Freed but never cleaned (cleanrate 60 s, no kicks), 4 KiB: drops while DIRTY. */
TEST(tiny_memory_drops_when_dirty)
{
	const __u64 n = (__u64)NTHREADS * NCALLS;
	struct dyn d;
	int fd = oxt_open(), go, wl, stop;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, adv_load(fd, &dyn_prog_dirty));
	/* no on-demand pass either: the cleaner never runs during the workload */
	ASSERT_EQ(0, set_cleaner_kick("N"));
	go = ioctl(fd, OXT_IOC_GO);
	wl = go ? -1 : workload();
	stop = ioctl(fd, OXT_IOC_STOP);
	/* restored before any assertion can end the test */
	ASSERT_EQ(0, set_cleaner_kick("Y"));
	ASSERT_EQ(0, go);
	ASSERT_EQ(0, wl);
	ASSERT_EQ(0, stop);
	ASSERT_EQ(0, dynstat(fd, &d));
	EXPECT_EQ(60000000000ULL, d.st.cleanrate_ns);
	EXPECT_EQ(0, d.st.passes);
	EXPECT_EQ(0, d.st.crosscalls);
	EXPECT_EQ(OXT_DSTATE_DIRTY, d.st.dstate);
	EXPECT_EQ(0, missed(fd));
	EXPECT_EQ(n, d.sum.allocs + drops(&d));
	EXPECT_LT(0, d.sum.drops_dirty);
	EXPECT_EQ(0, d.sum.drops_empty);
	EXPECT_EQ(0, d.sum.drops_rinsing);
	EXPECT_EQ(d.sum.allocs, d.sum.frees);
	EXPECT_EQ(0, d.st.in_use);
	EXPECT_EQ(drops(&d), d.var_drops[0]);
	ASSERT_TRUE(d.st.flags & OXT_DYN_AUDITED);
	EXPECT_EQ(OXT_DYN_AUDIT_OK, d.st.audit_error);
	EXPECT_EQ(d.st.nchunks, audited(&d));
	EXPECT_EQ(d.st.nchunks, d.st.audit_dirty);
	close(fd);
}

/* Release audits every started memory; none has ever failed. */
TEST(release_audits_every_chunk)
{
	struct dyn before, after;
	int fd = oxt_open(), fd2;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, dynstat(fd, &before));
	/* released while ACTIVE: probes unregistered, cleaner stopped, then audited */
	fd2 = oxt_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, adv_load(fd2, &dyn_prog_latency));
	ASSERT_EQ(0, ioctl(fd2, OXT_IOC_GO));
	ASSERT_EQ(0, workload());
	close(fd2);
	ASSERT_EQ(0, dynstat(fd, &after));
	EXPECT_EQ(before.st.audits + 1, after.st.audits);
	EXPECT_EQ(0, after.st.audit_failures);
	close(fd);
}

TEST_HARNESS_MAIN
