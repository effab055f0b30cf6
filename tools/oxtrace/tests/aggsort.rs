//! `setopt()` and the aggregation sort options (`aggsortkey`, `aggsortrev`, `aggsortpos`,
//! `aggsortkeypos`): compiled, run through the simulator, merged and printed.

mod support;

use oxtrace::agg::SortOrder;
use oxtrace::dsl::Compiled;
use oxtrace::options::runtime_value;
use oxtrace::runtime::sim::{Firing, Sim};
use std::collections::BTreeMap;
use support::{begin_table, c, err_at as err};

fn order(opts: &[(&str, &str)]) -> SortOrder {
    let m: BTreeMap<String, String> = opts
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    SortOrder::from_options(&m)
}

const TWO_KEYS: &str = r#"BEGIN {
    @a["b", 1] = sum(30); @a["a", 2] = sum(20); @a["c", 0] = sum(10); @a["a", 3] = sum(20);
}"#;

fn printed(p: &Compiled, fmt: &str, o: SortOrder) -> String {
    let mut t = begin_table(p);
    let mut out = String::new();
    t.printa_format(0, fmt, o, &mut out).unwrap();
    out
}

#[test]
fn sort_options_order_printa() {
    let t = &c(TWO_KEYS);
    let f = "%s %d %@d\n";
    // By value, then by key.
    assert_eq!(
        printed(t, f, order(&[])),
        "c 0 10\na 2 20\na 3 20\nb 1 30\n"
    );
    assert_eq!(
        printed(t, f, order(&[("aggsortrev", "1")])),
        "b 1 30\na 3 20\na 2 20\nc 0 10\n"
    );
    // By key first.
    assert_eq!(
        printed(t, f, order(&[("aggsortkey", "1")])),
        "a 2 20\na 3 20\nb 1 30\nc 0 10\n"
    );
    // By the second key member first, then the first.
    assert_eq!(
        printed(t, f, order(&[("aggsortkey", "1"), ("aggsortkeypos", "1")])),
        "c 0 10\nb 1 30\na 2 20\na 3 20\n"
    );
    // A position beyond the key compares from the first member.
    assert_eq!(
        printed(t, f, order(&[("aggsortkey", ""), ("aggsortkeypos", "5")])),
        "a 2 20\na 3 20\nb 1 30\nc 0 10\n"
    );
}

#[test]
fn aggsortpos_picks_the_aggregation_that_orders_printa() {
    let p = c(r#"BEGIN {
        @a["x"] = sum(1); @a["y"] = sum(2); @a["z"] = sum(3);
        @b["x"] = sum(30); @b["y"] = sum(20); @b["z"] = sum(10);
        printa("%s %@d %@d\n", @a, @b);
    }"#);
    let mut t = begin_table(&p);
    let (&fmt, ids) = p.printa_aggs.iter().next().unwrap();
    let f = p.formats[fmt as usize].clone();
    let mut out = String::new();
    t.printa_multi(ids, &f, order(&[]), &mut out).unwrap();
    assert_eq!(out, "x 1 30\ny 2 20\nz 3 10\n");
    out.clear();
    t.printa_multi(ids, &f, order(&[("aggsortpos", "1")]), &mut out)
        .unwrap();
    assert_eq!(out, "z 3 10\ny 2 20\nx 1 30\n");
}

#[test]
fn runtime_values_as_dtrace_reads_them() {
    assert_eq!(runtime_value("quiet", None), Ok(Some(1)));
    assert_eq!(runtime_value("quiet", Some("")), Ok(None));
    assert_eq!(runtime_value("quiet", Some("Off")), Ok(None));
    assert_eq!(runtime_value("quiet", Some("unset")), Ok(None));
    assert_eq!(runtime_value("quiet", Some("yes")), Ok(Some(1)));
    assert_eq!(runtime_value("aggsortpos", Some("0x10")), Ok(Some(16)));
    assert_eq!(runtime_value("aggsortpos", Some("010")), Ok(Some(8)));
    assert_eq!(runtime_value("aggsortpos", Some("0")), Ok(Some(0)));
    assert!(runtime_value("aggsortpos", Some("-1")).is_err());
}

#[test]
fn setopt_is_a_record_the_tool_applies() {
    let p = c(r#"BEGIN { setopt("quiet"); setopt("aggsortkey", "1"); printf("x\n"); exit(0); }"#);
    assert_eq!(p.setopts.len(), 2);
    let (id, (name, value)) = p.setopts.iter().next().unwrap();
    assert_eq!((name.as_str(), value.as_deref()), ("quiet", None));
    // A printf of the same text stays a printf.
    assert_eq!(p.format_printf(*id, &[]), Some(Vec::new()));
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.printf_output(&p), "x\n");
}

#[test]
fn setopt_errors() {
    // Unknown options, options that cannot change while tracing and bad values are the
    // consumer's runtime errors, as in DTrace: the program compiles.
    for p in [
        r#"BEGIN { setopt("bufsize", "4m"); }"#,
        r#"BEGIN { setopt("Nixon"); }"#,
        r#"BEGIN { setopt("aggsortpos", "x1"); }"#,
    ] {
        oxtrace::dsl::compile(p, "-e", &oxtrace::dsl::CompileOptions::default()).unwrap();
    }
    use oxtrace::options::{setopt_check, SetoptError};
    assert_eq!(setopt_check("Nixon", None), Err(SetoptError::BadName));
    assert_eq!(
        setopt_check("bufsize", Some("1m")),
        Err(SetoptError::Active)
    );
    assert_eq!(
        setopt_check("aggrate", Some("0.5hz")),
        Err(SetoptError::BadValue)
    );
    assert_eq!(
        setopt_check("aggrate", Some("2hz")),
        Err(SetoptError::Active)
    );
    assert_eq!(setopt_check("quiet", Some("um, no")), Ok(()));
    assert!(oxtrace::options::runtime_value("quiet", Some("um, no")).is_err());
    assert_eq!(
        SetoptError::Active.text(),
        "Operation illegal when tracing is active"
    );
    assert_eq!(
        err(r#"BEGIN { x = "quiet"; setopt(x); }"#),
        (
            "1:29".into(),
            "[D_SETOPT_ARG] setopt( ) arguments must be string constants".into()
        )
    );
    assert_eq!(
        err(r#"BEGIN { setopt(); }"#).1,
        "[D_PROTO_LEN] setopt() takes 1 or 2 argument(s), 0 given"
    );
}
