// SPDX-License-Identifier: GPL-2.0

//! oxtrace: a DTrace-class tracing provider for Linux.
//!
//! The crate root of the module. Pure logic (no kernel dependency, `no_std`, no allocation)
//! lives in files shared with the host crate `lib.rs`; the rest is kernel glue over safe
//! wrappers (`miscdev`, `cpu`) on top of the C shim (`shim/`).

use kernel::prelude::*;

// Pure logic, also compiled by the host crate (`lib.rs`).
pub mod abi;
pub mod action;
pub mod agg;
pub mod buffer;
pub mod diag;
pub mod dynvar;
pub mod program;
pub mod topa;

// Kernel glue.
mod consumer;
mod device;
mod dynmem;
mod probe;
mod pt;
mod session;

// Safe wrappers over the C shim.
mod clean;
mod cpu;
mod miscdev;
mod msr;
mod pages;
mod percpu;
mod shim;
mod switchbuf;
mod task;
mod xcall;

/// Version string reported by `OXT_IOC_VERSION`.
pub(crate) const RELEASE: &str = "0.1.0";

module! {
    type: Oxtrace,
    name: "oxtrace",
    author: "oxtrace developers",
    description: "DTrace-class tracing: kprobes, dynamic variables, aggregations, Intel PT",
    license: "GPL",
}

struct Oxtrace {
    _dev: miscdev::Registration<device::Device>,
}

impl kernel::Module for Oxtrace {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let dev = miscdev::Registration::register()?;
        pr_info!(
            "oxtrace {} loaded: /dev/{}, ABI {}.{}\n",
            RELEASE,
            abi::DEVICE_NAME,
            abi::ABI_MAJOR,
            abi::ABI_MINOR
        );
        Ok(Self { _dev: dev })
    }
}

impl Drop for Oxtrace {
    fn drop(&mut self) {
        pr_info!("oxtrace unloaded\n");
    }
}
