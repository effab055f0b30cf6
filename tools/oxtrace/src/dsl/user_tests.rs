//! The pid and USDT descriptions compiled against a real process (`passes/user_spec.rs`),
//! checked as the kernel checks the image.

use crate::dsl::{compile, CompileOptions};
use crate::providers::user_tests::run;
use oxtrace_core::program::{Image, ProbeKind};

fn opts(pid: u32) -> CompileOptions {
    let mut o = CompileOptions::with_args("-e", &[]);
    o.macros.insert("target".into(), pid.to_string());
    o
}

#[test]
fn descriptions_of_a_process() {
    let r = run();
    let pid = r.child.id();
    let o = opts(pid);
    let c = compile(
        "pid$target:a.out:work:entry { @[probefunc] = sum(arg0); }\n\
         pid$target:prog:work:return { @r[probemod, arg0] = sum(arg1); }\n\
         pid$target:a.out:work:4, pid$target::tail: { @n[probename] = count(); }\n\
         myprov$target:::fire { trace(arg0); trace(arg1); }",
        "-e",
        &o,
    )
    .unwrap();
    let kinds: Vec<ProbeKind> = c.probes.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            ProbeKind::PidEntry,
            ProbeKind::PidReturn,
            ProbeKind::PidOffset,
            ProbeKind::PidEntry,
            ProbeKind::PidReturn,
            ProbeKind::Usdt
        ]
    );
    assert!(c
        .probes
        .iter()
        .all(|p| p.func.is_empty() && !p.uprobes.is_empty()));
    assert_eq!(c.probes[0].text, format!("pid{pid}:a.out:work:entry"));
    // The kernel's image check: user descriptions have no function and no argument.
    let img = Image::parse(&c.image).unwrap();
    assert!((0..img.probe_count()).all(|i| img.probe(i).unwrap().arg == 0));

    let mut o2 = opts(pid);
    o2.xopts = vec![("maxuprobes".into(), Some("0".into()))];
    let e = compile("BEGIN { }", "-e", &o2).unwrap_err().to_string();
    assert!(e.contains("a probe count from 1 to 65536"), "{e}");
}

#[test]
fn refusals_name_the_process_and_the_probe() {
    let r = run();
    let pid = r.child.id();
    let o = opts(pid);
    let err = |src: &str| compile(src, "-e", &o).unwrap_err().msg;
    let e = err("nope$target::: { }");
    assert!(
        e.contains(&format!("unknown provider 'nope{pid}'")) && e.contains("myprov"),
        "{e}"
    );
    let e = err("myprov$target:::nosuch { }");
    assert!(e.contains("does not match any probes"), "{e}");
    let e = err("pid$target:a.out:nosuchfunc:entry { }");
    assert!(e.contains("no function 'nosuchfunc' in a.out"), "{e}");
    let e = err("pid$target:a.out:work:exit { }");
    assert!(e.contains("not 'exit'"), "{e}");
    let e = err("pid$target:a.out:work:2 { }");
    assert!(
        e.contains("not on an instruction boundary (nearest: 0x0 and 0x4)"),
        "{e}"
    );
    let e = err("pid$target:a.out:nosize:return { }");
    assert!(e.contains("no size"), "{e}");
    let e = err("pid$target:a.out:nosiz*:return { }");
    assert!(
        e.contains("does not match any probes (1 matching functions have no size"),
        "{e}"
    );
    let e = err("pid:::entry { }");
    assert!(e.contains("needs a process"), "{e}");
    let me = std::process::id();
    let e = err(&format!("pid{me}::malloc:entry {{ }}"));
    assert!(e.contains("oxtrace itself"), "{e}");
    let e = err("nope::: { }");
    assert!(
        e.contains("USDT providers of process") && e.contains("myprov"),
        "{e}"
    );
}
