// SPDX-License-Identifier: GPL-2.0

//! Switched per-CPU buffers (DTrace's switch policy): per CPU, an active half that probe
//! context fills and an inactive half that the consumer reads, swapped in a cross-call.
//! The principal buffers (bytes) and the aggregation buffers (words) are both made of these.
//!
//! Protocol: a CPU's [`Halves`] (which half is active) lives in the session's per-CPU state
//! and is touched only by that CPU under the action guard: in probe context or in the switch
//! cross-call. The consumer, holding the one [`Switcher`], switches a CPU and then uses the
//! half that was active, which no CPU touches until the consumer's next switch of that CPU.

use crate::sys::gfp_load;
use kernel::prelude::*;

/// One CPU's view of its two halves.
pub(crate) struct Halves<T> {
    half: [*mut T; 2],
    len: usize,
    active: usize,
}

// SAFETY: the pointers are to vmalloc memory owned by the session's `HalvesMem`, which the
// protocol hands to one CPU at a time.
unsafe impl<T: Send> Send for Halves<T> {}

impl<T> Halves<T> {
    /// The active half, for probe context on this buffer's CPU.
    pub(crate) fn active(&mut self) -> &mut [T] {
        // SAFETY: the active half is touched only by this CPU under the guard (protocol), and
        // is valid for `len` elements (invariant of `HalvesMem`); `&mut self` makes the slice
        // unique on this CPU.
        unsafe { core::slice::from_raw_parts_mut(self.half[self.active], self.len) }
    }

    /// Swaps the halves; runs on this buffer's CPU in the switch cross-call. Returns the half
    /// that was active, for [`HalvesMem::taken`].
    pub(crate) fn switch(&mut self) -> usize {
        let old = self.active;
        self.active ^= 1;
        old
    }
}

/// The right to use what a switch took; exactly one exists per [`HalvesMem`].
pub(crate) struct Switcher {
    id: usize,
}

/// The memory of a set of switched buffers: two vmalloc'd halves per CPU.
///
/// # Invariants
///
/// `ptrs[c][h]` is the base of `_mem[c][h]`, `len` elements; neither changes after `new`.
pub(crate) struct HalvesMem<T> {
    _mem: KVec<[VVec<T>; 2]>,
    ptrs: KVec<[*mut T; 2]>,
    len: usize,
}

// SAFETY: owning the memory; the raw pointers only alias it.
unsafe impl<T: Send> Send for HalvesMem<T> {}
// SAFETY: `&self` methods hand out the memory only under the `Switcher` protocol.
unsafe impl<T: Send> Sync for HalvesMem<T> {}

impl<T: Copy> HalvesMem<T> {
    /// Two halves of `len` elements, filled with `fill`, for each of `ncpus` CPUs, and the one
    /// [`Switcher`].
    pub(crate) fn new(ncpus: u32, len: usize, fill: T) -> Result<(Self, Switcher)> {
        let mut mem = KVec::with_capacity(ncpus as usize, gfp_load())?;
        let mut ptrs = KVec::with_capacity(ncpus as usize, gfp_load())?;
        for _ in 0..ncpus {
            let mut h = [
                VVec::from_elem(fill, len, super::gfp_load())?,
                VVec::from_elem(fill, len, super::gfp_load())?,
            ];
            ptrs.push([h[0].as_mut_ptr(), h[1].as_mut_ptr()], gfp_load())?;
            mem.push(h, gfp_load())?;
        }
        let id = ptrs.as_ptr() as usize;
        // INVARIANT: the pointers were taken from the vectors, whose heap memory does not
        // move when the vectors themselves move into `mem`.
        Ok((
            Self {
                _mem: mem,
                ptrs,
                len,
            },
            Switcher { id },
        ))
    }
}

impl<T> HalvesMem<T> {
    /// Elements of one half.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The probe-context view of `cpu`'s halves (half 0 active).
    pub(crate) fn halves(&self, cpu: u32) -> Option<Halves<T>> {
        let p = self.ptrs.get(cpu as usize)?;
        Some(Halves {
            half: *p,
            len: self.len,
            active: 0,
        })
    }

    /// Half `half` of `cpu`, taken by a switch. The result borrows the [`Switcher`], so it is
    /// released before the next switch can hand the half back to the CPU.
    pub(crate) fn taken<'a>(
        &'a self,
        sw: &'a mut Switcher,
        cpu: u32,
        half: usize,
    ) -> Result<&'a mut [T]> {
        if sw.id != self.ptrs.as_ptr() as usize {
            return Err(EINVAL);
        }
        let p = self.ptrs.get(cpu as usize).ok_or(EINVAL)?[half & 1];
        // SAFETY: `p` is valid for `len` elements (invariant). The CPU stopped touching this
        // half in the switch cross-call, which has returned (a full barrier), and won't touch
        // it before the next switch, which needs `sw`, borrowed for 'a.
        Ok(unsafe { core::slice::from_raw_parts_mut(p, self.len) })
    }

    /// Every half, when no CPU can touch them (before GO): for formatting.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut [T]) -> Result) -> Result {
        for p in self.ptrs.iter() {
            for &h in p {
                // SAFETY: `h` is valid for `len` elements (invariant); `&mut self` excludes
                // every other user, and each half is visited once.
                f(unsafe { core::slice::from_raw_parts_mut(h, self.len) })?;
            }
        }
        Ok(())
    }
}
