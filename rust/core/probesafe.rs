// SPDX-License-Identifier: GPL-2.0

//! Functions that are unsafe to probe: the ones that probe context, or the kernel's kprobe,
//! rethook and ftrace machinery around it, reaches itself.
//!
//! A probe on such a function fires from inside another firing. On entry the kernel only
//! counts it as missed (`kprobe_running()`), but on a return probe the rethook trampoline
//! calls some of them after the handler returned (`rethook_recycle` →
//! `rcu_read_lock_any_held` → `rcu_read_lock_held_common`), so each return starts another
//! until the IRQ stack overflows. Others are where interrupts, preemption or RCU are
//! switched for everyone, and patching them while they run on every CPU is the riskiest
//! code modification the kernel does.
//!
//! The rule: a function is refused if a rule below names it. LOAD refuses an attach entry
//! for a single function with `OXT_LOADERR_UNSAFE` (the reason in `err_code`), and skips and
//! counts one that came from a glob; the tool refuses a single name at compile time with its
//! position, leaves such functions out of a glob (`-v` lists them with the reason) and marks
//! them in `-l`. The list is this file alone. Where it comes from is in
//! `Documentation/probesafe.rst`: the kernel's source for the machinery, and, for the action
//! path, the kernel's function-graph tracer rooted at the shim's handlers in a guest test
//! (`selftests/oxtrace/probesafe_test.sh`), which fails on any function it records that no
//! rule names.

/// Why a function may not be probed. The discriminant is `err_code` of `OXT_LOADERR_UNSAFE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Why {
    /// The kprobe, kretprobe or rethook machinery, or its instance pool.
    Kprobes = 1,
    /// ftrace, function graph, or the code patching that arms probes.
    Ftrace = 2,
    /// RCU read-side helpers and checks (rethook and the action path call them).
    Rcu = 3,
    /// Lockdep, which every lock and RCU check calls.
    Lockdep = 4,
    /// Interrupt, softirq and preemption toggles.
    IrqPreempt = 5,
    /// Exception, interrupt, NMI and system call entry code.
    Entry = 6,
    /// A kernel function oxtrace's action path calls (derived with the function-graph
    /// tracer).
    ActionPath = 7,
    /// oxtrace's own code.
    Oxtrace = 8,
}

impl Why {
    /// Every reason, for tables and tests.
    pub const ALL: [Why; 8] = [
        Why::Kprobes,
        Why::Ftrace,
        Why::Rcu,
        Why::Lockdep,
        Why::IrqPreempt,
        Why::Entry,
        Why::ActionPath,
        Why::Oxtrace,
    ];

    /// The reason for `err_code`, if it is one.
    pub fn from_code(code: u32) -> Option<Why> {
        Why::ALL.into_iter().find(|w| *w as u32 == code)
    }

    /// A short phrase: "function F is unsafe to probe: <text>".
    pub fn text(self) -> &'static str {
        match self {
            Why::Kprobes => "the kprobe/rethook machinery runs it around every probe hit",
            Why::Ftrace => "ftrace or its code patching runs it",
            Why::Rcu => "an RCU read-side helper that probe handling calls itself",
            Why::Lockdep => "a lockdep check that probe handling calls itself",
            Why::IrqPreempt => "an interrupt or preemption toggle that probe handling runs",
            Why::Entry => "exception, interrupt, NMI or system call entry code",
            Why::ActionPath => "oxtrace's action path calls it",
            Why::Oxtrace => "oxtrace's own code",
        }
    }

    /// One word for `-l` and `-v`.
    pub fn tag(self) -> &'static str {
        match self {
            Why::Kprobes => "kprobes",
            Why::Ftrace => "ftrace",
            Why::Rcu => "rcu",
            Why::Lockdep => "lockdep",
            Why::IrqPreempt => "irq",
            Why::Entry => "entry",
            Why::ActionPath => "action",
            Why::Oxtrace => "oxtrace",
        }
    }
}

/// How a rule names functions.
#[derive(Clone, Copy, Debug)]
pub enum Pat {
    /// This name.
    Exact(&'static str),
    /// Names that start with this.
    Prefix(&'static str),
    /// Names that contain this.
    Contains(&'static str),
}

impl Pat {
    // On bytes: `str::contains` and `str::split` can call `core::str::slice_error_fail`,
    // which the kernel's objtool (6.12) does not know as noreturn, so the `-O2` bench
    // build of the module failed with "falls through to next function".
    fn matches(self, name: &[u8]) -> bool {
        match self {
            Pat::Exact(p) => name == p.as_bytes(),
            Pat::Prefix(p) => name.starts_with(p.as_bytes()),
            Pat::Contains(p) => {
                let p = p.as_bytes();
                p.is_empty() || name.windows(p.len()).any(|w| w == p)
            }
        }
    }
}

use Pat::{Contains, Exact, Prefix};

/// The rules, each with the reason it gives. Sources per group are in
/// `Documentation/probesafe.rst`.
pub const RULES: &[(Pat, Why)] = &[
    // kernel/kprobes.c, arch/x86/kernel/kprobes/, kernel/trace/rethook.c,
    // arch/x86/kernel/rethook.c, lib/objpool.c (rethook's instance pool).
    (Contains("kprobe"), Why::Kprobes),
    (Contains("kretprobe"), Why::Kprobes),
    (Contains("rethook"), Why::Kprobes),
    (Contains("fprobe"), Why::Kprobes),
    (Prefix("objpool_"), Why::Kprobes),
    (Exact("kprobes_inc_nmissed_count"), Why::Kprobes),
    // Several kprobes on one address run through these (kernel/kprobes.c).
    (Exact("aggr_pre_handler"), Why::Kprobes),
    (Exact("aggr_post_handler"), Why::Kprobes),
    // kernel/trace/ftrace.c, fgraph.c, arch/x86/kernel/ftrace.c, alternative.c: arming a
    // kprobe-on-ftrace rewrites call sites with text_poke_bp.
    (Prefix("ftrace"), Why::Ftrace),
    (Prefix("__ftrace"), Why::Ftrace),
    (Prefix("arch_ftrace"), Why::Ftrace),
    (Prefix("fgraph"), Why::Ftrace),
    (Prefix("function_graph"), Why::Ftrace),
    (Prefix("prepare_ftrace_return"), Why::Ftrace),
    (Prefix("text_poke"), Why::Ftrace),
    (Prefix("__text_poke"), Why::Ftrace),
    (Prefix("poke_int3"), Why::Ftrace),
    (Prefix("smp_text_poke"), Why::Ftrace),
    // kernel/rcu/: rethook_get_handler is rcu_dereference_check(.., rcu_read_lock_any_held()),
    // called by rethook_try_get on entry and rethook_recycle after the return handler;
    // task_tgid_nr and the pid/uid readers take rcu_read_lock.
    (Prefix("rcu_read_"), Why::Rcu),
    (Prefix("__rcu_read_"), Why::Rcu),
    (Exact("rcu_is_watching"), Why::Rcu),
    // rethook_recycle frees through call_rcu once its rethook is being unregistered.
    (Prefix("call_rcu"), Why::Rcu),
    (Prefix("__call_rcu"), Why::Rcu),
    (Prefix("rcu_lockdep_"), Why::Rcu),
    (Exact("debug_lockdep_rcu_enabled"), Why::Rcu),
    (Prefix("rcu_preempt_deferred_qs"), Why::Rcu),
    (Prefix("rcu_irq_"), Why::Rcu),
    (Prefix("rcu_nmi_"), Why::Rcu),
    (Prefix("ct_"), Why::Rcu),
    (Prefix("__ct_"), Why::Rcu),
    // kernel/locking/lockdep.c: every lock, RCU and irq-state change calls these.
    (Prefix("lockdep_"), Why::Lockdep),
    (Prefix("__lockdep_"), Why::Lockdep),
    (Exact("lock_acquire"), Why::Lockdep),
    (Exact("lock_release"), Why::Lockdep),
    (Exact("lock_acquired"), Why::Lockdep),
    (Exact("lock_contended"), Why::Lockdep),
    (Exact("lock_is_held_type"), Why::Lockdep),
    (Exact("lock_sync"), Why::Lockdep),
    (Exact("lock_pin_lock"), Why::Lockdep),
    (Exact("lock_repin_lock"), Why::Lockdep),
    (Exact("lock_unpin_lock"), Why::Lockdep),
    // The shim's local_irq_save/restore (trace_hardirqs_* with TRACE_IRQFLAGS), preempt
    // counting in the rethook trampoline and the ftrace recursion lock.
    (Prefix("trace_hardirqs_"), Why::IrqPreempt),
    (Prefix("trace_preempt_"), Why::IrqPreempt),
    (Prefix("preempt_count_"), Why::IrqPreempt),
    (Prefix("preempt_schedule"), Why::IrqPreempt),
    (Prefix("__preempt_schedule"), Why::IrqPreempt),
    (Prefix("arch_local_irq_"), Why::IrqPreempt),
    (Prefix("native_irq_"), Why::IrqPreempt),
    (Prefix("native_save_fl"), Why::IrqPreempt),
    (Prefix("native_restore_fl"), Why::IrqPreempt),
    (Prefix("local_bh_"), Why::IrqPreempt),
    (Prefix("__local_bh_"), Why::IrqPreempt),
    (Prefix("irq_enter"), Why::IrqPreempt),
    (Prefix("irq_exit"), Why::IrqPreempt),
    (Prefix("__irq_exit"), Why::IrqPreempt),
    (Exact("handle_softirqs"), Why::IrqPreempt),
    // arch/x86/entry/, kernel/entry/, arch/x86/kernel/nmi.c, traps.c: the paths an
    // interrupt, exception or NMI takes before it can run a probe handler.
    (Prefix("exc_"), Why::Entry),
    (Prefix("asm_"), Why::Entry),
    (Prefix("irqentry_"), Why::Entry),
    (Prefix("raw_irqentry_"), Why::Entry),
    (Contains("nmi"), Why::Entry),
    (Prefix("do_int3"), Why::Entry),
    (Prefix("do_debug"), Why::Entry),
    (Prefix("do_syscall_"), Why::Entry),
    (Prefix("do_int80"), Why::Entry),
    (Prefix("entry_"), Why::Entry),
    (Prefix("enter_from_user_mode"), Why::Entry),
    (Prefix("syscall_enter_from_user_mode"), Why::Entry),
    (Prefix("syscall_exit_to_user_mode"), Why::Entry),
    (Prefix("exit_to_user_mode"), Why::Entry),
    (Prefix("fixup_exception"), Why::Entry),
    (Prefix("ex_handler_"), Why::Entry),
    // The functions the shim calls in probe context, recorded by the function-graph test
    // (selftests/oxtrace/probesafe_test.sh) under the shim's handlers: pid, uid/gid,
    // execname, the nofault reader and its fault path, the clocks, the tick's re-arm.
    (Exact("__task_pid_nr_ns"), Why::ActionPath),
    (Exact("task_active_pid_ns"), Why::ActionPath),
    (Exact("from_kuid_munged"), Why::ActionPath),
    (Exact("from_kgid_munged"), Why::ActionPath),
    (Exact("from_kuid"), Why::ActionPath),
    (Exact("from_kgid"), Why::ActionPath),
    (Exact("map_id_up"), Why::ActionPath),
    (Prefix("copy_from_kernel_nofault"), Why::ActionPath),
    (Exact("sized_strscpy"), Why::ActionPath),
    (Exact("strscpy"), Why::ActionPath),
    (Prefix("ktime_get_mono_fast"), Why::ActionPath),
    (Prefix("ktime_get_real_fast"), Why::ActionPath),
    (Exact("hrtimer_forward"), Why::ActionPath),
    (Exact("ktime_get"), Why::ActionPath),
    (Exact("search_exception_tables"), Why::ActionPath),
    (Exact("search_kernel_exception_table"), Why::ActionPath),
    (Exact("search_module_extables"), Why::ActionPath),
    (Exact("search_extable"), Why::ActionPath),
    (Exact("kernelmode_fixup_or_oops"), Why::ActionPath),
    (Exact("do_kern_addr_fault"), Why::ActionPath),
    (Exact("page_fault_oops"), Why::ActionPath),
    (Exact("spurious_kernel_fault"), Why::ActionPath),
    (Exact("bad_area_nosemaphore"), Why::ActionPath),
    (Exact("__bad_area_nosemaphore"), Why::ActionPath),
    (Exact("pt_regs_offset"), Why::ActionPath),
    // Callees of later actions, from their source (not yet measured by the test):
    // stack() walks with stack_trace_save (kernel/stacktrace.c, arch/x86/kernel/unwind_*.c),
    // copyinstr() reads with the nofault user copies (mm/maccess.c), and the cleaner's
    // on-demand wake-up, raise() and stop() queue irq_work (kernel/irq_work.c).
    (Prefix("stack_trace_"), Why::ActionPath),
    (Exact("arch_stack_walk"), Why::ActionPath),
    (Prefix("unwind_"), Why::ActionPath),
    (Prefix("__unwind_"), Why::ActionPath),
    (Prefix("get_stack_info"), Why::ActionPath),
    (Prefix("copy_from_user_nofault"), Why::ActionPath),
    (Prefix("strncpy_from_user_nofault"), Why::ActionPath),
    // ustack()'s frame-pointer walk reads user memory with those copies: a frame that is
    // not present faults into the user half of the page-fault handler
    // (arch/x86/mm/fault.c), which sees the faults disabled and fixes the copy up.
    (Exact("do_user_addr_fault"), Why::ActionPath),
    (Prefix("irq_work_"), Why::ActionPath),
    (Prefix("__irq_work_"), Why::ActionPath),
    (Exact("arch_irq_work_raise"), Why::ActionPath),
    // oxtrace's shim (its C functions are ftrace-traceable, as module code is).
    (Prefix("oxt_"), Why::Oxtrace),
];

/// Why `name` may not be probed, or `None` if it may. A compiler-made copy
/// (`name.constprop.0`, `name.isra.0`) is judged by its function's name.
pub fn refusal(name: &str) -> Option<Why> {
    let name = name.as_bytes();
    let base = name.split(|&c| c == b'.').next().unwrap_or(name);
    RULES
        .iter()
        .find(|(p, _)| p.matches(base))
        .map(|&(_, why)| why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recursion_case_and_its_relatives_are_refused() {
        for f in [
            "rcu_read_lock_held_common",
            "rcu_read_lock_any_held",
            "rcu_read_lock_held",
            "__rcu_read_lock",
            "__rcu_read_unlock",
            "rcu_is_watching",
            "objpool_push",
            "objpool_pop",
            "rethook_recycle",
            "kprobe_ftrace_handler",
            "pre_handler_kretprobe",
            "get_kprobe",
            "ftrace_ops_list_func",
            "text_poke_bp",
            "trace_hardirqs_off",
            "preempt_count_add",
            "lock_acquire",
            "exc_int3",
            "default_do_nmi",
            "copy_from_kernel_nofault",
            "oxt_kprobe_pre",
            "call_rcu",
            "map_id_up.isra.0",
            "stack_trace_save",
            "unwind_next_frame",
            "copy_from_user_nofault",
            "do_user_addr_fault",
            "irq_work_queue",
        ] {
            assert!(refusal(f).is_some(), "{f} should be refused");
        }
    }

    #[test]
    fn ordinary_functions_are_allowed() {
        for f in [
            "vfs_read",
            "ksys_read",
            "__x64_sys_getppid",
            "__x64_sys_read",
            "do_sys_openat2",
            "schedule",
            "kmalloc_trace",
            "tcp_sendmsg",
            "unmap_page_range",
            "lock_page",
            "rcu_core",
        ] {
            assert_eq!(refusal(f), None, "{f} should be allowed");
        }
    }

    #[test]
    fn codes_round_trip_and_differ() {
        for w in Why::ALL {
            assert_eq!(Why::from_code(w as u32), Some(w));
            assert!(!w.text().is_empty() && !w.tag().is_empty());
        }
        assert_eq!(Why::from_code(0), None);
        assert!(RULES.iter().all(|(_, w)| Why::ALL.contains(w)));
    }
}
