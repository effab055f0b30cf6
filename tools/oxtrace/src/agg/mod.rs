//! The user-level side of aggregations: the dictionary and the table that every CPU's
//! snapshot is merged into.
//!
//! Snapshots of every CPU's aggregation buffer (`oxtrace_core::agg` record streams) are
//! merged into one user-level hash table per aggregation, through a [`Dictionary`] built at
//! load time (aggregation id → name, function, key layout, parameters), with each
//! function's merge rule ([`AggFunc::merge`]). On top: the D actions `clear`, `trunc`,
//! `normalize` and `denormalize`, and sorting by value like dtrace(1M). The model only:
//! `printa`, histograms, JSON and OpenMetrics text are rendered in [`crate::output`].
//!
//! The table and its types are here; its entries' storage in `entries`, the merge of
//! snapshots in `merge`, the order in `sort` and the D actions in `actions`.

mod actions;
mod entries;
mod merge;
mod sort;

pub use entries::KeyHasher;
pub use sort::{value_order, SortOrder, SortVal};

use entries::{key_hash, Entries};
use oxtrace_core::agg::{AggFunc, KeyElem, KeyRef, ParseError};
use std::collections::BTreeMap;
use std::fmt;

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

/// The user-level dictionary: aggregation id → definition: how each id's records are read and merged.
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

/// The user-level aggregation table: one entry per key, merged from every CPU.
#[derive(Debug)]
pub struct AggTable {
    dict: Dictionary,
    aggs: BTreeMap<u32, AggState>,
    scratch: Vec<u64>,
    drops: u64,
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
        self.lookup(id, &kb)
    }

    /// The value words of the entry of encoded key `kb` in aggregation `id`.
    pub fn lookup(&self, id: u32, kb: &[u8]) -> Option<&[u64]> {
        let e = &self.aggs.get(&id)?.entries;
        e.find(key_hash(kb), kb).map(|i| e.value(i))
    }

    /// Readies aggregation `id` for many [`Self::lookup`]s (its entries hashed).
    pub fn index(&mut self, id: u32) -> Result<(), AggTableError> {
        self.state_mut(id)?.1.entries.index();
        Ok(())
    }

    /// The definition of aggregation `id`.
    pub fn def(&self, id: u32) -> Result<&AggDef, AggTableError> {
        Ok(self.state(id)?.0)
    }

    /// Marks aggregation `id` printed: the end of the run prints only the others.
    pub fn set_printed(&mut self, id: u32) -> Result<(), AggTableError> {
        self.state_mut(id)?.1.printed = true;
        Ok(())
    }

    /// The aggregations not printed yet, in id order.
    pub fn unprinted(&self) -> Vec<u32> {
        self.aggs
            .iter()
            .filter(|(_, s)| !s.printed)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The normalization factor of `id`.
    pub fn normal(&self, id: u32) -> u64 {
        self.aggs.get(&id).map_or(1, |s| s.normal)
    }
}

pub(crate) fn key_kinds(keys: &[KeyField]) -> impl Iterator<Item = Option<KeyKind>> + '_ {
    keys.iter()
        .map(|k| Some(k.kind))
        .chain(std::iter::repeat(None))
}
