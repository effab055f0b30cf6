// SPDX-License-Identifier: GPL-2.0

//! The memory budget of LOAD: what a program allocates is charged here before it is
//! allocated, against the consumer's cap and the budget all consumers share (module
//! parameters `consumer_mem_pct` and `mem_budget_pct`), and released when the session goes.
//! PT buffers (PT_CONFIG) are charged to the same budget.

use crate::diag::Refusal;
use crate::limits::LoadMemory;
use crate::sys::cpu;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;

/// Bytes charged by every live session.
static CHARGED: AtomicU64 = AtomicU64::new(0);

/// Bytes charged to the budget, released on drop.
pub(crate) struct MemCharge {
    bytes: u64,
}

impl MemCharge {
    /// Charges `need`, or refuses it (`E2BIG`) if it is over the consumer's cap or over what
    /// the other sessions leave of the global budget.
    pub(crate) fn take(need: &LoadMemory) -> Result<Self, Refusal> {
        Self::charge(need.total()).map_err(|(avail, all)| Refusal::memory(need, avail, all))
    }

    /// Charges `bytes` of PT buffers (PT_CONFIG); `E2BIG` if over either budget.
    pub(crate) fn take_bytes(bytes: u64) -> Result<Self> {
        Self::charge(bytes).map_err(|_| E2BIG)
    }

    /// Charges `bytes`, or says what is left: (bytes available, whether the global budget
    /// is the one exceeded).
    fn charge(bytes: u64) -> Result<Self, (u64, bool)> {
        let cap = cpu::consumer_mem_cap();
        if bytes > cap {
            return Err((cap, false));
        }
        let budget = cpu::mem_budget();
        let mut cur = CHARGED.load(Ordering::Relaxed);
        loop {
            let avail = budget.saturating_sub(cur);
            if bytes > avail {
                return Err((avail, true));
            }
            match CHARGED.compare_exchange_weak(
                cur,
                cur + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(Self { bytes }),
                Err(now) => cur = now,
            }
        }
    }
}

impl Drop for MemCharge {
    fn drop(&mut self) {
        CHARGED.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}
