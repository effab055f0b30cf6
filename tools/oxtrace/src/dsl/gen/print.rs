//! `tracemem()` and `print()`: memory recorded raw, by `pushtm`, in a printf record of a
//! format of its own, which the tool formats by the [`PrintSpec`] kept for it.

use super::super::error::Span;
use super::super::syntax::ast::*;
use super::super::types::ptype::PrintSpec;
use super::super::types::{Ty, U64};
use super::assign::sou_leaves;
use super::loc::Loc;
use super::{arity_error, GResult, Gen, Want};
use oxtrace_core::action::{record_buf_size, Op};

/// Bytes of an item's header in record data (its tag and length); an integer item's size.
const ITEM_HEAD: u64 = 3;
const INT_ITEM: u64 = 9;

impl Gen<'_> {
    /// The largest memory item a record holds after `before` bytes of other items.
    fn mem_max(&self, before: u64) -> u64 {
        (record_buf_size(self.t.strsize) as u64)
            .saturating_sub(before + ITEM_HEAD)
            .min(u64::from(u16::MAX))
    }

    /// `tracemem(addr, size[, dynsize])`: `size` bytes at `addr` (at most `dynsize` of them,
    /// checked at run time), shown as a hex dump.
    pub(super) fn tracemem(&mut self, args: &[Expr], span: Span) -> GResult<()> {
        if let Some(m) = arity_error("tracemem", args.len(), 2, 3) {
            return self.err(span, m);
        }
        self.proto_arg("tracemem", 1, &args[1], Want::Int)?;
        // The address's type first: a struct is refused before it would be read.
        let ta = self.type_of(&args[0])?;
        if !ta.is_scalar() {
            return self.err(
                args[0].span,
                format!(
                    "[D_TRACEMEM_ADDR] tracemem( ) argument #1 is incorrect type: {}",
                    ta.name()
                ),
            );
        }
        let (ra, _) = self.expr(&args[0])?;
        // `sizeof (type)` is a constant too, as DTrace folds it.
        let size = match &args[1].kind {
            ExprKind::SizeofType(tn) => {
                let ty = self.resolve(tn, args[1].span)?;
                i64::try_from(self.sizeof(&ty, args[1].span)?).ok()
            }
            _ => const_eval(&args[1]),
        };
        let size = match size {
            Some(v) if v > 0 => v as u64,
            _ => {
                return self.err(
                    args[1].span,
                    "[D_TRACEMEM_SIZE] tracemem( ) argument #2 must be a non-zero positive integral constant expression",
                )
            }
        };
        let max = self.mem_max(0);
        if size > max {
            return self.err(
                args[1].span,
                format!("tracemem( ): {size} bytes do not fit a record ({max} bytes with strsize {}; raise strsize)", self.t.strsize),
            );
        }
        let rd = match args.get(2) {
            Some(d) => {
                let (rd, td) = self.expr(d)?;
                if !td.is_scalar() {
                    return self.err(
                        d.span,
                        "[D_TRACEMEM_DSIZE] tracemem( ) dynamic size (argument #3) must be of scalar type",
                    );
                }
                rd
            }
            None => {
                let rd = self.reg(span)?;
                self.load_const(rd, size);
                rd
            }
        };
        self.hex_dump(ra, rd, size);
        Ok(())
    }

    /// A record of at most `size` bytes at the address in `addr` (`len` of them, checked
    /// at run time), printed as a hex dump; releases both registers.
    fn hex_dump(&mut self, addr: u8, len: u8, size: u64) {
        self.emit(Op::Pushtm, 0, addr, len, size as u32);
        self.release(len);
        self.release(addr);
        let id = self.t.fmt_unique(b"tracemem()");
        self.t.prints.push((id, PrintSpec::Tracemem));
        self.emit(Op::Printf, 0, 0, 0, id);
    }

    /// `trace(obj)` of a struct or union object: its bytes, shown as a hex dump. An object
    /// in memory is read where it is; a D variable (kept member by member) is laid out in
    /// scratch memory first, each scalar member at its offset.
    pub(super) fn trace_object(&mut self, a: &Expr, ty: &Ty) -> GResult<()> {
        let size = self.t.env.size(ty, u64::from(self.t.strsize));
        let max = self.mem_max(0);
        if size == 0 || size > max {
            return self.err(
                a.span,
                format!(
                    "trace( ): {} is {size} bytes: a record holds 1 to {max} (raise strsize)",
                    ty.name()
                ),
            );
        }
        let r = match self.loc(a)? {
            Loc::Mem { addr, .. } => addr,
            Loc::Var { .. } => self.sou_in_scratch(a, ty, size)?,
            Loc::Val { reg, .. } | Loc::MemBits { addr: reg, .. } => {
                self.release(reg);
                return self.err(
                    a.span,
                    format!(
                        "trace( ): {} is a value with no bytes to trace: trace its members",
                        ty.name()
                    ),
                );
            }
        };
        let rs = self.reg(a.span)?;
        self.load_const(rs, size);
        self.hex_dump(r, rs, size);
        Ok(())
    }

    /// D struct variable `a` of type `ty` (`size` bytes) copied into new scratch memory,
    /// zeroed, its scalar members at their offsets; the address.
    fn sou_in_scratch(&mut self, a: &Expr, ty: &Ty, size: u64) -> GResult<u8> {
        let base = self.reg(a.span)?;
        self.load_const(base, size);
        self.emit(Op::Alloca, base, base, 0, 0);
        for (path, off, lty) in sou_leaves(&self.t.env, ty) {
            if !lty.is_scalar() {
                continue; // strings and arrays: a D variable keeps no bytes of them
            }
            let mut src = self.loc(a)?;
            for seg in path.split('.').skip(1) {
                src = self.member(src, seg, a.span)?;
            }
            let (rv, _) = self.load_loc(src, a.span)?;
            let addr = self.reg(a.span)?;
            self.load_const(addr, off);
            self.emit(Op::Add, addr, addr, base, 0);
            self.store_member(Loc::Mem { addr, ty: lty }, rv, a.span)?;
        }
        Ok(base)
    }

    /// `print(expr)`: the object a pointer points to (or a struct, union or array object
    /// itself), with its type, shown as Oracle's DTrace shows it.
    pub(super) fn print(&mut self, args: &[Expr], span: Span) -> GResult<()> {
        if args.len() != 1 {
            return self.err(
                span,
                format!(
                    "[D_PROTO_LEN] print( ) prototype mismatch: {} args passed, 1 expected",
                    args.len()
                ),
            );
        }
        let a = &args[0];
        let (r, ty) = self.expr(a)?;
        let (obj, ptr) = match &ty {
            Ty::Ptr(p) if **p != Ty::Void => ((**p).clone(), true),
            Ty::Sou(..) | Ty::Array(..) => (ty.clone(), false),
            _ => {
                return self.err(
                    a.span,
                    format!("[D_PROTO_ARG] print( ) argument #1 is incompatible with prototype:\n\tprototype: void *\n\t argument: {}", ty.name()),
                )
            }
        };
        let strsize = u64::from(self.t.strsize);
        let size = self.t.env.size(&obj, strsize);
        if size == 0 {
            return self.err(
                a.span,
                format!("[D_PRINT_SIZE] print( ) argument #1 reference has type '{}' with size 0; cannot print( ) it.", obj.name()),
            );
        }
        let max = self.mem_max(INT_ITEM);
        if size > max {
            return self.err(
                a.span,
                format!("print( ): {} is {size} bytes, more than a record holds ({max} bytes with strsize {strsize}; raise strsize)", obj.name()),
            );
        }
        self.emit(Op::Pushtv, 0, r, 0, U64.int_type().0 as u32);
        let rs = self.reg(span)?;
        self.load_const(rs, size);
        self.emit(Op::Pushtm, 0, r, rs, size as u32);
        self.release(rs);
        self.release(r);
        let pty = self.t.env.ptype(&obj, strsize);
        let id = self.t.fmt_unique(b"print()");
        self.t.prints.push((id, PrintSpec::Print { ty: pty, ptr }));
        self.emit(Op::Printf, 0, 0, 0, id);
        Ok(())
    }
}
