/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C shim of oxtrace: what Rust can't reach through bindings in 6.12
 * (static inlines, macros, structs whose layout depends on Kconfig).
 * rust/shim.rs declares the same functions; keep the two in step.
 */
#ifndef OXTRACE_SHIM_H
#define OXTRACE_SHIM_H

#include <linux/gfp_types.h>
#include <linux/types.h>

/*
 * Flags of every allocation a user's request makes (LOAD, GO, PT_CONFIG and the
 * other ioctls), here and in rust/ (oxt_gfp_load()): charged to the caller's
 * memory cgroup, failing with ENOMEM instead of calling the OOM killer, and
 * without a warning in the log.
 */
#define OXT_GFP_LOAD (GFP_KERNEL_ACCOUNT | __GFP_NOWARN | __GFP_RETRY_MAYFAIL)

/* OXT_GFP_LOAD, for rust/sys (bindgen does not expand it). */
u32 oxt_gfp_load(void);

struct file;

/* Callbacks of the device, implemented in Rust (rust/miscdev.rs). */
struct oxt_file_ops {
	int (*open)(struct file *file);
	int (*release)(struct file *file);
	long (*ioctl)(struct file *file, unsigned int cmd, unsigned long arg);
};

int oxt_misc_register(const struct oxt_file_ops *ops);
void oxt_misc_deregister(void);
void *oxt_file_private(const struct file *file);
void oxt_file_set_private(struct file *file, void *data);

bool oxt_perfmon_capable(void);
u64 oxt_mem_budget(void);
u64 oxt_consumer_mem_cap(void);
unsigned int oxt_max_consumers(void);
bool oxt_cpu_has_intel_pt(void);
u64 oxt_ktime_get_ns(void);
u64 oxt_mono_fast_ns(void);
u64 oxt_real_fast_ns(void);
unsigned int oxt_nr_cpu_ids(void);
bool oxt_cpu_online(unsigned int cpu);

/* Probe context: task facts of current and safe kernel reads. */
unsigned int oxt_this_cpu(void);
u32 oxt_current_pid(void);
u32 oxt_current_tid(void);
u32 oxt_current_uid(void);
u32 oxt_current_gid(void);
u32 oxt_current_ppid(void);
bool oxt_current_progenyof(u32 pid);
void oxt_raise_init(void);
int oxt_raise(int sig);
void oxt_raise_sync(void);
void oxt_ndelay(u64 ns);
unsigned long oxt_current_task(void);
/* Nanoseconds the current thread has run on a CPU (D's vtimestamp). */
u64 oxt_current_vtime(void);
/* The interrupt level of this context (D's ipl): 0 task, 1 softirq, 2 hardirq, 3 NMI. */
u32 oxt_irq_level(void);
/* Copies current->comm (NUL-terminated, at most len bytes); returns its length. */
size_t oxt_current_comm(char *buf, size_t len);
/* 0, or -EFAULT when [src, src + len) can't be read. */
long oxt_read_nofault(void *dst, unsigned long src, size_t len);

/*
 * kprobes and kretprobes.  A probe is registered disabled, enabled at GO and
 * disabled at STOP; its handler disables interrupts for the whole action and
 * calls ops->fire(cookie, slot, ...), unless an action is already running on
 * this CPU (then ops->recursion(cookie, slot)).  oxt_probes_unregister() waits
 * until no handler can still be running.
 */
struct pt_regs;
struct oxt_probe;

/* The Rust handler of a probe or tick; ops and cookie outlive the probe. */
struct oxt_probe_ops {
	/* cpu: the running CPU, read here where it is one instruction (no call). */
	void (*fire)(void *cookie, unsigned int slot, struct pt_regs *regs, bool is_return,
		     unsigned int cpu);
	void (*recursion)(void *cookie, unsigned int slot);
	/*
	 * One hit of entry probes slots[0..n) (n >= 2, in program order) on one
	 * function, all of one cookie: one set-up for them all.  Kprobes' only:
	 * NULL in the system-call hooks' ops.
	 */
	void (*fire_many)(void *cookie, const unsigned int *slots, unsigned int n,
			  struct pt_regs *regs, unsigned int cpu);
};

struct oxt_probe *oxt_probe_alloc(const char *symbol, bool is_return,
				  const struct oxt_probe_ops *ops, void *cookie,
				  unsigned int slot);
int oxt_probe_register(struct oxt_probe *p);
int oxt_probe_enable(struct oxt_probe *p);
int oxt_probe_disable(struct oxt_probe *p);
void oxt_probes_unregister(struct oxt_probe **probes, unsigned int n);
/*
 * The entry probes among probes[0..n) that sit on ftrace locations, enabled
 * and disabled together in one ftrace update (oxt_probe_enable/disable then
 * leave them alone).  NULL if there are none, memory is short, or the probes
 * do not share ops (with fire_many) and cookie: the probes then stay enabled
 * one by one.  Free only after oxt_fset_disable or with
 * every probe still registered (free disables first).
 */
struct oxt_fset;
struct oxt_fset *oxt_fset_alloc(struct oxt_probe **probes, unsigned int n);
int oxt_fset_enable(struct oxt_fset *s);
void oxt_fset_disable(struct oxt_fset *s);
void oxt_fset_free(struct oxt_fset *s);
/*
 * The return probes among probes[0..n) that sit on ftrace locations, with the
 * entry probes on their functions, through one fprobe (CONFIG_FPROBE):
 * registered at oxt_rset_enable, unregistered (waiting for its handlers) at
 * oxt_rset_disable; oxt_probe_enable/disable leave its probes alone.  Made
 * before the fset, which then leaves those entry probes out.  NULL without
 * CONFIG_FPROBE, without such probes, on short memory, or when the probes do
 * not share ops and cookie.  oxt_rset_free disables the set and gives its
 * probes back to their kprobes (the fallback when the first enable fails).
 */
struct oxt_rset;
struct oxt_rset *oxt_rset_alloc(struct oxt_probe **probes, unsigned int n);
int oxt_rset_enable(struct oxt_rset *s);
void oxt_rset_disable(struct oxt_rset *s);
void oxt_rset_free(struct oxt_rset *s);
/* Returns not hooked because the set's return instances were all in use. */
unsigned long oxt_rset_missed(const struct oxt_rset *s);
void oxt_probe_free(struct oxt_probe *p);
unsigned long oxt_probe_missed(const struct oxt_probe *p);
unsigned long oxt_regs_arg(struct pt_regs *regs, unsigned int n);
unsigned long oxt_regs_retval(struct pt_regs *regs);
/* The probed function's return address (D's caller); 0 without regs. */
unsigned long oxt_regs_caller(struct pt_regs *regs, bool is_return);

/*
 * Periodic tick probes on an hrtimer (hard interrupt context); the callback
 * calls ops->fire(cookie, slot, NULL, false) under the same guard.
 */
struct oxt_tick;
struct oxt_tick *oxt_tick_alloc(const struct oxt_probe_ops *ops, void *cookie,
				unsigned int slot, u64 period_ns);
void oxt_tick_start(struct oxt_tick *t);
void oxt_tick_cancel(struct oxt_tick *t);
void oxt_tick_free(struct oxt_tick *t);

/*
 * Cross-calls: run fn(info) on every online CPU (or on one) with interrupts
 * disabled, under the same guard as actions, and wait for all to finish.
 */
void oxt_xcall_all(void (*fn)(void *info), void *info);
int oxt_xcall_cpu(unsigned int cpu, void (*fn)(void *info), void *info);

/*
 * A periodic kernel thread (process context, may sleep): calls fn(info) every
 * period_ns on an absolute hrtimer schedule (no drift), until stopped.  Used
 * by the dynamic-variable cleaner.  start and stop are serialised by a mutex
 * inside; stop (and free) wait until fn has returned and the thread exited.
 */
struct oxt_periodic;
struct oxt_periodic *oxt_periodic_alloc(void (*fn)(void *info), void *info);
int oxt_periodic_start(struct oxt_periodic *p, u64 period_ns, u64 id);
void oxt_periodic_stop(struct oxt_periodic *p);
/*
 * Asks for a pass now (any context, interrupts off or NMI included): an
 * irq_work wakes the thread, which runs fn at once, at SCHED_FIFO priority,
 * besides its periodic schedule.  Further kicks before that pass starts are
 * folded into it.
 */
void oxt_periodic_kick(struct oxt_periodic *p);
/* Times fn ran since the object was allocated. */
u64 oxt_periodic_runs(const struct oxt_periodic *p);
void oxt_periodic_free(struct oxt_periodic *p);

/* Waits until every handler that may have started before returns (kprobe
 * handlers run with preemption or interrupts off). */
void oxt_synchronize_rcu(void);

/* Run fn(info) as an action would: interrupts off, under the guard (BEGIN/END). */
void oxt_run_as_action(void (*fn)(void *info), void *info);

/*
 * Intel PT (rust/pt.rs): separate page allocations for ToPA slices and
 * tables, the fault-safe RTIT MSR accessors and CPUID.
 */
struct page;
/* 2^order zeroed pages (OXT_GFP_LOAD), or NULL. */
struct page *oxt_pages_alloc(unsigned int order);
void oxt_pages_free(struct page *page, unsigned int order);
void *oxt_page_address(struct page *page);
u64 oxt_page_phys(struct page *page);
/* 0, or -EIO when the MSR access faulted (rdmsrl_safe/wrmsrl_safe). */
int oxt_rdmsr_safe(u32 msr, u64 *val);
int oxt_wrmsr_safe(u32 msr, u64 val);
/* regs[0..4] = EAX, EBX, ECX, EDX of CPUID(leaf, subleaf). */
void oxt_cpuid_count(u32 leaf, u32 subleaf, u32 *regs);
u64 oxt_rdtsc(void);
unsigned int oxt_phys_bits(void);

/*
 * The one path of every probe hit (shim.c), called with interrupts off:
 * ops->fire(cookie, slot, regs, is_return) under the per-CPU action guard, or
 * ops->recursion(cookie, slot) when an action runs on this CPU already or the
 * stack has less than OXT_STACK_MIN left.
 */
void oxt_hit(const struct oxt_probe_ops *ops, void *cookie, unsigned int slot,
	     struct pt_regs *regs, bool is_return);

/*
 * oxt_hit() of an entry hit from a context with interrupts on (a user-space
 * probe's handler, uprobe.c): turns them off around it; returns 0, so that the
 * handler's last call is a tail call.
 */
int oxt_hit_irqsave(const struct oxt_probe_ops *ops, void *cookie, unsigned int slot,
		    struct pt_regs *regs);

/*
 * Providers beyond kprobes (provider.c).
 *
 * Syscall hooks: a probe on the raw sys_enter or sys_exit tracepoint.  A hit
 * calls ops->fire(cookie, nr, regs, is_return) under the action guard with
 * interrupts off, nr the system call's number and regs its user registers.
 * Registered at enable, unregistered at disable; free waits until no hit can
 * still run.
 */
struct oxt_syshook;
struct oxt_syshook *oxt_syshook_alloc(bool is_return, const struct oxt_probe_ops *ops,
				      void *cookie);
int oxt_syshook_enable(struct oxt_syshook *h);
void oxt_syshook_disable(struct oxt_syshook *h);
void oxt_syshook_free(struct oxt_syshook *h);
/* Argument n (0-based) of the system call whose registers are regs. */
unsigned long oxt_syscall_arg(struct pt_regs *regs, unsigned int n);

/*
 * Profile timers: one pinned hrtimer per CPU, running on every online CPU
 * while enabled (CPUs that come online start theirs, CPUs that go offline
 * stop theirs).  A hit calls ops->fire(cookie, slot, regs, false), regs the
 * interrupted registers (get_irq_regs()).
 */
struct oxt_profile;
struct oxt_profile *oxt_profile_alloc(const struct oxt_probe_ops *ops, void *cookie,
				      unsigned int slot, u64 period_ns);
void oxt_profile_enable(struct oxt_profile *p);
void oxt_profile_disable(struct oxt_profile *p);
void oxt_profile_free(struct oxt_profile *p);
/* The interrupted PC if regs are kernel (or user) registers, else 0. */
unsigned long oxt_regs_kernel_pc(struct pt_regs *regs);
unsigned long oxt_regs_user_pc(struct pt_regs *regs);

/* Where oxt_kernel_stack() starts its walk (the probe's kind decides). */
enum oxt_stack_from {
	/* here, in the shim; with kernel regs the frames up to their PC are dropped */
	OXT_STACK_FROM_HERE = 0,
	/* at kernel regs (return and profile probes): their PC, then its callers */
	OXT_STACK_FROM_REGS = 1,
	/* at an entry probe's kernel regs: the probed function's callers */
	OXT_STACK_FROM_ENTRY = 2,
};

/*
 * The kernel stack of a probe hit into out[0..max) (if out), walked from
 * where `from` says; without kernel regs always from here, the module's
 * frames left out.  Returns the number of entries.  Safe in probe context.
 */
unsigned int oxt_kernel_stack(struct pt_regs *regs, unsigned int from, unsigned long *out,
			      unsigned int max);
/* The number of entries oxt_kernel_stack() finds without a bound (stackdepth). */
unsigned int oxt_kernel_stack_depth(struct pt_regs *regs, unsigned int from);
/*
 * The user PC and frame pointer of current (ustack()): from regs when they are
 * user registers, else from the registers saved at its kernel entry.  False
 * for a kernel thread or a task without user memory.  Safe in probe context.
 */
bool oxt_user_regs(struct pt_regs *regs, unsigned long *pc, unsigned long *fp);
bool oxt_user_reg(struct pt_regs *regs, unsigned int idx, unsigned long *out);

/*
 * Tracepoint events: a perf tracepoint counter (config = the event's id) on
 * each CPU online at allocation, sampling every hit with its raw record.  A hit
 * calls ops->fire(cookie, slot, regs, false) under the guard with interrupts
 * off; oxt_tp_record() is the event's record meanwhile.  Enabled and disabled
 * with the counters; free waits until no hit can still run.
 */
struct oxt_tpev;
struct oxt_tpev *oxt_tpev_alloc(const struct oxt_probe_ops *ops, void *cookie,
				unsigned int slot, u64 id);
void oxt_tpev_enable(struct oxt_tpev *t);
void oxt_tpev_disable(struct oxt_tpev *t);
void oxt_tpev_free(struct oxt_tpev *t);
/* The record of the tracepoint event this CPU is handling, or 0. */
unsigned long oxt_tp_record(void);

/* 0, or -EFAULT when user memory [src, src + len) of current can't be read. */
long oxt_read_user_nofault(void *dst, unsigned long src, size_t len);
/*
 * 0, -EFAULT when user memory [dst, dst + len) of current can't be written, or
 * -EPERM when current's user memory is not at hand: in an interrupt, a kernel
 * thread, an exiting task, or while another mm is loaded.
 */
long oxt_write_user_nofault(unsigned long dst, const void *src, size_t len);

/*
 * User-space probes (uprobe.c): a uprobe on the instruction at file offset
 * `offset` of the regular file at `path`, with USDT semaphore `ref_ctr` (a
 * file offset, or 0), that fires only in the address space process `pid` has
 * now.  Registered here (ERR_PTR: ESRCH the process is gone, EPERM it is the
 * caller's own or one it may not trace, EINVAL a kernel thread, a file that is
 * not regular, an offset past its end or an instruction uprobes can't probe;
 * kern_path()'s errno for the path), disabled: a hit calls
 * ops->fire(cookie, slot, regs, false) under the action guard with interrupts
 * off, regs the user registers, only while enabled.  oxt_uprobes_free()
 * unregisters and frees u[0..n) and returns when no handler still runs.
 */
struct oxt_uprobe;
struct oxt_uprobe *oxt_uprobe_alloc(const char *path, u64 offset, u64 ref_ctr, int pid,
				    const struct oxt_probe_ops *ops, void *cookie,
				    unsigned int slot);
void oxt_uprobe_enable(struct oxt_uprobe *u, bool on);
void oxt_uprobes_free(struct oxt_uprobe **u, unsigned int n);
/* Whether the kernel has uprobes (CONFIG_UPROBES). */
bool oxt_uprobes_available(void);

/* Module exit: releases what the providers set up for the module's lifetime. */
void oxt_provider_exit(void);

#endif /* OXTRACE_SHIM_H */
