// SPDX-License-Identifier: GPL-2.0

//! The cleaner, in process context: its state machine (dirty, rinsing, clean, each step
//! behind a cross-call) and when a CPU asks for a pass sooner.

use super::*;

/// Why a cleaner pass did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanError {
    /// Another cleaner pass on this dynamic memory is running.
    Busy,
}

/// Quiescence by cross-call: the kernel implementation calls a function on every online CPU
/// and waits for all of them (`smp_call_function` with wait, plus the local CPU). Probes run
/// with interrupts off, so when the call returns, every probe context that was running when
/// it was issued has finished, and every later one sees what the caller wrote before it.
pub trait CrossCall {
    /// Returns once every CPU has left the probe context it was in, if any.
    fn sync_all_cpus(&self);
}

/// What one cleaner pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Chunks moved from dirty to rinsing (and so to clean).
    pub rinsed: u64,
    /// Cross-calls issued (0 or 2).
    pub crosscalls: u32,
    /// CPUs whose dirty list was rinsed on another CPU because their clean list was not empty.
    pub borrowed: u32,
    /// CPUs whose dirty list could not be rinsed this pass (no CPU to borrow).
    pub failclean: u32,
}

impl<'a> Dstate<'a> {
    /// Whether CPU `cpu` should ask for a cleaner pass now rather than at the next period
    /// (on-demand cleaning): chunks it freed wait on its dirty list, its clean list is empty
    /// and its free list holds less than [`LOW_WATER_DIV`]th of its share. Reads three of
    /// its own counters and changes nothing: the cleaner, the lists and the states stay as
    /// they are, only the pass comes sooner.
    ///
    /// A CPU whose clean list is not empty is not asked for: a pass cannot give it another
    /// one (it rinses such a CPU's dirty chunks only on a CPU whose lists are all empty),
    /// so the request would only make an idle pass.
    pub fn wants_clean(&self, cpu: usize) -> bool {
        let Some(d) = self.cpus.get(cpu) else {
            return false;
        };
        if d.dirty_len.load(Relaxed) == 0 || d.clean_len.load(Relaxed) != 0 {
            return false;
        }
        // Asked after every store that may allocate: the cheap tests first, and the share's
        // size without a division.
        let low = u64::from(self.layout.share_len(cpu)) / LOW_WATER_DIV;
        d.free_len.load(Relaxed) < low.max(1)
    }

    /// One cleaner pass, in process context at `cleanrate`:
    ///
    /// 1. every CPU's dirty list becomes a rinsing list;
    /// 2. cross-call: no probe context that could have reached those chunks is left;
    /// 3. every rinsing list becomes a clean list;
    /// 4. cross-call: every CPU has seen the clean lists;
    /// 5. the state becomes CLEAN.
    ///
    /// A CPU that frees but does not allocate keeps a non-empty clean list, which step 3
    /// must not overwrite: its dirty list is rinsed on a CPU whose lists are all empty
    /// instead (and left for a later pass when there is none; it cannot cause a drop, since
    /// an allocator would take that clean list first). Without dirty chunks the pass does
    /// nothing, not even a cross-call.
    pub fn clean<X: CrossCall + ?Sized>(&self, xc: &X) -> Result<CleanReport, CleanError> {
        if self.header.cleaning.swap(true, Acquire) {
            return Err(CleanError::Busy);
        }
        let report = self.clean_pass(xc);
        self.header.cleaning.store(false, Release);
        Ok(report)
    }

    fn clean_pass<X: CrossCall + ?Sized>(&self, xc: &X) -> CleanReport {
        let h = self.header;
        let mut report = CleanReport::default();
        for d in self.cpus {
            if d.dirty.load(Acquire) == NIL {
                continue;
            }
            if d.rinsing.load(Acquire) != NIL {
                // Lent to another CPU's dirty list earlier in this pass; our own dirty
                // chunks wait for the next pass.
                report.failclean += 1;
                continue;
            }
            let mut rinser = d;
            if d.clean.load(Acquire) != NIL {
                match self.cpus.iter().find(|r| {
                    r.rinsing.load(Acquire) == NIL
                        && r.dirty.load(Acquire) == NIL
                        && r.clean.load(Acquire) == NIL
                }) {
                    Some(r) => {
                        rinser = r;
                        report.borrowed += 1;
                    }
                    None => {
                        report.failclean += 1;
                        continue;
                    }
                }
            }
            // Swap the dirty list out; the rinsing pointer is set first so that a chunk
            // marked free is always on some list.
            let list = loop {
                let dirty = d.dirty.load(Acquire);
                rinser.rinsing.store(dirty, Release);
                if d.dirty
                    .compare_exchange(dirty, NIL, AcqRel, Acquire)
                    .is_ok()
                {
                    break dirty;
                }
                spin_loop();
            };
            let len = self.list_walk(list, |_| ());
            d.dirty_len.fetch_sub(len, Relaxed);
            rinser.rinsing_len.fetch_add(len, Relaxed);
            report.rinsed += len;
        }
        h.borrowed.fetch_add(u64::from(report.borrowed), Relaxed);
        h.failclean.fetch_add(u64::from(report.failclean), Relaxed);
        if report.rinsed == 0 {
            h.idle_passes.fetch_add(1, Relaxed);
            self.sample_high_water();
            return report;
        }

        xc.sync_all_cpus();
        report.crosscalls += 1;
        h.crosscalls.fetch_add(1, Relaxed);

        for d in self.cpus {
            let list = d.rinsing.load(Acquire);
            if !self.is_chunk(list) {
                continue;
            }
            // Nothing can reach these chunks any more: they become clean.
            let len = d.rinsing_len.load(Relaxed);
            self.publish_clean(d, list, len);
            d.rinsing.store(NIL, Release);
            d.rinsing_len.fetch_sub(len, Relaxed);
        }

        // Before CLEAN: every CPU has seen the clean lists, so no allocator still acting on
        // an older view can overwrite CLEAN with a stale EMPTY/DIRTY/RINSING.
        xc.sync_all_cpus();
        report.crosscalls += 1;
        h.crosscalls.fetch_add(1, Relaxed);

        h.state.store(DstateState::Clean as u32, Release);
        h.passes.fetch_add(1, Relaxed);
        h.rinsed.fetch_add(report.rinsed, Relaxed);
        self.sample_high_water();
        report
    }
}
