//! Fuzzers of the compiler and of the tool's readers of untrusted input: the D compiler
//! (lexer, parser, type checker, code generation; mutated programs and programs from a
//! grammar, run in the simulator when they compile), BTF, ELF symbol tables and the pid
//! provider's decoding of them, USDT notes, /proc/kallsyms, tracefs format files, and the
//! kernel's records (principal-buffer records, aggregation snapshots). Each target mutates
//! real seeds (`fuzz_support` says how, and what fails an input): no panic, no hang, no
//! unbounded memory, and every refusal a message that says where.
//!
//! `cargo test` runs a short run of each; `make stress` runs 100,000 inputs each
//! (`OXT_FUZZ_CASES=100000`, a release build).

mod fuzz_support;

use fuzz_support::{root, run, Counting};
use oxtrace::agg::{AggTable, SortOrder};
use oxtrace::btf::Btf;
use oxtrace::dsl::{compile, CompileError, CompileOptions};
use oxtrace::providers::process::{Elf, LoadObject};
use oxtrace::providers::{fbt, pid, syscalls, tracepoints, usdt};
use oxtrace::sym::ksym::Ksyms;
use oxtrace::sym::usym::{parse_maps, ElfSyms};
use oxtrace_core::action::{IntType, Items, RecordKind, ITEM_STR};
use oxtrace_core::agg::{AggBuffer, KeyElem, SnapshotCursor};
use oxtrace_core::buffer::{self, Reader};
use oxtrace_core::load;
use oxtrace_core::program::Image;
use proptest::prelude::*;
use std::process::Command;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

#[global_allocator]
static ALLOC: Counting = Counting;

// ---------------------------------------------------------------------------------------
// The D compiler

/// The selftests' D programs: single-quoted shell words that hold a clause.
fn d_seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let dir = root().join("selftests/oxtrace");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sh"))
        .collect();
    files.sort();
    for f in files {
        // The shell's '\'' (a quote inside a quoted word) is part of the word.
        let text = std::fs::read_to_string(&f)
            .unwrap()
            .replace("'\\''", "\u{1}");
        for (i, w) in text.split('\'').enumerate() {
            if i % 2 == 1 && (w.contains('{') || w.contains(":::")) && w.len() < 4000 {
                v.push(w.replace('\u{1}', "'").into_bytes());
            }
        }
    }
    v.sort();
    v.dedup();
    v
}

const D_TOKENS: &[&str] = &[
    "BEGIN",
    "END",
    "ERROR",
    "{",
    "}",
    "/",
    "@",
    "@x",
    "self->",
    "this->",
    "->",
    "[",
    "]",
    "(",
    ")",
    ";",
    ",",
    "printf(\"%d %s\\n\", ",
    "count()",
    "quantize(",
    "lquantize(",
    "llquantize(",
    "sum(",
    "avg(",
    "stddev(",
    "min(",
    "max(",
    "arg0",
    "args[",
    "args->",
    "execname",
    "pid",
    "tid",
    "timestamp",
    "probefunc",
    "stringof(",
    "copyinstr(",
    "strlen(",
    "stack()",
    "ustack()",
    "`jiffies",
    "curthread->",
    "(int)",
    "(char *)",
    "(struct task_struct *)",
    "sizeof(",
    "?",
    ":",
    "==",
    "!=",
    "&&",
    "||",
    "<<",
    ">>",
    "+=",
    "++",
    "--",
    "0x",
    "\"",
    "'",
    "\\",
    "#pragma D option quiet\n",
    "#pragma D option bufsize=",
    "$1",
    "$target",
    "fbt::vfs_read:entry",
    "syscall::read:entry",
    "syscall:::return",
    "tracepoint:sched:sched_process_fork",
    "tracepoint:fuzz:event",
    "profile-997",
    "tick-1s",
    "pid$target:a.out:main:entry",
    "speculation()",
    "speculate(",
    "commit(",
    "alloca(",
    "copyin(",
    "bcopy(",
    "inline int x = 3;",
    "struct s { int a; char b[4]; };",
    "translator",
    "xlate<",
    "printa(",
    "trunc(@, ",
    "clear(@)",
    "normalize(@, ",
    "exit(0)",
    "system(\"\")",
    "string",
    "int",
    "unsigned long",
    "char[16]",
    "uint64_t",
    "9999999999999999999999",
    "18446744073709551615",
    "-9223372036854775808",
    "é",
    "\u{1F600}",
    "\0",
    "\t",
    "\n",
    "/*",
    "*/",
    "//",
    "strjoin(",
    "substr(",
    "lltostr(",
    "usym(",
    "sym(",
    "func(",
    "ufunc(",
    "uaddr(",
    "mod(",
    "progenyof(",
    "rand()",
    "basename(",
    "dirname(",
    "htons(",
    "inet_ntoa(",
    "index(",
    "strtok(",
    "tolower(",
    "toupper(",
    "trace(",
    "tracemem(",
    "printm(",
    "raise(",
    "stop()",
    "chill(",
    "breakpoint()",
    "panic()",
    "setopt(",
    "ftruncate()",
    "freopen(",
    "ucaller",
    "caller",
    "errno",
    "uregs[",
    "walltimestamp",
    "vtimestamp",
    "cpu",
    "curcpu->",
    "curpsinfo->",
    "curlwpsinfo->",
    "fds[",
    "`",
    "#define",
    "sdt:::",
    "proc:::exec",
];

fn dict(tokens: &[&str]) -> Vec<Vec<u8>> {
    tokens.iter().map(|t| t.as_bytes().to_vec()).collect()
}

/// The kernel's types: the host's BTF when it has one.
fn kernel_btf() -> Option<Arc<Btf>> {
    static B: OnceLock<Option<Arc<Btf>>> = OnceLock::new();
    B.get_or_init(|| {
        let b = std::fs::read("/sys/kernel/btf/vmlinux").ok()?;
        Some(Arc::new(Btf::parse(&b).expect("the host's BTF parses")))
    })
    .clone()
}

const KSYMS: &str = "ffffffff81000000 T _text\n\
ffffffff81001000 T vfs_read\n\
ffffffff81002000 t helper\n\
ffffffff82000000 D jiffies\n\
ffffffff82000100 B nr_threads\n\
ffffffffa0000000 t mod_fn\t[oxtrace]\n";

fn compile_opts() -> CompileOptions {
    let mut o = CompileOptions::with_args("fuzz", &["1".into(), "two".into()]);
    // Programs that do not use both arguments are what the fuzzer is about, not refusals.
    o.xopts.push(("argref".into(), None));
    o.btf = kernel_btf();
    o.ksyms = Some(Arc::new(Ksyms::parse(KSYMS)));
    o
}

/// Checks a compiler refusal: it says where, inside the source.
fn check_error(src: &str, e: &CompileError) -> Result<(), String> {
    let lines = src.split('\n').count();
    if e.msg.trim().is_empty() || e.line == 0 || e.col == 0 || e.line > lines {
        return Err(format!("a refusal without a position: {e:?}"));
    }
    let shown = e.to_string();
    if !shown.contains(&format!("{}:{}:{}", e.input, e.line, e.col)) {
        return Err(format!("the message shows no position: {shown}"));
    }
    Ok(())
}

/// Compiles `src`: a refusal with a position, or an image the kernel's own LOAD check
/// accepts (code generation never hands the kernel what it refuses). `Ok(true)`: accepted.
fn compile_one(src: &str, opts: &CompileOptions) -> Result<bool, String> {
    match compile(src, "-e", opts) {
        Err(e) => check_error(src, &e).map(|_| false),
        Ok(c) => {
            let img = Image::parse(&c.image).map_err(|e| format!("image refused: {e:?}"))?;
            load::check_load(&img, |_| Ok::<(), oxtrace_core::diag::Refusal>(()))
                .map_err(|e| format!("the kernel would refuse the image: {e:?}"))?;
            Ok(true)
        }
    }
}

#[test]
fn fuzz_dsl_compiler() {
    let opts = compile_opts();
    let seeds = d_seeds();
    assert!(seeds.len() > 100, "only {} D programs found", seeds.len());
    // `$target`: a process of our own, for the pid and USDT descriptions to resolve in.
    struct Target(std::process::Child);
    impl Drop for Target {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let target = Target(Command::new("sleep").arg("3600").spawn().expect("sleep"));
    let mut opts = opts;
    opts.macros
        .insert("target".into(), target.0.id().to_string());
    if std::env::var_os("OXT_FUZZ_SHOW_REFUSALS").is_some() {
        for sd in &seeds {
            if let Err(e) = compile(&String::from_utf8_lossy(sd), "-e", &opts) {
                eprintln!("seed refused: {}", e.msg);
            }
        }
    }
    let accepted = std::sync::atomic::AtomicUsize::new(0);
    run("dsl", &seeds, &dict(D_TOKENS), |b| {
        let r = compile_one(&String::from_utf8_lossy(b), &opts);
        if r == Ok(true) {
            accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        r.map(|_| ())
    });
    eprintln!(
        "fuzz dsl: {} inputs compiled to an image the LOAD check accepts",
        accepted.into_inner()
    );
}

/// Integer expressions of D, from a grammar: most are well-typed, so they reach the type
/// checker's deeper rules and code generation, not only the parser.
fn int_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "7",
            "0x7fffffff",
            "0xffffffffffffffff",
            "9223372036854775807",
            "'a'",
            "arg0",
            "arg1",
            "arg5",
            "pid",
            "tid",
            "cpu",
            "timestamp",
            "walltimestamp",
            "uid",
            "errno",
            "x",
            "self->y",
            "this->z",
            "a[1]",
            "a[x]",
            "b[\"k\", 2]",
            "curthread->pid",
            "sizeof(int)",
            "sizeof(x)",
            "rand()",
            "strlen(execname)",
            "strlen(probefunc)",
            "(int)arg0",
            "(uint8_t)arg1",
            "(int16_t)-5",
            "stackdepth",
        ])
        .prop_map(str::to_string),
        any::<i64>().prop_map(|v| v.to_string()),
    ];
    leaf.prop_recursive(5, 48, 3, |inner| {
        let op = prop::sample::select(vec![
            "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "==", "!=", "<", ">", "<=", ">=",
            "&&", "||", "^^",
        ]);
        prop_oneof![
            (inner.clone(), op, inner.clone()).prop_map(|(a, o, b)| format!("({a} {o} {b})")),
            (
                prop::sample::select(vec![
                    "-",
                    "!",
                    "~",
                    "(int)",
                    "(uint32_t)",
                    "(char)",
                    "(long)"
                ]),
                inner.clone()
            )
                .prop_map(|(o, a)| format!("{o}({a})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("({c} ? {a} : {b})")),
            (str_expr_leaf(), inner.clone(), inner.clone())
                .prop_map(|(s, a, b)| format!("strlen(substr({s}, {a}, {b}))")),
            inner.clone().prop_map(|a| format!("strlen(lltostr({a}))")),
        ]
    })
}

fn str_expr_leaf() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "execname",
        "probefunc",
        "probename",
        "probeprov",
        "probemod",
        "\"\"",
        "\"abc\"",
        "\"a\\tb\\n\"",
        "s",
        "self->s",
        "strjoin(execname, \"x\")",
        "lltostr(arg0)",
        "stringof(arg1)",
        "basename(\"/a/b\")",
        "dirname(\"/a/b\")",
        "toupper(execname)",
        "curthread->comm",
    ])
    .prop_map(str::to_string)
}

/// A statement of a clause.
fn statement() -> impl Strategy<Value = String> {
    let e = int_expr;
    prop_oneof![
        e().prop_map(|v| format!("x = {v};")),
        e().prop_map(|v| format!("self->y = {v};")),
        e().prop_map(|v| format!("this->z = {v};")),
        (e(), e()).prop_map(|(k, v)| format!("a[{k}] = {v};")),
        (e(), e()).prop_map(|(k, v)| format!("b[\"k\", {k}] = {v};")),
        str_expr_leaf().prop_map(|v| format!("s = {v};")),
        str_expr_leaf().prop_map(|v| format!("self->s = {v};")),
        e().prop_map(|v| format!("trace({v});")),
        str_expr_leaf().prop_map(|v| format!("trace({v});")),
        (e(), str_expr_leaf())
            .prop_map(|(v, t)| format!("printf(\"%d %s %x\\n\", {v}, {t}, {v});")),
        e().prop_map(|v| format!("@c[{v}] = count();")),
        (str_expr_leaf(), e()).prop_map(|(k, v)| format!("@s[{k}] = sum({v});")),
        e().prop_map(|v| format!("@q = quantize({v});")),
        e().prop_map(|v| format!("@l = lquantize({v}, -10, 100, 10);")),
        e().prop_map(|v| format!("@ll = llquantize({v}, 10, 0, 6, 20);")),
        e().prop_map(|v| format!("@m = max({v}); @n = min({v}); @a = avg({v}); @d = stddev({v});")),
        Just("@st[stack()] = count();".to_string()),
        e().prop_map(|v| format!("this->p = (int *)alloca(16); *this->p = {v}; trace(*this->p);")),
        e().prop_map(|v| format!("trunc(@c, {v} & 7); printa(@c);")),
        e().prop_map(|v| format!("exit({v});")),
    ]
}

/// A program of one to three clauses over probes the simulated world can fire.
fn program() -> impl Strategy<Value = String> {
    let clause = (
        prop::sample::select(vec![
            "BEGIN",
            "END",
            "tick-1s",
            "profile-997",
            "fbt::vfs_read:entry",
            "fbt::vfs_read:return",
            "syscall::read:entry",
            "syscall::read:return",
        ]),
        prop::option::of(int_expr()),
        prop::collection::vec(statement(), 1..5),
    )
        .prop_map(|(p, pred, body)| {
            let pred = pred.map_or(String::new(), |e| format!(" /{e}/"));
            format!(
                "{p}{pred}\n{{\n\tthis->z = 0;\n\t{}\n}}\n",
                body.join("\n\t")
            )
        });
    // Every variable and @c assigned first, so that most programs type-check.
    let decls = "BEGIN\n{\n\tx = 0; self->y = 0; a[0] = 0; b[\"k\", 0] = 0; s = \"\";\n\t\
                 self->s = \"\"; @c[0] = count();\n}\n";
    prop::collection::vec(clause, 1..4).prop_map(move |c| format!("{decls}{}", c.concat()))
}

/// Programs from the grammar: compiled, the image checked as LOAD checks it, and the
/// BEGIN clauses run in the simulator (the kernel's interpreter, on the host).
#[test]
fn fuzz_dsl_grammar() {
    use oxtrace::runtime::sim::{Firing, Sim};
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let opts = compile_opts();
    // Each program costs more than a mutated input: the short run makes fewer.
    let cases = match std::env::var_os("OXT_FUZZ_CASES") {
        Some(_) => fuzz_support::cases(),
        None => 50,
    };
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let accepted = std::sync::atomic::AtomicUsize::new(0);
    let t0 = std::time::Instant::now();
    let r = runner.run(&(program(), any::<[u64; 6]>()), |(src, args)| {
        let t = std::time::Instant::now();
        if std::env::var_os("OXT_FUZZ_SHOW_REFUSALS").is_some() {
            if let Err(e) = compile(&src, "-e", &opts) {
                eprintln!("refused: {}", e.msg);
            }
        }
        let ok =
            compile_one(&src, &opts).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        if ok {
            accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let c = compile(&src, "-e", &opts).unwrap();
            let mut sim = Sim::default();
            sim.fire(
                &c,
                &Firing {
                    args,
                    ..Firing::default()
                },
            );
        }
        let limit = fuzz_support::input_limit();
        prop_assert!(t.elapsed() < limit, "slower than {limit:?}: {src}");
        Ok(())
    });
    if let Err(e) = r {
        panic!("fuzz dsl-grammar: {e}");
    }
    eprintln!(
        "fuzz dsl-grammar: {} programs in {:.1} s, {} compiled and ran in the simulator",
        cases,
        t0.elapsed().as_secs_f64(),
        accepted.into_inner()
    );
}

// ---------------------------------------------------------------------------------------
// BTF

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// The host's BTF cut to its first `n` types and the strings they name: a real blob small
/// enough to parse 100,000 times.
fn cut_btf(b: &[u8], n: usize) -> Option<Vec<u8>> {
    let hdr = le32(b, 4) as usize;
    let (toff, tlen, soff, slen) = (le32(b, 8), le32(b, 12), le32(b, 16), le32(b, 20));
    let types = b.get(hdr + toff as usize..hdr + (toff + tlen) as usize)?;
    let strs = b.get(hdr + soff as usize..hdr + (soff + slen) as usize)?;
    let (mut off, mut maxstr) = (0usize, 0u32);
    for _ in 0..n {
        if off + 12 > types.len() {
            break;
        }
        let info = le32(types, off + 4);
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        maxstr = maxstr.max(le32(types, off));
        let (extra, each, named) = match kind {
            1 => (4, 0, false),     // INT
            3 => (12, 0, false),    // ARRAY
            4 | 5 => (0, 12, true), // STRUCT, UNION
            6 => (0, 8, true),      // ENUM
            13 => (0, 8, true),     // FUNC_PROTO
            14 => (4, 0, false),    // VAR
            15 => (0, 12, false),   // DATASEC
            17 => (4, 0, false),    // DECL_TAG
            19 => (0, 12, true),    // ENUM64
            _ => (0, 0, false),
        };
        let body = off + 12 + extra;
        if named {
            for i in 0..vlen {
                maxstr = maxstr.max(le32(types, body + i * each));
            }
        }
        off = body + vlen * each;
    }
    let send = strs[maxstr as usize..].iter().position(|&c| c == 0)? + maxstr as usize + 1;
    let mut out = b[..hdr].to_vec();
    out[8..12].copy_from_slice(&0u32.to_le_bytes());
    out[12..16].copy_from_slice(&(off as u32).to_le_bytes());
    out[16..20].copy_from_slice(&(off as u32).to_le_bytes());
    out[20..24].copy_from_slice(&(send as u32).to_le_bytes());
    out.extend_from_slice(&types[..off]);
    out.extend_from_slice(&strs[..send]);
    Some(out)
}

fn btf_seeds() -> Vec<Vec<u8>> {
    use oxtrace::btf::build::Builder;
    let mut v = Vec::new();
    let mut b = Builder::new();
    let int = b.int("int", 4, true);
    let ch = b.int("char", 1, true);
    let arr = b.array(ch, int, 16);
    let p = b.ptr(arr);
    let s = b.sou(
        false,
        "task",
        24,
        &[("pid", int, 0, 0), ("comm", arr, 32, 0), ("p", p, 128, 0)],
    );
    let ps = b.ptr(s);
    let td = b.typedef("task_t", ps);
    let c = b.constant(td);
    b.fwd(true, "u");
    b.enumeration("e", &[("A", 1), ("B", -1)]);
    b.func("vfs_read", int, &[("t", c), ("n", int)]);
    let var = b.var("jiffies", int);
    b.datasec(".data", 8, &[(var, 0, 4)]);
    b.float("double", 8);
    v.push(b.finish());
    if let Ok(k) = std::fs::read("/sys/kernel/btf/vmlinux") {
        for n in [40, 400, 3000] {
            v.extend(cut_btf(&k, n));
        }
    }
    v
}

/// Programs compiled against each BTF blob that parses.
const BTF_PROGRAMS: &[&str] = &[
    "fbt::vfs_read:entry { trace(args[0]->pid); trace(*args[0]->p); trace(args[1]); }",
    "BEGIN { trace(sizeof(struct task)); trace(offsetof(struct task, comm));
     trace(((struct task *)arg0)->comm); this->t = (task_t)arg1; trace(this->t->pid); }",
    "BEGIN { trace(`jiffies); trace(sizeof(task_t)); trace((enum e)1); }",
];

#[test]
fn fuzz_btf() {
    let seeds = btf_seeds();
    // The synthetic blob has every type the programs name: each compiles against it.
    let o = CompileOptions {
        btf: Some(Arc::new(Btf::parse(&seeds[0]).unwrap())),
        ksyms: Some(Arc::new(Ksyms::parse(KSYMS))),
        ..CompileOptions::default()
    };
    for src in BTF_PROGRAMS {
        compile(src, "-e", &o).unwrap_or_else(|e| panic!("{e}"));
    }
    run("btf", &seeds, &[], |b| match Btf::parse(b) {
        Err(e) if e.trim().is_empty() => Err("an empty refusal".into()),
        Err(_) => Ok(()),
        Ok(btf) => {
            for id in 0..btf.len() as u32 {
                let _ = btf.type_name(id);
                let _ = btf.strip(id, true);
            }
            for ns in [
                oxtrace::btf::NameKind::Typedef,
                oxtrace::btf::NameKind::Func,
                oxtrace::btf::NameKind::Struct,
                oxtrace::btf::NameKind::Union,
                oxtrace::btf::NameKind::Enum,
            ] {
                let names: Vec<String> = btf.names(ns).take(50).map(str::to_string).collect();
                for n in names {
                    let _ = btf.find(ns, &n);
                }
            }
            let _ = btf.func("vfs_read");
            let _ = btf.var("jiffies");
            // The compiler's import of these types: typed arguments, casts, members,
            // sizes, an external variable.
            let o = CompileOptions {
                btf: Some(Arc::new(btf)),
                ksyms: Some(Arc::new(Ksyms::parse(KSYMS))),
                ..CompileOptions::default()
            };
            for src in BTF_PROGRAMS {
                compile_one(src, &o)?;
            }
            Ok(())
        }
    });
}

// ---------------------------------------------------------------------------------------
// ELF files: symbol tables, the pid provider's decoding, USDT notes

/// ELF files built from the selftests' C sources: a program with USDT notes and
/// semaphores, the same stripped to its dynamic symbols, and a shared library.
fn elf_seeds() -> Vec<Vec<u8>> {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let src = root().join("selftests/oxtrace");
        let dir = std::env::temp_dir().join(format!("oxt-fuzz-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cc = |args: &[&str], out: &str| {
            let st = Command::new("cc")
                .args(args)
                .arg("-o")
                .arg(dir.join(out))
                .status()
                .expect("cc");
            assert!(
                st.success(),
                "cc {args:?} failed (is systemtap-sdt-dev installed?)"
            );
            std::fs::read(dir.join(out)).unwrap()
        };
        let usdt_c = src.join("oxt_usdt.c");
        let lib_c = src.join("oxt_pid_lib.c");
        let usdt = cc(&["-O2", usdt_c.to_str().unwrap()], "usdt");
        let _ = Command::new("strip")
            .arg("-s")
            .arg(dir.join("usdt"))
            .status();
        let stripped = std::fs::read(dir.join("usdt")).unwrap();
        let lib = cc(
            &["-O2", "-fPIC", "-shared", lib_c.to_str().unwrap()],
            "lib.so",
        );
        let _ = std::fs::remove_dir_all(&dir);
        vec![usdt, stripped, lib]
    })
    .clone()
}

const ELF_TOKENS: &[&[u8]] = &[
    b"\x7fELF",
    b"stapsdt\0",
    b".note.stapsdt\0",
    b".stapsdt.base\0",
    b".symtab\0",
    b".dynsym\0",
    b"-4@%edi 8@-16(%rbp)\0",
    b"8@counter(%rip)\0",
    b"\xc3",
    b"\xe9\x00\x10\x00\x00",
    b"\xff\xff\xff\xff",
];

fn obj() -> LoadObject {
    LoadObject {
        path: "/fuzz/obj".into(),
        name: "obj".into(),
        exe: true,
        first_map: (0x5555_5555_4000, 0),
    }
}

#[test]
fn fuzz_elf_symbols_and_pid() {
    let seeds = elf_seeds();
    let dict: Vec<Vec<u8>> = ELF_TOKENS.iter().map(|t| t.to_vec()).collect();
    run("elf", &seeds, &dict, |b| {
        let Some(syms) = ElfSyms::parse(b) else {
            return Ok(());
        };
        let probe: Vec<u64> = syms.functions().iter().take(64).map(|f| f.0).collect();
        for a in probe {
            let _ = syms.function_at(a);
            let _ = syms.function_at(a.wrapping_add(3));
            let _ = syms.file_offset(a);
            let _ = syms.is_ifunc(a);
        }
        let _ = syms.named("main");
        let elf = Rc::new(Elf {
            data: b.to_vec(),
            syms,
        });
        let objs = [obj()];
        let get = |_: &str| Some(elf.clone());
        for (func, name) in [
            ("*", "*"),
            ("main", "entry"),
            ("main", "return"),
            ("main", "4"),
        ] {
            if let Err(e) = pid::resolve_in(4242, &objs, &get, "", func, name) {
                if e.trim().is_empty() {
                    return Err("an empty refusal".into());
                }
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_usdt_notes() {
    let seeds = elf_seeds();
    let dict: Vec<Vec<u8>> = ELF_TOKENS.iter().map(|t| t.to_vec()).collect();
    run("usdt", &seeds, &dict, |b| {
        let sites = match usdt::sites(b) {
            Ok(s) => s,
            Err(e) if e.trim().is_empty() => return Err("an empty refusal".into()),
            Err(_) => return Ok(()),
        };
        let mut provs: Vec<&str> = sites.iter().map(|s| s.provider.as_str()).collect();
        provs.sort_unstable();
        provs.dedup();
        let Some(syms) = ElfSyms::parse(b) else {
            return Ok(());
        };
        let elf = Rc::new(Elf {
            data: b.to_vec(),
            syms,
        });
        let objs = [obj()];
        let get = |_: &str| Some(elf.clone());
        for p in provs.iter().take(4) {
            if let Err(e) = usdt::resolve_in(p, 4242, &objs, &get, "", "", "") {
                if e.trim().is_empty() {
                    return Err("an empty refusal".into());
                }
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_usdt_operands() {
    let seeds: Vec<Vec<u8>> = [
        "-4@%edi 8@-16(%rbp)",
        "8@(%rax,%rdx,8) 2@0x10(,%r12,4) 1@%r8b",
        "8@counter(%rip) 8@16+counter(%rip) 8@counter-8(%rip)",
        "-8@$-3 4@$5 8@%rsp 8@%r15",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let sym = |n: &str| (n == "counter").then_some(0x7000_0000u64);
    let toks = [
        "@", "%", "(", ")", ",", "$", "-", "+", "0x", "%rip", "%eax", "counter", " ",
    ];
    run(
        "usdt-operands",
        &seeds,
        &dict(&toks),
        |b| match usdt::parse_args(&String::from_utf8_lossy(b), &sym) {
            Err(e) if e.trim().is_empty() => Err("an empty refusal".into()),
            _ => Ok(()),
        },
    );
}

// ---------------------------------------------------------------------------------------
// /proc/kallsyms, /proc/PID/maps, tracefs format files

fn kallsyms_seeds() -> Vec<Vec<u8>> {
    let mut v = vec![KSYMS.as_bytes().to_vec()];
    if let Ok(t) = std::fs::read_to_string("/proc/kallsyms") {
        // A slice of the real table, modules' symbols included (they come last).
        let lines: Vec<&str> = t.lines().collect();
        v.push(lines[..lines.len().min(300)].join("\n").into_bytes());
        v.push(
            lines[lines.len().saturating_sub(300)..]
                .join("\n")
                .into_bytes(),
        );
    }
    v
}

#[test]
fn fuzz_kallsyms() {
    let toks = [
        " T ",
        " t ",
        " D ",
        " b ",
        "\t[",
        "]",
        "\n",
        "ffffffff",
        "0000000000000000 ",
    ];
    run("kallsyms", &kallsyms_seeds(), &dict(&toks), |b| {
        let text = String::from_utf8_lossy(b);
        let k = Ksyms::parse(&text);
        for pc in [0, 0xffffffff81000010, 0xffffffffa0000004, u64::MAX] {
            let _ = k.format(pc);
            let _ = k.format_addr(pc);
        }
        let _ = k.lookup("vfs_read", None);
        let _ = k.lookup("mod_fn", Some("oxtrace"));
        let _ = k.data_names().count();
        let bl = fbt::parse_blacklist(&text);
        let _ = fbt::parse_kallsyms(&text, &bl);
        let _ = fbt::parse_filter_functions(&text, &bl);
        let _ = syscalls::kallsyms_entries(&text);
        Ok(())
    });
}

#[test]
fn fuzz_proc_maps() {
    let mut seeds = vec![
        b"55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1234 /usr/bin/prog\n\
55d0c0a02000-55d0c0a05000 r-xp 00002000 08:01 1234 /usr/bin/prog\n\
7f0000000000-7f0000020000 r-xp 00000000 08:01 99 /lib/libc.so.6 (deleted)\n\
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n"
            .to_vec(),
    ];
    if let Ok(t) = std::fs::read("/proc/self/maps") {
        seeds.push(t);
    }
    let toks = [
        "-",
        " r-xp ",
        " /",
        "[vdso]",
        " (deleted)",
        "\n",
        "ffffffffffffffff",
    ];
    run("maps", &seeds, &dict(&toks), |b| {
        let text = String::from_utf8_lossy(b);
        let _ = parse_maps(&text);
        let objs = oxtrace::providers::process::objects_of(&text, Some("/usr/bin/prog"));
        for o in &objs {
            let _ = oxtrace::providers::process::module_matches("libc", o);
            let _ = oxtrace::providers::process::module_matches("a.out", o);
        }
        Ok(())
    });
}

const FORMATS: &[&str] = &[
    "name: sched_process_fork\nID: 301\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\
\tfield:short delta;\toffset:32;\tsize:2;\tsigned:1;\n\
\tfield:unsigned long args[2];\toffset:40;\tsize:16;\tsigned:0;\n\n\
print fmt: \"pid=%d\", REC->parent_pid\n",
    "name: sys_enter_openat\nID: 620\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;\n\n\
print fmt: \"dfd: 0x%08lx\", ((unsigned long)(REC->dfd))\n",
];

/// The clause the format fuzzer compiles against each format it parses: every field.
fn format_program(f: &tracepoints::Format) -> String {
    let mut s = String::from("tracepoint:fuzz:event { ");
    for fl in f.fields.iter().take(16) {
        if fl.name.starts_with("common_") {
            continue;
        }
        s.push_str(&format!("trace(args->{}); ", fl.name));
    }
    s.push('}');
    s
}

#[test]
fn fuzz_tracepoint_formats() {
    let seeds: Vec<Vec<u8>> = FORMATS.iter().map(|s| s.as_bytes().to_vec()).collect();
    let toks = [
        "field:",
        "offset:",
        "size:",
        "signed:",
        ";",
        "\t",
        "\n",
        "[",
        "]",
        "__data_loc ",
        "char",
        "4294967295",
        "4294967296",
        "ID: ",
        "unsigned long",
        "[]",
    ];
    let opts = compile_opts();
    run("tracepoint-format", &seeds, &dict(&toks), |b| {
        let text = String::from_utf8_lossy(b);
        let f = match tracepoints::parse_format("fuzz:event", &text) {
            Ok(f) => f,
            Err(e) if e.trim().is_empty() => return Err("an empty refusal".into()),
            Err(_) => return Ok(()),
        };
        let prog = format_program(&f);
        tracepoints::remember(f);
        compile_one(&prog, &opts).map(|_| ())
    });
}

// ---------------------------------------------------------------------------------------
// The kernel's records

const RECORDS_PROG: &str = "#pragma D option quiet
BEGIN {
	printf(\"%d %s %x %c %-10s %5.2d %p %lld %u %o %i\\n\", 1, \"a\", 2, 65, \"b\", 3, 4, 5, 6, 7, 9);
	trace(7); trace(\"s\");
	@c[probefunc] = count(); @q = quantize(1); @l = lquantize(1, 0, 10, 1);
	@ll = llquantize(1, 10, 0, 6, 20); @s[1, \"x\"] = sum(1); @a = avg(1); @sd = stddev(1);
	@mn = min(1); @mx = max(1); @st[stack()] = count();
	printa(@c); printa(\"%s %@d\\n\", @c); exit(3);
}";

fn item_int(o: &mut Vec<u8>, v: u64, t: u8) {
    o.push(t);
    o.extend_from_slice(&v.to_le_bytes());
}

fn item_str(o: &mut Vec<u8>, s: &[u8]) {
    o.push(ITEM_STR);
    o.extend_from_slice(&(s.len() as u16).to_le_bytes());
    o.extend_from_slice(s);
}

/// A principal buffer as the probe context writes it, one record of each kind the seed
/// program makes.
fn buffer_seed() -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let mut off = 0;
    let mut printf = Vec::new();
    for (i, t) in [1u64, 0, 2, 65, 0, 3, 4, 5, 6, 7, 9].iter().enumerate() {
        match i {
            1 => item_str(&mut printf, b"a"),
            4 => item_str(&mut printf, b"b"),
            _ => item_int(&mut printf, *t, (i % 8) as u8),
        }
    }
    let mut trace_i = Vec::new();
    item_int(&mut trace_i, 7, 3);
    let mut trace_s = Vec::new();
    item_str(&mut trace_s, b"s");
    let mut printa = Vec::new();
    item_int(&mut printa, u32::MAX as u64, 3);
    let mut exit = Vec::new();
    item_int(&mut exit, 3, 3);
    let err = [0u8; 16];
    for (kind, id, data) in [
        (RecordKind::Printf as u32, 0, &printf[..]),
        (RecordKind::Trace as u32, 0, &trace_i[..]),
        (RecordKind::Trace as u32, 0, &trace_s[..]),
        (RecordKind::Printa as u32, 0, &printa[..]),
        (RecordKind::Exit as u32, 0, &exit[..]),
        (buffer::KIND_ERROR, 2, &err[..]),
    ] {
        assert!(buffer::write(&mut buf, &mut off, kind, 0, id, 1000, data));
    }
    buf.truncate(off);
    buf
}

fn records_prog() -> &'static oxtrace::dsl::Compiled {
    static P: OnceLock<oxtrace::dsl::Compiled> = OnceLock::new();
    P.get_or_init(|| {
        let o = CompileOptions {
            ksyms: Some(Arc::new(Ksyms::parse(KSYMS))),
            ..Default::default()
        };
        compile(RECORDS_PROG, "-e", &o).unwrap_or_else(|e| panic!("{e}"))
    })
}

#[test]
fn fuzz_principal_buffer_records() {
    let prog = records_prog();
    let toks: Vec<Vec<u8>> = vec![vec![ITEM_STR, 0xff, 0xff], vec![7], vec![0x18, 0, 0, 0]];
    run("records", &[buffer_seed()], &toks, |b| {
        for r in Reader::new(b) {
            let Ok(r) = r else { break };
            let items: Vec<_> = Items::new(r.data).collect();
            match RecordKind::from_u32(r.hdr.record_kind()) {
                Some(RecordKind::Printf) => {
                    let _ = prog.format_printf(r.hdr.id, &items);
                }
                Some(_) => {
                    let _ = oxtrace::output::printf::format_trace(&items, false, Some(256));
                    let _ = oxtrace::output::printf::format_trace(&items, true, None);
                }
                None => {}
            }
        }
        Ok(())
    });
}

/// Aggregation snapshots as the kernel serializes them: every aggregation of the seed
/// program with a few keys, over two CPUs.
fn snapshot_seed(dict: &oxtrace::agg::Dictionary) -> Vec<u8> {
    let mut out = Vec::new();
    for cpu in 0..2u32 {
        let mut mem = vec![0u64; 1 << 14];
        AggBuffer::format(&mut mem).unwrap();
        let mut b = AggBuffer::attach(&mut mem).unwrap();
        for d in dict.iter() {
            for k in 0..3u64 {
                let keys: Vec<KeyElem<'_>> = d
                    .keys
                    .iter()
                    .map(|f| match f.kind {
                        oxtrace::agg::KeyKind::Int { .. } => KeyElem::Int(k),
                        _ => KeyElem::Str(b"vfs_read"),
                    })
                    .collect();
                b.apply(d.id, &d.func, &keys, k as i64 * 7 - 3, 1).unwrap();
            }
        }
        let mut buf = vec![0u8; b.snapshot_len()];
        let mut cur = SnapshotCursor::new();
        let mut len = 0;
        while !cur.is_done() {
            len += b.serialize(cpu, &mut buf[len..], &mut cur).unwrap();
        }
        out.extend_from_slice(&buf[..len]);
    }
    out
}

#[test]
fn fuzz_aggregation_snapshots() {
    let prog = records_prog();
    let dict = oxtrace::runtime::dictionary(prog).unwrap();
    let seed = snapshot_seed(&dict);
    let n = prog.aggs.len() as u32;
    run("aggregations", &[seed], &[], |b| {
        let mut t = AggTable::new(oxtrace::runtime::dictionary(prog).unwrap());
        if let Err(e) = t.merge_snapshots(b) {
            if e.to_string().trim().is_empty() {
                return Err("an empty refusal".into());
            }
        }
        let order = SortOrder::default();
        let mut s = String::new();
        for id in 0..n {
            let _ = t.printa(id, order, &mut s);
        }
        let _ = t.printa_format(0, "%s %@d\n", order, &mut s);
        let _ = t.to_json(order);
        let _ = t.to_openmetrics("oxtrace");
        let _ = t.to_folded(order);
        let _ = IntType(0);
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// Regressions: ELF files that lie (the fuzzers' seeds, patched)

/// The file offset and size of section `name` of ELF `b`.
fn section_of(b: &[u8], name: &str) -> (usize, usize) {
    use object::{Object, ObjectSection};
    let f = object::File::parse(b).unwrap();
    let s = f.section_by_name(name).unwrap();
    let (off, size) = s.file_range().unwrap();
    (off as usize, size as usize)
}

/// A USDT note whose description runs past the section is refused, saying which note and
/// what it claims (it was "a truncated note", without a place).
#[test]
fn usdt_note_that_lies_about_its_size() {
    let mut b = elf_seeds()[0].clone();
    assert!(!usdt::sites(&b).unwrap().is_empty());
    let (off, size) = section_of(&b, ".note.stapsdt");
    b[off + 4..off + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let e = usdt::sites(&b).unwrap_err();
    assert_eq!(
        e,
        format!(
            ".note.stapsdt: the note at offset 0 says its name is 8 bytes and its description \
             4294967280: past the end of the section ({size} bytes)"
        )
    );
}

/// A function whose symbol's size runs past the end of the file is refused as such for
/// return probes (it was "has no size in its symbol table", which was not true).
#[test]
fn symbol_size_past_the_end_of_the_file() {
    use object::{Object, ObjectSection, ObjectSymbol};
    let mut b = elf_seeds()[0].clone();
    let (st_off, main_at) = {
        let f = object::File::parse(&b[..]).unwrap();
        let symtab = f.section_by_name(".symtab").unwrap();
        let (off, _) = symtab.file_range().unwrap();
        let main = f.symbols().find(|s| s.name() == Ok("main")).unwrap();
        (off as usize, main.index().0)
    };
    // Elf64_Sym: st_size is the last 8 of its 24 bytes.
    let at = st_off + main_at * 24 + 16;
    b[at..at + 8].copy_from_slice(&0x7fff_fff0u64.to_le_bytes());
    let syms = ElfSyms::parse(&b).unwrap();
    let elf = Rc::new(Elf { data: b, syms });
    let get = |_: &str| Some(elf.clone());
    let e = pid::resolve_in(1, &[obj()], &get, "", "main", "return").unwrap_err();
    assert!(
        e.starts_with("function main of obj: its symbol's size (0x7ffffff0 bytes from file offset")
            && e.contains("runs past the end of the file"),
        "{e}"
    );
    // Entry needs no size.
    assert_eq!(
        pid::resolve_in(1, &[obj()], &get, "", "main", "entry")
            .unwrap()
            .entry
            .len(),
        1
    );
}
