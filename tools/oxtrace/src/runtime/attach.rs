//! What a loaded program enables: the attach table LOAD takes (fbt globs expanded against
//! the probeable functions) and the enabled probe IDs the kernel numbers its clauses with.

use super::RunError;
use crate::dsl::Compiled;
use crate::providers::fbt;
use oxtrace_core::abi;
use oxtrace_core::limits;
use oxtrace_core::probesafe;
use oxtrace_core::program::{Image, ProbeKind};

/// The attach table of a program: function names for its fbt descriptions.
pub struct AttachTable {
    /// Entries for LOAD.
    pub entries: Vec<abi::Attach>,
    /// Their NUL-terminated names.
    pub names: Vec<u8>,
    /// Functions a glob matched that are unsafe to probe, left out: (description, function,
    /// why).
    pub unsafe_skipped: Vec<(u32, String, probesafe::Why)>,
    /// User-space probes (pid and USDT descriptions), in image order after the fbt entries;
    /// their names and paths are in `names` too.
    pub uattach: Vec<abi::Uattach>,
    /// The USDT operands `uattach` entries point into.
    pub usdt_args: Vec<abi::UsdtArg>,
    /// Functions pid globs matched whose size is unknown, left out of return and offset
    /// probes.
    pub uskipped: usize,
}

/// Expands every fbt description against the probeable functions.
pub fn attach_table(prog: &Compiled, functions: &[String]) -> Result<AttachTable, RunError> {
    let mut t = AttachTable {
        entries: Vec::new(),
        names: Vec::new(),
        unsafe_skipped: Vec::new(),
        uattach: Vec::new(),
        usdt_args: Vec::new(),
        uskipped: 0,
    };
    for (d, spec) in prog.probes.iter().enumerate() {
        if !matches!(spec.kind, ProbeKind::FbtEntry | ProbeKind::FbtReturn) {
            continue;
        }
        let glob = fbt::is_glob(&spec.func);
        // The module field: read the functions' modules only when it names some.
        let any_module = matches!(spec.module.as_str(), "" | "*");
        let in_module = |n: &str| {
            any_module
                || fbt::module_matches(&spec.module, fbt::modules().get(n).map(String::as_str))
        };
        if !glob && !in_module(&spec.func) {
            return Err(RunError(format!(
                "probe description {}: function {} is not in module {} (its module: {})",
                spec.text,
                spec.func,
                spec.module,
                fbt::module_of(&spec.func)
            )));
        }
        let names: Vec<&str> = if glob {
            let mut names = fbt::expand(&spec.func, functions);
            names.retain(|n| in_module(n));
            names.retain(|n| match probesafe::refusal(n) {
                Some(why) => {
                    t.unsafe_skipped.push((d as u32, n.to_string(), why));
                    false
                }
                None => n.len() <= limits::MAX_PROBE_NAME,
            });
            names
        } else {
            vec![spec.func.as_str()]
        };
        if names.is_empty() {
            let nunsafe = t.unsafe_skipped.iter().filter(|u| u.0 == d as u32).count();
            return Err(RunError(if nunsafe > 0 {
                format!(
                    "probe description {} matches only functions that are unsafe to probe ({nunsafe}; oxtrace -l marks them)",
                    spec.text
                )
            } else {
                format!("probe description {} does not match any probes", spec.text)
            }));
        }
        if t.entries.len() + names.len() > limits::MAX_ATTACH {
            return Err(RunError(format!(
                "probe description {} matches {} functions: a program may enable at most {} (name fewer functions)",
                spec.text,
                names.len(),
                limits::MAX_ATTACH
            )));
        }
        for n in names {
            t.entries.push(abi::Attach {
                probe: d as u32,
                flags: if glob { abi::ATTACH_OPTIONAL } else { 0 },
                name: t.names.len() as u32,
                reserved: 0,
            });
            t.names.extend_from_slice(n.as_bytes());
            t.names.push(0);
        }
    }
    user_table(prog, &mut t)?;
    Ok(t)
}

/// Fills `t`'s uattach table from the user-space descriptions, within option `maxuprobes`.
fn user_table(prog: &Compiled, t: &mut AttachTable) -> Result<(), RunError> {
    let max = prog
        .tool_options
        .get("maxuprobes")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(crate::options::DEFAULT_MAX_UPROBES);
    let total: usize = prog.probes.iter().map(|p| p.uprobes.len()).sum();
    if total > max {
        let mut by: Vec<(&str, usize)> = Vec::new();
        for p in prog.probes.iter().filter(|p| !p.uprobes.is_empty()) {
            match by.last_mut() {
                Some((t, n)) if *t == p.text => *n += p.uprobes.len(),
                _ => by.push((&p.text, p.uprobes.len())),
            }
        }
        let list: Vec<String> = by.iter().map(|(t, n)| format!("{t}: {n}")).collect();
        return Err(RunError(format!(
            "the program matches {total} user-space probes ({}), more than option maxuprobes allows ({max}): name fewer functions, or raise it with -x maxuprobes=N (at most {})",
            list.join(", "),
            limits::MAX_UATTACH
        )));
    }
    let mut seen_text = std::collections::HashSet::new();
    for (d, spec) in prog.probes.iter().enumerate() {
        if !oxtrace_core::probe::is_user(spec.kind) {
            continue;
        }
        if seen_text.insert(spec.text.as_str()) {
            t.uskipped += spec.uskipped as usize;
        }
        for u in &spec.uprobes {
            if u.path.len() > limits::MAX_UPROBE_PATH {
                return Err(RunError(format!(
                    "probe {}: the path of {} is longer than {} bytes",
                    u.name,
                    u.path,
                    limits::MAX_UPROBE_PATH
                )));
            }
            let name = t.names.len() as u32;
            t.names.extend_from_slice(u.name.as_bytes());
            t.names.push(0);
            let path = t.names.len() as u32;
            t.names.extend_from_slice(u.path.as_bytes());
            t.names.push(0);
            if t.names.len() > limits::MAX_NAMES {
                return Err(RunError(format!(
                    "the probes' names and paths take more than {} bytes: name fewer functions",
                    limits::MAX_NAMES
                )));
            }
            t.uattach.push(abi::Uattach {
                probe: d as u32,
                flags: if u.optional { abi::ATTACH_OPTIONAL } else { 0 },
                name,
                path,
                offset: u.offset,
                ref_ctr: u.ref_ctr,
                roff: u.roff,
                pid: u.pid as i32,
                arg_first: t.usdt_args.len() as u32,
                nargs: u.args.len() as u32,
                reserved: 0,
            });
            t.usdt_args.extend_from_slice(&u.args);
        }
    }
    // The kernel's own check of the table (rust/core/uprobe.rs): a refusal here is the
    // tool's mistake, said before LOAD.
    if !t.uattach.is_empty() {
        let img = oxtrace_core::program::Image::parse(&prog.image)
            .map_err(|e| RunError(format!("the program's image is malformed: {e:?}")))?;
        for (i, e) in t.uattach.iter().enumerate() {
            if let Err((why, arg)) =
                oxtrace_core::uprobe::check_uattach(&img, &t.names, &t.usdt_args, e)
            {
                let name = oxtrace_core::uprobe::names_str(&t.names, e.name).unwrap_or_default();
                return Err(RunError(format!(
                    "user-space probe {i} ({}) is malformed: {why:?} (operand {arg})",
                    String::from_utf8_lossy(name)
                )));
            }
        }
    }
    Ok(())
}

/// The enabled probe IDs (EPIDs) of a loaded program, numbered as the kernel numbers them
/// (`oxtrace_core::probe::EpidBases`) over its slots.
#[derive(Clone, Debug, Default)]
pub struct EnabledIds {
    /// Each slot's description and EPID base.
    slots: Vec<(u32, u32)>,
    /// Each description's clauses, in the order they run.
    order: Vec<Vec<u32>>,
}

impl EnabledIds {
    /// The EPIDs of `image`'s clauses on slots of descriptions `slot_descs`, in slot order
    /// (as PROBES lists them, or LOAD makes them).
    pub fn new(image: &Image<'_>, slot_descs: &[u32]) -> Self {
        let mut descs = vec![oxtrace_core::probe::DescEpids::default(); image.probe_count()];
        let bases = oxtrace_core::probe::epid_bases(image, &mut descs, slot_descs.iter().copied());
        EnabledIds {
            slots: slot_descs.iter().copied().zip(bases).collect(),
            order: (0..image.probe_count() as u32)
                .map(|d| oxtrace_core::probe::clauses_of(image, d).collect())
                .collect(),
        }
    }

    /// The EPID of clause `clause` on slot `slot`: what its `epid` built-in gives; 0 if the
    /// clause does not run there.
    pub fn epid(&self, slot: u32, clause: u32) -> u64 {
        let Some(&(desc, base)) = self.slots.get(slot as usize) else {
            return 0;
        };
        let order = self.order.get(desc as usize).map_or(&[][..], |o| &o[..]);
        oxtrace_core::probe::epid(base, order.iter().copied(), clause)
    }
}

#[cfg(test)]
mod tests {
    use crate::dsl::{compile, CompileOptions};
    use crate::providers::user_tests::run;

    /// The uattach table of pid and USDT descriptions: entries in description order, their
    /// names and paths, the USDT operands, and option maxuprobes.
    #[test]
    fn user_probes_table() {
        let r = run();
        let pid = r.child.id();
        let opts = |pid: u32| {
            let mut o = CompileOptions::with_args("-e", &[]);
            o.macros.insert("target".into(), pid.to_string());
            o
        };
        let c = compile(
            "pid$target:a.out:work:entry { }\n\
             pid$target:prog:work:return { }\n\
             pid$target:a.out:work:4, pid$target::tail: { }\n\
             myprov$target:::fire { trace(arg0); trace(arg1); }",
            "-e",
            &opts(pid),
        )
        .unwrap();
        // The maxuprobes option bounds the table; the table holds names and paths.
        let t = super::attach_table(&c, &[]).unwrap();
        let n: usize = c.probes.iter().map(|p| p.uprobes.len()).sum();
        assert_eq!(t.uattach.len(), n);
        assert!(t.entries.is_empty());
        let u = t.uattach[0];
        assert_eq!((u.probe, u.pid, u.flags, u.nargs), (0, pid as i32, 0, 0));
        let usdt = t.uattach.last().unwrap();
        assert_eq!((usdt.probe, usdt.nargs, usdt.arg_first), (5, 2, 0));
        assert_eq!(t.usdt_args.len(), 2);
        assert!(usdt.ref_ctr != 0);
        let at = |o: u32| {
            let s = &t.names[o as usize..];
            String::from_utf8_lossy(&s[..s.iter().position(|&b| b == 0).unwrap()]).into_owned()
        };
        assert_eq!(at(u.name), format!("pid{pid}:prog:work:entry"));
        assert_eq!(at(u.path), r.exe);

        let mut o2 = opts(pid);
        o2.xopts.push(("maxuprobes".into(), Some("2".into())));
        let c2 = compile("pid$target:a.out:: { }", "-e", &o2).unwrap();
        let e = super::attach_table(&c2, &[]).err().unwrap().0;
        assert!(e.contains("more than option maxuprobes allows (2)"), "{e}");
        assert!(e.contains("-x maxuprobes=N"), "{e}");
    }
}
