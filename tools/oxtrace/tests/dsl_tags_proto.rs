//! DTrace's tags for wrong calls, `args[]` and declarations: a call is checked against its
//! prototype before anything else is asked of it, and each misuse is refused with the tag
//! DTrace gives it, at the line it names.

mod support;

use oxtrace_core::program::ProbeKind;
use support::{c, err_at};

/// The tag and `line:column` of `src`'s compile error.
fn tag_at(src: &str) -> (String, String) {
    let (pos, msg) = err_at(src);
    match msg.strip_prefix('[').and_then(|m| m.split_once(']')) {
        Some((t, _)) => (t.to_string(), pos),
        None => panic!("no tag in: {msg}"),
    }
}

/// Asserts that `src` is refused with `tag` at `pos`.
fn refused(src: &str, tag: &str, pos: &str) {
    assert_eq!(tag_at(src), (tag.to_string(), pos.to_string()), "{src}");
}

#[test]
fn args_takes_one_constant_index_of_a_probe_with_arguments() {
    refused("BEGIN {\n\ttrace(args[\"a\"]);\n}", "D_PROTO_ARG", "2:8");
    refused("BEGIN { x = 1; trace(args[x]); }", "D_PROTO_ARG", "1:22");
    refused("tick-1s { trace(args[-1]); }", "D_ARGS_IDX", "1:17");
    refused("tick-1s { trace(args[10]); }", "D_ARGS_IDX", "1:17");
    // BEGIN and END have no arguments at all.
    refused("BEGIN {\n\ttrace(args[0]);\n}", "D_ARGS_IDX", "2:8");
    refused("END { trace(args[9]); }", "D_ARGS_IDX", "1:13");
    refused("BEGIN { trace(args); }", "D_IDENT_BADREF", "1:15");
    c("tick-1s { trace(args[9]); }");
    // A program's own `args` is a variable like any other.
    c("BEGIN { args = 1; trace(args); }");
}

#[test]
fn an_aggregation_stands_only_where_it_is_assigned_a_function() {
    refused("BEGIN {\n\t@a[1];\n}", "D_AGG_NULL", "2:2");
    refused("BEGIN { @a; }", "D_IDENT_UNDEF", "1:9");
    refused("BEGIN {\n\t@ = f();\n}", "D_FUNC_UNDEF", "2:6");
    // A function D knows but that does not aggregate.
    refused("BEGIN { @ = trace(1); }", "D_AGG_FUNC", "1:13");
    refused("BEGIN {\n\tavg(1);\n}", "D_CG_EXPR", "2:2");
}

#[test]
fn declarations() {
    refused("int a[-7];\nBEGIN { }", "D_DECL_ARRSUB", "1:7");
    refused("int a[0];\nBEGIN { }", "D_DECL_ARRBIG", "1:6");
    refused(
        "int x[void, char];\nBEGIN { x[1, 'a'] = 456; }",
        "D_DECL_PROTO_TYPE",
        "1:5",
    );
    refused("int a[4];\nBEGIN\n/a/\n{ }", "D_PRED_SCALAR", "3:2");
    refused(
        "struct s { int x; } v;\nBEGIN\n/v/\n{ }",
        "D_PRED_SCALAR",
        "3:2",
    );
    refused(
        "BEGIN { trace(offsetof(struct no_such_type, x)); }",
        "D_OFFSETOF_TYPE",
        "1:15",
    );
}

#[test]
fn arrow_wants_a_pointer_to_a_struct() {
    refused(
        "struct s { int a; } xyz;\nBEGIN {\n\txyz->a = 1;\n}",
        "D_OP_PTR",
        "3:2",
    );
    refused(
        "struct s { int a; } f;\nBEGIN { trace(f->a); }",
        "D_OP_PTR",
        "2:15",
    );
    refused("int *abc;\nBEGIN {\n\tabc->a = 1;\n}", "D_OP_SOU", "3:2");
    refused("BEGIN { trace(execname->a); }", "D_OP_PTR", "1:15");
}

#[test]
fn a_bit_field_has_no_address() {
    let decl = "struct r { int a : 1; int b : 3; } var;\n";
    refused(
        &format!("{decl}BEGIN {{ trace(&var.b); }}"),
        "D_ADDROF_BITFIELD",
        "2:15",
    );
    refused(
        &format!("{decl}BEGIN {{ this->p = (struct r *)alloca(8); trace(&this->p->a); }}"),
        "D_ADDROF_BITFIELD",
        "2:48",
    );
}

#[test]
fn calls_are_checked_against_their_prototypes_first() {
    refused(
        "BEGIN {\n\ttracemem(123, \"i'm a string\");\n}",
        "D_PROTO_ARG",
        "2:16",
    );
    refused(
        "struct s { int a; } v;\nBEGIN { tracemem(v, 123); }",
        "D_TRACEMEM_ADDR",
        "2:18",
    );
    refused("BEGIN { copyinto(1, 2, 3); }", "D_PROTO_ARG", "1:24");
    refused("BEGIN { copyinto(\"1\", 2, 3); }", "D_PROTO_ARG", "1:18");
    refused("BEGIN { copyinto(1, \"2\", 3); }", "D_PROTO_ARG", "1:21");
    refused("BEGIN { bcopy(arg0, 2, 3); }", "D_PROTO_ARG", "1:21");
    refused("BEGIN { copyinstr(\"1\", 2); }", "D_PROTO_ARG", "1:19");
    refused("BEGIN { copyinstr(1, \"2\"); }", "D_PROTO_ARG", "1:22");
    refused("BEGIN { setopt(1); }", "D_PROTO_ARG", "1:16");
    refused("BEGIN { setopt(\"quiet\", 1); }", "D_PROTO_ARG", "1:25");
    refused(
        "BEGIN { @a = count(); trunc(@a, @a); }",
        "D_PROTO_ARG",
        "1:33",
    );
    // A right prototype goes on to the call's own checks.
    refused("BEGIN { setopt(probename); }", "D_SETOPT_ARG", "1:16");
    c("BEGIN { copyinto(arg0, 8, alloca(8)); bcopy(arg0, alloca(8), 8); }");
}

#[test]
fn printa_wants_aggregations_whose_keys_the_format_prints() {
    refused(
        "BEGIN {\n\t@ = count();\n\tprinta(\"%d\", @);\n}",
        "D_PRINTF_ARG_PROTO",
        "3:10",
    );
    refused(
        "BEGIN { @[1] = count(); printa(\"%d %d %@d\", @); }",
        "D_PRINTF_ARG_PROTO",
        "1:36",
    );
    refused("BEGIN {\n\tprinta(\"%d\");\n}", "D_PRINTA_PROTO", "2:2");
    refused(
        "BEGIN { @a = count(); @b[1] = count(); printa(@a, @b); }",
        "D_PRINTA_AGGKEY",
        "1:51",
    );
    refused(
        "BEGIN { @a[1, \"\", 2] = count(); @b[1, 2, \"\"] = count(); printa(@a, @b); }",
        "D_PRINTA_AGGPROTO",
        "1:68",
    );
    // A key printed, the value left out, as DTrace allows.
    c("BEGIN { @[1, \"a\"] = count(); printa(\"%d %s\\n\", @); }");
    // Keys not known yet (assigned in a later clause): the format is not judged.
    c("tick-1s { printa(\"%d %@d\\n\", @a); }\nBEGIN { @a[1] = count(); }");
}

#[test]
fn unimplemented_destructive_actions_are_checked_then_refused() {
    refused("BEGIN { breakpoint(1, 2); }", "D_PROTO_LEN", "1:9");
    refused("BEGIN { panic(\"x\"); }", "D_PROTO_LEN", "1:9");
    refused("BEGIN { @ = panic(); }", "D_AGG_FUNC", "1:13");
    for src in ["BEGIN { breakpoint(); }", "BEGIN { panic(); }"] {
        let (_, msg) = err_at(src);
        assert!(
            msg.contains("DTrace action oxtrace does not implement"),
            "{src}: {msg}"
        );
    }
}

#[test]
fn a_unary_operator_refuses_an_actions_void() {
    refused("BEGIN {\n\tp = 123 + -trace(0);\n}", "D_OP_ARITH", "2:12");
    refused("BEGIN { p = ~printf(\"x\"); }", "D_OP_INT", "1:13");
    refused("BEGIN { p = !exit(0); }", "D_OP_SCALAR", "1:13");
}

#[test]
fn a_function_and_name_alone_are_a_system_call_or_a_kernel_function() {
    // DTrace's FUNC:NAME leaves the provider and module out.
    let p = c("read:entry { trace(arg0); }\nvfs_read:return { trace(arg1); }");
    let kinds: Vec<_> = p.probes.iter().map(|s| (s.kind, s.func.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (ProbeKind::SyscallEntry, "read"),
            (ProbeKind::FbtReturn, "vfs_read")
        ]
    );
    refused("read:entry { trace(args[-1]); }", "D_ARGS_IDX", "1:20");
    refused("read:entry { trace(args[3]); }", "D_ARGS_IDX", "1:20");
}

#[test]
fn uregs_names_an_undefined_index_and_a_register_out_of_range() {
    refused("BEGIN {\n\ttrace(uregs[FOO]);\n}", "D_IDENT_UNDEF", "2:14");
    refused("BEGIN { trace(uregs[42]); }", "D_UNKNOWN", "1:21");
    refused("BEGIN { i = 1; trace(uregs[i]); }", "D_PROTO_ARG", "1:28");
}

#[test]
fn a_missing_or_repeated_member_is_dtraces_unknown_error() {
    refused(
        "struct r { int a; };\nBEGIN { trace(offsetof(struct r, NULL)); }",
        "D_UNKNOWN",
        "2:15",
    );
    refused("struct foo {\n\tint x;\n\tchar x;\n};", "D_UNKNOWN", "3:7");
}

#[test]
fn a_declaration_cannot_take_a_functions_name() {
    // Refused before the missing clause, as DTrace refuses it.
    refused("inline int rand = 7;", "D_DECL_IDRED", "1:12");
    refused("int strlen;\nBEGIN { }", "D_DECL_IDRED", "1:5");
    refused("inline int trace = 1;\nBEGIN { }", "D_DECL_IDRED", "1:12");
}

#[test]
fn printfs_arguments_are_judged_before_its_format() {
    refused(
        "struct b { int a : 1; } var;\nBEGIN { printf(\"%n\", sizeof(var.a)); }",
        "D_SIZEOF_BITFIELD",
        "2:22",
    );
    refused("BEGIN { printf(\"%n\", 1); }", "D_SYNTAX", "1:18");
}

#[test]
fn a_type_defined_again_where_no_definition_may_stand() {
    // Braces for a translator's angle brackets define struct o again.
    refused(
        "struct o { int a; };\ntranslator struct o\n{ int *p }\n{ a = *p; };\nBEGIN { }",
        "D_DECL_TYPERED",
        "3:1",
    );
    refused(
        "translator struct o\n{ int *p }\n{ a = *p; };\nBEGIN { }",
        "D_SYNTAX",
        "2:1",
    );
}

#[test]
fn a_translation_is_no_aggregation_key() {
    let decls = "struct in { int i; };\nstruct out { int o; };\n\
                 translator struct out < struct in *P > { o = P->i; };\nstruct in *p;\n";
    refused(
        &format!("{decls}BEGIN {{ @[xlate <struct out *> (p)] = count(); }}"),
        "D_KEY_TYPE",
        "5:11",
    );
    c(&format!(
        "{decls}BEGIN {{ @[xlate <struct out *> (p)->o] = count(); }}"
    ));
    // Nor a statement's value.
    refused(
        &format!("{decls}BEGIN {{ xlate <struct out *> (p); }}"),
        "D_CG_DYN",
        "5:9",
    );
}
