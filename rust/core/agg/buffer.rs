// SPDX-License-Identifier: GPL-2.0

//! One CPU's aggregation buffer: data sets found through hash buckets and chains in a
//! caller-provided region.

use super::*;

// Header words of a formatted buffer.
const H_MAGIC: usize = 0;
const H_WORDS: usize = 1;
const H_NBUCKETS: usize = 2;
const H_DATA: usize = 3;
const H_BUMP: usize = 4;
const H_COUNT: usize = 5;
const H_DROPS: usize = 6;
/// The update cache: for each aggregation id modulo [`CACHE_SLOTS`], the offset of the
/// data set it last updated (0: none).
const H_CACHE: usize = 8;
const CACHE_SLOTS: usize = 16;
pub(super) const HEADER_WORDS: usize = H_CACHE + CACHE_SLOTS;
const BUF_MAGIC: u64 = u64::from_le_bytes(*b"OXAGBUF2");

/// Data set header words: chain link and hash key; aggregation id and sizes.
const DS_HEADER_WORDS: usize = 2;

/// What probe context holds of a CPU's aggregation buffer: its updates, which check every
/// index they use and so trust nothing of the header.
///
/// [`AggBuffer::attach`] checks the header once per use so that [`AggBuffer`]'s indexing
/// cannot go out of range; at every firing, that was a fifth of a `count()` update. The
/// region probe context writes was formatted at LOAD and is written only by updates and
/// resets, so those checks always pass there; the writer instead bounds-checks each
/// access, which costs what the indexing did, and turns an inconsistent header or link
/// into [`AggError::Corrupt`]: never a panic, an out-of-range write or an endless chain.
/// [`AggBuffer`]'s own updates are the writer's, so the rule is written once.
///
/// # Invariants
///
/// `w.len() >= HEADER_WORDS`: the header and cache words exist.
pub struct AggWriter<'a> {
    w: &'a mut [u64],
}

impl<'a> AggWriter<'a> {
    /// A writer over `mem`, a region [`AggBuffer::format`] prepared; only its length is
    /// checked here.
    #[inline(always)]
    pub fn new(mem: &'a mut [u64]) -> Result<Self, BufferError> {
        if mem.len() < HEADER_WORDS {
            return Err(BufferError::NotFormatted);
        }
        // INVARIANT: checked above.
        Ok(Self { w: mem })
    }

    /// [`AggBuffer::apply`].
    pub fn apply(
        &mut self,
        agg_id: u32,
        func: &AggFunc,
        key: &[KeyElem<'_>],
        value: i64,
        incr: i64,
    ) -> Result<(), AggError> {
        let (words, kw) = KeyWords::new(key)?;
        self.apply_words(agg_id, func, words, kw, value, incr)
    }

    /// [`AggWriter::apply`] at an all-integer key already encoded (the interpreter builds it
    /// in place from its tuple, without going through [`KeyElem`]s): its words hash and
    /// compare as a slice, without the element-by-element encoder.
    #[inline(always)]
    pub fn apply_ints(
        &mut self,
        agg_id: u32,
        func: &AggFunc,
        key: &IntKey,
        value: i64,
        incr: i64,
    ) -> Result<(), AggError> {
        let w = key.words();
        self.apply_words(agg_id, func, w.iter().copied(), w.len(), value, incr)
    }

    /// Whether the data set at `off` is aggregation `w1`'s (its id and sizes) at the key
    /// `words` (`kw` of them).
    #[inline(always)]
    fn holds(&self, off: usize, w1: u64, words: impl Iterator<Item = u64>, kw: usize) -> bool {
        let k = off.wrapping_add(DS_HEADER_WORDS);
        self.w.get(off.wrapping_add(1)) == Some(&w1)
            && self
                .w
                .get(k..k.wrapping_add(kw))
                .is_some_and(|ks| words.zip(ks).all(|(a, &b)| a == b))
    }

    /// Applies the update to the value of the data set at `off`, whose key has `kw` words.
    #[inline(always)]
    fn update_at(
        &mut self,
        off: usize,
        kw: usize,
        nw: usize,
        func: &AggFunc,
        value: i64,
        incr: i64,
    ) -> Result<(), AggError> {
        let v = off.wrapping_add(DS_HEADER_WORDS + kw);
        let vals = self
            .w
            .get_mut(v..v.wrapping_add(nw))
            .ok_or(AggError::Corrupt)?;
        func.apply(vals, value, incr)
    }

    /// [`AggBuffer::apply`] with the key's `kw` encoded words.
    #[inline(always)]
    fn apply_words(
        &mut self,
        agg_id: u32,
        func: &AggFunc,
        words: impl Iterator<Item = u64> + Clone,
        kw: usize,
        value: i64,
        incr: i64,
    ) -> Result<(), AggError> {
        let nw = func.value_words();
        if nw > MAX_VALUE_WORDS {
            return Err(AggError::ValueLength);
        }
        let w1 = agg_id as u64 | ((kw as u64) << 32) | ((nw as u64) << 40);
        // PANIC: the header and cache words are below `HEADER_WORDS <= w.len()` (type
        // invariant); every other index is checked (`get`), its arithmetic wrapping.
        let cache = H_CACHE + agg_id as usize % CACHE_SLOTS;

        // The data set this aggregation updated last, if it has this key (a clause's
        // `@[pid]` from one process, a keyless `@`): no hash and no chain walk. Data sets
        // stay where they are until a reset, which empties the cache.
        let off = self.w[cache] as usize;
        if off != 0 && self.holds(off, w1, words.clone(), kw) {
            return self.update_at(off, kw, nw, func, value, incr);
        }

        let mut h = hash_step(HASH_SEED, agg_id as u64);
        for w in words.clone() {
            h = hash_step(h, w);
        }
        let hash = hash_finish(h);
        let nb = self.w[H_NBUCKETS] as usize;
        let bucket = HEADER_WORDS.wrapping_add(hash as usize & nb.wrapping_sub(1));
        let head = *self.w.get(bucket).ok_or(AggError::Corrupt)?;

        // Walk the chain of the hash bucket: hash key, id and sizes first, then
        // the key words. A link names an older data set, at a lower offset: a link that
        // does not is corrupt, which bounds the walk.
        let mut off = head as usize;
        while off != 0 {
            let w0 = *self.w.get(off).ok_or(AggError::Corrupt)?;
            if (w0 >> 32) as u32 == hash && self.holds(off, w1, words.clone(), kw) {
                self.w[cache] = off as u64;
                return self.update_at(off, kw, nw, func, value, incr);
            }
            let next = w0 as u32 as usize;
            if next >= off {
                return Err(AggError::Corrupt);
            }
            off = next;
        }

        // A new data set: key, aggregation id, initial value, then the update.
        let need = DS_HEADER_WORDS + kw + nw;
        let bump = self.w[H_BUMP] as usize;
        if need > self.w.len().saturating_sub(bump) {
            self.w[H_DROPS] = self.w[H_DROPS].wrapping_add(1);
            return Err(AggError::Full);
        }
        // A data set goes past the buckets, or it would overwrite them.
        if bump <= bucket {
            return Err(AggError::Corrupt);
        }
        // PANIC: `bump + need <= w.len()` (checked above), so the range is in bounds and
        // `DS_HEADER_WORDS + kw <= need`.
        let ds = &mut self.w[bump..bump + need];
        for (d, s) in ds[DS_HEADER_WORDS..DS_HEADER_WORDS + kw]
            .iter_mut()
            .zip(words)
        {
            *d = s;
        }
        let vals = &mut ds[DS_HEADER_WORDS + kw..];
        func.init(vals);
        func.apply(vals, value, incr)?;
        ds[0] = head | ((hash as u64) << 32);
        ds[1] = w1;
        // The data set is complete before the bucket head, the cache and bump publish it.
        // PANIC: `bucket` was read above; header words as above.
        self.w[bucket] = bump as u64;
        self.w[cache] = bump as u64;
        self.w[H_BUMP] = (bump + need) as u64;
        self.w[H_COUNT] = self.w[H_COUNT].wrapping_add(1);
        Ok(())
    }
}

/// One CPU's aggregation buffer over a caller-provided region of 64-bit words.
///
/// Layout (all offsets in words, `0` meaning "none"):
///
/// ```text
/// [0..8)             header: magic, words, nbuckets, data start, bump, count, drops, 0
/// [8..24)            update cache: per aggregation id modulo 16, its last data set
/// [24..24+nbuckets)  hash buckets: offset of the first data set of each chain
/// [data..bump)       data sets, allocated in order, never freed until reset():
///     word 0         next data set in the chain (bits 0-31) | hash key (bits 32-63)
///     word 1         aggregation id (0-31) | key words (32-39) | value words (40-63)
///     key words      encoded key tuple (see encode_key)
///     value words    the function's value component
/// ```
///
/// Probe context updates it through an [`AggWriter`] (whose updates [`AggBuffer::apply`]
/// uses too), with `&mut`: the buffer belongs to one CPU and is only updated with
/// interrupts off there, so it needs no lock and no atomic read-modify-write.
///
/// # Invariants
///
/// The header is valid: `HEADER_WORDS + nbuckets <= data <= bump <= words == mem.len()`,
/// `nbuckets` is a power of two, every bucket head, chain link and update cache word is 0
/// or the offset of a data set in `[data, bump)`, and data sets tile `[data, bump)`
/// exactly.
pub struct AggBuffer<'a> {
    w: &'a mut [u64],
}

impl<'a> AggBuffer<'a> {
    /// Smallest usable region: header and cache, eight buckets and room for a few data
    /// sets.
    pub const MIN_BYTES: usize = 8 * (HEADER_WORDS + 8 + 32);

    /// Formats `mem` as an empty buffer. About 1/8 of it becomes hash buckets (a power of
    /// two), the rest holds data sets.
    pub fn format(mem: &'a mut [u64]) -> Result<Self, BufferError> {
        let words = mem.len();
        if words * 8 < Self::MIN_BYTES || words > u32::MAX as usize {
            return Err(BufferError::Size);
        }
        let want = (words / 8).max(8);
        let nbuckets = 1usize << (usize::BITS - 1 - want.leading_zeros());
        // PANIC: `mem` has at least `MIN_BYTES / 8` words (checked above), more than the
        // header's eight.
        mem[H_MAGIC] = BUF_MAGIC;
        mem[H_WORDS] = words as u64;
        mem[H_NBUCKETS] = nbuckets as u64;
        mem[H_DATA] = (HEADER_WORDS + nbuckets) as u64;
        mem[7] = 0;
        // INVARIANT: clear() makes every bucket empty and bump == data.
        let mut b = Self { w: mem };
        b.clear(true);
        Ok(b)
    }

    /// [`AggBuffer::format`] over a byte region, which must be 8-byte aligned and a whole
    /// number of words long.
    pub fn format_bytes(mem: &'a mut [u8]) -> Result<Self, BufferError> {
        Self::format(words_of(mem)?)
    }

    /// Uses a region [`AggBuffer::format`] already prepared (O(1) checks).
    pub fn attach(mem: &'a mut [u64]) -> Result<Self, BufferError> {
        let words = mem.len();
        // PANIC: `||` reads the header words only once `words >= HEADER_WORDS` held.
        if words < HEADER_WORDS || mem[H_MAGIC] != BUF_MAGIC || mem[H_WORDS] != words as u64 {
            return Err(BufferError::NotFormatted);
        }
        let nb = mem[H_NBUCKETS];
        let data = mem[H_DATA];
        let bump = mem[H_BUMP];
        if !nb.is_power_of_two()
            || data != HEADER_WORDS as u64 + nb
            || bump < data
            || bump > words as u64
        {
            return Err(BufferError::NotFormatted);
        }
        // INVARIANT: format() and apply() maintain the layout; the header checks above
        // reject a region that was never formatted.
        Ok(Self { w: mem })
    }

    /// [`AggBuffer::attach`] over a byte region.
    pub fn attach_bytes(mem: &'a mut [u8]) -> Result<Self, BufferError> {
        Self::attach(words_of(mem)?)
    }

    /// Empties the buffer: no data sets, no drops (after a snapshot copied it out).
    pub fn reset(&mut self) {
        self.clear(false);
    }

    /// [`AggBuffer::reset`]; `all` clears every bucket (a region never formatted holds
    /// anything), otherwise only those the data sets can be on when they are few.
    fn clear(&mut self, all: bool) {
        // PANIC: the header words are below `HEADER_WORDS`, and `HEADER_WORDS <= data <=
        // words`, the length of `w` (type invariant).
        let data = self.w[H_DATA] as usize;
        let nb = self.w[H_NBUCKETS] as usize;
        if !all && (self.w[H_COUNT] as usize) < nb / 8 {
            // Few data sets (every snapshot of a quiet CPU): only their buckets can be
            // non-empty, so clearing those is enough, and much cheaper than the whole
            // table (1/8 of the buffer) under an emulator.
            let mut off = data;
            let bump = self.w[H_BUMP] as usize;
            while off < bump {
                // PANIC: data sets tile `[data, bump)` (type invariant), so `off + 1` is
                // a data set's word 1, and its bucket is below `HEADER_WORDS + nb`.
                let w1 = self.w[off + 1];
                let b = HEADER_WORDS + ((self.w[off] >> 32) as usize & (nb - 1));
                self.w[b] = 0;
                off += DS_HEADER_WORDS + (w1 >> 32) as u8 as usize + (w1 >> 40) as usize;
            }
        } else {
            for b in &mut self.w[HEADER_WORDS..data] {
                *b = 0;
            }
        }
        // INVARIANT: no data set is left for a cache word to name.
        for c in &mut self.w[H_CACHE..HEADER_WORDS] {
            *c = 0;
        }
        self.w[H_BUMP] = data as u64;
        self.w[H_COUNT] = 0;
        self.w[H_DROPS] = 0;
    }

    /// Aggregation drops counted since the last reset.
    pub fn drops(&self) -> u64 {
        // PANIC: header words exist (type invariant).
        self.w[H_DROPS]
    }

    /// Number of data sets.
    pub fn len(&self) -> usize {
        // PANIC: header words exist (type invariant).
        self.w[H_COUNT] as usize
    }

    /// Whether there is no data set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of hash buckets.
    pub fn buckets(&self) -> usize {
        // PANIC: header words exist (type invariant).
        self.w[H_NBUCKETS] as usize
    }

    /// Bytes of the region used by data sets.
    pub fn used_bytes(&self) -> usize {
        // PANIC: header words exist (type invariant).
        (self.w[H_BUMP] - self.w[H_DATA]) as usize * 8
    }

    /// Bytes of the region available for data sets.
    pub fn data_bytes(&self) -> usize {
        // PANIC: header words exist (type invariant).
        (self.w[H_WORDS] - self.w[H_DATA]) as usize * 8
    }

    /// Finds the data set of `(agg_id, key)` and applies `func` with `value` and `incr` to
    /// it; creates it first from the function's initial value if there is none. Probe
    /// context: bounded time, no allocation, no lock.
    ///
    /// When the data set does not exist and there is no room for it, counts one
    /// aggregation drop and returns [`AggError::Full`]; nothing else changes.
    #[inline]
    pub fn apply(
        &mut self,
        agg_id: u32,
        func: &AggFunc,
        key: &[KeyElem<'_>],
        value: i64,
        incr: i64,
    ) -> Result<(), AggError> {
        // Integer keys come encoded from the interpreter (`AggWriter::apply_ints`). Here every key
        // goes through the element-by-element encoder: one instance of the update keeps
        // the frame small.
        AggWriter { w: self.w }.apply(agg_id, func, key, value, incr)
    }

    /// The value component of `(agg_id, key)` if the data set exists (tests, debugging).
    pub fn lookup(&self, agg_id: u32, key: &[KeyElem<'_>]) -> Option<&[u64]> {
        let mut kbuf = [0u64; KEY_MAX_WORDS];
        let kw = encode_key(key, &mut kbuf).ok()?;
        // PANIC: `kw <= KEY_MAX_WORDS` (`encode_key`); buckets and links as in `apply`.
        let hash = key_hash(agg_id, &kbuf[..kw]);
        let bucket = HEADER_WORDS + (hash as usize & (self.w[H_NBUCKETS] as usize - 1));
        let mut off = self.w[bucket] as usize;
        while off != 0 {
            let ds = self.dataset_at(off);
            if ds.agg_id == agg_id && ds.key_words == &kbuf[..kw] {
                return Some(ds.values);
            }
            off = self.w[off] as u32 as usize;
        }
        None
    }

    /// The data set at `off`, which must be the offset of one (a bucket head, a chain link,
    /// or `data` plus whole data sets, below `bump`).
    fn dataset_at(&self, off: usize) -> DataSet<'_> {
        // PANIC: a data set's header, key and value words lie in `[data, bump)` (type
        // invariant; precondition above).
        let w1 = self.w[off + 1];
        let kw = (w1 >> 32) as u8 as usize;
        let nw = (w1 >> 40) as usize;
        let k = off + DS_HEADER_WORDS;
        DataSet {
            hash: (self.w[off] >> 32) as u32,
            agg_id: w1 as u32,
            key_words: &self.w[k..k + kw],
            values: &self.w[k + kw..k + kw + nw],
        }
    }

    /// The data sets in allocation order.
    pub fn iter(&self) -> DataSets<'_> {
        DataSets {
            buf: self,
            // PANIC: header words exist (type invariant).
            off: self.w[H_DATA] as usize,
        }
    }

    /// Bytes [`AggBuffer::serialize`] writes in all for this buffer.
    pub fn snapshot_len(&self) -> usize {
        // A record is as long as its data set (a 16-byte header, then the same key and
        // value words), and data sets tile `[data, bump)` (type invariant): no walk.
        SNAPSHOT_HEADER_BYTES + self.used_bytes()
    }

    /// Serialises the buffer into `out` as a snapshot stream (header, then one record per
    /// data set), resumably: call again with the same `cursor` until it is done. Records
    /// are never split. Returns the bytes written; [`SnapshotError::OutputTooSmall`] when
    /// not even the next item fits.
    pub fn serialize(
        &self,
        cpu: u32,
        out: &mut [u8],
        cursor: &mut SnapshotCursor,
    ) -> Result<usize, SnapshotError> {
        let mut n = 0;
        if cursor.off == 0 {
            if out.len() < SNAPSHOT_HEADER_BYTES {
                return Err(SnapshotError::OutputTooSmall {
                    needed: SNAPSHOT_HEADER_BYTES,
                });
            }
            let payload = self.snapshot_len() - SNAPSHOT_HEADER_BYTES;
            let h = SnapshotHeader {
                cpu,
                records: self.len() as u32,
                drops: self.drops(),
                payload_len: payload as u64,
            };
            // PANIC: `out` holds `SNAPSHOT_HEADER_BYTES` (checked above).
            h.write(&mut out[..SNAPSHOT_HEADER_BYTES]);
            n = SNAPSHOT_HEADER_BYTES;
            cursor.off = self.w[H_DATA] as usize;
        }
        let bump = self.w[H_BUMP] as usize;
        while cursor.off < bump {
            let ds = self.dataset_at(cursor.off);
            let len = ds.record_len();
            if out.len() - n < len {
                if n == 0 {
                    return Err(SnapshotError::OutputTooSmall { needed: len });
                }
                return Ok(n);
            }
            // PANIC: `n + len <= out.len()` (checked above).
            ds.write_record(&mut out[n..n + len]);
            n += len;
            cursor.off += DS_HEADER_WORDS + ds.key_words.len() + ds.values.len();
        }
        cursor.done = true;
        Ok(n)
    }
}

fn words_of(mem: &mut [u8]) -> Result<&mut [u64], BufferError> {
    // SAFETY: every bit pattern is a valid u64 and u64 has no drop glue, so viewing
    // initialised bytes as words is sound; align_to_mut only hands out the aligned middle.
    let (pre, words, post) = unsafe { mem.align_to_mut::<u64>() };
    if !pre.is_empty() || !post.is_empty() {
        return Err(BufferError::Alignment);
    }
    Ok(words)
}

/// One data set of an [`AggBuffer`].
#[derive(Clone, Copy, Debug)]
pub struct DataSet<'b> {
    /// The hash key.
    pub hash: u32,
    /// The aggregation identifier component.
    pub agg_id: u32,
    /// The key component, encoded (see [`encode_key`]).
    pub key_words: &'b [u64],
    /// The value component.
    pub values: &'b [u64],
}

impl DataSet<'_> {
    /// Bytes of this data set's snapshot record.
    pub fn record_len(&self) -> usize {
        RECORD_HEADER_BYTES + 8 * (self.key_words.len() + self.values.len())
    }

    /// `out` must hold [`Self::record_len`] bytes.
    fn write_record(&self, out: &mut [u8]) {
        let len = self.record_len();
        // PANIC: `out` holds `len >= RECORD_HEADER_BYTES` (16) bytes (precondition).
        out[0..4].copy_from_slice(&(len as u32).to_le_bytes());
        out[4..8].copy_from_slice(&self.agg_id.to_le_bytes());
        out[8..12].copy_from_slice(&(self.key_words.len() as u32).to_le_bytes());
        out[12..16].copy_from_slice(&(self.values.len() as u32).to_le_bytes());
        let words = self.key_words.iter().chain(self.values);
        for (chunk, w) in out[RECORD_HEADER_BYTES..].chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// Iterator over the data sets of an [`AggBuffer`].
pub struct DataSets<'b> {
    buf: &'b AggBuffer<'b>,
    off: usize,
}

impl<'b> Iterator for DataSets<'b> {
    type Item = DataSet<'b>;

    fn next(&mut self) -> Option<DataSet<'b>> {
        // PANIC: a header word (type invariant); `off` moves by whole data sets.
        if self.off >= self.buf.w[H_BUMP] as usize {
            return None;
        }
        let ds = self.buf.dataset_at(self.off);
        self.off += DS_HEADER_WORDS + ds.key_words.len() + ds.values.len();
        Some(ds)
    }
}
