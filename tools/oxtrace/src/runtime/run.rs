//! Running a compiled D program: attach, LOAD, GO, drain the buffers at `switchrate`, merge
//! aggregations at `aggrate`, print, and STOP when the program exits, the traced command ends or
//! the user interrupts.

pub use crate::child::{catch_signals, split_words, Held};

use crate::agg::{AggDef, AggTable, Dictionary, KeyField, KeyKind, SortOrder};
use crate::child;
use crate::device::{Device, DeviceError};
use crate::dsl::{self, Compiled};
use crate::dynstat::{self, DropTracker};
use crate::exporter::Metrics;
use crate::options::size_text;
use crate::output::lines::{ClauseFiring, Lines};
use crate::providers::{fbt, list};
use oxtrace_core::abi;
use oxtrace_core::action::{Item, Items, RecordKind};
use oxtrace_core::buffer::{self, Reader};
use oxtrace_core::diag::{FaultMsg, ImageMsg, ReasonMsg};
use oxtrace_core::limits;
use oxtrace_core::probesafe;
use oxtrace_core::program::{Image, ProbeKind};
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFmt {
    /// Text like dtrace(1M).
    Text,
    /// One JSON object a line; aggregations as one JSON document at the end.
    Json,
    /// Aggregations in the OpenMetrics text format at the end.
    OpenMetrics,
    /// Aggregations keyed by stacks as folded stacks at the end (flame graphs).
    Folded,
}

/// What the run watches besides the program.
pub struct Target {
    /// A command started by `-c`, held until the probes are enabled.
    pub child: Option<Held>,
    /// A process given with `-p`: the run ends when it exits.
    pub pid: Option<u32>,
}

/// An error of the run, already worded for the user.
#[derive(Debug)]
pub struct RunError(pub String);

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunError {}

impl From<DeviceError> for RunError {
    fn from(e: DeviceError) -> Self {
        RunError(e.to_string())
    }
}

impl From<io::Error> for RunError {
    fn from(e: io::Error) -> Self {
        RunError(e.to_string())
    }
}

/// Above this many probes LOAD reports its progress on stderr.
const ATTACH_PROGRESS: usize = 100;

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
    let epid = epids.epid(slot, clause);
    let at = clause_at(prog, &src, clause);
    let probe = match id {
        0 => name.to_string(),
        id => format!("ID {id}: {name}"),
    };
    format!("error on enabled probe ID {epid} ({probe}): {fault} in {at}, instruction {pc}")
}

/// The program's source text and its name (`-e` or a file).
#[derive(Clone, Copy)]
pub struct Source<'a> {
    /// The text.
    pub text: &'a str,
    /// Its name in messages.
    pub name: &'a str,
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
                _ => crate::device::os_text(&e.err),
            };
            format!("failed to enable probe {desc} at function {func}: {why}")
        }
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

/// The user-level aggregation dictionary of a program.
pub fn dictionary(prog: &Compiled) -> Result<Dictionary, RunError> {
    let mut d = Dictionary::new();
    for (id, a) in prog.aggs.iter().enumerate() {
        let func = oxtrace_core::agg::check_params(a.func, &a.params)
            .map_err(|e| RunError(format!("aggregation @{}: {e}", a.name)))?;
        let keys = a
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                // The key's D expression names it in JSON and OpenMetrics output.
                let name = a
                    .key_names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("key{i}"));
                match k {
                    dsl::KeyKind::Int => KeyField::int(&name),
                    dsl::KeyKind::Str => KeyField::string(&name),
                    dsl::KeyKind::Stack => KeyField {
                        name,
                        kind: KeyKind::Stack,
                    },
                }
            })
            .collect();
        d.insert(AggDef {
            id: id as u32,
            name: a.name.clone(),
            func,
            keys,
        })
        .map_err(|e| RunError(e.to_string()))?;
    }
    Ok(d)
}

/// One attached probe as the output names it.
struct ProbeName {
    /// The probe's ID as `-l` shows it, for the default output's ID column.
    id: u32,
    /// `func:name` for the default output's FUNCTION:NAME column.
    short: String,
    /// `provider:module:func:name`.
    full: String,
    /// Whether it is dtrace:::END, whose records come after an exit().
    end: bool,
}

/// Gives each probe in `names` its ID as `oxtrace -l` lists it; probes `-l` does not list
/// (ERROR, ticks of other rates) get the next numbers, as dtrace creates such probes when a
/// program names them.
fn listed_ids(names: &mut [ProbeName], functions: &[String]) {
    let mut want: std::collections::HashMap<String, Vec<usize>> = Default::default();
    for (i, n) in names.iter().enumerate() {
        want.entry(n.full.clone()).or_default().push(i);
    }
    let mut id = 0u32;
    list::for_each_listed(functions, |prov, module, func, name| {
        id += 1;
        if let Some(v) = want.remove(&format!("{prov}:{module}:{func}:{name}")) {
            for i in v {
                names[i].id = id;
            }
        }
    });
    let mut rest: Vec<Vec<usize>> = want.into_values().collect();
    rest.sort();
    for v in rest {
        id += 1;
        for i in v {
            names[i].id = id;
        }
    }
}

/// A program being run.
pub struct Run<'a> {
    dev: &'a Device,
    prog: &'a Compiled,
    src: Source<'a>,
    fmt: OutFmt,
    names: Vec<ProbeName>,
    /// The EPIDs of the kernel's slots, for runtime error lines.
    epids: EnabledIds,
    aggs: AggTable,
    buf: Vec<u8>,
    aggbuf: Vec<u8>,
    ncpus: u32,
    exit: Option<i64>,
    /// When the first exit record fired: the records after it are not DTrace's output (but
    /// END's are).
    exit_at: Option<u64>,
    /// dtrace's default output around the records.
    lines: Lines,
    /// The options the consumer uses, as `-x`, pragmas and `setopt()` left them.
    opts: std::collections::BTreeMap<String, String>,
    /// What globs matched but were left out as unsafe to probe (`-v` lists them).
    unsafe_skipped: Vec<(u32, String, probesafe::Why)>,
    /// Dynamic-variable drop warnings, when the program has dynamic variables.
    dyn_drops: Option<DropTracker>,
    /// Where `--listen` publishes the aggregations after every snapshot.
    metrics: Option<Metrics>,
    /// Whether an aggregation has a stack key (a user stack's process is read at each
    /// snapshot).
    user_stacks: bool,
    out: io::BufWriter<io::Stdout>,
    /// Time of the LOAD ioctl (image check and attaching every probe), µs.
    load_us: u128,
    /// Time spent in AGGSNAP ioctls since it was last zeroed, µs.
    snap_us: u128,
    /// Of the same, the microseconds spent merging into the tool's table.
    merge_us: u128,
}

impl<'a> Run<'a> {
    /// Loads `prog` on `dev` and prints how many probes each description matched.
    pub fn load(
        dev: &'a Device,
        prog: &'a Compiled,
        src: Source<'a>,
        fmt: OutFmt,
    ) -> Result<Self, RunError> {
        let needs_fbt = prog
            .probes
            .iter()
            .any(|p| matches!(p.kind, ProbeKind::FbtEntry | ProbeKind::FbtReturn));
        let functions = if needs_fbt {
            fbt::functions()
                .map_err(|e| RunError(format!("cannot list kernel functions: {e}")))?
                .0
        } else {
            Vec::new()
        };
        let table = attach_table(prog, &functions)?;
        // Registering many probes takes a while under emulation: say what is going on.
        let progress = table.entries.len() > ATTACH_PROGRESS && !prog.quiet && fmt == OutFmt::Text;
        if progress {
            eprintln!("oxtrace: attaching {} probes ...", table.entries.len());
        }
        let t_load = Instant::now();
        let loaded = dev
            .load(&prog.image, &table.entries, &table.names)
            .map_err(|b| RunError(load_error(prog, &src, &table, &b.0, &b.1)))?;
        let load_us = t_load.elapsed().as_micros();
        if progress {
            eprintln!(
                "oxtrace: attached {} probes in {} ms",
                loaded.nprobes,
                load_us / 1000
            );
        }
        let infos = dev.probes()?;
        // The kernel's slots, as PROBES lists them, are what its EPIDs are numbered over.
        let slot_descs: Vec<u32> = infos.iter().map(|p| p.probe).collect();
        let epids = Image::parse(&prog.image)
            .map(|img| EnabledIds::new(&img, &slot_descs))
            .unwrap_or_default();
        let mut per_desc = vec![0usize; prog.probes.len()];
        let names = infos
            .iter()
            .map(|p| {
                let spec = prog.probes.get(p.probe as usize);
                if let Some(c) = per_desc.get_mut(p.probe as usize) {
                    *c += 1;
                }
                let func = abi::cstr_field(&p.func);
                let (prov, module, name) = match spec.map(|s| s.kind) {
                    Some(ProbeKind::FbtEntry) => ("fbt", "kernel", "entry".to_string()),
                    Some(ProbeKind::FbtReturn) => ("fbt", "kernel", "return".to_string()),
                    Some(ProbeKind::Begin) => ("dtrace", "", "BEGIN".to_string()),
                    Some(ProbeKind::End) => ("dtrace", "", "END".to_string()),
                    Some(ProbeKind::Error) => ("dtrace", "", "ERROR".to_string()),
                    Some(ProbeKind::SyscallEntry) => ("syscall", "vmlinux", "entry".to_string()),
                    Some(ProbeKind::SyscallReturn) => ("syscall", "vmlinux", "return".to_string()),
                    Some(ProbeKind::Tracepoint) => {
                        let (s, e) = func.split_once(':').unwrap_or(("", func));
                        return ProbeName {
                            id: 0,
                            short: format!(":{e}"),
                            full: format!("tracepoint:{s}::{e}"),
                            end: false,
                        };
                    }
                    Some(ProbeKind::Profile) => {
                        let mut b = [0u8; 64];
                        let period = spec.map_or(0, |s| s.period_ns);
                        let n = oxtrace_core::probe::name(ProbeKind::Profile, period, &mut b);
                        ("profile", "", String::from_utf8_lossy(&b[..n]).into_owned())
                    }
                    _ => (
                        "profile",
                        "",
                        spec.map_or(String::new(), |s| s.text.clone()),
                    ),
                };
                ProbeName {
                    id: 0,
                    short: format!("{func}:{name}"),
                    full: format!("{prov}:{module}:{func}:{name}"),
                    end: spec.is_some_and(|s| s.kind == ProbeKind::End),
                }
            })
            .collect();
        let mut names: Vec<ProbeName> = names;
        let quiet = prog.quiet;
        // setopt("quiet", "0") can turn the prefix on at run time, and runtime errors name
        // the probe by its ID: number them always.
        listed_ids(&mut names, &functions);
        if !quiet && fmt == OutFmt::Text {
            if src.name.starts_with('-') {
                // A description the compiler expanded (syscall:::entry: one per call) is one
                // line: consecutive descriptions of the same text are added up.
                let mut lines: Vec<(&str, usize)> = Vec::new();
                for (spec, n) in prog.probes.iter().zip(&per_desc) {
                    match lines.last_mut() {
                        Some((t, m)) if *t == spec.text => *m += n,
                        _ => lines.push((&spec.text, *n)),
                    }
                }
                for (text, n) in lines {
                    let s = if n == 1 { "" } else { "s" };
                    eprintln!("oxtrace: description '{text}' matched {n} probe{s}");
                }
            } else {
                // A script is one line, as dtrace -s says it.
                let n: usize = per_desc.iter().sum();
                let s = if n == 1 { "" } else { "s" };
                eprintln!("oxtrace: script '{}' matched {n} probe{s}", src.name);
            }
            if !table.unsafe_skipped.is_empty() {
                eprintln!(
                    "oxtrace: {} matching functions are unsafe to probe and were left out (-v lists them)",
                    table.unsafe_skipped.len()
                );
            }
            if loaded.nskipped > 0 {
                eprintln!(
                    "oxtrace: {} matching functions could not be probed and were skipped",
                    loaded.nskipped
                );
            }
        }
        let ncpus = dev.version()?.ncpus;
        Ok(Self {
            dev,
            prog,
            src,
            fmt,
            names,
            epids,
            aggs: AggTable::new(dictionary(prog)?),
            buf: vec![0; prog.options.bufsize as usize],
            aggbuf: Vec::with_capacity(1 << 16),
            ncpus,
            exit: None,
            exit_at: None,
            lines: Lines::new(quiet),
            opts: prog.tool_options.clone(),
            unsafe_skipped: table.unsafe_skipped,
            dyn_drops: prog
                .vars
                .iter()
                .any(|v| v.scope != oxtrace_core::action::Scope::Global)
                .then(DropTracker::default),
            metrics: None,
            user_stacks: prog
                .aggs
                .iter()
                .any(|a| a.keys.contains(&dsl::KeyKind::Stack)),
            // One buffer for the whole run, flushed when a snapshot's lines are done, not
            // per line: 100,000 aggregation lines are a few large writes.
            out: io::BufWriter::with_capacity(1 << 16, io::stdout()),
            load_us,
            snap_us: 0,
            merge_us: 0,
        })
    }

    /// Publishes the aggregations to `m` (OpenMetrics) after every snapshot.
    pub fn publish_to(&mut self, m: Metrics) {
        m.publish(self.aggs.to_openmetrics("oxtrace"));
        self.metrics = Some(m);
    }

    /// Enables the probes, releases the target, drains until done, stops, and prints what
    /// is left. Returns the exit status.
    pub fn run(mut self, target: &mut Target, verbose: bool) -> Result<i32, RunError> {
        if verbose {
            for (d, func, why) in &self.unsafe_skipped {
                let desc = self
                    .prog
                    .probes
                    .get(*d as usize)
                    .map_or("?", |p| p.text.as_str());
                eprintln!(
                    "oxtrace: {desc}: skipped {func} ({}): {}",
                    why.tag(),
                    why.text()
                );
            }
        }
        self.dev.go()?;
        if verbose {
            // make bench reads this: what attaching the probes cost.
            eprintln!(
                "oxtrace: load attached {} probes in {} us",
                self.names.len(),
                self.load_us
            );
            // Scripts wait for this line: the probes fire from here on.
            eprintln!("oxtrace: {} probes enabled", self.names.len());
        }
        if let Some(c) = target.child.as_mut() {
            c.release();
        }
        let switch = Duration::from_nanos(self.prog.options.switchrate.max(1_000_000));
        let aggrate = Duration::from_nanos(self.prog.options.aggrate.max(1_000_000));
        let mut next_switch = Instant::now() + switch;
        let mut next_agg = Instant::now() + aggrate;
        let mut child_status = None;
        loop {
            // Sleep in small steps so that a signal or the child's exit is seen quickly.
            let now = Instant::now();
            let wake = next_switch.min(next_agg);
            if wake > now {
                std::thread::sleep((wake - now).min(Duration::from_millis(50)));
            }
            let now = Instant::now();
            if now >= next_switch {
                self.drain()?;
                next_switch = now + switch;
            }
            if now >= next_agg {
                self.snap_aggs()?;
                next_agg = now + aggrate;
            }
            if self.exit.is_some() || child::interrupted() {
                break;
            }
            if let Some(c) = target.child.as_mut() {
                if let Some(st) = c.exited() {
                    child_status = Some(st);
                    break;
                }
            }
            if let Some(pid) = target.pid {
                // SAFETY: signal 0 only checks that the process exists.
                if unsafe { libc::kill(pid as i32, 0) } != 0 {
                    break;
                }
            }
            let (st, _) = self.dev.status_cpus(0)?;
            if st.exited != 0 {
                self.exit.get_or_insert(st.exit_status);
                break;
            }
        }
        self.dev.stop()?;
        self.drain()?;
        let t0 = Instant::now();
        self.snap_us = 0;
        self.merge_us = 0;
        self.snap_aggs()?;
        let snap = t0.elapsed().as_micros();
        let t1 = Instant::now();
        let mut s = String::new();
        let order = self.order();
        match self.fmt {
            OutFmt::Text => {
                self.aggs.print_unprinted(order, &mut s);
                self.lines.finish(&s, &mut self.out)?;
            }
            OutFmt::Json => s = self.aggs.to_json(order),
            OutFmt::OpenMetrics => s = self.aggs.to_openmetrics("oxtrace"),
            OutFmt::Folded => s = self.aggs.to_folded(SortOrder::default()),
        }
        self.out.write_all(s.as_bytes())?;
        self.out.flush()?;
        if verbose {
            // make bench reads this: the end-of-run snapshot of every CPU plus the merge,
            // of that the AGGSNAP ioctls (the kernel's part) and the merge into the table,
            // and then the sorting, formatting and writing of the output.
            eprintln!(
                "oxtrace: final aggregation snapshot+merge {snap} us (ioctls {} us, merge {} us), {} keys, sort+format+write {} us",
                self.snap_us,
                self.merge_us,
                (0..self.prog.aggs.len() as u32)
                    .map(|i| self.aggs.len(i))
                    .sum::<usize>(),
                t1.elapsed().as_micros()
            );
        }
        self.report_losses(verbose)?;
        if let Some(c) = target.child.as_mut() {
            if child_status.is_none() {
                c.kill();
            }
        }
        Ok(self.exit.unwrap_or(0) as i32)
    }

    /// Takes every CPU's principal buffer and handles its records in time order.
    fn drain(&mut self) -> Result<(), RunError> {
        let mut recs: Vec<(u64, u32, buffer::Header, Vec<u8>)> = Vec::new();
        for cpu in 0..self.ncpus {
            let s = self.dev.snapshot(cpu, &mut self.buf)?;
            if s.drops > 0 {
                eprintln!("oxtrace: {} drops on CPU {cpu}", s.drops);
            }
            for r in Reader::new(&self.buf[..s.len as usize]) {
                match r {
                    Ok(r) => recs.push((r.hdr.timestamp, cpu, r.hdr, r.data.to_vec())),
                    Err(e) => {
                        eprintln!(
                            "oxtrace: malformed buffer on CPU {cpu} at offset {}",
                            e.offset
                        );
                        break;
                    }
                }
            }
        }
        if let Some(t) = self.dyn_drops.as_mut() {
            let st = dynstat::query(self.dev, self.ncpus, self.prog.vars.len() as u32)?;
            for w in t.update(&st) {
                eprintln!("oxtrace: {w}");
            }
        }
        recs.sort_by_key(|r| (r.0, r.1));
        for (ts, cpu, hdr, data) in recs {
            if self.after_exit(ts, hdr.probe) {
                continue;
            }
            self.record(cpu, &hdr, &data)?;
        }
        // A firing's records are all in one snapshot: its line ends here at the latest.
        if self.fmt == OutFmt::Text {
            self.lines.end(&mut self.out)?;
        }
        self.out.flush()?;
        Ok(())
    }

    /// Whether a record of `probe` fired at `ts` comes after the exit record: later, and not
    /// from END. (A firing's records share its timestamp, so the exiting firing's records
    /// after its exit() still print; so do records a commit() of that firing settles on other
    /// CPUs, which carry the commit's timestamp.)
    fn after_exit(&self, ts: u64, probe: u32) -> bool {
        let end = self.names.get(probe as usize).is_some_and(|n| n.end);
        match self.exit_at {
            Some(ets) => !end && ts > ets,
            None => false,
        }
    }

    /// The members every JSON record line starts with, without the closing brace.
    fn json_head(&self, kind: RecordKind, cpu: u32, h: &buffer::Header) -> String {
        let ty = match kind {
            RecordKind::Printf => "printf",
            RecordKind::Exit => "exit",
            _ => "trace",
        };
        let mut o = format!(
            "{{\"type\":\"{ty}\",\"cpu\":{cpu},\"id\":{},\"probe\":",
            h.probe
        );
        crate::output::json::json_str(&mut o, self.probe_name(h.probe).1.as_bytes());
        o.push_str(&format!(",\"timestamp\":{}", h.timestamp));
        o
    }

    fn probe_name(&self, id: u32) -> (&str, &str) {
        self.names
            .get(id as usize)
            .map_or(("?", "?"), |n| (n.short.as_str(), n.full.as_str()))
    }

    /// How aggregations are sorted now (the `aggsort*` options).
    fn order(&self) -> SortOrder {
        SortOrder::from_options(&self.opts)
    }

    /// A `setopt()` record: sets runtime option `name` to `value` (unset by "", "no", ...).
    fn setopt(&mut self, name: &str, value: Option<&str>) {
        match crate::options::runtime_value(name, value) {
            Ok(v) => {
                if name == "quiet" {
                    self.lines.quiet = v.is_some();
                }
                match v {
                    Some(v) => self.opts.insert(name.to_string(), v.to_string()),
                    None => self.opts.remove(name),
                };
            }
            Err(e) => eprintln!(
                "oxtrace: couldn't set option \"{name}\" to \"{}\": {e}",
                value.unwrap_or("")
            ),
        }
    }

    /// dtrace's `CPU ID FUNCTION:NAME` prefix before a record of `h` (without `-q`).
    fn prefix(&mut self, cpu: u32, h: &buffer::Header) -> Result<(), RunError> {
        let at = ClauseFiring {
            ts: h.timestamp,
            cpu,
            probe: h.probe,
            clause: h.clause(),
        };
        let (id, name) = self
            .names
            .get(h.probe as usize)
            .map_or((0, "?"), |n| (n.id, n.short.as_str()));
        self.lines.begin(at, id, name, &mut self.out)?;
        Ok(())
    }

    fn record(&mut self, cpu: u32, h: &buffer::Header, data: &[u8]) -> Result<(), RunError> {
        if h.record_kind() == buffer::KIND_ERROR {
            let le32 = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap_or_default());
            let (clause, pc, addr) = if data.len() >= 16 {
                (
                    le32(0),
                    le32(4),
                    u64::from_le_bytes(data[8..16].try_into().unwrap_or_default()),
                )
            } else {
                (0, 0, 0)
            };
            let id = self.names.get(h.probe as usize).map_or(0, |n| n.id);
            let line = error_line(
                self.prog,
                self.src,
                &self.epids,
                (h.probe, id, self.probe_name(h.probe).1),
                (clause, pc),
                FaultMsg { code: h.id, addr },
            );
            self.out.flush()?;
            eprintln!("oxtrace: {line}");
            return Ok(());
        }
        let Some(kind) = RecordKind::from_u32(h.record_kind()) else {
            eprintln!(
                "oxtrace: unknown record kind {} on CPU {cpu}",
                h.record_kind()
            );
            return Ok(());
        };
        // Every record of a clause is part of its line in dtrace's default output.
        if self.fmt == OutFmt::Text {
            self.prefix(cpu, h)?;
        }
        let items: Vec<Item<'_>> = Items::new(data).collect();
        match kind {
            RecordKind::Printf if self.prog.setopts.contains_key(&h.id) => {
                if let Some((n, v)) = self.prog.setopts.get(&h.id).cloned() {
                    self.setopt(&n, v.as_deref());
                }
            }
            RecordKind::Trace | RecordKind::Printf => {
                let text = if kind == RecordKind::Printf {
                    self.prog.format_printf(h.id, &items).unwrap_or_default()
                } else {
                    let text = self.fmt == OutFmt::Text;
                    let rawbytes = (self.opts.contains_key("rawbytes") && text)
                        .then_some(self.prog.options.strsize as usize);
                    crate::output::printf::format_trace(&items, self.lines.quiet || !text, rawbytes)
                };
                match self.fmt {
                    OutFmt::Json => {
                        let mut o = self.json_head(kind, cpu, h);
                        if kind == RecordKind::Printf {
                            o.push_str(",\"text\":");
                            crate::output::json::json_str(&mut o, &text);
                        } else {
                            o.push_str(",\"value\":");
                            match items.first() {
                                Some(it) => json_item(&mut o, it),
                                None => o.push_str("null"),
                            }
                        }
                        o.push('}');
                        writeln!(self.out, "{o}")?;
                    }
                    OutFmt::OpenMetrics | OutFmt::Folded => {}
                    OutFmt::Text => self.out.write_all(&text)?,
                }
            }
            RecordKind::System => {
                // Like dtrace: the consumer runs the command, in order with the output.
                let cmd = self.prog.format_printf(h.id, &items).unwrap_or_default();
                let cmd = String::from_utf8_lossy(&cmd).into_owned();
                self.out.flush()?;
                match std::process::Command::new("/bin/sh")
                    .arg("-c")
                    .arg(&cmd)
                    .status()
                {
                    Ok(_) => {}
                    Err(e) => eprintln!("oxtrace: system(\"{cmd}\") failed: {e}"),
                }
            }
            RecordKind::Exit => {
                let code = match items.first() {
                    Some(Item::Int(v, _)) => *v as i64,
                    _ => 0,
                };
                self.exit.get_or_insert(code);
                self.exit_at.get_or_insert(h.timestamp);
                if self.fmt == OutFmt::Json {
                    let o = self.json_head(kind, cpu, h);
                    writeln!(self.out, "{o},\"status\":{code}}}")?;
                }
            }
            RecordKind::Printa => {
                self.snap_aggs()?;
                let fmt_id = match items.first() {
                    Some(Item::Int(v, _)) if *v != u32::MAX as u64 => Some(*v as u32),
                    _ => None,
                };
                let fmt = fmt_id.and_then(|v| self.prog.formats.get(v as usize).cloned());
                let group = fmt_id.and_then(|v| self.prog.printa_aggs.get(&v)).cloned();
                let mut s = String::new();
                let order = self.order();
                let r = match (fmt, &group) {
                    (Some(f), Some(ids)) => self.aggs.printa_multi(ids, &f, order, &mut s),
                    (Some(f), None) => self.aggs.printa_format(h.id, &f, order, &mut s),
                    (None, _) => self.aggs.printa(h.id, order, &mut s),
                };
                r.map_err(|e| RunError(e.to_string()))?;
                match self.fmt {
                    OutFmt::Text => self.out.write_all(s.as_bytes())?,
                    OutFmt::Json => {
                        // The data printa shows, as the aggregation's JSON line.
                        let mut o = String::new();
                        for id in group.unwrap_or_else(|| vec![h.id]) {
                            self.aggs.agg_json(id, order, &mut o);
                        }
                        self.out.write_all(o.as_bytes())?;
                    }
                    OutFmt::OpenMetrics | OutFmt::Folded => {}
                }
            }
            RecordKind::Clear
            | RecordKind::Trunc
            | RecordKind::Normalize
            | RecordKind::Denormalize => {
                self.snap_aggs()?;
                let n = match items.first() {
                    Some(Item::Int(v, _)) => *v as i64,
                    _ => 0,
                };
                let r = match kind {
                    RecordKind::Clear => self.aggs.clear(h.id),
                    RecordKind::Trunc => self.aggs.trunc(h.id, n),
                    RecordKind::Normalize => self.aggs.normalize(h.id, n as u64),
                    _ => self.aggs.denormalize(h.id),
                };
                r.map_err(|e| RunError(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// Takes every CPU's aggregation buffer and merges it into the user-level table.
    fn snap_aggs(&mut self) -> Result<(), RunError> {
        if self.prog.aggs.is_empty() {
            return Ok(());
        }
        for cpu in 0..self.ncpus {
            let t = Instant::now();
            let s = self.dev.aggsnap(cpu, &mut self.aggbuf)?;
            self.snap_us += t.elapsed().as_micros();
            if s.drops > 0 {
                eprintln!("oxtrace: {} aggregation drops on CPU {cpu}", s.drops);
            }
            if s.len > 0 {
                let t = Instant::now();
                self.aggs
                    .merge_snapshots(&self.aggbuf)
                    .map_err(|e| RunError(e.to_string()))?;
                self.merge_us += t.elapsed().as_micros();
            }
        }
        if self.user_stacks {
            // Name user stacks while their processes live: one may exit before the end.
            crate::output::symbols::prime_table(&self.aggs);
        }
        if let Some(m) = &self.metrics {
            m.publish(self.aggs.to_openmetrics("oxtrace"));
        }
        Ok(())
    }

    /// Warns about everything the kernel lost, with what to try; with `verbose`, prints the
    /// counters of every probe and CPU.
    fn report_losses(&mut self, verbose: bool) -> Result<(), RunError> {
        let (st, cpus) = self.dev.status_cpus(self.ncpus)?;
        if verbose {
            for (i, p) in self.dev.probes()?.iter().enumerate() {
                eprintln!(
                    "oxtrace: probe {i} {}: fired {} errors {} recursion {}",
                    self.probe_name(i as u32).1,
                    p.fired,
                    p.errors,
                    p.recursion
                );
            }
            for (c, s) in cpus.iter().enumerate() {
                eprintln!(
                    "oxtrace: cpu {c}: fired {} records {} drops {} errors {} recursion {}",
                    s.fired, s.records, s.drops, s.errors, s.recursion
                );
            }
        }
        if verbose && self.dyn_drops.is_some() {
            let d = dynstat::query(self.dev, self.ncpus, self.prog.vars.len() as u32)?;
            let (e, di, r, sz) = d.drops();
            let frees: u64 = d.cpus.iter().map(|c| c.frees).sum();
            eprintln!(
                "oxtrace: dynvars allocs {} frees {} drops {} (empty {e} dirty {di} rinsing {r} size {sz}) cleaner runs {} passes {} period {} ns chunks {} high water {} idle passes {} failclean {} borrowed {} steals {}",
                d.allocs(),
                frees,
                e + di + r + sz,
                d.st.cleaner_runs,
                d.st.passes,
                d.st.cleanrate_ns,
                d.st.nchunks,
                d.st.high_water,
                d.st.idle_passes,
                d.st.failclean,
                d.st.borrowed,
                d.cpus.iter().map(|c| c.steals).sum::<u64>()
            );
        }
        let errors: u64 = cpus.iter().map(|c| c.errors).sum();
        let recursion: u64 = cpus.iter().map(|c| c.recursion).sum();
        let drops: u64 = cpus.iter().map(|c| c.drops).sum();
        if drops > 0 {
            eprintln!("oxtrace: {drops} records dropped in all: raise bufsize (-x bufsize=) or switchrate");
        }
        // DTrace's words for the speculation losses.
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let specdrops: u64 = cpus.iter().map(|c| c.specdrops).sum();
        let specbusy: u64 = cpus.iter().map(|c| c.specbusy).sum();
        let specunavail: u64 = cpus.iter().map(|c| c.specunavail).sum();
        if specdrops > 0 {
            eprintln!("oxtrace: {specdrops} speculative drop{}", plural(specdrops));
        }
        if specbusy > 0 {
            eprintln!(
                "oxtrace: {specbusy} failed speculation{} (available buffer(s) still busy)",
                plural(specbusy)
            );
        }
        if specunavail > 0 {
            eprintln!(
                "oxtrace: {specunavail} failed speculation{} (no speculative buffer space available)",
                plural(specunavail)
            );
        }
        if errors > 0 {
            eprintln!("oxtrace: {errors} errors");
        }
        if recursion > 0 {
            eprintln!("oxtrace: {recursion} probe hits skipped inside actions (recursion)");
        }
        if st.missed > 0 {
            eprintln!(
                "oxtrace: {} probe hits missed by the kernel (kprobe reentry)",
                st.missed
            );
        }
        Ok(())
    }
}

/// A traced value as JSON: an integer as a number (signed or not by its D type), a string
/// as a string.
fn json_item(o: &mut String, it: &Item<'_>) {
    match it {
        Item::Str(s) => crate::output::json::json_str(o, s),
        Item::Int(..) => o.push_str(&String::from_utf8_lossy(
            &crate::output::printf::format_trace_item(it),
        )),
    }
}

/// A JSON string literal (see [`crate::output::json::json_str`]).
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    crate::output::json::json_str(&mut o, s.as_bytes());
    o
}
