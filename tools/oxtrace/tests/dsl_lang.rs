//! The D language as the Dynamic Tracing Guide describes it: declarations, types, structs,
//! arrays, `if`/`else`, lvalues, and the compile errors of each, run through the real
//! interpreter with the simulated environment.

mod support;

use oxtrace::dsl::{compile, CompileOptions};
use oxtrace::runtime::sim::{Firing, Sim};
use oxtrace_core::action::FaultKind;
use oxtrace_core::program::ProbeKind;
use support::{bad, c, err, run_begin as run};

#[test]
fn declared_globals_start_at_zero_and_keep_their_type() {
    let out = run("int x; uint8_t c; short s;\n\
         BEGIN { printf(\"%d %d\\n\", x, c); x = 5; x++; c = 255; c++; s = 40000;\n\
         printf(\"%d %d %d\\n\", x, c, s); }");
    assert_eq!(out, "0 0\n6 0 -25536\n");
}

#[test]
fn every_integer_type_name() {
    let src = "BEGIN { printf(\"%d %d %d %d %d %d \", \
        sizeof(char), sizeof(uchar_t), sizeof(short), sizeof(ushort_t), sizeof(int), \
        sizeof(uint_t)); printf(\"%d %d %d %d %d %d\\n\", sizeof(long), sizeof(ulong_t), sizeof(long long), \
        sizeof(u_longlong_t), sizeof(unsigned long long int), sizeof(int8_t)); \
        printf(\"%d %d %d %d %d %d\\n\", sizeof(uint64_t), sizeof(size_t), sizeof(ssize_t), \
        sizeof(uintptr_t), sizeof(intptr_t), sizeof(signed char)); \
        printf(\"%d %d %d\\n\", (uchar_t)257, (int8_t)255, (ushort_t)-1); }";
    assert_eq!(
        run(src),
        "1 1 2 2 4 4 8 8 8 8 8 1\n8 8 8 8 8 1\n1 -1 65535\n"
    );
}

#[test]
fn if_else_nested_with_blocks() {
    let src = "BEGIN { x = 5;\n\
        if (x > 3) { printf(\"a\"); if (x == 5) printf(\"b\"); else printf(\"c\"); }\n\
        else printf(\"d\");\n\
        if (x < 0) printf(\"e\"); else if (x < 10) { printf(\"f\"); } else { printf(\"g\"); }\n\
        if (0) printf(\"h\");\n\
        printf(\"\\n\"); }";
    assert_eq!(run(src), "abf\n");
}

#[test]
fn signed_division_and_remainder() {
    assert_eq!(
        run("BEGIN { a = -7; b = 2; printf(\"%d %d %d %d\\n\", a / b, a % b, 7 / -2, (unsigned)a / 2); }"),
        "-3 -1 -3 2147483644\n"
    );
}

#[test]
fn short_circuit_skips_the_right_operand() {
    // The division by zero on the right is never evaluated.
    assert_eq!(
        run("BEGIN { z = 0; x = (z != 0 && 10 / z > 1); y = (z == 0 || 10 / z > 1); printf(\"%d %d\\n\", x, y); }"),
        "0 1\n"
    );
}

#[test]
fn structs_unions_sizeof_offsetof() {
    let src = "struct point { int x; int y; };\n\
        struct rec { char c; long l; struct point p; short s; };\n\
        union u { char c; long l; int i; };\n\
        struct point g;\n\
        BEGIN { g.x = 3; g.y = 4; printf(\"%d %d %d\\n\", g.x, g.y, sizeof(struct point));\n\
        printf(\"%d %d %d %d\\n\", sizeof(struct rec), offsetof(struct rec, l), \
        offsetof(struct rec, p), offsetof(struct rec, s));\n\
        printf(\"%d %d\\n\", sizeof(union u), offsetof(union u, i)); printf(\"%d\\n\", sizeof g); }";
    assert_eq!(run(src), "3 4 8\n32 8 16 24\n8 0\n8\n");
}

#[test]
fn struct_members_in_every_storage_class() {
    let src = "struct point { int x; int y; };\n\
        struct point g; self struct point t; this struct point l;\n\
        BEGIN { g.x = 1; self->t.y = 2; this->l.x = 3; this->l.y = g.x + self->t.y;\n\
        self->t.x += 10; this->l.x++;\n\
        printf(\"%d %d %d %d\\n\", g.x, self->t.x, this->l.x, this->l.y);\n\
        this->m = g; printf(\"%d %d\\n\", this->m.x, this->m.y);\n\
        g = this->l; printf(\"%d %d\\n\", g.x, g.y); }";
    assert_eq!(run(src), "1 10 4 3\n1 0\n4 3\n");
}

#[test]
fn typedef_enum_inline() {
    let src = "typedef unsigned char byte_t;\n\
        typedef struct pair { int a; int b; } pair_t;\n\
        enum color { RED, GREEN = 5, BLUE };\n\
        inline int LIMIT = 10 * 2;\n\
        inline string NAME = \"oxtrace\";\n\
        pair_t pp; byte_t bb;\n\
        BEGIN { bb = 300; pp.b = BLUE; printf(\"%d %d %d %d %d %s %d\\n\", bb, pp.b, RED, GREEN, \
        LIMIT, NAME, sizeof(pair_t)); }";
    assert_eq!(run(src), "44 6 0 5 20 oxtrace 8\n");
}

#[test]
fn fixed_arrays_are_bounds_checked() {
    let src = "int a[5]; self int s[3]; this int l[4];\n\
        BEGIN { a[2] = 7; i = 4; a[i] = 9; a[i]++; self->s[1] = 5; self->s[i - 2] += 2;\n\
        this->l[i - 1] = 8; this->l[0] = 1;\n\
        printf(\"%d %d %d %d %d %d %d\\n\", a[2], a[4], a[0], self->s[1], self->s[2], this->l[3], this->l[i - 4]); }";
    assert_eq!(run(src), "7 10 0 5 2 8 1\n");
    let p = c("int a[5]; BEGIN { i = 5; a[i] = 1; }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults.len(), 1);
    assert_eq!(s.faults[0].1.kind, FaultKind::BadIndex(5));
    let p = c("this int l[2]; BEGIN { i = -1; this->l[i] = 1; }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults[0].1.kind, FaultKind::BadIndex(u64::MAX));
    bad(
        "int a[5];\nBEGIN { a[5] = 1; }",
        "2:11",
        "[D_ARR_BOUNDS] index 5 is out of bounds of an array of 5 elements",
    );
}

#[test]
fn typed_associative_arrays() {
    let src = "int a[string, int];\n\
        BEGIN { a[\"x\", 1] = 3; a[\"x\", 1]++; a[\"y\", 2] += 7; printf(\"%d %d %d\\n\", a[\"x\", 1], a[\"y\", 2], a[\"z\", 0]); }";
    assert_eq!(run(src), "4 7 0\n");
    bad(
        "int a[string];\nBEGIN { a[1] = 3; }",
        "2:11",
        "[D_ARR_BADREF] key is declared string, used with int",
    );
}

#[test]
fn increments_on_every_lvalue() {
    let src =
        "BEGIN { self->a[\"k\"]++; self->a[\"k\"]++; b[1, 2] = 5; --b[1, 2]; x = b[1, 2]++;\n\
        self->v += 3; self->v <<= 2; this->z++; ++this->z;\n\
        printf(\"%d %d %d %d %d\\n\", self->a[\"k\"], b[1, 2], x, self->v, this->z); }";
    assert_eq!(run(src), "2 5 4 12 2\n");
}

#[test]
fn unassigned_this_reads_zero() {
    assert_eq!(
        run("BEGIN { printf(\"%d\\n\", this->x); this->x = 4; }"),
        "0\n"
    );
    assert_eq!(
        run("this int y; BEGIN { printf(\"%d\\n\", this->y); }"),
        "0\n"
    );
}

#[test]
fn pointers_to_d_structs_read_kernel_memory() {
    let p = c("struct s { int a; char pad; long b; short arr[3]; };\n\
        fbt::f:entry { p = (struct s *)arg0; printf(\"%d %d %d %d %d\\n\", p->a, p->b, (*p).a, p->arr[2], sizeof(*p)); }");
    let mut s = Sim::default();
    let mut mem = vec![0u8; 24];
    mem[0..4].copy_from_slice(&(-5i32).to_le_bytes());
    mem[8..16].copy_from_slice(&1234567890123i64.to_le_bytes());
    mem[20..22].copy_from_slice(&77i16.to_le_bytes());
    s.mem.push((0x1000, mem));
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtEntry,
            func: "f".into(),
            args: [0x1000, 0, 0, 0, 0, 0],
            ..Firing::default()
        },
    );
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "-5 1234567890123 -5 77 24\n");
}

#[test]
fn pointer_arithmetic_steps_by_the_pointee_size() {
    // `p + 1`, `1 + p`, `p += 1` and `p++` all step by sizeof(*p), as in C.
    let src = "struct s { long a; int b; };\n\
        BEGIN { p = (struct s *)0x1000; q = (int *)0x1000; r = p; r += 2; t = q; t++;\n\
        printf(\"%x %x %x %x %x %x\\n\", (long)(p + 1), (long)(1 + p), (long)r,\n\
        (long)(q + 1), (long)(q - 1), (long)t); }";
    assert_eq!(run(src), "1010 1010 1020 1004 ffc 1004\n");
}

#[test]
fn long_string_literals_are_truncated_to_strsize() {
    assert_eq!(
        run("#pragma D option strsize=4\nBEGIN { printf(\"%s|\\n\", \"hello\"); }"),
        "hell|\n"
    );
}

#[test]
fn types_learned_in_a_later_clause() {
    // x is read (END) before the clause that fixes its type (BEGIN comes later in the text).
    let p = c("END { printf(\"%x\\n\", x); } BEGIN { x = (int)-1; }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::End,
            ..Firing::default()
        },
    );
    assert_eq!(s.printf_output(&p), "ffffffff\n");
}

#[test]
fn declaration_errors() {
    bad(
        "int x;\nlong x;\nBEGIN { }",
        "2:6",
        "[D_DECL_IDRED] identifier redeclared: x (was int, now int64_t)",
    );
    bad(
        "void v;\nBEGIN { }",
        "1:6",
        "[D_DECL_VOIDOBJ] cannot have void object: v",
    );
    bad(
        "this int a[string];\nBEGIN { }",
        "1:10",
        "[D_DECL_LOCASSC] local variables may not be used as associative arrays: this->a",
    );
    bad(
        "int a[];\nBEGIN { }",
        "1:6",
        "[D_DECL_ARRNULL] array declaration requires array dimension or tuple signature",
    );
    bad(
        "int a[x];\nBEGIN { }",
        "1:7",
        "[D_DECL_ARRSUB] positive integral constant expression or tuple signature expected as array declaration subscript",
    );
    bad(
        "struct s { int a; };\nstruct s { int b; };\nBEGIN { }",
        "2:8",
        "[D_DECL_TYPERED] type redeclared: struct s",
    );
    bad(
        "struct t v;\nBEGIN { }",
        "1:10",
        "[D_DECL_INCOMPLETE] declaration of v uses incomplete type struct t",
    );
    bad(
        "int pid;\nBEGIN { }",
        "1:5",
        "[D_DECL_IDRED] identifier redeclared: pid",
    );
    bad(
        "struct s { int a; };\nstruct s g;\nBEGIN { g.b = 1; }",
        "3:9",
        "[D_TYPE_MEMBER] b is not a member of struct s",
    );
    bad(
        "BEGIN { x = 1; x.a = 2; }",
        "1:16",
        "[D_OP_SOU] operator . must be applied to a struct or union, not int",
    );
    bad(
        "enum e { A = 1, B = 0x100000000 };\nBEGIN { }",
        "1:17",
        "[D_DECL_ENOFLOW] enumerator 'B' value overflows INT_MAX (2147483647)",
    );
    bad(
        "BEGIN { x = offsetof(int, a); }",
        "1:13",
        "[D_OFFSETOF_TYPE] offsetof operand must be a struct or union type, not int",
    );
}

#[test]
fn type_conflicts_are_errors() {
    bad(
        "BEGIN { x = (char *)arg0; }\nEND { x = 1; }",
        "2:11",
        "[D_OP_INCOMPAT] operands have incompatible types: \"char *\" = \"int\"",
    );
    bad(
        "BEGIN { x = 1; }\nEND { x = (char *)arg0; }",
        "2:11",
        "[D_OP_INCOMPAT] operands have incompatible types: \"int\" = \"char *\"",
    );
    bad(
        "BEGIN { this->s = \"a\"; this->s = 2; }",
        "1:34",
        "[D_OP_INCOMPAT] operands have incompatible types: \"string\" = \"int\"",
    );
    bad(
        "int x;\nBEGIN { x = execname; }",
        "2:13",
        "[D_OP_INCOMPAT] operands have incompatible types: \"int\" = \"string\"",
    );
}

#[test]
fn operator_errors() {
    bad(
        "BEGIN { x = 10 / (3 - 3); }",
        "1:18",
        "[D_DIV_ZERO] expression contains division by zero",
    );
    bad(
        "BEGIN { x = 10 % 0; }",
        "1:18",
        "[D_DIV_ZERO] expression contains division by zero",
    );
    bad(
        "BEGIN { printf(\"\"); }",
        "1:16",
        "[D_PRINTF_FMT_EMPTY] printf( ) format string is empty",
    );
    bad(
        "BEGIN { if (execname) { x = 1; } }",
        "1:13",
        "[D_OP_SCALAR] the condition of if must be of scalar type, not string",
    );
    bad(
        "BEGIN /execname/ { x = 1; }",
        "1:8",
        "[D_PRED_SCALAR] predicate result must be of scalar type, not string",
    );
    bad(
        "BEGIN { x = 1; x[1] = 2; }",
        "1:16",
        "[D_ARR_BADREF] x is a scalar at 1:9, an array here",
    );
    bad(
        "BEGIN { trace(undefined_thing); }",
        "1:15",
        "[D_IDENT_UNDEF] failed to resolve undefined_thing: it is never assigned or declared",
    );
    bad(
        "BEGIN { timestamp++; }",
        "1:9",
        "[D_OP_WRITE] operator requires a writable variable: timestamp is not one",
    );
}

#[test]
fn strings_in_every_storage_class() {
    let src = "string g; self string t; string a[int]; int n[string];\n\
        BEGIN { g = \"global\"; self->t = execname; this->l = \"local\"; a[1] = strjoin(g, \"!\");\n\
        n[\"k\"] = 3; n[g]++; b[execname, 2] = \"two\"; self->u = g;\n\
        printf(\"%s %s %s %s %d \", g, self->t, this->l, a[1], n[\"k\"]);\n\
        printf(\"%d %s %s [%s]\\n\", n[\"global\"], b[\"test\", 2], self->u, a[2]);\n\
        printf(\"%d %d %d\\n\", g == \"global\", g < \"h\", self->t != execname);\n\
        printf(\"%s\\n\", g == \"x\" ? \"yes\" : a[1]); @c[g, self->t] = count(); }";
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(
        s.printf_output(&p),
        "global test local global! 3 1 two global []\n1 1 0\nglobal!\n"
    );
}

#[test]
fn string_variables_are_truncated_to_strsize() {
    assert_eq!(
        run("#pragma D option strsize=5\nBEGIN { s = \"abc\"; s = strjoin(s, \"defgh\"); self->t = s; printf(\"%s %s %d\\n\", s, self->t, strlen(s)); }"),
        "abcde abcde 5\n"
    );
}

#[test]
fn string_types_learned_from_a_later_clause() {
    let p = c("END { printf(\"[%s]\\n\", name); } BEGIN { name = execname; }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::End,
            ..Firing::default()
        },
    );
    assert_eq!(s.printf_output(&p), "[test]\n");
}

#[test]
fn stack_arguments_errno_and_process_macros() {
    let p = c(
        "fbt::f:entry { printf(\"%d %d %d %d %d\\n\", arg5, arg6, arg9, errno, sizeof(arg7)); }",
    );
    let mut s = Sim::default();
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtEntry,
            func: "f".into(),
            args: [0, 0, 0, 0, 0, 5],
            stack_args: [6, 7, 8, 9],
            ..Firing::default()
        },
    );
    assert_eq!(s.printf_output(&p), "5 6 9 0 8\n");
    let o = CompileOptions::with_args("t.d", &["x".into()]).with_process_macros();
    assert_eq!(o.macros["pid"], std::process::id().to_string());
    let p = compile(
        "BEGIN { printf(\"%d %d %s\\n\", $pid, $ppid, $$1); }",
        "t.d",
        &o,
    )
    .unwrap();
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(
        s.printf_output(&p),
        format!(
            "{} {} x\n",
            std::process::id(),
            std::os::unix::process::parent_id()
        )
    );
}

#[test]
fn deep_or_huge_declarations_are_errors_not_crashes() {
    let stars = "*".repeat(50_000);
    let e = err(&format!("int {stars}p;\nBEGIN {{ }}"));
    assert!(e.msg.contains("nested more than"), "{e}");
    let ifs = "if (1) ".repeat(50_000);
    let e = err(&format!("BEGIN {{ {ifs} x = 1; }}"));
    assert!(e.msg.contains("nested more than"), "{e}");
    let mut nested = String::new();
    for i in 0..50_000 {
        nested.push_str(&format!("struct s{i} {{ "));
    }
    let e = err(&format!("{nested}\nBEGIN {{ }}"));
    assert!(e.msg.contains("nested more than"), "{e}");
    bad(
        "int a[100000000];\nBEGIN { }",
        "1:6",
        "[D_DECL_ARRBIG] array dimension 100000000 is too big (at most 16777216)",
    );
    bad(
        "struct s { int a[16777216]; int b[16777216][256]; };\nBEGIN { }",
        "1:33",
        "[D_DECL_ARRBIG] struct s is too big (more than 4294967296 bytes)",
    );
}

#[test]
fn address_of_kernel_memory() {
    let p = c("struct s { int a; long b; short arr[3]; };\n\
        fbt::f:entry { p = (struct s *)arg0; q = &p->arr[1]; printf(\"%d %d %d\\n\", (long)&p->b - arg0, (long)q - arg0, *q); }");
    let mut s = Sim::default();
    let mut mem = vec![0u8; 24];
    mem[18..20].copy_from_slice(&33i16.to_le_bytes());
    s.mem.push((0x2000, mem));
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtEntry,
            func: "f".into(),
            args: [0x2000, 0, 0, 0, 0, 0],
            ..Firing::default()
        },
    );
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "8 18 33\n");
    bad(
        "BEGIN { x = 1; y = &x; }",
        "1:20",
        "[D_ADDROF_VAR] cannot take address of dynamic variable",
    );
    bad(
        "BEGIN { y = &(1 + 2); }",
        "1:13",
        "[D_ADDROF_LVAL] unary & requires an lvalue as its operand",
    );
}

#[test]
fn a_variable_is_a_scalar_or_an_array() {
    bad(
        "BEGIN { self->a = 1; }\nEND { self->a[1] = 2; }",
        "2:7",
        "[D_ARR_BADREF] self->a is a scalar at 1:9, an array here",
    );
    bad(
        "BEGIN { self->a[\"k\"] = 1; trace(self->a); }",
        "1:33",
        "[D_ARR_BADREF] self->a is an array at 1:9, a scalar here",
    );
}

#[test]
fn structs_with_strings_and_struct_valued_arrays() {
    let src = "struct proc { string name; int n; };\n\
        struct proc g; struct proc a[string]; self struct proc t;\n\
        BEGIN { g.name = execname; g.n = 2; a[\"x\"] = g; a[\"x\"].n++; self->t = a[\"x\"];\n\
        this->p = self->t; printf(\"%s %d %s %d %s %d %d\\n\", g.name, g.n, a[\"x\"].name, a[\"x\"].n, \
        this->p.name, this->p.n, sizeof(struct proc)); }";
    assert_eq!(run(src), "test 2 test 3 test 3 260\n");
}

#[test]
fn comma_operator() {
    assert_eq!(
        run("BEGIN { x = (y = 3, y + 1); z = 1, w = 2; printf(\"%d %d %d %d\\n\", x, y, z, w); }"),
        "4 3 1 2\n"
    );
}

#[test]
fn multi_dimensional_arrays() {
    let src = "int m[2][3]; this int l[2][2];\n\
        BEGIN { i = 1; j = 2; m[i][j] = 5; m[0][1] = 7; m[i][j]++; this->l[1][0] = 4;\n\
        printf(\"%d %d %d %d %d %d\\n\", m[1][2], m[0][1], m[1][1], this->l[1][0], sizeof(m), sizeof(m[0])); }";
    assert_eq!(run(src), "6 7 0 4 24 12\n");
    let p = c("int m[2][3]; BEGIN { i = 3; m[0][i] = 1; }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults[0].1.kind, FaultKind::BadIndex(3));
}

#[test]
fn bit_fields() {
    let src =
        "struct f { unsigned int a : 3; int b : 4; unsigned char c; unsigned int d : 30; };\n\
        struct f g; this struct f l;\n\
        BEGIN { g.a = 9; g.b = 7; g.b++; g.d = 5; this->l = g; this->l.a--;\n\
        printf(\"%d %d %d %d %d\\n\", g.a, g.b, g.d, this->l.a, sizeof(struct f)); }";
    assert_eq!(run(src), "1 -8 5 0 8\n");
    // In kernel memory: a = 5 (bits 0-2), b = -3 (bits 3-6), c at byte 1, d at 4.
    let p = c(
        "struct f { unsigned int a : 3; int b : 4; unsigned char c; unsigned int d : 30; };\n\
        fbt::f:entry { p = (struct f *)arg0; printf(\"%d %d %d %d\\n\", p->a, p->b, p->c, p->d); }",
    );
    let mut s = Sim::default();
    let mut mem = vec![0u8; 8];
    let w: u32 = 5 | ((-3i32 as u32 & 0xf) << 3) | (200 << 8);
    mem[0..4].copy_from_slice(&w.to_le_bytes());
    mem[4..8].copy_from_slice(&0x2000_0001u32.to_le_bytes());
    s.mem.push((0x3000, mem));
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtEntry,
            func: "f".into(),
            args: [0x3000, 0, 0, 0, 0, 0],
            ..Firing::default()
        },
    );
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "5 -3 200 536870913\n");
    bad(
        "struct f { int a : 33; };\nBEGIN { }",
        "1:20",
        "[D_DECL_BFSIZE] bit-field too big for type: a",
    );
    bad(
        "struct f { string s : 3; };\nBEGIN { }",
        "1:19",
        "[D_DECL_BFTYPE] invalid type for bit-field: s",
    );
    bad(
        "struct f { int a : 3; };\nBEGIN { x = offsetof(struct f, a); }",
        "2:13",
        "[D_OFFSETOF_BITFIELD] cannot take offsetof of bit-field a",
    );
    bad(
        "struct f { int a : 3; };\nstruct f g;\nBEGIN { x = sizeof(g.a); }",
        "3:13",
        "[D_SIZEOF_BITFIELD] cannot apply sizeof to a bit-field",
    );
}

#[test]
fn char_arrays_in_memory_are_strings() {
    let p = c("struct task { int pid; char comm[8]; };\n\
        fbt::f:entry { t = (struct task *)arg0; printf(\"%s %d %d %c\\n\", t->comm, t->comm == \"bash\", strlen(t->comm), t->comm[1]);\n\
        self->name = t->comm; @[t->comm] = count(); }");
    let mut s = Sim::default();
    // A string is read up to its NUL or the end of its page.
    let mut mem = vec![0u8; 4096];
    mem[4..8].copy_from_slice(b"bash");
    s.mem.push((0x4000, mem));
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtEntry,
            func: "f".into(),
            args: [0x4000, 0, 0, 0, 0, 0],
            ..Firing::default()
        },
    );
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "bash 1 4 a\n");
}

#[test]
fn unassigned_this_string_is_empty() {
    assert_eq!(
        run("BEGIN { this->s = \"a\"; } BEGIN { printf(\"[%s] %d\\n\", this->s, this->s == \"\"); }"),
        "[] 1\n"
    );
}

#[test]
fn null_is_address_zero() {
    let out = run(r#"BEGIN {
        this->p = (char *)alloca(1);
        this->q = (int *)NULL;
        printf("%d %d %d %d\n", this->p != NULL, this->q == NULL, NULL, sizeof (NULL));
    }"#);
    assert_eq!(out, "1 1 0 4\n");
    // The Guide's badptr.d: reading through NULL is the runtime fault "invalid address".
    let p = c("BEGIN { x = (int *)NULL; y = *x; trace(y); }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults.len(), 1, "{:?}", s.faults);
    assert_eq!(s.faults[0].1.kind, FaultKind::BadAddr(0));
}

/// The D library's constants: fault types as the module reports them in ERROR's `arg4`,
/// process models and states, errno values and signals as the kernel's.
#[test]
fn d_library_constants() {
    let out = run(
        "BEGIN { printf(\"%d %d %d %d %d\\n\", DTRACEFLT_BADADDR, DTRACEFLT_DIVZERO,
        DTRACEFLT_NOSCRATCH, DTRACEFLT_UNKNOWN, DTRACEFLT_LIBRARY);
        printf(\"%d %d %d %d\\n\", PR_MODEL_ILP32, PR_MODEL_LP64, SSLEEP, SONPROC);
        printf(\"%d %d %d %d %d\\n\", EPERM, ENOENT, EAGAIN, EWOULDBLOCK, ENOTSUP);
        printf(\"%d %d %d %d\\n\", SIGHUP, SIGKILL, SIGTERM, SIGCHLD);
        printf(\"%d %d %d %d\\n\", CLD_EXITED, O_CREAT, AF_INET6, IPPROTO_TCP); }",
    );
    assert_eq!(
        out,
        "1 4 5 0 1000\n1 2 1 6\n1 2 11 11 95\n1 9 15 17\n1 64 10 6\n"
    );
    // A division by zero's ERROR says DTRACEFLT_DIVZERO.
    let p = c("int z; BEGIN { z = 1 / z; }
        ERROR { printf(\"%d\\n\", arg4 == DTRACEFLT_DIVZERO); }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.printf_output(&p), "1\n");
    bad(
        "BEGIN { EPERM = 2; }",
        "1:9",
        "[D_OP_WRITE] operator requires a writable variable: EPERM is not one",
    );
}
