// SPDX-License-Identifier: GPL-2.0

//! The string subroutines of D (`substr`, `index`, `basename`, `inet_ntop`, ...) as pure
//! functions over byte slices, for the interpreter's subroutine opcodes.
//!
//! Every function reads its inputs (strings already cut at their NUL and at `strsize`) and
//! writes at most `out.len()` bytes into `out`, the scratch slot the interpreter allocated;
//! it returns the length written (the caller adds the NUL). Nothing allocates, nothing
//! loops longer than its inputs. The semantics are those of the Dynamic Tracing Guide's
//! "Actions and Subroutines" chapter; where the guide is silent, of Oracle Linux DTrace 2.

/// `AF_INET` as Linux numbers it (`inet_ntop()`'s first argument).
pub const AF_INET: u64 = 2;
/// `AF_INET6` as Linux numbers it.
pub const AF_INET6: u64 = 10;
/// Bits of the minor number in a Linux kernel `dev_t` (`MINORBITS`): `getmajor(d)` is
/// `d >> MINORBITS`, `getminor(d)` is `d & ((1 << MINORBITS) - 1)`.
pub const MINORBITS: u32 = 20;

/// Copies `src` into `out`, truncated; returns the length copied.
pub fn copy(src: &[u8], out: &mut [u8]) -> usize {
    let n = src.len().min(out.len());
    // PANIC: `n` is at most either length.
    out[..n].copy_from_slice(&src[..n]);
    n
}

/// `substr(s, index, length)`: `index` counts from the end when negative; a negative
/// `length` leaves that many characters off the end; without a length (`None`) the rest of
/// the string.
pub fn substr(s: &[u8], index: i64, length: Option<i64>, out: &mut [u8]) -> usize {
    let len = s.len() as i64;
    let mut index = index;
    let mut remaining = length.unwrap_or(i64::MAX);
    if index < 0 {
        index = index.saturating_add(len);
        // A start before the string's beginning eats into the length.
        if index < 0 && index.saturating_add(remaining) > 0 {
            remaining = remaining.saturating_add(index);
            index = 0;
        }
    }
    if index < 0 || index >= len {
        return 0;
    }
    if remaining < 0 {
        remaining = remaining.saturating_add(len - index);
    }
    if remaining <= 0 {
        return 0;
    }
    let end = index.saturating_add(remaining).min(len) as usize;
    // PANIC: `0 <= index < len` (checked above) and `index < end <= len`.
    copy(&s[index as usize..end], out)
}

/// Whether `sub` occurs in `s` at `at`.
fn matches_at(s: &[u8], sub: &[u8], at: usize) -> bool {
    s.get(at..at + sub.len()) == Some(sub)
}

/// `strstr(s, sub)`: the offset in `s` of the first occurrence of `sub`.
pub fn strstr(s: &[u8], sub: &[u8]) -> Option<usize> {
    (0..=s.len()).find(|&i| matches_at(s, sub, i))
}

/// `index(s, sub, start)`: the offset of the first occurrence of `sub` at or after `start`
/// (clamped at 0), or -1. An empty `sub` is found at `start`, or at the end when `start` is
/// past it.
pub fn index(s: &[u8], sub: &[u8], start: i64) -> i64 {
    let len = s.len() as i64;
    if s.is_empty() && sub.is_empty() {
        return 0;
    }
    let start = start.max(0);
    if start >= len {
        return if sub.is_empty() { len } else { -1 };
    }
    (start as usize..s.len())
        .find(|&i| matches_at(s, sub, i))
        .map_or(-1, |i| i as i64)
}

/// `rindex(s, sub, start)`: the offset of the last occurrence of `sub` at or before `start`
/// (clamped at the length), or -1; a negative `start` finds only an empty `sub`, at 0.
pub fn rindex(s: &[u8], sub: &[u8], start: i64) -> i64 {
    let len = s.len() as i64;
    if s.is_empty() && sub.is_empty() {
        return 0;
    }
    if start < 0 {
        return if sub.is_empty() { 0 } else { -1 };
    }
    let start = start.min(len) as usize;
    (0..=start)
        .rev()
        .find(|&i| matches_at(s, sub, i))
        .map_or(-1, |i| i as i64)
}

/// `strchr(s, c)` / `strrchr(s, c)`: the offset of the first (last) `c` in `s`.
pub fn strchr(s: &[u8], c: u8, last: bool) -> Option<usize> {
    if last {
        s.iter().rposition(|&b| b == c)
    } else {
        s.iter().position(|&b| b == c)
    }
}

/// One step of `strtok`: in `s` (the rest of the string being cut), skips the leading
/// delimiters and returns the token's range, or `None` when only delimiters are left.
pub fn strtok(s: &[u8], delim: &[u8]) -> Option<(usize, usize)> {
    let start = s.iter().position(|b| !delim.contains(b))?;
    // PANIC: `start` is a position in `s`.
    let end = s[start..]
        .iter()
        .position(|b| delim.contains(b))
        .map_or(s.len(), |p| start + p);
    Some((start, end))
}

/// `lltostr(v, base)`: `v` in `base` (2..=36; anything else is `None`). Base 10 is signed,
/// other bases print the 64 bits unsigned; base 16 has a `0x` prefix and base 8 a `0`.
pub fn lltostr(v: i64, base: i64, out: &mut [u8]) -> Option<usize> {
    if !(2..=36).contains(&base) {
        return None;
    }
    let b = base as u64;
    // 64 binary digits, a sign or a two-character prefix.
    let mut buf = [0u8; 66];
    let mut at = buf.len();
    let neg = base == 10 && v < 0;
    let mut u = if neg { v.unsigned_abs() } else { v as u64 };
    loop {
        let d = (u % b) as u8;
        at -= 1;
        // PANIC: at most 64 digits (base 2) and 2 prefix bytes fill the 66 of `buf`.
        buf[at] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
        u /= b;
        if u == 0 {
            break;
        }
    }
    let prefix: &[u8] = match base {
        16 => b"0x",
        8 if v != 0 => b"0",
        10 if neg => b"-",
        _ => b"",
    };
    for &p in prefix.iter().rev() {
        at -= 1;
        // PANIC: as above.
        buf[at] = p;
    }
    // PANIC: `at < buf.len()`.
    Some(copy(&buf[at..], out))
}

/// `strtoll(s, base)`: leading blanks, an optional sign, `0x` when the base is 16, then the
/// digits valid in `base` (2..=36; anything else is `None`); wraps like C's on overflow.
pub fn strtoll(s: &[u8], base: i64) -> Option<i64> {
    if !(2..=36).contains(&base) {
        return None;
    }
    let mut i = s
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .unwrap_or(s.len());
    let mut neg = false;
    if let Some(&c @ (b'-' | b'+')) = s.get(i) {
        neg = c == b'-';
        i += 1;
    }
    if base == 16 && s.get(i) == Some(&b'0') && matches!(s.get(i + 1), Some(b'x' | b'X')) {
        i += 2;
    }
    let mut v: i64 = 0;
    for &c in &s[i.min(s.len())..] {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'z' => c - b'a' + 10,
            b'A'..=b'Z' => c - b'A' + 10,
            _ => break,
        } as i64;
        if d >= base {
            break;
        }
        v = v.wrapping_mul(base).wrapping_add(d);
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `toupper(s)` / `tolower(s)`: ASCII letters changed, everything else copied.
pub fn change_case(s: &[u8], upper: bool, out: &mut [u8]) -> usize {
    let n = copy(s, out);
    // PANIC: `copy` returns at most `out.len()`.
    for c in &mut out[..n] {
        *c = if upper {
            c.to_ascii_uppercase()
        } else {
            c.to_ascii_lowercase()
        };
    }
    n
}

/// Trailing slashes off (but not the last character of a string of slashes).
fn trim_slashes(s: &[u8]) -> &[u8] {
    let keep = s.iter().rposition(|&b| b != b'/').map_or(1, |p| p + 1);
    // PANIC: clamped to the length.
    &s[..keep.min(s.len())]
}

/// `basename(s)`: the last component, without trailing slashes; `.` for an empty string,
/// `/` for a string of slashes.
pub fn basename(s: &[u8], out: &mut [u8]) -> usize {
    if s.is_empty() {
        return copy(b".", out);
    }
    let t = trim_slashes(s);
    if t == b"/" {
        return copy(b"/", out);
    }
    let start = t.iter().rposition(|&b| b == b'/').map_or(0, |p| p + 1);
    // PANIC: `start <= t.len()` (one past a position in `t`).
    copy(&t[start..], out)
}

/// `dirname(s)`: everything before the last component, without trailing slashes; `.` when
/// there is no slash, `/` when only the root is left.
pub fn dirname(s: &[u8], out: &mut [u8]) -> usize {
    let t = trim_slashes(s);
    if t == b"/" {
        return copy(b"/", out);
    }
    match t.iter().rposition(|&b| b == b'/') {
        None => copy(b".", out),
        Some(p) => {
            // PANIC: `p` is a position in `t`.
            let d = trim_slashes(&t[..p + 1]);
            copy(d, out)
        }
    }
}

/// `cleanpath(s)`: `//`, `/./` and `/x/../` collapsed, as text (no symbolic link is
/// followed); `..` above the root of an absolute path stays at the root, a trailing slash is
/// dropped and the empty string stays empty, as in Oracle's DTrace (whose results differ
/// from illumos's where illumos left a trailing `/.` or turned `a/../b` into `/b`).
pub fn cleanpath(s: &[u8], out: &mut [u8]) -> usize {
    let abs = s.first() == Some(&b'/');
    let mut n = 0usize;
    // `n` is the output length; component boundaries are found again in `out` when `..`
    // removes one, so no stack of components is needed.
    let root = if abs {
        n += copy(b"/", out);
        n
    } else {
        0
    };
    // Length of the prefix made of `..` components a relative path cannot remove.
    let mut floor = root;
    for comp in s.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." if n > floor => {
                // PANIC: `root <= floor < n <= out.len()`: `n` only grows by what fits.
                let body = &out[root..n];
                let cut = body
                    .iter()
                    .rposition(|&b| b == b'/')
                    .map_or(root, |p| root + p);
                n = cut;
            }
            b".." if abs => {}
            _ => {
                if n > root && n < out.len() {
                    // PANIC: `n < out.len()` just checked.
                    out[n] = b'/';
                    n += 1;
                }
                // PANIC: `n <= out.len()` (see above).
                n += copy(comp, &mut out[n..]);
                if comp == b".." {
                    floor = n;
                }
            }
        }
    }
    if n == 0 && !s.is_empty() {
        return copy(b".", out);
    }
    n
}

/// Writes `v` in decimal at `out[n..]`; returns the new length.
fn put_dec(v: u8, out: &mut [u8], n: usize) -> usize {
    let mut d = [0u8; 3];
    let mut k = 0;
    let mut u = v;
    loop {
        // PANIC: a `u8` has at most 3 decimal digits, `k <= 2` here.
        d[2 - k] = b'0' + u % 10;
        k += 1;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    // PANIC: `1 <= k <= 3`.
    n + copy(&d[3 - k..], out.get_mut(n..).unwrap_or(&mut []))
}

/// `inet_ntop()`'s family bit that makes it `link_ntop()`: the link type
/// ([`ARPHRD_ETHER`], [`ARPHRD_INFINIBAND`]) in the bits below (ABI minor 14).
pub const LINK_FAMILY: u64 = 1 << 16;
/// Ethernet's link type (`ARPHRD_ETHER`): a 6-byte address.
pub const ARPHRD_ETHER: u64 = 1;
/// InfiniBand's link type (`ARPHRD_INFINIBAND`): a 20-byte address.
pub const ARPHRD_INFINIBAND: u64 = 32;

/// A link-layer address as `link_ntop()` shows it: its bytes in two lowercase hex digits
/// each, separated by colons.
pub fn link_ntoa(a: &[u8], out: &mut [u8]) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut n = 0;
    for (i, &b) in a.iter().enumerate() {
        if i > 0 {
            n += copy(b":", out.get_mut(n..).unwrap_or(&mut []));
        }
        let d = [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]];
        n += copy(&d, out.get_mut(n..).unwrap_or(&mut []));
    }
    n
}

/// An IPv4 address (network order) in dotted-quad form.
pub fn inet_ntoa(a: &[u8; 4], out: &mut [u8]) -> usize {
    let mut n = 0;
    for (i, &b) in a.iter().enumerate() {
        if i > 0 {
            n += copy(b".", out.get_mut(n..).unwrap_or(&mut []));
        }
        n = put_dec(b, out, n);
    }
    n
}

/// `inet_ntop()`'s family for `inet_ntoa6()` without its `strict` argument (ABI minor
/// 16): [`AF_INET6`], an IPv4 address inside an IPv6 one written as the bare dotted quad.
pub const AF_INET6_LOOSE: u64 = AF_INET6 | (1 << 8);

/// An IPv6 address (network order) as RFC 5952 writes it: lowercase hexadecimal groups
/// without leading zeros, the first longest run of two or more zero groups as `::`. An
/// IPv4-mapped address (`::ffff:a.b.c.d`) and, as DTrace takes it, an IPv4-compatible one
/// (six zero groups then anything but `::` and `::1`) end in the dotted quad; unless
/// `strict`, the dotted quad alone (DTrace's `inet_ntoa6()`).
pub fn inet_ntoa6(a: &[u8; 16], strict: bool, out: &mut [u8]) -> usize {
    let mut g = [0u16; 8];
    // PANIC (this function): `i < 8` indexes `g` and `2 * i + 1 < 16` indexes `a`; a run of
    // zero groups starts and ends within `g`; a group has at most 4 hex digits (`k < 4`).
    for (i, w) in g.iter_mut().enumerate() {
        *w = u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    }
    let prefix: Option<&[u8]> = match (g[..5] == [0; 5], g[5], g[6], g[7]) {
        (true, 0xffff, _, _) => Some(b"::ffff:"),
        (true, 0, 0, 0 | 1) => None,
        (true, 0, _, _) => Some(b"::"),
        _ => None,
    };
    if let Some(p) = prefix {
        let n = if strict { copy(p, out) } else { 0 };
        let v4 = [a[12], a[13], a[14], a[15]];
        return n + inet_ntoa(&v4, out.get_mut(n..).unwrap_or(&mut []));
    }
    // The first longest run of zero groups, if two or more long.
    let (mut best, mut best_len) = (8usize, 0usize);
    let mut i = 0;
    while i < 8 {
        if g[i] == 0 {
            let run = g[i..].iter().take_while(|&&w| w == 0).count();
            if run > best_len {
                (best, best_len) = (i, run);
            }
            i += run;
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best = 8;
    }
    let mut n = 0;
    let mut i = 0;
    while i < 8 {
        if i == best {
            n += copy(b"::", out.get_mut(n..).unwrap_or(&mut []));
            i += best_len;
            continue;
        }
        if i > 0 && i != best + best_len {
            n += copy(b":", out.get_mut(n..).unwrap_or(&mut []));
        }
        let mut h = [0u8; 4];
        let mut k = 0;
        let mut u = g[i];
        loop {
            let d = (u & 0xf) as u8;
            h[3 - k] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
            k += 1;
            u >>= 4;
            if u == 0 {
                break;
            }
        }
        n += copy(&h[4 - k..], out.get_mut(n..).unwrap_or(&mut []));
        i += 1;
    }
    n
}

/// A weak pseudo-random number from a seed (`rand()`): SplitMix64's finalizer, cut to a
/// non-negative `int` as DTrace's `rand()` returns.
pub fn rand_from(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z & 0x7fff_ffff
}
