// SPDX-License-Identifier: GPL-2.0

//! A safe wrapper over the misc device that the C shim owns.
//!
// TODO: replace with kernel::miscdevice when available (it lands after 6.12).

use crate::sys::shim;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::to_result;
use kernel::ffi::{c_int, c_long, c_uint, c_ulong};
use kernel::prelude::*;
use kernel::types::ForeignOwnable;

/// What a misc device does on `open`, `ioctl` and `release`.
pub(crate) trait FileOps: 'static {
    /// Per-open data, kept in `file->private_data` until release.
    type Data: ForeignOwnable + Send + Sync;

    /// Called on `open()`; an error fails the open with its errno.
    fn open() -> Result<Self::Data>;

    /// Called on `ioctl()`; returns the non-negative result or an errno.
    fn ioctl(
        data: <Self::Data as ForeignOwnable>::Borrowed<'_>,
        cmd: u32,
        arg: usize,
    ) -> Result<i32>;
}

/// Whether a [`Registration`] exists: the shim has one misc device, so one at a time.
static CLAIMED: AtomicBool = AtomicBool::new(false);

/// The registered device; deregistered on drop.
///
/// # Invariants
///
/// The shim's one misc device is registered with `T`'s callbacks for as long as this exists,
/// and this object holds [`CLAIMED`], so no other `Registration` exists at the same time.
pub(crate) struct Registration<T: FileOps> {
    _ops: PhantomData<T>,
}

struct Vtable<T: FileOps>(PhantomData<T>);

impl<T: FileOps> Vtable<T> {
    const OPS: shim::FileOps = shim::FileOps {
        open: open_callback::<T>,
        release: release_callback::<T>,
        ioctl: ioctl_callback::<T>,
    };
}

impl<T: FileOps> Registration<T> {
    /// Registers `/dev/oxtrace` with `T`'s callbacks; `EBUSY` while another registration
    /// exists (the shim has one device).
    pub(crate) fn register() -> Result<Self> {
        if CLAIMED
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: `Vtable::<T>::OPS` is a promoted constant, valid for 'static; the shim keeps
        // the pointer until `oxt_misc_deregister`, which `drop` calls. The claim above makes
        // this the only registration.
        if let Err(e) = to_result(unsafe { shim::oxt_misc_register(&Vtable::<T>::OPS) }) {
            CLAIMED.store(false, Ordering::Release);
            return Err(e);
        }
        // INVARIANT: registered just above, and the claim is ours.
        Ok(Self { _ops: PhantomData })
    }
}

impl<T: FileOps> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the device is registered. No file can be open: each
        // open file holds a reference on the module (`.owner` of the fops), so the module's
        // exit, and this drop, can't run before the last release.
        unsafe { shim::oxt_misc_deregister() };
        CLAIMED.store(false, Ordering::Release);
    }
}

/// # Safety
///
/// Called by the shim's `open` with a valid `file` being opened.
unsafe extern "C" fn open_callback<T: FileOps>(file: *mut shim::File) -> c_int {
    match T::open() {
        Ok(data) => {
            // SAFETY: `file` is valid (function precondition) and not yet visible to any other
            // file operation, so nothing races with this store.
            unsafe { shim::oxt_file_set_private(file, data.into_foreign().cast_mut()) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the shim's `release` once for a `file` whose `open_callback` succeeded.
unsafe extern "C" fn release_callback<T: FileOps>(file: *mut shim::File) -> c_int {
    // SAFETY: `file` is valid for the duration of the call.
    let ptr = unsafe { shim::oxt_file_private(file) };
    // SAFETY: `ptr` came from `into_foreign` in `open_callback`; release is the last file
    // operation, so no borrow from `ioctl_callback` is alive.
    drop(unsafe { T::Data::from_foreign(ptr) });
    0
}

/// # Safety
///
/// Called by the shim's `unlocked_ioctl` on a `file` whose `open_callback` succeeded and that is
/// not yet released.
unsafe extern "C" fn ioctl_callback<T: FileOps>(
    file: *mut shim::File,
    cmd: c_uint,
    arg: c_ulong,
) -> c_long {
    // SAFETY: `file` is valid for the duration of the call.
    let ptr = unsafe { shim::oxt_file_private(file) };
    // SAFETY: `ptr` came from `into_foreign` in `open_callback`, and `from_foreign` only runs at
    // release, which can't overlap an ioctl on the same file; the borrow ends with this call.
    let data = unsafe { T::Data::borrow(ptr) };
    match T::ioctl(data, cmd, arg) {
        Ok(v) => v as c_long,
        Err(e) => e.to_errno() as c_long,
    }
}
