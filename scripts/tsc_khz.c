// SPDX-License-Identifier: GPL-2.0
/*
 * tsc_khz: the host's TSC rate in kHz, for the guest's tsc_early_khz=
 * (scripts/vm.sh).  Under TCG the guest's TSC counts at the host's rate, but
 * a guest that calibrates it against the emulated PIT while the host is
 * saturated can be wrong by 20 times, and then its clock, sched_clock() and
 * the lockup detectors run that much fast (Documentation/testing.rst, "The
 * guest's clock").  Measured against CLOCK_MONOTONIC_RAW over 100 ms windows,
 * each end read where rdtsc brackets the clock read most tightly; the median
 * of 5 windows, so that one preempted window does not count.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

struct pt {
	uint64_t tsc;
	uint64_t ns;
};

static struct pt sample(void)
{
	uint64_t best = UINT64_MAX;
	struct pt p = { 0, 0 };

	for (int i = 0; i < 100; i++) {
		struct timespec ts;
		uint64_t t0 = __rdtsc();

		clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
		uint64_t t1 = __rdtsc();

		if (t1 - t0 < best) {
			best = t1 - t0;
			p.tsc = t0 + (t1 - t0) / 2;
			p.ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
		}
	}
	return p;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	const struct timespec window = { 0, 100 * 1000 * 1000 };
	uint64_t khz[5];

	for (int i = 0; i < 5; i++) {
		struct pt a = sample();

		nanosleep(&window, NULL);
		struct pt b = sample();

		if (b.ns <= a.ns || b.tsc <= a.tsc)
			return 1;
		khz[i] = (b.tsc - a.tsc) * 1000000ULL / (b.ns - a.ns);
	}
	qsort(khz, 5, sizeof(khz[0]), cmp);
	printf("%llu\n", (unsigned long long)khz[2]);
	return 0;
}
