// SPDX-License-Identifier: GPL-2.0

//! The syscall provider's side of a session: which probes each system call number fires.
//!
//! The program holds one `sys_enter` and one `sys_exit` hook whatever it traces
//! (`sys::provider`); every system call of every task then reaches the session's
//! `SyscallHandler` (in `glue::fire`, with the other probe entry points), which looks the
//! number up in [`SyscallSlots`] (one array access: calls no probe names cost nothing more)
//! and runs the probes that name it, in probe context like every other probe.

use crate::limits::MAX_SYSCALL_NR;
use crate::program::ProbeKind;
use crate::sys::gfp_load;
use kernel::prelude::*;

/// For each direction and system call number, the session's slots that trace it.
///
/// # Invariants
///
/// `index` is empty or has `2 * MAX_SYSCALL_NR` entries (entries, then returns); each is a
/// `(start, len)` range of `slots`.
pub(crate) struct SyscallSlots {
    index: KVec<(u32, u32)>,
    slots: KVec<u32>,
}

impl SyscallSlots {
    /// The table of `slots`, a session's `(id, kind, system call number)` in id order; empty
    /// if none is a syscall probe.
    pub(crate) fn new(slots: impl Iterator<Item = (u32, ProbeKind, u64)> + Clone) -> Result<Self> {
        let mut t = Self {
            index: KVec::new(),
            slots: KVec::new(),
        };
        let dir = |k: ProbeKind| match k {
            ProbeKind::SyscallEntry => Some(0),
            ProbeKind::SyscallReturn => Some(1),
            _ => None,
        };
        if !slots.clone().any(|(_, kind, _)| dir(kind).is_some()) {
            return Ok(t);
        }
        t.index = KVec::from_elem((0u32, 0u32), 2 * MAX_SYSCALL_NR, gfp_load())?;
        // A counting pass, then slots in (direction, number, id) order.
        for (_, kind, nr) in slots.clone() {
            let (Some(d), nr) = (dir(kind), nr as usize) else {
                continue;
            };
            // The image parser refused numbers at or over MAX_SYSCALL_NR.
            let e = t.index.get_mut(d * MAX_SYSCALL_NR + nr).ok_or(EINVAL)?;
            e.1 += 1;
        }
        let mut start = 0;
        for e in t.index.iter_mut() {
            e.0 = start;
            start += e.1;
            e.1 = 0;
        }
        t.slots = KVec::from_elem(0u32, start as usize, gfp_load())?;
        for (id, kind, nr) in slots {
            let (Some(d), nr) = (dir(kind), nr as usize) else {
                continue;
            };
            let e = t.index.get_mut(d * MAX_SYSCALL_NR + nr).ok_or(EINVAL)?;
            *t.slots.get_mut((e.0 + e.1) as usize).ok_or(EINVAL)? = id;
            e.1 += 1;
        }
        // INVARIANT: one entry per direction and number, ranges within `slots`.
        Ok(t)
    }

    /// Whether any probe traces system call entries (or returns).
    pub(crate) fn any(&self, is_return: bool) -> bool {
        let d = usize::from(is_return);
        self.index
            .get(d * MAX_SYSCALL_NR..(d + 1) * MAX_SYSCALL_NR)
            .is_some_and(|r| r.iter().any(|e| e.1 != 0))
    }

    /// The slots of system call `nr`'s entry (or return); empty for numbers no probe names.
    /// Probe context: never panics.
    pub(crate) fn of(&self, nr: u32, is_return: bool) -> &[u32] {
        let i = usize::from(is_return) * MAX_SYSCALL_NR + nr as usize;
        if nr as usize >= MAX_SYSCALL_NR {
            return &[];
        }
        match self.index.get(i) {
            Some(&(s, n)) => self.slots.get(s as usize..(s + n) as usize).unwrap_or(&[]),
            None => &[],
        }
    }
}
