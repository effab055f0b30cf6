//! The D-subset compiler: lexer, parser, compiler to the program image of
//! `oxtrace_core::program` (`crate::output::printf` formats the records it returns).
//!
//! The grammar, built-ins, actions and options are documented in
//! `Documentation/d-language.rst`.

pub mod compile;
pub mod cpp;
pub mod error;
pub mod format;
mod gen;
mod passes;
pub mod syntax;
pub mod types;
#[cfg(test)]
mod user_tests;

pub use error::{CompileError, Span};
pub use passes::probe_spec::PROVIDERS;
pub use syntax::parser::Macros;

use oxtrace_core::action::{Insn, Op, Scope};
use oxtrace_core::agg::AggKind;
use oxtrace_core::program::{OptKey, Options, ProbeKind};
use std::collections::BTreeMap;
use std::ops::Range;

/// Kind of a key component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// An integer.
    Int,
    /// A string.
    Str,
    /// A kernel stack (`stack()`), a string to the kernel.
    Stack,
}

impl KeyKind {
    /// The D type name.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Int => "integer",
            KeyKind::Str => "string",
            KeyKind::Stack => "stack",
        }
    }
}

/// A probe the program enables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// What kind of probe.
    pub kind: ProbeKind,
    /// Function glob for fbt probes; the system call's name for syscall probes.
    pub func: String,
    /// Period for tick and profile probes, ns; the system call's number for syscall probes
    /// (the description's `arg` in the image).
    pub period_ns: u64,
    /// The description as written.
    pub text: String,
    /// User-space probes (pid and USDT kinds): the uprobes LOAD places for it.
    pub uprobes: Vec<crate::providers::process::UserProbe>,
    /// Functions its globs matched that were left out: no size to decode them by.
    pub uskipped: u32,
    /// The module field of an fbt description (a glob; empty, `*`: any; `vmlinux`,
    /// `kernel`: the kernel's own functions), which the attach table applies.
    pub module: String,
}

/// An aggregation of the program (the user-level dictionary entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggInfo {
    /// Name without `@`.
    pub name: String,
    /// Function.
    pub func: AggKind,
    /// Key layout.
    pub keys: Vec<KeyKind>,
    /// The D text of each key expression (`execname`, `arg0 & 0xff`), for output.
    pub key_names: Vec<String>,
    /// Which keys are 64-bit unsigned integers (`uint64_t`), printed unsigned.
    pub key_u64: Vec<bool>,
    /// Parameters (lquantize, llquantize).
    pub params: [i64; 4],
}

/// A variable of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarSummary {
    /// Name.
    pub name: String,
    /// Scope.
    pub scope: Scope,
}

/// A compiled program: the image for LOAD and what user space needs to interpret records.
#[derive(Clone, Debug, Default)]
pub struct Compiled {
    /// The program image (`oxtrace_core::program` format).
    pub image: Vec<u8>,
    /// Probe descriptions, in image order.
    pub probes: Vec<ProbeSpec>,
    /// Per clause: the span of its head and the range of its probes.
    pub clause_spans: Vec<(Span, Range<usize>)>,
    /// printf/printa formats by id.
    pub formats: Vec<String>,
    /// `printa(fmt, @a, @b, ...)` of several aggregations: its format id (one of its own)
    /// and the aggregations, in argument order. The printa record names the first.
    pub printa_aggs: BTreeMap<u32, Vec<u32>>,
    /// `setopt()` records: their format id, the option and its value, if given.
    pub setopts: BTreeMap<u32, (String, Option<String>)>,
    /// `tracemem()` and `print()` records: their format id and what they show.
    pub prints: BTreeMap<u32, types::ptype::PrintSpec>,
    /// `freopen()` records' format ids: their text is the path the output goes to.
    pub freopens: std::collections::BTreeSet<u32>,
    /// Aggregations by id.
    pub aggs: Vec<AggInfo>,
    /// Variables by id.
    pub vars: Vec<VarSummary>,
    /// Number of clause-local variables.
    pub nlocals: u32,
    /// Kernel options (defaults where not set).
    pub options: Options,
    /// The kernel options set explicitly, in order.
    pub set_options: Vec<OptKey>,
    /// Option `quiet`.
    pub quiet: bool,
    /// Tool-only options and their values.
    pub tool_options: BTreeMap<String, String>,
    /// Warnings (e.g. clamped options).
    pub warnings: Vec<String>,
    /// Where each kernel option was last set.
    pub option_at: Vec<(OptKey, passes::options::OptionAt)>,
}

/// What the compiler needs besides the source.
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Macro variables (`$1`, `$target`...), by name without `$`.
    pub macros: Macros,
    /// `-x name[=value]` options.
    pub xopts: Vec<(String, Option<String>)>,
    /// The kernel's types, for typed `args[]`, `curthread` and kernel structs; `None`
    /// when the kernel has no BTF.
    pub btf: Option<std::sync::Arc<crate::btf::Btf>>,
    /// The kernel's symbols, for external variables (`` `jiffies ``); `None`: the running
    /// kernel's /proc/kallsyms.
    pub ksyms: Option<std::sync::Arc<crate::sym::ksym::Ksyms>>,
}

impl CompileOptions {
    /// Options with positional macro arguments `$1..$n` and `$0` = `name`.
    pub fn with_args(name: &str, args: &[String]) -> Self {
        let mut macros = Macros::new();
        macros.insert("0".into(), name.into());
        for (i, a) in args.iter().enumerate() {
            macros.insert((i + 1).to_string(), a.clone());
        }
        CompileOptions {
            macros,
            xopts: vec![],
            btf: None,
            ksyms: None,
        }
    }

    /// Add the macro variables that describe the oxtrace process itself, as dtrace defines
    /// them for its own process: `$pid`, `$ppid`, `$uid`, `$gid`, `$euid`, `$egid`, `$pgid`,
    /// `$sid`.
    pub fn with_process_macros(mut self) -> Self {
        // SAFETY: these calls take no pointer and cannot fail.
        let (uid, gid, euid, egid, pgid, sid) = unsafe {
            (
                libc::getuid(),
                libc::getgid(),
                libc::geteuid(),
                libc::getegid(),
                libc::getpgid(0),
                libc::getsid(0),
            )
        };
        let vals = [
            ("pid", std::process::id().to_string()),
            ("ppid", std::os::unix::process::parent_id().to_string()),
            ("uid", uid.to_string()),
            ("gid", gid.to_string()),
            ("euid", euid.to_string()),
            ("egid", egid.to_string()),
            ("pgid", pgid.to_string()),
            ("sid", sid.to_string()),
        ];
        for (k, v) in vals {
            self.macros.entry(k.to_string()).or_insert(v);
        }
        self
    }
}

/// Compile D source `src` (named `input` in errors: a file name, or `-e`).
pub fn compile(src: &str, input: &str, opts: &CompileOptions) -> Result<Compiled, CompileError> {
    let items = parse(src, input, opts)?;
    compile::compile_items(&items, src, input, &opts.xopts, true, opts)
}

/// The items of `src`, with its macro arguments checked: each one given must be referenced
/// (`D_MACRO_UNUSED`) unless option `argref` is set, as DTrace checks.
fn parse(
    src: &str,
    input: &str,
    opts: &CompileOptions,
) -> Result<Vec<syntax::ast::Item>, CompileError> {
    use syntax::lexer::Tok;
    let toks =
        syntax::lexer::lex(src).map_err(|(span, msg)| CompileError::at(src, input, span, msg))?;
    // Unused arguments are found after the program parsed (an unset one is the error then).
    let mut argref = crate::options::flag_set(&opts.xopts, "argref");
    let mut used = std::collections::HashSet::new();
    for t in &toks {
        match &t.tok {
            Tok::Macro { name, .. } => {
                used.insert(name.clone());
            }
            Tok::Pragma(text) => {
                let w: Vec<&str> = text.split_whitespace().collect();
                if let [_, "D", "option", o] = w[..] {
                    let (k, v) = o.split_once('=').map_or((o, None), |(k, v)| (k, Some(v)));
                    if k == "argref" {
                        argref = matches!(crate::options::runtime_value(k, v), Ok(Some(_)));
                    }
                }
            }
            _ => {}
        }
    }
    let mut p = syntax::parser::Parser::new(toks, src, input, &opts.macros);
    p.set_default_args(crate::options::flag_set(&opts.xopts, "defaultargs"));
    if let Some(btf) = &opts.btf {
        for ty in syntax::prelude::PRELUDE_TYPES {
            p.add_typedef(ty);
        }
        // As DTrace, the kernel's typedef names are type names: those that read as types.
        for ty in btf.names(crate::btf::NameKind::Typedef) {
            if reads_as_type(ty) {
                p.add_typedef(ty);
            }
        }
    }
    let items = match p.program() {
        Ok(items) => items,
        Err(e) => {
            // DTrace reads a pragma as its lexer meets it: a wrong one before the syntax
            // error is the error.
            let mut c = Compiled::default();
            for (text, span) in p.passed_pragmas() {
                passes::options::pragma(&mut c, src, input, text, span, true)?;
            }
            return Err(e);
        }
    };
    let mut nargs = (1..).take_while(|i: &usize| opts.macros.contains_key(&i.to_string()));
    if let Some(n) = nargs.find(|i| !used.contains(&i.to_string())) {
        if !argref {
            return Err(CompileError::at(
                src,
                input,
                Span::new(src.len(), src.len()),
                format!(
                    "[D_MACRO_UNUSED] macro argument ${n} is not referenced (-x argref allows it)"
                ),
            ));
        }
    }
    Ok(items)
}

/// [`compile`] without the checks of the kernel's limits (option ranges, aggregation
/// parameters, the LOAD check): the image the kernel would be sent if the compiler did not
/// check, for tests that compare the compiler's verdict with the kernel's.
#[doc(hidden)]
pub fn compile_unchecked(
    src: &str,
    input: &str,
    opts: &CompileOptions,
) -> Result<Compiled, CompileError> {
    let items = parse(src, input, opts)?;
    compile::compile_items(&items, src, input, &opts.xopts, false, opts)
}

/// Disassemble bytecode words, one instruction a line.
pub fn disassemble(code: &[u64]) -> String {
    let mut s = String::new();
    for (i, &w) in code.iter().enumerate() {
        let ins = Insn::decode(w);
        let name = Op::from_u8(ins.op).map_or("?", |o| o.name());
        s.push_str(&format!(
            "{i:04}: {name:<11} r{}, r{}, r{}, {:#x}\n",
            ins.rd, ins.r1, ins.r2, ins.imm
        ));
    }
    s
}

/// Whether kernel typedef name `n` reads as a type (`loff_t`, `__u8`, `u32`, `s64`): other
/// typedef names (`code`, `config`) stay free for variables.
fn reads_as_type(n: &str) -> bool {
    n.ends_with("_t")
        || n.starts_with("__")
        || matches!(
            n,
            "u8" | "u16" | "u32" | "u64" | "s8" | "s16" | "s32" | "s64"
        )
}
