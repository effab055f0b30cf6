//! `--oformat json`: aggregations as JSON lines, and the tool's one string escaper.

use super::int_text;
use crate::agg::{key_kinds, AggTable, KeyField, KeyKind, SortOrder};
use crate::output::text::print_range;
use oxtrace_core::agg::KeyElem;
use std::fmt::Write as _;

impl AggTable {
    /// Every aggregation as JSON lines (`--oformat json`), one object a line, in id order: the data
    /// `printa` shows, in the same order. See `Documentation/output.rst` for the schema.
    pub fn to_json(&self, order: SortOrder) -> String {
        let mut o = String::new();
        for def in self.dictionary().iter() {
            self.agg_json(def.id, order, &mut o);
        }
        o
    }

    /// Aggregation `id` as one JSON object on one line (with its newline), `"type":
    /// "aggregation"`; nothing if the dictionary does not know `id`.
    pub fn agg_json(&self, id: u32, order: SortOrder, o: &mut String) {
        let Some(def) = self.dictionary().get(id) else {
            return;
        };
        let normal = self.normal(def.id);
        o.push_str("{\"type\":\"aggregation\",\"name\":");
        json_str(o, def.name.as_bytes());
        let _ = write!(
            o,
            ",\"id\":{},\"function\":\"{}\",\"normal\":{},\"keys\":[",
            def.id,
            def.func.kind().name(),
            normal
        );
        let names = key_names(&def.keys);
        for (j, k) in names.iter().enumerate() {
            if j > 0 {
                o.push(',');
            }
            json_str(o, k.as_bytes());
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
            o.push_str("{\"key\":{");
            for (n, (el, f)) in e.key.elems().zip(key_kinds(&def.keys)).enumerate() {
                if n > 0 {
                    o.push(',');
                }
                json_str(o, names.get(n).map_or("?", |s| s.as_str()).as_bytes());
                o.push(':');
                match el {
                    KeyElem::Int(v) => {
                        let _ = write!(o, "{}", int_text(v, f));
                    }
                    KeyElem::Str(s) if f == Some(KeyKind::Stack) => {
                        o.push('[');
                        for (i, frame) in crate::output::symbols::frames(s).iter().enumerate() {
                            if i > 0 {
                                o.push(',');
                            }
                            json_str(o, frame.as_bytes());
                        }
                        o.push(']');
                    }
                    KeyElem::Str(s) => json_str(o, s),
                }
            }
            o.push('}');
            if let Some(v) = def.func.scalar(e.values, normal) {
                let _ = write!(o, ",\"value\":{v}");
            } else {
                let buckets = def.func.buckets_of(e.values);
                let count = buckets.iter().fold(0i64, |a, c| a.wrapping_add(*c as i64));
                let sum = def.func.hist_sum(e.values).unwrap_or(0);
                let _ = write!(o, ",\"count\":{count},\"sum\":{sum},\"buckets\":[");
                let (first, last) = print_range(&def.func, e.values);
                for (b, n) in buckets.iter().enumerate().take(last + 1).skip(first) {
                    if b > first {
                        o.push(',');
                    }
                    let (lo, hi) = def.func.bucket_range(b).unwrap_or((None, None));
                    let _ = write!(
                        o,
                        "{{\"min\":{},\"max\":{},\"count\":{}}}",
                        opt_json(lo),
                        opt_json(hi),
                        *n as i64 / normal as i64
                    );
                }
                o.push(']');
            }
            o.push('}');
        }
        o.push_str("]}\n");
    }
}

/// The JSON member names of a key tuple: each member's D expression, made unique (`arg0`,
/// `arg0#2`) because a JSON object's names should be.
fn key_names(keys: &[KeyField]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(keys.len());
    for k in keys {
        let mut name = k.name.clone();
        let mut n = 1;
        while out.contains(&name) {
            n += 1;
            name = format!("{}#{n}", k.name);
        }
        out.push(name);
    }
    out
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

#[cfg(test)]
mod tests {
    use super::json_str;

    #[test]
    fn strings_escape_quotes_and_control_characters() {
        let mut o = String::new();
        json_str(&mut o, b"a\"b\n");
        assert_eq!(o, "\"a\\\"b\\n\"");
    }
}
