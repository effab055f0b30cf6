//! The compiler's passes over a parsed program before and around code generation, one a
//! file, in the order the driver (`compile.rs`) runs them.

pub(super) mod probe_spec;
pub(super) mod xlate;
