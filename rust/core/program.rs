// SPDX-License-Identifier: GPL-2.0

//! The program image: what the tool sends to the kernel at LOAD.
//!
//! Pure logic: no kernel dependency, `no_std`, no allocation. The tool fills [`Parts`] and
//! writes the image with [`Parts::write`]; the kernel parses the bytes it copied from user
//! space with [`Image::parse`] (zero-copy, every field validated, never panics) and verifies
//! every clause's bytecode with [`Image::verify`].
//!
//! Layout (all little-endian, see `Documentation/action.rst`): a 96-byte header, then nine
//! sections in a fixed order, each 8-byte aligned: probe descriptions, clauses, code, integer
//! table, string table, variable dictionary, aggregation dictionary, printf formats, options.

use crate::action::{
    self, Code, Dict, KeyLayout, Scope, VarInfo, Verified, VerifyError, VAR_STRING,
};
use crate::dynvar::DEFAULT_DYNVARSIZE;

/// `"OXTP"` as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"OXTP");
/// Image format version.
pub const VERSION: u16 = 1;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 96;
pub use crate::limits::{MAX_FUNC_LEN, MAX_IMAGE_SIZE, TICK_MAX_NS, TICK_MIN_NS};

/// The sections, in image order.
#[repr(usize)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Probe descriptions ([`ProbeDesc`], 24 bytes each).
    Probes = 0,
    /// Clauses ([`ClauseDesc`], 32 bytes each).
    Clauses = 1,
    /// Bytecode (8 bytes per instruction).
    Code = 2,
    /// Integer table (8 bytes per entry).
    Ints = 3,
    /// String table (NUL-terminated strings; starts and ends with a NUL).
    Strtab = 4,
    /// Variable dictionary ([`VarDesc`], 16 bytes each).
    Vars = 5,
    /// Aggregation dictionary ([`AggDesc`], 48 bytes each).
    Aggs = 6,
    /// printf formats ([`FmtDesc`], 8 bytes each).
    Fmts = 7,
    /// Options ([`OptKey`] entries, 16 bytes each).
    Options = 8,
}

/// Number of sections.
pub const NSECTIONS: usize = 9;

const ENTRY_SIZE: [usize; NSECTIONS] = [24, 32, 8, 8, 1, 16, 48, 8, 16];

impl Section {
    /// All sections in order.
    pub const ALL: [Section; NSECTIONS] = [
        Section::Probes,
        Section::Clauses,
        Section::Code,
        Section::Ints,
        Section::Strtab,
        Section::Vars,
        Section::Aggs,
        Section::Fmts,
        Section::Options,
    ];

    /// Bytes of one entry.
    pub fn entry_size(self) -> usize {
        match self {
            Section::Probes => ENTRY_SIZE[0],
            Section::Clauses => ENTRY_SIZE[1],
            Section::Code => ENTRY_SIZE[2],
            Section::Ints => ENTRY_SIZE[3],
            Section::Strtab => ENTRY_SIZE[4],
            Section::Vars => ENTRY_SIZE[5],
            Section::Aggs => ENTRY_SIZE[6],
            Section::Fmts => ENTRY_SIZE[7],
            Section::Options => ENTRY_SIZE[8],
        }
    }
}

/// Kind of a probe description.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// `fbt::FUNC:entry` (also `kprobe:FUNC`).
    FbtEntry = 1,
    /// `fbt::FUNC:return` (also `kretprobe:FUNC`).
    FbtReturn = 2,
    /// `BEGIN`.
    Begin = 3,
    /// `END`.
    End = 4,
    /// `tick-N`: `arg` is the period in ns.
    Tick = 5,
    /// `syscall::NAME:entry`: `func` the call's name, `arg` its number.
    SyscallEntry = 6,
    /// `syscall::NAME:return`: as [`ProbeKind::SyscallEntry`].
    SyscallReturn = 7,
    /// `profile-N`: fires on every online CPU; `arg` is the period in ns.
    Profile = 8,
    /// `tracepoint:SUBSYS:EVENT`: `func` is `SUBSYS:EVENT`, `arg` the event's id (perf's
    /// tracepoint `config`).
    Tracepoint = 9,
    /// `dtrace:::ERROR`: fires in probe context when a clause faults.
    Error = 10,
    /// `pidN:MODULE:FUNC:entry`: a uprobe at a user function's first instruction (LOAD's
    /// uattach table); `argN` the function's integer arguments.
    PidEntry = 11,
    /// `pidN:MODULE:FUNC:return`: a uprobe on each of a function's returning instructions;
    /// `arg0` the instruction's offset in the function, `arg1` the return value.
    PidReturn = 12,
    /// `pidN:MODULE:FUNC:OFFSET`: a uprobe on the instruction at a hex offset.
    PidOffset = 13,
    /// `PROVIDERN:MODULE:FUNC:NAME`: a USDT probe (a `.note.stapsdt` site); `argN` its
    /// operands.
    Usdt = 14,
}

impl ProbeKind {
    /// Decode a probe kind.
    pub fn from_u32(v: u32) -> Option<ProbeKind> {
        Some(match v {
            1 => ProbeKind::FbtEntry,
            2 => ProbeKind::FbtReturn,
            3 => ProbeKind::Begin,
            4 => ProbeKind::End,
            5 => ProbeKind::Tick,
            6 => ProbeKind::SyscallEntry,
            7 => ProbeKind::SyscallReturn,
            8 => ProbeKind::Profile,
            9 => ProbeKind::Tracepoint,
            10 => ProbeKind::Error,
            11 => ProbeKind::PidEntry,
            12 => ProbeKind::PidReturn,
            13 => ProbeKind::PidOffset,
            14 => ProbeKind::Usdt,
            _ => return None,
        })
    }
}

/// A probe description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeDesc {
    /// What to attach to.
    pub kind: ProbeKind,
    /// String-table offset of the function glob (fbt), 0 otherwise.
    pub func: u32,
    /// Period in ns (tick), 0 otherwise.
    pub arg: u64,
}

/// A clause: the probes it is enabled on, its predicate and its actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClauseDesc {
    /// Index of the clause's first probe description.
    pub probe_first: u32,
    /// Number of probe descriptions (at least 1).
    pub probe_count: u32,
    /// First instruction of the predicate in the code section.
    pub pred_start: u32,
    /// Instructions of the predicate; 0 means no predicate.
    pub pred_len: u32,
    /// First instruction of the actions.
    pub act_start: u32,
    /// Instructions of the actions (at least 1).
    pub act_len: u32,
}

/// A variable dictionary entry; its id is its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarDesc {
    /// String-table offset of the name.
    pub name: u32,
    /// Scope.
    pub scope: Scope,
    /// Key layout (empty unless [`Scope::Assoc`]).
    pub keys: KeyLayout,
    /// String-valued ([`Scope::Assoc`] only; encoded as [`VAR_STRING`] in the scope word).
    pub string: bool,
}

pub use crate::agg::AggKind;

/// An aggregation dictionary entry; its id is its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggDesc {
    /// String-table offset of the name (without `@`; empty for `@`).
    pub name: u32,
    /// Function.
    pub func: AggKind,
    /// Key layout.
    pub keys: KeyLayout,
    /// Function parameters (see [`AggKind`]); zero when unused.
    pub params: [i64; 4],
}

/// A printf format: offset of its text in the string table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FmtDesc {
    /// String-table offset of the format.
    pub fmt: u32,
}

/// Option keys.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptKey {
    /// Principal buffer size per CPU, bytes.
    Bufsize = 1,
    /// Buffer switch interval, ns.
    Switchrate = 2,
    /// Dynamic variable memory, bytes.
    Dynvarsize = 3,
    /// Dynamic variable cleaner interval, ns.
    Cleanrate = 4,
    /// Aggregation buffer size per CPU, bytes.
    Aggsize = 5,
    /// Aggregation snapshot interval, ns.
    Aggrate = 6,
    /// Maximum string size, bytes.
    Strsize = 7,
    /// Number of speculations.
    Nspec = 8,
    /// Speculative buffer size per speculation and CPU, bytes.
    Specsize = 9,
    /// Scratch memory a clause may allocate (`alloca()`, `copyin()`), bytes.
    Scratchsize = 10,
    /// Principal buffer policy: `buffer::POLICY_SWITCH`, `POLICY_FILL` or `POLICY_RING`
    /// (ABI 1.15).
    Bufpolicy = 11,
}

impl OptKey {
    /// Decode an option key.
    pub fn from_u32(v: u32) -> Option<OptKey> {
        use OptKey::*;
        Some(match v {
            1 => Bufsize,
            2 => Switchrate,
            3 => Dynvarsize,
            4 => Cleanrate,
            5 => Aggsize,
            6 => Aggrate,
            7 => Strsize,
            8 => Nspec,
            9 => Specsize,
            10 => Scratchsize,
            11 => Bufpolicy,
            _ => return None,
        })
    }

    /// Inclusive range of valid values.
    pub const fn range(self) -> (u64, u64) {
        use crate::limits::*;
        match self {
            OptKey::Bufsize | OptKey::Aggsize => (MIN_BUFSIZE, MAX_BUFSIZE),
            OptKey::Dynvarsize => (MIN_DYNVARSIZE, MAX_DYNVARSIZE),
            OptKey::Switchrate | OptKey::Aggrate => (MIN_RATE_NS, MAX_RATE_NS),
            OptKey::Cleanrate => (MIN_CLEANRATE_NS, MAX_RATE_NS),
            OptKey::Strsize => (MIN_STRSIZE as u64, MAX_STRSIZE as u64),
            OptKey::Nspec => (1, MAX_NSPEC),
            OptKey::Specsize => (MIN_SPECSIZE, MAX_SPECSIZE),
            OptKey::Scratchsize => (8, MAX_SCRATCHSIZE as u64),
            OptKey::Bufpolicy => (crate::buffer::POLICY_SWITCH, crate::buffer::POLICY_RING),
        }
    }

    /// `v` as DTrace takes it before the range check: a size below its smallest block
    /// (`bufsize`, `aggsize`, `dynvarsize`, `specsize`) is rounded up to that block instead
    /// of refused; every other value is unchanged. Both the compiler and LOAD apply it.
    pub const fn round_up(self, v: u64) -> u64 {
        match self {
            OptKey::Bufsize | OptKey::Aggsize | OptKey::Dynvarsize | OptKey::Specsize => {
                let lo = self.range().0;
                if v < lo {
                    lo
                } else {
                    v
                }
            }
            _ => v,
        }
    }

    /// The D option name.
    pub fn name(self) -> &'static str {
        use OptKey::*;
        match self {
            Bufsize => "bufsize",
            Switchrate => "switchrate",
            Dynvarsize => "dynvarsize",
            Cleanrate => "cleanrate",
            Aggsize => "aggsize",
            Aggrate => "aggrate",
            Strsize => "strsize",
            Nspec => "nspec",
            Specsize => "specsize",
            Scratchsize => "scratchsize",
            Bufpolicy => "bufpolicy",
        }
    }

    /// Look up by D option name.
    pub fn from_name(s: &str) -> Option<OptKey> {
        use OptKey::*;
        [
            Bufsize,
            Switchrate,
            Dynvarsize,
            Cleanrate,
            Aggsize,
            Aggrate,
            Strsize,
            Nspec,
            Specsize,
            Scratchsize,
            Bufpolicy,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// The options of a program, with DTrace's defaults for those not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Principal buffer size per CPU, bytes (default 4 MiB).
    pub bufsize: u64,
    /// Buffer switch interval, ns (default 1 s).
    pub switchrate: u64,
    /// Dynamic variable memory, bytes (default [`DEFAULT_DYNVARSIZE`], 4 MiB).
    pub dynvarsize: u64,
    /// Cleaner interval, ns (default 101 Hz).
    pub cleanrate: u64,
    /// Aggregation buffer size per CPU, bytes (default 4 MiB).
    pub aggsize: u64,
    /// Aggregation snapshot interval, ns (default 1 s).
    pub aggrate: u64,
    /// Maximum string size, bytes (default 256).
    pub strsize: u64,
    /// Speculations (default 1).
    pub nspec: u64,
    /// Speculative buffer per speculation and CPU, bytes (default 32 KiB).
    pub specsize: u64,
    /// Scratch memory of a clause, bytes (default 256).
    pub scratchsize: u64,
    /// Principal buffer policy (default `buffer::POLICY_SWITCH`).
    pub bufpolicy: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bufsize: 4 << 20,
            switchrate: 1_000_000_000,
            dynvarsize: DEFAULT_DYNVARSIZE as u64,
            cleanrate: 9_900_990,
            aggsize: 4 << 20,
            aggrate: 1_000_000_000,
            strsize: 256,
            nspec: 1,
            specsize: 32 << 10,
            scratchsize: crate::limits::DEFAULT_SCRATCHSIZE as u64,
            bufpolicy: crate::buffer::POLICY_SWITCH,
        }
    }
}

impl Options {
    /// The value of `key`.
    pub fn get(&self, key: OptKey) -> u64 {
        match key {
            OptKey::Bufsize => self.bufsize,
            OptKey::Switchrate => self.switchrate,
            OptKey::Dynvarsize => self.dynvarsize,
            OptKey::Cleanrate => self.cleanrate,
            OptKey::Aggsize => self.aggsize,
            OptKey::Aggrate => self.aggrate,
            OptKey::Strsize => self.strsize,
            OptKey::Nspec => self.nspec,
            OptKey::Specsize => self.specsize,
            OptKey::Scratchsize => self.scratchsize,
            OptKey::Bufpolicy => self.bufpolicy,
        }
    }

    /// Set `key`.
    pub fn set(&mut self, key: OptKey, v: u64) {
        match key {
            OptKey::Bufsize => self.bufsize = v,
            OptKey::Switchrate => self.switchrate = v,
            OptKey::Dynvarsize => self.dynvarsize = v,
            OptKey::Cleanrate => self.cleanrate = v,
            OptKey::Aggsize => self.aggsize = v,
            OptKey::Aggrate => self.aggrate = v,
            OptKey::Strsize => self.strsize = v,
            OptKey::Nspec => self.nspec = v,
            OptKey::Specsize => self.specsize = v,
            OptKey::Scratchsize => self.scratchsize = v,
            OptKey::Bufpolicy => self.bufpolicy = v,
        }
    }
}

/// Why an image was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// Shorter than the header.
    TooShort,
    /// Larger than [`MAX_IMAGE_SIZE`].
    TooLarge,
    /// The magic is not [`MAGIC`].
    BadMagic,
    /// The version is not [`VERSION`].
    BadVersion(u16),
    /// The header size field is not [`HEADER_SIZE`].
    BadHeaderSize(u16),
    /// The total size field differs from the byte count.
    SizeMismatch {
        /// Size in the header.
        header: u32,
        /// Bytes given.
        actual: usize,
    },
    /// A reserved field is not zero (byte offset in the image).
    ReservedNonZero(usize),
    /// A section is not 8-byte aligned.
    SectionMisaligned(Section),
    /// A section starts before the previous one ends (or inside the header).
    SectionOverlap(Section),
    /// A section extends past the image.
    SectionOutOfBounds(Section),
    /// A section's size is not a multiple of its entry size.
    SectionLength(Section),
    /// The string table is empty, does not start or does not end with a NUL.
    BadStrtab,
    /// `nlocals` exceeds [`action::MAX_LOCALS`].
    TooManyLocals(u32),
    /// There is no clause.
    NoClauses,
    /// A probe description is invalid.
    BadProbe {
        /// Index of the probe description.
        index: u32,
        /// What is wrong.
        why: ProbeFault,
    },
    /// A clause is invalid.
    BadClause {
        /// Index of the clause.
        index: u32,
        /// What is wrong.
        why: ClauseFault,
    },
    /// A variable entry is invalid.
    BadVar {
        /// Index of the entry.
        index: u32,
        /// What is wrong.
        why: DictFault,
    },
    /// An aggregation entry is invalid.
    BadAgg {
        /// Index of the entry.
        index: u32,
        /// What is wrong.
        why: DictFault,
    },
    /// An aggregation's parameters are refused by [`crate::agg::check_params`].
    BadAggParams {
        /// Index of the aggregation.
        index: u32,
        /// The validator's reason.
        why: crate::agg::ParamError,
    },
    /// A printf format's string offset is invalid.
    BadFmt(u32),
    /// An option entry is invalid.
    BadOption {
        /// Index of the entry.
        index: u32,
        /// What is wrong.
        why: OptionFault,
    },
}

/// What is wrong with a probe description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeFault {
    /// Unknown kind.
    Kind(u32),
    /// The function string offset is invalid or not at a string start.
    FuncOffset,
    /// The function pattern is empty, too long or has a character outside `[A-Za-z0-9_.*?]`.
    FuncPattern,
    /// A field that must be 0 for this kind is not.
    Field,
    /// A tick period is outside `TICK_MIN_NS..=TICK_MAX_NS`.
    TickPeriod,
}

/// What is wrong with a clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClauseFault {
    /// No probe, or the probe range is out of bounds.
    Probes,
    /// The predicate's instruction range is out of the code section.
    PredRange,
    /// The actions' instruction range is empty or out of the code section.
    ActRange,
}

/// What is wrong with a dictionary entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DictFault {
    /// The id field differs from the index.
    Id,
    /// Unknown scope or function.
    Kind,
    /// Invalid key layout (or keys on a scope that has none).
    Keys,
    /// The name offset is invalid.
    Name,
    /// Invalid function parameters.
    Params,
}

/// What is wrong with an option entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionFault {
    /// Unknown key.
    Key(u32),
    /// Given twice.
    Duplicate,
    /// Value outside [`OptKey::range`].
    Range,
}

fn rd_u16(b: &[u8], o: usize) -> u16 {
    match b.get(o..o + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

fn rd_u32(b: &[u8], o: usize) -> u32 {
    match b.get(o..o + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

fn rd_u64(b: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(o..o + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// Whether `off` starts a NUL-terminated string of `strtab`.
fn str_at(strtab: &[u8], off: u32) -> Option<&[u8]> {
    let off = off as usize;
    if off != 0 && strtab.get(off - 1) != Some(&0) {
        return None;
    }
    let tail = strtab.get(off..)?;
    let n = tail.iter().position(|&c| c == 0)?;
    Some(&tail[..n])
}

/// A parsed, validated image; views into the caller's bytes.
///
/// # Invariants
///
/// Every section slice is in bounds with a length that is a multiple of its entry size and
/// every entry passed the checks of [`Image::parse`]; the bytecode is not verified until
/// [`Image::verify`].
#[derive(Clone, Copy, Debug)]
pub struct Image<'a> {
    sec: [&'a [u8]; NSECTIONS],
    offs: [u32; NSECTIONS],
    nlocals: u32,
    options: Options,
}

/// A clause whose predicate and actions passed the verifier.
#[derive(Clone, Copy, Debug)]
pub struct VerifiedClause<'a> {
    /// The predicate, if any.
    pub pred: Option<Verified<'a>>,
    /// The actions.
    pub act: Verified<'a>,
    /// Scratch bytes one firing of this clause needs.
    pub scratch: usize,
}

/// Which program of a clause a verifier error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The predicate.
    Predicate,
    /// The actions.
    Actions,
}

/// A clause failed verification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// Index of the clause.
    pub clause: u32,
    /// Predicate or actions.
    pub part: Part,
    /// The verifier's error (instruction index relative to that program).
    pub error: VerifyError,
}

impl<'a> Image<'a> {
    /// Parse and validate `bytes`. Never panics; rejects anything malformed.
    pub fn parse(bytes: &'a [u8]) -> Result<Image<'a>, ImageError> {
        if bytes.len() > MAX_IMAGE_SIZE {
            return Err(ImageError::TooLarge);
        }
        if bytes.len() < HEADER_SIZE {
            return Err(ImageError::TooShort);
        }
        if rd_u32(bytes, 0) != MAGIC {
            return Err(ImageError::BadMagic);
        }
        let v = rd_u16(bytes, 4);
        if v != VERSION {
            return Err(ImageError::BadVersion(v));
        }
        let hs = rd_u16(bytes, 6);
        if hs as usize != HEADER_SIZE {
            return Err(ImageError::BadHeaderSize(hs));
        }
        let total = rd_u32(bytes, 8);
        if total as usize != bytes.len() {
            return Err(ImageError::SizeMismatch {
                header: total,
                actual: bytes.len(),
            });
        }
        let nlocals = rd_u32(bytes, 12);
        if nlocals > action::MAX_LOCALS {
            return Err(ImageError::TooManyLocals(nlocals));
        }
        if rd_u64(bytes, 88) != 0 {
            return Err(ImageError::ReservedNonZero(88));
        }
        let mut sec: [&[u8]; NSECTIONS] = [&[]; NSECTIONS];
        let mut offs = [0u32; NSECTIONS];
        let mut prev_end = HEADER_SIZE;
        for s in Section::ALL {
            let off = rd_u32(bytes, 16 + 8 * s as usize) as usize;
            let size = rd_u32(bytes, 20 + 8 * s as usize) as usize;
            if off & 7 != 0 {
                return Err(ImageError::SectionMisaligned(s));
            }
            if off < prev_end {
                return Err(ImageError::SectionOverlap(s));
            }
            let end = off
                .checked_add(size)
                .filter(|&e| e <= bytes.len())
                .ok_or(ImageError::SectionOutOfBounds(s))?;
            if size.checked_rem(s.entry_size()) != Some(0) {
                return Err(ImageError::SectionLength(s));
            }
            sec[s as usize] = &bytes[off..end];
            offs[s as usize] = off as u32;
            prev_end = end;
        }
        let strtab = sec[Section::Strtab as usize];
        if strtab.first() != Some(&0) || strtab.last() != Some(&0) {
            return Err(ImageError::BadStrtab);
        }
        let mut img = Image {
            sec,
            offs,
            nlocals,
            options: Options::default(),
        };
        img.check_options()?;
        img.check_probes()?;
        img.check_clauses()?;
        img.check_vars()?;
        img.check_aggs()?;
        for i in 0..img.count(Section::Fmts) {
            let e = img.entry(Section::Fmts, i);
            if str_at(strtab, rd_u32(e, 0)).is_none() {
                return Err(ImageError::BadFmt(i as u32));
            }
            if rd_u32(e, 4) != 0 {
                return Err(ImageError::ReservedNonZero(img.abs_off(
                    Section::Fmts,
                    i,
                    4,
                )));
            }
        }
        // INVARIANT: every section and entry has been checked above.
        Ok(img)
    }

    /// Byte offset in the image of `field` of entry `i` of section `s`.
    fn abs_off(&self, s: Section, i: usize, field: usize) -> usize {
        self.offs[s as usize] as usize + i * s.entry_size() + field
    }

    /// Number of entries in section `s`.
    pub fn count(&self, s: Section) -> usize {
        self.sec[s as usize]
            .len()
            .checked_div(s.entry_size())
            .unwrap_or(0)
    }

    fn entry(&self, s: Section, i: usize) -> &'a [u8] {
        let sz = s.entry_size();
        self.sec[s as usize].get(i * sz..i * sz + sz).unwrap_or(&[])
    }

    /// The raw bytes of section `s`.
    pub fn section(&self, s: Section) -> &'a [u8] {
        self.sec[s as usize]
    }

    fn check_options(&mut self) -> Result<(), ImageError> {
        let mut seen = 0u32;
        for i in 0..self.count(Section::Options) {
            let e = self.entry(Section::Options, i);
            let index = i as u32;
            let k = rd_u32(e, 0);
            let key = OptKey::from_u32(k).ok_or(ImageError::BadOption {
                index,
                why: OptionFault::Key(k),
            })?;
            if rd_u32(e, 4) != 0 {
                return Err(ImageError::BadOption {
                    index,
                    why: OptionFault::Key(k),
                });
            }
            if seen & (1 << k) != 0 {
                return Err(ImageError::BadOption {
                    index,
                    why: OptionFault::Duplicate,
                });
            }
            seen |= 1 << k;
            let v = key.round_up(rd_u64(e, 8));
            let (lo, hi) = key.range();
            if v < lo || v > hi {
                return Err(ImageError::BadOption {
                    index,
                    why: OptionFault::Range,
                });
            }
            self.options.set(key, v);
        }
        Ok(())
    }

    fn check_probes(&self) -> Result<(), ImageError> {
        let strtab = self.strtab();
        for i in 0..self.count(Section::Probes) {
            let e = self.entry(Section::Probes, i);
            let bad = |why| ImageError::BadProbe {
                index: i as u32,
                why,
            };
            let k = rd_u32(e, 0);
            let kind = ProbeKind::from_u32(k).ok_or(bad(ProbeFault::Kind(k)))?;
            let (flags, func, resv, arg) =
                (rd_u32(e, 4), rd_u32(e, 8), rd_u32(e, 12), rd_u64(e, 16));
            if flags != 0 || resv != 0 {
                return Err(bad(ProbeFault::Field));
            }
            match kind {
                ProbeKind::FbtEntry | ProbeKind::FbtReturn => {
                    let s = str_at(strtab, func).ok_or(bad(ProbeFault::FuncOffset))?;
                    let ok_char = |c: &u8| c.is_ascii_alphanumeric() || b"_.*?".contains(c);
                    if s.is_empty() || s.len() > MAX_FUNC_LEN || !s.iter().all(ok_char) {
                        return Err(bad(ProbeFault::FuncPattern));
                    }
                    if arg != 0 {
                        return Err(bad(ProbeFault::Field));
                    }
                }
                ProbeKind::Begin | ProbeKind::End | ProbeKind::Error => {
                    if func != 0 || arg != 0 {
                        return Err(bad(ProbeFault::Field));
                    }
                }
                ProbeKind::Tick | ProbeKind::Profile => {
                    if func != 0 {
                        return Err(bad(ProbeFault::Field));
                    }
                    if !(TICK_MIN_NS..=TICK_MAX_NS).contains(&arg) {
                        return Err(bad(ProbeFault::TickPeriod));
                    }
                }
                ProbeKind::SyscallEntry | ProbeKind::SyscallReturn => {
                    let s = str_at(strtab, func).ok_or(bad(ProbeFault::FuncOffset))?;
                    let ok_char = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
                    if s.is_empty() || s.len() > MAX_FUNC_LEN || !s.iter().all(ok_char) {
                        return Err(bad(ProbeFault::FuncPattern));
                    }
                    if arg >= crate::limits::MAX_SYSCALL_NR as u64 {
                        return Err(bad(ProbeFault::Field));
                    }
                }
                ProbeKind::Tracepoint => {
                    let s = str_at(strtab, func).ok_or(bad(ProbeFault::FuncOffset))?;
                    let ok_char = |c: &u8| c.is_ascii_alphanumeric() || b"_:".contains(c);
                    let colons = s.iter().filter(|&&c| c == b':').count();
                    if colons != 1 || s.len() > MAX_FUNC_LEN || !s.iter().all(ok_char) {
                        return Err(bad(ProbeFault::FuncPattern));
                    }
                }
                // Placed by LOAD's uattach table; the description needs nothing else.
                ProbeKind::PidEntry
                | ProbeKind::PidReturn
                | ProbeKind::PidOffset
                | ProbeKind::Usdt => {
                    if func != 0 || arg != 0 {
                        return Err(bad(ProbeFault::Field));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_clauses(&self) -> Result<(), ImageError> {
        let n = self.count(Section::Clauses);
        if n == 0 {
            return Err(ImageError::NoClauses);
        }
        let nprobes = self.count(Section::Probes) as u64;
        let ncode = self.count(Section::Code) as u64;
        for i in 0..n {
            let e = self.entry(Section::Clauses, i);
            let bad = |why| ImageError::BadClause {
                index: i as u32,
                why,
            };
            let c = self.clause_raw(i);
            if c.probe_count == 0 || c.probe_first as u64 + c.probe_count as u64 > nprobes {
                return Err(bad(ClauseFault::Probes));
            }
            if c.pred_start as u64 + c.pred_len as u64 > ncode {
                return Err(bad(ClauseFault::PredRange));
            }
            if c.act_len == 0 || c.act_start as u64 + c.act_len as u64 > ncode {
                return Err(bad(ClauseFault::ActRange));
            }
            if rd_u64(e, 24) != 0 {
                return Err(ImageError::ReservedNonZero(self.abs_off(
                    Section::Clauses,
                    i,
                    24,
                )));
            }
        }
        Ok(())
    }

    fn check_vars(&self) -> Result<(), ImageError> {
        let strtab = self.strtab();
        for i in 0..self.count(Section::Vars) {
            let e = self.entry(Section::Vars, i);
            let bad = |why| ImageError::BadVar {
                index: i as u32,
                why,
            };
            if rd_u32(e, 0) != i as u32 {
                return Err(bad(DictFault::Id));
            }
            let sw = rd_u32(e, 4);
            let scope = Scope::from_u32(sw & !VAR_STRING).ok_or(bad(DictFault::Kind))?;
            if sw & VAR_STRING != 0 && scope != Scope::Assoc {
                return Err(bad(DictFault::Kind));
            }
            let keys = KeyLayout(rd_u32(e, 8));
            let keys_ok = match scope {
                Scope::Assoc => keys.is_valid() && keys.count() > 0,
                _ => keys.0 == 0,
            };
            if !keys_ok {
                return Err(bad(DictFault::Keys));
            }
            if str_at(strtab, rd_u32(e, 12)).is_none() {
                return Err(bad(DictFault::Name));
            }
        }
        Ok(())
    }

    fn check_aggs(&self) -> Result<(), ImageError> {
        let strtab = self.strtab();
        for i in 0..self.count(Section::Aggs) {
            let e = self.entry(Section::Aggs, i);
            let bad = |why| ImageError::BadAgg {
                index: i as u32,
                why,
            };
            if rd_u32(e, 0) != i as u32 {
                return Err(bad(DictFault::Id));
            }
            let func = AggKind::from_u32(rd_u32(e, 4)).ok_or(bad(DictFault::Kind))?;
            if !KeyLayout(rd_u32(e, 8)).is_valid() {
                return Err(bad(DictFault::Keys));
            }
            if str_at(strtab, rd_u32(e, 12)).is_none() {
                return Err(bad(DictFault::Name));
            }
            let p = [0, 1, 2, 3].map(|j| rd_u64(e, 16 + 8 * j) as i64);
            if let Err(why) = crate::agg::check_params(func, &p) {
                return Err(ImageError::BadAggParams {
                    index: i as u32,
                    why,
                });
            }
        }
        Ok(())
    }

    fn clause_raw(&self, i: usize) -> ClauseDesc {
        let e = self.entry(Section::Clauses, i);
        ClauseDesc {
            probe_first: rd_u32(e, 0),
            probe_count: rd_u32(e, 4),
            pred_start: rd_u32(e, 8),
            pred_len: rd_u32(e, 12),
            act_start: rd_u32(e, 16),
            act_len: rd_u32(e, 20),
        }
    }

    /// The options (defaults for those not given).
    pub fn options(&self) -> Options {
        self.options
    }

    /// Number of probe descriptions.
    pub fn probe_count(&self) -> usize {
        self.count(Section::Probes)
    }

    /// Probe description `i`.
    pub fn probe(&self, i: usize) -> Option<ProbeDesc> {
        if i >= self.probe_count() {
            return None;
        }
        let e = self.entry(Section::Probes, i);
        Some(ProbeDesc {
            kind: ProbeKind::from_u32(rd_u32(e, 0))?,
            func: rd_u32(e, 8),
            arg: rd_u64(e, 16),
        })
    }

    /// The function pattern of probe `i` (fbt), or the system call's name (syscall); empty
    /// for other probes.
    pub fn probe_func(&self, i: usize) -> Option<&'a [u8]> {
        let p = self.probe(i)?;
        str_at(self.sec[Section::Strtab as usize], p.func)
    }

    /// Number of clauses.
    pub fn clause_count(&self) -> usize {
        self.count(Section::Clauses)
    }

    /// Clause `i`.
    pub fn clause(&self, i: usize) -> Option<ClauseDesc> {
        (i < self.clause_count()).then(|| self.clause_raw(i))
    }

    fn code_range(&self, start: u32, len: u32) -> Option<Code<'a>> {
        let c = self.sec[Section::Code as usize];
        let s = start as usize * 8;
        Code::new(c.get(s..s + len as usize * 8)?).ok()
    }

    /// Number of integer-table entries.
    pub fn int_count_raw(&self) -> usize {
        self.count(Section::Ints)
    }

    /// Variable `id`.
    pub fn var_desc(&self, id: u32) -> Option<VarDesc> {
        if id as usize >= self.count(Section::Vars) {
            return None;
        }
        let e = self.entry(Section::Vars, id as usize);
        let sw = rd_u32(e, 4);
        Some(VarDesc {
            scope: Scope::from_u32(sw & !VAR_STRING)?,
            keys: KeyLayout(rd_u32(e, 8)),
            name: rd_u32(e, 12),
            string: sw & VAR_STRING != 0,
        })
    }

    /// Number of variables.
    pub fn var_count(&self) -> usize {
        self.count(Section::Vars)
    }

    /// Aggregation `id`.
    pub fn agg_desc(&self, id: u32) -> Option<AggDesc> {
        if id as usize >= self.count(Section::Aggs) {
            return None;
        }
        let e = self.entry(Section::Aggs, id as usize);
        Some(AggDesc {
            func: AggKind::from_u32(rd_u32(e, 4))?,
            keys: KeyLayout(rd_u32(e, 8)),
            name: rd_u32(e, 12),
            params: [0, 1, 2, 3].map(|j| rd_u64(e, 16 + 8 * j) as i64),
        })
    }

    /// Number of aggregations.
    pub fn agg_count(&self) -> usize {
        self.count(Section::Aggs)
    }

    /// Format `id`'s text.
    pub fn fmt_str(&self, id: u32) -> Option<&'a [u8]> {
        if id as usize >= self.count(Section::Fmts) {
            return None;
        }
        let e = self.entry(Section::Fmts, id as usize);
        str_at(self.sec[Section::Strtab as usize], rd_u32(e, 0))
    }

    /// The string at `off` in the string table.
    pub fn string(&self, off: u32) -> Option<&'a [u8]> {
        str_at(self.sec[Section::Strtab as usize], off)
    }

    /// Number of clause-local variables.
    pub fn nlocals(&self) -> u32 {
        self.nlocals
    }

    /// Verify clause `i`'s predicate and actions; `scratch_limit` bounds the scratch one
    /// firing may use.
    pub fn verify_clause(
        &self,
        i: usize,
        scratch_limit: usize,
    ) -> Result<VerifiedClause<'a>, LoadError> {
        let c = self.clause(i).ok_or(LoadError {
            clause: i as u32,
            part: Part::Actions,
            error: VerifyError {
                index: 0,
                reason: action::Reason::Empty,
            },
        })?;
        let ss = self.strsize();
        let le = |part, error| LoadError {
            clause: i as u32,
            part,
            error,
        };
        let range_err = VerifyError {
            index: 0,
            reason: action::Reason::Empty,
        };
        let pred = if c.pred_len == 0 {
            None
        } else {
            let code = self
                .code_range(c.pred_start, c.pred_len)
                .ok_or(le(Part::Predicate, range_err))?;
            Some(action::verify(code, self, scratch_limit).map_err(|e| le(Part::Predicate, e))?)
        };
        let code = self
            .code_range(c.act_start, c.act_len)
            .ok_or(le(Part::Actions, range_err))?;
        let act = action::verify(code, self, scratch_limit).map_err(|e| le(Part::Actions, e))?;
        // Predicate and actions share the clause's string slots.
        let slots = pred.map_or(0, |p| p.string_allocs()) + act.string_allocs();
        // ... and its scratch memory (`alloca()`), `scratchsize` bytes when either allocates.
        let sites = pred.map_or(0, |p| p.mem_sites()) + act.mem_sites();
        let scratch =
            action::scratch_size(self.nlocals, ss, slots) + action::scratch_mem(self, sites);
        if scratch > scratch_limit {
            return Err(le(
                Part::Actions,
                VerifyError {
                    index: 0,
                    reason: action::Reason::ScratchTooLarge,
                },
            ));
        }
        Ok(VerifiedClause { pred, act, scratch })
    }

    /// Bytes a fill buffer keeps for the END probe's records (DTrace's reservation): for each
    /// clause of an END probe description, a record of the largest size per instruction
    /// that writes one to the principal buffer (a stack's definition for a stack).
    pub fn end_reserve(&self) -> u64 {
        let rec = |data: usize| crate::buffer::record_len(data).unwrap_or(0) as u64;
        let big = rec(action::record_buf_size(self.strsize()));
        let small = rec(9);
        let def = rec(crate::stack::DEF_MAX_BYTES);
        let code = self.sec[Section::Code as usize];
        let mut total = 0u64;
        for c in (0..self.clause_count()).map(|i| self.clause_raw(i)) {
            let end = (c.probe_first..c.probe_first.saturating_add(c.probe_count)).any(|p| {
                self.probe(p as usize)
                    .is_some_and(|d| d.kind == ProbeKind::End)
            });
            if !end {
                continue;
            }
            for (start, len) in [(c.pred_start, c.pred_len), (c.act_start, c.act_len)] {
                let s = start as usize * 8;
                let words = code
                    .get(s..s.saturating_add(len as usize * 8))
                    .unwrap_or(&[]);
                for w in words.chunks_exact(8) {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(w);
                    let op = action::Op::from_u8(action::Insn::decode(u64::from_le_bytes(b)).op);
                    total = total.saturating_add(match op {
                        Some(action::Op::Trace | action::Op::Printf | action::Op::System) => big,
                        Some(
                            action::Op::Exit
                            | action::Op::Printa
                            | action::Op::Clear
                            | action::Op::Trunc
                            | action::Op::Normalize
                            | action::Op::Denormalize,
                        ) => small,
                        Some(action::Op::Kstack | action::Op::Ustack) => def,
                        _ => 0,
                    });
                }
            }
        }
        total
    }

    /// Verify every clause; returns the largest scratch size any clause needs.
    pub fn verify(&self, scratch_limit: usize) -> Result<usize, LoadError> {
        let mut need = action::scratch_size(self.nlocals, self.strsize(), 0);
        for i in 0..self.clause_count() {
            need = need.max(self.verify_clause(i, scratch_limit)?.scratch);
        }
        Ok(need)
    }
}

/// The aggregating function a dictionary entry describes, with its parameters checked by
/// [`crate::agg::check_params`]; one conversion for the kernel (at LOAD) and the tool.
pub fn agg_func(func: AggKind, p: &[i64; 4]) -> Option<crate::agg::AggFunc> {
    crate::agg::check_params(func, p).ok()
}

/// Whether `p` are valid parameters for `func` (see [`crate::agg::check_params`]).
pub fn agg_params_valid(func: AggKind, p: &[i64; 4]) -> bool {
    crate::agg::check_params(func, p).is_ok()
}

impl Dict for Image<'_> {
    fn int_count(&self) -> u32 {
        self.count(Section::Ints) as u32
    }

    fn int_at(&self, idx: u32) -> Option<u64> {
        let s = self.sec[Section::Ints as usize];
        let o = (idx as usize).checked_mul(8)?;
        if o + 8 > s.len() {
            return None;
        }
        Some(rd_u64(s, o))
    }

    fn strtab(&self) -> &[u8] {
        self.sec[Section::Strtab as usize]
    }

    fn var(&self, id: u32) -> Option<VarInfo> {
        let d = self.var_desc(id)?;
        Some(VarInfo {
            scope: d.scope,
            keys: d.keys,
            string: d.string,
        })
    }

    fn agg(&self, id: u32) -> Option<KeyLayout> {
        if id as usize >= self.count(Section::Aggs) {
            return None;
        }
        Some(KeyLayout(rd_u32(self.entry(Section::Aggs, id as usize), 8)))
    }

    fn fmt_count(&self) -> u32 {
        self.count(Section::Fmts) as u32
    }

    fn nlocals(&self) -> u32 {
        self.nlocals
    }

    fn strsize(&self) -> u32 {
        self.options.strsize as u32
    }

    fn scratchsize(&self) -> u32 {
        self.options.scratchsize as u32
    }
}

/// The pieces of an image, as the tool builds them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parts<'a> {
    /// Probe descriptions.
    pub probes: &'a [ProbeDesc],
    /// Clauses.
    pub clauses: &'a [ClauseDesc],
    /// Bytecode of every clause, concatenated.
    pub code: &'a [u64],
    /// Integer table.
    pub ints: &'a [u64],
    /// String table (must start and end with a NUL).
    pub strtab: &'a [u8],
    /// Variable dictionary (id = index).
    pub vars: &'a [VarDesc],
    /// Aggregation dictionary (id = index).
    pub aggs: &'a [AggDesc],
    /// printf formats.
    pub fmts: &'a [FmtDesc],
    /// Options given explicitly.
    pub options: &'a [(OptKey, u64)],
    /// Number of clause-local variables.
    pub nlocals: u32,
}

/// The image could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The output buffer is smaller than [`Parts::encoded_len`].
    BufferTooSmall,
    /// The image would exceed [`MAX_IMAGE_SIZE`].
    TooLarge,
}

const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

impl Parts<'_> {
    fn sizes(&self) -> [usize; NSECTIONS] {
        [
            self.probes.len() * 24,
            self.clauses.len() * 32,
            self.code.len() * 8,
            self.ints.len() * 8,
            self.strtab.len(),
            self.vars.len() * 16,
            self.aggs.len() * 48,
            self.fmts.len() * 8,
            self.options.len() * 16,
        ]
    }

    /// Bytes of the encoded image.
    pub fn encoded_len(&self) -> usize {
        self.sizes()
            .iter()
            .fold(HEADER_SIZE, |acc, &s| acc.saturating_add(align8(s)))
    }

    /// Write the image into `out`; returns its length.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, BuildError> {
        let total = self.encoded_len();
        if total > MAX_IMAGE_SIZE {
            return Err(BuildError::TooLarge);
        }
        let out = out.get_mut(..total).ok_or(BuildError::BufferTooSmall)?;
        out.fill(0);
        let mut w = Writer { out, pos: 0 };
        w.u32(MAGIC);
        w.u16(VERSION);
        w.u16(HEADER_SIZE as u16);
        w.u32(total as u32);
        w.u32(self.nlocals);
        let sizes = self.sizes();
        let mut off = HEADER_SIZE;
        for s in sizes {
            w.u32(off as u32);
            w.u32(s as u32);
            off += align8(s);
        }
        w.pos = HEADER_SIZE;
        for p in self.probes {
            w.u32(p.kind as u32);
            w.u32(0);
            w.u32(p.func);
            w.u32(0);
            w.u64(p.arg);
        }
        for c in self.clauses {
            for v in [
                c.probe_first,
                c.probe_count,
                c.pred_start,
                c.pred_len,
                c.act_start,
                c.act_len,
            ] {
                w.u32(v);
            }
            w.u64(0);
        }
        for &i in self.code {
            w.u64(i);
        }
        for &i in self.ints {
            w.u64(i);
        }
        w.bytes(self.strtab);
        w.align();
        for (i, v) in self.vars.iter().enumerate() {
            w.u32(i as u32);
            w.u32(v.scope as u32 | if v.string { VAR_STRING } else { 0 });
            w.u32(v.keys.0);
            w.u32(v.name);
        }
        for (i, a) in self.aggs.iter().enumerate() {
            w.u32(i as u32);
            w.u32(a.func as u32);
            w.u32(a.keys.0);
            w.u32(a.name);
            for p in a.params {
                w.u64(p as u64);
            }
        }
        for f in self.fmts {
            w.u32(f.fmt);
            w.u32(0);
        }
        for &(k, v) in self.options {
            w.u32(k as u32);
            w.u32(0);
            w.u64(v);
        }
        Ok(total)
    }
}

struct Writer<'b> {
    out: &'b mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        if let Some(d) = self.out.get_mut(self.pos..self.pos + b.len()) {
            d.copy_from_slice(b);
        }
        self.pos += b.len();
    }
    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn align(&mut self) {
        self.pos = align8(self.pos);
    }
}
