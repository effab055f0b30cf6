//! Writing BTF blobs: synthetic kernels for the tests of the parser and the compiler.

use super::header::{HEADER_LEN, MAGIC, VERSION};

/// A BTF blob under construction; each method adds one type and returns its id.
#[derive(Default)]
pub struct Builder {
    words: Vec<u32>,
    strings: Vec<u8>,
    next: u32,
}

fn info(kind: u32, vlen: usize, kflag: bool) -> u32 {
    (u32::from(kflag) << 31) | (kind << 24) | vlen as u32
}

impl Builder {
    /// An empty blob (ids start at 1).
    pub fn new() -> Builder {
        Builder {
            words: Vec::new(),
            strings: vec![0],
            next: 1,
        }
    }

    fn name(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        off
    }

    fn add(&mut self, name: &str, info: u32, size_or_type: u32, extra: &[u32]) -> u32 {
        let n = self.name(name);
        self.words.extend([n, info, size_or_type]);
        self.words.extend_from_slice(extra);
        self.next += 1;
        self.next - 1
    }

    /// An integer of `size` bytes.
    pub fn int(&mut self, name: &str, size: u32, signed: bool) -> u32 {
        let enc = (u32::from(signed) << 24) | (size * 8);
        self.add(name, info(1, 0, false), size, &[enc])
    }

    /// A floating-point type of `size` bytes (`BTF_KIND_FLOAT`).
    pub fn float(&mut self, name: &str, size: u32) -> u32 {
        self.add(name, info(16, 0, false), size, &[])
    }

    /// A pointer to `to`.
    pub fn ptr(&mut self, to: u32) -> u32 {
        self.add("", info(2, 0, false), to, &[])
    }

    /// An array of `n` `elem`s (indexed by `index`, an integer type).
    pub fn array(&mut self, elem: u32, index: u32, n: u32) -> u32 {
        self.add("", info(3, 0, false), 0, &[elem, index, n])
    }

    /// A struct or union of `size` bytes; members are (name, type, bit offset, bit-field
    /// width or 0).
    pub fn sou(
        &mut self,
        union: bool,
        name: &str,
        size: u32,
        members: &[(&str, u32, u32, u8)],
    ) -> u32 {
        let kflag = members.iter().any(|m| m.3 != 0);
        let mut extra = Vec::new();
        for (n, ty, off, bits) in members {
            let o = if kflag {
                (u32::from(*bits) << 24) | off
            } else {
                *off
            };
            extra.extend([self.name(n), *ty, o]);
        }
        let kind = if union { 5 } else { 4 };
        self.add(name, info(kind, members.len(), kflag), size, &extra)
    }

    /// A forward declaration.
    pub fn fwd(&mut self, union: bool, name: &str) -> u32 {
        self.add(name, info(7, 0, union), 0, &[])
    }

    /// An enum of 4 bytes with `values`.
    pub fn enumeration(&mut self, name: &str, values: &[(&str, i32)]) -> u32 {
        let mut extra = Vec::new();
        for (n, v) in values {
            extra.extend([self.name(n), *v as u32]);
        }
        self.add(name, info(6, values.len(), true), 4, &extra)
    }

    /// A typedef.
    pub fn typedef(&mut self, name: &str, to: u32) -> u32 {
        self.add(name, info(8, 0, false), to, &[])
    }

    /// `const to`.
    pub fn constant(&mut self, to: u32) -> u32 {
        self.add("", info(10, 0, false), to, &[])
    }

    /// A function and its prototype; returns the function's id.
    pub fn func(&mut self, name: &str, ret: u32, params: &[(&str, u32)]) -> u32 {
        let mut extra = Vec::new();
        for (n, ty) in params {
            extra.extend([self.name(n), *ty]);
        }
        let proto = self.add("", info(13, params.len(), false), ret, &extra);
        self.add(name, info(12, 0, false), proto, &[])
    }

    /// A global variable.
    pub fn var(&mut self, name: &str, ty: u32) -> u32 {
        self.add(name, info(14, 0, false), ty, &[1])
    }

    /// A data section of `size` bytes holding `vars` (variable id, offset, size).
    pub fn datasec(&mut self, name: &str, size: u32, vars: &[(u32, u32, u32)]) -> u32 {
        let extra: Vec<u32> = vars.iter().flat_map(|v| [v.0, v.1, v.2]).collect();
        self.add(name, info(15, vars.len(), false), size, &extra)
    }

    /// The blob.
    pub fn finish(&self) -> Vec<u8> {
        let tlen = self.words.len() as u32 * 4;
        let mut b = Vec::new();
        b.extend(MAGIC.to_le_bytes());
        b.extend([VERSION, 0]);
        for w in [HEADER_LEN as u32, 0, tlen, tlen, self.strings.len() as u32] {
            b.extend(w.to_le_bytes());
        }
        for w in &self.words {
            b.extend(w.to_le_bytes());
        }
        b.extend_from_slice(&self.strings);
        b
    }
}
