// SPDX-License-Identifier: GPL-2.0

//! The instruction set: opcodes, encoding, built-ins, types, scopes and the tables a
//! program refers to.

use super::*;

/// Opcodes. The numeric values are ABI: they are what the tool emits.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Do nothing.
    Nop = 0,
    /// Return `r1` (the predicate result; 0 for action programs).
    Ret = 1,
    /// `rd = r1`.
    Mov = 2,
    /// `rd = imm` sign-extended from 32 bits.
    Ldi = 3,
    /// `rd = inttab[imm]`.
    Setx = 4,
    /// `rd = reference to the string at strtab offset imm`.
    Sets = 5,
    /// `rd = r1 + r2` (wrapping).
    Add = 6,
    /// `rd = r1 - r2` (wrapping).
    Sub = 7,
    /// `rd = r1 * r2` (wrapping).
    Mul = 8,
    /// `rd = r1 / r2`, signed; faults on division by zero.
    Sdiv = 9,
    /// `rd = r1 / r2`, unsigned; faults on division by zero.
    Udiv = 10,
    /// `rd = r1 % r2`, signed; faults on division by zero.
    Srem = 11,
    /// `rd = r1 % r2`, unsigned; faults on division by zero.
    Urem = 12,
    /// `rd = r1 & r2`.
    And = 13,
    /// `rd = r1 | r2`.
    Or = 14,
    /// `rd = r1 ^ r2`.
    Xor = 15,
    /// `rd = r1 << (r2 & 63)`.
    Sll = 16,
    /// `rd = r1 >> (r2 & 63)`, logical.
    Srl = 17,
    /// `rd = r1 >> (r2 & 63)`, arithmetic.
    Sra = 18,
    /// `rd = !r1` (bitwise).
    Not = 19,
    /// `rd = -r1` (wrapping).
    Neg = 20,
    /// `rd = (r1 == 0)`.
    Lnot = 21,
    /// `rd = r1` sign-extended from `imm` bits (8, 16 or 32).
    Sext = 22,
    /// `rd = r1` zero-extended from `imm` bits (8, 16 or 32).
    Zext = 23,
    /// `rd = (r1 == r2)`.
    Eq = 24,
    /// `rd = (r1 != r2)`.
    Ne = 25,
    /// `rd = (r1 < r2)`, signed.
    Lt = 26,
    /// `rd = (r1 <= r2)`, signed.
    Le = 27,
    /// `rd = (r1 > r2)`, signed.
    Gt = 28,
    /// `rd = (r1 >= r2)`, signed.
    Ge = 29,
    /// `rd = (r1 < r2)`, unsigned.
    Ltu = 30,
    /// `rd = (r1 <= r2)`, unsigned.
    Leu = 31,
    /// `rd = (r1 > r2)`, unsigned.
    Gtu = 32,
    /// `rd = (r1 >= r2)`, unsigned.
    Geu = 33,
    /// Jump to instruction `imm` (forward).
    Ba = 34,
    /// Jump to instruction `imm` (forward) if `r1 == 0`.
    Bz = 35,
    /// Jump to instruction `imm` (forward) if `r1 != 0`.
    Bnz = 36,
    /// `rd = ` integer built-in `imm` ([`Builtin`]).
    Ldb = 37,
    /// `rd = ` string built-in `imm` ([`Builtin`]), copied into a scratch string slot.
    Ldbs = 38,
    /// `rd = *(i8 *)(r1 + simm)` from kernel memory, sign-extended.
    Ldsb = 39,
    /// `rd = *(i16 *)(r1 + simm)`, sign-extended.
    Ldsh = 40,
    /// `rd = *(i32 *)(r1 + simm)`, sign-extended.
    Ldsw = 41,
    /// `rd = *(u8 *)(r1 + simm)`.
    Ldub = 42,
    /// `rd = *(u16 *)(r1 + simm)`.
    Lduh = 43,
    /// `rd = *(u32 *)(r1 + simm)`.
    Lduw = 44,
    /// `rd = *(u64 *)(r1 + simm)`.
    Ldx = 45,
    /// `rd = ` the NUL-terminated kernel string at `r1`, copied into a scratch string slot.
    /// `imm`: bit 0 ([`KSTR_USER`]) reads the current task's user memory instead
    /// (`copyinstr`); the bits above it, if not 0, bound the bytes copied below `strsize`.
    Kstr = 46,
    /// `rd = this->[imm]`.
    Ldls = 47,
    /// `this->[imm] = r1`.
    Stls = 48,
    /// `rd = ` global scalar `imm`.
    Ldgs = 49,
    /// Global scalar `imm` `= r1`.
    Stgs = 50,
    /// `rd = self->[imm]` (dynamic variable keyed by the thread id).
    Ldts = 51,
    /// `self->[imm] = r1` (0 deletes).
    Stts = 52,
    /// `rd = var_imm[tuple]`; empties the tuple stack.
    Ldgaa = 53,
    /// `var_imm[tuple] = r1` (0 deletes); empties the tuple stack.
    Stgaa = 54,
    /// Push integer `r1` with type code `imm` ([`IntType`]) on the tuple stack.
    Pushtv = 55,
    /// Push string `r1` on the tuple stack.
    Pushts = 56,
    /// Empty the tuple stack.
    Flusht = 57,
    /// `rd = strcmp(r1, r2)` as -1, 0 or 1.
    Scmp = 58,
    /// `rd = strlen(r1)`.
    Strlen = 59,
    /// Update aggregation `imm` at key tuple with value `r1`, weight `r2`; empties the tuple.
    Agg = 60,
    /// Emit a trace record of the tuple; empties the tuple.
    Trace = 61,
    /// Emit a printf record, format `imm`, arguments from the tuple; empties the tuple.
    Printf = 62,
    /// Emit a printa record: aggregation `imm & 0xffff`, format `(imm >> 16) - 1` (0: default).
    Printa = 63,
    /// Emit a clear record for aggregation `imm`.
    Clear = 64,
    /// Emit a trunc record for aggregation `imm`, keeping `r1` entries (0: all removed).
    Trunc = 65,
    /// Emit a normalize record for aggregation `imm` with factor `r1`.
    Normalize = 66,
    /// Emit a denormalize record for aggregation `imm`.
    Denormalize = 67,
    /// Emit an exit record with status `r1`.
    Exit = 68,
    /// `rd = ` a new scratch string: `r1` followed by `r2` (truncated to strsize).
    Strjoin = 69,
    /// Write `r1` to this CPU's Intel PT stream as a PTWRITE packet (software backend).
    Ptwrite = 70,
    /// Fault with an index-out-of-bounds error unless `r1 < imm` (unsigned): the run-time
    /// bounds check of a D array subscript.
    Chkb = 71,
    /// `rd = substr(r1, r2, r_imm)`: a new scratch string, `r_imm` the length register
    /// (the compiler passes a length of `i32::MAX` for the two-argument form).
    Substr = 72,
    /// `rd = strstr(r1, r2)`: a new scratch string from the first occurrence of `r2` in `r1`, or
    /// 0 (NULL).
    Strstr = 73,
    /// `rd = strchr(r1, r2)`: a new scratch string from the first character `r2` in `r1`, or 0.
    Strchr = 74,
    /// `rd = strrchr(r1, r2)`: as `strchr` from the last occurrence.
    Strrchr = 75,
    /// `rd = index(r1, r2, r_imm)`: offset of `r2` in `r1` at or after `r_imm`, or -1.
    Index = 76,
    /// `rd = rindex(r1, r2, r_imm)`: offset of the last `r2` in `r1` at or before `r_imm`, or -1.
    Rindex = 77,
    /// `rd = strtok(r1, r2)`: the next token of `r1` (0: of the clause's last `strtok` string)
    /// cut at the delimiters `r2`, as a new scratch string, or 0 when none is left.
    Strtok = 78,
    /// `rd = lltostr(r1, r2)`: `r1` in base `r2` as a new scratch string; faults on a bad base.
    Lltostr = 79,
    /// `rd = strtoll(r1, r2)`: the integer string `r1` in base `r2`; faults on a bad base.
    Strtoll = 80,
    /// `rd = toupper(r1)`: a new scratch string.
    Toupper = 81,
    /// `rd = tolower(r1)`: a new scratch string.
    Tolower = 82,
    /// `rd = basename(r1)`: a new scratch string.
    Basename = 83,
    /// `rd = dirname(r1)`: a new scratch string.
    Dirname = 84,
    /// `rd = cleanpath(r1)`: a new scratch string.
    Cleanpath = 85,
    /// `rd = inet_ntop(r1, r2)`: the address of family `r1` (`AF_INET`, `AF_INET6`; or
    /// `link_ntop()`'s link type, `subr::LINK_FAMILY` | `ARPHRD_ETHER` or `ARPHRD_INFINIBAND`,
    /// since ABI minor 14; `subr::AF_INET6_LOOSE`, an IPv4 address inside the IPv6 one as
    /// the bare dotted quad, since minor 16) in kernel memory at `r2`, as a new scratch
    /// string; faults on another family or a bad address.
    InetNtop = 86,
    /// `rd = r1` in network byte order, `imm` bits (16, 32 or 64) wide: `hton*`/`ntoh*`.
    Hton = 87,
    /// `rd = rand()`: a weak pseudo-random non-negative `int`.
    Rand = 88,
    /// `rd = progenyof(r1)`: 1 when the current process is `r1` or one of its descendants.
    Progenyof = 89,
    /// `rd = speculation()`: a free speculation's id, or 0 when none is free.
    Speculation = 90,
    /// `speculate(r1)`: the clause's later records go to speculation `r1`'s buffer.
    Speculate = 91,
    /// `commit(r1)`: speculation `r1`'s buffers go to the principal buffers.
    Commit = 92,
    /// `discard(r1)`: speculation `r1`'s buffers are emptied.
    Discard = 93,
    /// Emit a system record, format `imm`, arguments from the tuple (destructive).
    System = 94,
    /// Send signal `r1` to the current process (`raise()`, `stop()`; destructive).
    Raise = 95,
    /// Spin `r1` nanoseconds in probe context (`chill()`; destructive, limited).
    Chill = 96,
    /// `rd = ` the kernel stack of the probe, at most `imm` frames (clamped to
    /// [`crate::stack::MAX_FRAMES`]), as a reference ([`crate::stack`]) in a scratch string
    /// slot; the empty string where there is none.
    Kstack = 97,
    /// `copyout(r1, r2, r_imm)`: `r_imm` bytes from `r1` (scratch memory, or a string as
    /// DTrace keeps it: its bytes then NULs, at most `strsize + 1`) into the current task's
    /// user memory at `r2` (destructive; not in a speculated clause).
    Copyout = 98,
    /// `copyoutstr(r1, r2, r_imm)`: string `r1` and its NUL, at most `r_imm` bytes, into the
    /// current task's user memory at `r2` (destructive; not in a speculated clause).
    Copyoutstr = 99,
    /// `rd = ` the user stack of the current thread, at most `imm` frames (clamped to
    /// [`crate::ustack::MAX_FRAMES`]), as a reference ([`crate::stack`]) in a scratch
    /// string slot; the empty string where there is none (a kernel thread).
    Ustack = 120,
    /// `rd = ` the depth of the user stack (`ustackdepth`), at most
    /// [`crate::ustack::MAX_FRAMES`].
    Ustackdepth = 121,
    /// `rd = ` the depth of the kernel stack of the probe (`stackdepth`).
    Kstackdepth = 122,
    /// `rd = ` address `r1` as a value of style `imm` ([`crate::ustack::Style`], not a
    /// stack; a user style records the current process), in a scratch string slot
    /// (`usym()`, `sym()`, ...).
    Symval = 123,
    /// `rd = ` the return address of the current user function (`ucaller`), 0 when unknown.
    Ucaller = 124,
    /// `rd = alloca(r1)`: the address of `r1` fresh bytes of the clause's scratch memory,
    /// 8-byte aligned; faults "out of scratch space" past option `scratchsize`.
    Alloca = 160,
    /// `rd = copyin(r1, r2)`: `r2` bytes of the current task's user memory at `r1` copied into
    /// fresh scratch memory (as [`Op::Alloca`]); returns its address.
    Copyin = 161,
    /// `copyinto(r1, r2, r_imm)`: `r2` bytes of user memory at `r1` into the scratch memory
    /// at register `imm`'s address.
    Copyinto = 162,
    /// `bcopy(r1, r_imm, r2)`: `r2` bytes of readable memory at `r1` into the scratch memory
    /// at register `imm`'s address. When `r1` is a string reference (no address: its tag is
    /// non-canonical), a string store into a `char[r2]` or `string` member: at most `r2 - 1`
    /// bytes of the string, then NULs up to `r2`.
    Bcopy = 163,
    /// `*(u8 *)(r1 + simm) = r2`: a store, into the clause's scratch memory only.
    Stb = 164,
    /// `*(u16 *)(r1 + simm) = r2`.
    Sth = 165,
    /// `*(u32 *)(r1 + simm) = r2`.
    Stw = 166,
    /// `*(u64 *)(r1 + simm) = r2`.
    Stx = 167,
    /// `rd = uregs[r1]`: the current thread's saved user register `r1` (DTrace's `R_*`
    /// numbering, [`UREG_COUNT`]); 0 for a kernel thread.
    Uregs = 168,
    /// `rd = ` the current task's user memory from `r1` up to `r2` as a new scratch string,
    /// at most `strsize` bytes (and `imm` if not 0), each NUL before its end a blank: a
    /// process's arguments (`curpsinfo->pr_psargs`). Read without faulting; what cannot
    /// be read ends the string (the empty string when nothing can).
    Uargs = 210,
    /// Push `n` bytes of readable memory at `r1` onto the tuple, read (without faulting)
    /// when the record is assembled: `n` is `r2` when it is below or equal to `imm`, else
    /// `imm` (a negative or oversized dynamic size takes the static one, as DTrace's
    /// `tracemem()` does). `tracemem()` and `print()`.
    Pushtm = 220,
}

/// The opcodes of the scratch memory range ([`Op::Alloca`] ..= [`Op::Uregs`]).
pub const MEM_OPS: core::ops::RangeInclusive<u8> = 160..=168;

/// Number of `uregs[]` indices: DTrace's x86-64 `R_*` numbering, `struct pt_regs` in order
/// (`R_R15` 0 .. `R_SS` 20), then `R_DS`, `R_ES`, `R_FS`, `R_GS`, `R_TRAPNO` (21..25).
pub const UREG_COUNT: u64 = 26;

/// The opcodes of the user stack range ([`Op::Ustack`] ..= [`Op::Ucaller`]), which
/// lies apart from the contiguous ones below [`NOPS`].
pub const USTACK_OPS: core::ops::RangeInclusive<u8> = 120..=124;

/// Number of opcodes; every byte value at or above it is invalid.
pub const NOPS: u8 = 100;

/// [`Op::Kstr`]'s `imm` bit for a string in user memory (`copyinstr`).
pub const KSTR_USER: u32 = 1;

impl Op {
    /// Decode an opcode byte.
    pub const fn from_u8(b: u8) -> Option<Op> {
        use Op::*;
        const ALL: [Op; NOPS as usize] = [
            Nop,
            Ret,
            Mov,
            Ldi,
            Setx,
            Sets,
            Add,
            Sub,
            Mul,
            Sdiv,
            Udiv,
            Srem,
            Urem,
            And,
            Or,
            Xor,
            Sll,
            Srl,
            Sra,
            Not,
            Neg,
            Lnot,
            Sext,
            Zext,
            Eq,
            Ne,
            Lt,
            Le,
            Gt,
            Ge,
            Ltu,
            Leu,
            Gtu,
            Geu,
            Ba,
            Bz,
            Bnz,
            Ldb,
            Ldbs,
            Ldsb,
            Ldsh,
            Ldsw,
            Ldub,
            Lduh,
            Lduw,
            Ldx,
            Kstr,
            Ldls,
            Stls,
            Ldgs,
            Stgs,
            Ldts,
            Stts,
            Ldgaa,
            Stgaa,
            Pushtv,
            Pushts,
            Flusht,
            Scmp,
            Strlen,
            Agg,
            Trace,
            Printf,
            Printa,
            Clear,
            Trunc,
            Normalize,
            Denormalize,
            Exit,
            Strjoin,
            Ptwrite,
            Chkb,
            Substr,
            Strstr,
            Strchr,
            Strrchr,
            Index,
            Rindex,
            Strtok,
            Lltostr,
            Strtoll,
            Toupper,
            Tolower,
            Basename,
            Dirname,
            Cleanpath,
            InetNtop,
            Hton,
            Rand,
            Progenyof,
            Speculation,
            Speculate,
            Commit,
            Discard,
            System,
            Raise,
            Chill,
            Kstack,
            Copyout,
            Copyoutstr,
        ];
        match b {
            120 => Some(Ustack),
            121 => Some(Ustackdepth),
            122 => Some(Kstackdepth),
            123 => Some(Symval),
            124 => Some(Ucaller),
            160 => Some(Alloca),
            161 => Some(Copyin),
            162 => Some(Copyinto),
            163 => Some(Bcopy),
            164 => Some(Stb),
            165 => Some(Sth),
            166 => Some(Stw),
            167 => Some(Stx),
            168 => Some(Uregs),
            210 => Some(Uargs),
            220 => Some(Pushtm),
            _ if (b as usize) < ALL.len() => Some(ALL[b as usize]),
            _ => None,
        }
    }

    /// Whether the op is an action, a statement of its own that is no expression and no
    /// store: it ends a statement (with the stores), and a speculated clause may run none
    /// but `trace` and `printf`.
    pub const fn is_action(self) -> bool {
        use Op::*;
        matches!(
            self,
            Agg | Trace
                | Printf
                | Printa
                | Clear
                | Trunc
                | Normalize
                | Denormalize
                | Exit
                | Ptwrite
                | System
                | Raise
                | Chill
                | Speculate
                | Commit
                | Discard
                | Copyout
                | Copyoutstr
        )
    }

    /// The mnemonic, for disassembly and error messages.
    pub fn name(self) -> &'static str {
        use Op::*;
        match self {
            Nop => "nop",
            Ret => "ret",
            Mov => "mov",
            Ldi => "ldi",
            Setx => "setx",
            Sets => "sets",
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Sdiv => "sdiv",
            Udiv => "udiv",
            Srem => "srem",
            Urem => "urem",
            And => "and",
            Or => "or",
            Xor => "xor",
            Sll => "sll",
            Srl => "srl",
            Sra => "sra",
            Not => "not",
            Neg => "neg",
            Lnot => "lnot",
            Sext => "sext",
            Zext => "zext",
            Eq => "eq",
            Ne => "ne",
            Lt => "lt",
            Le => "le",
            Gt => "gt",
            Ge => "ge",
            Ltu => "ltu",
            Leu => "leu",
            Gtu => "gtu",
            Geu => "geu",
            Ba => "ba",
            Bz => "bz",
            Bnz => "bnz",
            Ldb => "ldb",
            Ldbs => "ldbs",
            Ldsb => "ldsb",
            Ldsh => "ldsh",
            Ldsw => "ldsw",
            Ldub => "ldub",
            Lduh => "lduh",
            Lduw => "lduw",
            Ldx => "ldx",
            Kstr => "kstr",
            Ldls => "ldls",
            Stls => "stls",
            Ldgs => "ldgs",
            Stgs => "stgs",
            Ldts => "ldts",
            Stts => "stts",
            Ldgaa => "ldgaa",
            Stgaa => "stgaa",
            Pushtv => "pushtv",
            Pushts => "pushts",
            Pushtm => "pushtm",
            Flusht => "flusht",
            Scmp => "scmp",
            Strlen => "strlen",
            Agg => "agg",
            Trace => "trace",
            Printf => "printf",
            Printa => "printa",
            Clear => "clear",
            Trunc => "trunc",
            Normalize => "normalize",
            Denormalize => "denormalize",
            Exit => "exit",
            Strjoin => "strjoin",
            Ptwrite => "ptwrite",
            Chkb => "chkb",
            Substr => "substr",
            Strstr => "strstr",
            Strchr => "strchr",
            Strrchr => "strrchr",
            Index => "index",
            Rindex => "rindex",
            Strtok => "strtok",
            Lltostr => "lltostr",
            Strtoll => "strtoll",
            Toupper => "toupper",
            Tolower => "tolower",
            Basename => "basename",
            Dirname => "dirname",
            Cleanpath => "cleanpath",
            InetNtop => "inet_ntop",
            Hton => "hton",
            Rand => "rand",
            Progenyof => "progenyof",
            Speculation => "speculation",
            Speculate => "speculate",
            Commit => "commit",
            Discard => "discard",
            System => "system",
            Raise => "raise",
            Copyout => "copyout",
            Copyoutstr => "copyoutstr",
            Chill => "chill",
            Kstack => "kstack",
            Ustack => "ustack",
            Ustackdepth => "ustackdepth",
            Kstackdepth => "kstackdepth",
            Symval => "symval",
            Ucaller => "ucaller",
            Alloca => "alloca",
            Copyin => "copyin",
            Copyinto => "copyinto",
            Bcopy => "bcopy",
            Stb => "stb",
            Sth => "sth",
            Stw => "stw",
            Stx => "stx",
            Uregs => "uregs",
            Uargs => "uargs",
        }
    }
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode byte (not necessarily valid).
    pub op: u8,
    /// Destination register field.
    pub rd: u8,
    /// First source register field.
    pub r1: u8,
    /// Second source register field.
    pub r2: u8,
    /// Immediate field.
    pub imm: u32,
}

impl Insn {
    /// Decode a raw instruction word.
    pub const fn decode(w: u64) -> Insn {
        Insn {
            op: w as u8,
            rd: (w >> 8) as u8,
            r1: (w >> 16) as u8,
            r2: (w >> 24) as u8,
            imm: (w >> 32) as u32,
        }
    }

    /// Encode into a raw instruction word.
    pub const fn encode(self) -> u64 {
        self.op as u64
            | ((self.rd as u64) << 8)
            | ((self.r1 as u64) << 16)
            | ((self.r2 as u64) << 24)
            | ((self.imm as u64) << 32)
    }
}

/// Encode an instruction from its fields.
pub const fn insn(op: Op, rd: u8, r1: u8, r2: u8, imm: u32) -> u64 {
    Insn {
        op: op as u8,
        rd,
        r1,
        r2,
        imm,
    }
    .encode()
}

/// Built-in variables, numbered as the `imm` of [`Op::Ldb`] / [`Op::Ldbs`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// Process id (`tgid`).
    Pid = 0,
    /// Thread id (`pid` of the task).
    Tid = 1,
    /// CPU number.
    Cpu = 2,
    /// Nanoseconds from an NMI-safe monotonic clock.
    Timestamp = 3,
    /// Nanoseconds since the epoch.
    Walltimestamp = 4,
    /// First probe argument.
    Arg0 = 5,
    /// Second probe argument (the return value on return probes).
    Arg1 = 6,
    /// Third probe argument.
    Arg2 = 7,
    /// Fourth probe argument.
    Arg3 = 8,
    /// Fifth probe argument.
    Arg4 = 9,
    /// Sixth probe argument.
    Arg5 = 10,
    /// Return value on return probes (0 elsewhere).
    Retval = 11,
    /// Real user id.
    Uid = 12,
    /// Real group id.
    Gid = 13,
    /// Parent process id.
    Ppid = 14,
    /// Enabled probe id.
    Id = 15,
    /// Address of the current task.
    Curthread = 16,
    /// Name of the current process (`comm`): a string.
    Execname = 17,
    /// Provider of the probe: a string.
    Probeprov = 18,
    /// Module of the probe: a string.
    Probemod = 19,
    /// Function of the probe: a string.
    Probefunc = 20,
    /// Name of the probe (`entry`, `return`, ...): a string.
    Probename = 21,
    /// Seventh probe argument (on x86-64 fbt entry, the first one on the stack).
    Arg6 = 22,
    /// Eighth probe argument.
    Arg7 = 23,
    /// Ninth probe argument.
    Arg8 = 24,
    /// Tenth probe argument.
    Arg9 = 25,
    /// The error of the current system call (0 outside system-call probes).
    Errno = 26,
    /// The probed function's return address (0 where the probe has no function).
    Caller = 27,
    /// Nanoseconds the current thread has run on a CPU.
    Vtimestamp = 28,
    /// The enabled probe ID: one number per probe and clause (`probe::epid`).
    Epid = 29,
    /// The interrupt level the probe fired at: 0 in a task, 1 in a softirq, 2 in a hardirq,
    /// 3 in an NMI.
    Ipl = 30,
}

/// Number of built-ins.
pub const NBUILTINS: u32 = 31;

impl Builtin {
    /// Whether this is a probe argument, `arg0`..`arg9`: the only built-ins whose reading
    /// may fault ([`crate::action::Env::builtin_fallible`]: a USDT probe's operands).
    pub fn is_arg(self) -> bool {
        use Builtin::*;
        matches!(
            self,
            Arg0 | Arg1 | Arg2 | Arg3 | Arg4 | Arg5 | Arg6 | Arg7 | Arg8 | Arg9
        )
    }

    /// Decode a built-in number.
    pub fn from_u32(v: u32) -> Option<Builtin> {
        use Builtin::*;
        const ALL: [Builtin; NBUILTINS as usize] = [
            Pid,
            Tid,
            Cpu,
            Timestamp,
            Walltimestamp,
            Arg0,
            Arg1,
            Arg2,
            Arg3,
            Arg4,
            Arg5,
            Retval,
            Uid,
            Gid,
            Ppid,
            Id,
            Curthread,
            Execname,
            Probeprov,
            Probemod,
            Probefunc,
            Probename,
            Arg6,
            Arg7,
            Arg8,
            Arg9,
            Errno,
            Caller,
            Vtimestamp,
            Epid,
            Ipl,
        ];
        ALL.get(v as usize).copied()
    }

    /// Whether the built-in is a string (read with [`Op::Ldbs`]).
    pub fn is_string(self) -> bool {
        (Builtin::Execname as u32..=Builtin::Probename as u32).contains(&(self as u32))
    }
}

/// Type code of an integer pushed with [`Op::Pushtv`]: `log2(size) | signed << 2`.
///
/// It travels into records so that user space formats `%x` of an `int` as 32 bits, like
/// DTrace does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntType(pub u8);

impl IntType {
    /// `int64_t`, the default of D integer expressions.
    pub const I64: IntType = IntType(3 | 4);
    /// `uint64_t`.
    pub const U64: IntType = IntType(3);
    /// `int`.
    pub const I32: IntType = IntType(2 | 4);
    /// `unsigned int`.
    pub const U32: IntType = IntType(2);

    /// Build from a size in bytes (1, 2, 4, 8) and signedness.
    pub const fn new(size: u8, signed: bool) -> IntType {
        let l = match size {
            1 => 0,
            2 => 1,
            4 => 2,
            _ => 3,
        };
        IntType(l | if signed { 4 } else { 0 })
    }

    /// Size in bytes.
    pub const fn size(self) -> u8 {
        1 << (self.0 & 3)
    }

    /// Whether the type is signed.
    pub const fn signed(self) -> bool {
        self.0 & 4 != 0
    }

    /// Whether the code is a valid type code.
    pub const fn is_valid(self) -> bool {
        self.0 < 8
    }
}

/// Scope of a variable in the variable dictionary.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Global scalar (`x`).
    Global = 0,
    /// Thread-local (`self->x`): a dynamic variable keyed by the thread id.
    Thread = 1,
    /// Associative array (`x[k1, k2]`): a dynamic variable keyed by a tuple.
    Assoc = 2,
}

impl Scope {
    /// Decode a scope number.
    pub fn from_u32(v: u32) -> Option<Scope> {
        match v {
            0 => Some(Scope::Global),
            1 => Some(Scope::Thread),
            2 => Some(Scope::Assoc),
            _ => None,
        }
    }
}

/// Layout of a key tuple: count and which components are strings, packed in a `u32`
/// as `count | string_mask << 8`.
///
/// # Invariants
///
/// A valid layout has `count <= MAX_KEYS`, no mask bit at or above `count`, and no bit set in
/// bits 24..31; [`KeyLayout::is_valid`] checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct KeyLayout(pub u32);

impl KeyLayout {
    /// No keys.
    pub const NONE: KeyLayout = KeyLayout(0);

    /// Build from a count and a mask of string components.
    pub const fn new(count: u8, str_mask: u16) -> KeyLayout {
        KeyLayout(count as u32 | ((str_mask as u32) << 8))
    }

    /// Number of key components.
    pub const fn count(self) -> usize {
        (self.0 & 0xff) as usize
    }

    /// Whether component `i` is a string.
    pub const fn is_str(self, i: usize) -> bool {
        i < 16 && (self.0 >> 8) & (1 << i) != 0
    }

    /// Whether any component is a string.
    pub const fn has_str(self) -> bool {
        (self.0 >> 8) & 0xffff != 0
    }

    /// Whether the packed value is well formed.
    pub const fn is_valid(self) -> bool {
        let n = self.count();
        n <= MAX_KEYS && self.0 >> 24 == 0 && (self.0 >> 8) & !((1u32 << n) - 1) == 0
    }
}

/// What a variable id stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarInfo {
    /// Scope of the variable.
    pub scope: Scope,
    /// Key layout (empty for globals and thread-locals).
    pub keys: KeyLayout,
    /// Whether the value is a string of up to `strsize` bytes (associative arrays only)
    /// rather than a 64-bit integer.
    pub string: bool,
}

/// Flag in the scope word of a variable dictionary entry: the value is a string.
pub const VAR_STRING: u32 = 1 << 8;

/// The tables a program refers to, as the verifier and the interpreter see them.
///
/// Implemented by the parsed program image (`program::Image`) and by test doubles.
pub trait Dict {
    /// Number of entries of the integer table.
    fn int_count(&self) -> u32;
    /// Entry `idx` of the integer table.
    fn int_at(&self, idx: u32) -> Option<u64>;
    /// The string table (NUL-terminated strings).
    fn strtab(&self) -> &[u8];
    /// Variable `id`.
    fn var(&self, id: u32) -> Option<VarInfo>;
    /// Key layout of aggregation `id`.
    fn agg(&self, id: u32) -> Option<KeyLayout>;
    /// Number of printf formats.
    fn fmt_count(&self) -> u32;
    /// Number of clause-local variables.
    fn nlocals(&self) -> u32;
    /// Maximum bytes of a string value (option `strsize`).
    fn strsize(&self) -> u32;
    /// Bytes of scratch memory a clause may allocate (option `scratchsize`).
    fn scratchsize(&self) -> u32 {
        crate::limits::DEFAULT_SCRATCHSIZE
    }
}
