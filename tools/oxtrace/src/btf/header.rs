//! The BTF header: where the type and string sections are.

/// `BTF_MAGIC`, little-endian on disk for a little-endian kernel.
pub const MAGIC: u16 = 0xeb9f;
/// The only BTF version there is.
pub const VERSION: u8 = 1;
/// Size of the header this parser knows (`struct btf_header`).
pub const HEADER_LEN: usize = 24;

/// The sections of a BTF blob, as byte ranges of the whole blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The type records.
    pub types: std::ops::Range<usize>,
    /// The NUL-terminated names the records point into.
    pub strings: std::ops::Range<usize>,
}

pub(super) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let w = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

impl Header {
    /// Check the magic and version and that both sections lie inside `b`.
    pub fn parse(b: &[u8]) -> Result<Header, String> {
        if b.len() < HEADER_LEN {
            return Err(format!("{} bytes is too short for a BTF header", b.len()));
        }
        let magic = u16::from_le_bytes([b[0], b[1]]);
        if magic != MAGIC {
            // A big-endian blob has the magic swapped: not for this (x86-64) tool.
            return Err(format!(
                "bad BTF magic {magic:#06x} (expected {MAGIC:#06x})"
            ));
        }
        if b[2] != VERSION {
            return Err(format!("unsupported BTF version {}", b[2]));
        }
        let field = |i: usize| u32_at(b, 4 + 4 * i).unwrap_or(0) as usize;
        let hdr_len = field(0);
        if hdr_len < HEADER_LEN || hdr_len > b.len() {
            return Err(format!("bad BTF header length {hdr_len}"));
        }
        let section = |off: usize, len: usize, what: &str| {
            let start = hdr_len.checked_add(off);
            let end = start.and_then(|s| s.checked_add(len));
            match (start, end) {
                (Some(s), Some(e)) if e <= b.len() => Ok(s..e),
                _ => Err(format!(
                    "BTF {what} section [{off}, +{len}) is outside the blob"
                )),
            }
        };
        let types = section(field(1), field(2), "type")?;
        let strings = section(field(3), field(4), "string")?;
        if types.len() % 4 != 0 {
            return Err("BTF type section is not a whole number of words".into());
        }
        Ok(Header { types, strings })
    }
}
