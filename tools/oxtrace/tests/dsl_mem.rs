//! Scratch memory compiled and run through the simulator: `alloca()`, `copyin()`,
//! `copyinto()`, `bcopy()`, stores through D pointers, `uregs[]`, `copyout()`; their runtime
//! faults and their compile errors with `line:column`.

mod support;

use oxtrace::runtime::sim::{Firing, Sim};
use oxtrace_core::action::FaultKind;
use support::{c, err_at};

/// Runs BEGIN of `src` with user memory `user` at 0x7000; returns the sim.
fn run(src: &str, user: &[u8]) -> (Sim, String) {
    let p = c(src);
    let mut s = Sim::default();
    s.user_mem.push((0x7000, user.to_vec()));
    s.fire(&p, &Firing::default());
    let out = s.printf_output(&p);
    (s, out)
}

fn ok(src: &str, user: &[u8]) -> String {
    let (s, out) = run(src, user);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    out
}

/// A user `struct foo { int a; short b; char name[6]; long c; }` at 0x7000.
fn foo_bytes() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(7i32.to_le_bytes());
    b.extend((-2i16).to_le_bytes());
    b.extend(*b"oxt\0\0\0");
    b.extend([0u8; 4]);
    b.extend(0x1122_3344_5566_7788u64.to_le_bytes());
    b
}

const FOO: &str = "struct foo { int a; short b; char name[6]; long c; };\n";

#[test]
fn copyin_cast_to_a_struct_reads_its_members() {
    let out = ok(
        &format!(
            "{FOO}BEGIN {{ this->f = (struct foo *)copyin(0x7000, sizeof(struct foo));
            printf(\"%d %d %s %x\\n\", this->f->a, this->f->b, stringof(this->f->name), this->f->c);
            printf(\"%d\\n\", ((struct foo *)copyin(0x7000, sizeof (struct foo)))->a); }}"
        ),
        &foo_bytes(),
    );
    assert_eq!(out, "7 -2 oxt 1122334455667788\n7\n");
}

#[test]
fn stores_through_scratch_pointers_with_incdec_and_compound() {
    let out = ok(
        r#"BEGIN {
            this->p = (int *)alloca(4 * sizeof (int));
            this->p[0] = 10; this->p[1] = 20; *(this->p + 2) = 30; this->p[3] = -1;
            this->p[0]++; ++this->p[1]; this->p[2] -= 5; this->p[3] *= 7; this->p[1]--;
            printf("%d %d %d %d\n", this->p[0], this->p[1], this->p[2], this->p[3]);
            this->c = (char *)this->p;
            this->c[0] = 'h'; this->c[1] = 'i'; this->c[2] = 0;
            printf("%s\n", stringof(this->c));
        }"#,
        &[],
    );
    assert_eq!(out, "11 20 25 -7\nhi\n");
}

#[test]
fn member_stores_into_a_copied_in_struct() {
    let out = ok(
        &format!(
            "{FOO}BEGIN {{ this->f = (struct foo *)copyin(0x7000, sizeof (struct foo));
            this->f->a += 5; this->f->b = 300; this->f->c++; this->f->name[0] = 'O';
            printf(\"%d %d %s %x\\n\", this->f->a, this->f->b, stringof(this->f->name), this->f->c); }}"
        ),
        &foo_bytes(),
    );
    assert_eq!(out, "12 300 Oxt 1122334455667789\n");
}

#[test]
fn bcopy_and_copyinto_fill_scratch() {
    let out = ok(
        r#"BEGIN {
            this->a = (char *)alloca(8);
            copyinto(0x7000, 5, this->a);
            this->b = (char *)alloca(8);
            bcopy(this->a, this->b, 6);
            this->b[0] = 'j';
            printf("%s %s\n", stringof(this->a), stringof(this->b));
        }"#,
        b"hello\0",
    );
    assert_eq!(out, "hello jello\n");
}

#[test]
fn bcopy_takes_a_string_as_its_bytes_then_nuls() {
    let out = ok(
        r#"BEGIN {
            this->a = (char *)alloca(8);
            this->a[5] = 'x';
            bcopy("hello", this->a, 3);
            this->b = (char *)alloca(8);
            this->b[0] = 'x'; this->b[1] = 'y'; this->b[2] = 'z';
            bcopy(probename, this->b, 8);
            this->c = (char *)alloca(4);
            this->s = "ab";
            this->c[3] = 'q';
            bcopy(this->s, this->c, 3);
            printf("%s %s %s %d\n", stringof(this->a), stringof(this->b), stringof(this->c),
                this->c[3]);
        }"#,
        b"",
    );
    assert_eq!(out, "hel BEGIN ab 113\n");
}

#[test]
fn alloca_is_aligned_zeroed_and_freed_at_the_clause_end() {
    // Two clauses each take all 256 bytes: the first's are freed when it ends. Objects are
    // 8-byte aligned, each after an 8-byte header of its own.
    let out = ok(
        r#"BEGIN { this->p = (long *)alloca(1); this->q = (long *)alloca(8);
                   printf("%d %d %d\n", (long)this->q & 7, *this->q, (long)this->q - (long)this->p); }
           BEGIN { this->r = (char *)alloca(256); this->r[255] = 1; printf("%d\n", this->r[255]); }
           BEGIN { this->s = (char *)alloca(256); printf("%d\n", this->s[255]); }"#,
        &[],
    );
    assert_eq!(out, "0 0 16\n1\n0\n");
}

#[test]
fn runtime_faults_are_counted_never_taken() {
    // `None`: an invalid address somewhere in the scratch.
    let cases: &[(&str, Option<FaultKind>)] = &[
        // Exhaustion: 200 + 200 bytes of a 256-byte scratchsize.
        (
            "BEGIN { this->a = alloca(200); this->b = alloca(200); trace(1); }",
            Some(FaultKind::ScratchExhausted),
        ),
        // A size only known at run time.
        (
            "BEGIN { this->n = 1000; trace((long)alloca(this->n)); }",
            Some(FaultKind::ScratchExhausted),
        ),
        // An unmapped user address.
        (
            "BEGIN { trace((long)copyin(0x9000, 4)); }",
            Some(FaultKind::BadAddr(0x9000)),
        ),
        (
            "BEGIN { trace(copyinstr(0x9100)); }",
            Some(FaultKind::BadAddr(0x9100)),
        ),
        // A store through a pointer the compiler cannot see is kernel memory.
        (
            "BEGIN { this->p = (int *)0x5000; *this->p = 1; }",
            Some(FaultKind::BadAddr(0x5000)),
        ),
        // A store past what the clause allocated.
        (
            "BEGIN { this->p = (int *)alloca(4); this->p[1] = 1; }",
            None,
        ),
        (
            "BEGIN { this->d = 0x6000; bcopy(0x7000, (void *)this->d, 4); }",
            Some(FaultKind::BadAddr(0x6000)),
        ),
    ];
    for (src, want) in cases {
        let (s, out) = run(src, b"abcd");
        assert_eq!(s.faults.len(), 1, "{src}: {:?}", s.faults);
        let got = s.faults[0].1.kind;
        match want {
            Some(w) => assert_eq!(*w, got, "{src}"),
            None => assert!(matches!(got, FaultKind::BadAddr(_)), "{src}: {got:?}"),
        }
        assert!(
            s.records.is_empty() && out.is_empty(),
            "{src}: the clause went on"
        );
    }
}

#[test]
fn scratchsize_option_bounds_alloca() {
    let out = ok(
        "#pragma D option scratchsize=1k\nBEGIN { this->a = alloca(1000); trace(1); }",
        &[],
    );
    assert_eq!(out, "");
    let (s, _) = run(
        "#pragma D option scratchsize=64\nBEGIN { this->a = alloca(60); this->b = alloca(8); }",
        &[],
    );
    assert_eq!(s.faults[0].1.kind, FaultKind::ScratchExhausted);
}

#[test]
fn uregs_reads_the_user_registers() {
    let p =
        c(r#"BEGIN { printf("%x %x %d %d\n", uregs[R_PC], uregs[R_FP], uregs[R_RAX], R_SP); }"#);
    let mut s = Sim::default();
    let f = Firing {
        uregs: Some((0x401000, 0x7ffd0000)),
        ..Firing::default()
    };
    s.fire(&p, &f);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "401000 7ffd0000 0 19\n");
    // A kernel thread: 0.
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.printf_output(&p), "0 0 0 19\n");
}

#[test]
fn compile_errors_name_the_line_and_column() {
    for (src, pos, msg) in [
        (
            "BEGIN {\n  *(int *)arg0 = 1;\n}",
            "2:3",
            "cannot store to kernel memory through arg0",
        ),
        (
            "struct foo { int a; };\nBEGIN {\n  ((struct foo *)curthread)->a++;\n}",
            "3:3",
            "cannot store to kernel memory through curthread",
        ),
        (
            "BEGIN {\n  this->p = alloca(-1);\n}",
            "2:20",
            "must not be negative: -1",
        ),
        (
            "BEGIN {\n  this->p = alloca(4096);\n}",
            "2:20",
            "size 4096 exceeds the scratch memory of a clause (scratchsize=256)",
        ),
        (
            "BEGIN {\n  this->p = copyin(arg0, 300);\n}",
            "2:26",
            "copyin() size 300 exceeds",
        ),
        (
            "BEGIN {\n  bcopy(arg1, (void *)arg0, 4);\n}",
            "2:15",
            "bcopy() writes only to scratch memory (alloca(), copyin()), not through arg0",
        ),
        (
            "BEGIN {\n  bcopy(arg1, arg0, 4);\n}",
            "2:15",
            "[D_PROTO_ARG] bcopy( ) argument #2 requires a pointer, not int64_t",
        ),
        ("BEGIN {\n  x = alloca(1, 2);\n}", "2:7", "alloca"),
        (
            "BEGIN {\n  this->p = alloca(\"x\");\n}",
            "2:20",
            "[D_PROTO_ARG] alloca( ) argument #1 requires an integer, not string",
        ),
        (
            "BEGIN {\n  this->p = alloca(8);\n  *this->p = 1;\n}",
            "3:3",
            "cannot dereference a void pointer",
        ),
        (
            "BEGIN {\n  trace(uregs[30]);\n}",
            "2:15",
            "uregs[] index 30 is not a register",
        ),
        (
            "BEGIN {\n  i = R_SP;\n  trace(uregs[i]);\n}",
            "3:15",
            "[D_PROTO_ARG] uregs[ ] index must be an integer constant (R_PC, R_SP, ...), not an expression computed when the probe fires",
        ),
        (
            "BEGIN {\n  x = bcopy(0, (void *)alloca(1), 1);\n}",
            "2:7",
            "void",
        ),
    ] {
        let (p, m) = err_at(src);
        assert!(m.contains(msg), "{src}: {m}");
        assert_eq!(p, pos, "{src}: {m}");
    }
}

#[test]
fn pointer_difference_counts_elements() {
    let out = ok(
        r#"struct pair { int a; long b; };
        BEGIN {
            this->p = (long *)alloca(8 * sizeof (long));
            this->q = this->p + 5;
            this->s = (struct pair *)alloca(4 * sizeof (struct pair));
            this->c = (char *)this->p;
            printf("%d %d %d %d %d\n", this->q - this->p, this->p - this->q,
                (this->s + 3) - this->s, (this->c + 7) - this->c, sizeof (this->q - this->p));
        }"#,
        &[],
    );
    assert_eq!(out, "5 -5 3 7 8\n");
}

#[test]
fn pointer_difference_of_other_types_is_refused() {
    let (p, m) = err_at(
        "BEGIN {\n  this->p = (long *)alloca(8);\n  this->c = (char *)this->p;\n  trace(this->p - this->c);\n}",
    );
    assert!(
        m.contains("D_OP_INCOMPAT") && m.contains("\"int64_t *\" - \"char *\""),
        "{m}"
    );
    assert_eq!(p, "4:9");
}

#[test]
fn bit_field_stores_through_scratch_pointers() {
    let out = ok(
        r#"struct bf { unsigned int a:3; unsigned int b:5; int c:4; unsigned int rest:20; };
        BEGIN {
            this->p = (struct bf *)alloca(sizeof (struct bf));
            *(uint32_t *)this->p = 0;
            this->p->rest = 0xfffff;
            this->p->a = 5; this->p->b = 33; this->p->c = -3;
            printf("%d %d %d %x %x\n", this->p->a, this->p->b, this->p->c, this->p->rest,
                *(uint32_t *)this->p);
            this->x = (this->p->a = 9);
            this->p->b += 2;
            this->p->c++;
            printf("%d %d %d %d %x\n", this->x, this->p->a, this->p->b, this->p->c,
                *(uint32_t *)this->p);
        }"#,
        &[],
    );
    assert_eq!(out, "5 1 -3 fffff fffffd0d\n1 1 3 -2 fffffe19\n");
}

#[test]
fn whole_struct_stores_through_scratch_pointers() {
    let out = ok(
        &format!(
            "{FOO}struct foo v;
        BEGIN {{
            this->f = (struct foo *)copyin(0x7000, sizeof (struct foo));
            this->g = (struct foo *)alloca(sizeof (struct foo));
            *this->g = *this->f;
            printf(\"%d %d %s %x\\n\", this->g->a, this->g->b, stringof(this->g->name), this->g->c);
            v.a = 41; v.b = 3; v.c = 9;
            *this->g = v;
            printf(\"%d %d %s %x\\n\", this->g->a, this->g->b, stringof(this->g->name), this->g->c);
            v = *this->f;
            printf(\"%d %d %x\\n\", v.a, v.b, v.c);
        }}"
        ),
        &foo_bytes(),
    );
    assert_eq!(
        out,
        "7 -2 oxt 1122334455667788\n41 3 oxt 9\n7 -2 1122334455667788\n"
    );
}

#[test]
fn whole_struct_store_outside_scratch_is_refused_or_faults() {
    // Provably kernel memory: refused at compile time.
    let (p, m) = err_at(&format!(
        "{FOO}BEGIN {{\n  this->f = (struct foo *)alloca(sizeof (struct foo));\n  *(struct foo *)arg0 = *this->f;\n}}"
    ));
    assert!(m.contains("D_OP_WRITE"), "{m}");
    assert_eq!(p, "4:3");
    // Not provably: the kernel's check makes it "invalid address".
    let (s, _) = run(
        &format!(
            "{FOO}BEGIN {{ this->f = (struct foo *)alloca(sizeof (struct foo));
            this->x = (struct foo *)(this->f + 100); *this->x = *this->f; }}"
        ),
        &[],
    );
    assert_eq!(s.faults.len(), 1, "{:?}", s.faults);
    assert!(
        matches!(s.faults[0].1.kind, FaultKind::BadAddr(_)),
        "{:?}",
        s.faults
    );
}

#[test]
fn string_stores_into_char_arrays_truncate_like_dtrace() {
    // `name` is char[6]: at most 5 bytes, then a NUL; the byte after it stays.
    let out = ok(
        &format!(
            "{FOO}BEGIN {{
            this->f = (struct foo *)alloca(sizeof (struct foo));
            this->f->c = -1;
            this->f->name = \"abc\";
            printf(\"%s|%s|%d\\n\", stringof(this->f->name), this->f->name, this->f->name[4]);
            this->f->name = \"abcdefgh\";
            printf(\"%s|%d|%x\\n\", stringof(this->f->name), this->f->name[5], this->f->c);
            this->f->name = execname;
            this->s = (this->f->name = strjoin(\"x\", \"yz\"));
            printf(\"%s %s %d\\n\", this->f->name, this->s, strlen(this->f->name));
            this->f->name = \"\";
            printf(\"[%s] %d\\n\", this->f->name, this->f->name[1]);
        }}"
        ),
        &[],
    );
    assert_eq!(
        out,
        "abc|abc|0\nabcde|0|ffffffffffffffff\nxyz xyz 3\n[] 0\n"
    );
}

#[test]
fn string_stores_of_execname_and_into_copied_in_structs() {
    let out = ok(
        &format!(
            "{FOO}BEGIN {{
            this->f = (struct foo *)copyin(0x7000, sizeof (struct foo));
            this->f->name = execname;
            printf(\"%d %d %s %x\\n\", this->f->a, this->f->b, this->f->name, this->f->c);
        }}"
        ),
        &foo_bytes(),
    );
    assert_eq!(out, "7 -2 test 1122334455667788\n");
}

#[test]
fn string_members_in_scratch_are_stored_and_read_as_strings() {
    // A `string` member holds `strsize` bytes in place: at most strsize - 1 of a string.
    let out = ok(
        r#"#pragma D option strsize=8
        struct ent { int id; string name; long after; };
        struct ent v;
        BEGIN {
            this->e = (struct ent *)alloca(sizeof (struct ent));
            this->e->after = 7;
            this->e->name = "stringy value";
            this->e->id = 3;
            printf("%d %s %d %d %d\n", this->e->id, this->e->name, this->e->after,
                sizeof (struct ent), strlen(stringof(this->e->name)));
            v.id = 4; v.name = "dvar"; v.after = 9;
            *this->e = v;
            printf("%d %s %d\n", this->e->id, this->e->name, this->e->after);
            this->e->name = execname;
            v = *this->e;
            printf("%d %s %d\n", v.id, v.name, v.after);
        }"#,
        &[],
    );
    assert_eq!(out, "3 stringy 7 24 7\n4 dvar 9\n4 test 9\n");
}

#[test]
fn string_stores_are_type_checked_and_kernel_memory_stays_refused() {
    for (src, pos, msg) in [
        (
            "BEGIN {\n  ((struct foo *)arg0)->name = \"x\";\n}",
            "3:3",
            "[D_OP_WRITE] cannot store to kernel memory through arg0",
        ),
        (
            "BEGIN {\n  this->f = (struct foo *)alloca(sizeof (struct foo));\n  this->f->name = 5;\n}",
            "4:19",
            "[D_OP_INCOMPAT] operands have incompatible types: \"char [6]\" = \"int\"",
        ),
        (
            "BEGIN {\n  this->f = (struct foo *)alloca(sizeof (struct foo));\n  this->f->a = execname;\n}",
            "4:16",
            "[D_OP_INCOMPAT] operands have incompatible types: \"int\" = \"string\"",
        ),
        (
            "BEGIN {\n  this->f = (struct foo *)alloca(sizeof (struct foo));\n  this->f->name += \"x\";\n}",
            "4:3",
            "[D_OP_ARRFUN] cannot assign to an array",
        ),
        (
            "struct iv { int v[4]; };\nBEGIN {\n  this->p = (struct iv *)alloca(16);\n  this->p->v = \"x\";\n}",
            "5:3",
            "[D_OP_ARRFUN] cannot assign to an array",
        ),
    ] {
        let (p, m) = err_at(&format!("{FOO}{src}"));
        assert!(m.contains(msg), "{src}: {m}");
        assert_eq!(p, pos, "{src}: {m}");
    }
}

#[test]
fn string_stores_fault_outside_what_the_clause_allocated() {
    // Not provably kernel memory: the kernel's check makes it "invalid address", and a
    // char[6] store one byte short of the allocation's end is refused whole.
    for src in [
        "BEGIN { this->p = (struct foo *)0x5000; this->p->name = \"abc\"; }",
        "BEGIN { this->c = (char *)alloca(8); this->f = (struct foo *)(this->c - 1); this->f->name = \"a\"; }",
    ] {
        let (s, _) = run(&format!("{FOO}{src}"), &[]);
        assert_eq!(s.faults.len(), 1, "{src}: {:?}", s.faults);
        assert!(
            matches!(s.faults[0].1.kind, FaultKind::BadAddr(_)),
            "{src}: {:?}",
            s.faults
        );
    }
}

const W: &str = "#pragma D option destructive\n";

#[test]
fn copyout_and_copyoutstr_write_user_memory() {
    // A string is its bytes then NULs; scratch memory its bytes; copyoutstr cut at its
    // size has no NUL.
    let (s, _) = run(
        &format!(
            "{W}BEGIN {{
                copyout(\"XY\", 0x7000, 4);
                this->p = (char *)alloca(2);
                this->p[0] = 'a';
                copyout(this->p, 0x7004, 2);
                copyoutstr(\"hello\", 0x7008, 3);
                this->s = \"ab\";
                copyoutstr(this->s, 0x700c, 10);
            }}"
        ),
        &[b'-'; 16],
    );
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.user_mem[0].1, b"XY\0\0a\0--hel-ab\0-");
}

#[test]
fn copyoutstr_takes_a_void_pointer_as_dtrace_does() {
    let (s, _) = run(
        &format!(
            "{W}BEGIN {{
                this->v = alloca(3);
                ((char *)this->v)[0] = 'z';
                ((char *)this->v)[1] = 0;
                copyoutstr(this->v, 0x7000, 3);
                trace(strlen(this->v));
            }}"
        ),
        &[b'-'; 4],
    );
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.user_mem[0].1, b"z\0--");
}

#[test]
fn copyout_faults() {
    for (src, kind) in [
        // The source must be scratch memory or a string, as DTrace's checked pointer.
        ("copyout((void *)3, 0x7000, 5);", FaultKind::BadAddr(3)),
        ("copyout(\"x\", 0x9000, 1);", FaultKind::BadAddr(0x9000)),
        ("copyoutstr(\"x\", 0x700f, 2);", FaultKind::BadAddr(0x700f)),
        // A void pointer is the string it points to (scratch memory here).
        (
            "copyoutstr(alloca(8), 0x9000, 8);",
            FaultKind::BadAddr(0x9000),
        ),
        ("copyout(alloca(4), 0x7000, 5);", FaultKind::BadAddr(0)),
        // More than the string's strsize + 1 bytes.
        ("copyout(\"x\", 0x7000, 300);", FaultKind::IllegalOp),
    ] {
        let (s, _) = run(&format!("{W}BEGIN {{ {src} }}"), &[b'-'; 16]);
        let kinds: Vec<_> = s.faults.iter().map(|f| f.1.kind).collect();
        match (kind, kinds.as_slice()) {
            (FaultKind::BadAddr(0), [FaultKind::BadAddr(_)]) => {}
            (k, [got]) if k == *got => {}
            _ => panic!("{src}: {kinds:?}"),
        }
        // The string's byte fits before the end of user memory, its NUL does not.
        let end = if src.contains("0x700f") { b'x' } else { b'-' };
        assert_eq!(s.user_mem[0].1[..15], [b'-'; 15], "{src}");
        assert_eq!(s.user_mem[0].1[15], end, "{src}");
    }
}

#[test]
fn copyout_is_destructive_and_checks_its_prototype() {
    for (src, pos, msg) in [
        (
            "BEGIN { copyout(\"a\", 1, 1); }",
            "1:9",
            "copyout(): destructive actions not allowed",
        ),
        (
            "BEGIN { copyoutstr(\"a\", 1, 1); }",
            "1:9",
            "copyoutstr(): destructive actions not allowed",
        ),
        (
            "BEGIN { copyout(\"a\", \"b\", 1); }",
            "1:22",
            "[D_PROTO_ARG] copyout( ) argument #2 is incompatible with prototype: prototype: uintptr_t, argument: string",
        ),
        (
            "BEGIN { copyout(1, 2, 1); }",
            "1:17",
            "[D_PROTO_ARG] copyout( ) argument #1 is incompatible with prototype: prototype: void *",
        ),
        ("BEGIN { copyout(0, 20); }", "1:9", "[D_PROTO_LEN]"),
        ("BEGIN { copyoutstr(\"s\"); }", "1:9", "[D_PROTO_LEN]"),
        ("BEGIN { x = copyout(\"a\", 1, 1); }", "1:13", "is an action"),
    ] {
        let (p, m) = err_at(src);
        assert!(m.contains(msg), "{src}: {m}");
        assert_eq!(p, pos, "{src}: {m}");
    }
}

#[test]
fn a_string_subscript_reads_a_character() {
    let out = ok(
        r#"BEGIN {
            s = "ABCDEFG"; a[1234] = "ABCDEFG"; this->s = "xyz"; self->s = "hi";
            printf("%d %d %d %d %d %c|%s\n", s[1], a[1234][1], this->s[2], self->s[0], s[20],
                execname[0], execname);
        }"#,
        b"",
    );
    let (nums, name) = out.trim_end().split_once('|').unwrap();
    assert_eq!(nums[..nums.len() - 1], *"66 66 122 104 0 ", "{out}");
    assert_eq!(nums.chars().last(), name.chars().next(), "{out}");
    let (p, m) = err_at("BEGIN { this->s = \"abc\"; this->s[1]++; }");
    assert_eq!((p.as_str(), m.as_str()), ("1:26", "[D_OP_WRITE] operator requires a writable variable: a string's characters cannot be modified"));
}
