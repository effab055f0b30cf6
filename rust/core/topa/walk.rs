// SPDX-License-Identifier: GPL-2.0

//! A layout's walk: a register snapshot turned into a linear position, and the data read
//! out oldest first.

use super::*;

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
