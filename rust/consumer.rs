// SPDX-License-Identifier: GPL-2.0

//! A consumer: the state behind one open of `/dev/oxtrace`.

use crate::abi;
use crate::cpu;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::Mutex;

/// Consumers open on the device now.
static NCONSUMERS: AtomicU64 = AtomicU64::new(0);
/// Consumer objects allocated and not yet dropped: a leak shows here.
static LIVE: AtomicU64 = AtomicU64::new(0);
/// Source of consumer ids; 0 is never handed out.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a consumer's ioctls change, serialised by [`Consumer::inner`].
struct Inner {
    state: u32,
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
            inner <- new_mutex!(Inner { state: abi::STATE_IDLE }, "oxtrace::Consumer::inner"),
        })
    }

    /// Counts one ioctl served to this consumer.
    pub(crate) fn count_ioctl(&self) {
        self.ioctls.fetch_add(1, Ordering::Relaxed);
    }

    /// Fills in `OXT_IOC_STATUS`.
    pub(crate) fn status(&self, st: &mut abi::Status) {
        st.state = self.inner.lock().state;
        st.consumer_id = self.id;
        st.nconsumers = NCONSUMERS.load(Ordering::Relaxed);
        st.live_consumers = LIVE.load(Ordering::Relaxed);
        st.opened_ns = self.opened_ns;
        st.ioctls = self.ioctls.load(Ordering::Relaxed);
    }
}

#[pinned_drop]
impl PinnedDrop for Consumer {
    fn drop(self: Pin<&mut Self>) {
        NCONSUMERS.fetch_sub(1, Ordering::Relaxed);
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}
