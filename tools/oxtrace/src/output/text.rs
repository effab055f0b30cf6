//! DTrace's text output: the default `printa` format, the ASCII histograms of the quantize
//! family, and custom `printa` formats.

use super::{int_value, pad_at, push_int, push_int_padded, push_repeat, StackText};
use crate::agg::{key_kinds, AggDef, EntryRef, KeyField, KeyKind};
use crate::dsl::format::Piece;
use oxtrace_core::agg::{quantize_bucket_value, AggFunc, KeyElem, KeyRef, QUANTIZE_ZERO};
use std::fmt::Write as _;

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
                out.push(' ');
                push_int_padded(out, int_value(v, f), w, false);
            }
            KeyElem::Str(s)
                if f == Some(KeyKind::Stack) && crate::output::symbols::is_symbol(s) =>
            {
                let mut t = String::new();
                crate::output::symbols::render(s, &mut t);
                let _ = write!(out, "  {t:<50}");
            }
            KeyElem::Str(s) if f == Some(KeyKind::Stack) => crate::output::symbols::render(s, out),
            KeyElem::Str(s) => {
                out.push_str("  ");
                let at = out.len();
                out.push_str(&String::from_utf8_lossy(s));
                let n = out[at..].chars().count();
                if n < 50 {
                    pad_at(out, at, 50 - n, true);
                }
            }
        }
    }
}

/// One entry in the default `printa` format: the key members (`%16d` integers, `%-50s`
/// strings, each after a space), then ` %16d` for scalars or the histogram.
pub(crate) fn render_entry(def: &AggDef, e: &EntryRef<'_>, normal: u64, out: &mut String) {
    render_key(def, &e.key, out);
    render_value(&def.func, e.values, normal, out);
    out.push('\n');
}

fn render_value(func: &AggFunc, values: &[u64], normal: u64, out: &mut String) {
    match func.scalar(values, normal) {
        Some(v) => {
            out.push(' ');
            push_int_padded(out, v, 16, false);
        }
        None => render_histogram(func, values, normal, out),
    }
}

/// The buckets DTrace shows: from one before the first non-empty bucket to one after the
/// last, clamped; around the first buckets (quantize: around zero) when all are empty.
pub fn print_range(func: &AggFunc, data: &[u64]) -> (usize, usize) {
    let data = func.buckets_of(data);
    let n = data.len().max(1);
    match data.iter().position(|c| *c != 0) {
        None => match func {
            AggFunc::Quantize => (QUANTIZE_ZERO - 1, QUANTIZE_ZERO + 1),
            AggFunc::Lquantize(_) => (0, 2.min(n - 1)),
            // Oracle DTrace: the zero bucket and the first two after it.
            AggFunc::Llquantize(p) => (p.zero_bucket(), (p.zero_bucket() + 2).min(n - 1)),
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
    let data = func.buckets_of(data);
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
        let at = out.len();
        out.push_str(label);
        let n = out[at..].chars().count();
        if n < 16 {
            pad_at(out, at, 16 - n, false);
        }
        out.push(' ');
        quant_line(c as i64, normal, total, pos, neg, out);
    };
    let labels: Vec<i64> = match func {
        AggFunc::Llquantize(p) => p.labels().collect(),
        _ => Vec::new(),
    };
    let nb = data.len();
    let label = |b: usize| -> StackText {
        let mut t = StackText::new();
        let _ = match func {
            AggFunc::Lquantize(p) if b == 0 => write!(t, "< {}", p.base()),
            AggFunc::Lquantize(p) if b == p.levels() + 1 => {
                write!(t, ">= {}", p.base() + p.levels() as i64 * p.step())
            }
            AggFunc::Lquantize(p) => write!(t, "{}", p.base() + (b as i64 - 1) * p.step()),
            AggFunc::Llquantize(p) => t.write_str(&llq_label(p, &labels, b, first, nb)),
            _ => write!(t, "{}", quantize_bucket_value(b)),
        };
        t
    };
    for (b, c) in data.iter().enumerate().take(last + 1).skip(first) {
        line(label(b).as_str(), *c, out);
    }
}

/// Oracle DTrace's label of llquantize bucket `b` of `nb`, the first shown being `first`:
/// the zero bucket is `0` (when `factor^low` is 1), `< scale` (no negative bucket shown) or
/// `abs() < scale`; the others are their lower bounds' magnitudes, negated below zero, and the
/// overflows `>= top` and `<= -top`.
fn llq_label(
    p: &oxtrace_core::agg::LlquantizeParams,
    labels: &[i64],
    b: usize,
    first: usize,
    nb: usize,
) -> String {
    let z = p.zero_bucket();
    let scale = pow_i64(p.factor(), p.low());
    let top = labels.last().copied().unwrap_or(i64::MAX);
    if b == z {
        return if scale == 1 {
            "0".into()
        } else if first >= z {
            format!("< {scale}")
        } else {
            format!("abs() < {scale}")
        };
    }
    if b == 0 {
        return format!("<= -{top}");
    }
    if b == nb - 1 {
        return format!(">= {top}");
    }
    let l = labels.get(b.abs_diff(z) - 1).copied().unwrap_or(i64::MAX);
    if b < z {
        format!("-{l}")
    } else {
        l.to_string()
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
    const AT: &str = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
    const SP: &str = "                                                                ";
    let at = |out: &mut String, n: usize| push_repeat(out, AT, '@', n);
    let sp = |out: &mut String, n: usize| push_repeat(out, SP, ' ', n);
    let shown = val / normal;
    if !neg {
        let d = if pos { depth(40) } else { 0 };
        out.push('|');
        at(out, d);
        sp(out, 40usize.saturating_sub(d));
    } else if !pos {
        let d = depth(40);
        sp(out, 40usize.saturating_sub(d));
        at(out, d);
        out.push('|');
    } else {
        let d = depth(20);
        if val <= 0 {
            sp(out, 20usize.saturating_sub(d));
            at(out, d);
            out.push('|');
            sp(out, 20);
        } else {
            sp(out, 20);
            out.push('|');
            at(out, d);
            sp(out, 20usize.saturating_sub(d));
        }
    }
    out.push(' ');
    push_int_padded(out, shown as i128, 9, true);
    out.push('\n');
}

// ---------------------------------------------------------------------------------------
// Custom printa formats.

/// One entry through a `printa` format: `%d %i %u %x %X %o %c %s` (flags `-+ 0#`, width,
/// precision, length modifiers ignored) take the key members in order; the first
/// conversion with `@` (`%@d`, `%@8u`, ...) takes the value (a histogram prints as
/// DTrace's histogram); `%%` is a percent sign. Without `%@` the value is not printed.
pub fn format_entry(def: &AggDef, e: &EntryRef<'_>, normal: u64, format: &str, out: &mut String) {
    format_entry_multi(
        &e.key,
        &def.keys,
        &[(def, Some(e.values), normal)],
        format,
        out,
    );
}

/// One key through a `printa` format of several aggregations: each `%@` conversion takes the
/// next aggregation's value at `key` (`None`: the key is not in it, a scalar prints 0).
pub fn format_entry_multi(
    key: &KeyRef<'_>,
    layout: &[KeyField],
    vals: &[(&AggDef, Option<&[u64]>, u64)],
    format: &str,
    out: &mut String,
) {
    let mut keys = key.elems().zip(key_kinds(layout));
    // One aggregation: every `%@` prints its value; several: each takes the next.
    let single = vals.len() == 1;
    let mut next_val = 0;
    // The compiler parsed and checked the format with the same parser.
    let Ok(pieces) = crate::dsl::format::parse(format.as_bytes(), true) else {
        out.push_str(format);
        return;
    };
    for piece in &pieces {
        let c = match piece {
            Piece::Lit(b) => {
                out.push_str(&String::from_utf8_lossy(b));
                continue;
            }
            Piece::Conv(c) => c,
        };
        let spec = Spec {
            left: c.flags.minus,
            plus: c.flags.plus,
            space: c.flags.space,
            zero: c.flags.zero,
            alt: c.flags.alt,
            agg: c.flags.agg,
            width: c.width,
            prec: c.prec,
        };
        let conv = c.conv;
        if spec.agg {
            let at = if single { 0 } else { next_val };
            next_val += 1;
            match vals.get(at) {
                Some((def, Some(v), normal)) => match def.func.scalar(v, *normal) {
                    Some(v) => spec.int(conv, v, out),
                    None => render_histogram(&def.func, v, *normal, out),
                },
                // A key this aggregation lacks: a scalar prints 0, a histogram nothing.
                Some((def, None, _))
                    if def
                        .func
                        .scalar(&vec![0; def.func.value_words()], 1)
                        .is_some() =>
                {
                    spec.int(conv, 0, out)
                }
                _ => {}
            }
            continue;
        }
        match keys.next() {
            Some((KeyElem::Int(v), f)) => {
                let v = int_value(v, f);
                if conv == 's' {
                    let at = out.len();
                    push_int(out, v);
                    spec.pad_at(at, out);
                } else {
                    spec.int(conv, v, out);
                }
            }
            // A stack (`%k`) or symbol value, symbolized as the default format prints it.
            Some((KeyElem::Str(s), Some(KeyKind::Stack))) => {
                let mut t = String::new();
                crate::output::symbols::render(s, &mut t);
                spec.pad(&t, out);
            }
            Some((KeyElem::Str(s), _)) => {
                let s = String::from_utf8_lossy(s);
                let s = match spec.prec.and_then(|p| s.char_indices().nth(p)) {
                    Some((end, _)) => &s[..end],
                    None => &s[..],
                };
                spec.pad(s, out);
            }
            None => {}
        }
    }
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
        let at = out.len();
        out.push_str(s);
        self.pad_at(at, out);
    }

    /// Pads the text `out[at..]` to the width.
    fn pad_at(&self, at: usize, out: &mut String) {
        let w = self.width.unwrap_or(0);
        let n = out[at..].chars().count();
        if n < w {
            pad_at(out, at, w - n, self.left);
        }
    }

    fn int(&self, conv: char, v: i128, out: &mut String) {
        let mut mag = StackText::new();
        let sign = match conv {
            'd' | 'i' => {
                let _ = write!(mag, "{}", v.unsigned_abs());
                if v < 0 {
                    "-"
                } else if self.plus {
                    "+"
                } else if self.space {
                    " "
                } else {
                    ""
                }
            }
            'x' => {
                let _ = write!(mag, "{:x}", v as u64);
                ""
            }
            'X' => {
                let _ = write!(mag, "{:X}", v as u64);
                ""
            }
            'o' => {
                let _ = write!(mag, "{:o}", v as u64);
                ""
            }
            'c' => {
                let _ = mag.write_char(char::from_u32(v as u32).unwrap_or('?'));
                ""
            }
            _ => {
                let _ = write!(mag, "{}", v as u64);
                ""
            }
        };
        let mag = mag.as_str();
        // Precision: leading zeros up to that many digits.
        let zeros = self.prec.map_or(0, |p| p.saturating_sub(mag.len()));
        let prefix = match (self.alt, conv) {
            (true, 'x') if v != 0 => "0x",
            (true, 'X') if v != 0 => "0X",
            (true, 'o') if zeros == 0 && !mag.starts_with('0') => "0",
            _ => "",
        };
        let body_len = sign.len() + prefix.len() + zeros + mag.len();
        let w = self.width.unwrap_or(0);
        let at = out.len();
        out.push_str(sign);
        out.push_str(prefix);
        if self.zero && !self.left && self.prec.is_none() && body_len < w {
            push_repeat(out, "0000000000000000", '0', w - body_len);
        } else {
            push_repeat(out, "0000000000000000", '0', zeros);
        }
        out.push_str(mag);
        self.pad_at(at, out);
    }
}

fn pow_i64(b: u64, e: u32) -> i64 {
    (0..e).fold(1i64, |a, _| a.saturating_mul(b as i64))
}
