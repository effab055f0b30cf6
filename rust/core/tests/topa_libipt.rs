// SPDX-License-Identifier: GPL-2.0

//! Cross-check of our PT packets against Intel's libipt (Debian `libipt-dev`).
//!
//! `tests/libipt/ptdump.c` is compiled with `cc ... -lipt`; it decodes a buffer with libipt's
//! packet decoder (`pt_pkt_sync_forward` / `pt_pkt_next`) and encodes packets with libipt's
//! encoder. Our decoder must list the same packets at the same offsets, and our encoder must
//! produce the same bytes. Without libipt-dev these tests fail: they never pass silently.

mod topa_support;

use oxtrace_core::topa::*;
use proptest::prelude::*;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use topa_support::*;

fn harness() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/libipt/ptdump.c");
        let bin = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("oxtrace-ptdump");
        let out = Command::new("cc")
            .args(["-O1", "-Wall", "-o"])
            .arg(&bin)
            .arg(&src)
            .arg("-lipt")
            .output()
            .expect("running cc (a C compiler is required for the libipt cross-check)");
        assert!(
            out.status.success(),
            "cannot build the libipt harness: is libipt-dev installed?\n\
             install it with `apt-get install -y libipt-dev` (scripts/setup-toolchain.sh \
             does this).\ncc said:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        bin
    })
}

fn libipt_dump(bytes: &[u8]) -> Vec<String> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "ptdump-{}-{}.bin",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, bytes).unwrap();
    let out = Command::new(harness())
        .arg("dump")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn libipt_encode(packets: &[Packet]) -> Vec<u8> {
    let mut input = String::new();
    for p in packets {
        input += &match *p {
            Packet::Pad => "pad\n".to_owned(),
            Packet::Psb => "psb\n".to_owned(),
            Packet::PsbEnd => "psbend\n".to_owned(),
            Packet::Ovf => "ovf\n".to_owned(),
            Packet::Tsc { tsc } => format!("tsc {tsc:x}\n"),
            Packet::Ptw { payload, size, ip } => {
                format!("ptw {} {} {payload:x}\n", size.bytes(), ip as u8)
            }
        };
    }
    let mut child = Command::new(harness())
        .arg("enc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = String::from_utf8(out.stdout).unwrap();
    let hex = hex.trim();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn line(off: usize, p: &Packet) -> String {
    match *p {
        Packet::Pad => format!("{off} pad"),
        Packet::Psb => format!("{off} psb"),
        Packet::PsbEnd => format!("{off} psbend"),
        Packet::Ovf => format!("{off} ovf"),
        Packet::Tsc { tsc } => format!("{off} tsc {tsc:x}"),
        Packet::Ptw { payload, size, ip } => {
            format!("{off} ptw {} {} {payload:x}", size.bytes(), ip as u8)
        }
    }
}

/// Our decoder, driven exactly like the harness drives libipt.
fn our_dump(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut d = Decoder::new(bytes);
    loop {
        if d.sync_forward().is_err() {
            out.push("nosync".to_owned());
            return out;
        }
        loop {
            let off = d.position();
            match d.next_packet() {
                Ok(Some((o, p))) => out.push(line(o, &p)),
                Ok(None) => {
                    out.push(format!("{off} end"));
                    return out;
                }
                Err(DecodeError::Truncated { offset }) => {
                    out.push(format!("{offset} end"));
                    return out;
                }
                Err(_) => {
                    out.push(format!("{off} error"));
                    break;
                }
            }
        }
    }
}

fn encode(packets: &[Packet]) -> Vec<u8> {
    let mut buf = vec![0u8; 16 * packets.len()];
    let n = encode_all(packets, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn assert_agree(bytes: &[u8]) -> Vec<String> {
    let theirs = libipt_dump(bytes);
    let ours = our_dump(bytes);
    assert_eq!(ours, theirs, "our decoder and libipt disagree");
    ours
}

fn sample() -> Vec<Packet> {
    vec![
        Packet::Psb,
        Packet::Tsc {
            tsc: 0x00ab_cdef_0123_4567,
        },
        Packet::PsbEnd,
        Packet::Ptw {
            payload: 0xdead_beef,
            size: PtwSize::Four,
            ip: false,
        },
        Packet::Ptw {
            payload: 0x0102_0304_0506_0708,
            size: PtwSize::Eight,
            ip: true,
        },
        Packet::Pad,
        Packet::Pad,
        Packet::Ovf,
        Packet::Psb,
        Packet::PsbEnd,
        Packet::Ptw {
            payload: 0,
            size: PtwSize::Four,
            ip: true,
        },
    ]
}

#[test]
fn libipt_decodes_our_packets() {
    let packets = sample();
    let bytes = encode(&packets);
    let lines = assert_agree(&bytes);
    assert_eq!(lines.len(), packets.len() + 1);
    assert!(lines[1].ends_with("tsc abcdef01234567"));
    assert!(lines[4].ends_with("ptw 8 1 102030405060708"));
}

#[test]
fn libipt_encodes_the_same_bytes() {
    let packets = sample();
    assert_eq!(encode(&packets), libipt_encode(&packets));
}

#[test]
fn libipt_agrees_on_cut_and_corrupt_buffers() {
    let bytes = encode(&sample());
    for cut in 0..bytes.len() {
        assert_agree(&bytes[cut..]);
        assert_agree(&bytes[..cut]);
    }
    // A reserved PTW size inside the stream: both report an error there and resync.
    // PSB (16) + TSC (8) + PSBEND (2): the 4-byte PTW's second byte is at 27.
    let mut bad = bytes.clone();
    assert_eq!(&bad[26..28], &[0x02, 0x12]);
    bad[27] = 0x52;
    let lines = assert_agree(&bad);
    assert!(lines.iter().any(|l| l.ends_with("error")));
}

/// The software backend's output through the engine, read out in logical order: a ring
/// that wrapped (starts mid-packet) and a stop buffer (ends inside a cut packet).
#[test]
fn libipt_decodes_engine_output() {
    for mode in [Mode::Ring, Mode::Stop { int: false }] {
        let mut s = setup(&[0, 1, 0, 0, 0], 2, mode, 77);
        let mut e = OutputEngine::new(&s.layout, &s.cfg);
        e.enable(&s.mem).unwrap();
        let mut b = [0u8; 16];
        for i in 0..12000u64 {
            let mut group = Vec::new();
            if i % 50 == 0 {
                group.extend([Packet::Psb, Packet::Tsc { tsc: i << 20 }, Packet::PsbEnd]);
            }
            let payload = i.wrapping_mul(0x0101_0101_0101_0101);
            group.push(if i % 2 == 0 {
                Packet::Ptw {
                    payload,
                    size: PtwSize::Eight,
                    ip: i % 7 == 0,
                }
            } else {
                Packet::Ptw {
                    payload: payload & 0xffff_ffff,
                    size: PtwSize::Four,
                    ip: i % 7 == 0,
                }
            });
            for p in group {
                let n = p.encode(&mut b).unwrap();
                e.write(&mut s.mem, &b[..n]);
            }
        }
        let cur = e.cursor(&s.layout, &s.mem).unwrap();
        let data = read_all(&s, cur);
        assert_eq!(data.len() as u64, s.layout.capacity());
        let lines = assert_agree(&data);
        assert!(lines.len() > 1000, "{mode:?}: {} packets", lines.len());
        match mode {
            Mode::Ring => assert!(cur.wrapped && e.wraps() > 2),
            Mode::Stop { .. } => {
                assert!(e.is_stopped());
                assert_eq!(lines[0], "0 psb");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn libipt_agrees_on_random_streams(packets in proptest::collection::vec(packet(), 0..300),
                                       cut: prop::sample::Index) {
        let bytes = encode(&packets);
        prop_assert_eq!(&bytes, &libipt_encode(&packets));
        let cut = if bytes.is_empty() { 0 } else { cut.index(bytes.len()) };
        prop_assert_eq!(our_dump(&bytes[cut..]), libipt_dump(&bytes[cut..]));
    }
}
