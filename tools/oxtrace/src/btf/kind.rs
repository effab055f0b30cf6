//! BTF type records: one `struct btf_type` and the kind-specific data after it.

use super::header::u32_at;

/// A member of a struct or union.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Offset of the name in the string section (0: an anonymous member).
    pub name: u32,
    /// Type id.
    pub ty: u32,
    /// Offset from the start of the struct, in bits.
    pub bit_off: u32,
    /// Width of a bit-field in bits; 0 for an ordinary member.
    pub bits: u8,
}

/// A parameter of a function prototype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Offset of the name (0 when the prototype has none).
    pub name: u32,
    /// Type id (0 with no name: the `...` of a variadic function).
    pub ty: u32,
}

/// What a type is. Ids name other types; 0 is `void`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An integer of `size` bytes.
    Int {
        /// Bytes.
        size: u32,
        /// Signedness (`BTF_INT_SIGNED`).
        signed: bool,
        /// `_Bool` (`BTF_INT_BOOL`).
        bool: bool,
    },
    /// A pointer.
    Ptr(u32),
    /// An array of `n` elements.
    Array {
        /// Element type.
        elem: u32,
        /// Element count.
        n: u32,
    },
    /// A struct (`union` when set).
    Sou {
        /// Whether it is a union.
        union: bool,
        /// Bytes.
        size: u32,
        /// Members in order.
        members: Vec<Member>,
    },
    /// An enum (also `ENUM64`); enumerator values are not kept.
    Enum {
        /// Bytes.
        size: u32,
        /// Signedness (the kind flag).
        signed: bool,
    },
    /// A forward declaration of a struct (`union` when set).
    Fwd {
        /// Whether it is a union.
        union: bool,
    },
    /// A typedef of a type.
    Typedef(u32),
    /// `const`, `volatile`, `restrict` or a type tag: the same type for a reader.
    Qual(u32),
    /// A function: its prototype.
    Func(u32),
    /// A function prototype.
    Proto {
        /// Return type.
        ret: u32,
        /// Parameters in order.
        params: Vec<Param>,
    },
    /// A floating-point type of `size` bytes.
    Float(u32),
    /// Anything a reader of types does not need (variables, data sections, decl tags).
    Other,
}

/// One type: its name (an offset into the string section) and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Type {
    /// Offset of the name in the string section (0: anonymous).
    pub name: u32,
    /// What it is.
    pub kind: Kind,
}

// The kind numbers of `include/uapi/linux/btf.h`.
const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const UNION: u32 = 5;
const ENUM: u32 = 6;
const FWD: u32 = 7;
const TYPEDEF: u32 = 8;
const VOLATILE: u32 = 9;
const CONST: u32 = 10;
const RESTRICT: u32 = 11;
const FUNC: u32 = 12;
const FUNC_PROTO: u32 = 13;
const VAR: u32 = 14;
const DATASEC: u32 = 15;
const FLOAT: u32 = 16;
const DECL_TAG: u32 = 17;
const TYPE_TAG: u32 = 18;
const ENUM64: u32 = 19;

/// Decode the record at `off` of `b` (the type section): the type and the offset of the
/// next record.
pub fn decode(b: &[u8], off: usize) -> Result<(Type, usize), String> {
    let bad = || format!("BTF type record at byte {off} is truncated");
    let word = |i: usize| u32_at(b, off + 4 * i).ok_or_else(bad);
    let (name, info, size_or_type) = (word(0)?, word(1)?, word(2)?);
    let vlen = (info & 0xffff) as usize;
    let kind = (info >> 24) & 0x1f;
    let kflag = info >> 31 == 1;
    let data = off + 12;
    // Words of kind-specific data after the 12-byte head.
    let extra = |per: usize| vlen.checked_mul(per).ok_or_else(bad);
    let at = |i: usize| u32_at(b, data + 4 * i).ok_or_else(bad);
    let (k, words) = match kind {
        INT => {
            let enc = at(0)? >> 24;
            let k = Kind::Int {
                size: size_or_type,
                signed: enc & 1 != 0,
                bool: enc & 4 != 0,
            };
            (k, 1)
        }
        PTR => (Kind::Ptr(size_or_type), 0),
        ARRAY => (
            Kind::Array {
                elem: at(0)?,
                n: at(2)?,
            },
            3,
        ),
        STRUCT | UNION => {
            let n = extra(3)?;
            let mut members = Vec::with_capacity(vlen);
            for i in 0..vlen {
                let off = at(3 * i + 2)?;
                // With the kind flag, the offset word holds the bit-field width on top.
                let (bit_off, bits) = if kflag {
                    (off & 0x00ff_ffff, (off >> 24) as u8)
                } else {
                    (off, 0)
                };
                members.push(Member {
                    name: at(3 * i)?,
                    ty: at(3 * i + 1)?,
                    bit_off,
                    bits,
                });
            }
            let k = Kind::Sou {
                union: kind == UNION,
                size: size_or_type,
                members,
            };
            (k, n)
        }
        ENUM => (
            Kind::Enum {
                size: size_or_type,
                signed: kflag,
            },
            extra(2)?,
        ),
        ENUM64 => (
            Kind::Enum {
                size: size_or_type,
                signed: kflag,
            },
            extra(3)?,
        ),
        FWD => (Kind::Fwd { union: kflag }, 0),
        TYPEDEF => (Kind::Typedef(size_or_type), 0),
        VOLATILE | CONST | RESTRICT | TYPE_TAG => (Kind::Qual(size_or_type), 0),
        FUNC => (Kind::Func(size_or_type), 0),
        FUNC_PROTO => {
            let mut params = Vec::with_capacity(vlen);
            for i in 0..vlen {
                params.push(Param {
                    name: at(2 * i)?,
                    ty: at(2 * i + 1)?,
                });
            }
            let k = Kind::Proto {
                ret: size_or_type,
                params,
            };
            (k, extra(2)?)
        }
        VAR | DECL_TAG => (Kind::Other, 1),
        DATASEC => (Kind::Other, extra(3)?),
        FLOAT => (Kind::Float(size_or_type), 0),
        k => return Err(format!("unknown BTF kind {k} at byte {off}")),
    };
    let next = words
        .checked_mul(4)
        .and_then(|w| data.checked_add(w))
        .filter(|&n| n <= b.len())
        .ok_or_else(bad)?;
    Ok((Type { name, kind: k }, next))
}
