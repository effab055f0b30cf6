// SPDX-License-Identifier: GPL-2.0

//! Per-CPU data of a consumer, and the token that proves the right to touch it.
//!
//! Probe context reaches its CPU's slot through an [`ActionCtx`], which only the shim's entry
//! points create (a probe firing, a cross-call handler, BEGIN/END): they run with interrupts
//! off inside the shim's per-CPU action guard, so at most one `ActionCtx` exists per CPU at a
//! time and the slot has one user.
//!
// TODO: replace with kernel::percpu when available.

use crate::sys::cpu;
use crate::sys::gfp_load;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use kernel::prelude::*;

/// Proof that the holder runs inside the action guard, interrupts off, on [`Self::cpu`].
///
/// # Invariants
///
/// At most one `ActionCtx` exists per CPU at any time, and it never leaves that CPU.
pub(crate) struct ActionCtx {
    cpu: u32,
    _not_send: PhantomData<*mut ()>,
}

impl ActionCtx {
    /// # Safety
    ///
    /// The caller runs inside the shim's action guard with interrupts disabled (a callback of
    /// `oxtrace_probe_fire`, `oxt_xcall_*` or `oxt_run_as_action`), and creates one
    /// `ActionCtx` per entry into the guard, dropped before the guard is left.
    pub(crate) unsafe fn new() -> Self {
        // INVARIANT: the guard admits one entry per CPU and interrupts are off, so the CPU
        // can't change and no other holder exists on it (caller's precondition).
        Self {
            cpu: cpu::this_cpu(),
            _not_send: PhantomData,
        }
    }

    /// [`ActionCtx::new`] for a caller that knows its CPU (the shim passes it to a probe's
    /// handler), without asking the shim again.
    ///
    /// # Safety
    ///
    /// As for [`ActionCtx::new`], and `cpu` is the CPU the caller runs on.
    pub(crate) unsafe fn on(cpu: u32) -> Self {
        // INVARIANT: as in `new`; `cpu` is the running CPU (caller's precondition).
        Self {
            cpu,
            _not_send: PhantomData,
        }
    }

    /// The CPU this runs on.
    pub(crate) fn cpu(&self) -> u32 {
        self.cpu
    }
}

/// One slot per CPU id, each on its own cache lines.
#[repr(align(64))]
struct Slot<T>(UnsafeCell<T>);

/// A `T` per possible CPU.
///
/// # Invariants
///
/// `slots.len() == nr_cpu_ids`; slot `i` is accessed mutably only by CPU `i` through an
/// [`ActionCtx`], or through `&mut self`.
pub(crate) struct PerCpu<T> {
    slots: KVec<Slot<T>>,
}

// SAFETY: every slot has one user at a time (type invariant), so sharing the container
// between CPUs only hands each `T` to one thread at a time; that needs `T: Send`.
unsafe impl<T: Send> Sync for PerCpu<T> {}
// SAFETY: owning the container owns every `T`.
unsafe impl<T: Send> Send for PerCpu<T> {}

impl<T> PerCpu<T> {
    /// A slot per possible CPU, `init(cpu)` each.
    pub(crate) fn new(mut init: impl FnMut(u32) -> Result<T>) -> Result<Self> {
        let n = cpu::nr_cpu_ids();
        let mut slots = KVec::with_capacity(n as usize, gfp_load())?;
        for cpu in 0..n {
            slots.push(Slot(UnsafeCell::new(init(cpu)?)), gfp_load())?;
        }
        // INVARIANT: one slot per CPU id; nothing shared yet.
        Ok(Self { slots })
    }

    /// This CPU's slot, for the holder of the CPU's [`ActionCtx`].
    pub(crate) fn local<'a>(&'a self, ctx: &'a mut ActionCtx) -> &'a mut T {
        // PANIC: `ctx.cpu` is the running CPU, below `nr_cpu_ids`, the number of slots (type
        // invariant).
        let slot = &self.slots[ctx.cpu as usize];
        // SAFETY: `ctx` is the only `ActionCtx` of this CPU and is borrowed mutably for 'a,
        // so no other reference to this slot can be made through `local` meanwhile; other
        // CPUs use other slots; `&mut self` access can't coexist with `&self`.
        unsafe { &mut *slot.0.get() }
    }
}

impl<T> PerCpu<T> {
    /// This CPU's slot here and in `other`, for the holder of the CPU's [`ActionCtx`] (an
    /// action that uses two containers, such as a session's state and its PT buffers).
    /// `None` if `other` is this very container.
    pub(crate) fn local_with<'a, U>(
        &'a self,
        other: &'a PerCpu<U>,
        ctx: &'a mut ActionCtx,
    ) -> Option<(&'a mut T, &'a mut U)> {
        if core::ptr::eq(
            self.slots.as_ptr().cast::<u8>(),
            other.slots.as_ptr().cast::<u8>(),
        ) {
            return None;
        }
        // PANIC: as in `local`; both containers have `nr_cpu_ids` slots.
        let a = &self.slots[ctx.cpu as usize];
        let b = &other.slots[ctx.cpu as usize];
        // SAFETY: as in `local`: `ctx` is the CPU's only `ActionCtx` and stays mutably
        // borrowed for 'a, so neither slot can be reached through `local`/`local_with`
        // meanwhile; the two containers own separate allocations (checked above, and two live
        // `KVec`s never share one), so the references don't alias.
        Some(unsafe { (&mut *a.0.get(), &mut *b.0.get()) })
    }
}
