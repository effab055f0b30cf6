//! `stack()` in the compiler and the simulated kernel: a string key to the kernel (a
//! reference), a stack key to the tool, its depth bounds, and the frames its definition
//! carries.

mod support;

use oxtrace::dsl::KeyKind;
use oxtrace::runtime::sim::{Firing, OwnedKey, Sim};
use oxtrace_core::action::{Dict, KeyLayout};
use oxtrace_core::program::{Image, ProbeKind};
use oxtrace_core::stack;
use oxtrace_core::ustack::{Decoded, Style};
use support::{c, err_text as err, tagged};

const PCS: [u64; 4] = [
    0xffff_ffff_8123_4519,
    0xffff_ffff_8100_0060,
    0xffff_ffff_a000_0010,
    0xffff_ffff_8200_004b,
];

/// The frames of the kernel stack that reference `b` names, from the simulation's
/// definitions.
fn frames(s: &Sim, b: &[u8]) -> Vec<u64> {
    let d = Decoded::new(b).expect("a stack reference");
    assert_eq!((d.style, d.pid), (Style::Kstack, 0));
    let id = d.addrs().next().unwrap();
    let st = &s.stacks[&id];
    assert!(!st.user);
    st.pcs.clone()
}

fn fbt(kstack: &[u64]) -> Firing {
    Firing {
        kind: ProbeKind::FbtEntry,
        func: "ksys_read".into(),
        kstack: kstack.to_vec(),
        ..Firing::default()
    }
}

#[test]
fn stack_is_a_string_key_to_the_kernel_and_a_stack_to_the_tool() {
    let p = c("fbt::ksys_read:entry { @[stack(), pid] = count(); }");
    assert_eq!(p.aggs[0].keys, vec![KeyKind::Stack, KeyKind::Int]);
    let img = Image::parse(&p.image).unwrap();
    assert_eq!(img.agg(0), Some(KeyLayout::new(2, 0b01)));
}

#[test]
fn stack_collects_the_frames_up_to_its_depth() {
    let p = c("fbt::ksys_read:entry { @a[stack()] = count(); @b[stack(2)] = count(); }");
    let mut s = Sim::default();
    s.fire(&p, &fbt(&PCS));
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let keys: Vec<Vec<u64>> = s
        .agg_updates
        .iter()
        .map(|(_, k, _)| match &k[..] {
            [OwnedKey::Str(b)] => frames(&s, b),
            k => panic!("not a stack key: {k:?}"),
        })
        .collect();
    assert_eq!(keys, vec![PCS.to_vec(), PCS[..2].to_vec()]);
}

#[test]
fn a_deep_stack_is_a_short_key() {
    let deep: Vec<u64> = (0..200).map(|i| 0xffff_ffff_8100_0000 + i * 16).collect();
    let p = c(&format!(
        "fbt::ksys_read:entry {{ @[stack({})] = count(); @[stack(60)] = count(); }}",
        stack::MAX_FRAMES
    ));
    let mut s = Sim::default();
    s.fire(&p, &fbt(&deep));
    let [(_, k, _), (_, k60, _)] = &s.agg_updates[..] else {
        panic!("{:?}", s.agg_updates)
    };
    let ([OwnedKey::Str(b)], [OwnedKey::Str(b60)]) = (&k[..], &k60[..]) else {
        panic!("{k:?}")
    };
    // A reference of a dozen bytes, whatever the depth; the definition has the frames.
    assert!(b.len() <= 12 && b60.len() <= 12, "{b:?}");
    assert_eq!(stack::MAX_FRAMES, 127);
    assert_eq!(frames(&s, b), deep[..127].to_vec());
    assert_eq!(frames(&s, b60), deep[..60].to_vec());
    assert_ne!(b, b60);
}

#[test]
fn frames_outside_kernel_text_are_left_out() {
    let p = c("fbt::ksys_read:entry { @[stack()] = count(); }");
    let mut s = Sim::default();
    s.fire(
        &p,
        &fbt(&[0x7fff_0000_1000, PCS[0], 0xffff_ffff_0000_1000, PCS[1]]),
    );
    let [(_, k, _)] = &s.agg_updates[..] else {
        panic!("{:?}", s.agg_updates)
    };
    let [OwnedKey::Str(b)] = &k[..] else {
        panic!("{k:?}")
    };
    assert_eq!(frames(&s, b), PCS[..2].to_vec());
    // No frame at all: the empty string.
    let mut s = Sim::default();
    s.fire(&p, &fbt(&[]));
    assert_eq!(s.agg_updates[0].1, vec![OwnedKey::Str(vec![])]);
}

#[test]
fn stack_depth_errors() {
    let max = stack::MAX_FRAMES;
    for bad in ["0".to_string(), (max + 1).to_string(), "pid".into()] {
        let e = err(&format!("BEGIN {{ @[stack({bad})] = count(); }}"));
        assert!(
            e.contains(&format!("frame count must be a constant from 1 to {max}")),
            "{e}"
        );
    }
    assert!(err("BEGIN { @[stack(1, 2)] = count(); }").contains("optional frame count"));
    // DTrace's tags: a count of the wrong type, out of range, too many arguments.
    tagged(&[
        ("BEGIN { stack(\"s\"); }", "[D_PROTO_ARG]"),
        ("BEGIN { stack(0); }", "[D_STACK_SIZE]"),
        ("BEGIN { stack(-1); }", "[D_STACK_SIZE]"),
        ("BEGIN { stack(1, 2); }", "[D_PROTO_LEN]"),
    ]);
    for bad in [
        "x = stack() + 1;",
        "x = stack();",
        "@[stack() == 0] = count();",
    ] {
        let e = err(&format!("BEGIN {{ {bad} }}"));
        assert!(e.contains("can only be an aggregation key"), "{e}");
    }
}

#[test]
fn trace_of_a_stack_is_a_percent_k_printf() {
    use oxtrace_core::action::RecordKind;
    let p = c("fbt::ksys_read:entry { trace(stack(2)); printf(\"%d%k\", 1, stack()); }");
    assert_eq!(p.formats, vec!["%k".to_string(), "%d%k".to_string()]);
    let mut s = Sim::default();
    s.fire(&p, &fbt(&PCS));
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let kinds: Vec<(RecordKind, u32)> = s.records.iter().map(|r| (r.kind, r.id)).collect();
    assert_eq!(
        kinds,
        vec![(RecordKind::Printf, 0), (RecordKind::Printf, 1)]
    );
    let e = err("BEGIN { printf(\"%k\", 1); }");
    assert!(
        e.contains("[D_PRINTF_ARG_TYPE] printf( ) argument #2 is incompatible with conversion #1 prototype: conversion: %k, prototype: stack, argument: int"),
        "{e}"
    );
    let e = err("BEGIN { printf(\"%s\", stack()); }");
    assert!(
        e.contains(
            "conversion: %s, prototype: char [] or string (or use stringof), argument: stack"
        ),
        "{e}"
    );
}

#[test]
fn maxframes_bounds_every_stack() {
    // The default depth, and a stack() without a count, take at most maxframes.
    let p = c("#pragma D option maxframes=2\nfbt::ksys_read:entry { @a[stack()] = count(); }");
    let mut s = Sim::default();
    s.fire(&p, &fbt(&PCS));
    let [(_, k, _)] = &s.agg_updates[..] else {
        panic!("{:?}", s.agg_updates)
    };
    let [OwnedKey::Str(b)] = &k[..] else {
        panic!("{k:?}")
    };
    assert_eq!(frames(&s, b), PCS[..2].to_vec());
    // A larger count is an error that names the bound.
    let e = err("#pragma D option maxframes=2\nBEGIN { @[stack(3)] = count(); }");
    assert!(
        e.contains("frame count must be a constant from 1 to 2"),
        "{e}"
    );
    let e = err("#pragma D option maxframes=2\nBEGIN { @[ustack(3)] = count(); }");
    assert!(
        e.contains("frame count must be a constant from 1 to 2"),
        "{e}"
    );
}
