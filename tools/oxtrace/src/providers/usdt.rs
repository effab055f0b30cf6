//! USDT probes: the `.note.stapsdt` notes `<sys/sdt.h>` puts in a program or library
//! (`STAP_PROBE`, `DTRACE_PROBE`), each a probe site with its provider, name, address,
//! semaphore and argument specification (`-4@%edi 8@-16(%rbp)`), resolved against a
//! process's load objects to uprobes whose operands the kernel reads when they fire.

use super::fbt::glob_match;
use super::process::{self, probe_name, Elf, UserProbe};
use object::{Object, ObjectSection, ObjectSymbol};
use oxtrace_core::abi::{self, UsdtArg};

/// One probe site of a file's notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The provider.
    pub provider: String,
    /// The probe's name.
    pub name: String,
    /// Virtual address of the site (a `nop`), adjusted by `.stapsdt.base`.
    pub pc: u64,
    /// Virtual address of the semaphore (a `u16`), or 0.
    pub semaphore: u64,
    /// The argument specification.
    pub args: String,
}

/// The USDT sites of ELF image `data` (none if it has no `.note.stapsdt`).
pub fn sites(data: &[u8]) -> Result<Vec<Site>, String> {
    let f = object::File::parse(data).map_err(|e| format!("not an ELF file: {e}"))?;
    let Some(sec) = f.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let notes = sec.data().map_err(|e| format!(".note.stapsdt: {e}"))?;
    let base_addr = f.section_by_name(".stapsdt.base").map(|s| s.address());
    let mut v = Vec::new();
    let mut rest = notes;
    let word = |b: &[u8], i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?))
    };
    let quad = |b: &[u8], i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?))
    };
    // Where each refusal is: the note's offset in the section, and what it claims.
    let total = notes.len();
    let mut at = 0usize;
    while rest.len() >= 12 {
        let (namesz, descsz, ty) = (
            word(rest, 0).unwrap_or_default() as usize,
            word(rest, 4).unwrap_or_default() as usize,
            word(rest, 8).unwrap_or_default(),
        );
        let bad = || {
            format!(
                ".note.stapsdt: the note at offset {at} says its name is {namesz} bytes and its \
                 description {descsz}: past the end of the section ({total} bytes)"
            )
        };
        let desc_at = 12 + namesz.div_ceil(4) * 4;
        let next = desc_at + descsz.div_ceil(4) * 4;
        let owner = rest.get(12..12 + namesz).ok_or_else(bad)?;
        let desc = rest.get(desc_at..desc_at + descsz).ok_or_else(bad)?;
        rest = rest.get(next..).unwrap_or_default();
        let this = at;
        at += next;
        if ty != 3 || owner != b"stapsdt\0" {
            continue;
        }
        let short = || {
            format!(
                ".note.stapsdt: the USDT note at offset {this} has a {descsz}-byte description: \
                 too short for its three addresses"
            )
        };
        let (pc, base, sem) = (
            quad(desc, 0).ok_or_else(short)?,
            quad(desc, 8).ok_or_else(short)?,
            quad(desc, 16).ok_or_else(short)?,
        );
        let mut strs = desc.get(24..).ok_or_else(short)?.split(|&c| c == 0);
        let mut s = || String::from_utf8_lossy(strs.next().unwrap_or_default()).into_owned();
        let (provider, name, args) = (s(), s(), s());
        // A prelinked file moved its sections: the note's base says by how much.
        let pc = match base_addr {
            Some(b) if base != 0 => pc.wrapping_add(b).wrapping_sub(base),
            _ => pc,
        };
        v.push(Site {
            provider,
            name,
            pc,
            semaphore: sem,
            args,
        });
    }
    Ok(v)
}

/// The register numbers (DTrace's `uregs[]`, `struct pt_regs` order) of x86-64's
/// general-purpose registers and their low parts.
fn register(name: &str) -> Result<u8, String> {
    const REGS: [(&str, [&str; 4], u8); 17] = [
        ("rax", ["rax", "eax", "ax", "al"], 10),
        ("rbx", ["rbx", "ebx", "bx", "bl"], 5),
        ("rcx", ["rcx", "ecx", "cx", "cl"], 11),
        ("rdx", ["rdx", "edx", "dx", "dl"], 12),
        ("rsi", ["rsi", "esi", "si", "sil"], 13),
        ("rdi", ["rdi", "edi", "di", "dil"], 14),
        ("rbp", ["rbp", "ebp", "bp", "bpl"], 4),
        ("rsp", ["rsp", "esp", "sp", "spl"], 19),
        ("r8", ["r8", "r8d", "r8w", "r8b"], 9),
        ("r9", ["r9", "r9d", "r9w", "r9b"], 8),
        ("r10", ["r10", "r10d", "r10w", "r10b"], 7),
        ("r11", ["r11", "r11d", "r11w", "r11b"], 6),
        ("r12", ["r12", "r12d", "r12w", "r12b"], 3),
        ("r13", ["r13", "r13d", "r13w", "r13b"], 2),
        ("r14", ["r14", "r14d", "r14w", "r14b"], 1),
        ("r15", ["r15", "r15d", "r15w", "r15b"], 0),
        ("rip", ["rip", "eip", "rip", "rip"], 16),
    ];
    REGS.iter()
        .find(|(_, names, _)| names.contains(&name))
        .map(|r| r.2)
        .ok_or_else(|| format!("register %{name} is not supported in a USDT operand"))
}

/// An integer of an operand: decimal, `0x` hex, or negative.
fn int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => i64::from_str_radix(h, 16).ok()?,
        None => s.parse::<i64>().ok()?,
    };
    Some(if neg { -v } else { v })
}

/// Parses one operand `[-]SIZE@OPERAND` of an argument specification; `sym` gives the
/// absolute address (in the process) of a symbol a `sym(%rip)` operand names.
pub fn parse_arg(spec: &str, sym: &dyn Fn(&str) -> Option<u64>) -> Result<UsdtArg, String> {
    let (size, op) = match spec.split_once('@') {
        Some((n, op)) => (int(n).ok_or_else(|| format!("bad size in '{spec}'"))?, op),
        None => (8, spec),
    };
    let mut a = UsdtArg {
        size: size.unsigned_abs() as u8,
        is_signed: u8::from(size < 0),
        base: abi::UREG_NONE,
        index: abi::UREG_NONE,
        scale: 1,
        ..Default::default()
    };
    if !matches!(size.unsigned_abs(), 1 | 2 | 4 | 8) {
        return Err(format!("operand '{spec}': size {size} is not 1, 2, 4 or 8"));
    }
    if let Some(r) = op.strip_prefix('%') {
        a.kind = abi::USDT_ARG_REG;
        a.base = register(r)?;
        if a.base == 16 {
            return Err(format!("operand '{spec}': %rip is not a value"));
        }
        return Ok(a);
    }
    if let Some(c) = op.strip_prefix('$') {
        a.kind = abi::USDT_ARG_CONST;
        a.value = int(c).ok_or_else(|| format!("operand '{spec}': bad constant"))?;
        return Ok(a);
    }
    if op.contains(':') {
        return Err(format!(
            "operand '{spec}': segment-relative operands are not supported"
        ));
    }
    // Memory: DISP(BASE,INDEX,SCALE), any part optional; DISP may name a symbol.
    a.kind = abi::USDT_ARG_MEM;
    let (disp, regs) = match op.split_once('(') {
        Some((d, r)) => (
            d,
            r.strip_suffix(')')
                .ok_or_else(|| format!("operand '{spec}': missing ')'"))?,
        ),
        None => (op, ""),
    };
    let mut parts = regs.split(',');
    let reg = |s: &str| -> Result<u8, String> {
        match s.trim() {
            "" => Ok(abi::UREG_NONE),
            r => register(
                r.strip_prefix('%')
                    .ok_or_else(|| format!("operand '{spec}': bad register '{r}'"))?,
            ),
        }
    };
    a.base = reg(parts.next().unwrap_or(""))?;
    a.index = reg(parts.next().unwrap_or(""))?;
    if let Some(s) = parts.next() {
        a.scale = match int(s.trim()) {
            Some(n @ (1 | 2 | 4 | 8)) => n as u8,
            _ => return Err(format!("operand '{spec}': bad scale '{s}'")),
        };
    }
    if parts.next().is_some() || a.index == 16 {
        return Err(format!("operand '{spec}': bad memory operand"));
    }
    a.value = match int(disp) {
        Some(d) if a.base != 16 => d,
        Some(_) => {
            return Err(format!(
                "operand '{spec}': a %rip-relative operand without a symbol"
            ))
        }
        None if disp.is_empty() => 0,
        None => {
            // `sym`, `sym+16`, `16+sym`, `sym-8`: an absolute address once the symbol's is
            // known, so the operand no longer needs %rip.
            let (name, off) = split_symbol(disp)
                .ok_or_else(|| format!("operand '{spec}': bad displacement '{disp}'"))?;
            let addr = sym(name).ok_or_else(|| {
                format!("operand '{spec}': symbol '{name}' is not in the file's symbol table")
            })?;
            if a.base == 16 {
                a.base = abi::UREG_NONE;
            }
            (addr as i64).wrapping_add(off)
        }
    };
    Ok(a)
}

/// `sym+N`, `N+sym`, `sym-N`, `sym`: the symbol and the offset.
fn split_symbol(d: &str) -> Option<(&str, i64)> {
    let ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_.$@".contains(&c))
            && !s.as_bytes()[0].is_ascii_digit()
    };
    if ok(d) {
        return Some((d, 0));
    }
    if let Some((a, b)) = d.split_once('+') {
        if ok(a) {
            return Some((a, int(b)?));
        }
        if ok(b) {
            return Some((b, int(a)?));
        }
    }
    let (a, b) = d.rsplit_once('-')?;
    ok(a).then_some((a, -int(b)?))
}

/// Parses a whole argument specification (blank-separated operands).
pub fn parse_args(spec: &str, sym: &dyn Fn(&str) -> Option<u64>) -> Result<Vec<UsdtArg>, String> {
    let v: Vec<UsdtArg> = spec
        .split_whitespace()
        .map(|s| parse_arg(s, sym))
        .collect::<Result<_, _>>()?;
    if v.len() > abi::USDT_MAX_ARGS {
        return Err(format!(
            "{} operands (at most {})",
            v.len(),
            abi::USDT_MAX_ARGS
        ));
    }
    Ok(v)
}

/// The address of symbol `name` of ELF image `data` (`.symtab`, else `.dynsym`).
fn symbol(data: &[u8], name: &str) -> Option<u64> {
    let f = object::File::parse(data).ok()?;
    let hit = |s: object::Symbol<'_, '_>| {
        (s.name() == Ok(name) && !s.is_undefined()).then(|| s.address())
    };
    f.symbols()
        .find_map(hit)
        .or_else(|| f.dynamic_symbols().find_map(hit))
}

/// The USDT providers of process `pid`'s load objects, sorted, each once.
pub fn providers(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = process::load_objects(pid)
        .unwrap_or_default()
        .iter()
        .filter_map(|o| process::elf(&o.path))
        .flat_map(|e| sites(&e.data).unwrap_or_default())
        .map(|s| s.provider)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether probe name pattern `pat` names site name `name` (DTrace shows `__` as `-`).
fn name_matches(pat: &str, name: &str) -> bool {
    pat.is_empty() || glob_match(pat, name) || glob_match(pat, &name.replace("__", "-"))
}

/// Resolves `PROVIDERPID:module:func:name` to the USDT sites it names in process `pid`;
/// `Ok(None)` if no load object of the process has provider `prov`.
pub fn resolve(
    prov: &str,
    pid: u32,
    module: &str,
    func: &str,
    name: &str,
) -> Result<Option<Vec<UserProbe>>, String> {
    let objs = process::load_objects(pid)?;
    resolve_in(prov, pid, &objs, &process::elf, module, func, name)
}

/// [`resolve`] against load objects `objs` of process `pid` whose files `elf` reads: the
/// part that reads the (untrusted) ELF files and notes, which the fuzzers drive.
pub fn resolve_in(
    prov: &str,
    pid: u32,
    objs: &[process::LoadObject],
    elf: &dyn Fn(&str) -> Option<std::rc::Rc<Elf>>,
    module: &str,
    func: &str,
    name: &str,
) -> Result<Option<Vec<UserProbe>>, String> {
    let mut any_provider = false;
    let mut v = Vec::new();
    let glob = super::fbt::is_glob(module)
        || super::fbt::is_glob(func)
        || super::fbt::is_glob(name)
        || func.is_empty()
        || name.is_empty();
    for obj in objs {
        let Some(e) = elf(&obj.path) else {
            continue;
        };
        let all = sites(&e.data).map_err(|m| format!("{}: {m}", obj.path))?;
        let mine: Vec<&Site> = all.iter().filter(|s| s.provider == prov).collect();
        if mine.is_empty() {
            continue;
        }
        any_provider = true;
        if !process::module_matches(module, obj) {
            continue;
        }
        for s in mine {
            let fname = e.syms.function_at(s.pc).map_or("", |f| f.0);
            if !(func.is_empty() || glob_match(func, fname)) || !name_matches(name, &s.name) {
                continue;
            }
            v.push(site_probe(prov, pid, obj, &e, s, glob)?);
        }
    }
    Ok(any_provider.then_some(v))
}

/// The uprobe of USDT site `s` of load object `obj`.
fn site_probe(
    prov: &str,
    pid: u32,
    obj: &process::LoadObject,
    e: &Elf,
    s: &Site,
    optional: bool,
) -> Result<UserProbe, String> {
    let fname = e.syms.function_at(s.pc).map_or("", |f| f.0);
    let what = format!("USDT probe {prov}:{}", s.name);
    let offset = e
        .syms
        .file_offset(s.pc)
        .ok_or_else(|| format!("{what} of {}: its address is in no load segment", obj.path))?;
    let ref_ctr = match s.semaphore {
        0 => 0,
        a => e.syms.file_offset(a).ok_or_else(|| {
            format!(
                "{what} of {}: its semaphore is in no load segment",
                obj.path
            )
        })?,
    };
    let bias = process::load_bias(obj, e).unwrap_or(0);
    let sym = |n: &str| symbol(&e.data, n).map(|a| a.wrapping_add(bias));
    let args = parse_args(&s.args, &sym)
        .map_err(|m| format!("{what} of {}: arguments '{}': {m}", obj.path, s.args))?;
    Ok(UserProbe {
        name: probe_name(&format!("{prov}{pid}"), &obj.name, fname, &s.name),
        path: obj.path.clone(),
        offset,
        ref_ctr,
        roff: 0,
        pid,
        args,
        optional,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nosym(_: &str) -> Option<u64> {
        None
    }

    #[test]
    fn operands() {
        let a = parse_arg("-4@%edi", &nosym).unwrap();
        assert_eq!(
            (a.kind, a.size, a.is_signed, a.base),
            (abi::USDT_ARG_REG, 4, 1, 14)
        );
        let a = parse_arg("8@-16(%rbp)", &nosym).unwrap();
        assert_eq!(
            (a.kind, a.size, a.base, a.index, a.value),
            (abi::USDT_ARG_MEM, 8, 4, abi::UREG_NONE, -16)
        );
        let a = parse_arg("4@$5", &nosym).unwrap();
        assert_eq!((a.kind, a.size, a.value), (abi::USDT_ARG_CONST, 4, 5));
        let a = parse_arg("-8@$-3", &nosym).unwrap();
        assert_eq!((a.is_signed, a.value), (1, -3));
        let a = parse_arg("8@(%rax,%rdx,8)", &nosym).unwrap();
        assert_eq!((a.base, a.index, a.scale, a.value), (10, 12, 8, 0));
        let a = parse_arg("2@0x10(,%r12,4)", &nosym).unwrap();
        assert_eq!(
            (a.base, a.index, a.scale, a.value),
            (abi::UREG_NONE, 3, 4, 16)
        );
        let a = parse_arg("1@%r8b", &nosym).unwrap();
        assert_eq!((a.base, a.size), (9, 1));
        let a = parse_arg("8@%r15", &nosym).unwrap();
        assert_eq!(a.base, 0);
        let a = parse_arg("8@%rsp", &nosym).unwrap();
        assert_eq!(a.base, 19);
        let sym = |n: &str| (n == "counter").then_some(0x7000_0000u64);
        for (spec, want) in [
            ("8@counter(%rip)", 0x7000_0000),
            ("8@16+counter(%rip)", 0x7000_0010),
            ("8@counter+16(%rip)", 0x7000_0010),
            ("8@counter-8(%rip)", 0x6fff_fff8),
        ] {
            let a = parse_arg(spec, &sym).unwrap();
            assert_eq!(
                (a.kind, a.base, a.index, a.value),
                (abi::USDT_ARG_MEM, abi::UREG_NONE, abi::UREG_NONE, want),
                "{spec}"
            );
        }
        for bad in [
            "3@%eax",
            "8@%ah",
            "8@%fs:0x28",
            "8@(%rax",
            "8@missing(%rip)",
            "8@16(%rip)",
            "8@(%rax,%rbx,3)",
            "8@%rip",
        ] {
            assert!(parse_arg(bad, &sym).is_err(), "{bad}");
        }
        let e = parse_args(&["4@$1"; 13].join(" "), &nosym).unwrap_err();
        assert!(e.contains("at most 12"), "{e}");
        assert_eq!(parse_args("", &nosym).unwrap(), []);
    }

    #[test]
    fn names() {
        assert!(name_matches("query-start", "query__start"));
        assert!(name_matches("query__start", "query__start"));
        assert!(name_matches("", "x"));
        assert!(!name_matches("y", "x"));
    }
}
