//! The syntax tree of the D subset.

use super::error::Span;

/// An integer type name as written in a cast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeName {
    /// An integer type of `size` bytes.
    Int {
        /// Size in bytes.
        size: u8,
        /// Signedness.
        signed: bool,
    },
    /// `string`.
    Str,
    /// `void` (only behind a pointer).
    Void,
    /// A pointer to a type.
    Ptr(Box<TypeName>),
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

/// Expression kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprKind {
    /// An integer literal (already parsed) and whether it is unsigned.
    Int(u64, bool),
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
}
