//! Where tracefs is: the syscall and tracepoint providers and ftrace's function list read
//! it.

use std::fs;

/// Where tracefs is mounted: its own mount point, else debugfs's automount of it.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The root of the mounted tracefs (its `trace` file is there), if any.
pub fn tracefs() -> Option<&'static str> {
    TRACEFS
        .into_iter()
        .find(|d| fs::metadata(format!("{d}/trace")).is_ok())
}
