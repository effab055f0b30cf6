//! Translators (`translator`, `xlate`) and the prelude's process views (`curpsinfo`,
//! `curlwpsinfo`): the substitution, its errors, and the prelude against a synthetic
//! kernel's BTF and the running kernel's.

use oxtrace::btf::build::Builder;
use oxtrace::btf::Btf;
use oxtrace::dsl::sim::{Firing, OwnedItem, Sim};
use oxtrace::dsl::{compile, CompileOptions, Compiled};
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

/// The running kernel's BTF: every member of the prelude compiles against it.
#[test]
fn the_prelude_on_the_running_kernel() {
    let Some(btf) = Btf::kernel() else {
        eprintln!("no {}: nothing to check", oxtrace::btf::KERNEL_PATH);
        return;
    };
    let btf = Some(Arc::new(btf.unwrap()));
    for m in [
        "pr_nlwp", "pr_pid", "pr_ppid", "pr_pgid", "pr_sid", "pr_uid", "pr_euid", "pr_gid",
        "pr_egid", "pr_addr", "pr_fname",
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
    ] {
        c_with(
            &format!("BEGIN {{ trace(curlwpsinfo->{m}); }}"),
            btf.clone(),
        );
    }
}
