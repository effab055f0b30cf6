//! Kernel types from BTF in D: typed fbt `args[]`, `curthread`, member chains, casts,
//! `sizeof` and `offsetof` of kernel structs, on a synthetic kernel's BTF, and the errors
//! with and without BTF.

use oxtrace::btf::build::Builder;
use oxtrace::btf::Btf;
use oxtrace::dsl::{compile, CompileOptions, Compiled};
use oxtrace::runtime::sim::{Firing, OwnedItem, Sim};
use oxtrace::sym::ksym::Ksyms;
use oxtrace_core::action::IntType;
use oxtrace_core::program::ProbeKind;
use std::sync::Arc;

/// A small kernel: `struct file` reaching a name through `f_path.dentry->d_name.name`
/// (`struct qstr`'s anonymous union and struct included), `struct task_struct`, and
/// `vfs_read`, `vfs_write`, `do_sys_openat2`.
fn kernel() -> Arc<Btf> {
    let mut b = Builder::new();
    let int = b.int("int", 4, true);
    let uint = b.int("unsigned int", 4, false);
    let u64_ = b.int("long long unsigned int", 8, false);
    let long = b.int("long", 8, true);
    let uchar = b.int("unsigned char", 1, false);
    let chr = b.int("char", 1, true);
    let pid_t = b.typedef("pid_t", int);
    let size_t = b.typedef("size_t", u64_);
    let loff_t = b.typedef("loff_t", long);
    let cuchar = b.constant(uchar);
    let pcuchar = b.ptr(cuchar);
    let hl = b.sou(false, "", 8, &[("hash", uint, 0, 0), ("len", uint, 32, 0)]);
    let un = b.sou(true, "", 8, &[("", hl, 0, 0), ("hash_len", u64_, 0, 0)]);
    let qstr = b.sou(
        false,
        "qstr",
        16,
        &[("", un, 0, 0), ("name", pcuchar, 64, 0)],
    );
    let fwd_dentry = b.fwd(false, "dentry");
    let pdentry = b.ptr(fwd_dentry);
    b.sou(
        false,
        "dentry",
        32,
        &[
            ("d_flags", uint, 0, 0),
            ("d_name", qstr, 64, 0),
            ("d_parent", pdentry, 192, 0),
        ],
    );
    let vfsmount = b.fwd(false, "vfsmount");
    let pmnt = b.ptr(vfsmount);
    let path = b.sou(
        false,
        "path",
        16,
        &[("mnt", pmnt, 0, 0), ("dentry", pdentry, 64, 0)],
    );
    let file = b.sou(
        false,
        "file",
        40,
        &[
            ("f_count", int, 0, 0),
            ("f_mode3", uint, 33, 3),
            ("f_path", path, 64, 0),
            ("f_pos", loff_t, 192, 0),
            ("f_dentry_again", pdentry, 256, 0),
        ],
    );
    let pfile = b.ptr(file);
    let idx = b.int("__ARRAY_SIZE_TYPE__", 4, false);
    let comm = b.array(chr, idx, 16);
    let fwd_task = b.fwd(false, "task_struct");
    let ptask = b.ptr(fwd_task);
    b.sou(
        false,
        "task_struct",
        64,
        &[
            ("__state", uint, 0, 0),
            ("pid", pid_t, 128, 0),
            ("tgid", pid_t, 160, 0),
            ("comm", comm, 256, 0),
            ("real_parent", ptask, 384, 0),
        ],
    );
    let pchar = b.ptr(chr);
    let cchar = b.constant(chr);
    let pcchar = b.ptr(cchar);
    let ploff = b.ptr(loff_t);
    let ssize_t = b.typedef("ssize_t", long);
    let ushort = b.int("short unsigned int", 2, false);
    b.typedef("umode_t", ushort);
    let u8_ = b.typedef("__u8", uchar);
    b.typedef("u8", u8_);
    // A kernel typedef with a name that does not read as a type.
    b.typedef("code", int);
    b.func(
        "vfs_read",
        ssize_t,
        &[
            ("file", pfile),
            ("buf", pchar),
            ("count", size_t),
            ("pos", ploff),
        ],
    );
    b.func(
        "vfs_write",
        ssize_t,
        &[
            ("file", pfile),
            ("buf", pcchar),
            ("count", size_t),
            ("pos", ploff),
        ],
    );
    b.func(
        "do_sys_openat2",
        long,
        &[("dfd", int), ("filename", pcchar), ("how", pchar)],
    );
    b.func("schedule", 0, &[]);
    let ncpu = b.var("nr_cpu_ids", uint);
    let rq = b.var("runqueues", int);
    b.datasec(".data", 4, &[(ncpu, 0, 4)]);
    b.datasec(".data..percpu", 4, &[(rq, 0, 4)]);
    Arc::new(Btf::parse(&b.finish()).unwrap())
}

fn opts(btf: bool) -> CompileOptions {
    CompileOptions {
        btf: btf.then(kernel),
        ksyms: Some(Arc::new(Ksyms::parse(KALLSYMS))),
        ..CompileOptions::default()
    }
}

/// The synthetic kernel's symbols: its variables at 0x5000 and up.
const KALLSYMS: &str = "0000000000005000 D nr_cpu_ids\n0000000000005008 D jiffies\n\
    0000000000005040 D init_task\n0000000000005100 d runqueues\n\
    0000000000005200 b no_type_known\n0000000000006000 T vfs_read\n\
    0000000000007000 d mod_var\t[some_mod]\n";

fn c(src: &str) -> Compiled {
    compile(src, "t.d", &opts(true)).unwrap_or_else(|e| panic!("{e}"))
}

fn err(src: &str, btf: bool) -> String {
    match compile(src, "t.d", &opts(btf)) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => format!("{}: {}", e.position(), e.msg),
    }
}

fn entry(func: &str, args: [u64; 6]) -> Firing {
    Firing {
        kind: ProbeKind::FbtEntry,
        func: func.into(),
        args,
        ..Firing::default()
    }
}

fn word(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A `struct file` at 0x1000 whose path's dentry (0x2000) is named `name` (at 0x3000).
fn file_memory(s: &mut Sim, name: &str) {
    let mut file = vec![0u8; 40];
    file[0..4].copy_from_slice(&7i32.to_le_bytes());
    // f_mode3: 3 bits at bit 33, in the unsigned int at byte 4.
    file[4] = 0b1010;
    file[16..24].copy_from_slice(&word(0x2000));
    file[24..32].copy_from_slice(&(-3i64).to_le_bytes());
    s.mem.push((0x1000, file));
    let mut dentry = vec![0u8; 32];
    dentry[8..12].copy_from_slice(&0xabcdu32.to_le_bytes());
    dentry[12..16].copy_from_slice(&(name.len() as u32).to_le_bytes());
    dentry[16..24].copy_from_slice(&word(0x3000));
    s.mem.push((0x2000, dentry));
    let mut n = name.as_bytes().to_vec();
    n.resize(4096, 0);
    s.mem.push((0x3000, n));
}

/// `s` and NULs to a page, as memory holding a C string.
fn padded(s: &[u8]) -> Vec<u8> {
    let mut v = s.to_vec();
    v.resize(4096, 0);
    v
}

fn items(s: &Sim) -> Vec<OwnedItem> {
    s.records.iter().flat_map(|r| r.items.clone()).collect()
}

#[test]
fn member_chain_from_typed_args() {
    let p = c(r#"fbt::vfs_read:entry {
        trace(stringof(args[0]->f_path.dentry->d_name.name));
        trace(args[0]->f_path.dentry->d_name.len);
        trace(args[0]->f_pos);
        trace(args[0]->f_mode3);
        trace(args[2]);
    }"#);
    let mut s = Sim::default();
    file_memory(&mut s, "hello.txt");
    s.fire(&p, &entry("vfs_read", [0x1000, 0, 4096, 0, 0, 0]));
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(
        items(&s),
        [
            OwnedItem::Str(b"hello.txt".to_vec()),
            OwnedItem::Int(9, IntType::new(4, false).0),
            OwnedItem::Int(-3i64 as u64, IntType::I64.0),
            OwnedItem::Int(0b101, IntType::new(4, false).0),
            OwnedItem::Int(4096, IntType::U64.0),
        ]
    );
}

#[test]
fn casts_sizeof_offsetof_and_curthread() {
    let p = c(r#"fbt::vfs_write:entry {
        trace(((struct file *)arg0)->f_count);
        trace(sizeof(struct file));
        trace(offsetof(struct file, f_path));
        trace(offsetof(struct qstr, name));
        trace(offsetof(struct qstr, len));
        trace(sizeof(struct task_struct));
        trace(sizeof(args[0]->f_path));
        trace(curthread->pid);
        trace(curthread->comm);
        trace(stringof(curthread->real_parent->comm));
    }"#);
    let mut s = Sim::default();
    file_memory(&mut s, "x");
    // The simulated curthread is address 0; its parent at 0x4000.
    let mut task = vec![0u8; 64];
    task[16..20].copy_from_slice(&1234i32.to_le_bytes());
    task[32..37].copy_from_slice(b"child");
    task[48..56].copy_from_slice(&word(0x4000));
    s.mem.push((0, task));
    let mut parent = vec![0u8; 4096];
    parent[32..36].copy_from_slice(b"init");
    s.mem.push((0x4000, parent));
    s.fire(&p, &entry("vfs_write", [0x1000, 0, 0, 0, 0, 0]));
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let u64t = IntType::U64.0;
    assert_eq!(
        items(&s),
        [
            OwnedItem::Int(7, IntType::new(4, true).0),
            OwnedItem::Int(40, u64t),
            OwnedItem::Int(8, u64t),
            OwnedItem::Int(8, u64t),
            OwnedItem::Int(4, u64t),
            OwnedItem::Int(64, u64t),
            OwnedItem::Int(16, u64t),
            OwnedItem::Int(1234, IntType::new(4, true).0),
            OwnedItem::Str(b"child".to_vec()),
            OwnedItem::Str(b"init".to_vec()),
        ]
    );
}

#[test]
fn return_globs_and_other_probes() {
    // On return, args[1] is the return value with the function's return type.
    let p = c("fbt::vfs_read:return { trace(args[1]); trace(args[0]); }");
    let mut s = Sim::default();
    let mut f = entry("vfs_read", [0; 6]);
    f.kind = ProbeKind::FbtReturn;
    f.retval = -14i64 as u64;
    s.fire(&p, &f);
    assert_eq!(
        items(&s),
        [
            OwnedItem::Int(-14i64 as u64, IntType::I64.0),
            OwnedItem::Int(0, IntType::I64.0)
        ]
    );
    // A glob whose functions agree on the argument's type keeps it (const aside).
    c("fbt::vfs_*:entry { trace(args[0]->f_pos); trace(stringof(args[1])); }");
    // Where they disagree, or elsewhere than fbt, args[] are untyped 64-bit integers.
    for src in [
        "fbt::vfs_read:entry, fbt::do_sys_openat2:entry { trace(args[0] + 1); }",
        "syscall::read:entry, syscall::openat:entry { trace(args[1] + 1); }",
        "tick-1s { trace(args[9]); }",
    ] {
        c(src);
    }
    assert_eq!(
        err(
            "fbt::vfs_read:entry, fbt::do_sys_openat2:entry { trace(args[0]->f_pos); }",
            true
        ),
        "1:56: [D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not \
         int64_t (args[0] is untyped: vfs_read() and do_sys_openat2() have different types \
         there (struct file * and int): cast it)"
    );
    assert_eq!(
        err("fbt::vfs_read:return { trace(args[0]->f_pos); }", true),
        "1:30: [D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not \
         int64_t (args[0] is untyped: on return only args[1], the return value, is typed)"
    );
    assert_eq!(
        err("tick-1s { trace(args[0]->f_pos); }", true),
        "1:17: [D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not \
         int64_t (args[0] is untyped: only fbt and syscall probes have typed arguments)"
    );
    // A function BTF does not know: untyped.
    c("fbt::not_in_btf:entry { trace(args[3] * 2); }");
    // A D declaration wins over the kernel's type of the same name.
    let p = c("struct file { long first; };\nfbt::vfs_read:entry { trace(((struct file *)arg0)->first); }");
    let mut s = Sim::default();
    file_memory(&mut s, "x");
    s.fire(&p, &entry("vfs_read", [0x1000, 0, 0, 0, 0, 0]));
    assert_eq!(
        items(&s),
        [OwnedItem::Int(7 | 0b1010 << 32, IntType::I64.0)]
    );
}

#[test]
fn syscall_args_are_typed_from_the_prototype() {
    // openat(int dfd, const char __user *filename, int flags, umode_t mode): the path is a
    // user address, which copyinstr() and stringof() read from user memory.
    let p = c(r#"syscall::openat:entry {
        trace(args[0]); trace(copyinstr(args[1])); trace(stringof(args[1]));
        trace(args[3]); trace(sizeof(args[1]));
    }
    syscall::read:return { trace(args[0]); }"#);
    let mut s = Sim::default();
    s.user_mem.push((0x7000, padded(b"/etc/hostname")));
    let f = Firing {
        kind: ProbeKind::SyscallEntry,
        func: "openat".into(),
        args: [-100i64 as u64, 0x7000, 0, 0o644, 0, 0],
        ..Firing::default()
    };
    s.fire(&p, &f);
    let f = Firing {
        kind: ProbeKind::SyscallReturn,
        func: "read".into(),
        retval: -9i64 as u64,
        ..Firing::default()
    };
    s.fire(&p, &f);
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    assert_eq!(
        items(&s),
        [
            OwnedItem::Int(-100i64 as u64, IntType::new(4, true).0),
            OwnedItem::Str(b"/etc/hostname".to_vec()),
            OwnedItem::Str(b"/etc/hostname".to_vec()),
            OwnedItem::Int(0o644, IntType::new(2, false).0),
            OwnedItem::Int(8, IntType::U64.0),
            OwnedItem::Int(-9i64 as u64, IntType::I64.0),
        ]
    );
    // The argument's C type, in errors; out of range on a single call is an error.
    assert_eq!(
        err("syscall::openat:entry { trace(args[1]->x); }", true),
        "1:31: [D_OP_SOU] operator -> must be applied to a pointer to a struct or union, not char *"
    );
    assert_eq!(
        err("syscall::openat:entry { trace(args[4]); }", true),
        "1:31: [D_ARGS_IDX] args[4] does not exist: openat() has 4 arguments"
    );
    // On return only args[0] is typed; all calls at once disagree: untyped.
    c("syscall::read:return { trace(args[1] + 1); }");
    c("syscall:::entry { trace(args[1] + 1); }");
    // Without BTF C's own integer types and pointers to them are still known.
    let p = compile(
        "syscall::openat:entry { trace(args[0]); trace(copyinstr(args[1])); trace(args[3]); }",
        "t.d",
        &opts(false),
    )
    .unwrap();
    let mut s = Sim::default();
    s.user_mem.push((0x7000, padded(b"/x")));
    let f = Firing {
        kind: ProbeKind::SyscallEntry,
        func: "openat".into(),
        args: [3, 0x7000, 0, 0o644, 0, 0],
        ..Firing::default()
    };
    s.fire(&p, &f);
    assert_eq!(
        items(&s),
        [
            OwnedItem::Int(3, IntType::new(4, true).0),
            OwnedItem::Str(b"/x".to_vec()),
            OwnedItem::Int(0o644, IntType::I64.0),
        ]
    );
}

#[test]
fn external_variables() {
    // nr_cpu_ids from its BTF VAR; jiffies and init_task from the kernel's declarations.
    let p = c(
        "BEGIN { trace(`nr_cpu_ids); trace(vmlinux`jiffies); trace(`init_task.pid);
        trace(stringof(`init_task.comm)); trace(sizeof(`init_task));
        trace((uint64_t)&`init_task.comm); trace((uint64_t)&`no_type_known);
        trace(*(int *)&`no_type_known); }",
    );
    let mut s = Sim::default();
    let mut data = vec![0u8; 0x300];
    data[0..4].copy_from_slice(&4u32.to_le_bytes());
    data[8..16].copy_from_slice(&4294967296u64.to_le_bytes());
    data[0x40 + 16..0x40 + 20].copy_from_slice(&0i32.to_le_bytes());
    data[0x40 + 32..0x40 + 41].copy_from_slice(b"swapper/0");
    data[0x200..0x204].copy_from_slice(&(-5i32).to_le_bytes());
    s.mem.push((0x5000, data));
    s.fire(&p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    let u64t = IntType::U64.0;
    assert_eq!(
        items(&s),
        [
            OwnedItem::Int(4, IntType::new(4, false).0),
            OwnedItem::Int(4294967296, u64t),
            OwnedItem::Int(0, IntType::new(4, true).0),
            OwnedItem::Str(b"swapper/0".to_vec()),
            OwnedItem::Int(64, u64t),
            OwnedItem::Int(0x5060, u64t),
            OwnedItem::Int(0x5200, u64t),
            OwnedItem::Int(-5i64 as u64, IntType::new(4, true).0),
        ]
    );
    // A per-CPU variable's address is its symbol value, its offset in each CPU's area.
    let p = c("BEGIN { trace((uint64_t)&`runqueues); }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(items(&s), [OwnedItem::Int(0x5100, u64t)]);
    let cases = [
        (
            "BEGIN { trace(`nr_cpu_idz); }",
            "1:15: [D_SYM_NOSYM] unknown kernel symbol `nr_cpu_idz (did you mean 'nr_cpu_ids'?)",
        ),
        (
            "BEGIN {\n  trace(`init_task.pidd);\n}",
            "2:9: [D_TYPE_MEMBER] struct task_struct has no member 'pidd' (did you mean 'pid'?)",
        ),
        (
            "BEGIN { trace(`runqueues); }",
            "1:15: [D_SYM_PERCPU] `runqueues is a per-CPU variable: it has one copy per CPU and \
             no single address",
        ),
        (
            "BEGIN { trace(`no_type_known); }",
            "1:15: [D_SYM_NOTYPE] the type of `no_type_known is unknown (the kernel's BTF has no \
             global variables: pahole encodes only the per-CPU ones unless the kernel asks for \
             its global_var feature): read it through a cast of its address, \
             *(TYPE *)&`no_type_known",
        ),
        (
            "BEGIN { trace(some_mod`mod_var); }",
            "1:15: [D_SYM_MODEL] some_mod`mod_var: only the kernel image's symbols are available \
             (vmlinux`mod_var or `mod_var), not module some_mod's",
        ),
        (
            "BEGIN { `jiffies = 1; }",
            "1:9: [D_OP_WRITE] operator requires a writable variable: kernel memory cannot be modified",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(err(src, true), want, "{src}");
    }
}

#[test]
fn casts_to_kernel_typedefs() {
    // `(name)x` of a name D does not declare is a cast to the kernel's typedef.
    let p = c(
        "fbt::vfs_read:entry { trace((pid_t)arg0); trace((umode_t)arg0); trace(sizeof(size_t)); }",
    );
    let mut s = Sim::default();
    s.fire(&p, &entry("vfs_read", [0x1_0001_0005, 0, 0, 0, 0, 0]));
    assert_eq!(
        items(&s),
        [
            OwnedItem::Int(0x1_0005, IntType::new(4, true).0),
            OwnedItem::Int(5, IntType::new(2, false).0),
            OwnedItem::Int(8, IntType::U64.0),
        ]
    );
    assert_eq!(
        err("BEGIN {\n  trace((no_such_t)1);\n}", true),
        "2:9: [D_TYPE_ERR] type no_such_t is not defined"
    );
    assert_eq!(
        err("BEGIN { trace((no_such_t *)arg0); }", true),
        "1:15: [D_TYPE_ERR] type no_such_t is not defined"
    );
    // A parenthesized variable stays one.
    c("BEGIN { x = 1; trace((x) + 1); trace((x)); }");
}

#[test]
fn kernel_typedef_names_are_type_names() {
    // In declarations and in casts a plain cast could not tell from an expression.
    let p = c("__u8 b[4]; loff_t o;
        fbt::vfs_read:entry {
            o = arg0; trace(o); trace(sizeof(b)); trace((umode_t)-1); trace((u8)(arg0 + 0x100));
            code = 7; trace(code);
        }");
    let mut s = Sim::default();
    s.fire(&p, &entry("vfs_read", [5, 0, 0, 0, 0, 0]));
    assert_eq!(
        items(&s),
        [
            OwnedItem::Int(5, IntType::new(8, true).0),
            OwnedItem::Int(4, IntType::U64.0),
            OwnedItem::Int(0xffff, IntType::new(2, false).0),
            OwnedItem::Int(5, IntType::new(1, false).0),
            OwnedItem::Int(7, IntType::new(4, true).0),
        ]
    );
    // Without BTF they are unknown.
    assert!(err("__u8 b[4];", false).contains("[D_SYNTAX]"));
}

#[test]
fn errors_name_the_type_and_member() {
    let cases = [
        (
            "fbt::vfs_read:entry { trace(args[0]->f_paht); }",
            "1:29: [D_TYPE_MEMBER] struct file has no member 'f_paht' (did you mean 'f_path' or 'f_pos'?)",
        ),
        (
            "fbt::vfs_read:entry {\n  trace(args[0]->f_path.dentry->d_nmae.name);\n}",
            "2:9: [D_TYPE_MEMBER] struct dentry has no member 'd_nmae' (did you mean 'd_name'?)",
        ),
        (
            "BEGIN { trace(offsetof(struct qstr, nam)); }",
            "1:15: [D_TYPE_MEMBER] struct qstr has no member 'nam' (did you mean 'name'?)",
        ),
        (
            "BEGIN { trace(curthread->pidd); }",
            "1:15: [D_TYPE_MEMBER] struct task_struct has no member 'pidd' (did you mean 'pid'?)",
        ),
        (
            "fbt::vfs_read:entry { trace(args[4]); }",
            "1:29: [D_ARGS_IDX] args[4] does not exist: vfs_read() has 4 arguments",
        ),
        (
            "fbt::vfs_read:entry { trace(args[arg0]); }",
            "1:29: [D_PROTO_ARG] args[] takes one integer constant index",
        ),
        (
            "BEGIN { trace(sizeof(struct nosuch)); }",
            "1:15: [D_TYPE_ERR] struct nosuch is not defined",
        ),
        (
            "fbt::vfs_read:entry { args[0] = 0; }",
            "1:23: [D_OP_WRITE] operator requires a writable variable: kernel memory cannot be modified",
        ),
        // Module-scoped names (`module_scoped_type_names`).
        (
            "BEGIN { trace(sizeof(struct D`qstr)); }",
            "1:15: [D_TYPE_ERR] struct D`qstr is not defined",
        ),
        (
            "BEGIN { trace(sizeof(nomod`int)); }",
            "1:22: [D_UNKNOWN] failed to resolve type nomod`int: Unknown module name",
        ),
        (
            "BEGIN { trace(sizeof(struct nomod`x)); }",
            "1:15: [D_SIZEOF_TYPE] cannot apply sizeof to an incomplete type (struct nomod`x)",
        ),
        (
            "struct foo`bar { int x; };",
            "1:8: [D_SYNTAX] syntax error: a struct defined in D cannot have the scoped name foo`bar",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(err(src, true), want, "{src}");
    }
}

#[test]
fn without_btf_args_are_untyped_and_kernel_types_unknown() {
    let p = compile(
        "fbt::vfs_read:entry { trace(args[2]); }",
        "t.d",
        &opts(false),
    )
    .unwrap();
    let mut s = Sim::default();
    s.fire(&p, &entry("vfs_read", [1, 2, 4096, 0, 0, 0]));
    assert_eq!(items(&s), [OwnedItem::Int(4096, IntType::I64.0)]);
    let no_btf = "the kernel has no BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF), \
                  so kernel types are unknown: declare it in D";
    assert_eq!(
        err("BEGIN { trace(sizeof(struct file)); }", false),
        format!("1:15: [D_TYPE_ERR] struct file is not defined: {no_btf}")
    );
    assert_eq!(
        err("BEGIN { trace(((struct file *)arg0)->f_pos); }", false),
        format!("1:15: [D_TYPE_ERR] struct file is not defined: {no_btf}")
    );
    assert_eq!(
        err("fbt::vfs_read:entry { trace(args[0]->f_path); }", false),
        "1:29: [D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not \
         int64_t (args[0] is untyped: the kernel has no BTF)"
    );
    assert_eq!(
        err("BEGIN { trace(curthread->pid); }", false),
        "1:15: [D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not void *"
    );
}

#[test]
fn hostile_type_cycles_end() {
    // A typedef and a pointer that name themselves are refused when the blob is parsed,
    // as the kernel's own BTF check refuses them (following one overflowed the stack).
    for self_ref in [true, false] {
        let mut b = Builder::new();
        let int = b.int("int", 4, true);
        let t = if self_ref {
            b.typedef("loop_t", int + 1)
        } else {
            b.ptr(int + 1)
        };
        assert_eq!(t, int + 1);
        let e = Btf::parse(&b.finish()).unwrap_err();
        assert!(
            e.starts_with("BTF type 2 starts a chain of more than 32"),
            "{e}"
        );
    }
    // A struct holding itself by value and an anonymous member that is its own struct:
    // each import ends.
    let mut b = Builder::new();
    let int = b.int("int", 4, true);
    let me = int + 1;
    b.sou(
        false,
        "me",
        16,
        &[("x", int, 0, 0), ("self", me, 32, 0), ("", me, 64, 0)],
    );
    // The pointer to `me` comes after the prototype and the function.
    b.func("f", int, &[("m", me + 3)]);
    b.ptr(me);
    let btf = Arc::new(Btf::parse(&b.finish()).unwrap());
    let o = CompileOptions {
        btf: Some(btf),
        ..CompileOptions::default()
    };
    let src = "fbt::f:entry { trace(args[0]->x); trace(args[0]->self.self.x); trace(sizeof(struct me)); }";
    compile(src, "t.d", &o).unwrap_or_else(|e| panic!("{e}"));
}

/// The running kernel's own BTF, when it has some: the guest test's programs compile
/// against a real kernel's layouts, and offsets that every Linux shares come out right.
#[test]
fn the_running_kernels_types() {
    let Some(btf) = Btf::kernel() else {
        eprintln!("no {}: nothing to check", oxtrace::btf::KERNEL_PATH);
        return;
    };
    let o = CompileOptions {
        btf: Some(Arc::new(btf.unwrap())),
        ..CompileOptions::default()
    };
    for src in [
        "fbt::vfs_read:entry { @[stringof(args[0]->f_path.dentry->d_name.name)] = count(); }",
        "fbt::vfs_read:entry { @[stringof(((struct file *)arg0)->f_path.dentry->d_name.name)] = count(); }",
        "fbt::vfs_read:entry /args[0]->f_path.dentry->d_name.len == 4/ { @s = sum(args[2]); }",
        "fbt::vfs_read:return { @s = sum(args[1] > 0 ? args[1] : 0); }",
        "BEGIN { @[stringof(curthread->comm)] = sum(curthread->pid == tid && curthread->tgid == pid); }",
    ] {
        compile(src, "t.d", &o).unwrap_or_else(|e| panic!("{e}"));
    }
    let p = compile(
        "BEGIN { trace(offsetof(struct qstr, name)); trace(sizeof(struct list_head));
                 trace(offsetof(struct path, dentry)); trace(sizeof(arg0)); }",
        "t.d",
        &o,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    let got: Vec<_> = items(&s)
        .into_iter()
        .map(|i| match i {
            OwnedItem::Int(v, _) => v,
            OwnedItem::Str(_) | OwnedItem::Mem(_) => u64::MAX,
        })
        .collect();
    assert_eq!(got, [8, 16, 8, 8]);
}

#[test]
fn module_scoped_type_names() {
    // A kernel module's scope finds BTF's types, `D` and `C` the program's own.
    let p = c(r#"struct s { int x; int y; };
    typedef struct s s_t;
    struct task_struct { char pad[3]; int mine; };
    BEGIN {
        trace(sizeof(struct vmlinux`file));
        trace(offsetof(struct vmlinux`qstr, name));
        trace(offsetof(struct D`s, y));
        trace(sizeof(D`s_t));
        trace(sizeof(C`int));
        trace(sizeof(D`uint64_t));
        trace(sizeof(struct D`task_struct));
        trace(((struct vmlinux`file *)0)->f_count);
        trace((struct nomod`unknown *)0);
    }"#);
    let mut s = Sim::default();
    s.mem.push((0, vec![7, 0, 0, 0]));
    s.fire(&p, &Firing::default());
    let vals: Vec<_> = items(&s)
        .into_iter()
        .map(|i| match i {
            OwnedItem::Int(v, _) => v,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(vals[..8], [40, 8, 4, 8, 4, 8, 8, 7]);
}
