//! `--oformat folded`: aggregations keyed by stacks as folded stacks, the input of flamegraph.pl
//! and inferno (`inferno-flamegraph`): one line an entry, the frames from the outermost
//! to the innermost joined by `;`, a space, the value.
//!
//! Every key member becomes frames in key order: a stack (`stack()`, `ustack()`) its frames
//! outermost first, anything else its text as one frame, so `@[execname, ustack()]` puts
//! the process name at the root. Only aggregations with a stack in their key and a scalar
//! value (`count()`, `sum()`, ...) are printed, and only entries above zero: flame graphs
//! have no negative or histogram widths.

use super::int_text;
use crate::agg::{key_kinds, AggTable, KeyKind, SortOrder};
use oxtrace_core::agg::KeyElem;
use std::fmt::Write as _;

impl AggTable {
    /// Every aggregation with a stack key, folded (`--oformat folded`), in id order.
    pub fn to_folded(&self, order: SortOrder) -> String {
        let mut o = String::new();
        for def in self.dictionary().iter() {
            if !def.keys.iter().any(|k| k.kind == KeyKind::Stack) {
                continue;
            }
            let normal = self.normal(def.id);
            for e in self.sorted(def.id, order).unwrap_or_default() {
                let Some(v) = def.func.scalar(e.values, normal).filter(|v| *v > 0) else {
                    continue;
                };
                let mut frames: Vec<String> = Vec::new();
                for (el, f) in e.key.elems().zip(key_kinds(&def.keys)) {
                    match el {
                        KeyElem::Str(s) if f == Some(KeyKind::Stack) => {
                            frames.extend(crate::output::symbols::frames(s).into_iter().rev());
                        }
                        KeyElem::Str(s) => frames.push(String::from_utf8_lossy(s).into()),
                        KeyElem::Int(i) => frames.push(int_text(i, f)),
                    }
                }
                // A `;` or a line break inside a frame would split it.
                let line: Vec<String> =
                    frames.iter().map(|f| f.replace([';', '\n'], "_")).collect();
                if line.is_empty() {
                    o.push_str("[unknown]");
                } else {
                    o.push_str(&line.join(";"));
                }
                let _ = writeln!(o, " {v}");
            }
        }
        o
    }
}
