// SPDX-License-Identifier: GPL-2.0

//! Speculations: `speculation()`, `speculate()`, `commit()`, `discard()`.
//!
//! Each CPU has one buffer of `specsize` bytes per speculation, allocated at LOAD (and
//! charged to the budget) when a clause calls `speculation()`. A speculated clause writes its
//! records into its CPU's buffer, in the principal buffer's record format.
//!
//! A speculation's life is one word of [`Specs::states`]: INACTIVE; ACTIVE (generation `g`)
//! from `speculation()`, counting the CPUs that hold data of it; COMMITTING or DISCARDING
//! from `commit()`/`discard()`, counting the CPUs still to settle; INACTIVE again when the
//! last has settled. A CPU joins the count (one compare-and-swap of the word, so a commit
//! either counts it or it sees the commit and drops its record) at its first record of the
//! generation, and notes it in its [`Specs::held`] entry. A CPU settles (copies its buffer to
//! its principal buffer, or empties it) itself: at once on the CPU that commits, at the next
//! buffer switch (SNAPSHOT, in an IPI on that CPU) on the others, so no CPU touches another's
//! buffers. An offline CPU is settled by SNAPSHOT without touching its buffers: what it
//! speculated before going offline is lost. Until then the speculation is busy:
//! `speculation()` counts "busy" when only busy ones are left and "unavailable" when all are
//! active, as DTrace does.

use crate::action::Record;
use crate::buffer::{self, Reader};
use crate::sys::gfp_load;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::alloc::{KVec, VVec};
use kernel::prelude::*;

/// Who wrote a speculated record: the probe, the clause and the firing's timestamp.
pub(crate) struct Origin {
    pub(crate) probe: u32,
    pub(crate) clause: u32,
    pub(crate) ts: u64,
}

const INACTIVE: u64 = 0;
const ACTIVE: u64 = 1;
const COMMITTING: u64 = 2;
const DISCARDING: u64 = 3;

/// A state word: state in bits 0..7, CPUs in 8..31, generation in 32..63.
const fn pack(state: u64, cpus: u64, gen: u64) -> u64 {
    state | ((cpus & 0xff_ffff) << 8) | (gen << 32)
}

const fn state(v: u64) -> u64 {
    v & 0xff
}

const fn cpus(v: u64) -> u64 {
    (v >> 8) & 0xff_ffff
}

const fn gen(v: u64) -> u64 {
    v >> 32
}

/// Why `speculation()` returned 0.
pub(crate) enum Refused {
    /// Every speculation is active.
    Unavailable,
    /// Some are still being committed or discarded.
    Busy,
}

/// Why a speculative record was not written.
pub(crate) enum Lost {
    /// Counted as a speculative drop: the buffer is full, or the speculation is settling.
    Drop,
    /// Silently: speculation 0 or an inactive one, as DTrace.
    Silent,
}

/// The session-wide state of the speculations.
///
/// # Invariants
///
/// `states.len() == nspec` and `held.len() == nspec * ncpus`; a CPU is counted in an ACTIVE,
/// COMMITTING or DISCARDING word exactly while its `held` entry is that word's generation.
pub(crate) struct Specs {
    states: KVec<AtomicU64>,
    /// Per CPU and speculation (`cpu * nspec + i`): the generation it holds data of (and is
    /// counted in), or 0.
    held: KVec<AtomicU64>,
    /// Per speculation: when the last `commit()` fired, the timestamp of its records.
    commit_ts: KVec<AtomicU64>,
    nspec: usize,
    specsize: usize,
}

/// One CPU's speculative buffers; only its CPU touches them (probe context or an IPI).
pub(crate) struct SpecCpu {
    buf: VVec<u8>,
    /// Per speculation: bytes used.
    off: KVec<usize>,
}

impl Specs {
    /// `nspec` speculations over `ncpus` CPUs, buffers of `specsize` bytes.
    pub(crate) fn new(nspec: usize, ncpus: u32, specsize: usize) -> Result<Self> {
        let mut states = KVec::with_capacity(nspec, gfp_load())?;
        let mut commit_ts = KVec::with_capacity(nspec, gfp_load())?;
        for _ in 0..nspec {
            states.push(AtomicU64::new(pack(INACTIVE, 0, 0)), gfp_load())?;
            commit_ts.push(AtomicU64::new(0), gfp_load())?;
        }
        let n = nspec.checked_mul(ncpus as usize).ok_or(EINVAL)?;
        let mut held = KVec::with_capacity(n, gfp_load())?;
        for _ in 0..n {
            held.push(AtomicU64::new(0), gfp_load())?;
        }
        // INVARIANT: the lengths are built above; nothing is active, nothing held.
        Ok(Self {
            states,
            held,
            commit_ts,
            nspec,
            specsize,
        })
    }

    /// A CPU's buffers (allocated at LOAD).
    pub(crate) fn new_cpu(&self) -> Result<SpecCpu> {
        let bytes = self.nspec.checked_mul(self.specsize).ok_or(EINVAL)?;
        Ok(SpecCpu {
            buf: VVec::from_elem(0u8, bytes, crate::sys::gfp_load())?,
            off: KVec::from_elem(0usize, self.nspec, gfp_load())?,
        })
    }

    /// `speculation()`: activates a free speculation; its id (1..=nspec).
    pub(crate) fn speculation(&self) -> core::result::Result<u64, Refused> {
        let mut busy = false;
        for (i, s) in self.states.iter().enumerate() {
            let mut v = s.load(Ordering::Acquire);
            loop {
                match state(v) {
                    INACTIVE => {}
                    ACTIVE => break,
                    _ => {
                        busy = true;
                        break;
                    }
                }
                // Generations count from 1 (0 is "holds nothing") and wrap in 32 bits.
                let g = match (gen(v) + 1) & 0xffff_ffff {
                    0 => 1,
                    g => g,
                };
                match s.compare_exchange(v, pack(ACTIVE, 0, g), Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return Ok(i as u64 + 1),
                    Err(now) => v = now,
                }
            }
        }
        Err(if busy {
            Refused::Busy
        } else {
            Refused::Unavailable
        })
    }

    /// Index of speculation `id`, if it is one.
    fn index(&self, id: u64) -> Option<usize> {
        let i = usize::try_from(id).ok()?.checked_sub(1)?;
        (i < self.nspec).then_some(i)
    }

    fn held(&self, cpu: u32, i: usize) -> Option<&AtomicU64> {
        self.held.get(cpu as usize * self.nspec + i)
    }

    /// Appends `rec`, written by `from`, to the buffer `sc` of this CPU, `cpu`, for
    /// speculation `id`.
    pub(crate) fn write(
        &self,
        cpu: u32,
        sc: &mut SpecCpu,
        id: u64,
        from: Origin,
        rec: &Record<'_>,
    ) -> core::result::Result<(), Lost> {
        let Origin { probe, clause, ts } = from;
        let i = self.index(id).ok_or(Lost::Silent)?;
        let (Some(s), Some(held), Some(off)) =
            (self.states.get(i), self.held(cpu, i), sc.off.get_mut(i))
        else {
            return Err(Lost::Silent);
        };
        let mut v = s.load(Ordering::Acquire);
        loop {
            match state(v) {
                ACTIVE => {}
                INACTIVE => return Err(Lost::Silent),
                _ => return Err(Lost::Drop),
            }
            if held.load(Ordering::Relaxed) == gen(v) {
                break;
            }
            // First record of this generation here: join the count, with what is left of an
            // earlier generation (settled already) thrown away.
            let new = pack(ACTIVE, cpus(v) + 1, gen(v));
            match s.compare_exchange(v, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // INVARIANT: counted in the word, and noted as holding its generation.
                    held.store(gen(v), Ordering::Release);
                    *off = 0;
                    break;
                }
                Err(now) => v = now,
            }
        }
        let start = i * self.specsize;
        let area = sc
            .buf
            .get_mut(start..start + self.specsize)
            .ok_or(Lost::Silent)?;
        if buffer::write(
            area,
            off,
            buffer::with_clause(rec.kind as u32, clause),
            probe,
            rec.id,
            ts,
            rec.data,
        ) {
            Ok(())
        } else {
            Err(Lost::Drop)
        }
    }

    /// `commit(id)` (`commit` true) or `discard(id)`, fired at `ts`: an active speculation
    /// starts to settle on the CPUs that hold data of it (none: it is inactive at once).
    /// Returns whether it did (the caller then settles its own CPU).
    pub(crate) fn end(&self, id: u64, commit: bool, ts: u64) -> bool {
        let Some(i) = self.index(id) else {
            return false;
        };
        let (Some(s), Some(cts)) = (self.states.get(i), self.commit_ts.get(i)) else {
            return false;
        };
        let mut v = s.load(Ordering::Acquire);
        loop {
            if state(v) != ACTIVE {
                return false;
            }
            let new = match (cpus(v), commit) {
                (0, _) => pack(INACTIVE, 0, gen(v)),
                (n, true) => {
                    // Published by the CAS below to the CPUs that claim a share of it.
                    cts.store(ts, Ordering::Relaxed);
                    pack(COMMITTING, n, gen(v))
                }
                (n, false) => pack(DISCARDING, n, gen(v)),
            };
            match s.compare_exchange(v, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    /// Claims `cpu`'s settlement of speculation `i`: the state word if `cpu` is counted in
    /// a committing or discarding generation and this call is the one that settles it.
    fn claim(&self, cpu: u32, i: usize) -> Option<u64> {
        let v = self.states.get(i)?.load(Ordering::Acquire);
        if !matches!(state(v), COMMITTING | DISCARDING) {
            return None;
        }
        self.held(cpu, i)?
            .compare_exchange(gen(v), 0, Ordering::AcqRel, Ordering::Relaxed)
            .ok()?;
        Some(v)
    }

    /// One CPU fewer to settle speculation `i`; the last makes it inactive.
    fn settled_one(&self, i: usize) {
        let Some(s) = self.states.get(i) else {
            return;
        };
        let mut v = s.load(Ordering::Acquire);
        loop {
            let new = match cpus(v) {
                0 | 1 => pack(INACTIVE, 0, gen(v)),
                n => pack(state(v), n - 1, gen(v)),
            };
            match s.compare_exchange(v, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(now) => v = now,
            }
        }
    }

    /// Settles every committing or discarding speculation on `cpu`, whose buffers `sc` are
    /// (borrowed from its per-CPU state, so this runs on it): a commit copies its records to
    /// the principal buffer `pbuf` through its cursor `cur` (its policy applies, and it
    /// counts what did not fit) with the commit's timestamp (they appear where the commit
    /// is). Returns the records written and dropped, which the caller counts as the
    /// principal buffer's own writes, and whether that filled a fill buffer.
    pub(crate) fn settle(
        &self,
        cpu: u32,
        sc: &mut SpecCpu,
        pbuf: &mut [u8],
        cur: &mut buffer::Cursor,
    ) -> (u64, u64, bool) {
        let (mut written, mut dropped, mut filled) = (0u64, 0u64, false);
        for i in 0..self.nspec {
            let Some(v) = self.claim(cpu, i) else {
                continue;
            };
            let Some(o) = sc.off.get_mut(i) else {
                continue;
            };
            if state(v) == COMMITTING {
                let ts = self
                    .commit_ts
                    .get(i)
                    .map_or(0, |t| t.load(Ordering::Relaxed));
                let start = i * self.specsize;
                let used = (*o).min(self.specsize);
                if let Some(area) = sc.buf.get(start..start + used) {
                    for r in Reader::new(area).flatten() {
                        let h = buffer::Header {
                            timestamp: ts,
                            ..r.hdr
                        };
                        match cur.write(pbuf, false, &h, r.data) {
                            buffer::Written::Ok => written += 1,
                            w => {
                                filled |= w == buffer::Written::Filled;
                                dropped += 1;
                            }
                        }
                    }
                }
            }
            *o = 0;
            self.settled_one(i);
        }
        (written, dropped, filled)
    }

    /// Settles every committing or discarding speculation for an offline `cpu` without
    /// touching its buffers (it runs nothing; it starts afresh when it next speculates).
    pub(crate) fn settle_offline(&self, cpu: u32) {
        for i in 0..self.nspec {
            if self.claim(cpu, i).is_some() {
                self.settled_one(i);
            }
        }
    }
}
