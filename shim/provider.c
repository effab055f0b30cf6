// SPDX-License-Identifier: GPL-2.0
/*
 * Providers beyond kprobes: the raw system call tracepoints (the syscall
 * provider) and per-CPU profile timers (the profile provider).  Mechanism
 * only: which system calls a program traces is decided in rust/, after the
 * one hook of each direction has fired.
 */
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/hrtimer.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <linux/bitmap.h>
#include <asm/irq_regs.h>
#include <asm/processor.h>
#include <asm/syscall.h>

#include "shim.h"

struct oxt_syshook {
	struct tracepoint *tp;
	bool is_return;
	bool registered;
	const struct oxt_probe_ops *ops;
	void *cookie;
};

struct oxt_tp_lookup {
	const char *name;
	struct tracepoint *tp;
};

static void oxt_tp_match(struct tracepoint *tp, void *priv)
{
	struct oxt_tp_lookup *l = priv;

	if (!strcmp(tp->name, l->name))
		l->tp = tp;
}

/* The built-in tracepoint called name, or NULL (sys_enter/sys_exit are not exported). */
static struct tracepoint *oxt_tp_find(const char *name)
{
	struct oxt_tp_lookup l = { .name = name };

	for_each_kernel_tracepoint(oxt_tp_match, &l);
	return l.tp;
}

static void oxt_syshook_run(struct oxt_syshook *h, struct pt_regs *regs, long nr)
{
	unsigned long flags;

	/* -1: a syscall number the kernel refused, or a ptrace-skipped call */
	if (nr < 0)
		return;
	local_irq_save(flags);
	oxt_hit(h->ops, h->cookie, nr, regs, h->is_return);
	local_irq_restore(flags);
}

static void oxt_sys_enter(void *data, struct pt_regs *regs, long id)
{
	oxt_syshook_run(data, regs, id);
}

static void oxt_sys_exit(void *data, struct pt_regs *regs, long ret)
{
	oxt_syshook_run(data, regs, syscall_get_nr(current, regs));
}

struct oxt_syshook *oxt_syshook_alloc(bool is_return, const struct oxt_probe_ops *ops,
				      void *cookie)
{
	struct tracepoint *tp = oxt_tp_find(is_return ? "sys_exit" : "sys_enter");
	struct oxt_syshook *h;

	if (!tp)
		return ERR_PTR(-ENOENT);
	h = kzalloc(sizeof(*h), OXT_GFP_LOAD);
	if (!h)
		return ERR_PTR(-ENOMEM);
	h->tp = tp;
	h->is_return = is_return;
	h->ops = ops;
	h->cookie = cookie;
	return h;
}

static void *oxt_syshook_fn(struct oxt_syshook *h)
{
	return h->is_return ? (void *)oxt_sys_exit : (void *)oxt_sys_enter;
}

int oxt_syshook_enable(struct oxt_syshook *h)
{
	int ret;

	if (h->registered)
		return 0;
	ret = tracepoint_probe_register(h->tp, oxt_syshook_fn(h), h);
	if (!ret)
		h->registered = true;
	return ret;
}

void oxt_syshook_disable(struct oxt_syshook *h)
{
	if (!h->registered)
		return;
	/* Only fails for a probe that is not registered. */
	WARN_ON_ONCE(tracepoint_probe_unregister(h->tp, oxt_syshook_fn(h), h));
	h->registered = false;
}

void oxt_syshook_free(struct oxt_syshook *h)
{
	oxt_syshook_disable(h);
	/* hits that started before the unregistration have returned */
	tracepoint_synchronize_unregister();
	kfree(h);
}

unsigned long oxt_syscall_arg(struct pt_regs *regs, unsigned int n)
{
	unsigned long args[6];

	if (!regs || n >= ARRAY_SIZE(args))
		return 0;
	syscall_get_arguments(current, regs, args);
	return args[n];
}

/* Profile timers. */

struct oxt_profile_cpu {
	struct hrtimer timer;
	struct oxt_profile *p;
};

struct oxt_profile {
	struct hlist_node node;		/* in the cpuhp state's instances */
	const struct oxt_probe_ops *ops;
	void *cookie;
	unsigned int slot;
	ktime_t period;
	bool enabled;			/* changed under cpus_read_lock() */
	struct oxt_profile_cpu __percpu *cpus;
};

/* Serialises the first use of each cpuhp state below. */
static DEFINE_MUTEX(oxt_state_lock);

/* Sets up the dynamic cpuhp state *state at its first use; 0 or an errno. */
static int oxt_state_get(int *state, const char *name,
			 int (*online)(unsigned int cpu, struct hlist_node *node),
			 int (*offline)(unsigned int cpu, struct hlist_node *node))
{
	int ret = 0;

	mutex_lock(&oxt_state_lock);
	if (!*state) {
		ret = cpuhp_setup_state_multi(CPUHP_AP_ONLINE_DYN, name, online, offline);
		if (ret > 0) {
			*state = ret;
			ret = 0;
		}
	}
	mutex_unlock(&oxt_state_lock);
	return ret;
}

/* The dynamic cpuhp state of profile timers, set up at first use; 0 if none. */
static int oxt_profile_state;

static enum hrtimer_restart oxt_profile_fn(struct hrtimer *timer)
{
	struct oxt_profile_cpu *pc = container_of(timer, struct oxt_profile_cpu, timer);
	struct oxt_profile *p = pc->p;

	/* hard interrupt context: interrupts are already off */
	oxt_hit(p->ops, p->cookie, p->slot, get_irq_regs(), false);
	hrtimer_forward_now(timer, p->period);
	return HRTIMER_RESTART;
}

/* Starts this CPU's timer; on the CPU itself (pinned). */
static void oxt_profile_start_here(void *info)
{
	struct oxt_profile *p = info;
	struct oxt_profile_cpu *pc = this_cpu_ptr(p->cpus);

	hrtimer_start(&pc->timer, p->period, HRTIMER_MODE_REL_PINNED_HARD);
}

/* cpuhp callbacks: run on the CPU coming up or going down, hotplug excluded. */
static int oxt_profile_online(unsigned int cpu, struct hlist_node *node)
{
	struct oxt_profile *p = hlist_entry(node, struct oxt_profile, node);

	if (p->enabled)
		oxt_profile_start_here(p);
	return 0;
}

static int oxt_profile_offline(unsigned int cpu, struct hlist_node *node)
{
	struct oxt_profile *p = hlist_entry(node, struct oxt_profile, node);

	hrtimer_cancel(&per_cpu_ptr(p->cpus, cpu)->timer);
	return 0;
}

struct oxt_profile *oxt_profile_alloc(const struct oxt_probe_ops *ops, void *cookie,
				      unsigned int slot, u64 period_ns)
{
	struct oxt_profile *p;
	int cpu, ret;

	ret = oxt_state_get(&oxt_profile_state, "oxtrace/profile:online",
			    oxt_profile_online, oxt_profile_offline);
	if (ret)
		return ERR_PTR(ret);
	p = kzalloc(sizeof(*p), OXT_GFP_LOAD);
	if (!p)
		return ERR_PTR(-ENOMEM);
	p->cpus = alloc_percpu_gfp(struct oxt_profile_cpu, OXT_GFP_LOAD);
	if (!p->cpus) {
		kfree(p);
		return ERR_PTR(-ENOMEM);
	}
	p->ops = ops;
	p->cookie = cookie;
	p->slot = slot;
	p->period = ns_to_ktime(period_ns);
	for_each_possible_cpu(cpu) {
		struct oxt_profile_cpu *pc = per_cpu_ptr(p->cpus, cpu);

		hrtimer_init(&pc->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
		pc->timer.function = oxt_profile_fn;
		pc->p = p;
	}
	/* disabled: the online callbacks it runs start nothing */
	ret = cpuhp_state_add_instance(oxt_profile_state, &p->node);
	if (ret) {
		free_percpu(p->cpus);
		kfree(p);
		return ERR_PTR(ret);
	}
	return p;
}

void oxt_profile_enable(struct oxt_profile *p)
{
	cpus_read_lock();
	if (!p->enabled) {
		p->enabled = true;
		on_each_cpu(oxt_profile_start_here, p, 1);
	}
	cpus_read_unlock();
}

void oxt_profile_disable(struct oxt_profile *p)
{
	int cpu;

	cpus_read_lock();
	p->enabled = false;
	for_each_possible_cpu(cpu)
		hrtimer_cancel(&per_cpu_ptr(p->cpus, cpu)->timer);
	cpus_read_unlock();
}

void oxt_profile_free(struct oxt_profile *p)
{
	oxt_profile_disable(p);
	cpuhp_state_remove_instance_nocalls(oxt_profile_state, &p->node);
	free_percpu(p->cpus);
	kfree(p);
}

unsigned long oxt_regs_kernel_pc(struct pt_regs *regs)
{
	return regs && !user_mode(regs) ? instruction_pointer(regs) : 0;
}

unsigned long oxt_regs_user_pc(struct pt_regs *regs)
{
	return regs && user_mode(regs) ? instruction_pointer(regs) : 0;
}

/* Tracepoint events, through perf's tracepoint PMU, which builds the record. */

struct oxt_tpev {
	struct hlist_node node;		/* in the cpuhp state's instances */
	/*
	 * Reopens counters after CPU hotplug.  perf drops a CPU's events when
	 * the CPU goes down, and opening or releasing a tracepoint event takes
	 * perf's event_mutex, which must not nest in the hotplug callbacks: they
	 * only mark the CPU stale and queue this.
	 */
	struct work_struct reopen;
	struct mutex lock;		/* ev[] and enabled */
	const struct oxt_probe_ops *ops;
	void *cookie;
	unsigned int slot;
	u64 id;
	bool enabled;
	bool added;			/* node is in the cpuhp state */
	unsigned long *stale;		/* CPUs whose counter predates a hotplug */
	unsigned int nr;		/* entries of ev */
	struct perf_event *ev[];	/* by CPU; NULL: none */
};

static DEFINE_PER_CPU(unsigned long, oxt_tp_rec);
/* The dynamic cpuhp state of tracepoint events, set up at first use; 0 if none. */
static int oxt_tpev_state;

static void oxt_tpev_overflow(struct perf_event *event, struct perf_sample_data *data,
			      struct pt_regs *regs)
{
	struct oxt_tpev *t = event->overflow_handler_context;
	unsigned long flags, outer;

	if (!data->raw)
		return;
	local_irq_save(flags);
	/* restored after: a hit nested in an action must not clear the action's record */
	outer = this_cpu_read(oxt_tp_rec);
	this_cpu_write(oxt_tp_rec, (unsigned long)data->raw->frag.data);
	oxt_hit(t->ops, t->cookie, t->slot, regs, false);
	this_cpu_write(oxt_tp_rec, outer);
	local_irq_restore(flags);
}

unsigned long oxt_tp_record(void)
{
	return this_cpu_read(oxt_tp_rec);
}

static struct perf_event *oxt_tpev_create(struct oxt_tpev *t, unsigned int cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_TRACEPOINT,
		.size = sizeof(attr),
		.config = t->id,
		.sample_period = 1,
		.sample_type = PERF_SAMPLE_RAW,
		.disabled = 1,
	};

	return perf_event_create_kernel_counter(&attr, cpu, NULL, oxt_tpev_overflow, t);
}

/* Releases stale counters and opens one on every online CPU that has none. */
static void oxt_tpev_reopen(struct work_struct *work)
{
	struct oxt_tpev *t = container_of(work, struct oxt_tpev, reopen);
	unsigned int cpu;

	mutex_lock(&t->lock);
	for (cpu = 0; cpu < t->nr; cpu++) {
		if (test_and_clear_bit(cpu, t->stale) && t->ev[cpu]) {
			perf_event_release_kernel(t->ev[cpu]);
			t->ev[cpu] = NULL;
		}
		/* a CPU going down meanwhile marks it stale again and requeues */
		if (!t->ev[cpu] && cpu_online(cpu)) {
			struct perf_event *ev = oxt_tpev_create(t, cpu);

			if (IS_ERR(ev))
				continue;
			t->ev[cpu] = ev;
			if (t->enabled)
				perf_event_enable(ev);
		}
	}
	mutex_unlock(&t->lock);
}

/* cpuhp callbacks, on the CPU coming up or going down: mark it, reopen later. */
static int oxt_tpev_hotplug(unsigned int cpu, struct hlist_node *node)
{
	struct oxt_tpev *t = hlist_entry(node, struct oxt_tpev, node);

	set_bit(cpu, t->stale);
	schedule_work(&t->reopen);
	return 0;
}

struct oxt_tpev *oxt_tpev_alloc(const struct oxt_probe_ops *ops, void *cookie,
				unsigned int slot, u64 id)
{
	struct oxt_tpev *t;
	int cpu, ret;

	ret = oxt_state_get(&oxt_tpev_state, "oxtrace/tracepoint:online",
			    oxt_tpev_hotplug, oxt_tpev_hotplug);
	if (ret)
		return ERR_PTR(ret);
	t = kzalloc(struct_size(t, ev, nr_cpu_ids), OXT_GFP_LOAD);
	if (!t)
		return ERR_PTR(-ENOMEM);
	t->stale = bitmap_zalloc(nr_cpu_ids, OXT_GFP_LOAD);
	if (!t->stale) {
		kfree(t);
		return ERR_PTR(-ENOMEM);
	}
	INIT_WORK(&t->reopen, oxt_tpev_reopen);
	mutex_init(&t->lock);
	t->ops = ops;
	t->cookie = cookie;
	t->slot = slot;
	t->id = id;
	t->nr = nr_cpu_ids;
	/*
	 * Not under cpus_read_lock(): the first event registers perf's probe on
	 * the tracepoint, whose static key takes it.
	 */
	for_each_online_cpu(cpu) {
		struct perf_event *ev = oxt_tpev_create(t, cpu);

		if (IS_ERR(ev)) {
			oxt_tpev_free(t);
			return ERR_CAST(ev);
		}
		t->ev[cpu] = ev;
	}
	ret = cpuhp_state_add_instance_nocalls(oxt_tpev_state, &t->node);
	if (ret) {
		oxt_tpev_free(t);
		return ERR_PTR(ret);
	}
	t->added = true;
	/* a CPU that came up before the instance was added */
	schedule_work(&t->reopen);
	return t;
}

void oxt_tpev_enable(struct oxt_tpev *t)
{
	unsigned int cpu;

	mutex_lock(&t->lock);
	t->enabled = true;
	for (cpu = 0; cpu < t->nr; cpu++)
		if (t->ev[cpu])
			perf_event_enable(t->ev[cpu]);
	mutex_unlock(&t->lock);
}

void oxt_tpev_disable(struct oxt_tpev *t)
{
	unsigned int cpu;

	mutex_lock(&t->lock);
	t->enabled = false;
	for (cpu = 0; cpu < t->nr; cpu++)
		if (t->ev[cpu])
			perf_event_disable(t->ev[cpu]);
	mutex_unlock(&t->lock);
}

void oxt_tpev_free(struct oxt_tpev *t)
{
	unsigned int cpu;

	/* no callback queues the work after this, and the work is not running */
	if (t->added)
		cpuhp_state_remove_instance_nocalls(oxt_tpev_state, &t->node);
	cancel_work_sync(&t->reopen);
	for (cpu = 0; cpu < t->nr; cpu++)
		if (t->ev[cpu])
			perf_event_release_kernel(t->ev[cpu]);
	/* hits that started before the release ran inside a tracepoint: RCU */
	tracepoint_synchronize_unregister();
	mutex_destroy(&t->lock);
	bitmap_free(t->stale);
	kfree(t);
}

long oxt_read_user_nofault(void *dst, unsigned long src, size_t len)
{
	/* a kernel thread has no user memory (the copy checks the rest) */
	if (!current->mm)
		return -EFAULT;
	return copy_from_user_nofault(dst, (const void __user *)src, len);
}

long oxt_write_user_nofault(unsigned long dst, const void *src, size_t len)
{
	struct mm_struct *mm = current->mm;

	/* bpf_probe_write_user()'s checks: no interrupt, kernel thread or exit */
	if (in_interrupt() || !mm || (current->flags & (PF_KTHREAD | PF_EXITING)))
		return -EPERM;
#ifdef CONFIG_X86
	/*
	 * Its nmi_uaccess_okay() is not exported: inside switch_mm() or
	 * text_poke()'s temporary mm, user addresses are not the task's.
	 */
	if (read_cr3_pa() != __pa(mm->pgd))
		return -EPERM;
#else
	return -EPERM;
#endif
	return copy_to_user_nofault((void __user *)dst, src, len);
}

void oxt_provider_exit(void)
{
	/* every consumer, and so every instance, is gone */
	if (oxt_profile_state)
		cpuhp_remove_multi_state(oxt_profile_state);
	if (oxt_tpev_state)
		cpuhp_remove_multi_state(oxt_tpev_state);
}
