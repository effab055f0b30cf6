//! `--oformat folded`: aggregations keyed by stacks as folded stacks, the input of
//! flamegraph.pl and inferno (`inferno-flamegraph`): one line an entry, the frames from the
//! outermost to the innermost joined by `;`, a space, the value.
//!
//! Every key member becomes frames in key order: a stack (`stack()`, `ustack()`) its frames
//! outermost first, anything else its text as one frame, so `@[execname, ustack()]` puts
//! the process name at the root. Only aggregations with a stack in their key and a scalar
//! value (`count()`, `sum()`, ...) are printed, and only entries above zero: flame graphs
//! have no negative or histogram widths. `--oformat flamegraph` draws the same stacks
//! (`super::flamegraph`).

use crate::agg::{key_kinds, AggTable, KeyKind, SortOrder};
use oxtrace_core::agg::KeyElem;
use oxtrace_core::ustack::Decoded;
use std::fmt::Write as _;

/// Where a frame of a folded stack comes from: a flame graph colours each kind apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A frame of a kernel stack (`stack()`) or a kernel symbol (`sym()`, `func()`, ...).
    Kernel,
    /// A frame of a user stack (`ustack()`) or a user symbol (`usym()`, `ufunc()`, ...).
    User,
    /// Any other key member (`execname`, `pid`, ...).
    Other,
}

/// One entry of a stack aggregation, folded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldedStack {
    /// The aggregation's id.
    pub agg: u32,
    /// The frames, outermost first, with `;` and line breaks made `_`.
    pub frames: Vec<(String, FrameKind)>,
    /// The entry's value, above zero.
    pub value: i128,
}

impl AggTable {
    /// Every entry of every aggregation with a stack key, folded, in id order and then in
    /// `order`.
    pub fn folded_stacks(&self, order: SortOrder) -> Vec<FoldedStack> {
        let mut out = Vec::new();
        for def in self.dictionary().iter() {
            if !def.keys.iter().any(|k| k.kind == KeyKind::Stack) {
                continue;
            }
            let normal = self.normal(def.id);
            for e in self.sorted(def.id, order).unwrap_or_default() {
                let Some(value) = def.func.scalar(e.values, normal).filter(|v| *v > 0) else {
                    continue;
                };
                let mut frames = Vec::new();
                for (el, f) in e.key.elems().zip(key_kinds(&def.keys)) {
                    match el {
                        KeyElem::Str(s) if f == Some(KeyKind::Stack) => {
                            // Kernel stacks have no process; user values name theirs.
                            let kind = match Decoded::new(s) {
                                Some(d) if d.style.user() => FrameKind::User,
                                _ => FrameKind::Kernel,
                            };
                            let names = crate::output::symbols::frames(s);
                            frames.extend(names.into_iter().rev().map(|n| (n, kind)));
                        }
                        KeyElem::Str(s) => {
                            frames.push((String::from_utf8_lossy(s).into(), FrameKind::Other))
                        }
                        KeyElem::Int(i) => frames.push((super::int_text(i, f), FrameKind::Other)),
                    }
                }
                // A `;` or a line break inside a frame would split it.
                for (n, _) in frames.iter_mut() {
                    if n.contains([';', '\n']) {
                        *n = n.replace([';', '\n'], "_");
                    }
                }
                out.push(FoldedStack {
                    agg: def.id,
                    frames,
                    value,
                });
            }
        }
        out
    }

    /// Every aggregation with a stack key, folded (`--oformat folded`), in id order.
    pub fn to_folded(&self, order: SortOrder) -> String {
        let mut o = String::new();
        for s in self.folded_stacks(order) {
            if s.frames.is_empty() {
                o.push_str("[unknown]");
            }
            for (i, (f, _)) in s.frames.iter().enumerate() {
                if i > 0 {
                    o.push(';');
                }
                o.push_str(f);
            }
            let _ = writeln!(o, " {}", s.value);
        }
        o
    }
}
