// SPDX-License-Identifier: GPL-2.0

//! Every limit that both the kernel and the tool check, once: the rule book at the bottom
//! of the crate, which imports nothing from it.
//!
//! The LOAD-time check that applies these limits to an image is `load::check_load`, which
//! the kernel runs on every image it is given and the tool's compiler on the image it built,
//! before it opens the device; the tool also checks options and names against the constants
//! here as it reads them, so that it refuses exactly what LOAD would refuse, with a source
//! position. A limit that only one side checks does not belong here.

/// Most scratch bytes one firing of a clause may use (locals, records, strings), per CPU.
pub const MAX_SCRATCH: usize = 256 << 10;
/// Smallest principal or aggregation buffer (`bufsize`, `aggsize`), per CPU and half.
pub const MIN_BUFSIZE: u64 = 4 << 10;
/// Largest principal or aggregation buffer, per CPU and half.
pub const MAX_BUFSIZE: u64 = 64 << 20;
/// Smallest dynamic variable memory (`dynvarsize`).
pub const MIN_DYNVARSIZE: u64 = 4 << 10;
/// Largest dynamic variable memory.
pub const MAX_DYNVARSIZE: u64 = 1 << 30;
/// Most speculations (`nspec`).
pub const MAX_NSPEC: u64 = 64;
/// Smallest speculative buffer (`specsize`), per speculation and CPU.
pub const MIN_SPECSIZE: u64 = 1 << 10;
/// Largest speculative buffer, per speculation and CPU.
pub const MAX_SPECSIZE: u64 = 16 << 20;
/// Most nanoseconds `chill()` may spin on one CPU per [`CHILL_INTERVAL_NS`] (DTrace's).
pub const CHILL_MAX_NS: u64 = 500_000_000;
/// The window of [`CHILL_MAX_NS`].
pub const CHILL_INTERVAL_NS: u64 = 1_000_000_000;
/// Default scratch memory of a clause (`scratchsize`), DTrace 2's.
pub const DEFAULT_SCRATCHSIZE: u32 = 256;
/// Largest `scratchsize`: with the string slots it stays within [`MAX_SCRATCH`].
pub const MAX_SCRATCHSIZE: u32 = 64 << 10;
/// Smallest `strsize`, DTrace's: a string must hold the two bytes of DTrace's null
/// string; a smaller value is refused, not rounded up.
pub const MIN_STRSIZE: u32 = 2;
/// Largest `strsize`.
pub const MAX_STRSIZE: u32 = 4096;
/// Longest string element of an aggregation key, in bytes (execname, probefunc, a stack,
/// ...).
pub const KEY_STR_MAX: usize = 128;
/// Most frames of `stack(n)` (and option `stackframes`): perf's default
/// `kernel.perf_event_max_stack`. A stack is a reference in its key, its frames are
/// written once in a definition record (`stack`), so the key's size does not bound it.
pub const MAX_STACKFRAMES: u32 = 127;
/// Most frames of `ustack(n)` (and option `ustackframes`), the bound of every user stack
/// walk (`ustackdepth` too): as `stack()`'s.
pub const MAX_USTACKFRAMES: u32 = MAX_STACKFRAMES;
/// Most clause-local (`this->`) variables of a program.
pub const MAX_LOCALS: u32 = 256;
/// Most instructions of one predicate or action program.
pub const MAX_INSNS: usize = 4096;
/// Shortest `switchrate` and `aggrate` period (1 ms).
pub const MIN_RATE_NS: u64 = 1_000_000;
/// Shortest `cleanrate` period (200 µs, 5000 Hz as illumos clamps it).
pub const MIN_CLEANRATE_NS: u64 = 200_000;
/// Longest `switchrate`, `aggrate` and `cleanrate` period (one minute).
pub const MAX_RATE_NS: u64 = 60_000_000_000;
/// Shortest `tick-N` period (10 kHz).
pub const TICK_MIN_NS: u64 = 100_000;
/// Longest `tick-N` period (one hour).
pub const TICK_MAX_NS: u64 = 3_600_000_000_000;
/// System call numbers a `syscall` probe may name are below this: the module's per-program
/// table of the calls it traces has this many entries (x86-64 has about 460).
pub const MAX_SYSCALL_NR: usize = 1024;
/// Largest program image.
pub const MAX_IMAGE_SIZE: usize = 16 << 20;
/// Longest probe function pattern in an image (a glob the tool expands).
pub const MAX_FUNC_LEN: usize = 128;
/// Longest function name a probe attaches to, in bytes (without the NUL): the ABI's
/// `PROBE_FUNC_LEN` less the NUL (`abi` asserts it).
pub const MAX_PROBE_NAME: usize = 63;
/// Most probes one LOAD may attach.
pub const MAX_ATTACH: usize = 1 << 16;
/// Most bytes of attach names one LOAD may pass (fbt function names, and the user-space
/// probes' names and paths).
pub const MAX_NAMES: usize = 8 << 20;
/// Most user-space probes (uprobes) one LOAD may place.
pub const MAX_UATTACH: usize = 1 << 16;
/// Longest `provider:module:function:name` of a user-space probe, in bytes (without the
/// NUL); longer C++ names are cut by the tool.
pub const MAX_UPROBE_NAME: usize = 255;
/// Longest path of a probed file, in bytes (without the NUL): the kernel's `PATH_MAX` less
/// the NUL.
pub const MAX_UPROBE_PATH: usize = 4095;

// Attach names fit in MAX_NAMES whenever the count and each length are within limits.
const _: () = assert!(MAX_ATTACH * (MAX_PROBE_NAME + 1) <= MAX_NAMES);

/// [`LoadMemory::largest`]: the principal buffers.
pub const MEM_PBUF: u32 = 1;
/// [`LoadMemory::largest`]: the aggregation buffers.
pub const MEM_AGG: u32 = 2;
/// [`LoadMemory::largest`]: the dynamic variable memory.
pub const MEM_DYNVAR: u32 = 3;
/// [`LoadMemory::largest`]: the per-CPU scratch.
pub const MEM_SCRATCH: u32 = 4;
/// [`LoadMemory::largest`]: the image.
pub const MEM_IMAGE: u32 = 5;
/// [`LoadMemory::largest`]: the speculative buffers.
pub const MEM_SPEC: u32 = 6;

/// What a LOAD allocates, in bytes by part, checked against the memory budget before any of
/// it is allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadMemory {
    /// CPUs the per-CPU parts are allocated for.
    pub ncpus: u32,
    /// Principal buffers: `bufsize` × CPUs × 2 halves.
    pub pbuf: u64,
    /// Aggregation buffers: `aggsize` × CPUs × 2 halves, 0 without aggregations.
    pub agg: u64,
    /// Dynamic variable memory: `dynvarsize`, 0 without dynamic variables.
    pub dynvar: u64,
    /// Scratch: the largest clause's × CPUs.
    pub scratch: u64,
    /// The image itself.
    pub image: u64,
    /// Speculative buffers: `nspec` × `specsize` × CPUs, 0 without `speculation()`.
    pub spec: u64,
}

impl LoadMemory {
    /// The memory of a program with half sizes `pbuf_half` and `agg_half` (0: none), `dynvar`
    /// bytes of dynamic memory, `scratch` bytes per CPU and an `image` of that many bytes.
    pub fn new(
        ncpus: u32,
        pbuf_half: u64,
        agg_half: u64,
        dynvar: u64,
        scratch: u64,
        image: u64,
    ) -> Self {
        let per_cpu = |b: u64| b.saturating_mul(ncpus as u64);
        Self {
            ncpus,
            pbuf: per_cpu(pbuf_half).saturating_mul(2),
            agg: per_cpu(agg_half).saturating_mul(2),
            dynvar,
            scratch: per_cpu(scratch),
            image,
            spec: 0,
        }
    }

    /// The same with `per_cpu` bytes of speculative buffers on every CPU.
    pub fn with_spec(self, per_cpu: u64) -> Self {
        Self {
            spec: per_cpu.saturating_mul(self.ncpus as u64),
            ..self
        }
    }

    fn parts(&self) -> [(u32, u64); 6] {
        [
            (MEM_PBUF, self.pbuf),
            (MEM_AGG, self.agg),
            (MEM_DYNVAR, self.dynvar),
            (MEM_SCRATCH, self.scratch),
            (MEM_IMAGE, self.image),
            (MEM_SPEC, self.spec),
        ]
    }

    /// All parts together.
    pub fn total(&self) -> u64 {
        self.parts()
            .iter()
            .fold(0u64, |t, &(_, b)| t.saturating_add(b))
    }

    /// The largest part, a `MEM_*` code: the one a refusal names.
    pub fn largest(&self) -> u32 {
        let mut best = (MEM_PBUF, 0);
        for (code, b) in self.parts() {
            if b > best.1 {
                best = (code, b);
            }
        }
        best.0
    }
}
