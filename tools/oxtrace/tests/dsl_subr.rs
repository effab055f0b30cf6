//! D's subroutine library compiled and run through the simulator: exact output, and the
//! argument errors with their `line:column`.

mod support;

use oxtrace::dsl::{compile, CompileOptions, Compiled};
use oxtrace::runtime::sim::{Firing, Sim};
use oxtrace_core::action::FaultKind;
use oxtrace_core::program::ProbeKind;
use support::{c, run_begin as begin};

#[test]
fn string_subroutines_print_what_dtrace_prints() {
    let out = begin(
        r#"BEGIN {
            this->p = "/usr/lib/../share//doc/";
            printf("%s|%s|%s|%s\n", substr("hello, world", 7), substr("hello", 1, 3),
                substr("hello", -3), substr("hello", 0, -2));
            printf("%s|%s|%s\n", basename(this->p), dirname(this->p), cleanpath(this->p));
            printf("%s|%s\n", toupper("MiXed 1"), tolower("MiXed 1"));
            printf("%s|%s|%s\n", strstr("abcabc", "ca"), strchr("a.b.c", '.'),
                strrchr("a.b.c", '.'));
            printf("%d %d %d %d %d\n", index("hello hello", "llo"),
                index("hello hello", "llo", 3), rindex("hello hello", "llo"),
                rindex("hello hello", "llo", 7), index("hello", "z"));
            printf("%s %s %s %s\n", lltostr(-42), lltostr(255, 16), lltostr(8, 8),
                lltostr(5, 2));
            printf("%d %d %d\n", strtoll("1234"), strtoll("0x1f", 16), strtoll(" -17"));
        }"#,
    );
    assert_eq!(
        out,
        "world|ell|llo|hel\n\
         doc|/usr/lib/../share|/usr/share/doc\n\
         MIXED 1|mixed 1\n\
         cabc|.b.c|.c\n\
         2 8 8 2 -1\n\
         -42 0xff 010 101\n\
         1234 31 -17\n"
    );
}

#[test]
fn strtok_cuts_a_string_in_one_clause() {
    let out = begin(
        r#"BEGIN {
            this->s = strjoin("a,b", ",,c");
            printf("%s ", strtok(this->s, ","));
            printf("%s ", strtok(0, ","));
            printf("%s\n", strtok(0, ","));
        }"#,
    );
    assert_eq!(out, "a b c\n");
}

/// DTrace keeps strtok's place per CPU: `strtok(NULL, ...)` goes on in the next clause (the
/// string it cuts lived in the first clause's scratch) and in a later firing on the CPU.
#[test]
fn strtok_goes_on_across_clauses_and_firings() {
    let p = c(
        r#"BEGIN { printf("%s ", strtok(strjoin("x,", "yy,zzz"), ",")); }
        BEGIN { printf("%s ", strtok(0, ",")); this->x = strjoin("q", "r"); }
        BEGIN { printf("%s|\n", strtok(0, ",")); }
        BEGIN { printf("%s %s\n", strtok("k;l", ";"), strtok(0, ";")); }"#,
    );
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "x yy zzz|\nk l\n");
    // The next firing goes on; at the end strtok gives NULL, which faults when printed, and
    // forgets the string.
    let p = c(r#"BEGIN { x++; } BEGIN /x == 1/ { strtok("a,b", ","); }
        BEGIN /x > 1/ { printf("%s\n", strtok(0, ",")); }"#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "b\n");
    s.fire(&p, &Firing::default());
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults.len(), 2);
    assert_eq!(s.faults[0].1.kind, FaultKind::BadString);
}

#[test]
fn epid_and_ipl() {
    // Each description is a probe (BEGIN 0, END 1, BEGIN 2) of one clause: EPIDs 1, 2, 3,
    // END's counting though it does not fire. The simulator fires in a task (ipl 0).
    let out = begin(
        r#"BEGIN { printf("%d ", epid); } END { x = 1; }
        BEGIN { printf("%d %d\n", epid, ipl); }"#,
    );
    assert_eq!(out, "1 3 0\n");
}

/// EPIDs are numbered in program order, as dtrace enables its clauses: the fbt clause after
/// the first BEGIN one is 2, though LOAD makes the fbt probe first; the tick (not fired)
/// takes 4. The guest's dlang_test.sh runs this program through the module.
#[test]
fn epids_follow_program_order_across_providers() {
    let p = c(r#"BEGIN { a = epid; } fbt::ksys_read:entry { f = epid; }
        BEGIN { b = epid; } tick-10ms { t = epid; }
        END { printf("%d %d %d %d\n", a, f, b, epid); }"#);
    let mut s = Sim {
        functions: vec!["ksys_read".into()],
        ..Sim::default()
    };
    s.fire(&p, &Firing::default());
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::FbtEntry,
            func: "ksys_read".into(),
            ..Firing::default()
        },
    );
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::End,
            ..Firing::default()
        },
    );
    assert_eq!(s.printf_output(&p), "1 2 3 5\n");
}

#[test]
fn byte_order_and_dev_t() {
    let out = begin(
        r#"BEGIN {
            printf("%x %x %x %x\n", htons(0x1234), ntohl(0x11223344), htonll(1), ntohs(htons(80)));
            printf("%d %d\n", getmajor(0x800003), getminor(0x800003));
        }"#,
    );
    assert_eq!(out, "3412 44332211 100000000000000 50\n8 3\n");
}

#[test]
fn inet_subroutines_read_kernel_memory() {
    let p = c(r#"BEGIN {
        printf("%s %s %s\n", inet_ntoa((void *)0x5000),
            inet_ntop(10, (void *)0x5010), inet_ntoa6((void *)0x5020));
    }"#);
    let mut s = Sim::default();
    let mut mem = vec![127u8, 0, 0, 1];
    mem.resize(16, 0);
    mem.extend([0u8; 15]);
    mem.push(1);
    mem.extend([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2a]);
    s.mem.push((0x5000, mem));
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "127.0.0.1 ::1 fe80::2a\n");
    // An IPv4 address inside an IPv6 one: inet_ntoa6() shows the bare dotted quad unless
    // its constant `strict` is not 0; inet_ntop() is strict.
    let p = c(r#"BEGIN {
        printf("%s %s %s\n", inet_ntoa6((void *)0x5000), inet_ntoa6((void *)0x5000, 0),
            inet_ntoa6((void *)0x5000, 2 - 1));
        printf("%s %s\n", inet_ntop(AF_INET6, (void *)0x5000), inet_ntoa6((void *)0x5010));
    }"#);
    let mut s = Sim::default();
    let mut mem = [0u8; 32];
    mem[10..16].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
    mem[28..32].copy_from_slice(&[127, 0, 0, 1]);
    s.mem.push((0x5000, mem.to_vec()));
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(
        s.printf_output(&p),
        "10.0.0.1 10.0.0.1 ::ffff:10.0.0.1\n::ffff:10.0.0.1 127.0.0.1\n"
    );
    // An unreadable address is a fault, never a crash.
    let p = c(r#"BEGIN { trace(inet_ntoa((void *)0x9999)); }"#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults[0].1.kind, FaultKind::BadAddr(0x9999));
}

#[test]
fn faults_of_bad_arguments() {
    for (src, kind) in [
        ("BEGIN { trace(lltostr(1, 1)); }", FaultKind::IllegalOp),
        ("BEGIN { trace(strtoll(\"1\", 99)); }", FaultKind::IllegalOp),
        ("BEGIN { trace(inet_ntop(3, 0)); }", FaultKind::IllegalOp),
        (
            "BEGIN { trace(strlen(strstr(\"a\", \"b\"))); }",
            FaultKind::BadString,
        ),
    ] {
        let p = c(src);
        let mut s = Sim::default();
        s.fire(&p, &Firing::default());
        assert_eq!(s.faults.len(), 1, "{src}");
        assert_eq!(s.faults[0].1.kind, kind, "{src}");
    }
}

#[test]
fn rand_and_progenyof() {
    let p = c(r#"BEGIN {
        this->a = rand(); this->b = rand();
        printf("%d %d %d %d %d\n", this->a != this->b, this->a >= 0,
            progenyof(1000), progenyof(1), progenyof(77));
    }"#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.printf_output(&p), "1 1 1 1 0\n");
}

fn err_at(src: &str) -> (String, String) {
    match compile(src, "t.d", &CompileOptions::default()) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => (e.position(), e.msg.clone()),
    }
}

#[test]
fn argument_errors_have_line_and_column() {
    let cases = [
        (
            "BEGIN { trace(substr(\"a\")); }",
            "1:15",
            "[D_PROTO_LEN] substr() takes 2 or 3 argument(s), 1 given",
        ),
        (
            "BEGIN {\n  trace(substr(1, 2));\n}",
            "2:16",
            "[D_PROTO_ARG] substr( ) argument #1 is incompatible with prototype: prototype: char *, argument: int",
        ),
        (
            "BEGIN { trace(index(\"a\", 2)); }",
            "1:26",
            "[D_PROTO_ARG] index( ) argument #2 is incompatible with prototype: prototype: char *, argument: int",
        ),
        (
            "BEGIN { trace(toupper(\"a\", \"b\")); }",
            "1:15",
            "[D_PROTO_LEN] toupper() takes 1 argument(s), 2 given",
        ),
        (
            "BEGIN { trace(lltostr(\"x\")); }",
            "1:23",
            "[D_PROTO_ARG] lltostr( ) argument #1 is incompatible with prototype: prototype: int, argument: string",
        ),
        (
            "BEGIN { trace(rand(1)); }",
            "1:15",
            "[D_PROTO_LEN] rand() takes 0 argument(s), 1 given",
        ),
        (
            "BEGIN { trace(htons(\"x\")); }",
            "1:21",
            "[D_PROTO_ARG] htons( ) argument #1 is incompatible with prototype: prototype: int, argument: string",
        ),
    ];
    for (src, pos, msg) in cases {
        let (p, m) = err_at(src);
        assert_eq!(p, pos, "{src}: {m}");
        assert_eq!(m, msg, "{src}");
    }
}

#[test]
fn printf_star_width_date_escapes_and_many_arguments() {
    let out = begin(
        r#"BEGIN {
            printf("[%*d] [%-*d] [%.*s] [%*.*s]\n", 5, 42, 4, 7, 2, "abc", -6, 1, "xyz");
            printf("%Y\n", 1700000000123456789);
            printf("%S|%s\n", "a\tb\\c\001", "ok");
            printf("%d %d %d %d %d %d %d %d %d %d %d %d\n", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
        }"#,
    );
    assert_eq!(
        out,
        "[   42] [7   ] [ab] [x     ]\n\
         2023 Nov 14 22:13:20\n\
         a\\tb\\\\c\\001|ok\n\
         1 2 3 4 5 6 7 8 9 10 11 12\n"
    );
    let (p, m) = err_at("BEGIN { printf(\"%*d\\n\", \"x\", 1); }");
    assert_eq!(
        (p.as_str(), m.as_str()),
        (
            "1:25",
            "[D_PRINTF_DYN_TYPE] printf( ) argument #2 is incompatible with conversion #1 prototype: conversion: %*d, prototype: int, argument: string"
        )
    );
    let (p, m) = err_at("BEGIN { printf(\"%*d\\n\", 1); }");
    assert_eq!(
        (p.as_str(), m.as_str()),
        (
            "1:16",
            "[D_PRINTF_ARG_PROTO] printf( ) prototype mismatch: conversion #1 (%*d) is missing a corresponding value argument"
        )
    );
}

#[test]
fn printf_a_prints_kernel_symbols() {
    let syms = oxtrace::sym::ksym::Ksyms::parse(
        "ffffffff81000000 T _stext\nffffffff81200000 T vfs_read\n\
         ffffffff81200100 t vfs_write\nffffffffc0001000 t ext4_fill_super\t[ext4]\n",
    );
    oxtrace::sym::ksym::Ksyms::set_kernel(syms);
    let out = begin(
        r#"BEGIN {
            printf("%a|%a|%a|%a\n", 0xffffffff81200000, 0xffffffff81200004,
                0xffffffffc0001010, 0x1000);
        }"#,
    );
    assert_eq!(
        out,
        "vmlinux`vfs_read|vmlinux`vfs_read+0x4|ext4`ext4_fill_super+0x10|0x1000\n"
    );
}

fn cw(src: &str) -> Compiled {
    let opts = CompileOptions {
        xopts: vec![("destructive".into(), None)],
        ..CompileOptions::default()
    };
    compile(src, "test.d", &opts).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn destructive_actions_need_w() {
    for (src, pos, name) in [
        ("BEGIN { system(\"ls\"); }", "1:9", "system"),
        ("BEGIN {\n  raise(9); }", "2:3", "raise"),
        ("BEGIN { stop(); }", "1:9", "stop"),
        ("BEGIN { chill(10); }", "1:9", "chill"),
        ("BEGIN { freopen(\"/tmp/x\"); }", "1:9", "freopen"),
    ] {
        let (p, m) = err_at(src);
        assert_eq!(
            (p.as_str(), m),
            (
                pos,
                format!(
                    "{name}(): destructive actions not allowed (allow them with -w or \
                     #pragma D option destructive)"
                )
            ),
            "{src}"
        );
    }
    // The pragma allows them as -w does.
    c("#pragma D option destructive\nBEGIN { chill(10); }");
    // A wrong call is wrong before it is forbidden, as in DTrace.
    for (src, tag) in [
        ("BEGIN { chill(\"x\"); }", "[D_PROTO_ARG] chill( )"),
        ("BEGIN { raise(); }", "[D_PROTO_LEN] raise()"),
        ("BEGIN { stop(1); }", "[D_PROTO_LEN] stop()"),
        (
            "BEGIN { freopen(\".\"); }",
            "[D_FREOPEN_INVALID] freopen( ) argument #1 cannot be \".\"",
        ),
    ] {
        let (_, m) = err_at(src);
        assert!(m.starts_with(tag), "{src}: {m}");
    }
}

#[test]
fn destructive_actions_run() {
    let p = cw(r#"BEGIN { system("echo %s %d", "hi", 42); raise(10); stop(); chill(1000); }"#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.records[0].kind, oxtrace_core::action::RecordKind::System);
    let items: Vec<_> = s.records[0].items.iter().map(|i| i.as_item()).collect();
    assert_eq!(
        p.format_printf(s.records[0].id, &items).unwrap(),
        b"echo hi 42"
    );
    assert_eq!(s.raised, vec![10, 19]);
    assert_eq!(s.chilled, 1000);
    // Over DTrace's chill budget, and a bad signal: illegal operations.
    let p = cw("BEGIN { chill(600000000); } BEGIN { raise(99); }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    let kinds: Vec<_> = s.faults.iter().map(|f| f.1.kind).collect();
    assert_eq!(kinds, vec![FaultKind::IllegalOp, FaultKind::IllegalOp]);
    // system() checks its format like printf.
    let opts = CompileOptions {
        xopts: vec![("destructive".into(), None)],
        ..CompileOptions::default()
    };
    let e = compile("BEGIN { system(\"%d\", \"x\"); }", "t.d", &opts).unwrap_err();
    assert_eq!(
        e.msg,
        "[D_PRINTF_ARG_TYPE] system( ) argument #2 is incompatible with conversion #1 prototype: conversion: %d, prototype: char, short, int, long, or long long, argument: string"
    );
}

/// ERROR's arg1 is the faulting clause's epid (BEGIN is probe 0, its clause EPID 1; ERROR's
/// is 2).
#[test]
fn error_arg1_is_the_epid() {
    let p = c(r#"BEGIN { x = 0; y = 1 / x; } ERROR { printf("%d %d\n", arg1, epid); }"#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults.len(), 1);
    assert_eq!(s.printf_output(&p), "1 2\n");
}

/// `*` widths and `.*` precisions as C's printf takes them, and DTrace's errors for them.
#[test]
fn printf_star_width_and_precision() {
    let out = begin(
        r#"BEGIN {
            printf("[%*d][%-*d][%*d][%0*d]\n", 5, 3, 5, 3, -5, 3, 5, -3);
            printf("[%.*s][%*.*s][%.*s][%.*d]\n", 3, "hello", -6, 2, "hello", -1, "hey", 4, 7);
        }"#,
    );
    assert_eq!(
        out,
        "[    3][3    ][3    ][-0003]\n[hel][he    ][hey][0007]\n"
    );
    for (src, pos, msg) in [
        (
            r#"BEGIN { printf("%*.*d"); }"#,
            "1:16",
            r#"[D_PRINTF_DYN_PROTO] printf( ) prototype mismatch: conversion #1 (%*.*d) is missing a corresponding "*" argument"#,
        ),
        (
            r#"BEGIN { printf("%s %.*d\n", "foo"); }"#,
            "1:16",
            r#"[D_PRINTF_DYN_PROTO] printf( ) prototype mismatch: conversion #2 (%.*d) is missing a corresponding ".*" argument"#,
        ),
        (
            r#"BEGIN { printf("%*.*d", 1, 2); }"#,
            "1:16",
            "[D_PRINTF_ARG_PROTO] printf( ) prototype mismatch: conversion #1 (%*.*d) is missing a corresponding value argument",
        ),
        (
            r#"BEGIN { printf("%*.*d", 1, "x", 3); }"#,
            "1:28",
            "[D_PRINTF_DYN_TYPE] printf( ) argument #3 is incompatible with conversion #1 prototype: conversion: %*.*d, prototype: int, argument: string",
        ),
        (
            r#"BEGIN { printf("%*.*d", 1, 2, ""); }"#,
            "1:31",
            "[D_PRINTF_ARG_TYPE] printf( ) argument #4 is incompatible with conversion #1 prototype: conversion: %*.*d, prototype: char, short, int, long, or long long, argument: string",
        ),
        (
            r#"BEGIN { printf("%*d\n", 1, 2, 3); }"#,
            "1:31",
            "[D_PRINTF_ARG_EXTRA] printf( ) prototype mismatch: only 2 arguments required by this format string",
        ),
        (
            r#"BEGIN { printf("%d %**d"); }"#,
            "1:22",
            "[D_SYNTAX] format conversion #2 has more than one '*' specified for the output width",
        ),
        (
            r#"BEGIN { printf("%.**d"); }"#,
            "1:20",
            "[D_SYNTAX] format conversion #1 has more than one '*' specified for the output precision",
        ),
    ] {
        let (p, m) = err_at(src);
        assert_eq!((p.as_str(), m.as_str()), (pos, msg), "{src}");
    }
}

/// NULL and integers where a string goes, as DTrace takes them: NULL compiles (a string
/// parameter is a `char *`) and a NULL result compares as the empty string; any other
/// integer is refused with DTrace's tag.
#[test]
fn string_subroutines_take_null_as_dtrace_does() {
    let out = begin(
        r#"BEGIN {
            printf("%d %d %d\n", strchr("abc", 'z') == NULL, strchr("abc", 'b') != NULL,
                strrchr("abc", 'z') != NULL);
            printf("%d %d|%s|\n", strstr("abc", "x") == NULL, strtok(NULL, ",") == NULL,
                strchr("abc", 0));
            printf("%s %s %s\n", cleanpath("/a/b/"), cleanpath("a/../.."), cleanpath("./"));
        }"#,
    );
    assert_eq!(out, "1 1 0\n1 1||\n/a/b .. .\n");
    // NULL read as a string is an invalid address at run time.
    for src in [
        r#"BEGIN { trace(strchr(NULL, 'a')); }"#,
        r#"BEGIN { trace(strtok("a,b", NULL)); }"#,
        r#"BEGIN { trace(index(NULL, "a")); }"#,
        r#"BEGIN { strtok(strstr("abc", "def"), ""); }"#,
    ] {
        let p = c(src);
        let mut s = Sim::default();
        s.fire(&p, &Firing::default());
        assert_eq!(s.faults.len(), 1, "{src}");
        assert_eq!(s.faults[0].1.kind, FaultKind::BadString, "{src}");
        let (code, addr) = oxtrace_core::diag::fault_code(&s.faults[0].1.kind);
        let msg = oxtrace_core::diag::FaultMsg { code, addr }.to_string();
        assert_eq!(msg, "invalid address (0x0)", "{src}");
    }
    for (src, msg) in [
        (
            r#"BEGIN { strtok(1234, "abc"); }"#,
            "[D_PROTO_ARG] strtok( ) argument #1 is incompatible with prototype: prototype: char *, argument: int",
        ),
        (
            r#"BEGIN { strtok("abc", 1); }"#,
            "[D_PROTO_ARG] strtok( ) argument #2 is incompatible with prototype: prototype: char *, argument: int",
        ),
        (
            r#"BEGIN { trace(strchr(1, 'a')); }"#,
            "[D_PROTO_ARG] strchr( ) argument #1 is incompatible with prototype: prototype: char *, argument: int",
        ),
    ] {
        let (_, m) = err_at(src);
        assert_eq!(m, msg, "{src}");
    }
}

#[test]
fn link_ntop_formats_ethernet_and_infiniband_addresses() {
    let p = c(r#"BEGIN {
        printf("%s\n%s\n", link_ntop(ARPHRD_ETHER, (void *)0x6000),
            link_ntop(ARPHRD_INFINIBAND, (void *)0x6000));
    }"#);
    let mut s = Sim::default();
    s.mem.push((0x6000, (0u8..20).map(|b| b * 13).collect()));
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(
        s.printf_output(&p),
        "00:0d:1a:27:34:41\n00:0d:1a:27:34:41:4e:5b:68:75:82:8f:9c:a9:b6:c3:d0:dd:ea:f7\n"
    );
    // Another link type is an illegal operation at run time, as in DTrace.
    let p = c("BEGIN { trace(link_ntop(2, (void *)0x6000)); }");
    let mut s = Sim::default();
    s.mem.push((0x6000, vec![0; 20]));
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults[0].1.kind, FaultKind::IllegalOp);
}

#[test]
fn inet_ntoa6_strict_is_an_integer_constant() {
    for (src, pos, msg) in [
        (
            "BEGIN { n = 0; trace(inet_ntoa6((void *)0, n)); }",
            "1:44",
            "argument #2 must be an integer constant",
        ),
        (
            "BEGIN { trace(inet_ntoa6((void *)0, \"\")); }",
            "1:37",
            "prototype: int, argument: string",
        ),
        (
            "BEGIN { trace(inet_ntoa6((void *)0, 0, 0)); }",
            "1:15",
            "[D_PROTO_LEN]",
        ),
        ("BEGIN { trace(inet_ntoa6()); }", "1:15", "[D_PROTO_LEN]"),
    ] {
        let e = support::err(src);
        assert_eq!(e.position(), pos, "{src}: {}", e.msg);
        assert!(e.msg.contains(msg), "{src}: {}", e.msg);
    }
}

#[test]
fn inet_and_link_subroutines_take_pointers_as_dtrace_does() {
    for (src, pos, proto, arg) in [
        (
            "BEGIN { trace(inet_ntoa(arg0)); }",
            "1:25",
            "ipaddr_t *",
            "int64_t",
        ),
        (
            "BEGIN { trace(inet_ntoa6(1)); }",
            "1:26",
            "in6_addr_t *",
            "int",
        ),
        (
            "BEGIN { trace(inet_ntoa6((int *)arg0)); }",
            "1:26",
            "in6_addr_t *",
            "int *",
        ),
        (
            "struct in6 { int x[4]; }; BEGIN { trace(inet_ntoa6((struct in6 *)arg0)); }",
            "1:52",
            "in6_addr_t *",
            "struct in6 *",
        ),
        (
            "BEGIN { trace(inet_ntop(2, arg0)); }",
            "1:28",
            "void *",
            "int64_t",
        ),
        (
            "BEGIN { trace(link_ntop(1, \"a\")); }",
            "1:28",
            "void *",
            "string",
        ),
    ] {
        let e = support::err(src);
        let n = if src.contains("inet_ntop") || src.contains("link_ntop") {
            2
        } else {
            1
        };
        let from = src.find("trace(").unwrap() + 6;
        let name = &src[from..src
            .find('(')
            .map_or(0, |i| src[i + 1..].find('(').unwrap() + i + 1)];
        assert_eq!(
            (e.position().as_str(), e.msg.as_str()),
            (
                pos,
                format!("[D_PROTO_ARG] {name}( ) argument #{n} is incompatible with prototype: prototype: {proto}, argument: {arg}").as_str()
            ),
            "{src}"
        );
    }
    // An in6_addr pointer, a void one or NULL is what inet_ntoa6() takes.
    c(
        "struct in6_addr { int x[4]; }; typedef struct in6_addr in6_addr_t;
        BEGIN { trace(inet_ntoa6((struct in6_addr *)arg0)); trace(inet_ntoa6((in6_addr_t *)arg0));
        trace(inet_ntoa6((void *)arg0)); trace(inet_ntoa6(0)); trace(inet_ntoa6(NULL)); }",
    );
    // NULL is a pointer: a runtime error, not a compile one.
    let p = c("BEGIN { trace(inet_ntoa(0)); }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults[0].1.kind, FaultKind::BadAddr(0));
}

#[test]
fn freopen_records_the_path_it_formats() {
    let p = c(r#"#pragma D option destructive
        BEGIN { freopen("/tmp/out.%d", 7); printf("a\n"); freopen(""); printf("b\n"); }"#);
    assert_eq!(p.freopens.len(), 2);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let paths: Vec<String> = s
        .records
        .iter()
        .filter(|r| p.freopens.contains(&r.id))
        .map(|r| {
            let items: Vec<_> = r.items.iter().map(|i| i.as_item()).collect();
            String::from_utf8_lossy(&p.format_printf(r.id, &items).unwrap_or_default()).into_owned()
        })
        .collect();
    assert_eq!(paths, ["/tmp/out.7", ""]);
    // Its format is a printf format, checked as one.
    let (_, m) = err_at("#pragma D option destructive\nBEGIN { freopen(\"%d\"); }");
    assert!(m.contains("D_PRINTF_ARG_PROTO"), "{m}");
}

/// A `char *` goes where a string goes, read as the string it points to, as DTrace takes
/// it: here scratch memory from `alloca()`. NULL faults as an invalid address.
#[test]
fn char_pointers_are_strings_to_subroutines() {
    let out = begin(
        r#"BEGIN {
            this->p = (char *)alloca(8);
            this->p[0] = 'a'; this->p[1] = '/'; this->p[2] = 'b'; this->p[3] = 0;
            printf("%s|%d|%s|%s\n", basename(this->p), strlen(this->p),
                strjoin(this->p, "!"), strjoin("<", this->p));
        }"#,
    );
    assert_eq!(out, "b|3|a/b!|<a/b\n");
    let p = c("BEGIN { trace(strlen(NULL)); }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.faults.len(), 1, "{:?}", s.faults);
    assert_eq!(s.faults[0].1.kind, FaultKind::BadAddr(0));
}

/// DTrace's lock subroutines read Linux's lock words: `struct mutex`'s owner (its low three
/// bits flags) and a `rwlock_t`'s `qrwlock` counts (readers above bit 9, the writer byte
/// and the waiting bit below).
#[test]
fn lock_subroutines_read_the_lock_words() {
    let p = c(r#"BEGIN {
        m = (void *)0x5000;
        printf("%d %x %d %d\n", mutex_owned(m), (uint64_t)mutex_owner(m),
            mutex_type_adaptive(m), mutex_type_spin(m));
        printf("%x %x %x\n", rw_read_held((void *)0x6000), rw_write_held((void *)0x6000),
            rw_iswriter((void *)0x6000));
        printf("%x %x %x\n", rw_read_held((void *)0x6008), rw_write_held((void *)0x6008),
            rw_iswriter((void *)0x6008));
        printf("%d\n", mutex_owned((void *)0x5008));
    }"#);
    let mut s = Sim::default();
    // An owner task at 0xffff0000 with the handoff flag; then none (curthread is 0 here).
    s.mem.push((
        0x5000,
        [0xffff_0002u64, 0]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect(),
    ));
    // Two readers; then a writer with another one waiting.
    s.mem.push((
        0x6000,
        [2u32 << 9, 0, 0x1ff, 0]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect(),
    ));
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(
        s.printf_output(&p),
        "0 ffff0000 1 0\n400 0 0\n0 ff 1ff\n1\n"
    );
    for (src, tag) in [
        (
            r#"BEGIN { mutex_owned("badarg"); }"#,
            "[D_PROTO_ARG] mutex_owned( )",
        ),
        ("BEGIN { mutex_owned(); }", "[D_PROTO_LEN] mutex_owned()"),
        (
            "BEGIN { rw_iswriter(0, 1); }",
            "[D_PROTO_LEN] rw_iswriter()",
        ),
    ] {
        let e = compile(src, "t.d", &CompileOptions::default()).unwrap_err();
        assert!(e.msg.starts_with(tag), "{src}: {}", e.msg);
    }
}
