// SPDX-License-Identifier: GPL-2.0

//! The layout of a dynamic memory: the chunk size a program needs (fixed at LOAD) and
//! how the memory divides into header, per-CPU states, buckets and chunks.

use super::*;

/// The static shape of one key, for the chunk size computation at LOAD.
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
/// [`Layout::new`].
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
/// a string key holding at most `strsize` bytes.
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

/// The chunk size of a program, one for all its variables: the largest [`var_chunk_bytes`] over
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

pub(super) fn value_words(value_bytes: usize) -> usize {
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
    pub(super) ncpus: u32,
    pub(super) nchunks: u32,
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
    /// Every chunk costs its bytes plus one hash bucket; the chunks are split evenly over the
    /// CPUs, the first `nchunks % ncpus` CPUs getting one more.
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
