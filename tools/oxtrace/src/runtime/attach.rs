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
}

/// Expands every fbt description against the probeable functions.
pub fn attach_table(prog: &Compiled, functions: &[String]) -> Result<AttachTable, RunError> {
    let mut t = AttachTable {
        entries: Vec::new(),
        names: Vec::new(),
        unsafe_skipped: Vec::new(),
    };
    for (d, spec) in prog.probes.iter().enumerate() {
        if !matches!(spec.kind, ProbeKind::FbtEntry | ProbeKind::FbtReturn) {
            continue;
        }
        let glob = fbt::is_glob(&spec.func);
        let names: Vec<&str> = if glob {
            let mut names = fbt::expand(&spec.func, functions);
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
    Ok(t)
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
