// SPDX-License-Identifier: GPL-2.0

//! oxtrace: a DTrace-class tracing provider for Linux.
//!
//! The crate root of the module, over three floors (`Documentation/design.rst`):
//!
//! - `core/`: pure logic, `no_std`, no allocation, no kernel dependency; the same files are
//!   the host crate `oxtrace-core`, tested on the host;
//! - `glue/`: kernel objects and policy (device, consumers, sessions, probe context);
//! - `sys/`: thin safe wrappers, the only callers of the C shim (`shim/`).

use kernel::prelude::*;

// The pure floor: the host crate `oxtrace-core` (`core/lib.rs`), compiled here from the same
// files. Its modules refer to each other as `crate::abi`, ..., in both crates: re-exported.
#[path = "core/lib.rs"]
pub mod oxcore;
pub use oxcore::{
    abi, action, agg, buffer, diag, dynvar, limits, load, probe, probesafe, program, stack, topa,
    uprobe, ustack,
};

// Kernel objects and policy.
mod glue;

// Thin safe wrappers over the C shim, its only callers.
mod sys;

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
    _dev: sys::miscdev::Registration<glue::device::Device>,
}

impl kernel::Module for Oxtrace {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        sys::task::raise_init();
        let dev = sys::miscdev::Registration::register()?;
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
        // A raise() queued by a probe must not run after the module is gone.
        sys::task::raise_sync();
        sys::provider::module_exit();
        pr_info!("oxtrace unloaded\n");
    }
}
