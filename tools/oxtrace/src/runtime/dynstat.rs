//! `OXT_IOC_DYNSTAT`: the consumer's dynamic variables, and DTrace's drop warnings.
//!
//! The run loop calls [`query`] on its consumer's descriptor every status interval and feeds
//! the answer to a [`DropTracker`], which turns new drops into DTrace's messages ("N dynamic
//! variable drops with non-empty dirty list") with the option to raise.

use oxtrace_core::abi;
use std::io;
use std::os::fd::AsRawFd;

/// One DYNSTAT answer.
#[derive(Clone, Debug, Default)]
pub struct DynStat {
    /// The consumer-wide part.
    pub st: abi::Dynstat,
    /// One entry per possible CPU.
    pub cpus: Vec<abi::DynCpu>,
    /// Drops per variable id.
    pub var_drops: Vec<u64>,
}

impl DynStat {
    /// Whether the program has a dynamic memory.
    pub fn present(&self) -> bool {
        self.st.flags & abi::DYN_PRESENT != 0
    }

    /// Drops by state over all CPUs: (EMPTY, DIRTY, RINSING, size).
    pub fn drops(&self) -> (u64, u64, u64, u64) {
        self.cpus.iter().fold((0, 0, 0, 0), |(e, d, r, s), c| {
            (
                e + c.drops_empty,
                d + c.drops_dirty,
                r + c.drops_rinsing,
                s + c.drops_size,
            )
        })
    }

    /// Allocations over all CPUs.
    pub fn allocs(&self) -> u64 {
        self.cpus.iter().map(|c| c.allocs).sum()
    }
}

/// Asks the module for the dynamic-variable counters of the consumer open on `dev`.
pub fn query(dev: &impl AsRawFd, ncpus: u32, nvars: u32) -> io::Result<DynStat> {
    let mut cpus = vec![abi::DynCpu::default(); ncpus as usize];
    let mut var_drops = vec![0u64; nvars as usize];
    let mut st = abi::Dynstat {
        size: std::mem::size_of::<abi::Dynstat>() as u32,
        ncpus,
        cpus: cpus.as_mut_ptr() as u64,
        nvars,
        var_drops: var_drops.as_mut_ptr() as u64,
        ..Default::default()
    };
    // SAFETY: `st` is a valid `struct oxt_dynstat`; its pointers name `cpus` and `var_drops`
    // with the lengths given, alive across the call.
    let r = unsafe { libc::ioctl(dev.as_raw_fd(), abi::IOC_DYNSTAT as _, &mut st) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    cpus.truncate(st.ncpus as usize);
    var_drops.truncate(st.nvars.min(nvars) as usize);
    Ok(DynStat {
        st,
        cpus,
        var_drops,
    })
}

/// Turns drop counters into DTrace's warnings, once per new drop.
#[derive(Clone, Debug, Default)]
pub struct DropTracker {
    seen: (u64, u64, u64, u64),
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl DropTracker {
    /// Warnings for the drops counted since the previous call.
    pub fn update(&mut self, s: &DynStat) -> Vec<String> {
        let now = s.drops();
        let new = (
            now.0.saturating_sub(self.seen.0),
            now.1.saturating_sub(self.seen.1),
            now.2.saturating_sub(self.seen.2),
            now.3.saturating_sub(self.seen.3),
        );
        self.seen = now;
        let mut w = Vec::new();
        if new.0 > 0 {
            w.push(format!(
                "{} dynamic variable drop{} (try raising dynvarsize)",
                new.0,
                plural(new.0)
            ));
        }
        if new.1 > 0 {
            w.push(format!(
                "{} dynamic variable drop{} with non-empty dirty list (try raising cleanrate)",
                new.1,
                plural(new.1)
            ));
        }
        if new.2 > 0 {
            w.push(format!(
                "{} dynamic variable drop{} with non-empty rinsing list \
                 (try raising cleanrate or dynvarsize)",
                new.2,
                plural(new.2)
            ));
        }
        if new.3 > 0 {
            w.push(format!(
                "{} dynamic variable drop{}: tuple larger than a chunk (try lowering strsize)",
                new.3,
                plural(new.3)
            ));
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(e: u64, d: u64, r: u64) -> DynStat {
        DynStat {
            st: abi::Dynstat {
                flags: abi::DYN_PRESENT,
                ..Default::default()
            },
            cpus: vec![
                abi::DynCpu {
                    drops_empty: e,
                    drops_dirty: d,
                    ..Default::default()
                },
                abi::DynCpu {
                    drops_rinsing: r,
                    allocs: 5,
                    ..Default::default()
                },
            ],
            var_drops: vec![],
        }
    }

    #[test]
    fn warnings_are_dtrace_style_and_incremental() {
        let mut t = DropTracker::default();
        assert!(t.update(&stat(0, 0, 0)).is_empty());
        assert_eq!(
            t.update(&stat(1, 3, 0)),
            vec![
                "1 dynamic variable drop (try raising dynvarsize)".to_string(),
                "3 dynamic variable drops with non-empty dirty list (try raising cleanrate)"
                    .to_string(),
            ]
        );
        // Only what is new is reported again.
        assert_eq!(
            t.update(&stat(1, 5, 2)),
            vec![
                "2 dynamic variable drops with non-empty dirty list (try raising cleanrate)"
                    .to_string(),
                "2 dynamic variable drops with non-empty rinsing list \
                 (try raising cleanrate or dynvarsize)"
                    .to_string(),
            ]
        );
        assert!(t.update(&stat(1, 5, 2)).is_empty());
        assert_eq!(stat(1, 5, 2).allocs(), 5);
        assert!(stat(0, 0, 0).present());
    }
}
