// The command line of `oxtrace`. Self-contained (clap and std only, no inner attributes):
// build.rs `include!`s this file to generate the shell completions at build time.

use clap::{Parser, ValueHint};
use std::path::PathBuf;

/// `device::DEFAULT_PATH`, spelled out because build.rs cannot see the crate (a test checks
/// they agree).
pub const DEFAULT_DEVICE: &str = "/dev/oxtrace";

/// The output formats of `--oformat` and `-x oformat=`.
pub const OUTPUT_FORMATS: [&str; 5] = ["text", "json", "openmetrics", "folded", "flamegraph"];

#[derive(Parser)]
#[command(
    name = "oxtrace",
    version,
    about = "DTrace-class tracing for Linux",
    after_help = "Examples:\n  oxtrace -e 'fbt::vfs_read:entry { @[execname] = count(); }'\n  \
                  oxtrace -q -s latency.d -c 'ls -l /'\n  oxtrace -l 'vfs_*'"
)]
pub struct Cli {
    /// The oxtrace device node.
    #[arg(long, global = true, default_value = DEFAULT_DEVICE, value_hint = ValueHint::FilePath)]
    pub device: PathBuf,
    /// Machine-readable JSON (version, status).
    #[arg(long, global = true)]
    pub json: bool,
    /// Run the D program given on the command line.
    #[arg(short = 'e', value_name = "PROGRAM", conflicts_with = "script")]
    pub program: Option<String>,
    /// A probe description with an optional clause (`-n 'syscall::read:entry { ... }'`), as
    /// dtrace's -n; with -l, the probes it matches.
    #[arg(short = 'n', value_name = "PROBE", conflicts_with_all = ["program", "script"])]
    pub probe: Option<String>,
    /// Every probe of PROVIDER (`-P syscall`); with -l, list them.
    #[arg(short = 'P', value_name = "PROVIDER", conflicts_with_all = ["program", "script", "probe"])]
    pub provider: Option<String>,
    /// Run the D program in FILE.
    #[arg(short = 's', value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub script: Option<PathBuf>,
    /// List the probes (matching PATTERN: FUNC or provider:module:function:name globs).
    #[arg(short = 'l', value_name = "PATTERN", num_args = 0..=1, default_missing_value = "")]
    pub list: Option<String>,
    /// Run CMD, held at its entry point until the probes are on; trace until it exits ($target = its pid).
    #[arg(short = 'c', value_name = "CMD", conflicts_with = "pid", value_hint = ValueHint::CommandString)]
    pub command: Option<String>,
    /// Trace until process PID exits ($target = PID, for pid$target and USDT probes).
    #[arg(short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// Run the program text through the C preprocessor (cpp) first, as dtrace -C does.
    #[arg(short = 'C')]
    pub cpp: bool,
    /// With -C: define NAME (to VAL, or 1) for the preprocessor (-D and -U apply in
    /// command-line order).
    #[arg(short = 'D', value_name = "NAME[=VAL]", requires = "cpp")]
    pub defines: Vec<String>,
    /// With -C: undefine NAME for the preprocessor.
    #[arg(short = 'U', value_name = "NAME", requires = "cpp")]
    pub undefs: Vec<String>,
    /// With -C: search DIR for #include files.
    #[arg(short = 'I', value_name = "DIR", requires = "cpp", value_hint = ValueHint::DirPath)]
    pub includes: Vec<PathBuf>,
    /// Set an option (bufsize=4m, switchrate=10hz, quiet, ...), like #pragma D option.
    #[arg(short = 'x', value_name = "OPT[=VAL]")]
    pub xopts: Vec<String>,
    /// Principal buffer size per CPU (4m, 64k, bytes), the same as -x bufsize=SIZE.
    #[arg(short = 'b', value_name = "SIZE")]
    pub bufsize: Option<String>,
    /// Print only what the program prints.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Allow destructive actions (system, raise, stop, chill, copyout), like #pragma D option
    /// destructive.
    #[arg(short = 'w')]
    pub destructive: bool,
    /// Say on stderr when the probes are enabled ("oxtrace: N probes enabled"); at the end,
    /// print the counters of every probe and CPU.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Serve the aggregations as OpenMetrics on http://ADDR/metrics while the program runs;
    /// a bare PORT or :PORT listens on 127.0.0.1 only (name 0.0.0.0:PORT for every
    /// interface).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// TLS and basic authentication for --listen: a Prometheus exporter web configuration
    /// file (tls_server_config: cert_file, key_file; basic_auth_users: bcrypt hashes).
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub web_config: Option<String>,
    /// Write the output (records, aggregations, -l's list) to FILE, appending, as dtrace -o
    /// does (a flame graph replaces FILE). Errors and notices stay on standard error.
    #[arg(short = 'o', value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub output: Option<PathBuf>,
    /// Output format: text (the default), json, openmetrics, folded (stack aggregations as
    /// folded stacks) or flamegraph (stack aggregations as an SVG flame graph); the same as
    /// -x oformat=FMT.
    #[arg(
        long,
        value_name = "FMT",
        value_parser = clap::builder::PossibleValuesParser::new(OUTPUT_FORMATS)
    )]
    pub oformat: Option<String>,
    /// Arguments of the program ($1, $2, ...); without a program: `version` (the module's ABI
    /// and features) or `status` (a new consumer's state).
    #[arg(value_name = "ARG")]
    pub args: Vec<String>,
    /// The preprocessor's -D, -U and -I, and -x define=, undef= and incdir=, in
    /// command-line order, each as cpp takes it (`-DNAME=VAL`); filled by [`Cli::ordered`].
    #[arg(skip)]
    pub cpp_args: Vec<String>,
}

impl Cli {
    /// Parses the command line as `Cli::parse` does, and records the order of the
    /// preprocessor's arguments (clap keeps each flag's values apart) in `cpp_args`.
    pub fn ordered() -> Cli {
        Self::ordered_from(std::env::args_os())
    }

    /// [`Cli::ordered`] for the arguments `args` (the program name first).
    pub fn ordered_from<I, T>(args: I) -> Cli
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::{CommandFactory, FromArgMatches};
        let m = Self::command().get_matches_from(args);
        let mut cli = Self::from_arg_matches(&m).unwrap_or_else(|e| e.exit());
        let mut args: Vec<(usize, String)> = Vec::new();
        for (id, flag) in [("defines", "-D"), ("undefs", "-U"), ("includes", "-I")] {
            if let (Some(ix), Some(vals)) = (m.indices_of(id), m.get_raw(id)) {
                for (i, v) in ix.zip(vals) {
                    args.push((i, format!("{flag}{}", v.to_string_lossy())));
                }
            }
        }
        if let (Some(ix), Some(vals)) = (m.indices_of("xopts"), m.get_raw("xopts")) {
            for (i, v) in ix.zip(vals) {
                let v = v.to_string_lossy();
                let flag = match v.split_once('=') {
                    Some(("define", d)) => format!("-D{d}"),
                    Some(("undef", u)) => format!("-U{u}"),
                    Some(("incdir", d)) => format!("-I{d}"),
                    _ => continue,
                };
                args.push((i, flag));
            }
        }
        args.sort_by_key(|a| a.0);
        cli.cpp_args = args.into_iter().map(|a| a.1).collect();
        cli
    }
}
