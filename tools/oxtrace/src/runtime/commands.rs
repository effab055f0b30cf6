//! The subcommands of `oxtrace`, one function each: `version`, `status`, `-l` and the trace
//! run. `main.rs` parses the flags and calls one of them.

use super::device::Device;
use super::{Held, OutFmt, Run, Source, Target};
use crate::cli::Cli;
use crate::dsl::{self, CompileOptions};
use crate::providers::{fbt, list};
use oxtrace_core::abi;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

fn features(bits: u64) -> Vec<&'static str> {
    let mut v = Vec::new();
    if bits & abi::FEAT_KPROBES != 0 {
        v.push("kprobes");
    }
    if bits & abi::FEAT_INTEL_PT != 0 {
        v.push("intel-pt");
    }
    v
}

fn state_name(state: u32) -> &'static str {
    match state {
        abi::STATE_IDLE => "idle",
        abi::STATE_LOADED => "loaded",
        abi::STATE_ACTIVE => "active",
        abi::STATE_STOPPED => "stopped",
        _ => "unknown",
    }
}

/// A subcommand's exit code, or the error that ended it.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `oxtrace version`: the tool's and the module's versions, the ABI and the features.
pub fn version(cli: &Cli) -> Res<i32> {
    let dev = Device::open(&cli.device)?;
    let v = dev.version()?;
    let feats = features(v.features);
    if cli.json {
        let list: Vec<String> = feats.iter().map(|f| format!("\"{f}\"")).collect();
        println!(
            "{{\"module\":\"{}\",\"abi\":\"{}.{}\",\"tool_abi\":\"{}.{}\",\"ncpus\":{},\"features\":[{}]}}",
            abi::cstr_field(&v.release),
            v.abi_major,
            v.abi_minor,
            abi::ABI_MAJOR,
            abi::ABI_MINOR,
            v.ncpus,
            list.join(",")
        );
    } else {
        println!("oxtrace tool   {}", env!("CARGO_PKG_VERSION"));
        println!("oxtrace module {}", abi::cstr_field(&v.release));
        println!(
            "ABI            {}.{} (tool {}.{})",
            v.abi_major,
            v.abi_minor,
            abi::ABI_MAJOR,
            abi::ABI_MINOR
        );
        println!("CPUs           {}", v.ncpus);
        println!("features       {}", feats.join(" "));
    }
    if let Some(m) = super::device::abi_mismatch(&cli.device, &v) {
        return Err(m.into());
    }
    Ok(0)
}

/// `oxtrace status`: this consumer's state and the device's counters.
pub fn status(cli: &Cli) -> Res<i32> {
    let dev = Device::open_checked(&cli.device)?;
    let s = dev.status()?;
    if cli.json {
        println!(
            "{{\"consumer\":{},\"state\":\"{}\",\"consumers_open\":{},\"consumers_live\":{},\"ioctls\":{},\"uprobes_live\":{}}}",
            s.consumer_id,
            state_name(s.state),
            s.nconsumers,
            s.live_consumers,
            s.ioctls,
            s.live_uprobes
        );
    } else {
        println!("consumer       {}", s.consumer_id);
        println!("state          {}", state_name(s.state));
        println!("consumers open {}", s.nconsumers);
        println!("consumers live {}", s.live_consumers);
        println!("ioctls         {}", s.ioctls);
        println!("uprobes live   {}", s.live_uprobes);
    }
    Ok(0)
}

/// Where the output goes: `-o FILE` opened for appending (created if missing), as dtrace
/// opens it, or standard output. `replace` truncates FILE instead (one document, an SVG).
/// `-o` with exactly a format name is refused: the format is `--oformat`'s.
pub fn output(cli: &Cli, replace: bool) -> Res<Box<dyn std::io::Write + Send>> {
    let Some(path) = cli.output.as_deref() else {
        return Ok(Box::new(std::io::stdout()));
    };
    check_output_path(path)?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(!replace)
        .write(true)
        .truncate(replace)
        .open(path)
        .map_err(|e| format!("-o {}: {e}", path.display()))?;
    Ok(Box::new(f))
}

/// `-o FMT` with FMT an output format is refused with where the format goes now.
pub fn check_output_path(path: &Path) -> Res<()> {
    match path.to_str() {
        Some(f) if crate::cli::OUTPUT_FORMATS.contains(&f) => Err(format!(
            "-o writes the output to a file: for the {f} format use --oformat {f} \
             (or -x oformat={f}); for a file named {f}, -o ./{f}"
        )
        .into()),
        _ => Ok(()),
    }
}

/// Writes `text` where the output goes (`-o FILE` or standard output).
fn write_output(cli: &Cli, text: &str) -> Res<()> {
    let mut w = output(cli, false)?;
    w.write_all(text.as_bytes())?;
    w.flush()?;
    Ok(())
}

/// `-l [PATTERN]`: the probes, like `dtrace -l`; with `-v`, each probe's argument types,
/// like `dtrace -lv`.
///
/// With `-p PID` or `-c CMD` (held at its entry point while listing), `$target` in the
/// pattern is that process: a pid or USDT description lists the probes it names there, and
/// any other pattern lists the process's USDT probes after the kernel's.
pub fn list(pattern: &str, cli: &Cli) -> Res<i32> {
    let verbose = cli.verbose;
    if let Some(p) = &cli.output {
        check_output_path(p)?;
    }
    let mut held = None;
    if let Some(cmd) = &cli.command {
        held = Some(Held::spawn(cmd).map_err(|e| format!("cannot run '{cmd}': {e}"))?);
    }
    let target = held.as_ref().map(Held::pid).or(cli.pid);
    if let Some(p) = cli.pid {
        check_pid(p)?;
    }
    let expanded;
    let pattern = match target {
        Some(t) => {
            expanded = pattern.replace("$target", &t.to_string());
            expanded.as_str()
        }
        None if pattern.contains("$target") => {
            return Err("$target in -l needs a process: -p PID or -c CMD".into())
        }
        None => pattern,
    };
    // The whole list is made first and written once, to standard output or -o FILE.
    let mut o = String::new();
    let header = |o: &mut String| {
        let _ = writeln!(
            o,
            "{:>6} {:>10} {:>16} {:>32} NAME",
            "ID", "PROVIDER", "MODULE", "FUNCTION"
        );
    };
    let user_row = |o: &mut String, id: usize, r: &[String; 4]| {
        let _ = writeln!(o, "{id:>6} {:>10} {:>16} {:>32} {}", r[0], r[1], r[2], r[3]);
    };
    if let Some(rows) = list::user_rows(pattern) {
        let rows = rows?;
        if rows.is_empty() {
            return Err(format!("probe description {pattern} does not match any probes").into());
        }
        header(&mut o);
        for (i, r) in rows.iter().enumerate() {
            user_row(&mut o, i + 1, r);
        }
        write_output(cli, &o)?;
        return Ok(0);
    }
    // On a terminal, a line that keeps time while a long list is made.
    let ticker = super::progress::Ticker::start("listing probes");
    let (functions, _) = fbt::functions()?;
    let btf = match verbose.then(crate::btf::Btf::kernel).flatten() {
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            eprintln!("oxtrace: warning: kernel types unavailable: {e}");
            None
        }
        None => None,
    };
    let mut fields: Vec<&str> = pattern.split(':').collect();
    // bpftrace's `tracepoint:SUBSYS:EVENT` is `tracepoint:SUBSYS::EVENT` here.
    if fields.len() == 3 && fields[0] == "tracepoint" {
        fields.insert(2, "");
    }
    // FUNC alone, or provider:module:function:name with missing fields on the left.
    let want = |prov: &str, module: &str, func: &str, name: &str| -> bool {
        let parts = [prov, module, func, name];
        let m = |p: &str, v: &str| p.is_empty() || fbt::glob_match(p, v);
        match fields.len() {
            1 => m(fields[0], func),
            n => fields
                .iter()
                .zip(&parts[4 - n.min(4)..])
                .all(|(p, v)| m(p, v)),
        }
    };
    header(&mut o);
    let mut id = 0;
    // A function that is unsafe to probe is listed with `unsafe:<reason>` after its name.
    let mut row = |prov: &str, module: &str, func: &str, name: &str| {
        id += 1;
        if want(prov, module, func, name) {
            let _ = match oxtrace_core::probesafe::refusal(func).filter(|_| prov == "fbt") {
                Some(why) => writeln!(
                    o,
                    "{id:>6} {prov:>10} {module:>16} {func:>32} {name} unsafe:{}",
                    why.tag()
                ),
                None => writeln!(o, "{id:>6} {prov:>10} {module:>16} {func:>32} {name}"),
            };
            if verbose && prov == "tracepoint" {
                let _ = match crate::providers::tracepoints::load(module, name) {
                    Ok(f) => writeln!(o, "{}", crate::providers::argtypes::describe_fields(&f)),
                    Err(e) => writeln!(o, "\n\tArgument Types\n\t\t{e}\n"),
                };
            } else if verbose {
                let types = crate::providers::argtypes::arg_types(btf.as_ref(), prov, func, name);
                let _ = writeln!(
                    o,
                    "{}",
                    crate::providers::argtypes::describe(types.as_deref())
                );
            }
        }
    };
    list::for_each_listed(&functions, &mut row);
    if let Some(t) = target {
        for r in list::usdt_rows(t) {
            id += 1;
            if want(&r[0], &r[1], &r[2], &r[3]) {
                user_row(&mut o, id, &r);
            }
        }
    }
    drop(ticker);
    write_output(cli, &o)?;
    drop(held);
    Ok(0)
}

/// Whether compile error `msg`, got without the kernel's types, is one they may cure: a
/// kernel typedef name read as a variable (`D_SYNTAX`, `D_IDENT_UNDEF`), a type not
/// defined, or what says it needs them. Only these: compiling again is not free.
fn kernel_types_may_help(msg: &str) -> bool {
    msg.contains("[D_SYNTAX]")
        || msg.contains("[D_IDENT_UNDEF]")
        || (msg.contains("] type ") && msg.contains(" is not defined"))
        || msg.contains("needs the kernel's BTF")
}

/// The D text of `-n PROBE` or `-P PROVIDER`: a description alone gets DTrace's default
/// action (an empty clause).
fn probe_program(cli: &Cli) -> Option<(String, String)> {
    let (text, name) = match (&cli.probe, &cli.provider) {
        (Some(n), _) => (n.clone(), "-n"),
        (None, Some(p)) => (format!("{p}:::"), "-P"),
        (None, None) => return None,
    };
    let text = if text.contains('{') {
        text
    } else {
        format!("{text} {{ }}")
    };
    Some((text, name.to_string()))
}

/// A script's first line when it is an interpreter line (`#!/usr/bin/oxtrace -qs`), made
/// blank so that the compiler ignores it and every other line keeps its number.
fn strip_interpreter_line(text: String) -> String {
    match text.strip_prefix("#!") {
        Some(rest) => rest
            .find('\n')
            .map_or(String::new(), |i| rest[i..].to_string()),
        None => text,
    }
}

/// `-p PID` names a process that exists (signal 0 checks without sending; EPERM: it exists).
fn check_pid(pid: u32) -> Res<()> {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return Err(format!("-p {pid}: no such process").into());
    }
    Ok(())
}

/// Compile the program the flags name, load it and run it until it ends.
pub fn trace(cli: &Cli) -> Res<i32> {
    let (text, name) =
        match (&cli.program, &cli.script, probe_program(cli)) {
            (Some(p), _, _) => (p.clone(), "-e".to_string()),
            (None, Some(f), _) => (
                strip_interpreter_line(
                    std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?,
                ),
                f.display().to_string(),
            ),
            (None, None, Some(p)) => p,
            (None, None, None) => return Err(
                "nothing to do: give -e PROGRAM, -s FILE, -n PROBE, -P PROVIDER or -l (see --help)"
                    .into(),
            ),
        };
    let text = if cli.cpp {
        use crate::dsl::cpp::{preprocess_with, CppArg, CPP};
        let args: Vec<CppArg> = if cli.cpp_args.is_empty() {
            // A `Cli` not made by `Cli::ordered`: each flag's values in turn.
            (cli.includes.iter())
                .map(|i| CppArg::Include(i.display().to_string()))
                .chain(cli.defines.iter().map(|d| CppArg::Define(d.clone())))
                .chain(cli.undefs.iter().map(|u| CppArg::Undef(u.clone())))
                .collect()
        } else {
            cli.cpp_args
                .iter()
                .filter_map(|a| CppArg::parse(a))
                .collect()
        };
        // -x cpppath=PATH: the last one given.
        let cpp = (cli.xopts.iter().rev())
            .find_map(|x| x.strip_prefix("cpppath="))
            .unwrap_or(CPP);
        preprocess_with(cpp, &text, &name, &args)?
    } else {
        text
    };
    if let Some(pid) = cli.pid {
        check_pid(pid)?;
    }
    // A bad --web-config is refused before anything is compiled or attached.
    let web = match &cli.web_config {
        Some(f) => {
            crate::runtime::exporter::WebConfig::load(f).map_err(|e| format!("--web-config {e}"))?
        }
        None => Default::default(),
    };
    if let Some(p) = &cli.output {
        check_output_path(p)?;
    }
    super::catch_signals();
    let mut target = Target {
        child: None,
        pid: cli.pid,
    };
    if let Some(cmd) = &cli.command {
        let held = Held::spawn(cmd).map_err(|e| format!("cannot run '{cmd}': {e}"))?;
        if !held.after_exec() {
            eprintln!(
                "oxtrace: warning: '{cmd}' is held before its exec (the tool may not trace it): pid and USDT probes cannot name it"
            );
        }
        target.child = Some(held);
    }
    let mut opts = CompileOptions::with_args(&name, &cli.args).with_process_macros();
    let tpid = target.child.as_ref().map(|c| c.pid()).or(cli.pid);
    if let Some(p) = tpid {
        opts.macros.insert("target".into(), p.to_string());
    }
    if cli.quiet {
        opts.xopts.push(("quiet".into(), None));
    }
    if cli.destructive {
        opts.xopts.push(("destructive".into(), None));
    }
    if let Some(b) = &cli.bufsize {
        opts.xopts.push(("bufsize".into(), Some(b.clone())));
    }
    for x in &cli.xopts {
        let (k, v) = match x.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (x.clone(), None),
        };
        opts.xopts.push((k, v));
    }
    // --oformat is -x oformat=, after the -x options (the last one given wins).
    if let Some(f) = &cli.oformat {
        opts.xopts.push(("oformat".into(), Some(f.clone())));
    }
    // The kernel's types, for typed args[], curthread and kernel structs: parsed only for
    // a program that can reach them (tens of milliseconds for a distribution kernel);
    // `psinfo` for the prelude's process views (curpsinfo, lwpsinfo_t, ...), `info_t` and
    // `curcpu` for its other types, the stable providers for their translated arguments
    // and conditions (`proc:::exit { }` reads task_struct).
    let wants_btf = ["args", "curthread", "struct", "union", "enum", "`"]
        .iter()
        .any(|w| text.contains(w))
        || ["xlate", "psinfo", "info_t", "curcpu"]
            .iter()
            .any(|w| text.contains(w))
        || crate::providers::stable::PROVIDERS
            .iter()
            .any(|p| text.contains(&format!("{p}:")));
    let kernel_types = || match crate::btf::Btf::kernel() {
        Some(Ok(b)) => Some(std::sync::Arc::new(b)),
        Some(Err(e)) => {
            eprintln!("oxtrace: warning: kernel types unavailable: {e}");
            None
        }
        None => None,
    };
    opts.btf = if wants_btf { kernel_types() } else { None };
    let mut compiled = dsl::compile(&text, &name, &opts);
    // A kernel typedef (`(loff_t)x`) needs the types too: compile again with them.
    if compiled
        .as_ref()
        .is_err_and(|e| kernel_types_may_help(&e.msg))
        && !wants_btf
    {
        opts.btf = kernel_types();
        if opts.btf.is_some() {
            compiled = dsl::compile(&text, &name, &opts);
        }
    }
    let prog = match compiled {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    for w in &prog.warnings {
        eprintln!("oxtrace: warning: {w}");
    }
    // The format as --oformat, -x oformat= or #pragma D option oformat= left it.
    let fmt = match prog.tool_options.get("oformat").map(String::as_str) {
        None | Some("text") => OutFmt::Text,
        Some("json") => OutFmt::Json,
        Some("openmetrics") => OutFmt::OpenMetrics,
        Some("folded") => OutFmt::Folded,
        Some("flamegraph") => OutFmt::FlameGraph,
        Some(o) => return Err(format!("unknown output format '{o}'").into()),
    };
    // The compiler has refused what LOAD would refuse; only now the device, which must
    // speak the tool's ABI.
    let dev = Device::open_checked(&cli.device)?;
    // An SVG is one document: it replaces the file; the other formats append to it.
    let out = output(cli, fmt == OutFmt::FlameGraph)?;
    let src = Source {
        text: &text,
        name: &name,
    };
    let mut r = Run::load(&dev, &prog, src, fmt)?;
    r.write_to(out);
    if let Some(addr) = &cli.listen {
        use crate::runtime::exporter::{serve, Metrics};
        let scheme = if web.tls() { "https" } else { "http" };
        if web.auth() && !web.tls() {
            eprintln!(
                "oxtrace: warning: --web-config has basic_auth_users but no \
                 tls_server_config: passwords cross the network in clear"
            );
        }
        let m = Metrics::default();
        let bound = serve(addr, m.clone(), web).map_err(|e| format!("--listen {addr}: {e}"))?;
        eprintln!("oxtrace: serving the aggregations on {scheme}://{bound}/metrics");
        r.publish_to(m);
    }
    Ok(r.run(&mut target, cli.verbose)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn only_errors_kernel_types_may_cure_compile_again() {
        for m in [
            "1:10: [D_SYNTAX] syntax error: expected ';', found 'o'",
            "1:9: [D_IDENT_UNDEF] failed to resolve umode_t: it is never assigned or declared",
            "1:1: [D_TYPE_ERR] type loff_t is not defined",
            "proc:::exit: the stable providers translate the kernel's structs, which needs the kernel's BTF",
        ] {
            assert!(kernel_types_may_help(m), "{m}");
        }
        for m in [
            "1:1: [D_MACRO_UNDEF] macro argument $1 is not defined",
            "1:1: [D_PDESC_ZERO] probe description ::nosuch:entry does not match any probes",
            "1:5: [D_DIV_ZERO] division by zero",
        ] {
            assert!(!kernel_types_may_help(m), "{m}");
        }
    }

    #[test]
    fn interpreter_lines_are_blank() {
        let s = strip_interpreter_line("#!/usr/bin/oxtrace -qs\nBEGIN { }\n".into());
        assert_eq!(s, "\nBEGIN { }\n");
        assert_eq!(strip_interpreter_line("#!x".into()), "");
        assert_eq!(strip_interpreter_line("BEGIN\n".into()), "BEGIN\n");
    }

    #[test]
    fn a_format_name_is_not_an_output_file() {
        for f in crate::cli::OUTPUT_FORMATS {
            let e = check_output_path(Path::new(f)).unwrap_err().to_string();
            assert!(e.contains(&format!("--oformat {f}")), "{e}");
            assert!(e.contains(&format!("-o ./{f}")), "{e}");
            assert!(check_output_path(Path::new(&format!("./{f}"))).is_ok());
        }
        assert!(check_output_path(Path::new("trace.json")).is_ok());
    }

    #[test]
    fn oformat_is_a_checked_tool_option() {
        let compile = |x: &str| {
            let mut o = CompileOptions::with_args("-e", &[]);
            o.xopts.push(("oformat".into(), Some(x.into())));
            dsl::compile("BEGIN { exit(0); }", "-e", &o)
        };
        let p = compile("json").unwrap();
        assert_eq!(
            p.tool_options.get("oformat").map(String::as_str),
            Some("json")
        );
        let e = compile("xml").unwrap_err();
        assert!(e.msg.contains("one of text, json"), "{}", e.msg);
        let p = dsl::compile(
            "#pragma D option oformat=folded\nBEGIN { exit(0); }",
            "-e",
            &CompileOptions::with_args("-e", &[]),
        )
        .unwrap();
        assert_eq!(
            p.tool_options.get("oformat").map(String::as_str),
            Some("folded")
        );
    }
}
