//! What the aggregation output tests share: compiling, and BEGIN's aggregation updates
//! applied like one CPU of the kernel and merged like its snapshot.

// Each test file uses only some of these.
#![allow(dead_code)]

use oxtrace::agg::AggTable;
use oxtrace::dsl::{compile, CompileError, CompileOptions, Compiled};
use oxtrace::runtime;
use oxtrace::runtime::sim::{Firing, OwnedKey, Sim};
use oxtrace_core::agg::{AggBuffer, KeyElem, SnapshotCursor};

/// `src` compiled with the default options; a compile error fails the test.
pub fn c(src: &str) -> Compiled {
    compile(src, "t.d", &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// The compile error of `src`; compiling fails the test.
pub fn err(src: &str) -> CompileError {
    match compile(src, "t.d", &CompileOptions::default()) {
        Ok(_) => panic!("program compiled but should not:\n{src}"),
        Err(e) => e,
    }
}

/// BEGIN of `src` run once in the simulator; what printf printed. A fault fails the test.
pub fn run_begin(src: &str) -> String {
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "faults: {:?}", s.faults);
    s.printf_output(&p)
}

/// Checks the compile error of `src`: its position (`line:column`) and message.
pub fn bad(src: &str, pos: &str, msg: &str) {
    let e = err(src);
    assert_eq!((e.position().as_str(), e.msg.as_str()), (pos, msg), "{e}");
}

/// The compile error of `src` as its position and message.
pub fn err_at(src: &str) -> (String, String) {
    let e = err(src);
    (e.position(), e.msg)
}

/// Checks that each program is refused with its tag (`"[D_...]"`) in the error.
pub fn tagged(cases: &[(&str, &str)]) {
    for (src, tag) in cases {
        let e = err_text(src);
        assert!(e.contains(tag), "{src}: {e}");
    }
}

/// The compile error of `src` as the tool prints it.
pub fn err_text(src: &str) -> String {
    err(src).to_string()
}

/// Runs BEGIN in the simulator and merges its aggregation updates like one CPU's snapshot.
pub fn begin_table(p: &Compiled) -> AggTable {
    let mut s = Sim::default();
    s.fire(p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let dict = runtime::dictionary(p).unwrap();
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
    t
}

/// The table the tool merges from one CPU's aggregation snapshot after the updates `ups`
/// (`(aggregation id, key, value)`) of aggregations `defs`.
pub fn table_of(defs: Vec<oxtrace::agg::AggDef>, ups: &[(u32, Vec<KeyElem<'_>>, i64)]) -> AggTable {
    let mut dict = oxtrace::agg::Dictionary::new();
    for d in defs {
        dict.insert(d).unwrap();
    }
    let mut m = vec![0u64; 1 << 14];
    AggBuffer::format(&mut m).unwrap();
    for (id, key, v) in ups {
        let func = dict.get(*id).unwrap().func;
        let mut b = AggBuffer::attach(&mut m).unwrap();
        b.apply(*id, &func, key, *v, 1).unwrap();
    }
    let b = AggBuffer::attach(&mut m).unwrap();
    let mut buf = vec![0u8; b.snapshot_len()];
    let mut cur = SnapshotCursor::new();
    let n = b.serialize(0, &mut buf, &mut cur).unwrap();
    let mut t = AggTable::new(dict);
    t.merge_snapshots(&buf[..n]).unwrap();
    t
}

/// A `stack()` (`user` false) or `ustack()` value naming the stack `pcs` (innermost
/// first) of process `pid`, defined in the run's table as the module's definition record
/// would define it.
pub fn stack_ref(user: bool, pid: u64, pcs: &[u64]) -> Vec<u8> {
    use oxtrace_core::stack::{id, write_def, Def, DEF_KERNEL, DEF_MAX_BYTES, DEF_USER};
    use oxtrace_core::ustack::{encode_sym, Style};
    let i = id(user, pid, pcs);
    let mut b = vec![0u8; DEF_MAX_BYTES];
    let n = write_def(i, pid, pcs, &mut b);
    let kind = if user { DEF_USER } else { DEF_KERNEL };
    assert!(oxtrace::sym::stacks::define(
        &Def::parse(kind, &b[..n]).unwrap()
    ));
    let style = if user { Style::Ustack } else { Style::Kstack };
    let n = encode_sym(style, pid, i, &mut b);
    b.truncate(n);
    b
}

/// Whether the host has the C preprocessor (`-C`; the guest has none).
pub fn have_cpp() -> bool {
    std::process::Command::new("cpp")
        .arg("--version")
        .output()
        .is_ok()
}
