// SPDX-License-Identifier: GPL-2.0

//! Verified code predecoded at LOAD, the form the kernel's interpreter runs.
//!
//! An instruction word is decoded once, when the program is loaded, instead of at every
//! firing: the opcode is already an [`Op`] and the register fields are known to be below
//! [`NREGS`], so the interpreter neither validates the opcode nor bounds-checks a register
//! per instruction. Everything else (table references, jumps, the tuple) is checked as for
//! raw code.

use super::shape::Shape;
use super::*;

/// One instruction of a [`Decoded`] program.
///
/// # Invariants
///
/// `rd`, `r1` and `r2` are below [`NREGS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DInsn {
    pub(super) op: Op,
    pub(super) rd: u8,
    pub(super) r1: u8,
    pub(super) r2: u8,
    pub(super) imm: u32,
}

impl DInsn {
    /// `nop`: what a decode buffer holds before [`Verified::decode_into`] fills it.
    pub const NOP: DInsn = DInsn {
        op: Op::Nop,
        rd: 0,
        r1: 0,
        r2: 0,
        imm: 0,
    };

    /// Decodes a raw word; `None` for an unknown opcode or a register out of range.
    pub(super) fn from_word(w: u64) -> Option<DInsn> {
        let i = Insn::decode(w);
        let op = Op::from_u8(i.op)?;
        let n = NREGS as u8;
        if i.rd >= n || i.r1 >= n || i.r2 >= n {
            return None;
        }
        // INVARIANT: registers checked just above.
        Some(DInsn {
            op,
            rd: i.rd,
            r1: i.r1,
            r2: i.r2,
            imm: i.imm,
        })
    }
}

impl Default for DInsn {
    fn default() -> Self {
        Self::NOP
    }
}

/// The instructions of a verified program, decoded ([`Verified::decode_into`]).
///
/// # Invariants
///
/// No register field of an instruction is at or above `nregs` (at most [`NREGS`]): the
/// interpreter reads a register an `imm` names (subroutines' third argument) as 0 there;
/// `constant` is the value the program always returns, when it is `ldi r, K; ret r`;
/// `shape` is the program's [`Shape`], when it has one.
#[derive(Clone, Copy, Debug)]
pub struct Decoded<'a> {
    insns: &'a [DInsn],
    nregs: u8,
    constant: Option<u32>,
    shape: Option<Shape>,
}

impl Decoded<'_> {
    /// Registers the program uses: those a run starts by zeroing.
    pub(super) fn nregs(&self) -> usize {
        usize::from(self.nregs).min(NREGS)
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Whether there is no instruction.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// The instructions.
    pub(super) fn insns(&self) -> &[DInsn] {
        self.insns
    }
}

/// Instruction fetch: from the [`Decoded`] form when there is one (the kernel's, decoded at
/// LOAD), else from raw words decoded and checked one by one (the tool's simulator, tests).
/// `Vm::exec` picks the form once per entry and runs one loop over it, in its one frame.
pub(super) trait Fetch {
    /// Number of instructions.
    fn count(&self) -> usize;
    /// Instruction `pc`; `None` past the end or for a word that does not decode.
    fn fetch(&self, pc: usize) -> Option<DInsn>;
}

impl Fetch for [DInsn] {
    #[inline(always)]
    fn count(&self) -> usize {
        self.len()
    }

    #[inline(always)]
    fn fetch(&self, pc: usize) -> Option<DInsn> {
        self.get(pc).copied()
    }
}

impl Fetch for Code<'_> {
    #[inline(always)]
    fn count(&self) -> usize {
        self.len()
    }

    #[inline(always)]
    fn fetch(&self, pc: usize) -> Option<DInsn> {
        raw_fetch(self, pc)
    }
}

impl Fetch for Verified<'_> {
    #[inline(always)]
    fn count(&self) -> usize {
        match &self.decoded {
            Some(d) => d.insns.len(),
            None => self.code.len(),
        }
    }

    #[inline(always)]
    fn fetch(&self, pc: usize) -> Option<DInsn> {
        match &self.decoded {
            Some(d) => d.insns.get(pc).copied(),
            None => raw_fetch(&self.code, pc),
        }
    }
}

/// Instruction `pc` of raw code. Out of line: the kernel never runs raw code, and its
/// decoding stays out of the interpreter's frame.
#[inline(never)]
fn raw_fetch(code: &Code<'_>, pc: usize) -> Option<DInsn> {
    DInsn::from_word(code.word(pc)?)
}

impl<'a> Verified<'a> {
    /// Decodes the program into `out` (as long as the code) and returns it with the decoded
    /// form attached, which [`Vm::run`] then runs; `None` when `out` has another length.
    /// `dict` is the dictionary the program was verified with, and the one it runs with.
    pub fn decode_into<D: Dict + ?Sized>(
        &self,
        dict: &D,
        out: &'a mut [DInsn],
    ) -> Option<Verified<'a>> {
        if out.len() != self.code.len() {
            return None;
        }
        let mut nregs = 1u8;
        for (i, d) in out.iter_mut().enumerate() {
            // Verified code decodes; a word that did not would fault where it is.
            *d = self.code.word(i).and_then(DInsn::from_word)?;
            nregs = nregs.max(d.rd.max(d.r1).max(d.r2) + 1);
        }
        let constant = match out {
            [l, r] if l.op == Op::Ldi && r.op == Op::Ret && r.r1 == l.rd && l.rd != 0 => {
                Some(l.imm)
            }
            _ => None,
        };
        let shape = Shape::recognise(out, dict);
        let mut v = *self;
        // INVARIANT: `nregs` is above every register field, or `NREGS`; `constant` is what
        // `ldi` loads and `ret` returns (sign-extended by `Verified::constant`); `shape` was
        // recognised in these instructions.
        v.decoded = Some(Decoded {
            insns: out,
            nregs,
            constant,
            shape,
        });
        Some(v)
    }

    /// The value the program always returns, when it is a constant (`/0/`, `/1/`): known at
    /// LOAD, a predicate like that need not run.
    pub fn constant(&self) -> Option<u64> {
        let k = self.decoded.as_ref()?.constant?;
        Some(k as i32 as i64 as u64)
    }

    /// Registers a run starts by zeroing: those the program uses, or all when it was not
    /// decoded.
    #[inline(always)]
    pub(super) fn nregs(&self) -> usize {
        self.decoded.as_ref().map_or(NREGS, |d| d.nregs())
    }

    /// Whether [`Vm::run`] runs the program in one step: straight-line loads of built-in
    /// and thread-local variables, sums and differences, then aggregation updates at
    /// integer keys, `trace()`, `printf()` and thread-local stores (`@[pid] = count()`,
    /// `self->ts = timestamp`, `/self->ts/`).
    pub fn shaped(&self) -> bool {
        self.shape().is_some()
    }

    /// The program's [`Shape`], if it was decoded and has one.
    #[inline(always)]
    pub(super) fn shape(&self) -> Option<&Shape> {
        self.decoded.as_ref()?.shape.as_ref()
    }

    /// The decoded form, if [`Verified::decode_into`] made one.
    pub fn decoded(&self) -> Option<Decoded<'a>> {
        self.decoded
    }
}
