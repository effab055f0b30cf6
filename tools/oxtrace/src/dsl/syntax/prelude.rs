//! The prelude: D source compiled before every program when the kernel has BTF, which
//! declares DTrace's process views (`curpsinfo`, `curlwpsinfo`) with translators.

use super::super::error::CompileError;
use super::ast::Item;

/// The prelude compiled before a program when the kernel has BTF: DTrace's `psinfo_t`
/// and `lwpsinfo_t` translated from Linux's `struct task_struct` (member meanings as
/// Oracle Linux DTrace documents them; `d-language.rst`, "Process views").
// A static, not a const: `__uargs` is allowed only in the prelude, recognised by this
// address, and a const's data may be duplicated per use.
pub(crate) static PRELUDE: &str = include_str!("prelude.d");

/// The name of the prelude in error messages.
pub(crate) const PRELUDE_NAME: &str = "<prelude>";

/// Type names the prelude defines (the parser of a program must know them as types).
pub(crate) const PRELUDE_TYPES: &[&str] = &[
    "psinfo_t",
    "lwpsinfo_t",
    "cpuinfo_t",
    "bufinfo_t",
    "devinfo_t",
    "fileinfo_t",
];

/// Names the prelude defines, for the error of their use without BTF.
pub(crate) const PRELUDE_NAMES: &[&str] = &["curpsinfo", "curlwpsinfo", "curcpu"];

/// The prelude's items (none without BTF: its translators read kernel structs).
pub(crate) fn prelude_items(btf: bool) -> Result<Vec<Item>, CompileError> {
    if !btf {
        return Ok(Vec::new());
    }
    let toks = super::lexer::lex(PRELUDE)
        .map_err(|(span, msg)| CompileError::at(PRELUDE, PRELUDE_NAME, span, msg))?;
    let macros = super::parser::Macros::new();
    let mut p = super::parser::Parser::new(toks, PRELUDE, PRELUDE_NAME, &macros);
    p.program()
}
