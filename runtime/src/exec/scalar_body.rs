//! A scalar region (a `sort` comparator, a variadic `reduce` body such as JAX's `argmax`, a
//! `scatter` or window body) compiled once into a straight-line list of typed scalar
//! instructions over a register file, so that evaluating it per element costs a few
//! nanoseconds instead of a [`super::Program`] run on one-element tensors (about 10 µs).
//!
//! Registers hold an element's bits in a `u64` (zero-extended); each register's element type
//! is fixed when the body is compiled (the region's own types), so an instruction reads its
//! operands without matching on their types at run time.
//!
//! Compiled ops: `constant` (a splat literal), `compare` (every direction, `TOTALORDER` or
//! not), `select`, `and`/`or`/`xor`/`not` on `i1`, `maximum`/`minimum` on every element type.
//! A region with any other op, or with operands of other types, is not compiled
//! ([`ScalarBody::compile`] gives `None`) and runs as its program.
//!
//! Invariant: [`ScalarBody::eval`] returns exactly what the region's program returns on the
//! same scalars: each instruction is the reference kernel's own element operation
//! (`compare`'s [`super::elementwise::cmp_elem`]; [`Elem::max_e`]/[`Elem::min_e`]; `select` on
//! its `i1`).

use super::elementwise::{cmp_elem, cmp_fn};
use super::program_schedule;
use crate::tensor::{Data, Elem, Scalar, Tensor};
use ebb_ir::{DType, Graph, Op, Relation, ValueRef};
use half::{bf16, f16};
use std::collections::HashMap;

/// One register: an element's bits, zero-extended to 64.
pub(crate) type Reg = u64;

/// One instruction; operands and the result are register indices; `ty` is the operands'
/// element type.
#[derive(Clone, Debug)]
enum Instr {
    Compare {
        a: usize,
        b: usize,
        dir: Relation,
        total: bool,
        ty: DType,
        /// The comparison of two registers of type `ty` ([`compare_op`]).
        op: BinOp,
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
    /// `maximum` or `minimum` of two registers of one type ([`extremum_op`]).
    Extremum(usize, usize, BinOp),
}

/// A compiled scalar region (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct ScalarBody {
    /// Registers: the region's inputs, then its constants, then one per instruction.
    init: Vec<Reg>,
    /// Each register's element type.
    ty: Vec<DType>,
    inputs: usize,
    code: Vec<(Instr, usize)>,
    outputs: Vec<usize>,
}

/// An element type's value as register bits and back.
trait RegBits: Elem {
    fn get(r: Reg) -> Self;
    fn put(self) -> Reg;
}

macro_rules! reg_bits {
    ($($t:ty => |$r:ident| $e:expr, |$v:ident| $p:expr);* $(;)?) => {
        $(impl RegBits for $t {
            #[inline(always)]
            fn get($r: Reg) -> Self {
                $e
            }
            #[inline(always)]
            fn put(self) -> Reg {
                let $v = self;
                $p
            }
        })*
    };
}

reg_bits! {
    f32 => |r| f32::from_bits(r as u32), |v| v.to_bits() as u64;
    bf16 => |r| bf16::from_bits(r as u16), |v| v.to_bits() as u64;
    f16 => |r| f16::from_bits(r as u16), |v| v.to_bits() as u64;
    f64 => |r| f64::from_bits(r), |v| v.to_bits();
    bool => |r| r != 0, |v| v as u64;
    i8 => |r| r as u8 as i8, |v| v as u8 as u64;
    i16 => |r| r as u16 as i16, |v| v as u16 as u64;
    i32 => |r| r as u32 as i32, |v| v as u32 as u64;
    i64 => |r| r as i64, |v| v as u64;
    u8 => |r| r as u8, |v| v as u64;
    u32 => |r| r as u32, |v| v as u64;
    u64 => |r| r, |v| v;
}

/// `s`'s bits as a register.
fn to_reg(s: Scalar) -> Reg {
    match s {
        Scalar::F32(x) => x.put(),
        Scalar::BF16(x) => x.put(),
        Scalar::F16(x) => x.put(),
        Scalar::F64(x) => x.put(),
        Scalar::I1(x) => x.put(),
        Scalar::I8(x) => x.put(),
        Scalar::I16(x) => x.put(),
        Scalar::I32(x) => x.put(),
        Scalar::I64(x) => x.put(),
        Scalar::U8(x) => x.put(),
        Scalar::U32(x) => x.put(),
        Scalar::U64(x) => x.put(),
    }
}

/// The scalar of type `ty` whose bits register `r` holds.
fn from_reg(ty: DType, r: Reg) -> Scalar {
    match ty {
        DType::F32 => Scalar::F32(RegBits::get(r)),
        DType::BF16 => Scalar::BF16(RegBits::get(r)),
        DType::F16 => Scalar::F16(RegBits::get(r)),
        DType::F64 => Scalar::F64(RegBits::get(r)),
        DType::I1 => Scalar::I1(RegBits::get(r)),
        DType::I8 => Scalar::I8(RegBits::get(r)),
        DType::I16 => Scalar::I16(RegBits::get(r)),
        DType::I32 => Scalar::I32(RegBits::get(r)),
        DType::I64 => Scalar::I64(RegBits::get(r)),
        DType::U8 => Scalar::U8(RegBits::get(r)),
        DType::U32 => Scalar::U32(RegBits::get(r)),
        DType::U64 => Scalar::U64(RegBits::get(r)),
    }
}

/// Calls `$f::<T>($args)` with `T` the Rust type of element type `$ty`.
macro_rules! by_type {
    ($ty:expr, $f:ident($($a:expr),*)) => {
        match $ty {
            DType::F32 => $f::<f32>($($a),*),
            DType::BF16 => $f::<bf16>($($a),*),
            DType::F16 => $f::<f16>($($a),*),
            DType::F64 => $f::<f64>($($a),*),
            DType::I1 => $f::<bool>($($a),*),
            DType::I8 => $f::<i8>($($a),*),
            DType::I16 => $f::<i16>($($a),*),
            DType::I32 => $f::<i32>($($a),*),
            DType::I64 => $f::<i64>($($a),*),
            DType::U8 => $f::<u8>($($a),*),
            DType::U32 => $f::<u32>($($a),*),
            DType::U64 => $f::<u64>($($a),*),
        }
    };
}

fn compare<T: Elem>(x: T, y: T, dir: Relation, total: bool) -> bool {
    cmp_elem(x, y, cmp_fn(dir), total)
}

/// `compare` of two registers of type `T`.
fn compare_regs<T: RegBits>(x: Reg, y: Reg, dir: Relation, total: bool) -> bool {
    compare(T::get(x), T::get(y), dir, total)
}

/// `maximum` (`max`) or `minimum` of two registers of type `T`, as register bits.
fn extremum_regs<T: RegBits>(x: Reg, y: Reg, max: bool) -> Reg {
    let (x, y) = (T::get(x), T::get(y));
    if max { x.max_e(y) } else { x.min_e(y) }.put()
}

/// Lanes evaluated together by [`ScalarBody::exec_lanes`].
pub(crate) const LANES: usize = 16;

/// One register per lane.
pub(crate) type Lanes = [Reg; LANES];

/// A binary instruction's operation with its operand type fixed at compile time: on one
/// register pair, and on every lane of two lane sets.
#[derive(Clone, Copy, Debug)]
struct BinOp {
    one: fn(Reg, Reg) -> Reg,
    lanes: fn(&Lanes, &Lanes, &mut Lanes),
}

/// The [`BinOp`] of a non-capturing closure `|x: Reg, y: Reg| -> Reg`.
macro_rules! bin_op {
    ($f:expr) => {
        BinOp {
            one: $f,
            lanes: |a, b, o| {
                let f = $f;
                for l in 0..LANES {
                    o[l] = f(a[l], b[l]);
                }
            },
        }
    };
}

/// `compare` in direction `dir` (`TOTALORDER` when `total`) of two registers of type `ty`
/// (result 1 or 0).
fn compare_op(ty: DType, dir: Relation, total: bool) -> BinOp {
    fn typed<T: RegBits>(dir: Relation, total: bool) -> BinOp {
        use Relation as R;
        macro_rules! arms {
            ($($d:ident),*) => {
                match (dir, total) {
                    $((R::$d, false) => bin_op!(|x: Reg, y: Reg| {
                        compare(T::get(x), T::get(y), R::$d, false) as Reg
                    }),
                    (R::$d, true) => bin_op!(|x: Reg, y: Reg| {
                        compare(T::get(x), T::get(y), R::$d, true) as Reg
                    }),)*
                }
            };
        }
        arms!(Eq, Ne, Lt, Le, Gt, Ge)
    }
    by_type!(ty, typed(dir, total))
}

/// `maximum` (`max`) or `minimum` of two registers of type `ty`.
fn extremum_op(ty: DType, max: bool) -> BinOp {
    fn typed<T: RegBits>(max: bool) -> BinOp {
        if max {
            bin_op!(|x: Reg, y: Reg| extremum_regs::<T>(x, y, true))
        } else {
            bin_op!(|x: Reg, y: Reg| extremum_regs::<T>(x, y, false))
        }
    }
    by_type!(ty, typed(max))
}

/// `compare` of two scalars of one type; `None` when their types differ.
pub(crate) fn compare_scalars(a: Scalar, b: Scalar, dir: Relation, total: bool) -> Option<bool> {
    let ty = a.dtype();
    (b.dtype() == ty).then(|| by_type!(ty, compare_regs(to_reg(a), to_reg(b), dir, total)))
}

impl ScalarBody {
    /// Compiles region `r` whose inputs are scalars, or `None` where it has an op (or a
    /// non-scalar value, or operands of mismatched types) outside the compiled set of the
    /// module docs.
    pub(crate) fn compile(r: &Graph) -> Option<ScalarBody> {
        // Registers: the inputs, then one per op in program order (a constant's holds its
        // value from the start).
        let mut reg: HashMap<ValueRef, usize> = HashMap::new();
        let (mut init, mut ty) = (Vec::new(), Vec::new());
        for (k, &n) in r.inputs().iter().enumerate() {
            let v = r.node(n).outputs.first()?;
            if !v.shape.is_empty() {
                return None;
            }
            reg.insert(ValueRef::new(n, 0), k);
            init.push(0);
            ty.push(v.dtype);
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
            let same = |a: usize, b: usize| (ty[a] == ty[b]).then_some(ty[a]);
            let bools = |a: usize, b: usize| ty[a] == DType::I1 && ty[b] == DType::I1;
            let (instr, out_ty) = match (&node.op, at.as_slice()) {
                (Op::Constant(lit), []) => {
                    let t = Tensor::from_literal(lit, vec![]).ok()?;
                    if t.dtype() != node.outputs[0].dtype {
                        return None;
                    }
                    init.push(to_reg(t.scalar_value()?));
                    ty.push(t.dtype());
                    reg.insert(ValueRef::new(n, 0), out);
                    continue;
                }
                (Op::Compare(spec), &[a, b]) => {
                    let (dir, total, ty) = (spec.direction, spec.total_order(), same(a, b)?);
                    let op = compare_op(ty, dir, total);
                    let c = Instr::Compare {
                        a,
                        b,
                        dir,
                        total,
                        ty,
                        op,
                    };
                    (c, DType::I1)
                }
                (Op::Select, &[p, t, f]) if ty[p] == DType::I1 => {
                    (Instr::Select { p, t, f }, same(t, f)?)
                }
                (Op::And, &[a, b]) if bools(a, b) => (Instr::And(a, b), DType::I1),
                (Op::Or, &[a, b]) if bools(a, b) => (Instr::Or(a, b), DType::I1),
                (Op::Xor, &[a, b]) if bools(a, b) => (Instr::Xor(a, b), DType::I1),
                (Op::Not, &[a]) if ty[a] == DType::I1 => (Instr::Not(a), DType::I1),
                (Op::Maximum, &[a, b]) => {
                    (Instr::Extremum(a, b, extremum_op(same(a, b)?, true)), ty[a])
                }
                (Op::Minimum, &[a, b]) => (
                    Instr::Extremum(a, b, extremum_op(same(a, b)?, false)),
                    ty[a],
                ),
                _ => return None,
            };
            if out_ty != node.outputs[0].dtype {
                return None;
            }
            init.push(0);
            ty.push(out_ty);
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
            ty,
            inputs,
            code,
            outputs,
        })
    }

    /// Where the body is `compare(P, Q)` with `P` computed from input `2k` alone and `Q` from
    /// input `2k + 1` alone (constants aside): a `sort` comparator that compares keys of each
    /// side's element of operand `k`, as `jnp.sort`'s (canonicalize `-0` and NaN, then a
    /// total-order compare). Then `less(i, j)` is `compare(P(x[i]), Q(x[j]))`, and the keys can
    /// be computed once per element ([`ScalarBody::keys_all`]).
    pub(crate) fn key_compare(&self) -> Option<KeyCompare> {
        let &out = self.outputs.first()?;
        let (
            Instr::Compare {
                a,
                b,
                dir,
                total,
                ty,
                op,
            },
            _,
        ) = self.code.iter().find(|(_, o)| *o == out)?
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
                | Instr::Extremum(a, b, _) => deps[a] | deps[b],
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
            ty: *ty,
            op: *op,
        })
    }

    /// The keys of [`ScalarBody::key_compare`] for every element `i < len` of `operands`, as
    /// register bits of `c`'s type: the registers `c.a` and `c.b` after evaluating the body
    /// with both sides of every input pair `k` at element `i` of operand `k`, [`LANES`]
    /// elements at a time. `None` where the
    /// operands' number or element types do not fit the region's inputs, or one is shorter
    /// than `len`.
    pub(crate) fn keys_all(
        &self,
        c: &KeyCompare,
        operands: &[&Data],
        len: usize,
    ) -> Option<Vec<(Reg, Reg)>> {
        if 2 * operands.len() != self.inputs
            || operands.iter().enumerate().any(|(k, d)| {
                d.dtype() != self.ty[2 * k] || d.dtype() != self.ty[2 * k + 1] || d.len() < len
            })
        {
            return None;
        }
        let mut regs: Vec<Lanes> = self.init.iter().map(|&r| [r; LANES]).collect();
        let mut at = [0usize; LANES];
        let mut keys = Vec::with_capacity(len);
        for i0 in (0..len).step_by(LANES) {
            // Lanes past the last element repeat it; their keys are dropped.
            for (l, a) in at.iter_mut().enumerate() {
                *a = (i0 + l).min(len - 1);
            }
            for (k, d) in operands.iter().enumerate() {
                if !read_lanes(d, &at, &mut regs[2 * k]) {
                    return None;
                }
                regs[2 * k + 1] = regs[2 * k];
            }
            self.exec_lanes(&mut regs);
            keys.extend((0..LANES.min(len - i0)).map(|l| (regs[c.a][l], regs[c.b][l])));
        }
        Some(keys)
    }

    /// Evaluates the body on `args` (one scalar per region input) and hands its results to
    /// `f`. `None` when `args` do not fit the region's inputs in number or types (a region
    /// that does not verify, or a caller's mistake); the caller then runs the region's
    /// program, which reports it.
    pub(crate) fn eval<R>(&self, args: &[Scalar], f: impl FnOnce(&[Scalar]) -> R) -> Option<R> {
        if args.len() != self.inputs {
            return None;
        }
        self.run(
            |regs| {
                for (k, &x) in args.iter().enumerate() {
                    if x.dtype() != self.ty[k] {
                        return false;
                    }
                    regs[k] = to_reg(x);
                }
                true
            },
            |regs| {
                let mut res = [Scalar::I1(false); 8];
                if self.outputs.len() <= res.len() {
                    for (k, &o) in self.outputs.iter().enumerate() {
                        res[k] = from_reg(self.ty[o], regs[o]);
                    }
                    f(&res[..self.outputs.len()])
                } else {
                    let res: Vec<Scalar> = self
                        .outputs
                        .iter()
                        .map(|&o| from_reg(self.ty[o], regs[o]))
                        .collect();
                    f(&res)
                }
            },
        )
    }

    /// Sets the registers from `init`, lets `load` write the inputs (`false`: they do not fit,
    /// and `run` gives `None`), runs the instructions, and hands the register file to `f`.
    fn run<R>(
        &self,
        load: impl FnOnce(&mut [Reg]) -> bool,
        f: impl FnOnce(&[Reg]) -> R,
    ) -> Option<R> {
        const STACK: usize = 32;
        let mut stack = [0 as Reg; STACK];
        let mut heap = Vec::new();
        let regs: &mut [Reg] = if self.init.len() <= STACK {
            &mut stack[..self.init.len()]
        } else {
            heap.extend_from_slice(&self.init);
            &mut heap
        };
        regs.copy_from_slice(&self.init);
        if !load(regs) {
            return None;
        }
        self.exec(regs);
        Some(f(regs))
    }

    /// A register file for [`ScalarBody::exec`]: constants set, inputs to be written by the
    /// caller (registers `0..inputs`, of [`ScalarBody::input_types`]).
    pub(crate) fn registers(&self) -> Vec<Reg> {
        self.init.clone()
    }

    /// The element types of the region's inputs, in order.
    pub(crate) fn input_types(&self) -> &[DType] {
        &self.ty[..self.inputs]
    }

    /// The register and element type of the region's result `k`.
    pub(crate) fn output(&self, k: usize) -> Option<(usize, DType)> {
        self.outputs.get(k).map(|&o| (o, self.ty[o]))
    }

    /// The number of region results.
    pub(crate) fn outputs(&self) -> usize {
        self.outputs.len()
    }

    /// Runs the instructions on `regs` (a file from [`ScalarBody::registers`] whose inputs the
    /// caller wrote as bits of their [`ScalarBody::input_types`]; every other register is
    /// written before it is read, so one file serves any number of evaluations).
    pub(crate) fn exec(&self, regs: &mut [Reg]) {
        for (i, out) in &self.code {
            regs[*out] = match *i {
                Instr::Compare { a, b, op, .. } => (op.one)(regs[a], regs[b]),
                Instr::Select { p, t, f } => {
                    if regs[p] != 0 {
                        regs[t]
                    } else {
                        regs[f]
                    }
                }
                Instr::And(a, b) => regs[a] & regs[b],
                Instr::Or(a, b) => regs[a] | regs[b],
                Instr::Xor(a, b) => regs[a] ^ regs[b],
                Instr::Not(a) => regs[a] ^ 1,
                Instr::Extremum(a, b, op) => (op.one)(regs[a], regs[b]),
            };
        }
    }

    /// [`ScalarBody::exec`] on [`LANES`] independent evaluations at once: `regs[r][l]` is
    /// register `r` of evaluation `l` (a file of [`ScalarBody::registers`] per lane, each
    /// instruction applied to every lane before the next instruction).
    pub(crate) fn exec_lanes(&self, regs: &mut [Lanes]) {
        for (i, out) in &self.code {
            // Operands are defined before their instruction's register.
            let (lo, hi) = regs.split_at_mut(*out);
            let o = &mut hi[0];
            match *i {
                Instr::Compare { a, b, op, .. } | Instr::Extremum(a, b, op) => {
                    (op.lanes)(&lo[a], &lo[b], o)
                }
                Instr::Select { p, t, f } => {
                    for l in 0..LANES {
                        o[l] = if lo[p][l] != 0 { lo[t][l] } else { lo[f][l] };
                    }
                }
                Instr::And(a, b) => (0..LANES).for_each(|l| o[l] = lo[a][l] & lo[b][l]),
                Instr::Or(a, b) => (0..LANES).for_each(|l| o[l] = lo[a][l] | lo[b][l]),
                Instr::Xor(a, b) => (0..LANES).for_each(|l| o[l] = lo[a][l] ^ lo[b][l]),
                Instr::Not(a) => (0..LANES).for_each(|l| o[l] = lo[a][l] ^ 1),
            }
        }
    }
}

/// Element `i` of `d` as register bits; `None` past its end.
pub(crate) fn read_reg(d: &Data, i: usize) -> Option<Reg> {
    crate::tensor::dispatch!(d, v => v.get(i).map(|x| x.put()))
}

/// Elements `at[l]` of `d` as register bits into lane `l` of `out`; `false` where an index is
/// past its end.
pub(crate) fn read_lanes(d: &Data, at: &[usize; LANES], out: &mut Lanes) -> bool {
    fn typed<T: RegBits>(v: &[T], at: &[usize; LANES], out: &mut Lanes) -> bool {
        if at.iter().any(|&i| i >= v.len()) {
            return false;
        }
        for l in 0..LANES {
            out[l] = v[at[l]].put();
        }
        true
    }
    crate::tensor::dispatch!(d, v => typed(v, at, out))
}

/// A tensor's elements from register bits of its element type `ty`.
pub(crate) fn data_from_regs(ty: DType, regs: impl ExactSizeIterator<Item = Reg>) -> Data {
    fn typed<T: RegBits>(regs: impl ExactSizeIterator<Item = Reg>) -> Data {
        T::wrap(regs.map(T::get).collect::<Vec<T>>().into())
    }
    by_type!(ty, typed(regs))
}

/// A comparator of keys ([`ScalarBody::key_compare`]); keys are register bits of type `ty`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyCompare {
    /// Registers of the left and right keys.
    a: usize,
    b: usize,
    /// The comparison of the keys.
    pub dir: Relation,
    pub total: bool,
    /// The keys' element type.
    ty: DType,
    /// The comparison of two keys.
    op: BinOp,
}

/// An unsigned integer whose order is that of the key `r` of type `ty`: the IEEE total order of
/// a float's `f64` value (`total_cmp`), the numeric order of an integer or boolean.
pub(crate) fn ordered_bits(ty: DType, r: Reg) -> u64 {
    let float = |v: f64| {
        let b = v.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | (1 << 63)
        }
    };
    let signed = |v: i64| (v as u64) ^ (1 << 63);
    match from_reg(ty, r) {
        Scalar::F32(x) => float(x.to_f64()),
        Scalar::BF16(x) => float(x.to_f64()),
        Scalar::F16(x) => float(x.to_f64()),
        Scalar::F64(x) => float(x),
        Scalar::I1(x) => x as u64,
        Scalar::I8(x) => signed(x as i64),
        Scalar::I16(x) => signed(x as i64),
        Scalar::I32(x) => signed(x as i64),
        Scalar::I64(x) => signed(x),
        Scalar::U8(x) => x as u64,
        Scalar::U32(x) => x as u64,
        Scalar::U64(x) => x,
    }
}

impl KeyCompare {
    /// Where both sides' keys are one key per element (`left[i]` and `right[i]` equal bit for
    /// bit), the comparison is `LT` or `GT`, and it is a total order on these keys
    /// (`TOTALORDER` floats, integers, booleans): per element an integer whose ascending
    /// (`LT`) or descending (`GT`) order is the comparator's, so that a stable sort by it
    /// orders elements as a stable sort by the comparator does; and whether it is descending.
    pub(crate) fn ordered(&self, keys: &[(Reg, Reg)]) -> Option<(Vec<u64>, bool)> {
        let desc = match self.dir {
            Relation::Lt => false,
            Relation::Gt => true,
            _ => return None,
        };
        if self.ty.is_float() && !self.total {
            return None;
        }
        let mut out = Vec::with_capacity(keys.len());
        for &(l, r) in keys {
            if l != r {
                return None;
            }
            out.push(ordered_bits(self.ty, l));
        }
        Some((out, desc))
    }

    /// `compare(left, right)` of two keys (always `Some`: both are of the keys' type).
    pub(crate) fn less(&self, left: Reg, right: Reg) -> Option<bool> {
        Some((self.op.one)(left, right) != 0)
    }
}
