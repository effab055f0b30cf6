//! The storage of one aggregation's entries: keys and values in arenas, found through a
//! hash table of indices built lazily.

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use std::convert::Infallible;
use std::hash::Hasher;

/// A fast hasher for encoded keys (SipHash's DoS resistance buys nothing here: the keys
/// come from our own kernel module).
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(a));
        }
        for b in chunks.remainder() {
            self.write_u64(*b as u64);
        }
    }

    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0 ^ w)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn write_usize(&mut self, w: usize) {
        self.write_u64(w as u64);
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }
}

/// The hash of an encoded key.
pub(super) fn key_hash(kb: &[u8]) -> u64 {
    let mut h = KeyHasher::default();
    h.write(kb);
    h.finish()
}

/// One aggregation's entries: every key's bytes in one arena, every entry's value words in
/// another, and a hash table of entry indices over them. A snapshot of 100 000 new keys
/// grows four vectors instead of making 200 000 allocations. Everything is kept small
/// (20 bytes per entry besides its key and value): under an emulator every page the merge
/// touches first is a page fault, as costly as merging a few records.
///
/// The table is built lazily: a CPU's stream holds each key once, so a stream merged into
/// an empty aggregation (the first snapshot, the end-of-run snapshot with a long
/// `aggrate`) is appended without a lookup, and the entries are hashed only when a later
/// record or action needs to find one. A run whose keys all come in one stream never
/// builds the table.
#[derive(Debug, Default)]
pub(super) struct Entries {
    /// Indices of the entries below `indexed`, found by [`key_hash`] of their key.
    pub(super) table: HashTable<u32>,
    /// Entries `indexed..len()` are not in `table` yet.
    pub(super) indexed: usize,
    /// Entry `i`'s key: `keys[spans[i].0..spans[i].0 + spans[i].1]`.
    pub(super) spans: Vec<(u32, u32)>,
    pub(super) keys: Vec<u8>,
    /// Entry `i`'s value: `vals[i * words..(i + 1) * words]`.
    pub(super) vals: Vec<u64>,
    pub(super) words: usize,
}

impl Entries {
    pub(super) fn new(words: usize) -> Self {
        Self {
            words,
            ..Default::default()
        }
    }

    pub(super) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub(super) fn key(&self, i: usize) -> &[u8] {
        let (at, n) = self.spans[i];
        &self.keys[at as usize..at as usize + n as usize]
    }

    pub(super) fn value(&self, i: usize) -> &[u64] {
        &self.vals[i * self.words..(i + 1) * self.words]
    }

    pub(super) fn value_mut(&mut self, i: usize) -> &mut [u64] {
        &mut self.vals[i * self.words..(i + 1) * self.words]
    }

    /// The index of `kb`, whose hash is `hash` (entries not yet in the table are searched
    /// one by one: [`Self::index`] first where that matters).
    pub(super) fn find(&self, hash: u64, kb: &[u8]) -> Option<usize> {
        self.table
            .find(hash, |&i| self.key(i as usize) == kb)
            .map(|&i| i as usize)
            .or_else(|| (self.indexed..self.len()).find(|&i| self.key(i) == kb))
    }

    /// Puts every entry in the table.
    pub(super) fn index(&mut self) {
        if self.indexed == self.len() {
            return;
        }
        let (spans, keys) = (&self.spans, &self.keys);
        let key = |i: u32| {
            let (at, len) = spans[i as usize];
            &keys[at as usize..at as usize + len as usize]
        };
        self.table
            .reserve(spans.len() - self.indexed, |&i| key_hash(key(i)));
        for i in self.indexed..spans.len() {
            // Entries are unique (see `Entries`): no comparison needed.
            self.table
                .insert_unique(key_hash(key(i as u32)), i as u32, |&i| key_hash(key(i)));
        }
        self.indexed = spans.len();
    }

    /// Room for `n` more entries and `key_bytes` more key bytes without growing the arenas
    /// (each growth copies everything so far and touches fresh pages), and the table too
    /// when `lookups` (records are merged into existing entries).
    pub(super) fn reserve(&mut self, n: usize, key_bytes: usize, lookups: bool) {
        if lookups {
            self.index();
            let (spans, keys) = (&self.spans, &self.keys);
            self.table.reserve(n, |&i| {
                let (at, len) = spans[i as usize];
                key_hash(&keys[at as usize..at as usize + len as usize])
            });
        }
        self.spans.reserve(n);
        self.keys.reserve(key_bytes);
        self.vals.reserve(n * self.words);
    }

    /// Adds `kb`, known to be absent, without a lookup and without indexing it; its value
    /// words set by `init`.
    pub(super) fn append(&mut self, kb: &[u8], init: impl FnOnce(&mut [u64])) -> usize {
        let i = self.spans.len();
        self.spans.push((self.keys.len() as u32, kb.len() as u32));
        self.keys.extend_from_slice(kb);
        self.vals.resize(self.vals.len() + self.words, 0);
        init(self.value_mut(i));
        i
    }

    /// The index of `kb` (hash `hash`); when absent, `check` decides whether it may be
    /// added, with value words set by `init`. One probe of the table for both.
    pub(super) fn find_or_insert<E>(
        &mut self,
        hash: u64,
        kb: &[u8],
        check: impl FnOnce() -> Result<(), E>,
        init: impl FnOnce(&mut [u64]),
    ) -> Result<usize, E> {
        self.index();
        let (spans, keys) = (&self.spans, &self.keys);
        let key = |i: u32| {
            let (at, len) = spans[i as usize];
            &keys[at as usize..at as usize + len as usize]
        };
        match self
            .table
            .entry(hash, |&i| key(i) == kb, |&i| key_hash(key(i)))
        {
            Entry::Occupied(o) => Ok(*o.get() as usize),
            Entry::Vacant(v) => {
                check()?;
                v.insert(self.spans.len() as u32);
                self.indexed += 1;
                Ok(self.append(kb, init))
            }
        }
    }

    /// Adds `kb` (absent; hash `hash`) with value words set by `init`; its index.
    pub(super) fn insert(&mut self, hash: u64, kb: &[u8], init: impl FnOnce(&mut [u64])) -> usize {
        match self.find_or_insert::<Infallible>(hash, kb, || Ok(()), init) {
            Ok(i) => i,
            Err(e) => match e {},
        }
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut [u64]> {
        self.vals.chunks_exact_mut(self.words.max(1))
    }
}
