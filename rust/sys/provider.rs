// SPDX-License-Identifier: GPL-2.0

//! The kernel objects of the syscall and profile providers, over the C shim
//! (`shim/provider.c`).
//!
//! A program that traces system calls holds at most two hooks, one on the raw `sys_enter`
//! tracepoint and one on `sys_exit`, whatever the number of calls it names: each hit hands
//! the call's number to the [`SyscallHandler`], which decides in its own table whether any
//! probe wants it. A profile probe is one pinned hrtimer per CPU, started on every online
//! CPU at [`Providers::enable`] and on each CPU that comes online while enabled; its hits go
//! to the [`Handler`] of `sys::kprobe` like a tick's. A tracepoint probe is a perf
//! tracepoint counter per CPU whose every hit carries the event's record (perf builds it in
//! the event's format), handed to the same [`Handler`]. Hooks are registered at enable and
//! unregistered at disable; dropping the set waits until no hit can still run. The set also
//! holds the program's user-space probes (`sys::uprobe`), registered at LOAD and enabled and
//! disabled with the rest.

use crate::sys::gfp_load;
use crate::sys::kprobe::{Handler, Regs, Vtable};
use crate::sys::percpu::ActionCtx;
use crate::sys::shim;
use crate::sys::uprobe::{UprobeAt, Uprobes};
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::error::{from_err_ptr, to_result};
use kernel::ffi::{c_uint, c_void};
use kernel::prelude::*;

/// What a system call hook runs; implemented by the owner of the probes.
pub(crate) trait SyscallHandler: Sync {
    /// A hit of system call `nr` (`is_return`: on its exit), in probe context: inside the
    /// action guard, interrupts off; `regs` are the call's user registers.
    fn syscall(&self, nr: u32, ctx: &mut ActionCtx, regs: &Regs, is_return: bool);

    /// A hit of system call `nr` not run because an action runs on this CPU already.
    fn syscall_recursion(&self, nr: u32, is_return: bool);
}

/// # Safety
///
/// Called by the shim inside its action guard with interrupts off, with the cookie of a hook
/// of a [`Providers<H>`] (a `*const H` valid while the hook is registered) and `regs`, the
/// system call's registers, and `cpu`, the running CPU.
unsafe extern "C" fn sys_fire<H: SyscallHandler, const RET: bool>(
    cookie: *mut c_void,
    nr: c_uint,
    regs: *mut shim::PtRegs,
    _is_return: bool,
    cpu: c_uint,
) {
    // SAFETY: inside the guard with interrupts off on `cpu`, one context per entry
    // (precondition).
    let mut ctx = unsafe { ActionCtx::on(cpu) };
    // SAFETY: the cookie is the set's `H`, alive while its hooks are registered.
    let h = unsafe { &*(cookie as *const H) };
    // SAFETY: `regs` is the hit's `pt_regs`, valid during the call (precondition).
    let regs = unsafe { Regs::from_raw(regs) };
    h.syscall(nr, &mut ctx, &regs, RET);
}

/// # Safety
///
/// As [`sys_fire`], without the guard.
unsafe extern "C" fn sys_recursion<H: SyscallHandler, const RET: bool>(
    cookie: *mut c_void,
    nr: c_uint,
) {
    // SAFETY: as in `sys_fire`.
    let h = unsafe { &*(cookie as *const H) };
    h.syscall_recursion(nr, RET);
}

struct Vtables<H>(PhantomData<H>);

impl<H: SyscallHandler> Vtables<H> {
    const ENTRY: shim::ProbeOps = shim::ProbeOps {
        fire: sys_fire::<H, false>,
        recursion: sys_recursion::<H, false>,
        fire_many: None,
    };
    const EXIT: shim::ProbeOps = shim::ProbeOps {
        fire: sys_fire::<H, true>,
        recursion: sys_recursion::<H, true>,
        fire_many: None,
    };
}

/// The syscall hooks and profile timers of one loaded program.
///
/// # Invariants
///
/// Every pointer is a live shim object this set owns; `cookie` is valid until the set is
/// dropped (the contract of [`Providers::new`]), and no hook or timer runs after the drop.
pub(crate) struct Providers<H: Handler + SyscallHandler> {
    /// `sys_enter`, `sys_exit`.
    sys: [Option<NonNull<shim::Syshook>>; 2],
    profiles: KVec<NonNull<shim::Profile>>,
    tracepoints: KVec<NonNull<shim::Tpev>>,
    /// User-space probes (`sys::uprobe`), registered at LOAD, enabled with the rest.
    uprobes: Uprobes<H>,
    cookie: *const H,
    enabled: bool,
}

// SAFETY: the shim objects are plain kernel allocations usable from any thread, handed only
// to tracepoint and hrtimer calls that do their own locking; `H` is `Sync`.
unsafe impl<H: Handler + SyscallHandler> Send for Providers<H> {}
// SAFETY: `&self` methods touch nothing.
unsafe impl<H: Handler + SyscallHandler> Sync for Providers<H> {}

impl<H: Handler + SyscallHandler> Providers<H> {
    /// An empty set whose hooks and timers will call `handler`.
    ///
    /// # Safety
    ///
    /// `handler` stays at its address and valid until the set is dropped.
    pub(crate) unsafe fn new(handler: &H) -> Self {
        // INVARIANT: nothing yet; the caller keeps `handler` alive.
        Self {
            sys: [None, None],
            profiles: KVec::new(),
            tracepoints: KVec::new(),
            // SAFETY: the caller keeps `handler` alive and in place until the set is
            // dropped, and `uprobes` is dropped with it.
            uprobes: unsafe { Uprobes::new(handler) },
            cookie: handler,
            enabled: false,
        }
    }

    /// Adds the hook of system call entries (or exits); once per direction.
    pub(crate) fn add_syscalls(&mut self, is_return: bool) -> Result {
        let i = usize::from(is_return);
        if self.sys[i].is_some() {
            return Ok(());
        }
        let ops = if is_return {
            &Vtables::<H>::EXIT
        } else {
            &Vtables::<H>::ENTRY
        };
        // SAFETY: `ops` is a promoted constant, valid for 'static; the cookie stays valid
        // while the hook lives (type invariant).
        let raw = from_err_ptr(unsafe {
            shim::oxt_syshook_alloc(is_return, ops, self.cookie.cast_mut().cast())
        })?;
        // INVARIANT: allocated, not registered.
        self.sys[i] = Some(NonNull::new(raw).ok_or(ENOMEM)?);
        Ok(())
    }

    /// Adds a profile probe firing every `period_ns` on every online CPU; it calls the
    /// handler with `slot`.
    pub(crate) fn add_profile(&mut self, period_ns: u64, slot: u32) -> Result {
        self.profiles.reserve(1, gfp_load())?;
        let ops = &Vtable::<H>::OPS;
        // SAFETY: as in `add_syscalls`.
        let raw = from_err_ptr(unsafe {
            shim::oxt_profile_alloc(ops, self.cookie.cast_mut().cast(), slot, period_ns)
        })?;
        // INVARIANT: allocated and disabled; capacity was reserved.
        self.profiles
            .push(NonNull::new(raw).ok_or(ENOMEM)?, gfp_load())?;
        Ok(())
    }

    /// Adds a tracepoint probe on the event of id `id` (perf's tracepoint `config`, the id of
    /// its tracefs directory) on every CPU online now; it calls the handler with `slot`, and
    /// [`tp_record`] is the event's record meanwhile.
    pub(crate) fn add_tracepoint(&mut self, id: u64, slot: u32) -> Result {
        self.tracepoints.reserve(1, gfp_load())?;
        let ops = &Vtable::<H>::OPS;
        // SAFETY: as in `add_syscalls`.
        let raw = from_err_ptr(unsafe {
            shim::oxt_tpev_alloc(ops, self.cookie.cast_mut().cast(), slot, id)
        })?;
        // INVARIANT: allocated and disabled; capacity was reserved.
        self.tracepoints
            .push(NonNull::new(raw).ok_or(ENOMEM)?, gfp_load())?;
        Ok(())
    }

    /// Registers a user-space probe at `at` (see [`Uprobes::add`]); its hits call the
    /// handler with `slot` once the set is enabled.
    pub(crate) fn add_uprobe(&mut self, at: &UprobeAt<'_>, slot: u32) -> Result {
        self.uprobes.add(at, slot)
    }

    /// Number of user-space probes registered.
    pub(crate) fn uprobes(&self) -> usize {
        self.uprobes.len()
    }

    /// Registers the hooks and starts the timers.
    pub(crate) fn enable(&mut self) -> Result {
        if self.enabled {
            return Ok(());
        }
        for (i, h) in self.sys.iter().enumerate() {
            let Some(h) = h else { continue };
            // SAFETY: `h` is live (type invariant).
            if let Err(e) = to_result(unsafe { shim::oxt_syshook_enable(h.as_ptr()) }) {
                for g in self.sys[..i].iter().flatten() {
                    // SAFETY: as above.
                    unsafe { shim::oxt_syshook_disable(g.as_ptr()) };
                }
                return Err(e);
            }
        }
        for p in &self.profiles {
            // SAFETY: `p` is live (type invariant).
            unsafe { shim::oxt_profile_enable(p.as_ptr()) };
        }
        for t in &self.tracepoints {
            // SAFETY: `t` is live (type invariant).
            unsafe { shim::oxt_tpev_enable(t.as_ptr()) };
        }
        self.uprobes.enable();
        self.enabled = true;
        Ok(())
    }

    /// Unregisters the hooks and stops the timers; hits already running may finish.
    pub(crate) fn disable(&mut self) {
        if !self.enabled {
            return;
        }
        self.uprobes.disable();
        for h in self.sys.iter().flatten() {
            // SAFETY: `h` is live (type invariant).
            unsafe { shim::oxt_syshook_disable(h.as_ptr()) };
        }
        for p in &self.profiles {
            // SAFETY: `p` is live; disable waits for a running callback.
            unsafe { shim::oxt_profile_disable(p.as_ptr()) };
        }
        for t in &self.tracepoints {
            // SAFETY: `t` is live (type invariant).
            unsafe { shim::oxt_tpev_disable(t.as_ptr()) };
        }
        self.enabled = false;
    }
}

impl<H: Handler + SyscallHandler> Drop for Providers<H> {
    fn drop(&mut self) {
        for h in self.sys.iter().flatten() {
            // SAFETY: live and owned (type invariant); free unregisters it and waits until no
            // hit can still run.
            unsafe { shim::oxt_syshook_free(h.as_ptr()) };
        }
        for p in &self.profiles {
            // SAFETY: live and owned; free stops every CPU's timer and waits for callbacks.
            unsafe { shim::oxt_profile_free(p.as_ptr()) };
        }
        for t in &self.tracepoints {
            // SAFETY: live and owned; free releases the counters and waits for hits.
            unsafe { shim::oxt_tpev_free(t.as_ptr()) };
        }
    }
}

/// The address of the record of the tracepoint event this CPU is handling, or 0 outside
/// one. Probe context.
pub(crate) fn tp_record() -> u64 {
    // SAFETY: reads a per-CPU word of the shim; called with interrupts off, so on one CPU.
    unsafe { shim::oxt_tp_record() as u64 }
}

/// Module exit: releases what the providers set up for the module's lifetime (the CPU
/// hotplug state of profile timers). Every consumer is gone by then.
pub(crate) fn module_exit() {
    // SAFETY: called once, from the module's exit, after every `Providers` was dropped.
    unsafe { shim::oxt_provider_exit() };
}
