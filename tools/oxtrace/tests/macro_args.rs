//! `$N` macro arguments and option `defaultargs`: without it an unset `$N` or `$$N` is a
//! `D_MACRO_UNDEF` error naming the argument; with it (`-x defaultargs` or `#pragma D option
//! defaultargs`) `$N` is 0 and `$$N` is "", as in DTrace.

use oxtrace::dsl::{compile, CompileOptions};

fn opts(args: &[&str], defaultargs: bool) -> CompileOptions {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut o = CompileOptions::with_args("prog.d", &args);
    if defaultargs {
        o.xopts.push(("defaultargs".into(), None));
    }
    o
}

#[test]
fn unset_arguments_are_errors_naming_them() {
    let e = compile("BEGIN { x = $2; }", "-e", &opts(&["1"], false)).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("D_MACRO_UNDEF") && m.contains("$2") && m.contains("-e:1:13"),
        "{m}"
    );
    let e = compile("BEGIN { s = $$1; }", "-e", &opts(&[], false)).unwrap_err();
    assert!(e.to_string().contains("$1"), "{e}");
    let e = compile("syscall::$$1:entry { }", "-e", &opts(&[], false)).unwrap_err();
    assert!(e.to_string().contains("$1 is not defined"), "{e}");
}

#[test]
fn defaultargs_makes_them_zero_and_empty() {
    let src = "BEGIN { x = $3 + 1; s = $$3; trace(s); trace(x); exit(0); }";
    let with = compile(src, "-e", &opts(&[], true)).unwrap();
    let zero = compile(
        "BEGIN { x = 0 + 1; s = \"\"; trace(s); trace(x); exit(0); }",
        "-e",
        &opts(&[], false),
    )
    .unwrap();
    assert_eq!(format!("{:?}", with.image), format!("{:?}", zero.image));
    // The pragma sets it for the text after it.
    let p = "#pragma D option defaultargs\nBEGIN { x = $1; s = $$2; }";
    compile(p, "-e", &opts(&[], false)).unwrap();
    // Given arguments still win.
    let given = compile("BEGIN { x = $1; }", "-e", &opts(&["7"], true)).unwrap();
    let seven = compile("BEGIN { x = 7; }", "-e", &opts(&[], false)).unwrap();
    assert_eq!(format!("{:?}", given.image), format!("{:?}", seven.image));
    // Only positional arguments have a default.
    let e = compile("BEGIN { x = $nope; }", "-e", &opts(&[], true)).unwrap_err();
    assert!(e.to_string().contains("$nope"), "{e}");
}
