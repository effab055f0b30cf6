// SPDX-License-Identifier: GPL-2.0

//! The verifier: every program is checked at LOAD, trusting nothing, so the interpreter
//! runs verified code only.

use super::*;

/// Why the verifier rejected a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The program has no instruction.
    Empty,
    /// The program has more than [`MAX_INSNS`] instructions.
    TooLong,
    /// The code's byte length is not a multiple of 8.
    Misaligned,
    /// The opcode byte is not an [`Op`].
    BadOpcode(u8),
    /// A register field is `>= NREGS`.
    BadRegister(u8),
    /// The instruction writes `r0`.
    WritesR0,
    /// A field the opcode does not use is not zero.
    ReservedNonZero,
    /// A jump goes backwards or to itself.
    BackwardJump(u32),
    /// A jump goes past the last instruction.
    JumpOutOfBounds(u32),
    /// An integer-table index is out of range.
    BadIntIndex(u32),
    /// A string-table offset is out of range or not at a string start.
    BadStrOffset(u32),
    /// A string constant is longer than `strsize`.
    StringTooLong(u32),
    /// A built-in number is out of range, or of the wrong kind for the opcode.
    BadBuiltin(u32),
    /// A clause-local variable index is out of range.
    BadLocal(u32),
    /// A variable id does not exist or has another scope.
    BadVariable(u32),
    /// An aggregation id does not exist.
    BadAggregation(u32),
    /// A printf format id does not exist.
    BadFormat(u32),
    /// A sign/zero-extension width is not 8, 16 or 32.
    BadWidth(u32),
    /// An integer type code is invalid.
    BadType(u32),
    /// A register named by the immediate is `>= NREGS`.
    BadImmRegister(u32),
    /// The last instruction is not `ret`: a path falls off the end.
    NoReturn,
    /// The scratch space the program needs exceeds the limit.
    ScratchTooLarge,
    /// The tables are unusable (`strsize` or `nlocals` out of range).
    BadTables,
}

/// A verifier error: the offending instruction and the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// Index of the offending instruction (0 for whole-program errors like [`Reason::Empty`]).
    pub index: u32,
    /// The rule that was broken.
    pub reason: Reason,
}

/// Bytecode as little-endian `u64` words in a byte slice (zero-copy, any alignment).
#[derive(Clone, Copy, Debug)]
pub struct Code<'a> {
    bytes: &'a [u8],
}

impl<'a> Code<'a> {
    /// View `bytes` as code; fails unless the length is a multiple of 8.
    pub fn new(bytes: &'a [u8]) -> Result<Self, VerifyError> {
        if bytes.len() & 7 != 0 {
            return Err(VerifyError {
                index: (bytes.len() / 8) as u32,
                reason: Reason::Misaligned,
            });
        }
        Ok(Code { bytes })
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }

    /// Whether there is no instruction.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Raw instruction `i`.
    pub fn word(&self, i: usize) -> Option<u64> {
        let b = self.bytes.get(i.checked_mul(8)?..i.checked_mul(8)? + 8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Some(u64::from_le_bytes(w))
    }

    /// The underlying bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// A program that passed [`verify`]; only the verifier constructs it.
///
/// # Invariants
///
/// `code` satisfies every verifier rule against the tables it was verified with, and
/// `string_allocs` is the number of instructions that allocate a scratch string slot;
/// `mem_sites` is the number of instructions that allocate scratch memory.
#[derive(Clone, Copy, Debug)]
pub struct Verified<'a> {
    pub(super) code: Code<'a>,
    string_allocs: u32,
    mem_sites: u32,
    /// `code` decoded, when [`Verified::decode_into`] made it.
    pub(super) decoded: Option<Decoded<'a>>,
}

impl<'a> Verified<'a> {
    /// The code.
    pub fn code(&self) -> Code<'a> {
        self.code
    }

    /// Scratch string slots one run may allocate (each instruction runs at most once).
    pub fn string_allocs(&self) -> u32 {
        self.string_allocs
    }

    /// Instructions that allocate scratch memory (`alloca()`, `copyin()`): each runs at most
    /// once, so a run aligns at most this many allocations.
    pub fn mem_sites(&self) -> u32 {
        self.mem_sites
    }

    /// Whether the program has an `op` instruction.
    pub fn uses(&self, op: Op) -> bool {
        (0..self.code.len()).any(|i| {
            self.code
                .word(i)
                .is_some_and(|w| Insn::decode(w).op == op as u8)
        })
    }
}

/// How an immediate is checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ImmKind {
    Zero,
    Any,
    Int,
    Str,
    Target,
    BuiltinInt,
    BuiltinStr,
    Local,
    Var(Scope),
    Agg,
    Fmt,
    Printa,
    Width,
    Type,
    /// A third source register.
    Reg,
    /// A byte-swap width: 16, 32 or 64.
    SwapWidth,
    /// A symbol value's style ([`crate::ustack::Style`]) other than a stack.
    SymStyle,
}

/// Operand shape of an opcode: destination written, sources read, immediate kind, and
/// whether it allocates a scratch string slot.
struct Shape {
    rd: bool,
    r1: bool,
    r2: bool,
    imm: ImmKind,
    alloc: bool,
}

const fn sh(rd: bool, r1: bool, r2: bool, imm: ImmKind) -> Shape {
    Shape {
        rd,
        r1,
        r2,
        imm,
        alloc: false,
    }
}

fn shape(op: Op) -> Shape {
    use ImmKind as I;
    use Op::*;
    match op {
        Nop | Flusht | Trace => sh(false, false, false, I::Zero),
        Ret | Exit | Ptwrite => sh(false, true, false, I::Zero),
        Chkb => sh(false, true, false, I::Any),
        Mov | Not | Neg | Lnot => sh(true, true, false, I::Zero),
        Ldi => sh(true, false, false, I::Any),
        Setx => sh(true, false, false, I::Int),
        Sets => sh(true, false, false, I::Str),
        Add | Sub | Mul | Sdiv | Udiv | Srem | Urem | And | Or | Xor | Sll | Srl | Sra | Eq
        | Ne | Lt | Le | Gt | Ge | Ltu | Leu | Gtu | Geu | Scmp => sh(true, true, true, I::Zero),
        Sext | Zext => sh(true, true, false, I::Width),
        Ba => sh(false, false, false, I::Target),
        Bz | Bnz => sh(false, true, false, I::Target),
        Ldb => sh(true, false, false, I::BuiltinInt),
        Ldbs => Shape {
            alloc: true,
            ..sh(true, false, false, I::BuiltinStr)
        },
        Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx => sh(true, true, false, I::Any),
        // imm: KSTR_USER and a length bound, every value meaningful.
        Kstr => Shape {
            alloc: true,
            ..sh(true, true, false, I::Any)
        },
        // imm: a frame count, clamped by the interpreter.
        Kstack | Ustack => Shape {
            alloc: true,
            ..sh(true, false, false, I::Any)
        },
        Ustackdepth | Kstackdepth | Ucaller => sh(true, false, false, I::Zero),
        Symval => Shape {
            alloc: true,
            ..sh(true, true, false, I::SymStyle)
        },
        Strjoin => Shape {
            alloc: true,
            ..sh(true, true, true, I::Zero)
        },
        // imm: a length bound, every value meaningful.
        Uargs => Shape {
            alloc: true,
            ..sh(true, true, true, I::Any)
        },
        Ldls => sh(true, false, false, I::Local),
        Stls => sh(false, true, false, I::Local),
        Ldgs => sh(true, false, false, I::Var(Scope::Global)),
        Stgs => sh(false, true, false, I::Var(Scope::Global)),
        Ldts => sh(true, false, false, I::Var(Scope::Thread)),
        Stts => sh(false, true, false, I::Var(Scope::Thread)),
        Ldgaa => sh(true, false, false, I::Var(Scope::Assoc)),
        Stgaa => sh(false, true, false, I::Var(Scope::Assoc)),
        Pushtv => sh(false, true, false, I::Type),
        Pushts => sh(false, true, false, I::Zero),
        // imm: the static size, bounded at run time by the record buffer.
        Pushtm => sh(false, true, true, I::Any),
        Strlen => sh(true, true, false, I::Zero),
        Agg => sh(false, true, true, I::Agg),
        Printf => sh(false, false, false, I::Fmt),
        Printa => sh(false, false, false, I::Printa),
        Clear | Denormalize => sh(false, false, false, I::Agg),
        Trunc | Normalize => sh(false, true, false, I::Agg),
        Substr => Shape {
            alloc: true,
            ..sh(true, true, true, I::Reg)
        },
        Strstr | Strchr | Strrchr | Strtok | Lltostr | InetNtop => Shape {
            alloc: true,
            ..sh(true, true, true, I::Zero)
        },
        Toupper | Tolower | Basename | Dirname | Cleanpath => Shape {
            alloc: true,
            ..sh(true, true, false, I::Zero)
        },
        Index | Rindex => sh(true, true, true, I::Reg),
        Strtoll => sh(true, true, true, I::Zero),
        Hton => sh(true, true, false, I::SwapWidth),
        Rand | Speculation => sh(true, false, false, I::Zero),
        Speculate | Commit | Discard | Raise | Chill => sh(false, true, false, I::Zero),
        System => sh(false, false, false, I::Fmt),
        Progenyof => sh(true, true, false, I::Zero),
        // Scratch memory: the bump allocations are bounded at run time by `scratchsize`,
        // which `verify` reserves once for a program that allocates.
        Alloca | Uregs => sh(true, true, false, I::Zero),
        Copyin => sh(true, true, true, I::Zero),
        Copyinto | Bcopy | Copyout | Copyoutstr => sh(false, true, true, I::Reg),
        // imm: a signed offset, every value meaningful; the address is checked at run time.
        Stb | Sth | Stw | Stx => sh(false, true, true, I::Any),
    }
}

/// Length of the NUL-terminated string at `off` in `strtab`, if `off` starts one.
fn strtab_str_len(strtab: &[u8], off: usize) -> Option<usize> {
    let tail = strtab.get(off..)?;
    tail.iter().position(|&b| b == 0)
}

/// Verify `code` against `dict`, trusting nothing: every instruction, every field, every
/// table index and jump; the program must end in `ret`; the scratch it needs (locals, string
/// slots, record buffer) must fit in `scratch_limit` bytes.
pub fn verify<'a, D: Dict + ?Sized>(
    code: Code<'a>,
    dict: &D,
    scratch_limit: usize,
) -> Result<Verified<'a>, VerifyError> {
    let err = |index: usize, reason| VerifyError {
        index: index as u32,
        reason,
    };
    let n = code.len();
    if n == 0 {
        return Err(err(0, Reason::Empty));
    }
    if n > MAX_INSNS {
        return Err(err(MAX_INSNS, Reason::TooLong));
    }
    let strsize = dict.strsize();
    let nlocals = dict.nlocals();
    // The interpreter's rule for its parameters, not a copy of it.
    if VmParams::new(nlocals, strsize).is_err() {
        return Err(err(0, Reason::BadTables));
    }
    let strtab = dict.strtab();
    let mut allocs = 0u32;
    let mut sites = 0u32;
    for i in 0..n {
        let w = code.word(i).ok_or(err(i, Reason::Misaligned))?;
        let ins = Insn::decode(w);
        let op = Op::from_u8(ins.op).ok_or(err(i, Reason::BadOpcode(ins.op)))?;
        let s = shape(op);
        for (used, r) in [(s.rd, ins.rd), (s.r1, ins.r1), (s.r2, ins.r2)] {
            if used {
                if r as usize >= NREGS {
                    return Err(err(i, Reason::BadRegister(r)));
                }
            } else if r != 0 {
                return Err(err(i, Reason::ReservedNonZero));
            }
        }
        if s.rd && ins.rd == 0 {
            return Err(err(i, Reason::WritesR0));
        }
        let imm = ins.imm;
        match s.imm {
            ImmKind::Zero if imm != 0 => return Err(err(i, Reason::ReservedNonZero)),
            ImmKind::Zero | ImmKind::Any => {}
            ImmKind::Int if imm >= dict.int_count() => {
                return Err(err(i, Reason::BadIntIndex(imm)))
            }
            ImmKind::Int => {}
            ImmKind::Str => {
                let at_start = imm == 0 || strtab.get(imm as usize - 1) == Some(&0);
                match strtab_str_len(strtab, imm as usize) {
                    Some(len) if at_start => {
                        if len > strsize as usize {
                            return Err(err(i, Reason::StringTooLong(imm)));
                        }
                    }
                    _ => return Err(err(i, Reason::BadStrOffset(imm))),
                }
            }
            ImmKind::Target => {
                if imm as usize <= i {
                    return Err(err(i, Reason::BackwardJump(imm)));
                }
                if imm as usize >= n {
                    return Err(err(i, Reason::JumpOutOfBounds(imm)));
                }
            }
            ImmKind::BuiltinInt | ImmKind::BuiltinStr => {
                let want_str = s.imm == ImmKind::BuiltinStr;
                match Builtin::from_u32(imm) {
                    Some(b) if b.is_string() == want_str => {}
                    _ => return Err(err(i, Reason::BadBuiltin(imm))),
                }
            }
            ImmKind::Local if imm >= nlocals => return Err(err(i, Reason::BadLocal(imm))),
            ImmKind::Local => {}
            ImmKind::Var(scope) => match dict.var(imm) {
                Some(v) if v.scope == scope && v.keys.is_valid() => {}
                _ => return Err(err(i, Reason::BadVariable(imm))),
            },
            ImmKind::Agg => match dict.agg(imm) {
                Some(k) if k.is_valid() => {}
                _ => return Err(err(i, Reason::BadAggregation(imm))),
            },
            ImmKind::Fmt if imm >= dict.fmt_count() => return Err(err(i, Reason::BadFormat(imm))),
            ImmKind::Fmt => {}
            ImmKind::Printa => {
                let agg = imm & 0xffff;
                let fmt = imm >> 16;
                match dict.agg(agg) {
                    Some(k) if k.is_valid() => {}
                    _ => return Err(err(i, Reason::BadAggregation(agg))),
                }
                if fmt > dict.fmt_count() {
                    return Err(err(i, Reason::BadFormat(fmt - 1)));
                }
            }
            ImmKind::Width if !matches!(imm, 8 | 16 | 32) => {
                return Err(err(i, Reason::BadWidth(imm)))
            }
            ImmKind::Width => {}
            ImmKind::Type if imm >= 8 => return Err(err(i, Reason::BadType(imm))),
            ImmKind::Type => {}
            ImmKind::Reg if imm as usize >= NREGS => {
                return Err(err(i, Reason::BadImmRegister(imm)))
            }
            ImmKind::Reg => {}
            ImmKind::SwapWidth if !matches!(imm, 16 | 32 | 64) => {
                return Err(err(i, Reason::BadWidth(imm)))
            }
            ImmKind::SwapWidth => {}
            ImmKind::SymStyle => match crate::ustack::Style::from_u8(imm.min(255) as u8) {
                Some(st) if imm < 256 && st != crate::ustack::Style::Ustack => {}
                _ => return Err(err(i, Reason::BadType(imm))),
            },
        }
        // A load of a string-valued variable copies it into a new slot.
        let string_load = op == Op::Ldgaa && dict.var(imm).is_some_and(|v| v.string);
        let site = matches!(op, Op::Alloca | Op::Copyin);
        sites += site as u32;
        if s.alloc || string_load {
            allocs += 1;
        }
        if (s.alloc || string_load || site)
            && scratch_size(nlocals, strsize, allocs) + scratch_mem(dict, sites) > scratch_limit
        {
            return Err(err(i, Reason::ScratchTooLarge));
        }
    }
    if scratch_size(nlocals, strsize, allocs) + scratch_mem(dict, sites) > scratch_limit {
        return Err(err(0, Reason::ScratchTooLarge));
    }
    let last = code.word(n - 1).map(Insn::decode);
    if last.map(|l| l.op) != Some(Op::Ret as u8) {
        return Err(err(n - 1, Reason::NoReturn));
    }
    // INVARIANT: every rule above holds for every instruction.
    Ok(Verified {
        code,
        string_allocs: allocs,
        mem_sites: sites,
        decoded: None,
    })
}

/// Scratch bytes `sites` allocating instructions need: `scratchsize` for the memory they
/// hand out, and the alignment padding (at most 7 bytes) and header (8) of each.
pub fn scratch_mem<D: Dict + ?Sized>(dict: &D, sites: u32) -> usize {
    if sites == 0 {
        return 0;
    }
    dict.scratchsize().min(crate::limits::MAX_SCRATCHSIZE) as usize + 16 * sites as usize
}
