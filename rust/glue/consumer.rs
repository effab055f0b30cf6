// SPDX-License-Identifier: GPL-2.0

//! A consumer: the state behind one open of `/dev/oxtrace`.
//!
//! Lifecycle: IDLE -LOAD-> LOADED -GO-> ACTIVE -STOP-> STOPPED. Everything a consumer does is
//! serialised by [`Consumer::inner`]; probe context never takes it.

use crate::abi;
use crate::glue::pt::Pt;
use crate::glue::session::{AggTaken, AttachReq, Drain, LoadFail, Session};
use crate::program::ProbeKind;
use crate::sys::cpu;
use crate::sys::kprobe::ProbeSet;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

/// Consumers open on the device now.
static NCONSUMERS: AtomicU64 = AtomicU64::new(0);
/// Consumer objects allocated and not yet dropped: a leak shows here.
static LIVE: AtomicU64 = AtomicU64::new(0);
/// Source of consumer ids; 0 is never handed out.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a consumer's ioctls change, serialised by [`Consumer::inner`].
///
struct Inner {
    /// The loaded session and the probes that call it.
    probes: Option<ProbeSet<Session>>,
    drain: Option<Drain>,
    state: u32,
    /// Intel PT buffers, configured before LOAD; the session shares them.
    pt: Option<Arc<Pt>>,
}

/// One open of the device.
#[pin_data(PinnedDrop)]
pub(crate) struct Consumer {
    id: u64,
    opened_ns: u64,
    ioctls: AtomicU64,
    #[pin]
    inner: Mutex<Inner>,
}

impl Consumer {
    /// A new, idle consumer.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        LIVE.fetch_add(1, Ordering::Relaxed);
        NCONSUMERS.fetch_add(1, Ordering::Relaxed);
        try_pin_init!(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            opened_ns: cpu::ktime_ns(),
            ioctls: AtomicU64::new(0),
            inner <- new_mutex!(
                Inner {
                    probes: None,
                    drain: None,
                    state: abi::STATE_IDLE,
                    pt: None,
                },
                "oxtrace::Consumer::inner"
            ),
        })
    }

    /// Counts one ioctl served to this consumer.
    pub(crate) fn count_ioctl(&self) {
        self.ioctls.fetch_add(1, Ordering::Relaxed);
    }

    /// Fills in `OXT_IOC_STATUS`; per-CPU counters go to `cpus`.
    pub(crate) fn status(&self, st: &mut abi::Status, cpus: &mut [abi::CpuStatus]) -> usize {
        let inner = self.inner.lock();
        st.state = inner.state;
        st.consumer_id = self.id;
        st.nconsumers = NCONSUMERS.load(Ordering::Relaxed);
        st.live_consumers = LIVE.load(Ordering::Relaxed);
        st.opened_ns = self.opened_ns;
        st.ioctls = self.ioctls.load(Ordering::Relaxed);
        st.missed = inner.probes.as_ref().map_or(0, |p| p.missed());
        let mut n = 0;
        if let Some(s) = inner.session() {
            if let Some(code) = s.exit_status() {
                st.exited = 1;
                st.exit_status = code;
            }
            n = s.cpu_status(cpus);
        }
        n
    }

    /// Fills in `OXT_IOC_DYNSTAT`: per-CPU counters go to `cpus`, drops per variable to
    /// `vars`. Returns the CPU entries written.
    pub(crate) fn dynstat(
        &self,
        st: &mut abi::Dynstat,
        cpus: &mut [abi::DynCpu],
        vars: &mut [u64],
    ) -> usize {
        let inner = self.inner.lock();
        (st.audits, st.audit_failures) = crate::glue::dynmem::audit_totals();
        inner.session().map_or(0, |s| s.dyn_stat(st, cpus, vars))
    }

    /// LOAD: verifies the program and registers its probes, disabled.
    pub(crate) fn load(
        &self,
        image: VVec<u8>,
        attach: &[AttachReq<'_>],
    ) -> Result<(u32, u32), LoadFail> {
        let mut inner = self.inner.lock();
        if inner.state != abi::STATE_IDLE {
            return Err(EBUSY.into());
        }
        let l = Session::load(image, attach, inner.pt.clone())?;
        inner.probes = Some(l.probes);
        inner.drain = Some(l.drain);
        inner.state = abi::STATE_LOADED;
        Ok((l.nprobes, l.nskipped))
    }

    /// GO: initialises the dynamic variables and starts their cleaner, runs BEGIN, then
    /// enables the probes.
    pub(crate) fn go(&self) -> Result {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        match inner.state {
            abi::STATE_LOADED => {}
            abi::STATE_IDLE => return Err(ENOENT),
            _ => return Err(EBUSY),
        }
        let Some(p) = inner.probes.as_mut() else {
            return Err(EINVAL);
        };
        p.handler().dyn_go()?;
        p.handler().fire_special(ProbeKind::Begin);
        if let Err(e) = p.enable() {
            p.handler().dyn_stop();
            return Err(e);
        }
        inner.state = abi::STATE_ACTIVE;
        Ok(())
    }

    /// STOP: disables the probes, runs END, then stops the dynamic-variable cleaner and
    /// audits the dynamic memory.
    pub(crate) fn stop(&self) -> Result {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        match inner.state {
            abi::STATE_ACTIVE => {}
            abi::STATE_IDLE => return Err(ENOENT),
            _ => return Err(EINVAL),
        }
        let Some(p) = inner.probes.as_mut() else {
            return Err(EINVAL);
        };
        p.disable();
        p.handler().fire_special(ProbeKind::End);
        p.handler().dyn_stop();
        inner.state = abi::STATE_STOPPED;
        Ok(())
    }

    /// Runs `f` on the session and its drain for an online `cpu`; `offline` when the CPU is
    /// offline (it can't be switched, and its buffers wait until it comes back).
    fn drain_cpu<R>(
        &self,
        cpu: u32,
        offline: R,
        f: impl FnOnce(&Session, &mut Drain) -> Result<R>,
    ) -> Result<R> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let (Some(p), Some(d)) = (inner.probes.as_ref(), inner.drain.as_mut()) else {
            return Err(ENOENT);
        };
        if cpu >= cpu::nr_cpu_ids() {
            return Err(EINVAL);
        }
        if !cpu::online(cpu) {
            return Ok(offline);
        }
        f(p.handler(), d)
    }

    /// SNAPSHOT: switches `cpu`'s principal buffer and hands the records to `out`.
    pub(crate) fn snapshot(
        &self,
        cpu: u32,
        buf_len: usize,
        out: impl FnOnce(&[u8]) -> Result,
    ) -> Result<(usize, u64)> {
        self.drain_cpu(cpu, (0, 0), |s, d| {
            if buf_len < s.bufsize() {
                return Err(ENOSPC);
            }
            s.take_pbuf(d, cpu, |data, drops| {
                out(data).map(|()| (data.len(), drops))
            })?
        })
    }

    /// AGGSNAP: switches `cpu`'s aggregation buffer and streams its data sets to `sink`.
    pub(crate) fn aggsnap(
        &self,
        cpu: u32,
        limit: usize,
        sink: impl FnMut(&[u8]) -> Result,
    ) -> Result<AggTaken> {
        self.drain_cpu(cpu, AggTaken::Data { len: 0, drops: 0 }, |s, d| {
            s.take_agg(d, cpu, limit, sink)
        })
    }

    /// PROBES: the attached probes; `f(i, info)` for each of the first `n`. Returns the total.
    pub(crate) fn probes(
        &self,
        n: usize,
        mut f: impl FnMut(usize, &abi::ProbeInfo) -> Result,
    ) -> Result<usize> {
        let inner = self.inner.lock();
        let Some(s) = inner.session() else {
            return Ok(0);
        };
        let mut info = abi::ProbeInfo::default();
        for i in 0..n.min(s.nslots()) {
            s.probe_info(i, &mut info);
            f(i, &info)?;
        }
        Ok(s.nslots())
    }
}

impl Consumer {
    /// PT_CONFIG: allocates the PT buffers; only before LOAD (the session takes them then)
    /// and not while a previous configuration runs.
    pub(crate) fn pt_config(&self, cfg: &mut abi::PtConfig) -> Result {
        let mut inner = self.inner.lock();
        if inner.state != abi::STATE_IDLE {
            return Err(EBUSY);
        }
        if inner.pt.as_ref().is_some_and(|p| p.is_running()) {
            return Err(EBUSY);
        }
        // The old buffers go first: both may not fit.
        inner.pt = None;
        inner.pt = Some(Pt::new(cfg)?);
        Ok(())
    }

    /// Runs `f` on the PT state under the lock; `ENOENT` if PT is not configured.
    pub(crate) fn with_pt<R>(&self, f: impl FnOnce(&Pt) -> Result<R>) -> Result<R> {
        let inner = self.inner.lock();
        f(inner.pt.as_deref().ok_or(ENOENT)?)
    }
}

impl Inner {
    /// The loaded session, if any.
    fn session(&self) -> Option<&Session> {
        self.probes.as_ref().map(ProbeSet::handler)
    }
}

#[pinned_drop]
impl PinnedDrop for Consumer {
    fn drop(self: Pin<&mut Self>) {
        NCONSUMERS.fetch_sub(1, Ordering::Relaxed);
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}
