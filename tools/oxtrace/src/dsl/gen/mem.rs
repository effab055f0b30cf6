//! Code generation of scratch memory: `alloca()`, `copyin()`, `copyinto()`, `bcopy()`,
//! stores through D pointers (`*p = v`, `p[i] = v`, `p->m = v`, with `++`, `--` and compound
//! assignment; strings into `char[N]` and `string` members) and `uregs[]`. A child of `gen`, like `subr.rs`.
//!
//! The kernel checks every store at run time (only what the clause allocated is writable);
//! the compiler refuses the stores it can see go to kernel memory, through a pointer that
//! comes from a built-in variable (`curthread`, `arg0`, `args[]`) or a constant.

use super::super::error::Span;
use super::super::syntax::ast::{BinOp, DeclClass, Expr, ExprKind, UnOp};
use super::super::types::{builtin, Ty, U64};
use super::loc::Loc;
use super::place::Place;
use super::{arity_error, const_eval, is_str_storage, GResult, Gen, Want};
use oxtrace_core::action::{Op, UREG_COUNT};

/// The subroutines compiled here.
pub(super) fn is_call(name: &str) -> bool {
    matches!(name, "alloca" | "copyin" | "copyinto" | "bcopy")
}

/// DTrace's names of the x86-64 user registers, indices of `uregs[]`: `struct pt_regs` in
/// order, then the segment registers and the trap number, and the generic aliases.
pub(crate) const UREG_NAMES: &[(&str, i64)] = &[
    ("R_R15", 0),
    ("R_R14", 1),
    ("R_R13", 2),
    ("R_R12", 3),
    ("R_RBP", 4),
    ("R_RBX", 5),
    ("R_R11", 6),
    ("R_R10", 7),
    ("R_R9", 8),
    ("R_R8", 9),
    ("R_RAX", 10),
    ("R_RCX", 11),
    ("R_RDX", 12),
    ("R_RSI", 13),
    ("R_RDI", 14),
    ("R_ERR", 15),
    ("R_RIP", 16),
    ("R_CS", 17),
    ("R_RFL", 18),
    ("R_RSP", 19),
    ("R_SS", 20),
    ("R_DS", 21),
    ("R_ES", 22),
    ("R_FS", 23),
    ("R_GS", 24),
    ("R_TRAPNO", 25),
    ("R_PC", 16),
    ("R_SP", 19),
    ("R_FP", 4),
    ("R_PS", 18),
    ("R_R0", 10),
    ("R_R1", 5),
    // The i386 names, which DTrace's x86-64 D library keeps for the same registers.
    ("R_EAX", 10),
    ("R_EBX", 5),
    ("R_ECX", 11),
    ("R_EDX", 12),
    ("R_ESI", 13),
    ("R_EDI", 14),
    ("R_EBP", 4),
    ("R_ESP", 19),
    ("R_EIP", 16),
    ("R_EFL", 18),
];

const _: () = assert!(UREG_COUNT == 26);

/// Where the pointer `e` provably points into kernel memory: the built-in or constant it
/// comes from, for the error.
fn kernel_root(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Ident(n) if builtin(n).is_some() || n.contains('`') => Some(n.clone()),
        ExprKind::Index(n, _) if n == "args" => Some("args[]".into()),
        ExprKind::Int(..) => Some("a constant address".into()),
        ExprKind::Cast(_, a) => kernel_root(a),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, _) => kernel_root(a),
        ExprKind::Arrow(b, _)
        | ExprKind::Member(b, _)
        | ExprKind::Subscript(b, _)
        | ExprKind::Unary(UnOp::Deref, b) => kernel_root(b),
        _ => None,
    }
}

impl Gen<'_> {
    /// `alloca()`, `copyin()`, `copyinto()`, `bcopy()`.
    pub(super) fn mem_call(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<(u8, Ty)> {
        let n = match name {
            "alloca" => 1,
            "copyin" => 2,
            _ => 3,
        };
        if let Some(m) = arity_error(name, args.len(), n, n) {
            return self.err(span, m);
        }
        let void_ptr = Ty::Ptr(Box::new(Ty::Void));
        // Which argument is the size, and which the destination.
        let (size_at, dest_at) = match name {
            "alloca" => (0, None),
            "copyin" => (1, None),
            "copyinto" => (1, Some(2)),
            _ => (2, Some(1)),
        };
        // The prototype first, as DTrace checks it: the size an integer, the destination a
        // pointer, the source an address.
        // bcopy()'s source may be a string, as DTrace's `void *` takes one: its bytes then
        // NULs, as it keeps one in strsize + 1 bytes.
        let str_src = name == "bcopy" && self.type_of(&args[0])? == Ty::Str;
        for (i, a) in args.iter().enumerate() {
            if i == 0 && str_src {
                continue;
            }
            let want = if i == size_at {
                Want::Int
            } else if Some(i) == dest_at {
                Want::Ptr
            } else {
                Want::Scalar
            };
            self.proto_arg(name, i, a, want)?;
        }
        self.mem_size(name, &args[size_at])?;
        if let Some(d) = dest_at {
            if let Some(root) = kernel_root(&args[d]) {
                return self.err(
                    args[d].span,
                    format!("[D_OP_WRITE] {name}() writes only to scratch memory (alloca(), copyin()), not through {root}"),
                );
            }
        }
        let mut regs = Vec::with_capacity(n);
        for a in args {
            let (r, _) = self.expr(a)?;
            regs.push(r);
        }
        let rd = match name {
            "alloca" => {
                self.emit(Op::Alloca, regs[0], regs[0], 0, 0);
                return Ok((regs[0], void_ptr));
            }
            "copyin" => {
                self.emit(Op::Copyin, regs[0], regs[0], regs[1], 0);
                self.release(regs[1]);
                return Ok((regs[0], void_ptr));
            }
            // copyinto(addr, size, dest)
            "copyinto" => {
                self.emit(Op::Copyinto, 0, regs[0], regs[1], regs[2] as u32);
                regs[0]
            }
            // bcopy(src, dest, size) of a string: the string stored into `size + 1` bytes
            // of scratch (at most `size` of its bytes, then NULs), then `size` of them
            // copied.
            _ if str_src => {
                let n = self.reg(span)?;
                self.load_const(n, 1);
                self.emit(Op::Add, n, n, regs[2], 0);
                let tmp = self.reg(span)?;
                self.emit(Op::Mov, tmp, n, 0, 0);
                self.emit(Op::Alloca, tmp, tmp, 0, 0);
                self.emit(Op::Bcopy, 0, regs[0], n, u32::from(tmp));
                self.emit(Op::Bcopy, 0, tmp, regs[2], regs[1] as u32);
                self.release(n);
                self.release(tmp);
                regs[0]
            }
            // bcopy(src, dest, size)
            _ => {
                self.emit(Op::Bcopy, 0, regs[0], regs[2], regs[1] as u32);
                regs[0]
            }
        };
        self.release(regs[1]);
        self.release(regs[2]);
        Ok((rd, Ty::Void))
    }

    /// Whether global `name` is a string scalar (a built-in one, or a variable used as a
    /// scalar so far), which a subscript reads a character of rather than making it an
    /// associative array.
    pub(super) fn is_string_scalar(&mut self, name: &str) -> bool {
        if let Some((_, t)) = builtin(name) {
            return t == Ty::Str;
        }
        self.vty(DeclClass::Global, name) == Some(Ty::Str)
            && matches!(
                self.t.shapes.get(&(DeclClass::Global, name.to_string())),
                Some(&(false, _))
            )
    }

    /// Character `k` of the string in register `s` (released), as DTrace reads `s[k]`: the
    /// string is stored into `k + 2` bytes of scratch (at most `k + 1` of its bytes, then
    /// NULs), where the character is read, a NUL past its end.
    pub(super) fn string_char<'e>(&mut self, s: u8, k: &Expr, span: Span) -> GResult<Loc<'e>> {
        let (ri, ti) = self.expr(k)?;
        self.need_int(&ti, k.span, "a string subscript")?;
        let n = self.reg(span)?;
        self.load_const(n, 2);
        self.emit(Op::Add, n, n, ri, 0);
        let addr = self.reg(span)?;
        self.emit(Op::Mov, addr, n, 0, 0);
        self.emit(Op::Alloca, addr, addr, 0, 0);
        self.emit(Op::Bcopy, 0, s, n, u32::from(addr));
        self.emit(Op::Add, addr, addr, ri, 0);
        self.release(n);
        self.release(ri);
        self.release(s);
        Ok(Loc::Mem {
            addr,
            ty: Ty::Int {
                size: 1,
                signed: true,
            },
        })
    }

    /// A constant size must be one `scratchsize` can hold.
    fn mem_size(&self, name: &str, e: &Expr) -> GResult<()> {
        let Some(v) = const_eval(e) else {
            return Ok(());
        };
        if v < 0 {
            return self.err(
                e.span,
                format!("[D_ALLOCA_SIZE] {name}() size must not be negative: {v}"),
            );
        }
        if v as u64 > u64::from(self.t.scratchsize) {
            return self.err(
                e.span,
                format!(
                    "[D_ALLOCA_SIZE] {name}() size {v} exceeds the scratch memory of a clause (scratchsize={})",
                    self.t.scratchsize
                ),
            );
        }
        Ok(())
    }

    /// `uregs[i]`: user register `i` of the current thread.
    pub(super) fn uregs<'e>(&mut self, keys: &[Expr], span: Span) -> GResult<Loc<'e>> {
        let [k] = keys else {
            return self.err(span, "uregs[] takes one register index (R_PC, R_SP, ...)");
        };
        // DTrace's prototype: an integer constant, a register's name or number.
        match const_eval(k).or_else(|| self.ureg_const(k)) {
            Some(v) if !(0..UREG_COUNT as i64).contains(&v) => {
                return self.err(
                    k.span,
                    format!(
                        "[D_UNKNOWN] uregs[] index {v} is not a register (0 to {})",
                        UREG_COUNT - 1
                    ),
                );
            }
            Some(_) => {}
            None => {
                // Evaluated (and dropped) first: a name nothing defines is that error,
                // as in DTrace.
                let (mark, free) = (self.code.len(), self.free.clone());
                let (_, ty) = self.expr(k)?;
                self.code.truncate(mark);
                self.free = free;
                let what = if ty.is_int() {
                    "an expression computed when the probe fires".to_string()
                } else {
                    ty.name()
                };
                return self.err(
                    k.span,
                    format!("[D_PROTO_ARG] uregs[ ] index must be an integer constant (R_PC, R_SP, ...), not {what}"),
                );
            }
        }
        let (r, _) = self.expr(k)?;
        self.emit(Op::Uregs, r, r, 0, 0);
        Ok(Loc::Val { reg: r, ty: U64 })
    }

    fn ureg_const(&self, e: &Expr) -> Option<i64> {
        match &e.kind {
            ExprKind::Ident(n) => self.t.env.enums.get(n).copied(),
            _ => None,
        }
    }

    /// Refuses a store to `target` that the compiler can see goes to kernel memory.
    pub(super) fn check_store(&mut self, target: &Expr, l: &Loc<'_>) -> GResult<()> {
        if !matches!(l, Loc::Mem { .. } | Loc::MemBits { .. }) {
            return Ok(());
        }
        // A string's character is read from a copy: a value, not storage.
        let string_char = match &target.kind {
            ExprKind::Index(name, keys) => keys.len() == 1 && self.is_string_scalar(name),
            ExprKind::Subscript(b, keys) => keys.len() == 1 && self.type_of(b)? == Ty::Str,
            _ => false,
        };
        if string_char {
            return self.err(
                target.span,
                "[D_OP_WRITE] operator requires a writable variable: a string's characters cannot be modified",
            );
        }
        match kernel_root(target) {
            // A kernel variable (`jiffies, `init_task.pid): what storing to any kernel
            // variable gets.
            Some(root) if root.contains('`') => self.err(
                target.span,
                "[D_OP_WRITE] operator requires a writable variable: kernel memory cannot be modified",
            ),
            Some(root) => self.err(
                target.span,
                format!("[D_OP_WRITE] cannot store to kernel memory through {root}: only scratch memory (alloca(), copyin()) is writable"),
            ),
            None => Ok(()),
        }
    }

    /// Stores `rv` (of type `ty`) into `p`: through a pointer, a store opcode the kernel
    /// checks; else a variable.
    pub(super) fn store_to(&mut self, p: &Place, ty: &Ty, rv: u8, span: Span) -> GResult<()> {
        match p {
            Place::Mem(addr) => {
                let op = match ty {
                    Ty::Int { size: 1, .. } => Op::Stb,
                    Ty::Int { size: 2, .. } => Op::Sth,
                    Ty::Int { size: 4, .. } | Ty::Float(4) => Op::Stw,
                    Ty::Int { .. } | Ty::Ptr(_) | Ty::Float(8) => Op::Stx,
                    // A long double value is the address of its bytes: copy them.
                    Ty::Float(n) => {
                        let rn = self.reg(span)?;
                        self.load_const(rn, u64::from(*n));
                        self.emit(Op::Bcopy, 0, rv, rn, u32::from(*addr));
                        self.release(rn);
                        return Ok(());
                    }
                    // The kernel copies at most `size - 1` bytes of the string, then NULs.
                    t if is_str_storage(t) => {
                        let n = self.t.env.size(t, u64::from(self.t.strsize));
                        let rn = self.reg(span)?;
                        self.load_const(rn, n);
                        self.emit(Op::Bcopy, 0, rv, rn, u32::from(*addr));
                        self.release(rn);
                        return Ok(());
                    }
                    _ => {
                        return self.err(
                            span,
                            format!("cannot store a {} through a pointer", ty.name()),
                        )
                    }
                };
                self.emit(op, 0, *addr, rv, 0);
                Ok(())
            }
            Place::Bits {
                inner,
                shift,
                width,
                signed,
            } if matches!(**inner, Place::Mem(_)) => {
                self.store_bits(inner, ty, (*shift, *width, *signed), rv, span)
            }
            _ if *ty == Ty::Float(16) => self.err(span, super::LDOUBLE_VAR),
            _ => self.store_place(p, rv, span),
        }
    }

    /// A bit-field through a pointer (`shift`, `width`, `signed` of `unit`, a `ty` in
    /// memory): a read-modify-write of its unit through the same checked store as any
    /// other; `rv` is narrowed to the field, the assignment's value.
    fn store_bits(
        &mut self,
        unit: &Place,
        ty: &Ty,
        (shift, width, signed): (u8, u8, bool),
        rv: u8,
        span: Span,
    ) -> GResult<()> {
        self.extract_bits(rv, 0, width, signed, span)?;
        let mask = match width {
            64.. => u64::MAX,
            w => ((1u64 << w) - 1) << shift,
        };
        let old = self.load_place(unit, ty, span)?;
        let k = self.reg(span)?;
        let v = self.reg(span)?;
        self.load_const(k, !mask);
        self.emit(Op::And, old, old, k, 0);
        self.load_const(k, shift as u64);
        self.emit(Op::Sll, v, rv, k, 0);
        self.load_const(k, mask);
        self.emit(Op::And, v, v, k, 0);
        self.emit(Op::Or, old, old, v, 0);
        self.release(v);
        self.release(k);
        let r = self.store_to(unit, ty, old, span);
        self.release(old);
        r
    }
}
