//! `print()` and `tracemem()` records as text: a typed object in the layout of Oracle's
//! DTrace (members one a line, `.name = (type)value,`, members that are all zero left out,
//! a char array as its characters up to the first NUL), and memory as `trace()` shows
//! bytes it takes for binary data.

use crate::dsl::types::ptype::{PType, PrintSpec};
use oxtrace_core::action::Item;

/// Column the object starts at, as Oracle's DTrace indents it; each level adds one.
const BASE_INDENT: usize = 44;

/// The text of a record of `spec` with its items.
pub fn format_print(spec: &PrintSpec, items: &[Item<'_>]) -> Vec<u8> {
    match (spec, items) {
        (PrintSpec::Tracemem, [Item::Mem(b)]) => format_mem(b),
        (PrintSpec::Print { ty, ptr }, [Item::Int(addr, _), Item::Mem(b)]) => {
            let mut o = String::new();
            if *ptr {
                o.push_str(&format!("0x{addr:x} = *\n"));
            }
            indent(&mut o, 0);
            typed(ty, b, 0, &mut o);
            o.push_str("\n\n");
            o.into_bytes()
        }
        _ => Vec::new(),
    }
}

/// Bytes as dtrace shows data it takes for binary: a header row of the column digits,
/// then 16 bytes a row, each row its offset, the bytes in hex and as characters (`.`
/// for what is not printable). No bytes show nothing.
pub fn format_mem(b: &[u8]) -> Vec<u8> {
    if b.is_empty() {
        return Vec::new();
    }
    format_rawbytes(b, 0)
}

/// `trace()` of a string with the `rawbytes` option, as dtrace prints a buffer it takes for
/// binary: the `strsize` bytes recorded (the string, then NULs), 16 a row, each row its
/// offset in hex, the bytes in hex and as characters (`.` for what is not printable), under
/// a header of the column numbers; on lines of its own.
pub fn format_rawbytes(s: &[u8], strsize: usize) -> Vec<u8> {
    let mut b = s.to_vec();
    b.resize(b.len().max(strsize), 0);
    let mut o = String::from("\n           ");
    for d in "0123456789abcdef".chars() {
        o.push_str("  ");
        o.push(d);
    }
    o.push_str("  0123456789abcdef\n");
    for (i, row) in b.chunks(16).enumerate() {
        o.push_str(&format!("{:>10x}:", i * 16));
        for c in row {
            o.push_str(&format!(" {c:02x}"));
        }
        o.push_str(&"   ".repeat(16 - row.len()));
        o.push_str("  ");
        o.extend(row.iter().map(|&c| {
            if (b' '..=b'~').contains(&c) {
                c as char
            } else {
                '.'
            }
        }));
        o.push('\n');
    }
    o.into_bytes()
}

fn indent(o: &mut String, depth: usize) {
    o.extend(std::iter::repeat_n(' ', BASE_INDENT + depth));
}

/// The type's name in parentheses, then the value.
fn typed(ty: &PType, b: &[u8], depth: usize, o: &mut String) {
    let name = match ty {
        PType::Int { name, .. }
        | PType::Float { name, .. }
        | PType::Ptr { name }
        | PType::Array { name, .. }
        | PType::Sou { name, .. } => name.as_str(),
        PType::Str { .. } => "string",
    };
    o.push('(');
    o.push_str(name);
    o.push(')');
    if matches!(ty, PType::Array { .. } | PType::Sou { .. }) {
        o.push(' ');
    }
    value(ty, b, depth, o);
}

/// The integer of `size` bytes at the start of `b` (zero-extended), little-endian.
fn le(b: &[u8], size: usize) -> u64 {
    let mut w = [0u8; 8];
    let n = size.min(8).min(b.len());
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        ((v << (64 - bits)) as i64) >> (64 - bits)
    }
}

fn is_char(ty: &PType) -> bool {
    matches!(ty, PType::Int { name, size: 1, .. } if name == "char" || name == "signed char")
}

fn char_text(c: u8) -> String {
    match c {
        b'\'' | b'\\' => format!("'\\{}'", c as char),
        0x20..=0x7e => format!("'{}'", c as char),
        _ => format!("'\\x{c:02x}'"),
    }
}

fn value(ty: &PType, b: &[u8], depth: usize, o: &mut String) {
    match ty {
        PType::Int { size, signed, .. } => {
            let v = le(b, *size as usize);
            if is_char(ty) {
                o.push_str(&char_text(v as u8));
            } else if *signed {
                o.push_str(&sext(v, u32::from(*size) * 8).to_string());
            } else {
                o.push_str(&v.to_string());
            }
        }
        PType::Float { size, .. } => match size {
            4 => o.push_str(&format!("{:.6}", f32::from_bits(le(b, 4) as u32))),
            8 => o.push_str(&format!("{:.6}", f64::from_bits(le(b, 8)))),
            _ => o.push_str(&format!(
                "0x{:x}{:016x}",
                le(b.get(8..).unwrap_or(&[]), 8),
                le(b, 8)
            )),
        },
        PType::Ptr { .. } => o.push_str(&format!("0x{:x}", le(b, 8))),
        PType::Str { .. } => {
            let s = b.split(|&c| c == 0).next().unwrap_or(&[]);
            o.push('"');
            o.push_str(&String::from_utf8_lossy(s));
            o.push('"');
        }
        PType::Array { elem, n, esize, .. } => {
            o.push_str("[\n");
            let chars = is_char(elem);
            for i in 0..*n {
                let at = (i * esize) as usize;
                let e = b.get(at..at + *esize as usize).unwrap_or(&[]);
                // A char array is a string: it ends at its first NUL.
                if chars && e.first().is_none_or(|&c| c == 0) {
                    break;
                }
                indent(o, depth + 1);
                typed(elem, e, depth + 1, o);
                o.push_str(",\n");
            }
            indent(o, depth);
            o.push(']');
        }
        PType::Sou { members, .. } => {
            o.push_str("{\n");
            for m in members {
                let size = member_size(&m.ty) as usize;
                let at = m.off as usize;
                let mb = b.get(at..at + size).unwrap_or(&[]);
                if let Some((shift, width)) = m.bits {
                    let raw = le(mb, size) >> shift;
                    let bits = u32::from(width);
                    let mask = if bits >= 64 {
                        u64::MAX
                    } else {
                        (1 << bits) - 1
                    };
                    let v = raw & mask;
                    if v == 0 {
                        continue;
                    }
                    let signed = matches!(m.ty, PType::Int { signed: true, .. });
                    indent(o, depth + 1);
                    o.push_str(&format!(".{} = ", m.name));
                    o.push('(');
                    if let PType::Int { name, .. } = &m.ty {
                        o.push_str(name);
                    }
                    o.push(')');
                    if signed {
                        o.push_str(&sext(v, bits).to_string());
                    } else {
                        o.push_str(&v.to_string());
                    }
                    o.push_str(",\n");
                    continue;
                }
                // Members that are all zero are left out.
                if mb.iter().all(|&c| c == 0) {
                    continue;
                }
                indent(o, depth + 1);
                if !m.name.is_empty() {
                    o.push_str(&format!(".{} = ", m.name));
                }
                typed(&m.ty, mb, depth + 1, o);
                o.push_str(",\n");
            }
            indent(o, depth);
            o.push('}');
        }
    }
}

/// Bytes of a value of `ty`.
fn member_size(ty: &PType) -> u64 {
    match ty {
        PType::Int { size, .. } | PType::Float { size, .. } => u64::from(*size),
        PType::Ptr { .. } => 8,
        PType::Str { size } => *size,
        PType::Array { n, esize, .. } => n * esize,
        PType::Sou { members, .. } => members
            .iter()
            .map(|m| m.off + member_size(&m.ty))
            .max()
            .unwrap_or(0),
    }
}
