//! Sizes below the smallest block are rounded up to it, as DTrace does, not refused;
//! `strsize` below DTrace's smallest (2) is refused; sizes above the largest are refused.

use oxtrace::dsl::{compile, CompileOptions};
use oxtrace_core::limits::{MIN_BUFSIZE, MIN_DYNVARSIZE, MIN_SPECSIZE};
use oxtrace_core::program::OptKey;

fn with(opts: &[(&str, &str)], src: &str) -> Result<oxtrace::dsl::Compiled, String> {
    let mut o = CompileOptions::default();
    for (k, v) in opts {
        o.xopts.push((k.to_string(), Some(v.to_string())));
    }
    compile(src, "t.d", &o).map_err(|e| e.to_string())
}

#[test]
fn small_sizes_round_up_to_the_smallest_block() {
    let c = with(
        &[("bufsize", "1"), ("aggsize", "100"), ("dynvarsize", "0")],
        "#pragma D option specsize=10\nBEGIN { exit(0); }",
    )
    .unwrap();
    assert_eq!(c.options.get(OptKey::Bufsize), MIN_BUFSIZE);
    assert_eq!(c.options.get(OptKey::Aggsize), MIN_BUFSIZE);
    assert_eq!(c.options.get(OptKey::Dynvarsize), MIN_DYNVARSIZE);
    assert_eq!(c.options.get(OptKey::Specsize), MIN_SPECSIZE);
    // A size at or above the smallest block is kept as given.
    let c = with(&[("bufsize", "5k")], "BEGIN { }").unwrap();
    assert_eq!(c.options.get(OptKey::Bufsize), 5 << 10);
}

#[test]
fn large_sizes_and_small_strsize_are_refused() {
    let e = with(&[("bufsize", "1g")], "BEGIN { }").unwrap_err();
    assert!(e.contains("exceeds the largest buffer"), "{e}");
    for v in ["0", "1"] {
        let e = with(&[("strsize", v)], "BEGIN { }").unwrap_err();
        assert!(e.contains("below the smallest string size, 2"), "{e}");
    }
    let c = with(&[("strsize", "2")], "BEGIN { }").unwrap();
    assert_eq!(c.options.get(OptKey::Strsize), 2);
}
