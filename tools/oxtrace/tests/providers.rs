//! The syscall and profile providers in the compiler: descriptions to probes, their
//! arguments in the simulated kernel, and the errors for what does not exist.

mod support;

use oxtrace::providers::syscalls;
use oxtrace::runtime::sim::{Firing, OwnedItem, Sim};
use oxtrace_core::action::IntType;
use oxtrace_core::probe::hz_period;
use oxtrace_core::program::{Image, ProbeKind};
use support::{c, err_text as err};

fn nr(name: &str) -> u64 {
    syscalls::all()
        .iter()
        .find(|s| s.name == name)
        .map(|s| u64::from(s.nr))
        .expect("a system call")
}

#[test]
fn syscall_descriptions_name_one_call_each() {
    let p = c("syscall::read:entry, syscall::openat:return { trace(arg0); }");
    let got: Vec<_> = p
        .probes
        .iter()
        .map(|s| (s.kind, s.func.as_str(), s.period_ns))
        .collect();
    assert_eq!(
        got,
        [
            (ProbeKind::SyscallEntry, "read", 0),
            (ProbeKind::SyscallReturn, "openat", 257)
        ]
    );
    let img = Image::parse(&p.image).unwrap();
    assert_eq!(img.probe(1).unwrap().arg, nr("openat"));
    assert_eq!(img.probe_func(1), Some(&b"openat"[..]));
}

#[test]
fn syscall_globs_and_all() {
    let all = c("syscall:::entry { @[probefunc] = count(); }");
    assert_eq!(all.probes.len(), syscalls::list().len());
    assert!(all.probes.iter().all(|s| s.kind == ProbeKind::SyscallEntry));
    let both = c("syscall::read: { }");
    let kinds: Vec<_> = both.probes.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [ProbeKind::SyscallEntry, ProbeKind::SyscallReturn]);
    let glob = c("syscall::*read*:entry { }");
    let names: Vec<&str> = glob.probes.iter().map(|s| s.func.as_str()).collect();
    assert!(
        names.contains(&"read") && names.contains(&"readv"),
        "{names:?}"
    );
    assert!(names.iter().all(|n| n.contains("read")));
    c("syscall:vmlinux:write:return { }");
}

#[test]
fn syscall_arguments_are_dtraces() {
    let p = c(
        "syscall::write:entry { trace(arg2); } syscall::write:return { trace(arg0); trace(arg1); }",
    );
    let mut s = Sim::default();
    let fire = |kind, args| Firing {
        kind,
        func: "write".into(),
        args,
        retval: 5,
        ..Firing::default()
    };
    s.fire(&p, &fire(ProbeKind::SyscallEntry, [1, 0x1000, 5, 0, 0, 0]));
    s.fire(&p, &fire(ProbeKind::SyscallReturn, [0; 6]));
    // Another call's probes do not fire.
    s.fire(
        &p,
        &Firing {
            func: "read".into(),
            ..fire(ProbeKind::SyscallEntry, [9; 6])
        },
    );
    let got: Vec<_> = s.records.iter().flat_map(|r| r.items.clone()).collect();
    let i = |v| OwnedItem::Int(v, IntType::I64.0);
    assert_eq!(got, [i(5), i(5), i(5)]);
}

#[test]
fn probe_names_of_syscalls_and_profile() {
    let p = c(
        r#"syscall::close:entry, profile-997 { printf("%s:%s:%s:%s\n", probeprov, probemod, probefunc, probename); }"#,
    );
    let mut s = Sim::default();
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::SyscallEntry,
            func: "close".into(),
            ..Firing::default()
        },
    );
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::Profile,
            ..Firing::default()
        },
    );
    assert_eq!(
        s.printf_output(&p),
        "syscall:vmlinux:close:entry\nprofile:::profile-997\n"
    );
}

#[test]
fn profile_rates_and_aliases() {
    let period = |src: &str| {
        let p = c(&format!("{src} {{ }}"));
        assert_eq!(p.probes.len(), 1, "{src}");
        (p.probes[0].kind, p.probes[0].period_ns)
    };
    let prof = ProbeKind::Profile;
    assert_eq!(period("profile-997"), (prof, hz_period(997)));
    assert_eq!(period("profile:::profile-997"), (prof, hz_period(997)));
    assert_eq!(period("profile-1ms"), (prof, 1_000_000));
    assert_eq!(period("profile:hz:99"), (prof, hz_period(99)));
    assert_eq!(period("profile:ms:5"), (prof, 5_000_000));
    assert_eq!(period("profile:s:1"), (prof, 1_000_000_000));
    assert_eq!(period("interval:ms:10"), (ProbeKind::Tick, 10_000_000));
    assert_eq!(period("interval:s:1"), (ProbeKind::Tick, 1_000_000_000));
    // profile-N's profile-0 and profile-1us are out of range
    assert!(err("profile-0 { }").contains("invalid profile rate '0'"));
    assert!(err("profile-1us { }").contains("profile interval out of range"));
    assert!(err("profile:minutes:1 { }").contains("invalid unit 'minutes'"));
}

#[test]
fn unknown_calls_and_providers_name_what_exists() {
    let e = err("syscall::opne:entry { }");
    assert!(
        e.contains("unknown system call 'opne' (did you mean 'open'"),
        "{e}"
    );
    assert!(e.contains("1:1"), "{e}");
    let e = err("syscall::nosuchcall*:entry { }");
    assert!(e.contains("no system call matches 'nosuchcall*'"), "{e}");
    let e = err("syscall::read:exit { }");
    assert!(e.contains("named 'entry' or 'return', not 'exit'"), "{e}");
    let e = err("syscal::read:entry { }");
    assert!(
        e.contains("unknown provider 'syscal' (did you mean 'syscall'?)"),
        "{e}"
    );
    let e = err("syscall:ext4:read:entry { }");
    assert!(e.contains("module 'vmlinux', not 'ext4'"), "{e}");
}

#[test]
fn copyinstr_reads_user_memory_only() {
    let p =
        c(r#"syscall::openat:entry { printf("%s|%s\n", copyinstr(arg1), copyinstr(arg1, 4)); }"#);
    let mut s = Sim::default();
    // A page each: the VM reads strings in chunks up to the page's end, as the kernel does.
    let page = |s: &[u8]| {
        let mut v = s.to_vec();
        v.resize(0x1000, 0);
        v
    };
    s.user_mem.push((0x7000, page(b"/dev/null")));
    // The same address in kernel memory is not what copyinstr reads.
    s.mem.push((0x7000, page(b"kernel")));
    let f = |a1| Firing {
        kind: ProbeKind::SyscallEntry,
        func: "openat".into(),
        args: [0, a1, 0, 0, 0, 0],
        ..Firing::default()
    };
    s.fire(&p, &f(0x7000));
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(s.printf_output(&p), "/dev/null|/dev\n");
    // An unreadable address is a runtime error of the clause, at that address.
    s.fire(&p, &f(0x9000));
    assert_eq!(s.faults.len(), 1);
    assert_eq!(
        s.faults[0].1.kind,
        oxtrace_core::action::FaultKind::BadAddr(0x9000)
    );
    assert!(err("BEGIN { trace(copyinstr(0, 0)); }").contains("size must be a constant from 1"));
    assert!(err("BEGIN { trace(copyinstr(\"x\")); }").contains("[D_PROTO_ARG]"));
}

const FORK_FORMAT: &str = "name: sched_process_fork
ID: 301
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;
\tfield:short delta;\toffset:32;\tsize:2;\tsigned:1;
\tfield:unsigned long args[2];\toffset:40;\tsize:16;\tsigned:0;

print fmt: \"pid=%d\", REC->parent_pid
";

fn fork_format() {
    oxtrace::providers::tracepoints::remember(
        oxtrace::providers::tracepoints::parse_format("sched:sched_process_fork", FORK_FORMAT)
            .unwrap(),
    );
}

#[test]
fn tracepoint_arguments_by_name() {
    fork_format();
    let p = c(
        r#"tracepoint:sched:sched_process_fork, sdt:sched::sched_process_fork {
        printf("%s %d %s %d %s:%s:%s:%s\n", args->parent_comm, args->parent_pid, args->name,
            args->delta, probeprov, probemod, probefunc, probename); }"#,
    );
    assert_eq!(p.probes.len(), 2);
    assert_eq!(p.probes[0].kind, ProbeKind::Tracepoint);
    assert_eq!(
        (p.probes[0].func.as_str(), p.probes[0].period_ns),
        ("sched:sched_process_fork", 301)
    );
    // A record: "bash" as parent_comm, pid 4242, name "child" at offset 64, delta -3.
    let mut rec = vec![0u8; 0x1000];
    rec[8..12].copy_from_slice(b"bash");
    rec[24..28].copy_from_slice(&4242i32.to_le_bytes());
    rec[28..32].copy_from_slice(&(64u32 | (6 << 16)).to_le_bytes());
    rec[32..34].copy_from_slice(&(-3i16).to_le_bytes());
    rec[64..70].copy_from_slice(b"child\0");
    let mut s = Sim::default();
    s.mem.push((0x10000, rec));
    s.fire(
        &p,
        &Firing {
            kind: ProbeKind::Tracepoint,
            func: "sched:sched_process_fork".into(),
            args: [0x10000, 0, 0, 0, 0, 0],
            ..Firing::default()
        },
    );
    let line = "bash 4242 child -3 tracepoint:sched::sched_process_fork\n";
    assert_eq!(s.printf_output(&p), format!("{line}{line}"));
}

#[test]
fn tracepoint_field_errors_name_the_fields() {
    fork_format();
    let e = err("tracepoint:sched:sched_process_fork { trace(args->parent_pdi); }");
    assert!(
        e.contains("tracepoint sched:sched_process_fork has no field 'parent_pdi' (did you mean 'parent_pid'?) (fields: parent_comm, parent_pid, name, delta, args)"),
        "{e}"
    );
    let e = err("tracepoint:sched:sched_process_fork { trace(args->args); }");
    assert!(
        e.contains("field 'args' of sched:sched_process_fork is a unsigned long[2]"),
        "{e}"
    );
    let e = err("BEGIN { trace(args->x); }");
    assert!(
        e.contains("args-> is only available on tracepoint probes"),
        "{e}"
    );
}

#[test]
fn fbt_and_kprobe_take_a_module() {
    let p = c(
        "fbt:ext4:ext4_file_read_iter:entry, fbt:nf_*::return, kprobe:ext4:ext4_sync_fs,
         kretprobe:xfs:xfs_iread, fbt::vfs_read:entry { }",
    );
    let got: Vec<_> = p
        .probes
        .iter()
        .map(|s| (s.kind, s.module.as_str(), s.func.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (ProbeKind::FbtEntry, "ext4", "ext4_file_read_iter"),
            (ProbeKind::FbtReturn, "nf_*", "*"),
            (ProbeKind::FbtEntry, "ext4", "ext4_sync_fs"),
            (ProbeKind::FbtReturn, "xfs", "xfs_iread"),
            (ProbeKind::FbtEntry, "", "vfs_read"),
        ]
    );
    let e = err("fbt:ext.4:f:entry { }");
    assert!(e.contains("invalid module name 'ext.4'"), "{e}");
}

#[test]
fn descriptions_without_a_provider_match_every_provider() {
    // `write:entry` is `::write:entry`: syscall::write:entry (and fbt's, had the kernel a
    // function `write`).
    let p = c("write:entry, sys*::read:return { }");
    let calls: Vec<_> = p
        .probes
        .iter()
        .filter(|s| !matches!(s.kind, ProbeKind::FbtEntry | ProbeKind::FbtReturn))
        .map(|s| (s.kind, s.func.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            (ProbeKind::SyscallEntry, "write"),
            (ProbeKind::SyscallReturn, "read")
        ]
    );
    let p = c(":::BEGIN, *:::END { }");
    let kinds: Vec<_> = p.probes.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [ProbeKind::Begin, ProbeKind::End]);
    let e = err("nosuchfunc_xyz:entry { }");
    assert!(
        e.contains(
            "[D_PDESC_ZERO] probe description ::nosuchfunc_xyz:entry does not match any probes"
        ),
        "{e}"
    );
    // bpftrace's short forms keep their meaning.
    let p = c("kprobe:vfs_read, tick-1s, BEGIN { }");
    let kinds: Vec<_> = p.probes.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [ProbeKind::FbtEntry, ProbeKind::Tick, ProbeKind::Begin]
    );
}
