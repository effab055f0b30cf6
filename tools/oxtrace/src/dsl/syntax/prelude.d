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
	pr_dmodel = T->mm == 0 ? 0 : T->thread_info.flags & (1 << 29) ? 1 : 2;
};

translator lwpsinfo_t < struct task_struct *T > {
	pr_flag = (T->__state & 0xc) != 0;
	pr_lwpid = T->pid;
	pr_addr = (uintptr_t)T;
	pr_state = T->exit_state & 0x30 ? 3 : T->__state & 0x800 ? 5 :
	    T->__state & 0xc ? 4 : T->__state == 0 ? (T->on_cpu ? 6 : 2) : 1;
	pr_sname = T->exit_state & 0x30 ? 'Z' : T->__state & 0x800 ? 'I' :
	    T->__state & 0xc ? 'T' : T->__state == 0 ? (T->on_cpu ? 'O' : 'R') : 'S';
	pr_nice = T->static_prio - 120;
	pr_pri = T->prio;
	pr_clname = T->flags & 0x200000 ? "SYS" : T->policy == 1 || T->policy == 2 ? "RT" :
	    T->policy == 6 ? "DL" : T->policy == 5 ? "IDLE" : "TS";
	pr_onpro = T->thread_info.cpu;
};

inline psinfo_t *curpsinfo = xlate <psinfo_t *> (curthread);
inline lwpsinfo_t *curlwpsinfo = xlate <lwpsinfo_t *> (curthread);
