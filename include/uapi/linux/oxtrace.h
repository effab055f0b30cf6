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

/*
 * A new major breaks old tools; a new minor only adds.  Minor 5: the speculation
 * counters of struct oxt_cpu_status, image options nspec and specsize, the ERROR probe
 * kind, opcodes 72-96, the system record, and the LOAD refusals OXT_LOADERR_MEMORY and
 * OXT_LOADERR_UNSAFE.  Minor 6: opcode 97, kstack.  Minor 7: opcodes 120-124, user
 * stacks and symbol values; the clause that wrote a principal-buffer record in bits
 * 16-31 of its kind word; llquantize values with zero and negative buckets
 * (Documentation/agg.rst).  Minor 8: opcode 210, uargs (a process's arguments).
 * Minor 9: opcodes 160-168, scratch memory (alloca, copyin, copyinto, bcopy,
 * stores, uregs) and image option 10, scratchsize.  Minor 10: bcopy from a
 * string reference stores the string (truncated, NUL-padded) into scratch.
 * Minor 11: user-space probes (the pid and USDT providers, probe kinds 11-14):
 * struct oxt_load's uattach table, struct oxt_uattach and struct oxt_usdt_arg,
 * the LOAD refusal OXT_LOADERR_UATTACH, and OXT_FEAT_UPROBES.
 * Minor 12: stack() and ustack() values are references (a style byte and an
 * id, up to 127 frames); each CPU writes a stack's frames once, in a principal
 * buffer record of kind OXT_RECORD_STACK, before anything that names it.
 * Minor 13: struct oxt_status.live_uprobes.
 * Minor 14: opcode 220, pushtm (memory read into a record: tracemem(), print())
 * and its record item, tag 0x11, a 2-byte length and the bytes; inet_ntop's
 * link families (1 << 16 | ARPHRD_ETHER or ARPHRD_INFINIBAND), link_ntop().
 * Minor 15: image option 11, bufpolicy (OXT_BUFPOLICY_*: switch, fill, ring),
 * and struct oxt_status.filled.
 * Minor 16: inet_ntop's family AF_INET6 | 1 << 8 (inet_ntoa6() without strict: an
 * IPv4 address inside the IPv6 one as the bare dotted quad); opcodes 98 and 99,
 * copyout and copyoutstr (writes to the current task's user memory).
 */
#define OXT_ABI_MAJOR 1
#define OXT_ABI_MINOR 16

/*
 * Principal buffer policies, the values of image option 11 (bufpolicy; minor 15).
 * SWITCH: two halves per CPU, swapped at each OXT_IOC_SNAPSHOT.  FILL and RING:
 * one buffer per CPU, which OXT_IOC_SNAPSHOT hands over only once the consumer
 * is stopped (before, it returns no records); FILL stops recording on a CPU at
 * the first record that does not fit (struct oxt_status.filled counts such
 * CPUs) but keeps room for the END probe's records; RING overwrites the oldest
 * records and hands over the newest, oldest first.
 */
#define OXT_BUFPOLICY_SWITCH	0
#define OXT_BUFPOLICY_FILL	1
#define OXT_BUFPOLICY_RING	2

/*
 * Principal buffer record kinds the module writes itself (the actions' kinds
 * are the compiler's): a runtime error, and a stack's definition (id
 * OXT_STACK_DEF_KERNEL or OXT_STACK_DEF_USER; payload: the stack's id, its
 * process, its frames innermost first, __u64 each).
 */
#define OXT_RECORD_ERROR	0x100
#define OXT_RECORD_STACK	0x101
#define OXT_STACK_DEF_KERNEL	1
#define OXT_STACK_DEF_USER	2

/* Feature bits of struct oxt_version.features. */
/* The CPU has Intel PT with ToPA output (CPUID 7.0:EBX[25], 0x14.0:ECX[0]). */
#define OXT_FEAT_INTEL_PT		(1ULL << 0)
/* kprobes and kretprobes are available to the module. */
#define OXT_FEAT_KPROBES		(1ULL << 1)
/* uprobes are available to the module (the pid and USDT providers; minor 11). */
#define OXT_FEAT_UPROBES		(1ULL << 2)

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

/*
 * Lifecycle of a consumer: IDLE -LOAD-> LOADED -GO-> ACTIVE -STOP-> STOPPED.
 * LOAD is allowed once; GO once; STOP from ACTIVE.  Closing the device in any
 * state tears everything down.
 */
#define OXT_STATE_IDLE		0	/* opened, nothing loaded */
#define OXT_STATE_LOADED	1	/* program loaded, probes registered, disabled */
#define OXT_STATE_ACTIVE	2	/* probes enabled (GO) */
#define OXT_STATE_STOPPED	3	/* probes disabled (STOP); buffers can be drained */

/* Per-CPU counters of a consumer, an array of struct oxt_status.ncpus. */
struct oxt_cpu_status {
	__u64 fired;		/* clauses' probes fired on this CPU */
	__u64 records;		/* records written to the principal buffer */
	__u64 drops;		/* records that did not fit the principal buffer */
	__u64 errors;		/* clauses aborted by a runtime error */
	__u64 recursion;	/* probe hits not run: an action was running on this CPU */
	__u64 specdrops;	/* records that did not fit a speculative buffer (minor 5) */
	__u64 specbusy;		/* speculation() failed: only busy speculations left (minor 5) */
	__u64 specunavail;	/* speculation() failed: every speculation active (minor 5) */
};

struct oxt_status {
	__u32 size;		/* in: sizeof(struct oxt_status) */
	__u32 state;		/* out: OXT_STATE_* of this consumer */
	__u64 consumer_id;	/* out: unique id of this consumer (never 0) */
	__u64 nconsumers;	/* out: consumers open on the device now */
	__u64 live_consumers;	/* out: consumer objects allocated, not yet freed */
	__u64 opened_ns;	/* out: CLOCK_MONOTONIC time of this open() */
	__u64 ioctls;		/* out: ioctls served to this consumer so far */
	__u64 cpus;		/* in: pointer to struct oxt_cpu_status[ncpus], or 0 */
	__u32 ncpus;		/* in: entries at cpus; out: entries written */
	__u32 exited;		/* out: 1 once an exit() action ran */
	__s64 exit_status;	/* out: the argument of the first exit() */
	__u64 missed;		/* out: hits the kernel could not hand to us (kprobe nmissed) */
	__u64 live_uprobes;	/* out: uprobes the module has registered, every consumer's (minor 13) */
	__u64 filled;		/* out: CPUs whose fill buffer is full (bufpolicy fill; minor 15) */
	__u64 reserved[4];	/* in: zero */
};

/* struct oxt_load.attach[] entries: where the program's fbt probes attach. */
#define OXT_ATTACH_OPTIONAL	(1U << 0)	/* from a glob: skip if the kernel refuses */

struct oxt_attach {
	__u32 probe;		/* index of the probe description in the image */
	__u32 flags;		/* OXT_ATTACH_* */
	__u32 name;		/* offset of the NUL-terminated function name in names */
	__u32 reserved;		/* zero */
};

/* struct oxt_load.err_kind: what a failed LOAD refused. */
#define OXT_LOADERR_NONE	0
#define OXT_LOADERR_IMAGE	1	/* the image: err_code = image error code */
#define OXT_LOADERR_VERIFY	2	/* bytecode: err_index = clause, err_part, err_insn, err_code */
#define OXT_LOADERR_ATTACH	3	/* attach entry err_index: the errno says why */
#define OXT_LOADERR_PROBE	4	/* probe description err_index attaches nowhere */
/*
 * Over the memory budget (E2BIG): err_code = largest part (1 principal buffers,
 * 2 aggregation buffers, 3 dynamic variables, 4 scratch, 5 image, 6 speculative
 * buffers since minor 5), err_index =
 * CPUs, err_part = 0 per-consumer or 1 global budget, err_insn = KiB needed,
 * err_arg = KiB the budget leaves.
 */
#define OXT_LOADERR_MEMORY	5
/*
 * ABI 1.5.  Attach entry err_index names a function that is unsafe to probe (EPERM):
 * err_code = the reason (rust/core/probesafe.rs).  An optional entry (from a
 * glob) is skipped and counted in nskipped instead.
 */
#define OXT_LOADERR_UNSAFE	6
/*
 * ABI 1.11.  User-space probe err_index (an index into uattach) could not be
 * placed; the errno says why: ESRCH the process is gone, EPERM it is the
 * caller's own process or the caller may not trace it, ENOENT or EACCES the
 * file, EINVAL an offset past the file's end or an instruction uprobes cannot
 * probe, E2BIG the arguments of a USDT probe.  A malformed entry (EINVAL, or
 * E2BIG for more than OXT_USDT_MAX_ARGS operands) has err_code the reason
 * (rust/core/uprobe.rs UattachError: 1 reserved or flags, 2 probe, 3 name,
 * 4 path, 5 pid, 6 a field its kind does not use, 7 operand range, 8 too
 * many operands, 9 operand err_arg malformed); the kernel's own refusals
 * (ESRCH, EPERM, ...) have err_code 0.
 */
#define OXT_LOADERR_UATTACH	7

/*
 * User-space probes (ABI 1.11): one uprobe each, on the instruction at file
 * offset `offset` of the regular file at `path`, firing only in the address
 * space process `pid` has at LOAD (all its threads; not in other processes
 * that map the file, nor in `pid` after an exec).  The probe description's
 * kind says what the probe's arguments are: OXT_PROBE_KIND_PID_ENTRY and
 * _PID_OFFSET the integer argument registers of the System V x86-64 ABI,
 * _PID_RETURN arg0 = roff (the returning instruction's offset in its
 * function) and arg1 = the return value, _USDT the nargs operands at
 * usdt_args[arg_first].  Probe ids (records, PROBES) number the attach
 * entries first, then the uattach entries, then every other description.
 */
#define OXT_PROBE_KIND_PID_ENTRY	11
#define OXT_PROBE_KIND_PID_RETURN	12
#define OXT_PROBE_KIND_PID_OFFSET	13
#define OXT_PROBE_KIND_USDT		14

struct oxt_uattach {
	__u32 probe;		/* index of the probe description in the image */
	__u32 flags;		/* OXT_ATTACH_* */
	__u32 name;		/* offset in names: "provider:module:function:name" */
	__u32 path;		/* offset in names: absolute path of the probed file */
	__u64 offset;		/* file offset of the probed instruction */
	__u64 ref_ctr;		/* file offset of the USDT semaphore (__u16), or 0 */
	__u64 roff;		/* PID_RETURN: the instruction's offset in its function */
	__s32 pid;		/* the process the probe fires in */
	__u32 arg_first;	/* USDT: index of its first operand in usdt_args */
	__u32 nargs;		/* USDT: operands, at most OXT_USDT_MAX_ARGS */
	__u32 reserved;		/* zero */
};

/* An operand of a USDT probe's argument specification (<sys/sdt.h>). */
#define OXT_USDT_MAX_ARGS	12
#define OXT_USDT_ARG_CONST	1	/* value */
#define OXT_USDT_ARG_REG	2	/* the register `base` */
#define OXT_USDT_ARG_MEM	3	/* memory at base + index * scale + value */

/*
 * Register numbers: DTrace's x86-64 uregs[] numbering (struct pt_regs order,
 * below 26).  Fields a kind does not use: base and index OXT_UREG_NONE,
 * scale 0 or 1, and REG's value 0.
 */
#define OXT_UREG_NONE		0xff	/* MEM: no base or no index register */

struct oxt_usdt_arg {
	__u8 kind;		/* OXT_USDT_ARG_* */
	__u8 size;		/* 1, 2, 4 or 8: bytes of the value */
	__u8 is_signed;		/* 1: sign-extended to 64 bits, 0: zero-extended */
	__u8 base;		/* REG, MEM: register (uregs[] index), or OXT_UREG_NONE */
	__u8 index;		/* MEM: index register, or OXT_UREG_NONE */
	__u8 scale;		/* MEM: 1, 2, 4 or 8 (1 without an index) */
	__u16 reserved;		/* zero */
	__s64 value;		/* CONST: the value; MEM: the displacement */
};

struct oxt_load {
	__u32 size;		/* in: sizeof(struct oxt_load) */
	__u32 flags;		/* in: zero */
	__u64 image;		/* in: pointer to the program image */
	__u64 image_len;	/* in: its length */
	__u64 attach;		/* in: pointer to struct oxt_attach[nattach] */
	__u64 names;		/* in: pointer to the names of the attach entries */
	__u32 nattach;		/* in */
	__u32 names_len;	/* in */
	__u32 nprobes;		/* out: kprobes and kretprobes registered */
	__u32 nskipped;		/* out: optional attach entries the kernel refused */
	__u32 err_kind;		/* out: OXT_LOADERR_* when LOAD fails */
	__u32 err_index;	/* out: clause, attach entry or probe description */
	__u32 err_part;		/* out: 0 predicate, 1 actions (VERIFY) */
	__u32 err_insn;		/* out: instruction index (VERIFY) */
	__u32 err_code;		/* out: reason code (IMAGE, VERIFY) */
	__u32 err_arg;		/* out: the reason's operand */
	__u64 uattach;		/* in: pointer to struct oxt_uattach[nuattach] (minor 11) */
	__u64 usdt_args;	/* in: pointer to struct oxt_usdt_arg[nusdt_args] (minor 11) */
	__u32 nuattach;		/* in (minor 11) */
	__u32 nusdt_args;	/* in (minor 11) */
	__u32 nuprobes;		/* out: uprobes registered (minor 11) */
	__u32 reserved0;	/* in: zero */
};

/*
 * SNAPSHOT: take the principal buffer of one CPU (DTrace's switch policy); buf
 * must hold bufsize bytes (else ENOSPC).  AGGSNAP: take one CPU's aggregation
 * buffer as a stream of data-set records (Documentation/agg.rst); if it does
 * not fit buf, ENOSPC and len = the bytes needed: the data are kept aside and
 * the next AGGSNAP of that CPU delivers them, so nothing is lost.
 * An offline CPU gives len 0.
 */
struct oxt_snapshot {
	__u32 size;		/* in: sizeof(struct oxt_snapshot) */
	__u32 cpu;		/* in: the CPU */
	__u64 buf;		/* in: pointer to at least bufsize bytes */
	__u64 buf_len;		/* in: its length */
	__u64 len;		/* out: bytes of whole records written to buf */
	__u64 drops;		/* out: records that did not fit since the last snapshot */
	__u64 reserved[4];	/* in: zero */
};

/* Per attached probe: where it is and what it did. */
#define OXT_PROBE_FUNC_LEN	64

struct oxt_probe_info {
	__u32 probe;		/* index of the probe description */
	__u32 flags;		/* OXT_PROBE_* */
	char func[OXT_PROBE_FUNC_LEN];		/* attached function, NUL-terminated */
	__u64 fired;
	__u64 errors;
	__u64 recursion;
	__u64 reserved[2];
};

#define OXT_PROBE_RETURN	(1U << 0)

struct oxt_probes {
	__u32 size;		/* in: sizeof(struct oxt_probes) */
	__u32 n;		/* in: entries at info; out: entries written */
	__u64 info;		/* in: pointer to struct oxt_probe_info[n] */
	__u32 total;		/* out: attached probes in all */
	__u32 reserved0;	/* in: zero */
	__u64 reserved[3];	/* in: zero */
};

/*
 * DYNSTAT: the dynamic variables of a consumer (Documentation/dynvar.rst):
 * the consumer dynamic memory state, the cleaner, per-CPU allocation, free
 * and drop counters and list lengths, drops per variable, and the audit made
 * at STOP (every chunk on exactly one list or hash chain).  A program without
 * thread-local or associative variables has no dynamic memory: flags = 0.
 */
#define OXT_DSTATE_FREE		0	/* chunks on free lists */
#define OXT_DSTATE_CLEAN	1	/* the cleaner made chunks clean */
#define OXT_DSTATE_RINSING	2	/* none free; some being rinsed */
#define OXT_DSTATE_DIRTY	3	/* none free; some dirty */
#define OXT_DSTATE_EMPTY	4	/* every chunk in use */

#define OXT_DYN_PRESENT		(1U << 0)	/* the program has a dynamic memory */
#define OXT_DYN_STARTED		(1U << 1)	/* initialised at GO */
#define OXT_DYN_AUDITED		(1U << 2)	/* audit_* hold the audit made at STOP */

/* struct oxt_dynstat.audit_error */
#define OXT_DYN_AUDIT_OK		0
#define OXT_DYN_AUDIT_BITMAP		1	/* no memory for the audit */
#define OXT_DYN_AUDIT_DUPLICATE		2	/* a chunk on two lists/chains, or a cycle */
#define OXT_DYN_AUDIT_BAD_INDEX		3	/* a list or chain holds no chunk */
#define OXT_DYN_AUDIT_BAD_HASH		4	/* a listed chunk in use, or a chained one free */
#define OXT_DYN_AUDIT_LOST		5	/* chunks on no list and no chain */
#define OXT_DYN_AUDIT_COUNTERS		6	/* list lengths or in-use count disagree */

/* Per-CPU dynamic variable counters, an array of struct oxt_dynstat.ncpus. */
struct oxt_dyn_cpu {
	__u64 allocs;		/* variables allocated by this CPU */
	__u64 frees;		/* variables freed (0 stored) by this CPU */
	__u64 steals;		/* allocations served from another CPU's lists */
	__u64 clean_moves;	/* clean lists moved to this CPU's free list */
	__u64 races;		/* lost insertion races (chunk to the dirty list) */
	__u64 drops_empty;	/* drops in state EMPTY */
	__u64 drops_dirty;	/* drops in state DIRTY */
	__u64 drops_rinsing;	/* drops in state RINSING */
	__u64 drops_size;	/* tuple larger than a chunk */
	__u64 contended;	/* operations abandoned under contention */
	__u64 free;		/* list lengths now */
	__u64 clean;
	__u64 rinsing;
	__u64 dirty;
	__u64 reserved[2];
};

struct oxt_dynstat {
	__u32 size;		/* in: sizeof(struct oxt_dynstat) */
	__u32 flags;		/* out: OXT_DYN_* */
	__u32 dstate;		/* out: OXT_DSTATE_* */
	__u32 ncpus;		/* in: entries at cpus; out: entries written */
	__u64 cpus;		/* in: pointer to struct oxt_dyn_cpu[ncpus], or 0 */
	__u64 var_drops;	/* in: pointer to __u64[nvars] (drops per variable id), or 0 */
	__u32 nvars;		/* in: entries at var_drops; out: variable ids of the program */
	__u32 chunk_bytes;	/* out: bytes per chunk */
	__u64 nchunks;		/* out: chunks (and hash buckets) */
	__u64 dynvarsize;	/* out: bytes of dynamic memory allocated */
	__u64 cleanrate_ns;	/* out: cleaner period in force (clamped) */
	__u64 cleaner_runs;	/* out: times the cleaner thread woke and ran */
	__u64 in_use;		/* out: chunks holding a variable now */
	__u64 high_water;	/* out: most chunks seen in use */
	__u64 passes;		/* out: cleaner passes that cleaned chunks */
	__u64 idle_passes;	/* out: cleaner passes with nothing dirty */
	__u64 crosscalls;	/* out: cross-calls issued by the cleaner */
	__u64 rinsed;		/* out: chunks cleaned */
	__u64 borrowed;		/* out: dirty lists rinsed on a borrowed CPU */
	__u64 failclean;	/* out: dirty lists left for a later pass */
	__u64 audit_free;	/* out (AUDITED): chunks on free lists */
	__u64 audit_clean;	/* out (AUDITED): on clean lists */
	__u64 audit_rinsing;	/* out (AUDITED): on rinsing lists */
	__u64 audit_dirty;	/* out (AUDITED): on dirty lists */
	__u64 audit_in_use;	/* out (AUDITED): on hash chains */
	__u32 audit_error;	/* out (AUDITED): OXT_DYN_AUDIT_* */
	__u32 reserved0;	/* in: zero */
	__u64 audits;		/* out: module-wide audits made at release */
	__u64 audit_failures;	/* out: module-wide: of those, failed */
	__u64 reserved[4];	/* in: zero */
};

/*
 * Intel PT output through ToPA tables (Documentation/pt.rst).  Per consumer,
 * configured before LOAD: per-CPU buffers of nslices separate page
 * allocations of 4 KiB << slice_order bytes, described by ToPA tables (one
 * page each); the real backend programs the RTIT MSRs, the software backend
 * (no PT) writes PT packets through a model of the same walk, fed by the D
 * action ptwrite(value).
 */
#define OXT_PT_BACKEND_AUTO	0	/* real if the CPU has PT, else software */
#define OXT_PT_BACKEND_SOFT	1
#define OXT_PT_BACKEND_HW	2	/* ENODEV without Intel PT + ToPA */

#define OXT_PT_MODE_RING	0	/* last table links to the first: wraps */
#define OXT_PT_MODE_STOP	1	/* STOP on the last slice: stops when full */
#define OXT_PT_MODE_STOP_INT	2	/* STOP + INT (the PMI belongs to perf: polled) */

#define OXT_PT_MAX_SLICES	4096	/* per CPU */
#define OXT_PT_MAX_ORDER	10	/* 4 MiB slices */
#define OXT_PT_MAX_BYTES	(256ULL << 20)	/* per CPU */
#define OXT_PT_MAX_READ		(64U << 10)	/* bytes one OXT_IOC_PT_READ copies */

struct oxt_pt_config {
	__u32 size;		/* in: sizeof(struct oxt_pt_config) */
	__u32 backend;		/* in: OXT_PT_BACKEND_*; out: the backend in use */
	__u32 mode;		/* in: OXT_PT_MODE_* */
	__u32 nslices;		/* in: slices per CPU, 1..OXT_PT_MAX_SLICES */
	__u32 slice_order;	/* in: slice size 4 KiB << slice_order, 0..OXT_PT_MAX_ORDER */
	__u32 per_table;	/* in: output entries per table, 1..511; 0: 511 */
	__u32 psb_period;	/* in: software: bytes between PSBs, 256..1 MiB; 0: 4096 */
	__u32 ntables;		/* out: tables per CPU */
	__u64 capacity;		/* out: bytes per CPU */
	__u32 ncpus;		/* out: CPUs with a buffer (nr_cpu_ids) */
	__u32 phys_bits;	/* out: MAXPHYADDR used for the tables */
	__u64 reserved[4];	/* in: zero */
};

/* struct oxt_pt_status.state */
#define OXT_PT_STATE_NONE	0	/* not configured */
#define OXT_PT_STATE_READY	1	/* configured, not started */
#define OXT_PT_STATE_RUNNING	2
#define OXT_PT_STATE_STOPPED	3

/* struct oxt_pt_cpu.flags */
#define OXT_PT_CPU_PRESENT	(1U << 0)	/* the CPU was online and answered */
#define OXT_PT_CPU_WRAPPED	(1U << 1)	/* ring wrapped: data starts at position */
#define OXT_PT_CPU_STOPPED	(1U << 2)	/* IA32_RTIT_STATUS.Stopped */
#define OXT_PT_CPU_ERROR	(1U << 3)	/* IA32_RTIT_STATUS.Error (ToPA/walk error) */
#define OXT_PT_CPU_PMI		(1U << 4)	/* INT region filled (software: pending PMI) */
#define OXT_PT_CPU_ENABLED	(1U << 5)	/* TraceEn / the engine is on */

struct oxt_pt_cpu {
	__u64 position;		/* linear offset of the next byte, 0..capacity */
	__u64 data_len;		/* bytes OXT_IOC_PT_READ returns */
	__u64 written;		/* bytes written (software) */
	__u64 lost;		/* bytes lost: stopped, error or no room (software) */
	__u64 wraps;		/* times the ring wrapped (software) */
	__u64 ptws;		/* PTW packets written (software) */
	__u64 output_base;	/* IA32_RTIT_OUTPUT_BASE (or the model's) */
	__u64 mask_ptrs;	/* IA32_RTIT_OUTPUT_MASK_PTRS */
	__u64 rtit_status;	/* IA32_RTIT_STATUS */
	__u32 flags;		/* OXT_PT_CPU_* */
	__s32 error;		/* 0, or a negative errno of this CPU's last start/stop */
	__u64 reserved[2];
};

struct oxt_pt_status {
	__u32 size;		/* in: sizeof(struct oxt_pt_status) */
	__u32 state;		/* out: OXT_PT_STATE_* */
	__u32 backend;		/* out: OXT_PT_BACKEND_SOFT or _HW */
	__u32 mode;		/* out: OXT_PT_MODE_* */
	__u64 capacity;		/* out: bytes per CPU */
	__u64 cpus;		/* in: pointer to struct oxt_pt_cpu[ncpus], or 0 */
	__u32 ncpus;		/* in: entries at cpus; out: entries written */
	__u32 reserved0;	/* in: zero */
	__u64 reserved[4];	/* in: zero */
};

/* Data of one CPU in logical order (oldest first); not while running. */
struct oxt_pt_read {
	__u32 size;		/* in: sizeof(struct oxt_pt_read) */
	__u32 cpu;		/* in */
	__u64 offset;		/* in: logical offset to start at */
	__u64 buf;		/* in: user buffer */
	__u64 buf_len;		/* in: its length (at most OXT_PT_MAX_READ is used) */
	__u64 len;		/* out: bytes copied */
	__u64 total;		/* out: data_len of the CPU */
	__u64 reserved[4];	/* in: zero */
};

/* Debug: physical addresses of one CPU's slices and tables, in walk order. */
struct oxt_pt_layout {
	__u32 size;		/* in: sizeof(struct oxt_pt_layout) */
	__u32 cpu;		/* in */
	__u64 slices;		/* in: pointer to __u64[nslices], or 0 */
	__u64 tables;		/* in: pointer to __u64[ntables], or 0 */
	__u32 nslices;		/* in: entries at slices; out: slices of the CPU */
	__u32 ntables;		/* in: entries at tables; out: tables of the CPU */
	__u32 slice_order;	/* out */
	__u32 reserved0;	/* in: zero */
	__u64 reserved[4];	/* in: zero */
};

#define OXT_IOC_MAGIC 0xb7

#define OXT_IOC_VERSION	_IOWR(OXT_IOC_MAGIC, 0x00, struct oxt_version)
#define OXT_IOC_STATUS	_IOWR(OXT_IOC_MAGIC, 0x01, struct oxt_status)
#define OXT_IOC_LOAD	_IOWR(OXT_IOC_MAGIC, 0x02, struct oxt_load)
#define OXT_IOC_GO	_IO(OXT_IOC_MAGIC, 0x03)
#define OXT_IOC_STOP	_IO(OXT_IOC_MAGIC, 0x04)
#define OXT_IOC_SNAPSHOT _IOWR(OXT_IOC_MAGIC, 0x05, struct oxt_snapshot)
#define OXT_IOC_PROBES	_IOWR(OXT_IOC_MAGIC, 0x06, struct oxt_probes)
#define OXT_IOC_AGGSNAP	_IOWR(OXT_IOC_MAGIC, 0x07, struct oxt_snapshot)
#define OXT_IOC_DYNSTAT	_IOWR(OXT_IOC_MAGIC, 0x08, struct oxt_dynstat)
#define OXT_IOC_PT_CONFIG _IOWR(OXT_IOC_MAGIC, 0x09, struct oxt_pt_config)
#define OXT_IOC_PT_START _IO(OXT_IOC_MAGIC, 0x0a)
#define OXT_IOC_PT_STOP	_IO(OXT_IOC_MAGIC, 0x0b)
#define OXT_IOC_PT_STATUS _IOWR(OXT_IOC_MAGIC, 0x0c, struct oxt_pt_status)
#define OXT_IOC_PT_READ	_IOWR(OXT_IOC_MAGIC, 0x0d, struct oxt_pt_read)
#define OXT_IOC_PT_LAYOUT _IOWR(OXT_IOC_MAGIC, 0x0e, struct oxt_pt_layout)

#endif /* _UAPI_LINUX_OXTRACE_H */
