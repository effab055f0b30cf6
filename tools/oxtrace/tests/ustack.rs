//! `ustack()`, the depth built-ins, `ucaller` and the symbol functions in the compiler and
//! the simulated kernel: the keys the kernel would build from a fake user stack, the options
//! that set the default depths, and the errors.

mod support;

use oxtrace::dsl::{compile, CompileOptions, Compiled, KeyKind};
use oxtrace::runtime::sim::{Firing, OwnedKey, Sim};
use oxtrace_core::program::ProbeKind;
use oxtrace_core::ustack::{Decoded, Style, MAX_FRAMES};
use support::{c, err_text as err, tagged};

fn opts(x: &[(&str, &str)]) -> CompileOptions {
    CompileOptions {
        xopts: x
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect(),
        ..CompileOptions::default()
    }
}

fn c_with(src: &str, o: &CompileOptions) -> Compiled {
    match compile(src, "test.d", o) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

fn err_with(src: &str, o: &CompileOptions) -> String {
    match compile(src, "t.d", o) {
        Ok(_) => panic!("program compiled but should not:\n{src}"),
        Err(e) => e.to_string(),
    }
}

/// A user stack of `depth` frames: PC 0x401000, then return addresses 0x402000 + 0x10 * i,
/// with frame records at 0x7ffc_0000_0000 + 0x20 * i.
fn world(depth: u64) -> (Sim, Firing) {
    let mut s = Sim::default();
    let base = 0x7ffc_0000_0000u64;
    let mut mem = Vec::new();
    for i in 0..depth - 1 {
        let next = if i + 2 < depth {
            base + 0x20 * (i + 1)
        } else {
            0
        };
        mem.extend_from_slice(&next.to_le_bytes());
        mem.extend_from_slice(&(0x40_2000 + 0x10 * i).to_le_bytes());
        mem.extend_from_slice(&[0u8; 16]);
    }
    s.user_mem.push((base, mem));
    let f = Firing {
        kind: ProbeKind::Profile,
        period_ns: 1_000_000,
        pid: 4321,
        uregs: Some((0x40_1000, base)),
        kstack: vec![0xffff_ffff_8123_4519, 0xffff_ffff_8100_0060],
        ..Firing::default()
    };
    (s, f)
}

fn expected(n: u64) -> Vec<u64> {
    std::iter::once(0x40_1000)
        .chain((0..n - 1).map(|i| 0x40_2000 + 0x10 * i))
        .collect()
}

/// The first key of each aggregation update that is a user or symbol value, decoded (a
/// stack reference into the frames the simulation's definition holds).
fn keys(s: &Sim) -> Vec<(Style, u64, Vec<u64>)> {
    s.agg_updates
        .iter()
        .filter_map(|(_, k, _)| match &k[..] {
            [OwnedKey::Str(b), ..] => {
                let d = Decoded::new(b)?;
                if d.style.stack() {
                    let st = &s.stacks[&d.addrs().next()?];
                    assert_eq!(st.user, d.style == Style::Ustack);
                    assert_eq!(st.pid, d.pid);
                    return Some((d.style, d.pid, st.pcs.clone()));
                }
                Some((d.style, d.pid, d.addrs().collect()))
            }
            k => panic!("not a string key: {k:?}"),
        })
        .collect()
}

/// The keys of `p` fired once on a user stack of 30 frames.
fn keys_of(p: &Compiled) -> Vec<(Style, u64, Vec<u64>)> {
    let (mut s, f) = world(30);
    s.fire(p, &f);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    keys(&s)
}

#[test]
fn ustack_is_a_stack_key_walked_to_its_depth() {
    let p = c("profile-1ms { @a[ustack()] = count(); @b[ustack(3)] = count(); }");
    assert_eq!(p.aggs[0].keys, vec![KeyKind::Stack]);
    // DTrace's default of 20 frames; ustack(3).
    assert_eq!(
        keys_of(&p),
        vec![
            (Style::Ustack, 4321, expected(20)),
            (Style::Ustack, 4321, expected(3))
        ]
    );
}

#[test]
fn jstack_and_the_string_space_are_ustack() {
    // Linux has no ustack helpers to name a VM's frames: jstack() is ustack(), and the
    // string space such helpers would fill is checked and left unused.
    let p = c(
        "profile-1ms { @a[jstack()] = count(); @b[jstack(3, 100)] = count(); \
               @c[ustack(4, 0)] = count(); }",
    );
    assert_eq!(
        keys_of(&p),
        vec![
            (Style::Ustack, 4321, expected(20)),
            (Style::Ustack, 4321, expected(3)),
            (Style::Ustack, 4321, expected(4))
        ]
    );
    tagged(&[
        ("BEGIN { ustack(1, -1); }", "[D_USTACK_STRSIZE]"),
        ("BEGIN { x = 5; jstack(1, x); }", "[D_USTACK_STRSIZE]"),
        ("BEGIN { ustack(1, \"s\"); }", "[D_PROTO_ARG]"),
        ("BEGIN { jstack(\"s\"); }", "[D_PROTO_ARG]"),
        ("BEGIN { ustack(0, 200); }", "[D_USTACK_FRAMES]"),
        ("BEGIN { ustack(1, 10, 1); }", "[D_PROTO_LEN]"),
    ]);
}

#[test]
fn ustackframes_and_stackframes_set_the_default_depths() {
    let o = opts(&[("ustackframes", "5"), ("stackframes", "1")]);
    let p = c_with(
        "profile-1ms { @u[ustack()] = count(); @k[stack()] = count(); }",
        &o,
    );
    let (mut s, f) = world(30);
    s.fire(&p, &f);
    assert_eq!(keys(&s)[0], (Style::Ustack, 4321, expected(5)));
    let [OwnedKey::Str(k)] = &s.agg_updates[1].1[..] else {
        panic!()
    };
    let d = Decoded::new(k).unwrap();
    assert_eq!(s.stacks[&d.addrs().next().unwrap()].pcs.len(), 1);
    // As a pragma too.
    let p = c("#pragma D option ustackframes=2\nprofile-1ms { @[ustack()] = count(); }");
    let (mut s, f) = world(30);
    s.fire(&p, &f);
    assert_eq!(keys(&s)[0].2, expected(2));
    for (name, max) in [("ustackframes", MAX_FRAMES), ("stackframes", 127)] {
        for bad in ["0", &(max + 1).to_string(), "x"] {
            let e = err_with("BEGIN { exit(0); }", &opts(&[(name, bad)]));
            assert!(e.contains(&format!("a frame count from 1 to {max}")), "{e}");
        }
    }
}

#[test]
fn a_deep_stack_keeps_every_frame_in_a_short_key() {
    assert_eq!(MAX_FRAMES, 127);
    let p = c(&format!(
        "profile-1ms {{ @[ustack({MAX_FRAMES})] = count(); }}"
    ));
    let (mut s, f) = world(200);
    s.fire(&p, &f);
    let [(_, k, _)] = &s.agg_updates[..] else {
        panic!()
    };
    let [OwnedKey::Str(b)] = &k[..] else { panic!() };
    // Style, pid and id: a dozen bytes for 127 frames.
    assert!(b.len() <= 14, "{}", b.len());
    let (_, _, pcs) = &keys(&s)[0];
    assert_eq!(pcs[..], expected(127)[..]);
}

#[test]
fn depths_and_ucaller() {
    let p = c("profile-1ms { u = ustackdepth; k = stackdepth; c = ucaller; }");
    let (mut s, f) = world(7);
    s.fire(&p, &f);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let mut g: Vec<u64> = s.globals.values().copied().collect();
    g.sort();
    assert_eq!(g, vec![2, 7, 0x40_2000]);
    // A kernel thread has no user stack: empty key, depth 0, ucaller 0.
    let (mut s, mut f) = world(7);
    f.uregs = None;
    s.fire(&p, &f);
    let mut g: Vec<u64> = s.globals.values().copied().collect();
    g.sort();
    assert_eq!(g, vec![0, 0, 2]);
    for bad in ["ustackdepth = 1;", "stackdepth++;", "ucaller = 2;"] {
        let e = err(&format!("BEGIN {{ {bad} }}"));
        assert!(e.contains("D_OP_WRITE"), "{e}");
    }
}

#[test]
fn symbol_functions_record_their_style() {
    let p = c(
        "profile-1ms { @a[usym(arg1)] = count(); @b[ufunc(0x401234)] = count(); \
               @c[umod(1)] = count(); @d[uaddr(2)] = count(); @e[sym(arg0)] = count(); \
               @f[func(3)] = count(); @g[mod(4)] = count(); }",
    );
    let (mut s, f) = world(2);
    s.fire(&p, &f);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let k: Vec<(Style, u64, Vec<u64>)> = keys(&s);
    let styles: Vec<Style> = k.iter().map(|k| k.0).collect();
    assert_eq!(
        styles,
        vec![
            Style::Usym,
            Style::Ufunc,
            Style::Umod,
            Style::Uaddr,
            Style::Ksym,
            Style::Kfunc,
            Style::Kmod
        ]
    );
    // User values carry the process, kernel ones do not.
    let pids: Vec<u64> = k.iter().map(|k| k.1).collect();
    assert_eq!(pids, vec![4321, 4321, 4321, 4321, 0, 0, 0]);
    assert_eq!(k[1].2, vec![0x401234]);
    assert_eq!(k[6].2, vec![4]);
    let e = err("BEGIN { @[usym(\"x\")] = count(); }");
    assert!(e.contains("usym() requires an address, not string"), "{e}");
    assert!(err("BEGIN { @[mod()] = count(); }").contains("mod() takes one address"));
    let e = err("BEGIN { @[ustack(0)] = count(); }");
    assert!(
        e.contains(&format!(
            "ustack()'s frame count must be a constant from 1 to {MAX_FRAMES}"
        )),
        "{e}"
    );
    assert!(err("BEGIN { x = usym(1); }").contains("can only be an aggregation key"));
}

#[test]
fn printf_percent_a_records_the_process() {
    let p = c("profile-1ms { printf(\"%A\\n\", 0x401000); trace(ustack(2)); }");
    let (mut s, f) = world(5);
    s.fire(&p, &f);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.records.len(), 2);
    // printa's %k takes a stack key.
    c("profile-1ms { @[ustack(), usym(arg1)] = count(); } END { printa(\"%k %k %@d\\n\", @); }");
    let e = err("BEGIN { printf(\"%A\", \"s\"); }");
    assert!(
        e.contains("conversion: %A, prototype: pointer or integer, argument: string"),
        "{e}"
    );
}
