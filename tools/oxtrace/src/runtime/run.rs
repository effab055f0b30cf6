//! The run loop: attach, LOAD, GO, drain the buffers at `switchrate`, merge aggregations
//! at `aggrate`, print, and STOP when the program exits, the traced command ends or the user
//! interrupts.

use super::attach::{attach_table, EnabledIds};
use super::child;
use super::device::Device;
use super::dynstat::{self, DropTracker};
use super::exporter::Metrics;
use super::refusals::{error_head, error_line, load_error};
use super::{OutFmt, RunError, Source, Target};
use crate::agg::{AggDef, AggTable, Dictionary, KeyField, KeyKind, SortOrder};
use crate::dsl::{self, Compiled};
use crate::output::json::json_str;
use crate::output::lines::{ClauseFiring, Lines};
use crate::output::records::{json_head, json_item};
use crate::providers::{fbt, list};
use crate::sym::usym;
use oxtrace_core::abi;
use oxtrace_core::action::{Item, Items, RecordKind};
use oxtrace_core::agg::KeyElem;
use oxtrace_core::buffer::{self, Reader};
use oxtrace_core::diag::FaultMsg;
use oxtrace_core::probesafe;
use oxtrace_core::program::{Image, ProbeKind};
use oxtrace_core::ustack::Decoded;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// Above this many probes LOAD reports its progress on stderr.
const ATTACH_PROGRESS: usize = 100;

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
                    dsl::KeyKind::Int if a.key_u64.get(i) == Some(&true) => KeyField {
                        name,
                        kind: KeyKind::Int {
                            size: 8,
                            signed: false,
                        },
                    },
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

/// The names of the uattach entries of each description, in table order.
fn user_names(t: &super::AttachTable) -> std::collections::HashMap<u32, Vec<String>> {
    let mut m: std::collections::HashMap<u32, Vec<String>> = Default::default();
    for u in &t.uattach {
        let rest = t.names.get(u.name as usize..).unwrap_or_default();
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let n = String::from_utf8_lossy(&rest[..end]).into_owned();
        m.entry(u.probe).or_default().push(n);
    }
    m
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
    /// snapshot, and the principal buffers are taken after it for the stacks' definitions).
    user_stacks: bool,
    /// Records an aggregation snapshot took from the principal buffers, for the next drain.
    pending: Vec<PendingRec>,
    /// The output before the first `freopen()` of a file, which `freopen("")` restores.
    saved_out: Option<io::BufWriter<Box<dyn Write + Send>>>,
    /// Standard output, or the file of `-o`.
    out: io::BufWriter<Box<dyn Write + Send>>,
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
        let progress = table.entries.len() + table.uattach.len() > ATTACH_PROGRESS
            && !prog.quiet
            && fmt == OutFmt::Text;
        if progress {
            eprintln!(
                "oxtrace: attaching {} probes ...",
                table.entries.len() + table.uattach.len()
            );
        }
        let t_load = Instant::now();
        // On a terminal, a line that keeps time while LOAD attaches them.
        let n = table.entries.len() + table.uattach.len();
        let ticker = (n > ATTACH_PROGRESS)
            .then(|| super::progress::Ticker::start(&format!("attaching {n} probes")))
            .flatten();
        let loaded = dev
            .load(
                &prog.image,
                &table.entries,
                &table.names,
                (&table.uattach, &table.usdt_args),
            )
            .map_err(|b| RunError(load_error(prog, &src, &table, &b.0, &b.1)))?;
        drop(ticker);
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
        // PROBES cuts long names: a user probe's whole name is the table's.
        let mut user_names = user_names(&table);
        let names = infos
            .iter()
            .map(|p| {
                let spec = prog.probes.get(p.probe as usize);
                if let Some(c) = per_desc.get_mut(p.probe as usize) {
                    *c += 1;
                }
                let func = abi::cstr_field(&p.func);
                // A stable probe's underlying probes are named as the stable probe.
                if let Some(sp) = spec.and_then(|s| crate::providers::stable::find(&s.text)) {
                    return ProbeName {
                        id: 0,
                        short: format!(":{}", sp.name),
                        full: sp.full(),
                        end: false,
                    };
                }
                if spec.is_some_and(|s| oxtrace_core::probe::is_user(s.kind)) {
                    let full = user_names
                        .get_mut(&p.probe)
                        .and_then(|q| {
                            let i = q.iter().position(|n| n.starts_with(func))?;
                            Some(q.remove(i))
                        })
                        .unwrap_or_else(|| func.to_string());
                    let parts = oxtrace_core::probe::user_parts(full.as_bytes());
                    let part = |i: usize| String::from_utf8_lossy(parts[i]).into_owned();
                    return ProbeName {
                        id: 0,
                        short: format!("{}:{}", part(2), part(3)),
                        full,
                        end: false,
                    };
                }
                let (prov, module, name) = match spec.map(|s| s.kind) {
                    Some(ProbeKind::FbtEntry) => ("fbt", fbt::module_of(func), "entry".to_string()),
                    Some(ProbeKind::FbtReturn) => {
                        ("fbt", fbt::module_of(func), "return".to_string())
                    }
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
            if table.uskipped > 0 {
                eprintln!(
                    "oxtrace: {} matching functions have no size in their symbol table: their return and offset probes were left out",
                    table.uskipped
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
            pending: Vec::new(),
            saved_out: None,
            // One buffer for the whole run, flushed when a snapshot's lines are done, not
            // per line: 100,000 aggregation lines are a few large writes.
            out: io::BufWriter::with_capacity(1 << 16, Box::new(io::stdout())),
            load_us,
            snap_us: 0,
            merge_us: 0,
        })
    }

    /// `freopen(path)`: the output from now on appended to `path` (created if missing), as
    /// dtrace reopens its output; `freopen("")` returns to the output the run began with.
    /// A file that cannot be opened is an error message, and the output stays.
    fn freopen(&mut self, path: &str) -> io::Result<()> {
        self.out.flush()?;
        if path.is_empty() {
            if let Some(o) = self.saved_out.take() {
                self.out = o;
            }
            return Ok(());
        }
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => {
                let w: Box<dyn Write + Send> = Box::new(f);
                let old =
                    std::mem::replace(&mut self.out, io::BufWriter::with_capacity(1 << 16, w));
                self.saved_out.get_or_insert(old);
            }
            Err(e) => eprintln!("oxtrace: couldn't freopen() \"{path}\": {e}"),
        }
        Ok(())
    }

    /// Writes the output to `w` instead of standard output (`-o FILE`).
    pub fn write_to(&mut self, w: Box<dyn Write + Send>) {
        self.out = io::BufWriter::with_capacity(1 << 16, w);
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
        let watched = target.pid.map(child::Watched::new);
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
            if watched.as_ref().is_some_and(child::Watched::gone) {
                break;
            }
            let (st, _) = self.dev.status_cpus(0)?;
            if st.exited != 0 {
                self.exit.get_or_insert(st.exit_status);
                break;
            }
            // bufpolicy fill: a CPU's buffer is full, and tracing ends, as in DTrace.
            if st.filled != 0 {
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
            OutFmt::FlameGraph => {
                let title = crate::output::flamegraph::title(self.src.name, self.src.text);
                match self.aggs.to_flamegraph(&title) {
                    Some(svg) => s = svg,
                    None => eprintln!(
                        "oxtrace: no aggregation keyed by a stack has entries: no flame graph"
                    ),
                }
            }
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

    /// Takes every CPU's principal buffer: keeps the stack definitions at once (before any
    /// record that names one is handled, and before any aggregation is printed) and returns
    /// the other records, (timestamp, CPU, header, payload).
    fn take_pbufs(&mut self) -> Result<Vec<PendingRec>, RunError> {
        let mut recs = Vec::new();
        for cpu in 0..self.ncpus {
            let s = self.dev.snapshot(cpu, &mut self.buf)?;
            if s.drops > 0 {
                // DTrace's words.
                let plural = if s.drops == 1 { "" } else { "s" };
                eprintln!("oxtrace: {} drop{plural} on CPU {cpu}", s.drops);
            }
            for r in Reader::new(&self.buf[..s.len as usize]) {
                match r {
                    Ok(r) if r.hdr.record_kind() == buffer::KIND_STACK => {
                        match oxtrace_core::stack::Def::parse(r.hdr.id, r.data) {
                            Some(d) if crate::sym::stacks::define(&d) => {}
                            _ => eprintln!("oxtrace: bad stack definition on CPU {cpu}"),
                        }
                    }
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
        Ok(recs)
    }

    /// Takes every CPU's principal buffer and handles its records in time order (with those
    /// an aggregation snapshot took since the last drain).
    fn drain(&mut self) -> Result<(), RunError> {
        let mut recs = std::mem::take(&mut self.pending);
        recs.extend(self.take_pbufs()?);
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

    fn probe_name(&self, id: u32) -> (&str, &str) {
        self.names
            .get(id as usize)
            .map_or(("?", "?"), |n| (n.short.as_str(), n.full.as_str()))
    }

    /// How aggregations are sorted now (the `aggsort*` options).
    fn order(&self) -> SortOrder {
        SortOrder::from_options(&self.opts)
    }

    /// A `setopt()` record of clause `h`: sets runtime option `name` to `value` (unset by
    /// "", "no", ...). An unknown option, one that cannot change while tracing, or a bad
    /// value is a runtime error of the clause, in DTrace's words.
    fn setopt(&mut self, h: &buffer::Header, name: &str, value: Option<&str>) {
        let why = match crate::options::setopt_check(name, value) {
            Ok(()) => match crate::options::runtime_value(name, value) {
                Ok(v) => {
                    if name == "quiet" {
                        self.lines.quiet = v.is_some();
                    }
                    match v {
                        Some(v) => self.opts.insert(name.to_string(), v.to_string()),
                        None => self.opts.remove(name),
                    };
                    return;
                }
                Err(_) => crate::options::SetoptError::BadValue,
            },
            Err(e) => e,
        };
        let id = self.names.get(h.probe as usize).map_or(0, |n| n.id);
        let head = error_head(
            &self.epids,
            (h.probe, id, self.probe_name(h.probe).1),
            h.clause(),
        );
        let _ = self.out.flush();
        // dtrace shows an option set without a value as set to "1".
        eprintln!(
            "oxtrace: {head}: couldn't set option \"{name}\" to \"{}\": {}",
            value.unwrap_or("1"),
            why.text()
        );
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
            RecordKind::Printf if self.prog.freopens.contains(&h.id) => {
                let path = self.prog.format_printf(h.id, &items).unwrap_or_default();
                self.freopen(&String::from_utf8_lossy(&path))?;
            }
            RecordKind::Printf if self.prog.setopts.contains_key(&h.id) => {
                if let Some((n, v)) = self.prog.setopts.get(&h.id).cloned() {
                    self.setopt(h, &n, v.as_deref());
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
                        let mut o = json_head(kind, cpu, h, self.probe_name(h.probe).1);
                        if kind == RecordKind::Printf {
                            o.push_str(",\"text\":");
                            json_str(&mut o, &text);
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
                    OutFmt::OpenMetrics | OutFmt::Folded | OutFmt::FlameGraph => {}
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
                    let o = json_head(kind, cpu, h, self.probe_name(h.probe).1);
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
                    OutFmt::OpenMetrics | OutFmt::Folded | OutFmt::FlameGraph => {}
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
            // A key's stack was defined in its CPU's principal buffer before the key was
            // made, so the buffers taken now define every stack of this snapshot; their
            // other records wait for the next drain, which sorts them with its own.
            let recs = self.take_pbufs()?;
            self.pending.extend(recs);
            // Name user stacks while their processes live: one may exit before the end.
            prime_user_symbols(&self.aggs);
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
                "oxtrace: {specunavail} failed speculation{} (no speculative buffer available)",
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

/// A principal-buffer record taken but not yet handled: (timestamp, CPU, header,
/// payload).
type PendingRec = (u64, u32, buffer::Header, Vec<u8>);

/// Primes the system cache (`Usyms::prime`) for every process of a user value in the
/// stack keys of `t`: the run calls this at each aggregation snapshot.
fn prime_user_symbols(t: &AggTable) {
    let mut pids = std::collections::BTreeSet::new();
    for def in t.dictionary().iter() {
        if !def.keys.iter().any(|k| k.kind == KeyKind::Stack) {
            continue;
        }
        for e in t.sorted(def.id, SortOrder::default()).unwrap_or_default() {
            for el in e.key.elems() {
                if let KeyElem::Str(s) = el {
                    match Decoded::new(s) {
                        Some(d) if d.style.user() => pids.insert(d.pid),
                        _ => false,
                    };
                }
            }
        }
    }
    let mut u = usym::system().lock().unwrap_or_else(|e| e.into_inner());
    for pid in pids {
        u.prime(pid);
    }
}
