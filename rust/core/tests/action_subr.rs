// SPDX-License-Identifier: GPL-2.0

//! The string subroutines: the pure functions with DTrace's documented results, and each
//! subroutine opcode through the verifier and the interpreter.

mod action_support;

use action_support::*;
use oxtrace_core::action::subr::*;
use oxtrace_core::action::*;

fn s(f: impl FnOnce(&mut [u8]) -> usize) -> String {
    let mut out = [0u8; 64];
    let n = f(&mut out);
    String::from_utf8(out[..n].to_vec()).unwrap()
}

#[test]
fn substr_positions_and_lengths() {
    let t = |i, l| s(|o| substr(b"hello, world", i, l, o));
    assert_eq!(t(0, None), "hello, world");
    assert_eq!(t(7, None), "world");
    assert_eq!(t(7, Some(3)), "wor");
    assert_eq!(t(-5, None), "world");
    assert_eq!(t(-5, Some(2)), "wo");
    assert_eq!(t(0, Some(-7)), "hello");
    assert_eq!(t(-20, Some(10)), "he");
    assert_eq!(t(-20, Some(8)), "");
    assert_eq!(t(-15, Some(8)), "hello");
    assert_eq!(t(12, None), "");
    assert_eq!(t(100, Some(5)), "");
    assert_eq!(t(3, Some(0)), "");
    assert_eq!(t(3, Some(-100)), "");
    assert_eq!(t(0, Some(i64::MAX)), "hello, world");
    assert_eq!(t(i64::MIN, Some(i64::MAX)), "hello, worl");
    // Truncated to the output (strsize).
    let mut o = [0u8; 4];
    assert_eq!(substr(b"hello", 0, None, &mut o), 4);
}

#[test]
fn index_and_rindex_like_perl() {
    assert_eq!(index(b"hello hello", b"llo", 0), 2);
    assert_eq!(index(b"hello hello", b"llo", 3), 8);
    assert_eq!(index(b"hello hello", b"llo", -4), 2);
    assert_eq!(index(b"hello", b"x", 0), -1);
    assert_eq!(index(b"hello", b"", 2), 2);
    assert_eq!(index(b"hello", b"", 9), 5);
    assert_eq!(index(b"hello", b"o", 9), -1);
    assert_eq!(index(b"", b"", 4), 0);
    assert_eq!(rindex(b"hello hello", b"llo", i64::MAX), 8);
    assert_eq!(rindex(b"hello hello", b"llo", 7), 2);
    assert_eq!(rindex(b"hello hello", b"llo", 1), -1);
    assert_eq!(rindex(b"hello", b"", i64::MAX), 5);
    assert_eq!(rindex(b"hello", b"", -1), 0);
    assert_eq!(rindex(b"hello", b"h", -1), -1);
    assert_eq!(strstr(b"abcabc", b"ca"), Some(2));
    assert_eq!(strstr(b"abc", b"d"), None);
    assert_eq!(strstr(b"abc", b""), Some(0));
    assert_eq!(strchr(b"a/b/c", b'/', false), Some(1));
    assert_eq!(strchr(b"a/b/c", b'/', true), Some(3));
    assert_eq!(strchr(b"abc", b'/', true), None);
}

#[test]
fn strtok_steps() {
    assert_eq!(strtok(b",,a,bc,", b","), Some((2, 3)));
    assert_eq!(strtok(b",bc,", b","), Some((1, 3)));
    assert_eq!(strtok(b",", b","), None);
    assert_eq!(strtok(b"", b","), None);
    assert_eq!(strtok(b"a b\tc", b" \t"), Some((0, 1)));
    assert_eq!(strtok(b"abc", b""), Some((0, 3)));
}

#[test]
fn lltostr_bases() {
    let t = |v, b| {
        let mut o = [0u8; 80];
        lltostr(v, b, &mut o).map(|n| String::from_utf8(o[..n].to_vec()).unwrap())
    };
    assert_eq!(t(0, 10).unwrap(), "0");
    assert_eq!(t(-1234, 10).unwrap(), "-1234");
    assert_eq!(t(i64::MIN, 10).unwrap(), "-9223372036854775808");
    assert_eq!(t(255, 16).unwrap(), "0xff");
    assert_eq!(t(0, 16).unwrap(), "0x0");
    assert_eq!(t(-1, 16).unwrap(), "0xffffffffffffffff");
    assert_eq!(t(8, 8).unwrap(), "010");
    assert_eq!(t(0, 8).unwrap(), "0");
    assert_eq!(t(5, 2).unwrap(), "101");
    assert_eq!(t(-1, 2).unwrap().len(), 64);
    assert_eq!(t(35, 36).unwrap(), "z");
    assert_eq!(t(1, 1), None);
    assert_eq!(t(1, 37), None);
    assert_eq!(t(1, -10), None);
}

#[test]
fn strtoll_parses_like_c() {
    assert_eq!(strtoll(b"1234", 10), Some(1234));
    assert_eq!(strtoll(b"  -42xyz", 10), Some(-42));
    assert_eq!(strtoll(b"+7", 10), Some(7));
    assert_eq!(strtoll(b"0x1F", 16), Some(31));
    assert_eq!(strtoll(b"ff", 16), Some(255));
    assert_eq!(strtoll(b"777", 8), Some(511));
    assert_eq!(strtoll(b"19", 8), Some(1));
    assert_eq!(strtoll(b"zz", 36), Some(35 * 36 + 35));
    assert_eq!(strtoll(b"", 10), Some(0));
    assert_eq!(strtoll(b"-", 10), Some(0));
    assert_eq!(strtoll(b"1", 0), None);
    assert_eq!(strtoll(b"1", 40), None);
}

#[test]
fn case_and_paths() {
    assert_eq!(
        s(|o| change_case(b"Hello, World 42", true, o)),
        "HELLO, WORLD 42"
    );
    assert_eq!(
        s(|o| change_case(b"Hello, World 42", false, o)),
        "hello, world 42"
    );
    for (p, base, dir) in [
        ("/usr/lib/libc.so", "libc.so", "/usr/lib"),
        ("/usr/lib/", "lib", "/usr"),
        ("/usr//lib//", "lib", "/usr"),
        ("usr", "usr", "."),
        ("usr/", "usr", "."),
        ("/usr", "usr", "/"),
        ("/", "/", "/"),
        ("//", "/", "/"),
        ("", ".", "."),
        ("a/b", "b", "a"),
        (".", ".", "."),
        ("..", "..", "."),
    ] {
        assert_eq!(s(|o| basename(p.as_bytes(), o)), base, "basename({p:?})");
        assert_eq!(s(|o| dirname(p.as_bytes(), o)), dir, "dirname({p:?})");
    }
    for (p, clean) in [
        ("/foo/bar/../baz", "/foo/baz"),
        ("/foo/./bar//baz", "/foo/bar/baz"),
        ("/../../etc", "/etc"),
        ("/foo/bar/", "/foo/bar"),
        ("/foo/bar/../../baz/.//", "/baz"),
        ("./", "."),
        ("/.", "/"),
        ("/foo/..", "/"),
        ("foo/../bar", "bar"),
        ("foo/../../bar", "../bar"),
        ("../../a", "../../a"),
        ("./a/./b/.", "a/b"),
        ("/", "/"),
        ("//", "/"),
        ("", ""),
        ("../..", "../.."),
        ("a/../..", ".."),
        ("a/..", "."),
    ] {
        assert_eq!(s(|o| cleanpath(p.as_bytes(), o)), clean, "cleanpath({p:?})");
    }
}

#[test]
fn link_formats() {
    assert_eq!(
        s(|o| link_ntoa(&[0, 0x1b, 0x21, 0xaa, 0xfe, 0x09], o)),
        "00:1b:21:aa:fe:09"
    );
    assert_eq!(s(|o| link_ntoa(&[], o)), "");
    // A short output buffer truncates, never overflows.
    let mut o = [0u8; 4];
    assert_eq!(link_ntoa(&[0xab; 6], &mut o), 4);
}

#[test]
fn inet_formats() {
    assert_eq!(s(|o| inet_ntoa(&[192, 168, 1, 20], o)), "192.168.1.20");
    assert_eq!(s(|o| inet_ntoa(&[0, 0, 0, 0], o)), "0.0.0.0");
    assert_eq!(
        s(|o| inet_ntoa(&[255, 255, 255, 255], o)),
        "255.255.255.255"
    );
    let groups = |hex: [u16; 8], strict: bool| {
        let mut a = [0u8; 16];
        for (i, g) in hex.iter().enumerate() {
            a[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
        }
        s(|o| inet_ntoa6(&a, strict, o))
    };
    // (groups, strict, text): `strict` false is inet_ntoa6() without its second argument.
    for (hex, strict, want) in [
        ([0; 8], true, "::"),
        ([0, 0, 0, 0, 0, 0, 0, 1], true, "::1"),
        ([0xfe80, 0, 0, 0, 1, 2, 3, 4], true, "fe80::1:2:3:4"),
        ([0x2001, 0xdb8, 0, 1, 0, 0, 0, 1], true, "2001:db8:0:1::1"),
        ([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1], true, "2001:db8::1:0:0:1"),
        ([1, 0, 2, 0, 3, 0, 4, 0], true, "1:0:2:0:3:0:4:0"),
        ([1, 2, 3, 4, 5, 6, 0, 0], true, "1:2:3:4:5:6::"),
        ([0, 0, 0, 0, 0, 0xffff, 0x7f00, 1], true, "::ffff:127.0.0.1"),
        // IPv4-compatible: six zero groups, then anything but `::` and `::1`.
        ([0, 0, 0, 0, 0, 0, 0x7f00, 1], true, "::127.0.0.1"),
        ([0, 0, 0, 0, 0, 0, 0, 2], true, "::0.0.0.2"),
        ([0, 0, 0, 0, 0, 0xfffe, 0x7f00, 1], true, "::fffe:7f00:1"),
        ([0, 0, 0, 0, 0, 0xffff, 0x7f00, 1], false, "127.0.0.1"),
        ([0, 0, 0, 0, 0, 0, 0x7f00, 1], false, "127.0.0.1"),
        ([0, 0, 0, 0, 0, 0, 0, 1], false, "::1"),
        ([0; 8], false, "::"),
        ([0xfe80, 0, 0, 0, 1, 2, 3, 4], false, "fe80::1:2:3:4"),
    ] {
        assert_eq!(groups(hex, strict), want, "{hex:x?} {strict}");
    }
    // Truncated to a short output, never past it.
    let mut o = [0u8; 5];
    assert_eq!(inet_ntoa6(&[0xab; 16], true, &mut o), 5);
    assert_eq!(&o, b"abab:");
}

#[test]
fn rand_is_a_non_negative_int() {
    for seed in 0..1000u64 {
        assert!(rand_from(seed) <= i32::MAX as u64);
    }
    assert_ne!(rand_from(1), rand_from(2));
}

// ---- opcodes ------------------------------------------------------------------------

/// Runs `code` over a table of strings; returns the result and the traced items.
fn run_tab(strtab: &[u8], code: &[u64]) -> (Result<u64, Fault>, Vec<OItem>) {
    let d = TDict {
        strtab: strtab.to_vec(),
        ..TDict::default()
    };
    let mut env = TEnv::default();
    let r = run_with(code, &d, &mut env);
    let items = env.records.iter().flat_map(|r| r.items.clone()).collect();
    (r, items)
}

fn trace(r: u8) -> [u64; 2] {
    [insn(Op::Pushts, 0, r, 0, 0), insn(Op::Trace, 0, 0, 0, 0)]
}

fn st(s: &str) -> OItem {
    OItem::S(s.as_bytes().to_vec())
}

const RET: u64 = insn(Op::Ret, 0, 0, 0, 0);

// Offsets in TAB: 0 "/usr/lib/", 10 "lib", 14 "a,b,,c", 21 ",", 23 "MiXed".
const TAB: &[u8] = b"/usr/lib/\0lib\0a,b,,c\0,\0MiXed\0";

#[test]
fn string_opcodes_make_scratch_strings() {
    let mut code = vec![
        insn(Op::Sets, 1, 0, 0, 0),
        insn(Op::Ldi, 2, 0, 0, 1),
        insn(Op::Ldi, 3, 0, 0, 3),
        insn(Op::Substr, 4, 1, 2, 3),
    ];
    code.extend(trace(4));
    for op in [Op::Basename, Op::Dirname, Op::Cleanpath] {
        code.push(insn(op, 5, 1, 0, 0));
        code.extend(trace(5));
    }
    code.push(insn(Op::Sets, 6, 0, 0, 23));
    for op in [Op::Toupper, Op::Tolower] {
        code.push(insn(op, 5, 6, 0, 0));
        code.extend(trace(5));
    }
    code.push(insn(Op::Sets, 6, 0, 0, 10));
    code.push(insn(Op::Strstr, 5, 1, 6, 0));
    code.extend(trace(5));
    code.push(insn(Op::Ldi, 7, 0, 0, b'/' as u32));
    code.push(insn(Op::Strrchr, 5, 1, 7, 0));
    code.extend(trace(5));
    code.push(insn(Op::Strchr, 5, 6, 7, 0));
    code.push(insn(Op::Mov, 8, 5, 0, 0));
    code.push(RET);
    let (r, items) = run_tab(TAB, &code);
    assert_eq!(r, Ok(0));
    assert_eq!(
        items,
        vec![
            st("usr"),
            st("lib"),
            st("/usr"),
            st("/usr/lib"),
            st("MIXED"),
            st("mixed"),
            st("lib/"),
            st("/"),
        ]
    );
}

#[test]
fn strchr_not_found_is_null_and_faults_when_used() {
    let (r, _) = run_tab(
        TAB,
        &[
            insn(Op::Sets, 1, 0, 0, 10),
            insn(Op::Ldi, 2, 0, 0, b'/' as u32),
            insn(Op::Strchr, 3, 1, 2, 0),
            insn(Op::Strlen, 4, 3, 0, 0),
            RET,
        ],
    );
    assert_eq!(
        r,
        Err(Fault {
            pc: 3,
            kind: FaultKind::BadString
        })
    );
}

#[test]
fn strtok_goes_on_from_null_within_a_clause() {
    let mut code = vec![insn(Op::Sets, 1, 0, 0, 14), insn(Op::Sets, 2, 0, 0, 21)];
    code.push(insn(Op::Strtok, 3, 1, 2, 0));
    code.extend(trace(3));
    for _ in 0..2 {
        code.push(insn(Op::Strtok, 3, 0, 2, 0));
        code.extend(trace(3));
    }
    // The fourth call finds nothing: NULL.
    code.push(insn(Op::Strtok, 3, 0, 2, 0));
    code.push(insn(Op::Ret, 0, 3, 0, 0));
    let (r, items) = run_tab(TAB, &code);
    assert_eq!(r, Ok(0));
    assert_eq!(items, vec![st("a"), st("b"), st("c")]);
}

#[test]
fn strtok_null_first_is_null() {
    let (r, _) = run_tab(
        TAB,
        &[
            insn(Op::Sets, 2, 0, 0, 21),
            insn(Op::Strtok, 3, 0, 2, 0),
            insn(Op::Ret, 0, 3, 0, 0),
        ],
    );
    assert_eq!(r, Ok(0));
}

#[test]
fn index_rindex_strtoll_lltostr_opcodes() {
    let (r, _) = run_tab(
        TAB,
        &[
            insn(Op::Sets, 1, 0, 0, 0),
            insn(Op::Ldi, 2, 0, 0, b'/' as u32),
            insn(Op::Sets, 3, 0, 0, 10),
            insn(Op::Index, 4, 1, 3, 0),
            insn(Op::Ret, 0, 4, 0, 0),
        ],
    );
    assert_eq!(r, Ok(5));
    let (r, _) = run_tab(
        b"10/100/10\x0010\0",
        &[
            insn(Op::Sets, 1, 0, 0, 0),
            insn(Op::Sets, 3, 0, 0, 10),
            insn(Op::Ldi, 5, 0, 0, 100),
            insn(Op::Rindex, 4, 1, 3, 5),
            insn(Op::Ret, 0, 4, 0, 0),
        ],
    );
    assert_eq!(r, Ok(7));
    let (r, _) = run_tab(
        b"0x7f\0",
        &[
            insn(Op::Sets, 1, 0, 0, 0),
            insn(Op::Ldi, 2, 0, 0, 16),
            insn(Op::Strtoll, 3, 1, 2, 0),
            insn(Op::Ret, 0, 3, 0, 0),
        ],
    );
    assert_eq!(r, Ok(127));
    let mut code = vec![
        insn(Op::Ldi, 1, 0, 0, -255i32 as u32),
        insn(Op::Ldi, 2, 0, 0, 10),
        insn(Op::Lltostr, 3, 1, 2, 0),
    ];
    code.extend(trace(3));
    code.push(insn(Op::Ldi, 2, 0, 0, 1));
    code.push(insn(Op::Lltostr, 3, 1, 2, 0));
    code.push(RET);
    let (r, items) = run_tab(TAB, &code);
    assert_eq!(items, vec![st("-255")]);
    assert_eq!(
        r,
        Err(Fault {
            pc: 6,
            kind: FaultKind::IllegalOp
        })
    );
}

#[test]
fn inet_ntop_reads_kernel_memory_without_faulting() {
    // TEnv's memory at 0x1000 holds bytes 0, 1, 2, ... 255.
    let mut code = vec![
        insn(Op::Ldi, 1, 0, 0, AF_INET as u32),
        insn(Op::Ldi, 2, 0, 0, 0x1000 + 10),
        insn(Op::InetNtop, 3, 1, 2, 0),
    ];
    code.extend(trace(3));
    code.push(insn(Op::Ldi, 1, 0, 0, AF_INET6 as u32));
    code.push(insn(Op::InetNtop, 3, 1, 2, 0));
    code.extend(trace(3));
    code.push(insn(Op::Ldi, 2, 0, 0, 0x1000 + 250));
    code.push(insn(Op::InetNtop, 3, 1, 2, 0));
    code.push(RET);
    let (r, items) = run_tab(TAB, &code);
    assert_eq!(
        items,
        // The IPv6 text is cut at strsize (32).
        vec![st("10.11.12.13"), st("a0b:c0d:e0f:1011:1213:1415:1617:")]
    );
    assert_eq!(
        r,
        Err(Fault {
            pc: 10,
            kind: FaultKind::BadAddr(0x1000 + 250)
        })
    );
    let (r, _) = run_tab(
        TAB,
        &[
            insn(Op::Ldi, 1, 0, 0, 3),
            insn(Op::Ldi, 2, 0, 0, 0x1000),
            insn(Op::InetNtop, 3, 1, 2, 0),
            RET,
        ],
    );
    assert_eq!(
        r,
        Err(Fault {
            pc: 2,
            kind: FaultKind::IllegalOp
        })
    );
}

#[test]
fn byte_order_rand_and_progenyof() {
    let (r, _) = run(&[
        insn(Op::Ldi, 1, 0, 0, 0x1234),
        insn(Op::Hton, 2, 1, 0, 16),
        insn(Op::Ret, 0, 2, 0, 0),
    ]);
    assert_eq!(r, Ok(0x3412));
    let (r, _) = run(&[
        insn(Op::Ldi, 1, 0, 0, 0x1122_3344),
        insn(Op::Hton, 2, 1, 0, 32),
        insn(Op::Ret, 0, 2, 0, 0),
    ]);
    assert_eq!(r, Ok(0x4433_2211));
    let (r, _) = run(&[
        insn(Op::Ldi, 1, 0, 0, 0x11),
        insn(Op::Hton, 2, 1, 0, 64),
        insn(Op::Ret, 0, 2, 0, 0),
    ]);
    assert_eq!(r, Ok(0x1100_0000_0000_0000));
    let (r1, _) = run(&[
        insn(Op::Rand, 1, 0, 0, 0),
        insn(Op::Rand, 2, 0, 0, 0),
        insn(Op::Sub, 3, 1, 2, 0),
        insn(Op::Ret, 0, 3, 0, 0),
    ]);
    assert_ne!(r1, Ok(0), "two rand() calls in one run differ");
    // TEnv: the process, its parent (1) and init.
    let pid = TEnv::default().builtin(Builtin::Pid);
    for (p, want) in [(pid, 1), (1, 1), (pid + 1, 0)] {
        let (r, _) = run(&[
            insn(Op::Ldi, 1, 0, 0, p as u32),
            insn(Op::Progenyof, 2, 1, 0, 0),
            insn(Op::Ret, 0, 2, 0, 0),
        ]);
        assert_eq!(r, Ok(want), "progenyof({p})");
    }
}

#[test]
fn strings_are_bounded_by_strsize() {
    let d = TDict {
        strtab: b"/a/very/long/path/name\0".to_vec(),
        strsize: 32,
        ..TDict::default()
    };
    let d8 = TDict {
        strsize: 8,
        strtab: d.strtab.clone(),
        ..TDict::default()
    };
    let mut env = TEnv::default();
    let mut code = vec![insn(Op::Sets, 1, 0, 0, 0), insn(Op::Toupper, 2, 1, 0, 0)];
    code.extend(trace(2));
    code.push(RET);
    // The 22-byte constant is longer than strsize 8: the verifier refuses it.
    assert!(check(&code, &d8).is_err());
    assert_eq!(run_with(&code, &d, &mut env), Ok(0));
    assert_eq!(env.records[0].items, vec![st("/A/VERY/LONG/PATH/NAME")]);
}

#[test]
fn verifier_checks_the_new_opcodes() {
    let d = TDict::default();
    let bad = |code: &[u64], reason: Reason| {
        assert_eq!(check(code, &d).map_err(|e| e.reason), Err(reason));
    };
    bad(
        &[insn(Op::Substr, 3, 1, 2, NREGS as u32), RET],
        Reason::BadImmRegister(NREGS as u32),
    );
    bad(
        &[insn(Op::Index, 3, 1, 2, 99), RET],
        Reason::BadImmRegister(99),
    );
    bad(&[insn(Op::Hton, 3, 1, 0, 8), RET], Reason::BadWidth(8));
    bad(
        &[insn(Op::Toupper, 3, 1, 2, 0), RET],
        Reason::ReservedNonZero,
    );
    bad(
        &[insn(Op::Strstr, 3, 1, 2, 1), RET],
        Reason::ReservedNonZero,
    );
    bad(&[insn(Op::Rand, 0, 0, 0, 0), RET], Reason::WritesR0);
    bad(&[insn(Op::Rand, 1, 2, 0, 0), RET], Reason::ReservedNonZero);
    bad(
        &[insn(Op::Progenyof, 1, 16, 0, 0), RET],
        Reason::BadRegister(16),
    );
    // Every string-making opcode takes a scratch slot.
    let b = code_bytes(&[
        insn(Op::Substr, 3, 1, 2, 4),
        insn(Op::Strtok, 3, 1, 2, 0),
        insn(Op::Lltostr, 3, 1, 2, 0),
        insn(Op::InetNtop, 3, 1, 2, 0),
        insn(Op::Cleanpath, 3, 1, 0, 0),
        insn(Op::Index, 3, 1, 2, 4),
        insn(Op::Strtoll, 3, 1, 2, 0),
        RET,
    ]);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    assert_eq!(v.string_allocs(), 5);
    // A scratch limit that holds four slots refuses the fifth.
    let four = scratch_size(d.nlocals, d.strsize, 4);
    let e = verify(Code::new(&b).unwrap(), &d, four).unwrap_err();
    assert_eq!((e.index, e.reason), (4, Reason::ScratchTooLarge));
}

#[test]
fn speculation_opcodes() {
    // Clause 1: a speculation, two records into it (the third is over the cap of 2), and
    // nothing to the principal buffer.
    let mut env = TEnv::default();
    let d = TDict::default();
    let code = [
        insn(Op::Speculation, 1, 0, 0, 0),
        insn(Op::Speculate, 0, 1, 0, 0),
        insn(Op::Ldi, 2, 0, 0, 7),
        insn(Op::Pushtv, 0, 2, 0, IntType::I64.0 as u32),
        insn(Op::Trace, 0, 0, 0, 0),
        insn(Op::Pushtv, 0, 2, 0, IntType::I64.0 as u32),
        insn(Op::Trace, 0, 0, 0, 0),
        insn(Op::Pushtv, 0, 2, 0, IntType::I64.0 as u32),
        insn(Op::Trace, 0, 0, 0, 0),
        insn(Op::Ret, 0, 1, 0, 0),
    ];
    assert_eq!(run_with(&code, &d, &mut env), Ok(1));
    assert!(env.records.is_empty());
    assert_eq!(env.specs[0].as_ref().map(|r| r.len()), Some(2));
    assert_eq!(env.spec_drops, 1);
    // Clause 2: commit moves them to the principal buffer.
    let commit = [
        insn(Op::Ldi, 1, 0, 0, 1),
        insn(Op::Commit, 0, 1, 0, 0),
        insn(Op::Ret, 0, 0, 0, 0),
    ];
    assert_eq!(run_with(&commit, &d, &mut env), Ok(0));
    assert_eq!(env.records.len(), 2);
    assert!(env.specs[0].is_none());
    // A discarded speculation's records are gone; a third speculation() with both taken is 0.
    for _ in 0..2 {
        run_with(&code, &d, &mut env).unwrap();
    }
    assert_eq!(run_with(&code, &d, &mut env), Ok(0));
    assert_eq!(env.spec_unavail, 1);
    let discard = [
        insn(Op::Ldi, 1, 0, 0, 2),
        insn(Op::Discard, 0, 1, 0, 0),
        insn(Op::Ret, 0, 0, 0, 0),
    ];
    run_with(&discard, &d, &mut env).unwrap();
    assert!(env.specs[1].is_none());
    assert_eq!(env.records.len(), 2);
}

#[test]
fn copyout_faults_in_a_speculated_clause_and_on_an_unwritable_address() {
    // r2: the string "lib" (TAB offset 10), r3: the user address, r4: the size.
    let copy = |op| {
        [
            insn(Op::Sets, 2, 0, 0, 10),
            insn(Op::Ldi, 3, 0, 0, 0x7000),
            insn(Op::Ldi, 4, 0, 0, 4),
            insn(op, 0, 2, 3, 4),
            insn(Op::Ret, 0, 0, 0, 0),
        ]
    };
    for op in [Op::Copyout, Op::Copyoutstr] {
        let mut code = vec![
            insn(Op::Speculation, 1, 0, 0, 0),
            insn(Op::Speculate, 0, 1, 0, 0),
        ];
        code.extend(copy(op));
        let (r, _) = run_tab(TAB, &code);
        assert_eq!(
            r,
            Err(Fault {
                pc: 5,
                kind: FaultKind::IllegalOp
            })
        );
        // The test environment has no user memory to write.
        let (r, _) = run_tab(TAB, &copy(op));
        assert_eq!(
            r,
            Err(Fault {
                pc: 3,
                kind: FaultKind::BadAddr(0x7000)
            })
        );
    }
}

#[test]
fn an_aggregation_after_a_record_in_a_speculated_clause_faults() {
    // `trace` leaves `exec` for `slow`; the aggregation after it is then dispatched by
    // `Vm::run` itself, which must refuse it in a speculation as `slow` does.
    let (r, _) = run(&[
        insn(Op::Speculation, 1, 0, 0, 0),
        insn(Op::Speculate, 0, 1, 0, 0),
        insn(Op::Pushtv, 0, 1, 0, 0),
        insn(Op::Trace, 0, 0, 0, 0),
        insn(Op::Agg, 0, 1, 1, 0),
        insn(Op::Ret, 0, 0, 0, 0),
    ]);
    assert_eq!(
        r,
        Err(Fault {
            pc: 4,
            kind: FaultKind::IllegalOp
        })
    );
}

#[test]
fn a_speculated_clause_records_data_only() {
    for op in [
        insn(Op::Exit, 0, 2, 0, 0),
        insn(Op::Agg, 0, 2, 2, 0),
        insn(Op::Printa, 0, 0, 0, 0),
        insn(Op::Commit, 0, 1, 0, 0),
        insn(Op::Speculate, 0, 1, 0, 0),
    ] {
        let (r, _) = run(&[
            insn(Op::Speculation, 1, 0, 0, 0),
            insn(Op::Speculate, 0, 1, 0, 0),
            op,
            insn(Op::Ret, 0, 0, 0, 0),
        ]);
        assert_eq!(
            r,
            Err(Fault {
                pc: 2,
                kind: FaultKind::IllegalOp
            }),
            "{:?}",
            Insn::decode(op)
        );
    }
}
