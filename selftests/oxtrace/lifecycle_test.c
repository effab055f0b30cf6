// SPDX-License-Identifier: GPL-2.0
/*
 * Lifecycle races while probes fire on every CPU: GO, STOP, SNAPSHOT,
 * AGGSNAP, DYNSTAT, STATUS and PROBES from several threads against close(),
 * consumers SIGKILLed at random points of LOAD/GO/draining, CPUs taken
 * offline and back while dynamic variables and aggregations are active, and
 * many consumers at once until the module (or the fd limit) refuses one.
 * After each: no consumer left, every dynamic memory audited clean at its
 * release, kernel memory back where it was.
 *
 * The program (dynvar_images.h, "race") probes ksys_read entry and return
 * with thread-local and associative variables, two aggregations and a
 * record per call; workers pinned to every CPU read(2) /dev/zero meanwhile.
 * OXT_STRESS=1 runs at length (make stress); OXT_SEED=n replays a run.
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "oxt_adv.h"
#include "kselftest_harness.h"

/* A hang guard, not a time budget: a saturated TCG host may need many minutes. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 3600

#define BUFLEN (64 * 1024)

/* Module-wide audit counters (DYNSTAT of any consumer). */
static int audits(__u64 *done, __u64 *failed)
{
	struct oxt_dynstat d;
	int fd = oxt_open(), ret;

	if (fd < 0)
		return -errno;
	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	ret = ioctl(fd, OXT_IOC_DYNSTAT, &d) ? -errno : 0;
	close(fd);
	*done = d.audits;
	*failed = d.audit_failures;
	return ret;
}

static bool clean_errno(int e)
{
	switch (e) {
	case EBADF: case EINVAL: case ENOSPC: case EBUSY: case ENXIO: case ENOENT:
		return true;
	}
	return false;
}

struct hammer {
	int fd;
	int cpus;
	volatile int stop;
	struct rng r;
	__u64 calls, ok, unexpected;
	int bad_errno, bad_cmd;
	pthread_t th;
	unsigned char buf[BUFLEN];
};

/* One random reading ioctl of the lifecycle on h->fd. */
static int hammer_one(struct hammer *h, int cpus)
{
	struct oxt_cpu_status cs[ADV_MAXCPUS];
	struct oxt_dyn_cpu dc[ADV_MAXCPUS];
	struct oxt_probe_info pi[4];
	union {
		struct oxt_snapshot sn;
		struct oxt_dynstat d;
		struct oxt_status st;
		struct oxt_probes pr;
	} u;
	unsigned long cmd;

	memset(&u, 0, sizeof(u));
	switch (below(&h->r, 5)) {
	case 0:
	case 1:
		u.sn.size = sizeof(u.sn);
		u.sn.cpu = below(&h->r, cpus);
		u.sn.buf = (unsigned long)h->buf;
		u.sn.buf_len = BUFLEN;
		cmd = below(&h->r, 2) ? OXT_IOC_SNAPSHOT : OXT_IOC_AGGSNAP;
		break;
	case 2:
		u.d.size = sizeof(u.d);
		u.d.cpus = (unsigned long)dc;
		u.d.ncpus = ADV_MAXCPUS;
		cmd = OXT_IOC_DYNSTAT;
		break;
	case 3:
		u.st.size = sizeof(u.st);
		u.st.cpus = (unsigned long)cs;
		u.st.ncpus = ADV_MAXCPUS;
		cmd = OXT_IOC_STATUS;
		break;
	default:
		u.pr.size = sizeof(u.pr);
		u.pr.info = (unsigned long)pi;
		u.pr.n = 4;
		cmd = OXT_IOC_PROBES;
	}
	h->calls++;
	if (!ioctl(h->fd, cmd, &u)) {
		h->ok++;
		return 0;
	}
	if (!clean_errno(errno) && !h->unexpected++) {
		h->bad_errno = errno;
		h->bad_cmd = _IOC_NR(cmd);
	}
	return -errno;
}

static void *hammer_thread(void *arg)
{
	struct hammer *h = arg;

	while (!h->stop)
		if (hammer_one(h, h->cpus) == -EBADF)
			break;
	return NULL;
}

/*
 * Rounds of: LOAD, GO, three threads draining and reading the consumer, and
 * the main thread ending it at a random point by STOP then close, close while
 * active, or STOP, a drain and close -- all while the probes fire on every CPU.
 */
TEST(close_races_ioctls_while_firing)
{
	long rounds = adv_count(24, 600);
	__u64 seed = adv_seed(), a0, f0, a1, f1, consumers;
	struct hammer *h = calloc(3, sizeof(*h));
	long ends[3] = { 0 };
	struct firing fire;
	struct mem m0, m1;
	__u64 calls = 0, ok = 0, unexpected = 0;
	int bad_errno = 0, bad_cmd = 0;
	struct rng r = { seed };

	TH_LOG("seed %#llx (OXT_SEED replays it)", (unsigned long long)seed);
	ASSERT_NE(NULL, h);
	ASSERT_EQ(0, audits(&a0, &f0));
	adv_mem(&m0);
	ASSERT_EQ(0, adv_fire_start(&fire));
	for (long i = 0; i < rounds; i++) {
		int fd = oxt_open();
		int how = below(&r, 3);
		struct oxt_status s;

		ASSERT_LE(0, fd);
		ASSERT_EQ(0, adv_load(fd, &dyn_prog_race));
		ASSERT_EQ(0, ioctl(fd, OXT_IOC_GO));
		for (int t = 0; t < 3; t++) {
			h[t].fd = fd;
			/* not sysconf() in the thread: it opens a directory, which may take
			 * the number of the fd just closed while another thread still uses it */
			h[t].cpus = sysconf(_SC_NPROCESSORS_CONF);
			h[t].stop = 0;
			h[t].r.s = rnd(&r) | 1;
			ASSERT_EQ(0, pthread_create(&h[t].th, NULL, hammer_thread, &h[t]));
		}
		/* a random point: some calls of our own, no sleeping */
		for (int j = below(&r, 400); j > 0; j--)
			oxt_status(fd, &s);
		if (how != 1)
			EXPECT_EQ(0, ioctl(fd, OXT_IOC_STOP));
		if (how == 2)
			for (int j = below(&r, 50); j > 0; j--)
				oxt_status(fd, &s);
		close(fd);
		ends[how]++;
		for (int t = 0; t < 3; t++) {
			h[t].stop = 1;
			pthread_join(h[t].th, NULL);
		}
	}
	adv_fire_stop(&fire);
	for (int t = 0; t < 3; t++) {
		calls += h[t].calls;
		ok += h[t].ok;
		if (h[t].unexpected && !unexpected) {
			bad_errno = h[t].bad_errno;
			bad_cmd = h[t].bad_cmd;
		}
		unexpected += h[t].unexpected;
	}
	free(h);
	TH_LOG("%ld rounds (%ld STOP+close, %ld close while active, %ld STOP+drain+close), "
	       "%llu racing ioctls, %llu ok, %llu workload reads",
	       rounds, ends[0], ends[1], ends[2], (unsigned long long)calls,
	       (unsigned long long)ok, (unsigned long long)fire.reads);
	EXPECT_EQ(0, unexpected) TH_LOG("first unexpected: nr %#x errno %d (%s)", bad_cmd,
					 bad_errno, strerror(bad_errno));
	EXPECT_EQ(0, adv_settle(&m0, &m1, 0, &consumers));
	ADV_LEAK_LOG(_metadata, "after", &m0, &m1, consumers);
	ASSERT_EQ(0, audits(&a1, &f1));
	TH_LOG("dynamic memory audits at release: %llu, failed %llu",
	       (unsigned long long)(a1 - a0), (unsigned long long)(f1 - f0));
	EXPECT_LE(rounds, a1 - a0);
	EXPECT_EQ(f0, f1);
}

/*
 * A consumer process SIGKILLed at a random point: while opening, loading,
 * enabling, or draining with its probes firing on every CPU.
 */
TEST(sigkill_while_firing)
{
	long rounds = adv_count(16, 400);
	__u64 seed = adv_seed(), a0, f0, a1, f1, consumers;
	long stage[3] = { 0 };
	struct firing fire;
	struct mem m0, m1;
	struct rng r = { seed };
	int fd0 = oxt_open();

	TH_LOG("seed %#llx (OXT_SEED replays it)", (unsigned long long)seed);
	ASSERT_LE(0, fd0);
	ASSERT_EQ(0, audits(&a0, &f0));
	adv_mem(&m0);
	ASSERT_EQ(0, adv_fire_start(&fire));
	for (long i = 0; i < rounds; i++) {
		int ready[2], st, when = below(&r, 3);
		__u64 hseed = rnd(&r) | 1;
		struct oxt_status s;
		char c;
		pid_t pid;

		ASSERT_EQ(0, pipe(ready));
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			/* when = 0: killed around LOAD/GO; else: draining while active */
			struct hammer *h = calloc(1, sizeof(*h));
			int fd = oxt_open();

			if (!h || fd < 0)
				_exit(1);
			if (when == 0 && write(ready[1], "o", 1) != 1)
				_exit(1);
			if (adv_load(fd, &dyn_prog_race) || ioctl(fd, OXT_IOC_GO))
				_exit(1);
			if (when && write(ready[1], "g", 1) != 1)
				_exit(1);
			h->fd = fd;
			h->cpus = sysconf(_SC_NPROCESSORS_CONF);
			h->r.s = hseed;
			hammer_thread(h);
			_exit(0);
		}
		close(ready[1]);
		ASSERT_EQ(1, read(ready[0], &c, 1));
		close(ready[0]);
		for (int j = below(&r, when ? 600 : 40); j > 0; j--)
			oxt_status(fd0, &s);
		ASSERT_EQ(0, kill(pid, SIGKILL));
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		EXPECT_TRUE(WIFSIGNALED(st)) TH_LOG("round %ld: the child exited %d", i,
						    WEXITSTATUS(st));
		stage[when]++;
	}
	adv_fire_stop(&fire);
	close(fd0);
	TH_LOG("%ld consumers killed: %ld around LOAD/GO, %ld while draining; %llu workload reads",
	       rounds, stage[0], stage[1] + stage[2], (unsigned long long)fire.reads);
	EXPECT_EQ(0, adv_settle(&m0, &m1, 0, &consumers));
	ADV_LEAK_LOG(_metadata, "after", &m0, &m1, consumers);
	ASSERT_EQ(0, audits(&a1, &f1));
	TH_LOG("dynamic memory audits at release: %llu, failed %llu",
	       (unsigned long long)(a1 - a0), (unsigned long long)(f1 - f0));
	EXPECT_EQ(f0, f1);
}

static int cpu_online(int cpu, int on)
{
	char path[64];
	int fd, ok;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ok = write(fd, on ? "1" : "0", 1) == 1;
	close(fd);
	return ok ? 0 : -errno;
}

/*
 * CPUs go offline and come back while a consumer with dynamic variables and
 * aggregations traces every read(2): snapshots of an offline CPU are empty,
 * nothing faults, and the audit at STOP finds every chunk in its place.
 */
TEST(cpu_hotplug_while_tracing)
{
	long rounds = adv_count(3, 60);
	int ncpu = sysconf(_SC_NPROCESSORS_CONF);
	__u64 consumers, offline_snaps = 0, toggles = 0;
	struct hammer *h = calloc(1, sizeof(*h));
	struct oxt_dynstat d;
	struct firing fire;
	struct mem m0, m1;
	int fd;

	ASSERT_NE(NULL, h);
	if (ncpu < 2 || access("/sys/devices/system/cpu/cpu1/online", W_OK))
		SKIP(return, "no CPU can go offline (CONFIG_HOTPLUG_CPU, one CPU)");
	adv_mem(&m0);
	fd = oxt_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, adv_load(fd, &dyn_prog_race));
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_GO));
	ASSERT_EQ(0, adv_fire_start(&fire));
	h->fd = fd;
	h->r.s = adv_seed();
	for (long i = 0; i < rounds; i++) {
		for (int cpu = 1; cpu < ncpu; cpu++) {
			struct oxt_snapshot sn = { .size = sizeof(sn), .cpu = cpu,
						   .buf = (unsigned long)h->buf, .buf_len = BUFLEN };

			ASSERT_EQ(0, cpu_online(cpu, 0));
			toggles++;
			for (int j = 0; j < 20; j++)
				hammer_one(h, ncpu);
			/* an offline CPU gives len 0 */
			EXPECT_EQ(0, ioctl(fd, OXT_IOC_SNAPSHOT, &sn));
			EXPECT_EQ(0, sn.len);
			sn.len = 1;
			EXPECT_EQ(0, ioctl(fd, OXT_IOC_AGGSNAP, &sn));
			EXPECT_EQ(0, sn.len);
			offline_snaps += 2;
			ASSERT_EQ(0, cpu_online(cpu, 1));
			for (int j = 0; j < 20; j++)
				hammer_one(h, ncpu);
		}
	}
	EXPECT_EQ(0, ioctl(fd, OXT_IOC_STOP));
	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_DYNSTAT, &d));
	EXPECT_TRUE(d.flags & OXT_DYN_AUDITED);
	EXPECT_EQ(OXT_DYN_AUDIT_OK, d.audit_error);
	EXPECT_EQ(d.nchunks, d.audit_free + d.audit_clean + d.audit_rinsing + d.audit_dirty +
				     d.audit_in_use);
	close(fd);
	adv_fire_stop(&fire);
	TH_LOG("%llu CPU offline/online cycles, %llu snapshots of offline CPUs, %llu ioctls "
	       "(%llu unexpected), %llu workload reads",
	       (unsigned long long)toggles, (unsigned long long)offline_snaps,
	       (unsigned long long)h->calls, (unsigned long long)h->unexpected,
	       (unsigned long long)fire.reads);
	EXPECT_EQ(0, h->unexpected) TH_LOG("first unexpected: nr %#x errno %d (%s)", h->bad_cmd,
					    h->bad_errno, strerror(h->bad_errno));
	free(h);
	EXPECT_EQ(0, adv_settle(&m0, &m1, 0, &consumers));
	ADV_LEAK_LOG(_metadata, "after", &m0, &m1, consumers);
}

/*
 * Consumers open at once until the module or the fd limit refuses one (there is
 * no module limit today: the loop stops at its cap), then all closed.
 */
TEST(many_consumers_until_refusal)
{
	long cap = adv_count(2000, 20000);
	struct rlimit rl = { cap + 64, cap + 64 };
	int *fds = calloc(cap, sizeof(int));
	__u64 consumers;
	struct oxt_status s;
	struct mem m0, m1;
	long n = 0;
	int err = 0;

	ASSERT_NE(NULL, fds);
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	adv_mem(&m0);
	for (n = 0; n < cap; n++) {
		fds[n] = oxt_open();
		if (fds[n] < 0) {
			err = errno;
			break;
		}
	}
	if (n) {
		ASSERT_EQ(0, oxt_status(fds[n - 1], &s));
		EXPECT_EQ(n, s.nconsumers);
		EXPECT_EQ(n, s.live_consumers);
	}
	if (err)
		TH_LOG("%ld consumers open, the next refused: %s", n, strerror(err));
	else
		TH_LOG("%ld consumers open, none refused (the module sets no limit)", n);
	/* a refusal must be a clean one */
	EXPECT_TRUE(!err || err == ENOMEM || err == EBUSY || err == EUSERS || err == ENOSPC)
		TH_LOG("refused with %s", strerror(err));
	EXPECT_LE(1000, n);
	while (n > 0)
		close(fds[--n]);
	free(fds);
	EXPECT_EQ(0, adv_settle(&m0, &m1, 0, &consumers));
	ADV_LEAK_LOG(_metadata, "after", &m0, &m1, consumers);
}

TEST_HARNESS_MAIN
