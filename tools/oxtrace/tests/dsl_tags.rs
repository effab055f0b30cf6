//! DTrace's error tags (`[D_*]`) and positions for wrong programs, and the lexer and grammar
//! forms around them, as DTrace's reference describes them: a wrong program is refused at
//! compile time with the tag DTrace gives it, at the place it names.

mod support;

use support::{bad, c, err_at, run_begin};

/// The tag of `src`'s compile error.
fn tag(src: &str) -> String {
    let (_, msg) = err_at(src);
    match msg.strip_prefix('[').and_then(|m| m.split_once(']')) {
        Some((t, _)) => t.to_string(),
        None => panic!("no tag in: {msg}"),
    }
}

// ---- the lexer ---------------------------------------------------------------------------

#[test]
fn character_constants() {
    // One character is a char; several are an integer whose bytes they are, the first the
    // most significant ('ab' is 0x6162), up to the eight bytes of a 64-bit integer.
    assert_eq!(run_begin("BEGIN { printf(\"%d\", 'a'); }"), "97");
    assert_eq!(run_begin("BEGIN { printf(\"%x\", 'ab'); }"), "6162");
    assert_eq!(
        run_begin("BEGIN { printf(\"%x\", 'abcdefgh'); }"),
        "6162636465666768"
    );
    assert_eq!(run_begin("BEGIN { printf(\"%x\", '\\n\\t'); }"), "a09");
    // Escapes as DTrace reads them: octal of up to three digits, hex of any number, and
    // one it does not know (\?, \', \c) kept as the backslash and the character.
    assert_eq!(
        run_begin(
            r#"BEGIN { printf("%x %x %x %x %x %x", '\0103', '\x4E', '\?', '\'', '\c', '\"\ba'); }"#
        ),
        "833 4e 5c3f 5c27 5c63 220861"
    );
    // In a string too; a NUL ends it.
    assert_eq!(
        run_begin(r#"BEGIN { printf("%s|%s|", "\?\\\'\"\0gone", "a\x4D\044"); }"#),
        r#"\?\\'"|aM$|"#
    );
    bad(
        "BEGIN { x = 'abcdefghi'; }",
        "1:13",
        "[D_CHR_OFLOW] character constant is too long",
    );
    bad(
        "BEGIN { x = ''; }",
        "1:13",
        "[D_CHR_NULL] empty character constant",
    );
    bad(
        "BEGIN {\n\tx = '\n';\n}",
        "2:6",
        "[D_CHR_NL] newline encountered in character constant",
    );
    bad(
        "BEGIN { x = 'a",
        "1:13",
        "end-of-file encountered before matching '",
    );
}

#[test]
fn string_literals_end_on_their_line() {
    bad(
        "BEGIN {\n\tx = \"hello\n\tthere\";\n}",
        "2:6",
        "[D_STR_NL] newline encountered in string literal",
    );
    bad(
        "BEGIN { x = \"abc",
        "1:13",
        "end-of-file encountered before matching \"",
    );
    bad(
        "BEGIN { } /* open",
        "1:11",
        "end-of-file encountered before matching */",
    );
}

#[test]
fn integer_constants() {
    // A leading 0 is octal, 0x hexadecimal: a digit the base lacks is D_INT_DIGIT; digits
    // past 64 bits are D_INT_OFLOW.
    assert_eq!(run_begin("BEGIN { printf(\"%d\", 017); }"), "15");
    bad(
        "BEGIN { x = 0128; }",
        "1:13",
        "[D_INT_DIGIT] constant 0128 contains invalid digit 8",
    );
    bad(
        "BEGIN { x = 0x12g; }",
        "1:13",
        "[D_INT_DIGIT] constant 0x12g contains invalid digit g",
    );
    bad(
        "BEGIN { x = 12ab; }",
        "1:13",
        "[D_INT_DIGIT] constant 12ab contains invalid digit a",
    );
    bad(
        "BEGIN { x = 0x12345678123456781; }",
        "1:13",
        "[D_INT_OFLOW] constant 0x12345678123456781 results in integer overflow",
    );
    bad(
        "BEGIN { x = 18446744073709551616; }",
        "1:13",
        "[D_INT_OFLOW] constant 18446744073709551616 results in integer overflow",
    );
    assert_eq!(
        run_begin("BEGIN { printf(\"%u\", 18446744073709551615); }"),
        "18446744073709551615"
    );
}

// ---- the grammar -------------------------------------------------------------------------

#[test]
fn a_storage_class_alone_declares_an_int() {
    // `self x;` and `this x;` declare int variables, as a C declaration with no type.
    assert_eq!(
        run_begin("this x;\nBEGIN { this->x = 3; printf(\"%d\", this->x * 2); }"),
        "6"
    );
    c("self x, y;\nBEGIN { self->x = 1; self->y = 2; }");
    bad(
        "this x;\nBEGIN { this->x = execname; }",
        "2:19",
        "[D_OP_INCOMPAT] operands have incompatible types: \"int\" = \"string\"",
    );
}

#[test]
fn scoped_names_are_not_declared() {
    bad(
        "int `xyz;\nBEGIN { }",
        "1:5",
        "[D_DECL_SCOPE] D scoping operator may not be used in a declaration name (`xyz)",
    );
    assert_eq!(tag("struct foo`bar {\n};\nBEGIN { }"), "D_SYNTAX");
    assert_eq!(tag("enum foo`bar {\n};\nBEGIN { }"), "D_SYNTAX");
}

#[test]
fn an_empty_program() {
    bad(
        "\n/* nothing */\n",
        "3:1",
        "[D_EMPTY] empty D program translation unit",
    );
    let (_, m) = err_at("int x;");
    assert_eq!(m, "the program has no probe clause");
}

// ---- tags of calls -------------------------------------------------------------------------

#[test]
fn argument_counts_are_d_proto_len() {
    for src in [
        "BEGIN { exit(); }",
        "BEGIN { exit(1, 2); }",
        "BEGIN { trace(); }",
        "BEGIN { @a = sum(); }",
        "BEGIN { @a = count(1); }",
        "BEGIN { @a = lquantize(1, 2); }",
        "BEGIN { printf(); }",
        "BEGIN { printa(); }",
        "BEGIN { @a = count(); clear(); }",
        "BEGIN { @a = count(); normalize(@a); }",
        "BEGIN { x = strtok(\"a\"); }",
        "BEGIN { x = copyinstr(); }",
        "BEGIN { x[1, 2] = 1; y = x[1]; }",
    ] {
        assert_eq!(tag(src), "D_PROTO_LEN", "{src}");
    }
}

#[test]
fn argument_types_are_d_proto_arg_or_the_places_tag() {
    assert_eq!(tag("BEGIN { exit(\"a\"); }"), "D_PROTO_ARG");
    assert_eq!(tag("BEGIN { exit(exit(0)); }"), "D_PROTO_ARG");
    assert_eq!(tag("BEGIN { x = strlen(trace(1)); }"), "D_PROTO_ARG");
    assert_eq!(tag("BEGIN { @ = quantize(1, \"a\"); }"), "D_PROTO_ARG");
    assert_eq!(tag("BEGIN { x[1] = 1; x[\"a\"] = 2; }"), "D_PROTO_ARG");
    // The value aggregated must be an integer: D_AGG_SCALAR.
    for f in ["sum", "avg", "min", "max", "stddev", "quantize"] {
        assert_eq!(tag(&format!("BEGIN {{ @ = {f}(\"a\"); }}")), "D_AGG_SCALAR");
    }
    // An action has no value: the place it is used in names the error.
    assert_eq!(
        tag("BEGIN { printf(\"%d\", printf(\"\")); }"),
        "D_PRINTF_ARG_TYPE"
    );
    assert_eq!(tag("BEGIN { trace(trace(1)); }"), "D_TRACE_VOID");
    assert_eq!(tag("BEGIN { @[trace(1)] = count(); }"), "D_KEY_TYPE");
    assert_eq!(tag("BEGIN { x = (int)trace(1); }"), "D_CAST_INVAL");
    assert_eq!(tag("BEGIN { x = trace(1) + 1; }"), "D_OP_ARITH");
    assert_eq!(tag("BEGIN { x = 1 ? trace(1) : 2; }"), "D_OP_ACT");
    assert_eq!(tag("BEGIN { x = stringof(trace(1)); }"), "D_STRINGOF_TYPE");
    // ... and so does an aggregation, whose value is not in the program's reach.
    assert_eq!(tag("BEGIN { @a = count(); trace(@a); }"), "D_TRACE_DYN");
    assert_eq!(
        tag("BEGIN { @a = count(); trace(@a + 3); }"),
        "D_OP_INCOMPAT"
    );
    assert_eq!(
        tag("BEGIN { @a = count(); printf(\"%d\", @a); }"),
        "D_PRINTF_ARG_TYPE"
    );
    let (pos, _) = err_at("BEGIN { x = 1 +\n  trace(1); }");
    assert_eq!(pos, "2:3");
}

#[test]
fn descriptions_matching_no_probe_are_d_pdesc_zero() {
    for src in [
        "tick-1ns { }",
        "tick-n { }",
        "profile-1us { }",
        "profile-n { }",
        "BEGIN::read:entry { }",
    ] {
        assert_eq!(tag(src), "D_PDESC_ZERO", "{src}");
    }
}

// ---- aggregations ----------------------------------------------------------------------------

#[test]
fn lquantize_parameters_name_their_argument() {
    // lquantize(value, lower, upper[, step]): 32-bit constant bounds, upper above lower, a
    // positive 16-bit step and at least one level of it.
    for (src, want) in [
        ("@ = lquantize(0, x, 10);", "D_LQUANT_BASETYPE"),
        ("@ = lquantize(0, 0, x);", "D_LQUANT_LIMTYPE"),
        ("@ = lquantize(0, 0, 10, x);", "D_LQUANT_STEPTYPE"),
        (
            "@ = lquantize(0, 0x100000000, 0x200000000);",
            "D_LQUANT_BASEVAL",
        ),
        ("@ = lquantize(0, 0, 0x100000000);", "D_LQUANT_LIMVAL"),
        ("@ = lquantize(0, 10, 10);", "D_LQUANT_MISMATCH"),
        ("@ = lquantize(0, 0, 10, 0);", "D_LQUANT_STEPTYPE"),
        ("@ = lquantize(0, 0, 10, -1);", "D_LQUANT_STEPTYPE"),
        ("@ = lquantize(0, 0, 100000, 70000);", "D_LQUANT_STEPVAL"),
        ("@ = lquantize(0, 0, 10, 20);", "D_LQUANT_STEPLARGE"),
        ("@ = lquantize(0, 0, 100000, 1);", "D_LQUANT_STEPSMALL"),
        (
            "@ = lquantize(0, 0, 10); @ = lquantize(0, 1, 10);",
            "D_LQUANT_MATCHBASE",
        ),
        (
            "@ = lquantize(0, 0, 10); @ = lquantize(0, 0, 20);",
            "D_LQUANT_MATCHLIM",
        ),
        (
            "@ = lquantize(0, 0, 10, 1); @ = lquantize(0, 0, 10, 2);",
            "D_LQUANT_MATCHSTEP",
        ),
    ] {
        assert_eq!(tag(&format!("BEGIN {{ x = 1; {src} }}")), want, "{src}");
    }
}

#[test]
fn llquantize_parameters_name_their_argument() {
    // llquantize(value, factor, low, high, steps): unsigned 16-bit constants, factor two or
    // more, high above low, steps that divide or are divided by the factor.
    for (src, want) in [
        ("@ = llquantize(0, x, 0, 6, 10);", "D_LLQUANT_FACTORTYPE"),
        ("@ = llquantize(0, 10, x, 6, 10);", "D_LLQUANT_LMAGTYPE"),
        ("@ = llquantize(0, 10, 0, x, 10);", "D_LLQUANT_HMAGTYPE"),
        ("@ = llquantize(0, 10, 0, 6, x);", "D_LLQUANT_STEPTYPE"),
        ("@ = llquantize(0, 1, 0, 6, 10);", "D_LLQUANT_FACTORVAL"),
        ("@ = llquantize(0, 70000, 0, 6, 10);", "D_LLQUANT_FACTORVAL"),
        ("@ = llquantize(0, 10, -1, 6, 10);", "D_LLQUANT_LMAGVAL"),
        ("@ = llquantize(0, 10, 6, 6, 10);", "D_LLQUANT_HMAGVAL"),
        ("@ = llquantize(0, 10, 0, 100, 10);", "D_LLQUANT_HMAGVAL"),
        ("@ = llquantize(0, 10, 0, 6, 0);", "D_LLQUANT_STEPTYPE"),
        ("@ = llquantize(0, 10, 0, 6, -1);", "D_LLQUANT_STEPTYPE"),
        ("@ = llquantize(0, 10, 0, 6, 3);", "D_LLQUANT_STEPVAL"),
        (
            "@ = llquantize(0, 10, 0, 6, 10); @ = llquantize(0, 100, 0, 6, 100);",
            "D_LLQUANT_MATCHFACTOR",
        ),
        (
            "@ = llquantize(0, 10, 0, 6, 10); @ = llquantize(0, 10, 1, 6, 10);",
            "D_LLQUANT_MATCHLMAG",
        ),
        (
            "@ = llquantize(0, 10, 0, 6, 10); @ = llquantize(0, 10, 0, 7, 10);",
            "D_LLQUANT_MATCHHMAG",
        ),
        (
            "@ = llquantize(0, 10, 0, 6, 10); @ = llquantize(0, 10, 0, 6, 5);",
            "D_LLQUANT_MATCHSTEPS",
        ),
    ] {
        assert_eq!(tag(&format!("BEGIN {{ x = 1; {src} }}")), want, "{src}");
    }
}

#[test]
fn aggregation_actions_take_an_aggregation() {
    for (src, want) in [
        ("clear(1);", "D_CLEAR_AGGARG"),
        ("trunc(x);", "D_TRUNC_AGGARG"),
        ("normalize(x, 2);", "D_NORMALIZE_AGGARG"),
        ("denormalize(1);", "D_NORMALIZE_AGGARG"),
    ] {
        assert_eq!(
            tag(&format!("BEGIN {{ x = 1; @a = count(); {src} }}")),
            want,
            "{src}"
        );
    }
    bad(
        "BEGIN { @a = count(); clear(1); }",
        "1:29",
        "[D_CLEAR_AGGARG] clear( ) argument #1 must be an aggregation (@name)",
    );
}

// ---- declarations ----------------------------------------------------------------------------

#[test]
fn storage_classes() {
    // D's storage classes are self and this (and extern for a global); one at most.
    c("extern int x;\nBEGIN { x = 1; }");
    bad(
        "self this int x;\nBEGIN { }",
        "1:1",
        "[D_DECL_CLASS] only one storage class may be given in a declaration",
    );
    bad(
        "register x;\nBEGIN { }",
        "1:1",
        "[D_DECL_BADCLASS] specified storage class not appropriate in D",
    );
    assert_eq!(tag("static int x;\nBEGIN { }"), "D_DECL_BADCLASS");
    bad(
        "extern int;\nBEGIN { }",
        "1:1",
        "[D_DECL_USELESS] useless declaration",
    );
    // extern declares a kernel symbol: no D variable; its type may be implicit (int) and
    // its arrays may leave their size out.
    c("extern e9;\nextern int a1[], a2[1][2];\nextern void *p, **q;\nBEGIN { }");
    assert_eq!(tag("extern int `k;\nBEGIN { }"), "D_DECL_SCOPE");
    // A struct declared by its tag alone is no useless declaration.
    c("struct s;\nstruct s { int a; };\nBEGIN { }");
}

#[test]
fn type_specifier_combinations() {
    for (ty, want) in [
        ("char long", "D_DECL_CHARATTR"),
        ("short char", "D_DECL_CHARATTR"),
        ("short void", "D_DECL_VOIDATTR"),
        ("unsigned double", "D_DECL_SIGNINT"),
        ("long short", "D_UNKNOWN"),
        ("char int", "D_DECL_COMBO"),
        ("double double", "D_DECL_COMBO"),
    ] {
        assert_eq!(tag(&format!("BEGIN {{ i = ({ty})0; }}")), want, "{ty}");
    }
    assert_eq!(
        tag("long struct s { int i; };\nBEGIN { }"),
        "D_DECL_LONGINT"
    );
    assert_eq!(
        tag("unsigned struct s { int i; };\nBEGIN { }"),
        "D_DECL_SIGNINT"
    );
}

// ---- aggregation statements ----------------------------------------------------------------

#[test]
fn an_aggregation_is_assigned_a_function() {
    bad(
        "BEGIN { @a = count(); @a; }",
        "1:23",
        "[D_AGG_NULL] expression has null effect: @a is not assigned a function",
    );
    assert_eq!(tag("BEGIN { @a = count(); @a[1]; }"), "D_AGG_NULL");
    assert_eq!(tag("BEGIN { @a; }"), "D_IDENT_UNDEF");
    assert_eq!(tag("BEGIN { @[0][1] = count(); }"), "D_AGG_MDIM");
    assert_eq!(tag("BEGIN { @ = tick-1(); }"), "D_FUNC_IDENT");
    c("BEGIN { @[0, 1] = count(); }");
}

#[test]
fn a_scoping_operator_alone() {
    bad(
        "BEGIN { x = sizeof(`); }",
        "1:20",
        "[D_IDENT_UNDEF] failed to resolve `: Unknown symbol name",
    );
}

// ---- declarations ------------------------------------------------------------------------

#[test]
fn function_prototypes() {
    // Taken, as C takes a declaration of a function it never calls.
    c("int foo(int, char *s, ...);\nvoid bar(void);\nint *baz();\nlong q(register int);\nBEGIN { }");
    // So are extern ones, and pointers to functions.
    c(
        "extern int getint(void);\nextern int *getptr(void), x;\nextern int *(*fp)(void);\n\
       extern int **(**fpp)(int, ...);\nextern int v(...);\nBEGIN { }",
    );
    // A member may be a pointer to a function, or an array of them.
    assert_eq!(
        run_begin(
            "struct fps { char c; int (*fp)(); int *(*afp[2])(void); int x; };\n\
             BEGIN { printf(\"%d %d %d\", sizeof (struct fps), offsetof(struct fps, afp),\n\
             offsetof(struct fps, x)); }"
        ),
        "40 16 32"
    );
    for (src, t) in [
        ("int foo(int, void);\nBEGIN { }", "D_DECL_PROTO_VOID"),
        ("int foo(void, int);\nBEGIN { }", "D_DECL_PROTO_VOID"),
        ("int a(void v);\nBEGIN { }", "D_DECL_PROTO_NAME"),
        ("int a(int a[int]);\nBEGIN { }", "D_DECL_PROTO_TYPE"),
        ("int foo(static int);\nBEGIN { }", "D_DECL_PARMCLASS"),
        (
            "extern int (*fp)(static int);\nBEGIN { }",
            "D_DECL_PARMCLASS",
        ),
        (
            "struct s { int (*fp)(void v); };\nBEGIN { }",
            "D_DECL_PROTO_NAME",
        ),
        ("int a[...];\nBEGIN { }", "D_DECL_PROTO_VARARGS"),
        ("int a[int, ...];\nBEGIN { }", "D_DECL_PROTO_VARARGS"),
        ("struct s { int trace(); };\nBEGIN { }", "D_DECL_VOIDOBJ"),
    ] {
        assert_eq!(tag(src), t, "{src}");
    }
}

#[test]
fn incomplete_and_unterminated_definitions() {
    // A member or variable of a struct not (yet) defined is incomplete, as in C.
    bad(
        "struct r { struct pirate p; int x; };\nBEGIN { }",
        "1:26",
        "[D_DECL_INCOMPLETE] member p uses incomplete type struct pirate",
    );
    bad(
        "struct r { union u a[2]; };\nBEGIN { }",
        "1:20",
        "[D_DECL_INCOMPLETE] member a uses incomplete type union u",
    );
    // A pointer to one declares its tag, as in C.
    c("struct r { struct pirate *p; };\nstruct pirate *q;\nBEGIN { }");
    // A definition needs its `;` before the next one.
    bad(
        "struct a { int x; }\nstruct b { int y; };\nBEGIN { }",
        "2:1",
        "[D_DECL_COMBO] invalid type combination: a definition ends with ';' before the next type",
    );
}

// ---- expressions -------------------------------------------------------------------------

#[test]
fn void_pointers_have_no_arithmetic() {
    bad(
        "void *p;\nBEGIN { trace((int)(p + 1)); }",
        "2:20",
        "[D_OP_INCOMPAT] operands have incompatible types: \"void *\" + \"int\"",
    );
    assert_eq!(
        tag("void *p;\nBEGIN { trace((int)(1 + p)); }"),
        "D_OP_INCOMPAT"
    );
    // A cast says what the bytes are.
    c("void *p;\nBEGIN { trace((int)((char *)p + 1)); }");
}

#[test]
fn an_associative_array_has_no_size() {
    bad(
        "BEGIN { a[0] = 1; trace(sizeof(a)); }",
        "1:31",
        "[D_IDENT_BADREF] associative array a has no size: only its elements have one",
    );
    assert_eq!(
        run_begin("BEGIN { a[0] = 1; printf(\"%d\", sizeof(a[0])); }"),
        "4"
    );
}

#[test]
fn uregs_takes_a_register_constant() {
    assert_eq!(tag("BEGIN { i = R_SP; trace(uregs[i]); }"), "D_PROTO_ARG");
    // DTrace's i386 names are the same registers as the x86-64 ones.
    assert_eq!(
        run_begin("BEGIN { printf(\"%d %d %d %d\", R_EDI, R_RDI, R_EIP, R_PC); }"),
        "14 14 16 16"
    );
}
