// SPDX-License-Identifier: GPL-2.0

//! Intel PT output through ToPA tables: entries, builder, output engine, packets.
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
//!
//! This file holds the architectural constants and the registers and memory the others
//! share; `entry` (entries and the address width), `build` (the builder), `walk` (a
//! layout's position and read-out), `engine` (the output walk) and `packet` (the packets)
//! hold one part of the scheme each.

mod build;
mod engine;
mod entry;
mod packet;
mod walk;

pub use build::*;
pub use engine::*;
pub use entry::*;
use entry::{check_region, check_table, raw_end, raw_output};
pub use packet::*;
pub use walk::*;

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
// Layout: what the builder made, which the walk and the engine read.
// ---------------------------------------------------------------------------------------------

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
