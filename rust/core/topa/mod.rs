// SPDX-License-Identifier: GPL-2.0

//! Intel PT output through ToPA tables (US 9,189,360): entries, builder, output engine, packets.
//!
//! Trace output goes to many small, non-contiguous memory slices ("output regions") described
//! by one or more Tables of Physical Addresses (ToPA), each a 4 KiB page of 64-bit entries,
//! chained through END entries. This file holds everything about that scheme that needs no
//! kernel:
//!
//! - [`Entry`]: the ToPA entry format of the Intel SDM (vol. 3, "Table of Physical Addresses"),
//!   with the SDM's validity rules;
//! - [`build`]: lays out caller-provided table pages for a list of [`Slice`]s in [`Mode::Ring`]
//!   or [`Mode::Stop`], rejecting anything the SDM calls a ToPA error, so it never builds an
//!   invalid table;
//! - [`OutputEngine`]: the output walk of the processor, with the state it keeps in
//!   `IA32_RTIT_OUTPUT_BASE` / `IA32_RTIT_OUTPUT_MASK_PTRS` / `IA32_RTIT_STATUS`, over memory
//!   reached through the [`PhysMem`] trait (real pages in the kernel's software backend, a
//!   model memory in tests); [`Layout`] turns a register snapshot into a linear position and
//!   reads the data out oldest first;
//! - [`Packet`], [`Decoder`]: the PT packets the software backend emits (PSB, PSBEND, TSC, PTW,
//!   PAD, OVF) with their SDM byte encodings, and a decoder that syncs on PSB.
//!
//! Nothing here allocates or panics on any input; every failure is a precise error.
//! `Documentation/topa.rst` describes the design.

// ---------------------------------------------------------------------------------------------
// Architectural constants.
// ---------------------------------------------------------------------------------------------

/// `IA32_RTIT_OUTPUT_BASE`: the physical base of the current ToPA table.
pub const MSR_RTIT_OUTPUT_BASE: u32 = 0x560;
/// `IA32_RTIT_OUTPUT_MASK_PTRS`: entry index and offset of the next byte.
pub const MSR_RTIT_OUTPUT_MASK_PTRS: u32 = 0x561;
/// `IA32_RTIT_CTL`: trace control.
pub const MSR_RTIT_CTL: u32 = 0x570;
/// `IA32_RTIT_STATUS`: trace status.
pub const MSR_RTIT_STATUS: u32 = 0x571;

/// `IA32_RTIT_CTL.TraceEn`: packet generation enabled.
pub const RTIT_CTL_TRACEEN: u64 = 1 << 0;
/// `IA32_RTIT_CTL.OS`: trace at CPL 0.
pub const RTIT_CTL_OS: u64 = 1 << 2;
/// `IA32_RTIT_CTL.User`: trace at CPL > 0.
pub const RTIT_CTL_USER: u64 = 1 << 3;
/// `IA32_RTIT_CTL.ToPA`: output through ToPA tables.
pub const RTIT_CTL_TOPA: u64 = 1 << 8;
/// `IA32_RTIT_CTL.TSCEn`: emit TSC packets.
pub const RTIT_CTL_TSCEN: u64 = 1 << 10;
/// `IA32_RTIT_CTL.BranchEn`: emit control-flow packets.
pub const RTIT_CTL_BRANCHEN: u64 = 1 << 13;

/// `IA32_RTIT_STATUS.Error`: an operational error (such as a ToPA error) stopped tracing.
pub const RTIT_STATUS_ERROR: u64 = 1 << 4;
/// `IA32_RTIT_STATUS.Stopped`: a region whose entry has STOP filled up.
pub const RTIT_STATUS_STOPPED: u64 = 1 << 5;

/// `IA32_PERF_GLOBAL_STATUS.Trace_ToPA_PMI`: set when a region whose entry has INT fills.
pub const PERF_GLOBAL_STATUS_TOPA_PMI: u64 = 1 << 55;

/// CPUID.(EAX=07H,ECX=0):EBX bit: Intel PT is supported.
pub const CPUID_7_EBX_INTEL_PT: u32 = 1 << 25;
/// CPUID.(EAX=14H,ECX=0):ECX bit: ToPA output is supported.
pub const CPUID_14_ECX_TOPA: u32 = 1 << 0;
/// CPUID.(EAX=14H,ECX=0):ECX bit: ToPA tables may hold several output entries.
pub const CPUID_14_ECX_TOPA_MULTI: u32 = 1 << 1;

/// Bytes in one ToPA table as this module lays them out: one 4 KiB page.
pub const TABLE_BYTES: u64 = 4096;
/// Entries in one table page.
pub const TABLE_ENTRIES: usize = 512;
/// Output entries a table page can hold: all but the END entry that links it.
pub const MAX_OUTPUTS_PER_TABLE: usize = TABLE_ENTRIES - 1;
/// One ToPA table page, as the caller provides it.
pub type TablePage = [u64; TABLE_ENTRIES];

/// ToPA entry bit END: the address is the next table, not an output region.
pub const ENTRY_END: u64 = 1 << 0;
/// ToPA entry bit INT: raise a PMI when this region fills.
pub const ENTRY_INT: u64 = 1 << 2;
/// ToPA entry bit STOP: stop output (set `Stopped`) when this region fills.
pub const ENTRY_STOP: u64 = 1 << 4;
/// Shift of the ToPA entry Size field (bits 9:6); the region holds `4 KiB << Size` bytes.
pub const ENTRY_SIZE_SHIFT: u32 = 6;
/// Mask of the ToPA entry Size field.
pub const ENTRY_SIZE_MASK: u64 = 0xf << ENTRY_SIZE_SHIFT;
/// Reserved bits below the address field (bits 1, 3, 5, 11:10): must be zero.
pub const ENTRY_LOW_RESERVED: u64 = (1 << 1) | (1 << 3) | (1 << 5) | (0b11 << 10);
/// Largest Size field value: 4 KiB << 15 = 128 MiB.
pub const MAX_SIZE_ORDER: u8 = 15;

/// `IA32_RTIT_OUTPUT_MASK_PTRS` bits 6:0 (LowerMask): read as ones in ToPA mode.
pub const MASK_PTRS_LOWER_MASK: u64 = 0x7f;
/// Shift of MaskOrTableOffset (bits 31:7); it holds bits 27:3 of the table byte offset, so
/// the field value is the entry index (`index << 3` is the byte offset in the table).
pub const MASK_PTRS_INDEX_SHIFT: u32 = 7;
/// Mask of MaskOrTableOffset (bits 31:7).
pub const MASK_PTRS_INDEX_MASK: u64 = 0xffff_ff80;
/// Shift of OutputOffset (bits 63:32): the byte offset in the current region.
pub const MASK_PTRS_OFFSET_SHIFT: u32 = 32;
/// Largest entry index MaskOrTableOffset can hold.
pub const MAX_TABLE_INDEX: u64 = MASK_PTRS_INDEX_MASK >> MASK_PTRS_INDEX_SHIFT;

/// Bytes in the region of Size field value `order` (`4 KiB << order`).
///
/// Only the low 4 bits of `order` count, as in the 4-bit Size field; the builder rejects
/// larger orders before sizing anything.
pub const fn region_size(order: u8) -> u64 {
    TABLE_BYTES << (order & 0xf)
}

// ---------------------------------------------------------------------------------------------
// Physical address width.
// ---------------------------------------------------------------------------------------------

/// The processor's physical address width (MAXPHYADDR, CPUID 80000008H:EAX[7:0]).
///
/// Entry bits 63:MAXPHYADDR are reserved; a base address using them is a ToPA error.
///
/// # Invariants
///
/// `MIN_BITS <= bits <= MAX_BITS`, so every region size fits below the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysWidth(u8);

impl PhysWidth {
    /// Smallest accepted width (real processors report 36 or more).
    pub const MIN_BITS: u8 = 32;
    /// The architectural maximum MAXPHYADDR.
    pub const MAX_BITS: u8 = 52;
    /// The architectural maximum width, safe when the real one is unknown to a model.
    pub const ARCH_MAX: PhysWidth = PhysWidth(Self::MAX_BITS);

    /// A width of `bits`, or `None` outside `MIN_BITS..=MAX_BITS`.
    pub const fn new(bits: u8) -> Option<PhysWidth> {
        if bits >= Self::MIN_BITS && bits <= Self::MAX_BITS {
            // INVARIANT: checked just above.
            Some(PhysWidth(bits))
        } else {
            None
        }
    }

    /// The width in bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether `addr` uses no bit at or above the width.
    pub const fn fits(self, addr: u64) -> bool {
        addr >> self.0 == 0
    }

    /// Mask of the entry address field: bits `MAXPHYADDR-1:12`.
    const fn base_mask(self) -> u64 {
        ((1u64 << self.0) - 1) & !(TABLE_BYTES - 1)
    }
}

// ---------------------------------------------------------------------------------------------
// ToPA entries.
// ---------------------------------------------------------------------------------------------

/// A decoded ToPA table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// An output region of `4 KiB << order` bytes at `base`.
    Output {
        /// Physical base address, aligned to the region size.
        base: u64,
        /// Size field: the region holds [`region_size`]`(order)` bytes.
        order: u8,
        /// INT: raise a PMI when the region fills.
        int: bool,
        /// STOP: stop output when the region fills.
        stop: bool,
    },
    /// END: the walk continues at entry 0 of the table at `table`.
    End {
        /// Physical base address of the next table, 4 KiB aligned.
        table: u64,
    },
}

/// Why a ToPA entry is malformed (the SDM's "ToPA Errors").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryError {
    /// A reserved bit (1, 3, 5, 11:10) is set.
    ReservedBits,
    /// The base uses bits at or above MAXPHYADDR.
    AddressWidth,
    /// The base is not aligned to the region size (or an END target to 4 KiB).
    Misaligned,
    /// The Size field exceeds [`MAX_SIZE_ORDER`] (encoding only: decoding reads 4 bits).
    SizeOrder,
    /// STOP or INT is set on an END entry.
    EndWithStopOrInt,
}

const fn raw_output(base: u64, order: u8, int: bool, stop: bool) -> u64 {
    let mut raw = base | ((order as u64) << ENTRY_SIZE_SHIFT);
    if int {
        raw |= ENTRY_INT;
    }
    if stop {
        raw |= ENTRY_STOP;
    }
    raw
}

const fn raw_end(table: u64) -> u64 {
    table | ENTRY_END
}

/// Checks an output region's order, alignment and width.
const fn check_region(base: u64, order: u8, width: PhysWidth) -> Result<(), EntryError> {
    if order > MAX_SIZE_ORDER {
        return Err(EntryError::SizeOrder);
    }
    if base & (region_size(order) - 1) != 0 {
        return Err(EntryError::Misaligned);
    }
    // Aligned and below 2^width with width >= 32 > log2(128 MiB): the end fits too.
    if !width.fits(base) {
        return Err(EntryError::AddressWidth);
    }
    Ok(())
}

/// Checks a table base: 4 KiB aligned and within the width.
const fn check_table(table: u64, width: PhysWidth) -> Result<(), EntryError> {
    if table & (TABLE_BYTES - 1) != 0 {
        return Err(EntryError::Misaligned);
    }
    if !width.fits(table) {
        return Err(EntryError::AddressWidth);
    }
    Ok(())
}

impl Entry {
    /// The raw 64-bit entry, after checking every SDM rule that concerns a single entry.
    pub const fn encode(self, width: PhysWidth) -> Result<u64, EntryError> {
        match self {
            Entry::Output {
                base,
                order,
                int,
                stop,
            } => match check_region(base, order, width) {
                Ok(()) => Ok(raw_output(base, order, int, stop)),
                Err(e) => Err(e),
            },
            Entry::End { table } => match check_table(table, width) {
                Ok(()) => Ok(raw_end(table)),
                Err(e) => Err(e),
            },
        }
    }

    /// Decodes a raw entry as the processor does, rejecting malformed ones.
    ///
    /// The Size field of an END entry is ignored, as by the processor.
    pub const fn decode(raw: u64, width: PhysWidth) -> Result<Entry, EntryError> {
        if raw & ENTRY_LOW_RESERVED != 0 {
            return Err(EntryError::ReservedBits);
        }
        if !width.fits(raw) {
            return Err(EntryError::AddressWidth);
        }
        let base = raw & width.base_mask();
        if raw & ENTRY_END != 0 {
            if raw & (ENTRY_STOP | ENTRY_INT) != 0 {
                return Err(EntryError::EndWithStopOrInt);
            }
            return Ok(Entry::End { table: base });
        }
        let order = ((raw & ENTRY_SIZE_MASK) >> ENTRY_SIZE_SHIFT) as u8;
        if base & (region_size(order) - 1) != 0 {
            return Err(EntryError::Misaligned);
        }
        Ok(Entry::Output {
            base,
            order,
            int: raw & ENTRY_INT != 0,
            stop: raw & ENTRY_STOP != 0,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Builder.
// ---------------------------------------------------------------------------------------------

/// One output region to be described by the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Physical base address, aligned to the slice size.
    pub phys: u64,
    /// Size order: the slice holds [`region_size`]`(order)` bytes.
    pub order: u8,
}

impl Slice {
    /// Bytes in the slice (meaningful when `order <= MAX_SIZE_ORDER`, see [`region_size`]).
    pub const fn size(&self) -> u64 {
        region_size(self.order)
    }
}

/// What happens when the last slice fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The last table's END points back to the first table: output wraps and overwrites.
    Ring,
    /// The last slice's entry has STOP (and INT when `int`): output stops exactly when full.
    Stop {
        /// Also set INT on the last slice's entry.
        int: bool,
    },
}

/// Processor properties and layout options the builder and the engine follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// MAXPHYADDR.
    pub width: PhysWidth,
    /// CPUID.(EAX=14H,ECX=0):ECX[1]: tables may hold several output entries. When false
    /// only a single slice is possible: entry 0, then END back to the same table.
    pub multi_entry: bool,
    /// Output entries per table, `1..=MAX_OUTPUTS_PER_TABLE`; fewer spreads the slices over
    /// more tables.
    pub outputs_per_table: usize,
}

impl Config {
    /// Multiple-entry ToPA with full tables.
    pub const fn new(width: PhysWidth) -> Config {
        Config {
            width,
            multi_entry: true,
            outputs_per_table: MAX_OUTPUTS_PER_TABLE,
        }
    }
}

/// Why [`build`] refused: the tables are left untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// No slice given.
    NoSlices,
    /// `outputs_per_table` is 0 or above [`MAX_OUTPUTS_PER_TABLE`].
    BadOutputsPerTable,
    /// `tables` and `table_phys` differ in length.
    TableCountMismatch {
        /// Table pages given.
        tables: usize,
        /// Physical addresses given.
        phys: usize,
    },
    /// Not enough table pages for the slices.
    TooFewTables {
        /// Pages the layout needs.
        needed: usize,
        /// Pages given.
        given: usize,
    },
    /// A table's physical address is not 4 KiB aligned.
    TableMisaligned {
        /// Index in `table_phys`.
        table: usize,
    },
    /// A table's physical address is beyond MAXPHYADDR.
    TableAddressWidth {
        /// Index in `table_phys`.
        table: usize,
    },
    /// Two used tables share a page.
    TableOverlap {
        /// Index in `table_phys`.
        table: usize,
        /// The earlier table it overlaps.
        other: usize,
    },
    /// A slice's size order exceeds [`MAX_SIZE_ORDER`].
    SliceSizeOrder {
        /// Index in `slices`.
        slice: usize,
    },
    /// A slice's base is not aligned to its size.
    SliceMisaligned {
        /// Index in `slices`.
        slice: usize,
    },
    /// A slice's base is beyond MAXPHYADDR.
    SliceAddressWidth {
        /// Index in `slices`.
        slice: usize,
    },
    /// Two slices overlap: trace data would overwrite itself.
    SliceOverlap {
        /// Index in `slices`.
        slice: usize,
        /// The earlier slice it overlaps.
        other: usize,
    },
    /// A slice overlaps a used table: trace data would overwrite the tables.
    SliceOverlapsTable {
        /// Index in `slices`.
        slice: usize,
        /// Index in `table_phys`.
        table: usize,
    },
    /// Single-entry ToPA (`multi_entry == false`) describes exactly one slice.
    SingleEntryNeedsOneSlice {
        /// Slices given.
        slices: usize,
    },
    /// The total size overflows 64 bits.
    CapacityOverflow,
}

/// What [`build`] laid out; the handle the engine and the read-out work from.
///
/// # Invariants
///
/// Describes tables written by [`build`]: `tables` pages starting at `first_table`, holding
/// `slices` output entries of `capacity` bytes in total, in `mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    first_table: u64,
    tables: usize,
    slices: usize,
    capacity: u64,
    mode: Mode,
    width: PhysWidth,
}

const fn overlaps(a: u64, a_len: u64, b: u64, b_len: u64) -> bool {
    a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

/// Lays out ToPA tables for `slices`, in order, in the pages `tables` whose physical
/// addresses are `table_phys`.
///
/// Table `t` gets up to `cfg.outputs_per_table` output entries followed by an END entry
/// pointing to table `t + 1`; the last table's END points to the first in [`Mode::Ring`]; in
/// [`Mode::Stop`] the last slice's entry carries STOP (and INT if asked) and ends the walk.
/// Unused entries are zeroed, unused pages are not touched. Everything is checked before
/// anything is written, so on error no page is modified.
///
/// Overlap checks are quadratic in the number of slices; this runs once, at configuration.
pub fn build(
    tables: &mut [TablePage],
    table_phys: &[u64],
    slices: &[Slice],
    mode: Mode,
    cfg: &Config,
) -> Result<Layout, BuildError> {
    let width = cfg.width;
    if slices.is_empty() {
        return Err(BuildError::NoSlices);
    }
    if tables.len() != table_phys.len() {
        return Err(BuildError::TableCountMismatch {
            tables: tables.len(),
            phys: table_phys.len(),
        });
    }
    let per = if cfg.multi_entry {
        if cfg.outputs_per_table == 0 || cfg.outputs_per_table > MAX_OUTPUTS_PER_TABLE {
            return Err(BuildError::BadOutputsPerTable);
        }
        cfg.outputs_per_table
    } else {
        if slices.len() != 1 {
            return Err(BuildError::SingleEntryNeedsOneSlice {
                slices: slices.len(),
            });
        }
        1
    };
    let needed = slices.len().div_ceil(per);
    if tables.len() < needed {
        return Err(BuildError::TooFewTables {
            needed,
            given: tables.len(),
        });
    }
    let used_phys = &table_phys[..needed];
    for (t, &phys) in used_phys.iter().enumerate() {
        match check_table(phys, width) {
            Ok(()) => {}
            Err(EntryError::AddressWidth) => {
                return Err(BuildError::TableAddressWidth { table: t })
            }
            Err(_) => return Err(BuildError::TableMisaligned { table: t }),
        }
        for (o, &other) in used_phys[..t].iter().enumerate() {
            if other == phys {
                return Err(BuildError::TableOverlap { table: t, other: o });
            }
        }
    }
    let mut capacity: u64 = 0;
    for (s, slice) in slices.iter().enumerate() {
        match check_region(slice.phys, slice.order, width) {
            Ok(()) => {}
            Err(EntryError::SizeOrder) => return Err(BuildError::SliceSizeOrder { slice: s }),
            Err(EntryError::AddressWidth) => {
                return Err(BuildError::SliceAddressWidth { slice: s })
            }
            Err(_) => return Err(BuildError::SliceMisaligned { slice: s }),
        }
        for (o, other) in slices[..s].iter().enumerate() {
            if overlaps(slice.phys, slice.size(), other.phys, other.size()) {
                return Err(BuildError::SliceOverlap { slice: s, other: o });
            }
        }
        for (t, &phys) in used_phys.iter().enumerate() {
            if overlaps(slice.phys, slice.size(), phys, TABLE_BYTES) {
                return Err(BuildError::SliceOverlapsTable { slice: s, table: t });
            }
        }
        capacity = match capacity.checked_add(slice.size()) {
            Some(c) => c,
            None => return Err(BuildError::CapacityOverflow),
        };
    }

    // Everything is valid: write. Plain indices rather than `chunks()`: objtool rejects the
    // code core's `Chunks` iterator compiles to in the kernel.
    let last_slice = slices.len() - 1;
    let mut next_slice = 0;
    for t in 0..needed {
        let page = &mut tables[t];
        let end = (next_slice + per).min(slices.len());
        let mut i = 0;
        while next_slice < end {
            let slice = &slices[next_slice];
            let (int, stop) = match mode {
                Mode::Stop { int } if next_slice == last_slice => (int, true),
                _ => (false, false),
            };
            page[i] = raw_output(slice.phys, slice.order, int, stop);
            i += 1;
            next_slice += 1;
        }
        let is_last_table = t + 1 == needed;
        let next = if is_last_table {
            table_phys[0]
        } else {
            table_phys[t + 1]
        };
        // Single-entry ToPA always needs entry 1 = END back to its own table.
        if !is_last_table || matches!(mode, Mode::Ring) || !cfg.multi_entry {
            page[i] = raw_end(next);
            i += 1;
        }
        page[i..].fill(0);
    }
    // INVARIANT: the tables just written match these fields.
    Ok(Layout {
        first_table: table_phys[0],
        tables: needed,
        slices: slices.len(),
        capacity,
        mode,
        width,
    })
}

// ---------------------------------------------------------------------------------------------
// Registers and memory.
// ---------------------------------------------------------------------------------------------

/// The output MSRs: where the next byte goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputRegs {
    /// `IA32_RTIT_OUTPUT_BASE`: physical base of the current table.
    pub base: u64,
    /// `IA32_RTIT_OUTPUT_MASK_PTRS`: LowerMask, MaskOrTableOffset (entry index), OutputOffset.
    pub mask_ptrs: u64,
}

impl OutputRegs {
    /// The registers for entry `index` of `table`, `offset` bytes into its region.
    pub const fn new(table: u64, index: u64, offset: u32) -> OutputRegs {
        OutputRegs {
            base: table,
            mask_ptrs: MASK_PTRS_LOWER_MASK
                | ((index << MASK_PTRS_INDEX_SHIFT) & MASK_PTRS_INDEX_MASK)
                | ((offset as u64) << MASK_PTRS_OFFSET_SHIFT),
        }
    }

    /// Physical base of the current table.
    pub const fn table(&self) -> u64 {
        self.base
    }

    /// Index of the current entry (MaskOrTableOffset).
    pub const fn index(&self) -> u64 {
        (self.mask_ptrs & MASK_PTRS_INDEX_MASK) >> MASK_PTRS_INDEX_SHIFT
    }

    /// Physical address of the current entry.
    pub const fn entry_phys(&self) -> u64 {
        self.base + (self.index() << 3)
    }

    /// Byte offset of the next write in the current region (OutputOffset).
    pub const fn offset(&self) -> u64 {
        self.mask_ptrs >> MASK_PTRS_OFFSET_SHIFT
    }
}

/// A physical address the memory could not read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemFault;

/// Physical memory as the output walk sees it.
///
/// The kernel implements it over the pages it allocated for tables and slices (and refuses
/// any other address); tests implement it over a model memory.
pub trait PhysMem {
    /// Reads the 64-bit entry at `phys` (8-byte aligned, inside a table page).
    fn read_entry(&self, phys: u64) -> Result<u64, MemFault>;
    /// Writes `bytes` at `phys`; the range never crosses the end of an output region.
    fn write(&mut self, phys: u64, bytes: &[u8]) -> Result<(), MemFault>;
    /// Reads `buf.len()` bytes at `phys`; the range never crosses the end of an output region.
    fn read(&self, phys: u64, buf: &mut [u8]) -> Result<(), MemFault>;
}

/// An operational error of the output walk (the hardware sets `IA32_RTIT_STATUS.Error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkError {
    /// The memory refused an access at `phys`.
    Mem {
        /// The refused physical address.
        phys: u64,
    },
    /// A malformed entry.
    Entry {
        /// Table holding it.
        table: u64,
        /// Its index.
        index: u64,
        /// What is wrong.
        error: EntryError,
    },
    /// Entry 0 of a table is an END entry.
    EndInEntryZero {
        /// The table.
        table: u64,
    },
    /// `IA32_RTIT_OUTPUT_BASE` is not a 4 KiB aligned address within MAXPHYADDR.
    TableBase {
        /// The value.
        table: u64,
    },
    /// OutputOffset is not inside the current region (and `Stopped` is clear).
    OutputOffset {
        /// The offset.
        offset: u64,
        /// The region size.
        size: u64,
    },
    /// The entry index would exceed MaskOrTableOffset.
    IndexOverflow,
    /// Single-entry ToPA: entry 1 is not an END pointing back to its own table, or the
    /// current entry is not entry 0.
    SingleEntryRule {
        /// The table.
        table: u64,
    },
    /// The tables do not match the [`Layout`] they are read through.
    LayoutMismatch,
    /// The registers point to no output entry of the [`Layout`].
    NotInLayout,
    /// The engine is not enabled, or has already failed.
    Disabled,
}

// ---------------------------------------------------------------------------------------------
// Layout walk: position and read-out.
// ---------------------------------------------------------------------------------------------

/// One output region met by [`Layout::for_each_slice`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceAt {
    /// Table holding its entry.
    pub table: u64,
    /// Index of its entry.
    pub index: u64,
    /// Region base.
    pub base: u64,
    /// Region size.
    pub size: u64,
    /// Linear offset of its first byte in the buffer.
    pub start: u64,
}

/// A linear write position and whether the ring has wrapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// Linear offset of the next byte, `0..=capacity`.
    pub position: u64,
    /// The ring has wrapped at least once: every byte is valid, oldest at `position`.
    pub wrapped: bool,
}

impl Layout {
    /// Physical base of the first table (the initial `IA32_RTIT_OUTPUT_BASE`).
    pub const fn first_table(&self) -> u64 {
        self.first_table
    }

    /// Table pages used.
    pub const fn tables(&self) -> usize {
        self.tables
    }

    /// Output regions described.
    pub const fn slices(&self) -> usize {
        self.slices
    }

    /// Total bytes of all regions.
    pub const fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The mode the tables were built in.
    pub const fn mode(&self) -> Mode {
        self.mode
    }

    /// The registers to program before the first enable: first table, entry 0, offset 0.
    pub const fn initial_regs(&self) -> OutputRegs {
        OutputRegs::new(self.first_table, 0, 0)
    }

    /// Calls `f` for each output region in walk order until it returns `false`.
    pub fn for_each_slice<M, F>(&self, mem: &M, mut f: F) -> Result<(), WalkError>
    where
        M: PhysMem + ?Sized,
        F: FnMut(&SliceAt) -> bool,
    {
        let mut table = self.first_table;
        let mut index: u64 = 0;
        let mut start: u64 = 0;
        let mut seen = 0usize;
        let mut hops = 0usize;
        while seen < self.slices {
            if index >= TABLE_ENTRIES as u64 {
                return Err(WalkError::LayoutMismatch);
            }
            let phys = table + (index << 3);
            let raw = mem.read_entry(phys).map_err(|_| WalkError::Mem { phys })?;
            match Entry::decode(raw, self.width) {
                Err(error) => {
                    return Err(WalkError::Entry {
                        table,
                        index,
                        error,
                    })
                }
                Ok(Entry::End { table: next }) => {
                    if index == 0 {
                        return Err(WalkError::EndInEntryZero { table });
                    }
                    hops += 1;
                    // Before the last slice, an END never leads back to the first table.
                    if hops >= self.tables || next == self.first_table {
                        return Err(WalkError::LayoutMismatch);
                    }
                    table = next;
                    index = 0;
                }
                Ok(Entry::Output {
                    base, order, stop, ..
                }) => {
                    let size = region_size(order);
                    let at = SliceAt {
                        table,
                        index,
                        base,
                        size,
                        start,
                    };
                    if !f(&at) {
                        return Ok(());
                    }
                    seen += 1;
                    start = start.checked_add(size).ok_or(WalkError::LayoutMismatch)?;
                    if stop && seen != self.slices {
                        return Err(WalkError::LayoutMismatch);
                    }
                    index += 1;
                }
            }
        }
        if start != self.capacity {
            return Err(WalkError::LayoutMismatch);
        }
        Ok(())
    }

    /// The linear offset of the next byte for a snapshot of the output registers.
    ///
    /// A [`Mode::Stop`] buffer that stopped reads as `capacity`. Registers left on an END
    /// entry (offset 0) read as the end of the region before it.
    pub fn position<M: PhysMem + ?Sized>(
        &self,
        mem: &M,
        regs: OutputRegs,
    ) -> Result<u64, WalkError> {
        let mut found = None;
        let mut after = None;
        self.for_each_slice(mem, |s| {
            if s.table == regs.table() && s.index == regs.index() {
                found = Some((s.start, s.size));
                false
            } else {
                if s.table == regs.table() && s.index + 1 == regs.index() {
                    after = Some(s.start + s.size);
                }
                true
            }
        })?;
        match (found, after) {
            (Some((start, size)), _) if regs.offset() <= size => Ok(start + regs.offset()),
            (Some((_, size)), _) => Err(WalkError::OutputOffset {
                offset: regs.offset(),
                size,
            }),
            (None, Some(end)) if regs.offset() == 0 => {
                let end = if matches!(self.mode, Mode::Ring) && end == self.capacity {
                    0
                } else {
                    end
                };
                Ok(end)
            }
            _ => Err(WalkError::NotInLayout),
        }
    }

    /// The cursor for a register snapshot; `wrapped` comes from the engine
    /// ([`OutputEngine::wraps`]) or, for real hardware in ring mode, is assumed (see
    /// `Documentation/topa.rst`: zeroed regions read as PAD packets).
    pub fn cursor<M: PhysMem + ?Sized>(
        &self,
        mem: &M,
        regs: OutputRegs,
        wrapped: bool,
    ) -> Result<Cursor, WalkError> {
        let position = self.position(mem, regs)?;
        Ok(Cursor {
            position,
            wrapped: wrapped && matches!(self.mode, Mode::Ring),
        })
    }

    /// Bytes of valid data at `cur`.
    pub const fn data_len(&self, cur: Cursor) -> u64 {
        if cur.wrapped {
            self.capacity
        } else if cur.position < self.capacity {
            cur.position
        } else {
            self.capacity
        }
    }

    /// Copies valid data in logical order (oldest first), starting `from` bytes into it, to
    /// `buf`; returns the bytes copied (0 at or past the end).
    pub fn read_logical<M: PhysMem + ?Sized>(
        &self,
        mem: &M,
        cur: Cursor,
        from: u64,
        buf: &mut [u8],
    ) -> Result<usize, WalkError> {
        let total = self.data_len(cur);
        if from >= total || buf.is_empty() || self.capacity == 0 {
            return Ok(0);
        }
        let n = (total - from).min(buf.len() as u64) as usize;
        let oldest = if cur.wrapped {
            cur.position % self.capacity
        } else {
            0
        };
        let ring_off = (oldest + from) % self.capacity;
        let first = ((self.capacity - ring_off).min(n as u64)) as usize;
        let (a, b) = buf[..n].split_at_mut(first);
        self.read_ring(mem, ring_off, a)?;
        self.read_ring(mem, 0, b)?;
        Ok(n)
    }

    /// Reads `buf.len()` bytes at linear offset `off` (no wrap inside the range).
    fn read_ring<M: PhysMem + ?Sized>(
        &self,
        mem: &M,
        off: u64,
        buf: &mut [u8],
    ) -> Result<(), WalkError> {
        if buf.is_empty() {
            return Ok(());
        }
        let end = off + buf.len() as u64;
        let mut result = Ok(());
        self.for_each_slice(mem, |s| {
            let s_end = s.start + s.size;
            if s_end <= off {
                return true;
            }
            if s.start >= end {
                return false;
            }
            let lo = s.start.max(off);
            let hi = s_end.min(end);
            let dst = &mut buf[(lo - off) as usize..(hi - off) as usize];
            let phys = s.base + (lo - s.start);
            if mem.read(phys, dst).is_err() {
                result = Err(WalkError::Mem { phys });
                return false;
            }
            true
        })?;
        result
    }
}

// ---------------------------------------------------------------------------------------------
// Output engine.
// ---------------------------------------------------------------------------------------------

/// The current output region, as loaded from its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    base: u64,
    size: u64,
    int: bool,
    stop: bool,
}

/// The processor's ToPA output walk, as a software model.
///
/// State is kept the way the hardware keeps it: [`OutputRegs`] (table base, entry index,
/// offset) and `IA32_RTIT_STATUS` (`Stopped`, `Error`), plus the pending ToPA PMI. Bytes fill
/// the current region; a full region raises the PMI if INT, sets `Stopped` if STOP (the
/// offset then equals the region size and nothing more is written), else the walk moves to
/// the next entry, following an END entry to another table. Entries are checked when loaded;
/// a malformed one is an operational error: `Error` is set and output ends.
///
/// # Invariants
///
/// When `enabled`, `region` is the valid output entry at `regs`, and `regs.offset()` is below
/// its size, or equal to it with `Stopped` set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputEngine {
    cfg: Config,
    origin: u64,
    regs: OutputRegs,
    status: u64,
    enabled: bool,
    region: Region,
    pmi: bool,
    wraps: u64,
    written: u64,
    lost: u64,
    error: Option<WalkError>,
}

impl OutputEngine {
    /// A disabled engine at the start of `layout` (its [`Layout::initial_regs`]).
    pub fn new(layout: &Layout, cfg: &Config) -> OutputEngine {
        Self::with_regs(cfg, layout.first_table(), layout.initial_regs(), 0)
    }

    /// A disabled engine with saved registers; `origin` is the first table, entering which
    /// through an END entry counts as a wrap.
    pub fn with_regs(cfg: &Config, origin: u64, regs: OutputRegs, status: u64) -> OutputEngine {
        OutputEngine {
            cfg: *cfg,
            origin,
            regs,
            status: status & (RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED),
            enabled: false,
            region: Region {
                base: 0,
                size: 0,
                int: false,
                stop: false,
            },
            pmi: false,
            wraps: 0,
            written: 0,
            lost: 0,
            error: None,
        }
    }

    /// Sets TraceEn: checks the registers and loads the current entry (following an END
    /// entry if the index points at one). On error `Error` is set and output stays off.
    pub fn enable<M: PhysMem + ?Sized>(&mut self, mem: &M) -> Result<(), WalkError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if check_table(self.regs.table(), self.cfg.width).is_err() {
            return self.fail(WalkError::TableBase {
                table: self.regs.table(),
            });
        }
        self.load(mem)?;
        // `load` reset the offset to 0 if it followed an END entry.
        let offset = self.regs.offset();
        let size = self.region.size;
        let stopped = self.status & RTIT_STATUS_STOPPED != 0;
        if offset > size || (offset == size && !stopped) {
            return self.fail(WalkError::OutputOffset { offset, size });
        }
        // INVARIANT: `load` loaded a valid output entry and the offset fits it.
        self.enabled = true;
        Ok(())
    }

    /// Clears TraceEn: the registers keep the position.
    pub fn disable(&mut self) {
        self.enabled = false;
    }

    /// Writes trace bytes as the processor would; returns how many were stored. Bytes not
    /// stored (disabled, `Stopped`, or after an error) are counted as lost.
    pub fn write<M: PhysMem + ?Sized>(&mut self, mem: &mut M, bytes: &[u8]) -> usize {
        let mut done = 0usize;
        while done < bytes.len() && self.enabled && self.status & RTIT_STATUS_STOPPED == 0 {
            let off = self.regs.offset();
            let room = self.region.size - off;
            let n = room.min((bytes.len() - done) as u64) as usize;
            let phys = self.region.base + off;
            if mem.write(phys, &bytes[done..done + n]).is_err() {
                let _ = self.fail(WalkError::Mem { phys });
                break;
            }
            done += n;
            self.written += n as u64;
            let off = off + n as u64;
            self.set_offset(off);
            if off == self.region.size {
                self.region_full(mem);
            }
        }
        self.lost += (bytes.len() - done) as u64;
        done
    }

    /// The output registers now.
    pub const fn regs(&self) -> OutputRegs {
        self.regs
    }

    /// `IA32_RTIT_STATUS` now (only `Error` and `Stopped` are modelled).
    pub const fn status(&self) -> u64 {
        self.status
    }

    /// Whether TraceEn is set.
    pub const fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether a STOP region filled (`IA32_RTIT_STATUS.Stopped`).
    pub const fn is_stopped(&self) -> bool {
        self.status & RTIT_STATUS_STOPPED != 0
    }

    /// The operational error that ended output, if any (`IA32_RTIT_STATUS.Error`).
    pub const fn error(&self) -> Option<WalkError> {
        self.error
    }

    /// Whether a ToPA PMI is pending (an INT region filled).
    pub const fn pmi_pending(&self) -> bool {
        self.pmi
    }

    /// Acknowledges the pending ToPA PMI; returns whether one was pending.
    pub fn take_pmi(&mut self) -> bool {
        core::mem::replace(&mut self.pmi, false)
    }

    /// How many times the walk entered the first table through an END entry.
    pub const fn wraps(&self) -> u64 {
        self.wraps
    }

    /// Bytes stored so far.
    pub const fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Bytes offered but not stored.
    pub const fn bytes_lost(&self) -> u64 {
        self.lost
    }

    /// The read-out cursor for `layout` (the one this engine walks).
    pub fn cursor<M: PhysMem + ?Sized>(
        &self,
        layout: &Layout,
        mem: &M,
    ) -> Result<Cursor, WalkError> {
        layout.cursor(mem, self.regs, self.wraps > 0)
    }

    fn fail(&mut self, e: WalkError) -> Result<(), WalkError> {
        self.error = Some(e);
        self.status |= RTIT_STATUS_ERROR;
        self.enabled = false;
        Err(e)
    }

    fn set_offset(&mut self, off: u64) {
        self.regs.mask_ptrs = (self.regs.mask_ptrs & 0xffff_ffff) | (off << MASK_PTRS_OFFSET_SHIFT);
    }

    fn set_pos(&mut self, table: u64, index: u64) {
        self.regs = OutputRegs::new(table, index, 0);
    }

    fn read_entry<M: PhysMem + ?Sized>(&self, mem: &M) -> Result<Entry, WalkError> {
        let (table, index) = (self.regs.table(), self.regs.index());
        let phys = self.regs.entry_phys();
        let raw = match mem.read_entry(phys) {
            Ok(raw) => raw,
            Err(MemFault) => return Err(WalkError::Mem { phys }),
        };
        let entry = match Entry::decode(raw, self.cfg.width) {
            Ok(e) => e,
            Err(error) => {
                return Err(WalkError::Entry {
                    table,
                    index,
                    error,
                })
            }
        };
        if !self.cfg.multi_entry {
            let ok = match (index, entry) {
                (0, Entry::Output { .. }) => true,
                (1, Entry::End { table: t }) => t == table,
                _ => false,
            };
            if !ok {
                return Err(WalkError::SingleEntryRule { table });
            }
        }
        Ok(entry)
    }

    /// Loads the entry at `regs` into `region`, following one END entry.
    fn load<M: PhysMem + ?Sized>(&mut self, mem: &M) -> Result<(), WalkError> {
        let entry = match self.read_entry(mem) {
            Ok(e) => e,
            Err(e) => return self.fail(e),
        };
        let entry = match entry {
            Entry::End { table } => {
                if self.regs.index() == 0 {
                    return self.fail(WalkError::EndInEntryZero {
                        table: self.regs.table(),
                    });
                }
                self.set_pos(table, 0);
                if table == self.origin {
                    self.wraps += 1;
                }
                match self.read_entry(mem) {
                    Ok(Entry::End { .. }) => {
                        return self.fail(WalkError::EndInEntryZero { table });
                    }
                    Ok(e) => e,
                    Err(e) => return self.fail(e),
                }
            }
            e => e,
        };
        if let Entry::Output {
            base,
            order,
            int,
            stop,
        } = entry
        {
            self.region = Region {
                base,
                size: region_size(order),
                int,
                stop,
            };
        }
        Ok(())
    }

    fn region_full<M: PhysMem + ?Sized>(&mut self, mem: &M) {
        if self.region.int {
            self.pmi = true;
        }
        if self.region.stop {
            // The offset stays at the region size, pointing past its end.
            self.status |= RTIT_STATUS_STOPPED;
            return;
        }
        let next = self.regs.index() + 1;
        if next > MAX_TABLE_INDEX {
            let _ = self.fail(WalkError::IndexOverflow);
            return;
        }
        self.set_pos(self.regs.table(), next);
        let _ = self.load(mem);
    }
}

// ---------------------------------------------------------------------------------------------
// PT packets.
// ---------------------------------------------------------------------------------------------

/// Opcode of PAD.
pub const OPC_PAD: u8 = 0x00;
/// First byte of the two-byte (extended) opcodes.
pub const OPC_EXT: u8 = 0x02;
/// Opcode of TSC.
pub const OPC_TSC: u8 = 0x19;
/// Extended opcode of PSB (the pair `02 82` repeats 8 times).
pub const EXT_PSB: u8 = 0x82;
/// Extended opcode of PSBEND.
pub const EXT_PSBEND: u8 = 0x23;
/// Extended opcode of OVF.
pub const EXT_OVF: u8 = 0xf3;
/// Extended opcode of PTW in bits 4:0 of the second byte.
pub const EXT_PTW: u8 = 0x12;
/// PTW second byte: mask of the opcode bits.
pub const PTW_OPC_MASK: u8 = 0x1f;
/// PTW second byte: shift of PayloadBytes (0: 4 bytes, 1: 8 bytes).
pub const PTW_PLC_SHIFT: u32 = 5;
/// PTW second byte: IP bit (a FUP with the PTWRITE's address follows).
pub const PTW_IP: u8 = 0x80;
/// Bytes in a PSB packet.
pub const PSB_LEN: usize = 16;
/// TSC packets carry the low 7 bytes of the TSC.
pub const TSC_MASK: u64 = (1 << 56) - 1;

/// PTW payload size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtwSize {
    /// 4-byte payload (PayloadBytes 0).
    Four,
    /// 8-byte payload (PayloadBytes 1).
    Eight,
}

impl PtwSize {
    /// Payload bytes.
    pub const fn bytes(self) -> usize {
        match self {
            PtwSize::Four => 4,
            PtwSize::Eight => 8,
        }
    }
}

/// An Intel PT packet of the subset the software backend emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// PAD: one zero byte, no meaning.
    Pad,
    /// PSB: the synchronisation boundary a decoder finds with a pattern search.
    Psb,
    /// PSBEND: ends the status packets after a PSB.
    PsbEnd,
    /// TSC: the low 7 bytes of the time-stamp counter.
    Tsc {
        /// TSC value, at most [`TSC_MASK`].
        tsc: u64,
    },
    /// PTW: a PTWRITE payload.
    Ptw {
        /// Payload, zero-extended.
        payload: u64,
        /// Payload size.
        size: PtwSize,
        /// IP bit: a FUP packet with the instruction's address follows.
        ip: bool,
    },
    /// OVF: internal buffer overflow, packets were lost.
    Ovf,
}

/// Why a packet could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
    },
    /// A TSC value above [`TSC_MASK`].
    TscTooWide,
    /// A 4-byte PTW payload above `u32::MAX`.
    PtwTooWide,
}

/// Why the decoder stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No PSB at or after the search start.
    NoSync,
    /// The buffer ends inside the packet starting at `offset`.
    Truncated {
        /// Offset of the packet.
        offset: usize,
    },
    /// An opcode outside the supported subset.
    UnknownOpcode {
        /// Offset of the packet.
        offset: usize,
        /// First byte.
        opcode: u8,
    },
    /// An extended opcode outside the supported subset.
    UnknownExtOpcode {
        /// Offset of the packet.
        offset: usize,
        /// Second byte.
        ext: u8,
    },
    /// A PTW with a reserved PayloadBytes value (2 or 3).
    BadPtwSize {
        /// Offset of the packet.
        offset: usize,
    },
    /// A PSB whose pattern breaks before 16 bytes.
    BadPsb {
        /// Offset of the packet.
        offset: usize,
    },
}

impl Packet {
    /// Encoded length in bytes.
    pub const fn len(&self) -> usize {
        match self {
            Packet::Pad => 1,
            Packet::Psb => PSB_LEN,
            Packet::PsbEnd | Packet::Ovf => 2,
            Packet::Tsc { .. } => 8,
            Packet::Ptw { size, .. } => 2 + size.bytes(),
        }
    }

    /// Always false: no packet is empty (present for the `len` convention).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the packet at the start of `out`; returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let len = self.len();
        if out.len() < len {
            return Err(EncodeError::BufferTooSmall { needed: len });
        }
        let out = &mut out[..len];
        match *self {
            Packet::Pad => out[0] = OPC_PAD,
            Packet::Psb => {
                for pair in out.chunks_exact_mut(2) {
                    pair[0] = OPC_EXT;
                    pair[1] = EXT_PSB;
                }
            }
            Packet::PsbEnd => out.copy_from_slice(&[OPC_EXT, EXT_PSBEND]),
            Packet::Ovf => out.copy_from_slice(&[OPC_EXT, EXT_OVF]),
            Packet::Tsc { tsc } => {
                if tsc > TSC_MASK {
                    return Err(EncodeError::TscTooWide);
                }
                out[0] = OPC_TSC;
                out[1..].copy_from_slice(&tsc.to_le_bytes()[..7]);
            }
            Packet::Ptw { payload, size, ip } => {
                let plc: u8 = match size {
                    PtwSize::Four => {
                        if payload > u64::from(u32::MAX) {
                            return Err(EncodeError::PtwTooWide);
                        }
                        0
                    }
                    PtwSize::Eight => 1,
                };
                out[0] = OPC_EXT;
                out[1] = EXT_PTW | (plc << PTW_PLC_SHIFT) | if ip { PTW_IP } else { 0 };
                out[2..].copy_from_slice(&payload.to_le_bytes()[..size.bytes()]);
            }
        }
        Ok(len)
    }

    /// Decodes the packet at the start of `bytes` (reported at `offset`); returns it and its
    /// length.
    pub fn decode(bytes: &[u8], offset: usize) -> Result<(Packet, usize), DecodeError> {
        let truncated = DecodeError::Truncated { offset };
        let b0 = *bytes.first().ok_or(truncated)?;
        match b0 {
            OPC_PAD => Ok((Packet::Pad, 1)),
            OPC_TSC => {
                let p = bytes.get(1..8).ok_or(truncated)?;
                let mut le = [0u8; 8];
                le[..7].copy_from_slice(p);
                Ok((
                    Packet::Tsc {
                        tsc: u64::from_le_bytes(le),
                    },
                    8,
                ))
            }
            OPC_EXT => {
                let b1 = *bytes.get(1).ok_or(truncated)?;
                match b1 {
                    EXT_PSB => {
                        // Length first, then pattern, in libipt's order.
                        let p = bytes.get(..PSB_LEN).ok_or(truncated)?;
                        for pair in p.chunks_exact(2) {
                            if pair[0] != OPC_EXT || pair[1] != EXT_PSB {
                                return Err(DecodeError::BadPsb { offset });
                            }
                        }
                        Ok((Packet::Psb, PSB_LEN))
                    }
                    EXT_PSBEND => Ok((Packet::PsbEnd, 2)),
                    EXT_OVF => Ok((Packet::Ovf, 2)),
                    _ if b1 & PTW_OPC_MASK == EXT_PTW => {
                        let size = match (b1 >> PTW_PLC_SHIFT) & 0x3 {
                            0 => PtwSize::Four,
                            1 => PtwSize::Eight,
                            _ => return Err(DecodeError::BadPtwSize { offset }),
                        };
                        let n = size.bytes();
                        let p = bytes.get(2..2 + n).ok_or(truncated)?;
                        let mut le = [0u8; 8];
                        le[..n].copy_from_slice(p);
                        Ok((
                            Packet::Ptw {
                                payload: u64::from_le_bytes(le),
                                size,
                                ip: b1 & PTW_IP != 0,
                            },
                            2 + n,
                        ))
                    }
                    ext => Err(DecodeError::UnknownExtOpcode { offset, ext }),
                }
            }
            opcode => Err(DecodeError::UnknownOpcode { offset, opcode }),
        }
    }
}

/// Encodes `packets` back to back into `out`; returns the bytes written.
pub fn encode_all(packets: &[Packet], out: &mut [u8]) -> Result<usize, EncodeError> {
    let mut n = 0;
    for p in packets {
        n += match p.encode(&mut out[n..]) {
            Ok(len) => len,
            Err(EncodeError::BufferTooSmall { needed }) => {
                return Err(EncodeError::BufferTooSmall { needed: n + needed })
            }
            Err(e) => return Err(e),
        };
    }
    Ok(n)
}

/// Finds the start of the first PSB that begins at or after `from`.
///
/// As in libipt, a run of `02 82` pairs longer than a PSB belongs to the packet before it:
/// the PSB is the last 16 bytes of the run.
pub fn find_psb(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + PSB_LEN <= buf.len() {
        if buf[i] != OPC_EXT || buf[i + 1] != EXT_PSB {
            i += 1;
            continue;
        }
        // Extend the run of pairs starting at `i`.
        let mut end = i;
        while end + 2 <= buf.len() && buf[end] == OPC_EXT && buf[end + 1] == EXT_PSB {
            end += 2;
        }
        if end - i >= PSB_LEN {
            return Some(end - PSB_LEN);
        }
        i = end.max(i + 1);
    }
    None
}

/// A packet decoder over a byte buffer that may start mid-packet (after a ring wrap).
///
/// # Invariants
///
/// `pos <= buf.len()`.
#[derive(Clone, Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    sync: Option<usize>,
}

impl<'a> Decoder<'a> {
    /// A decoder at offset 0, not synchronised.
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder {
            buf,
            pos: 0,
            sync: None,
        }
    }

    /// Offset of the next packet.
    pub const fn position(&self) -> usize {
        self.pos
    }

    /// Moves to the next PSB: at or after the current offset, but past the PSB of the last
    /// synchronisation (like libipt's `pt_pkt_sync_forward`); returns its offset.
    pub fn sync_forward(&mut self) -> Result<usize, DecodeError> {
        let from = match self.sync {
            Some(s) if s == self.pos => self.pos + 1,
            _ => self.pos,
        };
        match find_psb(self.buf, from) {
            Some(at) => {
                // INVARIANT: `find_psb` returns an offset with 16 bytes after it.
                self.pos = at;
                self.sync = Some(at);
                Ok(at)
            }
            None => Err(DecodeError::NoSync),
        }
    }

    /// Decodes the packet at the current offset and moves past it; `Ok(None)` at the end of
    /// the buffer. On error the offset stays at the bad packet: call
    /// [`Decoder::sync_forward`] to resume.
    pub fn next_packet(&mut self) -> Result<Option<(usize, Packet)>, DecodeError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let at = self.pos;
        let (p, len) = Packet::decode(&self.buf[at..], at)?;
        // INVARIANT: `decode` only returns lengths it checked against the buffer.
        self.pos = at + len;
        Ok(Some((at, p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_bits() {
        let w = PhysWidth::ARCH_MAX;
        let e = Entry::Output {
            base: 0x20_0000,
            order: 9,
            int: true,
            stop: true,
        };
        assert_eq!(e.encode(w), Ok(0x20_0000 | (9 << 6) | 0x14));
        assert_eq!(Entry::decode(0x20_0000 | (9 << 6) | 0x14, w), Ok(e));
        assert_eq!(Entry::End { table: 0x5000 }.encode(w), Ok(0x5001));
    }

    #[test]
    fn mask_ptrs_layout() {
        let r = OutputRegs::new(0x1000, 3, 0x40);
        assert_eq!(r.mask_ptrs, 0x7f | (3 << 7) | (0x40 << 32));
        assert_eq!((r.index(), r.offset(), r.entry_phys()), (3, 0x40, 0x1018));
    }
}
