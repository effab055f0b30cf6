//! Bad programs: each error has the exact `line:column`, message and caret.

mod support;

use oxtrace::dsl::{compile, CompileOptions};
use support::err;

/// Check position, message and the caret line (the text under the source line).
fn check(src: &str, pos: &str, msg: &str, caret: &str) {
    let e = err(src);
    assert_eq!(e.position(), pos, "position of: {e}");
    assert_eq!(e.msg, msg, "message of: {e}");
    let snippet = e.snippet();
    let caret_line = snippet.lines().last().unwrap();
    let caret_text = caret_line.split_once("| ").map_or("", |x| x.1);
    assert_eq!(caret_text, caret, "caret of: {e}");
}

#[test]
fn full_rendering_is_rustc_like() {
    let e = err("BEGIN\n{\n\tprintf(\"%d\\n\", execname);\n}\n");
    assert_eq!(
        e.to_string(),
        "error: [D_PRINTF_ARG_TYPE] printf( ) argument #2 is incompatible with conversion #1 prototype: conversion: %d, prototype: char, short, int, long, or long long, argument: string\n \
         --> t.d:3:17\n  |\n3 | \tprintf(\"%d\\n\", execname);\n  | \t               ^^^^^^^^"
    );
}

#[test]
fn syntax_error_missing_operand() {
    check(
        "BEGIN { x = 1 +; }",
        "1:16",
        "[D_SYNTAX] syntax error: expected an expression, found ';'",
        "               ^",
    );
}

#[test]
fn syntax_error_in_predicate() {
    check(
        "fbt::vfs_read:entry\n/pid == /\n{ trace(pid); }",
        "2:9",
        "[D_SYNTAX] syntax error: expected an expression, found '/'",
        "        ^",
    );
}

#[test]
fn syntax_error_missing_semicolon_at_end_of_input() {
    check(
        "BEGIN { exit(0) ",
        "1:17",
        "[D_SYNTAX] syntax error: expected ';', found end of input",
        "                ^",
    );
}

#[test]
fn syntax_error_missing_semicolon_between_statements() {
    check(
        "BEGIN { trace(1) trace(2); }",
        "1:18",
        "[D_SYNTAX] syntax error: expected ';', found 'trace'",
        "                 ^^^^^",
    );
}

#[test]
fn unknown_provider() {
    check(
        "sycall::read:entry { }",
        "1:1",
        "[D_PDESC_ZERO] unknown provider 'sycall' (did you mean 'syscall'?) (supported: fbt, syscall, proc, sched, io, profile, tracepoint, sdt, kprobe, kretprobe, interval, BEGIN, END, tick-N, profile-N; user space: pid$target or pidPID, and USDT providers as NAME$target)",
        "^^^^^^^^^^^^^^^^^^",
    );
}

#[test]
fn bad_fbt_probe_name() {
    check(
        "BEGIN {}\nfbt::do_*:middle { }",
        "2:1",
        "[D_PDESC_ZERO] fbt probes are named 'entry' or 'return', not 'middle'",
        "^^^^^^^^^^^^^^^^",
    );
}

#[test]
fn whitespace_inside_probe_description() {
    check(
        "fbt:: f:entry { }",
        "1:6",
        "[D_SYNTAX] syntax error: whitespace inside a probe description",
        "     ^",
    );
}

#[test]
fn bad_tick_interval() {
    check(
        "tick-0s { }",
        "1:1",
        "[D_PDESC_ZERO] invalid tick interval '0s' (use e.g. tick-1s, tick-10ms, tick-100hz)",
        "^^^^^^^",
    );
    check(
        "tick-1us { }",
        "1:1",
        "[D_PDESC_ZERO] tick interval out of range (100 µs to 1 hour)",
        "^^^^^^^^",
    );
}

#[test]
fn unknown_variable() {
    check(
        "BEGIN { trace(y); }",
        "1:15",
        "[D_IDENT_UNDEF] failed to resolve y: it is never assigned or declared",
        "              ^",
    );
}

#[test]
fn unavailable_argument() {
    check(
        "BEGIN { trace(arg10); }",
        "1:15",
        "[D_IDENT_UNDEF] arg10 is not available (arg0..arg9 are)",
        "              ^^^^^",
    );
}

#[test]
fn this_used_before_assignment() {
    check(
        "BEGIN { trace(this->v); }",
        "1:15",
        "[D_IDENT_UNDEF] failed to resolve this->v: it is never assigned or declared",
        "              ^^^^^^^",
    );
}

#[test]
fn aggregation_function_changes() {
    check(
        "BEGIN {\n\t@a = count();\n\t@a = sum(1);\n}",
        "3:7",
        "[D_AGG_REDEF] @a is used with count() at 2:7; it cannot change function or parameters",
        "\t     ^^^",
    );
}

#[test]
fn aggregation_keys_change() {
    check(
        "BEGIN { @a[1] = count(); @a[\"x\"] = count(); }",
        "1:26",
        "@a has keys (integer) elsewhere, (string) here",
        "                         ^^",
    );
}

#[test]
fn bad_lquantize_bounds() {
    check(
        "BEGIN { @a = lquantize(arg0, 10, 0, 1); }",
        "1:34",
        "[D_LQUANT_MISMATCH] lquantize( ) upper bound (argument #2) must be greater than lower bound (argument #1)",
        "                                 ^",
    );
}

#[test]
fn wrong_argument_counts() {
    // One wording for every function: "N", "N or M" or "N to M" argument(s).
    check(
        "BEGIN { @a = quantize(); }",
        "1:14",
        "[D_PROTO_LEN] quantize() takes 1 or 2 argument(s), 0 given",
        "             ^^^^^^^^",
    );
    check(
        "BEGIN { @a = lquantize(1); }",
        "1:14",
        "[D_PROTO_LEN] lquantize() takes 3 to 5 argument(s), 1 given",
        "             ^^^^^^^^^",
    );
    check(
        "BEGIN { exit(); }",
        "1:9",
        "[D_PROTO_LEN] exit() takes 1 argument(s), 0 given",
        "        ^^^^^^",
    );
}

#[test]
fn non_constant_aggregation_parameter() {
    check(
        "BEGIN { @a = lquantize(arg0, arg1, 10); }",
        "1:30",
        "[D_LQUANT_BASETYPE] lquantize( ) argument #1 must be an integer constant",
        "                             ^^^^",
    );
}

#[test]
fn unknown_aggregating_function() {
    check(
        "BEGIN { @a = median(1); }",
        "1:14",
        "[D_FUNC_UNDEF] unknown aggregating function 'median'",
        "             ^^^^^^",
    );
}

#[test]
fn printf_argument_type() {
    check(
        "BEGIN { printf(\"%s\", pid); }",
        "1:22",
        "[D_PRINTF_ARG_TYPE] printf( ) argument #2 is incompatible with conversion #1 prototype: conversion: %s, prototype: char [] or string (or use stringof), argument: int",
        "                     ^^^",
    );
}

#[test]
fn printf_argument_count() {
    check(
        "BEGIN { printf(\"%d %d\\n\", 1); }",
        "1:16",
        "[D_PRINTF_ARG_PROTO] printf( ) prototype mismatch: conversion #2 (%d) is missing a corresponding value argument",
        "               ^^^^^^^^^",
    );
    check(
        "BEGIN { printf(\"%d\\n\", 1, 2); }",
        "1:27",
        "[D_PRINTF_ARG_EXTRA] printf( ) prototype mismatch: only 1 arguments required by this format string",
        "                          ^",
    );
}

#[test]
fn printf_unsupported_conversion() {
    check(
        "BEGIN { printf(\"%w\\n\", 1); }",
        "1:18",
        "[D_SYNTAX] format conversion #1 is undefined: %w",
        "                 ^",
    );
}

#[test]
fn printf_format_syntax() {
    // Each wrong conversion is DTrace's D_SYNTAX, numbered as DTrace numbers them.
    let cases = [
        ("%d %", "#2 ends before its conversion character"),
        ("%*", "#1 ends before its conversion character"),
        ("%3", "#1 ends before its conversion character"),
        ("%.*.*d", "#1 has more than one '.'"),
        (
            "%1$d",
            "#1 uses a positional argument (%n$), which D does not support",
        ),
        (
            "%*1$d",
            "#1 uses a positional argument (%n$), which D does not support",
        ),
        (
            "%.*1$d",
            "#1 uses a positional argument (%n$), which D does not support",
        ),
        ("%-%", "#1 is %%, which takes no flags, width or precision"),
        ("%Z", "#1 is undefined: %Z"),
    ];
    for (fmt, msg) in cases {
        let e = err(&format!("BEGIN {{ printf(\"{fmt}\", 1); }}"));
        assert!(
            e.msg
                .starts_with(&format!("[D_SYNTAX] format conversion {msg}")),
            "{fmt}: {}",
            e.msg
        );
    }
    let e = err("BEGIN { printf(\"%@d\", 1); }");
    assert!(e.msg.starts_with("[D_PRINTF_AGG_CONV] "), "{}", e.msg);
}

#[test]
fn printf_pointer_width_flag() {
    // `%?d` is one conversion (a pointer-wide column), so a second value is extra.
    let e = err("BEGIN { printf(\"%?d\\n\", 1, 2); }");
    assert!(e.msg.starts_with("[D_PRINTF_ARG_EXTRA] "), "{}", e.msg);
    let out = support::run_begin(r#"BEGIN { printf("[%?p][%-?d][%?x]", 0x1234, 7, 255); }"#);
    assert_eq!(
        out,
        "[          0x1234][7               ][              ff]"
    );
}

#[test]
fn printf_format_not_string() {
    check(
        "BEGIN { printf(1); }",
        "1:16",
        "[D_PROTO_ARG] printf( ) argument #1 must be a format string, not int",
        "               ^",
    );
}

#[test]
fn printf_format_not_literal() {
    check(
        "BEGIN { printf(execname); }",
        "1:16",
        "[D_PRINTF_ARG_FMT] printf() format must be a string literal",
        "               ^^^^^^^^",
    );
}

#[test]
fn unknown_option_in_pragma() {
    check(
        "#pragma D option nosuch=1\nBEGIN { }",
        "1:18",
        "[D_PRAGMA_OPTSET] unknown option 'nosuch'",
        "                 ^^^^^^^^",
    );
}

#[test]
fn bad_option_value() {
    check(
        "#pragma D option bufsize=12q\nBEGIN { }",
        "1:18",
        "[D_PRAGMA_OPTSET] invalid value '12q' for option 'bufsize'",
        "                 ^^^^^^^^^^^",
    );
}

#[test]
fn unsupported_preprocessor_directive() {
    check(
        "#include <x.h>\nBEGIN { }",
        "1:2",
        "[D_PRAGCTL_INVAL] unsupported preprocessor directive '#include': run the program through cpp with -C",
        " ^^^^^^^",
    );
}

#[test]
fn pragma_directives() {
    let bad = [
        (
            "#pragma D error \"stop here\"\nBEGIN { }",
            "1:11",
            "[D_PRAGERR] #error: stop here",
        ),
        (
            "#pragma D option nspec=24 * 44\nBEGIN { }",
            "1:27",
            "[D_PRAGMA_MALFORM] #pragma D option takes one name or name=value, with no blanks in it",
        ),
        (
            "#pragma D depends_on library net.d\nBEGIN { }",
            "1:30",
            "[D_PRAGMA_DEPEND] a program cannot depend on a D library: only a library can",
        ),
        (
            "#pragma D depends_on provider nosuch\nBEGIN { }",
            "1:31",
            "[D_PRAGMA_DEPEND] program requires provider nosuch, which is not available",
        ),
        (
            "#pragma D depends_on colour red\nBEGIN { }",
            "1:22",
            "[D_PRAGMA_INVAL] invalid class colour: #pragma D depends_on takes library, module or provider",
        ),
        (
            "#pragma D attributes incorrect_attr\nBEGIN { }",
            "1:11",
            "[D_PRAGMA_MALFORM] #pragma D attributes takes attributes and a name",
        ),
        (
            "#pragma D attributes Stable/Bogus/Common x\nBEGIN { }",
            "1:22",
            "[D_PRAGMA_INVAL] invalid attributes Stable/Bogus/Common: want name/data/class stabilities, as Stable/Stable/Common",
        ),
        (
            "#pragma D attributes Evolving/Bogus/ISA provider io provider\nBEGIN { }",
            "1:22",
            "[D_PRAGMA_INVAL] invalid attributes Evolving/Bogus/ISA: want name/data/class stabilities, as Stable/Stable/Common",
        ),
        (
            "#pragma D binding \"one\" x\nBEGIN { }",
            "1:19",
            "[D_PRAGMA_INVAL] invalid version \"one\" in #pragma D binding",
        ),
        (
            "#pragma D frobnicate\nBEGIN { }",
            "1:11",
            "[D_PRAGMA_INVAL] unknown #pragma D directive 'frobnicate'",
        ),
        // Read where it stands, before the syntax error the line interrupts.
        (
            "inline int foo\n#pragma D attributes incorrect_attr foo\nBEGIN { }",
            "2:22",
            "[D_PRAGMA_INVAL] invalid attributes incorrect_attr: want name/data/class stabilities, as Stable/Stable/Common",
        ),
    ];
    for (src, pos, msg) in bad {
        let e = err(src);
        assert_eq!((e.position().as_str(), e.msg.as_str()), (pos, msg), "{src}");
    }
    // Well-formed ones are taken; other namespaces' pragmas are ignored, as in C.
    support::c(
        "#pragma ident \"@(#)x.d 1.1\"\n#pragma D attributes Stable/Evolving/Common x\n\
         #pragma D attributes Evolving/Evolving/ISA provider io provider\n\
         #pragma D binding \"1.0\" x\n#pragma D depends_on provider syscall\n\
         #pragma D depends_on module vmlinux\nBEGIN { }",
    );
}

#[test]
fn pragma_inside_a_clause() {
    // DTrace's lexer reads a pragma line anywhere, even inside a clause.
    let out = support::run_begin("BEGIN {\n#pragma D option quiet\n\tprintf(\"in\");\n}");
    assert_eq!(out, "in");
    let p = support::c("BEGIN\n#pragma D option bufsize=1m\n{ }");
    assert_eq!(
        p.options.get(oxtrace_core::program::OptKey::Bufsize),
        1 << 20
    );
}

#[test]
fn unterminated_string_and_comment() {
    check(
        "BEGIN { trace(\"abc); }",
        "1:15",
        "end-of-file encountered before matching \"",
        "              ^^^^^^^^",
    );
    check(
        "BEGIN { } /* never",
        "1:11",
        "end-of-file encountered before matching */",
        "          ^^",
    );
}

#[test]
fn invalid_character() {
    check(
        "BEGIN { trace(1 # 2); }",
        "1:17",
        "invalid character '#'",
        "                ^",
    );
}

#[test]
fn assignment_to_non_variable() {
    check(
        "BEGIN { 3 = 4; }",
        "1:9",
        "[D_OP_LVAL] operator = requires a modifiable lvalue as an operand",
        "        ^",
    );
    check(
        "BEGIN { pid = 4; }",
        "1:9",
        "[D_OP_WRITE] cannot assign to built-in variable 'pid'",
        "        ^^^",
    );
}

#[test]
fn incompatible_operand_types() {
    check(
        "BEGIN { trace(execname + 1); }",
        "1:15",
        "[D_OP_ARITH] operator + requires operands of arithmetic type",
        "              ^^^^^^^^^^^^",
    );
    check(
        "BEGIN { trace(execname == 1); }",
        "1:15",
        "[D_OP_INCOMPAT] operands have incompatible types: \"string\" == \"int\"",
        "              ^^^^^^^^^^^^^",
    );
}

#[test]
fn macro_argument_errors() {
    check(
        "BEGIN { trace($1); }",
        "1:15",
        "[D_MACRO_UNDEF] macro argument $1 is not defined",
        "              ^^",
    );
    let o = CompileOptions::with_args("t.d", &["abc".into()]);
    let e = compile("BEGIN { trace($1); }", "t.d", &o).unwrap_err();
    assert_eq!(
        e.msg,
        "macro argument $1 (\"abc\") is not an integer; use $$1 for a string"
    );
}

#[test]
fn deref_of_integer() {
    check(
        "BEGIN { trace(*arg0); }",
        "1:15",
        "[D_DEREF_NONPTR] cannot dereference a int64_t: cast it to a pointer type",
        "              ^^^^^",
    );
}

#[test]
fn action_in_expression() {
    check(
        "BEGIN { x = trace(1); }",
        "1:13",
        "trace() is an action: it cannot be used in an expression",
        "            ^^^^^^^^",
    );
}

#[test]
fn stores_to_kernel_memory_are_rejected() {
    check(
        "BEGIN { *(int *)arg0 = 1; }",
        "1:9",
        "[D_OP_WRITE] cannot store to kernel memory through arg0: only scratch memory (alloca(), copyin()) is writable",
        "        ^^^^^^^^^^^^",
    );
}

#[test]
fn unknown_aggregation_in_printa() {
    check(
        "END { printa(@nope); }",
        "1:14",
        "unknown aggregation @nope",
        "             ^^^^^",
    );
}

#[test]
fn empty_program() {
    check(
        "/* nothing */",
        "1:14",
        "[D_EMPTY] empty D program translation unit",
        "             ^",
    );
}

#[test]
fn too_many_registers() {
    // A right-leaning expression tree holds one register per level.
    let mut e = String::from("1");
    for _ in 0..20 {
        e = format!("1 + ({e})");
    }
    let src = format!("BEGIN {{ trace({e}); }}");
    let e = err(&src);
    assert_eq!(e.msg, "expression too complex: out of registers");
}

#[test]
fn x_option_error() {
    let mut o = CompileOptions::default();
    o.xopts.push(("strsize".into(), Some("1".into())));
    let e = compile("BEGIN {}", "t.d", &o).unwrap_err();
    assert_eq!(e.input, "-x");
    assert_eq!(
        e.msg,
        "option strsize=1 is below the smallest string size, 2"
    );
}

#[test]
fn good_programs_compile() {
    for src in [
        "BEGIN { x = 1 }\nBEGIN { trace(x) }",
        "BEGIN { x = pid / 2 / 3; } fbt::f:entry /x / 2 == 1/ { trace(x); }",
        "dtrace:::BEGIN, dtrace:::END { trace(probename); }",
        "fbt:vmlinux:vfs_read:*, fbt::vfs_write: { @[probefunc, probename] = count(); }",
        "kprobe:do_sys_open { printf(\"%-16s %5d %p %c %o %X %%\\n\", execname, pid, arg0, 65, 8, 255); }",
        "BEGIN { this->p = (uint64_t *)curthread; trace(*this->p); trace(this->p[0] == 0); }",
        "BEGIN { a[\"k\", 1]++; --a[\"k\", 1]; b[pid] = a[\"k\", 1] ? 1 : 2; }",
        "BEGIN { printf(\"%s\", \"a\" \"b\"); x = 'c'; y = 0x10 + 010 + 3ull; }",
        "// comment\nBEGIN /* mid */ { exit(0); } // end",
        "END { printa(\"%s %@d\\n\", @c); } BEGIN { @c[execname] = count(); }",
    ] {
        if let Err(e) = compile(src, "t.d", &CompileOptions::default()) {
            panic!("{src}\n{e}");
        }
    }
}

#[test]
fn unsafe_function_refused_at_its_probe() {
    check(
        "BEGIN { }\nfbt::rcu_read_lock_held_common:return { @n = count(); }",
        "2:1",
        "function rcu_read_lock_held_common is unsafe to probe: an RCU read-side helper that \
         probe handling calls itself",
        "^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    );
}

/// Found by the compiler fuzzer (tests/fuzz.rs): a character literal of a multi-byte
/// character ended its error's span inside that character, and building the error
/// panicked. The caret now covers whole characters.
#[test]
fn character_literal_of_a_wide_character() {
    check(
        "BEGIN { x = 'é\n'; }",
        "1:13",
        "[D_CHR_NL] newline encountered in character constant",
        "            ^^",
    );
    check(
        "BEGIN { x = '\u{1F600}",
        "1:13",
        "end-of-file encountered before matching '",
        "            ^^",
    );
}
