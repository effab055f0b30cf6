//! oxtrace's own packet walk over a PT stream (`oxtrace_core::topa`'s decoder), and the
//! packet counts every decoder of `pt dump` reports.

use oxtrace_core::topa::{DecodeError, Decoder, Packet};

/// Packet counts of a decoded stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// PSB packets.
    pub psb: u64,
    /// PTW packets.
    pub ptw: u64,
    /// OVF packets.
    pub ovf: u64,
    /// TSC packets.
    pub tsc: u64,
    /// PAD bytes.
    pub pad: u64,
    /// Decode errors (each followed by a resync).
    pub errors: u64,
    /// Offset of the first PSB, if any.
    pub first_psb: Option<usize>,
}

impl Counts {
    /// Counts packet `p`.
    pub fn count(&mut self, p: &Packet) {
        match p {
            Packet::Psb => self.psb += 1,
            Packet::Ptw { .. } => self.ptw += 1,
            Packet::Ovf => self.ovf += 1,
            Packet::Tsc { .. } => self.tsc += 1,
            Packet::Pad => self.pad += 1,
            Packet::PsbEnd => {}
        }
    }
}

/// Decodes `data` from its first PSB; calls `each(Ok((offset, packet)))` for each packet and
/// `each(Err(error))` for each error (then resyncs at the next PSB).
pub fn walk(data: &[u8], mut each: impl FnMut(Result<(usize, &Packet), &DecodeError>)) -> Counts {
    let mut c = Counts::default();
    let mut d = Decoder::new(data);
    if let Ok(at) = d.sync_forward() {
        c.first_psb = Some(at);
    } else {
        return c;
    }
    loop {
        match d.next_packet() {
            Ok(None) => break,
            Ok(Some((at, p))) => {
                c.count(&p);
                each(Ok((at, &p)));
            }
            // A stopped buffer ends mid-packet: that is its end, not an error.
            Err(DecodeError::Truncated { .. }) => break,
            Err(e) => {
                c.errors += 1;
                each(Err(&e));
                if d.sync_forward().is_err() {
                    break;
                }
            }
        }
    }
    c
}
