//! The stable providers `proc`, `sched` and `io` (`providers/stable.rs`): their expansion
//! into the kernel's probes, the clause copies it compiles, and its refusals, against the
//! running kernel's BTF and formats of the tracepoints they use given here.

use oxtrace::btf::Btf;
use oxtrace::dsl::{compile, CompileOptions, Compiled};
use oxtrace::providers::tracepoints::{parse_format, remember};
use oxtrace_core::program::ProbeKind;
use std::sync::Arc;

/// sched_switch, sched_process_exec and sched_process_exit as Linux 6.12 formats them.
fn formats() {
    let common = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
";
    let f = |name: &str, id: u64, fields: &str| {
        let text = format!("name: {name}\nID: {id}\nformat:\n{common}\n{fields}");
        remember(parse_format(&format!("sched:{name}"), &text).unwrap());
    };
    f(
        "sched_switch",
        300,
        "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;
",
    );
    f(
        "sched_process_exec",
        301,
        "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;
",
    );
    f(
        "sched_process_exit",
        302,
        "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;
",
    );
}

fn btf() -> Option<Arc<Btf>> {
    formats();
    match Btf::kernel() {
        Some(b) => Some(Arc::new(b.unwrap())),
        None => {
            eprintln!("no {}: nothing to check", oxtrace::btf::KERNEL_PATH);
            None
        }
    }
}

fn c(src: &str, btf: &Arc<Btf>) -> Compiled {
    let o = CompileOptions {
        btf: Some(btf.clone()),
        ..CompileOptions::default()
    };
    compile(src, "t.d", &o).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn err(src: &str, btf: Option<Arc<Btf>>) -> String {
    let o = CompileOptions {
        btf,
        ..CompileOptions::default()
    };
    match compile(src, "t.d", &o) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => format!("{}: {}", e.position(), e.msg),
    }
}

/// (kind, function, description) of each probe a program enables.
fn probes(p: &Compiled) -> Vec<(ProbeKind, String, String)> {
    p.probes
        .iter()
        .map(|s| (s.kind, s.func.clone(), s.text.clone()))
        .collect()
}

fn s(v: &str) -> String {
    v.to_string()
}

#[test]
fn stable_probes_enable_their_hooks_named_as_themselves() {
    let Some(b) = btf() else { return };
    let p = c("proc:::exec-success { trace(curpsinfo->pr_psargs); }", &b);
    assert_eq!(
        probes(&p),
        [(
            ProbeKind::Tracepoint,
            s("sched:sched_process_exec"),
            s("proc:vmlinux::exec-success")
        )]
    );
    let p = c(
        "proc:::create, proc:::lwp-create { trace(args[1 - 1]->pr_addr); }",
        &b,
    );
    let want = |name: &str| {
        (
            ProbeKind::FbtEntry,
            s("wake_up_new_task"),
            format!("proc:vmlinux::{name}"),
        )
    };
    assert_eq!(probes(&p), [want("create"), want("lwp-create")]);
    // Globs over names, providers' probes in -l's order, each hook once.
    let p = c("proc:::signal-* { @[probename] = count(); }", &b);
    let names: Vec<String> = probes(&p).into_iter().map(|x| x.2).collect();
    assert_eq!(
        names,
        [
            "proc:vmlinux::signal-clear",
            "proc:vmlinux::signal-handle",
            "proc:vmlinux::signal-send"
        ]
    );
    let p = c("sched:::*-cpu { @[probename] = count(); }", &b);
    assert_eq!(
        probes(&p)
            .into_iter()
            .map(|x| (x.0, x.1))
            .collect::<Vec<_>>(),
        [
            (ProbeKind::Tracepoint, s("sched:sched_switch")),
            (ProbeKind::FbtEntry, s("finish_task_switch*")),
            (ProbeKind::FbtReturn, s("pick_next_task_fair"))
        ]
    );
    // remain-cpu: the fair pick's return, when it picked the running thread; preempt:
    // a switch of a runnable thread but the idle task's.
    let p = c(
        "sched:::remain-cpu, sched:::preempt { @[probename] = count(); }",
        &b,
    );
    assert_eq!(p.probes.len(), 2);
    // wait-start and wait-done have two hooks each (io_schedule, io_schedule_timeout).
    let p = c("io::: { @[probename] = count(); }", &b);
    assert_eq!(p.probes.len(), 6);
    assert_eq!(p.clause_spans.len(), 6);
}

#[test]
fn a_clause_is_compiled_once_per_hook_and_once_for_other_probes() {
    let Some(b) = btf() else { return };
    // One clause on a system call and two stable probes: three copies, each enabled on
    // its own probes, in description order of the plain ones first.
    let p = c(
        "proc:::exec-success, syscall::execve:entry, proc:::exit { @[probename] = count(); }",
        &b,
    );
    let ranges: Vec<_> = p.clause_spans.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(ranges, [0..1, 1..2, 2..3]);
    assert_eq!(p.probes[0].text, "syscall::execve:entry");
    // Two descriptions naming the same stable probe share its copy.
    let p = c("sched:::sleep, sched:::s* { trace(1); }", &b);
    assert_eq!(p.clause_spans.len(), 2);
    let n: usize = p.clause_spans.iter().map(|(_, r)| r.len()).sum();
    assert_eq!(n, p.probes.len());
}

#[test]
fn the_names_are_the_stable_probes_constants() {
    let Some(b) = btf() else { return };
    // probeprov and friends compile to string constants in a stable probe's copy: the
    // names appear in the image's strings, the underlying ones do not.
    let p = c(
        "proc:::exec-success { printf(\"%s:%s:%s:%s\", probeprov, probemod, probefunc, probename); }",
        &b,
    );
    let img = String::from_utf8_lossy(&p.image).into_owned();
    assert!(img.contains("exec-success"), "{img:?}");
    assert!(img.contains("vmlinux"));
}

#[test]
fn the_translated_types_read_through_args() {
    let Some(b) = btf() else { return };
    for src in [
        "proc:::create { trace(args[0]->pr_psargs); trace(args[0]->pr_ppid); }",
        "proc:::exec { trace(args[0]); } proc:::exec-failure { trace(args[0]); }",
        "proc:::exit { trace(args[0] == CLD_EXITED); }",
        "proc:::lwp-create { trace(args[0]->pr_lwpid); trace(args[1]->pr_pid); }",
        "proc:::signal-send { trace(args[0]->pr_lwpid); trace(args[1]->pr_pid); trace(args[2]); }",
        "proc:::signal-handle { trace(args[0]); trace(args[1]->si_signo); trace(args[2]); }",
        "proc:::signal-clear { trace(args[0]); }",
        "sched:::enqueue, sched:::dequeue { trace(args[0]->pr_pri); trace(args[1]->pr_pid); trace(args[2]->cpu_id); }",
        "sched:::wakeup, sched:::tick, sched:::surrender { trace(args[0]->pr_lwpid); trace(args[1]->pr_fname); }",
        "sched:::change-pri { trace(args[2] - args[0]->pr_pri); }",
        "sched:::on-cpu { trace(curcpu->cpu_id); trace(curlwpsinfo->pr_onpro); }",
        "io:::start, io:::done { trace(args[0]->b_bcount); trace(args[0]->b_flags & B_WRITE);
           trace(args[0]->b_blkno); trace(args[0]->b_edev); trace(args[1]->dev_statname);
           trace(args[1]->dev_pathname); trace(args[1]->dev_major); trace(args[2]->fi_name);
           trace(args[2]->fi_offset); }",
        // providers.rst's examples.
        "proc:::exec-success { printf(\"%d %s\\n\", pid, curpsinfo->pr_psargs); }",
        "proc:::signal-send { @[execname, args[1]->pr_fname, args[2]] = count(); }",
        "sched:::off-cpu { self->ts = timestamp; }
         sched:::on-cpu /self->ts/ { @[execname] = quantize(timestamp - self->ts); self->ts = 0; }",
        "io:::start { @[args[1]->dev_statname,
           args[0]->b_flags & B_READ ? \"R\" : \"W\"] = sum(args[0]->b_bcount); }",
    ] {
        c(src, &b);
    }
}

#[test]
fn refusals_say_why() {
    let b = btf();
    let Some(k) = b.clone() else { return };
    let e = |src: &str| err(src, Some(k.clone()));
    assert_eq!(
        e("proc:::exec-sucess { }"),
        "1:1: no proc probe matches 'proc:::exec-sucess' (did you mean 'exec-success' or 'exec'?) (proc probes: create, exec, exec-failure, exec-success, exit, lwp-create, lwp-exit, lwp-start, signal-clear, signal-handle, signal-send, start)"
    );
    assert_eq!(
        e("proc::fork:create { }"),
        "1:1: proc probes have no function: write proc:::NAME, not 'proc::fork:create'"
    );
    assert_eq!(
        e("proc:::exec-success { trace(args[0]); }"),
        "1:29: [D_ARGS_IDX] proc:::exec-success has no args[0] (it has no arguments)"
    );
    assert_eq!(
        e("proc:::create { trace(args[1]); }"),
        "1:23: [D_ARGS_IDX] proc:::create has no args[1] (args[0]: psinfo_t *)"
    );
    assert_eq!(
        e("proc:::signal-send { trace(arg2); }"),
        "1:28: arg2 is not available on stable probe proc:::signal-send: use args[2] (args[0]: lwpsinfo_t *, args[1]: psinfo_t *, args[2]: int)"
    );
    assert_eq!(
        e("sched:::sleep { trace(args->next_pid); }"),
        "1:23: args-> reads a tracepoint's record: not available on stable probe sched:::sleep (it has no arguments)"
    );
    assert!(e("proc:::create { trace(args[0]->nope); }").contains("nope"));
    // Without the kernel's BTF the translators cannot be compiled.
    assert_eq!(
        err("proc:::create { }", None),
        "1:1: proc:::create: the stable providers translate the kernel's structs, which needs the kernel's BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF)"
    );
}

#[test]
fn the_table_is_consistent() {
    use oxtrace::providers::stable::{find, matching, PROBES};
    for p in PROBES {
        assert!(!p.hooks.is_empty(), "{}", p.name);
        for h in p.hooks {
            assert_eq!(h.args.len(), p.types.len(), "{}:::{}", p.prov, p.name);
        }
        assert!(std::ptr::eq(find(&p.full()).unwrap(), p));
        assert!(std::ptr::eq(
            find(&format!("{}:::{}", p.prov, p.name)).unwrap(),
            p
        ));
    }
    let n = |prov| PROBES.iter().filter(|p| p.prov == prov).count();
    assert_eq!((n("proc"), n("sched"), n("io")), (12, 11, 4));
    assert_eq!(matching("sched", "", "", "*-cpu").len(), 3);
    assert_eq!(matching("proc", "vmlinux", "*", "signal-*").len(), 3);
    assert!(matching("proc", "", "f", "create").is_empty());
    assert!(find("tracepoint:sched::sched_switch").is_none());
}

/// A kernel whose `struct task_struct` has only `pid`, `tgid` and `comm`.
fn small_kernel() -> Arc<Btf> {
    use oxtrace::btf::build::Builder;
    let mut b = Builder::new();
    let int = b.int("int", 4, true);
    let chr = b.int("char", 1, true);
    let comm = b.array(chr, int, 16);
    b.sou(
        false,
        "task_struct",
        32,
        &[
            ("pid", int, 0, 0),
            ("tgid", int, 32, 0),
            ("comm", comm, 64, 0),
        ],
    );
    Arc::new(Btf::parse(&b.finish()).unwrap())
}

#[test]
fn a_kernel_without_a_member_fails_at_the_use_naming_the_prelude() {
    formats();
    let k = small_kernel();
    // The condition and args[1] of lwp-create only read pid and tgid: fine.
    c("proc:::lwp-create { trace(args[1]->pr_pid); }", &k);
    // exit's condition reads task_struct's signal, which this kernel lacks: the error is at
    // the clause, naming the inline and its line in the prelude.
    let e = err("proc:::exit { trace(args[0]); }", Some(k.clone()));
    assert!(
        e.starts_with("1:1: [D_TYPE_MEMBER] struct task_struct has no member 'signal'")
            && e.contains("(in __proc_exit_when at <prelude>:"),
        "{e}"
    );
    // exec's path reads struct filename: the error is where args[0] is read.
    let e = err("proc:::exec { trace(args[0]); }", Some(k));
    assert!(
        e.starts_with("1:21: ") && e.contains("(in __proc_exec_path at <prelude>:"),
        "{e}"
    );
}

#[test]
fn off_cpu_reads_the_incoming_thread_through_this_cpus_run_queue() {
    let Some(b) = btf() else { return };
    let ksyms = oxtrace::sym::ksym::Ksyms::parse(
        "ffffffff81c51790 D __per_cpu_offset\n000000000002d140 D runqueues\n",
    );
    let o = CompileOptions {
        btf: Some(b),
        ksyms: Some(Arc::new(ksyms)),
        ..CompileOptions::default()
    };
    // curcpu's package and cpuinfo_x86 are in the per-CPU cpu_info.
    let ksyms = oxtrace::sym::ksym::Ksyms::parse(
        "ffffffff81c51790 D __per_cpu_offset\n000000000002d140 D runqueues\n\
         0000000000015010 D cpu_info\n",
    );
    let o = CompileOptions {
        ksyms: Some(Arc::new(ksyms)),
        ..o
    };
    let p = compile(
        "sched:::on-cpu { trace(curcpu->cpu_chip); trace(curcpu->cpu_info); }",
        "t.d",
        &o,
    );
    assert!(p.is_ok(), "{:?}", p.err().map(|e| e.msg));
    let src = "sched:::off-cpu { trace(args[0]->pr_lwpid); trace(args[1]->pr_fname); }";
    let p = compile(src, "t.d", &o).unwrap_or_else(|e| panic!("{e}"));
    // Without the kernel's symbols, the error says which is missing, where args[0] is read.
    let none = CompileOptions {
        ksyms: Some(Arc::new(oxtrace::sym::ksym::Ksyms::parse(
            "0000000000002d140 D runqueues\n",
        ))),
        ..o.clone()
    };
    let e = compile(src, "t.d", &none).unwrap_err();
    assert!(
        e.msg.contains("__per_cpu_offset") && (e.line, e.col) == (1, 25),
        "{}:{}: {}",
        e.line,
        e.col,
        e.msg
    );
    assert_eq!(p.probes[0].func, "sched:sched_switch");
    // A per-CPU variable is still not readable as a variable.
    let o2 = o.clone();
    let e = compile("BEGIN { trace(`runqueues.nr_running); }", "t.d", &o2).unwrap_err();
    assert!(e.msg.contains("per-CPU"), "{}", e.msg);
}
