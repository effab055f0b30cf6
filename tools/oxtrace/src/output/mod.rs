//! Renderers of the merged aggregation table: DTrace's text, JSON, OpenMetrics, folded
//! stacks and flame graphs.

pub mod flamegraph;
pub mod folded;
pub mod json;
pub mod lines;
pub mod openmetrics;
pub mod print;
pub mod printa;
pub mod printf;
pub mod records;
pub mod symbols;
pub mod text;

use crate::agg::KeyKind;

pub(crate) fn int_text(v: u64, kind: Option<KeyKind>) -> String {
    int_value(v, kind).to_string()
}

/// The value of key word `v` as its D type reads it (truncated to its size, sign-extended
/// when signed; a member of unknown type is a signed 64-bit integer).
pub(crate) fn int_value(v: u64, kind: Option<KeyKind>) -> i128 {
    match kind {
        Some(KeyKind::Int { size, signed }) => {
            sized_value(v, 8 * (size.clamp(1, 8) as u32), signed)
        }
        _ => v as i64 as i128,
    }
}

/// `v` truncated to its low `bits` (8 to 64), then sign-extended when `signed`: how the
/// key words and printf's integers are read by their C type.
pub(crate) fn sized_value(v: u64, bits: u32, signed: bool) -> i128 {
    let v = if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    };
    if signed {
        let sh = 64 - bits.min(64);
        (((v << sh) as i64) >> sh) as i128
    } else {
        v as i128
    }
}

/// A few bytes of text on the stack: the output formats a number or a label in it without
/// allocating (100,000 lines make 100,000 allocations otherwise).
pub(crate) struct StackText {
    b: [u8; 64],
    n: usize,
}

impl StackText {
    pub(crate) fn new() -> Self {
        Self { b: [0; 64], n: 0 }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only `write_str` fills it, with whole strings.
        std::str::from_utf8(&self.b[..self.n]).unwrap_or("")
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.n + s.len();
        if end > self.b.len() {
            return Err(std::fmt::Error);
        }
        self.b[self.n..end].copy_from_slice(s.as_bytes());
        self.n = end;
        Ok(())
    }
}

/// The decimal text of `v` at the end of `b`; returns where it starts.
fn dec(b: &mut [u8; 40], v: i128) -> usize {
    let mut i = b.len();
    let m = v.unsigned_abs();
    // Most values fit in 64 bits, whose division is an instruction (u128's is a call).
    match u64::try_from(m) {
        Ok(mut m) => loop {
            i -= 1;
            b[i] = b'0' + (m % 10) as u8;
            m /= 10;
            if m == 0 {
                break;
            }
        },
        Err(_) => {
            let mut m = m;
            loop {
                i -= 1;
                b[i] = b'0' + (m % 10) as u8;
                m /= 10;
                if m == 0 {
                    break;
                }
            }
        }
    }
    if v < 0 {
        i -= 1;
        b[i] = b'-';
    }
    i
}

/// Appends the decimal text of `v` to `out`.
pub(crate) fn push_int(out: &mut String, v: i128) {
    push_int_padded(out, v, 0, false);
}

/// Appends `v` padded to `width` columns like `{v:>width$}` (`left`: `{v:<width$}`).
pub(crate) fn push_int_padded(out: &mut String, v: i128, width: usize, left: bool) {
    const SPACES: &str = "                                                                ";
    let mut b = [0u8; 40];
    let at = dec(&mut b, v);
    let n = b.len() - at;
    if !left && n < width {
        push_repeat(out, SPACES, ' ', width - n);
    }
    // SAFETY: `dec` writes ASCII digits and a minus sign only, so `out` stays UTF-8.
    unsafe { out.as_mut_vec() }.extend_from_slice(&b[at..]);
    if left && n < width {
        push_repeat(out, SPACES, ' ', width - n);
    }
}

/// Pads the text `out[at..]` with `n` spaces, after it (`left`) or before it.
pub(crate) fn pad_at(out: &mut String, at: usize, n: usize, left: bool) {
    const SPACES: &str = "                                                                ";
    if left {
        push_repeat(out, SPACES, ' ', n);
    } else {
        out.insert_str(at, &SPACES[..n.min(SPACES.len())]);
        if n > SPACES.len() {
            out.insert_str(at, &" ".repeat(n - SPACES.len()));
        }
    }
}

/// Appends `n` copies of `c`, whose run of 64 is `run`.
pub(crate) fn push_repeat(out: &mut String, run: &str, c: char, n: usize) {
    if n <= run.len() {
        out.push_str(&run[..n]);
    } else {
        out.extend(std::iter::repeat_n(c, n));
    }
}
