// SPDX-License-Identifier: GPL-2.0

//! Raw declarations of the C shim, `shim/shim.h`; keep the two in step.
//!
//! Nothing outside the safe wrappers of `sys/` uses these directly.

use kernel::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};

/// `struct file`, only ever handled by pointer.
#[repr(C)]
pub(crate) struct File {
    _opaque: [u8; 0],
}

/// `struct pt_regs`, only ever handled by pointer.
#[repr(C)]
pub(crate) struct PtRegs {
    _opaque: [u8; 0],
}

/// `struct oxt_probe` (a kprobe or kretprobe of the shim), only ever handled by pointer.
#[repr(C)]
pub(crate) struct Probe {
    _opaque: [u8; 0],
}

/// `struct oxt_fset` (entry probes switched together through one ftrace_ops), only ever
/// handled by pointer.
#[repr(C)]
pub(crate) struct Fset {
    _opaque: [u8; 0],
}

/// `struct oxt_rset` (return probes, and the entry probes on their functions, through one
/// fprobe), only ever handled by pointer.
#[repr(C)]
pub(crate) struct Rset {
    _opaque: [u8; 0],
}

/// `struct oxt_tick` (an hrtimer of the shim), only ever handled by pointer.
#[repr(C)]
pub(crate) struct Tick {
    _opaque: [u8; 0],
}

/// `struct oxt_periodic` (a periodic kernel thread of the shim), only ever handled by pointer.
#[repr(C)]
pub(crate) struct Periodic {
    _opaque: [u8; 0],
}

/// `struct page`, only ever handled by pointer.
#[repr(C)]
pub(crate) struct Page {
    _opaque: [u8; 0],
}

/// `struct oxt_file_ops`: the device callbacks the shim's `file_operations` forward to.
#[repr(C)]
pub(crate) struct FileOps {
    pub(crate) open: unsafe extern "C" fn(file: *mut File) -> c_int,
    pub(crate) release: unsafe extern "C" fn(file: *mut File) -> c_int,
    pub(crate) ioctl: unsafe extern "C" fn(file: *mut File, cmd: c_uint, arg: c_ulong) -> c_long,
}

/// `struct oxt_probe_ops`: the handler a probe or tick calls, with its cookie and slot.
#[repr(C)]
pub(crate) struct ProbeOps {
    pub(crate) fire: unsafe extern "C" fn(
        cookie: *mut c_void,
        slot: c_uint,
        regs: *mut PtRegs,
        is_return: bool,
        cpu: c_uint,
    ),
    pub(crate) recursion: unsafe extern "C" fn(cookie: *mut c_void, slot: c_uint),
    /// Kprobes' only: `None` (NULL) for the system-call hooks.
    pub(crate) fire_many: Option<
        unsafe extern "C" fn(
            cookie: *mut c_void,
            slots: *const c_uint,
            n: c_uint,
            regs: *mut PtRegs,
            cpu: c_uint,
        ),
    >,
}

extern "C" {
    pub(crate) fn oxt_misc_register(ops: *const FileOps) -> c_int;
    pub(crate) fn oxt_misc_deregister();
    pub(crate) fn oxt_file_private(file: *const File) -> *mut c_void;
    pub(crate) fn oxt_file_set_private(file: *mut File, data: *mut c_void);
    pub(crate) fn oxt_perfmon_capable() -> bool;
    pub(crate) fn oxt_mem_budget() -> u64;
    pub(crate) fn oxt_consumer_mem_cap() -> u64;
    pub(crate) fn oxt_max_consumers() -> c_uint;
    pub(crate) fn oxt_cpu_has_intel_pt() -> bool;
    pub(crate) fn oxt_ktime_get_ns() -> u64;
    pub(crate) fn oxt_mono_fast_ns() -> u64;
    pub(crate) fn oxt_real_fast_ns() -> u64;
    pub(crate) fn oxt_nr_cpu_ids() -> c_uint;
    pub(crate) fn oxt_cpu_online(cpu: c_uint) -> bool;

    pub(crate) fn oxt_this_cpu() -> c_uint;
    pub(crate) fn oxt_current_pid() -> u32;
    pub(crate) fn oxt_current_tid() -> u32;
    pub(crate) fn oxt_current_uid() -> u32;
    pub(crate) fn oxt_current_gid() -> u32;
    pub(crate) fn oxt_current_ppid() -> u32;
    pub(crate) fn oxt_current_progenyof(pid: u32) -> bool;
    pub(crate) fn oxt_raise_init();
    pub(crate) fn oxt_raise(sig: c_int) -> c_int;
    pub(crate) fn oxt_raise_sync();
    pub(crate) fn oxt_ndelay(ns: u64);
    pub(crate) fn oxt_current_task() -> c_ulong;
    pub(crate) fn oxt_current_vtime() -> u64;
    pub(crate) fn oxt_irq_level() -> u32;
    pub(crate) fn oxt_current_comm(buf: *mut u8, len: usize) -> usize;
    pub(crate) fn oxt_read_nofault(dst: *mut c_void, src: c_ulong, len: usize) -> c_long;

    pub(crate) fn oxt_probe_alloc(
        symbol: *const c_char,
        is_return: bool,
        ops: *const ProbeOps,
        cookie: *mut c_void,
        slot: c_uint,
    ) -> *mut Probe;
    pub(crate) fn oxt_probe_register(p: *mut Probe) -> c_int;
    pub(crate) fn oxt_probe_enable(p: *mut Probe) -> c_int;
    pub(crate) fn oxt_probe_disable(p: *mut Probe) -> c_int;
    pub(crate) fn oxt_probes_unregister(probes: *mut *mut Probe, n: c_uint);
    pub(crate) fn oxt_probe_free(p: *mut Probe);
    pub(crate) fn oxt_fset_alloc(probes: *mut *mut Probe, n: c_uint) -> *mut Fset;
    pub(crate) fn oxt_fset_enable(s: *mut Fset) -> c_int;
    pub(crate) fn oxt_fset_disable(s: *mut Fset);
    pub(crate) fn oxt_fset_free(s: *mut Fset);
    pub(crate) fn oxt_rset_alloc(probes: *mut *mut Probe, n: c_uint) -> *mut Rset;
    pub(crate) fn oxt_rset_enable(s: *mut Rset) -> c_int;
    pub(crate) fn oxt_rset_disable(s: *mut Rset);
    pub(crate) fn oxt_rset_free(s: *mut Rset);
    pub(crate) fn oxt_rset_missed(s: *const Rset) -> c_ulong;
    pub(crate) fn oxt_probe_missed(p: *const Probe) -> c_ulong;
    pub(crate) fn oxt_regs_arg(regs: *mut PtRegs, n: c_uint) -> c_ulong;
    pub(crate) fn oxt_regs_retval(regs: *mut PtRegs) -> c_ulong;
    pub(crate) fn oxt_regs_caller(regs: *mut PtRegs, is_return: bool) -> c_ulong;

    pub(crate) fn oxt_tick_alloc(
        ops: *const ProbeOps,
        cookie: *mut c_void,
        slot: c_uint,
        period_ns: u64,
    ) -> *mut Tick;
    pub(crate) fn oxt_tick_start(t: *mut Tick);
    pub(crate) fn oxt_tick_cancel(t: *mut Tick);
    pub(crate) fn oxt_tick_free(t: *mut Tick);

    pub(crate) fn oxt_xcall_cpu(
        cpu: c_uint,
        f: unsafe extern "C" fn(info: *mut c_void),
        info: *mut c_void,
    ) -> c_int;
    pub(crate) fn oxt_xcall_all(f: unsafe extern "C" fn(info: *mut c_void), info: *mut c_void);
    pub(crate) fn oxt_run_as_action(f: unsafe extern "C" fn(info: *mut c_void), info: *mut c_void);

    pub(crate) fn oxt_periodic_alloc(
        f: unsafe extern "C" fn(info: *mut c_void),
        info: *mut c_void,
    ) -> *mut Periodic;
    pub(crate) fn oxt_periodic_start(p: *mut Periodic, period_ns: u64, id: u64) -> c_int;
    pub(crate) fn oxt_periodic_stop(p: *mut Periodic);
    pub(crate) fn oxt_periodic_kick(p: *mut Periodic);
    pub(crate) fn oxt_periodic_runs(p: *const Periodic) -> u64;
    pub(crate) fn oxt_periodic_free(p: *mut Periodic);
    pub(crate) fn oxt_synchronize_rcu();

    pub(crate) fn oxt_gfp_load() -> u32;
    pub(crate) fn oxt_pages_alloc(order: c_uint) -> *mut Page;
    pub(crate) fn oxt_pages_free(page: *mut Page, order: c_uint);
    pub(crate) fn oxt_page_address(page: *mut Page) -> *mut c_void;
    pub(crate) fn oxt_page_phys(page: *mut Page) -> u64;
    pub(crate) fn oxt_rdmsr_safe(msr: u32, val: *mut u64) -> c_int;
    pub(crate) fn oxt_wrmsr_safe(msr: u32, val: u64) -> c_int;
    pub(crate) fn oxt_cpuid_count(leaf: u32, subleaf: u32, regs: *mut u32);
    pub(crate) fn oxt_rdtsc() -> u64;
    pub(crate) fn oxt_phys_bits() -> c_uint;
}

/// `struct oxt_syshook` (a probe on the raw sys_enter or sys_exit tracepoint), only ever
/// handled by pointer.
#[repr(C)]
pub(crate) struct Syshook {
    _opaque: [u8; 0],
}

/// `struct oxt_tpev` (perf tracepoint counters), only ever handled by pointer.
#[repr(C)]
pub(crate) struct Tpev {
    _opaque: [u8; 0],
}

/// `struct oxt_profile` (per-CPU profile timers), only ever handled by pointer.
#[repr(C)]
pub(crate) struct Profile {
    _opaque: [u8; 0],
}

// shim/provider.c: the syscall and profile providers.
extern "C" {
    pub(crate) fn oxt_syshook_alloc(
        is_return: bool,
        ops: *const ProbeOps,
        cookie: *mut c_void,
    ) -> *mut Syshook;
    pub(crate) fn oxt_syshook_enable(h: *mut Syshook) -> c_int;
    pub(crate) fn oxt_syshook_disable(h: *mut Syshook);
    pub(crate) fn oxt_syshook_free(h: *mut Syshook);
    pub(crate) fn oxt_syscall_arg(regs: *mut PtRegs, n: c_uint) -> c_ulong;
    pub(crate) fn oxt_profile_alloc(
        ops: *const ProbeOps,
        cookie: *mut c_void,
        slot: c_uint,
        period_ns: u64,
    ) -> *mut Profile;
    pub(crate) fn oxt_profile_enable(p: *mut Profile);
    pub(crate) fn oxt_profile_disable(p: *mut Profile);
    pub(crate) fn oxt_profile_free(p: *mut Profile);
    pub(crate) fn oxt_regs_kernel_pc(regs: *mut PtRegs) -> c_ulong;
    pub(crate) fn oxt_regs_user_pc(regs: *mut PtRegs) -> c_ulong;
    pub(crate) fn oxt_kernel_stack(
        regs: *mut PtRegs,
        from: c_uint,
        out: *mut c_ulong,
        max: c_uint,
    ) -> c_uint;
    pub(crate) fn oxt_kernel_stack_depth(regs: *mut PtRegs, from: c_uint) -> c_uint;
    pub(crate) fn oxt_user_regs(regs: *mut PtRegs, pc: *mut c_ulong, fp: *mut c_ulong) -> bool;
    pub(crate) fn oxt_user_reg(regs: *mut PtRegs, idx: c_uint, out: *mut c_ulong) -> bool;
    pub(crate) fn oxt_provider_exit();
    pub(crate) fn oxt_tpev_alloc(
        ops: *const ProbeOps,
        cookie: *mut c_void,
        slot: c_uint,
        id: u64,
    ) -> *mut Tpev;
    pub(crate) fn oxt_tpev_enable(t: *mut Tpev);
    pub(crate) fn oxt_tpev_disable(t: *mut Tpev);
    pub(crate) fn oxt_tpev_free(t: *mut Tpev);
    pub(crate) fn oxt_tp_record() -> c_ulong;
    pub(crate) fn oxt_read_user_nofault(dst: *mut c_void, src: c_ulong, len: usize) -> c_long;
    pub(crate) fn oxt_write_user_nofault(dst: c_ulong, src: *const c_void, len: usize) -> c_long;
}

/// `struct oxt_uprobe` (a uprobe consumer for one process), only ever handled by pointer.
#[repr(C)]
pub(crate) struct Uprobe {
    _opaque: [u8; 0],
}

// shim/uprobe.c: user-space probes.
extern "C" {
    pub(crate) fn oxt_uprobe_alloc(
        path: *const c_char,
        offset: u64,
        ref_ctr: u64,
        pid: c_int,
        ops: *const ProbeOps,
        cookie: *mut c_void,
        slot: c_uint,
    ) -> *mut Uprobe;
    pub(crate) fn oxt_uprobe_enable(u: *mut Uprobe, on: bool);
    pub(crate) fn oxt_uprobes_free(u: *mut *mut Uprobe, n: c_uint);
    pub(crate) fn oxt_uprobes_available() -> bool;
}
