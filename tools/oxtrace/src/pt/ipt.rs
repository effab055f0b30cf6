//! Intel's libipt as `oxtrace pt dump`'s packet decoder where the library is installed.
//!
//! libipt is the reference decoder of Intel PT, so a stream it reads the same way as
//! oxtrace's own decoder ([`crate::pt::walk`]) is a stream real tools read too. The tool is
//! a static binary that must also run where libipt is absent (the test guest), so the
//! library is loaded at run time with `dlopen` and its packet decoder reached through a few
//! symbols; nothing of it is needed to build. The structure layouts used here are those of
//! `<intel-pt.h>` 2.x, and a host test checks them against the header.

use super::decode::Counts;
use oxtrace_core::topa::{Packet, PtwSize};
use std::ffi::{c_char, c_int, c_void, CStr};

/// `sizeof(struct pt_config)` in libipt 2.x; the library reads the size field first.
pub const PT_CONFIG_SIZE: usize = 280;
/// `sizeof(struct pt_packet)` in libipt 2.x.
pub const PT_PACKET_SIZE: usize = 24;

/// `enum pt_packet_type` values of the packets oxtrace's streams contain: pad, psb,
/// psbend, tsc, ovf, ptw.
pub const PPT: [u32; 6] = [PPT_PAD, PPT_PSB, PPT_PSBEND, PPT_TSC, PPT_OVF, PPT_PTW];
const PPT_PAD: u32 = 2;
const PPT_PSB: u32 = 3;
const PPT_PSBEND: u32 = 4;
const PPT_TSC: u32 = 15;
const PPT_OVF: u32 = 20;
const PPT_PTW: u32 = 26;
/// `pte_eos`: the end of the buffer.
pub const PTE_EOS: c_int = 7;
/// Where `struct pt_packet` keeps the PTW's `plc` byte, and the byte holding its `ip` bit
/// (bit 0): the decoder reads them from the packet's words 2.
pub const PTW_PLC_IP_BYTES: (usize, usize) = (16, 17);

type AllocFn = unsafe extern "C" fn(*const c_void) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type SyncFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type OffsetFn = unsafe extern "C" fn(*const c_void, *mut u64) -> c_int;
type NextFn = unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> c_int;

/// The loaded library's packet decoder functions.
///
/// # Invariants
///
/// Every function pointer was resolved from a libipt 2.x that stays loaded (it is never
/// closed) and has the signature of its `<intel-pt.h>` declaration.
pub struct Libipt {
    alloc: AllocFn,
    free: FreeFn,
    sync_forward: SyncFn,
    get_offset: OffsetFn,
    next: NextFn,
}

fn sym(handle: *mut c_void, name: &CStr) -> Option<*mut c_void> {
    // SAFETY: `handle` is a live dlopen handle and `name` is NUL-terminated.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

impl Libipt {
    /// Loads libipt 2.x (`libipt.so.2`), or `None` when it is not installed.
    pub fn open() -> Option<Libipt> {
        let name: &CStr = c"libipt.so.2";
        // SAFETY: dlopen takes a NUL-terminated path; the handle is kept forever (the
        // library is never unloaded, so the function pointers below stay valid).
        let h = unsafe { libc::dlopen(name.as_ptr() as *const c_char, libc::RTLD_NOW) };
        if h.is_null() {
            return None;
        }
        let alloc = sym(h, c"pt_pkt_alloc_decoder")?;
        let free = sym(h, c"pt_pkt_free_decoder")?;
        let sync_forward = sym(h, c"pt_pkt_sync_forward")?;
        let get_offset = sym(h, c"pt_pkt_get_offset")?;
        let next = sym(h, c"pt_pkt_next")?;
        // SAFETY: the symbols are libipt's functions with the signatures of the aliases
        // (`<intel-pt.h>`), and the library stays loaded.
        // INVARIANT: resolved from the loaded libipt.so.2, never closed.
        unsafe {
            Some(Libipt {
                alloc: std::mem::transmute::<*mut c_void, AllocFn>(alloc),
                free: std::mem::transmute::<*mut c_void, FreeFn>(free),
                sync_forward: std::mem::transmute::<*mut c_void, SyncFn>(sync_forward),
                get_offset: std::mem::transmute::<*mut c_void, OffsetFn>(get_offset),
                next: std::mem::transmute::<*mut c_void, NextFn>(next),
            })
        }
    }

    /// Decodes `data` like [`crate::pt::walk`]: from the first PSB, each packet to `each`,
    /// each decode error as `Err(offset)` followed by a resync at the next PSB; a packet cut
    /// by the end of the buffer ends the walk.
    pub fn walk(
        &self,
        data: &[u8],
        mut each: impl FnMut(Result<(usize, Packet), usize>),
    ) -> Counts {
        let mut c = Counts::default();
        if data.is_empty() {
            return c;
        }
        // `struct pt_config`: size, begin, end; zero for everything else (no errata, no
        // callbacks), as pt_config_init() leaves it.
        let mut config = [0u64; PT_CONFIG_SIZE / 8];
        config[0] = PT_CONFIG_SIZE as u64;
        config[1] = data.as_ptr() as u64;
        config[2] = data.as_ptr() as u64 + data.len() as u64;
        // SAFETY: `config` is a valid `struct pt_config` of the size it says, describing
        // `data`, which outlives the decoder (freed below before returning).
        let dec = unsafe { (self.alloc)(config.as_ptr() as *const c_void) };
        if dec.is_null() {
            return c;
        }
        let offset = |dec: *mut c_void| -> usize {
            let mut off = 0u64;
            // SAFETY: `dec` is the live decoder; `off` is a valid out-pointer.
            unsafe { (self.get_offset)(dec, &mut off) };
            off as usize
        };
        // SAFETY: `dec` is the live decoder.
        if unsafe { (self.sync_forward)(dec) } >= 0 {
            c.first_psb = Some(offset(dec));
            loop {
                let at = offset(dec);
                let mut pkt = [0u64; PT_PACKET_SIZE / 8];
                // SAFETY: `pkt` is a writable `struct pt_packet` of the size passed.
                let r =
                    unsafe { (self.next)(dec, pkt.as_mut_ptr() as *mut c_void, PT_PACKET_SIZE) };
                if r >= 0 {
                    let ty = pkt[0] as u32;
                    let p = match ty {
                        PPT_PAD => Some(Packet::Pad),
                        PPT_PSB => Some(Packet::Psb),
                        PPT_PSBEND => Some(Packet::PsbEnd),
                        PPT_OVF => Some(Packet::Ovf),
                        PPT_TSC => Some(Packet::Tsc { tsc: pkt[1] }),
                        PPT_PTW => {
                            let plc = pkt[2] as u8;
                            let ip = (pkt[2] >> 8) & 1 != 0;
                            Some(Packet::Ptw {
                                payload: pkt[1],
                                size: if plc == 1 {
                                    PtwSize::Eight
                                } else {
                                    PtwSize::Four
                                },
                                ip,
                            })
                        }
                        _ => None,
                    };
                    match p {
                        Some(p) => {
                            c.count(&p);
                            each(Ok((at, p)));
                        }
                        // A packet oxtrace never writes: an error of the stream.
                        None => {
                            c.errors += 1;
                            each(Err(at));
                            // SAFETY: `dec` is the live decoder.
                            if unsafe { (self.sync_forward)(dec) } < 0 {
                                break;
                            }
                        }
                    }
                    continue;
                }
                // The end of the buffer, or a packet cut by it (a stopped buffer's end).
                if -r == PTE_EOS {
                    break;
                }
                c.errors += 1;
                each(Err(at));
                // SAFETY: `dec` is the live decoder.
                if unsafe { (self.sync_forward)(dec) } < 0 {
                    break;
                }
            }
        }
        // SAFETY: `dec` came from `alloc` and is not used after this.
        unsafe { (self.free)(dec) };
        c
    }
}
