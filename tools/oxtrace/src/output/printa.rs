//! `printa()` and the aggregations printed at the end of the run, in DTrace's text: the
//! default format and printf-like formats, over one aggregation or several.

use super::text::{format_entry, format_entry_multi, render_entry};
use crate::agg::{AggDef, AggTable, AggTableError, SortOrder};
use oxtrace_core::agg::KeyRef;

impl AggTable {
    /// `printa(@a)` with the default format, appended to `out`; marks `id` printed.
    pub fn printa(
        &mut self,
        id: u32,
        order: SortOrder,
        out: &mut String,
    ) -> Result<(), AggTableError> {
        {
            let (def, normal) = (self.def(id)?, self.normal(id));
            out.push('\n');
            for e in self.sorted(id, order)? {
                render_entry(def, &e, normal, out);
            }
        }
        self.set_printed(id)
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
            let (def, normal) = (self.def(id)?, self.normal(id));
            for e in self.sorted(id, order)? {
                format_entry(def, &e, normal, format, out);
            }
        }
        self.set_printed(id)
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
            self.index(id)?;
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
            let def0 = self.def(first)?;
            let mut states = Vec::new();
            for &id in ids {
                states.push((id, self.def(id)?, self.normal(id)));
            }
            for k in &keys {
                let Ok(key) = KeyRef::new(k) else { continue };
                let vals: Vec<(&AggDef, Option<&[u64]>, u64)> = states
                    .iter()
                    .map(|&(id, d, normal)| (d, self.lookup(id, k), normal))
                    .collect();
                format_entry_multi(&key, &def0.keys, &vals, format, out);
            }
        }
        for &id in ids {
            self.set_printed(id)?;
        }
        Ok(())
    }

    /// What dtrace(1M) does at exit: every aggregation not printed yet, in id order, sorted
    /// by value, with the default format.
    pub fn print_unprinted(&mut self, order: SortOrder, out: &mut String) {
        for id in self.unprinted() {
            // Every id of `aggs` is in the dictionary.
            let _ = self.printa(id, order, out);
        }
    }
}
