// SPDX-License-Identifier: GPL-2.0

//! kprobes, kretprobes and tick timers of a consumer, over the C shim.
//!
//! Every probe is registered disabled at LOAD, enabled at GO, disabled at STOP, and
//! unregistered when its [`ProbeSet`] is dropped, which waits until no handler can still run.
//! A handler calls [`crate::glue::fire::fire`] inside the shim's action guard with interrupts off.
//!
// TODO: replace with kernel::kprobes when available.

use crate::sys::percpu::ActionCtx;
use crate::sys::shim;
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::str::CStr;

/// The registers of a probe hit; `None` inside for tick probes.
pub(crate) struct Regs(*mut shim::PtRegs);

impl Regs {
    /// No registers: BEGIN, END and ticks.
    pub(crate) fn none() -> Self {
        Self(core::ptr::null_mut())
    }

    /// Argument `n` (0-based) of the probed function, per the calling convention.
    pub(crate) fn arg(&self, n: u32) -> u64 {
        // SAFETY: `self.0` is the valid `pt_regs` of the hit being handled, or null, which
        // the shim maps to 0.
        unsafe { shim::oxt_regs_arg(self.0, n) as u64 }
    }

    /// The return value, on a return probe.
    pub(crate) fn retval(&self) -> u64 {
        // SAFETY: as in `arg`.
        unsafe { shim::oxt_regs_retval(self.0) as u64 }
    }
}

/// Called by the shim for every hit of one of our probes.
///
/// # Safety
///
/// Called by the shim inside its action guard with interrupts off; `cookie` is the cookie
/// given to [`ProbeSet::add_kprobe`] or [`ProbeSet::add_tick`], still valid (the probe is
/// registered); `regs` is the hit's registers or null for a tick.
#[no_mangle]
pub(crate) unsafe extern "C" fn oxtrace_probe_fire(
    cookie: *mut c_void,
    regs: *mut shim::PtRegs,
    ret: bool,
) {
    // SAFETY: inside the guard with interrupts off, one context per entry (precondition).
    let mut ctx = unsafe { ActionCtx::new() };
    // SAFETY: the cookie is a `ProbeSlot` that outlives the registration (precondition).
    let slot = unsafe { &*(cookie as *const crate::glue::session::ProbeSlot) };
    crate::glue::fire::fire(slot, &mut ctx, &Regs(regs), ret);
}

/// Called by the shim when a probe hits while an action runs on the same CPU.
///
/// # Safety
///
/// As [`oxtrace_probe_fire`], without the guard.
#[no_mangle]
pub(crate) unsafe extern "C" fn oxtrace_probe_recursion(cookie: *mut c_void) {
    // SAFETY: as in `oxtrace_probe_fire`.
    let slot = unsafe { &*(cookie as *const crate::glue::session::ProbeSlot) };
    slot.count_recursion();
}

/// The probes and ticks of one loaded program.
///
/// # Invariants
///
/// Every pointer is a live shim object this set owns; kprobes are registered, ticks
/// initialised. Their cookies stay valid until the set is dropped.
pub(crate) struct ProbeSet {
    probes: KVec<NonNull<shim::Probe>>,
    ticks: KVec<NonNull<shim::Tick>>,
    enabled: bool,
}

// SAFETY: the shim objects are plain kernel allocations, usable from any thread; the set
// only hands them to kprobe/hrtimer calls, which do their own locking.
unsafe impl Send for ProbeSet {}
// SAFETY: `&self` methods only read the kernel's counters.
unsafe impl Sync for ProbeSet {}

impl ProbeSet {
    /// An empty set.
    pub(crate) fn new() -> Self {
        Self {
            probes: KVec::new(),
            ticks: KVec::new(),
            enabled: false,
        }
    }

    /// Registers a disabled kprobe (or kretprobe) on `symbol`.
    ///
    /// # Safety
    ///
    /// `cookie` must point to a `session::ProbeSlot` that stays valid until `self` is dropped.
    pub(crate) unsafe fn add_kprobe(
        &mut self,
        symbol: &CStr,
        is_return: bool,
        cookie: *const c_void,
    ) -> Result {
        self.probes.reserve(1, GFP_KERNEL)?;
        // SAFETY: `symbol` is NUL-terminated; the shim copies it.
        let raw =
            unsafe { shim::oxt_probe_alloc(symbol.as_char_ptr(), is_return, cookie.cast_mut()) };
        let p = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: `p` was just allocated and is not registered.
        if let Err(e) = to_result(unsafe { shim::oxt_probe_register(p.as_ptr()) }) {
            // SAFETY: registration failed, so nothing else refers to `p`.
            unsafe { shim::oxt_probe_free(p.as_ptr()) };
            return Err(e);
        }
        // INVARIANT: registered; capacity was reserved, so the push can't fail.
        self.probes.push(p, GFP_KERNEL)?;
        Ok(())
    }

    /// Adds a disabled tick firing every `period_ns` on one CPU.
    ///
    /// # Safety
    ///
    /// As [`Self::add_kprobe`].
    pub(crate) unsafe fn add_tick(&mut self, period_ns: u64, cookie: *const c_void) -> Result {
        self.ticks.reserve(1, GFP_KERNEL)?;
        // SAFETY: plain allocation and initialisation of an hrtimer.
        let raw = unsafe { shim::oxt_tick_alloc(cookie.cast_mut(), period_ns) };
        let t = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: initialised, not started.
        self.ticks.push(t, GFP_KERNEL)?;
        Ok(())
    }

    /// Number of kprobes and kretprobes.
    pub(crate) fn kprobes(&self) -> usize {
        self.probes.len()
    }

    /// Enables every probe and starts every tick.
    pub(crate) fn enable(&mut self) -> Result {
        if self.enabled {
            return Ok(());
        }
        for (i, p) in self.probes.iter().enumerate() {
            // SAFETY: `p` is registered (type invariant).
            if let Err(e) = to_result(unsafe { shim::oxt_probe_enable(p.as_ptr()) }) {
                for q in &self.probes[..i] {
                    // SAFETY: as above.
                    unsafe { shim::oxt_probe_disable(q.as_ptr()) };
                }
                return Err(e);
            }
        }
        for t in &self.ticks {
            // SAFETY: `t` is initialised (type invariant) and not running.
            unsafe { shim::oxt_tick_start(t.as_ptr()) };
        }
        self.enabled = true;
        Ok(())
    }

    /// Disables every probe and stops every tick; handlers already running may finish.
    pub(crate) fn disable(&mut self) {
        if !self.enabled {
            return;
        }
        for p in &self.probes {
            // SAFETY: `p` is registered (type invariant).
            unsafe { shim::oxt_probe_disable(p.as_ptr()) };
        }
        for t in &self.ticks {
            // SAFETY: `t` is initialised; cancel waits for a running callback.
            unsafe { shim::oxt_tick_cancel(t.as_ptr()) };
        }
        self.enabled = false;
    }

    /// Hits the kernel could not hand to us (kprobe reentry, kretprobe instances exhausted).
    pub(crate) fn missed(&self) -> u64 {
        self.probes
            .iter()
            // SAFETY: `p` is live (type invariant); the counters are plain reads.
            .map(|p| unsafe { shim::oxt_probe_missed(p.as_ptr()) } as u64)
            .sum()
    }
}

impl Drop for ProbeSet {
    fn drop(&mut self) {
        self.disable();
        if !self.probes.is_empty() {
            // SAFETY: every pointer is a registered probe; `NonNull<Probe>` has the layout of
            // `*mut Probe`. The call waits for a grace period, after which no handler runs.
            unsafe {
                shim::oxt_probes_unregister(
                    self.probes.as_mut_ptr() as *mut *mut shim::Probe,
                    self.probes.len() as u32,
                )
            };
        }
        for p in &self.probes {
            // SAFETY: unregistered above and no handler can still use it.
            unsafe { shim::oxt_probe_free(p.as_ptr()) };
        }
        for t in &self.ticks {
            // SAFETY: cancelled by `disable` (or never started); nothing refers to it.
            unsafe { shim::oxt_tick_free(t.as_ptr()) };
        }
    }
}
