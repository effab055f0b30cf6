// SPDX-License-Identifier: GPL-2.0

//! Whole programs that predecoding recognises and the interpreter runs in one step.
//!
//! `@[pid] = count()`, `@ = sum(arg0)`, `trace(pid)` and `printf("%d %d\n", pid, arg0)`
//! are the commonest clauses there are, and each compiles to a few loads, one `pushtv` per
//! element, the update or the record, and `ret`. Dispatching those instructions one by one
//! cost about as much as the update itself. A program of that shape is found once, at LOAD
//! ([`Verified::decode_into`]), and [`Vm::run`] then does what its instructions do without
//! running them: it reads the built-in variables in program order and hands the tuple to
//! the same code the last instruction runs.

use super::*;
use crate::agg::KEY_MAX_ELEMS;

/// Built-in variables one shape may read.
pub(super) const MAX_LOADS: usize = 6;

/// Elements one shape may push; within what an [`IntKey`](crate::agg::IntKey) holds, so
/// that building an aggregation's key never fails.
pub(super) const MAX_ELEMS: usize = 6;
const _: () = assert!(MAX_ELEMS <= KEY_MAX_ELEMS && MAX_ELEMS <= MAX_TUPLE);

/// A value the shape uses: a constant (`ldi`'s, sign-extended), or the `n`th built-in
/// variable the program loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    Imm(i32),
    Load(u8),
}

/// What the program ends with, after its tuple is pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    /// `agg`: aggregation `id` at the tuple (its key), with `agg`'s two registers.
    Agg { id: u32, args: [Operand; 2] },
    /// `trace` or `printf`: a record of the tuple.
    Record { kind: RecordKind, id: u32 },
}

/// Built-in variables and constants loaded into registers, pushed as integers onto the
/// tuple, then `agg`, `trace` or `printf`, and `ret r0` (an action's end).
///
/// # Invariants
///
/// Every [`Operand::Load`] is below `nloads`; `nloads <= MAX_LOADS`, `nelems <=
/// MAX_ELEMS`, and a type is below 8 (`pushtv`'s). In the dictionary the program was
/// verified with, an [`End::Agg`]'s key has `nelems` elements, all integers, and an
/// [`End::Record`]'s format exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    loads: [Builtin; MAX_LOADS],
    nloads: u8,
    elems: [Operand; MAX_ELEMS],
    types: [u8; MAX_ELEMS],
    nelems: u8,
    pub(super) end: End,
}

impl Shape {
    /// The built-in variables the program reads, in its order.
    pub(super) fn loads(&self) -> &[Builtin] {
        // PANIC: `nloads <= MAX_LOADS` (type invariant).
        &self.loads[..usize::from(self.nloads)]
    }

    /// The tuple's elements.
    pub(super) fn values(&self) -> &[Operand] {
        // PANIC: `nelems <= MAX_ELEMS` (type invariant).
        &self.elems[..usize::from(self.nelems)]
    }

    /// The tuple's elements, with their types.
    pub(super) fn elems(&self) -> impl Iterator<Item = (Operand, IntType)> + '_ {
        // PANIC: `nelems <= MAX_ELEMS` (type invariant).
        let n = usize::from(self.nelems);
        self.elems[..n]
            .iter()
            .zip(&self.types[..n])
            .map(|(&o, &t)| (o, IntType(t)))
    }

    /// The shape of `insns` (verified, decoded), when it is one, with `dict` the dictionary
    /// the program was verified with.
    pub(super) fn recognise<D: Dict + ?Sized>(insns: &[DInsn], dict: &D) -> Option<Shape> {
        // A run starts with every register it uses at zero.
        let mut regs = [Operand::Imm(0); NREGS];
        let mut s = Shape {
            loads: [Builtin::Pid; MAX_LOADS],
            nloads: 0,
            elems: [Operand::Imm(0); MAX_ELEMS],
            types: [0; MAX_ELEMS],
            nelems: 0,
            end: End::Record {
                kind: RecordKind::Trace,
                id: 0,
            },
        };
        let (last, body) = insns.split_last()?;
        let (end, body) = body.split_last()?;
        if last.op != Op::Ret || last.r1 != 0 {
            return None;
        }
        for d in body {
            // `DInsn`'s registers are below `NREGS` (its invariant); `get` keeps that local.
            match d.op {
                Op::Ldi if d.rd != 0 => {
                    *regs.get_mut(usize::from(d.rd))? = Operand::Imm(d.imm as i32);
                }
                Op::Ldb if d.rd != 0 => {
                    let b = Builtin::from_u32(d.imm)?;
                    *s.loads.get_mut(usize::from(s.nloads))? = b;
                    *regs.get_mut(usize::from(d.rd))? = Operand::Load(s.nloads);
                    s.nloads += 1;
                }
                // `pushtv`'s types are 0 to 7; an integer element's value is the register's.
                Op::Pushtv if d.imm < 8 => {
                    let n = usize::from(s.nelems);
                    *s.elems.get_mut(n)? = *regs.get(usize::from(d.r1))?;
                    *s.types.get_mut(n)? = d.imm as u8;
                    s.nelems += 1;
                }
                _ => return None,
            }
        }
        s.end = match end.op {
            Op::Agg => {
                let layout = dict.agg(end.imm)?;
                if layout.has_str() || layout.count() != usize::from(s.nelems) {
                    return None;
                }
                End::Agg {
                    id: end.imm,
                    args: [
                        *regs.get(usize::from(end.r1))?,
                        *regs.get(usize::from(end.r2))?,
                    ],
                }
            }
            Op::Trace => End::Record {
                kind: RecordKind::Trace,
                id: 0,
            },
            Op::Printf if end.imm < dict.fmt_count() => End::Record {
                kind: RecordKind::Printf,
                id: end.imm,
            },
            _ => return None,
        };
        // INVARIANT: loads and elements were counted within their arrays (`get_mut` refuses
        // more), every `Load` names one made before it, types are below 8, and the key
        // layout and the format were checked above.
        Some(s)
    }
}
