//! The tables of distinct symbolic expressions and symbol scopes of a binary plan file: the
//! payload names each by its index, so a file parses each distinct expression's text once
//! (the 24-layer GPT-2 plan has about 66 000 expressions, 200 of them distinct) and each
//! distinct scope's JSON once (every fusion region has a scope).

use super::BinaryError;
use ebb_ir::dim::SymbolScope;
use ebb_ir::DimExpr;
use std::collections::HashMap;

/// Index into a table.
pub(super) type Ix = u32;

/// Distinct texts in the order first seen.
#[derive(Default)]
struct TextSet {
    map: HashMap<String, Ix>,
    list: Vec<String>,
}

impl TextSet {
    /// The index of `text`, added when new.
    fn index(&mut self, text: String) -> Ix {
        if let Some(&i) = self.map.get(&text) {
            return i;
        }
        let i = self.list.len() as Ix;
        self.map.insert(text.clone(), i);
        self.list.push(text);
        i
    }
}

/// Collects the distinct expressions and scopes while encoding.
#[derive(Default)]
pub(super) struct Interner {
    exprs: TextSet,
    scopes: TextSet,
}

impl Interner {
    /// The index of `e`.
    pub(super) fn expr(&mut self, e: &DimExpr) -> Ix {
        self.exprs.index(e.to_string())
    }

    /// The indices of `es`.
    pub(super) fn exprs(&mut self, es: &[DimExpr]) -> Vec<Ix> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    /// The index of scope `s`.
    ///
    /// # Errors
    /// [`BinaryError::Encode`] when the scope does not serialize.
    pub(super) fn scope(&mut self, s: &SymbolScope) -> Result<Ix, BinaryError> {
        let json = serde_json::to_string(s).map_err(|e| BinaryError::Encode(e.to_string()))?;
        Ok(self.scopes.index(json))
    }

    /// The expressions' texts and the scopes' JSON, by index.
    pub(super) fn into_lists(self) -> (Vec<String>, Vec<String>) {
        (self.exprs.list, self.scopes.list)
    }
}

/// The parsed expressions and scopes of a file.
pub(super) struct Tables {
    exprs: Vec<DimExpr>,
    scopes: Vec<SymbolScope>,
}

impl Tables {
    /// Parses each expression and scope once.
    ///
    /// # Errors
    /// [`BinaryError::Payload`] naming the text that does not parse.
    pub(super) fn parse(exprs: Vec<String>, scopes: Vec<String>) -> Result<Tables, BinaryError> {
        let exprs = exprs
            .into_iter()
            .map(|t| {
                t.parse::<DimExpr>()
                    .map_err(|e| BinaryError::Payload(format!("expression `{t}`: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let scopes = scopes
            .into_iter()
            .map(|t| {
                serde_json::from_str::<SymbolScope>(&t)
                    .map_err(|e| BinaryError::Payload(format!("symbol scope: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Tables { exprs, scopes })
    }

    /// Expression `i`.
    ///
    /// # Errors
    /// [`BinaryError::Payload`] when `i` is out of range.
    pub(super) fn expr(&self, i: Ix) -> Result<DimExpr, BinaryError> {
        self.exprs.get(i as usize).cloned().ok_or_else(|| {
            BinaryError::Payload(format!("expression {i} of a table of {}", self.exprs.len()))
        })
    }

    /// Expressions `ix`.
    ///
    /// # Errors
    /// As [`Tables::expr`].
    pub(super) fn exprs(&self, ix: &[Ix]) -> Result<Vec<DimExpr>, BinaryError> {
        super::try_map(ix, |&i| self.expr(i))
    }

    /// Scope `i`.
    ///
    /// # Errors
    /// [`BinaryError::Payload`] when `i` is out of range.
    pub(super) fn scope(&self, i: Ix) -> Result<SymbolScope, BinaryError> {
        self.scopes.get(i as usize).cloned().ok_or_else(|| {
            BinaryError::Payload(format!(
                "symbol scope {i} of a table of {}",
                self.scopes.len()
            ))
        })
    }
}
