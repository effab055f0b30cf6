//! The syntax tree of the D subset.

use super::super::error::Span;

/// A type as written in a cast, a declaration, `sizeof` or `offsetof`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeName {
    /// An integer type of `size` bytes.
    Int {
        /// Size in bytes.
        size: u8,
        /// Signedness.
        signed: bool,
    },
    /// `float`, `double` or `long double`: its size in bytes (4, 8, 16).
    Float(u8),
    /// `string`.
    Str,
    /// `void` (only behind a pointer).
    Void,
    /// A pointer to a type.
    Ptr(Box<TypeName>),
    /// `struct name` (`union` when the flag is set).
    Sou(String, bool),
    /// `enum name`: an `int`.
    Enum(String),
    /// A name declared by `typedef`.
    Named(String),
    /// An array of a type, from a declarator `x[n]`.
    Array(Box<TypeName>, u64),
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-`.
    Neg,
    /// `+`.
    Plus,
    /// `!`.
    Not,
    /// `~`.
    BitNot,
    /// `*` (kernel-memory load).
    Deref,
    /// `&` (address of a location in kernel memory).
    AddrOf,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Mod,
    /// `&`.
    And,
    /// `|`.
    Or,
    /// `^`.
    Xor,
    /// `<<`.
    Shl,
    /// `>>`.
    Shr,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `&&`.
    LAnd,
    /// `||`.
    LOr,
    /// `^^`.
    LXor,
}

/// An expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Span,
}

/// How an integer constant was written: its suffix and base pick its C type (see
/// `types::int_const_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntForm {
    /// A `u` suffix.
    pub unsigned: bool,
    /// An `l` or `ll` suffix.
    pub long: bool,
    /// Hexadecimal or octal, which may be unsigned without a suffix.
    pub radix: bool,
}

/// Expression kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprKind {
    /// An integer literal (already parsed) and how it was written.
    Int(u64, IntForm),
    /// A string literal.
    Str(Vec<u8>),
    /// A global variable or built-in.
    Ident(String),
    /// `this->name`.
    This(String),
    /// `self->name`.
    SelfVar(String),
    /// `name[keys]`.
    Index(String, Vec<Expr>),
    /// A unary operation.
    Unary(UnOp, Box<Expr>),
    /// A binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `lhs = rhs` or `lhs op= rhs`.
    Assign(Option<BinOp>, Box<Expr>, Box<Expr>),
    /// `++x`, `x++`, `--x`, `x--`.
    IncDec {
        /// Prefix form.
        pre: bool,
        /// `++` (else `--`).
        inc: bool,
        /// The variable.
        target: Box<Expr>,
    },
    /// `(type) expr`.
    Cast(TypeName, Box<Expr>),
    /// `name(args)`.
    Call(String, Vec<Expr>),
    /// `@name` as an argument of printa/clear/trunc/normalize.
    AggRef(String),
    /// `base[keys]` on anything but a plain name: `self->a[k]`, `x.arr[i]`, `p[i]`.
    Subscript(Box<Expr>, Vec<Expr>),
    /// `base.member`.
    Member(Box<Expr>, String),
    /// `base->member` (base a pointer to a struct or union).
    Arrow(Box<Expr>, String),
    /// `sizeof (type)`.
    SizeofType(TypeName),
    /// `sizeof expr`.
    SizeofExpr(Box<Expr>),
    /// `offsetof(type, member)`.
    Offsetof(TypeName, String),
    /// `a, b`: `a` for its effects, then `b`.
    Comma(Box<Expr>, Box<Expr>),
    /// `xlate < type > ( expr )`: `expr` translated to a struct or union (or a pointer to
    /// one) by a translator (`xlate.rs`).
    Xlate(TypeName, Box<Expr>),
}

/// The right-hand side of an aggregation statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggCall {
    /// Function name.
    pub func: String,
    /// Where the function name is.
    pub func_span: Span,
    /// Arguments.
    pub args: Vec<Expr>,
}

/// Storage class of a declared variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeclClass {
    /// A global (`int x;`, `int a[string];`).
    Global,
    /// A thread-local (`self int x;`).
    Thread,
    /// A clause-local (`this int x;`).
    Local,
}

/// A variable declaration `[self|this] type name[dims];`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decl {
    /// Storage class.
    pub class: DeclClass,
    /// Type (arrays of fixed size included).
    pub ty: TypeName,
    /// Key types of an associative array (`int a[string, int]`), else `None`.
    pub keys: Option<Vec<TypeName>>,
    /// Name.
    pub name: String,
    /// Where the name is.
    pub span: Span,
}

/// A member of a struct or union definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDecl {
    /// Type.
    pub ty: TypeName,
    /// Name.
    pub name: String,
    /// Where the name is.
    pub span: Span,
    /// Width of a bit-field (`int a : 3`).
    pub bits: Option<Expr>,
}

/// A statement of a clause body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// An expression (assignment, action call...).
    Expr(Expr),
    /// `@name[keys] = func(args)`.
    Agg {
        /// Aggregation name (empty for `@`).
        name: String,
        /// Where the `@name` is.
        name_span: Span,
        /// Keys.
        keys: Vec<Expr>,
        /// The aggregating function.
        call: AggCall,
    },
    /// `if (cond) stmt [else stmt]`.
    If {
        /// The condition.
        cond: Expr,
        /// Statements when it holds.
        then: Vec<Stmt>,
        /// Statements otherwise.
        els: Vec<Stmt>,
    },
    /// A declaration inside a clause (`this int x;`, `self string s;`).
    Decl(Decl),
}

/// A probe description as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeText {
    /// The text.
    pub text: String,
    /// Where it is.
    pub span: Span,
}

/// A clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clause {
    /// Probe descriptions.
    pub probes: Vec<ProbeText>,
    /// Predicate.
    pub pred: Option<Expr>,
    /// Statements.
    pub body: Vec<Stmt>,
    /// Span of the whole clause head.
    pub span: Span,
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// `#pragma ...` (text after `#`).
    Pragma(String, Span),
    /// A clause.
    Clause(Clause),
    /// A variable declaration.
    Decl(Decl),
    /// A struct or union definition.
    Sou {
        /// Tag.
        name: String,
        /// Union (else struct).
        union: bool,
        /// Members in order.
        members: Vec<MemberDecl>,
        /// Where the tag is.
        span: Span,
    },
    /// An enum definition: enumerators and their explicit values.
    Enum {
        /// Tag (empty when anonymous).
        name: String,
        /// Enumerators.
        items: Vec<(String, Option<Expr>, Span)>,
    },
    /// `typedef type name;`.
    Typedef(TypeName, String, Span),
    /// `inline type name = expr;`.
    Inline(TypeName, String, Expr, Span),
    /// `translator OUT < IN NAME > { member = expr; ... };`.
    Translator(Translator),
}

/// A translator declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translator {
    /// The output type (a struct or union).
    pub out: TypeName,
    /// The input type.
    pub inp: TypeName,
    /// The name the member expressions give the input.
    pub name: String,
    /// Member translations: name, expression, where the name is.
    pub members: Vec<(String, Expr, Span)>,
    /// Where the output type is.
    pub span: Span,
}

impl Expr {
    /// Calls `f` on each direct sub-expression, in source order, until it fails: the one
    /// walk of the tree's shape, for passes that rewrite expressions in place.
    pub fn try_for_each_child_mut<E>(
        &mut self,
        mut f: impl FnMut(&mut Expr) -> Result<(), E>,
    ) -> Result<(), E> {
        match &mut self.kind {
            ExprKind::Index(_, v) | ExprKind::Call(_, v) => v.iter_mut().try_for_each(f),
            ExprKind::Subscript(a, v) => {
                f(a)?;
                v.iter_mut().try_for_each(f)
            }
            ExprKind::Unary(_, a)
            | ExprKind::Cast(_, a)
            | ExprKind::Member(a, _)
            | ExprKind::Arrow(a, _)
            | ExprKind::SizeofExpr(a)
            | ExprKind::Xlate(_, a)
            | ExprKind::IncDec { target: a, .. } => f(a),
            ExprKind::Binary(_, a, b) | ExprKind::Assign(_, a, b) | ExprKind::Comma(a, b) => {
                f(a)?;
                f(b)
            }
            ExprKind::Ternary(a, b, c) => {
                f(a)?;
                f(b)?;
                f(c)
            }
            ExprKind::Int(..)
            | ExprKind::Str(_)
            | ExprKind::Ident(_)
            | ExprKind::This(_)
            | ExprKind::SelfVar(_)
            | ExprKind::AggRef(_)
            | ExprKind::SizeofType(_)
            | ExprKind::Offsetof(..) => Ok(()),
        }
    }

    /// Whether the expression names storage (a variable, member, element or dereference):
    /// what may be assigned to, incremented, or have its address taken.
    pub fn is_place(&self) -> bool {
        matches!(
            self.kind,
            ExprKind::Ident(_)
                | ExprKind::This(_)
                | ExprKind::SelfVar(_)
                | ExprKind::Index(..)
                | ExprKind::Subscript(..)
                | ExprKind::Member(..)
                | ExprKind::Arrow(..)
                | ExprKind::Unary(UnOp::Deref, _)
        )
    }
}

/// The index of `args[keys]`: one integer constant, from 0 to 9 (the most a probe passes).
/// A wrong index is refused as DTrace does: not a constant is `D_PROTO_ARG`, a constant
/// out of range `D_ARGS_IDX`.
pub fn args_index(keys: &[Expr]) -> Result<usize, String> {
    let v = match keys {
        [k] => const_eval(k),
        _ => None,
    };
    match v {
        None => Err("[D_PROTO_ARG] args[] takes one integer constant index".into()),
        Some(i) if !(0..10).contains(&i) => Err(format!(
            "[D_ARGS_IDX] index {i} is out of range for args[] (0 to 9)"
        )),
        Some(i) => Ok(i as usize),
    }
}

/// Evaluate a constant integer expression.
pub fn const_eval(e: &Expr) -> Option<i64> {
    Some(match &e.kind {
        ExprKind::Int(v, _) => *v as i64,
        ExprKind::Unary(UnOp::Neg, a) => const_eval(a)?.wrapping_neg(),
        ExprKind::Unary(UnOp::Plus, a) => const_eval(a)?,
        ExprKind::Unary(UnOp::BitNot, a) => !const_eval(a)?,
        ExprKind::Cast(_, a) => const_eval(a)?,
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (const_eval(a)?, const_eval(b)?);
            match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => a.checked_div(b)?,
                BinOp::Mod => a.checked_rem(b)?,
                BinOp::Shl => a.wrapping_shl(b as u32),
                BinOp::Shr => a.wrapping_shr(b as u32),
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                _ => return None,
            }
        }
        _ => return None,
    })
}
