//! The user-level side of aggregations (US 8,005,794, claims 12-14 and 19-23).
//!
//! Snapshots of every CPU's aggregation buffer (`oxtrace_core::agg` record streams) are
//! merged into one user-level hash table per aggregation, through a [`Dictionary`] built at
//! load time (aggregation id → name, function, key layout, parameters), with each
//! function's merge rule ([`AggFunc::merge`]). On top: the D actions `clear`, `trunc`,
//! `normalize` and `denormalize`, sorting by value like dtrace(1M), and output as DTrace's
//! default `printa`, custom `printa` formats, ASCII histograms, JSON and OpenMetrics text
//! (the renderers live in [`crate::output`]).

use crate::output::text::{format_entry, format_entry_multi, render_entry};
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use oxtrace_core::agg::{
    parse_snapshot, quantize_bucket_value, AggFunc, KeyElem, KeyRef, ParseError, Record, Records,
    SnapshotHeader, RECORD_HEADER_BYTES,
};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::hash::Hasher;

pub use crate::output::json::json_str;
pub use crate::output::openmetrics::metric_name;
pub use crate::output::text::{print_range, render_histogram};

/// How a key element is typed (the D type of the tuple member), for checking and printing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// An integer of `size` bytes (1, 2, 4 or 8): printed `%*d` with DTrace's width.
    Int {
        /// Size of the D type in bytes.
        size: u8,
        /// Whether it prints signed.
        signed: bool,
    },
    /// A string (`execname`, `probefunc`, ...).
    Str,
    /// A kernel stack (`stack()`): a string of frames (`oxtrace_core::stack`), printed
    /// symbolized one frame a line.
    Stack,
}

/// One member of an aggregation's key tuple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyField {
    /// Its name in the D source (`pid`, `execname`); an OpenMetrics label name.
    pub name: String,
    /// Its type.
    pub kind: KeyKind,
}

impl KeyField {
    /// A 64-bit signed integer member.
    pub fn int(name: &str) -> Self {
        Self {
            name: name.into(),
            kind: KeyKind::Int {
                size: 8,
                signed: true,
            },
        }
    }

    /// A string member.
    pub fn string(name: &str) -> Self {
        Self {
            name: name.into(),
            kind: KeyKind::Str,
        }
    }
}

/// What the dictionary knows of one aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggDef {
    /// The aggregation identifier of its data sets.
    pub id: u32,
    /// Its D name without `@` (empty for the anonymous `@`).
    pub name: String,
    /// Its function and parameters.
    pub func: AggFunc,
    /// Its key layout (empty for `@x = count()`).
    pub keys: Vec<KeyField>,
}

/// Errors of the user-level aggregation table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AggTableError {
    /// Two definitions for one aggregation id.
    DuplicateId(u32),
    /// A record or action names an aggregation the dictionary does not know.
    UnknownAggregation(u32),
    /// A record's value does not have the function's number of words.
    ValueLength(u32),
    /// A record's key does not match the aggregation's key layout.
    KeyLayout(u32),
    /// A snapshot stream is malformed.
    Parse(ParseError),
}

impl fmt::Display for AggTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateId(id) => write!(f, "aggregation id {id} defined twice"),
            Self::UnknownAggregation(id) => write!(f, "unknown aggregation id {id}"),
            Self::ValueLength(id) => write!(f, "aggregation {id}: value size mismatch"),
            Self::KeyLayout(id) => write!(f, "aggregation {id}: key does not match its layout"),
            Self::Parse(e) => write!(f, "aggregation snapshot: {e}"),
        }
    }
}

impl std::error::Error for AggTableError {}

impl From<ParseError> for AggTableError {
    fn from(e: ParseError) -> Self {
        Self::Parse(e)
    }
}

/// The user-level dictionary: aggregation id → definition (claims 14, 19).
#[derive(Clone, Debug, Default)]
pub struct Dictionary {
    defs: BTreeMap<u32, AggDef>,
}

impl Dictionary {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a definition.
    pub fn insert(&mut self, def: AggDef) -> Result<(), AggTableError> {
        if self.defs.contains_key(&def.id) {
            return Err(AggTableError::DuplicateId(def.id));
        }
        self.defs.insert(def.id, def);
        Ok(())
    }

    /// The definition of `id`.
    pub fn get(&self, id: u32) -> Option<&AggDef> {
        self.defs.get(&id)
    }

    /// The definition named `name`.
    pub fn by_name(&self, name: &str) -> Option<&AggDef> {
        self.defs.values().find(|d| d.name == name)
    }

    /// All definitions in id order.
    pub fn iter(&self) -> impl Iterator<Item = &AggDef> {
        self.defs.values()
    }
}

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
fn key_hash(kb: &[u8]) -> u64 {
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
struct Entries {
    /// Indices of the entries below `indexed`, found by [`key_hash`] of their key.
    table: HashTable<u32>,
    /// Entries `indexed..len()` are not in `table` yet.
    indexed: usize,
    /// Entry `i`'s key: `keys[spans[i].0..spans[i].0 + spans[i].1]`.
    spans: Vec<(u32, u32)>,
    keys: Vec<u8>,
    /// Entry `i`'s value: `vals[i * words..(i + 1) * words]`.
    vals: Vec<u64>,
    words: usize,
}

impl Entries {
    fn new(words: usize) -> Self {
        Self {
            words,
            ..Default::default()
        }
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn key(&self, i: usize) -> &[u8] {
        let (at, n) = self.spans[i];
        &self.keys[at as usize..at as usize + n as usize]
    }

    fn value(&self, i: usize) -> &[u64] {
        &self.vals[i * self.words..(i + 1) * self.words]
    }

    fn value_mut(&mut self, i: usize) -> &mut [u64] {
        &mut self.vals[i * self.words..(i + 1) * self.words]
    }

    /// The index of `kb`, whose hash is `hash` (entries not yet in the table are searched
    /// one by one: [`Self::index`] first where that matters).
    fn find(&self, hash: u64, kb: &[u8]) -> Option<usize> {
        self.table
            .find(hash, |&i| self.key(i as usize) == kb)
            .map(|&i| i as usize)
            .or_else(|| (self.indexed..self.len()).find(|&i| self.key(i) == kb))
    }

    /// Puts every entry in the table.
    fn index(&mut self) {
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
    fn reserve(&mut self, n: usize, key_bytes: usize, lookups: bool) {
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
    fn append(&mut self, kb: &[u8], init: impl FnOnce(&mut [u64])) -> usize {
        let i = self.spans.len();
        self.spans.push((self.keys.len() as u32, kb.len() as u32));
        self.keys.extend_from_slice(kb);
        self.vals.resize(self.vals.len() + self.words, 0);
        init(self.value_mut(i));
        i
    }

    /// The index of `kb` (hash `hash`); when absent, `check` decides whether it may be
    /// added, with value words set by `init`. One probe of the table for both.
    fn find_or_insert<E>(
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
    fn insert(&mut self, hash: u64, kb: &[u8], init: impl FnOnce(&mut [u64])) -> usize {
        match self.find_or_insert::<Infallible>(hash, kb, || Ok(()), init) {
            Ok(i) => i,
            Err(e) => match e {},
        }
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut [u64]> {
        self.vals.chunks_exact_mut(self.words.max(1))
    }
}

/// The merged data of one aggregation.
#[derive(Debug, Default)]
struct AggState {
    entries: Entries,
    normal: u64,
    printed: bool,
    /// Whether the aggregation had no entry when the stream being merged began: its
    /// records are all new keys (a stream holds each key once).
    fresh: bool,
    /// The key descriptor word (the first eight key bytes, which give every element's
    /// kind and length) last found to match the key layout: keys that share it need no
    /// check.
    layout_ok: Option<[u8; 8]>,
}

/// What one merged snapshot stream reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Snapshot streams (CPUs) merged.
    pub streams: usize,
    /// Records merged.
    pub records: usize,
    /// Aggregation drops the streams reported.
    pub drops: u64,
}

/// The user-level aggregation table (claims 12, 13, 19-23).
#[derive(Debug)]
pub struct AggTable {
    dict: Dictionary,
    aggs: BTreeMap<u32, AggState>,
    scratch: Vec<u64>,
    drops: u64,
}

/// How `printa` and friends order entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SortOrder {
    /// Sort by key first (`aggsortkey`), value second.
    pub by_key: bool,
    /// Reverse the order (`aggsortrev`).
    pub reverse: bool,
    /// Of a `printa` of several aggregations, the one whose values order the lines
    /// (`aggsortpos`, from 0).
    pub pos: usize,
    /// The key member compared first (`aggsortkeypos`, from 0); the others follow in order,
    /// wrapping around, as dtrace compares them.
    pub keypos: usize,
}

impl SortOrder {
    /// The order the `aggsort*` options in `opts` (tool options by name, as `-x`,
    /// `#pragma D option` or `setopt()` left them) ask for.
    pub fn from_options(opts: &BTreeMap<String, String>) -> Self {
        let get = |n: &str| -> Option<u64> {
            let v = opts.get(n)?;
            let v = if v.is_empty() { None } else { Some(v.as_str()) };
            crate::options::runtime_value(n, v).ok().flatten()
        };
        SortOrder {
            by_key: get("aggsortkey").is_some(),
            reverse: get("aggsortrev").is_some(),
            pos: get("aggsortpos").unwrap_or(0) as usize,
            keypos: get("aggsortkeypos").unwrap_or(0) as usize,
        }
    }
}

/// One entry of an aggregation, as handed to renderers.
#[derive(Clone, Copy, Debug)]
pub struct EntryRef<'t> {
    /// The key tuple.
    pub key: KeyRef<'t>,
    /// The value words.
    pub values: &'t [u64],
}

impl AggTable {
    /// An empty table over `dict`.
    pub fn new(dict: Dictionary) -> Self {
        let aggs = dict
            .iter()
            .map(|d| {
                (
                    d.id,
                    AggState {
                        entries: Entries::new(d.func.value_words()),
                        normal: 1,
                        printed: false,
                        fresh: false,
                        layout_ok: None,
                    },
                )
            })
            .collect();
        Self {
            dict,
            aggs,
            scratch: Vec::new(),
            drops: 0,
        }
    }

    /// The dictionary.
    pub fn dictionary(&self) -> &Dictionary {
        &self.dict
    }

    /// Aggregation drops reported by all snapshots merged so far.
    pub fn drops(&self) -> u64 {
        self.drops
    }

    /// Merges a buffer of one or more concatenated snapshot streams (one per CPU).
    ///
    /// A malformed stream is an error; records before the error stay merged.
    pub fn merge_snapshots(&mut self, mut bytes: &[u8]) -> Result<MergeStats, AggTableError> {
        let mut st = MergeStats::default();
        while !bytes.is_empty() {
            let (h, recs, rest) = parse_snapshot(bytes)?;
            st.streams += 1;
            st.drops += h.drops;
            self.drops += h.drops;
            for a in self.aggs.values_mut() {
                a.fresh = a.entries.is_empty();
            }
            let r = self.merge_stream(&h, recs, &mut st);
            for a in self.aggs.values_mut() {
                a.fresh = false;
            }
            r?;
            bytes = rest;
        }
        Ok(st)
    }

    /// Merges the records of one stream, whose header is `h`.
    fn merge_stream(
        &mut self,
        h: &SnapshotHeader,
        recs: Records<'_>,
        st: &mut MergeStats,
    ) -> Result<(), AggTableError> {
        if self.aggs.len() == 1 {
            // One aggregation: every record may be a new key of it, with at most the
            // stream's bytes of keys.
            if let Some(a) = self.aggs.values_mut().next() {
                let lookups = !a.fresh;
                a.entries
                    .reserve(h.records as usize, h.payload_len as usize, lookups);
            }
        }
        // The aggregation of the previous record, looked up again only when the id
        // changes (a stream holds few aggregations, and records of one often follow
        // each other).
        let mut cur: Option<(u32, &AggDef, &mut AggState)> = None;
        let mut recs = recs;
        while let Some(r) = recs.next() {
            let r = r?;
            if cur.as_ref().map(|c| c.0) != Some(r.agg_id) {
                let id = r.agg_id;
                let d = self
                    .dict
                    .get(id)
                    .ok_or(AggTableError::UnknownAggregation(id))?;
                let s = self
                    .aggs
                    .get_mut(&id)
                    .ok_or(AggTableError::UnknownAggregation(id))?;
                cur = Some((id, d, s));
            }
            if let Some((_, def, state)) = cur.as_mut() {
                merge_into(def, state, &mut self.scratch, &r)?;
                if state.fresh {
                    // New keys of integers only: the records that follow with the same
                    // header and descriptor (all of them, for `@[arg2] = count()`) are
                    // appended in one pass, without parsing each.
                    st.records += append_run(state, &mut recs, &r);
                }
            }
            st.records += 1;
        }
        Ok(())
    }

    /// Merges one data set: find the entry of its key (hash table), create it from the
    /// function's initial value if absent, apply the merge rule (claim 12).
    pub fn merge_record(&mut self, r: &Record<'_>) -> Result<(), AggTableError> {
        let def = self
            .dict
            .get(r.agg_id)
            .ok_or(AggTableError::UnknownAggregation(r.agg_id))?;
        let st = self
            .aggs
            .get_mut(&r.agg_id)
            .ok_or(AggTableError::UnknownAggregation(r.agg_id))?;
        merge_into(def, st, &mut self.scratch, r)
    }

    fn state(&self, id: u32) -> Result<(&AggDef, &AggState), AggTableError> {
        match (self.dict.get(id), self.aggs.get(&id)) {
            (Some(d), Some(s)) => Ok((d, s)),
            _ => Err(AggTableError::UnknownAggregation(id)),
        }
    }

    fn state_mut(&mut self, id: u32) -> Result<(AggFunc, &mut AggState), AggTableError> {
        match (self.dict.get(id), self.aggs.get_mut(&id)) {
            (Some(d), Some(s)) => Ok((d.func, s)),
            _ => Err(AggTableError::UnknownAggregation(id)),
        }
    }

    /// Number of entries of aggregation `id`.
    pub fn len(&self, id: u32) -> usize {
        self.aggs.get(&id).map_or(0, |s| s.entries.len())
    }

    /// Whether no aggregation has an entry.
    pub fn is_empty(&self) -> bool {
        self.aggs.values().all(|s| s.entries.is_empty())
    }

    /// The value words of `key` in aggregation `id`.
    pub fn get(&self, id: u32, key: &[KeyElem<'_>]) -> Option<&[u64]> {
        let mut w = [0u64; oxtrace_core::agg::KEY_MAX_WORDS];
        let n = oxtrace_core::agg::encode_key(key, &mut w).ok()?;
        let kb: Vec<u8> = w[..n].iter().flat_map(|x| x.to_le_bytes()).collect();
        let e = &self.aggs.get(&id)?.entries;
        e.find(key_hash(&kb), &kb).map(|i| e.value(i))
    }

    /// `clear(@a)`: every value back to the function's initial value, keys kept (DTrace).
    pub fn clear(&mut self, id: u32) -> Result<(), AggTableError> {
        let (func, st) = self.state_mut(id)?;
        for v in st.entries.values_mut() {
            func.init(v);
        }
        Ok(())
    }

    /// `trunc(@a, n)`: keep the `n` largest entries (`n > 0`), the `|n|` smallest
    /// (`n < 0`), or none (`n == 0`).
    pub fn trunc(&mut self, id: u32, n: i64) -> Result<(), AggTableError> {
        let keep: Vec<Box<[u8]>> = {
            let sorted = self.sorted(id, SortOrder::default())?;
            let k = (n.unsigned_abs() as usize).min(sorted.len());
            let range = if n > 0 {
                sorted.len() - k..sorted.len()
            } else {
                0..k
            };
            sorted[range].iter().map(|e| e.key.bytes().into()).collect()
        };
        let (func, st) = self.state_mut(id)?;
        st.entries.index();
        let mut kept = Entries::new(func.value_words());
        for k in keep {
            if let Some(i) = st.entries.find(key_hash(&k), &k) {
                let v = st.entries.value(i);
                kept.insert(key_hash(&k), &k, |out| out.copy_from_slice(v));
            }
        }
        st.entries = kept;
        Ok(())
    }

    /// `normalize(@a, n)`: values print divided by `n` (0 is treated as 1).
    pub fn normalize(&mut self, id: u32, n: u64) -> Result<(), AggTableError> {
        self.state_mut(id)?.1.normal = n.max(1);
        Ok(())
    }

    /// `denormalize(@a)`.
    pub fn denormalize(&mut self, id: u32) -> Result<(), AggTableError> {
        self.normalize(id, 1)
    }

    /// The normalization factor of `id`.
    pub fn normal(&self, id: u32) -> u64 {
        self.aggs.get(&id).map_or(1, |s| s.normal)
    }

    /// The entries of `id` in dtrace(1M)'s order: by value (per function, see
    /// [`value_order`]) then by key, or the other way round.
    pub fn sorted(&self, id: u32, order: SortOrder) -> Result<Vec<EntryRef<'_>>, AggTableError> {
        let (def, st) = self.state(id)?;
        let e = &st.entries;
        // The first key element, when an integer, is decoded once (as it compares) rather
        // than at every comparison: the common keys (pid, cpu, arg2) then sort on two
        // integers, and key_cmp_from only breaks ties of those. It is mapped to a u64 of
        // the same order (signed: the sign bit flipped).
        let first = key_kinds(&def.keys).next().flatten();
        let k0 = |key: &KeyRef<'_>| match key.elems().next() {
            Some(KeyElem::Int(x)) => match first {
                Some(KeyKind::Int { signed: false, .. }) => x,
                _ => x ^ (1 << 63),
            },
            _ => 0,
        };
        let vals: Vec<(SortVal, u64, u32)> = (0..e.len())
            .filter_map(|i| {
                let key = KeyRef::new(e.key(i)).ok()?;
                Some((sort_val(&def.func, e.value(i)), k0(&key), i as u32))
            })
            .collect();
        // The values of one aggregation are all of one kind; scalars that fit in 64 bits
        // (all but huge avg/stddev) sort as a u64 of the same order, the rest as they are.
        let small = |v: &SortVal| match *v {
            SortVal::Scalar(x) => i64::try_from(x).ok().map(|x| x as u64 ^ (1 << 63)),
            SortVal::Hist(..) => None,
        };
        let order_of = if vals.iter().all(|v| small(&v.0).is_some()) {
            let mut v: Vec<(u64, u64, u32)> = vals
                .iter()
                .map(|&(sv, k, i)| (small(&sv).unwrap_or(0), k, i))
                .collect();
            sort_entries(&mut v, e, &def.keys, order);
            v.into_iter().map(|x| x.2).collect::<Vec<u32>>()
        } else {
            let mut v = vals;
            sort_entries(&mut v, e, &def.keys, order);
            v.into_iter().map(|x| x.2).collect()
        };
        Ok(order_of
            .into_iter()
            .filter_map(|i| {
                Some(EntryRef {
                    key: KeyRef::new(e.key(i as usize)).ok()?,
                    values: e.value(i as usize),
                })
            })
            .collect())
    }

    /// `printa(@a)` with the default format, appended to `out`; marks `id` printed.
    pub fn printa(
        &mut self,
        id: u32,
        order: SortOrder,
        out: &mut String,
    ) -> Result<(), AggTableError> {
        {
            let (def, st) = self.state(id)?;
            out.push('\n');
            for e in self.sorted(id, order)? {
                render_entry(def, &e, st.normal, out);
            }
        }
        self.state_mut(id)?.1.printed = true;
        Ok(())
    }

    /// `printa(format, @a)`: one line per entry through a printf-like format whose
    /// conversions take the key members in order and whose `%@` conversion takes the
    /// value (see [`format_entry`]); marks `id` printed.
    pub fn printa_format(
        &mut self,
        id: u32,
        format: &str,
        order: SortOrder,
        out: &mut String,
    ) -> Result<(), AggTableError> {
        {
            let (def, st) = self.state(id)?;
            for e in self.sorted(id, order)? {
                format_entry(def, &e, st.normal, format, out);
            }
        }
        self.state_mut(id)?.1.printed = true;
        Ok(())
    }

    /// `printa(format, @a, @b, ...)`: one line per key of any of `ids`, in the order of the
    /// first aggregation's values (then the keys it lacks, in the next one's order), each `%@` taking the next
    /// aggregation's value; marks them printed.
    pub fn printa_multi(
        &mut self,
        ids: &[u32],
        format: &str,
        order: SortOrder,
        out: &mut String,
    ) -> Result<(), AggTableError> {
        let Some(&first) = ids.first() else {
            return Ok(());
        };
        for &id in ids {
            self.state_mut(id)?.1.entries.index();
        }
        {
            let mut keys: Vec<Vec<u8>> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            // aggsortpos: that aggregation's order first, then the others' for its missing keys.
            let pos = if order.pos < ids.len() { order.pos } else { 0 };
            let by = std::iter::once(ids[pos]).chain(
                ids.iter()
                    .enumerate()
                    .filter(|(i, _)| *i != pos)
                    .map(|(_, id)| *id),
            );
            for id in by {
                for e in self.sorted(id, order)? {
                    if seen.insert(e.key.bytes().to_vec()) {
                        keys.push(e.key.bytes().to_vec());
                    }
                }
            }
            let (def0, _) = self.state(first)?;
            let mut states = Vec::new();
            for &id in ids {
                states.push(self.state(id)?);
            }
            for k in &keys {
                let Ok(key) = KeyRef::new(k) else { continue };
                let vals: Vec<(&AggDef, Option<&[u64]>, u64)> = states
                    .iter()
                    .map(|(d, st)| {
                        (
                            *d,
                            st.entries.find(key_hash(k), k).map(|i| st.entries.value(i)),
                            st.normal,
                        )
                    })
                    .collect();
                format_entry_multi(&key, &def0.keys, &vals, format, out);
            }
        }
        for &id in ids {
            self.state_mut(id)?.1.printed = true;
        }
        Ok(())
    }

    /// What dtrace(1M) does at exit: every aggregation not printed yet, in id order, sorted
    /// by value, with the default format.
    pub fn print_unprinted(&mut self, order: SortOrder, out: &mut String) {
        let ids: Vec<u32> = self
            .aggs
            .iter()
            .filter(|(_, s)| !s.printed)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            // Every id of `aggs` is in the dictionary.
            let _ = self.printa(id, order, out);
        }
    }
}

/// [`AggTable::merge_record`] into `st`, the state of `def`'s aggregation; `scratch` holds
/// value words that do not fit on the stack.
fn merge_into(
    def: &AggDef,
    st: &mut AggState,
    scratch: &mut Vec<u64>,
    r: &Record<'_>,
) -> Result<(), AggTableError> {
    let func = def.func;
    let nw = func.value_words();
    if r.value_words() != nw {
        return Err(AggTableError::ValueLength(r.agg_id));
    }
    let kb = r.key.bytes();
    let desc = kb.first_chunk::<8>().copied();
    let layout_ok = &mut st.layout_ok;
    let mut check = || {
        if desc.is_some() && *layout_ok == desc {
            return Ok(());
        }
        if !key_matches_layout(&r.key, &def.keys) {
            return Err(AggTableError::KeyLayout(r.agg_id));
        }
        *layout_ok = desc;
        Ok(())
    };
    if st.fresh {
        // A new key: merging into the initial value gives the record's value for every
        // function (add to zero, min/max against the extreme), so it is copied.
        check()?;
        let e = &mut st.entries;
        e.spans.push((e.keys.len() as u32, kb.len() as u32));
        e.keys.extend_from_slice(kb);
        e.vals.extend(r.values());
        return Ok(());
    }
    let mut small = [0u64; 4];
    let src: &[u64] = if nw <= small.len() {
        for (d, w) in small.iter_mut().zip(r.values()) {
            *d = w;
        }
        &small[..nw]
    } else {
        scratch.clear();
        scratch.extend(r.values());
        scratch
    };
    let i = st
        .entries
        .find_or_insert(key_hash(kb), kb, check, |v| func.init(v))?;
    func.merge(st.entries.value_mut(i), src)
        .map_err(|_| AggTableError::ValueLength(r.agg_id))
}

/// Appends to `st`, fresh, the run of records after `r` that share its header and key
/// descriptor when its key is all integers ([`Records::take_run`]); how many it took.
fn append_run(st: &mut AggState, recs: &mut Records<'_>, r: &Record<'_>) -> usize {
    let kb = r.key.bytes();
    let Some(&desc) = kb.first_chunk::<8>() else {
        return 0;
    };
    let nw = r.value_words();
    let len = RECORD_HEADER_BYTES + kb.len() + 8 * nw;
    let mut hdr = [0u8; RECORD_HEADER_BYTES];
    for (i, w) in [len, r.agg_id as usize, kb.len() / 8, nw]
        .iter()
        .enumerate()
    {
        hdr[4 * i..4 * i + 4].copy_from_slice(&(*w as u32).to_le_bytes());
    }
    let run = recs.take_run(&hdr, u64::from_le_bytes(desc));
    let n = run.len() / len;
    let e = &mut st.entries;
    e.spans.reserve(n);
    e.keys.reserve(n * kb.len());
    e.vals.reserve(n * nw);
    for rec in run.chunks_exact(len) {
        let (key, vals) = rec[RECORD_HEADER_BYTES..].split_at(kb.len());
        e.spans.push((e.keys.len() as u32, key.len() as u32));
        e.keys.extend_from_slice(key);
        // As in `merge_into`: a new key's merged value is the record's.
        e.vals.extend(vals.chunks_exact(8).map(|w| {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            u64::from_le_bytes(a)
        }));
    }
    n
}

/// Sorts `v`, (value, first key element, entry) triples of `e`, in dtrace(1M)'s `order`:
/// by value then key, or the other way round; the first key element decides only when
/// the keys compare from it, the whole keys only break its ties.
fn sort_entries<V: Ord + Copy>(
    v: &mut [(V, u64, u32)],
    e: &Entries,
    layout: &[KeyField],
    order: SortOrder,
) {
    let keys = |a: u32, b: u32, from: usize| match (
        KeyRef::new(e.key(a as usize)),
        KeyRef::new(e.key(b as usize)),
    ) {
        (Ok(x), Ok(y)) => key_cmp_from(&x, &y, layout, from),
        _ => Ordering::Equal,
    };
    let full = |a: &(V, u64, u32), b: &(V, u64, u32)| {
        let kc = || match order.keypos {
            0 => a.1.cmp(&b.1).then_with(|| keys(a.2, b.2, 0)),
            pos => keys(a.2, b.2, pos),
        };
        if order.by_key {
            kc().then_with(|| a.0.cmp(&b.0))
        } else {
            a.0.cmp(&b.0).then_with(kc)
        }
    };
    // The common orders sort on the integers alone, then only the runs they leave tied
    // go through the whole keys: most keys differ in their first element.
    match (order.keypos, order.by_key) {
        (0, false) => {
            v.sort_unstable_by_key(|a| (a.0, a.1));
            sort_runs(v, |a, b| (a.0, a.1) == (b.0, b.1), full);
        }
        (0, true) => {
            v.sort_unstable_by_key(|a| (a.1, a.0));
            sort_runs(v, |a, b| a.1 == b.1, full);
        }
        _ => v.sort_unstable_by(full),
    }
    // Distinct keys never compare equal: the reverse order is the sorted order reversed.
    if order.reverse {
        v.reverse();
    }
}

/// Sorts with `full` every run of neighbours of `v` that `tied` says are equal.
fn sort_runs<T>(
    v: &mut [T],
    tied: impl Fn(&T, &T) -> bool,
    full: impl Fn(&T, &T) -> Ordering + Copy,
) {
    let mut i = 0;
    while i < v.len() {
        let mut j = i + 1;
        while j < v.len() && tied(&v[i], &v[j]) {
            j += 1;
        }
        if j - i > 1 {
            v[i..j].sort_unstable_by(full);
        }
        i = j;
    }
}

pub(crate) fn key_kinds(keys: &[KeyField]) -> impl Iterator<Item = Option<KeyKind>> + '_ {
    keys.iter()
        .map(|k| Some(k.kind))
        .chain(std::iter::repeat(None))
}

fn key_matches_layout(key: &KeyRef<'_>, layout: &[KeyField]) -> bool {
    key.len() == layout.len()
        && key.elems().zip(layout).all(|(e, f)| {
            matches!(
                (e, f.kind),
                (KeyElem::Int(_), KeyKind::Int { .. })
                    | (KeyElem::Str(_), KeyKind::Str | KeyKind::Stack)
            )
        })
}

/// The value an entry sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortVal {
    /// Scalars: the printed value (avg: sum / count; stddev: DTrace's stddev).
    Scalar(i128),
    /// Histograms: the sum of bucket value × count, then the count at zero.
    Hist(i128, i64),
}

/// The sort value of an entry, as dtrace(1M) compares aggregation values.
pub fn value_order(func: &AggFunc, values: &[u64]) -> SortVal {
    sort_val(func, values)
}

fn sort_val(func: &AggFunc, v: &[u64]) -> SortVal {
    if let Some(s) = func.scalar(v, 1) {
        return SortVal::Scalar(s);
    }
    let v = func.buckets_of(v);
    let mut total: i128 = 0;
    let mut zero: i64 = 0;
    let mut add = |weight: i64, count: u64| {
        total = total.saturating_add((weight as i128).saturating_mul(count as i64 as i128));
        if weight == 0 {
            zero = count as i64;
        }
    };
    match func {
        AggFunc::Quantize => {
            for (b, c) in v.iter().enumerate() {
                add(quantize_bucket_value(b), *c);
            }
        }
        AggFunc::Lquantize(p) => {
            // Underflow weighs base - 1, overflow the top of the last level plus one.
            let n = v.len();
            for (b, c) in v.iter().enumerate() {
                let w = if b == 0 {
                    p.base() - 1
                } else if b == n - 1 {
                    p.base() + p.levels() as i64 * p.step() + 1
                } else {
                    p.base() + (b as i64 - 1) * p.step()
                };
                add(w, *c);
            }
        }
        AggFunc::Llquantize(p) => {
            // A bucket weighs as its bound nearest to zero (the zero bucket as 0).
            for (b, c) in v.iter().enumerate() {
                let w = match p.bucket_range(b) {
                    _ if b == p.zero_bucket() => 0,
                    (Some(lo), _) if b > p.zero_bucket() => lo,
                    (_, Some(hi)) => hi,
                    _ => 0,
                };
                add(w, *c);
            }
        }
        _ => {}
    }
    SortVal::Hist(total, zero)
}

pub(crate) fn pow_i64(b: u64, e: u32) -> i64 {
    (0..e).fold(1i64, |a, _| a.saturating_mul(b as i64))
}

/// Key order from member `first` on, wrapping around (`aggsortkeypos`; a `first` beyond the
/// members compares from the first, as dtrace does), then by length.
fn key_cmp_from(a: &KeyRef<'_>, b: &KeyRef<'_>, layout: &[KeyField], first: usize) -> Ordering {
    let (na, nb) = (a.elems().count(), b.elems().count());
    let n = na.min(nb);
    let first = if first < n { first } else { 0 };
    let pairs = || a.elems().zip(b.elems()).zip(key_kinds(layout));
    pairs()
        .skip(first)
        .chain(pairs().take(first))
        .map(|((x, y), f)| match (x, y) {
            (KeyElem::Int(x), KeyElem::Int(y)) => match f {
                Some(KeyKind::Int { signed: false, .. }) => x.cmp(&y),
                _ => (x as i64).cmp(&(y as i64)),
            },
            (KeyElem::Str(x), KeyElem::Str(y)) => x.cmp(y),
            (KeyElem::Int(_), KeyElem::Str(_)) => Ordering::Less,
            (KeyElem::Str(_), KeyElem::Int(_)) => Ordering::Greater,
        })
        .find(|o| o.is_ne())
        .unwrap_or_else(|| na.cmp(&nb))
}
