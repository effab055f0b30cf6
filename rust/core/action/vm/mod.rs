// SPDX-License-Identifier: GPL-2.0

//! The interpreter: runs verified code in probe context over the CPU's scratch space.
//!
//! This file holds the machine (its state, the [`Env`] it calls, faults) and the loop that
//! runs it; the opcodes that leave the loop are split by what they work on: `ops` (the rarer
//! opcodes and the environment calls' dispatch), `strings`, `stacks`, `vars` (variables and
//! aggregations) and `records`.

use super::decode::Fetch;
use super::shape::{Effect, Operand, Shape, Step, NVALS};
use super::*;
use crate::agg::{IntKey, KEY_MAX_ELEMS};

// An aggregation key has as many elements as the interpreter's keys (`int_key`, `build_keys`).
const _: () = assert!(MAX_KEYS == KEY_MAX_ELEMS);

mod mem;
mod ops;
mod records;
mod stacks;
mod strings;
mod vars;

use strings::{resolve_str, resolve_str_in};

/// Everything outside the machine, implemented by the kernel glue (and test doubles).
pub trait Env {
    /// Value of an integer built-in.
    fn builtin(&mut self, b: Builtin) -> u64;
    /// Value of an integer built-in where reading it may fault (a USDT probe's operand in
    /// user memory that can't be read: `BadAddr`); by default [`Env::builtin`], which
    /// never does. Only probe arguments may ([`Builtin::is_arg`]). The interpreter's `ldb`
    /// reads built-ins through this; a firing whose arguments may fault here runs
    /// [`Vm::with_fallible_args`].
    fn builtin_fallible(&mut self, b: Builtin) -> Result<u64, FaultKind> {
        Ok(self.builtin(b))
    }
    /// Copy a string built-in into `out` (at most `out.len()` bytes); returns the length.
    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize;
    /// Read `out.len()` bytes of kernel memory at `addr` without faulting; false on failure.
    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool;
    /// Read `out.len()` bytes of the current task's user memory at `addr` without faulting
    /// (`copyinstr`); false on failure, and where there is no user memory.
    fn read_user(&mut self, _addr: u64, _out: &mut [u8]) -> bool {
        false
    }
    /// Write `data` into the current task's user memory at `addr` without faulting
    /// (`copyout()`, destructive); false on failure, and where there is no user memory or
    /// it may not be written now.
    fn write_user(&mut self, _addr: u64, _data: &[u8]) -> bool {
        false
    }
    /// Load global scalar `id`.
    fn global_load(&mut self, id: u32) -> u64;
    /// Store global scalar `id`.
    fn global_store(&mut self, id: u32, value: u64);
    /// Load dynamic variable `var` at `keys`; 0 when it does not exist.
    fn dynvar_load(&mut self, var: u32, keys: &[Key<'_>]) -> u64;
    /// Store dynamic variable `var` at `keys` (0 deletes); false when the store was dropped.
    fn dynvar_store(&mut self, var: u32, keys: &[Key<'_>], value: u64) -> bool;
    /// Copy string-valued dynamic variable `var` at `keys` into `out` (at most `out.len()`
    /// bytes); returns its length, 0 when it does not exist.
    fn dynvar_load_str(&mut self, var: u32, keys: &[Key<'_>], out: &mut [u8]) -> usize;
    /// Store string `s` into string-valued dynamic variable `var` at `keys` (the empty
    /// string deletes); false when the store was dropped.
    fn dynvar_store_str(&mut self, var: u32, keys: &[Key<'_>], s: &[u8]) -> bool;
    /// Apply aggregation `agg` at `keys` to `args` (value, weight); false when dropped.
    fn agg_update(&mut self, agg: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool;
    /// [`Env::agg_update`] at a key of integers only, encoded by the interpreter in place
    /// (the kernel's environment applies it as it is); by default, as its keys.
    fn agg_update_ints(&mut self, agg: u32, key: &IntKey, args: &[u64; AGG_NARGS]) -> bool {
        let w = key.words();
        let mut keys = [Key::Int(0); KEY_MAX_ELEMS];
        for (k, v) in keys.iter_mut().zip(&w[1..]) {
            *k = Key::Int(*v);
        }
        // PANIC: an `IntKey` has 1 + at most `KEY_MAX_ELEMS` words.
        self.agg_update(agg, &keys[..w.len() - 1], args)
    }
    /// Append a record to the principal buffer; false when it does not fit (a drop).
    fn emit(&mut self, rec: &Record<'_>) -> bool;
    /// Write `value` to this CPU's Intel PT stream (a PTW packet); false when it was lost
    /// (no PT stream configured or started, or the stream stopped or full).
    fn ptwrite(&mut self, value: u64) -> bool;
    /// Whether the current process is `pid` or one of its descendants (`progenyof()`).
    fn progenyof(&mut self, pid: u64) -> bool;
    /// `speculation()`: makes a free speculation active and returns its id (1..=nspec), or
    /// 0 when none is free (counted by the environment as busy or unavailable).
    fn speculation(&mut self) -> u64;
    /// Appends a record to this CPU's buffer of speculation `id`; false when it was dropped
    /// (counted by the environment). Records of speculation 0 are dropped silently.
    fn emit_spec(&mut self, id: u64, rec: &Record<'_>) -> bool;
    /// `commit(id)` (`commit` true) or `discard(id)` of an active speculation (an inactive
    /// one is left alone); false when `id` names no speculation (it is not 1..=nspec),
    /// which the interpreter reports as DTrace does: an illegal operation. The interpreter
    /// never passes 0, which DTrace ignores.
    fn spec_end(&mut self, id: u64, commit: bool) -> bool;
    /// `raise(sig)`: signal the current process when it is safe (after the probe); false when
    /// the signal number is not one or a signal is already pending from this CPU.
    fn raise(&mut self, sig: u64) -> bool;
    /// `chill(ns)`: spin `ns` nanoseconds; false (nothing done) when it would take this CPU
    /// over its chill budget.
    fn chill(&mut self, ns: u64) -> bool;
    /// Fill `out` with the kernel stack of the probe, the probed function's caller first;
    /// returns the number of frames. None where no stack can be taken.
    fn kernel_stack(&mut self, _out: &mut [u64]) -> usize {
        0
    }
    /// `stack(max)` (`user` false) or `ustack(max)`: takes the probe's kernel stack or the
    /// current thread's user stack, at most `max` frames (at most
    /// [`crate::stack::MAX_FRAMES`]), hands its definition to [`Env::stack_def`] unless
    /// the consumer has it already, and returns its id ([`crate::stack::id`]); 0 when there
    /// is no frame or the definition was dropped.
    ///
    /// This default takes the frames into an array on the stack, for environments that
    /// have stack to spare; the kernel's takes them into per-CPU room.
    fn stack_id(&mut self, user: bool, max: u32) -> u64 {
        let mut pcs = [0u64; crate::stack::MAX_FRAMES as usize];
        let max = (max.min(crate::stack::MAX_FRAMES)) as usize;
        let (pid, n) = if user {
            let Some(regs) = self.user_regs() else {
                return 0;
            };
            let pid = self.builtin(Builtin::Pid);
            let mut n = 0;
            crate::ustack::walk(regs, max as u32, &mut stacks::UserFrames(self), |pc| {
                // PANIC: `walk` gives at most `max <= MAX_FRAMES` PCs.
                pcs[n] = pc;
                n += 1;
                true
            });
            (pid, n)
        } else {
            // PANIC: `max <= MAX_FRAMES`, the array's length.
            let n = self.kernel_stack(&mut pcs[..max]).min(max);
            (0, crate::stack::keep_kernel_pcs(&mut pcs[..n]))
        };
        if n == 0 {
            return 0;
        }
        // PANIC: `n <= max <= MAX_FRAMES`.
        let pcs = &pcs[..n];
        let id = crate::stack::id(user, pid, pcs);
        if self.stack_def(user, id, pid, pcs) {
            id
        } else {
            0
        }
    }
    /// Makes the definition of stack `id` (of process `pid`, frames `pcs`) reach the
    /// consumer before anything that names it; false when it was dropped. By default the
    /// environment has no consumer to tell: true.
    fn stack_def(&mut self, _user: bool, _id: u64, _pid: u64, _pcs: &[u64]) -> bool {
        true
    }
    /// The depth of the kernel stack of the probe (`stackdepth`), as [`Env::kernel_stack`]
    /// would fill it without a bound.
    fn kernel_stack_depth(&mut self) -> usize {
        0
    }
    /// The user registers of the current thread (the probe's own when it interrupted user
    /// mode, else those saved at its last kernel entry); `None` for a kernel thread.
    fn user_regs(&mut self) -> Option<crate::ustack::UserRegs> {
        None
    }
    /// User register `idx` (below [`UREG_COUNT`], DTrace's `R_*` numbering) of the current
    /// thread, chosen as [`Env::user_regs`] chooses; `None` for a kernel thread.
    fn user_reg(&mut self, _idx: u64) -> Option<u64> {
        None
    }
}

/// Kind of a runtime fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Integer division or remainder by zero.
    DivZero,
    /// A kernel-memory read failed at this address.
    BadAddr(u64),
    /// A register used as a string does not reference a valid string.
    BadString,
    /// An array subscript out of the array's bounds (the index).
    BadIndex(u64),
    /// More than [`MAX_TUPLE`] values pushed on the tuple stack.
    TupleOverflow,
    /// The tuple does not match the variable's or aggregation's key layout.
    KeyMismatch,
    /// The scratch area is too small for this program (the VM was sized wrongly).
    ScratchExhausted,
    /// An instruction or table reference is not valid (never happens on verified code run
    /// with the tables it was verified against).
    Invalid,
    /// A subroutine argument out of its domain (`lltostr()` base, `inet_ntop()` family):
    /// DTrace's "illegal operation".
    IllegalOp,
}

/// A runtime fault: the clause is aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Index of the faulting instruction.
    pub pc: u32,
    /// What went wrong.
    pub kind: FaultKind,
}

/// Losses counted while running (not faults: the clause goes on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Losses {
    /// Records that did not fit in the principal buffer.
    pub records: u64,
    /// Dynamic-variable stores that were dropped.
    pub dynvars: u64,
    /// Aggregation updates that were dropped.
    pub aggs: u64,
    /// `ptwrite()` values the PT stream did not take.
    pub ptwrites: u64,
}

/// Where [`Vm::exec`] stopped.
enum Stop {
    /// At `ret`, with its value.
    Ret(u64),
    /// At instruction `.0`, an environment call, which [`Vm::run`] dispatches.
    Call(usize),
}

#[derive(Clone, Copy)]
enum TupleVal {
    Int(u64, IntType),
    Str(u64),
    /// `len` bytes of memory at an address, read when the record is assembled.
    Mem(u64, u32),
}

/// The strtok slot's last byte when it holds a string `strtok(NULL, ...)` goes on with.
const STRTOK_KEPT: u8 = 1;

/// The interpreter's registers, tuple stack and key room: built once per CPU at LOAD and
/// kept out of the probe's stack, which may be an interrupt stack already deep in use.
/// A [`Vm`] borrows it for one firing; only what a clause uses is reset.
pub struct VmState {
    regs: [u64; NREGS],
    tuple: [TupleVal; MAX_TUPLE],
    tlen: usize,
    /// The keys of one variable or aggregation access, built from the tuple.
    keys: KeyBuf<MAX_KEYS>,
    /// The key of an aggregation update whose elements are all integers, encoded.
    ikey: IntKey,
    /// `rand()` calls so far, mixed into the seed so that calls in one firing differ.
    rand_n: u64,
    /// The speculation the clause's records go to (`speculate()`), or `None`.
    spec: Option<u64>,
    /// The last `self->x` loaded in this firing: variable, thread and value. Only the thread
    /// itself changes its variables, so the value holds until it stores one (any store
    /// forgets it) or the firing ends ([`Vm::new`] forgets it): a predicate `/self->ts/` and
    /// its action's `timestamp - self->ts` look the variable up once.
    tls: Option<(u32, u64, u64)>,
    /// Losses counted since [`Vm::new`] made a VM over this state; a firing's [`Vm::with`]
    /// goes on counting (the kernel counts its losses where they happen).
    losses: Losses,
    /// The running [`Vm`]'s parameters (its invariants say what holds of them).
    nlocals: u32,
    strsize: u32,
    /// Where the string slots start in the scratch: `scratch_size(nlocals, strsize, 0)`.
    slots_start: usize,
    /// Where the next string slot starts in the scratch.
    next_slot: usize,
    /// Scratch memory bytes (`alloca()`) the clause took.
    mem_used: usize,
    /// One past the scratch offset of the header of the clause's last object
    /// (`alloca()`), 0 when it made none: where [`Vm::object`] starts.
    last_mem: usize,
    /// This firing's clauses that read probe arguments run in the interpreter only
    /// ([`Vm::with_fallible_args`]).
    fallible_args: bool,
}

impl VmState {
    /// A state for a CPU; its contents are set by the [`Vm`] before they are read.
    pub const fn new() -> Self {
        VmState {
            regs: [0; NREGS],
            tuple: [TupleVal::Int(0, IntType::I64); MAX_TUPLE],
            tlen: 0,
            keys: KeyBuf::new(),
            ikey: IntKey::new(),
            rand_n: 0,
            spec: None,
            tls: None,
            losses: Losses {
                records: 0,
                dynvars: 0,
                aggs: 0,
                ptwrites: 0,
            },
            nlocals: 0,
            strsize: 1,
            slots_start: 0,
            next_slot: 0,
            mem_used: 0,
            last_mem: 0,
            fallible_args: false,
        }
    }
}

impl Default for VmState {
    fn default() -> Self {
        Self::new()
    }
}

/// The interpreter of one firing: the CPU's [`VmState`] and scratch area.
///
/// Scratch layout: `nlocals` `u64` locals, the record-assembly buffer, the `strtok` slot,
/// then string slots of `strsize + 1` bytes allocated in order during a clause.
///
/// Two references: the rest of a firing's interpreter state is in the [`VmState`], so that
/// the frame that holds the `Vm`, under every call of the interpreter, stays small.
///
/// # Invariants
///
/// While the `Vm` exists, `st.strsize` is in `1..=MAX_STRSIZE`, `st.nlocals` at most
/// [`MAX_LOCALS`], `st.slots_start` is `scratch_size(st.nlocals, st.strsize, 0)`, the
/// scratch holds that many bytes, and `st.next_slot` is at or after it; `st.mem_used`
/// counts the scratch memory bytes (`alloca()`) the clause took; `st.last_mem` is 0 or one
/// more than the offset of an object header `alloca` wrote this clause, whose object ends at
/// or before `st.next_slot`, and each header links to 0 or to one below it (`mem.rs`).
pub struct Vm<'s> {
    st: &'s mut VmState,
    scratch: &'s mut [u8],
}

/// A program's interpreter parameters, checked once (at LOAD) rather than at every firing.
///
/// # Invariants
///
/// `strsize` is in `1..=MAX_STRSIZE`, `nlocals` at most [`MAX_LOCALS`], `base` is
/// `scratch_size(nlocals, strsize, 0)` and `keep` is where the `strtok` slot starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmParams {
    nlocals: u32,
    strsize: u32,
    base: usize,
    keep: usize,
}

impl VmParams {
    /// The parameters of programs with `nlocals` locals and strings of `strsize`.
    pub const fn new(nlocals: u32, strsize: u32) -> Result<Self, VmError> {
        if strsize == 0 || strsize > MAX_STRSIZE || nlocals > MAX_LOCALS {
            return Err(VmError::BadParams);
        }
        // INVARIANT: both checked above; `base` and `keep` computed from them.
        Ok(VmParams {
            nlocals,
            strsize,
            base: scratch_size(nlocals, strsize, 0),
            keep: nlocals as usize * 8 + record_buf_size(strsize),
        })
    }
}

/// The VM could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmError {
    /// `strsize` or `nlocals` out of range.
    BadParams,
    /// The scratch area cannot hold the locals and the record buffer.
    ScratchTooSmall,
}

impl<'s> Vm<'s> {
    /// A VM over `st` and `scratch` for programs with `nlocals` locals and strings of
    /// `strsize`.
    pub fn new(
        st: &'s mut VmState,
        scratch: &'s mut [u8],
        nlocals: u32,
        strsize: u32,
    ) -> Result<Self, VmError> {
        let vm = Self::with(st, scratch, &VmParams::new(nlocals, strsize)?)?;
        vm.st.rand_n = 0;
        vm.st.losses = Losses::default();
        Ok(vm)
    }

    /// A VM over `st` and `scratch` with parameters checked beforehand: a firing's, whose
    /// program's parameters LOAD checked. What one firing leaves that the next must not see
    /// is reset here; `rand()`'s count and the losses go on (see [`Vm::new`]), and where
    /// `strtok(NULL, ...)` goes on is the scratch's to say ([`Vm::strtok_rest`]).
    // Inlined: no returned copy of the `Vm` in the probe's frame.
    #[inline(always)]
    pub fn with(st: &'s mut VmState, scratch: &'s mut [u8], p: &VmParams) -> Result<Self, VmError> {
        if scratch.len() < p.base {
            return Err(VmError::ScratchTooSmall);
        }
        // INVARIANT: `p`'s invariants hold; the scratch holds `p.base` bytes, where the slot
        // area starts.
        st.nlocals = p.nlocals;
        st.strsize = p.strsize;
        st.slots_start = p.base;
        st.next_slot = p.base;
        st.mem_used = 0;
        st.last_mem = 0;
        st.tlen = 0;
        st.spec = None;
        st.tls = None;
        st.fallible_args = false;
        Ok(Vm { st, scratch })
    }

    /// Runs this firing's clauses that read probe arguments in the interpreter, never as
    /// shapes, which read built-ins through [`Env::builtin`] and have no fault path: for an
    /// environment whose arguments may fault ([`Env::builtin_fallible`]). Shapes that read
    /// none (`@ = count()`, `@[pid] = count()`) still run as shapes.
    pub fn with_fallible_args(&mut self) {
        self.st.fallible_args = true;
    }

    /// Where `strtok(NULL, ...)` goes on: the `strtok` slot, if it holds what is left of the
    /// CPU's last `strtok()` string, else 0. The slot's last byte says so (a rest is shorter
    /// than `strsize`, so that byte is never part of it): the place is kept per CPU, in the
    /// CPU's scratch, as DTrace keeps it, and read only by the firings that go on.
    fn strtok_rest(&self) -> u64 {
        let keep = self.st.nlocals as usize * 8 + record_buf_size(self.st.strsize);
        match self.scratch.get(keep + self.st.strsize as usize) {
            Some(&STRTOK_KEPT) => str_ref(STR_SPACE_SCRATCH, keep as u32),
            _ => 0,
        }
    }

    /// Losses counted since [`Vm::new`] made a VM over this state.
    pub fn losses(&self) -> Losses {
        self.st.losses
    }

    fn slots_start(&self) -> usize {
        self.st.slots_start
    }

    /// Start a clause: zero the locals and free every string slot.
    pub fn begin_clause(&mut self) {
        let l = self.st.nlocals as usize * 8;
        for b in self.scratch.iter_mut().take(l) {
            *b = 0;
        }
        self.st.next_slot = self.slots_start();
        self.st.mem_used = 0;
        self.st.last_mem = 0;
        // `strtok` goes on in the next clause: its string is in the strtok slot, not freed.
        self.st.spec = None;
    }

    /// Value of clause-local `idx` (for tests and the glue).
    pub fn local(&self, idx: u32) -> Option<u64> {
        if idx >= self.st.nlocals {
            return None;
        }
        let o = idx as usize * 8;
        let b = self.scratch.get(o..o + 8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Some(u64::from_le_bytes(w))
    }

    fn set_local(&mut self, idx: u32, v: u64) -> bool {
        if idx >= self.st.nlocals {
            return false;
        }
        let o = idx as usize * 8;
        match self.scratch.get_mut(o..o + 8) {
            Some(b) => {
                b.copy_from_slice(&v.to_le_bytes());
                true
            }
            None => false,
        }
    }

    fn alloc_slot(&mut self) -> Option<usize> {
        let sz = slot_size(self.st.strsize);
        let off = self.st.next_slot;
        if off.checked_add(sz)? > self.scratch.len() || off > u32::MAX as usize - sz {
            return None;
        }
        self.st.next_slot = off + sz;
        Some(off)
    }

    /// Runs a clause whose predicate (if it has one) and actions are both shapes, the
    /// commonest clauses (`@[pid] = count()`, the latency script's): the predicate, then the
    /// actions if it held. `None`, having run nothing, when they are not shapes.
    ///
    /// Shapes use no locals, string slots or scratch memory and never speculate, so of
    /// [`Vm::begin_clause`]'s work only leaving an earlier clause's speculation is needed.
    #[inline(always)]
    pub fn run_shapes<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        pred: Option<&Verified<'_>>,
        act: &Verified<'_>,
        dict: &D,
        env: &mut E,
    ) -> Option<()> {
        let act = act.shape()?;
        let fallible = self.st.fallible_args;
        if fallible && act.reads_args() {
            return None;
        }
        let pred = match pred {
            Some(p) => match p.shape()? {
                p if fallible && p.reads_args() => return None,
                p => Some(p),
            },
            None => None,
        };
        self.st.spec = None;
        if let Some(p) = pred {
            self.run_shape(p, dict, env);
            if val(&self.st.regs, p.ret) == 0 {
                return Some(());
            }
        }
        self.run_shape(act, dict, env);
        Some(())
    }

    /// Run a verified program with `dict` (the tables it was verified against) and `env`.
    ///
    /// Returns the `ret` value, or the fault that aborted the clause. Each instruction runs at
    /// most once, so the run ends after at most `len` steps.
    ///
    /// [`Vm::exec`] runs the instructions that stay in the interpreter and stops at one that
    /// calls deep into the environment (aggregations, dynamic variables, records,
    /// subroutines), which this loop then runs, with `exec`'s frame gone: on the probe's
    /// stack the two frames are never stacked. Aggregations and `self->x`, the commonest
    /// calls, are called from here; the others through [`Vm::slow`]'s dispatch. `ret`,
    /// `ldi`, `ldb`, `pushtv`, `mov`, `add` and `sub` run here too, without entering `exec`
    /// at all: `@c = count()` is `ldi`, `agg`, `ret`.
    #[inline(always)]
    pub fn run<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        prog: &Verified<'_>,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, Fault> {
        // In a speculation `agg` faults and records go elsewhere: the instructions run.
        if let Some(shape) = prog.shape() {
            if self.st.spec.is_none() && !(self.st.fallible_args && shape.reads_args()) {
                self.run_shape(shape, dict, env);
                // Read here rather than returned: that was 5 instructions a run dearer.
                return Ok(val(&self.st.regs, shape.ret));
            }
        }
        self.start(prog.nregs());
        // Every step moves `pc` forward (`exec` stops at or after it), so the loop ends
        // after at most `len` steps: at `ret`, a fault, or past the end.
        let mut pc = 0;
        loop {
            let Some(ins) = prog.fetch(pc) else {
                // Verified code ends in `ret`; running off the end means unverified code.
                return Err(Fault {
                    pc: pc as u32,
                    kind: FaultKind::Invalid,
                });
            };
            let f = |kind| Fault {
                pc: pc as u32,
                kind,
            };
            // PANIC: `Op` is a `u8`, `HOT` has 256 entries.
            let class = HOT[ins.op as usize];
            match class {
                Hot::Ret => return Ok(self.operands(ins).1),
                Hot::Ldi => {
                    let (rd, _, _) = self.operands(ins);
                    let v = ins.imm as i32 as i64 as u64;
                    self.write_back(rd, Some(v)).map_err(f)?;
                    pc += 1;
                    continue;
                }
                Hot::Ldb => {
                    self.ldb_to(ins, env).map_err(f)?;
                    pc += 1;
                    continue;
                }
                Hot::Pushtv => {
                    let (_, a, _) = self.operands(ins);
                    self.pushtv(a, ins.imm).map_err(f)?;
                    pc += 1;
                    continue;
                }
                Hot::Mov | Hot::Add | Hot::Sub => {
                    let (rd, a, b) = self.operands(ins);
                    let v = match class {
                        Hot::Mov => a,
                        Hot::Add => a.wrapping_add(b),
                        _ => a.wrapping_sub(b),
                    };
                    self.write_back(rd, Some(v)).map_err(f)?;
                    pc += 1;
                    continue;
                }
                // `slow`'s commonest opcodes, called from here without its dispatch: an
                // aggregation outside a speculation, and `self->x`.
                Hot::Agg if self.st.spec.is_none() => {
                    let (_, a, b) = self.operands(ins);
                    self.agg(ins.imm, a, b, dict, env).map_err(f)?;
                    pc += 1;
                    continue;
                }
                Hot::Ldts | Hot::Stts => {
                    let (rd, a, _) = self.operands(ins);
                    let out = if ins.op == Op::Ldts {
                        Some(self.thread_var(ins.imm, None, env))
                    } else {
                        self.thread_var(ins.imm, Some(a), env);
                        None
                    };
                    self.write_back(rd, out).map_err(f)?;
                    pc += 1;
                    continue;
                }
                Hot::Slow | Hot::Agg => {}
                _ => match self.exec(prog, dict, env, pc)? {
                    Stop::Ret(v) => return Ok(v),
                    // Dispatched by the arms above.
                    Stop::Call(at) => {
                        pc = at;
                        continue;
                    }
                },
            }
            // `slow` runs instruction `pc` and goes on at the next one.
            self.slow(prog, dict, env, pc, ins)?;
            pc += 1;
        }
    }

    /// Does what a program of [`Shape`] `s` does, in one step, outside a speculation: its
    /// values computed in its order, then its updates, records and stores made in its order
    /// by the code its instructions call. What it returns is left in its slot.
    #[inline(never)]
    fn run_shape<D: Dict + ?Sized, E: Env + ?Sized>(&mut self, s: &Shape, dict: &D, env: &mut E) {
        // The values live in the registers, which a shape does not otherwise use: not in
        // this frame, which is under the chunk allocator's.
        s.set_consts(&mut self.st.regs);
        for (i, &step) in s.steps().iter().enumerate() {
            let r = &self.st.regs;
            let v = match step {
                Step::Builtin(b) => env.builtin(b),
                Step::Thread(var) => self.thread_var_in(var, None, env),
                Step::Add(a, b) => val(r, a).wrapping_add(val(r, b)),
                Step::Sub(a, b) => val(r, a).wrapping_sub(val(r, b)),
            };
            self.st.regs[i & (NVALS - 1)] = v;
        }
        for e in s.effects() {
            match *e {
                Effect::Agg { id, args, ref key } => {
                    let st = &mut *self.st;
                    st.ikey.clear();
                    // A shape has no more elements than an `IntKey` holds (`MAX_ELEMS`):
                    // every push succeeds.
                    let fits = key
                        .vals()
                        .iter()
                        .all(|&o| st.ikey.push(val(&st.regs, o)).is_some());
                    let ok = fits
                        && env.agg_update_ints(
                            id,
                            &st.ikey,
                            &[val(&st.regs, args[0]), val(&st.regs, args[1])],
                        );
                    self.agg_done(ok);
                }
                Effect::Record {
                    kind,
                    id,
                    ref elems,
                } => {
                    let st = &mut *self.st;
                    // At most `MAX_ELEMS <= MAX_TUPLE` elements, the tuple's length.
                    for (t, (o, ty)) in st.tuple.iter_mut().zip(elems.typed()) {
                        *t = TupleVal::Int(val(&st.regs, o), ty);
                    }
                    st.tlen = elems.vals().len();
                    // Integers always fit the record buffer (`record_buf_size`, which
                    // `Vm::new` checked the scratch holds): this never fails.
                    if self.record(dict.strtab(), env, kind, id).is_err() {
                        self.st.losses.records += 1;
                    }
                }
                Effect::Store { var, value } => {
                    let v = val(&self.st.regs, value);
                    self.thread_var_in(var, Some(v), env);
                }
            }
        }
    }

    /// Starts a run: zeroes the registers the program uses (the others are never read) and
    /// the tuple. Out of line, so that the zeroing's stores stay out of the frame under the
    /// actions (the fire path's, which `run` is inlined into).
    #[inline(never)]
    fn start(&mut self, nregs: usize) {
        zero_regs(&mut self.st.regs, nregs);
        self.st.tlen = 0;
    }

    /// Runs instructions from `pc` until `ret` or an environment call ([`Stop::Call`]). Out of
    /// line: its frame is gone while `slow` runs.
    #[inline(never)]
    fn exec<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        code: &Verified<'_>,
        dict: &D,
        env: &mut E,
        pc: usize,
    ) -> Result<Stop, Fault> {
        // The form is chosen once per entry, not per instruction; both loops are in this
        // one frame.
        match code.decoded() {
            Some(d) => self.exec_in(d.insns(), dict, env, pc),
            None => self.exec_in(&code.code(), dict, env, pc),
        }
    }

    /// [`Vm::exec`]'s loop over one form of the code.
    #[inline(always)]
    fn exec_in<F: Fetch + ?Sized, D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        code: &F,
        dict: &D,
        env: &mut E,
        mut pc: usize,
    ) -> Result<Stop, Fault> {
        let n = code.count();
        // Forward-only jumps make this bound redundant; it keeps termination local.
        let mut steps = 0usize;
        while pc < n && steps <= n {
            steps += 1;
            let f = |kind| Fault {
                pc: pc as u32,
                kind,
            };
            let ins = code.fetch(pc).ok_or(f(FaultKind::Invalid))?;
            let op = ins.op;
            let (rd, a, b) = self.operands(ins);
            let imm = ins.imm;
            let mut next = pc + 1;
            let mut out: Option<u64> = None;
            // The common opcodes first, through a table and a small match: the kernel is
            // built without jump tables (IBT), so the whole match is a tree of about seven
            // compares, each a branch, which is what an emulated CPU pays for.
            // PANIC: `Op` is a `u8`, `HOT` has 256 entries.
            match HOT[op as usize] {
                Hot::Slow | Hot::Agg | Hot::Ldts | Hot::Stts => return Ok(Stop::Call(pc)),
                Hot::Ret => return Ok(Stop::Ret(a)),
                Hot::Ldi => out = Some(imm as i32 as i64 as u64),
                Hot::Ldb => out = Some(self.ldb(imm, env).map_err(f)?),
                Hot::Pushtv => self.pushtv(a, imm).map_err(f)?,
                Hot::Mov => out = Some(a),
                Hot::Add => out = Some(a.wrapping_add(b)),
                Hot::Sub => out = Some(a.wrapping_sub(b)),
                Hot::Other => out = self.other(op, a, b, imm, pc, &mut next, dict, env)?,
            }
            self.write_back(rd, out).map_err(f)?;
            pc = next;
        }
        // Verified code ends in `ret`; running off the end means unverified code.
        Err(Fault {
            pc: pc as u32,
            kind: FaultKind::Invalid,
        })
    }

    /// The destination register and the two source values of `ins`. The mask keeps the
    /// indices in `regs` without a check: `DInsn`'s registers are below `NREGS` (a power of
    /// two), so it changes nothing.
    #[inline(always)]
    fn operands(&self, ins: DInsn) -> (usize, u64, u64) {
        const RMASK: usize = NREGS - 1;
        const _: () = assert!(NREGS.is_power_of_two());
        (
            ins.rd as usize & RMASK,
            self.st.regs[ins.r1 as usize & RMASK],
            self.st.regs[ins.r2 as usize & RMASK],
        )
    }

    /// Writes an instruction's result `out`, if it has one, into register `rd` (below
    /// `NREGS`, from [`Vm::operands`]); register 0 is never written.
    #[inline(always)]
    fn write_back(&mut self, rd: usize, out: Option<u64>) -> Result<(), FaultKind> {
        if let Some(v) = out {
            if rd == 0 {
                return Err(FaultKind::Invalid);
            }
            // PANIC: `rd < NREGS`, the length of `regs` (`Vm::operands` masks it).
            self.st.regs[rd] = v;
        }
        Ok(())
    }

    /// The register an instruction's `imm` names (a third operand). Registers from
    /// `nregs` on are not zeroed when a run starts, so they read as 0 as they always did.
    #[inline(always)]
    fn imm_reg(&self, imm: u32, nregs: usize) -> u64 {
        match imm as usize {
            i if i < nregs => self.st.regs.get(i).copied().unwrap_or(0),
            _ => 0,
        }
    }
}

/// How [`Vm::exec`] dispatches an opcode: the common ones by themselves, the opcodes
/// [`Vm::slow`] runs as one class, the rest through the whole match.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hot {
    Slow,
    Agg,
    Ldts,
    Stts,
    Ret,
    Ldi,
    Ldb,
    Pushtv,
    Mov,
    Add,
    Sub,
    Other,
}

/// The class of an opcode. The list of [`Vm::slow`]'s opcodes, those that call deep into
/// the environment: `Agg`, `Ldts` and `Stts` have classes of their own, which [`Vm::run`]
/// calls without `slow`'s dispatch.
const fn hot(op: Op) -> Hot {
    use Op::*;
    match op {
        Agg => Hot::Agg,
        Ldts => Hot::Ldts,
        Stts => Hot::Stts,
        Ldbs | Kstr | Strjoin | Uargs | Ldgaa | Stgaa | Trace | Printf | System | Printa
        | Clear | Denormalize | Trunc | Normalize | Exit | Ptwrite | Raise | Chill
        | Speculation | Commit | Discard | Substr | Strstr | Strchr | Strrchr | Index | Rindex
        | Strtok | Lltostr | Strtoll | Toupper | Tolower | Basename | Dirname | Cleanpath
        | InetNtop | Rand | Progenyof | Kstack | Ustack | Ustackdepth | Ucaller | Kstackdepth
        | Symval | Alloca | Copyin | Copyinto | Bcopy | Uregs | Copyout | Copyoutstr => Hot::Slow,
        Ret => Hot::Ret,
        Ldi => Hot::Ldi,
        Ldb => Hot::Ldb,
        Pushtv => Hot::Pushtv,
        Mov => Hot::Mov,
        Add => Hot::Add,
        Sub => Hot::Sub,
        _ => Hot::Other,
    }
}

/// [`hot`] of every opcode value, by value (a value that is no opcode: `Other`).
static HOT: [Hot; 256] = {
    let mut t = [Hot::Other; 256];
    let mut b = 0;
    while b < 256 {
        if let Some(op) = Op::from_u8(b as u8) {
            t[b] = hot(op);
        }
        b += 1;
    }
    t
};

/// The value in slot `o` of a shape's values, which a run keeps in the registers; masked,
/// as every slot is below `NVALS` (`Shape`'s invariant).
#[inline(always)]
fn val(regs: &[u64; NREGS], o: Operand) -> u64 {
    regs[usize::from(o) & (NVALS - 1)]
}

/// Zeroes the first `n` registers in blocks of four: plain stores, where a loop of
/// variable length becomes a `memset` call that costs more than the few registers a
/// program has.
#[inline(always)]
fn zero_regs(regs: &mut [u64; NREGS], n: usize) {
    // Whole blocks: `chunks_exact_mut` would leave a remainder unzeroed.
    const _: () = assert!(NREGS % 4 == 0);
    for (i, q) in regs.chunks_exact_mut(4).enumerate() {
        if n > 4 * i {
            q.copy_from_slice(&[0; 4]);
        }
    }
}
