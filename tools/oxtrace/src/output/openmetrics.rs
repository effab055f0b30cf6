//! OpenMetrics text exposition of the aggregation table (`oxtrace exporter`).

use super::int_text;
use crate::agg::{key_kinds, AggTable, KeyField, KeyKind, SortOrder};
use crate::output::text::print_range;
use oxtrace_core::agg::{AggFunc, KeyElem};
use std::fmt::Write as _;

impl AggTable {
    /// The whole table as OpenMetrics text exposition: `count()` as a counter, the other
    /// scalars as gauges, the quantize family as histograms with cumulative `le` buckets
    /// (`le` = the bucket's inclusive upper bound); ends with `# EOF`.
    pub fn to_openmetrics(&self, prefix: &str) -> String {
        let mut o = String::new();
        for def in self.dictionary().iter() {
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
                    ..SortOrder::default()
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
                        KeyElem::Str(s) if f == Some(KeyKind::Stack) => {
                            // One label value: the frames, outermost last, `;`-separated.
                            let frames = crate::output::symbols::frames(s);
                            om_escape(&mut lab, frames.join(";").as_bytes());
                        }
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
                let buckets = def.func.buckets_of(e.values);
                let (first, last) = print_range(&def.func, e.values);
                let mut cum: i64 = buckets[..first].iter().map(|c| *c as i64).sum();
                // OpenMetrics wants a histogram's sum to behave as a counter: with a bucket
                // of negative bound shown it has no `_sum`. A negative-bound bucket whose
                // cumulative count is still 0 says nothing and is left out.
                let mut negative = false;
                for (b, n) in buckets.iter().enumerate().take(last + 1).skip(first) {
                    cum = cum.wrapping_add(*n as i64);
                    match def.func.bucket_range(b) {
                        Some((_, Some(hi))) => {
                            if hi < 0 && cum == 0 {
                                continue;
                            }
                            negative |= hi < 0;
                            let _ = writeln!(
                                o,
                                "{name}_bucket{{{lab}{sep}le=\"{hi}\"}} {}",
                                cum / normal as i64
                            );
                        }
                        _ => break,
                    }
                }
                let total: i64 = buckets.iter().fold(0i64, |a, c| a.wrapping_add(*c as i64));
                let _ = writeln!(
                    o,
                    "{name}_bucket{{{lab}{sep}le=\"+Inf\"}} {}",
                    total / normal as i64
                );
                let braces = if lab.is_empty() {
                    String::new()
                } else {
                    format!("{{{lab}}}")
                };
                let _ = writeln!(o, "{name}_count{braces} {}", total / normal as i64);
                if let (false, Some(sum)) = (negative, def.func.hist_sum(e.values)) {
                    let _ = writeln!(o, "{name}_sum{braces} {}", sum / normal as i64);
                }
            }
        }
        o.push_str("# EOF\n");
        o
    }
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
