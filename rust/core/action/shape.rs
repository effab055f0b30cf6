// SPDX-License-Identifier: GPL-2.0

//! Whole programs that predecoding recognises and the interpreter runs in one step.
//!
//! The commonest clauses are straight-line code: `@[pid] = count()`, `@ = sum(arg0)`,
//! `trace(pid)`, and the latency script's `self->ts = timestamp`, `/self->ts/` and
//! `@ = quantize(timestamp - self->ts); self->ts = 0`. Each compiles to a few loads (of
//! built-in and thread-local variables), perhaps a sum or a difference, one `pushtv` per
//! tuple element, then updates, records and stores, and `ret`. Dispatching those
//! instructions one by one cost about as much as the work they do. A program of that shape
//! is found once, at LOAD ([`Verified::decode_into`]), and [`Vm::run`] then does what its
//! instructions do without running them: it computes the values in program order, then
//! hands them to the same code the instructions call, in program order.

use super::*;
use crate::agg::KEY_MAX_ELEMS;

/// Slots for a shape's values: its constants and what its steps compute. A power of two,
/// so that an operand is masked into range rather than checked.
pub(super) const NVALS: usize = 8;
// A run keeps the values in the interpreter's registers.
const _: () = assert!(NVALS.is_power_of_two() && NVALS <= NREGS);

/// Values (loads, sums and differences) one shape may compute.
pub(super) const MAX_STEPS: usize = 6;

/// Elements one shape may push, over all its updates and records; within what an
/// [`IntKey`](crate::agg::IntKey) holds, so that building an aggregation's key never fails.
pub(super) const MAX_ELEMS: usize = 6;
const _: () = assert!(MAX_ELEMS <= KEY_MAX_ELEMS && MAX_ELEMS <= MAX_TUPLE);

/// Updates, records and stores one shape may make.
pub(super) const MAX_EFFECTS: usize = 3;

// `Shape::set_consts` writes the top two slots: no step's, whatever the constants.
const _: () = assert!(MAX_STEPS <= NVALS - 2);

/// A value the shape uses: the index of its slot. Step `i` computes slot `i`; constants
/// fill slots from the top down.
pub(super) type Operand = u8;

/// How one value is computed, before any effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// A built-in variable (`ldb`).
    Builtin(Builtin),
    /// Thread-local variable `var` (`ldts`: `self->x`).
    Thread(u32),
    /// `add`.
    Add(Operand, Operand),
    /// `sub`.
    Sub(Operand, Operand),
}

/// The integers an update or a record takes from the tuple: `n` of them, with their types.
///
/// # Invariants
///
/// `n <= MAX_ELEMS`; a type is below 8 (`pushtv`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Elems {
    vals: [Operand; MAX_ELEMS],
    types: [u8; MAX_ELEMS],
    n: u8,
}

impl Elems {
    const NONE: Elems = Elems {
        vals: [0; MAX_ELEMS],
        types: [0; MAX_ELEMS],
        n: 0,
    };

    /// The elements' slots.
    #[inline(always)]
    pub(super) fn vals(&self) -> &[Operand] {
        // PANIC: `n <= MAX_ELEMS` (type invariant).
        &self.vals[..usize::from(self.n)]
    }

    /// The elements' slots and types.
    #[inline(always)]
    pub(super) fn typed(&self) -> impl Iterator<Item = (Operand, IntType)> + '_ {
        self.vals()
            .iter()
            .zip(&self.types)
            .map(|(&o, &t)| (o, IntType(t)))
    }
}

/// What the program does with its values, in its order. A tag byte of its own: cheaper to
/// dispatch on than a niche in `RecordKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Effect {
    /// `agg`: aggregation `id` at `key`, with `agg`'s operands.
    Agg {
        id: u32,
        args: [Operand; 2],
        key: Elems,
    },
    /// `trace` or `printf`: a record of `elems`.
    Record {
        kind: RecordKind,
        id: u32,
        elems: Elems,
    },
    /// `stts`: thread-local variable `var` set to `value` (0 deletes it).
    Store { var: u32, value: Operand },
}

/// Loads of built-in and thread-local variables, constants, sums and differences in
/// registers; integers pushed onto the tuple; aggregation updates, records and thread-local
/// stores; then `ret` of a register.
///
/// # Invariants
///
/// `nsteps <= MAX_STEPS`, `neffects <= MAX_EFFECTS`, `nsteps + nconsts <= NVALS`. Every
/// operand is a constant's slot (one of the top `nconsts`, which holds it in `init`) or a
/// step's; a step's operands are constants' slots or earlier steps' (below its own index).
/// No [`Step::Thread`] was loaded after an [`Effect::Store`] in the program (so computing
/// every step first reads what the instructions read). In the dictionary the program was
/// verified with, an [`Effect::Agg`]'s key has its `n` elements, all integers, and an
/// [`Effect::Record`]'s format exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    /// The slots as a run starts: the constants in theirs, zeroes elsewhere.
    init: [u64; NVALS],
    /// The constants: the top `nconsts` slots. The others are steps' or never read.
    nconsts: u8,
    steps: [Step; MAX_STEPS],
    nsteps: u8,
    effects: [Effect; MAX_EFFECTS],
    neffects: u8,
    pub(super) ret: Operand,
}

impl Shape {
    /// Sets the constants' slots of `regs` as a run starts. A step writes its slot before
    /// anything reads it, and no operand names a slot that is neither: only the constants
    /// need setting. Most shapes have one or two (0 and perhaps a delta), so the top two
    /// slots are copied with two plain stores (with one constant the other is no step's
    /// slot either: steps take at most the lowest `MAX_STEPS`); the whole array only for
    /// more.
    #[inline(always)]
    pub(super) fn set_consts(&self, regs: &mut [u64; NREGS]) {
        if self.nconsts <= 2 {
            regs[NVALS - 2] = self.init[NVALS - 2];
            regs[NVALS - 1] = self.init[NVALS - 1];
        } else {
            regs[..NVALS].copy_from_slice(&self.init);
        }
    }

    /// The values the program computes, in its order.
    pub(super) fn steps(&self) -> &[Step] {
        // PANIC: `nsteps <= MAX_STEPS` (type invariant).
        &self.steps[..usize::from(self.nsteps)]
    }

    /// Whether a step reads a probe argument ([`Builtin::is_arg`]), which a firing with
    /// fallible arguments ([`super::Vm::with_fallible_args`]) must read in the interpreter.
    pub(super) fn reads_args(&self) -> bool {
        self.steps()
            .iter()
            .any(|s| matches!(s, Step::Builtin(b) if b.is_arg()))
    }

    /// What the program does, in its order.
    pub(super) fn effects(&self) -> &[Effect] {
        // PANIC: `neffects <= MAX_EFFECTS` (type invariant).
        &self.effects[..usize::from(self.neffects)]
    }

    /// The shape of `insns` (verified, decoded), when it is one, with `dict` the dictionary
    /// the program was verified with.
    pub(super) fn recognise<D: Dict + ?Sized>(insns: &[DInsn], dict: &D) -> Option<Shape> {
        let mut s = Shape {
            init: [0; NVALS],
            nconsts: 0,
            steps: [Step::Builtin(Builtin::Pid); MAX_STEPS],
            nsteps: 0,
            effects: [Effect::Store { var: 0, value: 0 }; MAX_EFFECTS],
            neffects: 0,
            ret: 0,
        };
        // Constants, from the top slot down; a run starts with every register at zero.
        let mut consts = Consts::default();
        let zero = consts.slot(0, &mut s.init, 0)?;
        let mut regs = [zero; NREGS];
        // Elements pushed since the last update or record, and whether a store was made.
        let mut pending = Elems::NONE;
        let mut stored = false;
        let (last, body) = insns.split_last()?;
        if last.op != Op::Ret {
            return None;
        }
        for d in body {
            // `DInsn`'s registers are below `NREGS` (its invariant); `get` keeps that local.
            let reg = |r: u8| regs.get(usize::from(r)).copied();
            let step = match d.op {
                Op::Ldi if d.rd != 0 => {
                    let k = d.imm as i32 as i64 as u64;
                    *regs.get_mut(usize::from(d.rd))? = consts.slot(k, &mut s.init, s.nsteps)?;
                    continue;
                }
                Op::Mov if d.rd != 0 => {
                    *regs.get_mut(usize::from(d.rd))? = reg(d.r1)?;
                    continue;
                }
                Op::Ldb if d.rd != 0 => Step::Builtin(Builtin::from_u32(d.imm)?),
                // After a store the variable may hold another value than before every
                // effect, where the step would be computed.
                Op::Ldts if d.rd != 0 && !stored => Step::Thread(d.imm),
                Op::Add if d.rd != 0 => Step::Add(reg(d.r1)?, reg(d.r2)?),
                Op::Sub if d.rd != 0 => Step::Sub(reg(d.r1)?, reg(d.r2)?),
                // `pushtv`'s types are 0 to 7; an integer element's value is the register's.
                Op::Pushtv if d.imm < 8 => {
                    let n = usize::from(pending.n);
                    *pending.vals.get_mut(n)? = reg(d.r1)?;
                    *pending.types.get_mut(n)? = d.imm as u8;
                    pending.n += 1;
                    continue;
                }
                Op::Agg | Op::Trace | Op::Printf | Op::Stts => {
                    let e = effect(d, dict, reg, pending)?;
                    if let Effect::Store { .. } = e {
                        stored = true;
                    } else {
                        pending = Elems::NONE;
                    }
                    *s.effects.get_mut(usize::from(s.neffects))? = e;
                    s.neffects += 1;
                    continue;
                }
                _ => return None,
            };
            let n = s.nsteps;
            // Steps take the slots below the constants'.
            if usize::from(n) >= MAX_STEPS.min(NVALS - consts.n) {
                return None;
            }
            *s.steps.get_mut(usize::from(n))? = step;
            *regs.get_mut(usize::from(d.rd))? = n;
            s.nsteps += 1;
        }
        // A tuple left behind is not worth a shape of its own.
        if pending.n != 0 {
            return None;
        }
        s.ret = *regs.get(usize::from(last.r1))?;
        s.nconsts = consts.n as u8;
        // INVARIANT: steps, elements and effects were counted within their arrays
        // (`get_mut` refuses more); steps and constants never share a slot (each side
        // checks the other's count, and `Consts::slot` takes the top slots only), so a
        // register holds a constant's slot or an earlier step's; `ldts` after a store was
        // refused; every update and record took the elements pushed since the last one,
        // and none are left; types are below 8; `effect` checked the key layouts and the
        // formats.
        Some(s)
    }
}

/// The constants of a shape being recognised: `n` of them, in the top `n` slots.
#[derive(Default)]
struct Consts {
    n: usize,
}

impl Consts {
    /// The slot holding constant `k` in `init`, taken if no slot holds it yet; `None`
    /// when there is no slot left above the `nsteps` steps so far.
    fn slot(&mut self, k: u64, init: &mut [u64; NVALS], nsteps: u8) -> Option<Operand> {
        let top = NVALS - self.n;
        if let Some(i) = (top..NVALS).find(|&i| init[i] == k) {
            return Some(i as u8);
        }
        let i = top.checked_sub(1).filter(|&i| i >= usize::from(nsteps))?;
        init[i] = k;
        self.n += 1;
        Some(i as u8)
    }
}

/// The effect of `d` (`agg`, `trace`, `printf` or `stts`), with `pending` elements pushed
/// since the last update or record; `None` where the instruction must run itself.
fn effect<D: Dict + ?Sized>(
    d: &DInsn,
    dict: &D,
    reg: impl Fn(u8) -> Option<Operand>,
    pending: Elems,
) -> Option<Effect> {
    Some(match d.op {
        Op::Agg => {
            let layout = dict.agg(d.imm)?;
            if layout.has_str() || layout.count() != usize::from(pending.n) {
                return None;
            }
            Effect::Agg {
                id: d.imm,
                args: [reg(d.r1)?, reg(d.r2)?],
                key: pending,
            }
        }
        Op::Trace => Effect::Record {
            kind: RecordKind::Trace,
            id: 0,
            elems: pending,
        },
        Op::Printf if d.imm < dict.fmt_count() => Effect::Record {
            kind: RecordKind::Printf,
            id: d.imm,
            elems: pending,
        },
        Op::Stts => Effect::Store {
            var: d.imm,
            value: reg(d.r1)?,
        },
        _ => return None,
    })
}
