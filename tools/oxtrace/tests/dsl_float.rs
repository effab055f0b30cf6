//! Floating-point types: `float`, `double` and `long double` declared, loaded from memory,
//! traced and formatted with printf() through the simulator; and the compile errors, with
//! `line:column`, of what D does not do with them (arithmetic, comparison, constants,
//! conversions).

mod support;

use oxtrace::output::printf::format_trace;
use oxtrace::runtime::sim::{Firing, Sim};
use oxtrace_core::action::{Item, RecordKind};
use support::{c, err_at};

/// Runs BEGIN of `src` with user memory `user` at 0x7000: printf output and the text of
/// each trace() record (`-q`).
fn run(src: &str, user: &[u8]) -> (String, Vec<String>) {
    let p = c(src);
    let mut s = Sim::default();
    s.user_mem.push((0x7000, user.to_vec()));
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let traces = s
        .records
        .iter()
        .filter(|r| r.kind == RecordKind::Trace)
        .map(|r| {
            let items: Vec<Item<'_>> = r.items.iter().map(|i| i.as_item()).collect();
            String::from_utf8(format_trace(&items, true, None)).unwrap()
        })
        .collect();
    (s.printf_output(&p), traces)
}

/// 1.5f, -2.25 and 3.0L (x87: significand 0xc0.., exponent 16384) as a C program lays
/// them out in `struct { float f; double d; long double ld; }`.
fn user_bytes() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(1.5f32.to_le_bytes());
    b.extend([0u8; 4]);
    b.extend((-2.25f64).to_le_bytes());
    b.extend(0xc000_0000_0000_0000u64.to_le_bytes());
    b.extend(0x4000u16.to_le_bytes());
    b.extend([0u8; 6]);
    b
}

const S: &str = "struct fl { float f; double d; long double ld; };\n";

#[test]
fn sizes_offsets_and_type_names() {
    let (out, _) = run(
        &format!(
            "{S}typedef double real_t;
            BEGIN {{ printf(\"%d %d %d %d %d %d %d\\n\", sizeof (float), sizeof (double),
                sizeof (long double), sizeof (real_t), offsetof(struct fl, d),
                offsetof(struct fl, ld), sizeof (struct fl)); }}"
        ),
        &[],
    );
    assert_eq!(out, "4 8 16 8 8 16 32\n");
}

#[test]
fn printf_of_copied_in_floats_and_members() {
    let (out, _) = run(
        &format!(
            "{S}BEGIN {{
            printf(\"%f %e %g\\n\", *(float *)copyin(0x7000, 4), *(double *)copyin(0x7008, 8),
                *(long double *)copyin(0x7010, 16));
            this->s = (struct fl *)copyin(0x7000, sizeof (struct fl));
            printf(\"[%8.2f] [%-10.3E] [%G] [%*.*f]\\n\", this->s->f, this->s->d, this->s->ld,
                7, 1, this->s->d); }}"
        ),
        &user_bytes(),
    );
    assert_eq!(
        out,
        "1.500000 -2.250000e+00 3\n[    1.50] [-2.250E+00] [3] [   -2.2]\n"
    );
}

#[test]
fn float_variables_copy_bytes_and_stores_through_pointers() {
    // A float of the same type assigns (its bytes are copied); 0x3fc00000 is 1.5f.
    let (out, _) = run(
        "float g; double h;
        BEGIN {
            this->p = (int *)alloca(8);
            *this->p = 0x3fc00000;
            g = *(float *)this->p;
            self->f = g;
            this->q = (float *)alloca(4);
            *this->q = self->f;
            this->d = (double *)alloca(16);
            this->d[0] = h;
            this->l = (long double *)alloca(32);
            this->l[1] = *(long double *)copyin(0x7010, 16);
            printf(\"%f %f %f %f %Lf\\n\", g, self->f, *this->q, this->d[0], this->l[1]);
        }",
        &user_bytes(),
    );
    assert_eq!(out, "1.500000 1.500000 1.500000 0.000000 3.000000\n");
}

#[test]
fn trace_of_floats_shows_their_bytes_as_dtrace() {
    let (_, traces) = run(
        &format!(
            "{S}BEGIN {{ this->s = (struct fl *)copyin(0x7000, sizeof (struct fl));
            trace(this->s->f); trace(this->s->d); trace(this->s->ld); }}"
        ),
        &user_bytes(),
    );
    assert_eq!(traces[0], (1.5f32.to_bits() as i32).to_string());
    assert_eq!(traces[1], ((-2.25f64).to_bits() as i64).to_string());
    assert!(
        traces[2].contains("0: 00 00 00 00 00 00 00 c0 00 40 00 00 00 00 00 00"),
        "{}",
        traces[2]
    );
}

/// Each error: source, `line:column`, message.
fn check(src: &str, pos: &str, msg: &str) {
    let (p, m) = err_at(src);
    assert_eq!((p.as_str(), m.as_str()), (pos, msg), "{src}");
}

#[test]
fn no_floating_point_constants() {
    let m = "[D_SYNTAX] floating-point constants are not permitted";
    check("BEGIN { x = 1.5; }", "1:13", m);
    check("BEGIN { x = .5; }", "1:13", m);
    check("BEGIN\n{ trace(2e10); }", "2:9", m);
}

#[test]
fn no_floating_point_arithmetic_or_comparison() {
    let pre = "double d; float f;\nBEGIN { ";
    let cases = [
        (
            "x = d + 1;",
            "2:13",
            "[D_OP_ARITH] operator + requires operands of arithmetic type",
        ),
        (
            "x = 2 * f;",
            "2:13",
            "[D_OP_ARITH] operator * requires operands of arithmetic type",
        ),
        (
            "x = d % 2;",
            "2:13",
            "[D_OP_INT] operator % requires operands of integral type",
        ),
        (
            "x = d << 1;",
            "2:13",
            "[D_OP_INT] operator << requires operands of integral type",
        ),
        (
            "x = d == d;",
            "2:13",
            "[D_OP_INCOMPAT] operands have incompatible types: \"double\" == \"double\"",
        ),
        (
            "x = f < 3;",
            "2:13",
            "[D_OP_INCOMPAT] operands have incompatible types: \"float\" < \"int\"",
        ),
        (
            "x = d && 1;",
            "2:13",
            "[D_OP_SCALAR] operator && requires operands of scalar type",
        ),
        (
            "x = -d;",
            "2:13",
            "[D_OP_ARITH] operator - requires an operand of arithmetic type",
        ),
        (
            "x = !f;",
            "2:13",
            "[D_OP_SCALAR] operator ! requires an operand of scalar type",
        ),
        (
            "x = ~f;",
            "2:13",
            "[D_OP_INT] operator ~ requires an operand of integral type",
        ),
        (
            "d += 1;",
            "2:9",
            "[D_OP_ARITH] operator + requires operands of arithmetic type",
        ),
        (
            "d++;",
            "2:9",
            "[D_OP_SCALAR] operator ++ requires an operand of scalar type, not double",
        ),
    ];
    for (stmt, pos, msg) in cases {
        check(&format!("{pre}{stmt} }}"), pos, msg);
    }
}

#[test]
fn no_conversions_between_floats_and_integers() {
    let pre = "double d; float f; int i;\nBEGIN { ";
    check(
        &format!("{pre}i = (int)d; }}"),
        "2:13",
        "[D_CAST_INVAL] invalid cast expression: \"double\" to \"int\"",
    );
    check(
        &format!("{pre}x = (double)i; }}"),
        "2:13",
        "[D_CAST_INVAL] invalid cast expression: \"int\" to \"double\"",
    );
    check(
        &format!("{pre}x = (float)d; }}"),
        "2:13",
        "[D_CAST_INVAL] invalid cast expression: \"double\" to \"float\"",
    );
    check(
        &format!("{pre}d = f; }}"),
        "2:13",
        "[D_OP_INCOMPAT] operands have incompatible types: \"double\" = \"float\"",
    );
    check(
        &format!("{pre}i = d; }}"),
        "2:13",
        "[D_OP_INCOMPAT] operands have incompatible types: \"int\" = \"double\"",
    );
    check(
        &format!("{pre}*(float *)alloca(4) = 1; }}"),
        "2:31",
        "[D_OP_INCOMPAT] operands have incompatible types: \"float\" = \"int\"",
    );
    check(
        &format!("{pre}if (d) {{ }} }}"),
        "2:13",
        "[D_OP_SCALAR] the condition of if must be of scalar type, not double",
    );
}

#[test]
fn printf_conversions_check_float_arguments() {
    check(
        "BEGIN { printf(\"%f\\n\", 1); }",
        "1:24",
        "[D_PRINTF_ARG_TYPE] printf( ) argument #2 is incompatible with conversion #1 prototype: conversion: %f, prototype: float, double, or long double, argument: int",
    );
    check(
        "double d;\nBEGIN { printf(\"%s %d\\n\", \"a\", d); }",
        "2:32",
        "[D_PRINTF_ARG_TYPE] printf( ) argument #3 is incompatible with conversion #2 prototype: conversion: %d, prototype: char, short, int, long, or long long, argument: double",
    );
    check(
        "float f;\nBEGIN { printf(\"%*f\\n\", f, f); }",
        "2:25",
        "[D_PRINTF_DYN_TYPE] printf( ) argument #2 is incompatible with conversion #1 prototype: conversion: %*f, prototype: int, argument: float",
    );
}

#[test]
fn long_doubles_and_float_keys_stay_out_of_variables() {
    check(
        "BEGIN { this->x = *(long double *)alloca(16); }",
        "1:9",
        "[D_OP_INCOMPAT] a long double cannot be stored in a D variable: only traced or formatted",
    );
    check(
        "double d;\nBEGIN { @a[d] = count(); }",
        "2:12",
        "[D_KEY_TYPE] a key of type double is not supported: D has no floating-point comparison",
    );
    check(
        "float f;\nBEGIN { x[f] = 1; }",
        "2:9",
        "[D_KEY_TYPE] a key of type float is not supported: D has no floating-point comparison",
    );
    check(
        "double d;\nBEGIN { @s = sum(d); }",
        "2:18",
        "[D_AGG_SCALAR] sum() requires an integer or pointer, not double",
    );
}

#[test]
fn printa_formats_take_no_float_conversion() {
    check(
        "BEGIN { @a = count(); printa(\"%d %@f\\n\", @a); }",
        "1:34",
        "[D_PRINTF_ARG_PROTO] printa( ): conversion %@f takes a float, double, or long double, and aggregation keys and values are integers or strings",
    );
}

#[test]
fn ternary_of_floats_of_one_type() {
    let (out, _) = run(
        "BEGIN { this->p = (double *)copyin(0x7008, 8);
            printf(\"%.2f\\n\", 1 ? *this->p : *this->p); }",
        &user_bytes(),
    );
    assert_eq!(out, "-2.25\n");
    check(
        "double d; float f;\nBEGIN { x = 1 ? d : f; }",
        "2:13",
        "?: operands have incompatible types: double and float",
    );
}

/// A kernel's BTF floats (`BTF_KIND_FLOAT`) are D's: a member of each traced through a
/// typed fbt argument.
#[test]
fn btf_floats_are_d_floats() {
    use oxtrace::btf::build::Builder;
    use oxtrace::btf::Btf;
    use oxtrace::dsl::{compile, CompileOptions};
    use oxtrace_core::program::ProbeKind;
    use std::sync::Arc;

    let mut b = Builder::new();
    let int = b.int("int", 4, true);
    let flt = b.float("float", 4);
    let dbl = b.float("double", 8);
    let ldbl = b.float("long double", 16);
    let st = b.sou(
        false,
        "kstat",
        32,
        &[
            ("a", int, 0, 0),
            ("f", flt, 32, 0),
            ("d", dbl, 64, 0),
            ("ld", ldbl, 128, 0),
        ],
    );
    let pst = b.ptr(st);
    b.func("kfn", int, &[("s", pst)]);
    let opts = CompileOptions {
        btf: Some(Arc::new(Btf::parse(&b.finish()).unwrap())),
        ..CompileOptions::default()
    };
    let src = "fbt::kfn:entry { printf(\"%d %d %f %g %.1Lf\\n\", sizeof (args[0]->ld), args[0]->a,
        args[0]->f, args[0]->d, args[0]->ld); }";
    let p = compile(src, "t.d", &opts).unwrap_or_else(|e| panic!("{e}"));
    let mut mem = Vec::new();
    mem.extend(7i32.to_le_bytes());
    mem.extend(0.25f32.to_le_bytes());
    mem.extend(1e100f64.to_le_bytes());
    mem.extend(&user_bytes()[16..]);
    let mut s = Sim::default();
    s.mem.push((0x9000, mem));
    let f = Firing {
        kind: ProbeKind::FbtEntry,
        func: "kfn".into(),
        args: [0x9000, 0, 0, 0, 0, 0],
        ..Firing::default()
    };
    s.fire(&p, &f);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "16 7 0.250000 1e+100 3.0\n");
    let e = compile("fbt::kfn:entry { x = args[0]->f * 2; }", "t.d", &opts).unwrap_err();
    assert_eq!(
        (e.position(), e.msg.as_str()),
        (
            "1:22".to_string(),
            "[D_OP_ARITH] operator * requires operands of arithmetic type"
        )
    );
}
