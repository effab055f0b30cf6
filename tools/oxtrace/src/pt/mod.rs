//! `oxtrace pt`: record Intel PT (or the module's software PT backend) into a file of per-CPU
//! streams, and list the packets of such a file with the decoder of `rust/core/topa/`.
//!
//! File format (little endian), version 1:
//!
//! ```text
//! "OXTPT\0\0\x01"  u32 ncpus  u32 backend  u32 mode  u32 slice_order  u64 capacity
//! per CPU: u32 cpu  u32 flags  u64 position  u64 written  u64 lost  u64 wraps  u64 ptws
//!          u32 nslices  u32 ntables  u64 slice_phys[nslices]  u64 table_phys[ntables]
//!          u64 len  u8 data[len]      (data in logical order, oldest first)
//! ```

mod decode;
pub mod ipt;

pub use decode::{walk, Counts};

use crate::dsl::{self, CompileOptions};
use crate::runtime::device::Device;
use crate::runtime::{self, Held, OutFmt, Run, Source, Target};
use clap::{Parser, Subcommand};
use oxtrace_core::abi;
use oxtrace_core::topa::{DecodeError, Packet, PtwSize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Magic and version at the start of a trace file.
pub const MAGIC: &[u8; 8] = b"OXTPT\0\0\x01";

#[derive(Parser)]
#[command(name = "oxtrace pt", about = "Intel PT through ToPA tables")]
struct PtCli {
    /// The oxtrace device node.
    #[arg(long, default_value = crate::runtime::device::DEFAULT_PATH)]
    device: PathBuf,
    #[command(subcommand)]
    cmd: PtCmd,
}

#[derive(Subcommand)]
enum PtCmd {
    /// Trace while CMD runs (or the D program, whose ptwrite() values are written), then save
    /// every CPU's stream.
    Record(RecordArgs),
    /// List the packets of a trace file.
    Dump(DumpArgs),
}

#[derive(Parser)]
struct RecordArgs {
    /// Output file.
    #[arg(short = 'o', default_value = "pt.data")]
    output: PathBuf,
    /// Backend: auto (PT if the CPU has it), soft or hw.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Mode: ring (wrap, keep the newest), stop (stop when full) or stop-int.
    #[arg(long, default_value = "ring")]
    mode: String,
    /// Slices per CPU (separate page allocations).
    #[arg(long, default_value_t = 16)]
    slices: u32,
    /// Slice size: 4 KiB << ORDER.
    #[arg(long, default_value_t = 2)]
    order: u32,
    /// Output entries per ToPA table (fewer: more tables); 0: 511.
    #[arg(long, default_value_t = 0)]
    per_table: u32,
    /// Software backend: bytes between PSB packets; 0: 4096.
    #[arg(long, default_value_t = 0)]
    psb_period: u32,
    /// D program run while tracing (its ptwrite() calls feed the software backend).
    #[arg(short = 'e', value_name = "PROGRAM")]
    program: Option<String>,
    /// The command to trace ($target in the program).
    #[arg(short = 'c', value_name = "CMD")]
    command: String,
}

#[derive(Parser)]
struct DumpArgs {
    /// Trace file.
    file: PathBuf,
    /// Print the physical addresses of the slices and tables.
    #[arg(long)]
    layout: bool,
    /// Print only the summaries, no packets.
    #[arg(long)]
    summary: bool,
    /// Packet decoder: auto (Intel's libipt where it is installed, else oxtrace's own),
    /// libipt or oxtrace.
    #[arg(long, default_value = "auto")]
    decoder: String,
    /// Decode with both decoders and fail unless they agree packet for packet.
    #[arg(long)]
    check: bool,
}

/// Which packet decoder `pt dump` uses.
pub enum DumpDecoder<'a> {
    /// oxtrace's own ([`walk`], `oxtrace_core::topa`).
    Own,
    /// Intel's libipt, loaded at run time.
    Libipt(&'a ipt::Libipt),
}

/// Where a decode error was found.
fn error_offset(e: &DecodeError) -> usize {
    match *e {
        DecodeError::NoSync => 0,
        DecodeError::Truncated { offset }
        | DecodeError::UnknownOpcode { offset, .. }
        | DecodeError::UnknownExtOpcode { offset, .. }
        | DecodeError::BadPtwSize { offset }
        | DecodeError::BadPsb { offset } => offset,
    }
}

impl DumpDecoder<'_> {
    /// Decodes `data`: each packet or error (its offset) to `each`.
    pub fn walk(
        &self,
        data: &[u8],
        mut each: impl FnMut(Result<(usize, Packet), usize>),
    ) -> Counts {
        match self {
            DumpDecoder::Own => walk(data, |ev| match ev {
                Ok((at, p)) => each(Ok((at, *p))),
                Err(e) => each(Err(error_offset(e))),
            }),
            DumpDecoder::Libipt(l) => l.walk(data, each),
        }
    }

    /// The decoder's name in the dump's header.
    pub fn name(&self) -> &'static str {
        match self {
            DumpDecoder::Own => "oxtrace",
            DumpDecoder::Libipt(_) => "libipt",
        }
    }
}

/// A decoded packet at its offset, or a decode error's offset.
type Event = Result<(usize, Packet), usize>;

/// Every packet and error of `data` as one decoder sees it.
fn events(d: &DumpDecoder, data: &[u8]) -> (Vec<Event>, Counts) {
    let mut v = Vec::new();
    let c = d.walk(data, |e| v.push(e));
    (v, c)
}

/// Decodes every CPU's stream with both decoders; the first disagreement, if any.
pub fn compare_decoders(f: &PtFile, libipt: &ipt::Libipt) -> Result<usize, String> {
    let mut packets = 0;
    for c in &f.cpus {
        let (ours, oc) = events(&DumpDecoder::Own, &c.data);
        let (theirs, tc) = events(&DumpDecoder::Libipt(libipt), &c.data);
        if let Some(i) = (0..ours.len().max(theirs.len())).find(|&i| ours.get(i) != theirs.get(i)) {
            return Err(format!(
                "cpu {}: event {i}: oxtrace decodes {:?}, libipt {:?}",
                c.cpu,
                ours.get(i),
                theirs.get(i)
            ));
        }
        if oc != tc {
            return Err(format!(
                "cpu {}: counts differ: oxtrace {oc:?}, libipt {tc:?}",
                c.cpu
            ));
        }
        packets += ours.len();
    }
    Ok(packets)
}

/// One CPU's stream in a trace file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTrace {
    /// The CPU.
    pub cpu: u32,
    /// `PT_CPU_*` flags at the end of the recording.
    pub flags: u32,
    /// Write position at the end.
    pub position: u64,
    /// Bytes written (software backend).
    pub written: u64,
    /// Bytes lost (software backend).
    pub lost: u64,
    /// Ring wraps (software backend).
    pub wraps: u64,
    /// PTW packets written (software backend).
    pub ptws: u64,
    /// Physical addresses of the slices, walk order.
    pub slices: Vec<u64>,
    /// Physical addresses of the tables, walk order.
    pub tables: Vec<u64>,
    /// The data, oldest first.
    pub data: Vec<u8>,
}

/// A trace file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtFile {
    /// `PT_BACKEND_SOFT` or `PT_BACKEND_HW`.
    pub backend: u32,
    /// `PT_MODE_*`.
    pub mode: u32,
    /// Slice size order.
    pub slice_order: u32,
    /// Bytes per CPU.
    pub capacity: u64,
    /// The CPUs' streams.
    pub cpus: Vec<CpuTrace>,
}

impl PtFile {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        let u32s = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        let u64s = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
        u32s(&mut b, self.cpus.len() as u32);
        u32s(&mut b, self.backend);
        u32s(&mut b, self.mode);
        u32s(&mut b, self.slice_order);
        u64s(&mut b, self.capacity);
        for c in &self.cpus {
            u32s(&mut b, c.cpu);
            u32s(&mut b, c.flags);
            for v in [c.position, c.written, c.lost, c.wraps, c.ptws] {
                u64s(&mut b, v);
            }
            u32s(&mut b, c.slices.len() as u32);
            u32s(&mut b, c.tables.len() as u32);
            for &p in c.slices.iter().chain(&c.tables) {
                u64s(&mut b, p);
            }
            u64s(&mut b, c.data.len() as u64);
            b.extend_from_slice(&c.data);
        }
        b
    }

    /// Parses a file; a precise message on malformed input.
    pub fn decode(bytes: &[u8]) -> Result<PtFile, String> {
        let mut r = Reader { b: bytes, at: 0 };
        if r.take(8)? != MAGIC {
            return Err("not an oxtrace pt file (bad magic or version)".into());
        }
        let n = r.u32()?;
        let mut f = PtFile {
            backend: r.u32()?,
            mode: r.u32()?,
            slice_order: r.u32()?,
            capacity: r.u64()?,
            cpus: Vec::new(),
        };
        for _ in 0..n {
            let mut c = CpuTrace {
                cpu: r.u32()?,
                flags: r.u32()?,
                position: r.u64()?,
                written: r.u64()?,
                lost: r.u64()?,
                wraps: r.u64()?,
                ptws: r.u64()?,
                ..Default::default()
            };
            let (ns, nt) = (r.u32()?, r.u32()?);
            for _ in 0..ns {
                c.slices.push(r.u64()?);
            }
            for _ in 0..nt {
                c.tables.push(r.u64()?);
            }
            let len = r.u64()?;
            let len = usize::try_from(len).map_err(|_| "data length too large".to_string())?;
            c.data = r.take(len)?.to_vec();
            f.cpus.push(c);
        }
        if r.at != bytes.len() {
            return Err(format!("{} trailing bytes", bytes.len() - r.at));
        }
        Ok(f)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or([0; 4]),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or([0; 8]),
        ))
    }
}

fn backend_name(b: u32) -> &'static str {
    match b {
        abi::PT_BACKEND_SOFT => "soft",
        abi::PT_BACKEND_HW => "hw",
        _ => "auto",
    }
}

fn mode_name(m: u32) -> &'static str {
    match m {
        abi::PT_MODE_RING => "ring",
        abi::PT_MODE_STOP => "stop",
        abi::PT_MODE_STOP_INT => "stop-int",
        _ => "?",
    }
}

fn flag_names(f: u32) -> String {
    let names = [
        (abi::PT_CPU_WRAPPED, "wrapped"),
        (abi::PT_CPU_STOPPED, "stopped"),
        (abi::PT_CPU_ERROR, "error"),
        (abi::PT_CPU_PMI, "pmi"),
        (abi::PT_CPU_ENABLED, "enabled"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

fn packet_text(p: &Packet) -> String {
    match *p {
        Packet::Pad => "PAD".into(),
        Packet::Psb => "PSB".into(),
        Packet::PsbEnd => "PSBEND".into(),
        Packet::Ovf => "OVF".into(),
        Packet::Tsc { tsc } => format!("TSC 0x{tsc:x}"),
        Packet::Ptw { payload, size, ip } => {
            let bytes = match size {
                PtwSize::Four => 4,
                PtwSize::Eight => 8,
            };
            format!(
                "PTW {payload} (0x{payload:x}, {bytes} bytes{})",
                if ip { ", ip" } else { "" }
            )
        }
    }
}

/// The text of `oxtrace pt dump`, decoded with oxtrace's own decoder.
pub fn dump_text(f: &PtFile, layout: bool, summary: bool) -> String {
    dump_text_with(f, layout, summary, &DumpDecoder::Own)
}

/// The text of `oxtrace pt dump`, decoded with `dec`.
pub fn dump_text_with(f: &PtFile, layout: bool, summary: bool, dec: &DumpDecoder) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "backend {} mode {} capacity {} slice {} bytes, {} CPUs",
        backend_name(f.backend),
        mode_name(f.mode),
        f.capacity,
        4096u64 << f.slice_order,
        f.cpus.len()
    );
    if !matches!(dec, DumpDecoder::Own) {
        let _ = writeln!(o, "decoder {}", dec.name());
    }
    let slice_bytes = 4096u64 << f.slice_order;
    for c in &f.cpus {
        let mut lines = String::new();
        let counts = dec.walk(&c.data, |ev| match ev {
            Ok((at, p)) => {
                if !summary && !matches!(p, Packet::Pad) {
                    let _ = writeln!(lines, "  {at:08x}  {}", packet_text(&p));
                }
            }
            Err(at) => {
                let _ = writeln!(lines, "  {at:08x}  error (resync at the next PSB)");
            }
        });
        let _ = writeln!(
            o,
            "cpu {} flags {} position {} data {} written {} lost {} wraps {} ptws {}",
            c.cpu,
            flag_names(c.flags),
            c.position,
            c.data.len(),
            c.written,
            c.lost,
            c.wraps,
            c.ptws
        );
        let _ = writeln!(
            o,
            "cpu {} packets psb {} ptw {} ovf {} tsc {} pad {} errors {} first-psb {}",
            c.cpu,
            counts.psb,
            counts.ptw,
            counts.ovf,
            counts.tsc,
            counts.pad,
            counts.errors,
            counts.first_psb.map_or("none".into(), |a| a.to_string())
        );
        if layout {
            for (i, p) in c.tables.iter().enumerate() {
                let _ = writeln!(o, "cpu {} table {i} phys 0x{p:x}", c.cpu);
            }
            for (i, p) in c.slices.iter().enumerate() {
                let _ = writeln!(o, "cpu {} slice {i} phys 0x{p:x} size {slice_bytes}", c.cpu);
            }
        }
        o.push_str(&lines);
    }
    o
}

fn parse_backend(s: &str) -> Res<u32> {
    Ok(match s {
        "auto" => abi::PT_BACKEND_AUTO,
        "soft" => abi::PT_BACKEND_SOFT,
        "hw" => abi::PT_BACKEND_HW,
        _ => return Err(format!("unknown backend '{s}': auto, soft or hw").into()),
    })
}

fn parse_mode(s: &str) -> Res<u32> {
    Ok(match s {
        "ring" => abi::PT_MODE_RING,
        "stop" => abi::PT_MODE_STOP,
        "stop-int" => abi::PT_MODE_STOP_INT,
        _ => return Err(format!("unknown mode '{s}': ring, stop or stop-int").into()),
    })
}

fn record(dev_path: &Path, a: &RecordArgs) -> Res<i32> {
    let cfg = abi::PtConfig {
        backend: parse_backend(&a.backend)?,
        mode: parse_mode(&a.mode)?,
        nslices: a.slices,
        slice_order: a.order,
        per_table: a.per_table,
        psb_period: a.psb_period,
        ..Default::default()
    };
    runtime::catch_signals();
    let dev = Device::open(dev_path)?;
    let cfg = match dev.pt_config(&cfg) {
        Ok(c) => c,
        Err(e) if e.err.raw_os_error() == Some(libc::ENODEV) => {
            return Err(format!(
                "no Intel PT with ToPA output on this CPU (ENODEV); try --backend soft ({e})"
            )
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!(
        "oxtrace: pt: backend {}, {} mode, {} x {} byte slices in {} tables per CPU ({} bytes)",
        backend_name(cfg.backend),
        mode_name(cfg.mode),
        cfg.nslices,
        4096u64 << cfg.slice_order,
        cfg.ntables,
        cfg.capacity
    );
    let mut target = Target {
        child: Some(
            Held::spawn(&a.command).map_err(|e| format!("cannot run '{}': {e}", a.command))?,
        ),
        pid: None,
    };
    let tpid = target.child.as_ref().map_or(0, |c| c.pid());
    let code = if let Some(text) = &a.program {
        let mut opts = CompileOptions::with_args("-e", &[]);
        opts.macros.insert("target".into(), tpid.to_string());
        opts.xopts.push(("quiet".into(), None));
        let prog = match dsl::compile(text, "-e", &opts) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{e}");
                return Ok(1);
            }
        };
        let src = Source { text, name: "-e" };
        let r = Run::load(&dev, &prog, src, OutFmt::Text)?;
        dev.pt_start()?;
        let code = r.run(&mut target, false);
        dev.pt_stop()?;
        code?
    } else {
        dev.pt_start()?;
        let child = target.child.as_mut().ok_or("no command")?;
        child.release();
        let mut st = 0;
        // SAFETY: waits for our own child; `st` is a valid out-pointer.
        unsafe { libc::waitpid(tpid as libc::pid_t, &mut st, 0) };
        dev.pt_stop()?;
        if libc::WIFEXITED(st) {
            libc::WEXITSTATUS(st)
        } else {
            128
        }
    };
    let ncpus = cfg.ncpus;
    let (st, cpus) = dev.pt_status(ncpus)?;
    let mut file = PtFile {
        backend: st.backend,
        mode: st.mode,
        slice_order: cfg.slice_order,
        capacity: st.capacity,
        cpus: Vec::new(),
    };
    for (i, c) in cpus.iter().enumerate() {
        if c.flags & abi::PT_CPU_PRESENT == 0 {
            continue;
        }
        let (slices, tables, _) = dev.pt_layout(i as u32)?;
        let data = dev.pt_read_all(i as u32)?;
        file.cpus.push(CpuTrace {
            cpu: i as u32,
            flags: c.flags,
            position: c.position,
            written: c.written,
            lost: c.lost,
            wraps: c.wraps,
            ptws: c.ptws,
            slices,
            tables,
            data,
        });
    }
    std::fs::write(&a.output, file.encode()).map_err(|e| format!("{}: {e}", a.output.display()))?;
    let total: usize = file.cpus.iter().map(|c| c.data.len()).sum();
    eprintln!(
        "oxtrace: pt: {} bytes from {} CPUs written to {}",
        total,
        file.cpus.len(),
        a.output.display()
    );
    Ok(code)
}

/// `oxtrace pt ...`; `args` starts with the program name.
pub fn main(args: Vec<String>) -> Res<i32> {
    let cli = PtCli::try_parse_from(args).unwrap_or_else(|e| e.exit());
    match &cli.cmd {
        PtCmd::Record(a) => record(&cli.device, a),
        PtCmd::Dump(a) => {
            let bytes = std::fs::read(&a.file).map_err(|e| format!("{}: {e}", a.file.display()))?;
            let f = PtFile::decode(&bytes).map_err(|e| format!("{}: {e}", a.file.display()))?;
            let libipt = ipt::Libipt::open();
            if a.check {
                let Some(l) = libipt.as_ref() else {
                    return Err(
                        "--check needs Intel's libipt (libipt.so.2), which is not installed".into(),
                    );
                };
                let n = compare_decoders(&f, l).map_err(|e| format!("decoders disagree: {e}"))?;
                println!("oxtrace and libipt agree on {n} packets");
                return Ok(0);
            }
            let dec = match (a.decoder.as_str(), libipt.as_ref()) {
                ("auto", Some(l)) | ("libipt", Some(l)) => DumpDecoder::Libipt(l),
                ("libipt", None) => {
                    return Err("--decoder libipt: libipt.so.2 is not installed".into())
                }
                ("auto", None) | ("oxtrace", _) => DumpDecoder::Own,
                (d, _) => {
                    return Err(format!("unknown decoder '{d}': auto, libipt or oxtrace").into())
                }
            };
            print!("{}", dump_text_with(&f, a.layout, a.summary, &dec));
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use oxtrace_core::topa::encode_all;

    fn stream(values: &[u64]) -> Vec<u8> {
        let mut ps = vec![Packet::Psb, Packet::Tsc { tsc: 5 }, Packet::PsbEnd];
        for &v in values {
            ps.push(Packet::Ptw {
                payload: v,
                size: PtwSize::Eight,
                ip: false,
            });
        }
        let mut b = vec![0u8; 16 + 8 + 2 + 10 * values.len()];
        let n = encode_all(&ps, &mut b).unwrap();
        b.truncate(n);
        b
    }

    fn file_of(streams: Vec<Vec<u8>>) -> PtFile {
        PtFile {
            backend: abi::PT_BACKEND_SOFT,
            mode: abi::PT_MODE_RING,
            slice_order: 0,
            capacity: 4096,
            cpus: streams
                .into_iter()
                .enumerate()
                .map(|(i, data)| CpuTrace {
                    cpu: i as u32,
                    flags: abi::PT_CPU_PRESENT,
                    data,
                    ..Default::default()
                })
                .collect(),
        }
    }

    /// Intel's libipt (installed by scripts/setup-toolchain.sh) decodes what oxtrace writes
    /// exactly as oxtrace's decoder does: whole streams, wrapped rings starting mid-packet,
    /// stopped buffers ending mid-packet, 4- and 8-byte PTWs, OVF and PAD, and garbage that
    /// forces a resync.
    #[test]
    fn libipt_agrees_with_the_own_decoder() {
        let l = ipt::Libipt::open().expect("libipt.so.2 (Debian libipt2) is not installed");
        let whole = stream(&[1, 2, u64::MAX, 0x1234_5678_9abc]);
        let mut mixed = vec![0u8; 256];
        let ps = [
            Packet::Psb,
            Packet::Tsc { tsc: 0xabcdef },
            Packet::PsbEnd,
            Packet::Ptw {
                payload: 7,
                size: PtwSize::Four,
                ip: true,
            },
            Packet::Pad,
            Packet::Ovf,
            Packet::Ptw {
                payload: 9,
                size: PtwSize::Eight,
                ip: false,
            },
        ];
        let n = encode_all(&ps, &mut mixed).unwrap();
        mixed.truncate(n);
        let mut wrapped = whole[20..].to_vec();
        wrapped.extend_from_slice(&stream(&[40, 50]));
        let stopped = whole[..whole.len() - 3].to_vec();
        let mut garbage = stream(&[1]);
        garbage.extend_from_slice(&[0xff, 0xfe, 0x13]);
        garbage.extend_from_slice(&stream(&[2, 3]));
        let f = file_of(vec![whole, mixed, wrapped, stopped, garbage, vec![0; 64]]);
        let n = compare_decoders(&f, &l).unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 20, "{n} packets");
        // And the dump reads the same through either.
        let own = dump_text_with(&f, false, false, &DumpDecoder::Own);
        let theirs = dump_text_with(&f, false, false, &DumpDecoder::Libipt(&l));
        assert_eq!(own, theirs.replace("decoder libipt\n", ""));
        assert!(
            own.contains("error (resync"),
            "the garbage must show: {own}"
        );
        assert!(own.contains("PTW 7 (0x7, 4 bytes, ip)"), "{own}");
    }

    #[test]
    fn cli_is_consistent() {
        PtCli::command().debug_assert();
    }

    #[test]
    fn file_roundtrip_and_errors() {
        let f = PtFile {
            backend: abi::PT_BACKEND_SOFT,
            mode: abi::PT_MODE_RING,
            slice_order: 1,
            capacity: 8192 * 3,
            cpus: vec![CpuTrace {
                cpu: 1,
                flags: abi::PT_CPU_PRESENT | abi::PT_CPU_WRAPPED,
                position: 77,
                written: 100_000,
                lost: 0,
                wraps: 4,
                ptws: 9_000,
                slices: vec![0x10_0000, 0x30_0000, 0x20_0000],
                tables: vec![0x5000],
                data: stream(&[1, 2, 3]),
            }],
        };
        let b = f.encode();
        assert_eq!(PtFile::decode(&b), Ok(f.clone()));
        for cut in [0, 7, 8, 30, b.len() - 1] {
            assert!(PtFile::decode(&b[..cut]).is_err(), "cut {cut}");
        }
        let mut extra = b.clone();
        extra.push(0);
        assert!(PtFile::decode(&extra).is_err());
    }

    #[test]
    fn walk_counts_and_resyncs_from_a_cut() {
        let s = stream(&[10, 20, 30]);
        let mut got = vec![];
        let c = walk(&s, |ev| {
            if let Ok((_, Packet::Ptw { payload, .. })) = ev {
                got.push(*payload)
            }
        });
        assert_eq!(got, vec![10, 20, 30]);
        assert_eq!((c.psb, c.ptw, c.tsc, c.errors), (1, 3, 1, 0));
        // A wrapped ring starts mid-packet: the walk starts at the first PSB.
        let mut cut = s[20..].to_vec();
        cut.extend_from_slice(&stream(&[40, 50]));
        got.clear();
        let c = walk(&cut, |ev| {
            if let Ok((_, Packet::Ptw { payload, .. })) = ev {
                got.push(*payload)
            }
        });
        assert_eq!(got, vec![40, 50]);
        assert_eq!(c.first_psb, Some(cut.len() - stream(&[40, 50]).len()));
        // A stopped buffer ends mid-packet: not an error.
        let c = walk(&s[..s.len() - 3], |_| {});
        assert_eq!((c.ptw, c.errors), (2, 0));
    }

    #[test]
    fn dump_lists_packets_and_layout() {
        let f = PtFile {
            backend: abi::PT_BACKEND_SOFT,
            mode: abi::PT_MODE_STOP,
            slice_order: 0,
            capacity: 4096,
            cpus: vec![CpuTrace {
                cpu: 0,
                flags: abi::PT_CPU_PRESENT | abi::PT_CPU_STOPPED,
                slices: vec![0x7000],
                tables: vec![0x3000],
                data: stream(&[7]),
                ..Default::default()
            }],
        };
        let t = dump_text(&f, true, false);
        assert!(t.contains("cpu 0 flags stopped "), "{t}");
        assert!(t.contains("cpu 0 packets psb 1 ptw 1 ovf 0 tsc 1"), "{t}");
        assert!(t.contains("cpu 0 slice 0 phys 0x7000 size 4096"), "{t}");
        assert!(t.contains("cpu 0 table 0 phys 0x3000"), "{t}");
        assert!(t.contains("PTW 7 (0x7, 8 bytes)"), "{t}");
        assert!(!dump_text(&f, false, true).contains("PTW 7"));
    }
}
