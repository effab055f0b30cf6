// SPDX-License-Identifier: GPL-2.0
/*
 * User-space probes (the pid and USDT providers, ABI 1.11) through the raw
 * ioctls: LOAD's refusals of the uattach table, and real firings in a child
 * process, oxt_utarget, that calls oxt_utarget_fn(42, 43) when told to over a
 * pipe.  The probe's file offset comes from the binary's symbol table.  Its
 * fired count in PROBES must be exactly the calls made in that process after
 * GO: not those before GO, not those of a child it forks, not those after it
 * execs; closing the device unregisters everything and the function runs on.
 * The images (uprobe_images.h) fault on purpose when an argument has the
 * value expected, so the errors PROBES counts prove the arguments too.
 */
#include <elf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "oxt_test.h"
#include "uprobe_images.h"
#include "kselftest_harness.h"

#define TARGET_FN "oxt_utarget_fn"

/* The directory this test runs from: oxt_utarget is beside it. */
static char target_path[4096];

static void find_target(void)
{
	ssize_t n = readlink("/proc/self/exe", target_path, sizeof(target_path) - 32);
	char *slash;

	if (n < 0)
		n = 0;
	target_path[n] = 0;
	slash = strrchr(target_path, '/');
	strcpy(slash ? slash + 1 : target_path, "oxt_utarget");
}

/*
 * The file offset of symbol `name` in ELF file `path`, and in *ret the file
 * offset of the last ret (0xc3) among its bytes (0 if none); 0 if not found.
 */
static __u64 sym_offset(const char *path, const char *name, __u64 *ret_at)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	__u64 ret = 0;
	struct stat st;
	const unsigned char *m;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const Elf64_Phdr *ph;

	if (fd < 0 || fstat(fd, &st))
		return 0;
	m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return 0;
	eh = (const void *)m;
	sh = (const void *)(m + eh->e_shoff);
	ph = (const void *)(m + eh->e_phoff);
	for (int i = 0; i < eh->e_shnum && !ret; i++) {
		const Elf64_Sym *sym;
		const char *str;

		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		sym = (const void *)(m + sh[i].sh_offset);
		str = (const char *)(m + sh[sh[i].sh_link].sh_offset);
		for (size_t j = 0; j < sh[i].sh_size / sizeof(*sym); j++) {
			if (strcmp(str + sym[j].st_name, name))
				continue;
			/* the loadable segment that holds it: vaddr to file offset */
			for (int k = 0; k < eh->e_phnum; k++) {
				if (ph[k].p_type == PT_LOAD && sym[j].st_value >= ph[k].p_vaddr &&
				    sym[j].st_value < ph[k].p_vaddr + ph[k].p_filesz)
					ret = sym[j].st_value - ph[k].p_vaddr + ph[k].p_offset;
			}
			*ret_at = 0;
			for (__u64 b = 0; ret && b < sym[j].st_size; b++)
				if (ret + b < (__u64)st.st_size && m[ret + b] == 0xc3)
					*ret_at = ret + b;
			break;
		}
	}
	munmap((void *)m, st.st_size);
	return ret;
}

/* The probed child: its pid and the two ends of its pipes. */
struct target {
	pid_t pid;
	int cmd;	/* its stdin */
	int ack;	/* its stdout */
};

/* Waits for the target's "d": it answers once ready, in its own image. */
static int wait_ready(struct target *t)
{
	char buf[2];

	return read(t->ack, buf, 2) == 2 && buf[0] == 'd' ? 0 : -1;
}

/*
 * Starts the target and waits until it has exec'd: a LOAD before that would
 * name the forked copy of this process's address space, which exec replaces.
 */
static int start_target(struct target *t)
{
	int in[2], out[2];

	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (!t->pid) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(target_path, "oxt_utarget", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->cmd = in[1];
	t->ack = out[0];
	return wait_ready(t);
}

/* Sends one command and waits for the target's "d". */
static int tell(struct target *t, const char *cmd)
{
	if (write(t->cmd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd))
		return -1;
	return wait_ready(t);
}

/* Tells the target to quit; its exit status, or -1. */
static int stop_target(struct target *t)
{
	int st;

	if (write(t->cmd, "q\n", 2) != 2)
		kill(t->pid, SIGKILL);
	close(t->cmd);
	close(t->ack);
	if (waitpid(t->pid, &st, 0) != t->pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A pid no process has: a child's, reaped. */
static pid_t dead_pid(void)
{
	pid_t p = fork();

	if (!p)
		_exit(0);
	waitpid(p, NULL, 0);
	return p;
}

struct ld {
	struct oxt_load l;
	struct oxt_uattach u[4];
	struct oxt_usdt_arg a[16];
	char names[4096];
	size_t off;
};

static __u32 add_name(struct ld *d, const char *s)
{
	__u32 at = d->off;

	strcpy(d->names + d->off, s);
	d->off += strlen(s) + 1;
	return at;
}

/* A LOAD of `img` with n uattach entries, each on the target's function for `pid`. */
static void ld_init(struct ld *d, const unsigned char *img, size_t len, unsigned int n,
		    pid_t pid, __u64 offset)
{
	__u32 name, path;

	memset(d, 0, sizeof(*d));
	name = add_name(d, "pid:oxt_utarget:" TARGET_FN ":entry");
	path = add_name(d, target_path);
	for (unsigned int i = 0; i < n; i++)
		d->u[i] = (struct oxt_uattach){
			.probe = 0, .name = name, .path = path, .offset = offset, .pid = pid,
		};
	d->l.size = sizeof(d->l);
	d->l.image = (unsigned long)img;
	d->l.image_len = len;
	d->l.uattach = (unsigned long)d->u;
	d->l.nuattach = n;
	d->l.usdt_args = (unsigned long)d->a;
}

static int ld_load(int fd, struct ld *d)
{
	d->l.names = (unsigned long)d->names;
	d->l.names_len = d->off;
	return ioctl(fd, OXT_IOC_LOAD, &d->l) ? -errno : 0;
}

/* PROBES: slot i's info. */
static int probe_info(int fd, unsigned int i, struct oxt_probe_info *out)
{
	struct oxt_probe_info info[8];
	struct oxt_probes p = { .size = sizeof(p), .n = 8, .info = (unsigned long)info };

	if (ioctl(fd, OXT_IOC_PROBES, &p) || i >= p.n)
		return -1;
	*out = info[i];
	return 0;
}

FIXTURE(up)
{
	int fd;
	__u64 off;
	__u64 ret_off;	/* the function's ret instruction */
	struct target t;
	struct ld d;
};

FIXTURE_SETUP(up)
{
	struct oxt_version v;

	self->t.pid = 0;
	find_target();
	self->fd = oxt_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, oxt_version(self->fd, &v));
	if (!(v.features & OXT_FEAT_UPROBES))
		SKIP(return, "the kernel has no uprobes");
	self->off = sym_offset(target_path, TARGET_FN, &self->ret_off);
	ASSERT_NE(0, self->off) TH_LOG("no %s in %s", TARGET_FN, target_path);
	ASSERT_EQ(0, start_target(&self->t));
}

FIXTURE_TEARDOWN(up)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->t.pid > 0)
		stop_target(&self->t);
}

#define LOAD_PID(d, n, pid) ld_init(d, uprobe_img_pid, sizeof(uprobe_img_pid), n, pid, self->off)

TEST_F(up, refuse_dead_pid_esrch_with_index)
{
	LOAD_PID(&self->d, 2, self->t.pid);
	self->d.u[1].pid = dead_pid();
	EXPECT_EQ(-ESRCH, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_UATTACH, self->d.l.err_kind);
	EXPECT_EQ(1, self->d.l.err_index);
	/* entry 0 was placed, then taken down: LOAD again works */
	LOAD_PID(&self->d, 1, self->t.pid);
	EXPECT_EQ(0, ld_load(self->fd, &self->d));
	EXPECT_EQ(1, self->d.l.nuprobes);
}

TEST_F(up, refuse_own_process_eperm)
{
	LOAD_PID(&self->d, 1, getpid());
	EXPECT_EQ(-EPERM, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_UATTACH, self->d.l.err_kind);
}

TEST_F(up, refuse_kernel_thread_einval)
{
	/* kthreadd */
	LOAD_PID(&self->d, 1, 2);
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_UATTACH, self->d.l.err_kind);
}

TEST_F(up, refuse_missing_file_enoent)
{
	LOAD_PID(&self->d, 1, self->t.pid);
	self->d.u[0].path = add_name(&self->d, "/nonexistent/oxt_utarget");
	EXPECT_EQ(-ENOENT, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_UATTACH, self->d.l.err_kind);
	/* a directory is no regular file */
	self->d.u[0].path = add_name(&self->d, "/");
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
}

TEST_F(up, refuse_offset_past_end_einval)
{
	struct stat st;

	ASSERT_EQ(0, stat(target_path, &st));
	LOAD_PID(&self->d, 1, self->t.pid);
	self->d.u[0].offset = st.st_size;
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_UATTACH, self->d.l.err_kind);
	EXPECT_EQ(0, self->d.l.err_index);
}

TEST_F(up, refuse_malformed_entries)
{
	/* reserved word: code 1 */
	LOAD_PID(&self->d, 2, self->t.pid);
	self->d.u[1].reserved = 1;
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_UATTACH, self->d.l.err_kind);
	EXPECT_EQ(1, self->d.l.err_index);
	EXPECT_EQ(1, self->d.l.err_code);
	/* struct oxt_load's own reserved word */
	LOAD_PID(&self->d, 1, self->t.pid);
	self->d.l.reserved0 = 1;
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	/* a path that is not absolute: code 4 */
	LOAD_PID(&self->d, 1, self->t.pid);
	self->d.u[0].path = add_name(&self->d, "oxt_utarget");
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(4, self->d.l.err_code);
	/* USDT operands on a pid probe: code 6 */
	LOAD_PID(&self->d, 1, self->t.pid);
	self->d.u[0].nargs = 1;
	self->d.l.nusdt_args = 1;
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(6, self->d.l.err_code);
	/* a table over the limit */
	LOAD_PID(&self->d, 1, self->t.pid);
	self->d.l.nuattach = 1 << 20;
	EXPECT_EQ(-E2BIG, ld_load(self->fd, &self->d));
}

TEST_F(up, refuse_bad_usdt_operands)
{
	ld_init(&self->d, uprobe_img_usdt, sizeof(uprobe_img_usdt), 2, self->t.pid, self->off);
	self->d.u[1].probe = 1;
	for (int i = 0; i < 13; i++)
		self->d.a[i] = (struct oxt_usdt_arg){
			.kind = OXT_USDT_ARG_CONST, .size = 8, .base = OXT_UREG_NONE,
			.index = OXT_UREG_NONE, .scale = 1, .value = i,
		};
	self->d.l.nusdt_args = 13;
	self->d.u[1].nargs = 13;
	EXPECT_EQ(-E2BIG, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_UATTACH, self->d.l.err_kind);
	EXPECT_EQ(1, self->d.l.err_index);
	/* operand 2 of entry 1 has size 3: code 9, err_arg 2 */
	self->d.u[1].nargs = 3;
	self->d.a[2].size = 3;
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(9, self->d.l.err_code);
	EXPECT_EQ(2, self->d.l.err_arg);
	/* a register past uregs[] */
	self->d.a[2] = (struct oxt_usdt_arg){
		.kind = OXT_USDT_ARG_REG, .size = 8, .base = 26, .index = OXT_UREG_NONE,
	};
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	/* past the table */
	self->d.a[2].base = 14;
	self->d.u[1].arg_first = 12;
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(7, self->d.l.err_code);
	/* reserved */
	self->d.u[1].arg_first = 0;
	self->d.a[0].reserved = 1;
	EXPECT_EQ(-EINVAL, ld_load(self->fd, &self->d));
	EXPECT_EQ(9, self->d.l.err_code);
	self->d.a[0].reserved = 0;
	EXPECT_EQ(0, ld_load(self->fd, &self->d));
	EXPECT_EQ(2, self->d.l.nuprobes);
}

TEST_F(up, optional_entry_skipped)
{
	LOAD_PID(&self->d, 2, self->t.pid);
	self->d.u[0].pid = dead_pid();
	self->d.u[0].flags = OXT_ATTACH_OPTIONAL;
	ASSERT_EQ(0, ld_load(self->fd, &self->d));
	EXPECT_EQ(1, self->d.l.nskipped);
	EXPECT_EQ(1, self->d.l.nuprobes);
	/* every entry of the description skipped: it enables nothing */
	close(self->fd);
	self->fd = oxt_open();
	LOAD_PID(&self->d, 1, dead_pid());
	self->d.u[0].flags = OXT_ATTACH_OPTIONAL;
	EXPECT_EQ(-ENOENT, ld_load(self->fd, &self->d));
	EXPECT_EQ(OXT_LOADERR_PROBE, self->d.l.err_kind);
}

TEST_F(up, fires_in_target_only)
{
	struct oxt_probe_info pi;

	LOAD_PID(&self->d, 1, self->t.pid);
	ASSERT_EQ(0, ld_load(self->fd, &self->d));
	ASSERT_EQ(1, self->d.l.nuprobes);
	/* before GO: the breakpoint is there, the hits are not counted */
	ASSERT_EQ(0, tell(&self->t, "c 2\n"));
	ASSERT_EQ(0, probe_info(self->fd, 0, &pi));
	EXPECT_EQ(0, pi.fired);
	EXPECT_EQ(0, pi.flags);
	EXPECT_STREQ("pid:oxt_utarget:" TARGET_FN ":entry", pi.func);
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_GO));
	ASSERT_EQ(0, tell(&self->t, "c 7\n"));
	ASSERT_EQ(0, probe_info(self->fd, 0, &pi));
	EXPECT_EQ(7, pi.fired);
	/* every firing saw arg1 == 43 (and faulted for it) */
	EXPECT_EQ(7, pi.errors);
	/* a forked child inherits the breakpoint; its hits are not the target's */
	ASSERT_EQ(0, tell(&self->t, "f 5\n"));
	ASSERT_EQ(0, tell(&self->t, "c 1\n"));
	ASSERT_EQ(0, probe_info(self->fd, 0, &pi));
	EXPECT_EQ(8, pi.fired);
	/* after exec the process has a new address space: no more hits */
	ASSERT_EQ(0, tell(&self->t, "e\n"));
	ASSERT_EQ(0, tell(&self->t, "c 3\n"));
	ASSERT_EQ(0, probe_info(self->fd, 0, &pi));
	EXPECT_EQ(8, pi.fired);
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_STOP));
}

TEST_F(up, return_probe_args)
{
	struct oxt_probe_info pi;

	/* the compiler's ret: the test needs it to be the function's last 0xc3 */
	ASSERT_NE(0, self->ret_off);
	ld_init(&self->d, uprobe_img_ret, sizeof(uprobe_img_ret), 1, self->t.pid, self->ret_off);
	self->d.u[0].name = add_name(&self->d, "pid:oxt_utarget:" TARGET_FN ":return");
	self->d.u[0].roff = 21;
	ASSERT_EQ(0, ld_load(self->fd, &self->d));
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_GO));
	ASSERT_EQ(0, tell(&self->t, "c 4\n"));
	ASSERT_EQ(0, probe_info(self->fd, 0, &pi));
	EXPECT_EQ(OXT_PROBE_RETURN, pi.flags);
	EXPECT_EQ(4, pi.fired);
	/* each of the three clauses faulted: arg0 == roff, arg1 == retval == 42 + 43 */
	EXPECT_EQ(12, pi.errors);
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_STOP));
}

TEST_F(up, stacks)
{
	struct oxt_probe_info pi;

	ld_init(&self->d, uprobe_img_stacks, sizeof(uprobe_img_stacks), 1, self->t.pid,
		self->off);
	ASSERT_EQ(0, ld_load(self->fd, &self->d));
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_GO));
	ASSERT_EQ(0, tell(&self->t, "c 3\n"));
	ASSERT_EQ(0, probe_info(self->fd, 0, &pi));
	EXPECT_EQ(3, pi.fired);
	/* both clauses faulted: a user stack to walk, no kernel stack */
	EXPECT_EQ(6, pi.errors);
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_STOP));
}

TEST_F(up, close_unregisters)
{
	LOAD_PID(&self->d, 1, self->t.pid);
	ASSERT_EQ(0, ld_load(self->fd, &self->d));
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_GO));
	ASSERT_EQ(0, tell(&self->t, "c 3\n"));
	close(self->fd);
	self->fd = -1;
	/* the function runs on, breakpoint gone */
	ASSERT_EQ(0, tell(&self->t, "c 4\n"));
	ASSERT_EQ(0, tell(&self->t, "f 2\n"));
	EXPECT_EQ(0, stop_target(&self->t));
	self->t.pid = 0;
}

TEST_F(up, usdt_operands)
{
	struct oxt_probe_info pi;

	ld_init(&self->d, uprobe_img_usdt, sizeof(uprobe_img_usdt), 2, self->t.pid, self->off);
	self->d.u[0].name = add_name(&self->d, "oxt:oxt_utarget:" TARGET_FN ":first");
	self->d.u[1].name = add_name(&self->d, "oxt:oxt_utarget:" TARGET_FN ":second");
	self->d.u[1].probe = 1;
	/* entry 0: arg0 = %rdi (uregs 14), as a signed int */
	self->d.a[0] = (struct oxt_usdt_arg){
		.kind = OXT_USDT_ARG_REG, .size = 4, .is_signed = 1, .base = 14,
		.index = OXT_UREG_NONE,
	};
	self->d.u[0].nargs = 1;
	/* entry 1: arg0 = 5, arg1 = the 8 bytes at 16 + %rsi * 0, unmapped */
	self->d.a[1] = (struct oxt_usdt_arg){
		.kind = OXT_USDT_ARG_CONST, .size = 8, .base = OXT_UREG_NONE,
		.index = OXT_UREG_NONE, .scale = 1, .value = 5,
	};
	self->d.a[2] = (struct oxt_usdt_arg){
		.kind = OXT_USDT_ARG_MEM, .size = 8, .base = OXT_UREG_NONE, .index = 13,
		.scale = 1, .value = 16 - 43,
	};
	self->d.u[1].arg_first = 1;
	self->d.u[1].nargs = 2;
	self->d.l.nusdt_args = 3;
	ASSERT_EQ(0, ld_load(self->fd, &self->d));
	ASSERT_EQ(2, self->d.l.nuprobes);
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_GO));
	ASSERT_EQ(0, tell(&self->t, "c 6\n"));
	ASSERT_EQ(0, probe_info(self->fd, 0, &pi));
	EXPECT_EQ(6, pi.fired);
	/* arg0 == 42 in every firing */
	EXPECT_EQ(6, pi.errors);
	ASSERT_EQ(0, probe_info(self->fd, 1, &pi));
	EXPECT_EQ(6, pi.fired);
	/* arg1's memory can't be read: a fault, not a crash and not a silent 0 */
	EXPECT_EQ(6, pi.errors);
	EXPECT_STREQ("oxt:oxt_utarget:" TARGET_FN ":second", pi.func);
	ASSERT_EQ(0, ioctl(self->fd, OXT_IOC_STOP));
}

TEST_HARNESS_MAIN
