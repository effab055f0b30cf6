// SPDX-License-Identifier: GPL-2.0

//! Error codes across the ABI: how the kernel encodes why a LOAD failed or a clause faulted,
//! and how the tool turns the codes back into words. One table for both sides.
//!
//! A LOAD error travels as `struct oxt_load`'s `err_code` (what) and `err_arg` (its operand);
//! a runtime fault as an error record's `id` (what) and payload (instruction, address).

use crate::abi;
use crate::action::{FaultKind, Reason};
use crate::agg::ParamError;
use crate::dynvar;
use crate::program::{DictFault, ImageError, LoadError, OptionFault, Part, ProbeFault};
use core::fmt;

/// The errno a LOAD refusal returns with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// `EINVAL`: the image or its use of the kernel is invalid.
    Inval,
    /// `ENOENT`: a probe description enables nothing.
    NoEnt,
    /// `E2BIG`: the program's memory is over the budget.
    TooBig,
    /// `EPERM`: a probe on a function that is unsafe to probe.
    Perm,
}

/// Why LOAD refused a program: the errno and what `struct oxt_load` carries back. Every
/// refusal is made here, so that its code is one of this file's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The errno.
    pub errno: Errno,
    /// `err_kind`: one of `abi::LOADERR_*`.
    pub kind: u32,
    /// `err_index`: the clause, probe description or attach entry.
    pub index: u32,
    /// `err_part`: 0 predicate, 1 actions.
    pub part: u32,
    /// `err_insn`: the instruction, for verifier errors.
    pub insn: u32,
    /// `err_code`: what, per [`ImageMsg`] or [`ReasonMsg`].
    pub code: u32,
    /// `err_arg`: its operand.
    pub arg: u32,
}

/// Image code of a dynamic variable chunk above [`dynvar::MAX_CHUNK_BYTES`].
const CODE_DYNVAR_CHUNK: u32 = 21;
/// Image code of a `dynvarsize` that does not hold one chunk.
const CODE_DYNVARSIZE: u32 = 22;
/// Image code of [`Refusal::end_reserve`].
const CODE_END_RESERVE: u32 = 23;

impl Refusal {
    const fn new(kind: u32, errno: Errno) -> Self {
        Self {
            errno,
            kind,
            index: 0,
            part: 0,
            insn: 0,
            code: 0,
            arg: 0,
        }
    }

    /// A malformed image.
    pub fn image(e: &ImageError) -> Self {
        let (code, arg) = image_code(e);
        Self {
            code,
            arg,
            ..Self::new(abi::LOADERR_IMAGE, Errno::Inval)
        }
    }

    /// A clause the verifier rejects.
    pub fn verify(e: &LoadError) -> Self {
        let (code, arg) = reason_code(&e.error.reason);
        Self {
            index: e.clause,
            part: match e.part {
                Part::Predicate => 0,
                Part::Actions => 1,
            },
            insn: e.error.index,
            code,
            arg,
            ..Self::new(abi::LOADERR_VERIFY, Errno::Inval)
        }
    }

    /// Aggregation `id` has parameters its function refuses.
    pub fn agg_params(id: u32, why: ParamError) -> Self {
        Self::image(&ImageError::BadAggParams { index: id, why })
    }

    /// The dynamic variables need chunks of `chunk` bytes, more than the chunk limit.
    pub fn dynvar_chunk(chunk: usize) -> Self {
        Self {
            code: CODE_DYNVAR_CHUNK,
            arg: chunk.min(u32::MAX as usize) as u32,
            ..Self::new(abi::LOADERR_IMAGE, Errno::Inval)
        }
    }

    /// `dynvarsize` does not hold one chunk of `chunk` bytes and its hash bucket.
    pub fn dynvarsize(chunk: usize) -> Self {
        Self {
            code: CODE_DYNVARSIZE,
            arg: (chunk + dynvar::BUCKET_BYTES).min(u32::MAX as usize) as u32,
            ..Self::new(abi::LOADERR_IMAGE, Errno::Inval)
        }
    }

    /// Option `bufpolicy` fill: the END probe's records may need `need` bytes, which leaves
    /// nothing of the principal buffer for the other probes.
    pub fn end_reserve(need: u64) -> Self {
        Self {
            code: CODE_END_RESERVE,
            arg: need.min(u32::MAX as u64) as u32,
            ..Self::new(abi::LOADERR_IMAGE, Errno::Inval)
        }
    }

    /// Attach entry `entry` names a function that is unsafe to probe, for `why`.
    pub fn unsafe_probe(entry: u32, why: crate::probesafe::Why) -> Self {
        Self {
            index: entry,
            code: why as u32,
            ..Self::new(abi::LOADERR_UNSAFE, Errno::Perm)
        }
    }

    /// Uattach entry `entry` is malformed (`uprobe::check_uattach`): `why`, and its operand
    /// `arg` (the USDT operand's index for `UattachError::Operand`).
    pub fn uattach(entry: u32, why: crate::uprobe::UattachError, arg: u32) -> Self {
        Self {
            index: entry,
            code: why as u32,
            arg,
            ..Self::new(
                abi::LOADERR_UATTACH,
                match why {
                    crate::uprobe::UattachError::TooManyArgs => Errno::TooBig,
                    _ => Errno::Inval,
                },
            )
        }
    }

    /// Probe description `desc` enables no probe.
    pub fn probe_missing(desc: u32) -> Self {
        Self {
            index: desc,
            ..Self::new(abi::LOADERR_PROBE, Errno::NoEnt)
        }
    }

    /// The program's memory `need` is over a budget that leaves `avail` bytes: the one
    /// consumer's (`global` false) or what all consumers share.
    pub fn memory(need: &crate::limits::LoadMemory, avail: u64, global: bool) -> Self {
        let kib = |b: u64| (b.div_ceil(1024)).min(u32::MAX as u64) as u32;
        Self {
            index: need.ncpus,
            part: global as u32,
            insn: kib(need.total()),
            code: need.largest(),
            arg: (avail / 1024).min(u32::MAX as u64) as u32,
            ..Self::new(abi::LOADERR_MEMORY, Errno::TooBig)
        }
    }

    /// An inconsistency a checked image cannot have.
    pub const fn internal() -> Self {
        Self::new(abi::LOADERR_NONE, Errno::Inval)
    }
}

/// `(err_code, err_arg)` of an image error. The low byte of the code is the variant; the next
/// byte a sub-reason (section or fault kind).
pub fn image_code(e: &ImageError) -> (u32, u32) {
    use ImageError::*;
    let sub = |v: u32, s: u32| v | (s << 8);
    match *e {
        TooShort => (1, 0),
        TooLarge => (2, 0),
        BadMagic => (3, 0),
        BadVersion(v) => (4, v as u32),
        BadHeaderSize(v) => (5, v as u32),
        SizeMismatch { header, .. } => (6, header),
        ReservedNonZero(off) => (7, off as u32),
        SectionMisaligned(s) => (sub(8, s as u32), 0),
        SectionOverlap(s) => (sub(9, s as u32), 0),
        SectionOutOfBounds(s) => (sub(10, s as u32), 0),
        SectionLength(s) => (sub(11, s as u32), 0),
        BadStrtab => (12, 0),
        TooManyLocals(n) => (13, n),
        NoClauses => (14, 0),
        BadProbe { index, why } => (sub(15, probe_fault(why)), index),
        BadClause { index, why } => (sub(16, why as u32), index),
        BadVar { index, why } => (sub(17, why as u32), index),
        BadAgg { index, why } => (sub(18, why as u32), index),
        BadAggParams { index, why } => (
            sub(18, DictFault::Params as u32) | (param_code(&why) << 16),
            index,
        ),
        BadFmt(i) => (19, i),
        BadOption { index, why } => (sub(20, option_fault(why)), index),
    }
}

/// The code of a parameter error (bits 16-23 of an image code; `LlqRange`'s argument in
/// bits 24-31).
fn param_code(e: &ParamError) -> u32 {
    use ParamError::*;
    match *e {
        UnknownFunction(c) => 1 | ((c as u32) << 8),
        UnexpectedParameter => 2,
        LqLowRange => 3,
        LqHighRange => 4,
        LqHighNotAboveLow => 5,
        LqStepNotPositive => 6,
        LqStepRange => 7,
        LqStepTooLarge => 8,
        LqStepTooSmall => 9,
        LlqRange(n) => 10 | ((n as u32) << 8),
        LlqFactorTooSmall => 11,
        LlqMagnitudeRange => 12,
        LlqStepsZero => 13,
        LlqStepsDontDivideFactor => 14,
        LlqStepsUneven => 15,
        LlqMagnitudeTooBig => 16,
        TooManyBuckets => 17,
    }
}

/// The parameter error of [`param_code`]'s code.
pub fn param_error(code: u32) -> Option<ParamError> {
    use ParamError::*;
    let arg = (code >> 8) as u8;
    Some(match code & 0xff {
        1 => UnknownFunction(arg),
        2 => UnexpectedParameter,
        3 => LqLowRange,
        4 => LqHighRange,
        5 => LqHighNotAboveLow,
        6 => LqStepNotPositive,
        7 => LqStepRange,
        8 => LqStepTooLarge,
        9 => LqStepTooSmall,
        10 => LlqRange(arg),
        11 => LlqFactorTooSmall,
        12 => LlqMagnitudeRange,
        13 => LlqStepsZero,
        14 => LlqStepsDontDivideFactor,
        15 => LlqStepsUneven,
        16 => LlqMagnitudeTooBig,
        17 => TooManyBuckets,
        _ => return None,
    })
}

fn probe_fault(f: ProbeFault) -> u32 {
    match f {
        ProbeFault::Kind(_) => 0,
        ProbeFault::FuncOffset => 1,
        ProbeFault::FuncPattern => 2,
        ProbeFault::Field => 3,
        ProbeFault::TickPeriod => 4,
    }
}

fn option_fault(f: OptionFault) -> u32 {
    match f {
        OptionFault::Key(_) => 0,
        OptionFault::Duplicate => 1,
        OptionFault::Range => 2,
    }
}

const SECTIONS: [&str; 9] = [
    "probes",
    "clauses",
    "code",
    "integers",
    "strings",
    "variables",
    "aggregations",
    "formats",
    "options",
];

/// Words for an image error code, as [`image_code`] made it.
pub struct ImageMsg {
    /// `err_code`.
    pub code: u32,
    /// `err_arg`.
    pub arg: u32,
}

impl ImageMsg {
    /// The low 16 bits of the code of refused aggregation parameters (the validator's
    /// reason is in the bits above).
    pub const AGG_PARAMS: u32 = 18 | ((DictFault::Params as u32) << 8);
}

impl fmt::Display for ImageMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (v, s, a) = (self.code & 0xff, (self.code >> 8) & 0xff, self.arg);
        let sec = SECTIONS.get(s as usize).copied().unwrap_or("?");
        const PROBE: [&str; 5] = [
            "kind",
            "function offset",
            "function pattern",
            "field",
            "tick period",
        ];
        const CLAUSE: [&str; 3] = ["probe range", "predicate range", "action range"];
        const DICT: [&str; 5] = ["id", "kind", "key layout", "name", "parameters"];
        const OPTION: [&str; 3] = ["unknown key", "duplicate", "value out of range"];
        let pick = |t: &'static [&'static str]| t.get(s as usize).copied().unwrap_or("?");
        match v {
            1 => write!(f, "image shorter than its header"),
            2 => write!(f, "image too large"),
            3 => write!(f, "not a program image (bad magic)"),
            4 => write!(f, "image format version {a} not supported"),
            5 => write!(f, "bad header size {a}"),
            6 => write!(f, "image size {a} in the header does not match"),
            7 => write!(f, "reserved header field at offset {a} not zero"),
            8 => write!(f, "section {sec} misaligned"),
            9 => write!(f, "section {sec} overlaps another"),
            10 => write!(f, "section {sec} out of bounds"),
            11 => write!(f, "section {sec} length not a multiple of its entry"),
            12 => write!(f, "malformed string table"),
            13 => write!(f, "too many clause-local variables ({a})"),
            14 => write!(f, "no clauses"),
            15 => write!(f, "probe description {a}: bad {}", pick(&PROBE)),
            16 => write!(f, "clause {a}: bad {}", pick(&CLAUSE)),
            17 => write!(f, "variable {a}: bad {}", pick(&DICT)),
            18 if s == DictFault::Params as u32 => match param_error(self.code >> 16) {
                Some(e) => write!(f, "aggregation {a}: {e}"),
                None => write!(f, "aggregation {a}: bad parameters"),
            },
            18 => write!(f, "aggregation {a}: bad {}", pick(&DICT)),
            19 => write!(f, "printf format {a} malformed"),
            20 => write!(f, "option {a}: {}", pick(&OPTION)),
            CODE_DYNVAR_CHUNK => write!(
                f,
                "dynamic variables need {a}-byte chunks, more than {} (lower strsize or use fewer string keys)",
                dynvar::MAX_CHUNK_BYTES
            ),
            CODE_DYNVARSIZE => write!(
                f,
                "dynvarsize too small: one dynamic variable needs {a} bytes"
            ),
            CODE_END_RESERVE => write!(
                f,
                "END enablings exceed size of principal buffer (bufpolicy fill keeps {a} bytes of it for END: raise bufsize)"
            ),
            _ => write!(f, "image error {:#x} ({a})", self.code),
        }
    }
}

/// `(err_code, err_arg)` of a verifier reason.
pub fn reason_code(r: &Reason) -> (u32, u32) {
    use Reason::*;
    match *r {
        Empty => (1, 0),
        TooLong => (2, 0),
        Misaligned => (3, 0),
        BadOpcode(o) => (4, o as u32),
        BadRegister(x) => (5, x as u32),
        WritesR0 => (6, 0),
        ReservedNonZero => (7, 0),
        BackwardJump(t) => (8, t),
        JumpOutOfBounds(t) => (9, t),
        BadIntIndex(i) => (10, i),
        BadStrOffset(o) => (11, o),
        StringTooLong(n) => (12, n),
        BadBuiltin(b) => (13, b),
        BadLocal(l) => (14, l),
        BadVariable(v) => (15, v),
        BadAggregation(a) => (16, a),
        BadFormat(x) => (17, x),
        BadWidth(w) => (18, w),
        BadType(t) => (19, t),
        NoReturn => (20, 0),
        ScratchTooLarge => (21, 0),
        BadTables => (22, 0),
        BadImmRegister(r) => (23, r),
    }
}

/// Words for a verifier reason code, as [`reason_code`] made it.
pub struct ReasonMsg {
    /// `err_code`.
    pub code: u32,
    /// `err_arg`.
    pub arg: u32,
}

impl fmt::Display for ReasonMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.arg;
        match self.code {
            1 => write!(f, "empty program"),
            2 => write!(f, "program too long"),
            3 => write!(f, "code not a whole number of instructions"),
            4 => write!(f, "invalid opcode {a:#x}"),
            5 => write!(f, "invalid register r{a}"),
            6 => write!(f, "writes r0"),
            7 => write!(f, "unused instruction field not zero"),
            8 => write!(f, "backward jump to {a}"),
            9 => write!(f, "jump past the end to {a}"),
            10 => write!(f, "integer table index {a} out of range"),
            11 => write!(f, "string table offset {a} invalid"),
            12 => write!(f, "string constant of {a} bytes longer than strsize"),
            13 => write!(f, "invalid built-in {a}"),
            14 => write!(f, "clause-local variable {a} out of range"),
            15 => write!(f, "unknown variable {a}"),
            16 => write!(f, "unknown aggregation {a}"),
            17 => write!(f, "unknown printf format {a}"),
            18 => write!(f, "invalid width {a}"),
            19 => write!(f, "invalid type {a}"),
            20 => write!(f, "a path does not end in ret"),
            21 => write!(
                f,
                "needs more than {} bytes of scratch space (lower strsize or use fewer strings)",
                crate::limits::MAX_SCRATCH
            ),
            22 => write!(f, "tables inconsistent"),
            23 => write!(f, "invalid register r{a} in the immediate"),
            c => write!(f, "verifier reason {c} ({a})"),
        }
    }
}

/// Error-record `id` and address of a runtime fault.
pub fn fault_code(k: &FaultKind) -> (u32, u64) {
    match *k {
        FaultKind::DivZero => (1, 0),
        FaultKind::BadAddr(a) => (2, a),
        FaultKind::BadString => (3, 0),
        FaultKind::TupleOverflow => (4, 0),
        FaultKind::KeyMismatch => (5, 0),
        FaultKind::ScratchExhausted => (6, 0),
        FaultKind::Invalid => (7, 0),
        FaultKind::BadIndex(i) => (8, i),
        FaultKind::IllegalOp => (9, 0),
    }
}

/// Words for a runtime fault, as DTrace says them.
pub struct FaultMsg {
    /// Error-record `id`.
    pub code: u32,
    /// The address, for bad reads.
    pub addr: u64,
}

impl fmt::Display for FaultMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            1 => write!(f, "division by zero"),
            2 => write!(f, "invalid address ({:#x})", self.addr),
            // A string that names none: NULL (a subroutine's "not found"), as DTrace words
            // a read of it.
            3 => write!(f, "invalid address (0x0)"),
            4 => write!(f, "tuple stack overflow"),
            5 => write!(f, "key does not match the variable's layout"),
            6 => write!(f, "out of scratch space"),
            7 => write!(f, "invalid instruction"),
            8 => write!(f, "index out of bounds ({})", self.addr as i64),
            9 => write!(f, "illegal operation"),
            c => write!(f, "fault {c}"),
        }
    }
}
