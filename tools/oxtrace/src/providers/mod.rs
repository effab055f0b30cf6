//! Providers: what this kernel (and process) can probe. The fbt functions, the system calls
//! and their prototypes, the tracepoints and their formats, the argument types of a probe,
//! and the listing of them all (`oxtrace -l`).

pub mod argtypes;
pub mod fbt;
pub mod list;
pub mod pid;
pub mod process;
pub mod stable;
mod syscall_protos;
mod syscall_table;
pub mod syscalls;
pub mod tracefs;
pub mod tracepoints;
pub mod usdt;
#[cfg(test)]
pub(crate) mod user_tests;
