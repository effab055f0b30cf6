// SPDX-License-Identifier: GPL-2.0

//! User-space probes (the pid and USDT providers): the checks LOAD applies to its uattach
//! table and USDT operands before the kernel resolves a process or a file, and the
//! evaluation of a USDT operand when its probe fires.
//!
//! Both sides use these: the kernel refuses what [`check_uattach`] refuses with
//! `OXT_LOADERR_UATTACH`, the entry's index, `err_code` a [`UattachError`] and `err_arg`
//! its operand, and the tool checks its own table with the same function before LOAD.
//! [`usdt_eval`] is the one reading of `struct oxt_usdt_arg`: the kernel's probe context
//! and the tool's simulator both call it, with their own register and memory readers.

use crate::abi::{self, Uattach, UsdtArg};
use crate::action::UREG_COUNT;
use crate::limits::{MAX_UATTACH, MAX_UPROBE_NAME, MAX_UPROBE_PATH};
use crate::probe;
use crate::program::{Image, ProbeKind};

/// Most operands the whole `usdt_args` table of one LOAD may hold: every uattach entry
/// with the most operands a USDT probe has.
pub const MAX_USDT_ARGS_TOTAL: usize = MAX_UATTACH * abi::USDT_MAX_ARGS;

/// Why [`check_uattach`] refused an entry: `err_code` of `OXT_LOADERR_UATTACH` (0 is left
/// for the refusals of the kernel's own, which only the errno explains).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum UattachError {
    /// `reserved` is not zero, or `flags` has a bit besides `OXT_ATTACH_OPTIONAL`.
    Reserved = 1,
    /// `probe` names no description, or one that is not of a user-space kind.
    Probe = 2,
    /// `name` is not a NUL-terminated string of 1 to `MAX_UPROBE_NAME` bytes in the names
    /// buffer, with three colons (`provider:module:function:name`).
    Name = 3,
    /// `path` is not a NUL-terminated absolute path of at most `MAX_UPROBE_PATH` bytes in
    /// the names buffer.
    Path = 4,
    /// `pid` is not positive.
    Pid = 5,
    /// A field the probe's kind does not use is not zero: `ref_ctr`, `arg_first` and
    /// `nargs` outside USDT probes, `roff` outside pid return probes; or `ref_ctr` is odd.
    Field = 6,
    /// `arg_first + nargs` goes past `nusdt_args`.
    ArgRange = 7,
    /// `nargs` is over `OXT_USDT_MAX_ARGS` (`E2BIG`; every other reason is `EINVAL`).
    TooManyArgs = 8,
    /// Operand `err_arg` (0-based, of this entry) is not valid (see [`check_usdt_arg`]).
    Operand = 9,
}

/// The string at `off` in `names`, without its NUL; `None` if `off` is out of range or no
/// NUL follows it.
pub fn names_str(names: &[u8], off: u32) -> Option<&[u8]> {
    let rest = names.get(off as usize..)?;
    let len = rest.iter().position(|&b| b == 0)?;
    rest.get(..len)
}

/// Whether `name` can be a user-space probe's slot function: 1 to [`MAX_UPROBE_NAME`]
/// bytes with at least three colons.
pub fn name_ok(name: &[u8]) -> bool {
    (1..=MAX_UPROBE_NAME).contains(&name.len()) && name.iter().filter(|&&c| c == b':').count() >= 3
}

/// Whether `path` can be a probed file's path: absolute, at most [`MAX_UPROBE_PATH`] bytes.
pub fn path_ok(path: &[u8]) -> bool {
    path.first() == Some(&b'/') && path.len() <= MAX_UPROBE_PATH
}

/// Checks one operand of a USDT argument specification:
///
/// - `kind` one of `OXT_USDT_ARG_CONST`, `_REG`, `_MEM`; `size` 1, 2, 4 or 8; `is_signed`
///   0 or 1; `reserved` 0;
/// - CONST: `base` and `index` are `OXT_UREG_NONE`, `scale` 0 or 1;
/// - REG: `base` a register (below `UREG_COUNT`), `index` `OXT_UREG_NONE`, `scale` 0 or
///   1, `value` 0;
/// - MEM: `base` a register or `OXT_UREG_NONE`, `index` likewise, `scale` 1, 2, 4 or 8,
///   and 1 without an index.
pub fn check_usdt_arg(a: &UsdtArg) -> bool {
    let reg = |r: u8| (r as u64) < UREG_COUNT;
    let reg_or_none = |r: u8| r == abi::UREG_NONE || reg(r);
    if a.reserved != 0 || !matches!(a.size, 1 | 2 | 4 | 8) || a.is_signed > 1 {
        return false;
    }
    match a.kind {
        abi::USDT_ARG_CONST => {
            a.base == abi::UREG_NONE && a.index == abi::UREG_NONE && a.scale <= 1
        }
        abi::USDT_ARG_REG => {
            reg(a.base) && a.index == abi::UREG_NONE && a.scale <= 1 && a.value == 0
        }
        abi::USDT_ARG_MEM => {
            reg_or_none(a.base)
                && reg_or_none(a.index)
                && matches!(a.scale, 1 | 2 | 4 | 8)
                && (a.index != abi::UREG_NONE || a.scale == 1)
        }
        _ => false,
    }
}

/// Checks uattach entry `e` against the image, the names buffer and the operand table
/// (`args`, all of LOAD's `usdt_args`): every field and every string, in the order of
/// [`UattachError`]'s variants; `Err` carries the reason and its operand (`err_arg`: the
/// operand's index within the entry for [`UattachError::Operand`], else 0).
pub fn check_uattach(
    image: &Image<'_>,
    names: &[u8],
    args: &[UsdtArg],
    e: &Uattach,
) -> Result<(), (UattachError, u32)> {
    let fail = |why| Err((why, 0));
    if e.reserved != 0 || e.flags & !abi::ATTACH_OPTIONAL != 0 {
        return fail(UattachError::Reserved);
    }
    let kind = match image.probe(e.probe as usize) {
        Some(p) if probe::is_user(p.kind) => p.kind,
        _ => return fail(UattachError::Probe),
    };
    if !names_str(names, e.name).is_some_and(name_ok) {
        return fail(UattachError::Name);
    }
    if !names_str(names, e.path).is_some_and(path_ok) {
        return fail(UattachError::Path);
    }
    if e.pid <= 0 {
        return fail(UattachError::Pid);
    }
    let usdt = kind == ProbeKind::Usdt;
    if (!usdt && (e.ref_ctr != 0 || e.arg_first != 0 || e.nargs != 0))
        || (kind != ProbeKind::PidReturn && e.roff != 0)
        || e.ref_ctr % 2 != 0
    {
        return fail(UattachError::Field);
    }
    if e.nargs as usize > abi::USDT_MAX_ARGS {
        return fail(UattachError::TooManyArgs);
    }
    let Some(ops) = usdt_args_of(args, e) else {
        return fail(UattachError::ArgRange);
    };
    match ops.iter().position(|a| !check_usdt_arg(a)) {
        Some(i) => Err((UattachError::Operand, i as u32)),
        None => Ok(()),
    }
}

/// The operands of entry `e` in the table `args`; `None` if they go past its end.
pub fn usdt_args_of<'a>(args: &'a [UsdtArg], e: &Uattach) -> Option<&'a [UsdtArg]> {
    let first = e.arg_first as usize;
    args.get(first..first.checked_add(e.nargs as usize)?)
}

/// `v` cut to its low `size` bytes, then sign- or zero-extended to 64 bits.
pub fn extend(v: u64, size: u8, signed: bool) -> u64 {
    let bits = match size {
        1 => 8,
        2 => 16,
        4 => 32,
        _ => return v,
    };
    let shift = 64 - bits;
    if signed {
        (((v << shift) as i64) >> shift) as u64
    } else {
        (v << shift) >> shift
    }
}

/// Why [`usdt_eval`] could not give an operand's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsdtFault {
    /// The memory at this address could not be read (a `BADADDR` fault).
    BadAddr(u64),
    /// There are no user registers to read (not a user-space probe's firing), or the operand
    /// was not one [`check_usdt_arg`] admits.
    Invalid,
}

/// The value of operand `a` (which [`check_usdt_arg`] admitted): `reg(i)` reads user
/// register `i` (`uregs[]` numbering), `mem(addr, out)` reads `out.len()` bytes of user
/// memory without faulting (false on failure). Address arithmetic wraps, as the
/// processor's does.
pub fn usdt_eval(
    a: &UsdtArg,
    mut reg: impl FnMut(u8) -> Option<u64>,
    mem: impl FnOnce(u64, &mut [u8]) -> bool,
) -> Result<u64, UsdtFault> {
    let signed = a.is_signed != 0;
    let raw = match a.kind {
        abi::USDT_ARG_CONST => a.value as u64,
        abi::USDT_ARG_REG => reg(a.base).ok_or(UsdtFault::Invalid)?,
        abi::USDT_ARG_MEM => {
            let mut get = |r: u8| match r {
                abi::UREG_NONE => Some(0),
                r => reg(r),
            };
            let base = get(a.base).ok_or(UsdtFault::Invalid)?;
            let index = get(a.index).ok_or(UsdtFault::Invalid)?;
            let addr = base
                .wrapping_add(index.wrapping_mul(a.scale as u64))
                .wrapping_add(a.value as u64);
            let mut buf = [0u8; 8];
            let n = (a.size as usize).min(buf.len());
            // PANIC: `n` is at most the buffer's length.
            if !mem(addr, &mut buf[..n]) {
                return Err(UsdtFault::BadAddr(addr));
            }
            u64::from_le_bytes(buf)
        }
        _ => return Err(UsdtFault::Invalid),
    };
    Ok(extend(raw, a.size, signed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(kind: u8, size: u8, signed: u8, base: u8, index: u8, scale: u8, value: i64) -> UsdtArg {
        UsdtArg {
            kind,
            size,
            is_signed: signed,
            base,
            index,
            scale,
            reserved: 0,
            value,
        }
    }

    const N: u8 = abi::UREG_NONE;

    #[test]
    fn extension() {
        assert_eq!(extend(0xff, 1, true), u64::MAX);
        assert_eq!(extend(0xff, 1, false), 0xff);
        assert_eq!(extend(0x1_8000, 2, true), 0xffff_ffff_ffff_8000);
        assert_eq!(
            extend(0xdead_beef_8000_0000, 4, true),
            0xffff_ffff_8000_0000
        );
        assert_eq!(extend(0xdead_beef_8000_0000, 4, false), 0x8000_0000);
        assert_eq!(extend(0x1234, 8, true), 0x1234);
    }

    #[test]
    fn operand_checks() {
        assert!(check_usdt_arg(&arg(1, 4, 1, N, N, 0, -5)));
        assert!(check_usdt_arg(&arg(1, 8, 0, N, N, 1, 7)));
        assert!(!check_usdt_arg(&arg(1, 8, 0, 3, N, 1, 7)));
        assert!(check_usdt_arg(&arg(2, 8, 0, 14, N, 0, 0)));
        assert!(!check_usdt_arg(&arg(2, 8, 0, 14, N, 0, 1)));
        assert!(!check_usdt_arg(&arg(2, 8, 0, 26, N, 0, 0)));
        assert!(!check_usdt_arg(&arg(2, 8, 0, N, N, 0, 0)));
        assert!(!check_usdt_arg(&arg(2, 3, 0, 1, N, 0, 0)));
        assert!(!check_usdt_arg(&arg(2, 8, 2, 1, N, 0, 0)));
        assert!(check_usdt_arg(&arg(3, 4, 1, 19, N, 1, -8)));
        assert!(check_usdt_arg(&arg(3, 4, 1, 4, 5, 8, 16)));
        assert!(check_usdt_arg(&arg(3, 4, 1, N, N, 1, 0x1000)));
        assert!(!check_usdt_arg(&arg(3, 4, 1, 4, N, 8, 16)));
        assert!(!check_usdt_arg(&arg(3, 4, 1, 4, 5, 3, 16)));
        assert!(!check_usdt_arg(&arg(0, 4, 1, 4, 5, 1, 16)));
        assert!(!check_usdt_arg(&arg(4, 4, 1, 4, 5, 1, 16)));
        let mut a = arg(1, 8, 0, N, N, 1, 7);
        a.reserved = 1;
        assert!(!check_usdt_arg(&a));
    }

    fn regs(i: u8) -> Option<u64> {
        Some(0x1000 * (i as u64 + 1))
    }

    #[test]
    fn evaluation() {
        let nomem = |_: u64, _: &mut [u8]| -> bool { panic!("no read expected") };
        assert_eq!(
            usdt_eval(&arg(1, 4, 1, N, N, 1, -5), regs, nomem),
            Ok(-5i64 as u64)
        );
        assert_eq!(usdt_eval(&arg(1, 1, 0, N, N, 1, -1), regs, nomem), Ok(0xff));
        // %eax (uregs 10) as a signed int: 0xb000 stays positive.
        assert_eq!(
            usdt_eval(&arg(2, 4, 1, 10, N, 0, 0), regs, nomem),
            Ok(0xb000)
        );
        assert_eq!(
            usdt_eval(&arg(2, 8, 0, 10, N, 0, 0), |_| None, nomem),
            Err(UsdtFault::Invalid)
        );
        // -8(%rbp,%rbx,4): base 4 (0x5000), index 5 (0x6000).
        let mut seen = 0;
        let v = usdt_eval(&arg(3, 2, 1, 4, 5, 4, -8), regs, |addr, out| {
            seen = addr;
            assert_eq!(out.len(), 2);
            out.copy_from_slice(&[0x00, 0x80]);
            true
        });
        assert_eq!(seen, 0x5000 + 4 * 0x6000 - 8);
        assert_eq!(v, Ok(0xffff_ffff_ffff_8000));
        let v = usdt_eval(&arg(3, 8, 0, 4, N, 1, 0), regs, |_, _| false);
        assert_eq!(v, Err(UsdtFault::BadAddr(0x5000)));
        // Wrapping: an absolute address with a negative displacement from register 0.
        let v = usdt_eval(&arg(3, 1, 0, N, N, 1, -1), regs, |addr, out| {
            assert_eq!(addr, u64::MAX);
            out[0] = 7;
            true
        });
        assert_eq!(v, Ok(7));
    }

    #[test]
    fn names() {
        let buf = b"pid1:a.out:main:entry\0/bin/true\0x";
        assert_eq!(names_str(buf, 0), Some(&b"pid1:a.out:main:entry"[..]));
        assert_eq!(names_str(buf, 22), Some(&b"/bin/true"[..]));
        assert_eq!(names_str(buf, 32), None);
        assert_eq!(names_str(buf, 99), None);
        assert!(name_ok(b"pid1:a.out:main:entry"));
        assert!(name_ok(b"pid1:a.out:ns::f:entry"));
        assert!(!name_ok(b"pid1:a.out:main"));
        assert!(!name_ok(b""));
        assert!(path_ok(b"/bin/true"));
        assert!(!path_ok(b"bin/true"));
        assert!(!path_ok(b""));
    }

    proptest::proptest! {
        #[test]
        fn eval_matches_model(
            kind in 1u8..=3, size in proptest::sample::select(vec![1u8, 2, 4, 8]),
            signed in 0u8..=1, base in 0u8..26, index in 0u8..26,
            scale in proptest::sample::select(vec![1u8, 2, 4, 8]), value: i64,
            regv: [u64; 26], mem: u64,
        ) {
            let a = match kind {
                1 => arg(1, size, signed, N, N, 1, value),
                2 => arg(2, size, signed, base, N, 0, 0),
                _ => arg(3, size, signed, base, index, scale, value),
            };
            proptest::prop_assert!(check_usdt_arg(&a));
            let r = |i: u8| regv.get(i as usize).copied();
            let got = usdt_eval(&a, r, |addr, out| {
                let want = regv[base as usize]
                    .wrapping_add(regv[index as usize].wrapping_mul(scale as u64))
                    .wrapping_add(value as u64);
                assert_eq!(addr, want);
                out.copy_from_slice(&mem.to_le_bytes()[..out.len()]);
                true
            }).unwrap();
            let raw = match kind { 1 => value as u64, 2 => regv[base as usize], _ => mem };
            let bits = size as u32 * 8;
            let want = if bits == 64 {
                raw
            } else if signed == 1 {
                let m = raw & ((1u64 << bits) - 1);
                if m >> (bits - 1) == 1 { m | !((1u64 << bits) - 1) } else { m }
            } else {
                raw & ((1u64 << bits) - 1)
            };
            proptest::prop_assert_eq!(got, want);
        }
    }
}
