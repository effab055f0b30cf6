// SPDX-License-Identifier: GPL-2.0

//! The PT packets the software backend emits, their SDM byte encodings, and a decoder that
//! syncs on PSB.

/// Opcode of PAD.
pub const OPC_PAD: u8 = 0x00;
/// First byte of the two-byte (extended) opcodes.
pub const OPC_EXT: u8 = 0x02;
/// Opcode of TSC.
pub const OPC_TSC: u8 = 0x19;
/// Extended opcode of PSB (the pair `02 82` repeats 8 times).
pub const EXT_PSB: u8 = 0x82;
/// Extended opcode of PSBEND.
pub const EXT_PSBEND: u8 = 0x23;
/// Extended opcode of OVF.
pub const EXT_OVF: u8 = 0xf3;
/// Extended opcode of PTW in bits 4:0 of the second byte.
pub const EXT_PTW: u8 = 0x12;
/// PTW second byte: mask of the opcode bits.
pub const PTW_OPC_MASK: u8 = 0x1f;
/// PTW second byte: shift of PayloadBytes (0: 4 bytes, 1: 8 bytes).
pub const PTW_PLC_SHIFT: u32 = 5;
/// PTW second byte: IP bit (a FUP with the PTWRITE's address follows).
pub const PTW_IP: u8 = 0x80;
/// Bytes in a PSB packet.
pub const PSB_LEN: usize = 16;
/// TSC packets carry the low 7 bytes of the TSC.
pub const TSC_MASK: u64 = (1 << 56) - 1;

/// PTW payload size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtwSize {
    /// 4-byte payload (PayloadBytes 0).
    Four,
    /// 8-byte payload (PayloadBytes 1).
    Eight,
}

impl PtwSize {
    /// Payload bytes.
    pub const fn bytes(self) -> usize {
        match self {
            PtwSize::Four => 4,
            PtwSize::Eight => 8,
        }
    }
}

/// An Intel PT packet of the subset the software backend emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// PAD: one zero byte, no meaning.
    Pad,
    /// PSB: the synchronisation boundary a decoder finds with a pattern search.
    Psb,
    /// PSBEND: ends the status packets after a PSB.
    PsbEnd,
    /// TSC: the low 7 bytes of the time-stamp counter.
    Tsc {
        /// TSC value, at most [`TSC_MASK`].
        tsc: u64,
    },
    /// PTW: a PTWRITE payload.
    Ptw {
        /// Payload, zero-extended.
        payload: u64,
        /// Payload size.
        size: PtwSize,
        /// IP bit: a FUP packet with the instruction's address follows.
        ip: bool,
    },
    /// OVF: internal buffer overflow, packets were lost.
    Ovf,
}

/// Why a packet could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
    },
    /// A TSC value above [`TSC_MASK`].
    TscTooWide,
    /// A 4-byte PTW payload above `u32::MAX`.
    PtwTooWide,
}

/// Why the decoder stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No PSB at or after the search start.
    NoSync,
    /// The buffer ends inside the packet starting at `offset`.
    Truncated {
        /// Offset of the packet.
        offset: usize,
    },
    /// An opcode outside the supported subset.
    UnknownOpcode {
        /// Offset of the packet.
        offset: usize,
        /// First byte.
        opcode: u8,
    },
    /// An extended opcode outside the supported subset.
    UnknownExtOpcode {
        /// Offset of the packet.
        offset: usize,
        /// Second byte.
        ext: u8,
    },
    /// A PTW with a reserved PayloadBytes value (2 or 3).
    BadPtwSize {
        /// Offset of the packet.
        offset: usize,
    },
    /// A PSB whose pattern breaks before 16 bytes.
    BadPsb {
        /// Offset of the packet.
        offset: usize,
    },
}

impl Packet {
    /// Encoded length in bytes.
    pub const fn len(&self) -> usize {
        match self {
            Packet::Pad => 1,
            Packet::Psb => PSB_LEN,
            Packet::PsbEnd | Packet::Ovf => 2,
            Packet::Tsc { .. } => 8,
            Packet::Ptw { size, .. } => 2 + size.bytes(),
        }
    }

    /// Always false: no packet is empty (present for the `len` convention).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the packet at the start of `out`; returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let len = self.len();
        if out.len() < len {
            return Err(EncodeError::BufferTooSmall { needed: len });
        }
        let out = &mut out[..len];
        match *self {
            Packet::Pad => out[0] = OPC_PAD,
            Packet::Psb => {
                for pair in out.chunks_exact_mut(2) {
                    pair[0] = OPC_EXT;
                    pair[1] = EXT_PSB;
                }
            }
            Packet::PsbEnd => out.copy_from_slice(&[OPC_EXT, EXT_PSBEND]),
            Packet::Ovf => out.copy_from_slice(&[OPC_EXT, EXT_OVF]),
            Packet::Tsc { tsc } => {
                if tsc > TSC_MASK {
                    return Err(EncodeError::TscTooWide);
                }
                out[0] = OPC_TSC;
                out[1..].copy_from_slice(&tsc.to_le_bytes()[..7]);
            }
            Packet::Ptw { payload, size, ip } => {
                let plc: u8 = match size {
                    PtwSize::Four => {
                        if payload > u64::from(u32::MAX) {
                            return Err(EncodeError::PtwTooWide);
                        }
                        0
                    }
                    PtwSize::Eight => 1,
                };
                out[0] = OPC_EXT;
                out[1] = EXT_PTW | (plc << PTW_PLC_SHIFT) | if ip { PTW_IP } else { 0 };
                out[2..].copy_from_slice(&payload.to_le_bytes()[..size.bytes()]);
            }
        }
        Ok(len)
    }

    /// Decodes the packet at the start of `bytes` (reported at `offset`); returns it and its
    /// length.
    pub fn decode(bytes: &[u8], offset: usize) -> Result<(Packet, usize), DecodeError> {
        let truncated = DecodeError::Truncated { offset };
        let b0 = *bytes.first().ok_or(truncated)?;
        match b0 {
            OPC_PAD => Ok((Packet::Pad, 1)),
            OPC_TSC => {
                let p = bytes.get(1..8).ok_or(truncated)?;
                let mut le = [0u8; 8];
                le[..7].copy_from_slice(p);
                Ok((
                    Packet::Tsc {
                        tsc: u64::from_le_bytes(le),
                    },
                    8,
                ))
            }
            OPC_EXT => {
                let b1 = *bytes.get(1).ok_or(truncated)?;
                match b1 {
                    EXT_PSB => {
                        // Length first, then pattern, in libipt's order.
                        let p = bytes.get(..PSB_LEN).ok_or(truncated)?;
                        for pair in p.chunks_exact(2) {
                            if pair[0] != OPC_EXT || pair[1] != EXT_PSB {
                                return Err(DecodeError::BadPsb { offset });
                            }
                        }
                        Ok((Packet::Psb, PSB_LEN))
                    }
                    EXT_PSBEND => Ok((Packet::PsbEnd, 2)),
                    EXT_OVF => Ok((Packet::Ovf, 2)),
                    _ if b1 & PTW_OPC_MASK == EXT_PTW => {
                        let size = match (b1 >> PTW_PLC_SHIFT) & 0x3 {
                            0 => PtwSize::Four,
                            1 => PtwSize::Eight,
                            _ => return Err(DecodeError::BadPtwSize { offset }),
                        };
                        let n = size.bytes();
                        let p = bytes.get(2..2 + n).ok_or(truncated)?;
                        let mut le = [0u8; 8];
                        le[..n].copy_from_slice(p);
                        Ok((
                            Packet::Ptw {
                                payload: u64::from_le_bytes(le),
                                size,
                                ip: b1 & PTW_IP != 0,
                            },
                            2 + n,
                        ))
                    }
                    ext => Err(DecodeError::UnknownExtOpcode { offset, ext }),
                }
            }
            opcode => Err(DecodeError::UnknownOpcode { offset, opcode }),
        }
    }
}

/// Encodes `packets` back to back into `out`; returns the bytes written.
pub fn encode_all(packets: &[Packet], out: &mut [u8]) -> Result<usize, EncodeError> {
    let mut n = 0;
    for p in packets {
        n += match p.encode(&mut out[n..]) {
            Ok(len) => len,
            Err(EncodeError::BufferTooSmall { needed }) => {
                return Err(EncodeError::BufferTooSmall { needed: n + needed })
            }
            Err(e) => return Err(e),
        };
    }
    Ok(n)
}

/// Finds the start of the first PSB that begins at or after `from`.
///
/// As in libipt, a run of `02 82` pairs longer than a PSB belongs to the packet before it:
/// the PSB is the last 16 bytes of the run.
pub fn find_psb(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + PSB_LEN <= buf.len() {
        if buf[i] != OPC_EXT || buf[i + 1] != EXT_PSB {
            i += 1;
            continue;
        }
        // Extend the run of pairs starting at `i`.
        let mut end = i;
        while end + 2 <= buf.len() && buf[end] == OPC_EXT && buf[end + 1] == EXT_PSB {
            end += 2;
        }
        if end - i >= PSB_LEN {
            return Some(end - PSB_LEN);
        }
        i = end.max(i + 1);
    }
    None
}

/// A packet decoder over a byte buffer that may start mid-packet (after a ring wrap).
///
/// # Invariants
///
/// `pos <= buf.len()`.
#[derive(Clone, Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    sync: Option<usize>,
}

impl<'a> Decoder<'a> {
    /// A decoder at offset 0, not synchronised.
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder {
            buf,
            pos: 0,
            sync: None,
        }
    }

    /// Offset of the next packet.
    pub const fn position(&self) -> usize {
        self.pos
    }

    /// Moves to the next PSB: at or after the current offset, but past the PSB of the last
    /// synchronisation (like libipt's `pt_pkt_sync_forward`); returns its offset.
    pub fn sync_forward(&mut self) -> Result<usize, DecodeError> {
        let from = match self.sync {
            Some(s) if s == self.pos => self.pos + 1,
            _ => self.pos,
        };
        match find_psb(self.buf, from) {
            Some(at) => {
                // INVARIANT: `find_psb` returns an offset with 16 bytes after it.
                self.pos = at;
                self.sync = Some(at);
                Ok(at)
            }
            None => Err(DecodeError::NoSync),
        }
    }

    /// Decodes the packet at the current offset and moves past it; `Ok(None)` at the end of
    /// the buffer. On error the offset stays at the bad packet: call
    /// [`Decoder::sync_forward`] to resume.
    pub fn next_packet(&mut self) -> Result<Option<(usize, Packet)>, DecodeError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let at = self.pos;
        let (p, len) = Packet::decode(&self.buf[at..], at)?;
        // INVARIANT: `decode` only returns lengths it checked against the buffer.
        self.pos = at + len;
        Ok(Some((at, p)))
    }
}
