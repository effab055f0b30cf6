// SPDX-License-Identifier: GPL-2.0

//! The uattach table's checks (`uprobe::check_uattach`): every field of an entry and of its
//! USDT operands, against an image with one description of each user-space kind.

use oxtrace_core::abi::{self, Uattach, UsdtArg};
use oxtrace_core::action::*;
use oxtrace_core::diag::Errno;
use oxtrace_core::program::*;
use oxtrace_core::uprobe::{check_uattach, UattachError};

const STRTAB: &[u8] = b"\0f*\0";
const RET: u64 = insn(Op::Ret, 0, 0, 0, 0);

fn image() -> Vec<u8> {
    let kinds = [
        ProbeKind::PidEntry,
        ProbeKind::PidReturn,
        ProbeKind::PidOffset,
        ProbeKind::Usdt,
        ProbeKind::FbtEntry,
    ];
    let probes = kinds.map(|kind| ProbeDesc {
        kind,
        func: if kind == ProbeKind::FbtEntry { 1 } else { 0 },
        arg: 0,
    });
    let clauses = [ClauseDesc {
        probe_first: 0,
        probe_count: 5,
        pred_start: 0,
        pred_len: 0,
        act_start: 0,
        act_len: 1,
    }];
    let p = Parts {
        probes: &probes,
        clauses: &clauses,
        code: &[RET],
        ints: &[],
        strtab: STRTAB,
        vars: &[],
        aggs: &[],
        fmts: &[],
        options: &[],
        nlocals: 0,
    };
    let mut out = vec![0u8; p.encoded_len()];
    p.write(&mut out).unwrap();
    out
}

const NAMES: &[u8] = b"pid7:a.out:main:entry\0/usr/bin/a.out\0nocolon\0rel/path\0";
const PATH: u32 = 22;

fn entry(probe: u32) -> Uattach {
    Uattach {
        probe,
        flags: 0,
        name: 0,
        path: PATH,
        offset: 0x1130,
        ref_ctr: 0,
        roff: 0,
        pid: 7,
        arg_first: 0,
        nargs: 0,
        reserved: 0,
    }
}

fn reg(r: u8) -> UsdtArg {
    UsdtArg {
        kind: abi::USDT_ARG_REG,
        size: 8,
        is_signed: 1,
        base: r,
        index: abi::UREG_NONE,
        scale: 0,
        reserved: 0,
        value: 0,
    }
}

#[test]
fn entries() {
    let buf = image();
    let img = Image::parse(&buf).unwrap();
    let args = [reg(14), reg(13), reg(12)];
    let check = |e: &Uattach| check_uattach(&img, NAMES, &args, e);
    let why = |e: &Uattach| check(e).unwrap_err().0;
    for d in 0..4 {
        assert_eq!(check(&entry(d)), Ok(()), "kind {d}");
    }
    let mut e = entry(3);
    e.nargs = 3;
    e.ref_ctr = 0x4010;
    assert_eq!(check(&e), Ok(()));
    e.arg_first = 1;
    assert_eq!(why(&e), UattachError::ArgRange);
    e.arg_first = u32::MAX;
    assert_eq!(why(&e), UattachError::ArgRange);
    e.arg_first = 0;
    e.nargs = 13;
    assert_eq!(why(&e), UattachError::TooManyArgs);
    let r = oxtrace_core::diag::Refusal::uattach(4, UattachError::TooManyArgs, 0);
    assert_eq!(
        (r.errno, r.kind, r.index, r.code),
        (Errno::TooBig, abi::LOADERR_UATTACH, 4, 8)
    );
    e.nargs = 0;
    e.ref_ctr = 0x4011;
    assert_eq!(why(&e), UattachError::Field);

    let mut e = entry(1);
    e.roff = 0x2a;
    assert_eq!(check(&e), Ok(()));
    let mut e = entry(0);
    e.roff = 0x2a;
    assert_eq!(why(&e), UattachError::Field);
    let mut e = entry(0);
    e.nargs = 1;
    assert_eq!(why(&e), UattachError::Field);
    let mut e = entry(2);
    e.ref_ctr = 2;
    assert_eq!(why(&e), UattachError::Field);

    assert_eq!(why(&entry(4)), UattachError::Probe);
    assert_eq!(why(&entry(5)), UattachError::Probe);
    let mut e = entry(0);
    e.reserved = 1;
    assert_eq!(why(&e), UattachError::Reserved);
    let mut e = entry(0);
    e.flags = abi::ATTACH_OPTIONAL;
    assert_eq!(check(&e), Ok(()));
    e.flags = 2;
    assert_eq!(why(&e), UattachError::Reserved);
    for (name, path, want) in [
        (38, PATH, UattachError::Name),
        (NAMES.len() as u32, PATH, UattachError::Name),
        (u32::MAX, PATH, UattachError::Name),
        (0, 46, UattachError::Path),
        (0, 0, UattachError::Path),
    ] {
        let mut e = entry(0);
        e.name = name;
        e.path = path;
        assert_eq!(why(&e), want, "name {name} path {path}");
    }
    let mut e = entry(0);
    e.pid = 0;
    assert_eq!(why(&e), UattachError::Pid);
    e.pid = -1;
    assert_eq!(why(&e), UattachError::Pid);
}

#[test]
fn operands() {
    let buf = image();
    let img = Image::parse(&buf).unwrap();
    let mut args = [reg(14), reg(13), reg(12)];
    args[2].size = 3;
    let mut e = entry(3);
    e.nargs = 3;
    assert_eq!(
        check_uattach(&img, NAMES, &args, &e),
        Err((UattachError::Operand, 2))
    );
    e.arg_first = 1;
    e.nargs = 1;
    assert_eq!(check_uattach(&img, NAMES, &args, &e), Ok(()));
}

#[test]
fn long_strings() {
    let buf = image();
    let img = Image::parse(&buf).unwrap();
    let mut names = vec![b'p'; 300];
    names[1] = b':';
    names[2] = b':';
    names[3] = b':';
    names[255] = 0;
    names.extend_from_slice(b"/x\0");
    let mut e = entry(0);
    e.path = 300;
    assert_eq!(check_uattach(&img, &names, &[], &e), Ok(()));
    names[255] = b'p';
    names[256] = 0;
    assert_eq!(
        check_uattach(&img, &names, &[], &e),
        Err((UattachError::Name, 0))
    );
    let mut names = b"p:m:f:n\0/".to_vec();
    names.extend(std::iter::repeat_n(b'a', 4095));
    names.push(0);
    e.path = 8;
    assert_eq!(
        check_uattach(&img, &names, &[], &e),
        Err((UattachError::Path, 0))
    );
    names.remove(9);
    assert_eq!(check_uattach(&img, &names, &[], &e), Ok(()));
}
