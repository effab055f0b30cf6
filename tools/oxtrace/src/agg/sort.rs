//! The order of entries: dtrace(1M)'s, by value then key or by key then value, and the
//! `aggsort*` options that choose it.

use super::entries::Entries;
use super::{key_kinds, AggTable, AggTableError, EntryRef, KeyField, KeyKind};
use oxtrace_core::agg::{quantize_bucket_value, AggFunc, KeyElem, KeyRef};
use std::cmp::Ordering;
use std::collections::BTreeMap;

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

impl AggTable {
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
