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
    err: io::Error,
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.path.display(), self.what, self.err)?;
        match self.err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
                write!(f, " (is the oxtrace module loaded? try: insmod oxtrace.ko)")
            }
            Some(libc::EPERM) | Some(libc::EACCES) => {
                write!(
                    f,
                    " (tracing needs CAP_PERFMON or CAP_SYS_ADMIN: run as root)"
                )
            }
            Some(libc::ENOTTY) => write!(f, " (module and tool ABI differ: rebuild both)"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for DeviceError {}

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

    fn ioctl<T>(&self, what: &'static str, cmd: u32, arg: &mut T) -> Result<(), DeviceError> {
        // SAFETY: `cmd` is an `_IOWR` command whose size is `size_of::<T>()` (abi.rs builds both
        // from the same type), and `arg` is a valid, exclusively borrowed `T`.
        let r = unsafe { libc::ioctl(self.file.as_raw_fd(), cmd as _, arg as *mut T) };
        if r < 0 {
            return Err(DeviceError {
                path: self.path.clone(),
                what,
                err: io::Error::last_os_error(),
            });
        }
        Ok(())
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
}
