//! What the tool says when LOAD refuses a program: the probe, clause, aggregation or option
//! and why, in `diag`'s words, never a bare "(os error N)".

use oxtrace::dsl::{compile, compile_unchecked, CompileOptions, Compiled};
use oxtrace::runtime::device::DeviceError;
use oxtrace::runtime::{attach_table, load_error, Source};
use oxtrace_core::abi;
use oxtrace_core::diag::Refusal;
use oxtrace_core::program::Image;
use std::io;
use std::path::Path;

fn words(prog: &Compiled, src: &str, errno: i32, l: &abi::Load) -> String {
    let t = attach_table(prog, &["vfs_read".to_string(), "ksys_read".to_string()]).unwrap();
    let e = DeviceError::new(
        Path::new("/dev/oxtrace"),
        "LOAD",
        io::Error::from_raw_os_error(errno),
    );
    let msg = load_error(
        prog,
        &Source {
            text: src,
            name: "t.d",
        },
        &t,
        &e,
        l,
    );
    assert!(!msg.contains("os error"), "{msg}");
    msg
}

/// The `struct oxt_load` a kernel refusal fills in.
fn load_of(r: &Refusal) -> abi::Load {
    abi::Load {
        err_kind: r.kind,
        err_index: r.index,
        err_part: r.part,
        err_insn: r.insn,
        err_code: r.code,
        err_arg: r.arg,
        ..Default::default()
    }
}

/// The kernel's verdict on the image a compiler without checks would send.
fn kernel_refusal(src: &str, xopts: &[(&str, &str)]) -> (Compiled, Refusal) {
    let mut o = CompileOptions::default();
    for (k, v) in xopts {
        o.xopts.push((k.to_string(), Some(v.to_string())));
    }
    assert!(
        compile(src, "t.d", &o).is_err(),
        "the compiler must refuse it first"
    );
    let p = compile_unchecked(src, "t.d", &o).unwrap();
    let r = match Image::parse(&p.image) {
        Err(e) => Refusal::image(&e),
        Ok(img) => oxtrace_core::load::check_load(&img, |_| Ok::<(), Refusal>(())).unwrap_err(),
    };
    (p, r)
}

#[test]
fn option_refusal_names_the_option() {
    let src = "BEGIN { exit(0); }";
    let (p, r) = kernel_refusal(src, &[("bufsize", "1g")]);
    assert_eq!(r.kind, abi::LOADERR_IMAGE);
    assert_eq!(
        words(&p, src, libc::EINVAL, &load_of(&r)),
        "failed to load program: option bufsize=1073741824: value out of range"
    );
}

#[test]
fn aggregation_refusal_names_the_aggregation_and_the_rule() {
    let src = "BEGIN { @lat = llquantize(1, 10, 0, 6, 3); }";
    let (p, r) = kernel_refusal(src, &[]);
    assert_eq!(
        words(&p, src, libc::EINVAL, &load_of(&r)),
        "failed to load program: @lat: llquantize( ) factor (argument #1) must be evenly \
         divisible by the number of steps per magnitude (argument #4) when the steps are \
         fewer than the factor"
    );
}

#[test]
fn dynvarsize_refusal_says_what_one_variable_needs() {
    let src = "BEGIN { a[execname] = 1; }";
    let (p, r) = kernel_refusal(src, &[("dynvarsize", "4k"), ("strsize", "4096")]);
    let msg = words(&p, src, libc::EINVAL, &load_of(&r));
    assert!(
        msg.starts_with(
            "failed to load program: dynvarsize too small: one dynamic variable needs "
        ),
        "{msg}"
    );
}

#[test]
fn scratch_refusal_names_the_clause() {
    let src = format!("BEGIN {{\n{}}}\n", "\ttrace(execname);\n".repeat(60));
    let (p, r) = kernel_refusal(&src, &[("strsize", "4096")]);
    assert_eq!(r.kind, abi::LOADERR_VERIFY);
    assert_eq!(
        words(&p, &src, libc::EINVAL, &load_of(&r)),
        "failed to load program: clause at t.d:1:1 actions, instruction 138: needs more than \
         262144 bytes of scratch space (lower strsize or use fewer strings)"
    );
}

#[test]
fn attach_and_probe_refusals_name_the_probe() {
    let src = "fbt::vfs_read:entry, fbt::ksys_*:entry { }";
    let p = compile(src, "t.d", &CompileOptions::default()).unwrap();
    let l = abi::Load {
        err_kind: abi::LOADERR_ATTACH,
        err_index: 0,
        ..Default::default()
    };
    assert_eq!(
        words(&p, src, libc::ENOENT, &l),
        "failed to enable probe fbt::vfs_read:entry at function vfs_read: no such function in \
         the running kernel"
    );
    let r = Refusal::probe_missing(1);
    assert_eq!(
        words(&p, src, libc::ENOENT, &load_of(&r)),
        "probe description fbt::ksys_*:entry does not match any probes"
    );
}

#[test]
fn size_refusals_say_which_size() {
    let src = "BEGIN { exit(0); }";
    let p = compile(src, "t.d", &CompileOptions::default()).unwrap();
    let l = abi::Load::default();
    let msg = words(&p, src, libc::E2BIG, &l);
    assert!(msg.contains("larger than LOAD takes (image of "), "{msg}");
    let msg = words(&p, src, libc::ENOMEM, &l);
    assert!(msg.contains("bufsize=4m, aggsize=4m"), "{msg}");
}

#[test]
fn unsafe_functions_are_refused_by_name_and_left_out_of_globs() {
    let fns: Vec<String> = [
        "ksys_read",
        "rcu_read_lock_held_common",
        "rcu_read_lock_any_held",
    ]
    .map(String::from)
    .to_vec();
    let p = compile("fbt::*read*:return { }", "t.d", &CompileOptions::default()).unwrap();
    let t = attach_table(&p, &fns).unwrap();
    assert_eq!(t.entries.len(), 1);
    let left: Vec<&str> = t.unsafe_skipped.iter().map(|u| u.1.as_str()).collect();
    assert_eq!(
        left,
        ["rcu_read_lock_held_common", "rcu_read_lock_any_held"]
    );
    let p = compile(
        "fbt::rcu_read_*:return { }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap();
    assert_eq!(
        attach_table(&p, &fns).err().unwrap().0,
        "probe description fbt::rcu_read_*:return matches only functions that are unsafe to \
         probe (2; oxtrace -l marks them)"
    );
    // The kernel's own refusal, had a tool sent it anyway.
    let src = "fbt::vfs_read:entry { }";
    let p = compile(src, "t.d", &CompileOptions::default()).unwrap();
    let r = Refusal::unsafe_probe(0, oxtrace_core::probesafe::Why::Rcu);
    assert_eq!(r.kind, abi::LOADERR_UNSAFE);
    assert_eq!(
        words(&p, src, libc::EPERM, &load_of(&r)),
        "function vfs_read is unsafe to probe: an RCU read-side helper that probe handling \
         calls itself"
    );
}
