// SPDX-License-Identifier: GPL-2.0

//! Physically contiguous, naturally aligned blocks of `2^order` pages, one `alloc_pages` each.
//!
//! The PT backend builds its buffers from many of these (never one large block); their
//! physical addresses go into ToPA tables, their kernel addresses are how the software
//! backend and the read-out reach them.
//!
// TODO: replace with kernel::page::Page (higher orders) when available.

use crate::sys::shim;
use core::ptr::NonNull;
use kernel::prelude::*;

/// Bytes in a page.
pub(crate) const PAGE_SIZE: usize = 4096;

/// `2^order` zeroed pages from one `alloc_pages`.
///
/// # Invariants
///
/// `page` heads a block of `2^order` pages owned by this value, mapped in the kernel's direct
/// map at `addr` (`len()` bytes), physically at `phys`, aligned to the block size.
pub(crate) struct Pages {
    page: NonNull<shim::Page>,
    addr: NonNull<u8>,
    phys: u64,
    order: u32,
}

// SAFETY: the block is plain memory owned by the value; nothing ties it to a thread.
unsafe impl Send for Pages {}
// SAFETY: `&Pages` only reads through `read`, which copies bytes; writes need `&mut`.
unsafe impl Sync for Pages {}

impl Pages {
    /// Allocates `2^order` zeroed pages (the shim's `OXT_GFP_LOAD`, process context).
    pub(crate) fn alloc(order: u32) -> Result<Self> {
        // SAFETY: `alloc_pages` may be called from process context with any order; a too
        // large order fails with NULL.
        let page = NonNull::new(unsafe { shim::oxt_pages_alloc(order) }).ok_or(ENOMEM)?;
        // SAFETY: `page` is a live block of ours; x86_64 has no highmem, so it is mapped.
        let addr = unsafe { shim::oxt_page_address(page.as_ptr()) } as *mut u8;
        // SAFETY: as above.
        let phys = unsafe { shim::oxt_page_phys(page.as_ptr()) };
        let Some(addr) = NonNull::new(addr) else {
            // SAFETY: allocated above with this order, not used since.
            unsafe { shim::oxt_pages_free(page.as_ptr(), order) };
            return Err(ENOMEM);
        };
        // INVARIANT: a fresh block of 2^order pages, mapped at `addr`, at `phys` (the buddy
        // allocator aligns a block to its size).
        Ok(Self {
            page,
            addr,
            phys,
            order,
        })
    }

    /// Physical address of the first byte.
    pub(crate) fn phys(&self) -> u64 {
        self.phys
    }

    /// Bytes in the block.
    pub(crate) fn len(&self) -> usize {
        PAGE_SIZE << self.order
    }

    /// Copies `buf.len()` bytes at `off` into `buf`; false if out of range.
    pub(crate) fn read(&self, off: usize, buf: &mut [u8]) -> bool {
        if off > self.len() || buf.len() > self.len() - off {
            return false;
        }
        // SAFETY: the range is inside the block (checked), which we own; `buf` is another
        // object, so the two don't overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(self.addr.as_ptr().add(off), buf.as_mut_ptr(), buf.len())
        };
        true
    }

    /// Copies `bytes` to `off`; false if out of range.
    pub(crate) fn write(&mut self, off: usize, bytes: &[u8]) -> bool {
        if off > self.len() || bytes.len() > self.len() - off {
            return false;
        }
        // SAFETY: the range is inside the block (checked), exclusively borrowed; `bytes` is
        // another object.
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.addr.as_ptr().add(off), bytes.len())
        };
        true
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: the block is ours (type invariant) and allocated with this order.
        unsafe { shim::oxt_pages_free(self.page.as_ptr(), self.order) };
    }
}
