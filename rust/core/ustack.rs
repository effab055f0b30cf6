// SPDX-License-Identifier: GPL-2.0

//! User stacks (`ustack()`), stack references and symbol values (`usym()`, `sym()`, ...)
//! as key components: the frame-pointer walk run in probe context, the encoding the
//! interpreter writes into a scratch string, and its decoding in the tool.
//!
//! The value travels as a string without NUL bytes, so it is a key, a tuple member and a
//! record item with no new kind anywhere. It starts with a [`Style`] byte, then, for the
//! user styles, the process id the tool needs to find the mappings, then one number: the
//! address of a symbol value, or the id of a stack (`stack()`, `ustack()`), whose frames
//! travel once in a definition record ([`crate::stack`]). A number is written in groups of
//! 7 bits with the high bit set, low group first, and ends in one group of 6 bits with bit 6
//! set and the high bit clear ([`put`]): no byte is NUL.

/// What an encoded value is, and so how the tool prints it; the first byte of the string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Style {
    /// `ustack()`: a reference to a user stack, printed one frame a line.
    Ustack = 1,
    /// `usym()`: the user symbol of an address, without offset.
    Usym = 2,
    /// `ufunc()`: as `usym()` (DTrace prints both as `module`func`).
    Ufunc = 3,
    /// `umod()`: the user module (object file) of an address.
    Umod = 4,
    /// `uaddr()`: the user symbol of an address with its offset.
    Uaddr = 5,
    /// `sym()`: the kernel symbol of an address, without offset.
    Ksym = 6,
    /// `func()`: as `sym()`.
    Kfunc = 7,
    /// `mod()`: the kernel module of an address (`vmlinux` for the kernel image).
    Kmod = 8,
    /// `stack()`: a reference to a kernel stack, printed one frame a line.
    Kstack = 9,
}

impl Style {
    /// The style of byte `b`, the first of an encoded value.
    pub fn from_u8(b: u8) -> Option<Style> {
        use Style::*;
        Some(match b {
            1 => Ustack,
            2 => Usym,
            3 => Ufunc,
            4 => Umod,
            5 => Uaddr,
            6 => Ksym,
            7 => Kfunc,
            8 => Kmod,
            9 => Kstack,
            _ => return None,
        })
    }

    /// Whether the value is a user address (the encoding carries the process id).
    pub fn user(self) -> bool {
        (self as u8) <= Style::Uaddr as u8
    }

    /// Whether the value is a stack reference rather than one symbol.
    pub fn stack(self) -> bool {
        matches!(self, Style::Ustack | Style::Kstack)
    }
}

/// DTrace's default depth of `ustack()` (option `ustackframes`).
pub const DEFAULT_FRAMES: u32 = 20;

/// Most frames of a `ustack(n)`, the bound of every user stack walk.
pub use crate::limits::MAX_USTACKFRAMES as MAX_FRAMES;

// A user stack's frames fit a stack definition.
const _: () = assert!(MAX_FRAMES <= crate::stack::MAX_FRAMES);

/// Bytes [`put`] may write for one number: ceil(64 / 7) + 1 (the last group holds 6 bits).
pub const MAX_NUM_BYTES: usize = 10;

/// Writes `v` at `out[at..]`; returns the new end, or `None` (nothing written) when it does
/// not fit.
pub fn put(out: &mut [u8], at: usize, mut v: u64) -> Option<usize> {
    let mut tmp = [0u8; MAX_NUM_BYTES];
    let mut n = 0;
    while v >= 0x40 {
        // PANIC: at most 9 groups of 7 bits precede the last one, and `tmp` has 10 bytes.
        tmp[n] = 0x80 | (v & 0x7f) as u8;
        v >>= 7;
        n += 1;
    }
    tmp[n] = 0x40 | v as u8;
    n += 1;
    out.get_mut(at..at + n)?.copy_from_slice(&tmp[..n]);
    Some(at + n)
}

/// Reads one number at the start of `b`; returns it and the bytes it took.
pub fn get(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &c) in b.iter().enumerate().take(MAX_NUM_BYTES) {
        let shift = 7 * i as u32;
        if c & 0x80 != 0 {
            v |= ((c & 0x7f) as u64).checked_shl(shift)?;
        } else if c & 0x40 != 0 {
            return Some((v | ((c & 0x3f) as u64).checked_shl(shift)?, i + 1));
        } else {
            return None;
        }
    }
    None
}

/// Writes the header of a value of `style` (`pid` for the user styles); returns its end.
fn header(out: &mut [u8], style: Style, pid: u64) -> Option<usize> {
    *out.first_mut()? = style as u8;
    if style.user() {
        put(out, 1, pid)
    } else {
        Some(1)
    }
}

/// Encodes one address (or, for [`Style::Ustack`] and [`Style::Kstack`], one stack id) of
/// `style` into `out`; returns the bytes written, 0 when `out` is too small.
pub fn encode_sym(style: Style, pid: u64, addr: u64, out: &mut [u8]) -> usize {
    header(out, style, pid)
        .and_then(|at| put(out, at, addr))
        .unwrap_or(0)
}

/// Reads the frame record at a frame pointer: `[saved frame pointer, return address]`.
pub trait FrameReader {
    /// Reads the 16 bytes at `addr` without faulting; false when they cannot be read.
    fn read(&mut self, addr: u64, out: &mut [u8; 16]) -> bool;
}

/// The user registers a walk starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserRegs {
    /// The interrupted (or system-calling) user PC.
    pub pc: u64,
    /// Its frame pointer (`rbp`).
    pub fp: u64,
}

/// Walks the frame-pointer chain from `regs`: calls `f` with each PC, the interrupted one
/// first, at most `max` times (clamped to [`MAX_FRAMES`]); stops at the first frame
/// pointer that is not 8-aligned, does not lie above the one before (a stack grows down, so
/// callers' frames are higher: this bounds the walk on a corrupt chain), cannot be read, or
/// holds a zero return address. Returns the number of PCs given, or stops early when `f`
/// returns false. No allocation; the reads go through `r`.
pub fn walk<R, F>(regs: UserRegs, max: u32, r: &mut R, mut f: F) -> u32
where
    R: FrameReader + ?Sized,
    F: FnMut(u64) -> bool,
{
    let max = max.min(MAX_FRAMES);
    if max == 0 || regs.pc == 0 || !f(regs.pc) {
        return 0;
    }
    let mut n = 1;
    let mut fp = regs.fp;
    let mut rec = [0u8; 16];
    while n < max {
        if fp == 0 || fp % 8 != 0 || !r.read(fp, &mut rec) {
            break;
        }
        let (lo, hi) = rec.split_at(8);
        let next = u64::from_le_bytes(lo.try_into().unwrap_or([0; 8]));
        let ret = u64::from_le_bytes(hi.try_into().unwrap_or([0; 8]));
        if ret == 0 || !f(ret) {
            break;
        }
        n += 1;
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

/// A decoded value: its style, its process id (0 for the kernel styles) and its addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// What it is.
    pub style: Style,
    /// The process of a user value.
    pub pid: u64,
    rest: &'a [u8],
}

impl<'a> Decoded<'a> {
    /// Decodes `b`; `None` when it is not an encoded value (a kernel stack, for one).
    pub fn new(b: &'a [u8]) -> Option<Self> {
        let style = Style::from_u8(*b.first()?)?;
        let (pid, rest) = if style.user() {
            let (pid, n) = get(&b[1..])?;
            (pid, b.get(1 + n..)?)
        } else {
            (0, &b[1..])
        };
        Some(Self { style, pid, rest })
    }

    /// The addresses (for a stack reference, its one id), the innermost frame first;
    /// stops at a malformed number.
    pub fn addrs(&self) -> impl Iterator<Item = u64> + 'a {
        let mut rest = self.rest;
        core::iter::from_fn(move || {
            let (v, n) = get(rest)?;
            rest = &rest[n..];
            Some(v)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user stack in a map of frame pointer to frame record.
    struct Mem(&'static [(u64, u64, u64)]);

    impl FrameReader for Mem {
        fn read(&mut self, addr: u64, out: &mut [u8; 16]) -> bool {
            let Some(&(_, next, ret)) = self.0.iter().find(|e| e.0 == addr) else {
                return false;
            };
            out[..8].copy_from_slice(&next.to_le_bytes());
            out[8..].copy_from_slice(&ret.to_le_bytes());
            true
        }
    }

    const REGS: UserRegs = UserRegs {
        pc: 0x5555_5555_1234,
        fp: 0x7ffc_0000_1000,
    };

    const CHAIN: &[(u64, u64, u64)] = &[
        (0x7ffc_0000_1000, 0x7ffc_0000_1040, 0x5555_5555_2000),
        (0x7ffc_0000_1040, 0x7ffc_0000_1100, 0x7f12_3456_7890),
        (0x7ffc_0000_1100, 0, 0x5555_5555_0100),
    ];

    #[test]
    fn numbers_round_trip_without_nul() {
        for v in [
            0,
            1,
            0x3f,
            0x40,
            0x7f,
            0x80,
            0x1fff,
            0x7fff_ffff_ffff,
            u64::MAX,
        ] {
            let mut b = [0u8; MAX_NUM_BYTES];
            let n = put(&mut b, 0, v).unwrap();
            assert!(b[..n].iter().all(|c| *c != 0));
            assert_eq!(get(&b[..n]), Some((v, n)));
        }
        assert_eq!(put(&mut [0u8; 2], 0, 0x7fff_ffff_ffff), None);
    }

    #[test]
    fn walks_the_chain() {
        let mut pcs = Vec::new();
        let n = walk(REGS, 20, &mut Mem(CHAIN), |pc| {
            pcs.push(pc);
            true
        });
        assert_eq!(n, 4);
        assert_eq!(
            pcs,
            vec![
                0x5555_5555_1234,
                0x5555_5555_2000,
                0x7f12_3456_7890,
                0x5555_5555_0100
            ]
        );
    }

    #[test]
    fn depth_and_the_callback_bound_the_walk() {
        let mut pcs = Vec::new();
        walk(REGS, 2, &mut Mem(CHAIN), |pc| {
            pcs.push(pc);
            true
        });
        assert_eq!(pcs, vec![0x5555_5555_1234, 0x5555_5555_2000]);
        assert_eq!(walk(REGS, 20, &mut Mem(CHAIN), |_| false), 0);
        assert_eq!(walk(REGS, 0, &mut Mem(CHAIN), |_| true), 0);
        assert_eq!(walk(REGS, 1000, &mut Mem(CHAIN), |_| true), 4);
    }

    #[test]
    fn a_corrupt_chain_ends_the_walk() {
        // A loop (the next frame pointer below the current one), misalignment, a hole.
        static LOOP: &[(u64, u64, u64)] = &[
            (0x7ffc_0000_1000, 0x7ffc_0000_1040, 0x5555_5555_2000),
            (0x7ffc_0000_1040, 0x7ffc_0000_1000, 0x5555_5555_3000),
        ];
        assert_eq!(walk(REGS, 100, &mut Mem(LOOP), |_| true), 3);
        static ODD: &[(u64, u64, u64)] = &[(0x7ffc_0000_1000, 0x7ffc_0000_1043, 0x1)];
        assert_eq!(walk(REGS, 100, &mut Mem(ODD), |_| true), 2);
        assert_eq!(walk(REGS, 100, &mut Mem(&[]), |_| true), 1);
        let no_pc = UserRegs { pc: 0, fp: 0 };
        assert_eq!(walk(no_pc, 100, &mut Mem(CHAIN), |_| true), 0);
    }

    #[test]
    fn symbols_carry_their_style_and_pid() {
        let mut b = [0u8; 32];
        let n = encode_sym(Style::Uaddr, 77, 0x5555_5555_1234, &mut b);
        let d = Decoded::new(&b[..n]).unwrap();
        assert_eq!((d.style, d.pid), (Style::Uaddr, 77));
        assert_eq!(d.addrs().collect::<Vec<_>>(), vec![0x5555_5555_1234]);
        let n = encode_sym(Style::Kmod, 77, 0xffff_ffff_8123_4567, &mut b);
        let d = Decoded::new(&b[..n]).unwrap();
        assert_eq!((d.style, d.pid), (Style::Kmod, 0));
        assert_eq!(d.addrs().collect::<Vec<_>>(), vec![0xffff_ffff_8123_4567]);
        assert!(b[..n].iter().all(|c| *c != 0));
        // Stack references: a user one carries its process, a kernel one does not.
        let n = encode_sym(Style::Ustack, 77, u64::MAX, &mut b);
        let d = Decoded::new(&b[..n]).unwrap();
        assert_eq!((d.style, d.pid), (Style::Ustack, 77));
        assert_eq!(d.addrs().collect::<Vec<_>>(), vec![u64::MAX]);
        let n = encode_sym(Style::Kstack, 77, 5, &mut b);
        let d = Decoded::new(&b[..n]).unwrap();
        assert_eq!((d.style, d.pid), (Style::Kstack, 0));
        assert!(d.style.stack() && !Style::Kmod.stack());
        assert_eq!(d.addrs().collect::<Vec<_>>(), vec![5]);
        assert_eq!(Decoded::new(&[0x80, 0x81]), None);
        for s in 1..=9 {
            assert_eq!(Style::from_u8(s).map(|s| s as u8), Some(s));
        }
        assert_eq!(Style::from_u8(0), None);
        assert_eq!(Style::from_u8(10), None);
    }
}
