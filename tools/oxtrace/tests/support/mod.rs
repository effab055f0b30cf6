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
