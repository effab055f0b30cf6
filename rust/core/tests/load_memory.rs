//! `limits::LoadMemory` and `diag::Refusal::memory`: what LOAD charges to the memory budget,
//! and what a refusal tells the tool.

use oxtrace_core::abi;
use oxtrace_core::diag::{Errno, Refusal};
use oxtrace_core::limits::{self, LoadMemory};

#[test]
fn parts_are_per_cpu_and_per_half() {
    let m = LoadMemory::new(4, 64 << 20, 64 << 20, 1 << 20, 8 << 10, 4096);
    assert_eq!(m.pbuf, 512 << 20);
    assert_eq!(m.agg, 512 << 20);
    assert_eq!(m.dynvar, 1 << 20);
    assert_eq!(m.scratch, 32 << 10);
    assert_eq!(m.image, 4096);
    assert_eq!(m.total(), (1024 << 20) + (1 << 20) + (32 << 10) + 4096);
    // pbuf and agg tie: the first one is named
    assert_eq!(m.largest(), limits::MEM_PBUF);
}

#[test]
fn largest_part_is_named() {
    let m = LoadMemory::new(2, 4 << 10, 0, 1 << 30, 0, 100);
    assert_eq!(m.largest(), limits::MEM_DYNVAR);
    let m = LoadMemory::new(2, 4 << 10, 1 << 20, 0, 0, 0);
    assert_eq!(m.largest(), limits::MEM_AGG);
}

#[test]
fn sums_saturate_instead_of_wrapping() {
    let m = LoadMemory::new(
        u32::MAX,
        u64::MAX / 2,
        u64::MAX,
        u64::MAX,
        u64::MAX,
        u64::MAX,
    );
    assert_eq!(m.total(), u64::MAX);
}

#[test]
fn refusal_carries_need_budget_and_cpus() {
    let m = LoadMemory::new(4, 64 << 20, 0, 0, 0, 0);
    let r = Refusal::memory(&m, 100 << 20, false);
    assert_eq!(r.errno, Errno::TooBig);
    assert_eq!(r.kind, abi::LOADERR_MEMORY);
    assert_eq!(r.index, 4);
    assert_eq!(r.part, 0);
    assert_eq!(r.code, limits::MEM_PBUF);
    assert_eq!(r.insn, 512 << 10);
    assert_eq!(r.arg, 100 << 10);
    let g = Refusal::memory(&LoadMemory::new(1, u64::MAX, 0, 0, 0, 0), u64::MAX, true);
    assert_eq!((g.part, g.insn, g.arg), (1, u32::MAX, u32::MAX));
}
