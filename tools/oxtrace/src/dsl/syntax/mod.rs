//! The D source a program is written in: tokens, the parser, the syntax tree it builds, and
//! the prelude the compiler parses before every program.

pub mod ast;
pub mod lexer;
pub mod parser;
pub(crate) mod prelude;
pub(crate) mod scope;
