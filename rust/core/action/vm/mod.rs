// SPDX-License-Identifier: GPL-2.0

//! The interpreter: runs verified code in probe context over the CPU's scratch space.

use super::decode::Fetch;
use super::shape::{Effect, Operand, Shape, Step, NVALS};
use super::*;
use crate::agg::{IntKey, KEY_MAX_ELEMS};

// An aggregation key has as many elements as the interpreter's keys (`int_key`, `build_keys`).
const _: () = assert!(MAX_KEYS == KEY_MAX_ELEMS);

#[path = "mem.rs"]
mod mem;

/// Everything outside the machine, implemented by the kernel glue (and test doubles).
pub trait Env {
    /// Value of an integer built-in.
    fn builtin(&mut self, b: Builtin) -> u64;
    /// Copy a string built-in into `out` (at most `out.len()` bytes); returns the length.
    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize;
    /// Read `out.len()` bytes of kernel memory at `addr` without faulting; false on failure.
    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool;
    /// Read `out.len()` bytes of the current task's user memory at `addr` without faulting
    /// (`copyinstr`); false on failure, and where there is no user memory.
    fn read_user(&mut self, _addr: u64, _out: &mut [u8]) -> bool {
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
    /// `commit(id)` (`commit` true) or `discard(id)` of an active speculation.
    fn spec_end(&mut self, id: u64, commit: bool);
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

/// An [`Env`]'s user memory as a frame reader (the non-faulting [`Env::read_user`]).
struct UserFrames<'e, E: Env + ?Sized>(&'e mut E);

impl<E: Env + ?Sized> crate::ustack::FrameReader for UserFrames<'_, E> {
    fn read(&mut self, addr: u64, out: &mut [u8; 16]) -> bool {
        self.0.read_user(addr, out)
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
/// counts the scratch memory bytes (`alloca()`) the clause took.
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
        st.tlen = 0;
        st.spec = None;
        st.tls = None;
        Ok(Vm { st, scratch })
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

    /// Allocates a string slot and fills it with `f(strtab, scratch before the slot, out)`,
    /// `out` being the slot's `strsize` bytes; returns the new string's reference, or 0 (a
    /// NULL string) when `f` returns `None`.
    fn new_str<F>(&mut self, strtab: &[u8], f: F) -> Result<u64, FaultKind>
    where
        F: FnOnce(&[u8], &[u8], &mut [u8]) -> Result<Option<usize>, FaultKind>,
    {
        let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
        let ss = self.st.strsize as usize;
        // PANIC: `alloc_slot` checked that `off + ss + 1` fits the scratch.
        let (before, slot_area) = self.scratch.split_at_mut(off);
        let slot = &mut slot_area[..ss + 1];
        match f(strtab, before, &mut slot[..ss])? {
            Some(len) => {
                // PANIC: `f` writes into `slot[..ss]`, so `len <= ss`; `min` keeps it so.
                slot[len.min(ss)] = 0;
                Ok(str_ref(STR_SPACE_SCRATCH, off as u32))
            }
            None => {
                slot[0] = 0;
                Ok(0)
            }
        }
    }

    /// Copies what follows byte `end` of string `cur` into the `strtok` slot (in place when
    /// `cur` is that slot) and marks the slot as holding it.
    fn keep_strtok(&mut self, strtab: &[u8], cur: u64, end: usize) -> Result<(), FaultKind> {
        let ss = self.st.strsize as usize;
        let keep = self.st.nlocals as usize * 8 + record_buf_size(self.st.strsize);
        let len = resolve_str(strtab, self.scratch, ss, cur)
            .ok_or(FaultKind::BadString)?
            .len();
        let end = end.min(len);
        if str_space(cur) == STR_SPACE_SCRATCH {
            // The strtok slot itself or a later slot of this clause: `copy_within` allows the
            // overlap of the first.
            let off = str_offset(cur);
            // PANIC: `resolve_str` found `len` bytes at `off`, so `off + len` is in the
            // scratch; `Vm::new` checked that it holds the strtok slot (`keep + ss + 1`).
            self.scratch.copy_within(off + end..off + len, keep);
        } else {
            let rest = resolve_str(strtab, &[], ss, cur).unwrap_or(&[]);
            // PANIC: as above; `rest.len() - end <= ss`.
            let out = &mut self.scratch[keep..keep + ss];
            subr::copy(rest.get(end..).unwrap_or(&[]), out);
        }
        // PANIC: `len - end <= ss`, and the slot has `ss + 1` bytes.
        self.scratch[keep + len - end] = 0;
        self.scratch[keep + ss] = STRTOK_KEPT;
        Ok(())
    }

    /// Runs a user stack or symbol opcode (`Ustack` ..= `Ucaller`); returns the value of
    /// `rd`. Apart from [`Vm::run`] so that its locals do not grow that frame.
    #[inline(never)]
    fn user_op<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        imm: u32,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        use crate::ustack::{self, Style};
        match op {
            Op::Ustack => {
                let max = imm.min(ustack::MAX_FRAMES);
                let regs = env.user_regs();
                let pid = env.builtin(Builtin::Pid);
                self.new_str(dict.strtab(), |_, _, slot| {
                    let Some(regs) = regs else {
                        return Ok(Some(0));
                    };
                    // A key string holds at most `KEY_STR_MAX` bytes.
                    let room = slot.len().min(crate::agg::KEY_STR_MAX);
                    // PANIC: `room <= slot.len()`.
                    let slot = &mut slot[..room];
                    let mut r = UserFrames(env);
                    Ok(Some(ustack::encode(pid, regs, max, &mut r, slot)))
                })
            }
            Op::Ustackdepth | Op::Ucaller => {
                let Some(regs) = env.user_regs() else {
                    return Ok(0);
                };
                let max = if op == Op::Ucaller {
                    2
                } else {
                    ustack::MAX_FRAMES
                };
                let mut last = 0u64;
                let n = ustack::walk(regs, max, &mut UserFrames(env), |pc| {
                    last = pc;
                    true
                });
                Ok(match op {
                    Op::Ucaller if n == 2 => last,
                    Op::Ucaller => 0,
                    _ => n as u64,
                })
            }
            Op::Kstackdepth => Ok(env.kernel_stack_depth() as u64),
            Op::Symval => {
                let style = Style::from_u8(imm.min(255) as u8).ok_or(FaultKind::Invalid)?;
                let pid = if style.user() {
                    env.builtin(Builtin::Pid)
                } else {
                    0
                };
                self.new_str(dict.strtab(), |_, _, slot| {
                    Ok(Some(ustack::encode_sym(style, pid, a, slot)))
                })
            }
            _ => Err(FaultKind::Invalid),
        }
    }

    /// Runs a subroutine opcode (`Substr` ..= `Progenyof` but `Hton`); returns the value of `rd`.
    // Out of line, like the other rare opcodes' bodies: their locals stay out of `run`'s
    // frame, which is on the stack under every call the interpreter makes.
    #[inline(never)]
    fn subr<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        b: u64,
        c: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        use Op::*;
        let ss = self.st.strsize as usize;
        let strtab = dict.strtab();
        // Resolves a string register within `sc`, the scratch before the new slot.
        fn get<'b>(t: &'b [u8], sc: &'b [u8], ss: usize, r: u64) -> Result<&'b [u8], FaultKind> {
            resolve_str(t, sc, ss, r).ok_or(FaultKind::BadString)
        }
        Ok(match op {
            Substr => self.new_str(strtab, |t, sc, out| {
                let s = get(t, sc, ss, a)?;
                Ok(Some(subr::substr(s, b as i64, Some(c as i64), out)))
            })?,
            Strstr => self.new_str(strtab, |t, sc, out| {
                let s = get(t, sc, ss, a)?;
                let sub = get(t, sc, ss, b)?;
                // PANIC: `strstr` returns an offset at most `s.len()`.
                Ok(subr::strstr(s, sub).map(|p| subr::copy(&s[p..], out)))
            })?,
            Strchr | Strrchr => self.new_str(strtab, |t, sc, out| {
                let s = get(t, sc, ss, a)?;
                // Searching for NUL finds the terminator: the empty string at the end.
                if b as u8 == 0 {
                    return Ok(Some(0));
                }
                let at = subr::strchr(s, b as u8, op == Strrchr);
                // PANIC: `strchr` returns a position in `s`.
                Ok(at.map(|p| subr::copy(&s[p..], out)))
            })?,
            Index | Rindex => {
                let s = get(strtab, self.scratch, ss, a)?;
                let sub = get(strtab, self.scratch, ss, b)?;
                if op == Index {
                    subr::index(s, sub, c as i64) as u64
                } else {
                    subr::rindex(s, sub, c as i64) as u64
                }
            }
            Strtok => {
                let cur = if a == 0 { self.strtok_rest() } else { a };
                if cur == 0 {
                    // Like DTrace: no string to go on with gives NULL.
                    return self.new_str(strtab, |_, _, _| Ok(None));
                }
                let mut cut = None;
                let r = self.new_str(strtab, |t, sc, out| {
                    let s = get(t, sc, ss, cur)?;
                    let d = get(t, sc, ss, b)?;
                    Ok(subr::strtok(s, d).map(|(start, end)| {
                        cut = Some(end);
                        // PANIC: `strtok` returns `start <= end <= s.len()`.
                        subr::copy(&s[start..end], out)
                    }))
                })?;
                match cut {
                    Some(end) => self.keep_strtok(strtab, cur, end)?,
                    None => {
                        let flag =
                            self.st.nlocals as usize * 8 + record_buf_size(self.st.strsize) + ss;
                        // PANIC: the strtok slot is within `slots_start()` (see `Vm::new`).
                        self.scratch[flag] = 0;
                    }
                }
                r
            }
            Lltostr => self.new_str(strtab, |_, _, out| {
                subr::lltostr(a as i64, b as i64, out)
                    .map(Some)
                    .ok_or(FaultKind::IllegalOp)
            })?,
            Strtoll => {
                let s = get(strtab, self.scratch, ss, a)?;
                subr::strtoll(s, b as i64).ok_or(FaultKind::IllegalOp)? as u64
            }
            Toupper | Tolower | Basename | Dirname | Cleanpath => {
                self.new_str(strtab, |t, sc, out| {
                    let s = get(t, sc, ss, a)?;
                    Ok(Some(match op {
                        Toupper => subr::change_case(s, true, out),
                        Tolower => subr::change_case(s, false, out),
                        Basename => subr::basename(s, out),
                        Dirname => subr::dirname(s, out),
                        _ => subr::cleanpath(s, out),
                    }))
                })?
            }
            InetNtop => {
                let mut addr = [0u8; 16];
                let n = match a {
                    subr::AF_INET => 4,
                    subr::AF_INET6 => 16,
                    _ => return Err(FaultKind::IllegalOp),
                };
                // PANIC: `n` is 4 or 16, within `addr`.
                if !env.read_kernel(b, &mut addr[..n]) {
                    return Err(FaultKind::BadAddr(b));
                }
                self.new_str(strtab, |_, _, out| {
                    Ok(Some(if n == 4 {
                        subr::inet_ntoa(&[addr[0], addr[1], addr[2], addr[3]], out)
                    } else {
                        subr::inet_ntoa6(&addr, out)
                    }))
                })?
            }
            Rand => {
                self.st.rand_n = self.st.rand_n.wrapping_add(1);
                let seed = env.builtin(Builtin::Timestamp)
                    ^ env.builtin(Builtin::Cpu).rotate_left(48)
                    ^ self.st.rand_n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                subr::rand_from(seed)
            }
            Progenyof => env.progenyof(a) as u64,
            _ => return Err(FaultKind::Invalid),
        })
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
        let pred = match pred {
            Some(p) => Some(p.shape()?),
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
            if self.st.spec.is_none() {
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

    /// The opcodes of [`Vm::exec`] not in [`HOT`]'s classes: their result, if they have one.
    /// One frame with `exec`'s (inlined), only its dispatch apart.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn other<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        b: u64,
        imm: u32,
        pc: usize,
        next: &mut usize,
        dict: &D,
        env: &mut E,
    ) -> Result<Option<u64>, Fault> {
        let f = |kind| Fault {
            pc: pc as u32,
            kind,
        };
        let mut out = None;
        use Op::*;
        match op {
            Nop => {}
            Setx => out = Some(dict.int_at(imm).ok_or(f(FaultKind::Invalid))?),
            Sets => {
                if imm as usize >= dict.strtab().len() {
                    return Err(f(FaultKind::Invalid));
                }
                out = Some(str_ref(STR_SPACE_TABLE, imm));
            }
            Mul => out = Some(a.wrapping_mul(b)),
            Sdiv | Udiv | Srem | Urem => {
                if b == 0 {
                    return Err(f(FaultKind::DivZero));
                }
                let (sa, sb) = (a as i64, b as i64);
                // Checked forms have no panic path; `None` is only i64::MIN / -1 here,
                // whose wrapped results are MIN and 0.
                out = Some(match op {
                    Sdiv => sa.checked_div(sb).unwrap_or(sa) as u64,
                    Udiv => a.checked_div(b).unwrap_or(0),
                    Srem => sa.checked_rem(sb).unwrap_or(0) as u64,
                    _ => a.checked_rem(b).unwrap_or(0),
                });
            }
            And => out = Some(a & b),
            Or => out = Some(a | b),
            Xor => out = Some(a ^ b),
            Sll => out = Some(a.wrapping_shl(b as u32)),
            Srl => out = Some(a.wrapping_shr(b as u32)),
            Sra => out = Some((a as i64).wrapping_shr(b as u32) as u64),
            Not => out = Some(!a),
            Neg => out = Some(a.wrapping_neg()),
            Lnot => out = Some((a == 0) as u64),
            Sext => {
                out = Some(match imm {
                    8 => a as i8 as i64 as u64,
                    16 => a as i16 as i64 as u64,
                    32 => a as i32 as i64 as u64,
                    _ => return Err(f(FaultKind::Invalid)),
                })
            }
            Zext => {
                out = Some(match imm {
                    8 => a as u8 as u64,
                    16 => a as u16 as u64,
                    32 => a as u32 as u64,
                    _ => return Err(f(FaultKind::Invalid)),
                })
            }
            Eq => out = Some((a == b) as u64),
            Ne => out = Some((a != b) as u64),
            Lt => out = Some(((a as i64) < (b as i64)) as u64),
            Le => out = Some(((a as i64) <= (b as i64)) as u64),
            Gt => out = Some(((a as i64) > (b as i64)) as u64),
            Ge => out = Some(((a as i64) >= (b as i64)) as u64),
            Ltu => out = Some((a < b) as u64),
            Leu => out = Some((a <= b) as u64),
            Gtu => out = Some((a > b) as u64),
            Geu => out = Some((a >= b) as u64),
            Ba | Bz | Bnz => {
                let taken = match op {
                    Ba => true,
                    Bz => a == 0,
                    _ => a != 0,
                };
                if taken {
                    if imm as usize <= pc {
                        return Err(f(FaultKind::Invalid));
                    }
                    *next = imm as usize;
                }
            }
            Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx => {
                let addr = a.wrapping_add(imm as i32 as i64 as u64);
                let size = match op {
                    Ldsb | Ldub => 1,
                    Ldsh | Lduh => 2,
                    Ldsw | Lduw => 4,
                    _ => 8,
                };
                let mut buf = [0u8; 8];
                // PANIC: `size` is 1, 2, 4 or 8.
                if !self.read_mem(env, addr, &mut buf[..size]) {
                    return Err(f(FaultKind::BadAddr(addr)));
                }
                let v = u64::from_le_bytes(buf);
                out = Some(match op {
                    Ldsb => v as i8 as i64 as u64,
                    Ldsh => v as i16 as i64 as u64,
                    Ldsw => v as i32 as i64 as u64,
                    _ => v,
                });
            }
            Ldls => out = Some(self.local(imm).ok_or(f(FaultKind::Invalid))?),
            Stls => {
                if !self.set_local(imm, a) {
                    return Err(f(FaultKind::Invalid));
                }
            }
            Ldgs => out = Some(env.global_load(imm)),
            Stgs => env.global_store(imm, a),
            Pushts => {
                // A full tuple first, as for `pushtv`; then validate now so the fault
                // points at the push.
                if self.st.tlen >= MAX_TUPLE {
                    return Err(f(FaultKind::TupleOverflow));
                }
                resolve_str(dict.strtab(), self.scratch, self.st.strsize as usize, a)
                    .ok_or(f(FaultKind::BadString))?;
                self.push(TupleVal::Str(a)).map_err(f)?;
            }
            Flusht => self.st.tlen = 0,
            Scmp => {
                let ss = self.st.strsize as usize;
                let strtab = dict.strtab();
                let s1 = resolve_str(strtab, self.scratch, ss, a).ok_or(f(FaultKind::BadString))?;
                let s2 = resolve_str(strtab, self.scratch, ss, b).ok_or(f(FaultKind::BadString))?;
                out = Some(match s1.cmp(s2) {
                    core::cmp::Ordering::Less => -1i64 as u64,
                    core::cmp::Ordering::Equal => 0,
                    core::cmp::Ordering::Greater => 1,
                });
            }
            Strlen => {
                let s = resolve_str(dict.strtab(), self.scratch, self.st.strsize as usize, a)
                    .ok_or(f(FaultKind::BadString))?;
                out = Some(s.len() as u64);
            }
            Chkb => {
                if a >= u64::from(imm) {
                    return Err(f(FaultKind::BadIndex(a)));
                }
            }
            // One speculate() per clause, before its data (the compiler checks it).
            // The other actions are `slow`'s, which checks them.
            Speculate => {
                if self.st.spec.is_some() {
                    return Err(f(FaultKind::IllegalOp));
                }
                self.st.spec = Some(a);
            }
            Hton => {
                out = Some(match imm {
                    16 => (a as u16).to_be() as u64,
                    32 => (a as u32).to_be() as u64,
                    64 => a.to_be(),
                    _ => return Err(f(FaultKind::Invalid)),
                })
            }
            Stb => self.store(a, imm, b, 1).map_err(f)?,
            Sth => self.store(a, imm, b, 2).map_err(f)?,
            Stw => self.store(a, imm, b, 4).map_err(f)?,
            Stx => self.store(a, imm, b, 8).map_err(f)?,
            // [`HOT`]'s classes, which never come here.
            _ => return Err(f(FaultKind::Invalid)),
        }
        Ok(out)
    }

    /// `ldb`: built-in variable `imm`.
    #[inline(always)]
    fn ldb<E: Env + ?Sized>(&mut self, imm: u32, env: &mut E) -> Result<u64, FaultKind> {
        let bi = Builtin::from_u32(imm).ok_or(FaultKind::Invalid)?;
        Ok(env.builtin(bi))
    }

    /// `ldb` for [`Vm::run`], out of line: the environment's built-in variables stay out
    /// of the fire path's frame.
    #[inline(never)]
    fn ldb_to<E: Env + ?Sized>(&mut self, ins: DInsn, env: &mut E) -> Result<(), FaultKind> {
        let (rd, _, _) = self.operands(ins);
        let v = self.ldb(ins.imm, env)?;
        self.write_back(rd, Some(v))
    }

    /// `pushtv`: integer `a` of type `imm` onto the tuple (a full tuple faults first).
    #[inline(always)]
    fn pushtv(&mut self, a: u64, imm: u32) -> Result<(), FaultKind> {
        if self.st.tlen >= MAX_TUPLE {
            return Err(FaultKind::TupleOverflow);
        }
        if imm >= 8 {
            return Err(FaultKind::Invalid);
        }
        self.push(TupleVal::Int(a, IntType(imm as u8)))
    }

    /// Pushes `v` onto the tuple.
    #[inline(always)]
    fn push(&mut self, v: TupleVal) -> Result<(), FaultKind> {
        // PANIC: `get_mut` is `None` at `MAX_TUPLE`, the tuple's length.
        let slot = self
            .st
            .tuple
            .get_mut(self.st.tlen)
            .ok_or(FaultKind::TupleOverflow)?;
        *slot = v;
        self.st.tlen += 1;
        Ok(())
    }

    /// Runs instruction `ins` at `pc`, an environment call that [`Vm::run`] does not call
    /// itself (and an aggregation in a speculation, which it refuses). Out of line, and its
    /// opcodes' bodies out of line too, so that its frame is small under theirs.
    #[inline(never)]
    fn slow<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        code: &Verified<'_>,
        dict: &D,
        env: &mut E,
        pc: usize,
        ins: DInsn,
    ) -> Result<(), Fault> {
        let f = |kind| Fault {
            pc: pc as u32,
            kind,
        };
        let op = ins.op;
        let (rd, a, b) = self.operands(ins);
        let imm = ins.imm;
        let mut out: Option<u64> = None;
        use Op::*;
        // A speculated clause records data only: DTrace refuses the rest, and a second
        // `speculate()` (`exec`'s), a `commit()` or `discard()` with it.
        if self.st.spec.is_some() && op.is_action() && !matches!(op, Trace | Printf) {
            return Err(f(FaultKind::IllegalOp));
        }
        match op {
            Ldbs | Kstr | Strjoin | Uargs => {
                out = Some(self.strop(op, a, b, imm, dict, env).map_err(f)?)
            }
            Ldgaa | Stgaa => {
                let (layout, string) = match dict.var(imm) {
                    Some(v) if v.scope == Scope::Assoc => (v.keys, v.string),
                    _ => return Err(f(FaultKind::Invalid)),
                };
                out = if op == Ldgaa && string {
                    Some(self.assoc_load_str(imm, layout, dict, env).map_err(f)?)
                } else {
                    self.assoc(op, imm, layout, string, a, dict, env)
                        .map_err(f)?
                };
                self.st.tlen = 0;
            }
            Trace | Printf | System => {
                let (kind, id) = if op == Trace {
                    (RecordKind::Trace, 0)
                } else {
                    if imm >= dict.fmt_count() {
                        return Err(f(FaultKind::Invalid));
                    }
                    let k = if op == Printf {
                        RecordKind::Printf
                    } else {
                        RecordKind::System
                    };
                    (k, imm)
                };
                self.record(dict.strtab(), env, kind, id).map_err(f)?;
            }
            Printa => {
                let fmt = imm >> 16;
                let v = if fmt == 0 { u32::MAX } else { fmt - 1 };
                self.emit_int(env, RecordKind::Printa, imm & 0xffff, v as u64);
            }
            Clear => self.emit_int_none(env, RecordKind::Clear, imm),
            Denormalize => self.emit_int_none(env, RecordKind::Denormalize, imm),
            Trunc => self.emit_int(env, RecordKind::Trunc, imm, a),
            Normalize => self.emit_int(env, RecordKind::Normalize, imm, a),
            Exit => self.emit_int(env, RecordKind::Exit, 0, a),
            Ptwrite => {
                if !env.ptwrite(a) {
                    self.st.losses.ptwrites += 1;
                }
            }
            Raise => {
                if !env.raise(a) {
                    return Err(f(FaultKind::IllegalOp));
                }
            }
            Chill => {
                if !env.chill(a) {
                    return Err(f(FaultKind::IllegalOp));
                }
            }
            Speculation => out = Some(env.speculation()),
            Commit | Discard => env.spec_end(a, op == Commit),
            Substr | Strstr | Strchr | Strrchr | Index | Rindex | Strtok | Lltostr | Strtoll
            | Toupper | Tolower | Basename | Dirname | Cleanpath | InetNtop | Rand | Progenyof => {
                // The third register of `Substr`, `Index` and `Rindex` (the verifier
                // checked `imm < NREGS`); the others don't read `c`.
                let c = self.imm_reg(imm, code.nregs());
                out = Some(self.subr(op, a, b, c, dict, env).map_err(f)?);
            }
            Kstack => out = Some(self.kstack(imm, dict, env).map_err(f)?),
            Ustack | Ustackdepth | Ucaller | Kstackdepth | Symval => {
                out = Some(self.user_op(op, a, imm, dict, env).map_err(f)?);
            }
            Alloca => out = Some(self.alloca(a, dict).map_err(f)?),
            Copyin => out = Some(self.copyin(a, b, dict, env).map_err(f)?),
            Copyinto => {
                let dest = self.imm_reg(imm, code.nregs());
                self.copyinto(a, b, dest, env).map_err(f)?;
            }
            Bcopy => {
                let dest = self.imm_reg(imm, code.nregs());
                self.bcopy(a, dest, b, dict, env).map_err(f)?;
            }
            Uregs => out = Some(self.uregs(a, env).map_err(f)?),

            _ => return Err(f(FaultKind::Invalid)),
        }
        self.write_back(rd, out).map_err(f)
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

    /// `Ldbs`, `Kstr`, `Strjoin` and `Uargs`: a new string in a scratch slot; returns its
    /// reference.
    #[inline(never)]
    fn strop<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        b: u64,
        imm: u32,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        use Op::*;
        Ok(match op {
            Ldbs => {
                let bi = Builtin::from_u32(imm).ok_or(FaultKind::Invalid)?;
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                // PANIC: `alloc_slot` checked that `off + slot_size` (`ss + 1`) fits the
                // scratch, and `len <= ss` below, so `slot` is `ss + 1` bytes and every
                // index into it is in range.
                let slot = &mut self.scratch[off..off + ss + 1];
                let len = env.builtin_str(bi, &mut slot[..ss]).min(ss);
                // Stop at an embedded NUL like a C string would.
                let len = slot[..len].iter().position(|&c| c == 0).unwrap_or(len);
                slot[len] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            Kstr => {
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                let max = match (imm >> 1) as usize {
                    0 => ss,
                    m => m.min(ss),
                };
                let user = imm & KSTR_USER != 0;
                if !user {
                    if let Some(r) = self.scratch_str(a, off, max) {
                        return Ok(r);
                    }
                }
                // PANIC: as in `Ldbs`: `slot` is `ss + 1` bytes and `read_kernel_str`
                // returns at most `ss`.
                let slot = &mut self.scratch[off..off + ss + 1];
                let len =
                    read_kernel_str(env, a, &mut slot[..max], user).map_err(FaultKind::BadAddr)?;
                slot[len] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            Uargs => {
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                let max = match imm as usize {
                    0 => ss,
                    m => m.min(ss),
                };
                let want = (b.saturating_sub(a)).min(max as u64) as usize;
                // PANIC: as in `Ldbs`: `slot` is `ss + 1` bytes and `want <= ss`.
                let slot = &mut self.scratch[off..off + ss + 1];
                let len = read_user_args(env, a, &mut slot[..want]);
                slot[len] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            Strjoin => {
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                let strtab = dict.strtab();
                // PANIC: `alloc_slot` checked that `off + ss + 1` fits the scratch; then
                // `l1 <= ss`, `l1 + l2 <= ss` and `l1`, `l2` are within `s1`, `s2`.
                let (before, slot_area) = self.scratch.split_at_mut(off);
                let slot = &mut slot_area[..ss + 1];
                let s1 = resolve_str(strtab, before, ss, a).ok_or(FaultKind::BadString)?;
                let s2 = resolve_str(strtab, before, ss, b).ok_or(FaultKind::BadString)?;
                let l1 = s1.len().min(ss);
                slot[..l1].copy_from_slice(&s1[..l1]);
                let l2 = s2.len().min(ss - l1);
                slot[l1..l1 + l2].copy_from_slice(&s2[..l2]);
                slot[l1 + l2] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            _ => return Err(FaultKind::Invalid),
        })
    }

    /// `Agg`: applies aggregation `imm` at the tuple's keys to value `a` and weight `b`.
    #[inline(never)]
    fn agg<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        imm: u32,
        a: u64,
        b: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<(), FaultKind> {
        let layout = dict.agg(imm).ok_or(FaultKind::Invalid)?;
        let ok = if !layout.has_str() {
            self.int_key(layout)?;
            env.agg_update_ints(imm, &self.st.ikey, &[a, b])
        } else {
            let keys = self.agg_keys(layout, dict)?;
            env.agg_update(imm, keys, &[a, b])
        };
        self.agg_done(ok);
        Ok(())
    }

    /// How every aggregation update ends: a refused one counts as a loss, and the tuple
    /// (its key) is consumed.
    #[inline(always)]
    fn agg_done(&mut self, ok: bool) {
        if !ok {
            self.st.losses.aggs += 1;
        }
        self.st.tlen = 0;
    }

    /// Encodes the tuple into `ikey` for a key of integers only (`layout`); a tuple that
    /// does not fit the key faults as in [`build_keys`].
    #[inline(always)]
    fn int_key(&mut self, layout: KeyLayout) -> Result<(), FaultKind> {
        let st = &mut *self.st;
        if st.tlen != layout.count() {
            return Err(FaultKind::KeyMismatch);
        }
        st.ikey.clear();
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`push` checks).
        for t in &st.tuple[..st.tlen] {
            match *t {
                TupleVal::Int(v, _) => st.ikey.push(v).ok_or(FaultKind::KeyMismatch)?,
                TupleVal::Str(_) => return Err(FaultKind::KeyMismatch),
            }
        }
        Ok(())
    }

    /// The keys of an update of an aggregation with string components (`layout`), from the
    /// tuple. Out of line: the key buffer's building is not in [`Vm::agg`]'s frame, which
    /// is under the update's.
    #[inline(never)]
    fn agg_keys<'k, D: Dict + ?Sized>(
        &'k mut self,
        layout: KeyLayout,
        dict: &'k D,
    ) -> Result<&'k [Key<'k>], FaultKind> {
        let ss = self.st.strsize as usize;
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`Pushtv` checks).
        build_keys(
            &self.st.tuple[..self.st.tlen],
            layout,
            dict.strtab(),
            self.scratch,
            ss,
            &mut self.st.keys,
        )
    }

    /// `stack(imm)`: the kernel stack, at most `imm` frames, in a new string slot.
    #[inline(never)]
    fn kstack<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        imm: u32,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        let want = (imm.min(crate::stack::MAX_FRAMES) as usize)
            .min(self.st.strsize as usize / crate::stack::FRAME_BYTES);
        self.new_str(dict.strtab(), |_, _, slot| {
            let mut pcs = [0u64; crate::stack::MAX_FRAMES as usize];
            // PANIC: `want <= MAX_FRAMES`, the array's length; `n <= want`.
            let n = env.kernel_stack(&mut pcs[..want]).min(want);
            Ok(Some(crate::stack::encode(&pcs[..n], slot)))
        })
    }

    /// `ldgaa`/`stgaa` of associative array `var`, keyed by the tuple: a load returns the
    /// value (an integer: strings are [`Vm::assoc_load_str`]'s), a store stores `a`.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn assoc<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        var: u32,
        layout: KeyLayout,
        string: bool,
        a: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<Option<u64>, FaultKind> {
        let ss = self.st.strsize as usize;
        let strtab = dict.strtab();
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`Pushtv` checks).
        let keys = build_keys(
            &self.st.tuple[..self.st.tlen],
            layout,
            strtab,
            self.scratch,
            ss,
            &mut self.st.keys,
        )?;
        let stored = if op == Op::Ldgaa {
            return Ok(Some(env.dynvar_load(var, keys)));
        } else if string {
            let s = resolve_str(strtab, self.scratch, ss, a).ok_or(FaultKind::BadString)?;
            env.dynvar_store_str(var, keys, s)
        } else {
            env.dynvar_store(var, keys, a)
        };
        if !stored {
            self.st.losses.dynvars += 1;
        }
        Ok(None)
    }

    /// `Ldgaa` of a string-valued array: the element copied into a new scratch slot; returns
    /// the slot's reference. Apart from [`Vm::assoc`], whose frame is under every store.
    #[inline(never)]
    fn assoc_load_str<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        var: u32,
        layout: KeyLayout,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        let ss = self.st.strsize as usize;
        let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
        // PANIC: `alloc_slot` checked that `off + ss + 1` fits the scratch; the keys only
        // borrow the part before `off`.
        let (before, slot_area) = self.scratch.split_at_mut(off);
        let slot = &mut slot_area[..ss + 1];
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`Pushtv` checks).
        let keys = build_keys(
            &self.st.tuple[..self.st.tlen],
            layout,
            dict.strtab(),
            before,
            ss,
            &mut self.st.keys,
        )?;
        // PANIC: the length is clamped to `ss`.
        let len = env.dynvar_load_str(var, keys, &mut slot[..ss]).min(ss);
        let len = slot[..len].iter().position(|&c| c == 0).unwrap_or(len);
        slot[len] = 0;
        Ok(str_ref(STR_SPACE_SCRATCH, off as u32))
    }

    /// `self->x`: loads thread-local `var` (`store` `None`), or stores `store` into it and
    /// returns 0. Out of line: its key stays out of `exec`'s frame.
    #[inline(never)]
    fn thread_var<E: Env + ?Sized>(&mut self, var: u32, store: Option<u64>, env: &mut E) -> u64 {
        self.thread_var_in(var, store, env)
    }

    /// [`Vm::thread_var`], inlined into [`Vm::run_shape`]: a shape's frame is small, and a
    /// call and return with six saved registers cost the latency script about 60
    /// instructions a read (four of them).
    #[inline(always)]
    fn thread_var_in<E: Env + ?Sized>(&mut self, var: u32, store: Option<u64>, env: &mut E) -> u64 {
        let tid = env.builtin(Builtin::Tid);
        let keys = [Key::Int(tid)];
        match store {
            None => match self.st.tls {
                Some((v, t, x)) if v == var && t == tid => x,
                _ => {
                    let x = env.dynvar_load(var, &keys);
                    self.st.tls = Some((var, tid, x));
                    x
                }
            },
            Some(v) => {
                self.st.tls = None;
                if !env.dynvar_store(var, &keys, v) {
                    self.st.losses.dynvars += 1;
                }
                0
            }
        }
    }

    /// The tuple as a record of `kind` (format `id`): assembled, the tuple consumed, then
    /// emitted (a refused record counts as a loss).
    #[inline(always)]
    fn record<E: Env + ?Sized>(
        &mut self,
        strtab: &[u8],
        env: &mut E,
        kind: RecordKind,
        id: u32,
    ) -> Result<(), FaultKind> {
        let len = self.assemble(strtab)?;
        self.st.tlen = 0;
        self.emit(env, kind, id, len);
        Ok(())
    }

    /// Encode the tuple into the record buffer; returns its length.
    fn assemble(&mut self, strtab: &[u8]) -> Result<usize, FaultKind> {
        let ss = self.st.strsize as usize;
        let rb_start = self.st.nlocals as usize * 8;
        let rb_len = record_buf_size(self.st.strsize);
        // PANIC: `Vm::new` checked that the scratch holds the locals and the record buffer
        // (`scratch_size(nlocals, strsize, 0)`); `tlen <= MAX_TUPLE`, the tuple's length; each
        // `d` has the length its indices assume (9, or 3 + the string's).
        let (head, slots) = self.scratch.split_at_mut(rb_start + rb_len);
        let rb = &mut head[rb_start..];
        let slots_base = rb_start + rb_len;
        let mut n = 0usize;
        for t in &self.st.tuple[..self.st.tlen] {
            match *t {
                TupleVal::Int(v, ty) => {
                    let d = rb.get_mut(n..n + 9).ok_or(FaultKind::Invalid)?;
                    d[0] = ty.0;
                    d[1..].copy_from_slice(&v.to_le_bytes());
                    n += 9;
                }
                TupleVal::Str(r) => {
                    let s = resolve_str_in(strtab, slots, slots_base, ss, r)
                        .ok_or(FaultKind::BadString)?;
                    let d = rb.get_mut(n..n + 3 + s.len()).ok_or(FaultKind::Invalid)?;
                    d[0] = ITEM_STR;
                    d[1..3].copy_from_slice(&(s.len() as u16).to_le_bytes());
                    d[3..].copy_from_slice(s);
                    n += 3 + s.len();
                }
            }
        }
        Ok(n)
    }

    #[inline(never)]
    fn emit<E: Env + ?Sized>(&mut self, env: &mut E, kind: RecordKind, id: u32, len: usize) {
        let rb_start = self.st.nlocals as usize * 8;
        let data = self.scratch.get(rb_start..rb_start + len).unwrap_or(&[]);
        let rec = Record { kind, id, data };
        match self.st.spec {
            // The environment counts speculative drops itself.
            Some(s) => {
                env.emit_spec(s, &rec);
            }
            None => {
                if !env.emit(&rec) {
                    self.st.losses.records += 1;
                }
            }
        }
    }

    #[inline(never)]
    fn emit_int<E: Env + ?Sized>(&mut self, env: &mut E, kind: RecordKind, id: u32, v: u64) {
        let mut d = [0u8; 9];
        d[0] = IntType::I64.0;
        d[1..].copy_from_slice(&v.to_le_bytes());
        if !env.emit(&Record { kind, id, data: &d }) {
            self.st.losses.records += 1;
        }
    }

    #[inline(never)]
    fn emit_int_none<E: Env + ?Sized>(&mut self, env: &mut E, kind: RecordKind, id: u32) {
        if !env.emit(&Record {
            kind,
            id,
            data: &[],
        }) {
            self.st.losses.records += 1;
        }
    }
}

/// Copy the kernel string at `addr` into `out` chunk by chunk (never reading across a page
/// boundary past the NUL); returns its length (truncated to `out.len()`), or the failing
/// address.
// Out of line: its chunk buffer is not in `Vm::strop`'s frame, under `Env::builtin_str`.
#[inline(never)]
fn read_kernel_str<E: Env + ?Sized>(
    env: &mut E,
    addr: u64,
    out: &mut [u8],
    user: bool,
) -> Result<usize, u64> {
    const PAGE: u64 = 4096;
    let mut done = 0usize;
    while done < out.len() {
        let at = addr.wrapping_add(done as u64);
        let to_page = (PAGE - at % PAGE) as usize;
        let chunk = to_page.min(out.len() - done);
        // PANIC: `done + chunk <= out.len()` by the choice of `chunk`.
        let dst = &mut out[done..done + chunk];
        let ok = if user {
            env.read_user(at, dst)
        } else {
            env.read_kernel(at, dst)
        };
        if !ok {
            return Err(at);
        }
        if let Some(p) = out[done..done + chunk].iter().position(|&c| c == 0) {
            return Ok(done + p);
        }
        done += chunk;
    }
    Ok(out.len())
}

/// Copy the user memory at `addr` into `out` page by page, stopping at the first page that
/// cannot be read, then make its NULs blanks and drop the trailing ones (`Uargs`); returns
/// the length.
fn read_user_args<E: Env + ?Sized>(env: &mut E, addr: u64, out: &mut [u8]) -> usize {
    const PAGE: u64 = 4096;
    let mut done = 0usize;
    while done < out.len() {
        let at = addr.wrapping_add(done as u64);
        let chunk = ((PAGE - at % PAGE) as usize).min(out.len() - done);
        // PANIC: `done + chunk <= out.len()` by the choice of `chunk`.
        if !env.read_user(at, &mut out[done..done + chunk]) {
            break;
        }
        done += chunk;
    }
    // PANIC: `done <= out.len()`.
    let out = &mut out[..done];
    let len = out.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
    for c in &mut out[..len] {
        if *c == 0 {
            *c = b' ';
        }
    }
    len
}

/// Bytes of the string a register references, up to its NUL or `strsize` bytes.
fn resolve_str<'b>(
    strtab: &'b [u8],
    scratch: &'b [u8],
    strsize: usize,
    r: u64,
) -> Option<&'b [u8]> {
    resolve_str_in(strtab, scratch, 0, strsize, r)
}

/// Like [`resolve_str`] with `scratch` starting at scratch offset `base`.
fn resolve_str_in<'b>(
    strtab: &'b [u8],
    scratch: &'b [u8],
    base: usize,
    strsize: usize,
    r: u64,
) -> Option<&'b [u8]> {
    if r >> 48 != STR_TAG {
        return None;
    }
    let off = str_offset(r);
    if (r >> 32) & 0xff != 0 {
        return None;
    }
    let tail = match str_space(r) {
        STR_SPACE_TABLE => strtab.get(off..)?,
        STR_SPACE_SCRATCH => scratch.get(off.checked_sub(base)?..)?,
        _ => return None,
    };
    let lim = tail.len().min(strsize);
    // PANIC: `len <= lim <= tail.len()`.
    let len = tail[..lim].iter().position(|&c| c == 0).unwrap_or(lim);
    Some(&tail[..len])
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
        | Symval | Alloca | Copyin | Copyinto | Bcopy | Uregs => Hot::Slow,
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

/// Turn the tuple into keys in `keys`, checking it against `layout`; returns them.
#[inline(never)]
fn build_keys<'b, 'k>(
    tuple: &[TupleVal],
    layout: KeyLayout,
    strtab: &'b [u8],
    scratch: &'b [u8],
    strsize: usize,
    keys: &'k mut KeyBuf<MAX_KEYS>,
) -> Result<&'k [Key<'b>], FaultKind> {
    if tuple.len() != layout.count() {
        return Err(FaultKind::KeyMismatch);
    }
    let key = |i: usize| match (tuple.get(i), layout.is_str(i)) {
        (Some(&TupleVal::Int(v, _)), false) => Ok(Key::Int(v)),
        (Some(&TupleVal::Str(r)), true) => resolve_str(strtab, scratch, strsize, r)
            .map(Key::Str)
            .ok_or(FaultKind::BadString),
        _ => Err(FaultKind::KeyMismatch),
    };
    // More than `MAX_KEYS` keys is a mismatch too.
    keys.fill(tuple.len(), key)
        .unwrap_or(Err(FaultKind::KeyMismatch))
}
