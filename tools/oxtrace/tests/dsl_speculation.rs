//! Speculations through the simulator: records held until commit, dropped by discard, the
//! buffer bounded by specsize, nspec speculations; and the compile errors of misuse.

mod support;

use oxtrace::dsl::{compile, CompileOptions};
use oxtrace::runtime::sim::{Firing, Sim};
use oxtrace_core::action::FaultKind;
use support::{c, err_at as err};

fn entry(arg0: u64) -> Firing {
    Firing {
        kind: oxtrace_core::program::ProbeKind::FbtEntry,
        func: "f".into(),
        args: [arg0, 0, 0, 0, 0, 0],
        ..Firing::default()
    }
}

const PROG: &str = r#"
    fbt::f:entry { self->s = speculation(); }
    fbt::f:entry { speculate(self->s); printf("spec %d\n", arg0); }
    fbt::f:entry { printf("plain %d\n", arg0); }
    fbt::f:entry /arg0 % 2 == 0/ { commit(self->s); }
    fbt::f:entry /arg0 % 2 == 1/ { discard(self->s); }
"#;

#[test]
fn commit_keeps_discard_drops() {
    let p = c(PROG);
    let mut s = Sim::default();
    for a in 1..=4 {
        s.fire(&p, &entry(a));
    }
    assert_eq!(
        s.printf_output(&p),
        "plain 1\nplain 2\nspec 2\nplain 3\nplain 4\nspec 4\n"
    );
    assert_eq!((s.spec_drops, s.spec_unavail), (0, 0));
}

#[test]
fn nspec_and_specsize_bound_speculations() {
    // One speculation (nspec=1): the second speculation() gets 0 and its data goes nowhere.
    let p = c(r#"
        BEGIN { a = speculation(); b = speculation(); }
        BEGIN { speculate(a); printf("a\n"); }
        BEGIN { speculate(b); printf("b\n"); }
        BEGIN { commit(a); commit(b); }
    "#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.printf_output(&p), "a\n");
    assert_eq!(s.spec_unavail, 1);
    // specsize holds 2 records of 16 bytes of data (24-byte headers, 8-byte aligned): the
    // third is a speculative drop.
    let p = c(r#"
        #pragma D option specsize=1k
        #pragma D option nspec=2
        BEGIN { x = speculation(); }
        BEGIN { speculate(x); printf("%s\n", "0123456789012345678901234567890123456789"); }
        BEGIN { commit(x); }
    "#);
    let mut s = Sim::default();
    for _ in 0..25 {
        s.fire(&p, &Firing::default());
    }
    assert_eq!(s.spec_drops, 0);
    assert_eq!(s.printf_output(&p).lines().count(), 25);
    assert_eq!(s.specs.len(), 2);
}

#[test]
fn full_speculative_buffer_drops() {
    let p = c(r#"
        #pragma D option specsize=1k
        BEGIN { x = speculation(); }
        tick-1s { speculate(x); printf("%s\n", "01234567890123456789012345678901234567890123456789"); }
        END { commit(x); }
    "#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    let tick = Firing {
        kind: oxtrace_core::program::ProbeKind::Tick,
        ..Firing::default()
    };
    for _ in 0..20 {
        s.fire(&p, &tick);
    }
    let end = Firing {
        kind: oxtrace_core::program::ProbeKind::End,
        ..Firing::default()
    };
    s.fire(&p, &end);
    // Each record takes 24 + 3 + 51 bytes, rounded to 80: 12 fit in 1 KiB.
    assert_eq!(s.printf_output(&p).lines().count(), 12);
    assert_eq!(s.spec_drops, 8);
}

#[test]
fn actions_that_record_nothing_may_precede_speculate() {
    // chill(), raise() and stop() act but record no data, as in DTrace.
    let mut o = CompileOptions::default();
    o.xopts.push(("destructive".into(), None));
    for a in ["chill(1)", "raise(0)", "stop()"] {
        let src = format!("BEGIN {{ self->s = speculation(); {a}; speculate(self->s); }}");
        compile(&src, "t.d", &o).unwrap_or_else(|e| panic!("{src}: {e}"));
    }
}

#[test]
fn misuse_is_a_compile_error() {
    for (src, pos, msg) in [
        (
            "BEGIN { speculate(1); @a = count(); }",
            "1:23",
            "[D_AGG_SPEC] aggregating actions may not follow speculate( )",
        ),
        (
            "BEGIN { speculate(1); exit(0); }",
            "1:23",
            "[D_EXIT_SPEC] exit( ) may not follow speculate( )",
        ),
        (
            "BEGIN { speculate(1); commit(1); }",
            "1:23",
            "commit() may not follow speculate(): a speculation records data only",
        ),
        (
            "BEGIN { printf(\"x\"); speculate(1); }",
            "1:22",
            "[D_SPEC_DREC] speculate( ) may not follow data-recording action(s)",
        ),
        (
            "BEGIN { speculate(1); speculate(1); }",
            "1:23",
            "[D_SPEC_SPEC] speculate( ) may not follow speculate( )",
        ),
        (
            "BEGIN { speculate(\"x\"); }",
            "1:19",
            "[D_PROTO_ARG] speculate( ) argument #1 is incompatible with prototype: prototype: int, argument: string",
        ),
        (
            "#pragma D option nspec=0\nBEGIN { }",
            "1:18",
            "[D_PRAGMA_OPTSET] option nspec=0 is below the smallest number of speculations, 1",
        ),
    ] {
        let (p, m) = err(src);
        assert_eq!((p.as_str(), m.as_str()), (pos, msg), "{src}");
    }
}

/// DTrace's rules for the order of a clause's actions around `commit()` and `speculate()`,
/// with its tags; what they allow compiles.
#[test]
fn commit_and_speculate_order_as_dtrace_checks_it() {
    for (src, pos, msg) in [
        (
            "BEGIN { commit(1); printf(\"after\\n\"); }",
            "1:20",
            "[D_DREC_COMM] data-recording actions may not follow commit( )",
        ),
        (
            "BEGIN { commit(1); exit(0); }",
            "1:20",
            "[D_DREC_COMM] data-recording actions may not follow commit( )",
        ),
        (
            "BEGIN { commit(1); @a = count(); }",
            "1:20",
            "[D_AGG_COMM] aggregating actions may not follow commit( )",
        ),
        (
            "BEGIN { trace(1); commit(1); }",
            "1:19",
            "[D_COMM_DREC] commit( ) may not follow data-recording action(s)",
        ),
        (
            "BEGIN { @a = count(); commit(1); }",
            "1:23",
            "[D_COMM_DREC] commit( ) may not follow data-recording action(s)",
        ),
        (
            "BEGIN { commit(1); speculate(1); }",
            "1:20",
            "[D_SPEC_COMM] speculate( ) may not follow commit( )",
        ),
        (
            "#pragma D option destructive\nBEGIN { speculate(1); chill(1); }",
            "2:23",
            "[D_ACT_SPEC] destructive actions may not follow speculate( )",
        ),
        (
            "BEGIN { speculate(1); raise(9); }",
            "1:23",
            "[D_ACT_SPEC] destructive actions may not follow speculate( )",
        ),
        (
            "BEGIN { speculate(1); copyout(\"a\", 1, 1); }",
            "1:23",
            "[D_ACT_SPEC] destructive actions may not follow speculate( )",
        ),
        (
            "BEGIN { speculate(1); copyoutstr(\"a\", 1, 1); }",
            "1:23",
            "[D_ACT_SPEC] destructive actions may not follow speculate( )",
        ),
    ] {
        let (p, m) = err(src);
        assert_eq!((p.as_str(), m.as_str()), (pos, msg), "{src}");
    }
    // A variable after commit, commit after commit or discard, data after discard.
    for src in [
        "BEGIN { commit(1); x = 1; commit(2); discard(1); }",
        "BEGIN { discard(1); printf(\"after discard\\n\"); exit(0); }",
        "BEGIN { x = speculation(); speculate(x); self->n++; printf(\"%d\", 1); }",
    ] {
        c(src);
    }
}

/// `commit()` or `discard()` of an id that names no speculation is DTrace's illegal
/// operation, which ends the clause; 0 is ignored, an inactive speculation left alone.
#[test]
fn commit_or_discard_of_an_invalid_id_is_an_illegal_operation() {
    for (src, faults, out) in [
        ("#pragma D option nspec=8\nBEGIN { commit(1024); n++; } BEGIN { printf(\"%d\\n\", n); }", 1, "0\n"),
        ("#pragma D option nspec=8\nBEGIN { discard(9); } BEGIN { printf(\"next\\n\"); }", 1, "next\n"),
        ("BEGIN { commit(-1); }", 1, ""),
        ("#pragma D option nspec=8\nBEGIN { commit(8); discard(0); commit(0); n++; } BEGIN { printf(\"%d\\n\", n); }", 0, "1\n"),
    ] {
        let p = c(src);
        let mut s = Sim::default();
        s.fire(&p, &Firing::default());
        assert_eq!(s.faults.len(), faults, "{src}");
        if faults > 0 {
            assert_eq!(s.faults[0].1.kind, FaultKind::IllegalOp, "{src}");
        }
        assert_eq!(s.printf_output(&p), out, "{src}");
    }
}
