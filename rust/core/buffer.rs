// SPDX-License-Identifier: GPL-2.0

//! Principal-buffer records: the framing the probe context writes into a CPU's active buffer
//! and the tool parses from a snapshot.
//!
//! Each record is 8-byte aligned and starts with a [`Header`] of [`HDR_LEN`] bytes, all
//! little-endian: `size` (header and payload, without the padding to 8 that follows), `kind`,
//! `probe` (the enabled probe id), `id` (format, aggregation or fault id), `timestamp` (ns).
//! The payload follows, then zeros up to the next multiple of 8. A writer
//! never splits a record: one that doesn't fit is not written at all (the caller counts a drop).

/// Bytes of a record header.
pub const HDR_LEN: usize = 24;

/// Record kind of a runtime error (the action kinds are small numbers, see `action`).
pub const KIND_ERROR: u32 = 0x100;

/// Record kind of a stack's definition (`stack::write_def`): `id` is `stack::DEF_KERNEL` or
/// `stack::DEF_USER`, the payload the stack's id, process and frames. Written once per
/// stack and CPU before the first record or aggregation key that names the stack; not
/// printed, the consumer keeps it to resolve references.
pub const KIND_STACK: u32 = 0x101;

/// The bits of [`Header::kind`] that hold the record kind; the bits above them hold the
/// clause that wrote the record (ABI 1.7), so the consumer can end dtrace's output line of
/// each clause (each "enabled probe") where the next one starts.
pub const KIND_MASK: u32 = 0xffff;

/// The `kind` word of a record of `kind` written by clause `clause` (clauses from 65535 on
/// share the last number: they only ever merge output lines).
pub const fn with_clause(kind: u32, clause: u32) -> u32 {
    let c = if clause > 0xffff { 0xffff } else { clause };
    (kind & KIND_MASK) | (c << 16)
}

/// A record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Header and payload in bytes, without the padding.
    pub size: u32,
    /// What produced the record ([`KIND_MASK`] bits) and the clause that wrote it (above).
    pub kind: u32,
    /// Index of the probe that fired, in the loaded program.
    pub probe: u32,
    /// Format, aggregation or fault id; 0 when unused.
    pub id: u32,
    /// When the probe fired, in ns.
    pub timestamp: u64,
}

/// Space a record carrying `data_len` bytes of payload takes, padding included, or `None` if
/// it can't be framed.
pub fn record_len(data_len: usize) -> Option<usize> {
    let n = HDR_LEN.checked_add(data_len)?.checked_add(7)? & !7;
    if n > u32::MAX as usize {
        return None;
    }
    Some(n)
}

/// Appends a record at `*off` in `buf`; advances `*off`. Returns false, changing nothing, if
/// the record does not fit.
pub fn write(
    buf: &mut [u8],
    off: &mut usize,
    kind: u32,
    probe: u32,
    id: u32,
    timestamp: u64,
    data: &[u8],
) -> bool {
    let Some(len) = record_len(data.len()) else {
        return false;
    };
    let start = *off;
    let Some(end) = start.checked_add(len) else {
        return false;
    };
    let Some(rec) = buf.get_mut(start..end) else {
        return false;
    };
    // PANIC: `rec` is `record_len(data.len())` bytes, at least `HDR_LEN + data.len()`.
    rec[0..4].copy_from_slice(&((HDR_LEN + data.len()) as u32).to_le_bytes());
    rec[4..8].copy_from_slice(&kind.to_le_bytes());
    rec[8..12].copy_from_slice(&probe.to_le_bytes());
    rec[12..16].copy_from_slice(&id.to_le_bytes());
    rec[16..24].copy_from_slice(&timestamp.to_le_bytes());
    rec[HDR_LEN..HDR_LEN + data.len()].copy_from_slice(data);
    rec[HDR_LEN + data.len()..].fill(0);
    *off = end;
    true
}

/// Option `bufpolicy` `switch` (the default): the consumer switches a CPU's two halves at
/// every snapshot; a record that does not fit the active half is dropped.
pub const POLICY_SWITCH: u64 = 0;
/// Option `bufpolicy` `fill`: one buffer per CPU, read once tracing stopped; the first record
/// that does not fit marks it full, and nothing but END's records (in the room kept for
/// them) is written to it after that. The consumer stops tracing once a CPU's is full.
pub const POLICY_FILL: u64 = 1;
/// Option `bufpolicy` `ring`: one buffer per CPU, read once tracing stopped; a record that
/// does not fit pushes out the oldest ones, so the buffer keeps the newest.
pub const POLICY_RING: u64 = 2;

/// What [`Cursor::write`] did with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The record is in the buffer.
    Ok,
    /// The record was dropped.
    Dropped,
    /// The record was dropped, and that marked a fill buffer full (once per buffer).
    Filled,
}

/// Where the next record of a principal buffer goes, under the buffer's policy, and what it
/// dropped. Pure state over a byte buffer: probe context writes through it on its CPU, the
/// consumer reads it when it takes the buffer.
///
/// # Invariants
///
/// `off <= buf.len()`. Unless `wrapped`, the records are `buf[..off]`. When `wrapped`
/// (ring policy only), they are `buf[oldest..top]` followed by `buf[..off]`, with
/// `off <= oldest <= top <= buf.len()`; each range holds whole records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Where the next record is written.
    pub off: usize,
    /// Ring: where the records of the lap before this one end.
    pub top: usize,
    /// Ring: the oldest record kept of the lap before this one.
    pub oldest: usize,
    /// Ring: the buffer has wrapped, and `buf[oldest..top]` holds older records.
    pub wrapped: bool,
    /// Fill: the buffer is full; only the END probe's records are written now.
    pub full: bool,
    /// Records dropped since the consumer last took the buffer.
    pub drops: u64,
    /// [`POLICY_SWITCH`], [`POLICY_FILL`] or [`POLICY_RING`].
    pub policy: u64,
    /// Fill: bytes at the end of the buffer kept for the END probe's records.
    pub reserve: usize,
}

impl Cursor {
    /// A cursor for an empty buffer under `policy`, keeping `reserve` bytes for END (fill).
    pub const fn new(policy: u64, reserve: usize) -> Cursor {
        Cursor {
            off: 0,
            top: 0,
            oldest: 0,
            wrapped: false,
            full: false,
            drops: 0,
            policy,
            reserve,
        }
    }

    /// Appends a record (`hdr` without its size, then `data`) to `buf` under the policy.
    /// `end`: the END probe's record, which may use a fill buffer's reserve, full or not.
    /// Bounded: a ring write pushes out at most one record per 24 bytes it needs.
    pub fn write(&mut self, buf: &mut [u8], end: bool, hdr: &Header, data: &[u8]) -> Written {
        let ok = match self.policy {
            POLICY_FILL => {
                let limit = if end {
                    buf.len()
                } else {
                    buf.len().saturating_sub(self.reserve)
                };
                if self.full && !end {
                    false
                } else {
                    match record_len(data.len()) {
                        Some(n) if self.off.saturating_add(n) <= limit => {
                            write_hdr(buf, &mut self.off, hdr, data)
                        }
                        _ => {
                            if !end && !self.full {
                                self.full = true;
                                self.drops += 1;
                                return Written::Filled;
                            }
                            false
                        }
                    }
                }
            }
            POLICY_RING => {
                self.ring_make_room(buf, data.len()) && write_hdr(buf, &mut self.off, hdr, data)
            }
            _ => write_hdr(buf, &mut self.off, hdr, data),
        };
        if ok {
            Written::Ok
        } else {
            self.drops += 1;
            Written::Dropped
        }
    }

    /// Ring: makes `buf[off..off + record_len(data_len)]` free, wrapping to the start and
    /// pushing out the oldest records as needed; false if the record can never fit.
    fn ring_make_room(&mut self, buf: &[u8], data_len: usize) -> bool {
        let Some(n) = record_len(data_len) else {
            return false;
        };
        if n > buf.len() {
            return false;
        }
        if self.off + n > buf.len() {
            // A new lap: what is left of the lap before the last is the oldest, gone first.
            self.top = self.off;
            self.oldest = 0;
            self.off = 0;
            self.wrapped = true;
        }
        if !self.wrapped {
            return true;
        }
        // INVARIANT: `oldest` moves by whole records, up to `top` at most.
        while self.oldest < self.off + n && self.oldest < self.top {
            let size = buf
                .get(self.oldest..self.oldest + 4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            match size.checked_add(7).map(|p| p & !7) {
                Some(p) if size >= HDR_LEN => self.oldest += p,
                // Not a record (cannot happen): forget the older lap.
                _ => self.oldest = self.top,
            }
        }
        if self.oldest >= self.top {
            // Nothing of the older lap is left.
            self.wrapped = false;
        }
        true
    }

    /// Puts the buffer's records in order at its start, oldest first, and returns their
    /// length. For the consumer, once it took the buffer (a ring rotates in place).
    pub fn order(&self, buf: &mut [u8]) -> usize {
        let off = self.off.min(buf.len());
        if !self.wrapped {
            return off;
        }
        let top = self.top.min(buf.len());
        let oldest = self.oldest.min(top);
        // `buf[oldest..top]` then `buf[..off]`, `off <= oldest`: one rotation of `..top`.
        buf[..top].rotate_left(oldest);
        top - oldest + off
    }
}

/// [`write`] of `hdr`'s fields.
fn write_hdr(buf: &mut [u8], off: &mut usize, hdr: &Header, data: &[u8]) -> bool {
    write(buf, off, hdr.kind, hdr.probe, hdr.id, hdr.timestamp, data)
}

impl Header {
    /// The record kind, without the clause.
    pub const fn record_kind(&self) -> u32 {
        self.kind & KIND_MASK
    }

    /// The clause that wrote the record (saturated at 65535).
    pub const fn clause(&self) -> u32 {
        self.kind >> 16
    }
}

/// A record read back from a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec<'a> {
    /// Its header.
    pub hdr: Header,
    /// Its payload.
    pub data: &'a [u8],
}

/// Why a buffer could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// Byte offset of the bad record.
    pub offset: usize,
}

/// Iterates over the records of a filled buffer; stops at the first malformed one.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf`, which holds whole records only.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, off: 0 }
    }
}

/// The little-endian `u32` at `at`; `b` must hold `at + 4` bytes (callers read headers of
/// `HDR_LEN` bytes at offsets below 16). Always inlined: probe context reads
/// speculation buffers with [`Reader`], and `scripts/stackcheck.py` must see one frame.
#[inline(always)]
fn le32(b: &[u8], at: usize) -> u32 {
    // PANIC: callers pass `at + 4 <= HDR_LEN <= b.len()` (see above).
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<Rec<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.buf.get(self.off..)?;
        if rest.is_empty() {
            return None;
        }
        let bad = Malformed { offset: self.off };
        if rest.len() < HDR_LEN {
            self.off = self.buf.len();
            return Some(Err(bad));
        }
        let size = le32(rest, 0) as usize;
        let padded = size.checked_add(7).map(|n| n & !7).unwrap_or(usize::MAX);
        if size < HDR_LEN || padded > rest.len() {
            self.off = self.buf.len();
            return Some(Err(bad));
        }
        // PANIC: `rest` holds at least `HDR_LEN` (24) bytes, checked above, and
        // `HDR_LEN <= size <= padded <= rest.len()`.
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&rest[16..24]);
        let hdr = Header {
            size: size as u32,
            kind: le32(rest, 4),
            probe: le32(rest, 8),
            id: le32(rest, 12),
            timestamp: u64::from_le_bytes(ts),
        };
        self.off += padded;
        Some(Ok(Rec {
            hdr,
            data: &rest[HDR_LEN..size],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_exact_fit() {
        let mut buf = [0u8; 80];
        let mut off = 0;
        assert!(write(&mut buf, &mut off, 1, 2, 3, 4, b"hello"));
        assert_eq!(off, 32);
        assert!(write(&mut buf, &mut off, 5, 6, 7, 8, &[9; 24]));
        assert_eq!(off, 80);
        // full: nothing changes
        assert!(!write(&mut buf, &mut off, 1, 1, 1, 1, &[]));
        assert_eq!(off, 80);
        let recs: Vec<_> = Reader::new(&buf[..off]).collect();
        assert_eq!(recs.len(), 2);
        let r = recs[0].unwrap();
        assert_eq!(
            (r.hdr.kind, r.hdr.probe, r.hdr.id, r.hdr.timestamp),
            (1, 2, 3, 4)
        );
        assert_eq!(r.data, b"hello");
        assert_eq!(r.hdr.size, 29);
        assert_eq!(recs[1].unwrap().data, &[9; 24]);
    }

    #[test]
    fn kind_word_carries_the_clause() {
        let mut buf = [0u8; 32];
        let mut off = 0;
        assert!(write(&mut buf, &mut off, with_clause(2, 7), 0, 0, 0, &[]));
        let h = Reader::new(&buf[..off]).next().unwrap().unwrap().hdr;
        assert_eq!((h.record_kind(), h.clause()), (2, 7));
        assert_eq!(with_clause(KIND_ERROR, 3) & KIND_MASK, KIND_ERROR);
        assert_eq!(with_clause(1, 1 << 20) >> 16, 0xffff);
    }

    fn hdr(id: u32) -> Header {
        Header {
            size: 0,
            kind: 1,
            probe: 0,
            id,
            timestamp: id as u64,
        }
    }

    fn ids(buf: &mut [u8], c: &Cursor) -> Vec<u32> {
        let n = c.order(buf);
        Reader::new(&buf[..n]).map(|r| r.unwrap().hdr.id).collect()
    }

    #[test]
    fn ring_keeps_the_newest_records_in_order() {
        // 32-byte records (8 bytes of data) in a 100-byte ring: 3 fit.
        for total in 1..20u32 {
            let mut buf = [0u8; 100];
            let mut c = Cursor::new(POLICY_RING, 0);
            for i in 0..total {
                assert_eq!(c.write(&mut buf, false, &hdr(i), &[7; 8]), Written::Ok);
            }
            let want: Vec<u32> = (total.saturating_sub(3)..total).collect();
            assert_eq!(ids(&mut buf, &c), want, "after {total}");
            assert_eq!(c.drops, 0);
        }
        // Records of mixed sizes: what is kept is the newest, whole.
        let mut buf = [0u8; 128];
        let mut c = Cursor::new(POLICY_RING, 0);
        for i in 0..50u32 {
            let len = (i as usize * 7) % 60;
            c.write(&mut buf, false, &hdr(i), &vec![1; len]);
            let got = ids(&mut buf.clone(), &c);
            assert_eq!(*got.last().unwrap(), i);
            assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "{got:?}");
        }
        // Too large for the ring: dropped.
        assert_eq!(
            c.write(&mut buf, false, &hdr(99), &[0; 200]),
            Written::Dropped
        );
    }

    #[test]
    fn fill_stops_at_the_first_record_that_does_not_fit_and_keeps_room_for_end() {
        let mut buf = [0u8; 128];
        let mut c = Cursor::new(POLICY_FILL, 32);
        for i in 0..3 {
            assert_eq!(c.write(&mut buf, false, &hdr(i), &[0; 8]), Written::Ok);
        }
        assert_eq!(c.write(&mut buf, false, &hdr(3), &[0; 8]), Written::Filled);
        // Full: even a record that would fit is dropped, but END's goes in the reserve.
        assert_eq!(c.write(&mut buf, false, &hdr(4), &[]), Written::Dropped);
        assert_eq!(c.write(&mut buf, true, &hdr(5), &[0; 8]), Written::Ok);
        assert_eq!(c.write(&mut buf, true, &hdr(6), &[0; 8]), Written::Dropped);
        assert_eq!(ids(&mut buf, &c), [0, 1, 2, 5]);
        assert_eq!((c.full, c.drops), (true, 3));
    }

    #[test]
    fn switch_drops_what_does_not_fit() {
        let mut buf = [0u8; 64];
        let mut c = Cursor::new(POLICY_SWITCH, 0);
        assert_eq!(c.write(&mut buf, false, &hdr(0), &[0; 8]), Written::Ok);
        assert_eq!(c.write(&mut buf, false, &hdr(1), &[0; 8]), Written::Ok);
        assert_eq!(c.write(&mut buf, false, &hdr(2), &[0; 8]), Written::Dropped);
        assert_eq!(c.write(&mut buf, true, &hdr(3), &[]), Written::Dropped);
        assert_eq!((ids(&mut buf, &c), c.drops, c.full), (vec![0, 1], 2, false));
    }

    #[test]
    fn malformed_sizes_stop_the_reader() {
        for size in [0u32, 8, 23, 49, 1 << 20] {
            let mut buf = [0u8; 48];
            buf[0..4].copy_from_slice(&size.to_le_bytes());
            let mut r = Reader::new(&buf);
            assert_eq!(r.next(), Some(Err(Malformed { offset: 0 })));
            assert_eq!(r.next(), None);
        }
    }
}
