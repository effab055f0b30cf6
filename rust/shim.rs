// SPDX-License-Identifier: GPL-2.0

//! Raw declarations of the C shim, `shim/shim.h`; keep the two in step.
//!
//! Nothing outside the safe wrappers (`miscdev`, `cpu`) uses these directly.

use kernel::ffi::{c_int, c_long, c_uint, c_ulong, c_void};

/// `struct file`, only ever handled by pointer.
#[repr(C)]
pub(crate) struct File {
    _opaque: [u8; 0],
}

/// `struct oxt_file_ops`: the device callbacks the shim's `file_operations` forward to.
#[repr(C)]
pub(crate) struct FileOps {
    pub(crate) open: unsafe extern "C" fn(file: *mut File) -> c_int,
    pub(crate) release: unsafe extern "C" fn(file: *mut File) -> c_int,
    pub(crate) ioctl: unsafe extern "C" fn(file: *mut File, cmd: c_uint, arg: c_ulong) -> c_long,
}

extern "C" {
    pub(crate) fn oxt_misc_register(ops: *const FileOps) -> c_int;
    pub(crate) fn oxt_misc_deregister();
    pub(crate) fn oxt_file_private(file: *const File) -> *mut c_void;
    pub(crate) fn oxt_file_set_private(file: *mut File, data: *mut c_void);
    pub(crate) fn oxt_perfmon_capable() -> bool;
    pub(crate) fn oxt_num_possible_cpus() -> c_uint;
    pub(crate) fn oxt_cpu_has_intel_pt() -> bool;
    pub(crate) fn oxt_ktime_get_ns() -> u64;
}
