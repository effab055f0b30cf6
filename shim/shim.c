// SPDX-License-Identifier: GPL-2.0
/*
 * The C shim of oxtrace: the misc device and its file_operations (owner =
 * THIS_MODULE, so an open consumer pins the module), and wrappers for static
 * inlines and macros, kprobe and hrtimer plumbing, and the per-CPU action
 * guard.  Mechanism only: the logic is in rust/.
 */
#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/fprobe.h>
#include <linux/ftrace.h>
#include <linux/hrtimer.h>
#include <linux/irq_work.h>
#include <linux/delay.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/bsearch.h>
#include <linux/sort.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/timekeeping.h>
#include <linux/gfp.h>
#include <linux/hash.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <asm/cpufeature.h>
#include <asm/io.h>
#include <asm/msr.h>
#include <asm/processor.h>
#include <asm/current.h>
#include <asm/page.h>
#include <uapi/linux/oxtrace.h>

#include "shim.h"

static const struct oxt_file_ops *oxt_ops;

static int oxt_fop_open(struct inode *inode, struct file *file)
{
	return oxt_ops->open(file);
}

static int oxt_fop_release(struct inode *inode, struct file *file)
{
	return oxt_ops->release(file);
}

static long oxt_fop_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	return oxt_ops->ioctl(file, cmd, arg);
}

static const struct file_operations oxt_fops = {
	.owner = THIS_MODULE,
	.open = oxt_fop_open,
	.release = oxt_fop_release,
	.unlocked_ioctl = oxt_fop_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice oxt_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = OXT_DEVICE_NAME,
	.fops = &oxt_fops,
	.mode = 0600,
};

int oxt_misc_register(const struct oxt_file_ops *ops)
{
	/* Set before the device is visible; never changes while registered. */
	oxt_ops = ops;
	return misc_register(&oxt_misc);
}

void oxt_misc_deregister(void)
{
	misc_deregister(&oxt_misc);
}

void *oxt_file_private(const struct file *file)
{
	return file->private_data;
}

void oxt_file_set_private(struct file *file, void *data)
{
	file->private_data = data;
}

/*
 * Memory and consumer bounds, tunable at load or in /sys/module/oxtrace/parameters.
 * Rust reads them through the functions below (6.12's Rust has no module_param).
 */
static unsigned int mem_budget_pct = 25;
module_param(mem_budget_pct, uint, 0644);
MODULE_PARM_DESC(mem_budget_pct, "RAM percentage all consumers' LOADs may hold together (default 25)");
static unsigned int consumer_mem_pct = 12;
module_param(consumer_mem_pct, uint, 0644);
MODULE_PARM_DESC(consumer_mem_pct, "RAM percentage one consumer's LOAD may hold (default 12)");
static unsigned int max_consumers = 1024;
module_param(max_consumers, uint, 0644);
MODULE_PARM_DESC(max_consumers, "Most consumers open at once; open() beyond gets EBUSY (default 1024)");

static u64 oxt_ram_pct(unsigned int pct)
{
	return div_u64((u64)totalram_pages() * PAGE_SIZE * min(pct, 100U), 100);
}

u64 oxt_mem_budget(void)
{
	return oxt_ram_pct(READ_ONCE(mem_budget_pct));
}

u64 oxt_consumer_mem_cap(void)
{
	return oxt_ram_pct(READ_ONCE(consumer_mem_pct));
}

unsigned int oxt_max_consumers(void)
{
	return READ_ONCE(max_consumers);
}

bool oxt_perfmon_capable(void)
{
	return perfmon_capable();
}

bool oxt_cpu_has_intel_pt(void)
{
	return boot_cpu_has(X86_FEATURE_INTEL_PT);
}

u64 oxt_ktime_get_ns(void)
{
	return ktime_get_ns();
}

u64 oxt_mono_fast_ns(void)
{
	return ktime_get_mono_fast_ns();
}

u64 oxt_real_fast_ns(void)
{
	return ktime_get_real_fast_ns();
}

unsigned int oxt_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

bool oxt_cpu_online(unsigned int cpu)
{
	return cpu < nr_cpu_ids && cpu_online(cpu);
}

unsigned int oxt_this_cpu(void)
{
	return raw_smp_processor_id();
}

u32 oxt_current_pid(void)
{
	return task_tgid_nr(current);
}

u32 oxt_current_tid(void)
{
	return task_pid_nr(current);
}

u32 oxt_current_uid(void)
{
	return from_kuid_munged(&init_user_ns, current_uid());
}

u32 oxt_current_gid(void)
{
	return from_kgid_munged(&init_user_ns, current_gid());
}

u32 oxt_current_ppid(void)
{
	u32 ppid;

	/* real_parent is RCU-protected; interrupts are off, which is a read-side section */
	rcu_read_lock();
	ppid = task_tgid_nr(rcu_dereference(current->real_parent));
	rcu_read_unlock();
	return ppid;
}

/*
 * Whether current's process is @pid or descends from it (D's progenyof()).  The walk up
 * real_parent ends at the idle task (its own parent) and is bounded by OXT_PROGENY_MAX
 * steps so that probe context stays short whatever the tree.
 */
#define OXT_PROGENY_MAX 1024
bool oxt_current_progenyof(u32 pid)
{
	struct task_struct *t, *p;
	bool found = false;
	int i;

	rcu_read_lock();
	t = current;
	for (i = 0; i < OXT_PROGENY_MAX; i++) {
		if (task_tgid_nr(t) == pid) {
			found = true;
			break;
		}
		p = rcu_dereference(t->real_parent);
		if (!p || p == t)
			break;
		t = p;
	}
	rcu_read_unlock();
	return found;
}

/*
 * raise(): a signal for current, sent from an irq_work once the probe has returned, not
 * from probe context (which may hold siglock or run where signalling is unsafe).  One per
 * CPU in flight; busy is cleared by the work after it has sent the signal.
 */
struct oxt_raise {
	struct irq_work work;
	struct task_struct *task;
	int sig;
	atomic_t busy;
};

static void oxt_raise_fn(struct irq_work *w)
{
	struct oxt_raise *r = container_of(w, struct oxt_raise, work);

	send_sig(r->sig, r->task, 0);
	put_task_struct(r->task);
	atomic_set_release(&r->busy, 0);
}

static DEFINE_PER_CPU(struct oxt_raise, oxt_raise_pcpu);

/* At load, before any probe: every CPU's work. */
void oxt_raise_init(void)
{
	int cpu;

	for_each_possible_cpu(cpu)
		init_irq_work(&per_cpu_ptr(&oxt_raise_pcpu, cpu)->work, oxt_raise_fn);
}

int oxt_raise(int sig)
{
	struct oxt_raise *r = this_cpu_ptr(&oxt_raise_pcpu);

	if (!valid_signal(sig) || sig == 0)
		return -EINVAL;
	if (atomic_xchg(&r->busy, 1))
		return -EBUSY;
	r->task = get_task_struct(current);
	r->sig = sig;
	irq_work_queue(&r->work);
	return 0;
}

/* At unload: no raise() work may still run module code. */
void oxt_raise_sync(void)
{
	int cpu;

	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr(&oxt_raise_pcpu, cpu)->work);
}

/* chill(): spin ns nanoseconds (the caller keeps the budget). */
void oxt_ndelay(u64 ns)
{
	while (ns > 1000000) {
		mdelay(1);
		ns -= 1000000;
	}
	ndelay(ns);
}

unsigned long oxt_current_task(void)
{
	return (unsigned long)current;
}

u64 oxt_current_vtime(void)
{
	/* Updated by the scheduler at each tick and switch; the current slice since then is not in. */
	return READ_ONCE(current->se.sum_exec_runtime);
}

u32 oxt_irq_level(void)
{
	if (in_nmi())
		return 3;
	if (in_hardirq())
		return 2;
	if (in_serving_softirq())
		return 1;
	return 0;
}

size_t oxt_current_comm(char *buf, size_t len)
{
	ssize_t n;

	if (!len)
		return 0;
	n = strscpy(buf, current->comm, len);
	return n < 0 ? len - 1 : n;
}

long oxt_read_nofault(void *dst, unsigned long src, size_t len)
{
	return copy_from_kernel_nofault(dst, (const void *)src, len);
}

/*
 * The action guard: nonzero while an action (or a cross-call handler of
 * ours) runs on this CPU.  Anything of ours that would start while it is set
 * (a probe hit from inside an action, or from an NMI that interrupted one) is
 * not run but counted, so per-CPU state has one user at a time.
 */
static DEFINE_PER_CPU(int, oxt_action_depth);

static bool oxt_guard_enter(void)
{
	return this_cpu_inc_return(oxt_action_depth) == 1;
}

static void oxt_guard_exit(void)
{
	this_cpu_dec(oxt_action_depth);
}

struct oxt_probe {
	struct kretprobe krp;	/* krp.kp is the probe of an entry probe too */
	bool is_return;
	bool in_fset;		/* enabled through an oxt_fset, not by itself */
	bool in_rset;		/* enabled through an oxt_rset, not by itself */
	unsigned int slot;
	const struct oxt_probe_ops *ops;
	void *cookie;
};

/*
 * OXT_PROFILE_IRQS_ON: make bench's profiling build only (never loaded otherwise).
 * Interrupts stay on in the action so that a timer sample lands where the time
 * goes; cross-calls then no longer exclude actions, so make bench runs it only
 * with aggrate and switchrate far beyond the sampled run and without dynamic
 * variables.
 */
#ifdef OXT_PROFILE_IRQS_ON
#define oxt_probe_irq_save(flags) ((flags) = 0)
#define oxt_probe_irq_restore(flags) ((void)(flags))
#else
#define oxt_probe_irq_save(flags) local_irq_save(flags)
#define oxt_probe_irq_restore(flags) local_irq_restore(flags)
#endif

/*
 * Stack an action may need below the point where a probe fires: the fire path
 * (scripts/stackcheck.py keeps it under 1 KiB), the kernel functions it calls,
 * and a page fault taken by a nofault read on the same stack.
 */
#define OXT_STACK_MIN 4096

/*
 * Bytes left below the stack pointer on the task or hard-IRQ stack this runs
 * on; 0 on any other stack (an exception or NMI stack: too small to guess).
 */
static unsigned long oxt_stack_left(void)
{
	unsigned long sp = current_stack_pointer;
	unsigned long lo = (unsigned long)task_stack_page(current);

	if (sp - lo < THREAD_SIZE)
		return sp - lo;
	lo = (unsigned long)this_cpu_read(pcpu_hot.hardirq_stack_ptr) + 8 - IRQ_STACK_SIZE;
	if (sp - lo < IRQ_STACK_SIZE)
		return sp - lo;
	return 0;
}

/*
 * Whether a hit may run its action: the guard taken (no action already running on this
 * CPU) and enough stack left.  A hit too deep in its stack is skipped like a recursive
 * one: counted.  The caller releases the guard with oxt_guard_exit() either way.
 */
static __always_inline bool oxt_may_fire(void)
{
	return oxt_guard_enter() && oxt_stack_left() >= OXT_STACK_MIN;
}

/* oxt_hit(), inlined into the kprobe and tick handlers: no frame on the deepest path. */
static __always_inline void oxt_hit_here(const struct oxt_probe_ops *ops, void *cookie,
					 unsigned int slot, struct pt_regs *regs,
					 bool is_return)
{
	if (oxt_may_fire())
		ops->fire(cookie, slot, regs, is_return, raw_smp_processor_id());
	else
		ops->recursion(cookie, slot);
	oxt_guard_exit();
}

void oxt_hit(const struct oxt_probe_ops *ops, void *cookie, unsigned int slot,
	     struct pt_regs *regs, bool is_return)
{
	oxt_hit_here(ops, cookie, slot, regs, is_return);
}

/*
 * Out of line and without a stack protector (its frame holds only the flags word,
 * as oxt_probe_run's below): a user-space probe's handler tail-calls it, so the
 * handler needs neither a frame nor a canary of its own.
 */
noinline __no_stack_protector int oxt_hit_irqsave(const struct oxt_probe_ops *ops,
						  void *cookie, unsigned int slot,
						  struct pt_regs *regs)
{
	unsigned long flags;

	local_irq_save(flags);
	oxt_hit_here(ops, cookie, slot, regs, false);
	local_irq_restore(flags);
	return 0;
}

/*
 * No stack protector here, in oxt_probe_run_many and in oxt_kretprobe_entry: their
 * frames hold no array, only the flags word local_irq_save's pushf writes through
 * memory, which alone made the compiler put a canary (five instructions on every hit)
 * around it.
 */
static noinline __no_stack_protector void oxt_probe_run(struct oxt_probe *p,
							 struct pt_regs *regs)
{
	unsigned long flags;

	oxt_probe_irq_save(flags);
	oxt_hit_here(p->ops, p->cookie, p->slot, regs, p->is_return);
	oxt_probe_irq_restore(flags);
}

/* The hits of slots[0..n) not run: counted, out of the fire path's frame. */
static noinline void oxt_recursion_many(struct oxt_probe *p, const unsigned int *slots,
					unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		p->ops->recursion(p->cookie, slots[i]);
}

/*
 * Entry probes slots[0..n) of one program on one function (an fset's run, which
 * shares p's ops and cookie): one guard, one call, one set-up in the handler.
 * Out of line, as oxt_probe_run, so that the fset handler tail-calls both and
 * leaves no frame of its own under the action.
 */
static noinline __no_stack_protector void
oxt_probe_run_many(struct oxt_probe *p, const unsigned int *slots, unsigned int n,
		   struct pt_regs *regs)
{
	unsigned long flags;

	oxt_probe_irq_save(flags);
	if (oxt_may_fire())
		p->ops->fire_many(p->cookie, slots, n, regs, raw_smp_processor_id());
	else
		oxt_recursion_many(p, slots, n);
	oxt_guard_exit();
	oxt_probe_irq_restore(flags);
}

static int oxt_kprobe_pre(struct kprobe *kp, struct pt_regs *regs)
{
	oxt_probe_run(container_of(kp, struct oxt_probe, krp.kp), regs);
	return 0;
}

static int oxt_kretprobe_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	oxt_probe_run(container_of(get_kretprobe(ri), struct oxt_probe, krp), regs);
	return 0;
}

/*
 * At the entry of a return-probed function: don't hook its return when the
 * stack is nearly used up.  rethook runs kernel code after the return handler
 * (rethook_recycle), outside any guard; if that code reaches a return-probed
 * function, each return starts another, a nest bounded only by the instances
 * (max(16, 4 x CPUs)).  Refusing the hook below OXT_STACK_MIN bounds the nest
 * by the stack instead, whatever the instance count; the skipped return is
 * counted as recursion.  (rust/core/probesafe.rs refuses the functions known
 * to nest this way in the first place.)
 */
static __no_stack_protector int oxt_kretprobe_entry(struct kretprobe_instance *ri,
						    struct pt_regs *regs)
{
	struct oxt_probe *p = container_of(get_kretprobe(ri), struct oxt_probe, krp);
	unsigned long flags;

	if (oxt_stack_left() >= OXT_STACK_MIN)
		return 0;
	local_irq_save(flags);
	p->ops->recursion(p->cookie, p->slot);
	local_irq_restore(flags);
	return 1;
}

struct oxt_probe *oxt_probe_alloc(const char *symbol, bool is_return,
				  const struct oxt_probe_ops *ops, void *cookie,
				  unsigned int slot)
{
	struct oxt_probe *p = kzalloc(sizeof(*p), OXT_GFP_LOAD);

	if (!p)
		return NULL;
	p->krp.kp.symbol_name = kstrdup(symbol, OXT_GFP_LOAD);
	if (!p->krp.kp.symbol_name) {
		kfree(p);
		return NULL;
	}
	p->is_return = is_return;
	p->ops = ops;
	p->cookie = cookie;
	p->slot = slot;
	p->krp.kp.flags = KPROBE_FLAG_DISABLED;
	if (is_return) {
		p->krp.handler = oxt_kretprobe_ret;
		p->krp.entry_handler = oxt_kretprobe_entry;
		/* enough instances for every CPU to be a few calls deep */
		p->krp.maxactive = max_t(int, 16, 4 * num_possible_cpus());
	} else {
		p->krp.kp.pre_handler = oxt_kprobe_pre;
	}
	return p;
}

int oxt_probe_register(struct oxt_probe *p)
{
	return p->is_return ? register_kretprobe(&p->krp) : register_kprobe(&p->krp.kp);
}

int oxt_probe_enable(struct oxt_probe *p)
{
	return p->in_fset || p->in_rset ? 0 : enable_kprobe(&p->krp.kp);
}

int oxt_probe_disable(struct oxt_probe *p)
{
	return p->in_fset || p->in_rset ? 0 : disable_kprobe(&p->krp.kp);
}

/*
 * Entry probes on ftrace locations, switched together through one ftrace_ops:
 * one ftrace update (one round of text patching) per GO or STOP instead of one
 * per probe, which made attaching hundreds of functions take seconds.  Their
 * kprobes stay registered, disabled: registration resolved the name, checked
 * the kprobe blacklist and found the ftrace location, and keeps the function's
 * module pinned.  A hit runs the probe's handler exactly as the kprobe would
 * (oxt_probe_run: interrupts off, the guard, the stack check).
 */
struct oxt_fent {
	unsigned long ip;
	unsigned int order;	/* the probe's place in the program */
	unsigned int run;	/* entries on ip from this one on (in the padding) */
	struct oxt_probe *p;
};

/*
 * Where each function's first entry is in a sorted ent[]: open addressing over
 * the distinct ips, at most half full, so that a hit finds its probes in the
 * same few instructions with one function attached or ten thousand (a binary
 * search grew by about 11 instructions per halving).  Built at the first GO,
 * never in probe context.
 */
struct oxt_fidx {
	unsigned int bits;	/* 1 << bits places */
	unsigned int mask;	/* (1 << bits) - 1 */
	u32 *first;		/* an ent[] index, or OXT_FIDX_NONE */
};

#define OXT_FIDX_NONE U32_MAX

static int oxt_fidx_build(struct oxt_fidx *x, const struct oxt_fent *ent, unsigned int n)
{
	unsigned int i, h, u = 0, bits;

	for (i = 0; i < n; i++)
		u += !i || ent[i].ip != ent[i - 1].ip;
	bits = ilog2(roundup_pow_of_two(max(2 * u, 2U)));
	x->bits = bits;
	x->mask = (1U << bits) - 1;
	x->first = kvmalloc_array(x->mask + 1, sizeof(*x->first), OXT_GFP_LOAD);
	if (!x->first)
		return -ENOMEM;
	memset(x->first, 0xff, (x->mask + 1) * sizeof(*x->first));
	for (i = 0; i < n; i++) {
		if (i && ent[i].ip == ent[i - 1].ip)
			continue;
		for (h = hash_long(ent[i].ip, bits); x->first[h] != OXT_FIDX_NONE;)
			h = (h + 1) & x->mask;
		x->first[h] = i;
	}
	return 0;
}

/*
 * The first of ent[0..n) on ip, or n.  Ends at an empty place: at most half
 * of them are taken.
 */
static __always_inline unsigned int oxt_fidx_find(const struct oxt_fidx *x,
						  const struct oxt_fent *ent, unsigned int n,
						  unsigned long ip)
{
	unsigned int h = hash_long(ip, x->bits);
	u32 i;

	while ((i = x->first[h]) != OXT_FIDX_NONE) {
		if (ent[i].ip == ip)
			return i;
		h = (h + 1) & x->mask;
	}
	return n;
}

struct oxt_fset {
	struct ftrace_ops ops;
	unsigned int n;
	bool enabled;
	struct oxt_fidx idx;	/* where ent[] has each ip, when n > 1 */
	unsigned int *slot;	/* slot[i] is ent[i].p->slot: a run of them goes to fire_many */
	struct oxt_fent ent[];	/* sorted by ip */
};

static int oxt_fent_cmp(const void *a, const void *b)
{
	const struct oxt_fent *x = a, *y = b;

	/*
	 * sort() is not stable: probes on one function run in program order, as DTrace
	 * runs the clauses of one probe (`n++` in one clause, `n == 8` in the next).
	 */
	if (x->ip != y->ip)
		return x->ip < y->ip ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * Without FTRACE_OPS_FL_SAVE_REGS an ops alone on a function gets a trampoline
 * made from ftrace_caller, not ftrace_regs_caller: no pushfq/popfq around the
 * call and seven register stores fewer on every hit (under TCG a popf also
 * ends the translated block).  On x86-64 with ftrace args the frame ftrace_caller
 * passes is a pt_regs (ftrace_64.S, "regs go into 4th parameter") holding
 * what a hit reads: the argument registers, ip, sp and bp.  Its cs is 0, so
 * user_mode() is false, which is right for a function entry.  When another
 * ops on the function asked for all registers, ftrace_get_regs() has them.
 */
#if defined(CONFIG_X86_64) && defined(CONFIG_HAVE_DYNAMIC_FTRACE_WITH_ARGS)
#define OXT_FSET_FLAGS 0
static struct pt_regs *oxt_fset_regs(struct ftrace_regs *fregs)
{
	struct pt_regs *regs = ftrace_get_regs(fregs);

	return regs ?: (struct pt_regs *)fregs;
}
#else
#define OXT_FSET_FLAGS FTRACE_OPS_FL_SAVE_REGS
static struct pt_regs *oxt_fset_regs(struct ftrace_regs *fregs)
{
	return ftrace_get_regs(fregs);
}
#endif

/*
 * No ftrace_test_recursion_trylock(): the ops does not ask ftrace for recursion
 * protection (FTRACE_OPS_FL_RECURSION), so the callback must protect itself,
 * and the action guard does.  Before oxt_guard_enter() the handler calls only
 * the shim's runners (oxt_probe_run, oxt_probe_run_many), which
 * rust/core/probesafe.rs refuses as probes with the rest of the shim (the oxt_
 * prefix), as it refuses what they call after it; a hit that recurses anyway
 * finds the guard taken and is counted.  The lock's two per-context bit tests cost about 30
 * instructions on every hit.  Nor does the set need the preemption the lock
 * disabled: the instructions before the cli only read the set, and ftrace's
 * unregistration of an allocated ops waits for callbacks in every context
 * (tasks RCU) before the set is freed.
 */
static void oxt_fset_handler(unsigned long ip, unsigned long parent_ip,
			     struct ftrace_ops *ops, struct ftrace_regs *fregs)
{
	struct oxt_fset *s = container_of(ops, struct oxt_fset, ops);
	struct pt_regs *regs = oxt_fset_regs(fregs);
	/*
	 * The first probe on ip; a set of one probe, the commonest, has only
	 * place 0, whose ip is checked below.
	 */
	unsigned int lo = s->n > 1 ? oxt_fidx_find(&s->idx, s->ent, s->n, ip) : 0;

	if (lo >= s->n || s->ent[lo].ip != ip)
		return;
	if (s->ent[lo].run == 1)
		oxt_probe_run(s->ent[lo].p, regs);
	else
		oxt_probe_run_many(s->ent[lo].p, s->slot + lo, s->ent[lo].run, regs);
}

static int oxt_ulong_cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* A return probe whose kprobe puts kprobes' ftrace_ops on its function. */
static bool oxt_ftrace_return(struct oxt_probe *p)
{
	return p->is_return && !p->in_rset && kprobe_ftrace(&p->krp.kp);
}

/* An entry probe the fset takes: on an ftrace location, not run by an rset. */
static bool oxt_fset_takes(struct oxt_probe *p)
{
	return !p->is_return && !p->in_rset && kprobe_ftrace(&p->krp.kp);
}

/*
 * Leaves out of the set an entry probe that is alone on its function when a
 * return probe of the program is on it too (the latency script's pair).  The
 * return probe's kprobe puts kprobes' own ftrace_ops on the function; with ours
 * there as well, every call of it goes through ftrace_ops_list_func, which
 * tests every registered ops' filter.  Left out, the entry probe is an enabled
 * kprobe that kprobes aggregates with the return probe's: one ops, one
 * handler, as a kprobe/kretprobe pair of bpftrace has.  Two or more entry
 * probes on one function stay in the set, which runs them in program order
 * (an aggregated kprobe runs its kprobes in reverse order of registration).
 * Returns the entries kept, in order; on no memory, keeps them all.
 */
static unsigned int oxt_fset_drop_paired(struct oxt_fset *s, struct oxt_probe **probes,
					 unsigned int n)
{
	unsigned long *rips;
	unsigned int i, j, r = 0, k = 0;

	for (i = 0; i < n; i++)
		r += oxt_ftrace_return(probes[i]);
	if (!r)
		return s->n;
	rips = kvmalloc_array(r, sizeof(*rips), OXT_GFP_LOAD);
	if (!rips)
		return s->n;
	for (i = 0, j = 0; i < n; i++)
		if (oxt_ftrace_return(probes[i]))
			rips[j++] = (unsigned long)probes[i]->krp.kp.addr;
	sort(rips, r, sizeof(*rips), oxt_ulong_cmp, NULL);
	for (i = 0; i < s->n; i++) {
		bool alone = (!i || s->ent[i - 1].ip != s->ent[i].ip) &&
			     (i + 1 == s->n || s->ent[i + 1].ip != s->ent[i].ip);

		if (alone && bsearch(&s->ent[i].ip, rips, r, sizeof(*rips), oxt_ulong_cmp))
			continue;
		s->ent[k++] = s->ent[i];
	}
	kvfree(rips);
	return k;
}

/*
 * Whether the @n probes can share one ftrace_ops or fprobe: a run of such a set is fired
 * through its first probe's ops and cookie, so every probe must have the same ones.
 */
static bool oxt_set_fires_as_one(struct oxt_probe **probes, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!probes[i]->ops->fire_many || probes[i]->ops != probes[0]->ops ||
		    probes[i]->cookie != probes[0]->cookie)
			return false;
	return true;
}

struct oxt_fset *oxt_fset_alloc(struct oxt_probe **probes, unsigned int n)
{
	struct oxt_fset *s;
	unsigned long *ips;
	unsigned int i, m = 0, u = 0;

	if (!oxt_set_fires_as_one(probes, n))
		return NULL;
	for (i = 0; i < n; i++)
		m += oxt_fset_takes(probes[i]);
	if (!m)
		return NULL;
	s = kvzalloc(size_add(struct_size(s, ent, m), array_size(m, sizeof(*s->slot))),
		     OXT_GFP_LOAD);
	ips = kvmalloc_array(m, sizeof(*ips), OXT_GFP_LOAD);
	if (!s || !ips)
		goto fail;
	for (i = 0; i < n; i++) {
		struct oxt_probe *p = probes[i];

		if (!oxt_fset_takes(p))
			continue;
		s->ent[s->n++] = (struct oxt_fent){
			.ip = (unsigned long)p->krp.kp.addr, .order = i, .p = p };
	}
	sort(s->ent, s->n, sizeof(s->ent[0]), oxt_fent_cmp, NULL);
	s->n = oxt_fset_drop_paired(s, probes, n);
	if (!s->n)
		goto fail;
	s->slot = (unsigned int *)&s->ent[m];
	for (i = s->n; i-- > 0;) {
		s->slot[i] = s->ent[i].p->slot;
		s->ent[i].run = i + 1 < s->n && s->ent[i + 1].ip == s->ent[i].ip ?
				s->ent[i + 1].run + 1 : 1;
	}
	for (i = 0; i < s->n; i++)
		if (!u || ips[u - 1] != s->ent[i].ip)
			ips[u++] = s->ent[i].ip;
	if (s->n > 1 && oxt_fidx_build(&s->idx, s->ent, s->n))
		goto fail;
	s->ops.func = oxt_fset_handler;
	s->ops.flags = OXT_FSET_FLAGS;
	if (ftrace_set_filter_ips(&s->ops, ips, u, 0, 1))
		goto fail_filter;
	kvfree(ips);
	for (i = 0; i < s->n; i++)
		s->ent[i].p->in_fset = true;
	return s;
fail_filter:
	ftrace_free_filter(&s->ops);
fail:
	kvfree(ips);
	if (s)
		kvfree(s->idx.first);
	kvfree(s);
	return NULL;
}

int oxt_fset_enable(struct oxt_fset *s)
{
	int ret = 0;

	if (!s->enabled)
		ret = register_ftrace_function(&s->ops);
	s->enabled = !ret;
	return ret;
}

void oxt_fset_disable(struct oxt_fset *s)
{
	/* returns when no CPU can still be in the handler */
	if (s->enabled)
		unregister_ftrace_function(&s->ops);
	s->enabled = false;
}

void oxt_fset_free(struct oxt_fset *s)
{
	if (!s)
		return;
	oxt_fset_disable(s);
	ftrace_free_filter(&s->ops);
	kvfree(s->idx.first);
	kvfree(s);
}

/*
 * Return probes on ftrace locations, and the entry probes on their functions,
 * through one fprobe (CONFIG_FPROBE): one ftrace_ops whose filter holds every
 * function, registered at GO and unregistered at STOP in one ftrace update
 * each, where a kretprobe per function costs one update each (and its own
 * pool of return instances).  The fprobe's entry handler runs the function's
 * entry probes and lets fprobe hook its return (rethook, as a kretprobe's);
 * its exit handler runs the return probes.  Both find the function's probes by
 * index (struct oxt_fidx) into ent[], sorted by ip, then entry before return, then program
 * order.  fprobe's handlers take ftrace's recursion lock; the hits go through
 * oxt_probe_run and oxt_probe_run_many (interrupts off, the action guard, the
 * stack check) as every other probe's.  The kretprobes stay registered,
 * disabled, as the fset's kprobes do; without CONFIG_FPROBE, or when the
 * fprobe can't be registered at the first GO, the set is not made and the
 * kretprobes are enabled one by one as before.
 */
#ifdef CONFIG_FPROBE
struct oxt_rset {
	struct fprobe fp;
	unsigned int n;		/* entries of ent */
	unsigned int nips;	/* functions: ips[0..nips) */
	bool enabled;
	unsigned long *ips;	/* the fprobe's filter, sorted */
	unsigned int *slot;	/* slot[i] is ent[i].p->slot */
	struct oxt_fidx idx;	/* where ent[] has each ip */
	struct oxt_fent ent[];	/* sorted by ip, entry before return, program order */
};

static int oxt_rent_cmp(const void *a, const void *b)
{
	const struct oxt_fent *x = a, *y = b;

	if (x->ip != y->ip)
		return x->ip < y->ip ? -1 : 1;
	if (x->p->is_return != y->p->is_return)
		return x->p->is_return ? 1 : -1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* The first return probe of the run of probes on ip that starts at i. */
static __always_inline unsigned int oxt_rset_returns(const struct oxt_rset *s,
						     unsigned int i)
{
	return s->ent[i].p->is_return ? i : i + s->ent[i].run;
}

static noinline void oxt_rset_recursion(const struct oxt_rset *s, unsigned int i,
					unsigned long ip)
{
	unsigned long flags;

	local_irq_save(flags);
	for (; i < s->n && s->ent[i].ip == ip; i++)
		s->ent[i].p->ops->recursion(s->ent[i].p->cookie, s->ent[i].p->slot);
	local_irq_restore(flags);
}

static int oxt_rset_entry(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
			  struct pt_regs *regs, void *data)
{
	struct oxt_rset *s = container_of(fp, struct oxt_rset, fp);
	unsigned int i = oxt_fidx_find(&s->idx, s->ent, s->n, ip);

	if (i >= s->n || s->ent[i].ip != ip)
		return 1;	/* not ours: don't hook the return */
	if (!s->ent[i].p->is_return) {
		if (s->ent[i].run == 1)
			oxt_probe_run(s->ent[i].p, regs);
		else
			oxt_probe_run_many(s->ent[i].p, s->slot + i, s->ent[i].run, regs);
	}
	/* As oxt_kretprobe_entry: no return hooked that deep in the stack. */
	if (oxt_stack_left() < OXT_STACK_MIN) {
		oxt_rset_recursion(s, oxt_rset_returns(s, i), ip);
		return 1;
	}
	return 0;
}

static void oxt_rset_exit(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
			  struct pt_regs *regs, void *data)
{
	struct oxt_rset *s = container_of(fp, struct oxt_rset, fp);
	unsigned int i = oxt_fidx_find(&s->idx, s->ent, s->n, ip);

	if (i >= s->n || s->ent[i].ip != ip)
		return;
	for (i = oxt_rset_returns(s, i); i < s->n && s->ent[i].ip == ip; i++)
		oxt_probe_run(s->ent[i].p, regs);
}

/* A return probe the rset takes, and whether an entry probe is on one of its functions. */
static bool oxt_rset_return(struct oxt_probe *p)
{
	return p->is_return && kprobe_ftrace(&p->krp.kp);
}

static bool oxt_rset_entry_on(struct oxt_probe *p, const unsigned long *ips, unsigned int u)
{
	unsigned long ip = (unsigned long)p->krp.kp.addr;

	return !p->is_return && kprobe_ftrace(&p->krp.kp) &&
	       bsearch(&ip, ips, u, sizeof(*ips), oxt_ulong_cmp);
}

struct oxt_rset *oxt_rset_alloc(struct oxt_probe **probes, unsigned int n)
{
	struct oxt_rset *s = NULL;
	unsigned long *ips;
	unsigned int i, r = 0, u = 0, m = 0;

	if (!oxt_set_fires_as_one(probes, n))
		return NULL;
	for (i = 0; i < n; i++)
		r += oxt_rset_return(probes[i]);
	if (!r)
		return NULL;
	ips = kvmalloc_array(r, sizeof(*ips), OXT_GFP_LOAD);
	if (!ips)
		return NULL;
	for (i = 0; i < n; i++)
		if (oxt_rset_return(probes[i]))
			ips[u++] = (unsigned long)probes[i]->krp.kp.addr;
	sort(ips, u, sizeof(*ips), oxt_ulong_cmp, NULL);
	for (i = 1, r = u, u = 1; i < r; i++)
		if (ips[i] != ips[u - 1])
			ips[u++] = ips[i];
	for (i = 0; i < n; i++)
		m += oxt_rset_return(probes[i]) || oxt_rset_entry_on(probes[i], ips, u);
	s = kvzalloc(size_add(struct_size(s, ent, m), array_size(m, sizeof(*s->slot))),
		     OXT_GFP_LOAD);
	if (!s)
		goto fail;
	for (i = 0; i < n; i++) {
		struct oxt_probe *p = probes[i];

		if (!oxt_rset_return(p) && !oxt_rset_entry_on(p, ips, u))
			continue;
		s->ent[s->n++] = (struct oxt_fent){
			.ip = (unsigned long)p->krp.kp.addr, .order = i, .p = p };
	}
	sort(s->ent, s->n, sizeof(s->ent[0]), oxt_rent_cmp, NULL);
	s->slot = (unsigned int *)&s->ent[m];
	for (i = s->n; i-- > 0;) {
		bool same = i + 1 < s->n && s->ent[i + 1].ip == s->ent[i].ip &&
			    s->ent[i + 1].p->is_return == s->ent[i].p->is_return;

		s->slot[i] = s->ent[i].p->slot;
		s->ent[i].run = same ? s->ent[i + 1].run + 1 : 1;
	}
	if (oxt_fidx_build(&s->idx, s->ent, s->n))
		goto fail;
	s->ips = ips;
	s->nips = u;
	s->fp.entry_handler = oxt_rset_entry;
	s->fp.exit_handler = oxt_rset_exit;
	/*
	 * Return instances: a kretprobe's max(16, 4 x CPUs) per function, for the
	 * first 256 functions; a task holds one per probed call it is inside of, so
	 * thousands of functions do not need thousands of times as many.  An entry
	 * that finds none left is counted in the fprobe's nmissed.
	 */
	s->fp.nr_maxactive = max_t(int, 16, 4 * num_possible_cpus()) * min(u, 256U);
	for (i = 0; i < s->n; i++)
		s->ent[i].p->in_rset = true;
	return s;
fail:
	kvfree(ips);
	kvfree(s);
	return NULL;
}

int oxt_rset_enable(struct oxt_rset *s)
{
	int ret = 0;

	/* register_fprobe_ips() sets the filter and allocates the instances anew each time. */
	if (!s->enabled)
		ret = register_fprobe_ips(&s->fp, s->ips, s->nips);
	s->enabled = !ret;
	return ret;
}

void oxt_rset_disable(struct oxt_rset *s)
{
	if (!s->enabled)
		return;
	/*
	 * Stops the return hooks, unregisters the ops (waiting for its callbacks)
	 * and frees the instances after a grace period; a return still pending
	 * finds no handler.  The exit handler runs with preemption disabled:
	 * after the grace period below none can still be running.
	 */
	unregister_fprobe(&s->fp);
	synchronize_rcu();
	s->enabled = false;
}

/* Gives the set's probes back to their kretprobes and kprobes (a failed first GO). */
void oxt_rset_free(struct oxt_rset *s)
{
	unsigned int i;

	if (!s)
		return;
	oxt_rset_disable(s);
	for (i = 0; i < s->n; i++)
		s->ent[i].p->in_rset = false;
	kvfree(s->ips);
	kvfree(s->idx.first);
	kvfree(s);
}

unsigned long oxt_rset_missed(const struct oxt_rset *s)
{
	return s->fp.nmissed;
}
#else
struct oxt_rset *oxt_rset_alloc(struct oxt_probe **probes, unsigned int n)
{
	return NULL;
}

int oxt_rset_enable(struct oxt_rset *s)
{
	return -EOPNOTSUPP;
}

void oxt_rset_disable(struct oxt_rset *s)
{
}

void oxt_rset_free(struct oxt_rset *s)
{
}

unsigned long oxt_rset_missed(const struct oxt_rset *s)
{
	return 0;
}
#endif

void oxt_probes_unregister(struct oxt_probe **probes, unsigned int n)
{
	struct kprobe **kps;
	struct kretprobe **rps;
	unsigned int i, nk = 0, nr = 0;

	kps = kmalloc_array(n, sizeof(*kps), GFP_KERNEL | __GFP_NOWARN);
	rps = kmalloc_array(n, sizeof(*rps), GFP_KERNEL | __GFP_NOWARN);
	if (!kps || !rps) {
		/* one at a time: slower (a grace period each), same result */
		for (i = 0; i < n; i++) {
			if (probes[i]->is_return)
				unregister_kretprobe(&probes[i]->krp);
			else
				unregister_kprobe(&probes[i]->krp.kp);
		}
		synchronize_rcu();
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (probes[i]->is_return)
			rps[nr++] = &probes[i]->krp;
		else
			kps[nk++] = &probes[i]->krp.kp;
	}
	/* each waits for a grace period: handlers run with IRQs off, inside one */
	unregister_kprobes(kps, nk);
	unregister_kretprobes(rps, nr);
	if (!nk && !nr)
		synchronize_rcu();
out:
	kfree(kps);
	kfree(rps);
}

void oxt_probe_free(struct oxt_probe *p)
{
	if (!p)
		return;
	kfree(p->krp.kp.symbol_name);
	kfree(p);
}

unsigned long oxt_probe_missed(const struct oxt_probe *p)
{
	return p->krp.kp.nmissed + (p->is_return ? p->krp.nmissed : 0);
}

unsigned long oxt_regs_arg(struct pt_regs *regs, unsigned int n)
{
	return regs ? regs_get_kernel_argument(regs, n) : 0;
}

unsigned long oxt_regs_retval(struct pt_regs *regs)
{
	return regs ? regs_return_value(regs) : 0;
}

unsigned long oxt_regs_caller(struct pt_regs *regs, bool is_return)
{
	if (!regs)
		return 0;
	/* The return trampoline has put the real return address back in ip. */
	if (is_return)
		return instruction_pointer(regs);
	/* At a function's entry the return address is on top of the stack (bounds-checked). */
	return regs_get_kernel_stack_nth(regs, 0);
}

struct oxt_tick {
	struct hrtimer timer;
	ktime_t period;
	const struct oxt_probe_ops *ops;
	void *cookie;
	unsigned int slot;
};

static enum hrtimer_restart oxt_tick_fn(struct hrtimer *timer)
{
	struct oxt_tick *t = container_of(timer, struct oxt_tick, timer);

	/* hard interrupt context: interrupts are already off */
	oxt_hit_here(t->ops, t->cookie, t->slot, NULL, false);
	hrtimer_forward_now(timer, t->period);
	return HRTIMER_RESTART;
}

struct oxt_tick *oxt_tick_alloc(const struct oxt_probe_ops *ops, void *cookie,
				unsigned int slot, u64 period_ns)
{
	struct oxt_tick *t = kzalloc(sizeof(*t), OXT_GFP_LOAD);

	if (!t)
		return NULL;
	hrtimer_init(&t->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	t->timer.function = oxt_tick_fn;
	t->period = ns_to_ktime(period_ns);
	t->ops = ops;
	t->cookie = cookie;
	t->slot = slot;
	return t;
}

void oxt_tick_start(struct oxt_tick *t)
{
	hrtimer_start(&t->timer, t->period, HRTIMER_MODE_REL_HARD);
}

void oxt_tick_cancel(struct oxt_tick *t)
{
	hrtimer_cancel(&t->timer);
}

void oxt_tick_free(struct oxt_tick *t)
{
	kfree(t);
}

struct oxt_xcall {
	void (*fn)(void *info);
	void *info;
};

static void oxt_xcall_fn(void *arg)
{
	struct oxt_xcall *x = arg;

	/* IPI context, interrupts off; an NMI probe meanwhile is counted, not run */
	oxt_guard_enter();
	x->fn(x->info);
	oxt_guard_exit();
}

void oxt_xcall_all(void (*fn)(void *info), void *info)
{
	struct oxt_xcall x = { .fn = fn, .info = info };

	on_each_cpu(oxt_xcall_fn, &x, 1);
}

int oxt_xcall_cpu(unsigned int cpu, void (*fn)(void *info), void *info)
{
	struct oxt_xcall x = { .fn = fn, .info = info };

	return smp_call_function_single(cpu, oxt_xcall_fn, &x, 1);
}

void oxt_run_as_action(void (*fn)(void *info), void *info)
{
	unsigned long flags;

	local_irq_save(flags);
	if (oxt_guard_enter())
		fn(info);
	oxt_guard_exit();
	local_irq_restore(flags);
}

/*
 * The cleaner's on-demand passes (Documentation/dynvar.rst, "On-demand cleaning"), both
 * on by default; off, the cleaner is the periodic normal-priority thread alone. Tests use
 * cleaner_kick=N to see a cleaner that never runs; make bench measures both.
 */
static bool cleaner_kick = true;
module_param(cleaner_kick, bool, 0644);
MODULE_PARM_DESC(cleaner_kick, "Wake the dynamic-variable cleaner when a CPU runs short of chunks (default Y)");
static bool cleaner_fifo = true;
module_param(cleaner_fifo, bool, 0644);
MODULE_PARM_DESC(cleaner_fifo, "Run a cleaner started from now on at SCHED_FIFO low priority (default Y)");

struct oxt_periodic {
	void (*fn)(void *info);
	void *info;
	u64 period_ns;
	u64 runs;		/* written by the thread only */
	struct mutex lock;	/* serialises start and stop */
	struct task_struct *task;	/* under lock; NULL when stopped */
	/* on-demand passes: oxt_periodic_kick() -> kick (hard irq) -> wake */
	struct irq_work kick;
	struct task_struct *wake;	/* the thread while kicks may wake it */
	int kicked;		/* a pass is asked for; cleared when one starts */
};

static void oxt_periodic_kick_fn(struct irq_work *work)
{
	struct oxt_periodic *p = container_of(work, struct oxt_periodic, kick);
	struct task_struct *t = READ_ONCE(p->wake);

	/* stop clears wake, then waits for this function (irq_work_sync) */
	if (t)
		wake_up_process(t);
}

void oxt_periodic_kick(struct oxt_periodic *p)
{
	/* a plain read first: CPUs below their low-water mark call this at every
	 * allocation until the pass they asked for starts */
	if (!READ_ONCE(cleaner_kick) || READ_ONCE(p->kicked) || xchg(&p->kicked, 1))
		return;
	irq_work_queue(&p->kick);
}

static int oxt_periodic_thread(void *arg)
{
	struct oxt_periodic *p = arg;
	ktime_t next = ktime_add_ns(ktime_get(), p->period_ns);

	/*
	 * Above every normal task: a CPU that ran short of chunks wakes the cleaner, and
	 * the allocations it makes meanwhile are dropped, so the pass must not wait for
	 * the traced threads' time slices.
	 */
	if (READ_ONCE(cleaner_fifo))
		sched_set_fifo_low(current);
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		/* kthread_stop() and kicks wake us: re-check after setting the state */
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		if (!READ_ONCE(p->kicked))
			schedule_hrtimeout_range(&next, p->period_ns / 16,
						 HRTIMER_MODE_ABS);
		__set_current_state(TASK_RUNNING);
		if (kthread_should_stop())
			break;
		if (!xchg(&p->kicked, 0) && ktime_before(ktime_get(), next))
			continue;	/* a spurious wake-up */
		p->fn(p->info);
		WRITE_ONCE(p->runs, p->runs + 1);
		/* the periodic schedule goes on from the latest period boundary passed */
		while (!ktime_before(ktime_get(), next))
			next = ktime_add_ns(next, p->period_ns);
	}
	return 0;
}

struct oxt_periodic *oxt_periodic_alloc(void (*fn)(void *info), void *info)
{
	struct oxt_periodic *p = kzalloc(sizeof(*p), OXT_GFP_LOAD);

	if (!p)
		return NULL;
	p->fn = fn;
	p->info = info;
	mutex_init(&p->lock);
	init_irq_work(&p->kick, oxt_periodic_kick_fn);
	return p;
}

int oxt_periodic_start(struct oxt_periodic *p, u64 period_ns, u64 id)
{
	struct task_struct *t;
	int ret = 0;

	mutex_lock(&p->lock);
	if (p->task) {
		ret = -EBUSY;
		goto out;
	}
	p->period_ns = max_t(u64, period_ns, 1);
	WRITE_ONCE(p->kicked, 0);
	t = kthread_run(oxt_periodic_thread, p, "oxtrace-clean/%llu", id);
	if (IS_ERR(t)) {
		ret = PTR_ERR(t);
		goto out;
	}
	p->task = t;
	WRITE_ONCE(p->wake, t);
out:
	mutex_unlock(&p->lock);
	return ret;
}

void oxt_periodic_stop(struct oxt_periodic *p)
{
	mutex_lock(&p->lock);
	if (p->task) {
		/* no kick wakes the task once it may have exited */
		WRITE_ONCE(p->wake, NULL);
		irq_work_sync(&p->kick);
		/* the thread only exits when told to, so the task is still ours */
		kthread_stop(p->task);
		p->task = NULL;
	}
	mutex_unlock(&p->lock);
}

u64 oxt_periodic_runs(const struct oxt_periodic *p)
{
	return READ_ONCE(p->runs);
}

void oxt_periodic_free(struct oxt_periodic *p)
{
	if (!p)
		return;
	oxt_periodic_stop(p);
	/* a kick queued after stop (a handler still running then) finds wake NULL */
	irq_work_sync(&p->kick);
	mutex_destroy(&p->lock);
	kfree(p);
}

void oxt_synchronize_rcu(void)
{
	synchronize_rcu();
}

u32 oxt_gfp_load(void)
{
	return (__force u32)OXT_GFP_LOAD;
}

struct page *oxt_pages_alloc(unsigned int order)
{
	return alloc_pages(OXT_GFP_LOAD | __GFP_ZERO, order);
}

void oxt_pages_free(struct page *page, unsigned int order)
{
	__free_pages(page, order);
}

void *oxt_page_address(struct page *page)
{
	return page_address(page);
}

u64 oxt_page_phys(struct page *page)
{
	return page_to_phys(page);
}

int oxt_rdmsr_safe(u32 msr, u64 *val)
{
	return rdmsrl_safe(msr, val);
}

int oxt_wrmsr_safe(u32 msr, u64 val)
{
	return wrmsrl_safe(msr, val);
}

void oxt_cpuid_count(u32 leaf, u32 subleaf, u32 *regs)
{
	cpuid_count(leaf, subleaf, &regs[0], &regs[1], &regs[2], &regs[3]);
}

u64 oxt_rdtsc(void)
{
	return rdtsc();
}

unsigned int oxt_phys_bits(void)
{
	return boot_cpu_data.x86_phys_bits;
}
