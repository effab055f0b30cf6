//! Symbols: kernel addresses named from /proc/kallsyms, user addresses from the process's
//! mappings and ELF files, and the stacks the kernel defined (`stacks`). Naming only;
//! `crate::output::symbols` renders stacks with them.

pub mod ksym;
pub mod stacks;
pub mod usym;
