// SPDX-License-Identifier: GPL-2.0

//! Intel PT of a consumer: per-CPU buffers of many page allocations, ToPA tables built with
//! [`topa::build`], and two backends behind one ABI (`Documentation/pt.rst`):
//!
//! - real: the processor writes through the tables; programmed on each CPU by a cross-call
//!   with the fault-safe RTIT MSR accessors. The ToPA PMI is delivered to perf's PMI handler,
//!   which the module does not own, so only STOP (polled) and ring mode are used.
//! - software (no PT, as in every QEMU guest): [`topa::OutputEngine`] walks the same tables
//!   over the same pages, writing genuine PT packets for the D action `ptwrite(value)`.
//!
//! Probe context reaches a CPU's state only through its [`ActionCtx`]; process context only
//! through cross-calls (start, stop, status, read), so each CPU's state has one user at a time
//! and nothing here takes a lock.

use crate::abi;
use crate::glue::budget::MemCharge;
use crate::sys::cpu;
use crate::sys::gfp_load;
use crate::sys::msr;
use crate::sys::pages::{Pages, PAGE_SIZE};
use crate::sys::percpu::{ActionCtx, PerCpu};
use crate::sys::xcall;
use crate::topa::{self, Layout, MemFault, Mode, OutputEngine, OutputRegs, Packet, PhysMem};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Bytes between PSB groups when the configuration says 0.
const DEFAULT_PSB_PERIOD: u32 = 4096;
/// Allowed PSB periods.
const PSB_PERIOD_RANGE: core::ops::RangeInclusive<u32> = 256..=(1 << 20);
/// Allocations set aside, per slice, when the allocator hands out a block adjacent to the
/// previous slice (so the slices of a buffer are never one contiguous run).
const MAX_ADJACENT_RETRIES: usize = 16;
/// `IA32_RTIT_CTL` the real backend sets: ToPA output, all rings, branches and TSC.
const HW_CTL: u64 = topa::RTIT_CTL_TRACEEN
    | topa::RTIT_CTL_TOPA
    | topa::RTIT_CTL_OS
    | topa::RTIT_CTL_USER
    | topa::RTIT_CTL_BRANCHEN
    | topa::RTIT_CTL_TSCEN;

/// Which backend writes the trace.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Soft,
    Hw,
}

/// One CPU's memory: slices in walk order and table pages.
struct CpuBuf {
    slices: KVec<Pages>,
    tables: KVec<Pages>,
    layout: Layout,
    /// Index of the slice the last write went to: writes are sequential.
    hint: usize,
}

impl CpuBuf {
    fn alloc(
        nslices: usize,
        order: u32,
        ntables: usize,
        mode: Mode,
        tcfg: &topa::Config,
    ) -> Result<Self> {
        let mut slices: KVec<Pages> = KVec::with_capacity(nslices, gfp_load())?;
        let mut spare = KVec::new();
        for _ in 0..nslices {
            let mut tries = 0;
            loop {
                let p = Pages::alloc(order)?;
                let adjacent = slices.last().is_some_and(|q| {
                    q.phys() + q.len() as u64 == p.phys() || p.phys() + p.len() as u64 == q.phys()
                });
                if adjacent && tries < MAX_ADJACENT_RETRIES {
                    spare.push(p, gfp_load())?;
                    tries += 1;
                    continue;
                }
                slices.push(p, gfp_load())?;
                break;
            }
        }
        drop(spare);
        let mut tables = KVec::with_capacity(ntables, gfp_load())?;
        for _ in 0..ntables {
            tables.push(Pages::alloc(0)?, gfp_load())?;
        }
        // Laid out in a bounce array (build wants the pages as one slice), then copied to
        // the separate table pages.
        let mut pages = KVVec::from_elem([0u64; topa::TABLE_ENTRIES], ntables, gfp_load())?;
        let mut table_phys = KVec::with_capacity(ntables, gfp_load())?;
        for t in tables.iter() {
            table_phys.push(t.phys(), gfp_load())?;
        }
        let mut descr = KVVec::with_capacity(nslices, gfp_load())?;
        for s in slices.iter() {
            descr.push(
                topa::Slice {
                    phys: s.phys(),
                    order: order as u8,
                },
                gfp_load(),
            )?;
        }
        let layout = topa::build(&mut pages, &table_phys, &descr, mode, tcfg).map_err(|e| {
            pr_warn!("oxtrace: ToPA build refused: {:?}\n", e);
            EINVAL
        })?;
        for (t, words) in tables.iter_mut().zip(pages.iter()) {
            for (i, w) in words.iter().enumerate() {
                if !t.write(i * 8, &w.to_le_bytes()) {
                    return Err(EINVAL);
                }
            }
        }
        Ok(Self {
            slices,
            tables,
            layout,
            hint: 0,
        })
    }

    /// The slice holding `phys`, and the offset in it.
    fn find(&self, phys: u64, hint: usize) -> Option<(usize, usize)> {
        let inside = |i: usize| -> Option<(usize, usize)> {
            let s = self.slices.get(i)?;
            (phys >= s.phys() && phys - s.phys() < s.len() as u64)
                .then(|| (i, (phys - s.phys()) as usize))
        };
        inside(hint)
            .or_else(|| inside(hint + 1))
            .or_else(|| (0..self.slices.len()).find_map(inside))
    }
}

impl PhysMem for CpuBuf {
    fn read_entry(&self, phys: u64) -> Result<u64, MemFault> {
        if phys % 8 != 0 {
            return Err(MemFault);
        }
        let base = phys & !(PAGE_SIZE as u64 - 1);
        let t = self
            .tables
            .iter()
            .find(|t| t.phys() == base)
            .ok_or(MemFault)?;
        let mut b = [0u8; 8];
        if !t.read((phys - base) as usize, &mut b) {
            return Err(MemFault);
        }
        Ok(u64::from_le_bytes(b))
    }

    fn write(&mut self, phys: u64, bytes: &[u8]) -> Result<(), MemFault> {
        let (i, off) = self.find(phys, self.hint).ok_or(MemFault)?;
        self.hint = i;
        if self.slices[i].write(off, bytes) {
            Ok(())
        } else {
            Err(MemFault)
        }
    }

    fn read(&self, phys: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        let (i, off) = self.find(phys, 0).ok_or(MemFault)?;
        if self.slices[i].read(off, buf) {
            Ok(())
        } else {
            Err(MemFault)
        }
    }
}

/// One CPU's PT state.
pub(crate) struct PtCpu {
    buf: CpuBuf,
    /// Software backend: the output walk.
    engine: OutputEngine,
    /// Software backend: bytes written since the last PSB.
    since_psb: u64,
    /// Software backend: PTW packets written.
    ptws: u64,
    /// Value of [`Pt::missed`] for this CPU when the last OVF was written.
    missed_seen: u64,
    /// Real backend: output registers and status saved at the last stop.
    hw_regs: OutputRegs,
    hw_status: u64,
    hw_on: bool,
    hw_started: bool,
    /// 0, or the negative errno of the last start or stop on this CPU.
    error: i32,
}

/// The PT buffers and state of a consumer.
///
/// # Invariants
///
/// `state` changes only under the consumer's lock; `running` is true exactly while
/// `state == PT_STATE_RUNNING`, and every CPU's engine or TraceEn is on only while it is.
pub(crate) struct Pt {
    backend: Backend,
    mode_abi: u32,
    psb_period: u64,
    order: u32,
    nslices: usize,
    ntables: usize,
    capacity: u64,
    state: AtomicU32,
    running: AtomicBool,
    /// Probe hits not run per CPU (action recursion) since configuration: an OVF each.
    missed: KVec<AtomicU64>,
    /// Physical addresses, CPU-major: slices, tables (constant after configuration).
    slice_phys: KVVec<u64>,
    table_phys: KVVec<u64>,
    cpus: PerCpu<PtCpu>,
    /// The buffers' share of the memory budget, released with them.
    _charge: MemCharge,
}

/// Whether this CPU has Intel PT with ToPA output; `Some(multi_entry)` if so.
fn hw_detect() -> Option<bool> {
    if !cpu::has_intel_pt() || msr::cpuid(0, 0)[0] < 0x14 {
        return None;
    }
    if msr::cpuid(7, 0)[1] & topa::CPUID_7_EBX_INTEL_PT == 0 {
        return None;
    }
    let ecx = msr::cpuid(0x14, 0)[2];
    if ecx & topa::CPUID_14_ECX_TOPA == 0 {
        return None;
    }
    Some(ecx & topa::CPUID_14_ECX_TOPA_MULTI != 0)
}

/// Writes PSB, TSC, PSBEND to `out`; returns the length.
fn psb_group(out: &mut [u8]) -> usize {
    let tsc = msr::rdtsc() & topa::TSC_MASK;
    let group = [Packet::Psb, Packet::Tsc { tsc }, Packet::PsbEnd];
    topa::encode_all(&group, out).unwrap_or(0)
}

/// Status words a cross-call fills in (atomics: the handler runs on another CPU).
#[derive(Default)]
struct Snap {
    w: [AtomicU64; 11],
}

impl Pt {
    /// Validates `cfg`, picks the backend and allocates every CPU's buffer; fills in the
    /// output fields of `cfg`.
    pub(crate) fn new(cfg: &mut abi::PtConfig) -> Result<Arc<Pt>> {
        if cfg.backend > abi::PT_BACKEND_HW || cfg.mode > abi::PT_MODE_STOP_INT {
            return Err(EINVAL);
        }
        if cfg.nslices == 0 || cfg.nslices > abi::PT_MAX_SLICES {
            return Err(EINVAL);
        }
        if cfg.slice_order > abi::PT_MAX_ORDER
            || cfg.per_table as usize > topa::MAX_OUTPUTS_PER_TABLE
        {
            return Err(EINVAL);
        }
        if cfg.psb_period != 0 && !PSB_PERIOD_RANGE.contains(&cfg.psb_period) {
            return Err(EINVAL);
        }
        let capacity = (cfg.nslices as u64) << (cfg.slice_order + 12);
        if capacity > abi::PT_MAX_BYTES {
            return Err(E2BIG);
        }
        let (backend, multi) = match (cfg.backend, hw_detect()) {
            (abi::PT_BACKEND_SOFT, _) | (abi::PT_BACKEND_AUTO, None) => (Backend::Soft, true),
            (_, Some(multi)) => (Backend::Hw, multi),
            (_, None) => return Err(ENODEV),
        };
        let mode = match cfg.mode {
            abi::PT_MODE_RING => Mode::Ring,
            abi::PT_MODE_STOP => Mode::Stop { int: false },
            _ => Mode::Stop { int: true },
        };
        let phys_bits = msr::phys_bits();
        let width = topa::PhysWidth::new(phys_bits as u8).ok_or(ENODEV)?;
        let per_table = if cfg.per_table == 0 {
            topa::MAX_OUTPUTS_PER_TABLE
        } else {
            cfg.per_table as usize
        };
        let tcfg = topa::Config {
            width,
            multi_entry: multi,
            outputs_per_table: per_table,
        };
        let nslices = cfg.nslices as usize;
        let ntables = nslices.div_ceil(per_table);
        let ncpus = cpu::nr_cpu_ids() as usize;
        // Every CPU's slices and table pages, charged before any is allocated.
        let charge = MemCharge::take_bytes(
            (ncpus as u64).saturating_mul(capacity + (ntables * PAGE_SIZE) as u64),
        )?;
        let mut slice_phys = KVVec::with_capacity(ncpus * nslices, gfp_load())?;
        let mut table_phys = KVVec::with_capacity(ncpus * ntables, gfp_load())?;
        let cpus = PerCpu::new(|_| {
            let buf = CpuBuf::alloc(nslices, cfg.slice_order, ntables, mode, &tcfg)?;
            for s in buf.slices.iter() {
                slice_phys.push(s.phys(), gfp_load())?;
            }
            for t in buf.tables.iter() {
                table_phys.push(t.phys(), gfp_load())?;
            }
            let engine = OutputEngine::new(&buf.layout, &tcfg);
            let hw_regs = buf.layout.initial_regs();
            Ok(PtCpu {
                buf,
                engine,
                since_psb: 0,
                ptws: 0,
                missed_seen: 0,
                hw_regs,
                hw_status: 0,
                hw_on: false,
                hw_started: false,
                error: 0,
            })
        })?;
        let mut missed = KVec::with_capacity(ncpus, gfp_load())?;
        for _ in 0..ncpus {
            missed.push(AtomicU64::new(0), gfp_load())?;
        }
        cfg.backend = match backend {
            Backend::Soft => abi::PT_BACKEND_SOFT,
            Backend::Hw => abi::PT_BACKEND_HW,
        };
        cfg.ntables = ntables as u32;
        cfg.capacity = capacity;
        cfg.ncpus = ncpus as u32;
        cfg.phys_bits = phys_bits;
        let psb = if cfg.psb_period == 0 {
            DEFAULT_PSB_PERIOD
        } else {
            cfg.psb_period
        };
        // INVARIANT: not started: state READY, not running, every engine disabled.
        Ok(Arc::new(
            Pt {
                backend,
                mode_abi: cfg.mode,
                psb_period: psb as u64,
                order: cfg.slice_order,
                nslices,
                ntables,
                capacity,
                state: AtomicU32::new(abi::PT_STATE_READY),
                running: AtomicBool::new(false),
                missed,
                slice_phys,
                table_phys,
                cpus,
                _charge: charge,
            },
            gfp_load(),
        )?)
    }

    /// The per-CPU state, for an action that also uses another per-CPU container.
    pub(crate) fn cpus(&self) -> &PerCpu<PtCpu> {
        &self.cpus
    }

    /// Whether the trace is running (ioctl side).
    pub(crate) fn is_running(&self) -> bool {
        self.state.load(Ordering::Relaxed) == abi::PT_STATE_RUNNING
    }

    /// START: every online CPU begins tracing (under the consumer's lock).
    pub(crate) fn start(&self) -> Result {
        if self.is_running() {
            return Err(EBUSY);
        }
        let err = AtomicI32::new(0);
        match self.backend {
            Backend::Soft => xcall::on_each_cpu(&|ctx: &mut ActionCtx| {
                let c = self.cpus.local(ctx);
                self.soft_start(c);
            }),
            Backend::Hw => {
                xcall::on_each_cpu(&|ctx: &mut ActionCtx| {
                    let c = self.cpus.local(ctx);
                    if let Err(e) = hw_start(c) {
                        c.error = e.to_errno();
                        let _ = err.compare_exchange(
                            0,
                            e.to_errno(),
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                    }
                });
                let e = err.load(Ordering::Relaxed);
                if e != 0 {
                    xcall::on_each_cpu(&|ctx: &mut ActionCtx| hw_stop(self.cpus.local(ctx)));
                    return Err(Error::from_errno(e));
                }
            }
        }
        self.state.store(abi::PT_STATE_RUNNING, Ordering::Relaxed);
        // Probe context writes only once every engine is on.
        self.running.store(true, Ordering::Release);
        Ok(())
    }

    fn soft_start(&self, c: &mut PtCpu) {
        c.error = 0;
        if c.engine.enable(&c.buf).is_err() {
            c.error = EIO.to_errno();
            return;
        }
        // A PSB group opens the stream (and each resumed piece of it).
        let mut b = [0u8; 32];
        let n = psb_group(&mut b);
        let w = c.engine.write(&mut c.buf, &b[..n]);
        c.since_psb = w as u64;
    }

    /// STOP: every CPU stops tracing; the cross-call returns once no action on any CPU can
    /// still be writing, so the data can be read.
    pub(crate) fn stop(&self) -> Result {
        if !self.is_running() {
            return Err(EINVAL);
        }
        self.stop_all();
        Ok(())
    }

    fn stop_all(&self) {
        self.running.store(false, Ordering::Release);
        xcall::on_each_cpu(&|ctx: &mut ActionCtx| {
            let c = self.cpus.local(ctx);
            match self.backend {
                Backend::Soft => c.engine.disable(),
                Backend::Hw => hw_stop(c),
            }
        });
        self.state.store(abi::PT_STATE_STOPPED, Ordering::Relaxed);
    }

    /// Counts a probe hit on `cpu` that was not run: the next packet is preceded by OVF.
    pub(crate) fn note_missed(&self, cpu: u32) {
        if let Some(m) = self.missed.get(cpu as usize) {
            m.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `ptwrite(value)` in probe context: a PTW packet on this CPU's stream, preceded by OVF
    /// after lost probe hits and by a PSB group every `psb_period` bytes. False when the
    /// packet was not written whole.
    pub(crate) fn ptwrite(&self, c: &mut PtCpu, cpu: u32, value: u64) -> bool {
        if self.backend != Backend::Soft || !self.running.load(Ordering::Acquire) {
            return false;
        }
        // A stopped engine counts the refused bytes as lost.
        if !c.engine.is_enabled() {
            return false;
        }
        let mut b = [0u8; 48];
        let mut n = 0;
        let missed = self
            .missed
            .get(cpu as usize)
            .map_or(0, |m| m.load(Ordering::Relaxed));
        if missed != c.missed_seen {
            c.missed_seen = missed;
            n += Packet::Ovf.encode(&mut b[n..]).unwrap_or(0);
        }
        if c.since_psb >= self.psb_period {
            let k = psb_group(&mut b[n..]);
            n += k;
            c.since_psb = 0;
        }
        let ptw = Packet::Ptw {
            payload: value,
            size: topa::PtwSize::Eight,
            ip: false,
        };
        let Ok(k) = ptw.encode(&mut b[n..]) else {
            return false;
        };
        n += k;
        let w = c.engine.write(&mut c.buf, &b[..n]);
        c.since_psb += w as u64;
        if w == n {
            c.ptws += 1;
            true
        } else {
            false
        }
    }

    /// The cursor of `c` now (software) or at its last stop (real).
    fn cursor(&self, c: &PtCpu) -> Result<topa::Cursor, topa::WalkError> {
        match self.backend {
            Backend::Soft => c.engine.cursor(&c.buf.layout, &c.buf),
            // The processor does not report wraps: a ring is read whole (zeroes are PAD).
            Backend::Hw => c.buf.layout.cursor(
                &c.buf,
                c.hw_regs,
                matches!(c.buf.layout.mode(), Mode::Ring) && c.hw_started,
            ),
        }
    }

    fn snap(&self, c: &PtCpu, s: &Snap) {
        let mut flags = abi::PT_CPU_PRESENT;
        let (regs, status, on) = match self.backend {
            Backend::Soft => (c.engine.regs(), c.engine.status(), c.engine.is_enabled()),
            Backend::Hw => (c.hw_regs, c.hw_status, c.hw_on),
        };
        let (position, len, wrapped) = match self.cursor(c) {
            Ok(cur) => (cur.position, c.buf.layout.data_len(cur), cur.wrapped),
            Err(_) => {
                flags |= abi::PT_CPU_ERROR;
                (0, 0, false)
            }
        };
        if wrapped {
            flags |= abi::PT_CPU_WRAPPED;
        }
        if status & topa::RTIT_STATUS_STOPPED != 0 {
            flags |= abi::PT_CPU_STOPPED;
        }
        if status & topa::RTIT_STATUS_ERROR != 0 {
            flags |= abi::PT_CPU_ERROR;
        }
        if c.engine.pmi_pending() {
            flags |= abi::PT_CPU_PMI;
        }
        if on {
            flags |= abi::PT_CPU_ENABLED;
        }
        let words = [
            position,
            len,
            c.engine.bytes_written(),
            c.engine.bytes_lost(),
            c.engine.wraps(),
            c.ptws,
            regs.base,
            regs.mask_ptrs,
            status,
            flags as u64,
            c.error as u32 as u64,
        ];
        for (a, v) in s.w.iter().zip(words) {
            a.store(v, Ordering::Relaxed);
        }
    }

    /// STATUS: the summary, and one entry per CPU in `out` (offline CPUs: flags 0).
    pub(crate) fn status(&self, st: &mut abi::PtStatus, out: &mut [abi::PtCpu]) -> usize {
        st.state = self.state.load(Ordering::Relaxed);
        st.backend = match self.backend {
            Backend::Soft => abi::PT_BACKEND_SOFT,
            Backend::Hw => abi::PT_BACKEND_HW,
        };
        st.mode = self.mode_abi;
        st.capacity = self.capacity;
        let n = out.len().min(cpu::nr_cpu_ids() as usize);
        for (i, o) in out[..n].iter_mut().enumerate() {
            let s = Snap::default();
            *o = abi::PtCpu::default();
            let done = xcall::on_cpu(i as u32, &|ctx: &mut ActionCtx| {
                self.snap(self.cpus.local(ctx), &s)
            });
            if done.is_err() {
                continue;
            }
            let w = |k: usize| s.w[k].load(Ordering::Relaxed);
            *o = abi::PtCpu {
                position: w(0),
                data_len: w(1),
                written: w(2),
                lost: w(3),
                wraps: w(4),
                ptws: w(5),
                output_base: w(6),
                mask_ptrs: w(7),
                rtit_status: w(8),
                flags: w(9) as u32,
                error: w(10) as u32 as i32,
                reserved: [0; 2],
            };
        }
        n
    }

    /// READ: `cpu`'s data from logical offset `from` into `out` (at most
    /// [`abi::PT_MAX_READ`] bytes); returns the bytes copied and the CPU's data length.
    /// `EBUSY` while running, `ENXIO` for an offline CPU.
    pub(crate) fn read(&self, cpu: u32, from: u64, out: &mut [u8]) -> Result<(usize, u64)> {
        if cpu >= cpu::nr_cpu_ids() {
            return Err(EINVAL);
        }
        if self.is_running() {
            return Err(EBUSY);
        }
        let want = out.len().min(abi::PT_MAX_READ as usize);
        let words = want.div_ceil(8);
        let mut bounce = KVVec::with_capacity(words, gfp_load())?;
        for _ in 0..words {
            bounce.push(AtomicU64::new(0), gfp_load())?;
        }
        let res = Snap::default();
        xcall::on_cpu(cpu, &|ctx: &mut ActionCtx| {
            let c = self.cpus.local(ctx);
            let Ok(cur) = self.cursor(c) else {
                res.w[2].store(1, Ordering::Relaxed);
                return;
            };
            let total = c.buf.layout.data_len(cur);
            let mut done = 0usize;
            let mut chunk = [0u8; 256];
            while done < want {
                let n = (want - done).min(chunk.len());
                match c
                    .buf
                    .layout
                    .read_logical(&c.buf, cur, from + done as u64, &mut chunk[..n])
                {
                    Ok(0) => break,
                    Ok(k) => {
                        for (j, w) in chunk[..k].chunks(8).enumerate() {
                            let mut le = [0u8; 8];
                            le[..w.len()].copy_from_slice(w);
                            bounce[(done / 8) + j].store(u64::from_le_bytes(le), Ordering::Relaxed);
                        }
                        done += k;
                        if k < n {
                            break;
                        }
                    }
                    Err(_) => {
                        res.w[2].store(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            res.w[0].store(done as u64, Ordering::Relaxed);
            res.w[1].store(total, Ordering::Relaxed);
        })?;
        if res.w[2].load(Ordering::Relaxed) != 0 {
            return Err(EIO);
        }
        let done = res.w[0].load(Ordering::Relaxed) as usize;
        for (j, dst) in out[..done].chunks_mut(8).enumerate() {
            let le = bounce[j].load(Ordering::Relaxed).to_le_bytes();
            dst.copy_from_slice(&le[..dst.len()]);
        }
        Ok((done, res.w[1].load(Ordering::Relaxed)))
    }

    /// LAYOUT: the physical addresses of `cpu`'s slices and tables, walk order.
    pub(crate) fn layout(&self, cpu: u32) -> Result<(&[u64], &[u64], u32)> {
        if cpu >= cpu::nr_cpu_ids() {
            return Err(EINVAL);
        }
        let c = cpu as usize;
        let s = &self.slice_phys[c * self.nslices..(c + 1) * self.nslices];
        let t = &self.table_phys[c * self.ntables..(c + 1) * self.ntables];
        Ok((s, t, self.order))
    }
}

impl Drop for Pt {
    fn drop(&mut self) {
        // The real backend must not write to pages about to be freed.
        if self.is_running() {
            self.stop_all();
        }
    }
}

/// Programs this CPU's RTIT MSRs and sets TraceEn; `EBUSY` if someone (perf) traces here.
fn hw_start(c: &mut PtCpu) -> Result {
    c.error = 0;
    let ctl = msr::read_safe(topa::MSR_RTIT_CTL)?;
    if ctl & topa::RTIT_CTL_TRACEEN != 0 {
        return Err(EBUSY);
    }
    // A restart continues where the last stop left the registers (Stopped stays set).
    let (regs, status) = if c.hw_started {
        (c.hw_regs, c.hw_status & topa::RTIT_STATUS_STOPPED)
    } else {
        (c.buf.layout.initial_regs(), 0)
    };
    msr::write_safe(topa::MSR_RTIT_STATUS, status)?;
    msr::write_safe(topa::MSR_RTIT_OUTPUT_BASE, regs.base)?;
    msr::write_safe(topa::MSR_RTIT_OUTPUT_MASK_PTRS, regs.mask_ptrs)?;
    msr::write_safe(topa::MSR_RTIT_CTL, HW_CTL)?;
    c.hw_on = true;
    c.hw_started = true;
    Ok(())
}

/// Clears TraceEn on this CPU and saves STATUS and the output registers.
fn hw_stop(c: &mut PtCpu) {
    if !c.hw_on {
        return;
    }
    let res = (|| -> Result {
        let ctl = msr::read_safe(topa::MSR_RTIT_CTL)?;
        msr::write_safe(topa::MSR_RTIT_CTL, ctl & !topa::RTIT_CTL_TRACEEN)?;
        c.hw_status = msr::read_safe(topa::MSR_RTIT_STATUS)?;
        c.hw_regs = OutputRegs {
            base: msr::read_safe(topa::MSR_RTIT_OUTPUT_BASE)?,
            mask_ptrs: msr::read_safe(topa::MSR_RTIT_OUTPUT_MASK_PTRS)?,
        };
        Ok(())
    })();
    c.hw_on = false;
    if let Err(e) = res {
        c.error = e.to_errno();
    }
}
