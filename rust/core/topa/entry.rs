// SPDX-License-Identifier: GPL-2.0

//! The ToPA entry format of the Intel SDM (vol. 3, "Table of Physical Addresses") and the
//! physical address width its validity rules depend on.

use super::*;

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

pub(super) const fn raw_output(base: u64, order: u8, int: bool, stop: bool) -> u64 {
    let mut raw = base | ((order as u64) << ENTRY_SIZE_SHIFT);
    if int {
        raw |= ENTRY_INT;
    }
    if stop {
        raw |= ENTRY_STOP;
    }
    raw
}

pub(super) const fn raw_end(table: u64) -> u64 {
    table | ENTRY_END
}

/// Checks an output region's order, alignment and width.
pub(super) const fn check_region(base: u64, order: u8, width: PhysWidth) -> Result<(), EntryError> {
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
pub(super) const fn check_table(table: u64, width: PhysWidth) -> Result<(), EntryError> {
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
