//! `printa` of several aggregations in one format: compiled, run through the simulator,
//! merged and printed side by side; and its compile errors.

mod support;

use oxtrace::agg::SortOrder;
use oxtrace::dsl::Compiled;
use support::{begin_table, c, err_at as err};

/// Runs BEGIN, applies its aggregation updates like one CPU and prints the printa group.
fn begin_printa_multi(p: &Compiled) -> String {
    let mut t = begin_table(p);
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

#[test]
fn printa_group_errors() {
    assert_eq!(
        err("BEGIN { @a[1] = count(); @b[\"k\"] = count(); printa(\"%d %@d %@d\\n\", @a, @b); }"),
        (
            "1:72".into(),
            "[D_PRINTA_AGGPROTO] printa( ): @b has keys (string), @a has (integer)".into()
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
