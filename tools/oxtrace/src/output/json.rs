//! `-o json`: the aggregation table as one JSON document, and the tool's one string escaper.

use super::int_text;
use crate::agg::{key_kinds, AggTable, SortOrder};
use crate::output::text::print_range;
use oxtrace_core::agg::KeyElem;
use std::fmt::Write as _;

impl AggTable {
    /// The whole table as JSON (`-o json`): the data `printa` shows, in the same order.
    pub fn to_json(&self, order: SortOrder) -> String {
        let mut o = String::from("{\"aggregations\":[");
        for (i, def) in self.dictionary().iter().enumerate() {
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
}

fn opt_json(v: Option<i64>) -> String {
    v.map_or_else(|| "null".into(), |v| v.to_string())
}

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
