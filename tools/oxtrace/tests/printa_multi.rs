//! `printa` of several aggregations in one format: compiled, run through the simulator,
//! merged and printed side by side; and its compile errors.

use oxtrace::agg::{AggTable, SortOrder};
use oxtrace::dsl::sim::{Firing, OwnedKey, Sim};
use oxtrace::dsl::{compile, CompileOptions, Compiled};
use oxtrace::run;
use oxtrace_core::agg::{AggBuffer, KeyElem, SnapshotCursor};

fn c(src: &str) -> Compiled {
    compile(src, "t.d", &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs BEGIN, applies its aggregation updates like one CPU and prints the printa group.
fn begin_printa_multi(p: &Compiled) -> String {
    let mut s = Sim::default();
    s.fire(p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let dict = run::dictionary(p).unwrap();
    let mut mem = vec![0u64; 1 << 14];
    AggBuffer::format(&mut mem).unwrap();
    let mut b = AggBuffer::attach(&mut mem).unwrap();
    for (agg, key, [v, inc]) in &s.agg_updates {
        let k: Vec<KeyElem<'_>> = key
            .iter()
            .map(|k| match k {
                OwnedKey::Int(i) => KeyElem::Int(*i),
                OwnedKey::Str(s) => KeyElem::Str(s),
            })
            .collect();
        let f = dict.get(*agg).unwrap().func;
        b.apply(*agg, &f, &k, *v as i64, *inc as i64).unwrap();
    }
    let mut buf = vec![0u8; b.snapshot_len()];
    let mut cur = SnapshotCursor::new();
    let n = b.serialize(0, &mut buf, &mut cur).unwrap();
    let mut t = AggTable::new(dict);
    t.merge_snapshots(&buf[..n]).unwrap();
    let (&fmt, ids) = p.printa_aggs.iter().next().expect("a printa group");
    let mut out = String::new();
    t.printa_multi(
        ids,
        &p.formats[fmt as usize],
        SortOrder::default(),
        &mut out,
    )
    .unwrap();
    out
}

#[test]
fn several_aggregations_print_side_by_side() {
    let p = c(r#"BEGIN {
        @a["x"] = count(); @a["y"] = count(); @a["y"] = count();
        @b["x"] = sum(10); @b["z"] = sum(5);
        @m["x"] = max(7);
        printa("%-3s %@d %@d %@d\n", @a, @b, @m);
    }"#);
    assert_eq!(begin_printa_multi(&p), "x   1 10 7\ny   2 0 0\nz   0 5 0\n");
}

fn err(src: &str) -> (String, String) {
    match compile(src, "t.d", &CompileOptions::default()) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => (e.position(), e.msg.clone()),
    }
}

#[test]
fn printa_group_errors() {
    assert_eq!(
        err("BEGIN { @a[1] = count(); @b[\"k\"] = count(); printa(\"%d %@d %@d\\n\", @a, @b); }"),
        (
            "1:72".into(),
            "printa(): @b has keys (string), @a has (integer)".into()
        )
    );
    assert_eq!(
        err("BEGIN { @a = count(); @b = count(); printa(\"%@d\\n\", @a, @b); }"),
        (
            "1:44".into(),
            "printa(): format has 1 %@ conversion(s) for 2 aggregations".into()
        )
    );
}
