// SPDX-License-Identifier: GPL-2.0

//! The per-CPU chunk lists and the drops: how a CPU takes a chunk (its own lists, then
//! the other CPUs'), what state a failed search leaves, and where freed chunks go.

use super::*;

/// The state in force when a dynamic variable was dropped: drops are counted by the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Every chunk in use: raise `dynvarsize`.
    Empty,
    /// Dirty chunks were waiting for the cleaner: raise `cleanrate` (or `dynvarsize`).
    Dirty,
    /// Chunks were being rinsed: raise `cleanrate` (or `dynvarsize`).
    Rinsing,
}

impl<'a> Dstate<'a> {
    /// Pushes one chunk onto a CPU's dirty list (races only with the cleaner's swap).
    pub(super) fn push_dirty(&self, d: &CpuState, c: u32) {
        d.dirty_len.fetch_add(1, Relaxed);
        loop {
            let head = d.dirty.load(Acquire);
            self.w(c, W_NEXT).0.store(u64::from(head), Release);
            if d.dirty.compare_exchange(head, c, AcqRel, Acquire).is_ok() {
                return;
            }
            spin_loop();
        }
    }

    /// Last chunk of a private list (bounded walk).
    fn list_tail(&self, list: u32) -> u32 {
        let mut tail = list;
        let mut steps = 0;
        loop {
            let next = self.w(tail, W_NEXT).get() as u32;
            if !self.is_chunk(next) || steps > self.layout.nchunks {
                return tail;
            }
            tail = next;
            steps += 1;
        }
    }

    /// Pushes the private list starting at `list` onto the list at `head` as a whole (a
    /// Treiber push; pushes are immune to ABA). The tail is only looked for when `head` is
    /// not empty, which the allocator never meets: it fills only its own, empty, free list.
    fn splice(&self, head: &AtomicU32, list: u32) {
        let mut tail = None;
        loop {
            let old = head.load(Acquire);
            if old != NIL {
                let t = *tail.get_or_insert_with(|| self.list_tail(list));
                self.w(t, W_NEXT).0.store(u64::from(old), Release);
            } else if let Some(t) = tail {
                self.w(t, W_NEXT).0.store(u64::from(NIL), Release);
            }
            if head.compare_exchange(old, list, AcqRel, Acquire).is_ok() {
                return;
            }
            spin_loop();
        }
    }

    /// Publishes a rinsed list of `len` chunks as `d`'s clean list; its head carries the
    /// length of the whole clean list for the allocator that takes it.
    ///
    /// The list came from a dirty list, whose last chunk links to `NIL` (pushed onto an
    /// empty list): onto an empty clean list it goes as it is. Only to append an older
    /// clean list is the tail looked for, as in [`Dstate::splice`]; so the cleaner walks a
    /// list once a pass (to count it), not twice.
    pub(super) fn publish_clean(&self, d: &CpuState, list: u32, len: u64) {
        let mut tail = None;
        d.clean_len.fetch_add(len, Relaxed);
        loop {
            // Empty in practice: only the cleaner fills clean lists and it chose this CPU
            // because its clean list was empty. Appending keeps any chunk safe regardless.
            let old = d.clean.load(Acquire);
            let total = if self.is_chunk(old) {
                len + self.w(old, W_META).get()
            } else {
                len
            };
            self.w(list, W_META).set(total);
            if old != NIL {
                let t = *tail.get_or_insert_with(|| self.list_tail(list));
                self.w(t, W_NEXT).0.store(u64::from(old), Release);
            } else if let Some(t) = tail {
                self.w(t, W_NEXT).0.store(u64::from(NIL), Release);
            }
            if d.clean.compare_exchange(old, list, AcqRel, Acquire).is_ok() {
                return;
            }
            spin_loop();
        }
    }

    /// Takes a chunk for CPU `me`: own free list, own clean list (moved to the free list),
    /// then the other CPUs' lists in turn. When a whole lap finds nothing the consumer state
    /// becomes EMPTY, DIRTY or RINSING and the drop is counted by the state then in force.
    // Out of line: a lookup, the commonest walk, does not carry its frame.
    #[inline(never)]
    pub(super) fn alloc_chunk(&self, me: usize, var: u32) -> Result<u32, DynvarError> {
        let n = self.layout.ncpus();
        let mine = self.cpu(me)?;
        let mut cpu = me;
        let mut found_dirty = false;
        let mut found_rinsing = false;
        let mut laps = 0;
        loop {
            let d = self.cpu(cpu)?;
            let free = d.free.load(Acquire);
            if self.is_chunk(free) {
                // No ABA: a chunk popped by another CPU comes back to a free list only
                // through two cleaner cross-calls, which cannot complete while this CPU
                // has interrupts off.
                let next = self.w(free, W_NEXT).0.load(Acquire) as u32;
                if d.free.compare_exchange(free, next, AcqRel, Acquire).is_ok() {
                    d.free_len.fetch_sub(1, Relaxed);
                    if cpu != me {
                        mine.steals.fetch_add(1, Relaxed);
                    }
                    return Ok(free);
                }
                spin_loop();
                continue;
            }
            let clean = d.clean.load(Acquire);
            if self.is_chunk(clean) {
                if d.clean
                    .compare_exchange(clean, NIL, AcqRel, Acquire)
                    .is_err()
                {
                    // Taken by another CPU, or refilled by the cleaner: look again.
                    spin_loop();
                    continue;
                }
                // The clean list is ours now: onto our own free list. Only this CPU ever
                // fills its free list, so the splice finds it empty.
                let len = self.w(clean, W_META).get();
                d.clean_len.fetch_sub(len, Relaxed);
                mine.free_len.fetch_add(len, Relaxed);
                self.splice(&mine.free, clean);
                mine.clean_moves.fetch_add(1, Relaxed);
                cpu = me;
                continue;
            }
            let state = self.state();
            if state.allocates() && laps < MAX_LAPS {
                // Try the next CPU, noting what kind of chunks it holds.
                if d.dirty.load(Acquire) != NIL {
                    found_dirty = true;
                }
                if d.rinsing.load(Acquire) != NIL {
                    found_rinsing = true;
                }
                cpu = if cpu + 1 == n { 0 } else { cpu + 1 };
                if cpu != me {
                    continue;
                }
                // A whole lap found nothing: the state says what the lap saw.
                let next = if found_dirty {
                    DstateState::Dirty
                } else if found_rinsing {
                    DstateState::Rinsing
                } else {
                    DstateState::Empty
                };
                let _ =
                    self.header
                        .state
                        .compare_exchange(state as u32, next as u32, AcqRel, Acquire);
                found_dirty = false;
                found_rinsing = false;
                laps += 1;
                // Another lap: the state now decides which drop counter to bump (or, if
                // the cleaner just made it CLEAN, the new clean lists are tried).
                continue;
            }
            let reason = match state {
                DstateState::Dirty => {
                    mine.drops_dirty.fetch_add(1, Relaxed);
                    DropReason::Dirty
                }
                DstateState::Rinsing => {
                    mine.drops_rinsing.fetch_add(1, Relaxed);
                    DropReason::Rinsing
                }
                _ => {
                    mine.drops_empty.fetch_add(1, Relaxed);
                    DropReason::Empty
                }
            };
            self.count_var_drop(var);
            self.sample_high_water();
            return Err(DynvarError::Drop(reason));
        }
    }

    pub(super) fn count_var_drop(&self, var: u32) {
        if let Some(w) = self.var_drops.get(var as usize) {
            w.0.fetch_add(1, Relaxed);
        }
    }
}
