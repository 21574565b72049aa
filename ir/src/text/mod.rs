//! Textual IR: a readable, MLIR-like printer ([`print()`], also `Display for Graph`) and a parser
//! ([`parse`]) that round-trip: `print(&parse(&print(g))?) == print(g)` for every graph, and
//! parsing keeps op kinds, attributes, types, operand wiring, regions, locations, the symbol
//! scope (symbols, ranges, divisibility and equality facts), shape assertions and output names.
//!
//! ```text
//! graph @main {
//!   symbols B in [1, 65536], S in [1, inf)
//!   fact S % 8 == 0
//!   assert B >= 1 : "Expected value >= 1 for dimension variable 'B'"
//!   %0 = input {index = 0, name = "params['wte']"} : f32[256,64]
//!   %1 = input {index = 1, name = "tokens"} : f32[B,S,256]
//!   %2 = constant {value = dense<0.0> : f32} : f32[]
//!   %3 = dot_general(%1, %0) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,64] loc("model.py:12:3")
//!   %4:2 = sort(%3, %3) {dimension = 1, is_stable = true} : f32[B,S,64], f32[B,S,64] {
//!     region {
//!       %0 = input {index = 0, name = ""} : f32[]
//!       ...
//!       return %5
//!     }
//!   }
//!   return %3 as "loss", %4#1 as "params['w']"
//! }
//! ```
//!
//! # Conventions
//! * Values are numbered `%N` by position in program order (inputs included); each region
//!   numbers its own values from `%0` (regions cannot capture outer values). The only result of
//!   an op is `%N`; results of other ops are `%N#k`, and the definition says how many (`%N:k =`,
//!   `%N:0 =` for none). The parser accepts any name `%[A-Za-z0-9_.$]+` and renumbers.
//! * `input` ops are block arguments; the parser adds them with [`Graph::add_input`] in the
//!   order of their `index` attributes, then restores the printed program order.
//! * Attributes are printed sorted by name. The value syntax tells the kind:
//!   `I64` `5`; `F64` `5.0`, `1e-7`, `nan`, `inf`, `-inf` (Rust `{:?}`, exact);
//!   `Ints` `[1, 2]`; `Dims` `dims[B, S*2]`; `Str` `"..."`; `Bool` `true`/`false`;
//!   `DType` a bare element type (`f32`); `Literal` `dense<...> : dtype` — a splat element
//!   as a decimal (floats with `{:?}`, so exact) or raw bits `0x3f80` (bf16, f16, NaNs), a
//!   non-splat literal as its raw little-endian bytes `dense<"0x0000803f..."> : f32`.
//! * Strings escape `\"`, `\\`, `\n`, `\t`, `\r` and other control characters as `\u{HEX}`.
//!   Names that are not identifiers (graph, region, attribute and symbol names) are quoted.
//! * `//` starts a comment; whitespace and line breaks are not significant, except that a
//!   dimension expression ends at the end of its line.
//!
//! # Grammar
//! ```text
//! file     := 'graph' name? '{' body '}'
//! body     := stmt* 'return' (output (',' output)*)? '}'      // closes the graph or region
//! stmt     := symbols | fact | assert | op
//! symbols  := 'symbols' symdecl (',' symdecl)*
//! symdecl  := symname ('in' range)?
//! range    := ('[' INT | '(' '-inf') ',' (INT ']' | 'inf' ')')
//! fact     := 'fact' symname ('%' INT '==' '0' | '==' dim)   // divisibility, equality
//! assert   := 'assert' dim rel dim ':' STRING
//! rel      := '==' | '!=' | '>=' | '>' | '<=' | '<'
//! op       := '%' id (':' INT)? '=' opname ('(' (ref (',' ref)*)? ')')? attrs? ':' types
//!             regions? loc?
//! ref      := '%' id ('#' INT)?
//! output   := ref ('as' STRING)?
//! attrs    := '{' (attrname '=' value (',' attrname '=' value)*)? '}'
//! value    := INT | FLOAT | 'nan' | 'inf' | '-inf' | 'true' | 'false' | STRING | DTYPE
//!           | '[' (INT (',' INT)*)? ']' | 'dims' '[' dims? ']' | literal
//! literal  := 'dense' '<' (scalar | STRING | 'splat' STRING) '>' ':' DTYPE
//! scalar   := INT | FLOAT | HEX | 'nan' | 'inf' | '-inf' | 'true' | 'false'
//! types    := '(' ')' | type (',' type)*
//! type     := DTYPE '[' dims? ']'                              // f32[B,S,768], f32[]
//! dims     := dim (',' dim)*
//! regions  := '{' ('region' name? '{' body)* '}'
//! loc      := 'loc' '(' STRING ')'
//! name     := '@' (IDENT | STRING)
//! symname  := IDENT | STRING
//! attrname := IDENT | STRING
//! dim      := a DimExpr in its Display syntax (B*S*768, floordiv(S, 2), min(B, 4), "seq len")
//! opname   := an OpKind name (dot_general; a `stablehlo.` prefix is accepted)
//! IDENT    := [A-Za-z_][A-Za-z0-9_.$]*      INT := -?[0-9]+      HEX := 0x[0-9a-fA-F]+
//! ```
//!
//! The parser does not verify the graph; callers run [`crate::verify::verify`] where wanted.
//! Both directions are linear in the size of the text.

mod attrs;
// For the tests (`tests/text.rs`): the scanning primitives.
#[doc(hidden)]
pub mod lexer;
mod parse;
mod print;

pub use parse::{parse, parse_attrs};
pub use print::{print, print_attrs};

use crate::graph::Graph;
use std::fmt;

/// A syntax error in textual IR, with a 1-based line and column (in characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    /// 1-based line of the error.
    pub line: usize,
    /// 1-based column (in characters) of the error.
    pub col: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Graph {
    /// The textual IR of the graph (see [`print()`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}
