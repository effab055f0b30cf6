//! DTrace's stable providers `proc`, `sched` and `io`, as Oracle Linux DTrace documents
//! them, defined over the kernel's own probes.
//!
//! Each stable probe is one or more *hooks*: an underlying probe description (a
//! tracepoint, an fbt entry or return, a system call), an optional condition that must hold
//! for the stable probe to fire, and the D expressions its `args[0..]` are. The conditions
//! and the arguments are D: they name inlines of the compiler's prelude
//! (`dsl/syntax/prelude.d`, `__proc_*`, `__sched_*`, `__io_*`), which translate the
//! underlying probe's `arg0..`, `curthread` or record (`args->FIELD`) with the translators
//! of `psinfo_t`, `lwpsinfo_t`, `cpuinfo_t`, `bufinfo_t`, `devinfo_t` and `fileinfo_t`.
//!
//! The compiler (`dsl/passes/stable.rs`) enables each hook's probes for the clauses that
//! name the stable probe, compiles the clause once per hook with `args[N]` replaced by the
//! hook's expression, `probeprov`, `probemod`, `probefunc` and `probename` by the stable
//! probe's names and the hook's condition put before the clause's predicate.

/// The module every stable probe is listed in, as Oracle Linux DTrace lists them.
pub const MODULE: &str = "vmlinux";

/// One way a stable probe fires: where, when, and what its arguments are.
#[derive(Debug)]
pub struct Hook {
    /// The underlying probe description (`fbt::wake_up_new_task:entry`).
    pub under: &'static str,
    /// A D condition that must hold (an inline of the prelude), or none.
    pub when: Option<&'static str>,
    /// The D expression of each `args[N]`, in order.
    pub args: &'static [&'static str],
}

/// A stable probe.
#[derive(Debug)]
pub struct Probe {
    /// `proc`, `sched` or `io`.
    pub prov: &'static str,
    /// Its name (`exec-success`).
    pub name: &'static str,
    /// The type of each `args[N]`, as Oracle's provider reference writes it.
    pub types: &'static [&'static str],
    /// Where it fires: a clause of the probe is compiled once per hook.
    pub hooks: &'static [Hook],
}

impl Probe {
    /// `prov:vmlinux::name`, as `-l` lists it.
    pub fn full(&self) -> String {
        format!("{}:{MODULE}::{}", self.prov, self.name)
    }
}

/// The stable providers.
pub const PROVIDERS: [&str; 3] = ["proc", "sched", "io"];

const fn hook(
    under: &'static str,
    when: Option<&'static str>,
    args: &'static [&'static str],
) -> Hook {
    Hook { under, when, args }
}

const fn probe(
    prov: &'static str,
    name: &'static str,
    types: &'static [&'static str],
    hooks: &'static [Hook],
) -> Probe {
    Probe {
        prov,
        name,
        types,
        hooks,
    }
}

const PS: &str = "psinfo_t *";
const LWPS: &str = "lwpsinfo_t *";
const SWITCH: &str = "tracepoint:sched:sched_switch";
const EXIT: &str = "tracepoint:sched:sched_process_exit";
const NEWTASK: &str = "fbt::wake_up_new_task:entry";

/// Every stable probe, by provider, in the order `-l` lists them.
pub static PROBES: &[Probe] = &[
    // proc: process and thread lifecycle, signals.
    probe(
        "proc",
        "create",
        &[PS],
        &[hook(
            NEWTASK,
            Some("__proc_create_when"),
            &["__proc_new_psinfo"],
        )],
    ),
    probe(
        "proc",
        "exec",
        &["string"],
        &[hook(
            "fbt::do_execveat_common:entry",
            None,
            &["__proc_exec_path"],
        )],
    ),
    probe(
        "proc",
        "exec-failure",
        &["int"],
        &[hook(
            "fbt::do_execveat_common:return",
            Some("__proc_exec_failure_when"),
            &["__proc_exec_errno"],
        )],
    ),
    probe(
        "proc",
        "exec-success",
        &[],
        &[hook("tracepoint:sched:sched_process_exec", None, &[])],
    ),
    probe(
        "proc",
        "exit",
        &["int"],
        &[hook(
            EXIT,
            Some("__proc_exit_when"),
            &["__proc_exit_reason"],
        )],
    ),
    probe(
        "proc",
        "lwp-create",
        &[LWPS, PS],
        &[hook(
            NEWTASK,
            Some("__proc_lwp_create_when"),
            &["__proc_new_lwpsinfo", "__proc_new_psinfo"],
        )],
    ),
    probe("proc", "lwp-exit", &[], &[hook(EXIT, None, &[])]),
    probe(
        "proc",
        "lwp-start",
        &[],
        &[hook("fbt::schedule_tail:entry", None, &[])],
    ),
    probe(
        "proc",
        "signal-clear",
        &["int"],
        &[hook(
            "syscall::rt_sigtimedwait:return",
            Some("__proc_signal_clear_when"),
            &["__proc_signal_clear_sig"],
        )],
    ),
    probe(
        "proc",
        "signal-handle",
        &["int", "siginfo_t *", "void (*)(void)"],
        &[hook(
            "fbt::signal_setup_done:entry",
            Some("__proc_signal_handle_when"),
            &[
                "__proc_signal_handle_sig",
                "(struct kernel_siginfo *)__proc_signal_handle_info",
                "__proc_signal_handle_handler",
            ],
        )],
    ),
    probe(
        "proc",
        "signal-send",
        &[LWPS, PS, "int"],
        &[hook(
            "fbt::__send_signal_locked:entry",
            None,
            &[
                "__proc_signal_lwpsinfo",
                "__proc_signal_psinfo",
                "__proc_signal_sig",
            ],
        )],
    ),
    probe(
        "proc",
        "start",
        &[],
        &[hook(
            "fbt::schedule_tail:entry",
            Some("__proc_start_when"),
            &[],
        )],
    ),
    // sched: CPU scheduling.
    probe(
        "sched",
        "change-pri",
        &[LWPS, PS, "int"],
        &[hook(
            "fbt::set_user_nice:entry",
            None,
            &[
                "__sched_arg0_lwpsinfo",
                "__sched_arg0_psinfo",
                "__sched_change_pri_pri",
            ],
        )],
    ),
    probe(
        "sched",
        "dequeue",
        &[LWPS, PS, "cpuinfo_t *"],
        &[hook(
            "fbt::dequeue_task_*:entry",
            None,
            &[
                "__sched_q_lwpsinfo",
                "__sched_q_psinfo",
                "__sched_q_cpuinfo",
            ],
        )],
    ),
    probe(
        "sched",
        "enqueue",
        &[LWPS, PS, "cpuinfo_t *"],
        &[hook(
            "fbt::enqueue_task_*:entry",
            None,
            &[
                "__sched_q_lwpsinfo",
                "__sched_q_psinfo",
                "__sched_q_cpuinfo",
            ],
        )],
    ),
    probe(
        "sched",
        "off-cpu",
        &[LWPS, PS],
        &[hook(
            SWITCH,
            None,
            &["__sched_next_lwpsinfo", "__sched_next_psinfo"],
        )],
    ),
    probe(
        "sched",
        "on-cpu",
        &[],
        &[hook("fbt::finish_task_switch*:entry", None, &[])],
    ),
    probe(
        "sched",
        "preempt",
        &[],
        &[hook(SWITCH, Some("__sched_preempt_when"), &[])],
    ),
    probe(
        "sched",
        "remain-cpu",
        &[],
        &[hook(
            "fbt::pick_next_task_fair:return",
            Some("__sched_remain_when"),
            &[],
        )],
    ),
    probe(
        "sched",
        "sleep",
        &[],
        &[hook(SWITCH, Some("__sched_sleep_when"), &[])],
    ),
    probe(
        "sched",
        "surrender",
        &[LWPS, PS],
        &[hook(
            "fbt::resched_curr:entry",
            Some("__sched_surrender_when"),
            &["__sched_surrender_lwpsinfo", "__sched_surrender_psinfo"],
        )],
    ),
    probe(
        "sched",
        "tick",
        &[LWPS, PS],
        &[hook(
            "fbt::sched_tick:entry",
            None,
            &["__sched_cur_lwpsinfo", "__sched_cur_psinfo"],
        )],
    ),
    probe(
        "sched",
        "wakeup",
        &[LWPS, PS],
        &[hook(
            "fbt::try_to_wake_up:entry",
            Some("__sched_wakeup_when"),
            &["__sched_arg0_lwpsinfo", "__sched_arg0_psinfo"],
        )],
    ),
    // io: block I/O requests.
    probe(
        "io",
        "done",
        &["bufinfo_t *", "devinfo_t *", "fileinfo_t *"],
        &[hook(
            "fbt::blk_update_request:entry",
            None,
            &["__io_bufinfo", "__io_devinfo", "__io_fileinfo"],
        )],
    ),
    probe(
        "io",
        "start",
        &["bufinfo_t *", "devinfo_t *", "fileinfo_t *"],
        &[hook(
            "fbt::blk_mq_start_request:entry",
            None,
            &["__io_bufinfo", "__io_devinfo", "__io_fileinfo"],
        )],
    ),
    probe(
        "io",
        "wait-done",
        &[],
        &[
            hook("fbt::io_schedule:return", None, &[]),
            hook("fbt::io_schedule_timeout:return", None, &[]),
        ],
    ),
    probe(
        "io",
        "wait-start",
        &[],
        &[
            hook("fbt::io_schedule:entry", None, &[]),
            hook("fbt::io_schedule_timeout:entry", None, &[]),
        ],
    ),
];

/// Whether `prov` is a stable provider.
pub fn is_provider(prov: &str) -> bool {
    PROVIDERS.contains(&prov)
}

/// The stable probes `prov:module:func:name` names (globs allowed; an empty field matches
/// anything). A stable probe has no function: a non-empty `func` matches only as a glob
/// that matches the empty string (`*`).
pub fn matching(prov: &str, module: &str, func: &str, name: &str) -> Vec<&'static Probe> {
    let m = |p: &str, v: &str| p.is_empty() || super::fbt::glob_match(p, v);
    PROBES
        .iter()
        .filter(|p| m(prov, p.prov) && m(module, MODULE) && m(func, "") && m(name, p.name))
        .collect()
}

/// The stable probe whose full name (`prov:vmlinux::name`, or `prov:::name`) is `text`.
pub fn find(text: &str) -> Option<&'static Probe> {
    let f: Vec<&str> = text.split(':').collect();
    match f.as_slice() {
        [prov, module, "", name] if matches!(*module, "" | MODULE) => {
            PROBES.iter().find(|p| p.prov == *prov && p.name == *name)
        }
        _ => None,
    }
}

/// The argument types of stable probe `prov:::name` for `-l -v`.
pub fn arg_types(prov: &str, name: &str) -> Option<Vec<String>> {
    let p = PROBES.iter().find(|p| p.prov == prov && p.name == name)?;
    Some(p.types.iter().map(|t| t.to_string()).collect())
}
