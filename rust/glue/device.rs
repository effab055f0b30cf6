// SPDX-License-Identifier: GPL-2.0

//! `/dev/oxtrace`: opening makes a consumer, ioctls drive it.

use crate::abi;
use crate::glue::consumer::Consumer;
use crate::glue::session::{AggTaken, AttachReq, LoadFail, UserTables};
use crate::limits::{MAX_ATTACH, MAX_NAMES, MAX_PROBE_NAME, MAX_UATTACH};
use crate::program;
use crate::sys::cpu;
use crate::sys::gfp_load;
use crate::sys::miscdev::FileOps;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::types::{AsBytes, FromBytes};
use kernel::uaccess::{UserSlice, UserSliceWriter};

macro_rules! plain_abi {
    ($($t:ty),*) => {$(
        // SAFETY: plain `repr(C)` integers and byte arrays with no padding (the host ABI test
        // checks every offset against the C header): any bit pattern is valid and all bytes
        // are initialised.
        unsafe impl FromBytes for $t {}
        // SAFETY: as above.
        unsafe impl AsBytes for $t {}
    )*};
}
plain_abi!(
    abi::Version,
    abi::Status,
    abi::CpuStatus,
    abi::Load,
    abi::Attach,
    abi::Uattach,
    abi::UsdtArg,
    abi::Snapshot,
    abi::ProbeInfo,
    abi::Probes,
    abi::Dynstat,
    abi::DynCpu,
    abi::PtConfig,
    abi::PtCpu,
    abi::PtStatus,
    abi::PtRead,
    abi::PtLayout
);

/// The device's file operations.
pub(crate) struct Device;

impl FileOps for Device {
    type Data = Pin<KBox<Consumer>>;

    fn open() -> Result<Self::Data> {
        if !cpu::perfmon_capable() {
            return Err(EPERM);
        }
        Consumer::reserve()?;
        KBox::pin_init(Consumer::new(), gfp_load()).inspect_err(|_| Consumer::unreserve())
    }

    fn ioctl(consumer: Pin<&Consumer>, cmd: u32, arg: usize) -> Result<i32> {
        consumer.count_ioctl();
        // What loads code or starts tracing checks the caller again: an fd passed on or
        // inherited across a privilege drop must not carry the opener's capability.
        if matches!(
            cmd,
            abi::IOC_LOAD | abi::IOC_GO | abi::IOC_PT_CONFIG | abi::IOC_PT_START
        ) && !cpu::perfmon_capable()
        {
            return Err(EPERM);
        }
        match cmd {
            abi::IOC_VERSION => {
                let (mut v, out) = read_arg::<abi::Version>(arg)?;
                v.abi_major = abi::ABI_MAJOR;
                v.abi_minor = abi::ABI_MINOR;
                v.ncpus = cpu::nr_cpu_ids();
                v.features = abi::FEAT_KPROBES;
                if crate::sys::uprobe::available() {
                    v.features |= abi::FEAT_UPROBES;
                }
                if cpu::has_intel_pt() {
                    v.features |= abi::FEAT_INTEL_PT;
                }
                abi::fill_cstr(&mut v.release, crate::RELEASE);
                write_arg(out, &v)
            }
            abi::IOC_STATUS => status(&consumer, arg),
            abi::IOC_DYNSTAT => dynstat(&consumer, arg),
            abi::IOC_LOAD => load(&consumer, arg),
            abi::IOC_GO => consumer.go().map(|()| 0),
            abi::IOC_STOP => consumer.stop().map(|()| 0),
            abi::IOC_SNAPSHOT => {
                let (mut a, out) = read_arg::<abi::Snapshot>(arg)?;
                let mut w = UserSlice::new(a.buf as usize, a.buf_len as usize).writer();
                let (len, drops) =
                    consumer.snapshot(a.cpu, a.buf_len as usize, |d| w.write_slice(d))?;
                a.len = len as u64;
                a.drops = drops;
                write_arg(out, &a)
            }
            abi::IOC_AGGSNAP => {
                let (mut a, out) = read_arg::<abi::Snapshot>(arg)?;
                let mut w = UserSlice::new(a.buf as usize, a.buf_len as usize).writer();
                match consumer.aggsnap(a.cpu, a.buf_len as usize, |d| w.write_slice(d))? {
                    AggTaken::Data { len, drops } => {
                        a.len = len as u64;
                        a.drops = drops;
                        write_arg(out, &a)
                    }
                    AggTaken::TooSmall { need } => {
                        // Tell the caller how much room the data sets need.
                        a.len = need as u64;
                        a.drops = 0;
                        write_arg(out, &a)?;
                        Err(ENOSPC)
                    }
                }
            }
            abi::IOC_PROBES => {
                let (mut a, out) = read_arg::<abi::Probes>(arg)?;
                if a.reserved0 != 0 {
                    return Err(EINVAL);
                }
                let size = core::mem::size_of::<abi::ProbeInfo>();
                let n = a.n as usize;
                let mut w = UserSlice::new(a.info as usize, n.saturating_mul(size)).writer();
                let total = consumer.probes(n, |_, info| w.write(info))?;
                a.total = total as u32;
                a.n = n.min(total) as u32;
                write_arg(out, &a)
            }
            abi::IOC_PT_CONFIG => {
                let (mut c, out) = read_arg::<abi::PtConfig>(arg)?;
                consumer.pt_config(&mut c)?;
                write_arg(out, &c)
            }
            abi::IOC_PT_START => consumer.with_pt(|pt| pt.start()).map(|()| 0),
            abi::IOC_PT_STOP => consumer.with_pt(|pt| pt.stop()).map(|()| 0),
            abi::IOC_PT_STATUS => pt_status(&consumer, arg),
            abi::IOC_PT_READ => pt_read(&consumer, arg),
            abi::IOC_PT_LAYOUT => pt_layout(&consumer, arg),
            _ => Err(ENOTTY),
        }
    }
}

fn pt_status(consumer: &Consumer, arg: usize) -> Result<i32> {
    let (mut st, out) = read_arg::<abi::PtStatus>(arg)?;
    if st.reserved0 != 0 {
        return Err(EINVAL);
    }
    let mut cpus = KVec::new();
    if st.cpus != 0 {
        let want = (st.ncpus as usize).min(cpu::nr_cpu_ids() as usize);
        cpus.extend_with(want, abi::PtCpu::default(), gfp_load())?;
    }
    let n = match consumer.with_pt(|pt| Ok(pt.status(&mut st, &mut cpus))) {
        Ok(n) => n,
        Err(e) if e == ENOENT => {
            st.state = abi::PT_STATE_NONE;
            0
        }
        Err(e) => return Err(e),
    };
    if st.cpus != 0 {
        let size = core::mem::size_of::<abi::PtCpu>();
        let mut w = UserSlice::new(st.cpus as usize, n * size).writer();
        for c in &cpus[..n] {
            w.write(c)?;
        }
    }
    st.ncpus = n as u32;
    write_arg(out, &st)
}

fn pt_read(consumer: &Consumer, arg: usize) -> Result<i32> {
    let (mut r, out) = read_arg::<abi::PtRead>(arg)?;
    let len = (r.buf_len as usize).min(abi::PT_MAX_READ as usize);
    let mut buf = KVVec::from_elem(0u8, len, gfp_load())?;
    let (n, total) = consumer.with_pt(|pt| pt.read(r.cpu, r.offset, &mut buf))?;
    UserSlice::new(r.buf as usize, n)
        .writer()
        .write_slice(&buf[..n])?;
    r.len = n as u64;
    r.total = total;
    write_arg(out, &r)
}

fn pt_layout(consumer: &Consumer, arg: usize) -> Result<i32> {
    let (mut l, out) = read_arg::<abi::PtLayout>(arg)?;
    if l.reserved0 != 0 {
        return Err(EINVAL);
    }
    consumer.with_pt(|pt| {
        let (slices, tables, order) = pt.layout(l.cpu)?;
        if l.slices != 0 {
            let n = slices.len().min(l.nslices as usize);
            let mut w = UserSlice::new(l.slices as usize, n * 8).writer();
            for p in &slices[..n] {
                w.write(p)?;
            }
        }
        if l.tables != 0 {
            let n = tables.len().min(l.ntables as usize);
            let mut w = UserSlice::new(l.tables as usize, n * 8).writer();
            for p in &tables[..n] {
                w.write(p)?;
            }
        }
        l.nslices = slices.len() as u32;
        l.ntables = tables.len() as u32;
        l.slice_order = order;
        Ok(())
    })?;
    write_arg(out, &l)
}

fn status(consumer: &Consumer, arg: usize) -> Result<i32> {
    let (mut st, out) = read_arg::<abi::Status>(arg)?;
    let mut cpus = KVec::new();
    let want = (st.ncpus as usize).min(cpu::nr_cpu_ids() as usize);
    if st.cpus != 0 {
        cpus.extend_with(want, abi::CpuStatus::default(), gfp_load())?;
    }
    let n = consumer.status(&mut st, &mut cpus);
    if st.cpus != 0 {
        let size = core::mem::size_of::<abi::CpuStatus>();
        let mut w = UserSlice::new(st.cpus as usize, n * size).writer();
        for c in &cpus[..n] {
            w.write(c)?;
        }
    }
    st.ncpus = n as u32;
    write_arg(out, &st)
}

/// Most per-variable drop counters DYNSTAT copies out in one call.
const MAX_DYNSTAT_VARS: usize = 1 << 16;

fn dynstat(consumer: &Consumer, arg: usize) -> Result<i32> {
    let (inp, out) = read_arg::<abi::Dynstat>(arg)?;
    if inp.reserved0 != 0 {
        return Err(EINVAL);
    }
    let mut cpus = KVec::new();
    if inp.cpus != 0 {
        let want = (inp.ncpus as usize).min(cpu::nr_cpu_ids() as usize);
        cpus.extend_with(want, abi::DynCpu::default(), gfp_load())?;
    }
    let mut vars = KVVec::new();
    if inp.var_drops != 0 {
        let want = (inp.nvars as usize).min(MAX_DYNSTAT_VARS);
        vars.extend_with(want, 0u64, gfp_load())?;
    }
    // Every other field is output: start from zero.
    let mut st = abi::Dynstat {
        size: inp.size,
        ..Default::default()
    };
    let n = consumer.dynstat(&mut st, &mut cpus, &mut vars);
    if inp.cpus != 0 {
        let size = core::mem::size_of::<abi::DynCpu>();
        let mut w = UserSlice::new(inp.cpus as usize, n * size).writer();
        for c in &cpus[..n] {
            w.write(c)?;
        }
    }
    if inp.var_drops != 0 {
        let nv = vars.len().min(st.nvars as usize);
        let mut w = UserSlice::new(inp.var_drops as usize, nv * 8).writer();
        for v in &vars[..nv] {
            w.write(v)?;
        }
    }
    st.cpus = inp.cpus;
    st.var_drops = inp.var_drops;
    st.ncpus = n as u32;
    write_arg(out, &st)
}

fn load(consumer: &Consumer, arg: usize) -> Result<i32> {
    let (mut a, out) = read_arg::<abi::Load>(arg)?;
    if a.flags != 0 {
        return Err(EINVAL);
    }
    if a.image_len as usize > program::MAX_IMAGE_SIZE
        || a.nattach as usize > MAX_ATTACH
        || a.names_len as usize > MAX_NAMES
        || a.nuattach as usize > MAX_UATTACH
        || a.nusdt_args as usize > crate::uprobe::MAX_USDT_ARGS_TOTAL
    {
        return Err(E2BIG);
    }
    let mut image = VVec::from_elem(0u8, a.image_len as usize, gfp_load())?;
    UserSlice::new(a.image as usize, image.len())
        .reader()
        .read_slice(&mut image)?;
    let mut names = KVVec::from_elem(0u8, a.names_len as usize, gfp_load())?;
    UserSlice::new(a.names as usize, names.len())
        .reader()
        .read_slice(&mut names)?;
    let mut entries = KVVec::with_capacity(a.nattach as usize, gfp_load())?;
    let mut r = UserSlice::new(
        a.attach as usize,
        a.nattach as usize * core::mem::size_of::<abi::Attach>(),
    )
    .reader();
    for _ in 0..a.nattach {
        entries.push(r.read::<abi::Attach>()?, gfp_load())?;
    }
    let uentries = read_table::<abi::Uattach>(a.uattach, a.nuattach)?;
    let uargs = read_table::<abi::UsdtArg>(a.usdt_args, a.nusdt_args)?;
    let user = UserTables {
        entries: &uentries,
        args: &uargs,
        names: &names,
    };
    let mut reqs = KVVec::with_capacity(entries.len(), gfp_load())?;
    for (i, e) in entries.iter().enumerate() {
        let Some(name) = attach_name(&names, e) else {
            a.err_kind = abi::LOADERR_ATTACH;
            a.err_index = i as u32;
            write_arg(out, &a)?;
            return Err(EINVAL);
        };
        reqs.push(
            AttachReq {
                desc: e.probe,
                optional: e.flags & abi::ATTACH_OPTIONAL != 0,
                name,
            },
            gfp_load(),
        )?;
    }
    match consumer.load(image, &reqs, &user) {
        Ok((nprobes, nskipped, nuprobes)) => {
            a.nprobes = nprobes;
            a.nskipped = nskipped;
            a.nuprobes = nuprobes;
            a.err_kind = abi::LOADERR_NONE;
            write_arg(out, &a)
        }
        Err(LoadFail {
            err,
            kind,
            index,
            part,
            insn,
            code,
            arg,
        }) => {
            a.err_kind = kind;
            a.err_index = index;
            a.err_part = part;
            a.err_insn = insn;
            a.err_code = code;
            a.err_arg = arg;
            write_arg(out, &a)?;
            Err(err)
        }
    }
}

/// `n` entries of `T` read from user address `addr`.
fn read_table<T: FromBytes>(addr: u64, n: u32) -> Result<KVVec<T>> {
    let mut v = KVVec::with_capacity(n as usize, gfp_load())?;
    let mut r = UserSlice::new(addr as usize, n as usize * core::mem::size_of::<T>()).reader();
    for _ in 0..n {
        v.push(r.read::<T>()?, gfp_load())?;
    }
    Ok(v)
}

/// The checked name of an attach entry: in bounds, NUL-terminated, 1 to 63 bytes.
fn attach_name<'a>(names: &'a [u8], e: &abi::Attach) -> Option<&'a CStr> {
    if e.reserved != 0 || e.flags & !abi::ATTACH_OPTIONAL != 0 {
        return None;
    }
    let rest = names.get(e.name as usize..)?;
    let len = rest.iter().position(|&b| b == 0)?;
    if len == 0 || len > MAX_PROBE_NAME {
        return None;
    }
    CStr::from_bytes_with_nul(&rest[..=len]).ok()
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
