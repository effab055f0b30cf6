// SPDX-License-Identifier: GPL-2.0

//! Probe context: everything that runs with interrupts off.
//!
//! Like the "probe context" group of illumos `dtrace.c`, this file is the one room for code
//! that runs when a probe fires: [`fire`] (called through the session's [`Handler`] by
//! `sys::kprobe` for kprobes, kretprobes and ticks, by `sys::provider` for profile and
//! tracepoint probes, by `sys::uprobe` for user-space probes (pid and USDT), and through the session's [`SyscallHandler`] for system calls),
//! `fire_many` (for the entry probes of one function, which the ftrace set hits at once),
//! BEGIN and END ([`Session::fire_special`], run through `sys::xcall::as_action`), the
//! recursion counter, and [`KernelEnv`], what the interpreter sees of the kernel.
//!
//! The rules of probe context, which everything here and everything it calls keeps:
//!
//! - it never sleeps and never waits for another CPU;
//! - it never allocates: scratch, buffers and dynamic memory were sized at LOAD;
//! - it takes no lock, except the dynamic variables' per-bucket unlink lock (a bounded spin
//!   in `dynvar`);
//! - it never faults: kernel memory is read through the nofault accessors
//!   (`sys::task::read_kernel`), and an index that could be out of range is a `.get()` or
//!   carries a `// PANIC:` note saying why it can't be;
//! - it runs in bounded time: the verifier admits only forward jumps and bounded loops;
//! - it keeps a small stack: buffers live in the per-CPU state, not on the stack.
//!
//! What it may call: the interpreter (`action::Vm`), the record writer (`buffer::write`),
//! the aggregation buffer (`agg::AggWriter`), the dynamic variables (`glue::dynmem`), PT's
//! `ptwrite`, the per-CPU state through the [`ActionCtx`] token, atomics, and the
//! interrupt-safe readers of `sys::cpu` and `sys::task`.
//!
//! The session's per-CPU counters are bumped without a locked instruction: only their CPU
//! writes them, with interrupts off.

use crate::action::{self, Builtin, Env, Key, Record, RecordKind, Vm, AGG_NARGS};
use crate::agg::{self, AggWriter, IntKey};
use crate::buffer;
use crate::diag;
use crate::glue::pt::PtCpu;
use crate::glue::session::{add, EnvCpu, ProbeSlot, Session, STACKS_SENT};
use crate::glue::spec::{Lost, Origin, Refused};
use crate::limits;
use crate::probe::{self, ArgSource, ClauseEnv};
use crate::program::ProbeKind;
use crate::stack;
use crate::sys::cpu;
use crate::sys::kprobe::{Handler, Regs, StackFrom};
use crate::sys::percpu::ActionCtx;
use crate::sys::provider::SyscallHandler;
use crate::sys::task;
use crate::sys::xcall;
use crate::uprobe::{self, UsdtFault};
use crate::ustack::{self, UserRegs};
use core::sync::atomic::{AtomicU64, Ordering};

/// The current task's user memory as a frame reader (nofault reads).
struct TaskFrames;

impl ustack::FrameReader for TaskFrames {
    fn read(&mut self, addr: u64, out: &mut [u8; 16]) -> bool {
        task::read_user(addr, out)
    }
}

/// Where `stack()` walks from for a probe of `kind`: the registers of fbt and profile probes
/// are the probed context's own. (User-space probes have no kernel stack: `kernel_stack`.)
fn stack_from(kind: ProbeKind) -> StackFrom {
    match kind {
        ProbeKind::FbtEntry => StackFrom::Entry,
        ProbeKind::FbtReturn | ProbeKind::Profile => StackFrom::Regs,
        _ => StackFrom::Here,
    }
}

/// Adds one to a counter that only this CPU writes, without a locked instruction.
fn bump(c: &AtomicU64) {
    add(c, 1);
}

/// The session's probes (kprobes, kretprobes, ticks) call it through `sys::kprobe`.
impl Handler for Session {
    // A return probe is known by its slot's kind. Inlined into `sys::kprobe`'s trampoline:
    // one frame less on the probe's stack.
    #[inline(always)]
    fn fire(&self, slot: u32, ctx: &mut ActionCtx, regs: &Regs, _is_return: bool) {
        if let Some(sl) = self.slots.get(slot as usize) {
            fire(self, sl, ctx, regs);
        }
    }

    // Entry probes of the program on one function, hit at once: one firing runs them all.
    #[inline(always)]
    fn fire_many(&self, slots: &[u32], ctx: &mut ActionCtx, regs: &Regs) {
        fire_many(self, slots, ctx, regs);
    }

    /// Counts a hit that was not run because an action was running on this CPU.
    fn recursion(&self, slot: u32) {
        let cpu = cpu::this_cpu();
        if let Some(k) = self.counter(cpu, slot) {
            k.recursion.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(pt) = self.pt.as_deref() {
            pt.note_missed(cpu);
        }
    }
}

/// The syscall provider's hooks call it through `sys::provider` for every system call;
/// [`SyscallSlots`](crate::glue::provider::SyscallSlots) says which probes trace it.
impl SyscallHandler for Session {
    // Inlined into the shim's trampoline: the syscall fire path is then no deeper on the
    // stack than a kprobe's (scripts/stackcheck.py).
    #[inline(always)]
    fn syscall(&self, nr: u32, ctx: &mut ActionCtx, regs: &Regs, is_return: bool) {
        for &slot in self.syscalls.of(nr, is_return) {
            if let Some(sl) = self.slots.get(slot as usize) {
                fire(self, sl, ctx, regs);
            }
        }
    }

    fn syscall_recursion(&self, nr: u32, is_return: bool) {
        for &slot in self.syscalls.of(nr, is_return) {
            self.recursion(slot);
        }
    }
}

impl Session {
    /// Runs the BEGIN or END clauses on this CPU, as a probe would.
    pub(crate) fn fire_special(&self, kind: ProbeKind) {
        for sl in self.slots.iter().filter(|s| s.kind == kind) {
            xcall::as_action(|ctx| fire(self, sl, ctx, &Regs::none()));
        }
    }

    /// Settles `cpu`'s committed and discarded speculations into its principal buffer in
    /// `room` (on `cpu`, interrupts off: at a commit or discard, or in SNAPSHOT's
    /// cross-call), counting the records written and dropped as the buffer's own.
    #[inline]
    pub(super) fn settle_specs(&self, cpu: u32, room: &mut EnvCpu) {
        let (Some(specs), Some(sc)) = (self.specs.as_ref(), room.spec.as_mut()) else {
            return;
        };
        let pbuf = room.pbuf.active();
        let (written, dropped, filled) = specs.settle(cpu, sc, pbuf, &mut room.pbuf_cur);
        if filled {
            bump(&self.filled);
        }
        if let Some(c) = self.cpu_counters.get(cpu as usize) {
            c.count_records(written, dropped);
        }
    }
}

/// Counts a hit of `slot` on `cpu` and returns its clauses, unless there are none to run.
#[inline(always)]
fn admit<'a>(s: &'a Session, slot: &ProbeSlot, cpu: u32) -> Option<&'a [u32]> {
    if let Some(k) = s.counter(cpu, slot.id) {
        bump(&k.fired);
    }
    // After an exit() record nothing but END runs: DTrace's consumer stops at the exit
    // record, so later records and aggregation updates would only be thrown away.
    if slot.kind != ProbeKind::End && s.exited.load(Ordering::Acquire) {
        return None;
    }
    let order = s.clauses_of(slot);
    (!order.is_empty()).then_some(order)
}

/// The first slot of `rest` with clauses to run (counting the hits of those before it),
/// with its clauses; `rest` is left after it.
#[inline(always)]
fn next_admitted<'a>(
    s: &'a Session,
    rest: &mut &[u32],
    cpu: u32,
) -> Option<(&'a ProbeSlot, &'a [u32])> {
    while let Some((&id, r)) = rest.split_first() {
        *rest = r;
        if let Some(sl) = s.slots.get(id as usize) {
            if let Some(order) = admit(s, sl, cpu) {
                return Some((sl, order));
            }
        }
    }
    None
}

/// A firing's interpreter and environment on this CPU, for `slot` first.
#[inline(always)]
fn firing<'a>(
    s: &'a Session,
    slot: &'a ProbeSlot,
    ctx: &'a mut ActionCtx,
    regs: &'a Regs,
) -> Option<(Vm<'a>, KernelEnv<'a>)> {
    let cpu = ctx.cpu();
    let (st, pt) = match s.pt.as_deref() {
        Some(pt) => {
            let (st, c) = s.cpus.local_with(pt.cpus(), ctx)?;
            (st, Some(c))
        }
        None => (s.cpus.local(ctx), None),
    };
    let mut vm = Vm::with(&mut st.vm, &mut st.scratch, &s.vm).ok()?;
    if slot.kind == ProbeKind::Usdt {
        // Its arguments may fault (`builtin_fallible`): clauses that read them run in the
        // interpreter.
        vm.with_fallible_args();
    }
    st.room.ts = 0;
    let env = KernelEnv {
        s,
        slot,
        regs,
        cpu,
        room: &mut st.room,
        pt,
        faulting: None,
        clause: 0,
    };
    Some((vm, env))
}

/// Runs the clauses of `slot`'s probe description on session `s`.
// Inlined into the handlers that call it: one frame less on the probe's stack.
#[inline(always)]
pub(super) fn fire(s: &Session, slot: &ProbeSlot, ctx: &mut ActionCtx, regs: &Regs) {
    let Some(order) = admit(s, slot, ctx.cpu()) else {
        return;
    };
    let Some((mut vm, mut env)) = firing(s, slot, ctx, regs) else {
        return;
    };
    run(s, &mut vm, &mut env, order);
}

/// Runs the clauses `order` of the environment's slot.
#[inline(always)]
fn run(s: &Session, vm: &mut Vm<'_>, env: &mut KernelEnv<'_>, order: &[u32]) {
    probe::run_clauses(
        vm,
        s.prog.image(),
        s.prog.clauses(),
        order.iter().copied(),
        env,
    );
}

/// Runs the clauses of the slots `ids` names, in their order: entry probes of the program
/// on one function, hit at once. As DTrace runs every enabling of a probe in one firing,
/// the set-up (the CPU's state, the interpreter and the environment) is made once for them
/// all.
// Inlined into the handler, as `fire`.
#[inline(always)]
fn fire_many(s: &Session, ids: &[u32], ctx: &mut ActionCtx, regs: &Regs) {
    let mut rest = ids;
    let Some((slot, mut order)) = next_admitted(s, &mut rest, ctx.cpu()) else {
        return;
    };
    let Some((mut vm, mut env)) = firing(s, slot, ctx, regs) else {
        return;
    };
    loop {
        run(s, &mut vm, &mut env, order);
        let Some((sl, o)) = next_admitted(s, &mut rest, env.cpu) else {
            return;
        };
        env.slot = sl;
        // Each enabling reads the clock afresh, as each of a probe's ECBs does in DTrace:
        // the consumer sorts records by (timestamp, CPU), and a later clause's record
        // (a printf after a commit) must not tie with an earlier one's.
        env.room.ts = 0;
        order = o;
    }
}

/// What the interpreter sees of the kernel during one firing.
struct KernelEnv<'a> {
    s: &'a Session,
    slot: &'a ProbeSlot,
    regs: &'a Regs,
    cpu: u32,
    /// This CPU's buffers and room for what a firing keeps off the stack.
    room: &'a mut EnvCpu,
    /// This CPU's PT state, when the session traces with PT (`s.pt`).
    pt: Option<&'a mut PtCpu>,
    /// While ERROR's clauses run: the faulting probe's slot, `slot` being ERROR's (whose
    /// `arg0..arg5` are then in `room.err_args`).
    faulting: Option<&'a ProbeSlot>,
    /// The clause running, written into every record's kind word.
    clause: u32,
}

impl<'a> KernelEnv<'a> {
    /// This CPU's active aggregation buffer and aggregation `id`'s function.
    #[inline(always)]
    fn agg_buf(&mut self, id: u32) -> Option<(AggWriter<'_>, &'a agg::AggFunc)> {
        let func = self.s.agg_funcs.get(id as usize)?;
        // LOAD formatted both halves, and only updates and the consumer's resets write
        // them: the writer needs none of `AggBuffer::attach`'s header checks.
        let buf = AggWriter::new(self.room.agg.as_mut()?.active()).ok()?;
        Some((buf, func))
    }

    /// The firing's timestamp; the clock is read only by programs that use it.
    fn ts(&mut self) -> u64 {
        let r = &mut *self.room;
        if r.ts == 0 {
            r.ts = cpu::mono_fast_ns();
        }
        r.ts
    }

    fn write(&mut self, kind: u32, id: u32, data: &[u8]) -> bool {
        let ts = self.ts();
        let kind = buffer::with_clause(kind, self.clause);
        self.put(kind, id, ts, data)
    }

    /// Writes a record to this CPU's principal buffer under its policy (END's records may
    /// use the room a fill buffer keeps for them) and counts it.
    #[inline(never)]
    fn put(&mut self, kind: u32, id: u32, ts: u64, data: &[u8]) -> bool {
        let hdr = self.header(kind, id, ts);
        let end = self.slot.kind == ProbeKind::End;
        let r = &mut *self.room;
        put_record(
            self.s,
            self.cpu,
            &mut r.pbuf_cur,
            r.pbuf.active(),
            end,
            &hdr,
            data,
        )
    }

    /// The header of a record of this firing.
    fn header(&self, kind: u32, id: u32, ts: u64) -> buffer::Header {
        buffer::Header {
            size: 0,
            kind,
            probe: self.slot.id,
            id,
            timestamp: ts,
        }
    }
}

/// Writes a record to CPU `cpu`'s principal buffer `buf` under its policy (END's records,
/// `end`, may use the room a fill buffer keeps for them) and counts it; whether it was
/// written. The cursor and the buffer come apart so that the data may lie elsewhere in the
/// CPU's room (a stack definition).
fn put_record(
    s: &Session,
    cpu: u32,
    cur: &mut buffer::Cursor,
    buf: &mut [u8],
    end: bool,
    hdr: &buffer::Header,
    data: &[u8],
) -> bool {
    let w = cur.write(buf, end, hdr, data);
    if w == buffer::Written::Filled {
        bump(&s.filled);
    }
    let ok = w == buffer::Written::Ok;
    if let Some(c) = s.cpu_counters.get(cpu as usize) {
        bump(if ok { &c.records } else { &c.drops });
    }
    ok
}

impl ClauseEnv for KernelEnv<'_> {
    fn enter_clause(&mut self, clause: u32) {
        self.clause = clause;
    }

    /// Counts a fault and records where it happened (clause, instruction, what, address).
    fn fault(&mut self, clause: u32, f: action::Fault) {
        if let Some(k) = self.s.counter(self.cpu, self.slot.id) {
            bump(&k.errors);
        }
        let (code, addr) = diag::fault_code(&f.kind);
        let mut data = [0u8; 16];
        let fields = clause.to_le_bytes().into_iter();
        let fields = fields.chain(f.pc.to_le_bytes()).chain(addr.to_le_bytes());
        for (d, b) in data.iter_mut().zip(fields) {
            *d = b;
        }
        self.write(buffer::KIND_ERROR, code, &data);
    }

    fn error_args(&mut self) -> &mut [u64; 6] {
        &mut self.room.err_args
    }

    fn enter_error(&mut self, desc: u32) -> bool {
        if self.faulting.is_some() || self.slot.kind == ProbeKind::Error {
            return false;
        }
        let s = self.s;
        let Some(err) = s
            .slots
            .iter()
            .find(|sl| sl.kind == ProbeKind::Error && sl.desc == desc)
        else {
            return false;
        };
        if let Some(k) = s.counter(self.cpu, err.id) {
            bump(&k.fired);
        }
        self.faulting = Some(self.slot);
        self.slot = err;
        true
    }

    fn leave_error(&mut self) {
        if let Some(sl) = self.faulting.take() {
            self.slot = sl;
        }
    }
}

impl KernelEnv<'_> {
    /// The value of a built-in [`Env::builtin`] does not answer inline (all but `pid`,
    /// `tid` and `timestamp`).
    #[inline(never)]
    fn builtin_other(&mut self, b: Builtin) -> u64 {
        if let Some(src) = probe::arg_source(self.slot.kind, b) {
            return match src {
                ArgSource::Arg(n) => match self.faulting {
                    Some(_) => self.room.err_args.get(n as usize).copied().unwrap_or(0),
                    None => self.regs.arg(n),
                },
                ArgSource::Retval => self.regs.retval(),
                ArgSource::Zero => 0,
                ArgSource::SyscallArg(n) => self.regs.syscall_arg(n),
                ArgSource::KernelPc => self.regs.kernel_pc(),
                ArgSource::UserPc => self.regs.user_pc(),
                ArgSource::Record => crate::sys::provider::tp_record(),
                ArgSource::ReturnOffset => self.s.user_slot(self.slot).map_or(0, |u| u.roff),
                // `builtin_fallible` is the interpreter's way here, with the fault.
                ArgSource::UsdtArg(n) => self.usdt_arg(n).unwrap_or(0),
            };
        }
        match b {
            Builtin::Cpu => self.cpu as u64,
            Builtin::Walltimestamp => cpu::real_fast_ns(),
            Builtin::Uid => task::uid() as u64,
            Builtin::Gid => task::gid() as u64,
            Builtin::Ppid => task::ppid() as u64,
            // The enabled probe id: the slot's index (`probe::other_probe_id`).
            Builtin::Id => self.slot.id as u64,
            Builtin::Curthread => task::current_addr(),
            Builtin::Errno => {
                let r = self.builtin(Builtin::Retval);
                probe::errno(self.slot.kind, r)
            }
            Builtin::Caller => match self.slot.kind {
                ProbeKind::FbtEntry => self.regs.caller(false),
                ProbeKind::FbtReturn => self.regs.caller(true),
                _ => 0,
            },
            Builtin::Vtimestamp => task::vtime(),
            Builtin::Epid => {
                let (s, sl) = (self.s, self.slot);
                probe::epid(sl.epid_base, s.clauses_of(sl).iter().copied(), self.clause)
            }
            Builtin::Ipl => task::irq_level() as u64,
            _ => 0,
        }
    }
}

impl KernelEnv<'_> {
    /// USDT operand `n` of the firing probe: 0 past its operands, a `BadAddr` fault when
    /// it is in user memory that can't be read.
    #[inline(never)]
    fn usdt_arg(&mut self, n: u32) -> Result<u64, action::FaultKind> {
        let s = self.s;
        let Some(a) = s
            .user_slot(self.slot)
            .and_then(|u| s.user_args(u).get(n as usize))
        else {
            return Ok(0);
        };
        let regs = self.regs;
        let reg = |i: u8| regs.user_reg(i as u32);
        let mem = |addr: u64, out: &mut [u8]| task::read_user(addr, out);
        uprobe::usdt_eval(a, reg, mem).map_err(|f| match f {
            UsdtFault::BadAddr(addr) => action::FaultKind::BadAddr(addr),
            UsdtFault::Invalid => action::FaultKind::Invalid,
        })
    }
}

impl Env for KernelEnv<'_> {
    // `pid`, `tid` and `timestamp` (the keys of `@[pid]` and `self->`, the latency
    // script's clock) without the call and the compare tree of every other built-in.
    // None of them is an argument (`probe::arg_source`), so the order changes nothing.
    #[inline(always)]
    fn builtin(&mut self, b: Builtin) -> u64 {
        match b {
            Builtin::Pid => task::pid() as u64,
            Builtin::Tid => task::tid() as u64,
            Builtin::Timestamp => self.ts(),
            _ => self.builtin_other(b),
        }
    }

    fn builtin_fallible(&mut self, b: Builtin) -> Result<u64, action::FaultKind> {
        if self.slot.kind == ProbeKind::Usdt && self.faulting.is_none() {
            if let Some(ArgSource::UsdtArg(n)) = probe::arg_source(ProbeKind::Usdt, b) {
                return self.usdt_arg(n);
            }
        }
        Ok(self.builtin(b))
    }

    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize {
        let kind = self.slot.kind;
        match b {
            Builtin::Execname => task::comm(out),
            Builtin::Probeprov | Builtin::Probemod | Builtin::Probefunc | Builtin::Probename => {
                if let Some(u) = self.s.user_slot(self.slot) {
                    // The whole name, which the slot's function may have cut.
                    return probe::describe(kind, self.s.user_name(u), 0, b, out).unwrap_or(0);
                }
                let period = match kind {
                    ProbeKind::Tick | ProbeKind::Profile => self
                        .s
                        .prog
                        .image()
                        .probe(self.slot.desc as usize)
                        .map_or(0, |p| p.arg),
                    _ => 0,
                };
                probe::describe(kind, self.slot.func(), period, b, out).unwrap_or(0)
            }
            _ => 0,
        }
    }

    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool {
        task::read_kernel(addr, out)
    }

    fn read_user(&mut self, addr: u64, out: &mut [u8]) -> bool {
        task::read_user(addr, out)
    }

    fn write_user(&mut self, addr: u64, data: &[u8]) -> bool {
        task::write_user(addr, data)
    }

    fn global_load(&mut self, id: u32) -> u64 {
        self.s
            .globals
            .get(id as usize)
            .map_or(0, |g| g.load(Ordering::Relaxed))
    }

    fn global_store(&mut self, id: u32, value: u64) {
        if let Some(g) = self.s.globals.get(id as usize) {
            g.store(value, Ordering::Relaxed);
        }
    }

    #[inline(never)]
    fn dynvar_load(&mut self, var: u32, keys: &[Key<'_>]) -> u64 {
        self.s
            .dynvars
            .as_ref()
            .map_or(0, |d| d.load(var, keys, &mut self.room.dynv))
    }

    // A dropped store is counted by the dynamic memory (by state and by variable).
    #[inline(never)]
    fn dynvar_store(&mut self, var: u32, keys: &[Key<'_>], value: u64) -> bool {
        self.s
            .dynvars
            .as_ref()
            .is_some_and(|d| d.store(self.cpu, var, keys, &mut self.room.dynv, value))
    }

    #[inline(never)]
    fn dynvar_load_str(&mut self, var: u32, keys: &[Key<'_>], out: &mut [u8]) -> usize {
        self.s
            .dynvars
            .as_ref()
            .map_or(0, |d| d.load_str(var, keys, &mut self.room.dynv, out))
    }

    // A dropped store is counted like an integer one.
    #[inline(never)]
    fn dynvar_store_str(&mut self, var: u32, keys: &[Key<'_>], s: &[u8]) -> bool {
        self.s
            .dynvars
            .as_ref()
            .is_some_and(|d| d.store_str(self.cpu, var, keys, &mut self.room.dynv, s))
    }

    #[inline(never)]
    fn agg_update(&mut self, id: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool {
        let Some((mut buf, func)) = self.agg_buf(id) else {
            return false;
        };
        // PANIC: constant indices below `AGG_NARGS` (2), checked by the compiler.
        buf.apply(id, func, keys, args[0] as i64, args[1] as i64)
            .is_ok()
    }

    // As `agg_update`, with the key the interpreter encoded.
    #[inline(never)]
    fn agg_update_ints(&mut self, id: u32, key: &IntKey, args: &[u64; AGG_NARGS]) -> bool {
        let Some((mut buf, func)) = self.agg_buf(id) else {
            return false;
        };
        // PANIC: constant indices below `AGG_NARGS` (2), checked by the compiler.
        buf.apply_ints(id, func, key, args[0] as i64, args[1] as i64)
            .is_ok()
    }

    #[inline(never)]
    fn emit(&mut self, rec: &Record<'_>) -> bool {
        if rec.kind == RecordKind::Exit && !self.s.exited.load(Ordering::Relaxed) {
            let status = action::Items::new(rec.data)
                .next()
                .map_or(0, |it| match it {
                    action::Item::Int(v, _) => v as i64,
                    action::Item::Str(_) | action::Item::Mem(_) => 0,
                });
            if self
                .s
                .exited
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.s.exit_status.store(status, Ordering::Release);
            }
        }
        self.write(rec.kind as u32, rec.id, rec.data)
    }

    // A user-space probe fired in user mode: its kernel stack is only the uprobe machinery
    // that reports the breakpoint, none of the probed context's (DTrace's is empty too).
    fn kernel_stack(&mut self, out: &mut [u64]) -> usize {
        if probe::is_user(self.slot.kind) {
            return 0;
        }
        self.regs.kernel_stack(out, stack_from(self.slot.kind))
    }

    // Takes the frames into the CPU's room (not the stack, which has none to spare) and
    // writes the definition straight into the principal buffer, never a speculation's: a
    // discarded speculation must not take with it a definition later records name.
    fn stack_id(&mut self, user: bool, max: u32) -> u64 {
        let max = max.min(stack::MAX_FRAMES) as usize;
        let (pid, n) = if user {
            let Some(regs) = self.user_regs() else {
                return 0;
            };
            let pid = self.builtin(Builtin::Pid);
            let pcs = &mut self.room.stk.pcs;
            let mut n = 0;
            ustack::walk(regs, max as u32, &mut TaskFrames, |pc| {
                match pcs.get_mut(n) {
                    Some(d) => {
                        *d = pc;
                        n += 1;
                        true
                    }
                    None => false,
                }
            });
            (pid, n)
        } else {
            if probe::is_user(self.slot.kind) {
                return 0;
            }
            let from = stack_from(self.slot.kind);
            // PANIC: `max <= MAX_FRAMES`, the room's length.
            let pcs = &mut self.room.stk.pcs[..max];
            let n = self.regs.kernel_stack(pcs, from).min(max);
            // PANIC: `n <= max`.
            (0, stack::keep_kernel_pcs(&mut pcs[..n]))
        };
        if n == 0 {
            return 0;
        }
        let stk = &mut *self.room.stk;
        // PANIC: `n <= max <= MAX_FRAMES`, the room's length.
        let id = stack::id(user, pid, &stk.pcs[..n]);
        let sent = id as usize % STACKS_SENT;
        // PANIC: `sent < STACKS_SENT`, the array's length.
        if stk.sent[sent] == id {
            return id;
        }
        let ts = self.ts();
        let kind = buffer::with_clause(buffer::KIND_STACK, self.clause);
        let def = if user {
            stack::DEF_USER
        } else {
            stack::DEF_KERNEL
        };
        let hdr = self.header(kind, def, ts);
        let end = self.slot.kind == ProbeKind::End;
        let r = &mut *self.room;
        let stk = &mut *r.stk;
        // PANIC: as above; `len <= DEF_MAX_BYTES`, the length of `def`.
        let len = stack::write_def(id, pid, &stk.pcs[..n], &mut stk.def);
        let ok = put_record(
            self.s,
            self.cpu,
            &mut r.pbuf_cur,
            r.pbuf.active(),
            end,
            &hdr,
            &stk.def[..len],
        );
        if !ok {
            return 0;
        }
        // A ring overwrites its oldest records, definitions too: each stack is defined
        // again before every record that names it.
        if r.pbuf_cur.policy != buffer::POLICY_RING {
            stk.sent[sent] = id;
        }
        id
    }

    fn kernel_stack_depth(&mut self) -> usize {
        if probe::is_user(self.slot.kind) {
            return 0;
        }
        self.regs.kernel_stack_depth(stack_from(self.slot.kind))
    }

    fn user_regs(&mut self) -> Option<UserRegs> {
        self.regs.user_regs().map(|(pc, fp)| UserRegs { pc, fp })
    }

    fn user_reg(&mut self, idx: u64) -> Option<u64> {
        self.regs.user_reg(u32::try_from(idx).ok()?)
    }

    fn ptwrite(&mut self, value: u64) -> bool {
        match (self.s.pt.as_deref(), self.pt.as_deref_mut()) {
            (Some(pt), Some(c)) => pt.ptwrite(c, self.cpu, value),
            _ => false,
        }
    }

    #[inline(never)]
    fn speculation(&mut self) -> u64 {
        let Some(specs) = self.s.specs.as_ref() else {
            return 0;
        };
        match specs.speculation() {
            Ok(id) => id,
            Err(why) => {
                if let Some(c) = self.s.cpu_counters.get(self.cpu as usize) {
                    bump(match why {
                        Refused::Busy => &c.spec_busy,
                        Refused::Unavailable => &c.spec_unavail,
                    });
                }
                0
            }
        }
    }

    #[inline(never)]
    fn emit_spec(&mut self, id: u64, rec: &Record<'_>) -> bool {
        let ts = self.ts();
        let (Some(specs), Some(sc)) = (self.s.specs.as_ref(), self.room.spec.as_mut()) else {
            return false;
        };
        let from = Origin {
            probe: self.slot.id,
            clause: self.clause,
            ts,
        };
        match specs.write(self.cpu, sc, id, from, rec) {
            Ok(()) => true,
            Err(Lost::Drop) => {
                if let Some(c) = self.s.cpu_counters.get(self.cpu as usize) {
                    bump(&c.spec_drops);
                }
                false
            }
            Err(Lost::Silent) => false,
        }
    }

    #[inline(never)]
    fn spec_end(&mut self, id: u64, commit: bool) -> bool {
        if id == 0 || id > self.s.nspec {
            return false;
        }
        let ts = self.ts();
        let r = &mut *self.room;
        let (Some(specs), Some(_)) = (self.s.specs.as_ref(), r.spec.as_ref()) else {
            // Without speculation() no speculation is ever active.
            return true;
        };
        if specs.end(id, commit, ts) {
            // This CPU's share now; the others' at their next buffer switch.
            self.s.settle_specs(self.cpu, r);
        }
        true
    }

    fn raise(&mut self, sig: u64) -> bool {
        i32::try_from(sig).is_ok_and(task::raise)
    }

    // DTrace's budget: CHILL_MAX_NS per CHILL_INTERVAL_NS on each CPU.
    fn chill(&mut self, ns: u64) -> bool {
        let Some(c) = self.s.cpu_counters.get(self.cpu as usize) else {
            return false;
        };
        let now = cpu::mono_fast_ns();
        if now.wrapping_sub(c.chill_start.load(Ordering::Relaxed)) >= limits::CHILL_INTERVAL_NS {
            c.chill_start.store(now, Ordering::Relaxed);
            c.chill_used.store(0, Ordering::Relaxed);
        }
        let used = c.chill_used.load(Ordering::Relaxed);
        if used.saturating_add(ns) > limits::CHILL_MAX_NS {
            return false;
        }
        c.chill_used.store(used + ns, Ordering::Relaxed);
        task::spin_ns(ns);
        true
    }

    fn progenyof(&mut self, pid: u64) -> bool {
        // A pid beyond 32 bits names no process.
        u32::try_from(pid).is_ok_and(task::progenyof)
    }
}
