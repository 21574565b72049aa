//! A scalar region (a `sort` comparator, a variadic `reduce` body such as JAX's `argmax`, a
//! `scatter` or window body) compiled once into a straight-line list of scalar instructions
//! over a register file, so that evaluating it per element costs a few nanoseconds instead of
//! a [`super::Program`] run on one-element tensors (about 10 µs).
//!
//! Compiled ops: `constant` (a splat literal), `compare` (every direction, `TOTALORDER` or
//! not), `select`, `and`/`or`/`xor`/`not` on `i1`, `maximum`/`minimum` on every element type.
//! A region with any other op, or with operands of other types, is not compiled
//! ([`ScalarBody::compile`] gives `None`) and runs as its program.
//!
//! Invariant: [`ScalarBody::eval`] returns exactly what the region's program returns on the
//! same scalars: each instruction is the reference kernel's own element operation
//! (`compare`'s [`super::elementwise::cmp_elem`]; [`Elem::max_e`]/[`Elem::min_e`]; `select` on its `i1`).

use super::elementwise::{cmp_elem, cmp_fn};
use super::program_schedule;
use crate::tensor::{Elem, Scalar, Tensor};
use ebb_ir::{Graph, Op, Relation, ValueRef};
use half::{bf16, f16};
use std::collections::HashMap;

/// One instruction; operands and the result are register indices.
#[derive(Clone, Debug)]
enum Instr {
    Compare {
        a: usize,
        b: usize,
        dir: Relation,
        total: bool,
    },
    Select {
        p: usize,
        t: usize,
        f: usize,
    },
    And(usize, usize),
    Or(usize, usize),
    Xor(usize, usize),
    Not(usize),
    Max(usize, usize),
    Min(usize, usize),
}

/// A compiled scalar region (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct ScalarBody {
    /// Registers: the region's inputs, then its constants, then one per instruction.
    init: Vec<Scalar>,
    inputs: usize,
    code: Vec<(Instr, usize)>,
    outputs: Vec<usize>,
}

fn compare<T: Elem>(x: T, y: T, dir: Relation, total: bool) -> bool {
    cmp_elem(x, y, cmp_fn(dir), total)
}

/// `compare` of two scalars of one type; `None` when their types differ.
pub(crate) fn compare_scalars(a: Scalar, b: Scalar, dir: Relation, total: bool) -> Option<bool> {
    use Scalar as S;
    Some(match (a, b) {
        (S::F32(x), S::F32(y)) => compare(x, y, dir, total),
        (S::BF16(x), S::BF16(y)) => compare::<bf16>(x, y, dir, total),
        (S::F16(x), S::F16(y)) => compare::<f16>(x, y, dir, total),
        (S::F64(x), S::F64(y)) => compare(x, y, dir, total),
        (S::I1(x), S::I1(y)) => compare(x, y, dir, total),
        (S::I8(x), S::I8(y)) => compare(x, y, dir, total),
        (S::I16(x), S::I16(y)) => compare(x, y, dir, total),
        (S::I32(x), S::I32(y)) => compare(x, y, dir, total),
        (S::I64(x), S::I64(y)) => compare(x, y, dir, total),
        (S::U8(x), S::U8(y)) => compare(x, y, dir, total),
        (S::U32(x), S::U32(y)) => compare(x, y, dir, total),
        (S::U64(x), S::U64(y)) => compare(x, y, dir, total),
        _ => return None,
    })
}

/// `maximum` (`max`) or `minimum` of two scalars of one type; `None` when their types differ.
fn extremum(a: Scalar, b: Scalar, max: bool) -> Option<Scalar> {
    use Scalar as S;
    fn pick<T: Elem>(x: T, y: T, max: bool) -> T {
        if max {
            x.max_e(y)
        } else {
            x.min_e(y)
        }
    }
    Some(match (a, b) {
        (S::F32(x), S::F32(y)) => S::F32(pick(x, y, max)),
        (S::BF16(x), S::BF16(y)) => S::BF16(pick(x, y, max)),
        (S::F16(x), S::F16(y)) => S::F16(pick(x, y, max)),
        (S::F64(x), S::F64(y)) => S::F64(pick(x, y, max)),
        (S::I1(x), S::I1(y)) => S::I1(pick(x, y, max)),
        (S::I8(x), S::I8(y)) => S::I8(pick(x, y, max)),
        (S::I16(x), S::I16(y)) => S::I16(pick(x, y, max)),
        (S::I32(x), S::I32(y)) => S::I32(pick(x, y, max)),
        (S::I64(x), S::I64(y)) => S::I64(pick(x, y, max)),
        (S::U8(x), S::U8(y)) => S::U8(pick(x, y, max)),
        (S::U32(x), S::U32(y)) => S::U32(pick(x, y, max)),
        (S::U64(x), S::U64(y)) => S::U64(pick(x, y, max)),
        _ => return None,
    })
}

impl ScalarBody {
    /// Compiles region `r` whose inputs are scalars, or `None` where it has an op (or a
    /// non-scalar value) outside the compiled set of the module docs.
    pub(crate) fn compile(r: &Graph) -> Option<ScalarBody> {
        // Registers: the inputs, then one per op in program order (a constant's holds its
        // value from the start).
        let mut reg: HashMap<ValueRef, usize> = HashMap::new();
        let mut init: Vec<Scalar> = Vec::new();
        for (k, &n) in r.inputs().iter().enumerate() {
            if !r.node(n).outputs.first()?.shape.is_empty() {
                return None;
            }
            reg.insert(ValueRef::new(n, 0), k);
            init.push(Scalar::I1(false));
        }
        let inputs = init.len();
        let mut code = Vec::new();
        for n in program_schedule(r) {
            let node = r.node(n);
            if node.outputs.len() != 1 || !node.outputs[0].shape.is_empty() {
                return None;
            }
            let at = r
                .operands(n)
                .iter()
                .map(|v| reg.get(v).copied())
                .collect::<Option<Vec<usize>>>()?;
            let out = init.len();
            let instr = match (&node.op, at.as_slice()) {
                (Op::Constant(lit), []) => {
                    let t = Tensor::from_literal(lit, vec![]).ok()?;
                    if t.dtype() != node.outputs[0].dtype {
                        return None;
                    }
                    init.push(t.scalar_value()?);
                    reg.insert(ValueRef::new(n, 0), out);
                    continue;
                }
                (Op::Compare(spec), &[a, b]) => Instr::Compare {
                    a,
                    b,
                    dir: spec.direction,
                    total: spec.total_order(),
                },
                (Op::Select, &[p, t, f]) => Instr::Select { p, t, f },
                (Op::And, &[a, b]) => Instr::And(a, b),
                (Op::Or, &[a, b]) => Instr::Or(a, b),
                (Op::Xor, &[a, b]) => Instr::Xor(a, b),
                (Op::Not, &[a]) => Instr::Not(a),
                (Op::Maximum, &[a, b]) => Instr::Max(a, b),
                (Op::Minimum, &[a, b]) => Instr::Min(a, b),
                _ => return None,
            };
            init.push(Scalar::I1(false));
            reg.insert(ValueRef::new(n, 0), out);
            code.push((instr, out));
        }
        let outputs = r
            .outputs()
            .iter()
            .map(|v| reg.get(v).copied())
            .collect::<Option<Vec<_>>>()?;
        Some(ScalarBody {
            init,
            inputs,
            code,
            outputs,
        })
    }

    /// Where the body is `compare(P, Q)` with `P` computed from input `2k` alone and `Q` from
    /// input `2k + 1` alone (constants aside): a `sort` comparator that compares keys of each
    /// side's element of operand `k`, as `jnp.sort`'s (canonicalize `-0` and NaN, then a
    /// total-order compare). Then `less(i, j)` is `compare(P(x[i]), Q(x[j]))`, and the keys can
    /// be computed once per element ([`ScalarBody::keys`]).
    pub(crate) fn key_compare(&self) -> Option<KeyCompare> {
        let &out = self.outputs.first()?;
        let (Instr::Compare { a, b, dir, total }, _) = self.code.iter().find(|(_, o)| *o == out)?
        else {
            return None;
        };
        // The inputs each register depends on, as a bit set (at most 64 inputs).
        if self.inputs > 64 {
            return None;
        }
        let mut deps = vec![0u64; self.init.len()];
        for (k, d) in deps.iter_mut().enumerate().take(self.inputs) {
            *d = 1 << k;
        }
        for (i, out) in &self.code {
            deps[*out] = match *i {
                Instr::Compare { a, b, .. }
                | Instr::And(a, b)
                | Instr::Or(a, b)
                | Instr::Xor(a, b)
                | Instr::Max(a, b)
                | Instr::Min(a, b) => deps[a] | deps[b],
                Instr::Select { p, t, f } => deps[p] | deps[t] | deps[f],
                Instr::Not(a) => deps[a],
            };
        }
        let (da, db) = (deps[*a], deps[*b]);
        let k = (da | db).trailing_zeros() as usize / 2;
        let (ka, kb) = (1u64 << (2 * k), 1u64 << (2 * k + 1));
        (da & !ka == 0 && db & !kb == 0 && 2 * k + 1 < self.inputs).then_some(KeyCompare {
            a: *a,
            b: *b,
            dir: *dir,
            total: *total,
        })
    }

    /// The keys of [`ScalarBody::key_compare`] for one element: the registers `c.a` and `c.b`
    /// after evaluating the body with both sides of every operand pair at `args[k]` (the
    /// element of operand `k`). `None` as for [`ScalarBody::eval`].
    pub(crate) fn keys(&self, c: &KeyCompare, args: &[Scalar]) -> Option<(Scalar, Scalar)> {
        let mut both = [Scalar::I1(false); 16];
        if 2 * args.len() != self.inputs || self.inputs > both.len() {
            return None;
        }
        for (k, &x) in args.iter().enumerate() {
            both[2 * k] = x;
            both[2 * k + 1] = x;
        }
        self.run(&both[..self.inputs], |regs| (regs[c.a], regs[c.b]))
    }

    /// Evaluates the body on `args` (one scalar per region input) and hands its results to
    /// `f`. `None` when `args` do not fit the region's inputs or an operand has a type its
    /// instruction does not take (a region that does not verify); the caller then runs the
    /// region's program, which reports it.
    pub(crate) fn eval<R>(&self, args: &[Scalar], f: impl FnOnce(&[Scalar]) -> R) -> Option<R> {
        self.run(args, |regs| {
            let mut res = [Scalar::I1(false); 8];
            if self.outputs.len() <= res.len() {
                for (k, &o) in self.outputs.iter().enumerate() {
                    res[k] = regs[o];
                }
                f(&res[..self.outputs.len()])
            } else {
                let res: Vec<Scalar> = self.outputs.iter().map(|&o| regs[o]).collect();
                f(&res)
            }
        })
    }

    /// Runs the instructions on `args` and hands the whole register file to `f`.
    fn run<R>(&self, args: &[Scalar], f: impl FnOnce(&[Scalar]) -> R) -> Option<R> {
        const STACK: usize = 48;
        if args.len() != self.inputs {
            return None;
        }
        let mut stack = [Scalar::I1(false); STACK];
        let mut heap = Vec::new();
        let regs: &mut [Scalar] = if self.init.len() <= STACK {
            &mut stack[..self.init.len()]
        } else {
            heap.extend_from_slice(&self.init);
            &mut heap
        };
        regs.copy_from_slice(&self.init);
        regs[..self.inputs].copy_from_slice(args);
        for (i, out) in &self.code {
            let v = match *i {
                Instr::Compare { a, b, dir, total } => {
                    Scalar::I1(compare_scalars(regs[a], regs[b], dir, total)?)
                }
                Instr::Select { p, t, f } => match regs[p] {
                    Scalar::I1(true) => regs[t],
                    Scalar::I1(false) => regs[f],
                    _ => return None,
                },
                Instr::And(a, b) | Instr::Or(a, b) | Instr::Xor(a, b) => {
                    let (Scalar::I1(x), Scalar::I1(y)) = (regs[a], regs[b]) else {
                        return None;
                    };
                    Scalar::I1(match i {
                        Instr::And(..) => x & y,
                        Instr::Or(..) => x | y,
                        _ => x ^ y,
                    })
                }
                Instr::Not(a) => match regs[a] {
                    Scalar::I1(x) => Scalar::I1(!x),
                    _ => return None,
                },
                Instr::Max(a, b) => extremum(regs[a], regs[b], true)?,
                Instr::Min(a, b) => extremum(regs[a], regs[b], false)?,
            };
            regs[*out] = v;
        }
        Some(f(regs))
    }
}

/// A comparator of keys ([`ScalarBody::key_compare`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyCompare {
    /// Registers of the left and right keys.
    a: usize,
    b: usize,
    /// The comparison of the keys.
    pub dir: Relation,
    pub total: bool,
}

/// An unsigned integer whose order is `s`'s: the IEEE total order of a float's `f64` value
/// (`total_cmp`), the numeric order of an integer or boolean.
fn ordered_bits(s: Scalar) -> u64 {
    use Scalar as S;
    let float = |v: f64| {
        let b = v.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | (1 << 63)
        }
    };
    let signed = |v: i64| (v as u64) ^ (1 << 63);
    match s {
        S::F32(x) => float(x.to_f64()),
        S::BF16(x) => float(x.to_f64()),
        S::F16(x) => float(x.to_f64()),
        S::F64(x) => float(x),
        S::I1(x) => x as u64,
        S::I8(x) => signed(x as i64),
        S::I16(x) => signed(x as i64),
        S::I32(x) => signed(x as i64),
        S::I64(x) => signed(x),
        S::U8(x) => x as u64,
        S::U32(x) => x as u64,
        S::U64(x) => x,
    }
}

impl KeyCompare {
    /// Where both sides' keys are one key per element (`left[i]` and `right[i]` of one type and
    /// equal bit for bit), the comparison is `LT` or `GT`, and it is a total order on these keys
    /// (`TOTALORDER` floats, integers, booleans): per element an integer whose ascending
    /// (`LT`) or descending (`GT`) order is the comparator's, so that a stable sort by it
    /// orders elements as a stable sort by the comparator does; and whether it is descending.
    pub(crate) fn ordered(&self, keys: &[(Scalar, Scalar)]) -> Option<(Vec<u64>, bool)> {
        let desc = match self.dir {
            Relation::Lt => false,
            Relation::Gt => true,
            _ => return None,
        };
        let first = keys.first()?.0;
        if first.dtype().is_float() && !self.total {
            return None;
        }
        let mut out = Vec::with_capacity(keys.len());
        for &(l, r) in keys {
            if l.dtype() != first.dtype() || ordered_bits(l) != ordered_bits(r) {
                return None;
            }
            out.push(ordered_bits(l));
        }
        Some((out, desc))
    }

    /// `compare(left, right)` of two keys; `None` where their types differ.
    pub(crate) fn less(&self, left: Scalar, right: Scalar) -> Option<bool> {
        compare_scalars(left, right, self.dir, self.total)
    }
}
