//! `llquantize()` with fewer steps than the factor (DTrace's rule: the steps then divide the
//! factor): compiled, run through the simulator, merged and printed, and its parameter
//! errors worded by the one validator at the argument they name.

use oxtrace::agg::{AggTable, SortOrder};
use oxtrace::dsl::sim::{Firing, Sim};
use oxtrace::dsl::{compile, CompileOptions, Compiled};
use oxtrace::run;
use oxtrace_core::agg::{AggBuffer, KeyElem, SnapshotCursor};
use oxtrace_core::program::ProbeKind;

fn c(src: &str) -> Compiled {
    compile(src, "t.d", &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs BEGIN in the simulator, applies its aggregation updates like one CPU of the kernel
/// and prints `@id` as `printa` does.
fn begin_printa(p: &Compiled, id: u32) -> String {
    let mut s = Sim::default();
    s.fire(
        p,
        &Firing {
            kind: ProbeKind::Begin,
            ..Firing::default()
        },
    );
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let dict = run::dictionary(p).unwrap();
    let mut mem = vec![0u64; 1 << 14];
    AggBuffer::format(&mut mem).unwrap();
    let mut b = AggBuffer::attach(&mut mem).unwrap();
    for (agg, key, [v, inc]) in &s.agg_updates {
        assert!(key.is_empty());
        let f = dict.get(*agg).unwrap().func;
        b.apply(*agg, &f, &[] as &[KeyElem<'_>], *v as i64, *inc as i64)
            .unwrap();
    }
    let mut buf = vec![0u8; b.snapshot_len()];
    let mut cur = SnapshotCursor::new();
    let n = b.serialize(0, &mut buf, &mut cur).unwrap();
    let mut t = AggTable::new(dict);
    t.merge_snapshots(&buf[..n]).unwrap();
    let mut out = String::new();
    t.printa(id, SortOrder::default(), &mut out).unwrap();
    out
}

const HEADER: &str = "\n\n           value  ------------- Distribution ------------- count    \n";

#[test]
fn fewer_steps_than_the_factor_run_and_print() {
    let p = c("BEGIN { @l = llquantize(3, 10, 0, 6, 5); }");
    assert_eq!(p.aggs[0].params, [10, 0, 6, 5]);
    // Order 0 has buckets of width 2 (1, 2, 4, 6, 8): 3 lands in the one labelled 2.
    assert_eq!(
        begin_printa(&p, 0),
        format!(
            "{HEADER}{}{}{}\n",
            "               1 |                                         0        \n",
            "               2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 1        \n",
            "               4 |                                         0        \n",
        )
    );
    // Bucket starts are multiples of the width: the first bucket of an order begins at
    // the power (10, 100), the others at multiples of 20 and 200.
    let p = c(
        "BEGIN { @l = llquantize(19, 10, 0, 6, 5); @l = llquantize(20, 10, 0, 6, 5); \
               @l = llquantize(499, 10, 0, 6, 5); }",
    );
    assert_eq!(
        begin_printa(&p, 0),
        format!(
            "{HEADER}{}{}{}{}{}{}{}{}{}{}\n",
            "               8 |                                         0        \n",
            "              10 |@@@@@@@@@@@@@                            1        \n",
            "              20 |@@@@@@@@@@@@@                            1        \n",
            "              40 |                                         0        \n",
            "              60 |                                         0        \n",
            "              80 |                                         0        \n",
            "             100 |                                         0        \n",
            "             200 |                                         0        \n",
            "             400 |@@@@@@@@@@@@@                            1        \n",
            "             600 |                                         0        \n",
        )
    );
}

#[test]
fn parameter_errors_are_the_validators_at_their_argument() {
    let e = compile(
        "BEGIN { @l = llquantize(3, 10, 0, 6, 3); }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:38");
    assert_eq!(
        e.msg,
        "llquantize( ) factor (argument #1) must be evenly divisible by the number of steps \
         per magnitude (argument #4) when the steps are fewer than the factor"
    );
    let e = compile(
        "BEGIN { @l = llquantize(3, 10, 0, 6, 30); }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:38");
    assert!(e
        .msg
        .starts_with("llquantize( ) factor (argument #1) must evenly divide"));
    let e = compile(
        "BEGIN { @l = llquantize(3, 1, 0, 6, 30); }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:28");
    assert_eq!(
        e.msg,
        "llquantize( ) factor (argument #1) must be two or more"
    );
}
