//! Top-level declarations as DTrace takes them: enums with explicit and implicit values,
//! typedefs of them, variables of each class, arrays with bounds and inlines, and the
//! errors of wrong ones (tag, line and column); run through the real interpreter with the
//! simulated environment.

mod support;

use support::{bad, c, run_begin as run};

#[test]
fn enums_count_on_from_the_last_value() {
    let src = r#"enum colors { RED, ORANGE = 5 + 5, YELLOW = 2, GREEN, BLUE = GREEN + ORANGE,
        PINK = 5 / 4, INDIGO = -2, VIOLET };
        BEGIN { printf("%d %d %d %d %d %d %d %d\n", RED, ORANGE, YELLOW, GREEN, BLUE, PINK,
            INDIGO, VIOLET); }"#;
    assert_eq!(run(src), "0 10 2 3 13 1 -2 -1\n");
}

#[test]
fn enum_values_in_expressions_variables_and_typedefs() {
    let src = r#"enum color { RED, GREEN = 5, BLUE };
        typedef enum color color_t;
        typedef enum { LOW = 1, HIGH = 10 } level_t;
        color_t c; level_t l; enum color k;
        BEGIN {
            c = BLUE; l = HIGH; k = GREEN;
            printf("%d %d %d %d %d\n", c, l, k, sizeof(c), sizeof(level_t));
            printf("%s %s\n", c == BLUE ? "blue" : "other", k == RED ? "red" : k == GREEN ? "green" : "other");
            printf("%d %d %d\n", BLUE + 1, (enum color)6 == BLUE, l > c);
        }"#;
    assert_eq!(run(src), "6 10 5 4 4\nblue green\n7 1 1\n");
}

#[test]
fn every_top_level_declaration_form() {
    let src = r#"int x; self int y; this int z; int a[5]; uint64_t big[2]; string s;
        inline int N = 3;
        inline int M = N * 2 + 1;
        inline string NAME = "oxtrace";
        inline uint64_t ALL = (uint64_t)-1;
        BEGIN {
            x = N; self->y = M; this->z = x + self->y; a[4] = this->z; big[1] = ALL;
            s = NAME;
            printf("%d %d %d %d %u %s %d\n", x, self->y, this->z, a[4], big[1], s, a[0]);
            printf("%d %d %d\n", sizeof(a), sizeof(big), sizeof(M));
        }"#;
    assert_eq!(
        run(src),
        "3 7 10 10 18446744073709551615 oxtrace 0\n20 16 4\n"
    );
}

#[test]
fn wrong_enums() {
    bad(
        "enum colors { RED, GREEN, GREEN = 2 };\nBEGIN { }",
        "1:27",
        "[D_UNKNOWN] failed to define enumerator 'GREEN': Duplicate member or variable name",
    );
    bad(
        "enum colors { RED };\nenum shades { RED };\nBEGIN { }",
        "2:15",
        "[D_DECL_IDRED] identifier redeclared: RED",
    );
    bad(
        "enum e { A };\nenum e { B };\nBEGIN { }",
        "2:10",
        "[D_DECL_TYPERED] type redeclared: enum e",
    );
    bad(
        "enum e {\n\ttoobig = 2147483648\n};",
        "2:2",
        "[D_DECL_ENOFLOW] enumerator 'toobig' value overflows INT_MAX (2147483647)",
    );
    bad(
        "enum e { TAG = \"not an integer\" };",
        "1:16",
        "[D_DECL_ENCONST] enumerator 'TAG' must be assigned an integral constant expression",
    );
    bad(
        "BEGIN { x = (enum nosuch)1; }",
        "1:13",
        "[D_TYPE_ERR] enum nosuch is not defined",
    );
}

#[test]
fn wrong_declarations_are_reported_before_a_missing_clause() {
    // A file of declarations only reports its wrong declaration, as DTrace does.
    bad(
        "inline int i = \"i am a string\";",
        "1:16",
        "[D_OP_INCOMPAT] inline i definition uses incompatible types: \"int\" = \"string\"",
    );
    bad(
        "inline int foo = foo + 3;",
        "1:18",
        "[D_IDENT_UNDEF] failed to resolve foo: it is never assigned or declared",
    );
    bad("int x;", "1:7", "the program has no probe clause");
}

#[test]
fn wrong_variable_declarations() {
    bad(
        "int x; char x;\nBEGIN { }",
        "1:13",
        "[D_DECL_IDRED] identifier redeclared: x (was int, now char)",
    );
    bad(
        "void v;\nBEGIN { }",
        "1:6",
        "[D_DECL_VOIDOBJ] cannot have void object: v",
    );
    bad(
        "int a[0];\nBEGIN { }",
        "1:6",
        "[D_DECL_ARRBIG] array dimension must be positive",
    );
    bad(
        "int a[5];\nBEGIN { a[5] = 1; }",
        "2:11",
        "[D_ARR_BOUNDS] index 5 is out of bounds of an array of 5 elements",
    );
    bad(
        "inline int N = 3;\nBEGIN { N = 4; }",
        "2:9",
        "[D_OP_WRITE] inline N cannot be assigned",
    );
    bad(
        "inline int N = 3;\ninline int N = 4;\nBEGIN { }",
        "2:12",
        "[D_DECL_IDRED] identifier redeclared: N",
    );
    bad(
        "int x;\nBEGIN { x = \"s\"; }",
        "2:13",
        "[D_OP_INCOMPAT] operands have incompatible types: \"int\" = \"string\"",
    );
}

#[test]
fn anonymous_structs_and_unions() {
    // In declarations, typedefs, nested as members and arrays of them; sizeof and
    // offsetof; a pointer to one over scratch memory.
    let src = r#"struct { int a; long b; } g;
        typedef struct { char c; int i; } ci_t;
        struct outer { int k; struct { short s; char t; } in; union { int i; char c[8]; } u;
            struct { int z; } arr[3]; };
        ci_t x; struct outer o;
        BEGIN {
            g.a = 1; g.b = 2; x.c = 'a'; x.i = 7; o.in.s = 3; o.u.i = 5; o.arr[2].z = 9;
            printf("%d %d %d %c %d %d %d\n", g.a, g.b, sizeof(g), x.c, x.i, sizeof(ci_t),
                offsetof(ci_t, i));
            printf("%d %d %d %d %d %d %d\n", o.in.s, o.u.i, o.arr[2].z, sizeof(struct outer),
                offsetof(struct outer, u), offsetof(struct outer, arr), sizeof(o.in));
            this->p = (ci_t *)alloca(sizeof(ci_t)); this->p->i = 42;
            printf("%d\n", this->p->i);
        }"#;
    assert_eq!(run(src), "1 2 16 a 7 8 4\n3 5 9 28 8 16 4\n42\n");
    // Each is a type of its own, named as DTrace names it.
    bad(
        "struct { int a; } x; struct { int a; } y;\nBEGIN { x = y; }",
        "2:13",
        "[D_OP_INCOMPAT] operands have incompatible types: \"struct (anon)\" = \"struct (anon)\"",
    );
    bad(
        "struct { int a; } g;\nBEGIN { g.nosuch = 1; }",
        "2:9",
        "[D_TYPE_MEMBER] nosuch is not a member of struct (anon)",
    );
}

#[test]
fn bit_fields_and_their_errors() {
    // Unnamed bit-fields: a 0-wide one ends its storage unit; neither aligns the struct
    // (GCC's x86-64 layout: sizes 5 and 3).
    let src = r#"struct s { char a : 3; int : 0; char b : 2; unsigned : 4; char c : 1; };
        struct t { char a; int : 4; char b; };
        self struct { int a : 3; unsigned b : 5; } bf;
        BEGIN { self->bf.a = 3; self->bf.b = 31; self->bf.b++;
            printf("%d %d %d %d\n", sizeof(struct s), sizeof(struct t), self->bf.a, self->bf.b); }"#;
    assert_eq!(run(src), "5 3 3 0\n");
    bad(
        "struct s { int a : 1; int b : 0; };",
        "1:31",
        "[D_DECL_BFCONST] positive integral constant expression expected as bit-field size",
    );
    bad(
        "struct s { int a : -3; };",
        "1:20",
        "[D_DECL_BFCONST] positive integral constant expression expected as bit-field size",
    );
    bad(
        "struct s { short a : 17; };",
        "1:22",
        "[D_DECL_BFSIZE] bit-field too big for type: a",
    );
    bad(
        "struct s { float : 1; };",
        "1:18",
        "[D_DECL_BFTYPE] invalid type for bit-field: (anon)",
    );
}

#[test]
fn storing_zero_deletes_a_dynamic_struct() {
    // As a dynamic scalar: `a[k] = 0` and `self->s = 0` delete the struct, member by member;
    // the others stay.
    let src = r#"this struct { int a; long b; } val;
        this union { int a; char c; } u;
        BEGIN {
            this->val.a = 1; this->val.b = 10; a[1] = this->val;
            this->val.a = 2; this->val.b = 20; a[2] = this->val; self->s = this->val;
            this->u.a = 7; self->u = this->u;
            a[1] = 0; self->s = 0; self->u = 0;
            printf("%d %d %d %d %d %d %d\n", a[1].a, a[1].b, a[2].a, a[2].b, self->s.a,
                self->s.b, self->u.a);
        }"#;
    assert_eq!(run(src), "0 0 2 20 0 0 0\n");
    bad(
        "this struct { int a; } v; BEGIN { g = this->v; g = 0; }",
        "1:52",
        "[D_OP_INCOMPAT] operands have incompatible types: \"struct (anon)\" = \"int\"",
    );
    // An array member cannot be given 0: such a struct is not deleted member by member.
    bad(
        "this struct { int n[2]; } v; BEGIN { self->s = this->v; self->s = 0; }",
        "1:67",
        "[D_OP_INCOMPAT] operands have incompatible types: \"struct (anon)\" = \"int\"",
    );
}

#[test]
fn a_thread_local_array_of_pointers_stays_an_array() {
    // The values' type, a pointer, is learned in a later round: `self->x[k]` still names an
    // element, not a subscript of the pointer.
    c(
        "syscall::read:entry { self->x[1] = (int *)arg1; self->x[2] = (int *)arg2; }
       syscall::read:return /self->x[1]/ { trace(*self->x[1]); self->x[1] = 0; }",
    );
    bad(
        "BEGIN { self->x[1] = (int *)arg0; self->x[2] = 3; }",
        "1:48",
        "[D_OP_INCOMPAT] operands have incompatible types: \"int *\" = \"int\"",
    );
    // A pointer used as one is subscripted as before.
    c("BEGIN { self->p = (int *)arg0; trace(self->p[1]); }");
}
