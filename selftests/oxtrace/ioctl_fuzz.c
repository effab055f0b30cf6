// SPDX-License-Identifier: GPL-2.0
/*
 * An ioctl fuzzer for /dev/oxtrace: random commands in and around the
 * oxtrace range (numbers, directions, sizes, neighbouring magics), argument
 * pointers that are NULL, PROT_NONE, kernel, non-canonical, misaligned,
 * read-only or straddle into a PROT_NONE page, valid structs with random
 * fields and pointers, real and random program images; from one thread, then
 * from threads on one shared fd and on private fds while another thread
 * swaps the shared fd under them, with and without children forking off with it.
 *
 * Every call must return 0 or a clean errno of the ABI, the process must
 * survive, the kernel may write only where told (the thread's own counters are
 * compared across each call), no physical page may be mapped at two addresses
 * of the process, and at the end no consumer may be left and kernel memory must
 * be back where it was.  The kernel log scan of the runner catches splats.
 * OXT_STRESS=1 runs at length (make stress); OXT_SEED=n replays a run.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "oxt_adv.h"
#include "kselftest_harness.h"

/* A hang guard, not a time budget: a saturated TCG host may need many minutes. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 3600

#define PAGE 4096UL
#define NERR 140

/* One thread's memory: structs, inner buffers, a trap page after them, a read-only page. */
struct arena {
	unsigned char *rw;	/* 2 pages read-write, then PROT_NONE */
	unsigned char *data;	/* 64 KiB + 1 page read-write, then PROT_NONE */
	unsigned char *ro;	/* read-only page */
	unsigned char *noise;	/* random "images" */
	/*
	 * A PROT_NONE page, kept mapped until arena_free: once unmapped, its address is free
	 * for the next mmap of any thread (another thread's stack took it), and a call told to
	 * write there rightly would.
	 */
	void *noaccess;
	struct rng r;
};

struct tally {
	__u64 calls, ok, loads, gos;
	__u64 err[NERR];
	__u64 unexpected;
	char first_bad[160];
	__u64 sum, clean;	/* sum = ok + unexpected + clean */
	/* every byte above is compared across each ioctl: the kernel writes only where told */
	struct tally_head {
		__u64 calls, ok, loads, gos;
		__u64 err[NERR];
		__u64 unexpected;
		char first_bad[160];
		__u64 sum, clean;
	} before;
	__u64 corrupt;
	char corrupt_at[256];
};

static int arena_init(struct arena *a, __u64 seed)
{
	size_t dlen = 64 * 1024 + PAGE;

	a->rw = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	a->data = mmap(NULL, dlen + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	a->ro = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	a->noise = malloc(64 * 1024);
	a->noaccess = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a->rw == MAP_FAILED || a->data == MAP_FAILED || a->ro == MAP_FAILED || !a->noise ||
	    a->noaccess == MAP_FAILED)
		return -1;
	if (mprotect(a->rw + 2 * PAGE, PAGE, PROT_NONE) || mprotect(a->data + dlen, PAGE, PROT_NONE))
		return -1;
	memset(a->ro, 0, PAGE);
	((__u32 *)a->ro)[0] = 128;
	if (mprotect(a->ro, PAGE, PROT_READ))
		return -1;
	a->r.s = seed;
	for (int i = 0; i < 64 * 1024; i++)
		a->noise[i] = rnd(&a->r);
	return 0;
}

static void arena_free(struct arena *a)
{
	munmap(a->rw, 3 * PAGE);
	munmap(a->data, 64 * 1024 + 2 * PAGE);
	munmap(a->ro, PAGE);
	munmap(a->noaccess, PAGE);
	free(a->noise);
}

/* A pointer for an inner field: mostly a good buffer, else anything bad. */
static __u64 inner_ptr(struct arena *a, size_t want)
{
	size_t dlen = 64 * 1024 + PAGE;

	switch (below(&a->r, 12)) {
	case 0: return 0;
	case 1: return (unsigned long)a->noaccess;
	case 2: return 0xffffffff81000000ULL;
	case 3: return 0xffff888000000000ULL + below(&a->r, 1 << 20) * 8;
	case 4: return 0x0000800000000000ULL;
	case 5: return (unsigned long)a->ro;
	case 6: return (unsigned long)(a->data + dlen - 1 - below(&a->r, want ? want : 1));
	case 7: return (unsigned long)(a->data + 1 + below(&a->r, 7));
	case 8: return rnd(&a->r);
	default: return (unsigned long)a->data;
	}
}

static __u64 interesting(struct arena *a)
{
	static const __u64 v[] = { 0, 1, 2, 3, 4, 7, 8, 63, 64, 255, 256, 511, 4095, 4096,
				   65535, 65536, 0x7fffffff, 0x80000000, 0xffffffff,
				   0x100000000ULL, ~0ULL, 0x8000000000000000ULL };

	switch (below(&a->r, 4)) {
	case 0: return rnd(&a->r);
	case 1: return below(&a->r, 17);
	case 2: return inner_ptr(a, 64);
	default: return v[below(&a->r, sizeof(v) / sizeof(v[0]))];
	}
}

/* A plausible struct for command number `nr` at `s` (size `len`). */
static void template(struct arena *a, unsigned int nr, unsigned char *s, size_t len,
		     int *image_len)
{
	memset(s, 0, PAGE);
	*(__u32 *)s = len;
	switch (nr) {
	case 0x01: {
		struct oxt_status *st = (void *)s;

		st->cpus = inner_ptr(a, sizeof(struct oxt_cpu_status) * 4);
		st->ncpus = below(&a->r, 2) ? 4 : interesting(a);
		break;
	}
	case 0x02: {
		struct oxt_load *l = (void *)s;
		struct oxt_attach *att = (void *)(a->data + 60 * 1024);
		char *names = (char *)(a->data + 62 * 1024);
		const struct dyn_prog *p = &dyn_prog_race;

		/* the real image (it may load), noise, or an inner pointer */
		switch (below(&a->r, 3)) {
		case 0:
			l->image = (unsigned long)p->image;
			l->image_len = p->image_len;
			break;
		case 1:
			l->image = (unsigned long)a->noise;
			l->image_len = below(&a->r, 64 * 1024);
			memcpy(a->noise, p->image, 8);	/* past the magic now and then */
			break;
		default:
			l->image = inner_ptr(a, 4096);
			l->image_len = interesting(a);
		}
		strcpy(names, "ksys_read");
		strcpy(names + 10, "no_such_function_xyz");
		for (int i = 0; i < 4; i++)
			att[i] = (struct oxt_attach){ .probe = i & 1, .name = i < 2 ? 0 : 10,
						      .flags = i >= 2 ? OXT_ATTACH_OPTIONAL : 0 };
		l->attach = (unsigned long)att;
		l->nattach = below(&a->r, 5);
		l->names = (unsigned long)names;
		l->names_len = 32;
		*image_len = l->image_len;
		break;
	}
	case 0x05:
	case 0x07: {
		struct oxt_snapshot *sn = (void *)s;

		sn->cpu = below(&a->r, 6);
		sn->buf = inner_ptr(a, 64 * 1024);
		sn->buf_len = below(&a->r, 2) ? 64 * 1024 : interesting(a);
		break;
	}
	case 0x06: {
		struct oxt_probes *pr = (void *)s;

		pr->info = inner_ptr(a, sizeof(struct oxt_probe_info) * 8);
		pr->n = below(&a->r, 2) ? 8 : interesting(a);
		break;
	}
	case 0x08: {
		struct oxt_dynstat *d = (void *)s;

		d->cpus = inner_ptr(a, sizeof(struct oxt_dyn_cpu) * 4);
		d->ncpus = below(&a->r, 2) ? 4 : interesting(a);
		d->var_drops = inner_ptr(a, 64);
		d->nvars = below(&a->r, 2) ? 8 : interesting(a);
		break;
	}
	case 0x09: {
		/* small: the software backend with 2 pages per CPU */
		struct oxt_pt_config *c = (void *)s;

		c->backend = OXT_PT_BACKEND_SOFT;
		c->mode = below(&a->r, 3);
		c->nslices = 1 + below(&a->r, 4);
		c->slice_order = below(&a->r, 2);
		break;
	}
	case 0x0c: {
		struct oxt_pt_status *st = (void *)s;

		st->cpus = inner_ptr(a, sizeof(struct oxt_pt_cpu) * 4);
		st->ncpus = below(&a->r, 2) ? 4 : interesting(a);
		break;
	}
	case 0x0d: {
		struct oxt_pt_read *rd = (void *)s;

		rd->cpu = below(&a->r, 6);
		rd->offset = below(&a->r, 3) ? 0 : interesting(a);
		rd->buf = inner_ptr(a, 64 * 1024);
		rd->buf_len = below(&a->r, 2) ? 64 * 1024 : interesting(a);
		break;
	}
	case 0x0e: {
		struct oxt_pt_layout *ly = (void *)s;

		ly->cpu = below(&a->r, 6);
		ly->slices = inner_ptr(a, 64 * 8);
		ly->tables = inner_ptr(a, 64 * 8);
		ly->nslices = below(&a->r, 2) ? 64 : interesting(a);
		ly->ntables = below(&a->r, 2) ? 64 : interesting(a);
		break;
	}
	}
}

static const size_t sizes[16] = {
	sizeof(struct oxt_version), sizeof(struct oxt_status), sizeof(struct oxt_load), 0, 0,
	sizeof(struct oxt_snapshot), sizeof(struct oxt_probes), sizeof(struct oxt_snapshot),
	sizeof(struct oxt_dynstat), sizeof(struct oxt_pt_config), 0, 0,
	sizeof(struct oxt_pt_status), sizeof(struct oxt_pt_read), sizeof(struct oxt_pt_layout), 0,
};

static bool clean_errno(int e, unsigned int nr, bool shared)
{
	switch (e) {
	case ENOTTY: case EINVAL: case EFAULT: case ENOSPC: case EBUSY: case EPERM:
	case ENOENT: case E2BIG: case ENOMEM: case ENODEV: case ENXIO:
		return true;
	case EIO:
		return nr >= 0x09 && nr <= 0x0e;	/* the PT hardware backend */
	case EBADF:
		return shared;	/* the shared fd swapped under a thread */
	}
	return false;
}

/* OXT_FUZZ_SKIP=a,b,...: command numbers never issued (to narrow a failure down). */
static bool skip_nr(unsigned int nr)
{
	static const char *skip;
	char want[16];

	if (!skip)
		skip = getenv("OXT_FUZZ_SKIP") ?: "";
	snprintf(want, sizeof(want), ",%u,", nr);
	if (!*skip)
		return false;
	{
		char list[256];

		snprintf(list, sizeof(list), ",%s,", skip);
		return strstr(list, want) != NULL;
	}
}


/* Page diagnostics for the corruption check: PFN and kernel page flags of a user address. */
static __u64 pfn_of(const void *va)
{
	static int fd = -2;
	__u64 e = 0;

	if (fd == -2)
		fd = open("/proc/self/pagemap", O_RDONLY);
	if (fd < 0 || pread(fd, &e, 8, (unsigned long)va / PAGE * 8) != 8)
		return 0;
	return e;
}

static __u64 kpage(const char *file, __u64 pfn)
{
	__u64 v = ~0ULL;
	int fd = open(file, O_RDONLY);

	if (fd >= 0) {
		if (pread(fd, &v, 8, pfn * 8) != 8)
			v = ~0ULL;
		close(fd);
	}
	return v;
}

/*
 * Physical pages mapped at two addresses of this process (anonymous private memory, the
 * zero page left out): none may exist, nothing here maps memory twice.  A candidate is
 * read again and counted only if both addresses still show the page and hold the same
 * bytes, so memory that another thread unmapped during the scan is not taken for one.
 * Returns the number of such pages; the first is described in out.
 */
static long alias_scan(char *out, size_t n)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct ent { __u64 pfn; unsigned long va; } *e = NULL;
	size_t ne = 0, cap = 0;
	long dups = 0;
	char line[512];
	FILE *f;

	pthread_mutex_lock(&lock);
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perm[8], path[256] = "";

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &lo, &hi, perm, path) < 3)
			continue;
		if (perm[0] != 'r' || perm[1] != 'w' || perm[3] != 'p' ||
		    (path[0] && strcmp(path, "[stack]") && strcmp(path, "[heap]")))
			continue;
		for (unsigned long va = lo; va < hi; va += PAGE) {
			__u64 pm = pfn_of((void *)va), pfn = pm & ((1ULL << 55) - 1);

			if (!(pm >> 63) || !pfn || (kpage("/proc/kpageflags", pfn) >> 24 & 1))
				continue;
			if (ne == cap) {
				cap = cap ? 2 * cap : 4096;
				e = realloc(e, cap * sizeof(*e));
			}
			e[ne++] = (struct ent){ pfn, va };
		}
	}
	if (f)
		fclose(f);
	for (size_t i = 0; i < ne; i++)
		for (size_t j = i + 1; j < ne; j++) {
			__u64 m = (1ULL << 55) - 1;

			if (e[i].pfn != e[j].pfn || e[i].va == e[j].va ||
			    (pfn_of((void *)e[i].va) & m) != e[i].pfn ||
			    (pfn_of((void *)e[j].va) & m) != e[i].pfn ||
			    memcmp((void *)e[i].va, (void *)e[j].va, PAGE))
				continue;
			if (!dups++ && out)
				snprintf(out, n, "pfn %#llx at %#lx and %#lx (flags %#llx)",
					 (unsigned long long)e[i].pfn, e[i].va, e[j].va,
					 kpage("/proc/kpageflags", e[i].pfn));
		}
	free(e);
	pthread_mutex_unlock(&lock);
	return dups;
}

/*
 * Who the kernel says owns pfn: its record in the page_owner debugfs file (a kernel with
 * CONFIG_PAGE_OWNER booted with page_owner=on, debugfs mounted), whose offset is a PFN.
 * Nothing is printed for a free page, or without the file.
 */
static void owner_report(const char *what, __u64 pfn)
{
	char buf[4096], want[32];
	int fd = open("/sys/kernel/debug/page_owner", O_RDONLY);
	ssize_t n;

	if (fd < 0 || !pfn)
		goto out;
	n = pread(fd, buf, sizeof(buf) - 1, pfn);
	if (n <= 0)
		goto out;
	buf[n] = 0;
	snprintf(want, sizeof(want), "PFN 0x%llx ", (unsigned long long)pfn);
	if (strstr(buf, want))
		fprintf(stderr, "# page_owner of %s pfn %#llx:\n%s", what, (unsigned long long)pfn,
			buf);
	else
		fprintf(stderr, "# page_owner: %s pfn %#llx is not allocated\n", what,
			(unsigned long long)pfn);
out:
	if (fd >= 0)
		close(fd);
}

/* OXT_FUZZ_PAGEDIAG=1: note the tally's pages before each call, for page_report(). */
static bool pagediag(void)
{
	static int on = -1;

	if (on < 0)
		on = !!getenv("OXT_FUZZ_PAGEDIAG");
	return on;
}

/* Where a changed tally byte lives: its pages then and now, their flags, any alias. */
static void page_report(const struct tally *t, const void *live, const void *before,
			__u64 pm0, __u64 pm1)
{
	__u64 m = (1ULL << 55) - 1, pl = pfn_of(live) & m, pb = pfn_of(before) & m;
	char al[256] = "";
	long d = alias_scan(al, sizeof(al));

	fprintf(stderr, "# tally %p: pages %#llx %#llx before the call (OXT_FUZZ_PAGEDIAG), "
		"%#llx %#llx now\n", (void *)t, (unsigned long long)pm0, (unsigned long long)pm1,
		(unsigned long long)pfn_of(t),
		(unsigned long long)pfn_of((const char *)t + sizeof(*t) - 1));
	fprintf(stderr, "# changed byte %p: pfn %#llx flags %#llx count %lld; its copy %p: pfn "
		"%#llx flags %#llx count %lld; %ld pages mapped twice %s\n", live,
		(unsigned long long)pl, (unsigned long long)kpage("/proc/kpageflags", pl),
		(long long)kpage("/proc/kpagecount", pl), before, (unsigned long long)pb,
		(unsigned long long)kpage("/proc/kpageflags", pb),
		(long long)kpage("/proc/kpagecount", pb), d, al);
	owner_report("the changed byte's", pl);
	owner_report("its copy's", pb);
}

/* One random ioctl on fd; returns its result in t. */
static void fuzz_one(struct arena *a, int fd, struct tally *t, bool shared)
{
	unsigned int nr, dir, type = OXT_IOC_MAGIC;
	size_t size, len;
	unsigned long arg;
	unsigned char *s;
	int image_len = 0, ret, e;
	__u64 pm0 = 0, pm1 = 0;
	bool straddle = false;

	do
		nr = below(&a->r, 8) ? below(&a->r, 15) : below(&a->r, 64);
	while (skip_nr(nr));
	if (!below(&a->r, 16))
		type = OXT_IOC_MAGIC - 1 + 2 * below(&a->r, 2);
	size = nr < 16 ? sizes[nr] : 0;
	dir = size ? _IOC_READ | _IOC_WRITE : _IOC_NONE;
	if (!below(&a->r, 6)) {
		/* another direction or size than the ABI's */
		dir = below(&a->r, 4);
		size = below(&a->r, 2) ? below(&a->r, 512) : below(&a->r, _IOC_SIZEMASK + 1);
	}
	len = size && size <= PAGE ? size : 256;
	/* the struct: mostly at the start of a good page, else at bad places */
	s = a->rw;
	switch (below(&a->r, 16)) {
	case 0: arg = 0; break;
	case 1: arg = (unsigned long)a->noaccess; break;
	case 2: arg = 0xffffffff81000000UL; break;
	case 3: arg = 0x0000800000000000UL; break;
	case 4: arg = (unsigned long)a->ro; break;
	case 5:
		/* straddles into the PROT_NONE page */
		s = a->rw + 2 * PAGE - 1 - below(&a->r, len);
		arg = (unsigned long)s;
		straddle = true;
		break;
	case 6:
		s = a->rw + 1 + below(&a->r, 7);
		arg = (unsigned long)s;
		break;
	default:
		arg = (unsigned long)s;
	}
	if (s + len <= a->rw + 2 * PAGE) {
		unsigned char tmp[PAGE];

		/* the template fills a whole struct; only len bytes go to s */
		template(a, nr, tmp, len, &image_len);
		memcpy(s, tmp, len);
		/* a few random fields or bytes */
		for (int m = below(&a->r, 4); m > 0; m--) {
			size_t off = below(&a->r, len);

			if (below(&a->r, 3)) {
				off &= ~7UL;
				if (off + 8 <= len) {
					__u64 v = interesting(a);

					memcpy(s + off, &v, 8);
				}
			} else {
				s[off] ^= 1 << below(&a->r, 8);
			}
		}
	} else if (s < a->rw + 2 * PAGE) {
		/* the accessible head of a straddling struct */
		memset(s, 0, a->rw + 2 * PAGE - s);
		if (s + 4 <= a->rw + 2 * PAGE)
			*(__u32 *)s = size;
	}
	if (pagediag()) {
		pm0 = pfn_of(t);
		pm1 = pfn_of((char *)t + sizeof(*t) - 1);
	}
	memcpy(&t->before, t, offsetof(struct tally, before));
	ret = ioctl(fd, _IOC(dir, type, nr, size), arg);
	e = errno;
	/* our own counters must not change under us: the kernel writes only where told */
	if (memcmp(&t->before, t, offsetof(struct tally, before)) && !t->corrupt++) {
		const unsigned char *o = (const void *)&t->before, *w = (const void *)t;
		size_t i = 0, k;

		while (o[i] == w[i])
			i++;
		page_report(t, w + i, o + i, pm0, pm1);
		k = snprintf(t->corrupt_at, sizeof(t->corrupt_at),
			     "after ioctl(type %#x nr %#x dir %u size %zu, arg %#lx), tally at %p, byte %zu:",
			     type, nr, dir, size, arg, (void *)t, i);
		for (size_t j = i; j < i + 12 && j < offsetof(struct tally, before) &&
				   k < sizeof(t->corrupt_at) - 8; j++)
			k += snprintf(t->corrupt_at + k, sizeof(t->corrupt_at) - k, " %02x>%02x", o[j],
				      w[j]);
	}
	t->calls++;
	t->sum++;
	/*
	 * A struct that runs into the PROT_NONE page can't be read or written whole: success
	 * means the kernel reached the guard page through a translation the process does not
	 * have.
	 */
	if (ret == 0 && straddle && size > (size_t)(a->rw + 2 * PAGE - s)) {
		__u64 g = pfn_of(a->rw + 2 * PAGE);

		fprintf(stderr, "# ioctl(nr %#x size %zu) at %p succeeded across the PROT_NONE page "
			"%p (pagemap %#llx, flags %#llx)\n", nr, size, (void *)s,
			(void *)(a->rw + 2 * PAGE), (unsigned long long)g,
			(unsigned long long)kpage("/proc/kpageflags", g & ((1ULL << 55) - 1)));
		if (!t->unexpected++)
			snprintf(t->first_bad, sizeof(t->first_bad),
				 "ioctl(nr %#x size %zu, arg %p) = 0 across the PROT_NONE page %p",
				 nr, size, (void *)s, (void *)(a->rw + 2 * PAGE));
		return;
	}
	if (ret == 0) {
		t->ok++;
		if (type == OXT_IOC_MAGIC && nr == 0x02)
			t->loads++;
		if (type == OXT_IOC_MAGIC && nr == 0x03)
			t->gos++;
		return;
	}
	if (ret != -1 || !clean_errno(e, nr, shared)) {
		if (!t->unexpected++)
			snprintf(t->first_bad, sizeof(t->first_bad),
				 "ioctl(type %#x nr %#x dir %u size %zu, arg %#lx) = %d, errno %d (%s)",
				 type, nr, dir, size, arg, ret, e, strerror(e));
		return;
	}
	t->clean++;
	if (e < NERR)
		t->err[e]++;
}

static void tally_add(struct tally *to, const struct tally *t)
{
	to->calls += t->calls;
	to->ok += t->ok;
	to->loads += t->loads;
	to->gos += t->gos;
	for (int i = 0; i < NERR; i++)
		to->err[i] += t->err[i];
	if (!to->unexpected && t->unexpected)
		memcpy(to->first_bad, t->first_bad, sizeof(to->first_bad));
	to->unexpected += t->unexpected;
	if (!to->corrupt && t->corrupt)
		memcpy(to->corrupt_at, t->corrupt_at, sizeof(to->corrupt_at));
	to->corrupt += t->corrupt;
	to->clean += t->clean;
	to->sum += t->sum;
}

static void tally_text(const struct tally *t, char *buf, size_t n)
{
	size_t o = snprintf(buf, n, "%llu ioctls: %llu ok (%llu LOAD, %llu GO)",
			    (unsigned long long)t->calls, (unsigned long long)t->ok,
			    (unsigned long long)t->loads, (unsigned long long)t->gos);

	for (int i = 1; i < NERR && o < n; i++)
		if (t->err[i])
			o += snprintf(buf + o, n - o, ", %s %llu", strerrorname_np(i),
				      (unsigned long long)t->err[i]);
}

/* One thread, one consumer at a time: a new one every 256 calls. */
TEST(one_thread)
{
	long n = adv_count(4000, 60000);
	__u64 seed = adv_seed(), consumers;
	struct tally t = { 0 };
	struct mem m0, m1;
	struct arena a;
	char text[1024];
	int fd;

	TH_LOG("seed %#llx (OXT_SEED replays it)", (unsigned long long)seed);
	adv_mem(&m0);
	ASSERT_EQ(0, arena_init(&a, seed));
	fd = oxt_open();
	ASSERT_LE(0, fd);
	for (long i = 0; i < n; i++) {
		fuzz_one(&a, fd, &t, false);
		if (i % 256 == 255) {
			close(fd);
			fd = oxt_open();
			ASSERT_LE(0, fd);
		}
	}
	close(fd);
	arena_free(&a);
	tally_text(&t, text, sizeof(text));
	TH_LOG("%s", text);
	EXPECT_EQ(0, t.unexpected) TH_LOG("%llu unexpected results, first: %s",
					   (unsigned long long)t.unexpected, t.first_bad);
	EXPECT_EQ(n, t.calls);
	EXPECT_EQ(0, t.corrupt) TH_LOG("user memory changed behind our back, first %s", t.corrupt_at);
	EXPECT_EQ(0, adv_settle(&m0, &m1, 0, &consumers));
	ADV_LEAK_LOG(_metadata, "after", &m0, &m1, consumers);
}

struct shared {
	int fd;			/* the shared fd; swapped by the swapper */
	bool fork;		/* the swapper also forks children that use it */
	volatile int stop;
	long calls;		/* per fuzzing thread */
	__u64 seed;
	pthread_mutex_t lock;
	struct tally t;
	__u64 swaps, forks, child_bad;
	pthread_barrier_t done;	/* the fuzzing threads, before they free their memory */
	long aliases;
	char alias_at[256];
};

struct thr {
	struct shared *sh;
	int id;
	bool own;		/* a private fd rather than the shared one */
};

static void *fuzz_thread(void *arg)
{
	struct thr *th = arg;
	struct shared *sh = th->sh;
	struct tally t = { 0 };
	struct arena a;
	int fd = -1;

	if (arena_init(&a, sh->seed + th->id * 0x9e3779b97f4a7c15ULL)) {
		t.unexpected = 1;
		strcpy(t.first_bad, "arena_init failed");
		pthread_barrier_wait(&sh->done);
		pthread_barrier_wait(&sh->done);
		goto out;
	}
	if (th->own)
		fd = oxt_open();
	for (long i = 0; i < sh->calls; i++) {
		fuzz_one(&a, th->own ? fd : sh->fd, &t, !th->own);
		if (th->own && i % 256 == 255) {
			close(fd);
			fd = oxt_open();
		}
	}
	if (fd >= 0)
		close(fd);
	/* every thread's memory still mapped and quiet: one scan for pages mapped twice */
	if (pthread_barrier_wait(&sh->done) == PTHREAD_BARRIER_SERIAL_THREAD)
		sh->aliases = alias_scan(sh->alias_at, sizeof(sh->alias_at));
	pthread_barrier_wait(&sh->done);
	arena_free(&a);
out:
	pthread_mutex_lock(&sh->lock);
	tally_add(&sh->t, &t);
	pthread_mutex_unlock(&sh->lock);
	return NULL;
}

/* Replaces the shared consumer under the fuzzing threads; with fork, children use it and exit. */
static void *swapper(void *arg)
{
	struct shared *sh = arg;
	struct rng r = { sh->seed ^ 0x5555 };

	while (!sh->stop) {
		int nfd = oxt_open();

		if (nfd >= 0) {
			dup2(nfd, sh->fd);
			close(nfd);
			sh->swaps++;
		}
		if (sh->fork && !below(&r, 8)) {
			pid_t pid = fork();
			int st;

			if (pid == 0) {
				struct oxt_status s;

				for (int i = 0; i < 16; i++)
					if (oxt_status(sh->fd, &s) && errno != EBADF)
						_exit(1);
				if (below(&r, 2))
					close(sh->fd);
				_exit(0);
			}
			if (pid > 0 && waitpid(pid, &st, 0) == pid) {
				sh->forks++;
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					sh->child_bad++;
			}
		}
		sched_yield();
	}
	return NULL;
}

/* Threads on a shared fd and on private fds, the shared one swapped (and forked) meanwhile. */
static void shared_private_swap(struct __test_metadata *_metadata, bool with_fork)
{
	const int nshared = 3, nown = 3;
	pthread_t th[8], sw;
	struct thr args[8];
	struct shared sh = { .calls = adv_count(1000, 15000), .seed = adv_seed(), .fork = with_fork };
	struct mem m0, m1;
	__u64 consumers;
	char text[1024];

	TH_LOG("seed %#llx (OXT_SEED replays it)", (unsigned long long)sh.seed);
	adv_mem(&m0);
	pthread_mutex_init(&sh.lock, NULL);
	pthread_barrier_init(&sh.done, NULL, nshared + nown);
	sh.fd = oxt_open();
	ASSERT_LE(0, sh.fd);
	ASSERT_EQ(0, pthread_create(&sw, NULL, swapper, &sh));
	for (int i = 0; i < nshared + nown; i++) {
		args[i] = (struct thr){ .sh = &sh, .id = i, .own = i >= nshared };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, fuzz_thread, &args[i]));
	}
	for (int i = 0; i < nshared + nown; i++)
		pthread_join(th[i], NULL);
	sh.stop = 1;
	pthread_join(sw, NULL);
	close(sh.fd);
	tally_text(&sh.t, text, sizeof(text));
	TH_LOG("%d threads: %s; %llu swaps of the shared fd, %llu forks", nshared + nown, text,
	       (unsigned long long)sh.swaps, (unsigned long long)sh.forks);
	EXPECT_EQ(0, sh.t.unexpected) TH_LOG("%llu unexpected results, first: %s",
					      (unsigned long long)sh.t.unexpected, sh.t.first_bad);
	EXPECT_EQ((nshared + nown) * sh.calls, sh.t.calls);
	EXPECT_EQ(0, sh.t.corrupt) TH_LOG("user memory changed behind our back, first %s",
					   sh.t.corrupt_at);
	EXPECT_EQ(sh.t.calls, sh.t.ok + sh.t.unexpected + sh.t.clean);
	EXPECT_EQ(0, sh.child_bad);
	EXPECT_EQ(0, sh.aliases) TH_LOG("%ld physical pages mapped at two addresses, first %s",
					sh.aliases, sh.alias_at);
	EXPECT_EQ(0, adv_settle(&m0, &m1, 0, &consumers));
	ADV_LEAK_LOG(_metadata, "after", &m0, &m1, consumers);
}

/* The swaps without fork. */
TEST(threads_shared_private_swap)
{
	shared_private_swap(_metadata, false);
}

/* The swaps, and children forked off with the shared fd. */
TEST(threads_shared_private_swap_fork)
{
	shared_private_swap(_metadata, true);
}

TEST_HARNESS_MAIN
