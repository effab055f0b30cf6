// SPDX-License-Identifier: GPL-2.0

//! Whole programs that predecoding recognises and the interpreter runs in one step.
//!
//! `@[pid] = count()`, `@ = sum(arg0)` and `@[cpu, arg1] = max(arg2)` are the commonest
//! clauses there are, and each compiles to a few loads, one `pushtv` per key, `agg` and
//! `ret`. Dispatching those instructions one by one cost about as much as the update
//! itself. A program of that shape is found once, at LOAD ([`Verified::decode_into`]),
//! and [`Vm::run`] then does what its instructions do without running them: it reads the
//! built-in variables in program order, encodes the integer key and calls the
//! environment's update once.

use super::*;
use crate::agg::KEY_MAX_ELEMS;

/// Built-in variables one shape may read.
pub(super) const MAX_LOADS: usize = 6;

/// Keys one shape may push; within what an [`IntKey`](crate::agg::IntKey) holds, so that
/// building the key never fails.
const MAX_KEYS: usize = 4;
const _: () = assert!(MAX_KEYS <= KEY_MAX_ELEMS && MAX_KEYS <= MAX_TUPLE);

/// A value the shape uses: a constant, or the `n`th built-in variable the program loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    Imm(u64),
    Load(u8),
}

/// `@a[k1, .., kn] = f(v, w)` with integer keys: built-in variables and constants loaded
/// into registers, the keys pushed, one aggregation update, `ret r0` (an action's end).
///
/// # Invariants
///
/// Every [`Operand::Load`] is below `nloads`; `nloads <= MAX_LOADS`, `nkeys <= MAX_KEYS`;
/// aggregation `id`'s key, in the dictionary the program was verified with, has `nkeys`
/// elements, all integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct AggShape {
    pub(super) id: u32,
    loads: [Builtin; MAX_LOADS],
    nloads: u8,
    keys: [Operand; MAX_KEYS],
    nkeys: u8,
    /// The update's value and weight (`agg`'s two registers).
    pub(super) args: [Operand; 2],
}

impl AggShape {
    /// The built-in variables the program reads, in its order.
    pub(super) fn loads(&self) -> &[Builtin] {
        // PANIC: `nloads <= MAX_LOADS` (type invariant).
        &self.loads[..usize::from(self.nloads)]
    }

    /// The key's elements.
    pub(super) fn keys(&self) -> &[Operand] {
        // PANIC: `nkeys <= MAX_KEYS` (type invariant).
        &self.keys[..usize::from(self.nkeys)]
    }

    /// The shape of `insns` (verified, decoded), when it is one, with `dict` the dictionary
    /// the program was verified with.
    pub(super) fn recognise<D: Dict + ?Sized>(insns: &[DInsn], dict: &D) -> Option<AggShape> {
        // A run starts with every register it uses at zero.
        let mut regs = [Operand::Imm(0); NREGS];
        let mut s = AggShape {
            id: 0,
            loads: [Builtin::Pid; MAX_LOADS],
            nloads: 0,
            keys: [Operand::Imm(0); MAX_KEYS],
            nkeys: 0,
            args: [Operand::Imm(0); 2],
        };
        let (last, body) = insns.split_last()?;
        let (agg, body) = body.split_last()?;
        if agg.op != Op::Agg || last.op != Op::Ret || last.r1 != 0 {
            return None;
        }
        for d in body {
            // `DInsn`'s registers are below `NREGS` (its invariant); `get` keeps that local.
            match d.op {
                Op::Ldi if d.rd != 0 => {
                    *regs.get_mut(usize::from(d.rd))? = Operand::Imm(d.imm as i32 as i64 as u64);
                }
                Op::Ldb if d.rd != 0 => {
                    let b = Builtin::from_u32(d.imm)?;
                    *s.loads.get_mut(usize::from(s.nloads))? = b;
                    *regs.get_mut(usize::from(d.rd))? = Operand::Load(s.nloads);
                    s.nloads += 1;
                }
                // `pushtv`'s types are 0 to 7; an integer key's value is the register's.
                Op::Pushtv if d.imm < 8 => {
                    *s.keys.get_mut(usize::from(s.nkeys))? = *regs.get(usize::from(d.r1))?;
                    s.nkeys += 1;
                }
                _ => return None,
            }
        }
        let layout = dict.agg(agg.imm)?;
        if layout.has_str() || layout.count() != usize::from(s.nkeys) {
            return None;
        }
        s.id = agg.imm;
        s.args = [
            *regs.get(usize::from(agg.r1))?,
            *regs.get(usize::from(agg.r2))?,
        ];
        // INVARIANT: loads and keys were counted within their arrays (`get_mut` refuses
        // more), every `Load` names one made before it, and the layout was checked above.
        Some(s)
    }
}
