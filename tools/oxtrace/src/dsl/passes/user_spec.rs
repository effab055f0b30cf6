//! User-space probe descriptions: `pidPID:MODULE:FUNCTION:NAME` (the pid provider) and
//! `PROVIDERPID:MODULE:FUNCTION:NAME` (a USDT provider of process PID), `$target` already
//! expanded by the parser. Each resolves, once per compile, against the process's load
//! objects (`crate::providers::pid`, `crate::providers::usdt`) to one description per
//! probe kind, carrying its uprobes.

use super::super::ProbeSpec;
use crate::providers::{pid, process, usdt};
use oxtrace_core::program::ProbeKind;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

thread_local! {
    /// Descriptions resolved in this compile: code generation runs in rounds.
    static CACHE: RefCell<HashMap<String, Result<Vec<ProbeSpec>, String>>> =
        RefCell::new(HashMap::new());
    /// `$target`, for the words of an unknown provider.
    static TARGET: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Starts a compile: forgets resolved descriptions (and read files); `target` is `$target`.
pub(crate) fn reset(target: Option<u32>) {
    CACHE.with(|c| c.borrow_mut().clear());
    TARGET.with(|t| t.set(target));
}

/// Words for an unknown provider: the pid provider and, with a target process, its USDT
/// providers.
pub(crate) fn unknown_hint() -> String {
    match TARGET.with(Cell::get) {
        Some(p) => {
            let provs = usdt::providers(p);
            if provs.is_empty() {
                format!("; user space: pid$target (process {p} has no USDT providers)")
            } else {
                format!(
                    "; user space: pid$target and the USDT providers of process {p}: {}",
                    provs.join(", ")
                )
            }
        }
        None => "; user space: pid$target or pidPID, and USDT providers as NAME$target".into(),
    }
}

/// The descriptions `text` (`prov:module:func:name`) resolves to, if `prov` names a
/// process (`pid1234`, `myprov1234`); `None` otherwise.
pub(crate) fn user_spec(
    text: &str,
    prov: &str,
    module: &str,
    func: &str,
    name: &str,
) -> Option<Result<Vec<ProbeSpec>, String>> {
    if prov == "pid" {
        return Some(Err(
            "the pid provider needs a process: pid$target (with -c or -p) or pidPID".into(),
        ));
    }
    let (pname, pid) = process::split_pid(prov)?;
    if let Some(r) = CACHE.with(|c| c.borrow().get(text).cloned()) {
        return Some(r);
    }
    let r = resolve(text, pname, pid, module, func, name);
    CACHE.with(|c| c.borrow_mut().insert(text.to_string(), r.clone()));
    Some(r)
}

fn resolve(
    text: &str,
    pname: &str,
    pid: u32,
    module: &str,
    func: &str,
    name: &str,
) -> Result<Vec<ProbeSpec>, String> {
    let spec = |kind, uprobes, uskipped| ProbeSpec {
        kind,
        func: String::new(),
        period_ns: 0,
        text: text.to_string(),
        uprobes,
        uskipped,
        module: String::new(),
    };
    let mut v = Vec::new();
    if pname == "pid" {
        let p = pid::resolve(pid, module, func, name)?;
        let skipped = p.unsized_skipped as u32;
        for (kind, list) in [
            (ProbeKind::PidEntry, p.entry),
            (ProbeKind::PidReturn, p.ret),
            (ProbeKind::PidOffset, p.offsets),
        ] {
            if !list.is_empty() {
                v.push(spec(kind, list, skipped));
            }
        }
        if v.is_empty() {
            let why = match (skipped, p.ifunc_skipped) {
                (0, 0) => String::new(),
                (n, 0) => format!(
                    " ({n} matching functions have no size in their symbol table to find their instructions by)"
                ),
                (n, i) => format!(
                    " ({n} matching functions have no size in their symbol table, {i} are IFUNC resolvers)"
                ),
            };
            return Err(format!(
                "probe description {text} does not match any probes{why}"
            ));
        }
        return Ok(v);
    }
    match usdt::resolve(pname, pid, module, func, name)? {
        Some(list) if list.is_empty() => Err(format!(
            "probe description {text} does not match any probes (process {pid} has USDT provider '{pname}'; oxtrace -l -p {pid} lists its probes)"
        )),
        Some(list) => Ok(vec![spec(ProbeKind::Usdt, list, 0)]),
        None => {
            let provs = usdt::providers(pid);
            let has = if provs.is_empty() {
                "none".to_string()
            } else {
                provs.join(", ")
            };
            Err(format!(
                "unknown provider '{pname}{pid}': process {pid} has no USDT provider '{pname}' (its USDT providers: {has}; the pid provider is pid{pid})"
            ))
        }
    }
}
