// SPDX-License-Identifier: GPL-2.0

//! A consumer: the state behind one open of `/dev/oxtrace`.
//!
//! Lifecycle: IDLE -LOAD-> LOADED -GO-> ACTIVE -STOP-> STOPPED, a [`State`] that owns what
//! each state has. Everything a consumer does is serialised by [`Consumer::inner`]; probe
//! context never takes it.

use crate::abi;
use crate::glue::pt::Pt;
use crate::glue::session::{AggTaken, AttachReq, Drain, LoadFail, Session, UserTables};
use crate::program::ProbeKind;
use crate::sys::cpu;
use crate::sys::kprobe::ProbeSet;
use crate::sys::provider::Providers;
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

/// A loaded program, as a consumer holds it.
struct Program {
    /// The syscall hooks, profile timers and tracepoint counters that call the session:
    /// declared (so dropped) before `probes`, which owns the session.
    providers: Providers<Session>,
    /// The session and the probes that call it.
    probes: ProbeSet<Session>,
    /// The consumer's side of the session's switched buffers.
    drain: Drain,
}

impl Program {
    fn session(&self) -> &Session {
        self.probes.handler()
    }
}

/// Where a consumer is in its lifecycle, with what it owns there.
enum State {
    /// Nothing loaded.
    Idle,
    /// LOAD ran: the probes are registered, disabled.
    Loaded { prog: Program },
    /// GO ran: BEGIN fired, the probes are enabled.
    Active { prog: Program },
    /// STOP ran: the probes are disabled and END fired; the buffers can still be read.
    Stopped { prog: Program },
}

impl State {
    /// The number `OXT_IOC_STATUS` reports.
    fn abi(&self) -> u32 {
        match self {
            State::Idle => abi::STATE_IDLE,
            State::Loaded { .. } => abi::STATE_LOADED,
            State::Active { .. } => abi::STATE_ACTIVE,
            State::Stopped { .. } => abi::STATE_STOPPED,
        }
    }

    /// The loaded program, in any state but `Idle`.
    fn prog(&self) -> Option<&Program> {
        match self {
            State::Idle => None,
            State::Loaded { prog } | State::Active { prog } | State::Stopped { prog } => Some(prog),
        }
    }

    /// As [`Self::prog`], mutably.
    fn prog_mut(&mut self) -> Option<&mut Program> {
        match self {
            State::Idle => None,
            State::Loaded { prog } | State::Active { prog } | State::Stopped { prog } => Some(prog),
        }
    }

    /// Moves the program on to the next state with `next` (`Loaded` to `Active`, ...).
    fn advance(&mut self, next: fn(Program) -> State) {
        *self = match core::mem::replace(self, State::Idle) {
            State::Idle => State::Idle,
            State::Loaded { prog } | State::Active { prog } | State::Stopped { prog } => next(prog),
        };
    }
}

/// What a consumer's ioctls change, serialised by [`Consumer::inner`].
struct Inner {
    state: State,
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
    /// Counts a consumer about to be made, or `EBUSY` if `max_consumers` are open. The
    /// consumer's drop gives the place back; [`Self::unreserve`] does if it is never made.
    pub(crate) fn reserve() -> Result {
        let max = u64::from(cpu::max_consumers());
        let mut cur = NCONSUMERS.load(Ordering::Relaxed);
        loop {
            if cur >= max {
                return Err(EBUSY);
            }
            match NCONSUMERS.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// Gives back a [`Self::reserve`] whose consumer was not made.
    pub(crate) fn unreserve() {
        NCONSUMERS.fetch_sub(1, Ordering::Relaxed);
    }

    /// A new, idle consumer, after a [`Self::reserve`].
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        LIVE.fetch_add(1, Ordering::Relaxed);
        try_pin_init!(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            opened_ns: cpu::ktime_ns(),
            ioctls: AtomicU64::new(0),
            inner <- new_mutex!(
                Inner {
                    state: State::Idle,
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
        st.state = inner.state.abi();
        st.consumer_id = self.id;
        st.nconsumers = NCONSUMERS.load(Ordering::Relaxed);
        st.live_consumers = LIVE.load(Ordering::Relaxed);
        st.opened_ns = self.opened_ns;
        st.ioctls = self.ioctls.load(Ordering::Relaxed);
        let prog = inner.state.prog();
        st.missed = prog.map_or(0, |p| p.probes.missed());
        st.live_uprobes = crate::sys::uprobe::live();
        let mut n = 0;
        if let Some(s) = prog.map(Program::session) {
            if let Some(code) = s.exit_status() {
                st.exited = 1;
                st.exit_status = code;
            }
            n = s.cpu_status(cpus);
            st.filled = s.filled();
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
        inner
            .state
            .prog()
            .map_or(0, |p| p.session().dyn_stat(st, cpus, vars))
    }

    /// LOAD: verifies the program and registers its probes, disabled.
    pub(crate) fn load(
        &self,
        image: VVec<u8>,
        attach: &[AttachReq<'_>],
        user: &UserTables<'_>,
    ) -> Result<(u32, u32, u32), LoadFail> {
        let mut inner = self.inner.lock();
        if !matches!(inner.state, State::Idle) {
            return Err(EBUSY.into());
        }
        let l = Session::load(image, attach, user, inner.pt.clone())?;
        inner.state = State::Loaded {
            prog: Program {
                providers: l.providers,
                probes: l.probes,
                drain: l.drain,
            },
        };
        Ok((l.nprobes, l.nskipped, l.nuprobes))
    }

    /// GO: initialises the dynamic variables and starts their cleaner, runs BEGIN, then
    /// enables the probes.
    pub(crate) fn go(&self) -> Result {
        let mut inner = self.inner.lock();
        let prog = match &mut inner.state {
            State::Loaded { prog } => prog,
            State::Idle => return Err(ENOENT),
            State::Active { .. } | State::Stopped { .. } => return Err(EBUSY),
        };
        let p = &mut prog.probes;
        p.handler().dyn_go()?;
        p.handler().fire_special(ProbeKind::Begin);
        if let Err(e) = p.enable() {
            p.handler().dyn_stop();
            return Err(e);
        }
        if let Err(e) = prog.providers.enable() {
            prog.probes.disable();
            prog.probes.handler().dyn_stop();
            return Err(e);
        }
        inner.state.advance(|prog| State::Active { prog });
        Ok(())
    }

    /// STOP: disables the probes, runs END, then stops the dynamic-variable cleaner and
    /// audits the dynamic memory.
    pub(crate) fn stop(&self) -> Result {
        let mut inner = self.inner.lock();
        let prog = match &mut inner.state {
            State::Active { prog } => prog,
            State::Idle => return Err(ENOENT),
            State::Loaded { .. } | State::Stopped { .. } => return Err(EINVAL),
        };
        prog.providers.disable();
        let p = &mut prog.probes;
        p.disable();
        p.handler().fire_special(ProbeKind::End);
        p.handler().dyn_stop();
        inner.state.advance(|prog| State::Stopped { prog });
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
        let mut inner = self.inner.lock();
        let Some(p) = inner.state.prog_mut() else {
            return Err(ENOENT);
        };
        if cpu >= cpu::nr_cpu_ids() {
            return Err(EINVAL);
        }
        if !cpu::online(cpu) {
            // Nothing runs there: its share of a commit or discard is settled from here.
            if let Some(specs) = p.probes.handler().specs.as_ref() {
                specs.settle_offline(cpu);
            }
            return Ok(offline);
        }
        f(p.probes.handler(), &mut p.drain)
    }

    /// SNAPSHOT: switches `cpu`'s principal buffer and hands the records to `out`.
    pub(crate) fn snapshot(
        &self,
        cpu: u32,
        buf_len: usize,
        out: impl FnOnce(&[u8]) -> Result,
    ) -> Result<(usize, u64)> {
        let stopped = matches!(self.inner.lock().state, State::Stopped { .. });
        self.drain_cpu(cpu, (0, 0), |s, d| {
            if buf_len < s.bufsize() {
                return Err(ENOSPC);
            }
            s.take_pbuf(d, cpu, stopped, |data, drops| {
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
        let Some(s) = inner.state.prog().map(Program::session) else {
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
        if !matches!(inner.state, State::Idle) {
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

#[pinned_drop]
impl PinnedDrop for Consumer {
    fn drop(self: Pin<&mut Self>) {
        NCONSUMERS.fetch_sub(1, Ordering::Relaxed);
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}
