// SPDX-License-Identifier: GPL-2.0

//! The user/kernel ABI of `/dev/oxtrace`, mirrored from `include/uapi/linux/oxtrace.h`.
//!
//! The C header is the reference. The host test `tests/abi.rs` compiles it and checks every
//! size, offset and ioctl number here against it. This file is shared by the module and by the
//! tool (through the host crate), so both sides use one definition.

/// Name of the misc device, `/dev/oxtrace`.
pub const DEVICE_NAME: &str = "oxtrace";

/// ABI major version: a new major breaks old tools.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version: a new minor only adds.
pub const ABI_MINOR: u32 = 16;

/// Image option `bufpolicy` (11; minor 15): two halves per CPU, swapped at each snapshot.
pub const BUFPOLICY_SWITCH: u64 = crate::buffer::POLICY_SWITCH;
/// Image option `bufpolicy`: stop recording on a full CPU, with room kept for END.
pub const BUFPOLICY_FILL: u64 = crate::buffer::POLICY_FILL;
/// Image option `bufpolicy`: keep the newest records.
pub const BUFPOLICY_RING: u64 = crate::buffer::POLICY_RING;

/// The CPU has Intel PT with ToPA output.
pub const FEAT_INTEL_PT: u64 = 1 << 0;
/// kprobes and kretprobes are available to the module.
pub const FEAT_KPROBES: u64 = 1 << 1;
/// uprobes are available to the module (the pid and USDT providers; minor 11).
pub const FEAT_UPROBES: u64 = 1 << 2;

/// Length of [`Version::release`].
pub const RELEASE_LEN: usize = 32;

/// Consumer state: opened, nothing loaded.
pub const STATE_IDLE: u32 = 0;
/// Consumer state: program loaded, probes registered and disabled.
pub const STATE_LOADED: u32 = 1;
/// Consumer state: probes enabled (GO).
pub const STATE_ACTIVE: u32 = 2;
/// Consumer state: probes disabled (STOP); buffers can be drained.
pub const STATE_STOPPED: u32 = 3;

/// [`Attach::flags`]: from a glob, skip if the kernel refuses.
pub const ATTACH_OPTIONAL: u32 = 1 << 0;

/// [`Load::err_kind`]: no error.
pub const LOADERR_NONE: u32 = 0;
/// [`Load::err_kind`]: the image is malformed; `err_code` says how.
pub const LOADERR_IMAGE: u32 = 1;
/// [`Load::err_kind`]: bytecode rejected; `err_index` clause, `err_part`, `err_insn`, `err_code`.
pub const LOADERR_VERIFY: u32 = 2;
/// [`Load::err_kind`]: attach entry `err_index` refused; the errno says why.
pub const LOADERR_ATTACH: u32 = 3;
/// [`Load::err_kind`]: probe description `err_index` attaches nowhere.
pub const LOADERR_PROBE: u32 = 4;
/// [`Load::err_kind`]: over the memory budget (`E2BIG`); `err_code` the largest part
/// (`limits::MEM_*`), `err_index` the CPUs, `err_part` 0 per consumer or 1 all consumers,
/// `err_insn` the KiB needed, `err_arg` the KiB the budget leaves.
pub const LOADERR_MEMORY: u32 = 5;
/// [`Load::err_kind`]: attach entry `err_index` names a function that is unsafe to probe
/// (`EPERM`); `err_code` is the reason, `probesafe::Why`.
pub const LOADERR_UNSAFE: u32 = 6;
/// [`Load::err_kind`]: user-space probe `err_index` (of [`Load::uattach`]) could not be
/// placed; the errno says why (`ESRCH` process gone, `EPERM` own or untraceable process,
/// `ENOENT`/`EACCES` the file, `EINVAL` offset or instruction, `E2BIG` USDT operands).
pub const LOADERR_UATTACH: u32 = 7;

/// Most operands of one USDT probe (`<sys/sdt.h>` allows 12).
pub const USDT_MAX_ARGS: usize = 12;
/// [`UsdtArg::kind`]: a constant, `value`.
pub const USDT_ARG_CONST: u8 = 1;
/// [`UsdtArg::kind`]: the register `base`.
pub const USDT_ARG_REG: u8 = 2;
/// [`UsdtArg::kind`]: memory at `base + index * scale + value`.
pub const USDT_ARG_MEM: u8 = 3;
/// [`UsdtArg::base`], [`UsdtArg::index`]: no register.
pub const UREG_NONE: u8 = 0xff;

/// `struct oxt_uattach`: one user-space probe (a uprobe) of a pid or USDT description.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uattach {
    /// Index of the probe description in the image.
    pub probe: u32,
    /// `ATTACH_*` bits.
    pub flags: u32,
    /// Offset in the names buffer of the probe's `provider:module:function:name`.
    pub name: u32,
    /// Offset in the names buffer of the probed file's absolute path.
    pub path: u32,
    /// File offset of the probed instruction.
    pub offset: u64,
    /// File offset of the USDT semaphore (a `u16` count), or 0.
    pub ref_ctr: u64,
    /// Return probes: the returning instruction's offset in its function (`arg0`).
    pub roff: u64,
    /// The process the probe fires in.
    pub pid: i32,
    /// USDT: index of the first operand in [`Load::usdt_args`].
    pub arg_first: u32,
    /// USDT: operands, at most [`USDT_MAX_ARGS`].
    pub nargs: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct oxt_usdt_arg`: one operand of a USDT probe's argument specification.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsdtArg {
    /// `USDT_ARG_*`.
    pub kind: u8,
    /// Bytes of the value: 1, 2, 4 or 8.
    pub size: u8,
    /// 1: sign-extended, 0: zero-extended.
    pub is_signed: u8,
    /// Register (`uregs[]` index) or [`UREG_NONE`].
    pub base: u8,
    /// Index register or [`UREG_NONE`].
    pub index: u8,
    /// 1, 2, 4 or 8.
    pub scale: u8,
    /// Zero.
    pub reserved: u16,
    /// The constant, or the displacement.
    pub value: i64,
}

/// [`ProbeInfo::flags`]: a return probe.
pub const PROBE_RETURN: u32 = 1 << 0;
/// Length of [`ProbeInfo::func`].
pub const PROBE_FUNC_LEN: usize = 64;

// A probe's function name and its NUL fill the field.
const _: () = assert!(crate::limits::MAX_PROBE_NAME + 1 == PROBE_FUNC_LEN);

/// `struct oxt_version`: answer of [`IOC_VERSION`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Version {
    /// In: `size_of::<Version>()`.
    pub size: u32,
    /// Out: [`ABI_MAJOR`] of the module.
    pub abi_major: u32,
    /// Out: [`ABI_MINOR`] of the module.
    pub abi_minor: u32,
    /// Out: number of possible CPUs.
    pub ncpus: u32,
    /// Out: `FEAT_*` bits.
    pub features: u64,
    /// Out: module version, NUL-terminated.
    pub release: [u8; RELEASE_LEN],
    /// In: zero.
    pub reserved: [u64; 4],
}

/// `struct oxt_cpu_status`: per-CPU counters of a consumer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStatus {
    /// Probes fired on this CPU.
    pub fired: u64,
    /// Records written to the principal buffer.
    pub records: u64,
    /// Records that did not fit the principal buffer.
    pub drops: u64,
    /// Clauses aborted by a runtime error.
    pub errors: u64,
    /// Probe hits not run because an action was running on this CPU.
    pub recursion: u64,
    /// Records that did not fit a speculative buffer (minor 5).
    pub specdrops: u64,
    /// `speculation()` calls that found only busy speculations (minor 5).
    pub specbusy: u64,
    /// `speculation()` calls that found every speculation active (minor 5).
    pub specunavail: u64,
}

/// `struct oxt_status`: answer of [`IOC_STATUS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// In: `size_of::<Status>()`.
    pub size: u32,
    /// Out: `STATE_*` of this consumer.
    pub state: u32,
    /// Out: unique id of this consumer, never 0.
    pub consumer_id: u64,
    /// Out: consumers open on the device now.
    pub nconsumers: u64,
    /// Out: consumer objects allocated and not yet freed.
    pub live_consumers: u64,
    /// Out: `CLOCK_MONOTONIC` time of this consumer's `open()`, in ns.
    pub opened_ns: u64,
    /// Out: ioctls served to this consumer so far.
    pub ioctls: u64,
    /// In: pointer to `ncpus` [`CpuStatus`], or 0.
    pub cpus: u64,
    /// In: entries at `cpus`; out: entries written.
    pub ncpus: u32,
    /// Out: 1 once an `exit()` action ran.
    pub exited: u32,
    /// Out: the argument of the first `exit()`.
    pub exit_status: i64,
    /// Out: hits the kernel could not hand to us.
    pub missed: u64,
    /// Out: uprobes the module has registered, every consumer's (minor 13).
    pub live_uprobes: u64,
    /// Out: CPUs whose fill buffer is full (`bufpolicy` fill; minor 15).
    pub filled: u64,
    /// In: zero.
    pub reserved: [u64; 4],
}

/// `struct oxt_attach`: where an fbt probe description attaches.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attach {
    /// Index of the probe description in the image.
    pub probe: u32,
    /// `ATTACH_*` bits.
    pub flags: u32,
    /// Offset of the NUL-terminated function name in the names buffer.
    pub name: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct oxt_load`: argument of [`IOC_LOAD`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// In: `size_of::<Load>()`.
    pub size: u32,
    /// In: zero.
    pub flags: u32,
    /// In: pointer to the program image.
    pub image: u64,
    /// In: its length.
    pub image_len: u64,
    /// In: pointer to `nattach` [`Attach`].
    pub attach: u64,
    /// In: pointer to the names of the attach entries.
    pub names: u64,
    /// In: entries at `attach`.
    pub nattach: u32,
    /// In: bytes at `names`.
    pub names_len: u32,
    /// Out: kprobes and kretprobes registered.
    pub nprobes: u32,
    /// Out: optional attach entries the kernel refused.
    pub nskipped: u32,
    /// Out: `LOADERR_*`.
    pub err_kind: u32,
    /// Out: clause, attach entry or probe description.
    pub err_index: u32,
    /// Out: 0 predicate, 1 actions.
    pub err_part: u32,
    /// Out: instruction index.
    pub err_insn: u32,
    /// Out: reason code.
    pub err_code: u32,
    /// Out: the reason's operand.
    pub err_arg: u32,
    /// In: pointer to `nuattach` [`Uattach`] (minor 11).
    pub uattach: u64,
    /// In: pointer to `nusdt_args` [`UsdtArg`] (minor 11).
    pub usdt_args: u64,
    /// In: entries at `uattach`.
    pub nuattach: u32,
    /// In: entries at `usdt_args`.
    pub nusdt_args: u32,
    /// Out: uprobes registered.
    pub nuprobes: u32,
    /// In: zero.
    pub reserved0: u32,
}

/// `struct oxt_snapshot`: argument of [`IOC_SNAPSHOT`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// In: `size_of::<Snapshot>()`.
    pub size: u32,
    /// In: the CPU.
    pub cpu: u32,
    /// In: pointer to at least `bufsize` bytes.
    pub buf: u64,
    /// In: its length.
    pub buf_len: u64,
    /// Out: bytes of whole records written.
    pub len: u64,
    /// Out: records dropped since the last snapshot.
    pub drops: u64,
    /// In: zero.
    pub reserved: [u64; 4],
}

/// `struct oxt_probe_info`: one attached probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeInfo {
    /// Index of the probe description.
    pub probe: u32,
    /// `PROBE_*` bits.
    pub flags: u32,
    /// Attached function, NUL-terminated.
    pub func: [u8; PROBE_FUNC_LEN],
    /// Times fired.
    pub fired: u64,
    /// Clauses aborted by runtime errors.
    pub errors: u64,
    /// Hits not run because an action was running on the CPU.
    pub recursion: u64,
    /// Zero.
    pub reserved: [u64; 2],
}

impl Default for ProbeInfo {
    fn default() -> Self {
        Self {
            probe: 0,
            flags: 0,
            func: [0; PROBE_FUNC_LEN],
            fired: 0,
            errors: 0,
            recursion: 0,
            reserved: [0; 2],
        }
    }
}

/// `struct oxt_probes`: argument of [`IOC_PROBES`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    /// In: `size_of::<Probes>()`.
    pub size: u32,
    /// In: entries at `info`; out: entries written.
    pub n: u32,
    /// In: pointer to `n` [`ProbeInfo`].
    pub info: u64,
    /// Out: attached probes in all.
    pub total: u32,
    /// In: zero.
    pub reserved0: u32,
    /// In: zero.
    pub reserved: [u64; 3],
}

/// [`Dynstat::dstate`]: chunks on free lists.
pub const DSTATE_FREE: u32 = 0;
/// [`Dynstat::dstate`]: the cleaner made chunks clean.
pub const DSTATE_CLEAN: u32 = 1;
/// [`Dynstat::dstate`]: none free; some being rinsed.
pub const DSTATE_RINSING: u32 = 2;
/// [`Dynstat::dstate`]: none free; some dirty.
pub const DSTATE_DIRTY: u32 = 3;
/// [`Dynstat::dstate`]: every chunk in use.
pub const DSTATE_EMPTY: u32 = 4;

/// [`Dynstat::flags`]: the program has a dynamic memory.
pub const DYN_PRESENT: u32 = 1 << 0;
/// [`Dynstat::flags`]: the dynamic memory was initialised at GO.
pub const DYN_STARTED: u32 = 1 << 1;
/// [`Dynstat::flags`]: the `audit_*` fields hold the audit made at STOP.
pub const DYN_AUDITED: u32 = 1 << 2;

/// [`Dynstat::audit_error`]: every chunk accounted for.
pub const DYN_AUDIT_OK: u32 = 0;
/// [`Dynstat::audit_error`]: no memory for the audit.
pub const DYN_AUDIT_BITMAP: u32 = 1;
/// [`Dynstat::audit_error`]: a chunk on two lists or chains, or a cycle.
pub const DYN_AUDIT_DUPLICATE: u32 = 2;
/// [`Dynstat::audit_error`]: a list or chain holds an index that is no chunk.
pub const DYN_AUDIT_BAD_INDEX: u32 = 3;
/// [`Dynstat::audit_error`]: a listed chunk marked in use, or a chained one marked free.
pub const DYN_AUDIT_BAD_HASH: u32 = 4;
/// [`Dynstat::audit_error`]: chunks on no list and no chain.
pub const DYN_AUDIT_LOST: u32 = 5;
/// [`Dynstat::audit_error`]: list lengths or the in-use count disagree with the walk.
pub const DYN_AUDIT_COUNTERS: u32 = 6;

/// `struct oxt_dyn_cpu`: one CPU's dynamic variable counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DynCpu {
    /// Variables allocated by this CPU.
    pub allocs: u64,
    /// Variables freed (0 stored) by this CPU.
    pub frees: u64,
    /// Allocations served from another CPU's lists.
    pub steals: u64,
    /// Clean lists moved to this CPU's free list.
    pub clean_moves: u64,
    /// Lost insertion races (chunk to the dirty list).
    pub races: u64,
    /// Drops in state EMPTY.
    pub drops_empty: u64,
    /// Drops in state DIRTY.
    pub drops_dirty: u64,
    /// Drops in state RINSING.
    pub drops_rinsing: u64,
    /// Drops because the tuple was larger than a chunk.
    pub drops_size: u64,
    /// Operations abandoned under contention.
    pub contended: u64,
    /// Length of the free list.
    pub free: u64,
    /// Length of the clean list.
    pub clean: u64,
    /// Length of the rinsing list.
    pub rinsing: u64,
    /// Length of the dirty list.
    pub dirty: u64,
    /// Zero.
    pub reserved: [u64; 2],
}

/// `struct oxt_dynstat`: argument of [`IOC_DYNSTAT`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dynstat {
    /// In: `size_of::<Dynstat>()`.
    pub size: u32,
    /// Out: `DYN_*` bits.
    pub flags: u32,
    /// Out: `DSTATE_*`.
    pub dstate: u32,
    /// In: entries at `cpus`; out: entries written.
    pub ncpus: u32,
    /// In: pointer to `ncpus` [`DynCpu`], or 0.
    pub cpus: u64,
    /// In: pointer to `nvars` `u64` (drops per variable id), or 0.
    pub var_drops: u64,
    /// In: entries at `var_drops`; out: variable ids of the program.
    pub nvars: u32,
    /// Out: bytes per chunk.
    pub chunk_bytes: u32,
    /// Out: chunks (and hash buckets).
    pub nchunks: u64,
    /// Out: bytes of dynamic memory allocated.
    pub dynvarsize: u64,
    /// Out: cleaner period in force (clamped), ns.
    pub cleanrate_ns: u64,
    /// Out: times the cleaner thread ran.
    pub cleaner_runs: u64,
    /// Out: chunks holding a variable now.
    pub in_use: u64,
    /// Out: most chunks seen in use.
    pub high_water: u64,
    /// Out: cleaner passes that cleaned chunks.
    pub passes: u64,
    /// Out: cleaner passes with nothing dirty.
    pub idle_passes: u64,
    /// Out: cross-calls issued by the cleaner.
    pub crosscalls: u64,
    /// Out: chunks cleaned.
    pub rinsed: u64,
    /// Out: dirty lists rinsed on a borrowed CPU.
    pub borrowed: u64,
    /// Out: dirty lists left for a later pass.
    pub failclean: u64,
    /// Out (audited): chunks on free lists.
    pub audit_free: u64,
    /// Out (audited): chunks on clean lists.
    pub audit_clean: u64,
    /// Out (audited): chunks on rinsing lists.
    pub audit_rinsing: u64,
    /// Out (audited): chunks on dirty lists.
    pub audit_dirty: u64,
    /// Out (audited): chunks on hash chains.
    pub audit_in_use: u64,
    /// Out (audited): `DYN_AUDIT_*`.
    pub audit_error: u32,
    /// In: zero.
    pub reserved0: u32,
    /// Out: audits made at release, module-wide.
    pub audits: u64,
    /// Out: of those, the failed ones.
    pub audit_failures: u64,
    /// In: zero.
    pub reserved: [u64; 4],
}

/// [`PtConfig::backend`]: the real backend if the CPU has PT, else the software one.
pub const PT_BACKEND_AUTO: u32 = 0;
/// [`PtConfig::backend`]: the software output engine.
pub const PT_BACKEND_SOFT: u32 = 1;
/// [`PtConfig::backend`]: the processor's Intel PT (`ENODEV` without PT and ToPA).
pub const PT_BACKEND_HW: u32 = 2;
/// [`PtConfig::mode`]: the last table links back to the first; output wraps.
pub const PT_MODE_RING: u32 = 0;
/// [`PtConfig::mode`]: STOP on the last slice; output stops when full.
pub const PT_MODE_STOP: u32 = 1;
/// [`PtConfig::mode`]: STOP and INT on the last slice (the PMI belongs to perf: polled).
pub const PT_MODE_STOP_INT: u32 = 2;
/// Most slices per CPU.
pub const PT_MAX_SLICES: u32 = 4096;
/// Largest slice order (4 KiB << 10 = 4 MiB).
pub const PT_MAX_ORDER: u32 = 10;
/// Most bytes per CPU.
pub const PT_MAX_BYTES: u64 = 256 << 20;
/// Most bytes one [`IOC_PT_READ`] copies.
pub const PT_MAX_READ: u32 = 64 << 10;
/// [`PtStatus::state`]: not configured.
pub const PT_STATE_NONE: u32 = 0;
/// [`PtStatus::state`]: configured, not started.
pub const PT_STATE_READY: u32 = 1;
/// [`PtStatus::state`]: tracing.
pub const PT_STATE_RUNNING: u32 = 2;
/// [`PtStatus::state`]: stopped; the data can be read.
pub const PT_STATE_STOPPED: u32 = 3;
/// [`PtCpu::flags`]: the CPU was online and answered.
pub const PT_CPU_PRESENT: u32 = 1 << 0;
/// [`PtCpu::flags`]: the ring wrapped; the data starts at `position`.
pub const PT_CPU_WRAPPED: u32 = 1 << 1;
/// [`PtCpu::flags`]: `IA32_RTIT_STATUS.Stopped`.
pub const PT_CPU_STOPPED: u32 = 1 << 2;
/// [`PtCpu::flags`]: `IA32_RTIT_STATUS.Error`.
pub const PT_CPU_ERROR: u32 = 1 << 3;
/// [`PtCpu::flags`]: an INT region filled.
pub const PT_CPU_PMI: u32 = 1 << 4;
/// [`PtCpu::flags`]: TraceEn (or the software engine) is on.
pub const PT_CPU_ENABLED: u32 = 1 << 5;

/// `struct oxt_pt_config`: argument of [`IOC_PT_CONFIG`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtConfig {
    /// In: `size_of::<PtConfig>()`.
    pub size: u32,
    /// In: `PT_BACKEND_*`; out: the backend in use.
    pub backend: u32,
    /// In: `PT_MODE_*`.
    pub mode: u32,
    /// In: slices per CPU, `1..=PT_MAX_SLICES`.
    pub nslices: u32,
    /// In: slice size `4 KiB << slice_order`, `0..=PT_MAX_ORDER`.
    pub slice_order: u32,
    /// In: output entries per table, 1..=511; 0: 511.
    pub per_table: u32,
    /// In: software backend: bytes between PSBs, 256..=1 MiB; 0: 4096.
    pub psb_period: u32,
    /// Out: tables per CPU.
    pub ntables: u32,
    /// Out: bytes per CPU.
    pub capacity: u64,
    /// Out: CPUs with a buffer.
    pub ncpus: u32,
    /// Out: MAXPHYADDR used for the tables.
    pub phys_bits: u32,
    /// In: zero.
    pub reserved: [u64; 4],
}

/// `struct oxt_pt_cpu`: one CPU's PT state.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtCpu {
    /// Linear offset of the next byte.
    pub position: u64,
    /// Bytes [`IOC_PT_READ`] returns.
    pub data_len: u64,
    /// Bytes written (software).
    pub written: u64,
    /// Bytes lost (software).
    pub lost: u64,
    /// Times the ring wrapped (software).
    pub wraps: u64,
    /// PTW packets written (software).
    pub ptws: u64,
    /// `IA32_RTIT_OUTPUT_BASE`.
    pub output_base: u64,
    /// `IA32_RTIT_OUTPUT_MASK_PTRS`.
    pub mask_ptrs: u64,
    /// `IA32_RTIT_STATUS`.
    pub rtit_status: u64,
    /// `PT_CPU_*`.
    pub flags: u32,
    /// 0, or the negative errno of this CPU's last start or stop.
    pub error: i32,
    /// Zero.
    pub reserved: [u64; 2],
}

/// `struct oxt_pt_status`: argument of [`IOC_PT_STATUS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtStatus {
    /// In: `size_of::<PtStatus>()`.
    pub size: u32,
    /// Out: `PT_STATE_*`.
    pub state: u32,
    /// Out: `PT_BACKEND_SOFT` or `PT_BACKEND_HW`.
    pub backend: u32,
    /// Out: `PT_MODE_*`.
    pub mode: u32,
    /// Out: bytes per CPU.
    pub capacity: u64,
    /// In: pointer to `ncpus` [`PtCpu`], or 0.
    pub cpus: u64,
    /// In: entries at `cpus`; out: entries written.
    pub ncpus: u32,
    /// In: zero.
    pub reserved0: u32,
    /// In: zero.
    pub reserved: [u64; 4],
}

/// `struct oxt_pt_read`: argument of [`IOC_PT_READ`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtRead {
    /// In: `size_of::<PtRead>()`.
    pub size: u32,
    /// In: the CPU.
    pub cpu: u32,
    /// In: logical offset to start at.
    pub offset: u64,
    /// In: user buffer.
    pub buf: u64,
    /// In: its length (at most [`PT_MAX_READ`] is used).
    pub buf_len: u64,
    /// Out: bytes copied.
    pub len: u64,
    /// Out: readable bytes of the CPU.
    pub total: u64,
    /// In: zero.
    pub reserved: [u64; 4],
}

/// `struct oxt_pt_layout`: argument of [`IOC_PT_LAYOUT`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtLayout {
    /// In: `size_of::<PtLayout>()`.
    pub size: u32,
    /// In: the CPU.
    pub cpu: u32,
    /// In: pointer to `nslices` physical addresses, or 0.
    pub slices: u64,
    /// In: pointer to `ntables` physical addresses, or 0.
    pub tables: u64,
    /// In: entries at `slices`; out: slices of the CPU.
    pub nslices: u32,
    /// In: entries at `tables`; out: tables of the CPU.
    pub ntables: u32,
    /// Out: the slice order.
    pub slice_order: u32,
    /// In: zero.
    pub reserved0: u32,
    /// In: zero.
    pub reserved: [u64; 4],
}

/// The ioctl type byte of oxtrace.
pub const IOC_MAGIC: u32 = 0xb7;

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `_IOC(dir, type, nr, size)` as in `include/uapi/asm-generic/ioctl.h` (x86 uses the generic
/// layout).
const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    // The size field has 14 bits; a larger struct would not fit the encoding.
    assert!(size < (1 << IOC_SIZEBITS));
    (dir << IOC_DIRSHIFT)
        | (ty << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

/// `_IO(type, nr)`.
const fn io(nr: u32) -> u32 {
    ioc(0, IOC_MAGIC, nr, 0)
}

/// `_IOWR(type, nr, T)`.
const fn iowr<T>(nr: u32) -> u32 {
    ioc(
        IOC_READ | IOC_WRITE,
        IOC_MAGIC,
        nr,
        core::mem::size_of::<T>(),
    )
}

/// `OXT_IOC_VERSION`: ABI version and features.
pub const IOC_VERSION: u32 = iowr::<Version>(0x00);
/// `OXT_IOC_STATUS`: state of this consumer.
pub const IOC_STATUS: u32 = iowr::<Status>(0x01);
/// `OXT_IOC_LOAD`: load a program and register its probes, disabled.
pub const IOC_LOAD: u32 = iowr::<Load>(0x02);
/// `OXT_IOC_GO`: enable the probes.
pub const IOC_GO: u32 = io(0x03);
/// `OXT_IOC_STOP`: disable the probes.
pub const IOC_STOP: u32 = io(0x04);
/// `OXT_IOC_SNAPSHOT`: take one CPU's principal buffer.
pub const IOC_SNAPSHOT: u32 = iowr::<Snapshot>(0x05);
/// `OXT_IOC_PROBES`: the attached probes and their counters.
pub const IOC_PROBES: u32 = iowr::<Probes>(0x06);
/// `OXT_IOC_AGGSNAP`: take one CPU's aggregation buffer.
pub const IOC_AGGSNAP: u32 = iowr::<Snapshot>(0x07);
/// `OXT_IOC_DYNSTAT`: the consumer's dynamic variables.
pub const IOC_DYNSTAT: u32 = iowr::<Dynstat>(0x08);
/// `OXT_IOC_PT_CONFIG`: allocate and lay out the PT buffers (before LOAD).
pub const IOC_PT_CONFIG: u32 = iowr::<PtConfig>(0x09);
/// `OXT_IOC_PT_START`: start PT on every CPU.
pub const IOC_PT_START: u32 = io(0x0a);
/// `OXT_IOC_PT_STOP`: stop PT on every CPU.
pub const IOC_PT_STOP: u32 = io(0x0b);
/// `OXT_IOC_PT_STATUS`: PT state, per CPU.
pub const IOC_PT_STATUS: u32 = iowr::<PtStatus>(0x0c);
/// `OXT_IOC_PT_READ`: one CPU's data in logical order.
pub const IOC_PT_READ: u32 = iowr::<PtRead>(0x0d);
/// `OXT_IOC_PT_LAYOUT`: physical addresses of one CPU's slices and tables.
pub const IOC_PT_LAYOUT: u32 = iowr::<PtLayout>(0x0e);

/// An ABI struct that starts with the `size` field and ends with `reserved` words.
pub trait Sized32 {
    /// The `size` field as user space filled it in.
    fn size_field(&self) -> u32;
    /// The reserved words, which must be zero on input.
    fn reserved(&self) -> &[u64];
    /// A reserved 32-bit field, which must be zero on input (0 where there is none).
    fn reserved32(&self) -> u32 {
        0
    }
}

macro_rules! sized32 {
    ($($t:ty),*) => {$(
        impl Sized32 for $t {
            fn size_field(&self) -> u32 {
                self.size
            }
            fn reserved(&self) -> &[u64] {
                &self.reserved
            }
        }
    )*};
}
sized32!(Version, Status, Snapshot, Probes, Dynstat);

// Minor 11 spent `struct oxt_load`'s reserved words on the user-space probes.
impl Sized32 for Load {
    fn size_field(&self) -> u32 {
        self.size
    }
    fn reserved(&self) -> &[u64] {
        &[]
    }
    fn reserved32(&self) -> u32 {
        self.reserved0
    }
}
sized32!(PtConfig, PtStatus, PtRead, PtLayout);

/// Why an ioctl argument was refused; every variant maps to `EINVAL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// The `size` field is not the size of the struct this command takes.
    Size,
    /// A reserved field is not zero.
    Reserved,
}

/// Checks the common header and trailer of an ioctl argument as read from user space.
pub fn check_arg<T: Sized32>(arg: &T) -> Result<(), ArgError> {
    if arg.size_field() as usize != core::mem::size_of::<T>() {
        return Err(ArgError::Size);
    }
    if arg.reserved().iter().any(|&w| w != 0) || arg.reserved32() != 0 {
        return Err(ArgError::Reserved);
    }
    Ok(())
}

/// Copies `s` into a NUL-terminated fixed-size field, truncating if needed.
pub fn fill_cstr<const N: usize>(field: &mut [u8; N], s: &str) {
    let n = s.len().min(N.saturating_sub(1));
    field[..n].copy_from_slice(&s.as_bytes()[..n]);
    field[n..].fill(0);
}

/// The text of a NUL-terminated fixed-size field, up to the first NUL (lossy on bad UTF-8: `?`).
pub fn cstr_field(field: &[u8]) -> &str {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    core::str::from_utf8(&field[..end]).unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_checks() {
        let mut v = Version {
            size: core::mem::size_of::<Version>() as u32,
            ..Default::default()
        };
        assert_eq!(check_arg(&v), Ok(()));
        v.size -= 8;
        assert_eq!(check_arg(&v), Err(ArgError::Size));
        v.size += 8;
        v.reserved[3] = 1;
        assert_eq!(check_arg(&v), Err(ArgError::Reserved));
    }

    #[test]
    fn cstr_roundtrip_and_truncation() {
        let mut f = [0xffu8; 8];
        fill_cstr(&mut f, "abc");
        assert_eq!(cstr_field(&f), "abc");
        assert_eq!(&f[3..], &[0; 5]);
        fill_cstr(&mut f, "0123456789");
        assert_eq!(cstr_field(&f), "0123456");
        assert_eq!(f[7], 0);
    }
}
