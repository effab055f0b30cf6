// SPDX-License-Identifier: GPL-2.0

//! The action bytecode: a small register machine in the role of DTrace's DIF, its verifier and
//! its interpreter.
//!
//! Pure logic: no kernel dependency, `no_std`, no allocation. The tool compiles D clauses into
//! this bytecode; the kernel verifies every program at LOAD with [`verify`] (trusting nothing)
//! and runs verified programs in probe context with [`Vm::run`]. Everything outside the machine
//! (built-in values, kernel-memory reads, dynamic variables, aggregations, record emission) is
//! reached through the [`Env`] trait, which the kernel glue implements.
//!
//! Encoding (see `Documentation/action.rst`): every instruction is one little-endian `u64`,
//! `op | rd << 8 | r1 << 16 | r2 << 24 | imm << 32`. Jumps go forward only, so every
//! instruction runs at most once per program run: the running time is bounded by the length.

/// Number of registers. `r0` always reads as 0 and cannot be written.
pub const NREGS: usize = 16;
pub use crate::limits::{MAX_INSNS, MAX_LOCALS, MAX_STRSIZE};
/// Maximum number of entries on the tuple stack (keys, printf arguments).
pub const MAX_TUPLE: usize = 16;
/// Maximum number of key components of a variable or an aggregation.
pub const MAX_KEYS: usize = 8;
/// Number of values passed to [`Env::agg_update`]: the value and its weight/increment.
pub const AGG_NARGS: usize = 2;

/// Tag in bits 48..63 of a register that holds a string reference.
pub const STR_TAG: u64 = 0x5354;
/// String space: the program's string table.
pub const STR_SPACE_TABLE: u64 = 0;
/// String space: the per-CPU scratch area.
pub const STR_SPACE_SCRATCH: u64 = 1;

/// Encode a string reference into a register value.
pub const fn str_ref(space: u64, offset: u32) -> u64 {
    (STR_TAG << 48) | ((space & 0xff) << 40) | offset as u64
}

/// The space ([`STR_SPACE_TABLE`], [`STR_SPACE_SCRATCH`]) of a string reference made by
/// [`str_ref`].
pub const fn str_space(r: u64) -> u64 {
    (r >> 40) & 0xff
}

/// The offset in its space of a string reference made by [`str_ref`].
pub const fn str_offset(r: u64) -> usize {
    r as u32 as usize
}

/// A key component handed to the dynamic-variable and aggregation engines.
pub use crate::agg::KeyElem as Key;

/// Bytes of one scratch string slot: `strsize` plus the NUL.
pub const fn slot_size(strsize: u32) -> usize {
    strsize as usize + 1
}

/// Bytes of the record-assembly buffer for a given `strsize`.
pub const fn record_buf_size(strsize: u32) -> usize {
    let s = 3 + strsize as usize;
    MAX_TUPLE * if s > 9 { s } else { 9 }
}

/// Scratch bytes a [`Vm`] needs for `nlocals` locals and `slots` string slots: the locals,
/// the record buffer, the `strtok` slot (what is left of the string `strtok()` cuts, kept
/// across the clauses of a firing, as DTrace keeps it per CPU) and the slots.
pub const fn scratch_size(nlocals: u32, strsize: u32, slots: u32) -> usize {
    nlocals as usize * 8 + record_buf_size(strsize) + (slots as usize + 1) * slot_size(strsize)
}

mod decode;
mod isa;
mod keybuf;
mod record;
mod shape;
pub mod subr;
mod verify;
mod vm;

pub use decode::{DInsn, Decoded};
pub use isa::*;
pub use keybuf::KeyBuf;
pub use record::*;
pub use verify::*;
pub use vm::*;

#[cfg(test)]
mod tests;
