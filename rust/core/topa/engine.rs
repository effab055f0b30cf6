// SPDX-License-Identifier: GPL-2.0

//! The processor's output walk in software: where each byte goes, END, STOP and INT, and
//! the registers it leaves.

use super::*;

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
