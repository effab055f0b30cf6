// SPDX-License-Identifier: GPL-2.0
/*
 * User-space probes (the pid and USDT providers) on uprobes.
 *
 * A probe is one uprobe consumer on (inode, offset) that fires only in one
 * address space: the mm process `pid` has at LOAD.  The mm_struct is kept
 * with mmgrab() (its memory, not its mappings), so the pointer stays unique
 * for the probe's lifetime and is only ever compared, never dereferenced.
 * The consumer's filter accepts that mm alone, so uprobes installs the
 * breakpoint in no other process mapping the file, and its handler returns
 * UPROBE_HANDLER_REMOVE in any other mm: a child forked by the target
 * inherits the breakpoints with its copy of the memory, and its first hit
 * removes them from it.  After an exec the process has a new mm: the probe
 * never fires there again, as in DTrace.
 *
 * Registration happens at LOAD, so that a process that is gone, a file that
 * is missing or an instruction uprobes refuses is reported for the entry that
 * named it; hits are ignored (the breakpoint stays) until the probe is
 * enabled at GO and after it is disabled at STOP.  The handler runs in the
 * probed task's context on its way back to user mode (uprobe_notify_resume),
 * preemptible: it disables interrupts around the action, which runs through
 * oxt_hit() as every other probe's does, under the action guard.
 */
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/path.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/uprobes.h>

#include "shim.h"

#ifdef CONFIG_UPROBES

struct oxt_uprobe {
	struct uprobe_consumer uc;
	struct uprobe *up;		/* NULL until registered */
	struct path path;		/* keeps the inode uprobes probes */
	struct mm_struct *mm;		/* mmgrab()bed: compared only */
	const struct oxt_probe_ops *ops;
	void *cookie;
	unsigned int slot;
	bool enabled;			/* READ_ONCE in the handler */
};

static bool oxt_uprobe_filter(struct uprobe_consumer *uc, struct mm_struct *mm)
{
	struct oxt_uprobe *u = container_of(uc, struct oxt_uprobe, uc);

	return mm == u->mm;
}

/*
 * Without a local of its own, the handler has no frame and no stack protector:
 * the hit is a tail call.
 */
static int oxt_uprobe_handler(struct uprobe_consumer *uc, struct pt_regs *regs)
{
	struct oxt_uprobe *u = container_of(uc, struct oxt_uprobe, uc);

	/* a forked child's inherited breakpoint: the filter confirms the removal */
	if (current->mm != u->mm)
		return UPROBE_HANDLER_REMOVE;
	if (!READ_ONCE(u->enabled))
		return 0;
	return oxt_hit_irqsave(u->ops, u->cookie, u->slot, regs);
}

/*
 * Whether the caller may trace task: ptrace_may_access(task,
 * PTRACE_MODE_ATTACH_REALCREDS) without its security-module hook, which the
 * kernel does not export: the caller's real uid and gid are all of the task's,
 * or the caller has CAP_SYS_PTRACE in the task's user namespace; and the task
 * is dumpable, or the caller has CAP_SYS_PTRACE over its mm.
 */
static bool oxt_may_trace(struct task_struct *task)
{
	const struct cred *cred = current_cred(), *tcred;
	struct mm_struct *mm;
	bool ok;

	task_lock(task);
	rcu_read_lock();
	tcred = __task_cred(task);
	ok = (uid_eq(cred->uid, tcred->euid) && uid_eq(cred->uid, tcred->suid) &&
	      uid_eq(cred->uid, tcred->uid) && gid_eq(cred->gid, tcred->egid) &&
	      gid_eq(cred->gid, tcred->sgid) && gid_eq(cred->gid, tcred->gid)) ||
	     ns_capable(tcred->user_ns, CAP_SYS_PTRACE);
	rcu_read_unlock();
	if (ok) {
		/* dumpability after the credentials, as ptrace: pairs with commit_creds() */
		smp_rmb();
		mm = task->mm;
		if (mm && get_dumpable(mm) != SUID_DUMP_USER &&
		    !ns_capable(mm->user_ns, CAP_SYS_PTRACE))
			ok = false;
	}
	task_unlock(task);
	return ok;
}

/*
 * The mm of process pid (in the caller's pid namespace), grabbed; ESRCH if
 * there is none or it is exiting, EPERM for the caller's own process or one it
 * may not trace, EINVAL for a kernel thread.
 */
static struct mm_struct *oxt_uprobe_mm(int pid)
{
	struct task_struct *task;
	struct mm_struct *mm = NULL;
	struct pid *p;
	int err = 0;

	p = find_get_pid(pid);
	if (!p)
		return ERR_PTR(-ESRCH);
	task = get_pid_task(p, PIDTYPE_TGID);
	put_pid(p);
	if (!task)
		return ERR_PTR(-ESRCH);
	if (task->flags & PF_KTHREAD)
		err = -EINVAL;
	else if (same_thread_group(task, current) || !oxt_may_trace(task))
		err = -EPERM;
	else if (!(mm = get_task_mm(task)))
		err = -ESRCH;
	put_task_struct(task);
	if (err)
		return ERR_PTR(err);
	mmgrab(mm);
	mmput(mm);
	return mm;
}

struct oxt_uprobe *oxt_uprobe_alloc(const char *path, u64 offset, u64 ref_ctr, int pid,
				    const struct oxt_probe_ops *ops, void *cookie,
				    unsigned int slot)
{
	struct oxt_uprobe *u;
	struct inode *inode;
	struct uprobe *up;
	int err;

	u = kzalloc(sizeof(*u), OXT_GFP_LOAD);
	if (!u)
		return ERR_PTR(-ENOMEM);
	u->mm = oxt_uprobe_mm(pid);
	if (IS_ERR(u->mm)) {
		err = PTR_ERR(u->mm);
		goto free;
	}
	err = kern_path(path, LOOKUP_FOLLOW, &u->path);
	if (err)
		goto drop_mm;
	err = -EINVAL;
	if (!d_is_reg(u->path.dentry))
		goto put_path;
	inode = d_real_inode(u->path.dentry);
	/* an instruction starts before the file's end */
	if (offset >= i_size_read(inode) || (ref_ctr && ref_ctr >= i_size_read(inode)))
		goto put_path;
	u->uc.handler = oxt_uprobe_handler;
	u->uc.filter = oxt_uprobe_filter;
	u->ops = ops;
	u->cookie = cookie;
	u->slot = slot;
	up = uprobe_register(inode, offset, ref_ctr, &u->uc);
	if (IS_ERR(up)) {
		err = PTR_ERR(up);
		/* an instruction uprobes can't probe (arch_uprobe_analyze_insn) */
		if (err == -ENOTSUPP || err == -EOPNOTSUPP)
			err = -EINVAL;
		goto put_path;
	}
	u->up = up;
	return u;

put_path:
	path_put(&u->path);
drop_mm:
	mmdrop(u->mm);
free:
	kfree(u);
	return ERR_PTR(err);
}

void oxt_uprobe_enable(struct oxt_uprobe *u, bool on)
{
	WRITE_ONCE(u->enabled, on);
}

void oxt_uprobes_free(struct oxt_uprobe **u, unsigned int n)
{
	unsigned int i;

	if (!n)
		return;
	for (i = 0; i < n; i++)
		uprobe_unregister_nosync(u[i]->up, &u[i]->uc);
	/* no handler still runs on any of them (RCU tasks trace) */
	uprobe_unregister_sync();
	for (i = 0; i < n; i++) {
		path_put(&u[i]->path);
		mmdrop(u[i]->mm);
		kfree(u[i]);
	}
}

bool oxt_uprobes_available(void)
{
	return true;
}

#else /* !CONFIG_UPROBES */

struct oxt_uprobe *oxt_uprobe_alloc(const char *path, u64 offset, u64 ref_ctr, int pid,
				    const struct oxt_probe_ops *ops, void *cookie,
				    unsigned int slot)
{
	return ERR_PTR(-EOPNOTSUPP);
}

void oxt_uprobe_enable(struct oxt_uprobe *u, bool on)
{
}

void oxt_uprobes_free(struct oxt_uprobe **u, unsigned int n)
{
}

bool oxt_uprobes_available(void)
{
	return false;
}

#endif /* CONFIG_UPROBES */
