// SPDX-License-Identifier: GPL-2.0

//! Dynamic variables allocated in probe context (US 7,302,542).
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
//! one compare-and-swap on the bucket head (US 7,302,542 ¶39). Storing 0 unlinks the chunk under the
//! bucket's deletion lock (¶44) and puts it on this CPU's dirty list. The cleaner, in process
//! context, moves dirty to rinsing, cross-calls every CPU, moves rinsing to clean, cross-calls
//! again and sets the consumer state CLEAN (¶46-47). When no chunk can be found the consumer
//! state becomes EMPTY, DIRTY or RINSING (¶41) and the drop is counted by that state.
//!
//! This file is pure logic: no kernel dependency, no allocation. The caller provides every
//! piece of memory as slices (see [`Layout::regions`]) and implements [`CrossCall`]; a
//! [`Dstate`] is a cheap, copyable view over those slices. `Documentation/dynvar.rst` explains
//! the design and why a chunk is never reused while a CPU may still read it.

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

/// End of a free, clean, rinsing or dirty list.
/// A CPU samples the high-water mark at every this many allocations.
const HIGH_WATER_SAMPLE: u64 = 64;

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

const KIND_INT: u64 = 1;
const KIND_STR: u64 = 2;

// A tuple that names a dynamic variable is a slice of the interpreter's keys (one
// definition for the interpreter, the aggregations and this engine). Thread-local `self->x`
// is the tuple `(thread id, TLS_TAG | variable id)` (see [`thread_tuple`]); an associative
// array element `a[k1, k2]` is `(ARRAY_TAG | variable id, k1, k2)`. A string key holds its
// bytes up to (not including) the terminating NUL, bounded by `strsize`.

/// Words a key occupies in a chunk: a descriptor, then the payload.
pub fn key_words(key: &Key<'_>) -> usize {
    1 + payload_words(key)
}

#[inline(always)]
fn payload_words(key: &Key<'_>) -> usize {
    match key {
        Key::Int(_) => 1,
        Key::Str(b) => b.len().div_ceil(8),
    }
}

#[inline(always)]
fn key_desc(key: &Key<'_>) -> u64 {
    match key {
        Key::Int(_) => KIND_INT,
        Key::Str(b) => KIND_STR | ((b.len() as u64) << 8),
    }
}

/// Payload word `i` of a key: the integer, or eight string bytes packed little-endian (zero
/// padded). Built in a register, not a byte buffer: it is inlined into the frames of probe
/// context's chain walk.
#[inline(always)]
fn key_payload(key: &Key<'_>, i: usize) -> u64 {
    match key {
        Key::Int(v) => *v,
        Key::Str(b) => {
            let start = i.saturating_mul(8);
            let mut w = 0u64;
            for j in 0..8 {
                if let Some(&c) = b.get(start.saturating_add(j)) {
                    w |= u64::from(c) << (8 * j);
                }
            }
            w
        }
    }
}

/// The tuple of thread-local variable `var` of thread `tid`.
pub fn thread_tuple(tid: u64, var: u32) -> [Key<'static>; 2] {
    [Key::Int(tid), Key::Int(tls_id(var))]
}

/// The first key of every element of associative array `var`.
pub fn array_key(var: u32) -> Key<'static> {
    Key::Int(array_id(var))
}

/// The variable-id key of thread-local variable `var`.
#[inline(always)]
fn tls_id(var: u32) -> u64 {
    TLS_TAG | u64::from(var)
}

/// The variable-id key of associative array `var`.
#[inline(always)]
fn array_id(var: u32) -> u64 {
    ARRAY_TAG | u64::from(var)
}

/// Calls `f` with each encoded word of a tuple, in the order they are stored in a chunk,
/// until it returns false; returns whether it never did. A loop, not an iterator: no
/// iterator state in the frames of probe context.
#[inline(always)]
fn for_each_word(keys: &[Key<'_>], mut f: impl FnMut(u64) -> bool) -> bool {
    for key in keys {
        // An integer (every key of a thread-local variable) is two words, without the
        // string's loop.
        if let Key::Int(v) = key {
            if !f(KIND_INT) || !f(*v) {
                return false;
            }
            continue;
        }
        if !f(key_desc(key)) {
            return false;
        }
        for i in 0..payload_words(key) {
            if !f(key_payload(key, i)) {
                return false;
            }
        }
    }
    true
}

/// A tuple as the engine uses it: its encoded words (`for_each_word`), hashed, compared
/// with a live chunk's and written into a new one. A slice of the interpreter's keys is one;
/// [`IntPair`] is the commonest shape held as its words, so that the walk of a chain for it
/// compiles without a test of the tuple's shape or a loop over its keys.
pub trait Tuple {
    /// Keys in the tuple; a valid tuple has 1 to [`MAX_KEYS`].
    fn nkeys(&self) -> usize;
    /// Words the tuple occupies in a chunk.
    fn words(&self) -> usize;
    /// Its hash over its encoded words; never [`HASH_FREE`].
    fn hash(&self) -> u64;
    /// Whether a live chunk holds the tuple: `meta` is its meta word, `body` its words
    /// after the header (compared by the rule of `held_keys`).
    fn held(&self, meta: u64, body: &[Word]) -> bool;
    /// Writes `vw` zeroed value words, then the tuple's encoding, into `body`, the words
    /// after a chunk's header; returns the chunk's meta word (the layout of `fill_body`). The caller
    /// checked that `vw + self.words()` words fit the body.
    fn fill(&self, body: &[Word], vw: usize) -> u64;
}

/// The key words of a live chunk (meta word `meta`, words after the header `body`) if its
/// meta word says it holds `nkeys` keys in `kwords` words: the rule both forms of
/// [`Tuple::held`] compare by.
#[inline(always)]
fn held_keys(meta: u64, body: &[Word], nkeys: usize, kwords: usize) -> Option<&[Word]> {
    if meta & 0xffff != nkeys as u64 || ((meta >> 32) & 0xffff) as usize != kwords {
        return None;
    }
    let vw = ((meta >> 16) & 0xffff) as usize;
    body.get(vw..vw + kwords)
}

/// [`Tuple::fill`] with `write` writing the key words: the layout both forms fill by.
#[inline(always)]
fn fill_body(
    body: &[Word],
    vw: usize,
    nkeys: usize,
    kwords: usize,
    write: impl FnOnce(&[Word]),
) -> u64 {
    // PANIC: `vw + kwords <= body.len()` (the caller of `Tuple::fill` checked it).
    for w in &body[..vw] {
        w.set(0);
    }
    write(&body[vw..vw + kwords]);
    nkeys as u64 | ((vw as u64) << 16) | ((kwords as u64) << 32)
}

// A slice's compare and fill are out of line, whole: their loops' state stays out of
// `Dstate::dynvar`'s frame, which is on the probe's stack under the chunk allocator's.
impl Tuple for [Key<'_>] {
    #[inline(always)]
    fn nkeys(&self) -> usize {
        self.len()
    }

    #[inline(always)]
    fn words(&self) -> usize {
        self.iter().map(key_words).sum()
    }

    #[inline(always)]
    fn hash(&self) -> u64 {
        hash_keys(self)
    }

    #[inline(always)]
    fn held(&self, meta: u64, body: &[Word]) -> bool {
        keys_held(self, meta, body)
    }

    #[inline(always)]
    fn fill(&self, body: &[Word], vw: usize) -> u64 {
        fill_keys(self, body, vw)
    }
}

impl<const N: usize> Tuple for [Key<'_>; N] {
    #[inline(always)]
    fn nkeys(&self) -> usize {
        N
    }

    #[inline(always)]
    fn words(&self) -> usize {
        self[..].words()
    }

    #[inline(always)]
    fn hash(&self) -> u64 {
        self[..].hash()
    }

    #[inline(always)]
    fn held(&self, meta: u64, body: &[Word]) -> bool {
        self[..].held(meta, body)
    }

    #[inline(always)]
    fn fill(&self, body: &[Word], vw: usize) -> u64 {
        self[..].fill(body, vw)
    }
}

/// A tuple of two integers, the commonest there is: every `self->x` ([`IntPair::thread`])
/// and every element `a[k]` of an integer `k`. The same variable as the slice
/// `[Key::Int(a), Key::Int(b)]`: same words, same hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntPair(pub u64, pub u64);

impl IntPair {
    /// The tuple of thread-local variable `var` of thread `tid` ([`thread_tuple`]).
    #[inline(always)]
    pub fn thread(tid: u64, var: u32) -> Self {
        Self(tid, tls_id(var))
    }

    /// The tuple of element `a[k]` of associative array `var` ([`array_key`]).
    #[inline(always)]
    pub fn element(var: u32, k: u64) -> Self {
        Self(array_id(var), k)
    }

    /// `keys` as a pair, if it is one.
    #[inline(always)]
    pub fn of(keys: &[Key<'_>]) -> Option<Self> {
        match keys {
            [Key::Int(a), Key::Int(b)] => Some(Self(*a, *b)),
            _ => None,
        }
    }

    #[cfg(test)]
    fn encoded(self) -> [u64; 4] {
        [KIND_INT, self.0, KIND_INT, self.1]
    }
}

impl Tuple for IntPair {
    #[inline(always)]
    fn nkeys(&self) -> usize {
        2
    }

    #[inline(always)]
    fn words(&self) -> usize {
        4
    }

    // No iterator here nor in `fill`: the kernel's build (with its UB checks) put the
    // words on the stack, into the frame of the walk, which is under the chunk allocator's.
    #[inline(always)]
    fn hash(&self) -> u64 {
        let h = mix(mix(HASH_SEED, KIND_INT), self.0);
        avalanche(mix(mix(h, KIND_INT), self.1))
    }

    #[inline(always)]
    fn held(&self, meta: u64, body: &[Word]) -> bool {
        // The payloads first: they differ between variables, the descriptors rarely do.
        match held_keys(meta, body, 2, 4) {
            Some([w0, w1, w2, w3]) => {
                w1.get() == self.0
                    && w3.get() == self.1
                    && w0.get() == KIND_INT
                    && w2.get() == KIND_INT
            }
            _ => false,
        }
    }

    // Out of line: inlined, the pair's walk kept 32 bytes more of the probe's stack
    // across the chunk allocator's call (`scripts/stackcheck.py`); a fill follows every
    // allocation, which costs more than the call.
    #[inline(never)]
    fn fill(&self, body: &[Word], vw: usize) -> u64 {
        fill_body(body, vw, 2, 4, |keys| {
            if let [w0, w1, w2, w3] = keys {
                w0.set(KIND_INT);
                w1.set(self.0);
                w2.set(KIND_INT);
                w3.set(self.1);
            }
        })
    }
}

/// A tuple's hash before its first word.
const HASH_SEED: u64 = 0x243f_6a88_85a3_08d3;

/// One word into a tuple's hash.
#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(23) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Hash of a slice of keys over its encoded words; never [`HASH_FREE`].
// Out of line, like `keys_held` and `fill_keys`: their loops' state stays out of
// `dynvar`'s frame, which is on the probe's stack under the chunk allocator.
#[inline(never)]
fn hash_keys(keys: &[Key<'_>]) -> u64 {
    let mut h = HASH_SEED;
    for_each_word(keys, |w| {
        h = mix(h, w);
        true
    });
    avalanche(h)
}

/// [`Tuple::held`] of a slice of keys.
#[inline(never)]
fn keys_held(keys: &[Key<'_>], meta: u64, body: &[Word]) -> bool {
    let Some(words) = held_keys(meta, body, keys.len(), keys.words()) else {
        return false;
    };
    let mut n = 0;
    for_each_word(keys, |k| {
        let same = words.get(n).is_some_and(|w| w.get() == k);
        n += 1;
        same
    })
}

/// [`Tuple::fill`] of a slice of keys.
#[inline(never)]
fn fill_keys(keys: &[Key<'_>], body: &[Word], vw: usize) -> u64 {
    fill_body(body, vw, keys.len(), keys.words(), |words| {
        let mut n = 0;
        for_each_word(keys, |k| {
            let Some(w) = words.get(n) else {
                return false;
            };
            w.set(k);
            n += 1;
            true
        });
    })
}

/// The last step of a tuple's hash: the low bits (the bucket) come to depend on every input
/// bit, and the result is never [`HASH_FREE`].
#[inline(always)]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    if h == HASH_FREE {
        1
    } else {
        h
    }
}

/// The static shape of one key, for the chunk size computation at LOAD (US 7,302,542 ¶32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyShape {
    /// An integer key (also the thread id and the variable id).
    Int,
    /// A string key of at most `max_len` bytes (`strsize`).
    Str {
        /// Longest string the key can hold.
        max_len: usize,
    },
}

/// Bytes of chunk one dynamic-variable access needs: header, value, keys. The loader takes the
/// largest value over every dynamic load and store of every clause and passes it to
/// [`Layout::new`] (US 7,302,542 ¶32, claim 13).
pub fn chunk_bytes_for(keys: &[KeyShape], value_bytes: usize) -> usize {
    let key_words: usize = keys
        .iter()
        .map(|k| match k {
            KeyShape::Int => 2,
            KeyShape::Str { max_len } => 1 + max_len.div_ceil(8),
        })
        .sum();
    (HEADER_WORDS + value_words(value_bytes) + key_words) * 8
}

/// Bytes of value an integer dynamic variable holds: one 64-bit word.
pub const VALUE_BYTES: usize = 8;

/// Bytes of value a string dynamic variable holds: `strsize` bytes in whole words (a
/// string of exactly `strsize` bytes needs no NUL: readers stop at `strsize`).
pub const fn string_value_bytes(strsize: usize) -> usize {
    let b = strsize.div_ceil(8) * 8;
    if b == 0 {
        8
    } else {
        b
    }
}

/// Bytes of chunk variable `var` of the program's variable dictionary needs, or `None` for a
/// global scalar (no dynamic memory) or an invalid key layout.
///
/// `self->x` is keyed by `(thread id, variable id)`; `a[k1, ..]` by `(variable id, k1, ..)`,
/// a string key holding at most `strsize` bytes (US 7,302,542 ¶32).
pub fn var_chunk_bytes(var: VarInfo, strsize: usize) -> Option<usize> {
    let mut shapes = [KeyShape::Int; MAX_KEYS];
    let n = match var.scope {
        Scope::Global => return None,
        Scope::Thread => 2,
        Scope::Assoc => {
            let nk = var.keys.count();
            if !var.keys.is_valid() || nk + 1 > MAX_KEYS {
                return None;
            }
            // PANIC: `nk + 1 <= MAX_KEYS`, the length of `shapes` (checked above).
            for (i, s) in shapes[1..=nk].iter_mut().enumerate() {
                if var.keys.is_str(i) {
                    *s = KeyShape::Str { max_len: strsize };
                }
            }
            nk + 1
        }
    };
    let value = if var.string {
        string_value_bytes(strsize)
    } else {
        VALUE_BYTES
    };
    // PANIC: `n` is 2 or `nk + 1`, both at most `MAX_KEYS`.
    Some(chunk_bytes_for(&shapes[..n], value))
}

/// The chunk size of a program (US 7,302,542 ¶32, claim 13): the largest [`var_chunk_bytes`] over
/// its variables, or `None` if it has no dynamic variable. Every dynamic load and store of
/// every clause names one of these variables, so no access can need more.
pub fn program_chunk_bytes(
    vars: impl IntoIterator<Item = VarInfo>,
    strsize: usize,
) -> Option<usize> {
    vars.into_iter()
        .filter_map(|v| var_chunk_bytes(v, strsize))
        .max()
}

fn value_words(value_bytes: usize) -> usize {
    value_bytes.div_ceil(8).max(1)
}

/// Why a layout could not be made or a [`Dstate`] could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// No CPU, or more than `u32::MAX / 2`.
    BadCpuCount,
    /// Chunk smaller than [`MIN_CHUNK_BYTES`].
    ChunkTooSmall,
    /// Chunk larger than [`MAX_CHUNK_BYTES`].
    ChunkTooLarge,
    /// `dynvarsize` does not hold a single chunk and its bucket.
    TooSmall,
    /// A region slice passed to [`Dstate::new`] has the wrong length.
    RegionMismatch,
}

/// Sizes of one consumer's dynamic memory, fixed at GO.
///
/// # Invariants
///
/// `1 <= ncpus`, `1 <= nchunks <= MAX_CHUNKS`, `chunk_words * 8` is within
/// `MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES`; `share = nchunks / ncpus`, `share_rem = nchunks %
/// ncpus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    ncpus: u32,
    nchunks: u32,
    chunk_words: u32,
    nvars: u32,
    /// Chunks every CPU owns at least, and how many CPUs (the first ones) own one more:
    /// divided once here, not at each store that asks [`Dstate::wants_clean`].
    share: u32,
    share_rem: u32,
}

/// Byte ranges of the regions of a dynamic memory carved from one allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Regions {
    /// The [`Header`].
    pub header: Range<usize>,
    /// `ncpus` [`CpuState`]s.
    pub cpus: Range<usize>,
    /// `nchunks` [`Bucket`]s.
    pub buckets: Range<usize>,
    /// `nchunks * chunk_words` [`Word`]s of chunks.
    pub chunks: Range<usize>,
    /// `nvars` [`Word`]s of per-variable drop counters.
    pub var_drops: Range<usize>,
    /// Total bytes.
    pub size: usize,
    /// Alignment the allocation needs (a cache line).
    pub align: usize,
}

impl Layout {
    /// The layout of `dynvarsize` bytes of dynamic memory over `ncpus` CPUs with chunks of
    /// `chunk_bytes` (rounded up to a word) and `nvars` variable ids for drop accounting.
    ///
    /// Every chunk costs its bytes plus one hash bucket (US 7,302,542 ¶33); the chunks are split
    /// evenly over the CPUs, the first `nchunks % ncpus` CPUs getting one more (¶35).
    pub fn new(
        dynvarsize: usize,
        ncpus: u32,
        chunk_bytes: usize,
        nvars: u32,
    ) -> Result<Self, LayoutError> {
        if ncpus == 0 || ncpus > u32::MAX / 2 {
            return Err(LayoutError::BadCpuCount);
        }
        let chunk_bytes = chunk_bytes.div_ceil(8) * 8;
        if chunk_bytes < MIN_CHUNK_BYTES {
            return Err(LayoutError::ChunkTooSmall);
        }
        if chunk_bytes > MAX_CHUNK_BYTES {
            return Err(LayoutError::ChunkTooLarge);
        }
        let nchunks = (dynvarsize / (chunk_bytes + BUCKET_BYTES)).min(MAX_CHUNKS);
        if nchunks == 0 {
            return Err(LayoutError::TooSmall);
        }
        // INVARIANT: checked above; nchunks <= MAX_CHUNKS < u32::MAX; `share` as stated.
        Ok(Self {
            ncpus,
            nchunks: nchunks as u32,
            chunk_words: (chunk_bytes / 8) as u32,
            nvars,
            share: nchunks as u32 / ncpus,
            share_rem: nchunks as u32 % ncpus,
        })
    }

    /// Number of CPUs.
    pub fn ncpus(&self) -> usize {
        self.ncpus as usize
    }

    /// Number of chunks, which is also the number of hash buckets.
    pub fn nchunks(&self) -> usize {
        self.nchunks as usize
    }

    /// Bytes per chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_words as usize * 8
    }

    /// Words per chunk.
    pub fn chunk_words(&self) -> usize {
        self.chunk_words as usize
    }

    /// Number of variable ids with their own drop counter.
    pub fn nvars(&self) -> usize {
        self.nvars as usize
    }

    /// Words of the chunk region.
    pub fn chunk_word_count(&self) -> usize {
        self.nchunks() * self.chunk_words()
    }

    /// The chunks `cpu` owns on its free list after [`Dstate::reset`].
    pub fn cpu_share(&self, cpu: usize) -> Range<u32> {
        let cpu = (cpu as u32).min(self.ncpus);
        let start = cpu * self.share + cpu.min(self.share_rem);
        start..start + self.share_len(cpu as usize)
    }

    /// The number of chunks in [`Layout::cpu_share`], without a division.
    #[inline]
    pub fn share_len(&self, cpu: usize) -> u32 {
        if cpu < self.ncpus as usize {
            self.share + u32::from(cpu < self.share_rem as usize)
        } else {
            0
        }
    }

    /// Words of scratch bitmap [`Dstate::audit`] needs.
    pub fn audit_bitmap_words(&self) -> usize {
        self.nchunks().div_ceil(64)
    }

    /// Offsets of every region inside one allocation (all-zero bytes are a valid content of
    /// every region; [`Dstate::reset`] initialises them).
    pub fn regions(&self) -> Regions {
        let align = core::mem::align_of::<Bucket>().max(core::mem::align_of::<CpuState>());
        let up = |x: usize| x.div_ceil(align) * align;
        let header = 0..core::mem::size_of::<Header>();
        let c0 = up(header.end);
        let cpus = c0..c0 + self.ncpus() * core::mem::size_of::<CpuState>();
        let b0 = up(cpus.end);
        let buckets = b0..b0 + self.nchunks() * core::mem::size_of::<Bucket>();
        let k0 = up(buckets.end);
        let chunks = k0..k0 + self.chunk_word_count() * core::mem::size_of::<Word>();
        let v0 = up(chunks.end);
        let var_drops = v0..v0 + self.nvars() * core::mem::size_of::<Word>();
        let size = up(var_drops.end);
        Regions {
            header,
            cpus,
            buckets,
            chunks,
            var_drops,
            size,
            align,
        }
    }
}

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

/// One hash bucket: the head of a hash chain and the deletion lock (US 7,302,542 ¶44), eight
/// to a cache line ([`BUCKET_BYTES`]).
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

/// Per-CPU lists and counters of one consumer's dynamic memory (US 7,302,542 ¶29-31), one per
/// possible CPU, each on its own cache lines.
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

/// Per-consumer part of a dynamic memory: the consumer dynamic memory state (US 7,302,542 ¶27-28)
/// and the cleaner's counters.
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

/// The consumer dynamic memory state (US 7,302,542 ¶28).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DstateState {
    /// Chunks are available to allocate (the state after GO, ¶36).
    Free = 0,
    /// Chunks may be allocated but are not yet on a free list (set by the cleaner, claim 7).
    Clean = 1,
    /// No chunk is available now; some are being cleaned and will be soon (claim 6).
    Rinsing = 2,
    /// No chunk is available; some are dirty (claim 5).
    Dirty = 3,
    /// Every chunk is in use and none is dirty (claim 4).
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

/// The state in force when a dynamic variable was dropped (US 7,302,542 ¶37: drops are counted
/// by the state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Every chunk in use: raise `dynvarsize`.
    Empty,
    /// Dirty chunks were waiting for the cleaner: raise `cleanrate` (or `dynvarsize`).
    Dirty,
    /// Chunks were being rinsed: raise `cleanrate` (or `dynvarsize`).
    Rinsing,
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

/// Why a cleaner pass did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanError {
    /// Another cleaner pass on this dynamic memory is running.
    Busy,
}

/// Quiescence by cross-call: the kernel implementation calls a function on every online CPU
/// and waits for all of them (`smp_call_function` with wait, plus the local CPU). Probes run
/// with interrupts off, so when the call returns, every probe context that was running when
/// it was issued has finished, and every later one sees what the caller wrote before it.
pub trait CrossCall {
    /// Returns once every CPU has left the probe context it was in, if any.
    fn sync_all_cpus(&self);
}

/// What one cleaner pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Chunks moved from dirty to rinsing (and so to clean).
    pub rinsed: u64,
    /// Cross-calls issued (0 or 2).
    pub crosscalls: u32,
    /// CPUs whose dirty list was rinsed on another CPU because their clean list was not empty.
    pub borrowed: u32,
    /// CPUs whose dirty list could not be rinsed this pass (no CPU to borrow).
    pub failclean: u32,
}

/// Counters of one CPU, for STATUS.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Variables allocated by this CPU.
    pub allocs: u64,
    /// Variables freed (value 0 stored) by this CPU.
    pub frees: u64,
    /// Allocations served from another CPU's lists.
    pub steals: u64,
    /// Clean lists moved to this CPU's free list.
    pub clean_moves: u64,
    /// Insertions that lost the bucket-head race (chunk went to the dirty list, ¶39).
    pub races: u64,
    /// Drops while EMPTY.
    pub drops_empty: u64,
    /// Drops while DIRTY.
    pub drops_dirty: u64,
    /// Drops while RINSING.
    pub drops_rinsing: u64,
    /// Drops because the tuple did not fit a chunk.
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
}

/// Counters of one consumer's dynamic memory, for STATUS.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DstateStats {
    /// [`DstateState`] as `u32`.
    pub state: u32,
    /// Number of CPUs.
    pub ncpus: u32,
    /// Number of chunks.
    pub nchunks: u64,
    /// Bytes per chunk.
    pub chunk_bytes: u64,
    /// Sum over the CPUs of [`CpuStats`].
    pub total: CpuStats,
    /// Chunks holding a variable now (allocations minus frees).
    pub in_use: u64,
    /// Most chunks seen in use (sampled by the cleaner, at drops and by this call).
    pub high_water: u64,
    /// Cleaner passes that did work.
    pub passes: u64,
    /// Cleaner passes that found nothing dirty.
    pub idle_passes: u64,
    /// Cross-calls issued by the cleaner.
    pub crosscalls: u64,
    /// Chunks cleaned.
    pub rinsed: u64,
    /// Dirty lists rinsed on a borrowed CPU.
    pub borrowed: u64,
    /// Dirty lists left for a later pass.
    pub failclean: u64,
}

/// Chunk counts found by [`Dstate::audit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Chunks on free lists.
    pub free: u64,
    /// Chunks on clean lists.
    pub clean: u64,
    /// Chunks on rinsing lists.
    pub rinsing: u64,
    /// Chunks on dirty lists.
    pub dirty: u64,
    /// Chunks on hash chains.
    pub in_use: u64,
}

impl Audit {
    /// Chunks accounted for.
    pub fn total(&self) -> u64 {
        self.free + self.clean + self.rinsing + self.dirty + self.in_use
    }
}

/// What [`Dstate::audit`] found wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditError {
    /// The scratch bitmap is shorter than [`Layout::audit_bitmap_words`].
    Bitmap,
    /// A chunk is on two lists or chains, or twice on one (a cycle).
    Duplicate(u32),
    /// A list or chain holds an index that is no chunk.
    BadIndex(u32),
    /// A chunk on a hash chain is marked free, or one on a list is not.
    BadHash(u32),
    /// Chunks on no list and no chain.
    Lost(u64),
    /// The walked counts disagree with the counters.
    Counters,
}

/// The four per-CPU lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// Free list.
    Free,
    /// Clean list.
    Clean,
    /// Rinsing list.
    Rinsing,
    /// Dirty list.
    Dirty,
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

    /// Initialises the dynamic memory at GO: every chunk on its CPU's free list (¶36), empty
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

    // ---- probe context ----------------------------------------------------------------

    /// Finds the variable named by `keys`; no lock, no allocation.
    #[inline(always)]
    pub fn lookup<T: Tuple + ?Sized>(&self, keys: &T) -> Result<Option<VarRef<'a>>, DynvarError> {
        Ok(self
            .dynvar(0, 0, keys, Op::Lookup)?
            .map(|c| self.value_of(c)))
    }

    /// Value word 0 of the variable; 0 when it does not exist.
    #[inline(always)]
    pub fn load<T: Tuple + ?Sized>(&self, keys: &T) -> Result<u64, DynvarError> {
        Ok(self
            .dynvar(0, 0, keys, Op::Lookup)?
            .map_or(0, |c| self.first_word(c).get()))
    }

    /// [`Dstate::load`], noting in `found` the chunk of the variable (`None` when it does not
    /// exist), for a [`Dstate::store_noted`] of 0 later in the firing.
    #[inline(always)]
    pub fn load_noting<T: Tuple + ?Sized>(
        &self,
        keys: &T,
        found: &mut Option<u32>,
    ) -> Result<u64, DynvarError> {
        let c = self.dynvar(0, 0, keys, Op::Lookup)?;
        *found = c;
        Ok(c.map_or(0, |c| self.first_word(c).get()))
    }

    /// [`Dstate::load_noting`] of a variable that only the caller's context ever creates,
    /// stores or deletes: a thread-local variable of the running thread, whose key holds its
    /// thread id. It looks in chunk `*found` first (noted by an earlier load or store on this
    /// CPU, perhaps in an earlier firing) and walks the chain only when that chunk does not
    /// hold `keys`.
    ///
    /// Why the chunk needs no walk: a chunk whose hash is not [`HASH_FREE`] and whose words
    /// hold `keys` was filled by this thread. Its allocation either linked it, and then only
    /// this thread's deletion unlinks it, marking it free first under the bucket lock; or lost
    /// the race to link it and marked it free before the thread went on. The thread is here,
    /// so neither is half done. A chunk refilled meanwhile for another tuple shows its new
    /// hash only after its new keys (release, acquire), and cannot be refilled a second time
    /// while this CPU is in probe context: that takes a cleaner pass, whose cross-calls wait
    /// for it. For any other variable (an associative array's element, which other CPUs
    /// store and delete) a chunk holding `keys` may be another CPU's allocation that is about
    /// to lose its race: only [`Dstate::load_noting`] is right there.
    #[inline(always)]
    pub fn load_own<T: Tuple + ?Sized>(
        &self,
        keys: &T,
        found: &mut Option<u32>,
    ) -> Result<u64, DynvarError> {
        if let Some(c) = *found {
            if self.is_chunk(c)
                && self.w(c, W_HASH).0.load(Acquire) != HASH_FREE
                && self.keys_match(c, keys)
            {
                return Ok(self.first_word(c).get());
            }
        }
        self.load_noting(keys, found)
    }

    /// The variable, allocated on `cpu` with `value_bytes` of zeroed value space if it does
    /// not exist yet (claim 10: an existing variable is never allocated again). `var` is the
    /// variable id whose drop counter counts a failure.
    #[inline(always)]
    pub fn get_or_alloc<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value_bytes: usize,
    ) -> Result<VarRef<'a>, DynvarError> {
        Ok(self.value_of(self.alloc(cpu, var, keys, value_bytes)?))
    }

    /// The chunk of [`Dstate::get_or_alloc`]'s variable.
    #[inline(always)]
    fn alloc<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value_bytes: usize,
    ) -> Result<u32, DynvarError> {
        match self.dynvar(cpu, var, keys, Op::Alloc(value_words(value_bytes)))? {
            Some(c) => Ok(c),
            // An allocation returns a chunk or an error; never reached.
            None => Err(DynvarError::Contended),
        }
    }

    /// Stores a scalar; storing 0 deletes the variable.
    #[inline(always)]
    pub fn store<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value: u64,
    ) -> Result<(), DynvarError> {
        self.store_noted(cpu, var, keys, value, &mut None)
    }

    /// [`Dstate::store`], taking the chunk a [`Dstate::load_noting`] noted in `found`: a
    /// store of 0 deletes from there ([`Dstate::delete_found`]). Any other store notes the
    /// chunk it stored into, for a [`Dstate::load_own`] in a later firing (the latency
    /// script's return probe). Whatever `found` names, the store is the same.
    #[inline(always)]
    pub fn store_noted<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value: u64,
        found: &mut Option<u32>,
    ) -> Result<(), DynvarError> {
        match found.take() {
            Some(c) if value == 0 => self.delete_found(cpu, keys, c).map(|_| ()),
            _ if value == 0 => self.delete(cpu, keys).map(|_| ()),
            _ => {
                let c = self.alloc(cpu, var, keys, VALUE_BYTES)?;
                self.first_word(c).set(value);
                *found = Some(c);
                Ok(())
            }
        }
    }

    /// Stores a string value of `value_bytes` bytes of space (truncated to it); storing the
    /// empty string deletes the variable, as storing 0 deletes an integer.
    #[inline(always)]
    pub fn store_bytes<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        bytes: &[u8],
        value_bytes: usize,
    ) -> Result<(), DynvarError> {
        if bytes.is_empty() {
            return self.delete(cpu, keys).map(|_| ());
        }
        self.get_or_alloc(cpu, var, keys, value_bytes)?
            .write_bytes(bytes);
        Ok(())
    }

    /// Copies a string value into `out` (up to its NUL or `out.len()` bytes); returns its
    /// length, 0 when the variable does not exist.
    #[inline(always)]
    pub fn load_bytes<T: Tuple + ?Sized>(
        &self,
        keys: &T,
        out: &mut [u8],
    ) -> Result<usize, DynvarError> {
        let Some(v) = self.lookup(keys)? else {
            return Ok(0);
        };
        let n = v.read_bytes(out);
        // PANIC: `n <= out.len()` (`read_bytes`).
        Ok(out[..n].iter().position(|&c| c == 0).unwrap_or(n))
    }

    /// Whether CPU `cpu` should ask for a cleaner pass now rather than at the next period
    /// (on-demand cleaning): chunks it freed wait on its dirty list, its clean list is empty
    /// and its free list holds less than [`LOW_WATER_DIV`]th of its share. Reads three of
    /// its own counters and changes nothing: the cleaner, the lists and the states stay as
    /// they are, only the pass comes sooner.
    ///
    /// A CPU whose clean list is not empty is not asked for: a pass cannot give it another
    /// one (it rinses such a CPU's dirty chunks only on a CPU whose lists are all empty),
    /// so the request would only make an idle pass.
    pub fn wants_clean(&self, cpu: usize) -> bool {
        let Some(d) = self.cpus.get(cpu) else {
            return false;
        };
        if d.dirty_len.load(Relaxed) == 0 || d.clean_len.load(Relaxed) != 0 {
            return false;
        }
        // Asked after every store that may allocate: the cheap tests first, and the share's
        // size without a division.
        let low = u64::from(self.layout.share_len(cpu)) / LOW_WATER_DIV;
        d.free_len.load(Relaxed) < low.max(1)
    }

    /// `x += delta` (and `x++`): allocates when absent, deletes when the result is 0; returns
    /// the new value.
    pub fn add<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        delta: u64,
    ) -> Result<u64, DynvarError> {
        if delta == 0 {
            return self.load(keys);
        }
        let v = self.get_or_alloc(cpu, var, keys, 8)?.fetch_add(delta);
        if v == 0 {
            self.delete(cpu, keys)?;
        }
        Ok(v)
    }

    /// Deletes the variable: unlinks it under the bucket lock and puts its chunk on `cpu`'s
    /// dirty list (¶44). Returns whether it existed.
    pub fn delete<T: Tuple + ?Sized>(&self, cpu: usize, keys: &T) -> Result<bool, DynvarError> {
        Ok(self.dynvar(cpu, 0, keys, Op::Delete)?.is_some())
    }

    /// [`Dstate::delete`] of the variable that a lookup of the same `keys` found in chunk
    /// `chunk` ([`VarRef::chunk`]): the latency script's return clause reads `self->ts`, then
    /// sets it to 0. Under the bucket lock, which keeps every other deletion out, it checks
    /// that the chunk still holds `keys` and looks for it on its chain by index, without
    /// hashing the tuple or comparing keys at each step; when that fails (an insertion swung
    /// the head meanwhile) it deletes as [`Dstate::delete`] does.
    ///
    /// Any `chunk` is safe, even one noted in an earlier firing: the checks under the lock
    /// admit only a live chunk that holds `keys` and is on its chain, which is the variable.
    // Inlined: the walk of the fallback starts from the caller's frame, not from below
    // `delete_at`'s, on the probe's stack.
    #[inline(always)]
    pub fn delete_found<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        keys: &T,
        chunk: u32,
    ) -> Result<bool, DynvarError> {
        if self.delete_at(cpu, keys, chunk)? {
            return Ok(true);
        }
        self.delete(cpu, keys)
    }

    /// [`Dstate::delete_found`] of `chunk`; false when it did not delete it there.
    #[inline(never)]
    fn delete_at<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        keys: &T,
        chunk: u32,
    ) -> Result<bool, DynvarError> {
        let me = self.cpu(cpu)?;
        if !self.is_chunk(chunk) {
            return Ok(false);
        }
        let hash = self.w(chunk, W_HASH).0.load(Acquire);
        if hash == HASH_FREE {
            return Ok(false);
        }
        // PANIC: `bucket_of` is below `nchunks`, the number of buckets (type invariant).
        let bucket = &self.buckets[self.bucket_of(hash)];
        let locked = lock_bucket(bucket);
        // Checked again under the lock: a deletion may have gone first.
        let mut done = false;
        if self.w(chunk, W_HASH).0.load(Acquire) == hash && self.keys_match(chunk, keys) {
            // No deletion can change the chain now, and insertions only push at its head.
            let mut prev = NIL;
            let mut cur = bucket.head.load(Acquire);
            let mut steps = 0u32;
            while self.is_chunk(cur) && steps <= self.layout.nchunks {
                if cur == chunk {
                    done = self.unlink(bucket, prev, cur);
                    break;
                }
                steps += 1;
                prev = cur;
                cur = self.w(cur, W_NEXT).0.load(Acquire) as u32;
            }
        }
        if done {
            self.retire(Some(me), chunk);
        }
        bucket.lock.store(locked.wrapping_add(1), Release);
        Ok(done)
    }

    /// Lookup, allocation and deletion in one walk of the chain (US 7,302,542 Figure 6).
    fn dynvar<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        op: Op,
    ) -> Result<Option<u32>, DynvarError> {
        if keys.nkeys() == 0 || keys.nkeys() > MAX_KEYS {
            return Err(DynvarError::BadTuple);
        }
        let me = if op == Op::Lookup {
            None
        } else {
            Some(self.cpu(cpu)?)
        };
        if let Op::Alloc(vw) = op {
            if HEADER_WORDS + vw + keys.words() > self.layout.chunk_words() {
                if let Some(d) = me {
                    d.drops_size.fetch_add(1, Relaxed);
                }
                self.count_var_drop(var);
                return Err(DynvarError::TooLarge);
            }
        }
        let hash = keys.hash();
        // PANIC: `bucket_of` is below `nchunks`, the number of buckets (type invariant).
        let bucket = &self.buckets[self.bucket_of(hash)];
        let mut locked = 0;
        if op == Op::Delete {
            locked = lock_bucket(bucket);
        }
        let mut restarts = 0u32;
        'top: loop {
            restarts += 1;
            if restarts > MAX_RESTARTS {
                if op == Op::Delete {
                    bucket.lock.store(locked.wrapping_add(1), Release);
                }
                if let Some(d) = me {
                    d.contended.fetch_add(1, Relaxed);
                }
                return Err(DynvarError::Contended);
            }
            let seq = bucket.lock.load(Acquire);
            let start = bucket.head.load(Acquire);
            let mut prev = NIL;
            let mut cur = start;
            let mut steps = 0u32;
            while cur != SINK {
                if !self.is_chunk(cur) || steps > self.layout.nchunks {
                    // Followed a deleted chunk off its chain (into a dirty list ending in
                    // NIL), or a chain changing faster than we walk it: start over.
                    spin_loop();
                    continue 'top;
                }
                steps += 1;
                let h = self.w(cur, W_HASH).0.load(Acquire);
                if h == HASH_FREE {
                    // A deleted chunk: the chain changed under us.
                    spin_loop();
                    continue 'top;
                }
                if h == hash && self.keys_match(cur, keys) {
                    if op != Op::Delete {
                        return Ok(Some(cur));
                    }
                    if !self.unlink(bucket, prev, cur) {
                        // An insertion swung the head: walk again (still locked).
                        spin_loop();
                        continue 'top;
                    }
                    self.retire(me, cur);
                    bucket.lock.store(locked.wrapping_add(1), Release);
                    return Ok(Some(cur));
                }
                prev = cur;
                cur = self.w(cur, W_NEXT).0.load(Acquire) as u32;
            }
            match op {
                Op::Lookup => {
                    // Belt and braces (the sink and the free marker already catch a walk
                    // that a deletion disturbed): a deletion that completed during the walk
                    // advanced the sequence, so walk again before reporting absence.
                    if bucket.lock.load(Acquire) != seq {
                        spin_loop();
                        continue 'top;
                    }
                    return Ok(None);
                }
                Op::Delete => {
                    bucket.lock.store(locked.wrapping_add(1), Release);
                    return Ok(None);
                }
                Op::Alloc(vw) => {
                    let Some(d) = me else {
                        return Err(DynvarError::BadCpu);
                    };
                    let c = self.alloc_chunk(cpu, var)?;
                    self.fill(c, keys, vw);
                    self.w(c, W_NEXT).0.store(u64::from(start), Relaxed);
                    self.w(c, W_HASH).0.store(hash, Release);
                    if bucket
                        .head
                        .compare_exchange(start, c, AcqRel, Acquire)
                        .is_ok()
                    {
                        // The high-water mark is sampled, not kept exactly (that would take a
                        // shared counter per allocation): at a CPU's first and every 64th
                        // allocation, and at every cleaner pass, drop and status query.
                        if d.allocs.fetch_add(1, Relaxed) % HIGH_WATER_SAMPLE == 0 {
                            self.sample_high_water();
                        }
                        return Ok(Some(c));
                    }
                    // Lost the race with another insertion or a deletion (¶39): the chunk
                    // goes to the dirty list, not the free list, so that no allocator that
                    // has seen it on a free list can be fooled; then look up again.
                    self.w(c, W_HASH).0.store(HASH_FREE, Release);
                    self.push_dirty(d, c);
                    d.races.fetch_add(1, Relaxed);
                    spin_loop();
                    continue 'top;
                }
            }
        }
    }

    /// Unlinks chunk `cur`, which follows `prev` on `bucket`'s chain (`NIL`: heads it), under
    /// the bucket's lock; false when an insertion swung the head since.
    #[inline(always)]
    fn unlink(&self, bucket: &Bucket, prev: u32, cur: u32) -> bool {
        let next = self.w(cur, W_NEXT).0.load(Acquire) as u32;
        if prev == NIL {
            return bucket
                .head
                .compare_exchange(cur, next, AcqRel, Acquire)
                .is_ok();
        }
        // Deletions are serialised by the lock; insertions only swing the head, so a plain
        // store unlinks from the middle.
        self.w(prev, W_NEXT).0.store(u64::from(next), Release);
        true
    }

    /// Marks an unlinked chunk free of any chain and puts it on `me`'s dirty list (¶44).
    #[inline(always)]
    fn retire(&self, me: Option<&CpuState>, c: u32) {
        self.w(c, W_HASH).0.store(HASH_FREE, Release);
        if let Some(d) = me {
            self.push_dirty(d, c);
            d.frees.fetch_add(1, Relaxed);
        }
    }

    /// The words of chunk `c` after its header; `c` must be a chunk index (as for `w`).
    #[inline(always)]
    fn body(&self, c: u32) -> &'a [Word] {
        let cw = self.layout.chunk_words();
        let base = c as usize * cw;
        // PANIC: `chunks` holds `nchunks * chunk_words` words and `c < nchunks` (as for
        // `w`); `HEADER_WORDS < chunk_words` (`MIN_CHUNK_BYTES`).
        &self.chunks[base + HEADER_WORDS..base + cw]
    }

    /// Whether live chunk `c` holds `keys`.
    #[inline(always)]
    fn keys_match<T: Tuple + ?Sized>(&self, c: u32, keys: &T) -> bool {
        keys.held(self.w(c, W_META).get(), self.body(c))
    }

    /// Writes key and zeroed value into a chunk this CPU owns (not yet published).
    /// `HEADER_WORDS + vw + keys.words() <= chunk_words` (the caller checks it).
    #[inline(always)]
    fn fill<T: Tuple + ?Sized>(&self, c: u32, keys: &T, vw: usize) {
        let meta = keys.fill(self.body(c), vw);
        self.w(c, W_META).set(meta);
    }

    /// Pushes one chunk onto a CPU's dirty list (races only with the cleaner's swap).
    fn push_dirty(&self, d: &CpuState, c: u32) {
        d.dirty_len.fetch_add(1, Relaxed);
        loop {
            let head = d.dirty.load(Acquire);
            self.w(c, W_NEXT).0.store(u64::from(head), Release);
            if d.dirty.compare_exchange(head, c, AcqRel, Acquire).is_ok() {
                return;
            }
            spin_loop();
        }
    }

    /// Last chunk of a private list (bounded walk).
    fn list_tail(&self, list: u32) -> u32 {
        let mut tail = list;
        let mut steps = 0;
        loop {
            let next = self.w(tail, W_NEXT).get() as u32;
            if !self.is_chunk(next) || steps > self.layout.nchunks {
                return tail;
            }
            tail = next;
            steps += 1;
        }
    }

    /// Pushes the private list starting at `list` onto the list at `head` as a whole (a
    /// Treiber push; pushes are immune to ABA). The tail is only looked for when `head` is
    /// not empty, which the allocator never meets: it fills only its own, empty, free list.
    fn splice(&self, head: &AtomicU32, list: u32) {
        let mut tail = None;
        loop {
            let old = head.load(Acquire);
            if old != NIL {
                let t = *tail.get_or_insert_with(|| self.list_tail(list));
                self.w(t, W_NEXT).0.store(u64::from(old), Release);
            } else if let Some(t) = tail {
                self.w(t, W_NEXT).0.store(u64::from(NIL), Release);
            }
            if head.compare_exchange(old, list, AcqRel, Acquire).is_ok() {
                return;
            }
            spin_loop();
        }
    }

    /// Publishes a rinsed list of `len` chunks as `d`'s clean list; its head carries the
    /// length of the whole clean list for the allocator that takes it.
    ///
    /// The list came from a dirty list, whose last chunk links to `NIL` (pushed onto an
    /// empty list): onto an empty clean list it goes as it is. Only to append an older
    /// clean list is the tail looked for, as in [`Dstate::splice`]; so the cleaner walks a
    /// list once a pass (to count it), not twice.
    fn publish_clean(&self, d: &CpuState, list: u32, len: u64) {
        let mut tail = None;
        d.clean_len.fetch_add(len, Relaxed);
        loop {
            // Empty in practice: only the cleaner fills clean lists and it chose this CPU
            // because its clean list was empty. Appending keeps any chunk safe regardless.
            let old = d.clean.load(Acquire);
            let total = if self.is_chunk(old) {
                len + self.w(old, W_META).get()
            } else {
                len
            };
            self.w(list, W_META).set(total);
            if old != NIL {
                let t = *tail.get_or_insert_with(|| self.list_tail(list));
                self.w(t, W_NEXT).0.store(u64::from(old), Release);
            } else if let Some(t) = tail {
                self.w(t, W_NEXT).0.store(u64::from(NIL), Release);
            }
            if d.clean.compare_exchange(old, list, AcqRel, Acquire).is_ok() {
                return;
            }
            spin_loop();
        }
    }

    /// Takes a chunk for CPU `me` (US 7,302,542 ¶38-41): own free list, own clean list (moved to
    /// the free list), then the other CPUs' lists in turn. When a whole lap finds nothing the
    /// consumer state becomes EMPTY, DIRTY or RINSING (¶41) and the drop is counted by the
    /// state then in force (¶37).
    // Out of line: a lookup, the commonest walk, does not carry its frame.
    #[inline(never)]
    fn alloc_chunk(&self, me: usize, var: u32) -> Result<u32, DynvarError> {
        let n = self.layout.ncpus();
        let mine = self.cpu(me)?;
        let mut cpu = me;
        let mut found_dirty = false;
        let mut found_rinsing = false;
        let mut laps = 0;
        loop {
            let d = self.cpu(cpu)?;
            let free = d.free.load(Acquire);
            if self.is_chunk(free) {
                // No ABA: a chunk popped by another CPU comes back to a free list only
                // through two cleaner cross-calls, which cannot complete while this CPU
                // has interrupts off.
                let next = self.w(free, W_NEXT).0.load(Acquire) as u32;
                if d.free.compare_exchange(free, next, AcqRel, Acquire).is_ok() {
                    d.free_len.fetch_sub(1, Relaxed);
                    if cpu != me {
                        mine.steals.fetch_add(1, Relaxed);
                    }
                    return Ok(free);
                }
                spin_loop();
                continue;
            }
            let clean = d.clean.load(Acquire);
            if self.is_chunk(clean) {
                if d.clean
                    .compare_exchange(clean, NIL, AcqRel, Acquire)
                    .is_err()
                {
                    // Taken by another CPU, or refilled by the cleaner: look again.
                    spin_loop();
                    continue;
                }
                // The clean list is ours now: onto our own free list (claim 9). Only this
                // CPU ever fills its free list, so the splice finds it empty.
                let len = self.w(clean, W_META).get();
                d.clean_len.fetch_sub(len, Relaxed);
                mine.free_len.fetch_add(len, Relaxed);
                self.splice(&mine.free, clean);
                mine.clean_moves.fetch_add(1, Relaxed);
                cpu = me;
                continue;
            }
            let state = self.state();
            if state.allocates() && laps < MAX_LAPS {
                // Step 216-218: try the next CPU, noting what kind of chunks it holds.
                if d.dirty.load(Acquire) != NIL {
                    found_dirty = true;
                }
                if d.rinsing.load(Acquire) != NIL {
                    found_rinsing = true;
                }
                cpu = if cpu + 1 == n { 0 } else { cpu + 1 };
                if cpu != me {
                    continue;
                }
                // A whole lap found nothing (¶41; claims 4-6).
                let next = if found_dirty {
                    DstateState::Dirty
                } else if found_rinsing {
                    DstateState::Rinsing
                } else {
                    DstateState::Empty
                };
                let _ =
                    self.header
                        .state
                        .compare_exchange(state as u32, next as u32, AcqRel, Acquire);
                found_dirty = false;
                found_rinsing = false;
                laps += 1;
                // Another lap: the state now decides which drop counter to bump (or, if
                // the cleaner just made it CLEAN, the new clean lists are tried).
                continue;
            }
            let reason = match state {
                DstateState::Dirty => {
                    mine.drops_dirty.fetch_add(1, Relaxed);
                    DropReason::Dirty
                }
                DstateState::Rinsing => {
                    mine.drops_rinsing.fetch_add(1, Relaxed);
                    DropReason::Rinsing
                }
                _ => {
                    mine.drops_empty.fetch_add(1, Relaxed);
                    DropReason::Empty
                }
            };
            self.count_var_drop(var);
            self.sample_high_water();
            return Err(DynvarError::Drop(reason));
        }
    }

    fn count_var_drop(&self, var: u32) {
        if let Some(w) = self.var_drops.get(var as usize) {
            w.0.fetch_add(1, Relaxed);
        }
    }

    // ---- process context --------------------------------------------------------------

    /// One cleaner pass (US 7,302,542 Figure 7, claims 8 and 11), in process context at
    /// `cleanrate`:
    ///
    /// 1. every CPU's dirty list becomes a rinsing list;
    /// 2. cross-call: no probe context that could have reached those chunks is left;
    /// 3. every rinsing list becomes a clean list;
    /// 4. cross-call: every CPU has seen the clean lists;
    /// 5. the state becomes CLEAN.
    ///
    /// A CPU that frees but does not allocate keeps a non-empty clean list, which step 3
    /// must not overwrite: its dirty list is rinsed on a CPU whose lists are all empty
    /// instead (and left for a later pass when there is none; it cannot cause a drop, since
    /// an allocator would take that clean list first). Without dirty chunks the pass does
    /// nothing, not even a cross-call.
    pub fn clean<X: CrossCall + ?Sized>(&self, xc: &X) -> Result<CleanReport, CleanError> {
        if self.header.cleaning.swap(true, Acquire) {
            return Err(CleanError::Busy);
        }
        let report = self.clean_pass(xc);
        self.header.cleaning.store(false, Release);
        Ok(report)
    }

    fn clean_pass<X: CrossCall + ?Sized>(&self, xc: &X) -> CleanReport {
        let h = self.header;
        let mut report = CleanReport::default();
        for d in self.cpus {
            if d.dirty.load(Acquire) == NIL {
                continue;
            }
            if d.rinsing.load(Acquire) != NIL {
                // Lent to another CPU's dirty list earlier in this pass; our own dirty
                // chunks wait for the next pass.
                report.failclean += 1;
                continue;
            }
            let mut rinser = d;
            if d.clean.load(Acquire) != NIL {
                match self.cpus.iter().find(|r| {
                    r.rinsing.load(Acquire) == NIL
                        && r.dirty.load(Acquire) == NIL
                        && r.clean.load(Acquire) == NIL
                }) {
                    Some(r) => {
                        rinser = r;
                        report.borrowed += 1;
                    }
                    None => {
                        report.failclean += 1;
                        continue;
                    }
                }
            }
            // Swap the dirty list out; the rinsing pointer is set first so that a chunk
            // marked free is always on some list.
            let list = loop {
                let dirty = d.dirty.load(Acquire);
                rinser.rinsing.store(dirty, Release);
                if d.dirty
                    .compare_exchange(dirty, NIL, AcqRel, Acquire)
                    .is_ok()
                {
                    break dirty;
                }
                spin_loop();
            };
            let len = self.list_walk(list, |_| ());
            d.dirty_len.fetch_sub(len, Relaxed);
            rinser.rinsing_len.fetch_add(len, Relaxed);
            report.rinsed += len;
        }
        h.borrowed.fetch_add(u64::from(report.borrowed), Relaxed);
        h.failclean.fetch_add(u64::from(report.failclean), Relaxed);
        if report.rinsed == 0 {
            h.idle_passes.fetch_add(1, Relaxed);
            self.sample_high_water();
            return report;
        }

        xc.sync_all_cpus();
        report.crosscalls += 1;
        h.crosscalls.fetch_add(1, Relaxed);

        for d in self.cpus {
            let list = d.rinsing.load(Acquire);
            if !self.is_chunk(list) {
                continue;
            }
            // Nothing can reach these chunks any more: they become clean.
            let len = d.rinsing_len.load(Relaxed);
            self.publish_clean(d, list, len);
            d.rinsing.store(NIL, Release);
            d.rinsing_len.fetch_sub(len, Relaxed);
        }

        // Before CLEAN: every CPU has seen the clean lists, so no allocator still acting on
        // an older view can overwrite CLEAN with a stale EMPTY/DIRTY/RINSING.
        xc.sync_all_cpus();
        report.crosscalls += 1;
        h.crosscalls.fetch_add(1, Relaxed);

        h.state.store(DstateState::Clean as u32, Release);
        h.passes.fetch_add(1, Relaxed);
        h.rinsed.fetch_add(report.rinsed, Relaxed);
        self.sample_high_water();
        report
    }

    /// Walks a private list, bounded by the number of chunks; returns its length.
    fn list_walk(&self, mut c: u32, mut f: impl FnMut(u32)) -> u64 {
        let mut n = 0u64;
        while self.is_chunk(c) && n <= u64::from(self.layout.nchunks) {
            f(c);
            n += 1;
            c = self.w(c, W_NEXT).0.load(Acquire) as u32;
        }
        n
    }

    fn in_use(&self) -> u64 {
        let (a, f) = self.cpus.iter().fold((0u64, 0u64), |(a, f), d| {
            (
                a.wrapping_add(d.allocs.load(Relaxed)),
                f.wrapping_add(d.frees.load(Relaxed)),
            )
        });
        a.saturating_sub(f)
    }

    /// Records the chunks in use now if they are the most seen.
    fn sample_high_water(&self) {
        self.header.high_water.fetch_max(self.in_use(), Relaxed);
    }

    /// Counters of `cpu`.
    pub fn cpu_stats(&self, cpu: usize) -> Option<CpuStats> {
        let d = self.cpus.get(cpu)?;
        Some(CpuStats {
            allocs: d.allocs.load(Relaxed),
            frees: d.frees.load(Relaxed),
            steals: d.steals.load(Relaxed),
            clean_moves: d.clean_moves.load(Relaxed),
            races: d.races.load(Relaxed),
            drops_empty: d.drops_empty.load(Relaxed),
            drops_dirty: d.drops_dirty.load(Relaxed),
            drops_rinsing: d.drops_rinsing.load(Relaxed),
            drops_size: d.drops_size.load(Relaxed),
            contended: d.contended.load(Relaxed),
            free: d.free_len.load(Relaxed),
            clean: d.clean_len.load(Relaxed),
            rinsing: d.rinsing_len.load(Relaxed),
            dirty: d.dirty_len.load(Relaxed),
        })
    }

    /// Counters of the whole dynamic memory (and a high-water sample).
    pub fn stats(&self) -> DstateStats {
        self.sample_high_water();
        let h = self.header;
        let mut t = CpuStats::default();
        for s in (0..self.layout.ncpus()).filter_map(|c| self.cpu_stats(c)) {
            t.allocs += s.allocs;
            t.frees += s.frees;
            t.steals += s.steals;
            t.clean_moves += s.clean_moves;
            t.races += s.races;
            t.drops_empty += s.drops_empty;
            t.drops_dirty += s.drops_dirty;
            t.drops_rinsing += s.drops_rinsing;
            t.drops_size += s.drops_size;
            t.contended += s.contended;
            t.free += s.free;
            t.clean += s.clean;
            t.rinsing += s.rinsing;
            t.dirty += s.dirty;
        }
        DstateStats {
            state: h.state.load(Relaxed),
            ncpus: self.layout.ncpus,
            nchunks: u64::from(self.layout.nchunks),
            chunk_bytes: self.layout.chunk_bytes() as u64,
            total: t,
            in_use: self.in_use(),
            high_water: h.high_water.load(Relaxed),
            passes: h.passes.load(Relaxed),
            idle_passes: h.idle_passes.load(Relaxed),
            crosscalls: h.crosscalls.load(Relaxed),
            rinsed: h.rinsed.load(Relaxed),
            borrowed: h.borrowed.load(Relaxed),
            failclean: h.failclean.load(Relaxed),
        }
    }

    /// Drops counted for variable id `var`.
    pub fn var_drops(&self, var: u32) -> u64 {
        self.var_drops.get(var as usize).map_or(0, Word::get)
    }

    /// Calls `f` with every chunk on one of `cpu`'s lists (bounded walk; meaningful at
    /// quiescence). Returns the number of chunks visited.
    pub fn for_each_in_list(&self, cpu: usize, list: List, f: impl FnMut(u32)) -> u64 {
        let Some(d) = self.cpus.get(cpu) else {
            return 0;
        };
        let head = match list {
            List::Free => &d.free,
            List::Clean => &d.clean,
            List::Rinsing => &d.rinsing,
            List::Dirty => &d.dirty,
        };
        self.list_walk(head.load(Acquire), f)
    }

    /// Checks at quiescence that every chunk is on exactly one list or hash chain, that list
    /// chunks are marked free and chained ones are not, and that the counters agree
    /// (free + clean + rinsing + dirty + in use = total). `seen` is scratch of at least
    /// [`Layout::audit_bitmap_words`] words.
    pub fn audit(&self, seen: &mut [u64]) -> Result<Audit, AuditError> {
        let words = self.layout.audit_bitmap_words();
        let seen = seen.get_mut(..words).ok_or(AuditError::Bitmap)?;
        seen.fill(0);
        let mut err = None;
        let mut mark = |c: u32, chained: bool, err: &mut Option<AuditError>| {
            if err.is_some() {
                return;
            }
            if !self.is_chunk(c) {
                *err = Some(AuditError::BadIndex(c));
                return;
            }
            let (i, bit) = (c as usize / 64, 1u64 << (c % 64));
            // PANIC: `c < nchunks` (checked above) and `seen` has `nchunks.div_ceil(64)` words.
            if seen[i] & bit != 0 {
                *err = Some(AuditError::Duplicate(c));
                return;
            }
            seen[i] |= bit;
            if (self.w(c, W_HASH).get() == HASH_FREE) == chained {
                *err = Some(AuditError::BadHash(c));
            }
        };
        let mut a = Audit::default();
        for cpu in 0..self.layout.ncpus() {
            // PANIC: `cpus` has `ncpus` entries (type invariant).
            let d = &self.cpus[cpu];
            for (list, count, counter) in [
                (List::Free, &mut a.free, &d.free_len),
                (List::Clean, &mut a.clean, &d.clean_len),
                (List::Rinsing, &mut a.rinsing, &d.rinsing_len),
                (List::Dirty, &mut a.dirty, &d.dirty_len),
            ] {
                let n = self.for_each_in_list(cpu, list, |c| mark(c, false, &mut err));
                if n != counter.load(Relaxed) && err.is_none() {
                    err = Some(AuditError::Counters);
                }
                *count += n;
            }
        }
        for b in self.buckets {
            let mut c = b.head.load(Acquire);
            let mut steps = 0u64;
            while c != SINK && err.is_none() {
                mark(c, true, &mut err);
                if err.is_some() {
                    break;
                }
                a.in_use += 1;
                steps += 1;
                if steps > u64::from(self.layout.nchunks) {
                    err = Some(AuditError::Duplicate(c));
                    break;
                }
                c = self.w(c, W_NEXT).get() as u32;
            }
        }
        if let Some(e) = err {
            return Err(e);
        }
        let total = u64::from(self.layout.nchunks);
        if a.total() != total {
            return Err(AuditError::Lost(total.saturating_sub(a.total())));
        }
        if a.in_use != self.in_use() {
            return Err(AuditError::Counters);
        }
        Ok(a)
    }
}

/// Takes a bucket's deletion lock; returns the (odd) locked value.
fn lock_bucket(b: &Bucket) -> u32 {
    loop {
        let v = b.lock.load(Acquire);
        if v & 1 == 0
            && b.lock
                .compare_exchange(v, v.wrapping_add(1), AcqRel, Acquire)
                .is_ok()
        {
            return v.wrapping_add(1);
        }
        spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuple_words_encode_strings_packed() {
        let k = [Key::Int(7), Key::Str(b"abcdefghij")];
        let mut w = [u64::MAX; 6];
        let mut n = 0;
        for_each_word(&k, |x| {
            w[n] = x;
            n += 1;
            n < w.len()
        });
        assert_eq!(w[0], KIND_INT);
        assert_eq!(w[1], 7);
        assert_eq!(w[2], KIND_STR | 10 << 8);
        assert_eq!(w[3], u64::from_le_bytes(*b"abcdefgh"));
        assert_eq!(w[4], u64::from_le_bytes(*b"ij\0\0\0\0\0\0"));
        assert_eq!(w[5], u64::MAX);
        assert_eq!(k.iter().map(key_words).sum::<usize>(), 5);
    }

    #[test]
    fn int_pairs_encode_as_any_tuple() {
        for (a, b) in [(0, 0), (1, u64::MAX), (TLS_TAG | 3, 42), (u64::MAX, 7)] {
            let k = [Key::Int(a), Key::Int(b)];
            let p = IntPair::of(&k).unwrap();
            assert_eq!(p, IntPair(a, b));
            let mut w = Vec::new();
            for_each_word(&k, |x| {
                w.push(x);
                true
            });
            assert_eq!(Vec::from(p.encoded()), w);
            assert_eq!((p.nkeys(), p.words()), (k.nkeys(), k.words()));
            assert_eq!(p.hash(), k.hash());
            // A body of one value word and the key words; both forms fill it alike and
            // each finds the other's.
            let body: Vec<Word> = (0..5).map(|_| Word::new()).collect();
            body[0].set(9);
            let meta = p.fill(&body, 1);
            assert!(k.held(meta, &body) && p.held(meta, &body));
            assert_eq!(k.fill(&body, 1), meta);
            let got: Vec<u64> = body.iter().map(Word::get).collect();
            assert_eq!(got[0], 0);
            assert_eq!(got[1..], w[..]);
            body[2].set(a ^ 1);
            assert!(!k.held(meta, &body) && !p.held(meta, &body));
            body[2].set(a);
            // A meta word of another shape never matches.
            assert!(!k.held(meta + 1, &body) && !p.held(meta + 1, &body));
        }
        let [t, v] = thread_tuple(9, 4);
        assert_eq!(Some(IntPair::thread(9, 4)), IntPair::of(&[t, v]));
        assert_eq!(
            Some(IntPair::element(5, 7)),
            IntPair::of(&[array_key(5), Key::Int(7)])
        );
        assert_eq!(IntPair::of(&[Key::Int(1)]), None);
        assert_eq!(IntPair::of(&[Key::Int(1), Key::Str(b"x")]), None);
        assert_eq!(IntPair::of(&[Key::Int(1), Key::Int(2), Key::Int(3)]), None);
    }

    #[test]
    fn hash_is_never_free_and_separates_kinds() {
        assert_ne!(hash_keys(&[Key::Int(0)]), HASH_FREE);
        assert_ne!(
            hash_keys(&[Key::Int(0)]),
            hash_keys(&[Key::Str(b"\0\0\0\0\0\0\0\0")])
        );
    }
}
