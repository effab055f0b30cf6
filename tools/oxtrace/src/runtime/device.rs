//! The ioctl client of `/dev/oxtrace`.

use oxtrace_core::abi;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Default path of the device node.
pub const DEFAULT_PATH: &str = "/dev/oxtrace";

/// An error talking to the device, with what to try.
#[derive(Debug)]
pub struct DeviceError {
    path: PathBuf,
    what: &'static str,
    /// The system error.
    pub err: io::Error,
}

impl DeviceError {
    /// The error `err` of operation `what` on the device at `path`.
    pub fn new(path: &Path, what: &'static str, err: io::Error) -> Self {
        Self {
            path: path.to_owned(),
            what,
            err,
        }
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.path.display(),
            self.what,
            os_text(&self.err)
        )?;
        match self.err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENODEV) if self.what == "open" => {
                let loaded = Path::new(MODULE_SYSFS).exists();
                write!(f, "{}", missing_hint(&self.path, loaded))
            }
            Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
                write!(f, " (is the oxtrace module loaded? try: modprobe oxtrace)")
            }
            Some(libc::EPERM) | Some(libc::EACCES) => {
                write!(
                    f,
                    " (tracing needs CAP_PERFMON or CAP_SYS_ADMIN: run as root)"
                )
            }
            Some(libc::ENOTTY) => write!(
                f,
                " (module and tool ABI differ: `oxtrace version` shows both; install a tool and a module of one version)"
            ),
            Some(libc::EBUSY) if self.what == "open" => write!(
                f,
                " (as many consumers are open as the module allows: module parameter max_consumers)"
            ),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for DeviceError {}

/// Where the kernel shows a loaded oxtrace module.
pub const MODULE_SYSFS: &str = "/sys/module/oxtrace";

/// The tool's version and ABI, as the messages about the module name them.
pub fn tool_version() -> String {
    format!(
        "oxtrace tool {}, ABI {}.{}",
        env!("CARGO_PKG_VERSION"),
        abi::ABI_MAJOR,
        abi::ABI_MINOR
    )
}

/// What to do when the device node `path` is missing: load the module, or (`loaded`)
/// make the node the module registered.
pub fn missing_hint(path: &Path, loaded: bool) -> String {
    if loaded {
        format!(
            ": the oxtrace module is loaded but {} is missing: is it another path (--device)? \
             The node's numbers are in /sys/class/misc/oxtrace/dev; `make install` installs \
             the udev rule that makes it",
            path.display()
        )
    } else {
        format!(
            ": the oxtrace module is not loaded: load it with `modprobe oxtrace` (or \
             `insmod oxtrace.ko` from a build tree) and run oxtrace again ({})",
            tool_version()
        )
    }
}

/// The refusal of a module whose ABI major version `module` is not the tool's, naming
/// both versions; `None` when they agree (a newer minor version only adds).
pub fn abi_mismatch(path: &Path, v: &abi::Version) -> Option<String> {
    (v.abi_major != abi::ABI_MAJOR).then(|| {
        format!(
            "{}: the oxtrace module {} speaks ABI {}.{}, this tool ABI {}.{} ({}): install \
             a tool and a module of one version (rebuild both, `make install`, or the \
             DKMS package), then `rmmod oxtrace; modprobe oxtrace`",
            path.display(),
            abi::cstr_field(&v.release),
            v.abi_major,
            v.abi_minor,
            abi::ABI_MAJOR,
            abi::ABI_MINOR,
            tool_version()
        )
    })
}

/// The words of a system error without Rust's " (os error N)" suffix: what the user reads
/// is the reason, not the number.
pub fn os_text(e: &io::Error) -> String {
    let s = e.to_string();
    match (e.raw_os_error(), s.rfind(" (os error ")) {
        (Some(_), Some(i)) => s[..i].to_string(),
        _ => s,
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

/// One consumer: an open file on the device.
pub struct Device {
    file: File,
    path: PathBuf,
}

impl Device {
    /// Opens `path` as a new consumer.
    pub fn open(path: &Path) -> Result<Self, DeviceError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|err| DeviceError {
                path: path.to_owned(),
                what: "open",
                err,
            })?;
        Ok(Self {
            file,
            path: path.to_owned(),
        })
    }

    /// Opens `path` as a new consumer of a module that speaks the tool's ABI: one whose
    /// VERSION answer has the tool's major version. Anything else is refused with both
    /// versions and what to do.
    pub fn open_checked(path: &Path) -> Result<Self, String> {
        let dev = Self::open(path).map_err(|e| e.to_string())?;
        let v = match dev.version() {
            Ok(v) => v,
            Err(e) if matches!(e.err.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                let module = std::fs::read_to_string(format!("{MODULE_SYSFS}/version"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "of unknown version".into());
                return Err(format!(
                    "{}: the device does not answer this tool's VERSION request ({}): it is \
                     not an oxtrace module of this tool's ABI (module {module}; {}): install \
                     a tool and a module of one version, then `rmmod oxtrace; modprobe oxtrace`",
                    path.display(),
                    os_text(&e.err),
                    tool_version()
                ));
            }
            Err(e) => return Err(e.to_string()),
        };
        match abi_mismatch(path, &v) {
            Some(m) => Err(m),
            None => Ok(dev),
        }
    }

    fn err(&self, what: &'static str) -> DeviceError {
        DeviceError {
            path: self.path.clone(),
            what,
            err: io::Error::last_os_error(),
        }
    }

    fn ioctl<T>(&self, what: &'static str, cmd: u32, arg: &mut T) -> Result<(), DeviceError> {
        // SAFETY: `cmd` is an `_IOWR` command whose size is `size_of::<T>()` (abi.rs builds both
        // from the same type), and `arg` is a valid, exclusively borrowed `T`; the pointers
        // inside it are the caller's, valid for the lengths it gives.
        let r = unsafe { libc::ioctl(self.file.as_raw_fd(), cmd as _, arg as *mut T) };
        if r < 0 {
            return Err(self.err(what));
        }
        Ok(())
    }

    /// `OXT_IOC_LOAD`: on failure the error and the filled-in struct (where it failed).
    pub fn load(
        &self,
        image: &[u8],
        attach: &[abi::Attach],
        names: &[u8],
        user: (&[abi::Uattach], &[abi::UsdtArg]),
    ) -> Result<abi::Load, Box<(DeviceError, abi::Load)>> {
        let (uattach, usdt_args) = user;
        let mut l = abi::Load {
            uattach: if uattach.is_empty() {
                0
            } else {
                uattach.as_ptr() as u64
            },
            nuattach: uattach.len() as u32,
            usdt_args: if usdt_args.is_empty() {
                0
            } else {
                usdt_args.as_ptr() as u64
            },
            nusdt_args: usdt_args.len() as u32,
            size: size_of::<abi::Load>() as u32,
            image: image.as_ptr() as u64,
            image_len: image.len() as u64,
            attach: attach.as_ptr() as u64,
            nattach: attach.len() as u32,
            names: names.as_ptr() as u64,
            names_len: names.len() as u32,
            ..Default::default()
        };
        match self.ioctl("LOAD", abi::IOC_LOAD, &mut l) {
            Ok(()) => Ok(l),
            Err(e) => Err(Box::new((e, l))),
        }
    }

    fn simple(&self, what: &'static str, cmd: u32) -> Result<(), DeviceError> {
        // SAFETY: an `_IO` command takes no argument.
        if unsafe { libc::ioctl(self.file.as_raw_fd(), cmd as _, 0usize) } < 0 {
            return Err(self.err(what));
        }
        Ok(())
    }

    /// `OXT_IOC_GO`.
    pub fn go(&self) -> Result<(), DeviceError> {
        self.simple("GO", abi::IOC_GO)
    }

    /// `OXT_IOC_STOP`.
    pub fn stop(&self) -> Result<(), DeviceError> {
        self.simple("STOP", abi::IOC_STOP)
    }

    /// The argument of a snapshot of `cpu` into `buf`.
    fn snap_arg(cpu: u32, buf: &mut [u8]) -> abi::Snapshot {
        abi::Snapshot {
            size: size_of::<abi::Snapshot>() as u32,
            cpu,
            buf: buf.as_mut_ptr() as u64,
            buf_len: buf.len() as u64,
            ..Default::default()
        }
    }

    /// `OXT_IOC_SNAPSHOT`: `cpu`'s principal buffer into `buf` (at least bufsize bytes).
    pub fn snapshot(&self, cpu: u32, buf: &mut [u8]) -> Result<abi::Snapshot, DeviceError> {
        let mut s = Self::snap_arg(cpu, buf);
        self.ioctl("SNAPSHOT", abi::IOC_SNAPSHOT, &mut s)?;
        Ok(s)
    }

    /// `OXT_IOC_AGGSNAP`: `cpu`'s aggregation data sets into `buf` (its length becomes theirs),
    /// whose capacity grows until they fit.
    ///
    /// The kernel writes into `buf`'s spare capacity: zero-filling megabytes first would
    /// write every byte twice (under an emulator, a memset of the whole stream).
    pub fn aggsnap(&self, cpu: u32, buf: &mut Vec<u8>) -> Result<abi::Snapshot, DeviceError> {
        loop {
            buf.clear();
            let mut s = abi::Snapshot {
                size: size_of::<abi::Snapshot>() as u32,
                cpu,
                buf: buf.as_mut_ptr() as u64,
                buf_len: buf.capacity() as u64,
                ..Default::default()
            };
            match self.ioctl("AGGSNAP", abi::IOC_AGGSNAP, &mut s) {
                // The kernel keeps the data sets aside and hands them to the next call, and
                // says in `len` how many bytes they need: one retry with that much room
                // gets them, nothing lost or counted twice.
                Err(e) if e.err.raw_os_error() == Some(libc::ENOSPC) => {
                    buf.reserve_exact((s.len as usize).max(1 << 16));
                }
                Err(e) => return Err(e),
                Ok(()) => {
                    if s.len > s.buf_len {
                        return Err(DeviceError::new(
                            &self.path,
                            "AGGSNAP",
                            io::Error::from_raw_os_error(libc::EOVERFLOW),
                        ));
                    }
                    // SAFETY: the kernel wrote the first `s.len` bytes of the spare capacity
                    // it was given, `s.len <= buf_len == capacity` (checked above).
                    unsafe { buf.set_len(s.len as usize) };
                    return Ok(s);
                }
            }
        }
    }

    /// `OXT_IOC_PROBES`: every attached probe.
    pub fn probes(&self) -> Result<Vec<abi::ProbeInfo>, DeviceError> {
        let mut v: Vec<abi::ProbeInfo> = Vec::new();
        loop {
            let mut p = abi::Probes {
                size: size_of::<abi::Probes>() as u32,
                n: v.len() as u32,
                info: v.as_mut_ptr() as u64,
                ..Default::default()
            };
            self.ioctl("PROBES", abi::IOC_PROBES, &mut p)?;
            if (p.total as usize) <= v.len() {
                v.truncate(p.total as usize);
                return Ok(v);
            }
            v.resize(p.total as usize, abi::ProbeInfo::default());
        }
    }

    /// `OXT_IOC_STATUS` with the per-CPU counters of `ncpus` CPUs.
    pub fn status_cpus(
        &self,
        ncpus: u32,
    ) -> Result<(abi::Status, Vec<abi::CpuStatus>), DeviceError> {
        let mut cpus = vec![abi::CpuStatus::default(); ncpus as usize];
        let mut s = abi::Status {
            size: size_of::<abi::Status>() as u32,
            cpus: if ncpus == 0 {
                0
            } else {
                cpus.as_mut_ptr() as u64
            },
            ncpus,
            ..Default::default()
        };
        self.ioctl("STATUS", abi::IOC_STATUS, &mut s)?;
        cpus.truncate(s.ncpus as usize);
        Ok((s, cpus))
    }

    /// `OXT_IOC_VERSION`.
    pub fn version(&self) -> Result<abi::Version, DeviceError> {
        let mut v = abi::Version {
            size: size_of::<abi::Version>() as u32,
            ..Default::default()
        };
        self.ioctl("VERSION", abi::IOC_VERSION, &mut v)?;
        Ok(v)
    }

    /// `OXT_IOC_STATUS`.
    pub fn status(&self) -> Result<abi::Status, DeviceError> {
        let mut s = abi::Status {
            size: size_of::<abi::Status>() as u32,
            ..Default::default()
        };
        self.ioctl("STATUS", abi::IOC_STATUS, &mut s)?;
        Ok(s)
    }

    /// `OXT_IOC_PT_CONFIG`: allocates the PT buffers; the filled-in configuration.
    pub fn pt_config(&self, cfg: &abi::PtConfig) -> Result<abi::PtConfig, DeviceError> {
        let mut c = abi::PtConfig {
            size: size_of::<abi::PtConfig>() as u32,
            ..*cfg
        };
        self.ioctl("PT_CONFIG", abi::IOC_PT_CONFIG, &mut c)?;
        Ok(c)
    }

    /// `OXT_IOC_PT_START`.
    pub fn pt_start(&self) -> Result<(), DeviceError> {
        self.simple("PT_START", abi::IOC_PT_START)
    }

    /// `OXT_IOC_PT_STOP`.
    pub fn pt_stop(&self) -> Result<(), DeviceError> {
        self.simple("PT_STOP", abi::IOC_PT_STOP)
    }

    /// `OXT_IOC_PT_STATUS` with `ncpus` per-CPU entries.
    pub fn pt_status(&self, ncpus: u32) -> Result<(abi::PtStatus, Vec<abi::PtCpu>), DeviceError> {
        let mut cpus = vec![abi::PtCpu::default(); ncpus as usize];
        let mut s = abi::PtStatus {
            size: size_of::<abi::PtStatus>() as u32,
            cpus: if ncpus == 0 {
                0
            } else {
                cpus.as_mut_ptr() as u64
            },
            ncpus,
            ..Default::default()
        };
        self.ioctl("PT_STATUS", abi::IOC_PT_STATUS, &mut s)?;
        cpus.truncate(s.ncpus as usize);
        Ok((s, cpus))
    }

    /// `OXT_IOC_PT_READ`: all of `cpu`'s data, oldest first.
    pub fn pt_read_all(&self, cpu: u32) -> Result<Vec<u8>, DeviceError> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; abi::PT_MAX_READ as usize];
        loop {
            let mut r = abi::PtRead {
                size: size_of::<abi::PtRead>() as u32,
                cpu,
                offset: out.len() as u64,
                buf: buf.as_mut_ptr() as u64,
                buf_len: buf.len() as u64,
                ..Default::default()
            };
            self.ioctl("PT_READ", abi::IOC_PT_READ, &mut r)?;
            out.extend_from_slice(&buf[..r.len as usize]);
            if r.len == 0 || out.len() as u64 >= r.total {
                return Ok(out);
            }
        }
    }

    /// `OXT_IOC_PT_LAYOUT`: physical addresses of `cpu`'s slices and tables, and the order.
    pub fn pt_layout(&self, cpu: u32) -> Result<(Vec<u64>, Vec<u64>, u32), DeviceError> {
        let mut slices = vec![0u64; abi::PT_MAX_SLICES as usize];
        let mut tables = vec![0u64; abi::PT_MAX_SLICES as usize];
        let mut l = abi::PtLayout {
            size: size_of::<abi::PtLayout>() as u32,
            cpu,
            slices: slices.as_mut_ptr() as u64,
            tables: tables.as_mut_ptr() as u64,
            nslices: slices.len() as u32,
            ntables: tables.len() as u32,
            ..Default::default()
        };
        self.ioctl("PT_LAYOUT", abi::IOC_PT_LAYOUT, &mut l)?;
        slices.truncate(l.nslices as usize);
        tables.truncate(l.ntables as usize);
        Ok((slices, tables, l.slice_order))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_node_says_what_to_do() {
        let p = Path::new(DEFAULT_PATH);
        let m = missing_hint(p, false);
        assert!(m.contains("`modprobe oxtrace`"), "{m}");
        assert!(
            m.contains(&format!("ABI {}.{}", abi::ABI_MAJOR, abi::ABI_MINOR)),
            "{m}"
        );
        let m = missing_hint(p, true);
        assert!(m.contains("loaded but /dev/oxtrace is missing"), "{m}");
        let e = DeviceError::new(p, "LOAD", io::Error::from_raw_os_error(libc::ENOENT));
        assert!(e.to_string().contains("modprobe oxtrace"), "{e}");
    }

    #[test]
    fn another_major_abi_is_refused_with_both_versions() {
        let mut v = abi::Version {
            abi_major: abi::ABI_MAJOR,
            abi_minor: abi::ABI_MINOR + 1,
            ..Default::default()
        };
        v.release[..5].copy_from_slice(b"9.9.9");
        let p = Path::new(DEFAULT_PATH);
        // A newer minor version only adds: accepted.
        assert_eq!(abi_mismatch(p, &v), None);
        v.abi_major = abi::ABI_MAJOR + 1;
        let m = abi_mismatch(p, &v).unwrap();
        assert!(
            m.contains(&format!("module 9.9.9 speaks ABI {}.", abi::ABI_MAJOR + 1)),
            "{m}"
        );
        assert!(
            m.contains(&format!(
                "this tool ABI {}.{}",
                abi::ABI_MAJOR,
                abi::ABI_MINOR
            )),
            "{m}"
        );
        assert!(m.contains("rmmod oxtrace; modprobe oxtrace"), "{m}");
    }
}
