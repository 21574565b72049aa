//! Symbol bindings as the tools spell them (`B=8,S=512`), binding a graph's symbols to values
//! (the precise-shape baseline), and checking that a graph's sizes evaluate at a binding.

use anyhow::{Context, Result};
use ebb_ir::{Bindings, BindingsExt, DimExpr, Graph, Symbol};
use ebb_passes::memory;
use std::collections::BTreeMap;

/// Parses `B=8,S=512` into bindings (symbols by name).
pub fn parse_bindings(s: &str) -> Result<Bindings> {
    Ok(<Bindings as BindingsExt>::parse(s)?)
}

/// Replaces every bound symbol of `g` by its value (types, attributes, assertions), then
/// verifies the bound graph.
///
/// # Errors
/// A dimension whose value overflows 64-bit integers (naming it), or a bound graph that fails
/// verification (a size that overflows, a shape that no longer holds).
pub fn bind_graph(g: &mut Graph, b: &Bindings) -> Result<()> {
    let map: BTreeMap<Symbol, DimExpr> = b
        .iter()
        .map(|(s, v)| (s.clone(), DimExpr::constant(*v)))
        .collect();
    let failed: std::cell::RefCell<Option<String>> = Default::default();
    g.map_dims(&|d: &DimExpr| {
        if d.symbols().is_empty() {
            return d.clone();
        }
        d.try_substitute(&map).unwrap_or_else(|e| {
            failed
                .borrow_mut()
                .get_or_insert_with(|| format!("dimension `{d}`: {e}"));
            d.clone()
        })
    });
    if let Some(msg) = failed.into_inner() {
        anyhow::bail!("at {}: {msg}", show(b));
    }
    ebb_ir::verify::verify(g).with_context(|| format!("the graph bound at {}", show(b)))?;
    Ok(())
}

/// `B=8,S=512`: bindings as the CLI spells them.
pub fn show(b: &Bindings) -> String {
    b.to_text()
}

/// Checks that every size of `g` evaluates at `b`: `b` names only symbols of `g`'s scope,
/// keeps its facts, binds (directly or through the scope's equalities) every symbol the sizes
/// use, and no size or sum of sizes overflows.
///
/// # Errors
/// The first of those that fails, naming the symbol or the fact.
pub fn check_evaluable(g: &Graph, b: &Bindings) -> Result<()> {
    g.scope.check_known(b)?;
    g.scope.check(b)?;
    let full = g.scope.complete(b)?;
    memory::liveness(g, &memory::program_order(g))
        .peak(&full)
        .map_err(|e| size_error(g, &full, e))?;
    Ok(())
}

/// A readable error for sizes of `g` that do not evaluate at `b`: for an overflow, the first
/// value whose size overflows (its op, type and size expression) or else the sum of sizes.
pub(crate) fn size_error(g: &Graph, b: &Bindings, e: ebb_ir::dim::DimError) -> anyhow::Error {
    if e != ebb_ir::dim::DimError::Overflow {
        return e.into();
    }
    for (i, &id) in g.order().iter().enumerate() {
        let n = g.node(id);
        for (k, t) in n.outputs.iter().enumerate() {
            let Ok(size) = t.checked_size_bytes() else {
                continue;
            };
            if size.eval(b) == Err(ebb_ir::dim::DimError::Overflow) {
                return anyhow::anyhow!(
                    "at {}, the size of result {k} of op #{i} `{}` ({t}: {size} bytes) overflows \
                     64-bit integers",
                    show(b),
                    n.kind().name()
                );
            }
        }
    }
    anyhow::anyhow!(
        "at {}, the bytes resident at once overflow 64-bit integers",
        show(b)
    )
}
