// SPDX-License-Identifier: GPL-2.0

//! PT packets: exact SDM byte encodings, decode(encode(p)) == p, PSB sync from any offset,
//! no panic on arbitrary bytes, and a ring-wrapped buffer decoded from its first PSB.

mod topa_support;

use oxtrace_core::topa::*;
use proptest::prelude::*;
use topa_support::*;

fn enc(p: Packet) -> Vec<u8> {
    let mut b = [0u8; 16];
    let n = p.encode(&mut b).unwrap();
    assert_eq!(n, p.len());
    b[..n].to_vec()
}

#[test]
fn sdm_byte_encodings() {
    assert_eq!(enc(Packet::Pad), [0x00]);
    assert_eq!(enc(Packet::Psb), [0x02, 0x82].repeat(8));
    assert_eq!(enc(Packet::PsbEnd), [0x02, 0x23]);
    assert_eq!(enc(Packet::Ovf), [0x02, 0xf3]);
    assert_eq!(
        enc(Packet::Tsc {
            tsc: 0x00ee_ddcc_bbaa_9988
        }),
        [0x19, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]
    );
    let ptw = |payload, size, ip| Packet::Ptw { payload, size, ip };
    assert_eq!(
        enc(ptw(0xdead_beef, PtwSize::Four, false)),
        [0x02, 0x12, 0xef, 0xbe, 0xad, 0xde]
    );
    assert_eq!(
        enc(ptw(0xdead_beef, PtwSize::Four, true)),
        [0x02, 0x92, 0xef, 0xbe, 0xad, 0xde]
    );
    assert_eq!(
        enc(ptw(0x1122_3344_5566_7788, PtwSize::Eight, false)),
        [0x02, 0x32, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
    );
    assert_eq!(
        enc(ptw(1, PtwSize::Eight, true)),
        [0x02, 0xb2, 1, 0, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn encode_errors() {
    let mut b = [0u8; 16];
    assert_eq!(
        Packet::Tsc { tsc: 1 << 56 }.encode(&mut b),
        Err(EncodeError::TscTooWide)
    );
    assert_eq!(
        Packet::Ptw {
            payload: 1 << 32,
            size: PtwSize::Four,
            ip: false
        }
        .encode(&mut b),
        Err(EncodeError::PtwTooWide)
    );
    assert_eq!(
        Packet::Psb.encode(&mut b[..15]),
        Err(EncodeError::BufferTooSmall { needed: 16 })
    );
    assert_eq!(
        encode_all(&[Packet::Pad, Packet::Psb], &mut b),
        Err(EncodeError::BufferTooSmall { needed: 17 })
    );
}

#[test]
fn decode_errors() {
    let d = |b: &[u8]| Packet::decode(b, 7);
    assert_eq!(d(&[]), Err(DecodeError::Truncated { offset: 7 }));
    assert_eq!(d(&[0x19, 1, 2]), Err(DecodeError::Truncated { offset: 7 }));
    assert_eq!(d(&[0x02]), Err(DecodeError::Truncated { offset: 7 }));
    assert_eq!(
        d(&[0x02, 0x82, 0x02]),
        Err(DecodeError::Truncated { offset: 7 })
    );
    let mut bad_psb = [0x02, 0x82].repeat(8);
    bad_psb[9] = 0x83;
    assert_eq!(d(&bad_psb), Err(DecodeError::BadPsb { offset: 7 }));
    assert_eq!(
        d(&[0x02, 0x52, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(DecodeError::BadPtwSize { offset: 7 })
    );
    assert_eq!(d(&[0x02, 0x72]), Err(DecodeError::BadPtwSize { offset: 7 }));
    assert_eq!(
        d(&[0x02, 0x12, 1, 2, 3]),
        Err(DecodeError::Truncated { offset: 7 })
    );
    assert_eq!(
        d(&[0x02, 0x83]),
        Err(DecodeError::UnknownExtOpcode {
            offset: 7,
            ext: 0x83
        })
    );
    assert_eq!(
        d(&[0x99, 0x00]),
        Err(DecodeError::UnknownOpcode {
            offset: 7,
            opcode: 0x99
        })
    );
}

#[test]
fn psb_search_takes_the_last_16_bytes_of_a_run() {
    // A PTW payload ending in 02 82 right before a PSB: the PSB is the last 16 bytes.
    let mut b = vec![0x02, 0x12, 0xaa, 0xbb, 0x02, 0x82];
    b.extend([0x02, 0x82].repeat(8));
    b.extend([0x02, 0x23]);
    assert_eq!(find_psb(&b, 0), Some(6));
    let mut d = Decoder::new(&b);
    assert_eq!(d.sync_forward(), Ok(6));
    assert_eq!(d.next_packet(), Ok(Some((6, Packet::Psb))));
    assert_eq!(d.next_packet(), Ok(Some((22, Packet::PsbEnd))));
    assert_eq!(d.next_packet(), Ok(None));
    // Syncing again from a sync point moves past it.
    let two = [[0x02, 0x82].repeat(8), vec![0], [0x02, 0x82].repeat(8)].concat();
    let mut d = Decoder::new(&two);
    assert_eq!(d.sync_forward(), Ok(0));
    assert_eq!(d.sync_forward(), Ok(17));
    assert_eq!(d.sync_forward(), Err(DecodeError::NoSync));
    assert_eq!(find_psb(&[0x02, 0x82].repeat(7), 0), None);
}

/// Decodes like a consumer: sync, decode until an error, resync; never panics.
fn decode_resync(buf: &[u8]) -> Vec<(usize, Packet)> {
    let mut out = Vec::new();
    let mut d = Decoder::new(buf);
    let mut guard = 0;
    while d.sync_forward().is_ok() {
        loop {
            guard += 1;
            assert!(guard <= 2 * buf.len() + 2, "decoder does not progress");
            match d.next_packet() {
                Ok(Some(p)) => out.push(p),
                Ok(None) => return out,
                Err(_) => break,
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn decode_of_encode_is_identity(packets in proptest::collection::vec(packet(), 0..200)) {
        let mut buf = vec![0u8; 16 * packets.len()];
        let n = encode_all(&packets, &mut buf).unwrap();
        prop_assert_eq!(n, packets.iter().map(|p| p.len()).sum::<usize>());
        let mut d = Decoder::new(&buf[..n]);
        let mut got = Vec::new();
        while let Some((_, p)) = d.next_packet().unwrap() {
            got.push(p);
        }
        prop_assert_eq!(got, packets);
    }

    /// Starting anywhere, a decoder that syncs on PSB yields exactly the packets from the
    /// first PSB at or after the cut.
    #[test]
    fn sync_from_any_offset(packets in proptest::collection::vec(packet(), 1..120),
                            cut: prop::sample::Index) {
        let mut buf = vec![0u8; 16 * packets.len()];
        let n = encode_all(&packets, &mut buf).unwrap();
        let buf = &buf[..n];
        let cut = cut.index(n);
        let mut offsets = Vec::new();
        let mut o = 0;
        for p in &packets {
            offsets.push(o);
            o += p.len();
        }
        // Back-to-back PSBs form one run of `02 82` pairs; as in libipt, sync lands on the
        // last 16 bytes of the run.
        let first = packets
            .iter()
            .zip(&offsets)
            .position(|(p, &o)| *p == Packet::Psb && o >= cut);
        let want: Vec<(usize, Packet)> = match first {
            Some(mut i) => {
                while packets.get(i + 1) == Some(&Packet::Psb) {
                    i += 1;
                }
                packets[i..].iter().zip(&offsets[i..]).map(|(p, &o)| (o - cut, *p)).collect()
            }
            None => Vec::new(),
        };
        prop_assert_eq!(decode_resync(&buf[cut..]), want);
    }

    #[test]
    fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = decode_resync(&bytes);
        let mut d = Decoder::new(&bytes);
        while let Ok(Some(_)) = d.next_packet() {}
        for i in 0..bytes.len().min(64) {
            let _ = Packet::decode(&bytes[i..], i);
        }
    }

    /// Bytes drawn from opcodes and a PSB-pattern generator, so that sync, PSB runs and
    /// every packet kind are exercised, mixed with arbitrary bytes.
    #[test]
    fn decoder_never_panics_on_opcode_rich_bytes(
        parts in proptest::collection::vec((0u8..10, any::<u8>()), 0..300)) {
        let mut bytes = Vec::new();
        for (kind, b) in parts {
            match kind {
                0 => bytes.extend([0x02, 0x82].repeat(1 + (b % 10) as usize)),
                1 => bytes.extend([0x02, b]),
                2 => bytes.extend([0x02, 0x12 | (b & 0xe0)]),
                3 => bytes.push(0x19),
                4 => bytes.push(0x00),
                _ => bytes.push(b),
            }
        }
        let _ = decode_resync(&bytes);
    }
}

/// The software backend's scenario: packets written through the engine into a ring that
/// wraps; the read-out starts mid-packet and the decoder recovers from the first PSB.
#[test]
fn wrapped_ring_decodes_from_first_psb() {
    let mut s = setup(&[0, 1, 0, 0], 2, Mode::Ring, 21);
    let mut e = OutputEngine::new(&s.layout, &s.cfg);
    e.enable(&s.mem).unwrap();
    let mut sent = Vec::new();
    let mut b = [0u8; 16];
    for i in 0..12000u64 {
        let mut group = Vec::new();
        if i % 64 == 0 {
            group.extend([Packet::Psb, Packet::Tsc { tsc: i * 1000 }, Packet::PsbEnd]);
        }
        group.push(Packet::Ptw {
            payload: i,
            size: if i % 3 == 0 {
                PtwSize::Four
            } else {
                PtwSize::Eight
            },
            ip: false,
        });
        for p in group {
            let n = p.encode(&mut b).unwrap();
            assert_eq!(e.write(&mut s.mem, &b[..n]), n);
            sent.push(p);
        }
    }
    assert!(e.wraps() >= 3);
    let cur = e.cursor(&s.layout, &s.mem).unwrap();
    assert!(cur.wrapped);
    let data = read_all(&s, cur);
    let got: Vec<Packet> = decode_resync(&data).into_iter().map(|(_, p)| p).collect();
    assert_eq!(got.first(), Some(&Packet::Psb));
    assert!(got.len() > 100);
    assert_eq!(&sent[sent.len() - got.len()..], &got[..]);
}
