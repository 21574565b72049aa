//! Symbolic dimensions of ONNX value types: `dim_value`, `dim_param` and unknown dimensions.
//!
//! A `dim_param` is parsed as an Ebb dimension expression ([`ebb_ir::DimExpr`]'s text form):
//!
//! ```text
//! expr  := term (('+' | '-') term)*
//! term  := unary ('*' unary | '//' INT | '%' INT)*
//! unary := '-' unary | INT | NAME | '(' expr ')' | (floordiv|mod|min|max) '(' expr, ... ')'
//! NAME  := [A-Za-z_][A-Za-z0-9_]*
//! ```
//!
//! so `batch`, `4*batch`, `batch*seq`, `s0 + 1` and `(seq - 1)//2` all parse. Symbols named by
//! the graph inputs are declared in the graph's [`ebb_ir::SymbolScope`] with the range `>= 1`
//! (as the StableHLO importer declares JAX's dimension variables). A dimension with neither a
//! value nor a parameter becomes a fresh symbol `_unkN` (reported as unresolved).
//!
//! Intermediate values' `dim_param`s (in `value_info` and graph outputs) may use names that no
//! input declares (`unk__12`, `s3`): such a name is *bound* on first sight to the expression Ebb
//! inferred for it (solving `k*name + rest = inferred` when the parameter is linear in a single
//! unknown name with `k = ±1`), and checked on every later sight.

use ebb_ir::{DimExpr, Symbol, SymbolScope};
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

/// Prefix of the fresh symbols that stand for unknown (unnamed) dimensions.
pub const UNKNOWN_PREFIX: &str = "_unk";

/// Parses a `dim_param` (grammar in the module docs). Errors: the parser's message.
pub fn parse_dim_param(s: &str) -> Result<DimExpr, String> {
    DimExpr::from_str(s).map_err(|e| e.to_string())
}

/// Declares every symbol of `e` in `scope` (range `>= 1`; idempotent).
pub fn declare_all(scope: &mut SymbolScope, e: &DimExpr) {
    for s in e.symbols() {
        scope.declare(s.name());
    }
}

/// Bindings of names that intermediate `dim_param`s use but no input declares.
#[derive(Default, Debug)]
pub struct Aliases {
    map: BTreeMap<Symbol, DimExpr>,
}

/// Result of checking one declared dimension against the inferred one.
#[derive(Debug, PartialEq)]
pub enum DimCheck {
    /// They agree (possibly after binding a new name).
    Agree,
    /// They differ.
    Contradict,
    /// The declared dimension cannot be checked (several unknown names, non-linear).
    Unchecked,
}

impl Aliases {
    /// Checks declared dimension `decl` against `inferred` under `scope`, binding at most one
    /// unknown name (see the module docs).
    pub fn check(&mut self, scope: &SymbolScope, decl: &DimExpr, inferred: &DimExpr) -> DimCheck {
        let d = decl.substitute(&self.map);
        let unknown: BTreeSet<Symbol> = d
            .symbols()
            .into_iter()
            .filter(|s| !scope.contains(s))
            .collect();
        if unknown.is_empty() {
            return if d == *inferred || scope.prove_eq(&d, inferred) {
                DimCheck::Agree
            } else {
                DimCheck::Contradict
            };
        }
        if unknown.len() != 1 {
            return DimCheck::Unchecked;
        }
        let u = unknown
            .into_iter()
            .next()
            .unwrap_or_else(|| Symbol::new(""));
        let Some(c) = d.poly_coeffs_in(&u) else {
            return DimCheck::Unchecked;
        };
        if c.len() != 2 {
            return DimCheck::Unchecked;
        }
        let rest = inferred.clone() - c[0].clone();
        let v = match c[1].as_const() {
            Some(1) => rest,
            Some(-1) => DimExpr::zero() - rest,
            _ => return DimCheck::Unchecked,
        };
        self.map.insert(u, v);
        DimCheck::Agree
    }
}
