//! Value types of the D subset, C's arithmetic conversions, and the names of the built-in
//! variables, actions and aggregating functions.

use super::ast::TypeName;
use super::KeyKind;
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
    /// A kernel stack (`stack()`): a string of encoded frames to the kernel, printed
    /// symbolized by the tool.
    Stack,
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
            Ty::Stack => "stack".into(),
        }
    }

    pub(super) fn is_scalar(&self) -> bool {
        matches!(self, Ty::Int { .. } | Ty::Ptr(_))
    }

    pub(super) fn int_type(&self) -> IntType {
        match self {
            Ty::Int { size, signed } => IntType::new(*size, *signed),
            _ => IntType::U64,
        }
    }

    pub(super) fn signed(&self) -> bool {
        matches!(self, Ty::Int { signed: true, .. })
    }

    pub(super) fn from_name(t: &TypeName) -> Ty {
        match t {
            TypeName::Int { size, signed } => Ty::Int {
                size: *size,
                signed: *signed,
            },
            TypeName::Str => Ty::Str,
            TypeName::Void => Ty::Void,
            TypeName::Ptr(p) => Ty::Ptr(Box::new(Ty::from_name(p))),
        }
    }

    pub(super) fn key_kind(&self) -> KeyKind {
        match self {
            Ty::Str => KeyKind::Str,
            Ty::Stack => KeyKind::Stack,
            _ => KeyKind::Int,
        }
    }
}

/// C's usual arithmetic conversions on promoted operands.
pub(super) fn arith(a: &Ty, b: &Ty) -> Ty {
    let prom = |t: &Ty| match t {
        Ty::Int { size, .. } if *size < 4 => I32,
        Ty::Int { .. } => t.clone(),
        _ => U64,
    };
    let (a, b) = (prom(a), prom(b));
    match (&a, &b) {
        (
            Ty::Int {
                size: sa,
                signed: ga,
            },
            Ty::Int {
                size: sb,
                signed: gb,
            },
        ) => {
            if sa > sb {
                a
            } else if sb > sa {
                b
            } else {
                Ty::Int {
                    size: *sa,
                    signed: *ga && *gb,
                }
            }
        }
        _ => U64,
    }
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
];
