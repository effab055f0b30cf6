//! Translators (`translator`, `xlate`) and the prelude's process views (`curpsinfo`,
//! `curlwpsinfo`): the substitution, its errors, and the prelude against a synthetic
//! kernel's BTF and the running kernel's.

use oxtrace::btf::build::Builder;
use oxtrace::btf::Btf;
use oxtrace::dsl::{compile, CompileOptions, Compiled};
use oxtrace::runtime::sim::{Firing, OwnedItem, Sim};
use oxtrace_core::action::IntType;
use std::sync::Arc;

fn opts(btf: Option<Arc<Btf>>) -> CompileOptions {
    CompileOptions {
        btf,
        ..CompileOptions::default()
    }
}

fn c_with(src: &str, btf: Option<Arc<Btf>>) -> Compiled {
    compile(src, "t.d", &opts(btf)).unwrap_or_else(|e| panic!("{e}"))
}

fn err_with(src: &str, btf: Option<Arc<Btf>>) -> String {
    match compile(src, "t.d", &opts(btf)) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => format!("{}: {}", e.position(), e.msg),
    }
}

fn items(s: &Sim) -> Vec<OwnedItem> {
    s.records.iter().flat_map(|r| r.items.clone()).collect()
}

/// A small kernel: `struct task_struct` with what `psinfo_t`'s ids, `pr_fname` and
/// `lwpsinfo_t`'s `pr_lwpid`, `pr_pri` read (`struct cred` behind `cred`), and no
/// `signal`.
fn kernel() -> Arc<Btf> {
    let mut b = Builder::new();
    let int = b.int("int", 4, true);
    let uint = b.int("unsigned int", 4, false);
    let chr = b.int("char", 1, true);
    let pid_t = b.typedef("pid_t", int);
    let uid_t = b.typedef("uid_t", uint);
    let gid_t = b.typedef("gid_t", uint);
    let kuid = b.sou(false, "", 4, &[("val", uid_t, 0, 0)]);
    let kuid_t = b.typedef("kuid_t", kuid);
    let kgid = b.sou(false, "", 4, &[("val", gid_t, 0, 0)]);
    let kgid_t = b.typedef("kgid_t", kgid);
    let cred = b.sou(
        false,
        "cred",
        32,
        &[
            ("usage", int, 0, 0),
            ("uid", kuid_t, 32, 0),
            ("gid", kgid_t, 64, 0),
            ("suid", kuid_t, 96, 0),
            ("sgid", kgid_t, 128, 0),
            ("euid", kuid_t, 160, 0),
            ("egid", kgid_t, 192, 0),
        ],
    );
    let ulong = b.int("long unsigned int", 8, false);
    let mm = b.sou(
        false,
        "mm_struct",
        16,
        &[("arg_start", ulong, 0, 0), ("arg_end", ulong, 64, 0)],
    );
    let pmm = b.ptr(mm);
    let ccred = b.constant(cred);
    let pcred = b.ptr(ccred);
    let idx = b.int("__ARRAY_SIZE_TYPE__", 4, false);
    let comm = b.array(chr, idx, 16);
    let fwd_task = b.fwd(false, "task_struct");
    let ptask = b.ptr(fwd_task);
    let u64_t = b.int("long long unsigned int", 8, false);
    b.sou(
        false,
        "task_struct",
        96,
        &[
            ("__state", uint, 0, 0),
            ("pid", pid_t, 128, 0),
            ("tgid", pid_t, 160, 0),
            ("comm", comm, 256, 0),
            ("real_parent", ptask, 384, 0),
            ("cred", pcred, 448, 0),
            ("prio", int, 512, 0),
            ("mm", pmm, 576, 0),
            ("group_leader", ptask, 640, 0),
            ("start_time", u64_t, 704, 0),
        ],
    );
    Arc::new(Btf::parse(&b.finish()).unwrap())
}

fn word(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// The simulated current task (address 0, as `curthread` is in the simulator): pid 1234
/// of process 1200, `child`, parent process 1, uid 1000 gid 100 euid 0 egid 10, prio 120,
/// started at 9_000_000_000 ns, its thread group leader (at 0x8000) at 5_000_000_000.
fn task_memory(s: &mut Sim) {
    let mut task = vec![0u8; 96];
    task[16..20].copy_from_slice(&1234i32.to_le_bytes());
    task[20..24].copy_from_slice(&1200i32.to_le_bytes());
    task[32..37].copy_from_slice(b"child");
    task[48..56].copy_from_slice(&word(0x4000));
    task[56..64].copy_from_slice(&word(0x5000));
    task[64..68].copy_from_slice(&120i32.to_le_bytes());
    task[72..80].copy_from_slice(&word(0x6000));
    task[80..88].copy_from_slice(&word(0x8000));
    task[88..96].copy_from_slice(&word(9_000_000_000));
    s.mem.push((0, task));
    let mut leader = vec![0u8; 96];
    leader[88..96].copy_from_slice(&word(5_000_000_000));
    s.mem.push((0x8000, leader));
    let mut parent = vec![0u8; 96];
    parent[20..24].copy_from_slice(&1i32.to_le_bytes());
    s.mem.push((0x4000, parent));
    let mut cred = vec![0u8; 32];
    cred[4..8].copy_from_slice(&1000u32.to_le_bytes());
    cred[8..12].copy_from_slice(&100u32.to_le_bytes());
    cred[24..28].copy_from_slice(&10u32.to_le_bytes());
    s.mem.push((0x5000, cred));
    // The arguments: "./w", "a b", "" and "c", 11 bytes at 0x7000 (user memory).
    let mut mm = word(0x7000);
    mm.extend(word(0x7000 + 11));
    s.mem.push((0x6000, mm));
    s.user_mem.push((0x7000, b"./w\0a b\0\0c\0zzz".to_vec()));
}

fn run(p: &Compiled) -> Vec<OwnedItem> {
    let mut s = Sim::default();
    task_memory(&mut s);
    s.fire(p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    items(&s)
}

fn int(v: i64, size: u8, signed: bool) -> OwnedItem {
    OwnedItem::Int(v as u64, IntType::new(size, signed).0)
}

fn str(s: &str) -> OwnedItem {
    OwnedItem::Str(s.as_bytes().to_vec())
}

const OUT: &str = "struct out { int sum; char name[16]; int64_t big; void *p; };
";

#[test]
fn user_translator_forms() {
    let src = format!(
        "{OUT}translator struct out < int x > {{
            sum = x * 2; name = x > 10 ? \"big\" : \"small\"; big = (int64_t)x << 40;
        }};
        typedef struct out out_t;
        inline out_t *o = xlate <out_t *> (21);
        int x;
        BEGIN {{
            trace(xlate <struct out> (21).sum);
            trace(xlate <struct out *> (3)->name);
            trace((*xlate <struct out *> (21)).big);
            trace(o->sum + o->sum);
            x = 5;
            trace(xlate <struct out> (x++).sum);
            trace(x);
        }}"
    );
    let p = c_with(&src, None);
    assert_eq!(
        run(&p),
        [
            int(42, 4, true),
            str("small"),
            int(21 << 40, 8, true),
            int(84, 4, true),
            int(10, 4, true),
            int(6, 4, true),
        ]
    );
}

/// A translated member beside 0 in `?:` (the io provider's `b_flags & B_WRITE ? b_bcount :
/// 0`): 0 is NULL only beside a string, and finding the member's type reads no storage.
#[test]
fn translated_member_beside_zero_in_a_conditional() {
    let src = format!(
        "{OUT}translator struct out < int x > {{ sum = x * 2; name = \"n\"; }};
        BEGIN {{
            trace(1 ? xlate <struct out *> (21)->sum : 0);
            trace(0 ? xlate <struct out *> (21)->sum : 0);
            trace(1 ? 0 : xlate <struct out *> (3)->sum);
        }}"
    );
    let p = c_with(&src, None);
    let got = run(&p);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0], int(42, 4, true));
}

#[test]
fn whole_struct_copies() {
    let src = format!(
        "{OUT}translator struct out < int x > {{ sum = x * 2; name = \"n\"; }};
        struct out g;
        BEGIN {{
            this->c = xlate <struct out> (21);
            trace(this->c.sum); trace(this->c.big);
            self->s = *xlate <struct out *> (4);
            trace(self->s.sum);
            g = xlate <struct out> (5);
            trace(g.sum);
        }}"
    );
    let p = c_with(&src, None);
    assert_eq!(
        run(&p),
        [
            int(42, 4, true),
            int(0, 8, true),
            int(8, 4, true),
            int(10, 4, true),
        ]
    );
}

#[test]
fn translator_over_kernel_memory_and_strings() {
    let p = c_with(
        "struct out { int sum; char name[16]; int64_t big; };
         translator struct out < struct task_struct *t > {
             sum = t->pid + t->real_parent->tgid;
             name = stringof(t->comm);
         };
         BEGIN { trace(xlate <struct out *> (curthread)->sum);
                 trace(xlate <struct out *> (curthread)->name);
                 @[xlate <struct out *> (curthread)->name] = count(); }",
        Some(kernel()),
    );
    assert_eq!(run(&p)[..2], [int(1235, 4, true), str("child")]);
}

#[test]
fn the_process_views() {
    let p = c_with(
        "BEGIN { trace(curpsinfo->pr_pid); trace(curpsinfo->pr_ppid);
                 trace(curpsinfo->pr_uid); trace(curpsinfo->pr_gid);
                 trace(curpsinfo->pr_euid); trace(curpsinfo->pr_egid);
                 trace(curpsinfo->pr_fname); trace(curlwpsinfo->pr_lwpid);
                 trace(curlwpsinfo->pr_pri);
                 trace(xlate <psinfo_t *> (curthread)->pr_pid);
                 trace((*curpsinfo).pr_fname == \"child\");
                 trace(curpsinfo->pr_psargs); trace(curpsinfo->pr_start); }",
        Some(kernel()),
    );
    assert_eq!(
        run(&p),
        [
            int(1200, 4, true),
            int(1, 4, true),
            int(1000, 4, false),
            int(100, 4, false),
            int(0, 4, false),
            int(10, 4, false),
            str("child"),
            int(1234, 4, true),
            int(120, 4, true),
            int(1200, 4, true),
            int(1, 4, true),
            str("./w a b  c"),
            // The thread group leader's start, not the thread's.
            int(5_000_000_000, 8, false),
        ]
    );
    // A kernel thread (no mm): its name, as ps shows it.
    let p = c_with("BEGIN { trace(curpsinfo->pr_psargs); }", Some(kernel()));
    let mut s = Sim::default();
    task_memory(&mut s);
    s.mem[0].1[72..80].fill(0);
    s.fire(&p, &Firing::default());
    assert_eq!(items(&s), [str("child")]);
    // Nothing of the prelude is in a program that does not use it.
    let plain = c_with("BEGIN { trace(pid); }", Some(kernel()));
    let none = c_with("BEGIN { trace(pid); }", None);
    assert_eq!(plain.image, none.image);
}

/// BEGIN run once; what its printf()s printed.
fn printed(p: &Compiled) -> String {
    let mut s = Sim::default();
    task_memory(&mut s);
    s.fire(p, &Firing::default());
    assert!(s.faults.is_empty(), "{:?}", s.faults);
    s.printf_output(p)
}

const SOU: &str = "struct in { int i; char c; };
struct out { int oi; char oc; };
";

/// Translators over struct and union inputs, by value: the input's name stands for the
/// translated object (a D struct variable, kernel memory), read in place.
#[test]
fn struct_inputs() {
    let src = format!(
        "{SOU}translator struct out < struct in I > {{ oi = I.i * 2; oc = ((struct in)I).c; }};
        translator struct in < struct out O > {{ i = O.oi + 1; c = O.oc; }};
        struct in a; struct out b; struct out t;
        BEGIN {{
            a.i = 21; a.c = 'x';
            printf(\"%d %c\\n\", xlate <struct out> (a).oi, xlate <struct out *> (a)->oc);
            b = xlate <struct out> (a);
            printf(\"%d %c\\n\", b.oi, b.oc);
            printf(\"%d\\n\", xlate <struct in> (b).i);
            printf(\"%d\\n\", xlate <struct in> (xlate <struct out> (a)).i);
            @k[xlate <struct out> (a).oi] = sum(xlate <struct in> (b).i);
            t.oi = xlate <struct out> (a).oi + 1;
            printf(\"%d %d\\n\", t.oi, t.oc);
        }}"
    );
    let p = c_with(&src, None);
    assert_eq!(printed(&p), "42 x\n42 x\n43\n43\n43 0\n");

    // Over kernel memory: a struct task_struct, from *curthread.
    let p = c_with(
        "struct v { int pid; int tgid; };
         translator struct v < struct task_struct T > { pid = T.pid; tgid = T.tgid; };
         BEGIN { printf(\"%d %d\\n\", xlate <struct v> (*curthread).pid,
                        xlate <struct v *> (*curthread)->tgid); }",
        Some(kernel()),
    );
    assert_eq!(printed(&p), "1234 1200\n");
}

/// Declarations DTrace accepts: partial, duplicate members (the first is used), a
/// translator to itself, a forward tag as the input, union input and output, one output
/// from two inputs.
#[test]
fn declarations_dtrace_accepts() {
    let src = format!(
        "{SOU}union u {{ int i; char c; }};
        translator struct out < struct in *P > {{ oi = P->i; oi = 7; }};
        translator struct out < struct out S > {{ oi = S.oi; oc = S.oc; }};
        translator struct out < struct nowhere *F > {{ oi = 3; }};
        translator struct out < union u *U > {{ oc = U->c; }};
        translator union u < struct in *P > {{ i = P->i; }};
        struct out o, r;
        BEGIN {{
            o.oi = 5; o.oc = 'q';
            r = xlate <struct out> (o);
            printf(\"%d %c %d\\n\", r.oi, r.oc, xlate <struct out *> ((struct nowhere *)0)->oi);
        }}"
    );
    let p = c_with(&src, None);
    assert_eq!(printed(&p), "5 q 3\n");
}

#[test]
fn errors() {
    let k = || Some(kernel());
    let user = |body: &str| {
        format!("{OUT}translator struct out < int x > {{ sum = x; name = \"n\"; }};\n{body}")
    };
    for (src, btf, want) in [
        (
            user("BEGIN { trace(xlate <struct out *> (\"s\")->sum); }"),
            None,
            "3:15: [D_XLATE_NONE] cannot translate from \"string\" to \"struct out *\"",
        ),
        (
            user("BEGIN { trace(xlate <struct out *> (1)->big); }"),
            None,
            "3:15: [D_XLATE_NOCONV] translator does not define conversion for member: big",
        ),
        (
            user("BEGIN { trace(xlate <struct out *> (1)->nope); }"),
            None,
            "3:15: [D_TYPE_MEMBER] nope is not a member of struct out",
        ),
        (
            user("int x; BEGIN { x = xlate <struct out> (1); }"),
            None,
            "3:20: [D_OP_INCOMPAT] operands have incompatible types: \"int\" = \"struct out\"",
        ),
        (
            user("BEGIN { this->p = xlate <struct out *> (1); }"),
            None,
            "3:19: a translation can only be used through its members (xlate <T *> (e)->member, xlate <T> (e).member): the translated struct is never built",
        ),
        (
            user("BEGIN { trace(xlate <struct out> (1)); }"),
            None,
            "3:15: a translation can only be used through its members (xlate <T *> (e)->member, xlate <T> (e).member): the translated struct is never built",
        ),
        (
            user("BEGIN { trace(xlate <struct out> (1)->sum); }"),
            None,
            "3:15: [D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not struct out",
        ),
        (
            user("BEGIN { trace(xlate <struct out *> (1).sum); }"),
            None,
            "3:15: [D_OP_SOU] operator . must be applied to a struct or union, not struct out *",
        ),
        (
            user("BEGIN { xlate <struct out *> (1)->sum = 2; }"),
            None,
            "3:9: [D_OP_LVAL] a translated member is a value, not storage: it cannot be assigned or have its address taken",
        ),
        (
            user("translator struct out < int y > { sum = y; };\nBEGIN { }"),
            None,
            "3:12: [D_XLATE_REDECL] translator from int to struct out has already been declared",
        ),
        (
            "translator int < int x > { };\nBEGIN { }".to_string(),
            None,
            "1:12: [D_XLATE_SOU] translator output type must be a struct or union",
        ),
        (
            format!("{OUT}translator struct out < int x > {{ sum = x; bad = 1; }};\nBEGIN {{ }}"),
            None,
            "2:44: [D_XLATE_MEMB] translator member bad is not a member of struct out",
        ),
        (
            format!("{OUT}translator struct out < int x > {{ name = x; }};\nBEGIN {{ trace(xlate <struct out *> (1)->name); }}"),
            None,
            "2:42: [D_XLATE_INCOMPAT] translator member name definition uses incompatible types: \"string\" = \"int\"",
        ),
        (
            // Checked where declared, though nothing uses it (as D does).
            format!("{OUT}translator struct out < int x > {{ name = x; }};\nBEGIN {{ }}"),
            None,
            "2:42: [D_XLATE_INCOMPAT] translator member name definition uses incompatible types: \"string\" = \"int\"",
        ),
        (
            format!("{OUT}translator struct out < int x > {{ sum = x + nosuch; }};\nBEGIN {{ }}"),
            None,
            "2:45: [D_IDENT_UNDEF] failed to resolve nosuch: it is never assigned or declared",
        ),
        (
            "inline int a = b; inline int b = a; BEGIN { trace(a->x); }".to_string(),
            None,
            // As DTrace: b is not yet defined where a's definition names it.
            "1:16: [D_IDENT_UNDEF] failed to resolve b: it is never assigned or declared",
        ),
        (
            "BEGIN { trace(curpsinfo->pr_pid); }".to_string(),
            None,
            "1:15: [D_IDENT_UNDEF] curpsinfo is translated from the kernel's struct task_struct, which needs the kernel's BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF)",
        ),
        (
            "BEGIN { trace(curpsinfo); }".to_string(),
            k(),
            "1:15: curpsinfo can only be used through its members (xlate <T *> (e)->member, xlate <T> (e).member): the translated struct is never built",
        ),
        (
            "BEGIN { trace(__uargs(0, 1)); }".to_string(),
            k(),
            "1:15: [D_FUNC_UNDEF] unknown function '__uargs'",
        ),
        (
            "BEGIN { trace(curpsinfo->pr_nlwp); }".to_string(),
            k(),
            "1:15: [D_TYPE_MEMBER] struct task_struct has no member 'signal' (translating member pr_nlwp at <prelude>:56:12)",
        ),
        (
            // Declared as in DTrace's view, not translated on Linux.
            "BEGIN { trace(curpsinfo->pr_rssize); }".to_string(),
            k(),
            "1:15: [D_XLATE_NOCONV] translator does not define conversion for member: pr_rssize",
        ),
        (
            "BEGIN { trace(curlwpsinfo->pr_cpu); }".to_string(),
            k(),
            "1:15: [D_XLATE_NOCONV] translator does not define conversion for member: pr_cpu",
        ),
        (
            format!("{SOU}translator struct out < struct in I > {{ oi = I.i; }};\nstruct in *p;\nBEGIN {{ trace(xlate <struct out> (p).oi); }}"),
            None,
            "5:15: [D_XLATE_NONE] cannot translate from \"struct in *\" to \"struct out\"",
        ),
        (
            format!("{SOU}translator struct out < struct in *P > {{ oi = P->i; }};\nstruct in v;\nBEGIN {{ trace(xlate <struct out> (v)->oi); }}"),
            None,
            "5:15: [D_XLATE_NONE] cannot translate from \"struct in\" to \"struct out\"",
        ),
        (
            "struct out { int oi; };\ntranslator struct out < struct gone *G > { oi = G->x; };\nBEGIN { }".to_string(),
            None,
            "2:49: [D_OP_INCOMPLETE] operator -> cannot be applied to a forward declaration: no struct gone definition is available",
        ),
        (
            "translator struct gone < int x > { };\nBEGIN { }".to_string(),
            None,
            "1:12: [D_XLATE_SOU] incomplete struct/union/enum struct gone",
        ),
        (
            "struct out { char *s; };\ntranslator struct out < int x > { s = x; };\nBEGIN { }".to_string(),
            None,
            "2:39: [D_XLATE_INCOMPAT] translator member s definition uses incompatible types: \"char *\" = \"int\"",
        ),
        (
            "struct out { int a; };\ntranslator struct out < char *x > { a = x; };\nBEGIN { }".to_string(),
            None,
            "2:41: [D_XLATE_INCOMPAT] translator member a definition uses incompatible types: \"int\" = \"char *\"",
        ),
        (
            user("BEGIN { trace((uintptr_t)xlate <struct out *> (1)); }"),
            None,
            "3:15: [D_CAST_INVAL] invalid cast expression: \"pointer to translated data\" to \"uint64_t\"",
        ),
        (
            format!("{SOU}translator struct out < struct in I > {{ oi = ((struct out)I).oi; }};\nBEGIN {{ }}"),
            None,
            "3:46: [D_CAST_INVAL] invalid cast expression: \"struct in\" to \"struct out\"",
        ),
    ] {
        assert_eq!(err_with(&src, btf), want, "{src}");
    }
}
/// The running kernel's BTF: every member of the prelude compiles against it.
#[test]
fn the_prelude_on_the_running_kernel() {
    let Some(btf) = Btf::kernel() else {
        eprintln!("no {}: nothing to check", oxtrace::btf::KERNEL_PATH);
        return;
    };
    let btf = Some(Arc::new(btf.unwrap()));
    for m in [
        "pr_nlwp",
        "pr_pid",
        "pr_ppid",
        "pr_pgid",
        "pr_sid",
        "pr_uid",
        "pr_euid",
        "pr_gid",
        "pr_egid",
        "pr_addr",
        "pr_fname",
        "pr_psargs",
        "pr_ttydev",
        "pr_start",
        "pr_argc",
        "pr_argv",
        "pr_envp",
        "pr_dmodel",
        "pr_wstat",
        "pr_taskid",
        "pr_projid",
        "pr_poolid",
        "pr_zoneid",
        "pr_contract",
        "pr_nzomb",
    ] {
        c_with(&format!("BEGIN {{ trace(curpsinfo->{m}); }}"), btf.clone());
    }
    for m in [
        "pr_flag",
        "pr_lwpid",
        "pr_addr",
        "pr_state",
        "pr_sname",
        "pr_nice",
        "pr_pri",
        "pr_clname",
        "pr_onpro",
        "pr_name",
    ] {
        c_with(
            &format!("BEGIN {{ trace(curlwpsinfo->{m}); }}"),
            btf.clone(),
        );
    }
}
