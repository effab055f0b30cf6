// SPDX-License-Identifier: GPL-2.0

//! User-space probes (the pid and USDT providers) on uprobes, over the C shim
//! (`shim/uprobe.c`).
//!
//! Each probe is a uprobe consumer on an instruction of a file that fires only in the
//! address space one process had at LOAD: the shim keeps that `mm_struct` (grabbed, so its
//! address stays unique) and its filter and handler turn every other one away, a forked
//! child's inherited breakpoints included. Probes are registered at LOAD, so that each
//! entry's failure is reported as its own, and ignored until [`Uprobes::enable`]; dropping
//! the set unregisters them all and waits until no handler can still run. A hit calls the
//! [`Handler`] of `sys::kprobe`, inside the shim's action guard with interrupts off, with
//! the probed task's user registers.

use crate::sys::gfp_load;
use crate::sys::kprobe::{Handler, Vtable};
use crate::sys::shim;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::error::from_err_ptr;
use kernel::prelude::*;
use kernel::str::CStr;

/// Whether the kernel has uprobes (`CONFIG_UPROBES`).
pub(crate) fn available() -> bool {
    // SAFETY: a plain function returning a constant.
    unsafe { shim::oxt_uprobes_available() }
}

/// Uprobes registered by every set, for `OXT_IOC_STATUS`'s `live_uprobes`.
static LIVE: AtomicU64 = AtomicU64::new(0);

/// The uprobes the module has registered now, every consumer's.
pub(crate) fn live() -> u64 {
    LIVE.load(Ordering::Relaxed)
}

/// Where a user-space probe goes.
pub(crate) struct UprobeAt<'a> {
    /// The probed file's absolute path.
    pub(crate) path: &'a CStr,
    /// File offset of the probed instruction.
    pub(crate) offset: u64,
    /// File offset of the USDT semaphore, or 0.
    pub(crate) ref_ctr: u64,
    /// The process it fires in.
    pub(crate) pid: i32,
}

/// The uprobes of one loaded program.
///
/// # Invariants
///
/// Every pointer is a registered shim uprobe this set owns, whose cookie is `cookie`;
/// `cookie` is valid until the set is dropped (the contract of [`Uprobes::new`]), and no
/// handler runs after the drop.
pub(crate) struct Uprobes<H: Handler> {
    probes: KVec<NonNull<shim::Uprobe>>,
    cookie: *const H,
    enabled: bool,
}

// SAFETY: the shim objects are plain kernel allocations usable from any thread, handed only
// to uprobe calls that do their own locking; `H` is `Sync`.
unsafe impl<H: Handler> Send for Uprobes<H> {}
// SAFETY: `&self` methods touch nothing.
unsafe impl<H: Handler> Sync for Uprobes<H> {}

impl<H: Handler> Uprobes<H> {
    /// An empty set whose probes will call `handler`.
    ///
    /// # Safety
    ///
    /// `handler` stays at its address and valid until the set is dropped.
    pub(crate) unsafe fn new(handler: &H) -> Self {
        // INVARIANT: nothing yet; the caller keeps `handler` alive.
        Self {
            probes: KVec::new(),
            cookie: handler,
            enabled: false,
        }
    }

    /// Registers a uprobe at `at` (disabled: hits are ignored until [`Uprobes::enable`]);
    /// its hits in process `at.pid` call the handler with `slot`. The errno says why it
    /// could not be: `ESRCH`, `EPERM`, `EINVAL`, or the path lookup's.
    pub(crate) fn add(&mut self, at: &UprobeAt<'_>, slot: u32) -> Result {
        self.probes.reserve(1, gfp_load())?;
        let ops = &Vtable::<H>::OPS;
        // SAFETY: `path` is NUL-terminated and only read during the call; `ops` is a
        // promoted constant, valid for 'static; the cookie stays valid while the probe is
        // registered (type invariant).
        let raw = from_err_ptr(unsafe {
            shim::oxt_uprobe_alloc(
                at.path.as_char_ptr(),
                at.offset,
                at.ref_ctr,
                at.pid,
                ops,
                self.cookie.cast_mut().cast(),
                slot,
            )
        })?;
        let p = NonNull::new(raw).ok_or(ENOMEM)?;
        LIVE.fetch_add(1, Ordering::Relaxed);
        if self.enabled {
            // SAFETY: `p` was just registered.
            unsafe { shim::oxt_uprobe_enable(p.as_ptr(), true) };
        }
        // INVARIANT: registered; capacity was reserved, so the push can't fail.
        self.probes.push(p, gfp_load())?;
        Ok(())
    }

    /// Number of uprobes.
    pub(crate) fn len(&self) -> usize {
        self.probes.len()
    }

    /// Lets hits run the handler.
    pub(crate) fn enable(&mut self) {
        self.set(true);
    }

    /// Ignores hits again; handlers already running may finish.
    pub(crate) fn disable(&mut self) {
        self.set(false);
    }

    fn set(&mut self, on: bool) {
        if self.enabled == on {
            return;
        }
        for p in &self.probes {
            // SAFETY: `p` is registered (type invariant).
            unsafe { shim::oxt_uprobe_enable(p.as_ptr(), on) };
        }
        self.enabled = on;
    }
}

impl<H: Handler> Drop for Uprobes<H> {
    fn drop(&mut self) {
        let n = self.probes.len() as u32;
        // SAFETY: every pointer is a registered uprobe this set owns (type invariant);
        // `NonNull<Uprobe>` has the layout of `*mut Uprobe`. The call unregisters and frees
        // them all and returns when no handler can still run.
        unsafe { shim::oxt_uprobes_free(self.probes.as_mut_ptr().cast(), n) };
        LIVE.fetch_sub(u64::from(n), Ordering::Relaxed);
    }
}
