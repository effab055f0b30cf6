// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/oxtrace: the device node, VERSION and STATUS, every error path of the
 * ioctl ABI, capabilities, consumers' independence and lifetime, and module
 * unload/reload while consumers come and go.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <linux/capability.h>

#include "oxt_test.h"
#include "dynvar_images.h"
#include "kselftest_harness.h"

/* The harness's 30 s per test is a time budget; this is only a hang guard. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 900

TEST(device_node)
{
	struct stat st;

	ASSERT_EQ(0, stat(OXT_DEV, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0600, st.st_mode & 07777);
	EXPECT_EQ(0, st.st_uid);
	/* a misc device: major 10 */
	EXPECT_EQ(10, major(st.st_rdev));
	ASSERT_EQ(0, access("/sys/class/misc/" OXT_DEVICE_NAME, F_OK));
}

TEST(version)
{
	struct oxt_version v;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_version(fd, &v));
	EXPECT_EQ(sizeof(v), v.size);
	EXPECT_EQ(OXT_ABI_MAJOR, v.abi_major);
	EXPECT_EQ(OXT_ABI_MINOR, v.abi_minor);
	EXPECT_EQ(sysconf(_SC_NPROCESSORS_CONF), v.ncpus);
	EXPECT_TRUE(v.features & OXT_FEAT_KPROBES);
	EXPECT_NE(0, v.release[0]);
	EXPECT_EQ(0, v.release[OXT_RELEASE_LEN - 1]);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(0, v.reserved[i]);
	close(fd);
}

/* The PT feature bit says what the CPU says, nothing else. */
TEST(version_pt_bit_matches_cpu)
{
	struct oxt_version v;
	char line[4096];
	bool pt = false;
	FILE *f = fopen("/proc/cpuinfo", "r");
	int fd = oxt_open();

	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5) && strstr(line, " intel_pt"))
			pt = true;
	fclose(f);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_version(fd, &v));
	EXPECT_EQ(pt, !!(v.features & OXT_FEAT_INTEL_PT));
	close(fd);
}

/* Output fields are written by the kernel whatever user space left in them. */
TEST(version_overwrites_output)
{
	struct oxt_version v;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	memset(&v, 0xa5, sizeof(v));
	v.size = sizeof(v);
	memset(v.reserved, 0, sizeof(v.reserved));
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_VERSION, &v));
	EXPECT_EQ(OXT_ABI_MAJOR, v.abi_major);
	EXPECT_EQ(0, v.release[OXT_RELEASE_LEN - 1]);
	close(fd);
}

TEST(status_fresh)
{
	struct oxt_status s1, s2;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_status(fd, &s1));
	EXPECT_EQ(OXT_STATE_IDLE, s1.state);
	EXPECT_NE(0, s1.consumer_id);
	EXPECT_EQ(1, s1.nconsumers);
	EXPECT_EQ(1, s1.live_consumers);
	EXPECT_EQ(1, s1.ioctls);
	EXPECT_NE(0, s1.opened_ns);
	ASSERT_EQ(0, oxt_status(fd, &s2));
	EXPECT_EQ(s1.consumer_id, s2.consumer_id);
	EXPECT_EQ(2, s2.ioctls);
	EXPECT_EQ(s1.opened_ns, s2.opened_ns);
	close(fd);
}

TEST(unknown_command_enotty)
{
	int fd = oxt_open();
	char buf[8] = { 0 };
	struct termios t;

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, ioctl(fd, _IO(OXT_IOC_MAGIC, 0x7f)));
	EXPECT_EQ(ENOTTY, errno);
	/* the right number with another size is another command */
	EXPECT_EQ(-1, ioctl(fd, _IOWR(OXT_IOC_MAGIC, 0x00, char[8]), buf));
	EXPECT_EQ(ENOTTY, errno);
	/* the right number with another direction too */
	EXPECT_EQ(-1, ioctl(fd, _IOR(OXT_IOC_MAGIC, 0x01, struct oxt_status), buf));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, tcgetattr(fd, &t));
	EXPECT_EQ(ENOTTY, errno);
	close(fd);
}

TEST(bad_pointer_efault)
{
	long page = sysconf(_SC_PAGESIZE);
	struct oxt_version *v;
	char *map;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_VERSION, NULL));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_STATUS, (void *)1));
	EXPECT_EQ(EFAULT, errno);
	/* a kernel address */
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_STATUS, (void *)0xffffffff81000000UL));
	EXPECT_EQ(EFAULT, errno);

	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, map);
	/* a struct that runs off the end of its mapping */
	ASSERT_EQ(0, mprotect(map + page, page, PROT_NONE));
	v = (struct oxt_version *)(map + page - 16);
	v->size = sizeof(*v);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_VERSION, v));
	EXPECT_EQ(EFAULT, errno);
	/* readable but not writable: the answer can't be written back */
	v = (struct oxt_version *)map;
	memset(v, 0, sizeof(*v));
	v->size = sizeof(*v);
	ASSERT_EQ(0, mprotect(map, page, PROT_READ));
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_VERSION, v));
	EXPECT_EQ(EFAULT, errno);
	munmap(map, 2 * page);

	/* and the consumer still works */
	struct oxt_version ok;

	EXPECT_EQ(0, oxt_version(fd, &ok));
	close(fd);
}

TEST(wrong_size_einval)
{
	__u32 sizes[] = { 0, 4, sizeof(struct oxt_version) - 1, sizeof(struct oxt_version) + 8,
			  0xffffffff };
	struct oxt_version v;
	struct oxt_status s;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(&v, 0, sizeof(v));
		v.size = sizes[i];
		EXPECT_EQ(-1, ioctl(fd, OXT_IOC_VERSION, &v));
		EXPECT_EQ(EINVAL, errno);
		/* nothing was written back */
		EXPECT_EQ(0, v.abi_major);
	}
	memset(&s, 0, sizeof(s));
	s.size = sizeof(struct oxt_version);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_STATUS, &s));
	EXPECT_EQ(EINVAL, errno);
	close(fd);
}

TEST(reserved_nonzero_einval)
{
	struct oxt_version v;
	struct oxt_status s;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	for (int i = 0; i < 4; i++) {
		memset(&v, 0, sizeof(v));
		v.size = sizeof(v);
		v.reserved[i] = 1ULL << (i * 13);
		EXPECT_EQ(-1, ioctl(fd, OXT_IOC_VERSION, &v));
		EXPECT_EQ(EINVAL, errno);
	}
	for (unsigned int i = 0; i < sizeof(s.reserved) / sizeof(s.reserved[0]); i++) {
		memset(&s, 0, sizeof(s));
		s.size = sizeof(s);
		s.reserved[i] = ~0ULL;
		EXPECT_EQ(-1, ioctl(fd, OXT_IOC_STATUS, &s));
		EXPECT_EQ(EINVAL, errno);
	}
	close(fd);
}

/* Keep uid 0 (so the 0600 node is accessible) but drop the given capabilities. */
static int drop_caps(const int *caps, int n)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return -1;
	for (int i = 0; i < n; i++) {
		data[caps[i] / 32].effective &= ~(1U << (caps[i] % 32));
		data[caps[i] / 32].permitted &= ~(1U << (caps[i] % 32));
		data[caps[i] / 32].inheritable &= ~(1U << (caps[i] % 32));
	}
	return syscall(SYS_capset, &hdr, data);
}

/* Runs open() in a child with `caps` dropped; returns 0 or the errno. */
static int open_without(const int *caps, int n)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd;

		if (drop_caps(caps, n))
			_exit(200);
		fd = oxt_open();
		_exit(fd < 0 ? errno : 0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(no_capability_eperm)
{
	int both[] = { CAP_SYS_ADMIN, CAP_PERFMON };
	int admin[] = { CAP_SYS_ADMIN };
	int perfmon[] = { CAP_PERFMON };

	EXPECT_EQ(EPERM, open_without(both, 2));
	/* either one is enough */
	EXPECT_EQ(0, open_without(admin, 1));
	EXPECT_EQ(0, open_without(perfmon, 1));
}

/* Bits of what a child saw, for its exit status. */
#define PRIV_STATUS_FAIL	0x01
#define PRIV_LOAD_OK		0x02
#define PRIV_GO_OK		0x04
#define PRIV_PTCFG_OK		0x08
#define PRIV_PTSTART_OK		0x10
#define PRIV_SETUP_FAIL		0x40

/* 0 if `ret` failed with EPERM, else `bit`. */
static int eperm_or(int ret, int bit)
{
	return ret == -1 && errno == EPERM ? 0 : bit;
}

/* The ioctls that load or start, each expected to fail with EPERM. */
static int loads_and_starts_refused(int fd)
{
	struct oxt_load l = { .size = sizeof(l) };
	struct oxt_pt_config c = { .size = sizeof(c) };
	int r = 0;

	r |= eperm_or(ioctl(fd, OXT_IOC_LOAD, &l), PRIV_LOAD_OK);
	r |= eperm_or(ioctl(fd, OXT_IOC_GO), PRIV_GO_OK);
	r |= eperm_or(ioctl(fd, OXT_IOC_PT_CONFIG, &c), PRIV_PTCFG_OK);
	r |= eperm_or(ioctl(fd, OXT_IOC_PT_START), PRIV_PTSTART_OK);
	return r;
}

/*
 * An fd opened with privilege and inherited across a privilege drop (both
 * capabilities gone, uid and gid 65534) can still be read, but can't load or
 * start anything: each such ioctl checks the caller, not the opener.
 */
TEST(inherited_fd_needs_privilege)
{
	int both[] = { CAP_SYS_ADMIN, CAP_PERFMON };
	struct oxt_status s;
	int status;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	/* the opener itself gets the ordinary answer: no program to start */
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_GO));
	EXPECT_EQ(ENOENT, errno);
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct oxt_status c;
		int r = 0;

		if (drop_caps(both, 2) || setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(PRIV_SETUP_FAIL);
		if (oxt_status(fd, &c) || c.state != OXT_STATE_IDLE)
			r |= PRIV_STATUS_FAIL;
		r |= loads_and_starts_refused(fd);
		_exit(r);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* nothing happened to the consumer */
	ASSERT_EQ(0, oxt_status(fd, &s));
	EXPECT_EQ(OXT_STATE_IDLE, s.state);
	close(fd);
}

/* Bits of the node test's child. */
#define NODE_OPEN_FAIL		0x01
#define NODE_VERSION_FAIL	0x02
#define NODE_NOCAP_NOT_EPERM	0x04
#define NODE_NOGROUP_NOT_EACCES	0x08

/* An arbitrary group standing for the udev rule's "oxtrace". */
#define NODE_GID		4242

/* Sets the effective and permitted capabilities to `caps` only. */
static int set_caps(const int *caps, int n)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};

	for (int i = 0; i < n; i++) {
		data[caps[i] / 32].effective |= 1U << (caps[i] % 32);
		data[caps[i] / 32].permitted |= 1U << (caps[i] % 32);
	}
	return syscall(SYS_capset, &hdr, data);
}

/*
 * A non-root user with CAP_PERFMON, in the node's group, opens the node once it
 * is 0660 and group-owned as scripts/udev/60-oxtrace.rules makes it (no udev in
 * the guest: the test applies the rule's result itself). The group alone is
 * not enough (EPERM), nor CAP_PERFMON outside the group (EACCES).
 */
TEST(perfmon_user_in_node_group)
{
	int perfmon[] = { CAP_PERFMON };
	gid_t grp = NODE_GID;
	struct stat st;
	int status;

	ASSERT_EQ(0, chown(OXT_DEV, 0, NODE_GID));
	ASSERT_EQ(0, chmod(OXT_DEV, 0660));
	pid_t pid = fork();

	if (pid == 0) {
		struct oxt_version v;
		int r = 0, fd;

		/* keep the permitted set across setuid, then narrow it to CAP_PERFMON */
		if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) || setgroups(1, &grp) ||
		    setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534) ||
		    set_caps(perfmon, 1))
			_exit(PRIV_SETUP_FAIL);
		fd = oxt_open();
		if (fd < 0)
			r |= NODE_OPEN_FAIL;
		else if (oxt_version(fd, &v))
			r |= NODE_VERSION_FAIL;
		if (fd >= 0)
			close(fd);
		/* in the group, without the capability */
		if (set_caps(NULL, 0))
			_exit(PRIV_SETUP_FAIL);
		fd = oxt_open();
		if (fd >= 0 || errno != EPERM)
			r |= NODE_NOCAP_NOT_EPERM;
		_exit(r);
	}
	/* restore the kernel's node before any assertion can end the test */
	if (pid > 0)
		waitpid(pid, &status, 0);
	pid_t pid2 = fork();
	int status2 = 0;

	if (pid2 == 0) {
		int fd;

		if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) || setgroups(0, NULL) ||
		    setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534) ||
		    set_caps(perfmon, 1))
			_exit(PRIV_SETUP_FAIL);
		fd = oxt_open();
		_exit(fd < 0 && errno == EACCES ? 0 : NODE_NOGROUP_NOT_EACCES);
	}
	if (pid2 > 0)
		waitpid(pid2, &status2, 0);
	EXPECT_EQ(0, chown(OXT_DEV, 0, 0));
	EXPECT_EQ(0, chmod(OXT_DEV, 0600));
	ASSERT_LE(0, pid);
	ASSERT_LE(0, pid2);
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_TRUE(WIFEXITED(status2));
	EXPECT_EQ(0, WEXITSTATUS(status2));
	ASSERT_EQ(0, stat(OXT_DEV, &st));
	EXPECT_EQ(0600, st.st_mode & 07777);
	EXPECT_EQ(0, st.st_gid);
}

#define MAX_CONSUMERS_PARAM "/sys/module/oxtrace/parameters/max_consumers"

static int write_param(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -1;
	ret = write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
	close(fd);
	return ret;
}

/* Opens consumers until the module refuses one; returns how many, closed again. */
static int open_until_refused(int *fds, int max, int *err)
{
	int n = 0;

	*err = 0;
	while (n < max) {
		int fd = oxt_open();

		if (fd < 0) {
			*err = errno;
			break;
		}
		fds[n++] = fd;
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return n;
}

/*
 * Consumers are bounded by max_consumers (default 1024): the next open gets
 * EBUSY, which RLIMIT_NOFILE's EMFILE can't be mistaken for; a close makes room.
 */
TEST(consumers_bounded_ebusy)
{
	struct rlimit rl = { .rlim_cur = 4096, .rlim_max = 4096 };
	static int fds[1200];
	char buf[32] = "";
	int err, n, fd;

	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	fd = open(MAX_CONSUMERS_PARAM, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_LT(0, read(fd, buf, sizeof(buf) - 1));
	close(fd);
	EXPECT_EQ(1024, atoi(buf));
	n = open_until_refused(fds, 1200, &err);
	EXPECT_EQ(1024, n);
	EXPECT_EQ(EBUSY, err);
	/* all closed again: there is room */
	fd = oxt_open();
	ASSERT_LE(0, fd);
	close(fd);
	/* the bound applies at once when lowered at run time */
	ASSERT_EQ(0, write_param(MAX_CONSUMERS_PARAM, "4"));
	n = open_until_refused(fds, 1200, &err);
	EXPECT_EQ(0, write_param(MAX_CONSUMERS_PARAM, "1024"));
	EXPECT_EQ(4, n);
	EXPECT_EQ(EBUSY, err);
}

/*
 * LOAD itself refuses a function that is unsafe to probe (rust/core/probesafe.rs), whatever
 * the tool does: rethook calls rcu_read_lock_held_common after every return handler, so a
 * return probe there would recurse.  A single name is EPERM with OXT_LOADERR_UNSAFE; the
 * same name from a glob (OXT_ATTACH_OPTIONAL) is skipped and counted.
 */
TEST(unsafe_function_refused)
{
	static const char names[] = "__x64_sys_lseek\0rcu_read_lock_held_common";
	struct oxt_attach att[3] = {
		{ .probe = 0, .name = 0 },
		{ .probe = 1, .name = 16 },
		{ .probe = 1, .name = 0 },
	};
	struct oxt_load l;
	int fd = open(OXT_DEV, O_RDWR);

	ASSERT_LE(0, fd);
	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	l.image = (unsigned long)dyn_img_latency;
	l.image_len = sizeof(dyn_img_latency);
	l.attach = (unsigned long)att;
	l.names = (unsigned long)names;
	l.names_len = sizeof(names);
	l.nattach = 2;
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_LOAD, &l));
	EXPECT_EQ(EPERM, errno);
	EXPECT_EQ(OXT_LOADERR_UNSAFE, l.err_kind);
	EXPECT_EQ(1, l.err_index);
	EXPECT_EQ(3, l.err_code);	/* probesafe::Why::Rcu */

	att[1].flags = OXT_ATTACH_OPTIONAL;
	l.nattach = 3;
	l.err_kind = l.err_index = l.err_code = 0;
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_LOAD, &l));
	EXPECT_EQ(2, l.nprobes);
	EXPECT_EQ(1, l.nskipped);
	close(fd);
}

TEST(rmmod_while_open_fails)
{
	struct oxt_version v;
	char line[256];
	bool listed = false;
	FILE *f;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	/* the kernel refuses to unload a module in use: EWOULDBLOCK ("in use") */
	EXPECT_EQ(-1, syscall(SYS_delete_module, "oxtrace", O_NONBLOCK));
	EXPECT_EQ(EWOULDBLOCK, errno);
	f = fopen("/proc/modules", "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "oxtrace ", 8))
			listed = strstr(line, " Live ") != NULL;
	fclose(f);
	EXPECT_TRUE(listed);
	EXPECT_EQ(0, oxt_version(fd, &v));
	close(fd);
}

TEST(open_close_1000_no_leak)
{
	struct oxt_status s;
	__u64 last = 0;

	for (int i = 0; i < 1000; i++) {
		int fd = oxt_open();

		ASSERT_LE(0, fd);
		ASSERT_EQ(0, oxt_status(fd, &s));
		ASSERT_LT(last, s.consumer_id);
		last = s.consumer_id;
		ASSERT_EQ(0, close(fd));
	}
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_status(fd, &s));
	EXPECT_EQ(1, s.nconsumers);
	EXPECT_EQ(1, s.live_consumers);
	close(fd);
}

TEST(two_consumers_independent)
{
	struct oxt_status a, b;
	int fa = oxt_open(), fb = oxt_open();

	ASSERT_LE(0, fa);
	ASSERT_LE(0, fb);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, oxt_status(fa, &a));
	ASSERT_EQ(0, oxt_status(fb, &b));
	EXPECT_NE(a.consumer_id, b.consumer_id);
	EXPECT_EQ(3, a.ioctls);
	EXPECT_EQ(1, b.ioctls);
	EXPECT_EQ(2, b.nconsumers);
	ASSERT_EQ(0, close(fa));
	ASSERT_EQ(0, oxt_status(fb, &b));
	EXPECT_EQ(2, b.ioctls);
	EXPECT_EQ(1, b.nconsumers);
	close(fb);
}

#define NTHREADS 8
#define NCALLS 2000

struct worker {
	int shared_fd;
	int cpu;
	int errors;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	struct oxt_version v;
	struct oxt_status s;
	cpu_set_t set;
	int own = oxt_open();

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	if (own < 0) {
		w->errors++;
		return NULL;
	}
	for (int i = 0; i < NCALLS; i++) {
		if (oxt_status(w->shared_fd, &s) || oxt_version(own, &v))
			w->errors++;
	}
	if (oxt_status(own, &s) || s.ioctls != NCALLS + 1)
		w->errors++;
	close(own);
	return NULL;
}

/* ioctls from every CPU at once, on a shared consumer and on private ones. */
TEST(concurrent_ioctls_all_cpus)
{
	pthread_t th[NTHREADS];
	struct worker w[NTHREADS];
	struct oxt_status s;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .shared_fd = fd, .cpu = i % ncpu };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, hammer, &w[i]));
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, w[i].errors);
	}
	ASSERT_EQ(0, oxt_status(fd, &s));
	EXPECT_EQ(NTHREADS * NCALLS + 1, s.ioctls);
	EXPECT_EQ(1, s.nconsumers);
	close(fd);
}

/* A consumer whose process is killed mid-ioctl-storm is released exactly once. */
TEST(killed_consumer_released)
{
	struct oxt_status s;
	int status, fd, ready[2];
	char c;

	ASSERT_EQ(0, pipe(ready));
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		int cfd = oxt_open();
		struct oxt_status cs;

		/* the storm has begun when the parent hears of it */
		oxt_status(cfd, &cs);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			oxt_status(cfd, &cs);
	}
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	close(ready[0]);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	fd = oxt_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_status(fd, &s));
	EXPECT_EQ(1, s.nconsumers);
	EXPECT_EQ(1, s.live_consumers);
	close(fd);
}

/* A consumer shared across fork lives until its last file reference goes. */
TEST(fork_shares_consumer)
{
	struct oxt_status s, p;
	int status, closed[2];
	int fd = oxt_open();
	char b;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_status(fd, &p));
	ASSERT_EQ(0, pipe(closed));
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct oxt_status c;

		/* after the parent has closed its copy */
		close(closed[1]);
		if (read(closed[0], &b, 1) != 1)
			_exit(2);
		if (oxt_status(fd, &c) || c.consumer_id != p.consumer_id || c.nconsumers != 1)
			_exit(1);
		_exit(0);
	}
	close(closed[0]);
	close(fd);
	ASSERT_EQ(1, write(closed[1], "c", 1));
	close(closed[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	fd = oxt_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_status(fd, &s));
	EXPECT_EQ(1, s.live_consumers);
	close(fd);
}

static int load_module(void)
{
	int fd = open(OXT_KO, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	return ret;
}

/* Last: unloads and reloads the module (and leaves it loaded). */
TEST(unload_reload_cycles)
{
	struct oxt_version v;
	struct stat st;

	for (int i = 0; i < 3; i++) {
		int fd;

		ASSERT_EQ(0, syscall(SYS_delete_module, "oxtrace", O_NONBLOCK)) {
			TH_LOG("rmmod: %s", strerror(errno));
		}
		EXPECT_EQ(-1, stat(OXT_DEV, &st));
		EXPECT_EQ(ENOENT, errno);
		EXPECT_EQ(-1, oxt_open());
		ASSERT_EQ(0, load_module());
		fd = oxt_open();
		ASSERT_LE(0, fd);
		EXPECT_EQ(0, oxt_version(fd, &v));
		close(fd);
	}
	/* loading twice is refused and harmless */
	EXPECT_EQ(-EEXIST, load_module());
}

TEST_HARNESS_MAIN
