// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel stacks for stack(), with the kernel's stack walker, and the user
 * registers ustack() walks from.  Probe context: no allocation, no sleep.
 *
 * With kernel registers (fbt, profile in the kernel) the walk starts at them,
 * as stack_trace_save_regs() does (it is not exported; the unwinder it uses
 * is): it reads the probed context's frames only, never the probe machinery's
 * below them, and stops at the frames asked for.  Walking the whole stack
 * from here instead cost several times as much (the guess unwinder tests
 * every word on the stack for a text address, the fire path's own frames
 * included), enough to stretch a test's run past its hang guard on a
 * saturated host.  For the others (syscall, tracepoints, whose registers are
 * perf's approximation, tick, BEGIN) the walk starts here, into a per-CPU
 * buffer, not one on the stack (the guess unwinder would find the buffer's
 * own entries); the frames up to the PC of kernel registers are cut off, and
 * the module's frames dropped.  Actions do not nest on a CPU (the shim's
 * action guard), so one buffer a CPU suffices.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/stacktrace.h>
#include <asm/unwind.h>
#include "shim.h"

/* Room for the module's and the probe machinery's frames below the probed context. */
#define OXT_STACK_MAX 256

static DEFINE_PER_CPU(unsigned long[OXT_STACK_MAX], oxt_stack_buf);

/* Stores pc as entry *j of out (if out) unless it is the module's; false when full. */
static bool oxt_stack_add(unsigned long pc, unsigned long *out, unsigned int *j,
			  unsigned int max)
{
	if (*j >= max)
		return false;
	if (within_module(pc, THIS_MODULE))
		return true;
	if (out)
		out[*j] = pc;
	(*j)++;
	return *j < max;
}

/* Whether pc is the probed PC or the return address of an fentry call at it. */
static bool oxt_at_probe(unsigned long pc, unsigned long ip)
{
	return pc >= ip - 16 && pc <= ip + 16;
}

unsigned int oxt_kernel_stack(struct pt_regs *regs, unsigned int from, unsigned long *out,
			      unsigned int max)
{
	unsigned long *buf = this_cpu_ptr(oxt_stack_buf);
	bool kregs = regs && !user_mode(regs);
	unsigned int n, i, start = 0, j = 0;

	/*
	 * A probe that interrupted user mode (profile) has no kernel stack: the
	 * frames below it are the interrupt's, not the sampled thread's.
	 */
	if (regs && !kregs && from != OXT_STACK_FROM_HERE)
		return 0;
	if (kregs && from != OXT_STACK_FROM_HERE) {
		struct unwind_state state;
		unsigned long pc;

		if (from == OXT_STACK_FROM_REGS &&
		    !oxt_stack_add(instruction_pointer(regs), out, &j, max))
			return j;
		/* from regs->sp: at an entry probe the return address into the caller */
		for (unwind_start(&state, current, regs, NULL); !unwind_done(&state);
		     unwind_next_frame(&state)) {
			pc = unwind_get_return_address(&state);
			if (!pc || !oxt_stack_add(pc, out, &j, max))
				break;
		}
		return j;
	}
	n = stack_trace_save(buf, OXT_STACK_MAX, 0);
	if (kregs) {
		unsigned long ip = instruction_pointer(regs);

		for (i = 0; i < n; i++)
			if (oxt_at_probe(buf[i], ip))
				start = i + 1;
	}
	for (i = start; i < n && oxt_stack_add(buf[i], out, &j, max); i++)
		;
	return j;
}

unsigned int oxt_kernel_stack_depth(struct pt_regs *regs, unsigned int from)
{
	return oxt_kernel_stack(regs, from, NULL, UINT_MAX);
}

/*
 * The user registers of current: the probe's when it interrupted user mode,
 * else the ones its last entry into the kernel saved at the top of its kernel
 * stack (a system call, an interrupt, a fault).  A kernel thread has none; a
 * task past exit_mm() has no user memory left to walk.
 */
bool oxt_user_regs(struct pt_regs *regs, unsigned long *pc, unsigned long *fp)
{
	if (!regs || !user_mode(regs)) {
		if ((current->flags & PF_KTHREAD) || !current->mm)
			return false;
		regs = task_pt_regs(current);
	}
	*pc = instruction_pointer(regs);
	*fp = frame_pointer(regs);
	return true;
}

/*
 * uregs[idx] in DTrace's x86-64 numbering (struct pt_regs in order, then ds, es,
 * fs, gs, trapno), of the registers oxt_user_regs() chooses.  The segment
 * registers and the trap number are not saved at a 64-bit kernel entry: 0.
 */
bool oxt_user_reg(struct pt_regs *regs, unsigned int idx, unsigned long *out)
{
	if (!regs || !user_mode(regs)) {
		if ((current->flags & PF_KTHREAD) || !current->mm)
			return false;
		regs = task_pt_regs(current);
	}
	switch (idx) {
	case 0: *out = regs->r15; break;
	case 1: *out = regs->r14; break;
	case 2: *out = regs->r13; break;
	case 3: *out = regs->r12; break;
	case 4: *out = regs->bp; break;
	case 5: *out = regs->bx; break;
	case 6: *out = regs->r11; break;
	case 7: *out = regs->r10; break;
	case 8: *out = regs->r9; break;
	case 9: *out = regs->r8; break;
	case 10: *out = regs->ax; break;
	case 11: *out = regs->cx; break;
	case 12: *out = regs->dx; break;
	case 13: *out = regs->si; break;
	case 14: *out = regs->di; break;
	case 15: *out = regs->orig_ax; break;
	case 16: *out = regs->ip; break;
	case 17: *out = regs->cs; break;
	case 18: *out = regs->flags; break;
	case 19: *out = regs->sp; break;
	case 20: *out = regs->ss; break;
	default: *out = 0; break;
	}
	return true;
}
