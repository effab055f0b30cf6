// SPDX-License-Identifier: GPL-2.0

//! Counters and the audit: what STATUS and DYNSTAT report of a dynamic memory, and the
//! check at STOP that every chunk is on exactly one list or in use.

use super::*;

/// Counters of one CPU, for STATUS.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Variables allocated by this CPU.
    pub allocs: u64,
    /// Variables freed (value 0 stored) by this CPU.
    pub frees: u64,
    /// Allocations served from another CPU's lists.
    pub steals: u64,
    /// Clean lists moved to this CPU's free list.
    pub clean_moves: u64,
    /// Insertions that lost the bucket-head race (their chunk went to the dirty list).
    pub races: u64,
    /// Drops while EMPTY.
    pub drops_empty: u64,
    /// Drops while DIRTY.
    pub drops_dirty: u64,
    /// Drops while RINSING.
    pub drops_rinsing: u64,
    /// Drops because the tuple did not fit a chunk.
    pub drops_size: u64,
    /// Operations abandoned under contention.
    pub contended: u64,
    /// Length of the free list.
    pub free: u64,
    /// Length of the clean list.
    pub clean: u64,
    /// Length of the rinsing list.
    pub rinsing: u64,
    /// Length of the dirty list.
    pub dirty: u64,
}

/// Counters of one consumer's dynamic memory, for STATUS.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DstateStats {
    /// [`DstateState`] as `u32`.
    pub state: u32,
    /// Number of CPUs.
    pub ncpus: u32,
    /// Number of chunks.
    pub nchunks: u64,
    /// Bytes per chunk.
    pub chunk_bytes: u64,
    /// Sum over the CPUs of [`CpuStats`].
    pub total: CpuStats,
    /// Chunks holding a variable now (allocations minus frees).
    pub in_use: u64,
    /// Most chunks seen in use (sampled by the cleaner, at drops and by this call).
    pub high_water: u64,
    /// Cleaner passes that did work.
    pub passes: u64,
    /// Cleaner passes that found nothing dirty.
    pub idle_passes: u64,
    /// Cross-calls issued by the cleaner.
    pub crosscalls: u64,
    /// Chunks cleaned.
    pub rinsed: u64,
    /// Dirty lists rinsed on a borrowed CPU.
    pub borrowed: u64,
    /// Dirty lists left for a later pass.
    pub failclean: u64,
}

/// Chunk counts found by [`Dstate::audit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Chunks on free lists.
    pub free: u64,
    /// Chunks on clean lists.
    pub clean: u64,
    /// Chunks on rinsing lists.
    pub rinsing: u64,
    /// Chunks on dirty lists.
    pub dirty: u64,
    /// Chunks on hash chains.
    pub in_use: u64,
}

impl Audit {
    /// Chunks accounted for.
    pub fn total(&self) -> u64 {
        self.free + self.clean + self.rinsing + self.dirty + self.in_use
    }
}

/// What [`Dstate::audit`] found wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditError {
    /// The scratch bitmap is shorter than [`Layout::audit_bitmap_words`].
    Bitmap,
    /// A chunk is on two lists or chains, or twice on one (a cycle).
    Duplicate(u32),
    /// A list or chain holds an index that is no chunk.
    BadIndex(u32),
    /// A chunk on a hash chain is marked free, or one on a list is not.
    BadHash(u32),
    /// Chunks on no list and no chain.
    Lost(u64),
    /// The walked counts disagree with the counters.
    Counters,
}

/// The four per-CPU lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// Free list.
    Free,
    /// Clean list.
    Clean,
    /// Rinsing list.
    Rinsing,
    /// Dirty list.
    Dirty,
}

impl<'a> Dstate<'a> {
    /// Walks a private list, bounded by the number of chunks; returns its length.
    pub(super) fn list_walk(&self, mut c: u32, mut f: impl FnMut(u32)) -> u64 {
        let mut n = 0u64;
        while self.is_chunk(c) && n <= u64::from(self.layout.nchunks) {
            f(c);
            n += 1;
            c = self.w(c, W_NEXT).0.load(Acquire) as u32;
        }
        n
    }

    pub(super) fn in_use(&self) -> u64 {
        let (a, f) = self.cpus.iter().fold((0u64, 0u64), |(a, f), d| {
            (
                a.wrapping_add(d.allocs.load(Relaxed)),
                f.wrapping_add(d.frees.load(Relaxed)),
            )
        });
        a.saturating_sub(f)
    }

    /// Records the chunks in use now if they are the most seen.
    pub(super) fn sample_high_water(&self) {
        self.header.high_water.fetch_max(self.in_use(), Relaxed);
    }

    /// Counters of `cpu`.
    pub fn cpu_stats(&self, cpu: usize) -> Option<CpuStats> {
        let d = self.cpus.get(cpu)?;
        Some(CpuStats {
            allocs: d.allocs.load(Relaxed),
            frees: d.frees.load(Relaxed),
            steals: d.steals.load(Relaxed),
            clean_moves: d.clean_moves.load(Relaxed),
            races: d.races.load(Relaxed),
            drops_empty: d.drops_empty.load(Relaxed),
            drops_dirty: d.drops_dirty.load(Relaxed),
            drops_rinsing: d.drops_rinsing.load(Relaxed),
            drops_size: d.drops_size.load(Relaxed),
            contended: d.contended.load(Relaxed),
            free: d.free_len.load(Relaxed),
            clean: d.clean_len.load(Relaxed),
            rinsing: d.rinsing_len.load(Relaxed),
            dirty: d.dirty_len.load(Relaxed),
        })
    }

    /// Counters of the whole dynamic memory (and a high-water sample).
    pub fn stats(&self) -> DstateStats {
        self.sample_high_water();
        let h = self.header;
        let mut t = CpuStats::default();
        for s in (0..self.layout.ncpus()).filter_map(|c| self.cpu_stats(c)) {
            t.allocs += s.allocs;
            t.frees += s.frees;
            t.steals += s.steals;
            t.clean_moves += s.clean_moves;
            t.races += s.races;
            t.drops_empty += s.drops_empty;
            t.drops_dirty += s.drops_dirty;
            t.drops_rinsing += s.drops_rinsing;
            t.drops_size += s.drops_size;
            t.contended += s.contended;
            t.free += s.free;
            t.clean += s.clean;
            t.rinsing += s.rinsing;
            t.dirty += s.dirty;
        }
        DstateStats {
            state: h.state.load(Relaxed),
            ncpus: self.layout.ncpus,
            nchunks: u64::from(self.layout.nchunks),
            chunk_bytes: self.layout.chunk_bytes() as u64,
            total: t,
            in_use: self.in_use(),
            high_water: h.high_water.load(Relaxed),
            passes: h.passes.load(Relaxed),
            idle_passes: h.idle_passes.load(Relaxed),
            crosscalls: h.crosscalls.load(Relaxed),
            rinsed: h.rinsed.load(Relaxed),
            borrowed: h.borrowed.load(Relaxed),
            failclean: h.failclean.load(Relaxed),
        }
    }

    /// Drops counted for variable id `var`.
    pub fn var_drops(&self, var: u32) -> u64 {
        self.var_drops.get(var as usize).map_or(0, Word::get)
    }

    /// Calls `f` with every chunk on one of `cpu`'s lists (bounded walk; meaningful at
    /// quiescence). Returns the number of chunks visited.
    pub fn for_each_in_list(&self, cpu: usize, list: List, f: impl FnMut(u32)) -> u64 {
        let Some(d) = self.cpus.get(cpu) else {
            return 0;
        };
        let head = match list {
            List::Free => &d.free,
            List::Clean => &d.clean,
            List::Rinsing => &d.rinsing,
            List::Dirty => &d.dirty,
        };
        self.list_walk(head.load(Acquire), f)
    }

    /// Checks at quiescence that every chunk is on exactly one list or hash chain, that list
    /// chunks are marked free and chained ones are not, and that the counters agree
    /// (free + clean + rinsing + dirty + in use = total). `seen` is scratch of at least
    /// [`Layout::audit_bitmap_words`] words.
    pub fn audit(&self, seen: &mut [u64]) -> Result<Audit, AuditError> {
        let words = self.layout.audit_bitmap_words();
        let seen = seen.get_mut(..words).ok_or(AuditError::Bitmap)?;
        seen.fill(0);
        let mut err = None;
        let mut mark = |c: u32, chained: bool, err: &mut Option<AuditError>| {
            if err.is_some() {
                return;
            }
            if !self.is_chunk(c) {
                *err = Some(AuditError::BadIndex(c));
                return;
            }
            let (i, bit) = (c as usize / 64, 1u64 << (c % 64));
            // PANIC: `c < nchunks` (checked above) and `seen` has `nchunks.div_ceil(64)` words.
            if seen[i] & bit != 0 {
                *err = Some(AuditError::Duplicate(c));
                return;
            }
            seen[i] |= bit;
            if (self.w(c, W_HASH).get() == HASH_FREE) == chained {
                *err = Some(AuditError::BadHash(c));
            }
        };
        let mut a = Audit::default();
        for cpu in 0..self.layout.ncpus() {
            // PANIC: `cpus` has `ncpus` entries (type invariant).
            let d = &self.cpus[cpu];
            for (list, count, counter) in [
                (List::Free, &mut a.free, &d.free_len),
                (List::Clean, &mut a.clean, &d.clean_len),
                (List::Rinsing, &mut a.rinsing, &d.rinsing_len),
                (List::Dirty, &mut a.dirty, &d.dirty_len),
            ] {
                let n = self.for_each_in_list(cpu, list, |c| mark(c, false, &mut err));
                if n != counter.load(Relaxed) && err.is_none() {
                    err = Some(AuditError::Counters);
                }
                *count += n;
            }
        }
        for b in self.buckets {
            let mut c = b.head.load(Acquire);
            let mut steps = 0u64;
            while c != SINK && err.is_none() {
                mark(c, true, &mut err);
                if err.is_some() {
                    break;
                }
                a.in_use += 1;
                steps += 1;
                if steps > u64::from(self.layout.nchunks) {
                    err = Some(AuditError::Duplicate(c));
                    break;
                }
                c = self.w(c, W_NEXT).get() as u32;
            }
        }
        if let Some(e) = err {
            return Err(e);
        }
        let total = u64::from(self.layout.nchunks);
        if a.total() != total {
            return Err(AuditError::Lost(total.saturating_sub(a.total())));
        }
        if a.in_use != self.in_use() {
            return Err(AuditError::Counters);
        }
        Ok(a)
    }
}
