/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * oxtrace: the user/kernel ABI of /dev/oxtrace.
 *
 * This header is the reference for the ABI.  The Rust mirror in rust/abi.rs
 * is checked against it (sizes, offsets, ioctl numbers) by the host tests.
 *
 * Rules for every ioctl argument struct:
 *  - it starts with __u32 size, which user space sets to sizeof(struct);
 *    the kernel returns -EINVAL for any other value;
 *  - every field named reserved* and every flag bit not defined here must
 *    be zero on input, else -EINVAL;
 *  - all sizes are explicit (__u32/__u64), naturally aligned, no implicit
 *    padding, identical for 32- and 64-bit user space.
 *
 * Each open() of /dev/oxtrace is a consumer; it needs CAP_PERFMON or
 * CAP_SYS_ADMIN (else -EPERM).  An unknown command is -ENOTTY, a bad user
 * pointer -EFAULT.
 */
#ifndef _UAPI_LINUX_OXTRACE_H
#define _UAPI_LINUX_OXTRACE_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define OXT_DEVICE_NAME "oxtrace"

/* A new major breaks old tools; a new minor only adds. */
#define OXT_ABI_MAJOR 1
#define OXT_ABI_MINOR 0

/* Feature bits of struct oxt_version.features. */
/* The CPU has Intel PT with ToPA output (CPUID 7.0:EBX[25], 0x14.0:ECX[0]). */
#define OXT_FEAT_INTEL_PT		(1ULL << 0)
/* kprobes and kretprobes are available to the module. */
#define OXT_FEAT_KPROBES		(1ULL << 1)

#define OXT_RELEASE_LEN 32

struct oxt_version {
	__u32 size;		/* in: sizeof(struct oxt_version) */
	__u32 abi_major;	/* out: OXT_ABI_MAJOR of the module */
	__u32 abi_minor;	/* out: OXT_ABI_MINOR of the module */
	__u32 ncpus;		/* out: possible CPUs (per-CPU arrays are this long) */
	__u64 features;		/* out: OXT_FEAT_* */
	char release[OXT_RELEASE_LEN];	/* out: module version, NUL-terminated */
	__u64 reserved[4];	/* in: zero */
};

/* enum oxt_consumer_state: lifecycle of a consumer. */
#define OXT_STATE_IDLE		0	/* opened, nothing loaded */

struct oxt_status {
	__u32 size;		/* in: sizeof(struct oxt_status) */
	__u32 state;		/* out: OXT_STATE_* of this consumer */
	__u64 consumer_id;	/* out: unique id of this consumer (never 0) */
	__u64 nconsumers;	/* out: consumers open on the device now */
	__u64 live_consumers;	/* out: consumer objects allocated, not yet freed */
	__u64 opened_ns;	/* out: CLOCK_MONOTONIC time of this open() */
	__u64 ioctls;		/* out: ioctls served to this consumer so far */
	__u64 reserved[8];	/* in: zero */
};

#define OXT_IOC_MAGIC 0xb7

#define OXT_IOC_VERSION	_IOWR(OXT_IOC_MAGIC, 0x00, struct oxt_version)
#define OXT_IOC_STATUS	_IOWR(OXT_IOC_MAGIC, 0x01, struct oxt_status)

#endif /* _UAPI_LINUX_OXTRACE_H */
