// SPDX-License-Identifier: GPL-2.0

//! `/dev/oxtrace`: opening makes a consumer, ioctls drive it.

use crate::abi;
use crate::consumer::Consumer;
use crate::cpu;
use crate::miscdev::FileOps;
use kernel::prelude::*;
use kernel::types::{AsBytes, FromBytes};
use kernel::uaccess::{UserSlice, UserSliceWriter};

// SAFETY: plain `repr(C)` integers and byte arrays with no padding (the host ABI test checks
// every offset against the C header): any bit pattern is valid and all bytes are initialised.
unsafe impl FromBytes for abi::Version {}
// SAFETY: as above.
unsafe impl AsBytes for abi::Version {}
// SAFETY: as above.
unsafe impl FromBytes for abi::Status {}
// SAFETY: as above.
unsafe impl AsBytes for abi::Status {}

/// The device's file operations.
pub(crate) struct Device;

impl FileOps for Device {
    type Data = Pin<KBox<Consumer>>;

    fn open() -> Result<Self::Data> {
        if !cpu::perfmon_capable() {
            return Err(EPERM);
        }
        KBox::pin_init(Consumer::new(), GFP_KERNEL)
    }

    fn ioctl(consumer: Pin<&Consumer>, cmd: u32, arg: usize) -> Result<i32> {
        consumer.count_ioctl();
        match cmd {
            abi::IOC_VERSION => {
                let (mut v, out) = read_arg::<abi::Version>(arg)?;
                v.abi_major = abi::ABI_MAJOR;
                v.abi_minor = abi::ABI_MINOR;
                v.ncpus = cpu::num_possible();
                v.features = abi::FEAT_KPROBES;
                if cpu::has_intel_pt() {
                    v.features |= abi::FEAT_INTEL_PT;
                }
                abi::fill_cstr(&mut v.release, crate::RELEASE);
                write_arg(out, &v)
            }
            abi::IOC_STATUS => {
                let (mut st, out) = read_arg::<abi::Status>(arg)?;
                consumer.status(&mut st);
                write_arg(out, &st)
            }
            _ => Err(ENOTTY),
        }
    }
}

/// Reads an ioctl argument and checks its size and reserved fields.
fn read_arg<T: FromBytes + abi::Sized32>(arg: usize) -> Result<(T, UserSliceWriter)> {
    let (mut reader, writer) = UserSlice::new(arg, core::mem::size_of::<T>()).reader_writer();
    let v: T = reader.read()?;
    abi::check_arg(&v).map_err(|_| EINVAL)?;
    Ok((v, writer))
}

/// Writes an ioctl argument back.
fn write_arg<T: AsBytes>(mut out: UserSliceWriter, v: &T) -> Result<i32> {
    out.write(v)?;
    Ok(0)
}
