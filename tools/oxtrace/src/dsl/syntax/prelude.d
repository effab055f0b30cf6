/*
 * The built-in prelude of the oxtrace D compiler (xlate.rs), compiled before every
 * program when the kernel has BTF: DTrace's stable process views, translated from
 * Linux's struct task_struct. Only the members a program reads generate code.
 * Member meanings: Documentation/d-language.rst, "Process views".
 */

typedef struct psinfo {
	int pr_nlwp;		/* threads of the process */
	pid_t pr_pid;		/* process id (the thread group's) */
	pid_t pr_ppid;		/* the parent's process id */
	pid_t pr_pgid;		/* process group */
	pid_t pr_sid;		/* session */
	uid_t pr_uid;		/* real user id */
	uid_t pr_euid;		/* effective user id */
	gid_t pr_gid;		/* real group id */
	gid_t pr_egid;		/* effective group id */
	uintptr_t pr_addr;	/* the task_struct's address */
	char pr_fname[16];	/* command name (comm) */
	char pr_psargs[80];	/* the arguments, blank-separated */
	dev_t pr_ttydev;	/* the controlling tty, or PRNODEV (-1) */
	uint64_t pr_start;	/* process start, ns since boot (see the translator) */
	int pr_argc;		/* the initial argument count */
	uintptr_t pr_argv;	/* the user address of the initial argv[] */
	uintptr_t pr_envp;	/* the user address of the initial envp[] */
	char pr_dmodel;		/* data model: PR_MODEL_ILP32 1, PR_MODEL_LP64 2, none 0 */
	int pr_wstat;		/* the status wait() returns for it, once it exits */
	id_t pr_taskid;		/* Solaris's task, project, pool, zone and contract ids, */
	id_t pr_projid;		/* which Linux has not: 0, as in Oracle's DTrace */
	id_t pr_poolid;
	id_t pr_zoneid;
	id_t pr_contract;
	int pr_nzomb;		/* zombie threads: 0 */
	/* Members of DTrace's view that the translator leaves out (D_XLATE_NOCONV). */
	size_t pr_size;		/* image size, kB */
	size_t pr_rssize;	/* resident set size, kB */
} psinfo_t;

typedef struct lwpsinfo {
	int pr_flag;		/* 1 when stopped */
	id_t pr_lwpid;		/* thread id */
	uintptr_t pr_addr;	/* the task_struct's address */
	char pr_state;		/* SSLEEP 1, SRUN 2, SZOMB 3, SSTOP 4, SIDL 5, SONPROC 6 */
	char pr_sname;		/* pr_state as a letter: S R Z T I O */
	char pr_nice;		/* nice value */
	int pr_pri;		/* the kernel's priority (0..139, lower runs first) */
	char pr_clname[8];	/* scheduling class: TS, RT, DL, IDLE, SYS */
	int pr_onpro;		/* the CPU it last ran on */
	char pr_name[16];	/* the thread's name (comm) */
	/* Members of DTrace's view that the translator leaves out (D_XLATE_NOCONV). */
	char pr_oldpri;		/* the old priority scale */
	char pr_cpu;		/* CPU usage */
} lwpsinfo_t;

translator psinfo_t < struct task_struct *T > {
	pr_nlwp = T->signal->nr_threads;
	pr_pid = T->tgid;
	pr_ppid = T->real_parent->tgid;
	pr_pgid = ((struct upid *)&T->signal->pids[2]->numbers)->nr;
	pr_sid = ((struct upid *)&T->signal->pids[3]->numbers)->nr;
	pr_uid = T->cred->uid.val;
	pr_euid = T->cred->euid.val;
	pr_gid = T->cred->gid.val;
	pr_egid = T->cred->egid.val;
	pr_addr = (uintptr_t)T;
	pr_fname = T->comm;
	pr_psargs = T->mm == 0 ? T->comm : T != curthread ? "" :
	    __uargs(T->mm->arg_start, T->mm->arg_end);
	/* tty_devnum(): the driver's first minor plus the tty's index. */
	pr_ttydev = T->signal->tty == 0 ? (dev_t)-1 :
	    (T->signal->tty->driver->major << 20) +
	    T->signal->tty->driver->minor_start + T->signal->tty->index;
	/*
	 * The thread group leader's start_time: when the process, not the thread,
	 * began, in ns of CLOCK_MONOTONIC, timestamp's clock (so pr_start <=
	 * timestamp), not Solaris's timestruc_t from the epoch: add
	 * walltimestamp - timestamp for that.
	 */
	pr_start = T->group_leader->start_time;
	/*
	 * exec leaves the user stack pointer at argc, then argv[] and envp[]
	 * (mm->start_stack); argc is read from there, so only for the current
	 * task, as pr_psargs.
	 */
	pr_argc = T->mm == 0 || T != curthread ? 0 :
	    *(long *)copyin(T->mm->start_stack, sizeof (long));
	pr_argv = T->mm == 0 ? 0 : T->mm->start_stack + sizeof (long);
	pr_envp = T->mm == 0 || T != curthread ? 0 : T->mm->start_stack +
	    (*(long *)copyin(T->mm->start_stack, sizeof (long)) + 2) * sizeof (long);
	pr_dmodel = T->mm == 0 ? 0 :
	    T->thread_info.flags & (1 << 29) ? PR_MODEL_ILP32 : PR_MODEL_LP64;
	/* do_exit() sets exit_code (exit status << 8, or the signal) before proc:::exit. */
	pr_wstat = T->exit_code;
	pr_taskid = 0;
	pr_projid = 0;
	pr_poolid = 0;
	pr_zoneid = 0;
	pr_contract = 0;
	pr_nzomb = 0;
};

translator lwpsinfo_t < struct task_struct *T > {
	pr_flag = (T->__state & 0xc) != 0;
	pr_lwpid = T->pid;
	pr_addr = (uintptr_t)T;
	pr_state = T->exit_state & 0x30 ? SZOMB : T->__state & 0x800 ? SIDL :
	    T->__state & 0xc ? SSTOP : T->__state == 0 ? (T->on_cpu ? SONPROC : SRUN) : SSLEEP;
	pr_sname = T->exit_state & 0x30 ? 'Z' : T->__state & 0x800 ? 'I' :
	    T->__state & 0xc ? 'T' : T->__state == 0 ? (T->on_cpu ? 'O' : 'R') : 'S';
	pr_nice = T->static_prio - 120;
	pr_pri = T->prio;
	pr_clname = T->flags & 0x200000 ? "SYS" : T->policy == 1 || T->policy == 2 ? "RT" :
	    T->policy == 6 ? "DL" : T->policy == 5 ? "IDLE" : "TS";
	pr_onpro = T->thread_info.cpu;
	pr_name = T->comm;
};

inline psinfo_t *curpsinfo = xlate <psinfo_t *> (curthread);
inline lwpsinfo_t *curlwpsinfo = xlate <lwpsinfo_t *> (curthread);

/*
 * The stable providers' types (Oracle Linux DTrace's names and members): the CPU a
 * probe fires on, and the block I/O views of the io provider, translated from the
 * kernel's struct request.
 */
typedef struct cpuinfo {
	int cpu_id;		/* CPU number */
	int cpu_pset;		/* processor set: none, -1 */
	int cpu_chip;		/* the package (socket) it is on */
	int cpu_lgrp;		/* locality group: 0 (NUMA nodes are not read) */
	uintptr_t cpu_info;	/* its struct cpuinfo_x86 */
} cpuinfo_t;

typedef struct bufinfo {
	int b_flags;		/* B_READ or B_WRITE, | B_ASYNC */
	size_t b_bcount;	/* bytes of the request */
	uintptr_t b_addr;	/* the request's address (no buffer of its own) */
	uint64_t b_blkno;	/* first 512-byte sector on the device */
	uint64_t b_lblkno;	/* the same: Linux has no logical block number here */
	size_t b_resid;		/* 0 */
	size_t b_bufsize;	/* bytes of the request, as b_bcount */
	uintptr_t b_iodone;	/* the completion routine (end_io), or 0 */
	int b_error;		/* 0: the error is io:::done's second argument */
	dev_t b_edev;		/* the device: major << 20 | minor */
} bufinfo_t;

typedef struct devinfo {
	int dev_major;		/* major number */
	int dev_minor;		/* minor number */
	int dev_instance;	/* the disk's first minor */
	char dev_name[32];	/* the disk's name (loop0, sda, vda) */
	char dev_statname[32];	/* the disk's name, as iostat shows it */
	char dev_pathname[40];	/* /dev/NAME */
} devinfo_t;

typedef struct fileinfo {
	char fi_name[16];	/* block requests have no file: "<none>" */
	char fi_dirname[16];	/* "<none>" */
	char fi_pathname[16];	/* "<none>" */
	int64_t fi_offset;	/* -1 */
	char fi_fs[16];		/* "<none>" */
	char fi_mount[16];	/* "<none>" */
	int fi_oflags;		/* 0 */
} fileinfo_t;

inline int B_BUSY = 0x0001;
inline int B_DONE = 0x0002;
inline int B_ERROR = 0x0004;
inline int B_READ = 0x0040;
inline int B_WRITE = 0x0100;
inline int B_ASYNC = 0x0400;

/* The reasons of proc:::exit are CLD_* of <signal.h>, constants of every program. */

/*
 * CPU C's struct cpuinfo_x86 is its copy of the per-CPU cpu_info: &`cpu_info is the
 * variable's offset in every CPU's per-CPU area, __per_cpu_offset[C] the area of CPU C.
 */
translator cpuinfo_t < int C > {
	cpu_id = C;
	cpu_pset = -1;
	cpu_chip = ((struct cpuinfo_x86 *)(*(uintptr_t *)((uintptr_t)&`__per_cpu_offset +
	    C * sizeof (uintptr_t)) + (uintptr_t)&`cpu_info))->topo.pkg_id;
	cpu_lgrp = 0;
	cpu_info = *(uintptr_t *)((uintptr_t)&`__per_cpu_offset + C * sizeof (uintptr_t)) +
	    (uintptr_t)&`cpu_info;
};

/* Requests: REQ_OP_* in the low byte of cmd_flags, odd ones write; REQ_SYNC 1 << 11. */
translator bufinfo_t < struct request *R > {
	b_flags = (R->cmd_flags & 1 ? B_WRITE : B_READ) |
	    (R->cmd_flags & (1 << 11) ? 0 : B_ASYNC);
	b_bcount = R->__data_len;
	b_addr = (uintptr_t)R;
	b_blkno = R->__sector;
	b_lblkno = R->__sector;
	b_resid = 0;
	b_bufsize = R->__data_len;
	b_iodone = (uintptr_t)R->end_io;
	b_error = 0;
	b_edev = R->q->disk == 0 ? 0 :
	    (R->q->disk->major << 20) | R->q->disk->first_minor;
};

translator devinfo_t < struct request *R > {
	dev_major = R->q->disk == 0 ? 0 : R->q->disk->major;
	dev_minor = R->q->disk == 0 ? 0 : R->q->disk->first_minor;
	dev_instance = R->q->disk == 0 ? 0 : R->q->disk->first_minor;
	dev_name = R->q->disk == 0 ? "<none>" : stringof(R->q->disk->disk_name);
	dev_statname = R->q->disk == 0 ? "<none>" : stringof(R->q->disk->disk_name);
	dev_pathname = R->q->disk == 0 ? "<none>" :
	    strjoin("/dev/", stringof(R->q->disk->disk_name));
};

translator fileinfo_t < struct request *R > {
	fi_name = "<none>";
	fi_dirname = "<none>";
	fi_pathname = "<none>";
	fi_offset = -1;
	fi_fs = "<none>";
	fi_mount = "<none>";
	fi_oflags = 0;
};

inline cpuinfo_t *curcpu = xlate <cpuinfo_t *> (cpu);

/*
 * The stable probes' arguments and conditions (providers/stable.rs names them): each
 * is compiled where a clause of the probe reads args[N], or into its predicate, in terms
 * of the underlying probe's arg0..arg9, curthread or args-> (a tracepoint's record).
 */
/* proc:::create, proc:::lwp-create: fbt::wake_up_new_task:entry (the parent). */
inline int __proc_create_when = ((struct task_struct *)arg0)->pid ==
    ((struct task_struct *)arg0)->tgid;
inline int __proc_lwp_create_when = ((struct task_struct *)arg0)->pid !=
    ((struct task_struct *)arg0)->tgid;
inline psinfo_t *__proc_new_psinfo = xlate <psinfo_t *> ((struct task_struct *)arg0);
inline lwpsinfo_t *__proc_new_lwpsinfo = xlate <lwpsinfo_t *> ((struct task_struct *)arg0);
/* proc:::start: fbt::schedule_tail:entry (the new thread, before user code). */
inline int __proc_start_when = curthread->pid == curthread->tgid;
/* proc:::exec and exec-failure: fbt::do_execveat_common:entry and :return. */
inline string __proc_exec_path = stringof(((struct filename *)arg1)->name);
inline int __proc_exec_failure_when = (int)arg1 < 0;
inline int __proc_exec_errno = -(int)arg1;
/* proc:::exit: tracepoint:sched:sched_process_exit in the last thread (signal->live 0). */
inline int __proc_exit_when = curthread->signal->live.counter == 0;
inline int __proc_exit_reason = (curthread->exit_code & 0x7f) == 0 ? CLD_EXITED :
    curthread->exit_code & 0x80 ? CLD_DUMPED : CLD_KILLED;
/* proc:::signal-send: fbt::__send_signal_locked:entry (sig, info, t, type, force). */
inline lwpsinfo_t *__proc_signal_lwpsinfo = xlate <lwpsinfo_t *> ((struct task_struct *)arg2);
inline psinfo_t *__proc_signal_psinfo = xlate <psinfo_t *> ((struct task_struct *)arg2);
inline int __proc_signal_sig = (int)arg0;
/* proc:::signal-handle: fbt::signal_setup_done:entry (failed, ksig, stepping). */
inline int __proc_signal_handle_when = (int)arg0 == 0;
inline int __proc_signal_handle_sig = ((struct ksignal *)arg1)->sig;
inline uintptr_t __proc_signal_handle_info = (uintptr_t)&((struct ksignal *)arg1)->info;
inline uintptr_t __proc_signal_handle_handler =
    (uintptr_t)((struct ksignal *)arg1)->ka.sa.sa_handler;
/* proc:::signal-clear: syscall::rt_sigtimedwait:return with a signal. */
inline int __proc_signal_clear_when = (int)arg0 > 0;
inline int __proc_signal_clear_sig = (int)arg0;

/*
 * sched:::off-cpu, sleep, preempt: tracepoint:sched:sched_switch (the outgoing thread).
 * The incoming one is already its run queue's curr there: this CPU's struct rq is the
 * per-CPU runqueues at this CPU's offset (a uintptr_t, so that struct rq is resolved
 * only where it is read).
 */
inline uintptr_t __sched_this_rq = *(uintptr_t *)((uintptr_t)&`__per_cpu_offset +
    cpu * sizeof (uintptr_t)) + (uintptr_t)&`runqueues;
inline lwpsinfo_t *__sched_next_lwpsinfo =
    xlate <lwpsinfo_t *> (((struct rq *)__sched_this_rq)->curr);
inline psinfo_t *__sched_next_psinfo =
    xlate <psinfo_t *> (((struct rq *)__sched_this_rq)->curr);
/*
 * A thread switched out while still runnable (TASK_RUNNING, 0, or sched_switch's 0x100 of
 * a preemption in the kernel) is preempted: a tick or a wakeup on its way back to user
 * mode, preemption in the kernel, sched_yield(). Any other state blocks. The idle task is
 * never preempted, it only gives way.
 */
inline int __sched_sleep_when = args->prev_state != 0 && args->prev_state != 0x100;
inline int __sched_preempt_when = (args->prev_state == 0 || args->prev_state == 0x100) &&
    args->prev_pid != 0;
/*
 * sched:::remain-cpu: fbt::pick_next_task_fair:return, the pick of __schedule() when the
 * fair class has the CPU, that picked the thread that was running: it stays, no switch.
 */
inline int __sched_remain_when = arg1 == (uintptr_t)curthread;
/*
 * sched:::enqueue, dequeue: fbt::enqueue_task_CLASS/dequeue_task_CLASS:entry (rq, p,
 * flags), the scheduling classes' methods (enqueue_task() itself is inlined).
 */
inline lwpsinfo_t *__sched_q_lwpsinfo = xlate <lwpsinfo_t *> ((struct task_struct *)arg1);
inline psinfo_t *__sched_q_psinfo = xlate <psinfo_t *> ((struct task_struct *)arg1);
inline cpuinfo_t *__sched_q_cpuinfo = xlate <cpuinfo_t *> (((struct rq *)arg0)->cpu);
/* sched:::wakeup: fbt::try_to_wake_up:entry (p, state, wake_flags), p in that state. */
inline int __sched_wakeup_when = (((struct task_struct *)arg0)->__state & arg1) != 0;
inline lwpsinfo_t *__sched_arg0_lwpsinfo = xlate <lwpsinfo_t *> ((struct task_struct *)arg0);
inline psinfo_t *__sched_arg0_psinfo = xlate <psinfo_t *> ((struct task_struct *)arg0);
/* sched:::change-pri: fbt::set_user_nice:entry (p, nice): the new priority. */
inline int __sched_change_pri_pri = (int)arg1 + 120;
/* sched:::tick: fbt::sched_tick:entry, the thread the tick interrupted. */
inline lwpsinfo_t *__sched_cur_lwpsinfo = xlate <lwpsinfo_t *> (curthread);
inline psinfo_t *__sched_cur_psinfo = xlate <psinfo_t *> (curthread);
/* sched:::surrender: fbt::resched_curr:entry (rq) of another CPU's run queue. */
inline int __sched_surrender_when = ((struct rq *)arg0)->cpu != cpu;
inline lwpsinfo_t *__sched_surrender_lwpsinfo =
    xlate <lwpsinfo_t *> (((struct rq *)arg0)->curr);
inline psinfo_t *__sched_surrender_psinfo = xlate <psinfo_t *> (((struct rq *)arg0)->curr);

/* io:::start, done: fbt::blk_mq_start_request:entry, fbt::blk_update_request:entry. */
inline bufinfo_t *__io_bufinfo = xlate <bufinfo_t *> ((struct request *)arg0);
inline devinfo_t *__io_devinfo = xlate <devinfo_t *> ((struct request *)arg0);
inline fileinfo_t *__io_fileinfo = xlate <fileinfo_t *> ((struct request *)arg0);
