//! `print()` and `tracemem()` compiled and run through the simulator: the layout of
//! Oracle's DTrace for typed objects, the hex dump for memory, and the argument errors.

mod support;

use support::{bad, err_at, run_begin};

const ADDR: &str = "0x";

/// `run_begin`'s output with the object's address replaced by `{ptr}`.
fn printed(src: &str) -> String {
    let out = run_begin(src);
    out.lines()
        .map(|l| match l.strip_suffix(" = *") {
            Some(a) if a.starts_with(ADDR) => "{ptr} = *".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const STRUCT: &str = r#"
struct inner { long e; unsigned int f; };
struct test_struct {
    int a;
    char b[5];
    union { unsigned char c; unsigned long d; } u;
    struct inner s;
    int g;
    int *p;
    int z;
};
"#;

#[test]
fn print_shows_a_struct_by_its_pointer() {
    let out = printed(&format!(
        r#"{STRUCT}
        BEGIN {{
            t = (struct test_struct *)alloca(sizeof (struct test_struct));
            t->a = 1;
            t->b[0] = 't'; t->b[1] = 'e'; t->b[2] = 's'; t->b[3] = 't';
            t->u.d = 123456789;
            t->s.e = -5;
            t->s.f = 987654321;
            t->g = -1;
            print(t);
        }}"#
    ));
    let i = |n: usize| " ".repeat(44 + n);
    let want = [
        "{ptr} = *".to_string(),
        format!("{}(struct test_struct) {{", i(0)),
        format!("{}.a = (int)1,", i(1)),
        format!("{}.b = (char [5]) [", i(1)),
        format!("{}(char)'t',", i(2)),
        format!("{}(char)'e',", i(2)),
        format!("{}(char)'s',", i(2)),
        format!("{}(char)'t',", i(2)),
        format!("{}],", i(1)),
        format!("{}.u = (union) {{", i(1)),
        format!("{}.c = (unsigned char)21,", i(2)),
        format!("{}.d = (unsigned long)123456789,", i(2)),
        format!("{}}},", i(1)),
        format!("{}.s = (struct inner) {{", i(1)),
        format!("{}.e = (long)-5,", i(2)),
        format!("{}.f = (unsigned int)987654321,", i(2)),
        format!("{}}},", i(1)),
        format!("{}.g = (int)-1,", i(1)),
        format!("{}}}", i(0)),
        String::new(),
    ]
    .join("\n");
    assert_eq!(out, want);
}

#[test]
fn print_leaves_out_zero_members_and_shows_arrays_of_integers_whole() {
    let out = printed(
        r#"struct s { int a; int v[3]; char name[4]; int *p; };
        BEGIN {
            t = (struct s *)alloca(sizeof (struct s));
            t->v[1] = 7;
            t->name[1] = 'x';
            print(t);
        }"#,
    );
    let i = |n: usize| " ".repeat(44 + n);
    let want = [
        "{ptr} = *".to_string(),
        format!("{}(struct s) {{", i(0)),
        format!("{}.v = (int [3]) [", i(1)),
        format!("{}(int)0,", i(2)),
        format!("{}(int)7,", i(2)),
        format!("{}(int)0,", i(2)),
        format!("{}],", i(1)),
        // Not all zero, but a string that ends at once.
        format!("{}.name = (char [4]) [", i(1)),
        format!("{}],", i(1)),
        format!("{}}}", i(0)),
        String::new(),
    ]
    .join("\n");
    assert_eq!(out, want);
}

#[test]
fn tracemem_dumps_bytes_bounded_by_the_dynamic_size() {
    let out = run_begin(
        r#"BEGIN {
            p = (char *)alloca(20);
            p[0] = 'h'; p[1] = 'i'; p[2] = 0; p[3] = 0x7f; p[17] = 'z';
            tracemem(p, 20);
            tracemem(p, 20, 4);
            tracemem(p, 20, -1);
            tracemem(p, 20, 0);
        }"#,
    );
    let head = "\n             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n";
    let full = format!(
        "{head}         0: 68 69 00 7f 00 00 00 00 00 00 00 00 00 00 00 00  hi..............\n        10: 00 7a 00 00                                      .z..\n"
    );
    let four = format!("{head}         0: 68 69 00 7f                                      hi..\n");
    assert_eq!(out, format!("{full}{four}{full}"));
}

#[test]
fn tracemem_takes_the_size_of_a_type() {
    let out = run_begin(
        r#"struct two { char a; char b; };
        BEGIN {
            p = (char *)alloca(2);
            p[0] = 'o'; p[1] = 'k';
            tracemem(p, sizeof (struct two));
        }"#,
    );
    assert!(
        out.ends_with("         0: 6f 6b                                            ok\n"),
        "{out}"
    );
}

#[test]
fn tracemem_and_print_check_their_arguments() {
    bad(
        "BEGIN { tracemem(0, 0); }",
        "1:21",
        "[D_TRACEMEM_SIZE] tracemem( ) argument #2 must be a non-zero positive integral constant expression",
    );
    bad(
        "BEGIN { tracemem(0, this->n); }",
        "1:21",
        "[D_TRACEMEM_SIZE] tracemem( ) argument #2 must be a non-zero positive integral constant expression",
    );
    bad(
        r#"BEGIN { tracemem("a", 4); }"#,
        "1:18",
        "[D_TRACEMEM_ADDR] tracemem( ) argument #1 is incorrect type: string",
    );
    bad(
        r#"BEGIN { tracemem(0, 4, "x"); }"#,
        "1:24",
        "[D_TRACEMEM_DSIZE] tracemem( ) dynamic size (argument #3) must be of scalar type",
    );
    let (_, m) = err_at("BEGIN { tracemem(0, 100000); }");
    assert!(m.contains("do not fit a record"), "{m}");
    bad(
        "BEGIN { print(1); }",
        "1:15",
        "[D_PROTO_ARG] print( ) argument #1 is incompatible with prototype:\n\tprototype: void *\n\t argument: int",
    );
    bad(
        "BEGIN { print(); }",
        "1:9",
        "[D_PROTO_LEN] print( ) prototype mismatch: 0 args passed, 1 expected",
    );
}

/// `trace()` of a struct or union traces its bytes, shown as tracemem() shows them, as
/// DTrace does: global, thread-local and clause-local objects alike.
#[test]
fn trace_of_a_struct_is_its_bytes() {
    let head = "\n             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n";
    let row = "         0: 34 12 00 00 00 00 00 00 76 98 00 00              4.......v...\n";
    for (decl, obj) in [
        ("struct { int a; char b; int c; } st;", "st"),
        ("self struct { int a; char b; int c; } st;", "self->st"),
        ("this struct { int a; char b; int c; } st;", "this->st"),
    ] {
        let out = run_begin(&format!(
            "{decl}\nBEGIN {{ {obj}.a = 0x1234; {obj}.b = 0; {obj}.c = 0x9876; trace({obj}); }}"
        ));
        assert_eq!(out, format!("{head}{row}"), "{decl}");
    }
    // One in memory is read where it is, arrays and all.
    let out = run_begin(
        "struct s { int a; char b[4]; };\nBEGIN { this->p = (struct s *)alloca(8); this->p->a = 0x1234; this->p->b[0] = 'x'; trace(*this->p); }",
    );
    assert_eq!(
        out,
        format!("{head}         0: 34 12 00 00 78 00 00 00                          4...x...\n")
    );
    let out = run_begin("union { int i; char c[2]; } u;\nBEGIN { u.i = 0x4142; trace(u); }");
    assert_eq!(
        out,
        format!("{head}         0: 42 41 00 00                                      BA..\n")
    );
}
