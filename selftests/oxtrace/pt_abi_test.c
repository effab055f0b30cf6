// SPDX-License-Identifier: GPL-2.0
/*
 * Intel PT ioctls: every bad input has its errno, the buffers are many
 * separate page allocations (no two consecutive slices physically
 * contiguous, every slice aligned to its size, every table its own page),
 * the state machine of START/STOP/READ, and the real backend saying
 * "no Intel PT" cleanly (ENODEV) on a CPU without it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "oxt_test.h"
#include "kselftest_harness.h"

/* The harness's 30 s per test is a time budget; this is only a hang guard. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 900

static int pt_config(int fd, struct oxt_pt_config *c)
{
	c->size = sizeof(*c);
	return ioctl(fd, OXT_IOC_PT_CONFIG, c) ? -errno : 0;
}

static void cfg_init(struct oxt_pt_config *c, __u32 backend, __u32 mode, __u32 n, __u32 order,
		     __u32 per_table)
{
	memset(c, 0, sizeof(*c));
	c->backend = backend;
	c->mode = mode;
	c->nslices = n;
	c->slice_order = order;
	c->per_table = per_table;
}

static bool cpu_has_pt(void)
{
	char line[4096];
	bool pt = false;
	FILE *f = fopen("/proc/cpuinfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5) && strstr(line, " intel_pt"))
			pt = true;
	if (f)
		fclose(f);
	return pt;
}

TEST(config_rejects_bad_input)
{
	struct oxt_pt_config c;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	cfg_init(&c, 3, OXT_PT_MODE_RING, 4, 0, 0);
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, 3, 4, 0, 0);
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, 0, 0, 0);
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, OXT_PT_MAX_SLICES + 1, 0, 0);
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, 4, OXT_PT_MAX_ORDER + 1, 0);
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, 4, 0, 512);
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, 4, 0, 0);
	c.psb_period = 255;
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, 4, 0, 0);
	c.reserved[3] = 1;
	EXPECT_EQ(-EINVAL, pt_config(fd, &c));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, 4, 0, 0);
	c.size = sizeof(c) - 8;
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_CONFIG, &c));
	EXPECT_EQ(EINVAL, errno);
	/* 4096 slices of 4 MiB: over OXT_PT_MAX_BYTES */
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, OXT_PT_MAX_SLICES, OXT_PT_MAX_ORDER, 0);
	EXPECT_EQ(-E2BIG, pt_config(fd, &c));
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_CONFIG, (void *)8));
	EXPECT_EQ(EFAULT, errno);
	close(fd);
}

TEST(no_config_no_pt)
{
	struct oxt_pt_status s = { .size = sizeof(s) };
	struct oxt_pt_read r = { .size = sizeof(r) };
	struct oxt_pt_layout l = { .size = sizeof(l) };
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_START, 0));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_STOP, 0));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_READ, &r));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_LAYOUT, &l));
	EXPECT_EQ(ENOENT, errno);
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_STATUS, &s));
	EXPECT_EQ(OXT_PT_STATE_NONE, s.state);
	s.reserved0 = 1;
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_STATUS, &s));
	EXPECT_EQ(EINVAL, errno);
	close(fd);
}

/* The real backend on a CPU without PT: ENODEV, and nothing else happens. */
TEST(hw_backend_without_pt)
{
	struct oxt_pt_config c;
	struct oxt_version v;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_version(fd, &v));
	cfg_init(&c, OXT_PT_BACKEND_HW, OXT_PT_MODE_STOP, 4, 0, 0);
	if (cpu_has_pt()) {
		EXPECT_TRUE(v.features & OXT_FEAT_INTEL_PT);
		SKIP(close(fd); return, "this CPU has Intel PT");
	}
	EXPECT_FALSE(v.features & OXT_FEAT_INTEL_PT);
	EXPECT_EQ(-ENODEV, pt_config(fd, &c));
	/* auto falls back to the software backend */
	cfg_init(&c, OXT_PT_BACKEND_AUTO, OXT_PT_MODE_STOP, 4, 0, 0);
	ASSERT_EQ(0, pt_config(fd, &c));
	EXPECT_EQ(OXT_PT_BACKEND_SOFT, c.backend);
	close(fd);
}

/* Many separate allocations: aligned, not contiguous, tables apart from slices. */
TEST(layout_not_contiguous)
{
	enum { N = 64, ORDER = 1, PER = 8 };
	struct oxt_pt_config c;
	struct oxt_pt_layout l;
	__u64 slices[N], tables[N];
	__u64 size = 4096ULL << ORDER;
	struct oxt_version v;
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, oxt_version(fd, &v));
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_RING, N, ORDER, PER);
	ASSERT_EQ(0, pt_config(fd, &c));
	EXPECT_EQ(OXT_PT_BACKEND_SOFT, c.backend);
	EXPECT_EQ(N / PER, c.ntables);
	EXPECT_EQ(N * size, c.capacity);
	EXPECT_EQ(v.ncpus, c.ncpus);
	for (__u32 cpu = 0; cpu < c.ncpus; cpu++) {
		memset(&l, 0, sizeof(l));
		l.size = sizeof(l);
		l.cpu = cpu;
		l.slices = (uintptr_t)slices;
		l.tables = (uintptr_t)tables;
		l.nslices = N;
		l.ntables = N;
		ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_LAYOUT, &l));
		ASSERT_EQ(N, l.nslices);
		ASSERT_EQ(N / PER, l.ntables);
		EXPECT_EQ(ORDER, l.slice_order);
		for (int i = 0; i < N; i++) {
			EXPECT_EQ(0, slices[i] % size);
			if (i > 0) {
				EXPECT_NE(slices[i - 1] + size, slices[i]);
				EXPECT_NE(slices[i] + size, slices[i - 1]);
			}
			for (int t = 0; t < N / PER; t++)
				EXPECT_FALSE(tables[t] >= slices[i] && tables[t] < slices[i] + size);
		}
		for (int t = 0; t < N / PER; t++)
			EXPECT_EQ(0, tables[t] % 4096);
	}
	l.cpu = c.ncpus;
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_LAYOUT, &l));
	EXPECT_EQ(EINVAL, errno);
	close(fd);
}

/* START/STOP/READ state machine; started without a program: only the opening PSB group. */
TEST(start_stop_read)
{
	struct oxt_pt_config c;
	struct oxt_pt_cpu cpus[64];
	struct oxt_pt_status s;
	struct oxt_pt_read r;
	unsigned char buf[256];
	int fd = oxt_open();

	ASSERT_LE(0, fd);
	cfg_init(&c, OXT_PT_BACKEND_SOFT, OXT_PT_MODE_STOP, 3, 0, 1);
	ASSERT_EQ(0, pt_config(fd, &c));
	EXPECT_EQ(3, c.ntables);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_STOP, 0));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_START, 0));
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_START, 0));
	EXPECT_EQ(EBUSY, errno);
	/* no reconfiguration, no read while running */
	EXPECT_EQ(-EBUSY, pt_config(fd, &c));
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.buf = (uintptr_t)buf;
	r.buf_len = sizeof(buf);
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_READ, &r));
	EXPECT_EQ(EBUSY, errno);
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_STOP, 0));

	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	s.cpus = (uintptr_t)cpus;
	s.ncpus = 64;
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_STATUS, &s));
	EXPECT_EQ(OXT_PT_STATE_STOPPED, s.state);
	EXPECT_EQ(OXT_PT_BACKEND_SOFT, s.backend);
	EXPECT_EQ(OXT_PT_MODE_STOP, s.mode);
	EXPECT_EQ(3 * 4096, s.capacity);
	ASSERT_EQ(c.ncpus < 64 ? c.ncpus : 64, s.ncpus);
	for (__u32 i = 0; i < s.ncpus; i++) {
		if (!(cpus[i].flags & OXT_PT_CPU_PRESENT))
			continue;
		/* PSB (16) + TSC (8) + PSBEND (2) */
		EXPECT_EQ(26, cpus[i].written);
		EXPECT_EQ(26, cpus[i].position);
		EXPECT_EQ(26, cpus[i].data_len);
		EXPECT_EQ(0, cpus[i].lost);
		EXPECT_EQ(0, cpus[i].flags & (OXT_PT_CPU_ENABLED | OXT_PT_CPU_STOPPED |
					      OXT_PT_CPU_ERROR | OXT_PT_CPU_WRAPPED));
		r.cpu = i;
		r.offset = 0;
		ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_READ, &r));
		EXPECT_EQ(26, r.len);
		EXPECT_EQ(26, r.total);
		for (int k = 0; k < 16; k += 2) {
			EXPECT_EQ(0x02, buf[k]);
			EXPECT_EQ(0x82, buf[k + 1]);
		}
		EXPECT_EQ(0x19, buf[16]);
		EXPECT_EQ(0x02, buf[24]);
		EXPECT_EQ(0x23, buf[25]);
		r.offset = 20;
		ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_READ, &r));
		EXPECT_EQ(6, r.len);
		r.offset = 26;
		ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_READ, &r));
		EXPECT_EQ(0, r.len);
	}
	r.cpu = c.ncpus;
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_READ, &r));
	EXPECT_EQ(EINVAL, errno);
	r.cpu = 0;
	r.reserved[0] = 1;
	EXPECT_EQ(-1, ioctl(fd, OXT_IOC_PT_READ, &r));
	EXPECT_EQ(EINVAL, errno);
	/* a restart resumes after the data, with a new PSB group */
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_START, 0));
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_STOP, 0));
	ASSERT_EQ(0, ioctl(fd, OXT_IOC_PT_STATUS, &s));
	for (__u32 i = 0; i < s.ncpus; i++)
		if (cpus[i].flags & OXT_PT_CPU_PRESENT)
			EXPECT_EQ(52, cpus[i].data_len);
	close(fd);
}

TEST_HARNESS_MAIN
