//! Types as `print()` shows them: each object's layout and C names, resolved at compile
//! time into a tree of its own, which the tool formats a recorded object's bytes with.

use super::{Ty, TypeEnv};

/// What a `tracemem()` or `print()` record (a printf record of a format of its own) shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrintSpec {
    /// `tracemem()`: the bytes, as a hex dump.
    Tracemem,
    /// `print()`: the object of type `ty`; `ptr` when it was given by a pointer, whose
    /// value the record carries first.
    Print {
        /// The object's type.
        ty: PType,
        /// Whether the argument was a pointer (printed `0x... = *` first).
        ptr: bool,
    },
}

/// A type for `print()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PType {
    /// An integer of `size` bytes; one byte is a character.
    Int {
        /// C name.
        name: String,
        /// Bytes.
        size: u8,
        /// Signedness.
        signed: bool,
    },
    /// A floating-point number of `size` bytes.
    Float {
        /// C name.
        name: String,
        /// Bytes.
        size: u8,
    },
    /// A pointer.
    Ptr {
        /// C name (`struct page *`).
        name: String,
    },
    /// D's `string`: its bytes up to a NUL.
    Str {
        /// Bytes.
        size: u64,
    },
    /// An array of `n` elements of `esize` bytes.
    Array {
        /// C name (`char [5]`).
        name: String,
        /// Element type.
        elem: Box<PType>,
        /// Element count.
        n: u64,
        /// Element size.
        esize: u64,
    },
    /// A struct or union.
    Sou {
        /// C name (`struct foo`; `struct`, `union` for an anonymous one).
        name: String,
        /// Members in order.
        members: Vec<PMember>,
    },
}

/// A member of a struct or union for `print()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PMember {
    /// Name.
    pub name: String,
    /// Byte offset (of a bit-field's storage unit).
    pub off: u64,
    /// A bit-field's shift and width.
    pub bits: Option<(u8, u8)>,
    /// Type.
    pub ty: PType,
}

/// Deepest nesting of structs and arrays resolved (pointers are not followed).
const MAX_NEST: u32 = 32;

impl TypeEnv {
    /// The `print()` type of `ty`.
    pub(crate) fn ptype(&self, ty: &Ty, strsize: u64) -> PType {
        self.ptype_at(ty, strsize, 0)
    }

    fn ptype_at(&self, ty: &Ty, strsize: u64, depth: u32) -> PType {
        let name = print_name(ty);
        match ty {
            Ty::Int { size, signed } => PType::Int {
                name,
                size: *size,
                signed: *signed,
            },
            Ty::Float(size) => PType::Float { name, size: *size },
            Ty::Ptr(_) | Ty::Void | Ty::Stack => PType::Ptr { name },
            Ty::Str => PType::Str { size: strsize },
            Ty::Array(e, n) if depth < MAX_NEST => PType::Array {
                name,
                elem: Box::new(self.ptype_at(e, strsize, depth + 1)),
                n: *n,
                esize: self.size(e, strsize),
            },
            Ty::Sou(i, _) if depth < MAX_NEST => PType::Sou {
                name,
                members: self.sous.get(*i).map_or_else(Vec::new, |s| {
                    s.members
                        .iter()
                        .map(|m| PMember {
                            name: m.name.clone(),
                            off: m.off,
                            bits: m.bits,
                            ty: self.ptype_at(&m.ty, strsize, depth + 1),
                        })
                        .collect()
                }),
            },
            Ty::Array(..) | Ty::Sou(..) => PType::Sou {
                name,
                members: vec![],
            },
        }
    }
}

/// The C name of `ty` as `print()` shows it: an anonymous struct or union is `struct` or
/// `union`, 64-bit integers `long` and `unsigned long` as in the kernel's BTF.
fn print_name(ty: &Ty) -> String {
    match ty {
        Ty::Int { size: 8, signed } => {
            if *signed {
                "long".into()
            } else {
                "unsigned long".into()
            }
        }
        Ty::Sou(_, n) if n.contains("(anon") => n.split(' ').next().unwrap_or("struct").into(),
        Ty::Ptr(t) => format!("{} *", print_name(t)),
        Ty::Array(t, n) => format!("{} [{n}]", print_name(t)),
        t => t.name(),
    }
}
