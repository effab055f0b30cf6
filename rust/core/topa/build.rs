// SPDX-License-Identifier: GPL-2.0

//! The table builder: lays out caller-provided table pages for a list of slices, refusing
//! anything the SDM calls a ToPA error.

use super::*;

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
