//! The tests of `ebb-ir`, one test binary (`autotests = false`, `[lib] test = false` in
//! Cargo.toml): every file in this directory is a module here, the tests of a source module in
//! the file named after it (`dim_parse.rs` for `src/dim/parse.rs`). A new test file must be
//! added below.

mod attribute_ranges;
mod dim;
mod dim_atoms;
mod dim_bindings;
mod dim_display;
mod dim_eval;
mod dim_expr;
mod dim_grid;
mod dim_interval;
mod dim_ops;
mod dim_parse;
mod dim_props;
mod dim_prove;
mod dim_scope;
mod dim_symbol;
mod dtype;
mod fsio;
mod index;
mod op;
mod op_codec;
mod op_reduce_precision;
mod shape_contract;
mod text;
mod text_roundtrip;
