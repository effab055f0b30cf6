//! Pointers to D objects, compiled and run through the simulator: `&` of the members and
//! elements of clause-local struct and array variables, pointer arithmetic and comparison
//! over them, stores and loads through them, an array used as a pointer; out-of-bounds
//! accesses as runtime faults; what DTrace refuses at compile time.

mod support;

use oxtrace::runtime::sim::{Firing, Sim};
use oxtrace_core::action::FaultKind;
use support::{bad, c, run_begin};

const S: &str = "struct st { int a; char c; long b[3]; };\n";

#[test]
fn address_of_members_and_elements_of_a_local_struct() {
    let out = run_begin(&format!(
        "{S}this struct st s;
        BEGIN {{
            this->s.a = 7;
            this->s.b[1] = 40;
            this->pa = &this->s.a;
            *this->pa += 1;
            this->pb = &this->s.b[0];
            this->pb[2] = 5;
            *(this->pb + 1) += 2;
            printf(\"%d %d %d\\n\", this->s.a, this->s.b[1], this->s.b[2]);
            printf(\"%d %d\\n\", *this->pa, this->pb[1]);
            printf(\"%d %d\\n\", &this->s.b[2] - this->pb, (long)&this->s.b[0] - (long)&this->s.a);
        }}"
    ));
    assert_eq!(out, "8 42 5\n8 42\n2 8\n");
}

#[test]
fn local_array_as_a_pointer_and_pointer_comparisons() {
    let out = run_begin(
        "this int a[5];
        BEGIN {
            this->a[0] = 100; this->a[3] = 400;
            this->p = this->a;
            this->q = &this->a[3];
            this->p[1] = 200;
            printf(\"%d %d %d\\n\", this->p[0], this->a[1], *this->q);
            printf(\"%d %d %d %d\\n\", this->q > this->p, this->q == this->p + 3,
                this->p != this->q, this->q - this->p);
            this->i = 4;
            this->a[this->i] = 5;
            printf(\"%d\\n\", this->p[this->i]);
        }",
    );
    assert_eq!(out, "100 200 400\n1 1 1 3\n5\n");
}

#[test]
fn struct_copies_in_and_out_of_memory() {
    let out = run_begin(&format!(
        "{S}this struct st s; this struct st t;
        BEGIN {{
            this->s.a = 3; this->s.c = 'x'; this->s.b[2] = 9;
            this->p = &this->s.a;
            this->t = this->s;
            this->s.a = 4;
            printf(\"%d %c %d %d\\n\", this->t.a, this->t.c, this->t.b[2], *this->p);
            this->ps = (struct st *)&this->t.a;
            this->ps->b[0] = 11;
            printf(\"%d %d\\n\", this->t.b[0], this->ps->a);
        }}"
    ));
    assert_eq!(out, "3 x 9 4\n11 3\n");
}

#[test]
fn memory_lives_for_the_clause_and_predicate() {
    let out = run_begin(
        "this int a[2];
        BEGIN /(this->p = &this->a[1]) != 0 && (*this->p = 6) == 6/ { printf(\"%d\\n\", this->a[1]); }
        BEGIN { printf(\"%d\\n\", this->a[1]); }",
    );
    assert_eq!(out, "6\n0\n");
}

/// Runs BEGIN of `src` and returns the one fault it must raise.
fn fault(src: &str) -> FaultKind {
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults.len(), 1, "{src}: {:?}", s.faults);
    assert!(s.printf_output(&p).is_empty(), "{src}: the clause went on");
    s.faults[0].1.kind
}

#[test]
fn out_of_bounds_accesses_are_runtime_faults() {
    // A store past the object and past what the clause allocated.
    let k = fault("this int a[2]; BEGIN { this->p = &this->a[1]; this->p[1] = 1; printf(\"x\"); }");
    assert!(matches!(k, FaultKind::BadAddr(_)), "{k:?}");
    let k =
        fault("this int a[2]; BEGIN { this->p = &this->a[0]; *(this->p - 1) = 1; printf(\"x\"); }");
    assert!(matches!(k, FaultKind::BadAddr(_)), "{k:?}");
    // A variable subscript out of the array's bounds.
    assert_eq!(
        fault("this int a[2]; BEGIN { this->i = 2; this->a[this->i] = 1; printf(\"x\"); }"),
        FaultKind::BadIndex(2)
    );
    assert_eq!(
        fault("this int a[2]; BEGIN { this->p = this->a; this->i = 3; trace(this->a[this->i]); printf(\"x\"); }"),
        FaultKind::BadIndex(3)
    );
}

#[test]
fn the_variable_itself_has_no_address_as_in_dtrace() {
    bad(
        "int i; BEGIN { i = 1; p = &i; }",
        "1:27",
        "[D_ADDROF_VAR] cannot take address of dynamic variable",
    );
    bad(
        "this int a[2]; BEGIN { this->p = &this->a; }",
        "1:34",
        "[D_ADDROF_VAR] cannot take address of dynamic variable",
    );
    bad(
        "BEGIN { self->x = 1; trace(&self->x); }",
        "1:28",
        "[D_ADDROF_VAR] cannot take address of dynamic variable",
    );
    bad(
        "BEGIN { a[\"k\"] = 1; trace(&a[\"k\"]); }",
        "1:27",
        "[D_ADDROF_VAR] cannot take address of dynamic variable",
    );
    bad(
        "BEGIN { @a = count(); trace(&@a); }",
        "1:29",
        "[D_ADDROF_VAR] cannot take address of dynamic variable",
    );
}
