//! [`SymbolScope`]: the symbols of a graph and the facts known about them.
//!
//! Facts are ranges (`lo <= S <= hi`), divisibility (`S % k == 0`) and equalities
//! (`S == e`). The prover (`prove.rs`) uses them; [`SymbolScope::check`] verifies concrete
//! bindings against them. Equalities are also kept in *solved form* (no right-hand side
//! mentions a solved symbol), rebuilt whenever facts change; an equality that cannot be solved
//! (its symbol already solved, or it mentions itself) is still checked but not used for
//! rewriting. A symbol whose range is a single value is solved to that constant. Symbols that
//! were never declared are unconstrained integers (no fact, not even `>= 1`).
//!
//! Serialized as `{"symbols": [{"name", "lo", "hi", "divisible_by"}], "equalities":
//! [{"symbol", "expr"}]}`; the solved form is rebuilt on deserialization.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Bindings, BindingsError, DimError, DimExpr, Symbol};

/// Upper end used by [`SymbolScope::representative_bindings`] for unbounded symbols.
pub const SAMPLE_CAP: i64 = 65536;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SymbolDecl {
    name: Symbol,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lo: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hi: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    divisible_by: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct EqualityDecl {
    symbol: Symbol,
    expr: DimExpr,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ScopeRepr {
    #[serde(default)]
    symbols: Vec<SymbolDecl>,
    #[serde(default)]
    equalities: Vec<EqualityDecl>,
}

/// Symbols and the facts about them; every comparison made through a scope is a proof under
/// its facts (see the module docs of `ebb_ir::dim`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "ScopeRepr", into = "ScopeRepr")]
pub struct SymbolScope {
    /// Declared symbols in declaration order, with their range and divisors.
    decls: Vec<SymbolDecl>,
    index: BTreeMap<Symbol, usize>,
    /// Equalities as given, in order.
    equalities: Vec<(Symbol, DimExpr)>,
    /// Derived: solved equalities (see the module docs).
    pub(crate) solved: BTreeMap<Symbol, DimExpr>,
    /// Derived: whether `solved` holds a single-value range (then adding an equality needs a
    /// rebuild to keep the order "equalities first").
    fixed_in_solved: bool,
}

impl From<ScopeRepr> for SymbolScope {
    fn from(r: ScopeRepr) -> SymbolScope {
        let mut scope = SymbolScope::new();
        for d in r.symbols {
            let s = scope.declare_range(d.name.name(), d.lo, d.hi);
            for k in d.divisible_by {
                scope.add_divisible(&s, k);
            }
        }
        for e in r.equalities {
            scope.add_equality(&e.symbol, e.expr);
        }
        scope
    }
}

impl From<SymbolScope> for ScopeRepr {
    fn from(s: SymbolScope) -> ScopeRepr {
        ScopeRepr {
            symbols: s.decls,
            equalities: s
                .equalities
                .into_iter()
                .map(|(symbol, expr)| EqualityDecl { symbol, expr })
                .collect(),
        }
    }
}

impl SymbolScope {
    /// An empty scope.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares the dimension symbol `name` with the default range `>= 1`; idempotent (an
    /// existing symbol keeps its facts).
    pub fn declare(&mut self, name: &str) -> Symbol {
        let s = Symbol::new(name);
        if self.index.contains_key(&s) {
            return s;
        }
        self.declare_range(name, Some(1), None)
    }

    /// Declares `name` with exactly the range `lo..=hi` (`None` = unbounded), e.g. for a
    /// symbol that may be 0 or negative. For an existing symbol the range is intersected.
    pub fn declare_range(&mut self, name: &str, lo: Option<i64>, hi: Option<i64>) -> Symbol {
        let s = Symbol::new(name);
        if self.index.contains_key(&s) {
            self.set_range(&s, lo, hi);
        } else {
            self.index.insert(s.clone(), self.decls.len());
            self.decls.push(SymbolDecl {
                name: s.clone(),
                lo,
                hi,
                divisible_by: Vec::new(),
            });
            if lo.is_some() && lo == hi {
                self.rebuild();
            }
        }
        s
    }

    /// True when `s` was declared.
    pub fn contains(&self, s: &Symbol) -> bool {
        self.index.contains_key(s)
    }

    /// Checks that `b` binds only declared symbols.
    ///
    /// # Errors
    /// [`BindingsError::UnknownSymbol`] naming the first unknown symbol and the declared ones.
    pub fn check_known(&self, b: &Bindings) -> Result<(), BindingsError> {
        match b.keys().find(|s| !self.contains(s)) {
            None => Ok(()),
            Some(s) => {
                let known: Vec<String> = self.decls.iter().map(|d| d.name.to_string()).collect();
                Err(BindingsError::UnknownSymbol {
                    name: s.name().to_string(),
                    known: if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    },
                })
            }
        }
    }

    /// The declared symbols in declaration order.
    pub fn symbols(&self) -> Vec<Symbol> {
        self.decls.iter().map(|d| d.name.clone()).collect()
    }

    fn decl_mut(&mut self, s: &Symbol) -> &mut SymbolDecl {
        let i = match self.index.get(s) {
            Some(&i) => i,
            None => {
                self.declare(s.name());
                self.decls.len() - 1
            }
        };
        &mut self.decls[i]
    }

    fn decl(&self, s: &Symbol) -> Option<&SymbolDecl> {
        self.index.get(s).map(|&i| &self.decls[i])
    }

    /// Adds the fact `lo <= s <= hi` (`None` = no bound on that side), intersected with the
    /// existing range. Declares `s` (range `>= 1`) first when needed. An empty range makes
    /// every binding fail [`SymbolScope::check`] (and every comparison vacuously provable).
    pub fn set_range(&mut self, s: &Symbol, lo: Option<i64>, hi: Option<i64>) {
        let d = self.decl_mut(s);
        let was_fixed = d.lo.is_some() && d.lo == d.hi;
        d.lo = match (d.lo, lo) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        d.hi = match (d.hi, hi) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if was_fixed || (d.lo.is_some() && d.lo == d.hi) {
            self.rebuild();
        }
    }

    /// The range of `s` as `(lo, hi)` (`None` = unbounded); `(None, None)` when undeclared.
    pub fn range(&self, s: &Symbol) -> (Option<i64>, Option<i64>) {
        self.decl(s).map_or((None, None), |d| (d.lo, d.hi))
    }

    /// Adds the fact `s % k == 0`. `k` is taken by absolute value; 0, 1 and `i64::MIN` add no
    /// fact. Declares `s` (range `>= 1`) first when needed.
    pub fn add_divisible(&mut self, s: &Symbol, k: i64) {
        let Some(k) = k.checked_abs().filter(|&k| k > 1) else {
            return;
        };
        let d = self.decl_mut(s);
        if !d.divisible_by.contains(&k) {
            d.divisible_by.push(k);
        }
    }

    /// The largest proven divisor of `s` (the lcm of its divisibility facts; 1 when none).
    /// A factor whose lcm would overflow is left out, which is weaker and so still sound.
    pub fn divisor_of(&self, s: &Symbol) -> i64 {
        let Some(d) = self.decl(s) else { return 1 };
        d.divisible_by.iter().fold(1i64, |acc, &k| {
            let g = super::atoms::gcd(i128::from(acc), i128::from(k));
            i64::try_from(g)
                .ok()
                .and_then(|g| (acc / g).checked_mul(k))
                .unwrap_or(acc)
        })
    }

    /// Adds the fact `s == e` (e.g. from a reshape or an ONNX `dim_param` alias). Declares `s`
    /// first when needed. [`SymbolScope::normalize`] then replaces `s` by `e` wherever the
    /// equality can be solved (see the module docs).
    pub fn add_equality(&mut self, s: &Symbol, e: DimExpr) {
        self.decl_mut(s);
        self.equalities.push((s.clone(), e.clone()));
        if self.fixed_in_solved {
            self.rebuild();
        } else {
            // Same result as a rebuild: equalities are solved in order, fixed ranges last.
            self.add_solved(s, &e);
        }
    }

    /// The equalities as given, in order.
    pub fn equalities(&self) -> &[(Symbol, DimExpr)] {
        &self.equalities
    }

    /// The solved form of the facts (see the module docs): each solved symbol and the
    /// expression it equals, which mentions no solved symbol.
    pub fn solved(&self) -> &BTreeMap<Symbol, DimExpr> {
        &self.solved
    }

    /// Recomputes the solved form from the facts: the equalities in order, then the
    /// single-value ranges (so the solved form depends only on the facts).
    fn rebuild(&mut self) {
        self.solved.clear();
        self.fixed_in_solved = false;
        let eqs = self.equalities.clone();
        for (s, e) in &eqs {
            self.add_solved(s, e);
        }
        let fixed: Vec<(Symbol, i64)> = self
            .decls
            .iter()
            .filter_map(|d| match (d.lo, d.hi) {
                (Some(a), Some(b)) if a == b => Some((d.name.clone(), a)),
                _ => None,
            })
            .collect();
        for (s, v) in fixed {
            self.fixed_in_solved |= self.add_solved(&s, &DimExpr::constant(v));
        }
    }

    /// Adds `s == e` to the solved form when it can be solved; returns whether it was.
    fn add_solved(&mut self, s: &Symbol, e: &DimExpr) -> bool {
        if self.solved.contains_key(s) {
            return false;
        }
        let Ok(e) = e.try_substitute(&self.solved) else {
            return false;
        };
        if e.mentions(s) {
            return false;
        }
        let one = BTreeMap::from([(s.clone(), e.clone())]);
        let mut next = BTreeMap::new();
        for (k, v) in &self.solved {
            if v.mentions(s) {
                match v.try_substitute(&one) {
                    Ok(v) => next.insert(k.clone(), v),
                    Err(_) => return false,
                };
            } else {
                next.insert(k.clone(), v.clone());
            }
        }
        next.insert(s.clone(), e);
        self.solved = next;
        true
    }

    /// Checks concrete bindings against the facts: ranges and divisibility of every bound
    /// declared symbol, and every equality whose symbols are all bound. Facts about unbound
    /// symbols are skipped (use [`SymbolScope::complete`] first to derive them).
    ///
    /// # Errors
    /// [`DimError::FactViolated`] naming the symbol, the fact (`S >= 1`, `S <= 4096`,
    /// `S % 8 == 0`, `S == 2*T`) and the symbol's value; [`DimError::Overflow`] when an
    /// equality's right-hand side overflows.
    pub fn check(&self, b: &Bindings) -> Result<(), DimError> {
        let violated = |s: &Symbol, fact: String, value: i64| DimError::FactViolated {
            symbol: s.name().to_string(),
            fact,
            value,
        };
        for d in &self.decls {
            let Some(&v) = b.get(&d.name) else { continue };
            let s = &d.name;
            if let Some(lo) = d.lo.filter(|&lo| v < lo) {
                return Err(violated(s, format!("{s} >= {lo}"), v));
            }
            if let Some(hi) = d.hi.filter(|&hi| v > hi) {
                return Err(violated(s, format!("{s} <= {hi}"), v));
            }
            if let Some(k) = d.divisible_by.iter().find(|&&k| v.rem_euclid(k) != 0) {
                return Err(violated(s, format!("{s} % {k} == 0"), v));
            }
        }
        for (s, e) in &self.equalities {
            let Some(&v) = b.get(s) else { continue };
            match e.eval(b) {
                Ok(x) if x != v => return Err(violated(s, format!("{s} == {e}"), v)),
                Ok(_) | Err(DimError::Unbound(_)) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// `b` extended with the value of every solved symbol (see the module docs) that `b`
    /// leaves unbound and whose expression `b` determines. Does not check the facts.
    ///
    /// # Errors
    /// [`DimError::Overflow`] when a derived value overflows.
    pub fn complete(&self, b: &Bindings) -> Result<Bindings, DimError> {
        let mut out = b.clone();
        for (s, e) in &self.solved {
            if out.contains_key(s) {
                continue;
            }
            match e.eval(b) {
                Ok(v) => {
                    out.insert(s.clone(), v);
                }
                Err(DimError::Unbound(_)) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(out)
    }

    /// Up to `n` distinct, deterministic bindings of all declared symbols that satisfy the
    /// facts: the first has every free symbol at its lower end, the second at its upper end,
    /// the others mix points spaced geometrically in between (divisibility respected, an
    /// unbounded upper end capped at [`SAMPLE_CAP`], an unbounded lower end at `-SAMPLE_CAP`).
    /// Solved symbols are derived with [`SymbolScope::complete`]; points that then break a
    /// fact are dropped, so fewer than `n` may come back. Meant for resolving
    /// [`DimOrdering::Unknown`](super::DimOrdering) comparisons heuristically, never as proof.
    pub fn representative_bindings(&self, n: usize) -> Vec<Bindings> {
        if n == 0 {
            return Vec::new();
        }
        let free: Vec<&Symbol> = self
            .decls
            .iter()
            .map(|d| &d.name)
            .filter(|s| !self.solved.contains_key(*s))
            .collect();
        let mut cands = Vec::with_capacity(free.len());
        for s in &free {
            let c = self.sample_values(s, n);
            if c.is_empty() {
                return Vec::new();
            }
            cands.push(c);
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for i in 0..n {
            let b: Bindings = free
                .iter()
                .zip(&cands)
                .enumerate()
                .map(|(j, (s, c))| {
                    let idx = match i {
                        0 => 0,
                        1 => c.len() - 1,
                        _ => (mix(i as u64, j as u64) % c.len() as u64) as usize,
                    };
                    ((*s).clone(), c[idx])
                })
                .collect();
            let Ok(b) = self.complete(&b) else { continue };
            if self.check(&b).is_ok() && seen.insert(b.clone()) {
                out.push(b);
            }
        }
        out
    }

    /// `n` values of `s` from its lower to its upper end, geometrically spaced.
    fn sample_values(&self, s: &Symbol, n: usize) -> Vec<i64> {
        let (lo, hi) = self.range(s);
        let cap = i128::from(SAMPLE_CAP);
        let lo = match (lo, hi) {
            (Some(l), _) => i128::from(l),
            (None, Some(h)) => i128::from(h).min(0) - cap,
            (None, None) => -cap,
        };
        let hi = hi.map_or(if lo < cap { cap } else { lo + cap }, i128::from);
        let m = i128::from(self.divisor_of(s));
        let lo = lo + (m - lo.rem_euclid(m)) % m;
        let hi = hi - hi.rem_euclid(m);
        if lo > hi {
            return Vec::new();
        }
        let steps = (hi - lo) / m;
        (0..n)
            .map(|t| {
                let frac = if n == 1 {
                    0.0
                } else {
                    t as f64 / (n - 1) as f64
                };
                let k = ((steps as f64 + 1.0).powf(frac) - 1.0).round() as i128;
                let v = lo + k.clamp(0, steps) * m;
                i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
            })
            .collect()
    }
}

/// splitmix64 of a pair: a deterministic, well-mixed index source.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_add(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
