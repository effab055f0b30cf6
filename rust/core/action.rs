// SPDX-License-Identifier: GPL-2.0

//! The action bytecode: a small register machine in the role of DTrace's DIF, its verifier and
//! its interpreter.
//!
//! Pure logic: no kernel dependency, `no_std`, no allocation. The tool compiles D clauses into
//! this bytecode; the kernel verifies every program at LOAD with [`verify`] (trusting nothing)
//! and runs verified programs in probe context with [`Vm::run`]. Everything outside the machine
//! (built-in values, kernel-memory reads, dynamic variables, aggregations, record emission) is
//! reached through the [`Env`] trait, which the kernel glue implements.
//!
//! Encoding (see `Documentation/action.rst`): every instruction is one little-endian `u64`,
//! `op | rd << 8 | r1 << 16 | r2 << 24 | imm << 32`. Jumps go forward only, so every
//! instruction runs at most once per program run: the running time is bounded by the length.

/// Number of registers. `r0` always reads as 0 and cannot be written.
pub const NREGS: usize = 16;
/// Maximum number of instructions in one program.
pub const MAX_INSNS: usize = 4096;
/// Maximum number of entries on the tuple stack (keys, printf arguments).
pub const MAX_TUPLE: usize = 8;
/// Maximum number of key components of a variable or an aggregation.
pub const MAX_KEYS: usize = 8;
/// Largest allowed `strsize` option (bytes of a string value, without its NUL).
pub const MAX_STRSIZE: u32 = 4096;
/// Largest allowed number of clause-local (`this->`) variables.
pub const MAX_LOCALS: u32 = 256;
/// Number of values passed to [`Env::agg_update`]: the value and its weight/increment.
pub const AGG_NARGS: usize = 2;

/// Tag in bits 48..63 of a register that holds a string reference.
pub const STR_TAG: u64 = 0x5354;
/// String space: the program's string table.
pub const STR_SPACE_TABLE: u64 = 0;
/// String space: the per-CPU scratch area.
pub const STR_SPACE_SCRATCH: u64 = 1;

/// Encode a string reference into a register value.
pub const fn str_ref(space: u64, offset: u32) -> u64 {
    (STR_TAG << 48) | ((space & 0xff) << 40) | offset as u64
}

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
}

/// Number of opcodes; every byte value at or above it is invalid.
pub const NOPS: u8 = 71;

impl Op {
    /// Decode an opcode byte.
    pub fn from_u8(b: u8) -> Option<Op> {
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
        ];
        ALL.get(b as usize).copied()
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
            | (self.rd as u64) << 8
            | (self.r1 as u64) << 16
            | (self.r2 as u64) << 24
            | (self.imm as u64) << 32
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
}

/// Number of built-ins.
pub const NBUILTINS: u32 = 22;

impl Builtin {
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
        ];
        ALL.get(v as usize).copied()
    }

    /// Whether the built-in is a string (read with [`Op::Ldbs`]).
    pub fn is_string(self) -> bool {
        (self as u32) >= Builtin::Execname as u32
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
        KeyLayout(count as u32 | (str_mask as u32) << 8)
    }

    /// Number of key components.
    pub const fn count(self) -> usize {
        (self.0 & 0xff) as usize
    }

    /// Whether component `i` is a string.
    pub const fn is_str(self, i: usize) -> bool {
        i < 16 && (self.0 >> 8) & (1 << i) != 0
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
}

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
}

/// A key component handed to the dynamic-variable and aggregation engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key<'a> {
    /// An integer component.
    Int(u64),
    /// A string component (without its NUL).
    Str(&'a [u8]),
}

/// Kind of an emitted record.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// `trace(expr)`: data holds the items.
    Trace = 1,
    /// `printf(fmt, ...)`: `id` is the format, data holds the arguments.
    Printf = 2,
    /// `exit(n)`: data holds one integer item.
    Exit = 3,
    /// `printa`: `id` is the aggregation, data holds one item, the format id or `u32::MAX`.
    Printa = 4,
    /// `clear(@a)`: `id` is the aggregation, no data.
    Clear = 5,
    /// `trunc(@a, n)`: `id` is the aggregation, data holds `n`.
    Trunc = 6,
    /// `normalize(@a, n)`: `id` is the aggregation, data holds `n`.
    Normalize = 7,
    /// `denormalize(@a)`: `id` is the aggregation, no data.
    Denormalize = 8,
}

impl RecordKind {
    /// Decode a record kind.
    pub fn from_u32(v: u32) -> Option<RecordKind> {
        use RecordKind::*;
        Some(match v {
            1 => Trace,
            2 => Printf,
            3 => Exit,
            4 => Printa,
            5 => Clear,
            6 => Trunc,
            7 => Normalize,
            8 => Denormalize,
            _ => return None,
        })
    }
}

/// Item tag of a string in record data; integer tags are their [`IntType`] code (0..7).
pub const ITEM_STR: u8 = 0x10;

/// A record for the principal buffer, as the interpreter hands it to [`Env::emit`].
///
/// `data` is a sequence of items: an integer is its [`IntType`] byte then 8 bytes LE; a
/// string is [`ITEM_STR`], a 2-byte LE length and the bytes. [`Items`] decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// What produced the record.
    pub kind: RecordKind,
    /// Format or aggregation id (0 when unused).
    pub id: u32,
    /// The encoded items.
    pub data: &'a [u8],
}

/// One decoded record item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// An integer with its type.
    Int(u64, IntType),
    /// A string.
    Str(&'a [u8]),
}

/// Iterator over the items of record data; stops (and sets `bad`) at malformed data.
#[derive(Clone, Debug)]
pub struct Items<'a> {
    data: &'a [u8],
    /// Set when malformed data was met.
    pub bad: bool,
}

impl<'a> Items<'a> {
    /// Iterate over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Items { data, bad: false }
    }
}

impl<'a> Iterator for Items<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        let (&tag, rest) = self.data.split_first()?;
        if tag == ITEM_STR {
            if rest.len() >= 2 {
                let n = u16::from_le_bytes([rest[0], rest[1]]) as usize;
                if let Some(s) = rest.get(2..2 + n) {
                    self.data = &rest[2 + n..];
                    return Some(Item::Str(s));
                }
            }
        } else if tag < 8 {
            if let Some(b) = rest.get(..8) {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                self.data = &rest[8..];
                return Some(Item::Int(u64::from_le_bytes(w), IntType(tag)));
            }
        }
        self.bad = true;
        self.data = &[];
        None
    }
}

/// Everything outside the machine, implemented by the kernel glue (and test doubles).
pub trait Env {
    /// Value of an integer built-in.
    fn builtin(&mut self, b: Builtin) -> u64;
    /// Copy a string built-in into `out` (at most `out.len()` bytes); returns the length.
    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize;
    /// Read `out.len()` bytes of kernel memory at `addr` without faulting; false on failure.
    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool;
    /// Load global scalar `id`.
    fn global_load(&mut self, id: u32) -> u64;
    /// Store global scalar `id`.
    fn global_store(&mut self, id: u32, value: u64);
    /// Load dynamic variable `var` at `keys`; 0 when it does not exist.
    fn dynvar_load(&mut self, var: u32, keys: &[Key<'_>]) -> u64;
    /// Store dynamic variable `var` at `keys` (0 deletes); false when the store was dropped.
    fn dynvar_store(&mut self, var: u32, keys: &[Key<'_>], value: u64) -> bool;
    /// Apply aggregation `agg` at `keys` to `args` (value, weight); false when dropped.
    fn agg_update(&mut self, agg: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool;
    /// Append a record to the principal buffer; false when it does not fit (a drop).
    fn emit(&mut self, rec: &Record<'_>) -> bool;
    /// Write `value` to this CPU's Intel PT stream (a PTW packet); false when it was lost
    /// (no PT stream configured or started, or the stream stopped or full).
    fn ptwrite(&mut self, value: u64) -> bool;
}

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
/// `string_allocs` is the number of instructions that allocate a scratch string slot.
#[derive(Clone, Copy, Debug)]
pub struct Verified<'a> {
    code: Code<'a>,
    string_allocs: u32,
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
}

/// Bytes of one scratch string slot: `strsize` plus the NUL.
pub const fn slot_size(strsize: u32) -> usize {
    strsize as usize + 1
}

/// Bytes of the record-assembly buffer for a given `strsize`.
pub const fn record_buf_size(strsize: u32) -> usize {
    let s = 3 + strsize as usize;
    MAX_TUPLE * if s > 9 { s } else { 9 }
}

/// Scratch bytes a [`Vm`] needs for `nlocals` locals and `slots` string slots.
pub const fn scratch_size(nlocals: u32, strsize: u32, slots: u32) -> usize {
    nlocals as usize * 8 + record_buf_size(strsize) + slots as usize * slot_size(strsize)
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
        Kstr => Shape {
            alloc: true,
            ..sh(true, true, false, I::Zero)
        },
        Strjoin => Shape {
            alloc: true,
            ..sh(true, true, true, I::Zero)
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
        Strlen => sh(true, true, false, I::Zero),
        Agg => sh(false, true, true, I::Agg),
        Printf => sh(false, false, false, I::Fmt),
        Printa => sh(false, false, false, I::Printa),
        Clear | Denormalize => sh(false, false, false, I::Agg),
        Trunc | Normalize => sh(false, true, false, I::Agg),
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
    if strsize == 0 || strsize > MAX_STRSIZE || nlocals > MAX_LOCALS {
        return Err(err(0, Reason::BadTables));
    }
    let strtab = dict.strtab();
    let mut allocs = 0u32;
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
        }
        if s.alloc {
            allocs += 1;
            if scratch_size(nlocals, strsize, allocs) > scratch_limit {
                return Err(err(i, Reason::ScratchTooLarge));
            }
        }
    }
    if scratch_size(nlocals, strsize, allocs) > scratch_limit {
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
    })
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
    /// More than [`MAX_TUPLE`] values pushed on the tuple stack.
    TupleOverflow,
    /// The tuple does not match the variable's or aggregation's key layout.
    KeyMismatch,
    /// The scratch area is too small for this program (the VM was sized wrongly).
    ScratchExhausted,
    /// An instruction or table reference is not valid (never happens on verified code run
    /// with the tables it was verified against).
    Invalid,
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

#[derive(Clone, Copy)]
enum TupleVal {
    Int(u64, IntType),
    Str(u64),
}

/// The interpreter state of one CPU: registers, tuple stack and the caller's scratch area.
///
/// Scratch layout: `nlocals` `u64` locals, the record-assembly buffer, then string slots of
/// `strsize + 1` bytes allocated in order during a clause.
///
/// # Invariants
///
/// `strsize` is in `1..=MAX_STRSIZE`; `next_slot` is at or after the slot area's start.
pub struct Vm<'s> {
    regs: [u64; NREGS],
    tuple: [TupleVal; MAX_TUPLE],
    tlen: usize,
    scratch: &'s mut [u8],
    nlocals: u32,
    strsize: u32,
    next_slot: usize,
    /// Losses counted since the VM was created (the caller may reset them).
    pub losses: Losses,
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
    /// A VM over `scratch` for programs with `nlocals` locals and strings of `strsize`.
    pub fn new(scratch: &'s mut [u8], nlocals: u32, strsize: u32) -> Result<Self, VmError> {
        if strsize == 0 || strsize > MAX_STRSIZE || nlocals > MAX_LOCALS {
            return Err(VmError::BadParams);
        }
        let base = scratch_size(nlocals, strsize, 0);
        if scratch.len() < base {
            return Err(VmError::ScratchTooSmall);
        }
        // INVARIANT: parameters checked; the slot area starts at `base`.
        Ok(Vm {
            regs: [0; NREGS],
            tuple: [TupleVal::Int(0, IntType::I64); MAX_TUPLE],
            tlen: 0,
            scratch,
            nlocals,
            strsize,
            next_slot: base,
            losses: Losses::default(),
        })
    }

    fn slots_start(&self) -> usize {
        scratch_size(self.nlocals, self.strsize, 0)
    }

    /// Start a clause: zero the locals and free every string slot.
    pub fn begin_clause(&mut self) {
        let l = self.nlocals as usize * 8;
        for b in self.scratch.iter_mut().take(l) {
            *b = 0;
        }
        self.next_slot = self.slots_start();
    }

    /// Value of clause-local `idx` (for tests and the glue).
    pub fn local(&self, idx: u32) -> Option<u64> {
        if idx >= self.nlocals {
            return None;
        }
        let o = idx as usize * 8;
        let b = self.scratch.get(o..o + 8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Some(u64::from_le_bytes(w))
    }

    fn set_local(&mut self, idx: u32, v: u64) -> bool {
        if idx >= self.nlocals {
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
        let sz = slot_size(self.strsize);
        let off = self.next_slot;
        if off.checked_add(sz)? > self.scratch.len() || off > u32::MAX as usize - sz {
            return None;
        }
        self.next_slot = off + sz;
        Some(off)
    }

    /// Run a verified program with `dict` (the tables it was verified against) and `env`.
    ///
    /// Returns the `ret` value, or the fault that aborted the clause. Each instruction runs at
    /// most once, so the run ends after at most `len` steps.
    pub fn run<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        prog: &Verified<'_>,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, Fault> {
        self.regs = [0; NREGS];
        self.tlen = 0;
        let code = prog.code;
        let n = code.len();
        let mut pc = 0usize;
        // Forward-only jumps make this bound redundant; it keeps termination local.
        let mut steps = 0usize;
        while pc < n && steps <= n {
            steps += 1;
            let f = |kind| Fault {
                pc: pc as u32,
                kind,
            };
            let w = code.word(pc).ok_or(f(FaultKind::Invalid))?;
            let ins = Insn::decode(w);
            let op = Op::from_u8(ins.op).ok_or(f(FaultKind::Invalid))?;
            let (rd, r1, r2) = (ins.rd as usize, ins.r1 as usize, ins.r2 as usize);
            if rd >= NREGS || r1 >= NREGS || r2 >= NREGS {
                return Err(f(FaultKind::Invalid));
            }
            let a = self.regs[r1];
            let b = self.regs[r2];
            let imm = ins.imm;
            let mut next = pc + 1;
            let mut out: Option<u64> = None;
            use Op::*;
            match op {
                Nop => {}
                Ret => return Ok(a),
                Mov => out = Some(a),
                Ldi => out = Some(imm as i32 as i64 as u64),
                Setx => out = Some(dict.int_at(imm).ok_or(f(FaultKind::Invalid))?),
                Sets => {
                    if imm as usize >= dict.strtab().len() {
                        return Err(f(FaultKind::Invalid));
                    }
                    out = Some(str_ref(STR_SPACE_TABLE, imm));
                }
                Add => out = Some(a.wrapping_add(b)),
                Sub => out = Some(a.wrapping_sub(b)),
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
                        next = imm as usize;
                    }
                }
                Ldb => {
                    let bi = Builtin::from_u32(imm).ok_or(f(FaultKind::Invalid))?;
                    out = Some(env.builtin(bi));
                }
                Ldbs => {
                    let bi = Builtin::from_u32(imm).ok_or(f(FaultKind::Invalid))?;
                    let off = self.alloc_slot().ok_or(f(FaultKind::ScratchExhausted))?;
                    let ss = self.strsize as usize;
                    let slot = &mut self.scratch[off..off + ss + 1];
                    let len = env.builtin_str(bi, &mut slot[..ss]).min(ss);
                    // Stop at an embedded NUL like a C string would.
                    let len = slot[..len].iter().position(|&c| c == 0).unwrap_or(len);
                    slot[len] = 0;
                    out = Some(str_ref(STR_SPACE_SCRATCH, off as u32));
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
                    if !env.read_kernel(addr, &mut buf[..size]) {
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
                Kstr => {
                    let off = self.alloc_slot().ok_or(f(FaultKind::ScratchExhausted))?;
                    let ss = self.strsize as usize;
                    let slot = &mut self.scratch[off..off + ss + 1];
                    let len = read_kernel_str(env, a, &mut slot[..ss])
                        .map_err(|addr| f(FaultKind::BadAddr(addr)))?;
                    slot[len] = 0;
                    out = Some(str_ref(STR_SPACE_SCRATCH, off as u32));
                }
                Strjoin => {
                    let off = self.alloc_slot().ok_or(f(FaultKind::ScratchExhausted))?;
                    let ss = self.strsize as usize;
                    let strtab = dict.strtab();
                    let (before, slot_area) = self.scratch.split_at_mut(off);
                    let slot = &mut slot_area[..ss + 1];
                    let s1 = resolve_str(strtab, before, ss, a).ok_or(f(FaultKind::BadString))?;
                    let s2 = resolve_str(strtab, before, ss, b).ok_or(f(FaultKind::BadString))?;
                    let l1 = s1.len().min(ss);
                    slot[..l1].copy_from_slice(&s1[..l1]);
                    let l2 = s2.len().min(ss - l1);
                    slot[l1..l1 + l2].copy_from_slice(&s2[..l2]);
                    slot[l1 + l2] = 0;
                    out = Some(str_ref(STR_SPACE_SCRATCH, off as u32));
                }
                Ldls => out = Some(self.local(imm).ok_or(f(FaultKind::Invalid))?),
                Stls => {
                    if !self.set_local(imm, a) {
                        return Err(f(FaultKind::Invalid));
                    }
                }
                Ldgs => out = Some(env.global_load(imm)),
                Stgs => env.global_store(imm, a),
                Ldts | Stts => {
                    let tid = env.builtin(Builtin::Tid);
                    let keys = [Key::Int(tid)];
                    if op == Ldts {
                        out = Some(env.dynvar_load(imm, &keys));
                    } else if !env.dynvar_store(imm, &keys, a) {
                        self.losses.dynvars += 1;
                    }
                }
                Ldgaa | Stgaa => {
                    let layout = match dict.var(imm) {
                        Some(v) if v.scope == Scope::Assoc => v.keys,
                        _ => return Err(f(FaultKind::Invalid)),
                    };
                    let ss = self.strsize as usize;
                    let mut keys = [Key::Int(0); MAX_KEYS];
                    let nk = build_keys(
                        &self.tuple[..self.tlen],
                        layout,
                        dict.strtab(),
                        self.scratch,
                        ss,
                        &mut keys,
                    )
                    .map_err(f)?;
                    if op == Ldgaa {
                        out = Some(env.dynvar_load(imm, &keys[..nk]));
                    } else if !env.dynvar_store(imm, &keys[..nk], a) {
                        self.losses.dynvars += 1;
                    }
                    self.tlen = 0;
                }
                Pushtv | Pushts => {
                    if self.tlen >= MAX_TUPLE {
                        return Err(f(FaultKind::TupleOverflow));
                    }
                    self.tuple[self.tlen] = if op == Pushtv {
                        let t = IntType(imm as u8);
                        if imm >= 8 {
                            return Err(f(FaultKind::Invalid));
                        }
                        TupleVal::Int(a, t)
                    } else {
                        // Validate now so the fault points at the push.
                        resolve_str(dict.strtab(), self.scratch, self.strsize as usize, a)
                            .ok_or(f(FaultKind::BadString))?;
                        TupleVal::Str(a)
                    };
                    self.tlen += 1;
                }
                Flusht => self.tlen = 0,
                Scmp => {
                    let ss = self.strsize as usize;
                    let strtab = dict.strtab();
                    let s1 =
                        resolve_str(strtab, self.scratch, ss, a).ok_or(f(FaultKind::BadString))?;
                    let s2 =
                        resolve_str(strtab, self.scratch, ss, b).ok_or(f(FaultKind::BadString))?;
                    out = Some(match s1.cmp(s2) {
                        core::cmp::Ordering::Less => -1i64 as u64,
                        core::cmp::Ordering::Equal => 0,
                        core::cmp::Ordering::Greater => 1,
                    });
                }
                Strlen => {
                    let s = resolve_str(dict.strtab(), self.scratch, self.strsize as usize, a)
                        .ok_or(f(FaultKind::BadString))?;
                    out = Some(s.len() as u64);
                }
                Agg => {
                    let layout = dict.agg(imm).ok_or(f(FaultKind::Invalid))?;
                    let ss = self.strsize as usize;
                    let mut keys = [Key::Int(0); MAX_KEYS];
                    let nk = build_keys(
                        &self.tuple[..self.tlen],
                        layout,
                        dict.strtab(),
                        self.scratch,
                        ss,
                        &mut keys,
                    )
                    .map_err(f)?;
                    if !env.agg_update(imm, &keys[..nk], &[a, b]) {
                        self.losses.aggs += 1;
                    }
                    self.tlen = 0;
                }
                Trace | Printf => {
                    let (kind, id) = if op == Trace {
                        (RecordKind::Trace, 0)
                    } else {
                        if imm >= dict.fmt_count() {
                            return Err(f(FaultKind::Invalid));
                        }
                        (RecordKind::Printf, imm)
                    };
                    let len = self.assemble(dict.strtab()).map_err(f)?;
                    self.tlen = 0;
                    self.emit(env, kind, id, len);
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
                        self.losses.ptwrites += 1;
                    }
                }
            }
            if let Some(v) = out {
                if rd == 0 {
                    return Err(f(FaultKind::Invalid));
                }
                self.regs[rd] = v;
            }
            pc = next;
        }
        // Verified code ends in `ret`; running off the end means unverified code.
        Err(Fault {
            pc: pc as u32,
            kind: FaultKind::Invalid,
        })
    }

    /// Encode the tuple into the record buffer; returns its length.
    fn assemble(&mut self, strtab: &[u8]) -> Result<usize, FaultKind> {
        let ss = self.strsize as usize;
        let rb_start = self.nlocals as usize * 8;
        let rb_len = record_buf_size(self.strsize);
        let (head, slots) = self.scratch.split_at_mut(rb_start + rb_len);
        let rb = &mut head[rb_start..];
        let slots_base = rb_start + rb_len;
        let mut n = 0usize;
        for t in &self.tuple[..self.tlen] {
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

    fn emit<E: Env + ?Sized>(&mut self, env: &mut E, kind: RecordKind, id: u32, len: usize) {
        let rb_start = self.nlocals as usize * 8;
        let data = self.scratch.get(rb_start..rb_start + len).unwrap_or(&[]);
        if !env.emit(&Record { kind, id, data }) {
            self.losses.records += 1;
        }
    }

    fn emit_int<E: Env + ?Sized>(&mut self, env: &mut E, kind: RecordKind, id: u32, v: u64) {
        let mut d = [0u8; 9];
        d[0] = IntType::I64.0;
        d[1..].copy_from_slice(&v.to_le_bytes());
        if !env.emit(&Record { kind, id, data: &d }) {
            self.losses.records += 1;
        }
    }

    fn emit_int_none<E: Env + ?Sized>(&mut self, env: &mut E, kind: RecordKind, id: u32) {
        if !env.emit(&Record {
            kind,
            id,
            data: &[],
        }) {
            self.losses.records += 1;
        }
    }
}

/// Copy the kernel string at `addr` into `out` chunk by chunk (never reading across a page
/// boundary past the NUL); returns its length (truncated to `out.len()`), or the failing
/// address.
fn read_kernel_str<E: Env + ?Sized>(env: &mut E, addr: u64, out: &mut [u8]) -> Result<usize, u64> {
    const PAGE: u64 = 4096;
    let mut done = 0usize;
    while done < out.len() {
        let at = addr.wrapping_add(done as u64);
        let to_page = (PAGE - at % PAGE) as usize;
        let chunk = to_page.min(out.len() - done);
        if !env.read_kernel(at, &mut out[done..done + chunk]) {
            return Err(at);
        }
        if let Some(p) = out[done..done + chunk].iter().position(|&c| c == 0) {
            return Ok(done + p);
        }
        done += chunk;
    }
    Ok(out.len())
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
    let off = (r & 0xffff_ffff) as usize;
    if (r >> 32) & 0xff != 0 {
        return None;
    }
    let tail = match (r >> 40) & 0xff {
        STR_SPACE_TABLE => strtab.get(off..)?,
        STR_SPACE_SCRATCH => scratch.get(off.checked_sub(base)?..)?,
        _ => return None,
    };
    let lim = tail.len().min(strsize);
    let len = tail[..lim].iter().position(|&c| c == 0).unwrap_or(lim);
    Some(&tail[..len])
}

/// Turn the tuple into keys, checking it against `layout`; returns the key count.
fn build_keys<'b>(
    tuple: &[TupleVal],
    layout: KeyLayout,
    strtab: &'b [u8],
    scratch: &'b [u8],
    strsize: usize,
    keys: &mut [Key<'b>; MAX_KEYS],
) -> Result<usize, FaultKind> {
    if tuple.len() != layout.count() || tuple.len() > MAX_KEYS {
        return Err(FaultKind::KeyMismatch);
    }
    for (i, t) in tuple.iter().enumerate() {
        keys[i] = match (*t, layout.is_str(i)) {
            (TupleVal::Int(v, _), false) => Key::Int(v),
            (TupleVal::Str(r), true) => {
                Key::Str(resolve_str(strtab, scratch, strsize, r).ok_or(FaultKind::BadString)?)
            }
            _ => return Err(FaultKind::KeyMismatch),
        };
    }
    Ok(tuple.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insn_roundtrip() {
        let w = insn(Op::Add, 1, 2, 3, 0xdead_beef);
        let i = Insn::decode(w);
        assert_eq!((i.op, i.rd, i.r1, i.r2, i.imm), (6, 1, 2, 3, 0xdead_beef));
        assert_eq!(i.encode(), w);
    }

    #[test]
    fn every_opcode_decodes_to_itself() {
        for b in 0..=255u8 {
            match Op::from_u8(b) {
                Some(op) => assert_eq!(op as u8, b),
                None => assert!(b >= NOPS),
            }
        }
    }

    #[test]
    fn key_layout_validity() {
        assert!(KeyLayout::new(2, 0b10).is_valid());
        assert!(!KeyLayout::new(2, 0b100).is_valid());
        assert!(!KeyLayout::new(9, 0).is_valid());
    }
}
