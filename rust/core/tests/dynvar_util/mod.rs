// SPDX-License-Identifier: GPL-2.0

//! Test memory for `dynvar`: owns the regions a kernel would carve from vmalloc'd memory.
//! Works with core atomics and, under `cfg(loom)`, inside a loom model.

#![allow(dead_code)]

use oxtrace_core::action::Key;
use oxtrace_core::dynvar::*;
use std::cell::Cell;

/// Chunk size for tuples of up to three integer keys and a one-word value.
pub fn small_chunk() -> usize {
    chunk_bytes_for(&[KeyShape::Int, KeyShape::Int, KeyShape::Int], 8)
}

/// A layout with exactly `nchunks` chunks over `ncpus` CPUs and `nvars` variable ids.
pub fn layout(nchunks: usize, ncpus: u32, nvars: u32) -> Layout {
    let chunk = small_chunk();
    let l = Layout::new(nchunks * (chunk + BUCKET_BYTES), ncpus, chunk, nvars).unwrap();
    assert_eq!(l.nchunks(), nchunks);
    l
}

/// The regions of one dynamic memory.
pub struct Mem {
    pub layout: Layout,
    header: Header,
    cpus: Vec<CpuState>,
    buckets: Vec<Bucket>,
    chunks: Vec<Word>,
    vars: Vec<Word>,
}

impl Mem {
    /// Memory for `layout`, reset (state FREE, all chunks free).
    pub fn new(layout: Layout) -> Self {
        let m = Self {
            layout,
            header: Header::new(),
            cpus: (0..layout.ncpus()).map(|_| CpuState::new()).collect(),
            buckets: (0..layout.nchunks()).map(|_| Bucket::new()).collect(),
            chunks: (0..layout.chunk_word_count())
                .map(|_| Word::new())
                .collect(),
            vars: (0..layout.nvars()).map(|_| Word::new()).collect(),
        };
        m.ds().reset();
        m
    }

    /// `nchunks` chunks on `ncpus` CPUs.
    pub fn with(nchunks: usize, ncpus: u32) -> Self {
        Self::new(layout(nchunks, ncpus, 8))
    }

    pub fn ds(&self) -> Dstate<'_> {
        Dstate::new(
            self.layout,
            &self.header,
            &self.cpus,
            &self.buckets,
            &self.chunks,
            &self.vars,
        )
        .unwrap()
    }

    /// Audit with a fresh bitmap; panics on an inconsistency.
    pub fn audit(&self) -> Audit {
        let mut seen = vec![0u64; self.layout.audit_bitmap_words()];
        self.ds().audit(&mut seen).expect("audit")
    }

    /// Chunks on one list of one CPU.
    pub fn list(&self, cpu: usize, list: List) -> Vec<u32> {
        let mut v = Vec::new();
        self.ds().for_each_in_list(cpu, list, |c| v.push(c));
        v
    }

    /// Chunks on one kind of list, over all CPUs.
    pub fn all(&self, list: List) -> Vec<u32> {
        (0..self.layout.ncpus())
            .flat_map(|c| self.list(c, list))
            .collect()
    }
}

/// Sequential cross-call: no CPU is ever inside probe context between operations.
pub struct Quiet;

impl CrossCall for Quiet {
    fn sync_all_cpus(&self) {}
}

/// A cross-call that runs `f(n)` on its `n`-th call (1, 2, ...): lets a test act as a CPU
/// at the moments a real cross-call would wait for it.
pub struct Hook<F: Fn(u32)> {
    pub calls: Cell<u32>,
    pub f: F,
}

impl<F: Fn(u32)> Hook<F> {
    pub fn new(f: F) -> Self {
        Self {
            calls: Cell::new(0),
            f,
        }
    }
}

impl<F: Fn(u32)> CrossCall for Hook<F> {
    fn sync_all_cpus(&self) {
        self.calls.set(self.calls.get() + 1);
        (self.f)(self.calls.get());
    }
}

/// The tuple `a[k]` of array variable `var`.
pub fn akey(var: u32, k: u64) -> [Key<'static>; 2] {
    [array_key(var), Key::Int(k)]
}
