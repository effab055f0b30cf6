//! Options: `bufpolicy`, `argref`, `defaultargs=no`, the preprocessor's options and their
//! order, `-b`, unknown `-x` options, and line markers.

mod support;
use support::have_cpp;

use oxtrace::cli::Cli;
use oxtrace::dsl::cpp::{preprocess, CppArg};
use oxtrace::dsl::{compile, CompileOptions};
use oxtrace_core::buffer::{POLICY_FILL, POLICY_RING, POLICY_SWITCH};
use oxtrace_core::program::OptKey;

fn with(xopts: &[(&str, Option<&str>)], args: &[&str], src: &str) -> Result<u64, String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut o = CompileOptions::with_args("t.d", &args);
    for (k, v) in xopts {
        o.xopts.push((k.to_string(), v.map(str::to_string)));
    }
    compile(src, "t.d", &o)
        .map(|c| c.options.get(OptKey::Bufpolicy))
        .map_err(|e| e.to_string())
}

#[test]
fn bufpolicy_takes_switch_fill_and_ring() {
    let b = "BEGIN { exit(0); }";
    assert_eq!(with(&[], &[], b), Ok(POLICY_SWITCH));
    for (v, p) in [
        ("switch", POLICY_SWITCH),
        ("fill", POLICY_FILL),
        ("ring", POLICY_RING),
    ] {
        assert_eq!(with(&[("bufpolicy", Some(v))], &[], b), Ok(p));
        let pragma = format!("#pragma D option bufpolicy={v}\n{b}");
        assert_eq!(with(&[], &[], &pragma), Ok(p));
    }
    let e = with(&[("bufpolicy", Some("drain"))], &[], b).unwrap_err();
    assert!(
        e.contains("invalid value 'drain' for option 'bufpolicy'"),
        "{e}"
    );
    assert!(e.contains("switch, fill, ring"), "{e}");
    let e = with(&[("bufpolicy", None)], &[], b).unwrap_err();
    assert!(e.contains("requires a value"), "{e}");
}

#[test]
fn fill_keeps_room_for_end_or_refuses_the_program() {
    // END's records must leave some of the buffer to the other probes.
    let big_end = format!(
        "#pragma D option bufpolicy=fill\n#pragma D option bufsize=4k\nBEGIN {{ exit(0); }}\nEND {{ {} }}",
        "trace(execname); ".repeat(4)
    );
    let e = with(&[], &[], &big_end).unwrap_err();
    assert!(
        e.contains("END enablings exceed size of principal buffer"),
        "{e}"
    );
    // The same program fits a larger buffer, and any size without fill.
    let ok = big_end.replace("bufsize=4k", "bufsize=64k");
    assert_eq!(with(&[], &[], &ok), Ok(POLICY_FILL));
    let ring = big_end.replace("bufpolicy=fill", "bufpolicy=ring");
    assert_eq!(with(&[], &[], &ring), Ok(POLICY_RING));
}

#[test]
fn unreferenced_arguments_need_argref() {
    let b = "BEGIN { exit(0); }";
    let e = with(&[], &["1234"], b).unwrap_err();
    assert!(
        e.contains("[D_MACRO_UNUSED] macro argument $1 is not referenced"),
        "{e}"
    );
    assert!(with(&[("argref", None)], &["1234"], b).is_ok());
    assert!(with(&[], &["1234"], &format!("#pragma D option argref\n{b}")).is_ok());
    assert!(with(&[("argref", Some("no"))], &["1234"], b).is_err());
    // A referenced argument, and $$N, count.
    assert!(with(&[], &["1", "x"], "BEGIN { exit($1); trace($$2); }").is_ok());
    let e = with(&[], &["1", "2"], "BEGIN { exit($1); }").unwrap_err();
    assert!(e.contains("$2 is not referenced"), "{e}");
    let e = with(&[("argref", Some("maybe"))], &[], b).unwrap_err();
    assert!(
        e.contains("invalid value 'maybe' for option 'argref'"),
        "{e}"
    );
}

#[test]
fn defaultargs_no_turns_it_off() {
    let p = "BEGIN { exit($1); }";
    assert!(with(&[("defaultargs", None)], &[], p).is_ok());
    assert!(with(&[("defaultargs", Some("yes"))], &[], p).is_ok());
    for off in ["no", "off", "false"] {
        let e = with(&[("defaultargs", None), ("defaultargs", Some(off))], &[], p).unwrap_err();
        assert!(e.contains("D_MACRO_UNDEF"), "{e}");
    }
    let e = with(&[], &[], &format!("#pragma D option defaultargs=no\n{p}")).unwrap_err();
    assert!(e.contains("D_MACRO_UNDEF"), "{e}");
}

#[test]
fn statusrate_is_taken_as_dtrace_scripts_set_it() {
    let p = "#pragma D option bufpolicy=fill\n#pragma D option statusrate=10ms\nBEGIN { }";
    assert_eq!(with(&[], &[], p), Ok(POLICY_FILL));
    let e = with(&[("statusrate", Some("soon"))], &[], "BEGIN { }").unwrap_err();
    assert!(
        e.contains("invalid value 'soon' for option 'statusrate'"),
        "{e}"
    );
}

#[test]
fn unknown_and_misplaced_options_are_refused_by_name() {
    let b = "BEGIN { exit(0); }";
    let e = with(&[("bogus", Some("1"))], &[], b).unwrap_err();
    assert!(
        e.contains("unknown option 'bogus'") && e.contains("-x"),
        "{e}"
    );
    let e = with(&[], &[], &format!("#pragma D option nixon\n{b}")).unwrap_err();
    assert!(
        e.contains("unknown option 'nixon'") && e.contains("t.d:1:"),
        "{e}"
    );
    // The preprocessor's options: from the command line only.
    for o in ["define=X", "undef=X", "incdir=/tmp", "cpppath=/bin/cpp"] {
        let (k, v) = o.split_once('=').unwrap();
        assert!(with(&[(k, Some(v))], &[], b).is_ok(), "{o}");
        let e = with(&[], &[], &format!("#pragma D option {o}\n{b}")).unwrap_err();
        assert!(e.contains("cannot be set from a D program"), "{e}");
    }
}

#[test]
fn line_markers_renumber_lines() {
    let e = compile(
        "# 10 \"foo.d\"\nBEGIN { x = ; }\n",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!((e.input.as_str(), e.line, e.col), ("foo.d", 10, 13), "{e}");
    let e = compile(
        "BEGIN { }\n#line 40\n\nBEGIN { x = ; }\n",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!((e.input.as_str(), e.line), ("t.d", 41), "{e}");
}

#[test]
fn errors_after_and_inside_an_include_name_their_file_and_line() {
    if !have_cpp() {
        eprintln!("skip: no cpp");
        return;
    }
    let dir = std::env::temp_dir().join(format!("oxt-inc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ok.h"),
        "/* one */\n#define A 1\n\ninline int b = 2;\n",
    )
    .unwrap();
    std::fs::write(dir.join("bad.h"), "\n\ninline int c = ;\n").unwrap();
    let inc = [CppArg::Include(dir.display().to_string())];
    let src = "#include \"ok.h\"\nBEGIN\n{\n\tx = A + ;\n}\n";
    let out = preprocess(src, "prog.d", &inc).unwrap();
    let e = compile(&out, "prog.d", &CompileOptions::default()).unwrap_err();
    assert_eq!((e.input.as_str(), e.line, e.col), ("prog.d", 4, 10), "{e}");
    assert!(e.to_string().contains("--> prog.d:4:10"), "{e}");
    let src = "BEGIN { }\n#include \"bad.h\"\nBEGIN { }\n";
    let out = preprocess(src, "prog.d", &inc).unwrap();
    let e = compile(&out, "prog.d", &CompileOptions::default()).unwrap_err();
    assert!(e.input.ends_with("bad.h") && e.line == 3, "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn defines_and_undefs_apply_in_command_line_order() {
    let cli = Cli::ordered_from([
        "oxtrace",
        "-C",
        "-D",
        "A",
        "-U",
        "A",
        "-x",
        "undef=B",
        "-D",
        "B=2",
        "-I",
        "/x",
        "-x",
        "incdir=/y",
        "-x",
        "define=C",
        "-b",
        "16k",
        "-e",
        "BEGIN { }",
    ]);
    assert_eq!(
        cli.cpp_args,
        ["-DA", "-UA", "-UB", "-DB=2", "-I/x", "-I/y", "-DC"]
    );
    assert_eq!(cli.bufsize.as_deref(), Some("16k"));
    if !have_cpp() {
        return;
    }
    let args: Vec<CppArg> = cli
        .cpp_args
        .iter()
        .filter_map(|a| CppArg::parse(a))
        .collect();
    let out = preprocess(
        "#ifdef A\nbad\n#endif\nBEGIN { trace(B); trace(C); }\n",
        "-e",
        &args,
    )
    .unwrap();
    assert!(
        !out.contains("bad") && out.contains("trace(2); trace(1);"),
        "{out}"
    );
    // The other way round, the define wins.
    let args = [CppArg::Undef("A".into()), CppArg::Define("A".into())];
    let out = preprocess("#ifdef A\ndefined\n#endif\n", "-e", &args).unwrap();
    assert!(out.contains("defined"), "{out}");
}

#[test]
fn cpppath_runs_another_preprocessor() {
    // A "preprocessor" that fails: its message and the program's name are reported.
    let e = oxtrace::dsl::cpp::preprocess_with("false", "BEGIN { }\n", "prog.d", &[]).unwrap_err();
    assert!(
        e.contains("'false'") && e.contains("could not process"),
        "{e}"
    );
    let e = oxtrace::dsl::cpp::preprocess_with("/nonexistent/cpp", "BEGIN { }\n", "-e", &[])
        .unwrap_err();
    assert!(
        e.contains("/nonexistent/cpp") && e.contains("not installed"),
        "{e}"
    );
}
