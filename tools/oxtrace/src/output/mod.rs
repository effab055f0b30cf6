//! Renderers of the merged aggregation table: DTrace's text, JSON, OpenMetrics and folded
//! stacks.

pub mod folded;
pub mod json;
pub mod lines;
pub mod openmetrics;
pub mod text;

use crate::agg::KeyKind;

pub(crate) fn int_text(v: u64, kind: Option<KeyKind>) -> String {
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
