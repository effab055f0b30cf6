//! Compile D programs and run their clauses with the simulated environment: the records,
//! variables and aggregation updates are what the program says.

mod support;

use oxtrace::dsl::{compile, CompileOptions};
use oxtrace::runtime::sim::{Firing, OwnedItem, OwnedKey, Sim};
use oxtrace_core::action::{FaultKind, IntType, RecordKind};
use oxtrace_core::agg::AggKind;
use oxtrace_core::program::{Image, ProbeKind};
use support::c;

fn entry(func: &str, args: [u64; 6]) -> Firing {
    Firing {
        kind: ProbeKind::FbtEntry,
        func: func.into(),
        args,
        ..Firing::default()
    }
}

fn begin() -> Firing {
    Firing::default()
}

#[test]
fn begin_printf_and_exit() {
    let p = c(r#"BEGIN { printf("hello %s, pid %d\n", execname, pid); exit(3); }"#);
    let mut s = Sim::default();
    s.fire(&p, &begin());
    assert_eq!(s.printf_output(&p), "hello test, pid 1000\n");
    assert_eq!(s.records[1].kind, RecordKind::Exit);
    assert_eq!(s.records[1].items, vec![OwnedItem::Int(3, IntType::I64.0)]);
}

#[test]
fn predicates_filter_exactly() {
    let p = c("fbt::vfs_read:entry /arg2 > 100 && pid != 1/ { trace(arg2); }");
    let mut s = Sim::default();
    for n in [5u64, 101, 100, 4096] {
        s.fire(&p, &entry("vfs_read", [0, 0, n, 0, 0, 0]));
    }
    s.fire(&p, &entry("vfs_write", [0, 0, 500, 0, 0, 0]));
    let got: Vec<_> = s.records.iter().map(|r| r.items.clone()).collect();
    assert_eq!(
        got,
        vec![
            vec![OwnedItem::Int(101, IntType::I64.0)],
            vec![OwnedItem::Int(4096, IntType::I64.0)]
        ]
    );
}

#[test]
fn globs_and_multiple_descriptions() {
    let p = c("fbt::vfs_*:entry, kprobe:ksys_read { @[probefunc] = count(); }");
    let mut s = Sim::default();
    for f in [
        "vfs_read",
        "vfs_write",
        "ksys_read",
        "ksys_write",
        "do_open",
    ] {
        s.fire(&p, &entry(f, [0; 6]));
    }
    let keys: Vec<_> = s.agg_updates.iter().map(|u| u.1.clone()).collect();
    assert_eq!(
        keys,
        vec![
            vec![OwnedKey::Str(b"vfs_read".to_vec())],
            vec![OwnedKey::Str(b"vfs_write".to_vec())],
            vec![OwnedKey::Str(b"ksys_read".to_vec())],
        ]
    );
    assert_eq!(p.aggs[0].func, AggKind::Count);
}

#[test]
fn latency_with_thread_locals() {
    let src = r#"
        fbt::vfs_read:entry { self->ts = timestamp; }
        fbt::vfs_read:return /self->ts/ {
            @lat = quantize(timestamp - self->ts);
            printf("%d returned %d after %d ns\n", tid, retval, timestamp - self->ts);
            self->ts = 0;
        }
    "#;
    let p = c(src);
    let mut s = Sim::default();
    // A return without an entry is filtered by the predicate.
    let mut r = Firing {
        kind: ProbeKind::FbtReturn,
        func: "vfs_read".into(),
        retval: 42,
        timestamp: 5000,
        ..Firing::default()
    };
    s.fire(&p, &r);
    assert!(s.records.is_empty());
    let mut e = entry("vfs_read", [0; 6]);
    e.timestamp = 1000;
    s.fire(&p, &e);
    assert_eq!(s.dynvars.len(), 1);
    r.timestamp = 1750;
    s.fire(&p, &r);
    assert_eq!(s.printf_output(&p), "1000 returned 42 after 750 ns\n");
    assert_eq!(s.agg_updates, vec![(0, vec![], [750, 1])]);
    assert!(s.dynvars.is_empty(), "storing 0 deletes the variable");
}

#[test]
fn return_probes_see_return_value_as_arg1() {
    let p = c("kretprobe:vfs_read { trace(arg1); trace(retval); }");
    let mut s = Sim::default();
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtReturn,
            func: "vfs_read".into(),
            retval: (-14i64) as u64,
            ..Firing::default()
        },
    );
    let v = OwnedItem::Int((-14i64) as u64, IntType::I64.0);
    assert_eq!(s.records[0].items, vec![v.clone()]);
    assert_eq!(s.records[1].items, vec![v]);
}

#[test]
fn associative_arrays_and_compound_assignment() {
    let src = r#"
        fbt::f:entry { bytes[execname, arg0] += arg1; n++; ++n; n -= 1; }
        END { printf("%d %d\n", bytes["test", 7], n); }
    "#;
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &entry("f", [7, 10, 0, 0, 0, 0]));
    s.fire(&p, &entry("f", [7, 5, 0, 0, 0, 0]));
    s.fire(&p, &entry("f", [8, 1, 0, 0, 0, 0]));
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::End,
            ..Firing::default()
        },
    );
    assert_eq!(s.printf_output(&p), "15 3\n");
}

#[test]
fn clause_locals_strings_and_ternary() {
    let src = r#"
        BEGIN {
            this->name = execname == "test" ? "yes" : "no";
            this->len = strlen(strjoin(this->name, "!"));
            printf("%s %d %s\n", this->name, this->len, probename);
        }
    "#;
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &begin());
    assert_eq!(s.printf_output(&p), "yes 4 BEGIN\n");
}

#[test]
fn integer_types_casts_and_precedence() {
    let src = r#"
        BEGIN {
            printf("%d %d %u %x\n", 1 + 2 * 3 << 1, (char)300, (unsigned int)-1, (int)-1);
            printf("%d %d %d %d\n", 7 / 2, -7 % 3, 1 < 2 == 1, !0 + ~0);
            printf("%d %d\n", (uint8_t)0x1ff, 0 ? 1 : 2 ? 3 : 4);
            printf("%d %d %d\n", 1 || 0/1, 0 && 1, 1 ^^ 1);
        }
    "#;
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &begin());
    assert_eq!(
        s.printf_output(&p),
        "14 44 4294967295 ffffffff\n3 -1 1 0\n255 3\n1 0 0\n"
    );
}

#[test]
fn division_by_zero_aborts_only_that_clause() {
    let src = r#"
        BEGIN { x = 0; trace(1); trace(10 / x); trace(2); }
        BEGIN { trace(3); }
    "#;
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &begin());
    let vals: Vec<_> = s
        .records
        .iter()
        .map(|r| (r.clause, r.items.clone()))
        .collect();
    assert_eq!(
        vals,
        vec![
            (0, vec![OwnedItem::Int(1, IntType::I32.0)]),
            (1, vec![OwnedItem::Int(3, IntType::I32.0)]),
        ]
    );
    assert_eq!(s.faults.len(), 1);
    assert_eq!(s.faults[0].0, 0);
    assert_eq!(s.faults[0].1.kind, FaultKind::DivZero);
}

#[test]
fn kernel_memory_reads_and_bad_addresses() {
    let src = r#"
        fbt::f:entry {
            printf("%d %s\n", *(int *)arg0, stringof(arg1));
            trace(*(long *)(arg0 + 8));
        }
    "#;
    let p = c(src);
    let mut s = Sim::default();
    let mut mem = (-5i32).to_le_bytes().to_vec();
    mem.resize(8, 0);
    mem.extend_from_slice(&77u64.to_le_bytes());
    s.mem.push((0x1000, mem));
    let mut name = b"sshd\0".to_vec();
    name.resize(4096, 0);
    s.mem.push((0x2000, name));
    s.fire(&p, &entry("f", [0x1000, 0x2000, 0, 0, 0, 0]));
    assert_eq!(s.printf_output(&p), "-5 sshd\n");
    assert_eq!(s.records[1].items, vec![OwnedItem::Int(77, IntType::I64.0)]);
    s.fire(&p, &entry("f", [0xdead, 0x2000, 0, 0, 0, 0]));
    assert_eq!(s.faults.len(), 1);
    assert_eq!(s.faults[0].1.kind, FaultKind::BadAddr(0xdead));
}

#[test]
fn aggregations_with_parameters_and_actions() {
    let src = r#"
        fbt::f:entry {
            @a[execname, arg0] = lquantize(arg1, 0, 100, 10);
            @b = llquantize(arg1, 10, 0, 6, 20);
            @c = sum(arg1);
            @d = quantize(arg1, 3);
        }
        END { printa(@a); printa("%s %d %@d\n", @a); trunc(@a, 5); normalize(@c, 1000); clear(@d); denormalize(@c); }
    "#;
    let p = c(src);
    assert_eq!(p.aggs.len(), 4);
    assert_eq!(p.aggs[0].params, [0, 100, 10, 0]);
    assert_eq!(p.aggs[1].params, [10, 0, 6, 20]);
    let mut s = Sim::default();
    s.fire(&p, &entry("f", [1, 55, 0, 0, 0, 0]));
    assert_eq!(
        s.agg_updates,
        vec![
            (
                0,
                vec![OwnedKey::Str(b"test".to_vec()), OwnedKey::Int(1)],
                [55, 1]
            ),
            (1, vec![], [55, 1]),
            (2, vec![], [55, 1]),
            (3, vec![], [55, 3]),
        ]
    );
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::End,
            ..Firing::default()
        },
    );
    let kinds: Vec<_> = s.records.iter().map(|r| (r.kind, r.id)).collect();
    assert_eq!(
        kinds,
        vec![
            (RecordKind::Printa, 0),
            (RecordKind::Printa, 0),
            (RecordKind::Trunc, 0),
            (RecordKind::Normalize, 2),
            (RecordKind::Clear, 3),
            (RecordKind::Denormalize, 2),
        ]
    );
    assert_eq!(s.records[1].items, vec![OwnedItem::Int(0, IntType::I64.0)]);
    assert_eq!(p.formats[0], "%s %d %@d\n");
}

#[test]
fn tick_and_empty_clause_default_action() {
    let p = c("tick-10ms { } profile:::tick-2s, tick-100hz { }");
    assert_eq!(p.probes[0].period_ns, 10_000_000);
    assert_eq!(p.probes[1].period_ns, 2_000_000_000);
    assert_eq!(p.probes[2].period_ns, 10_000_000);
    let mut s = Sim::default();
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::Tick,
            period_ns: 2_000_000_000,
            ..Firing::default()
        },
    );
    assert_eq!(s.records.len(), 1);
    // Every description is a timer of its own: tick-10ms and tick-100hz both fire.
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::Tick,
            period_ns: 10_000_000,
            ..Firing::default()
        },
    );
    assert_eq!(s.records.len(), 3);
    assert!(s
        .records
        .iter()
        .all(|r| r.kind == RecordKind::Trace && r.items.is_empty()));
}

#[test]
fn probe_builtins_are_the_kernels() {
    let p = c(
        "fbt::vfs_*:return { trace(probemod); trace(probename); trace(id); trace(arg0); }
               tick-1s { trace(probename); trace(id); }",
    );
    let mut s = Sim {
        functions: vec!["vfs_read".into(), "vfs_write".into()],
        ..Sim::default()
    };
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtReturn,
            func: "vfs_read".into(),
            args: [9; 6],
            ..Firing::default()
        },
    );
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::Tick,
            ..Firing::default()
        },
    );
    let str_item = |v: &str| OwnedItem::Str(v.as_bytes().to_vec());
    assert_eq!(s.records[0].items, vec![str_item("vmlinux")]);
    assert_eq!(s.records[1].items, vec![str_item("return")]);
    // vfs_read and vfs_write are enabled probes 0 and 1 (the attach list), the tick 2.
    assert!(matches!(s.records[2].items[..], [OwnedItem::Int(0, _)]));
    // arg0 of a return probe is the return offset, unknown to a kretprobe.
    assert!(matches!(s.records[3].items[..], [OwnedItem::Int(0, _)]));
    assert_eq!(s.records[4].items, vec![str_item("tick-1s")]);
    assert!(matches!(s.records[5].items[..], [OwnedItem::Int(2, _)]));
}

#[test]
fn options_and_macros_reach_the_image() {
    let src = "#pragma D option bufsize=64k\n#pragma D option quiet\nBEGIN { trace($1); trace($$2); trace($target); }";
    let mut o = CompileOptions::with_args("t.d", &["42".into(), "str".into()]);
    o.macros.insert("target".into(), "1234".into());
    o.xopts.push(("strsize".into(), Some("128".into())));
    o.xopts.push(("switchrate".into(), Some("10hz".into())));
    let p = compile(src, "t.d", &o).unwrap();
    assert!(p.quiet);
    let img = Image::parse(&p.image).unwrap();
    assert_eq!(img.options().bufsize, 64 << 10);
    assert_eq!(img.options().strsize, 128);
    assert_eq!(img.options().switchrate, 100_000_000);
    let mut s = Sim::default();
    s.fire(&p, &begin());
    let items: Vec<_> = s.records.iter().map(|r| r.items[0].clone()).collect();
    assert_eq!(
        items,
        vec![
            OwnedItem::Int(42, IntType::I32.0),
            OwnedItem::Str(b"str".to_vec()),
            OwnedItem::Int(1234, IntType::I32.0)
        ]
    );
}

#[test]
fn cleanrate_is_clamped_with_a_warning() {
    let p = c("#pragma D option cleanrate=100000hz\nBEGIN {}");
    assert_eq!(p.options.cleanrate, 200_000);
    assert_eq!(p.warnings.len(), 1);
}

#[test]
fn variables_used_before_their_assigning_clause() {
    // The return clause comes first in the text.
    let p = c("fbt::f:return /self->t/ { trace(self->t); } fbt::f:entry { self->t = 5; }");
    let mut s = Sim::default();
    s.fire(&p, &entry("f", [0; 6]));
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtReturn,
            func: "f".into(),
            ..Firing::default()
        },
    );
    assert_eq!(s.records.len(), 1);
}

#[test]
fn string_compare_predicates() {
    let p = c(r#"fbt::f:entry /execname == "sshd" || probefunc < "b"/ { trace(execname); }"#);
    let mut s = Sim::default();
    let mut f = entry("f", [0; 6]);
    s.fire(&p, &f);
    f.execname = "sshd".into();
    s.fire(&p, &f);
    f.func = "a".into();
    s.fire(
        &p,
        &Firing {
            func: "a".into(),
            ..f.clone()
        },
    );
    assert_eq!(s.records.len(), 1);
}

#[test]
fn ptwrite_writes_values_in_firing_order() {
    let p = c("fbt::vfs_read:entry /arg2 > 1/ { n = n + 1; ptwrite(n * 1000 + arg2); }");
    let mut s = Sim::default();
    for n in [2u64, 1, 3, 9] {
        s.fire(&p, &entry("vfs_read", [0, 0, n, 0, 0, 0]));
    }
    let got: Vec<u64> = s.ptwrites.iter().map(|w| w.1).collect();
    assert_eq!(got, vec![1002, 2003, 3009]);
    assert!(compile("BEGIN { ptwrite(); }", "t.d", &CompileOptions::default()).is_err());
    assert!(compile(
        "BEGIN { ptwrite(execname); }",
        "t.d",
        &CompileOptions::default()
    )
    .is_err());
}

#[test]
fn aggregation_keys_are_named_by_their_expression() {
    let c = c("fbt::f:entry { @[execname, arg0   &  0xff] = count(); @n = count(); }");
    assert_eq!(c.aggs[0].key_names, vec!["execname", "arg0 & 0xff"]);
    assert!(c.aggs[1].key_names.is_empty());
}
