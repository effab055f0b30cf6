// SPDX-License-Identifier: GPL-2.0

//! The snapshot stream user space reads: header, records, parser.

use super::*;

/// Magic number that opens a snapshot stream ("OXAG" little-endian).
pub const SNAPSHOT_MAGIC: u32 = u32::from_le_bytes(*b"OXAG");

/// Snapshot format version.
pub const SNAPSHOT_VERSION: u16 = 1;

/// Bytes of a snapshot header.
pub const SNAPSHOT_HEADER_BYTES: usize = 32;

/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 16;

/// Resume point of [`AggBuffer::serialize`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotCursor {
    pub(super) off: usize,
    pub(super) done: bool,
}

impl SnapshotCursor {
    /// A cursor at the start of the stream.
    pub const fn new() -> Self {
        Self {
            off: 0,
            done: false,
        }
    }

    /// Whether the whole buffer has been written.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// The header of one CPU's snapshot stream (all fields little-endian):
///
/// ```text
/// 0  u32 magic "OXAG"     4  u16 version (1)     6  u16 header bytes (32)
/// 8  u32 cpu             12  u32 records        16  u64 drops     24  u64 payload bytes
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The CPU whose buffer this is.
    pub cpu: u32,
    /// Number of records that follow.
    pub records: u32,
    /// Aggregation drops of that buffer since its last reset.
    pub drops: u64,
    /// Bytes of records that follow the header.
    pub payload_len: u64,
}

impl SnapshotHeader {
    /// Writes the header into `out[..SNAPSHOT_HEADER_BYTES]`.
    pub fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&SNAPSHOT_MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&(SNAPSHOT_HEADER_BYTES as u16).to_le_bytes());
        out[8..12].copy_from_slice(&self.cpu.to_le_bytes());
        out[12..16].copy_from_slice(&self.records.to_le_bytes());
        out[16..24].copy_from_slice(&self.drops.to_le_bytes());
        out[24..32].copy_from_slice(&self.payload_len.to_le_bytes());
    }
}

fn le32(b: &[u8], at: usize) -> Result<u32, ParseError> {
    let s = b.get(at..at + 4).ok_or(ParseError::Truncated)?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le64(b: &[u8], at: usize) -> Result<u64, ParseError> {
    let s = b.get(at..at + 8).ok_or(ParseError::Truncated)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_le_bytes(a))
}

/// Parses the snapshot stream at the start of `bytes`: its header, an iterator over its
/// records, and the bytes after it (where another CPU's stream may follow). Never panics.
pub fn parse_snapshot(bytes: &[u8]) -> Result<(SnapshotHeader, Records<'_>, &[u8]), ParseError> {
    if le32(bytes, 0)? != SNAPSHOT_MAGIC {
        return Err(ParseError::BadMagic);
    }
    let ver = bytes.get(4..6).ok_or(ParseError::Truncated)?;
    let ver = u16::from_le_bytes([ver[0], ver[1]]);
    if ver != SNAPSHOT_VERSION {
        return Err(ParseError::BadVersion(ver));
    }
    let hl = bytes.get(6..8).ok_or(ParseError::Truncated)?;
    if u16::from_le_bytes([hl[0], hl[1]]) as usize != SNAPSHOT_HEADER_BYTES {
        return Err(ParseError::BadHeader);
    }
    let h = SnapshotHeader {
        cpu: le32(bytes, 8)?,
        records: le32(bytes, 12)?,
        drops: le64(bytes, 16)?,
        payload_len: le64(bytes, 24)?,
    };
    let rest = &bytes[SNAPSHOT_HEADER_BYTES..];
    if h.payload_len & 7 != 0 {
        return Err(ParseError::BadHeader);
    }
    if h.payload_len > rest.len() as u64 {
        return Err(ParseError::Truncated);
    }
    let (payload, after) = rest.split_at(h.payload_len as usize);
    Ok((
        h,
        Records {
            rest: payload,
            remaining: h.records,
        },
        after,
    ))
}

/// Iterator over the records of a snapshot stream. After an error it yields nothing more.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    rest: &'a [u8],
    remaining: u32,
}

/// One record of a snapshot stream: a data set as user space sees it.
///
/// ```text
/// 0  u32 record bytes (16 + 8 * (key words + value words))   4  u32 aggregation id
/// 8  u32 key words    12  u32 value words    16  key words, then value words (u64 LE)
/// ```
#[derive(Clone, Debug)]
pub struct Record<'a> {
    /// The aggregation identifier component.
    pub agg_id: u32,
    /// The key component.
    pub key: KeyRef<'a>,
    values: &'a [u8],
}

impl<'a> Record<'a> {
    /// Number of value words.
    pub fn value_words(&self) -> usize {
        self.values.len() / 8
    }

    /// Value word `i` (0 past the end).
    pub fn value(&self, i: usize) -> u64 {
        le64(self.values, i * 8).unwrap_or(0)
    }

    /// The value words, in order.
    pub fn values(&self) -> impl Iterator<Item = u64> + 'a {
        self.values.chunks_exact(8).map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            u64::from_le_bytes(a)
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            if self.rest.is_empty() {
                return None;
            }
            self.rest = &[];
            return Some(Err(ParseError::RecordCount));
        }
        let r = self.parse_one();
        match r {
            Ok(_) => self.remaining -= 1,
            Err(_) => {
                self.remaining = 0;
                self.rest = &[];
            }
        }
        Some(r)
    }
}

impl<'a> Records<'a> {
    /// Takes the run of records that follow, up to the count the header gives, whose
    /// 16-byte header is `header` and whose key's descriptor word is `desc`: as one slice
    /// of records of `header`'s length each. Only for an all-integer `desc` (`n` bytes of
    /// `DESC_INT`), whose keys need no other check than their length, which the header
    /// fixes; empty otherwise. Lets a consumer merge a stream of one shape in bulk after
    /// parsing its first record.
    pub fn take_run(&mut self, header: &[u8; RECORD_HEADER_BYTES], desc: u64) -> &'a [u8] {
        let w = |i: usize| {
            u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]) as usize
        };
        let (len, kw, nw) = (w(0), w(8), w(12));
        // `n` integer elements: `n` descriptor bytes of DESC_INT, then `n` words.
        let n = kw.wrapping_sub(1);
        if !(1..=KEY_MAX_ELEMS).contains(&n)
            || kw > KEY_MAX_WORDS
            || nw == 0
            || nw > MAX_VALUE_WORDS
            || len != RECORD_HEADER_BYTES + 8 * (kw + nw)
            || desc != (u64::MAX >> (64 - 8 * n)) / 0xff * u64::from(DESC_INT)
        {
            return &[];
        }
        let mut n = 0usize;
        let b = self.rest;
        while n < self.remaining as usize {
            let Some(rec) = b.get(n * len..(n + 1) * len) else {
                break;
            };
            let same_header = rec[..RECORD_HEADER_BYTES] == header[..];
            let same_desc = rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + 8] == desc.to_le_bytes();
            if !(same_header && same_desc) {
                break;
            }
            n += 1;
        }
        // `n <= remaining`, a u32.
        self.remaining -= n as u32;
        let (run, rest) = b.split_at(n * len);
        self.rest = rest;
        run
    }

    fn parse_one(&mut self) -> Result<Record<'a>, ParseError> {
        let b = self.rest;
        if b.is_empty() {
            return Err(ParseError::RecordCount);
        }
        let h = b
            .first_chunk::<RECORD_HEADER_BYTES>()
            .ok_or(ParseError::Truncated)?;
        let w = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let len = w(0) as usize;
        let agg_id = w(4);
        let kw = w(8) as usize;
        let nw = w(12) as usize;
        if len & 7 != 0
            || kw == 0
            || kw > KEY_MAX_WORDS
            || nw == 0
            || nw > MAX_VALUE_WORDS
            || len != RECORD_HEADER_BYTES + 8 * (kw + nw)
        {
            return Err(ParseError::BadRecordLength);
        }
        let rec = b.get(..len).ok_or(ParseError::Truncated)?;
        let key = KeyRef::new(&rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + 8 * kw])?;
        self.rest = &b[len..];
        Ok(Record {
            agg_id,
            key,
            values: &rec[RECORD_HEADER_BYTES + 8 * kw..],
        })
    }
}
