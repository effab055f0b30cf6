//! Value types of the D subset, C's arithmetic conversions, and the names of the built-in
//! variables, actions and aggregating functions.

use super::syntax::ast::{IntForm, TypeName};
use super::KeyKind;

pub(super) mod btf_types;
pub(crate) mod consts;
mod kvar;
pub mod ptype;
mod scoped;
use oxtrace_core::action::{Builtin, IntType};

/// A value type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    /// An integer.
    Int {
        /// Size in bytes (1, 2, 4, 8).
        size: u8,
        /// Signedness.
        signed: bool,
    },
    /// A string.
    Str,
    /// A pointer into kernel memory, with its pointee.
    Ptr(Box<Ty>),
    /// `void` (only as a pointee).
    Void,
    /// A struct or union declared in the program: its index in [`TypeEnv::sous`] and its
    /// name (`struct foo`).
    Sou(usize, String),
    /// A fixed-size array.
    Array(Box<Ty>, u64),
    /// A kernel stack (`stack()`): a string of encoded frames to the kernel, printed
    /// symbolized by the tool.
    Stack,
    /// `float`, `double` or `long double` (size 4, 8 or 16): data D traces and formats but
    /// does no arithmetic on. A float or double value is its bits in a register; a long
    /// double value is the address of its 16 bytes (it fits no register).
    Float(u8),
}

/// A member of a D-declared struct or union.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Name.
    pub name: String,
    /// Type.
    pub ty: Ty,
    /// Byte offset (of the storage unit of a bit-field).
    pub off: u64,
    /// A bit-field's shift in its storage unit (the member's type) and width.
    pub bits: Option<(u8, u8)>,
}

/// A struct or union declared in the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SouDef {
    /// `struct foo` or `union foo`.
    pub name: String,
    /// Members in order (empty while only forward-referenced).
    pub members: Vec<Member>,
    /// Size in bytes.
    pub size: u64,
    /// Alignment in bytes.
    pub align: u64,
    /// Whether the definition has been seen.
    pub complete: bool,
}

/// The types, enumerators and inlines a program declares.
#[derive(Clone, Debug, Default)]
pub struct TypeEnv {
    /// Structs and unions.
    pub sous: Vec<SouDef>,
    /// Typedef names.
    pub typedefs: std::collections::HashMap<String, Ty>,
    /// Enumerators and their values.
    pub enums: std::collections::HashMap<String, i64>,
    /// Enum tags declared.
    pub enum_tags: std::collections::HashSet<String>,
    /// The kernel's types (BTF) and those imported from it.
    pub btf: btf_types::BtfTypes,
}

impl TypeEnv {
    /// Index of `struct name` (`union` when `union`), if declared.
    pub fn sou(&self, name: &str, union: bool) -> Option<usize> {
        let full = format!("{} {name}", if union { "union" } else { "struct" });
        self.sous.iter().position(|s| s.name == full)
    }

    /// Size of a value of `ty` in bytes (strings count `strsize`).
    pub fn size(&self, ty: &Ty, strsize: u64) -> u64 {
        match ty {
            Ty::Int { size, .. } | Ty::Float(size) => *size as u64,
            Ty::Str => strsize,
            // The encoded frames, as the string the kernel holds.
            // (A user stack or symbol value fits a key string too.)
            Ty::Stack => oxtrace_core::agg::KEY_STR_MAX as u64,
            Ty::Ptr(_) => 8,
            Ty::Void => 1,
            Ty::Sou(i, _) => self.sous.get(*i).map_or(0, |s| s.size),
            Ty::Array(t, n) => self.size(t, strsize).saturating_mul(*n),
        }
    }

    /// Alignment of `ty`.
    pub fn align(&self, ty: &Ty) -> u64 {
        match ty {
            Ty::Int { size, .. } | Ty::Float(size) => *size as u64,
            Ty::Str | Ty::Void | Ty::Stack => 1,
            Ty::Ptr(_) => 8,
            Ty::Sou(i, _) => self.sous.get(*i).map_or(1, |s| s.align),
            Ty::Array(t, _) => self.align(t),
        }
    }

    /// Member `m` of struct/union `ty`.
    pub fn member(&self, ty: &Ty, m: &str) -> Option<&Member> {
        match ty {
            Ty::Sou(i, _) => self.sous.get(*i)?.members.iter().find(|x| x.name == m),
            _ => None,
        }
    }
}

pub(super) const I64: Ty = Ty::Int {
    size: 8,
    signed: true,
};
pub(super) const U64: Ty = Ty::Int {
    size: 8,
    signed: false,
};
pub(super) const I32: Ty = Ty::Int {
    size: 4,
    signed: true,
};
pub(super) const U32: Ty = Ty::Int {
    size: 4,
    signed: false,
};

impl Ty {
    pub(super) fn name(&self) -> String {
        match self {
            Ty::Int { size, signed } => {
                let base = match size {
                    1 => "char",
                    2 => "short",
                    4 => "int",
                    _ => "int64_t",
                };
                match (signed, size) {
                    (true, _) => base.to_string(),
                    (false, 8) => "uint64_t".to_string(),
                    (false, _) => format!("unsigned {base}"),
                }
            }
            Ty::Str => "string".into(),
            Ty::Ptr(t) => format!("{} *", t.name()),
            Ty::Void => "void".into(),
            // An anonymous one (`struct (anon@N)`) as DTrace names it.
            Ty::Sou(_, n) => match n.find(" (anon@") {
                Some(i) => format!("{} (anon)", &n[..i]),
                None => n.clone(),
            },
            Ty::Array(t, n) => format!("{} [{n}]", t.name()),
            Ty::Stack => "stack".into(),
            Ty::Float(4) => "float".into(),
            Ty::Float(8) => "double".into(),
            Ty::Float(_) => "long double".into(),
        }
    }

    /// Whether the type is `float`, `double` or `long double`.
    pub(super) fn is_float(&self) -> bool {
        matches!(self, Ty::Float(_))
    }

    /// Whether the type is an integer.
    pub(super) fn is_int(&self) -> bool {
        matches!(self, Ty::Int { .. })
    }

    pub(super) fn is_scalar(&self) -> bool {
        matches!(self, Ty::Int { .. } | Ty::Ptr(_))
    }

    pub(super) fn int_type(&self) -> IntType {
        match self {
            Ty::Int { size, signed } => IntType::new(*size, *signed),
            // A float's bits, as printf records carry them (see `crate::output::printf::fp_item`).
            Ty::Float(4) => IntType::new(4, false),
            _ => IntType::U64,
        }
    }

    pub(super) fn signed(&self) -> bool {
        matches!(self, Ty::Int { signed: true, .. })
    }

    pub(super) fn key_kind(&self) -> KeyKind {
        match self {
            Ty::Str => KeyKind::Str,
            Ty::Stack => KeyKind::Stack,
            _ => KeyKind::Int,
        }
    }
}

/// The type of an arithmetic, bitwise or `?:` result of integer operands of types `a` and
/// `b`, as DTrace types it: the operand type of greater rank, the rank being its width in
/// bits, one more when unsigned. This is C's usual arithmetic conversion without C's
/// promotion of narrower types to `int`: `(uint8_t)254 + (char)3` is an `unsigned char`
/// (1), as DTrace's own tests print it. A non-integer operand makes a `uint64_t`.
pub(super) fn arith(a: &Ty, b: &Ty) -> Ty {
    let rank = |t: &Ty| match t {
        Ty::Int { size, signed } => Some(8 * *size as u32 + u32::from(!signed)),
        _ => None,
    };
    match (rank(a), rank(b)) {
        (Some(x), Some(y)) if x >= y => a.clone(),
        (Some(_), Some(_)) => b.clone(),
        _ => U64,
    }
}

/// The type of a unary operator's or a shift's result on an operand of type `t`: its own,
/// as DTrace types it (no promotion to `int`); a non-integer makes a `uint64_t`.
pub(super) fn unary_type(t: &Ty) -> Ty {
    match t {
        Ty::Int { .. } => t.clone(),
        _ => U64,
    }
}

/// The C type of integer constant `v` written as `f`: the first of `int`, `unsigned int`,
/// `long`, `unsigned long` that holds it, skipping the 32-bit ones for an `l` suffix, the
/// signed ones for a `u` suffix and, as C does, the unsigned ones for a decimal constant
/// without one. A decimal constant too large for `long` is `unsigned long` (C leaves it
/// without a type; DTrace, like GCC, takes it as unsigned).
pub(super) fn int_const_type(v: u64, f: IntForm) -> Ty {
    [I32, U32, I64, U64]
        .into_iter()
        .filter(|t| !f.long || t.int_type().size() == 8)
        .filter(|t| !(f.unsigned && t.signed()))
        .filter(|t| f.unsigned || f.radix || t.signed())
        .find(|t| {
            let bits = 8 * t.int_type().size() as u32 - u32::from(t.signed());
            bits == 64 || v < 1u64 << bits
        })
        .unwrap_or(U64)
}

pub(super) fn builtin(name: &str) -> Option<(Builtin, Ty)> {
    use Builtin::*;
    Some(match name {
        "pid" => (Pid, I32),
        "tid" => (Tid, I32),
        "ppid" => (Ppid, I32),
        "cpu" => (Cpu, I32),
        "timestamp" => (Timestamp, U64),
        "walltimestamp" => (Walltimestamp, U64),
        "arg0" => (Arg0, I64),
        "arg1" => (Arg1, I64),
        "arg2" => (Arg2, I64),
        "arg3" => (Arg3, I64),
        "arg4" => (Arg4, I64),
        "arg5" => (Arg5, I64),
        "arg6" => (Arg6, I64),
        "arg7" => (Arg7, I64),
        "arg8" => (Arg8, I64),
        "arg9" => (Arg9, I64),
        "errno" => (Errno, I32),
        "caller" => (Caller, U64),
        "vtimestamp" => (Vtimestamp, U64),
        "epid" => (Epid, U32),
        "ipl" => (Ipl, U32),
        "retval" => (Retval, I64),
        "uid" => (Uid, U32),
        "gid" => (Gid, U32),
        "id" => (Id, U32),
        "curthread" => (Curthread, Ty::Ptr(Box::new(Ty::Void))),
        "execname" => (Execname, Ty::Str),
        "probeprov" => (Probeprov, Ty::Str),
        "probemod" => (Probemod, Ty::Str),
        "probefunc" => (Probefunc, Ty::Str),
        "probename" => (Probename, Ty::Str),
        _ => return None,
    })
}

pub(super) const ACTIONS: &[&str] = &[
    "trace",
    "printf",
    "exit",
    "ptwrite",
    "printa",
    "clear",
    "trunc",
    "normalize",
    "denormalize",
    "speculate",
    "commit",
    "discard",
    "system",
    "raise",
    "stop",
    "chill",
    "copyout",
    "copyoutstr",
    "setopt",
    "tracemem",
    "print",
    "freopen",
];

/// Resolve a written type against the declared structs, unions, enums and typedefs.
pub(super) fn resolve_type(env: &TypeEnv, tn: &TypeName) -> Result<Ty, String> {
    Ok(match tn {
        TypeName::Int { size, signed } => Ty::Int {
            size: *size,
            signed: *signed,
        },
        TypeName::Float(n) => Ty::Float(*n),
        TypeName::Str => Ty::Str,
        TypeName::Void => Ty::Void,
        TypeName::Ptr(p) => match &**p {
            // A pointer may name a struct that is not defined (yet).
            TypeName::Sou(n, u) if env.scoped_sou(n, *u).is_none() => {
                return Err(format!(
                    "[D_TYPE_ERR] {} {n} is not defined",
                    if *u { "union" } else { "struct" }
                ))
            }
            _ => Ty::Ptr(Box::new(resolve_type(env, p)?)),
        },
        TypeName::Sou(n, u) => match env.scoped_sou(n, *u) {
            Some(i) => Ty::Sou(i, env.sous[i].name.clone()),
            None => {
                return Err(format!(
                    "[D_TYPE_ERR] {} {n} is not defined",
                    if *u { "union" } else { "struct" }
                ))
            }
        },
        TypeName::Enum(n) => {
            // An anonymous enum (`typedef enum { A, B } ab_t;`) is written with its body.
            if !n.is_empty() && !env.enum_tags.contains(&env.scoped_name(n, "enum ")?) {
                return Err(format!("[D_TYPE_ERR] enum {n} is not defined"));
            }
            I32
        }
        TypeName::Named(n) => match env.typedefs.get(&env.scoped_name(n, "")?) {
            Some(t) => t.clone(),
            None => return Err(format!("[D_TYPE_ERR] type {n} is not defined")),
        },
        TypeName::Array(t, n) => Ty::Array(Box::new(resolve_type(env, t)?), *n),
    })
}
