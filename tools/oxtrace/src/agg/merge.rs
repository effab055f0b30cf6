//! Merging snapshot streams into the table, with each function's merge rule.

use super::entries::key_hash;
use super::{AggDef, AggState, AggTable, AggTableError, KeyField, KeyKind, MergeStats};
use oxtrace_core::agg::{
    parse_snapshot, KeyElem, KeyRef, Record, Records, SnapshotHeader, RECORD_HEADER_BYTES,
};

impl AggTable {
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
    /// function's initial value if absent, apply the merge rule.
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
