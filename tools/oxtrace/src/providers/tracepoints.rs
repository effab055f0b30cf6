//! Kernel tracepoints: the events of tracefs and their format files.
//!
//! A tracepoint probe (`tracepoint:SUBSYS:EVENT`, `sdt:SUBSYS::EVENT`) sees the event's
//! record as the kernel's trace events build it: the layout is the event's `format` file
//! (`/sys/kernel/tracing/events/SUBSYS/EVENT/format`), which this module parses, so
//! `args->child_pid` compiles to a read of the right size and signedness at the right
//! offset of the record.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs;

thread_local! {
    /// The formats read so far, by `SUBSYS:EVENT`.
    static KNOWN: RefCell<BTreeMap<String, Format>> = const { RefCell::new(BTreeMap::new()) };
}

/// Keeps `f` for [`known`]: the compiler reads each format once, when a probe names it.
pub fn remember(f: Format) {
    KNOWN.with(|m| m.borrow_mut().insert(f.name.clone(), f));
}

/// The format of `SUBSYS:EVENT` if [`remember`]ed.
pub fn known(name: &str) -> Option<Format> {
    KNOWN.with(|m| m.borrow().get(name).cloned())
}

/// What a field of a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer (or pointer) of the field's size.
    Int,
    /// `char name[N]`: a string of at most N bytes in the record.
    CharArray,
    /// `__data_loc char[] name`: a 32-bit word, the string's offset in the record (low 16
    /// bits) and length (high 16 bits).
    DataLoc,
    /// Anything else (arrays of other types, structures): not readable from D.
    Other,
}

/// One field of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its C declaration without the name (`pid_t`, `char[16]`).
    pub ctype: String,
    /// Byte offset in the record.
    pub offset: u32,
    /// Bytes.
    pub size: u32,
    /// Whether the integer is signed.
    pub signed: bool,
    /// What it holds.
    pub kind: FieldKind,
}

/// An event's format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// `SUBSYS:EVENT`.
    pub name: String,
    /// The event's id (perf's tracepoint `config`).
    pub id: u64,
    /// Its fields, the common ones (`common_pid`, ...) first.
    pub fields: Vec<Field>,
}

impl Format {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parses a format file of event `name`; the error says which line is wrong and why.
pub fn parse_format(name: &str, text: &str) -> Result<Format, String> {
    let mut id = None;
    let mut fields = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("ID:") {
            id = Some(
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("line {}: invalid ID '{}'", n + 1, v.trim()))?,
            );
        } else if line.starts_with("field:") {
            fields.push(parse_field(line).map_err(|e| format!("line {}: {e}", n + 1))?);
        }
    }
    let id = id.ok_or("no ID line")?;
    if fields.is_empty() {
        return Err("no field lines".into());
    }
    Ok(Format {
        name: name.to_string(),
        id,
        fields,
    })
}

/// `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`
fn parse_field(line: &str) -> Result<Field, String> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, None);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once(':')
            .ok_or_else(|| format!("'{part}' is not key:value"))?;
        let num = || {
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("invalid {k} '{}'", v.trim()))
        };
        match k.trim() {
            "field" => decl = Some(v.trim()),
            "offset" => offset = Some(num()?),
            "size" => size = Some(num()?),
            "signed" => signed = Some(num()? != 0),
            _ => {}
        }
    }
    let decl = decl.ok_or("no declaration")?;
    let (offset, size) = (offset.ok_or("no offset")?, size.ok_or("no size")?);
    // The name is the last identifier, before any array bounds (`__data_loc char[] name`
    // has empty ones before it).
    let owned = decl.replace("[]", "");
    let decl = owned.as_str();
    let head = decl.split('[').next().unwrap_or(decl).trim_end();
    // After the last character that is not part of an identifier (any width: a file
    // may hold any bytes, and a multi-byte character must not be split).
    let start = head
        .char_indices()
        .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let name = &head[start..];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("no field name in '{decl}'"));
    }
    let ty = head[..start].trim();
    let bounds = decl[head.len()..].trim();
    let ctype = format!("{ty}{bounds}");
    let is_char = |t: &str| {
        let t = t.trim_start_matches("const ").trim();
        matches!(t, "char" | "unsigned char" | "signed char" | "u8" | "s8")
    };
    let kind = if let Some(t) = ty.strip_prefix("__data_loc ") {
        if is_char(t) && size == 4 {
            FieldKind::DataLoc
        } else {
            FieldKind::Other
        }
    } else if !bounds.is_empty() {
        if is_char(ty) {
            FieldKind::CharArray
        } else {
            FieldKind::Other
        }
    } else if matches!(size, 1 | 2 | 4 | 8) {
        FieldKind::Int
    } else {
        FieldKind::Other
    };
    Ok(Field {
        name: name.to_string(),
        ctype,
        offset,
        size,
        signed: signed.unwrap_or(false),
        kind,
    })
}

/// The events of tracefs as `(subsystem, event)`, sorted; empty if tracefs is not mounted.
pub fn events() -> Vec<(String, String)> {
    let Some(t) = super::tracefs::tracefs() else {
        return Vec::new();
    };
    let root = format!("{t}/events");
    let mut v = Vec::new();
    let dirs = |p: &str| -> Vec<String> {
        fs::read_dir(p)
            .map(|rd| {
                rd.filter_map(|e| {
                    let e = e.ok()?;
                    e.file_type().ok()?.is_dir().then_some(())?;
                    e.file_name().into_string().ok()
                })
                .collect()
            })
            .unwrap_or_default()
    };
    for s in dirs(&root) {
        for e in dirs(&format!("{root}/{s}")) {
            v.push((s.clone(), e));
        }
    }
    v.sort();
    v
}

/// Reads and parses the format of `subsys:event`.
pub fn load(subsys: &str, event: &str) -> Result<Format, String> {
    let root = super::tracefs::tracefs()
        .ok_or("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)")?;
    let path = format!("{root}/events/{subsys}/{event}/format");
    let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    parse_format(&format!("{subsys}:{event}"), &text)
        .map_err(|e| format!("cannot parse the format of {subsys}:{event}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORK: &str = "name: sched_process_fork
ID: 301
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;
\tfield:const void * ptr;\toffset:32;\tsize:8;\tsigned:0;
\tfield:unsigned long args[6];\toffset:40;\tsize:48;\tsigned:0;

print fmt: \"comm=%s pid=%d\", REC->parent_comm, REC->parent_pid
";

    /// Found by the fuzzer (tests/fuzz.rs): a multi-byte character before the field's
    /// name split the name at a byte inside it, a panic.
    #[test]
    fn a_wide_character_before_the_name() {
        let text =
            "ID: 1\n\tfield:char c\u{fffd}parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n";
        let f = parse_format("fuzz:event", text).unwrap();
        assert_eq!(f.fields[0].name, "parent_comm");
        assert_eq!(f.fields[0].ctype, "char c\u{fffd}[16]");
        let e = parse_format(
            "fuzz:event",
            "ID: 1\n\tfield:int \u{e9};\toffset:0;\tsize:4;\n",
        )
        .unwrap_err();
        assert!(e.starts_with("line 2: no field name"), "{e}");
    }

    #[test]
    fn formats_parse() {
        let f = parse_format("sched:sched_process_fork", FORK).unwrap();
        assert_eq!(f.id, 301);
        assert_eq!(f.fields.len(), 9);
        let pid = f.field("parent_pid").unwrap();
        assert_eq!((pid.offset, pid.size, pid.signed), (24, 4, true));
        assert_eq!(pid.ctype, "pid_t");
        assert_eq!(pid.kind, FieldKind::Int);
        let comm = f.field("parent_comm").unwrap();
        assert_eq!(
            (comm.kind, comm.ctype.as_str()),
            (FieldKind::CharArray, "char[16]")
        );
        assert_eq!(f.field("name").unwrap().kind, FieldKind::DataLoc);
        let p = f.field("ptr").unwrap();
        assert_eq!(
            (p.kind, p.size, p.ctype.as_str()),
            (FieldKind::Int, 8, "const void *")
        );
        assert_eq!(f.field("args").unwrap().kind, FieldKind::Other);
        assert!(!f.field("common_type").unwrap().signed);
    }

    #[test]
    fn bad_formats_say_why() {
        assert_eq!(parse_format("a:b", "format:\n").unwrap_err(), "no ID line");
        assert_eq!(
            parse_format("a:b", "ID: x\n").unwrap_err(),
            "line 1: invalid ID 'x'"
        );
        assert_eq!(
            parse_format("a:b", "ID: 1\n\tfield:int x;\toffset:zz;\tsize:4;\n").unwrap_err(),
            "line 2: invalid offset 'zz'"
        );
        assert_eq!(
            parse_format("a:b", "ID: 1\n\tfield:int x;\tsize:4;\n").unwrap_err(),
            "line 2: no offset"
        );
        assert_eq!(
            parse_format("a:b", "ID: 1\n").unwrap_err(),
            "no field lines"
        );
    }
}
