// SPDX-License-Identifier: GPL-2.0

//! Dynamic variables allocated in probe context.
//!
//! Thread-local variables (`self->x`) and associative arrays (`a[k1, k2]`) live in a
//! per-consumer *dynamic memory*: fixed-size data chunks spread evenly over the CPUs, found
//! through a hash table with one bucket per chunk. Every CPU owns four lists of chunks:
//!
//! - *free*: ready to allocate;
//! - *clean*: cleaned, ready to allocate, not yet on the free list;
//! - *rinsing*: deallocated, waiting for the cleaner's first cross-call;
//! - *dirty*: deallocated and not cleaned yet.
//!
//! A probe (interrupts off on its CPU) looks variables up without a lock, allocates from its own
//! free list, then its own clean list, then the other CPUs' lists, and publishes a new chunk with
//! one compare-and-swap on the bucket head. Storing 0 unlinks the chunk under the bucket's
//! deletion lock and puts it on this CPU's dirty list. The cleaner, in process context, moves
//! dirty to rinsing, cross-calls every CPU, moves rinsing to clean, cross-calls again and sets
//! the consumer state CLEAN. When no chunk can be found the consumer state becomes EMPTY,
//! DIRTY or RINSING and the drop is counted by that state.
//!
//! This folder is pure logic: no kernel dependency, no allocation. The caller provides every
//! piece of memory as slices (see [`Layout::regions`]) and implements [`CrossCall`]; a
//! [`Dstate`] is a cheap, copyable view over those slices. `Documentation/dynvar.rst` explains
//! the design and why a chunk is never reused while a CPU may still read it.
//!
//! This file holds the shared words, states and errors and the [`Dstate`] view; the rest is
//! split by concern: `tuple` (key encoding and hashing), `layout` (chunk size and regions),
//! `table` (the hash table, probe context), `chunks` (per-CPU lists and drops), `clean` (the
//! cleaner) and `stats` (counters and the audit).

use crate::action::{Key, Scope, VarInfo};
use core::ops::Range;

/// Atomics and the spin hint, from `core` or, under `cfg(loom)`, from loom.
mod sync {
    #[cfg(loom)]
    pub(crate) use loom::hint::spin_loop;
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

    #[cfg(not(loom))]
    pub(crate) use core::hint::spin_loop;
    #[cfg(not(loom))]
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
}

use sync::{spin_loop, AtomicBool, AtomicU32, AtomicU64, Ordering};
use Ordering::{AcqRel, Acquire, Relaxed, Release};

mod chunks;
mod clean;
mod layout;
mod stats;
mod table;
mod tuple;

pub use chunks::DropReason;
pub use clean::{CleanError, CleanReport, CrossCall};
use layout::value_words;
pub use layout::{
    chunk_bytes_for, program_chunk_bytes, string_value_bytes, var_chunk_bytes, KeyShape, Layout,
    LayoutError, Regions, VALUE_BYTES,
};
pub use stats::{Audit, AuditError, CpuStats, DstateStats, List};
pub use tuple::{array_key, key_words, thread_tuple, IntPair, Tuple};

/// A CPU samples the high-water mark at every this many allocations.
const HIGH_WATER_SAMPLE: u64 = 64;

/// End of a free, clean, rinsing or dirty list.
const NIL: u32 = u32::MAX;
/// A CPU whose free list holds less than its share of chunks divided by this asks for a
/// cleaner pass at once ([`Dstate::wants_clean`]). A half leaves the other half to allocate
/// from while the pass makes its two cross-calls, and makes every such pass return about
/// half a share.
pub const LOW_WATER_DIV: u64 = 2;
/// End of a hash chain. Distinct from [`NIL`]: a lookup that reaches `NIL` has followed a
/// deleted chunk into a dirty list and must start over.
const SINK: u32 = u32::MAX - 1;
/// Hash value of a chunk that is not on any hash chain. Real hash values are never 0.
const HASH_FREE: u64 = 0;

/// Words of chunk header: hash value, next index, meta (key/value layout).
pub const HEADER_WORDS: usize = 3;
const W_HASH: usize = 0;
const W_NEXT: usize = 1;
/// While the chunk is live: `nkeys | value_words << 16 | key_words << 32`. While the chunk
/// heads a clean list: the length of that list.
const W_META: usize = 2;

/// Most keys in one tuple (thread id or variable id included).
pub const MAX_KEYS: usize = 16;
/// Largest chunk (the meta word holds word counts in 16 bits).
pub const MAX_CHUNK_BYTES: usize = 1 << 16;
/// Smallest chunk: header, one value word, one integer key (descriptor and value).
pub const MIN_CHUNK_BYTES: usize = (HEADER_WORDS + 1 + 2) * 8;
/// Size of a hash bucket: its two words, packed. A bucket per cache line (64 bytes) cost as
/// much memory as a `self->x` chunk, half the dynamic memory, against false sharing that a
/// hash spreading tuples over one bucket per chunk makes rare (`Documentation/dynvar.rst`,
/// "Data layout").
pub const BUCKET_BYTES: usize = 8;
/// Default `dynvarsize` option: 4 MiB, not DTrace's 1 MiB. A CPU that runs short of free
/// chunks has what is left of its share to get through before the cleaner's pass (two
/// cross-calls) returns its freed chunks; with 1 MiB a `self->ts` script on four busy CPUs
/// still dropped in 6 of 15 of the bench's runs (`Documentation/dynvar.rst`, "Default
/// size").
pub const DEFAULT_DYNVARSIZE: usize = 4 << 20;
/// Most chunks one dynamic memory may have (indices must stay below the list sentinels).
pub const MAX_CHUNKS: usize = 1 << 30;
/// Bit set in the variable-id key of a thread-local variable, so that `self->x` and a global
/// array with the same id never share a tuple.
pub const TLS_TAG: u64 = 1 << 63;
/// Bit set in the variable-id key of an associative array, the first key of its elements'
/// tuples, so that no element's tuple is a thread-local's: a thread-local's first key is a
/// thread id, never this large.
pub const ARRAY_TAG: u64 = 1 << 62;

/// A lookup restarts when a concurrent deletion disturbed its chain; this bounds the restarts
/// so that probe context finishes in bounded time even under pathological contention.
const MAX_RESTARTS: u32 = 1 << 16;
/// Laps around all CPUs one allocation may take (see [`Dstate::alloc_chunk`]).
const MAX_LAPS: u32 = 3;

/// One 64-bit word of chunk memory or of a counter array.
///
/// Probe contexts on other CPUs may read any word while it is written, so every word is
/// atomic; on x86 a relaxed atomic access is a plain `mov`.
#[repr(transparent)]
#[derive(Default)]
pub struct Word(AtomicU64);

impl Word {
    /// A zero word.
    pub fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    fn set(&self, v: u64) {
        self.0.store(v, Relaxed)
    }
}

/// One hash bucket: the head of a hash chain and the deletion lock, eight to a cache line
/// ([`BUCKET_BYTES`]).
#[repr(C, align(8))]
#[derive(Default)]
pub struct Bucket {
    /// First chunk of the chain, [`SINK`] when empty.
    head: AtomicU32,
    /// Deletion lock and sequence: odd while a deletion holds it; every unlock advances it,
    /// so a lookup that read the same even value before and after saw a stable chain.
    lock: AtomicU32,
}

impl Bucket {
    /// An uninitialised bucket (see [`Dstate::reset`]).
    pub fn new() -> Self {
        Self::default()
    }
}

/// Per-CPU lists and counters of one consumer's dynamic memory, one per possible CPU, each on
/// its own cache lines.
#[repr(C, align(64))]
#[derive(Default)]
pub struct CpuState {
    free: AtomicU32,
    clean: AtomicU32,
    rinsing: AtomicU32,
    dirty: AtomicU32,
    allocs: AtomicU64,
    frees: AtomicU64,
    steals: AtomicU64,
    clean_moves: AtomicU64,
    races: AtomicU64,
    drops_empty: AtomicU64,
    drops_dirty: AtomicU64,
    drops_rinsing: AtomicU64,
    drops_size: AtomicU64,
    contended: AtomicU64,
    free_len: AtomicU64,
    clean_len: AtomicU64,
    rinsing_len: AtomicU64,
    dirty_len: AtomicU64,
}

impl CpuState {
    /// An uninitialised CPU state (see [`Dstate::reset`]).
    pub fn new() -> Self {
        Self::default()
    }
}

/// Per-consumer part of a dynamic memory: the consumer dynamic memory state and the cleaner's
/// counters.
#[repr(C, align(64))]
#[derive(Default)]
pub struct Header {
    state: AtomicU32,
    cleaning: AtomicBool,
    passes: AtomicU64,
    idle_passes: AtomicU64,
    crosscalls: AtomicU64,
    rinsed: AtomicU64,
    borrowed: AtomicU64,
    failclean: AtomicU64,
    high_water: AtomicU64,
}

impl Header {
    /// An uninitialised header (see [`Dstate::reset`]).
    pub fn new() -> Self {
        Self::default()
    }
}

/// The consumer dynamic memory state: whether chunks can be allocated and, when none can,
/// why.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DstateState {
    /// Chunks are available to allocate (the state after GO).
    Free = 0,
    /// Chunks may be allocated but are not yet on a free list (set by the cleaner).
    Clean = 1,
    /// No chunk is available now; some are being cleaned and will be soon.
    Rinsing = 2,
    /// No chunk is available; some are dirty.
    Dirty = 3,
    /// Every chunk is in use and none is dirty.
    Empty = 4,
}

impl DstateState {
    /// The state stored as `v`.
    pub fn from_u32(v: u32) -> Self {
        match v {
            0 => Self::Free,
            1 => Self::Clean,
            2 => Self::Rinsing,
            3 => Self::Dirty,
            _ => Self::Empty,
        }
    }

    fn allocates(self) -> bool {
        matches!(self, Self::Free | Self::Clean)
    }
}

/// Why a dynamic-variable operation did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DynvarError {
    /// No chunk could be allocated; counted by state.
    Drop(DropReason),
    /// The tuple and value do not fit in a chunk (the loader's size computation was wrong).
    TooLarge,
    /// No key, or more than [`MAX_KEYS`].
    BadTuple,
    /// The CPU index is not below [`Layout::ncpus`].
    BadCpu,
    /// The chain kept changing under the lookup ([`MAX_RESTARTS`] restarts).
    Contended,
}

/// A live variable's value words.
#[derive(Clone, Copy)]
pub struct VarRef<'a> {
    value: &'a [Word],
    chunk: u32,
}

impl<'a> VarRef<'a> {
    /// Index of the chunk holding the variable.
    pub fn chunk(&self) -> u32 {
        self.chunk
    }

    /// Bytes of value space.
    pub fn value_bytes(&self) -> usize {
        self.value.len() * 8
    }

    /// Value word `i` (0 past the end).
    pub fn word(&self, i: usize) -> u64 {
        self.value.get(i).map_or(0, Word::get)
    }

    /// Sets value word `i` (ignored past the end).
    pub fn set_word(&self, i: usize, v: u64) {
        if let Some(w) = self.value.get(i) {
            w.set(v)
        }
    }

    /// Adds `delta` to value word 0, returns the new value.
    pub fn fetch_add(&self, delta: u64) -> u64 {
        match self.value.first() {
            Some(w) => w.0.fetch_add(delta, Relaxed).wrapping_add(delta),
            None => 0,
        }
    }

    /// Copies the value bytes into `out`, returns how many were copied.
    pub fn read_bytes(&self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.value_bytes());
        // PANIC: `n <= out.len()`, and a chunk of 8 is at most 8 bytes long.
        for (i, dst) in out[..n].chunks_mut(8).enumerate() {
            let w = self.word(i).to_le_bytes();
            dst.copy_from_slice(&w[..dst.len()]);
        }
        n
    }

    /// Stores `src` as the value (truncated to the value space, the rest zeroed), returns the
    /// bytes stored.
    pub fn write_bytes(&self, src: &[u8]) -> usize {
        let n = src.len().min(self.value_bytes());
        for (i, w) in self.value.iter().enumerate() {
            let mut b = [0u8; 8];
            let start = i * 8;
            if start < n {
                let end = (start + 8).min(n);
                // PANIC: `start < end <= n <= src.len()` and `end - start <= 8`.
                b[..end - start].copy_from_slice(&src[start..end]);
            }
            w.set(u64::from_le_bytes(b));
        }
        n
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Lookup,
    Alloc(usize),
    Delete,
}

/// A view of one consumer's dynamic memory over caller-provided regions.
///
/// Probe-context entry points ([`Dstate::lookup`], [`Dstate::load`], [`Dstate::store`],
/// [`Dstate::add`], [`Dstate::get_or_alloc`], [`Dstate::delete`], and the variants of load,
/// store and delete that carry a found chunk) must run with interrupts off on the CPU they
/// name, from the first to the last access to the dynamic memory in one probe firing: the
/// cleaner's cross-calls rely on it. [`Dstate::clean`] runs in process
/// context. [`Dstate::reset`] and [`Dstate::audit`] need quiescence (no probe, no cleaner).
///
/// # Invariants
///
/// The slices have the lengths `layout` gives (checked by [`Dstate::new`]).
#[derive(Clone, Copy)]
pub struct Dstate<'a> {
    layout: Layout,
    header: &'a Header,
    cpus: &'a [CpuState],
    buckets: &'a [Bucket],
    chunks: &'a [Word],
    var_drops: &'a [Word],
}

impl<'a> Dstate<'a> {
    /// A view of the regions; does not touch them (see [`Dstate::reset`]).
    pub fn new(
        layout: Layout,
        header: &'a Header,
        cpus: &'a [CpuState],
        buckets: &'a [Bucket],
        chunks: &'a [Word],
        var_drops: &'a [Word],
    ) -> Result<Self, LayoutError> {
        if cpus.len() != layout.ncpus()
            || buckets.len() != layout.nchunks()
            || chunks.len() != layout.chunk_word_count()
            || var_drops.len() != layout.nvars()
        {
            return Err(LayoutError::RegionMismatch);
        }
        // INVARIANT: lengths checked above.
        Ok(Self {
            layout,
            header,
            cpus,
            buckets,
            chunks,
            var_drops,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The consumer dynamic memory state.
    pub fn state(&self) -> DstateState {
        DstateState::from_u32(self.header.state.load(Acquire))
    }

    /// Initialises the dynamic memory at GO: every chunk on its CPU's free list, empty
    /// hash chains, counters zero, state FREE. Needs quiescence.
    pub fn reset(&self) {
        let h = self.header;
        h.state.store(DstateState::Free as u32, Relaxed);
        h.cleaning.store(false, Relaxed);
        for c in [
            &h.passes,
            &h.idle_passes,
            &h.crosscalls,
            &h.rinsed,
            &h.borrowed,
            &h.failclean,
            &h.high_water,
        ] {
            c.store(0, Relaxed);
        }
        for b in self.buckets {
            b.head.store(SINK, Relaxed);
            b.lock.store(0, Relaxed);
        }
        for w in self.var_drops {
            w.set(0);
        }
        for (i, d) in self.cpus.iter().enumerate() {
            let share = self.layout.cpu_share(i);
            for c in share.clone() {
                let next = if c + 1 < share.end { c + 1 } else { NIL };
                self.w(c, W_HASH).set(HASH_FREE);
                self.w(c, W_NEXT).set(u64::from(next));
                self.w(c, W_META).set(0);
            }
            let head = if share.is_empty() { NIL } else { share.start };
            d.free.store(head, Relaxed);
            d.clean.store(NIL, Relaxed);
            d.rinsing.store(NIL, Relaxed);
            d.dirty.store(NIL, Relaxed);
            for c in [
                &d.allocs,
                &d.frees,
                &d.steals,
                &d.clean_moves,
                &d.races,
                &d.drops_empty,
                &d.drops_dirty,
                &d.drops_rinsing,
                &d.drops_size,
                &d.contended,
                &d.clean_len,
                &d.rinsing_len,
                &d.dirty_len,
            ] {
                c.store(0, Relaxed);
            }
            d.free_len
                .store(u64::from(share.end - share.start), Release);
        }
    }

    /// The hash bucket of a tuple (for diagnostics and tests).
    pub fn bucket_index<T: Tuple + ?Sized>(&self, keys: &T) -> usize {
        self.bucket_of(keys.hash())
    }

    fn bucket_of(&self, hash: u64) -> usize {
        // The hash scaled to `[0, nchunks)` by a multiplication (its high half), not a
        // remainder: a division is the dearest instruction of the lookup, and an emulated
        // CPU calls a helper for it. The hash's final avalanche mixes its high bits as
        // well as its low ones, so the buckets stay uniform.
        ((u128::from(hash) * u128::from(self.layout.nchunks)) >> 64) as usize
    }

    /// Word `word` of chunk `chunk`; `chunk` must be a chunk index ([`Self::is_chunk`]: every
    /// caller checks it, or takes it from a list, which holds chunk indices only) and
    /// `word < chunk_words`.
    // Always inline: the kernel's build called it out of line from `delete_at`.
    #[inline(always)]
    fn w(&self, chunk: u32, word: usize) -> &'a Word {
        // PANIC: `chunks` holds `nchunks * chunk_words` words (type invariant), and the
        // caller passes `chunk < nchunks` and `word < chunk_words` (see above).
        &self.chunks[chunk as usize * self.layout.chunk_words() + word]
    }

    fn cpu(&self, cpu: usize) -> Result<&'a CpuState, DynvarError> {
        self.cpus.get(cpu).ok_or(DynvarError::BadCpu)
    }

    fn is_chunk(&self, c: u32) -> bool {
        c < self.layout.nchunks
    }

    fn value_of(&self, chunk: u32) -> VarRef<'a> {
        let meta = self.w(chunk, W_META).get();
        let vw = ((meta >> 16) & 0xffff) as usize;
        let base = chunk as usize * self.layout.chunk_words() + HEADER_WORDS;
        let end = (base + vw).min((chunk as usize + 1) * self.layout.chunk_words());
        VarRef {
            // PANIC: `chunk < nchunks` (as for `w`), so `end <= (chunk + 1) * chunk_words`
            // is within `chunks`, and `base <= end` since `HEADER_WORDS < chunk_words`.
            value: &self.chunks[base..end],
            chunk,
        }
    }

    /// Value word 0 of chunk `chunk`, which a walk found or an allocation filled: every
    /// such chunk has at least one value word (`value_words`), so its meta word need not be
    /// read for it, as [`Dstate::value_of`] does for a value of any length.
    #[inline(always)]
    fn first_word(&self, chunk: u32) -> &'a Word {
        // `HEADER_WORDS < chunk_words` (`MIN_CHUNK_BYTES`), as `w` requires.
        self.w(chunk, HEADER_WORDS)
    }
}
