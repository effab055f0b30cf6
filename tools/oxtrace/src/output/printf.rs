//! printf records as text: the user-space formatter that turns the records of `printf()`,
//! `trace()` and `system()` back into text with DTrace's (C's) semantics, through the formats
//! `crate::dsl::format` parsed.

pub use super::print::format_rawbytes;
use crate::dsl::format::{parse, ArgKind, Conv, FormatError, Piece, MAX_WIDTH};
use crate::dsl::Compiled;
use oxtrace_core::action::{IntType, Item};

impl Compiled {
    /// Format a printf record of format `id` with its items.
    pub fn format_printf(&self, id: u32, items: &[Item<'_>]) -> Option<Vec<u8>> {
        if self.setopts.contains_key(&id) {
            return Some(Vec::new());
        }
        if let Some(spec) = self.prints.get(&id) {
            return Some(super::print::format_print(spec, items));
        }
        let f = self.formats.get(id as usize)?;
        sprintf(f.as_bytes(), items).ok()
    }
}

fn pad(out: &mut Vec<u8>, body: &[u8], width: Option<usize>, left: bool) {
    let w = width.unwrap_or(0);
    let n = w.saturating_sub(body.len());
    if left {
        out.extend_from_slice(body);
        out.extend(std::iter::repeat_n(b' ', n));
    } else {
        out.extend(std::iter::repeat_n(b' ', n));
        out.extend_from_slice(body);
    }
}

/// The value of an integer item as the conversion sees it: signed conversions sign-extend
/// from the argument's size, unsigned ones truncate to it (DTrace uses the argument's type).
///
/// Types narrower than `int` are promoted to `int` first, as C's varargs do (the register
/// already holds the value extended by the type's own signedness).
fn int_value(v: u64, ty: IntType, signed_conv: bool) -> i128 {
    super::sized_value(v, ty.size().max(4) as u32 * 8, signed_conv)
}

/// `s` with C's escapes for what is not printable (`%S`).
fn escaped(s: &[u8]) -> Vec<u8> {
    let mut o = Vec::with_capacity(s.len());
    for &b in s {
        match b {
            b'\\' => o.extend_from_slice(b"\\\\"),
            b'\n' => o.extend_from_slice(b"\\n"),
            b'\t' => o.extend_from_slice(b"\\t"),
            b'\r' => o.extend_from_slice(b"\\r"),
            0x20..=0x7e => o.push(b),
            _ => o.extend_from_slice(format!("\\{b:03o}").as_bytes()),
        }
    }
    o
}

/// `walltimestamp` `ns` as `%Y` shows it: `2026 Nov 23 14:22:01`, in UTC.
fn date_text(ns: u64) -> Vec<u8> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = (ns / 1_000_000_000) as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!(
        "{year} {} {day:02} {:02}:{:02}:{:02}",
        MONTHS[(month - 1) as usize],
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
    .into_bytes()
}

/// The value of a float in a record, as C's varargs pass it (a float promoted to double):
/// the compiler records a `float`'s 4 bytes as an unsigned 4-byte integer, a `double`'s 8
/// as an unsigned 8-byte one, and a `long double`'s 16 as two signed 8-byte ones, low
/// first (see [`long_double`]).
fn fp_item(v: u64, ty: IntType) -> f64 {
    if ty.size() == 4 {
        f64::from(f32::from_bits(v as u32))
    } else {
        f64::from_bits(v)
    }
}

/// An x86-64 `long double` (the x87 80-bit format in the low 10 of its 16 bytes) as the
/// nearest `f64`: `lo` holds the 64-bit significand, `hi` the sign and 15-bit exponent.
pub fn long_double(lo: u64, hi: u64) -> f64 {
    let neg = hi & 0x8000 != 0;
    let exp = (hi & 0x7fff) as i32;
    let v = if exp == 0x7fff {
        if lo << 1 == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else {
        // value = significand * 2^(exp - 16383 - 63); a denormal has exponent 1 - 16383.
        let e = exp.max(1) - 16383 - 63;
        let half = e / 2;
        (lo as f64) * 2f64.powi(half) * 2f64.powi(e - half)
    };
    if neg {
        -v
    } else {
        v
    }
}

/// `m` (not negative) as C's `%e` with `prec` digits after the point: at least two
/// exponent digits, with their sign.
fn exp_text(m: f64, prec: usize, upper: bool, alt: bool) -> String {
    let s = format!("{m:.prec$e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut o = mant.to_string();
    if alt && prec == 0 {
        o.push('.');
    }
    o.push(if upper { 'E' } else { 'e' });
    o.push(if exp < 0 { '-' } else { '+' });
    o.push_str(&format!("{:02}", exp.unsigned_abs()));
    o
}

/// `v` as C's `%f`, `%e`, `%E`, `%g` or `%G` of conversion `c` (flags, width, precision).
fn format_fp(out: &mut Vec<u8>, c: &Conv, v: f64) {
    let f = c.flags;
    let upper = c.conv.is_ascii_uppercase();
    let prec = c.prec.unwrap_or(6);
    let m = v.abs();
    let body = if !v.is_finite() {
        let t = if v.is_nan() { "nan" } else { "inf" };
        if upper {
            t.to_uppercase()
        } else {
            t.to_string()
        }
    } else {
        match c.conv {
            'f' => {
                let mut t = format!("{m:.prec$}");
                if f.alt && prec == 0 {
                    t.push('.');
                }
                t
            }
            'e' | 'E' => exp_text(m, prec, upper, f.alt),
            _ => {
                // %g: %e's exponent X of precision P decides: %f if P > X >= -4.
                let p = prec.max(1);
                let e = exp_text(m, p - 1, false, false);
                let x: i64 = e
                    .rsplit_once('e')
                    .map_or(0, |(_, x)| x.parse().unwrap_or(0));
                let mut t = if (-4..p as i64).contains(&x) {
                    let dp = (p as i64 - 1 - x) as usize;
                    format!("{m:.dp$}")
                } else {
                    exp_text(m, p - 1, upper, false)
                };
                if f.alt {
                    if !t.contains('.') {
                        let at = t.find(['e', 'E']).unwrap_or(t.len());
                        t.insert(at, '.');
                    }
                } else if let Some(dot) = t.find('.') {
                    // Trailing zeros of the fraction go, and a point left alone.
                    let end = t[dot..].find(['e', 'E']).map_or(t.len(), |i| dot + i);
                    let frac = t[..end].trim_end_matches('0').trim_end_matches('.').len();
                    t.replace_range(frac..end, "");
                }
                t
            }
        }
    };
    let sign = if v.is_sign_negative() {
        "-"
    } else if f.plus {
        "+"
    } else if f.space {
        " "
    } else {
        ""
    };
    let w = c.width.unwrap_or(0);
    let len = sign.len() + body.len();
    if f.zero && !f.minus && v.is_finite() && w > len {
        out.extend_from_slice(sign.as_bytes());
        out.extend(std::iter::repeat_n(b'0', w - len));
        out.extend_from_slice(body.as_bytes());
    } else {
        pad(out, format!("{sign}{body}").as_bytes(), c.width, f.minus);
    }
}

/// Format one conversion of `item` into `out`.
pub fn format_conv(out: &mut Vec<u8>, c: &Conv, item: &Item<'_>) {
    let f = c.flags;
    match (c.conv, item) {
        ('e' | 'E' | 'f' | 'g' | 'G', Item::Int(v, ty)) => format_fp(out, c, fp_item(*v, *ty)),
        ('S', Item::Str(s)) => {
            let e = escaped(s);
            let e = match c.prec {
                Some(p) if p < e.len() => &e[..p],
                _ => &e[..],
            };
            pad(out, e, c.width, f.minus);
        }
        ('Y', Item::Int(v, _)) => pad(out, &date_text(*v), c.width, f.minus),
        ('a', Item::Int(v, _)) => {
            let s = crate::sym::ksym::Ksyms::kernel().format_addr(*v);
            pad(out, s.as_bytes(), c.width, f.minus);
        }
        ('s', Item::Str(s)) => {
            let s = match c.prec {
                Some(p) if p < s.len() => &s[..p],
                _ => s,
            };
            pad(out, s, c.width, f.minus);
        }
        ('k', Item::Str(s)) => {
            let mut t = String::new();
            crate::output::symbols::render(s, &mut t);
            out.extend_from_slice(t.as_bytes());
        }
        // The compiler made the address a `uaddr()` value, which carries the process.
        ('A', Item::Str(s)) => {
            let mut t = String::new();
            crate::output::symbols::render(s, &mut t);
            pad(out, t.as_bytes(), c.width, f.minus);
        }
        ('c', Item::Int(v, _)) => pad(out, &[*v as u8], c.width, f.minus),
        (_, Item::Str(s)) => pad(out, s, c.width, f.minus),
        (_, Item::Mem(s)) => out.extend_from_slice(&format_rawbytes(s, 0)),
        (conv, Item::Int(v, ty)) => {
            let signed_conv = matches!(conv, 'd' | 'i');
            // As DTrace's printf: `%d` of an unsigned value prints it unsigned.
            let val = if conv == 'p' {
                *v as i128
            } else {
                int_value(*v, *ty, signed_conv && ty.signed())
            };
            let neg = val < 0;
            let mag = val.unsigned_abs();
            let mut digits = match conv {
                'x' | 'p' => format!("{mag:x}"),
                'X' => format!("{mag:X}"),
                'o' => format!("{mag:o}"),
                _ => mag.to_string(),
            }
            .into_bytes();
            if c.prec == Some(0) && mag == 0 && conv != 'p' {
                digits.clear();
            }
            if let Some(p) = c.prec {
                if digits.len() < p {
                    let mut z = vec![b'0'; p - digits.len()];
                    z.extend(digits);
                    digits = z;
                }
            }
            let mut prefix: Vec<u8> = Vec::new();
            if neg {
                prefix.push(b'-');
            } else if signed_conv && f.plus {
                prefix.push(b'+');
            } else if signed_conv && f.space {
                prefix.push(b' ');
            }
            match conv {
                'p' => prefix.extend_from_slice(b"0x"),
                'x' if f.alt && mag != 0 => prefix.extend_from_slice(b"0x"),
                'X' if f.alt && mag != 0 => prefix.extend_from_slice(b"0X"),
                'o' if f.alt && digits.first() != Some(&b'0') => prefix.push(b'0'),
                _ => {}
            }
            let w = c.width.unwrap_or(0);
            let len = prefix.len() + digits.len();
            if f.zero && !f.minus && c.prec.is_none() && w > len {
                out.extend_from_slice(&prefix);
                out.extend(std::iter::repeat_n(b'0', w - len));
                out.extend_from_slice(&digits);
            } else {
                prefix.extend(digits);
                pad(out, &prefix, c.width, f.minus);
            }
        }
    }
}

/// Format a printf record: `pieces` from [`parse`], `items` from the record.
///
/// Missing arguments print nothing; extra ones are ignored (the compiler checked the count).
pub fn format_printf(pieces: &[Piece], items: &[Item<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut args = items.iter();
    for p in pieces {
        match p {
            Piece::Lit(l) => out.extend_from_slice(l),
            Piece::Conv(c) => {
                let mut c = *c;
                let star = |args: &mut std::slice::Iter<'_, Item<'_>>| match args.next() {
                    Some(Item::Int(v, ty)) => Some(int_value(*v, *ty, true)),
                    _ => None,
                };
                if c.star_width {
                    // A negative `*` width left-justifies, as in C.
                    let w = star(&mut args).unwrap_or(0);
                    c.flags.minus |= w < 0;
                    c.width = Some((w.unsigned_abs() as usize).min(MAX_WIDTH));
                }
                if c.star_prec {
                    // A negative `.*` precision is as if none was given.
                    let p = star(&mut args).unwrap_or(-1);
                    c.prec = (p >= 0).then(|| (p as usize).min(MAX_WIDTH));
                }
                match args.next() {
                    // A long double: its two halves.
                    Some(Item::Int(lo, ty)) if c.arg_kind() == ArgKind::Float && ty.signed() => {
                        let hi = match args.next() {
                            Some(Item::Int(hi, _)) => *hi,
                            _ => 0,
                        };
                        format_fp(&mut out, &c, long_double(*lo, hi));
                    }
                    Some(item) => format_conv(&mut out, &c, item),
                    None => {}
                }
            }
        }
    }
    out
}

/// Format `items` with the printf format text `fmt` (parsing it first).
pub fn sprintf(fmt: &[u8], items: &[Item<'_>]) -> Result<Vec<u8>, FormatError> {
    Ok(format_printf(&parse(fmt, false)?, items))
}

/// How `trace()` shows one item: integers in decimal by their type, strings as they are.
pub fn format_trace_item(item: &Item<'_>) -> Vec<u8> {
    match item {
        Item::Str(s) => s.to_vec(),
        Item::Mem(s) => format_rawbytes(s, 0),
        Item::Int(v, ty) => int_value(*v, *ty, ty.signed()).to_string().into_bytes(),
    }
}

/// The text of a `trace()` record: `quiet` as with `-q`, `rawbytes` the `strsize` when
/// the `rawbytes` option is set.
///
/// A record of two items is a long double's 16 bytes (`trace()` takes one value, and
/// every other value is one item): shown as dtrace shows data of no integer size, its
/// bytes in hex.
pub fn format_trace(items: &[Item<'_>], quiet: bool, rawbytes: Option<usize>) -> Vec<u8> {
    if let [Item::Int(lo, _), Item::Int(hi, _)] = items {
        let mut b = lo.to_le_bytes().to_vec();
        b.extend(hi.to_le_bytes());
        return format_rawbytes(&b, 16);
    }
    items
        .iter()
        .flat_map(|it| match (it, rawbytes) {
            (Item::Str(s), Some(strsize)) => format_rawbytes(s, strsize),
            (it, _) if quiet => format_trace_item(it),
            (it, _) => format_trace_item_default(it),
        })
        .collect()
}

/// How `trace()` shows one item without `-q`, as the Dynamic Tracing Guide's dtrace does:
/// an integer after a space, right-aligned by its size (16 columns for 8 bytes, 8, 5 and
/// 3 for 4, 2 and 1), a string after two spaces, left-aligned in 33 columns.
pub fn format_trace_item_default(item: &Item<'_>) -> Vec<u8> {
    match item {
        Item::Mem(s) => format_rawbytes(s, 0),
        Item::Str(s) => {
            let mut o = b"  ".to_vec();
            o.extend_from_slice(s);
            let n = String::from_utf8_lossy(s).chars().count();
            o.resize(o.len() + 33usize.saturating_sub(n), b' ');
            o
        }
        Item::Int(v, ty) => {
            let w = match ty.size() {
                1 => 3,
                2 => 5,
                4 => 8,
                _ => 16,
            };
            format!(" {:>w$}", int_value(*v, *ty, ty.signed())).into_bytes()
        }
    }
}
