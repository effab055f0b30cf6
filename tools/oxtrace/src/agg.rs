//! The user-level side of aggregations (US 8,005,794, claims 12-14 and 19-23).
//!
//! Snapshots of every CPU's aggregation buffer (`oxtrace_core::agg` record streams) are
//! merged into one user-level hash table per aggregation, through a [`Dictionary`] built at
//! load time (aggregation id → name, function, key layout, parameters), with each
//! function's merge rule ([`AggFunc::merge`]). On top: the D actions `clear`, `trunc`,
//! `normalize` and `denormalize`, sorting by value like dtrace(1M), and output as DTrace's
//! default `printa`, custom `printa` formats, ASCII histograms, JSON and OpenMetrics text.

use oxtrace_core::agg::{
    parse_snapshot, quantize_bucket_value, AggFunc, KeyElem, KeyRef, ParseError, Record,
    QUANTIZE_ZERO,
};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::hash::{BuildHasherDefault, Hasher};

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

type KeyMap = HashMap<Box<[u8]>, Box<[u64]>, BuildHasherDefault<KeyHasher>>;

/// The merged data of one aggregation.
#[derive(Debug, Default)]
struct AggState {
    /// Encoded key (snapshot byte form) → value words.
    entries: KeyMap,
    normal: u64,
    printed: bool,
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
                        normal: 1,
                        ..Default::default()
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
            for r in recs {
                self.merge_record(&r?)?;
                st.records += 1;
            }
            bytes = rest;
        }
        Ok(st)
    }

    /// Merges one data set: find the entry of its key (hash table), create it from the
    /// function's initial value if absent, apply the merge rule (claim 12).
    pub fn merge_record(&mut self, r: &Record<'_>) -> Result<(), AggTableError> {
        let def = self
            .dict
            .get(r.agg_id)
            .ok_or(AggTableError::UnknownAggregation(r.agg_id))?;
        let func = def.func;
        if r.value_words() != func.value_words() {
            return Err(AggTableError::ValueLength(r.agg_id));
        }
        self.scratch.clear();
        self.scratch.extend(r.values());
        let st = self
            .aggs
            .get_mut(&r.agg_id)
            .ok_or(AggTableError::UnknownAggregation(r.agg_id))?;
        let kb = r.key.bytes();
        if let Some(v) = st.entries.get_mut(kb) {
            func.merge(v, &self.scratch)
                .map_err(|_| AggTableError::ValueLength(r.agg_id))?;
            return Ok(());
        }
        if !key_matches_layout(&r.key, &def.keys) {
            return Err(AggTableError::KeyLayout(r.agg_id));
        }
        let mut v = vec![0u64; func.value_words()].into_boxed_slice();
        func.init(&mut v);
        func.merge(&mut v, &self.scratch)
            .map_err(|_| AggTableError::ValueLength(r.agg_id))?;
        st.entries.insert(kb.into(), v);
        Ok(())
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
        self.aggs.get(&id)?.entries.get(&kb[..]).map(|v| &v[..])
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
        let (_, st) = self.state_mut(id)?;
        let mut kept = KeyMap::default();
        for k in keep {
            if let Some(v) = st.entries.remove(&k) {
                kept.insert(k, v);
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
        let mut v: Vec<(SortVal, EntryRef<'_>)> = st
            .entries
            .iter()
            .filter_map(|(k, vals)| {
                let key = KeyRef::new(k).ok()?;
                Some((sort_val(&def.func, vals), EntryRef { key, values: vals }))
            })
            .collect();
        v.sort_unstable_by(|a, b| {
            let kc = || key_cmp(&a.1.key, &b.1.key, &def.keys);
            let o = if order.by_key {
                kc().then_with(|| a.0.cmp(&b.0))
            } else {
                a.0.cmp(&b.0).then_with(kc)
            };
            if order.reverse {
                o.reverse()
            } else {
                o
            }
        });
        Ok(v.into_iter().map(|(_, e)| e).collect())
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

    /// The whole table as JSON (`-o json`): the data `printa` shows, in the same order.
    pub fn to_json(&self, order: SortOrder) -> String {
        let mut o = String::from("{\"aggregations\":[");
        for (i, def) in self.dict.iter().enumerate() {
            let normal = self.normal(def.id);
            if i > 0 {
                o.push(',');
            }
            o.push_str("{\"name\":");
            json_str(&mut o, def.name.as_bytes());
            let _ = write!(
                o,
                ",\"id\":{},\"function\":\"{}\",\"normal\":{},\"keys\":[",
                def.id,
                def.func.kind().name(),
                normal
            );
            for (j, k) in def.keys.iter().enumerate() {
                if j > 0 {
                    o.push(',');
                }
                json_str(&mut o, k.name.as_bytes());
            }
            o.push_str("],\"entries\":[");
            for (j, e) in self
                .sorted(def.id, order)
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                if j > 0 {
                    o.push(',');
                }
                o.push_str("{\"keys\":[");
                for (n, (el, f)) in e.key.elems().zip(key_kinds(&def.keys)).enumerate() {
                    if n > 0 {
                        o.push(',');
                    }
                    match el {
                        KeyElem::Int(v) => {
                            let _ = write!(o, "{}", int_text(v, f));
                        }
                        KeyElem::Str(s) => json_str(&mut o, s),
                    }
                }
                o.push(']');
                if let Some(v) = def.func.scalar(e.values, normal) {
                    let _ = write!(o, ",\"value\":{v}");
                } else {
                    o.push_str(",\"buckets\":[");
                    let (first, last) = print_range(&def.func, e.values);
                    for b in first..=last {
                        if b > first {
                            o.push(',');
                        }
                        let (lo, hi) = def.func.bucket_range(b).unwrap_or((None, None));
                        let _ = write!(
                            o,
                            "{{\"min\":{},\"max\":{},\"count\":{}}}",
                            opt_json(lo),
                            opt_json(hi),
                            e.values[b] as i64 / normal as i64
                        );
                    }
                    o.push(']');
                }
                o.push('}');
            }
            o.push_str("]}");
        }
        o.push_str("]}\n");
        o
    }

    /// The whole table as OpenMetrics text exposition: `count()` as a counter, the other
    /// scalars as gauges, the quantize family as histograms with cumulative `le` buckets
    /// (`le` = the bucket's inclusive upper bound); ends with `# EOF`.
    pub fn to_openmetrics(&self, prefix: &str) -> String {
        let mut o = String::new();
        for def in self.dict.iter() {
            let normal = self.normal(def.id);
            let name = metric_name(prefix, &def.name);
            let labels = label_names(&def.keys);
            let (ty, suffix) = match def.func {
                AggFunc::Count => ("counter", "_total"),
                f if f.is_histogram() => ("histogram", "_bucket"),
                _ => ("gauge", ""),
            };
            let _ = writeln!(o, "# TYPE {name} {ty}");
            let _ = writeln!(
                o,
                "# HELP {name} oxtrace aggregation @{} = {}()",
                def.name,
                def.func.kind().name()
            );
            let Ok(entries) = self.sorted(
                def.id,
                SortOrder {
                    by_key: true,
                    reverse: false,
                },
            ) else {
                continue;
            };
            for e in entries {
                let mut lab = String::new();
                for (n, (el, f)) in e.key.elems().zip(key_kinds(&def.keys)).enumerate() {
                    if n > 0 {
                        lab.push(',');
                    }
                    let _ = write!(lab, "{}=\"", labels[n]);
                    match el {
                        KeyElem::Int(v) => lab.push_str(&int_text(v, f)),
                        KeyElem::Str(s) => om_escape(&mut lab, s),
                    }
                    lab.push('"');
                }
                if let Some(v) = def.func.scalar(e.values, normal) {
                    let braces = if lab.is_empty() {
                        String::new()
                    } else {
                        format!("{{{lab}}}")
                    };
                    let _ = writeln!(o, "{name}{suffix}{braces} {v}");
                    continue;
                }
                let sep = if lab.is_empty() { "" } else { "," };
                let (first, last) = print_range(&def.func, e.values);
                let mut cum: i64 = e.values[..first].iter().map(|c| *c as i64).sum();
                for b in first..=last {
                    cum = cum.wrapping_add(e.values[b] as i64);
                    match def.func.bucket_range(b) {
                        Some((_, Some(hi))) => {
                            let _ = writeln!(
                                o,
                                "{name}_bucket{{{lab}{sep}le=\"{hi}\"}} {}",
                                cum / normal as i64
                            );
                        }
                        _ => break,
                    }
                }
                let total: i64 = e.values.iter().fold(0i64, |a, c| a.wrapping_add(*c as i64));
                let _ = writeln!(
                    o,
                    "{name}_bucket{{{lab}{sep}le=\"+Inf\"}} {}",
                    total / normal as i64
                );
            }
        }
        o.push_str("# EOF\n");
        o
    }
}

fn opt_json(v: Option<i64>) -> String {
    v.map_or_else(|| "null".into(), |v| v.to_string())
}

fn key_kinds(keys: &[KeyField]) -> impl Iterator<Item = Option<KeyKind>> + '_ {
    keys.iter()
        .map(|k| Some(k.kind))
        .chain(std::iter::repeat(None))
}

fn int_text(v: u64, kind: Option<KeyKind>) -> String {
    match kind {
        Some(KeyKind::Int { size, signed }) => {
            let bits = 8 * (size.clamp(1, 8) as u32);
            let v = if bits == 64 {
                v
            } else {
                v & ((1u64 << bits) - 1)
            };
            if signed {
                let sh = 64 - bits;
                (((v << sh) as i64) >> sh).to_string()
            } else {
                v.to_string()
            }
        }
        _ => (v as i64).to_string(),
    }
}

fn key_matches_layout(key: &KeyRef<'_>, layout: &[KeyField]) -> bool {
    key.len() == layout.len()
        && key.elems().zip(layout).all(|(e, f)| {
            matches!(
                (e, f.kind),
                (KeyElem::Int(_), KeyKind::Int { .. }) | (KeyElem::Str(_), KeyKind::Str)
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
            let mut labels = p.labels();
            let first = pow_i64(p.factor(), p.low());
            for (b, c) in v.iter().enumerate() {
                let w = if b == 0 {
                    first - 1
                } else {
                    labels.next().unwrap_or(i64::MAX)
                };
                add(w, *c);
            }
        }
        _ => {}
    }
    SortVal::Hist(total, zero)
}

fn pow_i64(b: u64, e: u32) -> i64 {
    (0..e).fold(1i64, |a, _| a.saturating_mul(b as i64))
}

fn key_cmp(a: &KeyRef<'_>, b: &KeyRef<'_>, layout: &[KeyField]) -> Ordering {
    for ((x, y), f) in a.elems().zip(b.elems()).zip(key_kinds(layout)) {
        let o = match (x, y) {
            (KeyElem::Int(x), KeyElem::Int(y)) => match f {
                Some(KeyKind::Int { signed: false, .. }) => x.cmp(&y),
                _ => (x as i64).cmp(&(y as i64)),
            },
            (KeyElem::Str(x), KeyElem::Str(y)) => x.cmp(y),
            (KeyElem::Int(_), KeyElem::Str(_)) => Ordering::Less,
            (KeyElem::Str(_), KeyElem::Int(_)) => Ordering::Greater,
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

// ---------------------------------------------------------------------------------------
// DTrace-style text.

/// DTrace's width of an integer key member of `size` bytes.
fn int_width(size: u8) -> usize {
    match size {
        1 => 3,
        2 => 5,
        4 => 8,
        _ => 16,
    }
}

fn render_key(def: &AggDef, key: &KeyRef<'_>, out: &mut String) {
    for (el, f) in key.elems().zip(key_kinds(&def.keys)) {
        match el {
            KeyElem::Int(v) => {
                let w = match f {
                    Some(KeyKind::Int { size, .. }) => int_width(size),
                    _ => 16,
                };
                let _ = write!(out, " {:>w$}", int_text(v, f));
            }
            KeyElem::Str(s) => {
                let _ = write!(out, "  {:<50}", String::from_utf8_lossy(s));
            }
        }
    }
}

/// One entry in the default `printa` format: the key members (`%16d` integers, `%-50s`
/// strings, each after a space), then ` %16d` for scalars or the histogram.
fn render_entry(def: &AggDef, e: &EntryRef<'_>, normal: u64, out: &mut String) {
    render_key(def, &e.key, out);
    render_value(&def.func, e.values, normal, out);
    out.push('\n');
}

fn render_value(func: &AggFunc, values: &[u64], normal: u64, out: &mut String) {
    match func.scalar(values, normal) {
        Some(v) => {
            let _ = write!(out, " {v:>16}");
        }
        None => render_histogram(func, values, normal, out),
    }
}

/// The buckets DTrace shows: from one before the first non-empty bucket to one after the
/// last, clamped; around the first buckets (quantize: around zero) when all are empty.
pub fn print_range(func: &AggFunc, data: &[u64]) -> (usize, usize) {
    let n = data.len();
    match data.iter().position(|c| *c != 0) {
        None => match func {
            AggFunc::Quantize => (QUANTIZE_ZERO - 1, QUANTIZE_ZERO + 1),
            AggFunc::Lquantize(_) => (0, 2.min(n - 1)),
            _ => (0, 1.min(n - 1)),
        },
        Some(first) => {
            let last = data.iter().rposition(|c| *c != 0).unwrap_or(first);
            (first.saturating_sub(1), (last + 1).min(n - 1))
        }
    }
}

/// The ASCII histogram of a quantize, lquantize or llquantize value, exactly as
/// dtrace(1M) prints it (header line, then `value |@@@@   count` lines).
pub fn render_histogram(func: &AggFunc, data: &[u64], normal: u64, out: &mut String) {
    if data.len() != func.value_words() || !func.is_histogram() {
        return;
    }
    let (first, last) = print_range(func, data);
    let mut total: u128 = 0;
    let (mut pos, mut neg) = (false, false);
    for c in &data[first..=last] {
        let c = *c as i64;
        pos |= c > 0;
        neg |= c < 0;
        total += c.unsigned_abs() as u128;
    }
    let _ = writeln!(
        out,
        "\n{:>16} {:>41} {:<9}",
        "value", "------------- Distribution -------------", "count"
    );
    let normal = normal.max(1) as i64;
    let line = |label: &str, c: u64, out: &mut String| {
        let _ = write!(out, "{label:>16} ");
        quant_line(c as i64, normal, total, pos, neg, out);
    };
    let labels: Vec<i64> = match func {
        AggFunc::Llquantize(p) => p.labels().collect(),
        _ => Vec::new(),
    };
    let nb = data.len();
    let label = |b: usize| -> String {
        match func {
            AggFunc::Lquantize(p) if b == 0 => format!("< {}", p.base()),
            AggFunc::Lquantize(p) if b == p.levels() + 1 => {
                format!(">= {}", p.base() + p.levels() as i64 * p.step())
            }
            AggFunc::Lquantize(p) => (p.base() + (b as i64 - 1) * p.step()).to_string(),
            AggFunc::Llquantize(p) if b == 0 => format!("< {}", pow_i64(p.factor(), p.low())),
            AggFunc::Llquantize(_) => {
                let l = labels.get(b - 1).copied().unwrap_or(i64::MAX);
                if b == nb - 1 {
                    format!(">= {l}")
                } else {
                    l.to_string()
                }
            }
            _ => quantize_bucket_value(b).to_string(),
        }
    };
    for (b, c) in data.iter().enumerate().take(last + 1).skip(first) {
        line(&label(b), *c, out);
    }
}

/// One bar: 40 columns of `@` scaled to the total (rounded), or two half bars around a
/// centre line when the histogram has both positive and negative counts.
fn quant_line(val: i64, normal: i64, total: u128, pos: bool, neg: bool, out: &mut String) {
    let depth = |len: u128| -> usize {
        if total == 0 {
            0
        } else {
            ((2 * val.unsigned_abs() as u128 * len + total) / (2 * total)) as usize
        }
    };
    let shown = val / normal;
    if !neg {
        let d = if pos { depth(40) } else { 0 };
        let _ = writeln!(out, "|{}{} {shown:<9}", "@".repeat(d), " ".repeat(40 - d));
    } else if !pos {
        let d = depth(40);
        let _ = writeln!(out, "{}{}| {shown:<9}", " ".repeat(40 - d), "@".repeat(d));
    } else {
        let d = depth(20);
        if val <= 0 {
            let _ = writeln!(
                out,
                "{}{}|{} {shown:<9}",
                " ".repeat(20 - d),
                "@".repeat(d),
                " ".repeat(20)
            );
        } else {
            let _ = writeln!(
                out,
                "{}|{}{} {shown:<9}",
                " ".repeat(20),
                "@".repeat(d),
                " ".repeat(20 - d)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Custom printa formats.

/// One entry through a `printa` format: `%d %i %u %x %X %o %c %s` (flags `-+ 0#`, width,
/// precision, length modifiers ignored) take the key members in order; the first
/// conversion with `@` (`%@d`, `%@8u`, ...) takes the value (a histogram prints as
/// DTrace's histogram); `%%` is a percent sign. Without `%@` the value is not printed.
pub fn format_entry(def: &AggDef, e: &EntryRef<'_>, normal: u64, format: &str, out: &mut String) {
    let mut keys = e.key.elems().zip(key_kinds(&def.keys));
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '0' => spec.zero = true,
                '#' => spec.alt = true,
                '@' => spec.agg = true,
                _ => break,
            }
            chars.next();
        }
        spec.width = digits(&mut chars);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.prec = Some(digits(&mut chars).unwrap_or(0));
        }
        if chars.peek() == Some(&'@') {
            spec.agg = true;
            chars.next();
        }
        while matches!(chars.peek(), Some('l' | 'h' | 'z' | 'j' | 't' | 'L')) {
            chars.next();
        }
        let Some(conv) = chars.next() else {
            out.push('%');
            break;
        };
        if conv == '%' {
            out.push('%');
            continue;
        }
        if spec.agg {
            match def.func.scalar(e.values, normal) {
                Some(v) => spec.int(conv, v, out),
                None => render_histogram(&def.func, e.values, normal, out),
            }
            continue;
        }
        match keys.next() {
            Some((KeyElem::Int(v), f)) => {
                let signed = !matches!(f, Some(KeyKind::Int { signed: false, .. }));
                let v: i128 = if signed {
                    int_text(v, f).parse().unwrap_or(v as i64 as i128)
                } else {
                    int_text(v, f).parse().unwrap_or(v as i128)
                };
                if conv == 's' {
                    spec.pad(&v.to_string(), out);
                } else {
                    spec.int(conv, v, out);
                }
            }
            Some((KeyElem::Str(s), _)) => {
                let s = String::from_utf8_lossy(s);
                let s: String = match spec.prec {
                    Some(p) => s.chars().take(p).collect(),
                    None => s.into_owned(),
                };
                spec.pad(&s, out);
            }
            None => {}
        }
    }
}

fn digits(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<usize> {
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize));
        chars.next();
    }
    n
}

#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    zero: bool,
    alt: bool,
    agg: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

impl Spec {
    fn pad(&self, s: &str, out: &mut String) {
        let w = self.width.unwrap_or(0);
        let n = s.chars().count();
        if n >= w {
            out.push_str(s);
        } else if self.left {
            out.push_str(s);
            out.push_str(&" ".repeat(w - n));
        } else {
            out.push_str(&" ".repeat(w - n));
            out.push_str(s);
        }
    }

    fn int(&self, conv: char, v: i128, out: &mut String) {
        let (sign, mag) = match conv {
            'd' | 'i' => {
                let s = if v < 0 {
                    "-"
                } else if self.plus {
                    "+"
                } else if self.space {
                    " "
                } else {
                    ""
                };
                (s, v.unsigned_abs().to_string())
            }
            'x' => ("", format!("{:x}", v as u64)),
            'X' => ("", format!("{:X}", v as u64)),
            'o' => ("", format!("{:o}", v as u64)),
            'c' => ("", char::from_u32(v as u32).unwrap_or('?').to_string()),
            _ => ("", (v as u64).to_string()),
        };
        let mut mag = mag;
        if let Some(p) = self.prec {
            if mag.len() < p {
                mag = "0".repeat(p - mag.len()) + &mag;
            }
        }
        let prefix = match (self.alt, conv) {
            (true, 'x') if v != 0 => "0x",
            (true, 'X') if v != 0 => "0X",
            (true, 'o') if !mag.starts_with('0') => "0",
            _ => "",
        };
        let body_len = sign.len() + prefix.len() + mag.len();
        let w = self.width.unwrap_or(0);
        if self.zero && !self.left && self.prec.is_none() && body_len < w {
            out.push_str(sign);
            out.push_str(prefix);
            out.push_str(&"0".repeat(w - body_len));
            out.push_str(&mag);
        } else {
            self.pad(&format!("{sign}{prefix}{mag}"), out);
        }
    }
}

// ---------------------------------------------------------------------------------------
// JSON and OpenMetrics helpers.

/// Appends `s` as a JSON string literal (lossy on bad UTF-8); the tool's one escaper.
pub fn json_str(o: &mut String, s: &[u8]) {
    o.push('"');
    for c in String::from_utf8_lossy(s).chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
}

fn om_escape(o: &mut String, s: &[u8]) {
    for c in String::from_utf8_lossy(s).chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
}

fn sanitize(s: &str) -> String {
    let mut o: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if o.starts_with(|c: char| c.is_ascii_digit()) {
        o.insert(0, '_');
    }
    o
}

/// The OpenMetrics metric family name of aggregation `name`: `prefix_name`, sanitized;
/// the anonymous aggregation `@` is `prefix_agg`.
pub fn metric_name(prefix: &str, name: &str) -> String {
    let base = if name.is_empty() { "agg" } else { name };
    sanitize(&format!("{prefix}_{base}"))
}

fn label_names(keys: &[KeyField]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let mut n = sanitize(&k.name);
        if n.is_empty() || n == "le" || n.starts_with("__") || names.contains(&n) {
            n = format!("key{i}");
        }
        names.push(n);
    }
    names.resize(
        oxtrace_core::agg::KEY_MAX_ELEMS.max(keys.len()),
        String::new(),
    );
    for (i, n) in names.iter_mut().enumerate() {
        if n.is_empty() {
            *n = format!("key{i}");
        }
    }
    names
}
