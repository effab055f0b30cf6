//! The kernel's refusals in words: a failed LOAD and a runtime error name the probe,
//! clause, aggregation or option and why, in `oxtrace_core::diag`'s words; never a bare
//! errno.

use super::attach::{AttachTable, EnabledIds};
use super::device::DeviceError;
use super::Source;
use crate::dsl::{self, Compiled};
use crate::options::size_text;
use oxtrace_core::abi;
use oxtrace_core::diag::{FaultMsg, ImageMsg, ReasonMsg};
use oxtrace_core::limits;
use oxtrace_core::probesafe;

/// Where clause `i` of `prog` starts in `src`, as `clause at LINE:COL`.
pub fn clause_at(prog: &Compiled, src: &Source<'_>, i: u32) -> String {
    prog.clause_spans
        .get(i as usize)
        .map(|(span, _)| {
            let pos = dsl::CompileError::at(src.text, src.name, *span, "").position();
            format!("clause at {}:{pos}", src.name)
        })
        .unwrap_or_else(|| format!("clause {i}"))
}

/// DTrace's runtime error line (after "oxtrace: ") of `fault` at instruction `pc` of clause
/// `clause` firing on `probe`, its slot, ID (as `-l` lists it; 0 when unknown) and
/// `prov:mod:func:name`: "error on enabled probe ID N (ID P: prov:mod:func:name): ...", N the
/// clause's enabled probe ID as the `epid` built-in gives it (and ERROR's `arg1`), from
/// `epids`.
pub fn error_line(
    prog: &Compiled,
    src: Source<'_>,
    epids: &EnabledIds,
    (slot, id, name): (u32, u32, &str),
    (clause, pc): (u32, u32),
    fault: FaultMsg,
) -> String {
    let at = clause_at(prog, &src, clause);
    let head = error_head(epids, (slot, id, name), clause);
    format!("{head}: {fault} in {at}, instruction {pc}")
}

/// The head of DTrace's runtime error lines, for clause `clause` firing on `probe` (see
/// [`error_line`]): "error on enabled probe ID N (ID P: prov:mod:func:name)".
pub fn error_head(epids: &EnabledIds, (slot, id, name): (u32, u32, &str), clause: u32) -> String {
    let epid = epids.epid(slot, clause);
    match id {
        0 => format!("error on enabled probe ID {epid} ({name})"),
        id => format!("error on enabled probe ID {epid} (ID {id}: {name})"),
    }
}

/// A byte count as the options write it, in whole MiB (rounded down) when not exact.
fn mem_text(n: u64) -> String {
    if n >= 1 << 20 && !n.is_multiple_of(1 << 20) {
        format!("{}m", n >> 20)
    } else {
        size_text(n)
    }
}

/// The words of `LOADERR_MEMORY`: the largest part, with its formula, and the budget.
fn memory_words(prog: &Compiled, l: &abi::Load) -> String {
    let ncpus = u64::from(l.err_index);
    let halves = |what: &str, size: u64| {
        format!(
            "{what} {} × {ncpus} CPUs × 2 halves = {}",
            size_text(size),
            mem_text(size.saturating_mul(ncpus).saturating_mul(2))
        )
    };
    let need = u64::from(l.err_insn) << 10;
    let part = match l.err_code {
        limits::MEM_PBUF => halves("bufsize", prog.options.bufsize),
        limits::MEM_AGG => halves("aggsize", prog.options.aggsize),
        limits::MEM_DYNVAR => format!("dynvarsize {}", size_text(prog.options.dynvarsize)),
        limits::MEM_SCRATCH => format!("its scratch memory × {ncpus} CPUs"),
        limits::MEM_SPEC => format!(
            "nspec {} × specsize {} × {ncpus} CPUs",
            prog.options.nspec,
            size_text(prog.options.specsize)
        ),
        _ => format!("its image of {} bytes", prog.image.len()),
    };
    let budget = mem_text(u64::from(l.err_arg) << 10);
    let (whose, param) = if l.err_part == 0 {
        ("oxtrace's memory budget per consumer", "consumer_mem_pct")
    } else {
        (
            "what other consumers leave of oxtrace's memory budget",
            "mem_budget_pct",
        )
    };
    format!(
        "failed to load program: {part} ({} in all) exceeds {whose} of {budget} (module parameter {param}): lower the sizes",
        mem_text(need)
    )
}

/// Words for a failed LOAD: every refusal names the probe, clause, aggregation or option
/// and why, in `diag`'s words; never a bare errno.
pub fn load_error(
    prog: &Compiled,
    src: &Source<'_>,
    t: &AttachTable,
    e: &DeviceError,
    l: &abi::Load,
) -> String {
    let clause = |i: u32| clause_at(prog, src, i);
    let errno = e.err.raw_os_error().unwrap_or(0);
    match l.err_kind {
        abi::LOADERR_IMAGE => format!("failed to load program: {}", image_words(prog, l)),
        abi::LOADERR_VERIFY => format!(
            "failed to load program: {} {}, instruction {}: {}",
            clause(l.err_index),
            if l.err_part == 0 {
                "predicate"
            } else {
                "actions"
            },
            l.err_insn,
            ReasonMsg {
                code: l.err_code,
                arg: l.err_arg
            }
        ),
        abi::LOADERR_ATTACH => {
            let a = t.entries.get(l.err_index as usize);
            let func = a.map(|a| name_at(&t.names, a.name)).unwrap_or("?");
            let desc = a
                .and_then(|a| prog.probes.get(a.probe as usize))
                .map_or("?", |p| p.text.as_str());
            let why = match errno {
                libc::ENOENT => "no such function in the running kernel".to_string(),
                libc::EINVAL => {
                    "the kernel refuses a probe there (not probeable, or a bad name)".into()
                }
                _ => super::device::os_text(&e.err),
            };
            format!("failed to enable probe {desc} at function {func}: {why}")
        }
        abi::LOADERR_UATTACH => uattach_words(prog, t, l, errno, e),
        abi::LOADERR_MEMORY => memory_words(prog, l),
        abi::LOADERR_UNSAFE => {
            let a = t.entries.get(l.err_index as usize);
            let func = a.map(|a| name_at(&t.names, a.name)).unwrap_or("?");
            let why = probesafe::Why::from_code(l.err_code).map_or("refused by the kernel", |w| w.text());
            format!("function {func} is unsafe to probe: {why}")
        }
        abi::LOADERR_PROBE => format!(
            "probe description {} does not match any probes",
            prog.probes
                .get(l.err_index as usize)
                .map_or("?", |p| p.text.as_str())
        ),
        _ => match errno {
            libc::E2BIG => format!(
                "failed to load program: larger than LOAD takes (image of {} bytes, at most {}; {} probes, at most {})",
                prog.image.len(),
                limits::MAX_IMAGE_SIZE,
                t.entries.len(),
                limits::MAX_ATTACH
            ),
            libc::ENOMEM => format!(
                "failed to load program: not enough kernel memory for its buffers (bufsize={}, aggsize={}, dynvarsize={}, per CPU: lower them)",
                size_text(prog.options.bufsize),
                size_text(prog.options.aggsize),
                size_text(prog.options.dynvarsize)
            ),
            _ => format!("failed to load program: {e}"),
        },
    }
}

/// Words for `LOADERR_UATTACH`: user-space probe `index` of the table could not be placed.
fn uattach_words(
    prog: &Compiled,
    t: &AttachTable,
    l: &abi::Load,
    errno: i32,
    e: &DeviceError,
) -> String {
    let Some(u) = t.uattach.get(l.err_index as usize) else {
        return format!(
            "failed to enable a user-space probe: {}",
            super::device::os_text(&e.err)
        );
    };
    let name = name_at(&t.names, u.name);
    let path = name_at(&t.names, u.path);
    let desc = prog
        .probes
        .get(u.probe as usize)
        .map_or("?", |p| p.text.as_str());
    let pid = u.pid;
    if l.err_code != 0 {
        // A malformed entry (rust/core/uprobe.rs UattachError), which the tool checks too.
        return format!(
            "failed to enable probe {name} ({desc}): the kernel refuses the entry (reason {}, operand {}): {}",
            l.err_code,
            l.err_arg,
            super::device::os_text(&e.err)
        );
    }
    let why = match errno {
        libc::ESRCH => format!("process {pid} has exited"),
        libc::EPERM => format!(
            "process {pid} may not be traced by oxtrace (it is oxtrace itself, or the caller lacks the privilege to trace it)"
        ),
        libc::ENOENT => format!("{path} no longer exists"),
        libc::EACCES => format!("{path} cannot be opened"),
        libc::EINVAL => format!(
            "the kernel cannot probe file offset 0x{:x} of {path} (past its end, or an instruction uprobes cannot probe)",
            u.offset
        ),
        libc::E2BIG => "the kernel cannot evaluate its USDT operands".to_string(),
        _ => super::device::os_text(&e.err),
    };
    format!("failed to enable probe {name} ({desc}) in {path}: {why}")
}

/// Words for an image refusal, naming the option or aggregation it is about.
fn image_words(prog: &Compiled, l: &abi::Load) -> String {
    let words = ImageMsg {
        code: l.err_code,
        arg: l.err_arg,
    }
    .to_string();
    let (what, index) = (l.err_code & 0xff, l.err_arg as usize);
    match what {
        // Options are written in the order they were set.
        20 => match (prog.set_options.get(index), words.split_once(": ")) {
            (Some(k), Some((_, why))) => {
                format!("option {}={}: {why}", k.name(), prog.options.get(*k))
            }
            _ => words,
        },
        18 => match (prog.aggs.get(index), words.split_once(": ")) {
            (Some(a), Some((_, why))) => format!("@{}: {why}", a.name),
            _ => words,
        },
        _ => words,
    }
}

fn name_at(names: &[u8], off: u32) -> &str {
    let rest = names.get(off as usize..).unwrap_or(&[]);
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::{compile, CompileOptions};
    use crate::providers::user_tests::run;

    /// OXT_LOADERR_UATTACH in words: the probe's whole name, its description, the file and
    /// why, for each errno the kernel gives; a reason code says the entry was malformed.
    #[test]
    fn user_probe_refusals() {
        let r = run();
        let pid = r.child.id();
        let mut o = CompileOptions::with_args("-e", &[]);
        o.macros.insert("target".into(), pid.to_string());
        let text = "BEGIN { } pid$target:a.out:work:entry { }";
        let prog = compile(text, "-e", &o).unwrap();
        let t = super::super::attach_table(&prog, &[]).unwrap();
        let src = Source { text, name: "-e" };
        let words = |errno: i32, code: u32| {
            let l = abi::Load {
                err_kind: abi::LOADERR_UATTACH,
                err_index: 0,
                err_code: code,
                ..Default::default()
            };
            let e = DeviceError::new(
                std::path::Path::new("/dev/oxtrace"),
                "LOAD",
                std::io::Error::from_raw_os_error(errno),
            );
            load_error(&prog, &src, &t, &e, &l)
        };
        let head = format!(
            "failed to enable probe pid{pid}:prog:work:entry (pid{pid}:a.out:work:entry) in {}: ",
            r.exe
        );
        assert_eq!(
            words(libc::ESRCH, 0),
            format!("{head}process {pid} has exited")
        );
        assert!(words(libc::EPERM, 0).contains("may not be traced"));
        assert_eq!(
            words(libc::ENOENT, 0),
            format!("{head}{} no longer exists", r.exe)
        );
        assert!(words(libc::EINVAL, 0).contains("cannot probe file offset 0x"));
        let m = words(libc::EINVAL, 3);
        assert!(m.contains("the kernel refuses the entry (reason 3"), "{m}");
    }
}
