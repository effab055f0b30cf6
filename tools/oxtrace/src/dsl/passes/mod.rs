//! The compiler's passes over a parsed program before and around code generation, one a
//! file, in the order the driver (`compile.rs`) runs them, and the tables they fill for
//! the code generator: declared and learned types of variables, aggregations, translators,
//! and the pools of constants, strings and formats the image holds.

use super::error::Span;
use super::syntax::ast::{DeclClass, Expr};
use super::types::btf_types::BtfTypes;
use super::types::ptype::PrintSpec;
use super::types::{Ty, TypeEnv};
use super::{CompileOptions, Compiled, KeyKind};
use oxtrace_core::action::Scope;
use oxtrace_core::agg::AggKind;
use std::collections::{HashMap, HashSet};

pub(super) mod addr;
pub(super) mod check;
pub(super) mod declare;
pub(super) mod infer;
pub(crate) mod options;
pub(super) mod partial;
pub(super) mod probe_spec;
pub(super) mod stable;
pub(crate) mod user_spec;
pub(super) mod xlate;

#[derive(Clone)]
pub(crate) struct Var {
    pub(crate) name: String,
    pub(crate) scope: Scope,
    pub(crate) keys: Option<Vec<KeyKind>>,
    /// Whether the value is a string (associative arrays only).
    pub(crate) string: bool,
}

#[derive(Clone)]
pub(crate) struct Agg {
    pub(crate) name: String,
    pub(crate) func: AggKind,
    pub(crate) params: [i64; 4],
    pub(crate) keys: Option<Vec<KeyKind>>,
    /// The D text of each key expression at its first use (`execname`), for output.
    pub(crate) key_names: Vec<String>,
    /// Which keys are `uint64_t` at their first use, printed unsigned.
    pub(crate) key_u64: Vec<bool>,
    pub(crate) first: Span,
    /// Whether an update was compiled (else only declared by the pre-pass).
    pub(crate) defined: bool,
}

/// Program-wide tables shared by every clause.
#[derive(Clone)]
pub(crate) struct Tables {
    pub(crate) ints: Vec<u64>,
    pub(crate) int_idx: HashMap<u64, u32>,
    pub(crate) strtab: Vec<u8>,
    pub(crate) str_idx: HashMap<Vec<u8>, u32>,
    pub(crate) vars: Vec<Var>,
    pub(crate) var_idx: HashMap<(u32, String), u32>,
    pub(crate) aggs: Vec<Agg>,
    pub(crate) agg_idx: HashMap<String, u32>,
    pub(crate) fmts: Vec<u32>,
    pub(crate) fmt_idx: HashMap<Vec<u8>, u32>,
    pub(crate) fmt_text: Vec<String>,
    pub(crate) locals: HashMap<String, (u32, Option<Ty>)>,
    pub(crate) strsize: u32,
    /// Scratch memory of a clause (option `scratchsize`).
    pub(crate) scratchsize: u32,
    /// Frames of `stack()` and `ustack()` without a count (options `stackframes`,
    /// `ustackframes`).
    pub(crate) stackframes: u32,
    pub(crate) ustackframes: u32,
    /// The most frames any `stack()` or `ustack()` takes (option `maxframes`).
    pub(crate) maxframes: u32,
    /// Declared structs, unions, typedefs and enumerators.
    pub(crate) env: TypeEnv,
    /// The value type of each variable (and member path `x.m`) by storage class and name:
    /// declared, or fixed by its first assignment.
    pub(crate) vty: HashMap<(DeclClass, String), Ty>,
    /// Where each variable was declared.
    pub(crate) declared: HashMap<(DeclClass, String), Span>,
    /// Declared key types of associative arrays.
    pub(crate) decl_keys: HashMap<(DeclClass, String), Vec<Ty>>,
    /// `inline` names: type and expression.
    pub(crate) inlines: HashMap<String, (Ty, Expr)>,
    /// Variables (storage class, base name) that some statement assigns.
    pub(crate) assigned: HashSet<(DeclClass, String)>,
    /// Variables kept in memory so that pointers to them exist (`addr.rs`).
    pub(crate) memvars: HashSet<(DeclClass, String)>,
    /// Set when a variable is read before its type is known (a later pass may know it).
    pub(crate) assumed: bool,
    /// Whether each variable (class, path) is used with keys (an associative array) or
    /// without, and where it was first: one variable cannot be both.
    pub(crate) shapes: HashMap<(DeclClass, String), (bool, Span)>,
    /// Bit-field members of variables (class, path): width and signedness.
    pub(crate) bitfields: HashMap<(DeclClass, String), (u8, bool)>,
    /// Whether to check what the kernel's limits refuse (see `compile_unchecked`).
    pub(crate) checked: bool,
    /// Formats of `printa` with several aggregations, each its own: (format id, aggs).
    pub(crate) printa_groups: Vec<(u32, Vec<u32>)>,
    /// `setopt()` actions, each a format of its own: (format id, option, value).
    pub(crate) setopts: Vec<(u32, String, Option<String>)>,
    /// `tracemem()` and `print()` records, each a format of its own: (format id, spec).
    pub(crate) prints: Vec<(u32, PrintSpec)>,
    /// `freopen()` records, each a format of its own: their format ids.
    pub(crate) freopens: Vec<u32>,
    /// Whether destructive actions are allowed (`-w`, `#pragma D option destructive`).
    pub(crate) destructive: bool,
    /// Translators (`passes/xlate.rs`).
    pub(crate) xlate: xlate::Xlators,
}

impl Tables {
    /// The tables of a program compiled with options `c` (the `-x` and pragma ones set).
    pub(crate) fn new(c: &Compiled, opts: &CompileOptions, checked: bool) -> Tables {
        let mut t = Tables {
            ints: vec![],
            int_idx: HashMap::new(),
            strtab: vec![0],
            str_idx: HashMap::new(),
            vars: vec![],
            var_idx: HashMap::new(),
            aggs: vec![],
            agg_idx: HashMap::new(),
            fmts: vec![],
            fmt_idx: HashMap::new(),
            fmt_text: vec![],
            locals: HashMap::new(),
            strsize: c.options.strsize as u32,
            scratchsize: c.options.scratchsize as u32,
            // maxframes bounds every frame count, the defaults included, as in DTrace.
            stackframes: frames_option(c, "stackframes", oxtrace_core::stack::DEFAULT_FRAMES)
                .min(frames_option(c, "maxframes", u32::MAX)),
            ustackframes: frames_option(c, "ustackframes", oxtrace_core::ustack::DEFAULT_FRAMES)
                .min(frames_option(c, "maxframes", u32::MAX)),
            maxframes: frames_option(c, "maxframes", u32::MAX),
            checked,
            printa_groups: vec![],
            setopts: vec![],
            prints: vec![],
            freopens: vec![],
            destructive: c.tool_options.contains_key("destructive"),
            env: TypeEnv {
                btf: BtfTypes::new(opts.btf.clone(), opts.ksyms.clone()),
                ..TypeEnv::default()
            },
            vty: HashMap::new(),
            declared: HashMap::new(),
            decl_keys: HashMap::new(),
            inlines: HashMap::new(),
            assigned: HashSet::new(),
            memvars: HashSet::new(),
            assumed: false,
            shapes: HashMap::new(),
            bitfields: HashMap::new(),
            xlate: Default::default(),
        };
        t.str_idx.insert(vec![], 0);
        t
    }

    pub(crate) fn string(&mut self, s: &[u8]) -> u32 {
        if let Some(&o) = self.str_idx.get(s) {
            return o;
        }
        let o = self.strtab.len() as u32;
        self.strtab.extend_from_slice(s);
        self.strtab.push(0);
        self.str_idx.insert(s.to_vec(), o);
        o
    }

    pub(crate) fn int(&mut self, v: u64) -> u32 {
        if let Some(&i) = self.int_idx.get(&v) {
            return i;
        }
        let i = self.ints.len() as u32;
        self.ints.push(v);
        self.int_idx.insert(v, i);
        i
    }

    /// A format of its own, never shared with an equal text (a record the tool acts on).
    pub(crate) fn fmt_unique(&mut self, s: &[u8]) -> u32 {
        let off = self.string(s);
        let i = self.fmts.len() as u32;
        self.fmts.push(off);
        self.fmt_text.push(String::from_utf8_lossy(s).into_owned());
        i
    }

    pub(crate) fn fmt(&mut self, s: &[u8]) -> u32 {
        if let Some(&i) = self.fmt_idx.get(s) {
            return i;
        }
        let off = self.string(s);
        let i = self.fmts.len() as u32;
        self.fmts.push(off);
        self.fmt_idx.insert(s.to_vec(), i);
        self.fmt_text.push(String::from_utf8_lossy(s).into_owned());
        i
    }
}

/// The value of frame-count option `name` (checked when it was set), else `default`.
fn frames_option(c: &Compiled, name: &str, default: u32) -> u32 {
    c.tool_options
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
