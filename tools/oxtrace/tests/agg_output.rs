//! The user-level aggregation table: merging per-CPU snapshots through the dictionary,
//! the D actions on it, and its outputs against golden text.

#[path = "golden_agg/mod.rs"]
mod golden;

use oxtrace::agg::*;
use oxtrace_core::agg::{AggBuffer, AggFunc, KeyElem, SnapshotCursor};

/// One probe-context update: aggregation id, key, value, increment, CPU.
struct Up<'a>(u32, Vec<KeyElem<'a>>, i64, i64, usize);

/// Applies the updates to per-CPU kernel buffers (the pure `AggBuffer`), snapshots every
/// CPU like the kernel will and returns the concatenated streams.
fn snapshots(dict: &Dictionary, ups: &[Up<'_>], ncpus: usize, words: usize) -> Vec<u8> {
    let mut mems: Vec<Vec<u64>> = (0..ncpus).map(|_| vec![0u64; words]).collect();
    for m in mems.iter_mut() {
        AggBuffer::format(m).unwrap();
    }
    for Up(id, key, v, inc, cpu) in ups {
        let func = dict.get(*id).unwrap().func;
        let mut b = AggBuffer::attach(&mut mems[*cpu]).unwrap();
        b.apply(*id, &func, key, *v, *inc).unwrap();
    }
    let mut out = Vec::new();
    for (cpu, m) in mems.iter_mut().enumerate() {
        let b = AggBuffer::attach(m).unwrap();
        let mut buf = vec![0u8; b.snapshot_len()];
        let mut cur = SnapshotCursor::new();
        let n = b.serialize(cpu as u32, &mut buf, &mut cur).unwrap();
        assert!(cur.is_done());
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn def(id: u32, name: &str, func: AggFunc, keys: Vec<KeyField>) -> AggDef {
    AggDef {
        id,
        name: name.into(),
        func,
        keys,
    }
}

fn table(defs: Vec<AggDef>, ups: &[Up<'_>]) -> AggTable {
    let mut dict = Dictionary::new();
    for d in defs {
        dict.insert(d).unwrap();
    }
    let snap = snapshots(&dict, ups, 4, 1 << 14);
    let mut t = AggTable::new(dict);
    let st = t.merge_snapshots(&snap).unwrap();
    assert_eq!(st.streams, 4);
    t
}

fn vals(id: u32, key: Vec<KeyElem<'static>>, xs: &[i64]) -> Vec<Up<'static>> {
    xs.iter()
        .enumerate()
        .map(|(i, x)| Up(id, key.clone(), *x, 1, i % 4))
        .collect()
}

fn printa(t: &mut AggTable, id: u32) -> String {
    let mut s = String::new();
    t.printa(id, SortOrder::default(), &mut s).unwrap();
    s
}

#[test]
fn golden_quantize() {
    let mut t = table(
        vec![def(1, "", AggFunc::Quantize, vec![])],
        &vals(1, vec![], &[1, 1, 2, 2, 3, 3, 4, 7]),
    );
    assert_eq!(printa(&mut t, 1), golden::QUANTIZE);
}

#[test]
fn golden_keyed_quantize_sorted_by_value() {
    let mut ups = vals(1, vec![KeyElem::Str(b"bash")], &[1, 1, 2, 2, 3, 3, 4, 7]);
    ups.extend(vals(1, vec![KeyElem::Str(b"sshd")], &[0]));
    let mut t = table(
        vec![def(
            1,
            "lat",
            AggFunc::Quantize,
            vec![KeyField::string("execname")],
        )],
        &ups,
    );
    assert_eq!(printa(&mut t, 1), golden::KEYED);
}

#[test]
fn golden_lquantize() {
    let f = AggFunc::lquantize(0, 10, 2).unwrap();
    let mut t = table(
        vec![def(1, "", f, vec![])],
        &vals(1, vec![], &[-5, 0, 0, 1, 2, 3, 9, 10, 1000]),
    );
    assert_eq!(printa(&mut t, 1), golden::LQUANTIZE);
}

#[test]
fn golden_llquantize() {
    let f = AggFunc::llquantize(10, 0, 1, 10).unwrap();
    let mut t = table(
        vec![def(1, "", f, vec![])],
        &vals(1, vec![], &[0, 5, 5, 50, 500]),
    );
    assert_eq!(printa(&mut t, 1), golden::LLQUANTIZE);
    let f = AggFunc::llquantize(2, 0, 4, 4).unwrap();
    let mut t = table(vec![def(1, "", f, vec![])], &vals(1, vec![], &[6, 7, 12]));
    assert_eq!(printa(&mut t, 1), golden::LLQUANTIZE_TRIMMED);
}

/// Oracle DTrace's negative buckets and its zero bucket (`abs() < scale` when a negative
/// bucket is shown), the overflows `<= -top` and `>= top`.
#[test]
fn golden_llquantize_negative_and_zero() {
    let head = "\n\n           value  ------------- Distribution ------------- count    \n";
    let row = |label: &str, bar: usize, n: i64| {
        format!(
            "{label:>16} |{}{} {n:<9}\n",
            "@".repeat(bar),
            " ".repeat(40 - bar)
        )
    };
    let f = AggFunc::llquantize(10, 1, 2, 10).unwrap();
    let mut t = table(
        vec![def(1, "", f, vec![])],
        &vals(1, vec![], &[-2000, -20, -5, 3, 3, 10]),
    );
    let want = [
        row("<= -1000", 7, 1),
        row("-900", 0, 0),
        row("-30", 0, 0),
        row("-20", 7, 1),
        row("-10", 0, 0),
        row("abs() < 10", 20, 3),
        row("10", 7, 1),
        row("20", 0, 0),
    ];
    // Between -900 and -30 every negative bucket is shown (all empty).
    let got = printa(&mut t, 1);
    assert!(
        got.starts_with(&format!("{head}{}{}", want[0], want[1])),
        "{got}"
    );
    assert!(
        got.ends_with(&format!(
            "{}{}{}{}{}{}\n",
            want[2], want[3], want[4], want[5], want[6], want[7]
        )),
        "{got}"
    );
    // Data in the zero bucket shows the bucket below it too, so the label is `abs() < 10`
    // (`< 10` is for a histogram whose shown range starts at the zero bucket: an empty one).
    let mut t = table(vec![def(1, "", f, vec![])], &vals(1, vec![], &[3, 20]));
    assert_eq!(
        printa(&mut t, 1),
        format!(
            "{head}{}{}{}{}{}\n",
            row("-10", 0, 0),
            row("abs() < 10", 20, 1),
            row("10", 0, 0),
            row("20", 20, 1),
            row("30", 0, 0)
        )
    );
}

#[test]
fn golden_negative_counts() {
    let ups = [Up(1, vec![], 1, 3, 0), Up(1, vec![], 2, -1, 1)];
    let mut t = table(vec![def(1, "", AggFunc::Quantize, vec![])], &ups);
    assert_eq!(printa(&mut t, 1), golden::MIXED);
    let ups = [Up(1, vec![], 1, -2, 0), Up(1, vec![], 3, -6, 2)];
    let mut t = table(vec![def(1, "", AggFunc::Quantize, vec![])], &ups);
    assert_eq!(printa(&mut t, 1), golden::NEGATIVE);
}

#[test]
fn golden_cleared_histogram_prints_around_zero() {
    let mut t = table(
        vec![def(1, "", AggFunc::Quantize, vec![])],
        &vals(1, vec![], &[100, 200]),
    );
    t.clear(1).unwrap();
    assert_eq!(t.len(1), 1);
    assert_eq!(printa(&mut t, 1), golden::EMPTY);
}

fn pid_field() -> KeyField {
    KeyField {
        name: "pid".into(),
        kind: KeyKind::Int {
            size: 4,
            signed: true,
        },
    }
}

#[test]
fn golden_default_printa_scalars() {
    let k = |s: &'static [u8], p: u64| vec![KeyElem::Str(s), KeyElem::Int(p)];
    let mut ups = Vec::new();
    ups.extend(vals(1, k(b"bash", 12), &[0; 5]));
    ups.extend(vals(1, k(b"bash", 3), &[0; 5]));
    ups.extend(vals(1, k(b"init", 1), &[0; 99]));
    ups.extend(vals(1, k(b"sshd", 7), &[0]));
    let mut t = table(
        vec![def(
            1,
            "calls",
            AggFunc::Count,
            vec![KeyField::string("execname"), pid_field()],
        )],
        &ups,
    );
    assert_eq!(printa(&mut t, 1), golden::SCALARS);
}

#[test]
fn golden_print_unprinted_at_exit() {
    let mut ups = vals(1, vec![], &[40, 2]);
    ups.extend(vals(2, vec![], &[5, -7, 3]));
    ups.extend(vals(3, vec![], &[1]));
    let mut t = table(
        vec![
            def(1, "a", AggFunc::Sum, vec![]),
            def(2, "b", AggFunc::Min, vec![]),
            def(3, "c", AggFunc::Count, vec![]),
        ],
        &ups,
    );
    // @c was printed by printa() already, so exit prints @a and @b only.
    let _ = printa(&mut t, 3);
    let mut s = String::new();
    t.print_unprinted(SortOrder::default(), &mut s);
    assert_eq!(s, golden::UNKEYED);
}

#[test]
fn avg_stddev_min_max_values() {
    let xs = [2, 4, 4, 4, 5, 5, 7, 9];
    let mut ups = vals(1, vec![], &xs);
    ups.extend(vals(2, vec![], &xs));
    ups.extend(vals(3, vec![], &xs));
    ups.extend(vals(4, vec![], &xs));
    let mut t = table(
        vec![
            def(1, "avg", AggFunc::Avg, vec![]),
            def(2, "sd", AggFunc::Stddev, vec![]),
            def(3, "mn", AggFunc::Min, vec![]),
            def(4, "mx", AggFunc::Max, vec![]),
        ],
        &ups,
    );
    let mut s = String::new();
    t.print_unprinted(SortOrder::default(), &mut s);
    assert_eq!(
        s,
        format!("\n {:>16}\n\n {:>16}\n\n {:>16}\n\n {:>16}\n", 5, 2, 2, 9)
    );
}

fn two_aggs() -> AggTable {
    let mut ups = vals(1, vec![KeyElem::Str(b"bash")], &[0, 0]);
    ups.extend(vals(1, vec![KeyElem::Str(b"sshd")], &[0]));
    ups.extend(vals(2, vec![], &[3, 7]));
    table(
        vec![
            def(
                1,
                "calls",
                AggFunc::Count,
                vec![KeyField::string("execname")],
            ),
            def(2, "lat", AggFunc::lquantize(0, 10, 5).unwrap(), vec![]),
        ],
        &ups,
    )
}

#[test]
fn json_output() {
    let t = two_aggs();
    assert_eq!(
        t.to_json(SortOrder::default()),
        concat!(
            r#"{"type":"aggregation","name":"calls","id":1,"function":"count","normal":1,"#,
            r#""keys":["execname"],"entries":[{"key":{"execname":"sshd"},"value":1},"#,
            r#"{"key":{"execname":"bash"},"value":2}]}"#,
            "\n",
            r#"{"type":"aggregation","name":"lat","id":2,"function":"lquantize","normal":1,"#,
            r#""keys":[],"entries":[{"key":{},"count":2,"sum":10,"#,
            r#""buckets":[{"min":null,"max":-1,"count":0},{"min":0,"max":4,"count":1},"#,
            r#"{"min":5,"max":9,"count":1},{"min":10,"max":null,"count":0}]}]}"#,
            "\n"
        )
    );
}

#[test]
fn json_key_names_are_unique() {
    let t = table(
        vec![def(
            1,
            "a",
            AggFunc::Count,
            vec![KeyField::int("arg0"), KeyField::int("arg0")],
        )],
        &[],
    );
    assert!(t
        .to_json(SortOrder::default())
        .contains(r#""keys":["arg0","arg0#2"]"#));
}

#[test]
fn openmetrics_output() {
    let t = two_aggs();
    assert_eq!(
        t.to_openmetrics("oxtrace"),
        "# TYPE oxtrace_calls counter\n\
         # HELP oxtrace_calls oxtrace aggregation @calls = count()\n\
         oxtrace_calls_total{execname=\"bash\"} 2\n\
         oxtrace_calls_total{execname=\"sshd\"} 1\n\
         # TYPE oxtrace_lat histogram\n\
         # HELP oxtrace_lat oxtrace aggregation @lat = lquantize()\n\
         oxtrace_lat_bucket{le=\"4\"} 1\n\
         oxtrace_lat_bucket{le=\"9\"} 2\n\
         oxtrace_lat_bucket{le=\"+Inf\"} 2\n\
         oxtrace_lat_count 2\n\
         oxtrace_lat_sum 10\n\
         # EOF\n"
    );
}

#[test]
fn openmetrics_labels_and_quantize() {
    let mut ups = vals(
        1,
        vec![KeyElem::Str(b"a\"b\\c"), KeyElem::Int(-3i64 as u64)],
        &[0, 1, 2, 3],
    );
    ups.extend(vals(2, vec![], &[-1, 0]));
    let t = table(
        vec![
            def(
                1,
                "h",
                AggFunc::Quantize,
                vec![KeyField::string("le"), pid_field()],
            ),
            def(2, "", AggFunc::Max, vec![]),
        ],
        &ups,
    );
    assert_eq!(
        t.to_openmetrics("oxt"),
        "# TYPE oxt_h histogram\n\
         # HELP oxt_h oxtrace aggregation @h = quantize()\n\
         oxt_h_bucket{key0=\"a\\\"b\\\\c\",pid=\"-3\",le=\"0\"} 1\n\
         oxt_h_bucket{key0=\"a\\\"b\\\\c\",pid=\"-3\",le=\"1\"} 2\n\
         oxt_h_bucket{key0=\"a\\\"b\\\\c\",pid=\"-3\",le=\"3\"} 4\n\
         oxt_h_bucket{key0=\"a\\\"b\\\\c\",pid=\"-3\",le=\"7\"} 4\n\
         oxt_h_bucket{key0=\"a\\\"b\\\\c\",pid=\"-3\",le=\"+Inf\"} 4\n\
         oxt_h_count{key0=\"a\\\"b\\\\c\",pid=\"-3\"} 4\n\
         oxt_h_sum{key0=\"a\\\"b\\\\c\",pid=\"-3\"} 6\n\
         # TYPE oxt_agg gauge\n\
         # HELP oxt_agg oxtrace aggregation @ = max()\n\
         oxt_agg 0\n\
         # EOF\n"
    );
}

/// A histogram that counted a negative value shows a negative bound and, as OpenMetrics
/// requires, no `_sum`; its `_count` is still there.
#[test]
fn openmetrics_negative_histogram_has_no_sum() {
    let ups = vals(1, vec![], &[-5, 3]);
    let t = table(vec![def(1, "h", AggFunc::Quantize, vec![])], &ups);
    let om = t.to_openmetrics("oxt");
    assert!(om.contains("oxt_h_bucket{le=\"-4\"} 1\n"), "{om}");
    assert!(om.contains("oxt_h_count 2\n"), "{om}");
    assert!(!om.contains("_sum"), "{om}");
}

#[test]
fn custom_printa_format() {
    let mut t = two_aggs();
    let mut s = String::new();
    t.printa_format(1, "%-6s|%@4d|%@x\n", SortOrder::default(), &mut s)
        .unwrap();
    assert_eq!(s, "sshd  |   1|1\nbash  |   2|2\n");
    // `@` after the width, as DTrace scripts write it, and the pointer-width flag.
    let mut s = String::new();
    t.printa_format(1, "%-6s|%4@d|%-3.2@x|%?@d\n", SortOrder::default(), &mut s)
        .unwrap();
    assert_eq!(
        s,
        "sshd  |   1|01 |               1\nbash  |   2|02 |               2\n"
    );
    let mut s = String::new();
    t.printa_format(
        1,
        "%s\n",
        SortOrder {
            by_key: true,
            reverse: true,
            ..SortOrder::default()
        },
        &mut s,
    )
    .unwrap();
    assert_eq!(s, "sshd\nbash\n");
    let mut s = String::new();
    t.printa_format(2, "lat:%@d", SortOrder::default(), &mut s)
        .unwrap();
    assert!(s.starts_with("lat:\n           value  ------------- Distribution"));
}

#[test]
fn printf_conversions_on_integer_keys() {
    // Each conversion takes the next key member.
    let ups = vals(1, vec![KeyElem::Int(42); 6], &[0]);
    let layout = (0..6).map(|i| KeyField::int(&format!("v{i}"))).collect();
    let mut t = table(vec![def(1, "x", AggFunc::Count, layout)], &ups);
    let mut s = String::new();
    t.printa_format(
        1,
        "[%05d][%+d][%#x][%.3d][%-4d][%o][%%][%@u]\n",
        SortOrder::default(),
        &mut s,
    )
    .unwrap();
    assert_eq!(s, "[00042][+42][0x2a][042][42  ][52][%][1]\n");
}

#[test]
fn trunc_normalize_clear() {
    let mut ups = Vec::new();
    for (i, n) in [5usize, 1, 9, 3, 7].iter().enumerate() {
        ups.extend(vals(1, vec![KeyElem::Int(i as u64)], &vec![0; *n]));
    }
    let defs = || vec![def(1, "c", AggFunc::Count, vec![KeyField::int("k")])];
    let mut t = table(defs(), &ups);
    t.trunc(1, 2).unwrap();
    let kept: Vec<u64> = t
        .sorted(1, SortOrder::default())
        .unwrap()
        .iter()
        .map(|e| e.values[0])
        .collect();
    assert_eq!(kept, [7, 9]);
    let mut t = table(defs(), &ups);
    t.trunc(1, -2).unwrap();
    let kept: Vec<u64> = t
        .sorted(1, SortOrder::default())
        .unwrap()
        .iter()
        .map(|e| e.values[0])
        .collect();
    assert_eq!(kept, [1, 3]);
    t.trunc(1, 0).unwrap();
    assert_eq!(t.len(1), 0);

    let mut t = table(defs(), &ups);
    t.normalize(1, 2).unwrap();
    let s = printa(&mut t, 1);
    assert!(s.ends_with(&format!(" {:>16} {:>16}\n", 2, 4)), "{s}");
    t.denormalize(1).unwrap();
    let s = printa(&mut t, 1);
    assert!(s.ends_with(&format!(" {:>16} {:>16}\n", 2, 9)), "{s}");
    t.clear(1).unwrap();
    assert!(t
        .sorted(1, SortOrder::default())
        .unwrap()
        .iter()
        .all(|e| e.values[0] == 0));
    assert_eq!(t.len(1), 5);
    assert_eq!(t.get(1, &[KeyElem::Int(2)]), Some(&[0u64][..]));
}

#[test]
fn merge_errors() {
    let mut dict = Dictionary::new();
    dict.insert(def(1, "a", AggFunc::Count, vec![KeyField::int("k")]))
        .unwrap();
    assert_eq!(
        dict.insert(def(1, "b", AggFunc::Sum, vec![])),
        Err(AggTableError::DuplicateId(1))
    );
    let mut other = Dictionary::new();
    other
        .insert(def(1, "a", AggFunc::Count, vec![KeyField::string("s")]))
        .unwrap();
    other.insert(def(2, "z", AggFunc::Count, vec![])).unwrap();
    let snap = snapshots(&other, &[Up(1, vec![KeyElem::Str(b"x")], 0, 1, 0)], 1, 4096);
    let mut t = AggTable::new(dict.clone());
    assert_eq!(t.merge_snapshots(&snap), Err(AggTableError::KeyLayout(1)));
    let snap = snapshots(&other, &[Up(2, vec![], 0, 1, 0)], 1, 4096);
    assert_eq!(
        t.merge_snapshots(&snap),
        Err(AggTableError::UnknownAggregation(2))
    );
    assert!(matches!(
        t.merge_snapshots(&snap[..20]),
        Err(AggTableError::Parse(_))
    ));
    assert_eq!(t.clear(9), Err(AggTableError::UnknownAggregation(9)));
}

#[test]
fn drops_are_reported() {
    let mut dict = Dictionary::new();
    dict.insert(def(1, "a", AggFunc::Count, vec![KeyField::int("k")]))
        .unwrap();
    let mut mem = vec![0u64; 64];
    let mut b = AggBuffer::format(&mut mem).unwrap();
    let mut drops = 0;
    for i in 0..100u64 {
        if b.apply(1, &AggFunc::Count, &[KeyElem::Int(i)], 0, 1)
            .is_err()
        {
            drops += 1;
        }
    }
    assert!(drops > 0);
    let mut out = vec![0u8; b.snapshot_len()];
    b.serialize(0, &mut out, &mut SnapshotCursor::new())
        .unwrap();
    let mut t = AggTable::new(dict);
    let st = t.merge_snapshots(&out).unwrap();
    assert_eq!(st.drops, drops);
    assert_eq!(t.drops(), drops);
    assert_eq!(t.len(1) as u64 + drops, 100);
}

/// 200k keys over 4 CPUs, each key on two of them, snapshotted twice (two intervals):
/// every key merged exactly, sorted and truncated in reasonable time even in debug.
#[test]
fn merge_table_scale() {
    const KEYS: u64 = 200_000;
    let mut dict = Dictionary::new();
    dict.insert(def(1, "c", AggFunc::Count, vec![KeyField::int("k")]))
        .unwrap();
    dict.insert(def(
        2,
        "s",
        AggFunc::Sum,
        vec![KeyField::int("k"), KeyField::string("f")],
    ))
    .unwrap();
    let mut t = AggTable::new(dict);
    let mut mems: Vec<Vec<u64>> = (0..4).map(|_| vec![0u64; 4 << 20]).collect();
    let start = std::time::Instant::now();
    for _interval in 0..2 {
        let mut stream = Vec::new();
        for (cpu, m) in mems.iter_mut().enumerate() {
            let mut b = AggBuffer::format(m).unwrap();
            let base = cpu as u64 * (KEYS / 4);
            for j in 0..KEYS / 2 {
                let k = (base + j) % KEYS;
                b.apply(1, &AggFunc::Count, &[KeyElem::Int(k)], 0, 1)
                    .unwrap();
                if k & 7 == 0 {
                    let key = [KeyElem::Int(k), KeyElem::Str(b"vfs_read")];
                    b.apply(2, &AggFunc::Sum, &key, k as i64, 1).unwrap();
                }
            }
            let mut out = vec![0u8; b.snapshot_len()];
            b.serialize(cpu as u32, &mut out, &mut SnapshotCursor::new())
                .unwrap();
            stream.extend_from_slice(&out);
        }
        t.merge_snapshots(&stream).unwrap();
    }
    assert_eq!(t.len(1), KEYS as usize);
    assert_eq!(t.len(2), KEYS as usize / 8);
    let sorted = t.sorted(1, SortOrder::default()).unwrap();
    assert!(sorted.iter().all(|e| e.values[0] == 4));
    assert_eq!(
        t.get(2, &[KeyElem::Int(800), KeyElem::Str(b"vfs_read")]),
        Some(&[3200u64][..])
    );
    t.trunc(2, 10).unwrap();
    assert_eq!(t.len(2), 10);
    eprintln!("merge_table_scale: {:?}", start.elapsed());
}
