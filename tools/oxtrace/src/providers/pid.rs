//! The pid provider: `pidPID:MODULE:FUNCTION:NAME` resolved against the process's load
//! objects to uprobes on entry, return and offset instructions.
//!
//! A `return` probe is one uprobe on each returning instruction of the function: every
//! `ret`, and every jump whose target lies outside the function (a tail call), found by
//! decoding the function's bytes with `iced-x86` (a complete x86-64 decoder, its decoder
//! feature only). `arg0` of such a probe is that instruction's offset in the function,
//! DTrace's definition, which a uretprobe could not give; and the process's return
//! addresses stay intact for `ustack()`. Offset probes land on an instruction boundary
//! found the same way. A function whose symbol has no size cannot be decoded.

use super::fbt::{glob_match, is_glob};
use super::process::{self, probe_name, LoadObject, UserProbe};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};

/// The probes a pid description resolves to, by kind.
#[derive(Debug, Default)]
pub struct PidProbes {
    /// `entry` probes.
    pub entry: Vec<UserProbe>,
    /// `return` probes.
    pub ret: Vec<UserProbe>,
    /// Instruction offset probes.
    pub offsets: Vec<UserProbe>,
    /// Functions a glob matched whose size is unknown, left out of return and offset probes.
    pub unsized_skipped: usize,
    /// IFUNC resolvers a glob matched, left out.
    pub ifunc_skipped: usize,
}

/// What a probe name asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Want {
    /// `entry` probes.
    pub entry: bool,
    /// `return` probes.
    pub ret: bool,
    /// One instruction offset.
    pub offset: Option<u64>,
    /// A glob matched against each instruction's offset in hex.
    pub offset_glob: Option<String>,
}

/// Parses the NAME field of a pid description.
pub fn parse_name(name: &str) -> Result<Want, String> {
    let none = Want {
        entry: false,
        ret: false,
        offset: None,
        offset_glob: None,
    };
    match name {
        "" => {
            return Ok(Want {
                entry: true,
                ret: true,
                ..none
            })
        }
        "entry" => {
            return Ok(Want {
                entry: true,
                ..none
            })
        }
        "return" => return Ok(Want { ret: true, ..none }),
        _ => {}
    }
    if is_glob(name) {
        // Only a glob whose letters are all hex digits can match an offset's name.
        let hexy = name
            .bytes()
            .all(|c| c.is_ascii_hexdigit() || c == b'*' || c == b'?');
        return Ok(Want {
            entry: glob_match(name, "entry"),
            ret: glob_match(name, "return"),
            offset: None,
            offset_glob: hexy.then(|| name.to_ascii_lowercase()),
        });
    }
    let hex = name
        .strip_prefix("0x")
        .or_else(|| name.strip_prefix("0X"))
        .unwrap_or(name);
    match u64::from_str_radix(hex, 16) {
        Ok(off) if !hex.starts_with('+') => Ok(Want {
            offset: Some(off),
            ..none
        }),
        _ => Err(format!(
            "pid probes are named entry, return or an instruction offset in hex (main:4), not '{name}'"
        )),
    }
}

/// One decoded instruction of a function: its offset in the function, and whether it
/// returns from it (a `ret`, or a jump out of the function).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Offset in the function.
    pub off: u64,
    /// Whether it leaves the function: a return probe's site.
    pub returns: bool,
}

/// Decodes the function of `code` at virtual address `vaddr` (its bytes, as long as its
/// symbol's size): every instruction, in order.
pub fn decode(code: &[u8], vaddr: u64) -> Vec<Insn> {
    let end = vaddr + code.len() as u64;
    let mut dec = Decoder::with_ip(64, code, vaddr, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    let mut v = Vec::new();
    while dec.can_decode() {
        dec.decode_out(&mut insn);
        if insn.is_invalid() {
            // Data or padding in the function: no probe there.
            continue;
        }
        let returns = match insn.flow_control() {
            FlowControl::Return => true,
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => {
                let t = insn.near_branch_target();
                t < vaddr || t >= end
            }
            _ => false,
        };
        v.push(Insn {
            off: insn.ip() - vaddr,
            returns,
        });
    }
    v
}

/// Resolves `pidPID:module:func:name` (the provider already split into `pid`).
pub fn resolve(pid: u32, module: &str, func: &str, name: &str) -> Result<PidProbes, String> {
    parse_name(name)?;
    let objs = process::matching_objects(pid, module)?;
    resolve_in(pid, &objs, &process::elf, module, func, name)
}

/// [`resolve`] against load objects `objs` of process `pid` whose files `elf` reads: the
/// part that reads the (untrusted) ELF files, which the fuzzers drive with files of their
/// own.
pub fn resolve_in(
    pid: u32,
    objs: &[LoadObject],
    elf: &dyn Fn(&str) -> Option<std::rc::Rc<process::Elf>>,
    module: &str,
    func: &str,
    name: &str,
) -> Result<PidProbes, String> {
    let want = parse_name(name)?;
    let fglob = func.is_empty() || is_glob(func);
    let fpat = if func.is_empty() { "*" } else { func };
    let prov = format!("pid{pid}");
    let mut out = PidProbes::default();
    let mut found = false;
    for obj in objs {
        let Some(elf) = elf(&obj.path) else {
            if module.is_empty() || is_glob(module) {
                continue;
            }
            return Err(format!(
                "cannot read the symbols of {} (process {pid})",
                obj.path
            ));
        };
        // A glob matches each address once (by its plainest name); a name may be an alias.
        let candidates = if fglob {
            elf.syms.functions()
        } else {
            elf.syms.named(func)
        };
        for (vaddr, size, fname) in candidates {
            if !glob_match(fpat, fname) {
                continue;
            }
            found = true;
            if elf.syms.is_ifunc(*vaddr) {
                // Its symbol is the resolver, run once by the dynamic loader: a probe there
                // would not fire on calls.
                if fglob {
                    out.ifunc_skipped += 1;
                    continue;
                }
                return Err(format!(
                    "function {fname} of {} is an IFUNC: its symbol is the resolver that picks an implementation at load time, which calls never reach (probe the implementation if the file's symbols name it)",
                    obj.name
                ));
            }
            let Some(foff) = elf.syms.file_offset(*vaddr) else {
                continue;
            };
            let probe = |n: &str, offset: u64, roff: u64| UserProbe {
                name: probe_name(&prov, &obj.name, fname, n),
                path: obj.path.clone(),
                offset,
                ref_ctr: 0,
                roff,
                pid,
                args: Vec::new(),
                optional: fglob || is_glob(name),
            };
            if want.entry {
                out.entry.push(probe("entry", foff, 0));
            }
            if !want.ret && want.offset.is_none() && want.offset_glob.is_none() {
                continue;
            }
            let code = usize::try_from(foff)
                .ok()
                .zip(usize::try_from(*size).ok())
                .and_then(|(o, n)| elf.data.get(o..o.checked_add(n)?));
            let code = match code {
                Some(c) if *size > 0 => c,
                // A symbol that lies: its size runs past the file's end.
                None if *size > 0 && !fglob => {
                    return Err(format!(
                        "function {fname} of {}: its symbol's size (0x{size:x} bytes from file offset 0x{foff:x}) runs past the end of the file (0x{:x} bytes)",
                        obj.name,
                        elf.data.len()
                    ))
                }
                _ if fglob => {
                    out.unsized_skipped += 1;
                    continue;
                }
                _ => {
                    return Err(format!(
                        "function {fname} of {} has no size in its symbol table: its instructions cannot be found for return or offset probes (entry works)",
                        obj.name
                    ))
                }
            };
            let insns = decode(code, *vaddr);
            if want.ret {
                for i in insns.iter().filter(|i| i.returns) {
                    out.ret.push(probe("return", foff + i.off, i.off));
                }
            }
            if let Some(off) = want.offset {
                check_boundary(&insns, off, fname, obj, *size)?;
                out.offsets.push(probe(&format!("{off:x}"), foff + off, 0));
            }
            if let Some(g) = &want.offset_glob {
                for i in &insns {
                    let n = format!("{:x}", i.off);
                    if glob_match(g, &n) {
                        out.offsets.push(probe(&n, foff + i.off, 0));
                    }
                }
            }
        }
    }
    if !found && !fglob {
        let mut names = Vec::new();
        for o in objs {
            if let Some(e) = elf(&o.path) {
                names.extend(e.syms.functions().iter().map(|f| f.2.clone()));
            }
        }
        let near = super::syscalls::nearby(func, names.iter().map(String::as_str));
        let wher = if module.is_empty() {
            format!("process {pid}")
        } else {
            format!("{module} of process {pid}")
        };
        return Err(format!(
            "no function '{func}' in {wher}{}",
            super::syscalls::did_you_mean(&near)
        ));
    }
    Ok(out)
}

/// Refuses an offset that is not an instruction boundary of the function, naming the
/// nearest boundaries.
fn check_boundary(
    insns: &[Insn],
    off: u64,
    fname: &str,
    obj: &LoadObject,
    size: u64,
) -> Result<(), String> {
    if off >= size {
        return Err(format!(
            "offset 0x{off:x} is past the end of function {fname} of {} (its size is 0x{size:x})",
            obj.name
        ));
    }
    if insns.iter().any(|i| i.off == off) {
        return Ok(());
    }
    let below = insns.iter().rev().find(|i| i.off < off).map(|i| i.off);
    let above = insns.iter().find(|i| i.off > off).map(|i| i.off);
    let near = match (below, above) {
        (Some(b), Some(a)) => format!("0x{b:x} and 0x{a:x}"),
        (Some(b), None) => format!("0x{b:x}"),
        (None, Some(a)) => format!("0x{a:x}"),
        (None, None) => "none".into(),
    };
    Err(format!(
        "offset 0x{off:x} of function {fname} of {} is not on an instruction boundary (nearest: {near})",
        obj.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let w = parse_name("").unwrap();
        assert!(w.entry && w.ret && w.offset.is_none() && w.offset_glob.is_none());
        assert!(parse_name("entry").unwrap().entry);
        assert!(parse_name("return").unwrap().ret);
        assert_eq!(parse_name("1c").unwrap().offset, Some(0x1c));
        assert_eq!(parse_name("0x1C").unwrap().offset, Some(0x1c));
        let g = parse_name("*").unwrap();
        assert!(g.entry && g.ret && g.offset_glob.as_deref() == Some("*"));
        let g = parse_name("e*").unwrap();
        assert!(g.entry && !g.ret && g.offset_glob.is_some());
        let g = parse_name("ret*").unwrap();
        assert!(!g.entry && g.ret && g.offset_glob.is_none());
        let e = parse_name("exit").unwrap_err();
        assert!(e.contains("not 'exit'"), "{e}");
        assert!(parse_name("+4").is_err());
    }

    #[test]
    fn decodes_returns_and_tail_calls() {
        // push rbp; mov rbp,rsp; test edi,edi; je +3 (inside); pop rbp; ret;
        // pop rbp; jmp <outside> (a tail call); jmp -? (inside loop back)
        let code = [
            0x55, // 0: push rbp
            0x48, 0x89, 0xe5, // 1: mov rbp, rsp
            0x85, 0xff, // 4: test edi, edi
            0x74, 0x02, // 6: je 0xa
            0x5d, // 8: pop rbp
            0xc3, // 9: ret
            0x5d, // a: pop rbp
            0xe9, 0x00, 0x10, 0x00, 0x00, // b: jmp far away
            0xeb, 0xee, // 10: jmp 0x0 (inside)
        ];
        let insns = decode(&code, 0x1000);
        let offs: Vec<u64> = insns.iter().map(|i| i.off).collect();
        assert_eq!(offs, [0, 1, 4, 6, 8, 9, 0xa, 0xb, 0x10]);
        let rets: Vec<u64> = insns.iter().filter(|i| i.returns).map(|i| i.off).collect();
        assert_eq!(rets, [9, 0xb]);
        let obj = LoadObject {
            path: "/x".into(),
            name: "x".into(),
            exe: true,
            first_map: (0, 0),
        };
        assert!(check_boundary(&insns, 4, "f", &obj, code.len() as u64).is_ok());
        let e = check_boundary(&insns, 2, "f", &obj, code.len() as u64).unwrap_err();
        assert!(e.contains("nearest: 0x1 and 0x4"), "{e}");
        let e = check_boundary(&insns, 0x40, "f", &obj, code.len() as u64).unwrap_err();
        assert!(e.contains("past the end"), "{e}");
    }
}
