// SPDX-License-Identifier: GPL-2.0

//! What a probe is to its clauses, defined once for the kernel's `KernelEnv` and the tool's
//! simulator: the built-in variables that depend on the probe (`probeprov`, `probemod`,
//! `probename`, `arg0..5`, `retval`, `id`) and the clause loop of one firing.
//!
//! Pure logic: no allocation, nothing that can panic; the loop runs in probe context.

use crate::action::{Builtin, Env, Fault, FaultKind, Insn, Op, Vm};
use crate::program::{Image, ProbeKind, VerifiedClause};

/// `probeprov`: the provider that publishes probes of `kind`.
pub fn provider(kind: ProbeKind) -> &'static [u8] {
    match kind {
        ProbeKind::FbtEntry | ProbeKind::FbtReturn => b"fbt",
        ProbeKind::Tick | ProbeKind::Profile => b"profile",
        ProbeKind::SyscallEntry | ProbeKind::SyscallReturn => b"syscall",
        ProbeKind::Tracepoint => b"tracepoint",
        ProbeKind::Begin | ProbeKind::End | ProbeKind::Error => b"dtrace",
        // Named by the slot: `user_parts`.
        ProbeKind::PidEntry | ProbeKind::PidReturn | ProbeKind::PidOffset | ProbeKind::Usdt => b"",
    }
}

/// Whether probes of `kind` are user-space probes (LOAD's uattach table), whose slot
/// function is the whole `provider:module:function:name` ([`user_parts`]).
pub fn is_user(kind: ProbeKind) -> bool {
    matches!(
        kind,
        ProbeKind::PidEntry | ProbeKind::PidReturn | ProbeKind::PidOffset | ProbeKind::Usdt
    )
}

/// The four parts of a user-space probe's slot function `provider:module:function:name`.
/// The module and the function may hold colons (C++ names): the provider is up to the
/// first colon, the name after the last, the module up to the next colon.
pub fn user_parts(func: &[u8]) -> [&[u8]; 4] {
    let first = func.iter().position(|&c| c == b':');
    let last = func.iter().rposition(|&c| c == b':');
    let (Some(f), Some(l)) = (first, last) else {
        return [b"", b"", func, b""];
    };
    let prov = func.get(..f).unwrap_or_default();
    let name = func.get(l + 1..).unwrap_or_default();
    let mid = func.get(f + 1..l.max(f + 1)).unwrap_or_default();
    let (module, function) = match mid.iter().position(|&c| c == b':') {
        Some(i) => (
            mid.get(..i).unwrap_or_default(),
            mid.get(i + 1..).unwrap_or_default(),
        ),
        None => (mid, &b""[..]),
    };
    [prov, module, function, name]
}

/// `probemod`: `vmlinux` for the core kernel's functions, as DTrace on Linux names it;
/// empty for probes of no module.
pub fn module(kind: ProbeKind) -> &'static [u8] {
    match kind {
        ProbeKind::FbtEntry
        | ProbeKind::FbtReturn
        | ProbeKind::SyscallEntry
        | ProbeKind::SyscallReturn => b"vmlinux",
        ProbeKind::Tick
        | ProbeKind::Profile
        | ProbeKind::Tracepoint
        | ProbeKind::Begin
        | ProbeKind::End
        | ProbeKind::Error
        | ProbeKind::PidEntry
        | ProbeKind::PidReturn
        | ProbeKind::PidOffset
        | ProbeKind::Usdt => b"",
    }
}

/// `probename` of a probe of `kind` (`period_ns`: the description's period, for ticks),
/// copied into `out` and truncated to it; returns its length.
///
/// A tick is named by its period in the largest unit that divides it: `tick-1s`,
/// `tick-10ms`; a period written in hertz (`tick-100hz`) reads back as `tick-10ms`.
/// A profile probe likewise, except that a rate in hertz that is no whole number of
/// milliseconds reads back as DTrace writes it: `profile-997`.
pub fn name(kind: ProbeKind, period_ns: u64, out: &mut [u8]) -> usize {
    let fixed: &[u8] = match kind {
        ProbeKind::FbtEntry | ProbeKind::SyscallEntry => b"entry",
        ProbeKind::FbtReturn | ProbeKind::SyscallReturn => b"return",
        ProbeKind::Begin => b"BEGIN",
        ProbeKind::End => b"END",
        ProbeKind::Error => b"ERROR",
        // Named by its event: `tracepoint_parts`; user probes by their slot: `user_parts`.
        ProbeKind::Tracepoint
        | ProbeKind::PidEntry
        | ProbeKind::PidReturn
        | ProbeKind::PidOffset
        | ProbeKind::Usdt => b"",
        ProbeKind::Tick => return period_name("tick", period_ns, out),
        ProbeKind::Profile => return period_name("profile", period_ns, out),
    };
    copy(out, fixed)
}

/// `probemod`, `probefunc` and `probename` of a probe of `kind` attached to `func` (the
/// slot's function): as [`module`], `func` and [`name`], except for tracepoints, whose
/// `func` is `SUBSYS:EVENT`: module `SUBSYS`, no function, name `EVENT`, as
/// `sdt:SUBSYS::EVENT` writes it.
pub fn tracepoint_parts(func: &[u8]) -> (&[u8], &[u8]) {
    match func.iter().position(|&c| c == b':') {
        Some(i) => (
            func.get(..i).unwrap_or_default(),
            func.get(i + 1..).unwrap_or_default(),
        ),
        None => (b"", func),
    }
}

/// `probeprov`, `probemod`, `probefunc` or `probename` (`b`) of a probe of `kind` attached
/// to `func` (its slot's function), with `period_ns` its description's period; copied into
/// `out`, truncated. `None` for other built-ins.
pub fn describe(
    kind: ProbeKind,
    func: &[u8],
    period_ns: u64,
    b: Builtin,
    out: &mut [u8],
) -> Option<usize> {
    let tp = kind == ProbeKind::Tracepoint;
    if is_user(kind) {
        let parts = user_parts(func);
        let i = match b {
            Builtin::Probeprov => 0,
            Builtin::Probemod => 1,
            Builtin::Probefunc => 2,
            Builtin::Probename => 3,
            _ => return None,
        };
        return Some(copy(out, parts.get(i).copied().unwrap_or_default()));
    }
    Some(match b {
        Builtin::Probeprov => copy(out, provider(kind)),
        Builtin::Probemod if tp => copy(out, tracepoint_parts(func).0),
        Builtin::Probemod => copy(out, module(kind)),
        Builtin::Probefunc if tp => 0,
        Builtin::Probefunc => copy(out, func),
        Builtin::Probename if tp => copy(out, tracepoint_parts(func).1),
        Builtin::Probename => name(kind, period_ns, out),
        _ => return None,
    })
}

/// The period in ns of a rate of `hz` per second, as `profile-N` and `tick-Nhz` mean it.
pub fn hz_period(hz: u64) -> u64 {
    NS_PER_S.checked_div(hz).unwrap_or(0)
}

const NS_PER_S: u64 = 1_000_000_000;

/// Copies what fits of `s` into `out`; returns the bytes copied.
pub fn copy(out: &mut [u8], s: &[u8]) -> usize {
    let n = s.len().min(out.len());
    if let (Some(d), Some(s)) = (out.get_mut(..n), s.get(..n)) {
        d.copy_from_slice(s);
    }
    n
}

/// `<prefix>-<n><unit>` for a period in ns.
fn period_name(prefix: &str, ns: u64, out: &mut [u8]) -> usize {
    use core::fmt::Write;
    let mut w = SliceWriter { buf: out, len: 0 };
    if prefix == "profile" && ns % 1_000_000 != 0 {
        let hz = (NS_PER_S + ns / 2).checked_div(ns).unwrap_or(0);
        if hz != 0 && hz_period(hz) == ns {
            // Truncation is all that can go wrong, and a truncated name is what the caller
            // wants.
            let _ = write!(w, "{prefix}-{hz}");
            return w.len;
        }
    }
    let (n, unit) = match ns {
        _ if ns != 0 && ns % 1_000_000_000 == 0 => (ns / 1_000_000_000, "s"),
        _ if ns != 0 && ns % 1_000_000 == 0 => (ns / 1_000_000, "ms"),
        _ if ns != 0 && ns % 1_000 == 0 => (ns / 1_000, "us"),
        _ => (ns, "ns"),
    };
    // Truncation is all that can go wrong, and a truncated name is what the caller wants.
    let _ = write!(w, "{prefix}-{n}{unit}");
    w.len
}

/// `fmt::Write` into a byte slice, truncating.
struct SliceWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl core::fmt::Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let rest = self.buf.get_mut(self.len..).unwrap_or_default();
        self.len += copy(rest, s.as_bytes());
        Ok(())
    }
}

/// Where the value of an argument built-in comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgSource {
    /// Argument `n` (0-based) of the probed function, per the calling convention.
    Arg(u32),
    /// The probed function's return value.
    Retval,
    /// Nothing: 0. On return probes `arg0` is, in DTrace, the offset of the return
    /// instruction in the function, which a kretprobe does not know.
    Zero,
    /// Argument `n` (0-based) of the system call, from the user registers it was made with.
    SyscallArg(u32),
    /// The kernel PC the profile interrupt interrupted, or 0 if it interrupted user mode.
    KernelPc,
    /// The user PC the profile interrupt interrupted, or 0 if it interrupted the kernel.
    UserPc,
    /// The address of the tracepoint event's record (its format file's layout).
    Record,
    /// A pid return probe's `arg0`: the returning instruction's offset in its function
    /// (the slot's `roff`).
    ReturnOffset,
    /// Operand `n` (0-based) of a USDT probe (the slot's argument specification).
    UsdtArg(u32),
}

/// Where `b` (`arg0..arg9` or `retval`) comes from on a probe of `kind`; `None` for other
/// built-ins. As DTrace's fbt: on entry `argN` are the arguments; on return `arg0` is the
/// return offset (unknown here: 0) and `arg1` and `retval` the return value. As DTrace's
/// syscall provider: on entry `argN` are the call's arguments, on return `arg0`, `arg1` and
/// `retval` its return value. As DTrace's profile provider: `arg0` the kernel PC, `arg1` the
/// user PC, the other 0. On a tracepoint `arg0` is the address of the event's record, which
/// `args->FIELD` reads.
pub fn arg_source(kind: ProbeKind, b: Builtin) -> Option<ArgSource> {
    let n = match b {
        Builtin::Arg0 => 0,
        Builtin::Arg1 => 1,
        Builtin::Arg2 => 2,
        Builtin::Arg3 => 3,
        Builtin::Arg4 => 4,
        Builtin::Arg5 => 5,
        Builtin::Arg6 => 6,
        Builtin::Arg7 => 7,
        Builtin::Arg8 => 8,
        Builtin::Arg9 => 9,
        Builtin::Retval => {
            return Some(match kind {
                ProbeKind::FbtReturn | ProbeKind::SyscallReturn | ProbeKind::PidReturn => {
                    ArgSource::Retval
                }
                _ => ArgSource::Zero,
            })
        }
        _ => return None,
    };
    Some(match kind {
        // ERROR's arguments describe the fault: the environment holds them.
        ProbeKind::FbtEntry | ProbeKind::Error => ArgSource::Arg(n),
        ProbeKind::FbtReturn if n == 1 => ArgSource::Retval,
        ProbeKind::SyscallEntry => ArgSource::SyscallArg(n),
        ProbeKind::SyscallReturn if n <= 1 => ArgSource::Retval,
        ProbeKind::Profile if n == 0 => ArgSource::KernelPc,
        ProbeKind::Profile if n == 1 => ArgSource::UserPc,
        ProbeKind::Tracepoint if n == 0 => ArgSource::Record,
        // The System V x86-64 integer argument registers, as the kernel's own.
        ProbeKind::PidEntry | ProbeKind::PidOffset if n < 6 => ArgSource::Arg(n),
        ProbeKind::PidReturn if n == 0 => ArgSource::ReturnOffset,
        ProbeKind::PidReturn if n == 1 => ArgSource::Retval,
        ProbeKind::Usdt if (n as usize) < crate::abi::USDT_MAX_ARGS => ArgSource::UsdtArg(n),
        _ => ArgSource::Zero,
    })
}

/// `errno` on a probe of `kind` whose return value is `retval`: on a system call's return,
/// the error a failed call returns as `-errno` (`-4095..=-1`, the kernel's `IS_ERR_VALUE`
/// range), else 0; 0 on every other probe. For the `errno` built-in.
pub fn errno(kind: ProbeKind, retval: u64) -> u64 {
    let r = retval as i64;
    match kind {
        ProbeKind::SyscallReturn if (-4095..0).contains(&r) => r.unsigned_abs(),
        _ => 0,
    }
}

/// Whether descriptions of `kind` are attached through LOAD's attach list (one probe per
/// function the tool expanded them to) rather than one probe per description.
pub fn by_attach_list(kind: ProbeKind) -> bool {
    matches!(kind, ProbeKind::FbtEntry | ProbeKind::FbtReturn) || is_user(kind)
}

/// The enabled probe id (`id`, and the probe number of records and of PROBES) of
/// description `desc` when it is not attached by the attach list.
///
/// LOAD numbers the probes it makes from 0: first one per attach-list entry, in the order of
/// the list (the tool lists the fbt descriptions in image order, each expanded to its
/// functions), then one per uattach entry (user-space probes, likewise), then one per other
/// description in image order. So an attached probe's id is its index in the two lists,
/// and this is `nattach` (the entries of both lists) plus the other descriptions before
/// `desc`. `None` if `desc` is out of range or attached by a list.
pub fn other_probe_id(image: &Image<'_>, nattach: usize, desc: usize) -> Option<u32> {
    if by_attach_list(image.probe(desc)?.kind) {
        return None;
    }
    let before = (0..desc)
        .filter_map(|d| image.probe(d))
        .filter(|p| !by_attach_list(p.kind))
        .count();
    u32::try_from(nattach + before).ok()
}

/// The clauses that run when a probe of description `desc` fires, in clause order: those
/// whose descriptions include `desc`.
pub fn clauses_of<'i>(image: &'i Image<'_>, desc: u32) -> impl Iterator<Item = u32> + 'i {
    (0..image.clause_count()).filter_map(move |c| in_desc(image, c, desc).then_some(c as u32))
}

/// Whether clause `c` of `image` belongs to probe description `desc`.
fn in_desc(image: &Image<'_>, c: usize, desc: u32) -> bool {
    image
        .clause(c)
        .is_some_and(|cd| desc >= cd.probe_first && desc - cd.probe_first < cd.probe_count)
}

/// An [`Env`] that also hears about clauses: which one runs, and which one faulted.
pub trait ClauseEnv: Env {
    /// Clause `clause` is about to run (its predicate, if any, first).
    fn enter_clause(&mut self, _clause: u32) {}

    /// Clause `clause` faulted with `fault`; the rest of it does not run.
    fn fault(&mut self, clause: u32, fault: Fault);

    /// Where ERROR's `arg0..arg5` wait while the clauses of a fault run: the environment's
    /// per-CPU room, so that its `arg0..arg5` built-ins read them from there. The faulting
    /// clause is over by then and ERROR's clauses do not fire ERROR again, so one set per
    /// CPU is enough.
    fn error_args(&mut self) -> &mut [u64; 6];

    /// Switches to ERROR description `desc`, whose `arg0..arg5` are in
    /// [`ClauseEnv::error_args`], for the clauses of a fault; false when ERROR must not fire
    /// (a fault in an ERROR clause: no recursion).
    fn enter_error(&mut self, desc: u32) -> bool;

    /// Back to the faulting probe after [`ClauseEnv::enter_error`].
    fn leave_error(&mut self);
}

/// DTrace's fault types (`DTRACEFLT_*`), ERROR's `arg4`; the D compiler names each of
/// [`flt::ALL`] as a constant.
pub mod flt {
    /// An unknown fault.
    pub const UNKNOWN: u64 = 0;
    /// A bad address (also an invalid string reference).
    pub const BADADDR: u64 = 1;
    /// A misaligned access (never raised here: x86-64 loads any alignment).
    pub const BADALIGN: u64 = 2;
    /// An illegal operation.
    pub const ILLOP: u64 = 3;
    /// Division by zero.
    pub const DIVZERO: u64 = 4;
    /// Out of scratch space.
    pub const NOSCRATCH: u64 = 5;
    /// An illegal kernel access (never raised here).
    pub const KPRIV: u64 = 6;
    /// An illegal user access (never raised here).
    pub const UPRIV: u64 = 7;
    /// Tuple stack overflow.
    pub const TUPOFLOW: u64 = 8;
    /// A bad stack (never raised here).
    pub const BADSTACK: u64 = 9;
    /// A bad size (never raised here).
    pub const BADSIZE: u64 = 10;
    /// An index out of bounds (Oracle DTrace's; here such a subscript is `ILLOP`).
    pub const BADINDEX: u64 = 11;
    /// A fault in probe processing libraries (never raised here).
    pub const LIBRARY: u64 = 1000;

    /// Each fault type with its name after `DTRACEFLT_`.
    pub const ALL: &[(&str, u64)] = &[
        ("UNKNOWN", UNKNOWN),
        ("BADADDR", BADADDR),
        ("BADALIGN", BADALIGN),
        ("ILLOP", ILLOP),
        ("DIVZERO", DIVZERO),
        ("NOSCRATCH", NOSCRATCH),
        ("KPRIV", KPRIV),
        ("UPRIV", UPRIV),
        ("TUPOFLOW", TUPOFLOW),
        ("BADSTACK", BADSTACK),
        ("BADSIZE", BADSIZE),
        ("BADINDEX", BADINDEX),
        ("LIBRARY", LIBRARY),
    ];
}

/// DTrace's fault type and faulting address (`arg4`, `arg5` of ERROR) of a fault.
pub fn fault_type(k: &FaultKind) -> (u64, u64) {
    match *k {
        FaultKind::BadAddr(a) => (flt::BADADDR, a),
        FaultKind::BadString => (flt::BADADDR, 0),
        // An array subscript out of bounds: DTrace has no type of its own for it.
        FaultKind::BadIndex(i) => (flt::ILLOP, i),
        FaultKind::DivZero => (flt::DIVZERO, 0),
        FaultKind::ScratchExhausted => (flt::NOSCRATCH, 0),
        FaultKind::TupleOverflow => (flt::TUPOFLOW, 0),
        FaultKind::KeyMismatch | FaultKind::Invalid | FaultKind::IllegalOp => (flt::ILLOP, 0),
    }
}

/// The action index of a fault at `pc` (ERROR's `arg2`): 0 in a predicate, else one more
/// than the statements the clause completed before it, a statement being complete at its
/// store, record or aggregation update.
pub fn action_index(code: &crate::action::Code<'_>, pc: u32, in_predicate: bool) -> u64 {
    if in_predicate {
        return 0;
    }
    let done = (0..pc as usize)
        .filter_map(|i| code.word(i))
        .filter(|&w| {
            Op::from_u8(Insn::decode(w).op).is_some_and(|op| {
                op.is_action() || matches!(op, Op::Stls | Op::Stgs | Op::Stts | Op::Stgaa)
            })
        })
        .count();
    done as u64 + 1
}

/// DTrace's enabled probe IDs (EPIDs: the `epid` built-in, ERROR's `arg1`, the runtime
/// error line) are numbered here, once for the kernel and the tool.
///
/// There is one EPID per probe (LOAD's slot) and clause that runs on it, numbered densely
/// from 1 in program order, as dtrace numbers its enablings: description by description in
/// image order (the compiler gives each clause its own descriptions, in program order),
/// then the description's slots in slot order, then, on one slot, the description's
/// clauses in the order they run ([`clauses_of`]). So a slot holds the EPIDs
/// `base + 1 ..= base + n`, `n` the clauses of its description `d` and `base` the EPIDs of
/// the descriptions before `d` plus `n` for each slot of `d` before it. BEGIN, END, ERROR
/// and every other probe count like fbt's; a clause not on a slot's description has no EPID
/// there.
///
/// `EpidBases` gives each slot its base, in storage the caller provides (one
/// [`DescEpids`] per description: the core does not allocate).
#[derive(Debug)]
pub struct EpidBases<'a> {
    descs: &'a mut [DescEpids],
}

/// One description's part of [`EpidBases`].
#[derive(Clone, Copy, Debug, Default)]
pub struct DescEpids {
    /// While counting, the description's slots; then the base of its next slot.
    next: u32,
    /// Its clauses: what each of its slots takes.
    nclauses: u32,
}

impl<'a> EpidBases<'a> {
    /// Numbers `image`'s EPIDs over slots on descriptions `slot_descs` (each slot's
    /// description, in slot order; a description out of range has no EPIDs), in `descs`,
    /// one per description of `image` (its contents are overwritten).
    pub fn new(
        image: &Image<'_>,
        descs: &'a mut [DescEpids],
        slot_descs: impl IntoIterator<Item = u32>,
    ) -> Self {
        for (d, e) in descs.iter_mut().enumerate() {
            *e = DescEpids {
                next: 0,
                nclauses: clauses_of(image, d as u32).count() as u32,
            };
        }
        for d in slot_descs {
            if let Some(e) = descs.get_mut(d as usize) {
                e.next = e.next.saturating_add(1);
            }
        }
        let mut base = 0u32;
        for e in descs.iter_mut() {
            let n = e.next.saturating_mul(e.nclauses);
            e.next = base;
            base = base.saturating_add(n);
        }
        EpidBases { descs }
    }

    /// The base of the next slot of description `desc`, a description's slots being taken in
    /// slot order; 0 for a description out of range.
    pub fn next(&mut self, desc: u32) -> u32 {
        let Some(e) = self.descs.get_mut(desc as usize) else {
            return 0;
        };
        let base = e.next;
        e.next = e.next.saturating_add(e.nclauses);
        base
    }
}

/// The base of each slot in turn, the slots being on descriptions `slot_descs` in slot
/// order ([`EpidBases`], in `descs`, one per description of `image`).
pub fn epid_bases<'a, I>(
    image: &Image<'_>,
    descs: &'a mut [DescEpids],
    slot_descs: I,
) -> impl Iterator<Item = u32> + 'a
where
    I: IntoIterator<Item = u32> + Clone + 'a,
{
    let mut bases = EpidBases::new(image, descs, slot_descs.clone());
    slot_descs.into_iter().map(move |d| bases.next(d))
}

/// The EPID of clause `clause` on a slot of base `base` ([`EpidBases`]) whose description
/// runs the clauses `order` ([`clauses_of`]); 0, DTrace's "no EPID", if `clause` is not
/// one of them.
pub fn epid(base: u32, order: impl IntoIterator<Item = u32>, clause: u32) -> u64 {
    match order.into_iter().position(|c| c == clause) {
        Some(i) => base as u64 + i as u64 + 1,
        None => 0,
    }
}

/// Runs one firing: for each clause index of `order` (an index of `clauses`), the predicate,
/// then the actions if it held. A fault abandons that clause only (after
/// [`ClauseEnv::fault`]), fires every ERROR description, and the next clause runs, as
/// DTrace does.
// Inlined into the kernel's handlers: one frame less on the probe's stack.
#[inline(always)]
pub fn run_clauses<E: ClauseEnv>(
    vm: &mut Vm<'_>,
    image: &Image<'_>,
    clauses: &[VerifiedClause<'_>],
    order: impl IntoIterator<Item = u32>,
    env: &mut E,
) {
    let mut order = order.into_iter();
    // ERROR's clauses run from this one loop, not from a call below it, so that probe
    // context never stacks two interpreter frames.
    let mut error: Option<ErrorWalk> = None;
    loop {
        let (c, in_error) = match error.as_mut() {
            Some(w) => match w.next(image, env) {
                Some(c) => (c, true),
                None => {
                    error = None;
                    continue;
                }
            },
            None => match order.next() {
                Some(c) => (c, false),
                None => return,
            },
        };
        match run_clause(vm, image, clauses, env, c) {
            Ok(()) => {}
            Err((f, in_pred)) => {
                if on_fault(image, clauses, env, c, &f, in_pred, in_error) {
                    error = Some(ErrorWalk {
                        desc: 0,
                        clause: 0,
                        entered: false,
                    });
                }
            }
        }
    }
}

/// Where a firing is in the ERROR clauses of one fault: description `desc` (entered through
/// [`ClauseEnv::enter_error`] when `entered`), its clauses from index `clause` on. ERROR's
/// arguments wait in the environment's room ([`ClauseEnv::error_args`]).
struct ErrorWalk {
    desc: u32,
    clause: u32,
    entered: bool,
}

impl ErrorWalk {
    /// The next ERROR clause to run, entering and leaving the descriptions in turn; `None`
    /// when there is none left or ERROR must not fire.
    fn next<E: ClauseEnv>(&mut self, image: &Image<'_>, env: &mut E) -> Option<u32> {
        let ndesc = image.probe_count() as u32;
        loop {
            if self.entered {
                while (self.clause as usize) < image.clause_count() {
                    let c = self.clause;
                    self.clause += 1;
                    if in_desc(image, c as usize, self.desc) {
                        return Some(c);
                    }
                }
                env.leave_error();
                self.entered = false;
                self.desc += 1;
            }
            while self.desc < ndesc {
                if image.probe(self.desc as usize).map(|p| p.kind) == Some(ProbeKind::Error) {
                    break;
                }
                self.desc += 1;
            }
            if self.desc >= ndesc || !env.enter_error(self.desc) {
                return None;
            }
            self.entered = true;
            self.clause = 0;
        }
    }
}

/// Runs clause `c`: its predicate, then its actions if the predicate held. A fault comes
/// back with whether it was in the predicate.
// Inlined into `run_clauses`: one frame less on the probe's stack.
#[inline(always)]
fn run_clause<E: ClauseEnv>(
    vm: &mut Vm<'_>,
    image: &Image<'_>,
    clauses: &[VerifiedClause<'_>],
    env: &mut E,
    c: u32,
) -> Result<(), (Fault, bool)> {
    let Some(clause) = clauses.get(c as usize) else {
        return Ok(());
    };
    // A constant predicate is known at LOAD: a false one (`/0/`) skips the clause before
    // anything is set up, a true one need not run.
    let mut pred = clause.pred.as_ref();
    match pred.map(|p| p.constant()) {
        Some(Some(0)) => return Ok(()),
        Some(Some(_)) => pred = None,
        _ => {}
    }
    env.enter_clause(c);
    // Without the interpreter's set-up and its fault handling: a shape never faults.
    if vm.run_shapes(pred, &clause.act, image, env).is_some() {
        return Ok(());
    }
    vm.begin_clause();
    // The predicate, then the actions, through one call of the interpreter: `run` is
    // inlined into the probe's frame, once.
    let mut in_pred = pred.is_some();
    let mut prog = pred.unwrap_or(&clause.act);
    loop {
        match vm.run(prog, image, env) {
            Ok(0) if in_pred => return Ok(()),
            Ok(_) if in_pred => {
                in_pred = false;
                prog = &clause.act;
            }
            Ok(_) => return Ok(()),
            Err(f) => return Err((f, in_pred)),
        }
    }
}

/// Reports a fault of clause `c` (in its predicate when `in_pred`, else in its actions) and,
/// unless the clause was one of ERROR's (`in_error`: ERROR does not fire again), sets
/// [`ClauseEnv::error_args`] to ERROR's arguments for it, DTrace's: `arg1` the enabled probe
/// id, `arg2` the action index, `arg3` the instruction, `arg4` the fault type, `arg5` the
/// address. Returns whether ERROR has clauses to run.
// Out of line: its frame is not stacked under the interpreter's.
#[inline(never)]
fn on_fault<E: ClauseEnv>(
    image: &Image<'_>,
    clauses: &[VerifiedClause<'_>],
    env: &mut E,
    c: u32,
    f: &Fault,
    in_pred: bool,
    in_error: bool,
) -> bool {
    env.fault(c, *f);
    if in_error {
        return false;
    }
    let Some(clause) = clauses.get(c as usize) else {
        return false;
    };
    let code = match (in_pred, &clause.pred) {
        (true, Some(p)) => p.code(),
        (true, None) => return false,
        (false, _) => clause.act.code(),
    };
    // Without an ERROR description nothing reads them.
    if !(0..image.probe_count()).any(|d| image.probe(d).map(|p| p.kind) == Some(ProbeKind::Error)) {
        return false;
    }
    let (ty, addr) = fault_type(&f.kind);
    let epid = env.builtin(Builtin::Epid);
    *env.error_args() = [
        0,
        epid,
        action_index(&code, f.pc, in_pred),
        f.pc as u64,
        ty,
        addr,
    ];
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(kind: ProbeKind, ns: u64) -> String {
        let mut b = [0u8; 32];
        let n = name(kind, ns, &mut b);
        String::from_utf8(b[..n].to_vec()).unwrap()
    }

    #[test]
    fn tick_names_as_written() {
        assert_eq!(name_of(ProbeKind::Tick, 1_000_000_000), "tick-1s");
        assert_eq!(name_of(ProbeKind::Tick, 10_000_000), "tick-10ms");
        assert_eq!(name_of(ProbeKind::Tick, 1_500_000_000), "tick-1500ms");
        assert_eq!(name_of(ProbeKind::Tick, 250_000), "tick-250us");
        assert_eq!(name_of(ProbeKind::Tick, 7), "tick-7ns");
        assert_eq!(name_of(ProbeKind::FbtReturn, 0), "return");
        let mut small = [0u8; 6];
        assert_eq!(name(ProbeKind::Tick, 1_000_000_000, &mut small), 6);
        assert_eq!(&small, b"tick-1");
    }

    #[test]
    fn return_probes_follow_fbt() {
        use ArgSource::*;
        let r = ProbeKind::FbtReturn;
        assert_eq!(arg_source(r, Builtin::Arg0), Some(Zero));
        assert_eq!(arg_source(r, Builtin::Arg1), Some(Retval));
        assert_eq!(arg_source(r, Builtin::Retval), Some(Retval));
        assert_eq!(arg_source(ProbeKind::FbtEntry, Builtin::Arg3), Some(Arg(3)));
        assert_eq!(arg_source(ProbeKind::FbtEntry, Builtin::Retval), Some(Zero));
        assert_eq!(arg_source(ProbeKind::Tick, Builtin::Arg0), Some(Zero));
        assert_eq!(arg_source(ProbeKind::FbtEntry, Builtin::Pid), None);
    }

    #[test]
    fn syscall_and_profile_probes() {
        use ArgSource::*;
        let (e, r, p) = (
            ProbeKind::SyscallEntry,
            ProbeKind::SyscallReturn,
            ProbeKind::Profile,
        );
        assert_eq!(arg_source(e, Builtin::Arg3), Some(SyscallArg(3)));
        assert_eq!(arg_source(e, Builtin::Retval), Some(Zero));
        assert_eq!(arg_source(r, Builtin::Arg0), Some(Retval));
        assert_eq!(arg_source(r, Builtin::Arg1), Some(Retval));
        assert_eq!(arg_source(r, Builtin::Arg2), Some(Zero));
        assert_eq!(arg_source(p, Builtin::Arg0), Some(KernelPc));
        assert_eq!(arg_source(p, Builtin::Arg1), Some(UserPc));
        assert_eq!(arg_source(p, Builtin::Arg2), Some(Zero));
        assert_eq!(provider(e), b"syscall");
        assert_eq!(provider(p), b"profile");
        assert_eq!(module(r), b"vmlinux");
        assert_eq!(name_of(r, 0), "return");
        assert_eq!(name_of(p, hz_period(997)), "profile-997");
        assert_eq!(name_of(p, 1_000_000), "profile-1ms");
        assert_eq!(name_of(p, hz_period(100)), "profile-10ms");
        assert_eq!(name_of(ProbeKind::Tick, hz_period(997)), "tick-1003009ns");
    }

    #[test]
    fn errno_of_failed_system_calls() {
        let r = ProbeKind::SyscallReturn;
        assert_eq!(errno(r, (-2i64) as u64), 2);
        assert_eq!(errno(r, (-4095i64) as u64), 4095);
        assert_eq!(errno(r, (-4096i64) as u64), 0);
        assert_eq!(errno(r, 5), 0);
        assert_eq!(errno(ProbeKind::FbtReturn, (-2i64) as u64), 0);
    }

    #[test]
    fn names_of_the_core_kernel() {
        assert_eq!(module(ProbeKind::FbtEntry), b"vmlinux");
        assert_eq!(module(ProbeKind::Begin), b"");
        assert_eq!(provider(ProbeKind::Tick), b"profile");
        assert_eq!(provider(ProbeKind::End), b"dtrace");
    }
}
