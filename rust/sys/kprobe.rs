// SPDX-License-Identifier: GPL-2.0

//! kprobes, kretprobes and tick timers of a consumer, over the C shim.
//!
//! Every probe is registered disabled at LOAD, enabled at GO, disabled at STOP, and
//! unregistered when its [`ProbeSet`] is dropped, which waits until no handler can still run.
//! Entry probes on ftrace locations are switched together through one ftrace_ops (the shim's
//! `oxt_fset`): one ftrace update per GO or STOP instead of one per probe. Return probes on
//! ftrace locations, with the entry probes on their functions, likewise go through one fprobe
//! (`oxt_rset`) where the kernel has CONFIG_FPROBE, and stay kretprobes where it has not.
//! A hit calls the set's [`Handler`] inside the shim's action guard with interrupts off; the
//! set owns the handler, so it can't go away while a probe still points to it.
//!
// TODO: replace with kernel::kprobes when available.

use crate::sys::gfp_load;
use crate::sys::percpu::ActionCtx;
use crate::sys::shim;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::ffi::{c_uint, c_ulong, c_void};
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

    /// The probed function's return address (`caller`); 0 without registers.
    pub(crate) fn caller(&self, is_return: bool) -> u64 {
        // SAFETY: as in `arg`; the shim reads the stack within its bounds.
        unsafe { shim::oxt_regs_caller(self.0, is_return) as u64 }
    }

    /// The registers of a hit of another provider (`sys::provider`).
    ///
    /// # Safety
    ///
    /// `regs` is the valid `pt_regs` of the hit being handled, or null, for as long as the
    /// value lives.
    pub(crate) unsafe fn from_raw(regs: *mut shim::PtRegs) -> Self {
        Self(regs)
    }

    /// Argument `n` (0-based) of the system call these user registers made.
    pub(crate) fn syscall_arg(&self, n: u32) -> u64 {
        // SAFETY: as in `arg`.
        unsafe { shim::oxt_syscall_arg(self.0, n) as u64 }
    }

    /// The interrupted kernel PC, or 0 if these are user registers (profile probes).
    pub(crate) fn kernel_pc(&self) -> u64 {
        // SAFETY: as in `arg`.
        unsafe { shim::oxt_regs_kernel_pc(self.0) as u64 }
    }

    /// The kernel stack of the hit into `out`, walked from where `from` says; returns the
    /// number of frames. Safe in probe context (no allocation, no fault).
    pub(crate) fn kernel_stack(&self, out: &mut [u64], from: StackFrom) -> usize {
        let max = out.len().min(c_uint::MAX as usize) as c_uint;
        let (buf, from) = (out.as_mut_ptr().cast(), from as c_uint);
        // SAFETY: as in `arg` for `self.0`; `buf` is valid for `max` writes of `unsigned
        // long`, which is `u64` on the 64-bit kernels the module builds for.
        let n = unsafe { shim::oxt_kernel_stack(self.0, from, buf, max) };
        (n as usize).min(out.len())
    }

    /// The number of frames [`Regs::kernel_stack`] finds without a bound (`stackdepth`).
    pub(crate) fn kernel_stack_depth(&self, from: StackFrom) -> usize {
        // SAFETY: as in `arg`.
        unsafe { shim::oxt_kernel_stack_depth(self.0, from as c_uint) as usize }
    }

    /// The user PC and frame pointer of the current task: these registers' when they are
    /// user ones, else those saved at the task's kernel entry; `None` for a kernel thread.
    pub(crate) fn user_regs(&self) -> Option<(u64, u64)> {
        let (mut pc, mut fp): (c_ulong, c_ulong) = (0, 0);
        // SAFETY: as in `arg` for `self.0`; `pc` and `fp` are valid for one write each.
        let ok = unsafe { shim::oxt_user_regs(self.0, &mut pc, &mut fp) };
        ok.then_some((pc as u64, fp as u64))
    }

    /// User register `idx` (DTrace's x86-64 `uregs[]` numbering) of the registers
    /// [`Regs::user_regs`] chooses; `None` for a kernel thread.
    pub(crate) fn user_reg(&self, idx: u32) -> Option<u64> {
        let mut v: c_ulong = 0;
        // SAFETY: as in `arg` for `self.0`; `v` is valid for one write.
        let ok = unsafe { shim::oxt_user_reg(self.0, idx, &mut v) };
        ok.then_some(v as u64)
    }

    /// The interrupted user PC, or 0 if these are kernel registers (profile probes).
    pub(crate) fn user_pc(&self) -> u64 {
        // SAFETY: as in `arg`.
        unsafe { shim::oxt_regs_user_pc(self.0) as u64 }
    }
}

/// Where [`Regs::kernel_stack`] starts its walk (the shim's `enum oxt_stack_from`); without
/// kernel registers it is always [`StackFrom::Here`].
#[derive(Clone, Copy)]
pub(crate) enum StackFrom {
    /// In the shim; the frames up to the kernel registers' PC are cut off (tracepoints,
    /// whose registers are perf's approximation of the caller's).
    Here = 0,
    /// At the registers: their PC, then its callers (return and profile probes).
    Regs = 1,
    /// At an entry probe's registers: the probed function's callers, its caller first.
    Entry = 2,
}

/// What a probe hit runs; implemented by the owner of the probes (a loaded program).
pub(crate) trait Handler: Sync {
    /// A hit of probe `slot` (the number given at registration), in probe context: inside the
    /// shim's action guard, interrupts off. `is_return` on kretprobes.
    fn fire(&self, slot: u32, ctx: &mut ActionCtx, regs: &Regs, is_return: bool);

    /// A hit of probe `slot` that was not run because an action runs on this CPU already.
    fn recursion(&self, slot: u32);

    /// One hit of the entry probes `slots` (two or more, in program order), all on the
    /// function whose registers `regs` holds; as [`Handler::fire`] otherwise.
    fn fire_many(&self, slots: &[u32], ctx: &mut ActionCtx, regs: &Regs);
}

/// # Safety
///
/// Called by the shim inside its action guard with interrupts off, with the cookie of a
/// probe of a [`ProbeSet<H>`] or of a profile or tracepoint probe of `sys::provider` (a
/// `*const H` valid while the probe is registered), `regs`, the hit's registers or null
/// for a tick, and `cpu`, the running CPU.
unsafe extern "C" fn fire_trampoline<H: Handler>(
    cookie: *mut c_void,
    slot: c_uint,
    regs: *mut shim::PtRegs,
    is_return: bool,
    cpu: c_uint,
) {
    // SAFETY: inside the guard with interrupts off on `cpu`, one context per entry
    // (precondition).
    let mut ctx = unsafe { ActionCtx::on(cpu) };
    // SAFETY: the cookie is the set's `H`, alive while its probes are registered.
    let h = unsafe { &*(cookie as *const H) };
    h.fire(slot, &mut ctx, &Regs(regs), is_return);
}

/// # Safety
///
/// As [`fire_trampoline`], without the guard.
unsafe extern "C" fn recursion_trampoline<H: Handler>(cookie: *mut c_void, slot: c_uint) {
    // SAFETY: as in `fire_trampoline`.
    let h = unsafe { &*(cookie as *const H) };
    h.recursion(slot);
}

/// # Safety
///
/// As [`fire_trampoline`] (for entry probes, without `is_return`), with `slots` pointing to
/// `n` slot numbers that stay valid during the call.
unsafe extern "C" fn fire_many_trampoline<H: Handler>(
    cookie: *mut c_void,
    slots: *const c_uint,
    n: c_uint,
    regs: *mut shim::PtRegs,
    cpu: c_uint,
) {
    // SAFETY: as in `fire_trampoline`.
    let mut ctx = unsafe { ActionCtx::on(cpu) };
    // SAFETY: as in `fire_trampoline`.
    let h = unsafe { &*(cookie as *const H) };
    // SAFETY: the shim passes `n` slot numbers at `slots`, its set's, which outlives the call
    // (precondition); `c_uint` is `u32`.
    let slots = unsafe { core::slice::from_raw_parts(slots, n as usize) };
    h.fire_many(slots, &mut ctx, &Regs(regs));
}

/// The shim's callbacks into a [`Handler`]; `sys::provider`'s profile and tracepoint probes
/// use them too.
pub(crate) struct Vtable<H: Handler>(PhantomData<H>);

impl<H: Handler> Vtable<H> {
    pub(crate) const OPS: shim::ProbeOps = shim::ProbeOps {
        fire: fire_trampoline::<H>,
        recursion: recursion_trampoline::<H>,
        fire_many: Some(fire_many_trampoline::<H>),
    };
}

/// The probes and ticks of one loaded program, and the handler they call.
///
/// # Invariants
///
/// Every pointer is a live shim object this set owns; kprobes are registered, ticks
/// initialised; `fset` and `rset`, once made, cover probes of `probes` and are freed before
/// them; `rset` is registered exactly when `enabled` is true. Their cookie is `handler`'s heap address: the box is never moved out of, and
/// only shared references to it are handed out, so it stays valid until the set is dropped,
/// which unregisters every probe (waiting for running handlers) before the box is freed.
pub(crate) struct ProbeSet<H: Handler> {
    probes: KVec<NonNull<shim::Probe>>,
    ticks: KVec<NonNull<shim::Tick>>,
    /// The entry probes on ftrace locations, switched in one ftrace update (made at the
    /// first `enable`; `None` before, or if there are none or memory was short).
    fset: Option<NonNull<shim::Fset>>,
    /// The return probes on ftrace locations and the entry probes on their functions, through
    /// one fprobe (made and registered at the first `enable`; `None` before, without
    /// CONFIG_FPROBE, without such probes, or if its first registration failed).
    rset: Option<NonNull<shim::Rset>>,
    /// Whether the first `enable` has made (or tried to make) `rset` and `fset`.
    sets_made: bool,
    enabled: bool,
    // Declared last: dropped after `Drop::drop` has unregistered the probes.
    handler: KBox<H>,
}

// SAFETY: the shim objects are plain kernel allocations, usable from any thread; the set
// only hands them to kprobe/hrtimer calls, which do their own locking. `H: Sync` (the trait
// bound) and `KBox<H>: Send` for `H: Send`.
unsafe impl<H: Handler + Send> Send for ProbeSet<H> {}
// SAFETY: `&self` methods only read the kernel's counters and hand out `&H`, `H: Sync`.
unsafe impl<H: Handler> Sync for ProbeSet<H> {}

impl<H: Handler> ProbeSet<H> {
    /// An empty set whose probes will call `handler`.
    pub(crate) fn new(handler: KBox<H>) -> Self {
        // INVARIANT: no probe yet.
        Self {
            probes: KVec::new(),
            ticks: KVec::new(),
            fset: None,
            rset: None,
            sets_made: false,
            enabled: false,
            handler,
        }
    }

    /// The handler the probes call.
    pub(crate) fn handler(&self) -> &H {
        &self.handler
    }

    fn cookie(&self) -> *mut c_void {
        let h: *const H = &*self.handler;
        h.cast_mut().cast()
    }

    /// Registers a disabled kprobe (or kretprobe) on `symbol`; its hits call the handler with
    /// `slot`.
    pub(crate) fn add_kprobe(&mut self, symbol: &CStr, is_return: bool, slot: u32) -> Result {
        self.probes.reserve(1, gfp_load())?;
        // SAFETY: `symbol` is NUL-terminated and the shim copies it; `OPS` is a promoted
        // constant, valid for 'static; the cookie stays valid while the probe is registered
        // (type invariant).
        let raw = unsafe {
            shim::oxt_probe_alloc(
                symbol.as_char_ptr(),
                is_return,
                &Vtable::<H>::OPS,
                self.cookie(),
                slot,
            )
        };
        let p = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: `p` was just allocated and is not registered.
        if let Err(e) = to_result(unsafe { shim::oxt_probe_register(p.as_ptr()) }) {
            // SAFETY: registration failed, so nothing else refers to `p`.
            unsafe { shim::oxt_probe_free(p.as_ptr()) };
            return Err(e);
        }
        // INVARIANT: registered; capacity was reserved, so the push can't fail.
        self.probes.push(p, gfp_load())?;
        Ok(())
    }

    /// Adds a disabled tick firing every `period_ns` on one CPU; it calls the handler with
    /// `slot`.
    pub(crate) fn add_tick(&mut self, period_ns: u64, slot: u32) -> Result {
        self.ticks.reserve(1, gfp_load())?;
        let (ops, cookie) = (&Vtable::<H>::OPS, self.cookie());
        // SAFETY: plain allocation and initialisation of an hrtimer; `OPS` and the cookie as
        // in `add_kprobe`.
        let raw = unsafe { shim::oxt_tick_alloc(ops, cookie, slot, period_ns) };
        let t = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: initialised, not started.
        self.ticks.push(t, gfp_load())?;
        Ok(())
    }

    /// Number of kprobes and kretprobes.
    pub(crate) fn kprobes(&self) -> usize {
        self.probes.len()
    }

    /// Enables every probe and starts every tick. The probes the shim's sets take go
    /// together, one ftrace update per set; the others one by one.
    pub(crate) fn enable(&mut self) -> Result {
        if self.enabled {
            return Ok(());
        }
        if !self.sets_made {
            self.sets_made = true;
            self.make_sets();
        } else if let Some(r) = self.rset {
            // SAFETY: `r` is live and unregistered (type invariant: not `enabled`).
            to_result(unsafe { shim::oxt_rset_enable(r.as_ptr()) })?;
        }
        if let Err(e) = self.enable_rest() {
            if let Some(r) = self.rset {
                // SAFETY: `r` is live and registered above or by `make_sets`.
                unsafe { shim::oxt_rset_disable(r.as_ptr()) };
            }
            return Err(e);
        }
        for t in &self.ticks {
            // SAFETY: `t` is initialised (type invariant) and not running.
            unsafe { shim::oxt_tick_start(t.as_ptr()) };
        }
        // INVARIANT: `rset`, if any, is registered.
        self.enabled = true;
        Ok(())
    }

    /// Makes the sets at the first `enable`: `rset` first, registered, so that the `fset`
    /// leaves out the entry probes it runs. An `rset` that fails to register is freed, which
    /// gives its probes back to their kretprobes and kprobes.
    fn make_sets(&mut self) {
        if self.probes.is_empty() {
            return;
        }
        let (probes, n) = (
            self.probes.as_mut_ptr() as *mut *mut shim::Probe,
            self.probes.len() as u32,
        );
        // SAFETY: every pointer is a registered probe (type invariant); `NonNull<Probe>` has
        // the layout of `*mut Probe`; the shim only reads the array.
        let raw = unsafe { shim::oxt_rset_alloc(probes, n) };
        if let Some(r) = NonNull::new(raw) {
            // SAFETY: `r` was just made and is not registered.
            if to_result(unsafe { shim::oxt_rset_enable(r.as_ptr()) }).is_ok() {
                self.rset = Some(r);
            } else {
                // SAFETY: `r` is not registered and nothing else refers to it.
                unsafe { shim::oxt_rset_free(r.as_ptr()) };
            }
        }
        // SAFETY: as for `oxt_rset_alloc`.
        let raw = unsafe { shim::oxt_fset_alloc(probes, n) };
        // INVARIANT: made of this set's registered entry probes.
        self.fset = NonNull::new(raw);
    }

    /// Enables the `fset` and the probes no set takes; on failure, leaves them all disabled.
    fn enable_rest(&mut self) -> Result {
        if let Some(f) = self.fset {
            // SAFETY: `f` is live (type invariant); its probes are registered.
            to_result(unsafe { shim::oxt_fset_enable(f.as_ptr()) })?;
        }
        for (i, p) in self.probes.iter().enumerate() {
            // SAFETY: `p` is registered (type invariant).
            if let Err(e) = to_result(unsafe { shim::oxt_probe_enable(p.as_ptr()) }) {
                for q in &self.probes[..i] {
                    // SAFETY: as above.
                    unsafe { shim::oxt_probe_disable(q.as_ptr()) };
                }
                if let Some(f) = self.fset {
                    // SAFETY: `f` is live (type invariant).
                    unsafe { shim::oxt_fset_disable(f.as_ptr()) };
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Disables every probe and stops every tick; handlers already running may finish.
    pub(crate) fn disable(&mut self) {
        if !self.enabled {
            return;
        }
        if let Some(f) = self.fset {
            // SAFETY: `f` is live (type invariant).
            unsafe { shim::oxt_fset_disable(f.as_ptr()) };
        }
        if let Some(r) = self.rset {
            // SAFETY: `r` is live and registered (type invariant: `enabled`); this waits
            // until no CPU can still run its handlers.
            unsafe { shim::oxt_rset_disable(r.as_ptr()) };
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

    /// Hits the kernel could not hand to us (kprobe reentry, kretprobe or fprobe return
    /// instances exhausted).
    pub(crate) fn missed(&self) -> u64 {
        let rset = match self.rset {
            // SAFETY: `r` is live (type invariant); the counter is a plain read.
            Some(r) => unsafe { shim::oxt_rset_missed(r.as_ptr()) },
            None => 0,
        };
        self.probes
            .iter()
            // SAFETY: `p` is live (type invariant); the counters are plain reads.
            .map(|p| unsafe { shim::oxt_probe_missed(p.as_ptr()) } as u64)
            .sum::<u64>()
            + rset as u64
    }
}

impl<H: Handler> Drop for ProbeSet<H> {
    fn drop(&mut self) {
        self.disable();
        if let Some(f) = self.fset.take() {
            // SAFETY: `f` is live and disabled above; its probes are still registered.
            unsafe { shim::oxt_fset_free(f.as_ptr()) };
        }
        if let Some(r) = self.rset.take() {
            // SAFETY: `r` is live and unregistered by `disable` above; its probes are still
            // registered.
            unsafe { shim::oxt_rset_free(r.as_ptr()) };
        }
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
