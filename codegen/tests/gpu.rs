//! GPU kernels: PTX for each kernel family, and the same IR run on the host through its simt
//! entry (threads and blocks bound to loops) against plain Rust references.

use ebb_codegen::gpu::{self, CopyKernel, GpuKernel, ReduceKernel, ReduceOp};
use ebb_codegen::{KernelLayout, Target};
use ebb_ir::DType;

fn region(src: &str) -> ebb_ir::Graph {
    ebb_ir::text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// A one-member loop fusion applying `op` to `f32[N]` (or two of them).
fn unary(op: &str) -> GpuKernel {
    let r = region(&format!(
        "graph @k {{\n  symbols N in [0, inf)\n  %0 = input {{index = 0, name = \"x\"}} : f32[N]\n  \
         %1 = {op}(%0) : f32[N]\n  return %1\n}}"
    ));
    let layout = KernelLayout::of_target(&r, Target::Gpu).expect("layout");
    GpuKernel::Fusion { region: r, layout }
}

fn binary(op: &str) -> GpuKernel {
    let r = region(&format!(
        "graph @k {{\n  symbols N in [0, inf)\n  %0 = input {{index = 0, name = \"x\"}} : f32[N]\n  \
         %1 = input {{index = 1, name = \"y\"}} : f32[N]\n  %2 = {op}(%0, %1) : f32[N]\n  return %2\n}}"
    ));
    let layout = KernelLayout::of_target(&r, Target::Gpu).expect("layout");
    GpuKernel::Fusion { region: r, layout }
}

/// Runs `k` through its simt entry with `bufs` and `params` on a grid of `grid` blocks of
/// `block` threads.
fn run(k: &GpuKernel, bufs: &[*mut u8], params: &[i64], grid: u32, block: u32) {
    assert_eq!((bufs.len(), params.len()), (k.buffers(), k.params()));
    let f = gpu::simt(k).expect("simt");
    let mut args: Vec<u64> = bufs.iter().map(|&p| p as u64).collect();
    args.extend(params.iter().map(|&p| p as u64));
    // SAFETY: the buffers hold what the parameters index.
    unsafe { f(args.as_ptr(), grid, block, 0, grid) };
}

/// Map parameters of the fusion kernel of a one-member elementwise region (no index maps):
/// `n`, row length 1, base 0.
fn fusion_params(k: &GpuKernel, n: usize) -> Vec<i64> {
    let mut p = vec![0i64; k.params()];
    p[0] = n as i64;
    p[1] = 1;
    p
}

fn ulps(a: f32, b: f32) -> u32 {
    if a.is_nan() && b.is_nan() || a == b {
        return 0;
    }
    let (x, y) = (a.to_bits() as i64, b.to_bits() as i64);
    let key = |v: i64| {
        if v & 0x8000_0000 != 0 {
            0x8000_0000 - v
        } else {
            v
        }
    };
    (key(x) - key(y)).unsigned_abs() as u32
}

/// Sample floats: every exponent, several mantissas, both signs, and the special values.
fn samples() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1.0,
        -1.0,
    ];
    let mut s: u32 = 12345;
    for e in 0..255u32 {
        for _ in 0..24 {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let bits = (e << 23) | (s >> 9);
            v.push(f32::from_bits(bits));
            v.push(-f32::from_bits(bits));
        }
    }
    v
}

#[test]
fn ptx_for_every_family() {
    let kernels = [
        unary("log"),
        binary("power"),
        GpuKernel::Copy(CopyKernel {
            elem_bytes: 4,
            rank: 3,
            dyn_src: vec![DType::I32],
            dyn_dst: vec![],
        }),
        GpuKernel::Reduce(ReduceKernel {
            dtype: DType::F32,
            op: ReduceOp::Add,
            kept: 1,
            reduced: 1,
            inner: true,
        }),
    ];
    for k in &kernels {
        let ptx = gpu::ptx(k).unwrap_or_else(|e| panic!("{k:?}: {e}"));
        assert!(ptx.contains(".target sm_80"), "{ptx}");
        assert!(ptx.contains(&format!(".entry {}", k.name())), "{ptx}");
        // Self-contained: no calls to functions the driver would have to link.
        assert!(!ptx.contains("call.uni"), "{ptx}");
        assert!(!ptx.contains(".extern"), "{ptx}");
    }
    // No contraction of multiply and add into an FMA (the host does not contract either).
    let ptx = gpu::ptx(&kernels[0]).expect("ptx");
    assert!(!ptx.contains("fma.rn.f64"), "{ptx}");
}

#[test]
fn log_exp_pow_agree_with_the_c_library() {
    let xs = samples();
    let n = xs.len();
    let mut worst = [0u32; 3];
    let mut differ = [0usize; 3];
    for (j, (op, f)) in [
        ("log", (|x: f32| x.ln()) as fn(f32) -> f32),
        ("logistic", |x: f32| 1.0 / (1.0 + (-x).exp())),
    ]
    .iter()
    .enumerate()
    {
        let k = unary(op);
        let mut out = vec![0f32; n];
        let bufs = [xs.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8];
        run(&k, &bufs, &fusion_params(&k, n), 7, 64);
        for (x, y) in xs.iter().zip(&out) {
            let u = ulps(*y, f(*x));
            assert!(u <= 1, "{op}({x:e}) = {y:e}, libm {:e}", f(*x));
            worst[j] = worst[j].max(u);
            differ[j] += usize::from(u > 0);
        }
    }
    // pow over pairs: every sample against a few exponents, integer ones included.
    let ys: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        3.0,
        -3.0,
        0.5,
        -0.5,
        2.5,
        1e-3,
        7.25,
        30.0,
        -41.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        16_777_217.0,
    ];
    let k = binary("power");
    for &y in &ys {
        let yv = vec![y; n];
        let mut out = vec![0f32; n];
        let bufs = [
            xs.as_ptr() as *mut u8,
            yv.as_ptr() as *mut u8,
            out.as_mut_ptr() as *mut u8,
        ];
        run(&k, &bufs, &fusion_params(&k, n), 3, 128);
        for (x, r) in xs.iter().zip(&out) {
            let want = x.powf(y);
            let u = ulps(*r, want);
            assert!(u <= 1, "pow({x:e}, {y:e}) = {r:e}, libm {want:e}");
            worst[2] = worst[2].max(u);
            differ[2] += usize::from(u > 0);
        }
    }
    eprintln!(
        "worst ulps log/logistic/pow {worst:?}, inputs that differ {differ:?} of {n} (pow: x {})",
        ys.len()
    );
}

#[test]
fn copy_kernel_transposes_slices_and_clamps() {
    // src f32[3,4] row-major; dst = transpose [4,3] of the slice src[1.., ::2] ... as a copy
    // of shape [2,2]: dst[j][i] = src[1 + i][2 j].
    let src: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let mut dst = vec![-1f32; 4];
    let k = GpuKernel::Copy(CopyKernel {
        elem_bytes: 4,
        rank: 2,
        dyn_src: vec![DType::I32],
        dyn_dst: vec![],
    });
    // iteration (i, j) over [2, 2]; src = 4 + i*4 + j*2 (+ clamp(idx, 0, 0)*100); dst = j*2 + i
    let idx = [7i32];
    let bufs = [
        src.as_ptr() as *mut u8,
        dst.as_mut_ptr() as *mut u8,
        idx.as_ptr() as *mut u8,
    ];
    run(&k, &bufs, &[4, 4, 0, 2, 4, 1, 2, 2, 2, 0, 100], 1, 3);
    assert_eq!(dst, vec![4.0, 8.0, 6.0, 10.0]);
}

/// The reference `reduce`'s order for one row (8 lanes from 16 elements).
fn fold_row(row: &[f32]) -> f64 {
    if row.len() < 16 {
        return row[1..]
            .iter()
            .fold(f64::from(row[0]), |a, &v| a + f64::from(v));
    }
    let mut l: [f64; 8] = std::array::from_fn(|j| f64::from(row[j]));
    let mut c = row[8..].chunks_exact(8);
    for ch in c.by_ref() {
        for j in 0..8 {
            l[j] += f64::from(ch[j]);
        }
    }
    let mut a = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    for &v in c.remainder() {
        a += f64::from(v);
    }
    a
}

#[test]
fn reduce_kernel_folds_rows_in_the_reference_order() {
    for cols in [1usize, 5, 15, 16, 17, 40, 129] {
        let rows = 6;
        let x: Vec<f32> = (0..rows * cols)
            .map(|v| ((v * 7919) % 1000) as f32 * 1.37e-3 - 0.61)
            .collect();
        let init = [0.25f32];
        let mut out = vec![0f32; rows];
        let k = GpuKernel::Reduce(ReduceKernel {
            dtype: DType::F32,
            op: ReduceOp::Add,
            kept: 1,
            reduced: 0,
            inner: true,
        });
        let bufs = [
            x.as_ptr() as *mut u8,
            init.as_ptr() as *mut u8,
            out.as_mut_ptr() as *mut u8,
        ];
        run(
            &k,
            &bufs,
            &[rows as i64, rows as i64, cols as i64, cols as i64],
            2,
            4,
        );
        for r in 0..rows {
            let want = (0.25f64 + fold_row(&x[r * cols..(r + 1) * cols])) as f32;
            assert_eq!(out[r].to_bits(), want.to_bits(), "cols {cols} row {r}");
        }
        // Columns: reduce the rows (outer dimension reduced, inner kept), in row order.
        let mut out = vec![0f32; cols];
        let kc = GpuKernel::Reduce(ReduceKernel {
            dtype: DType::F32,
            op: ReduceOp::Max,
            kept: 1,
            reduced: 1,
            inner: false,
        });
        let bufs = [
            x.as_ptr() as *mut u8,
            init.as_ptr() as *mut u8,
            out.as_mut_ptr() as *mut u8,
        ];
        run(
            &kc,
            &bufs,
            &[cols as i64, cols as i64, 1, rows as i64, cols as i64, 0],
            1,
            32,
        );
        for c in 0..cols {
            let want = (0..rows).fold(0.25f32, |a, r| a.max(x[r * cols + c]));
            assert_eq!(out[c], want, "column {c}");
        }
    }
}

/// `half`'s conversions, bit for bit: `from_f32` after an elementwise `bf16` op, `from_f64`
/// for `convert` and a `bf16` sum, `to_f32` on load (NaN quieted).
#[test]
fn bf16_rounding_matches_half() {
    use half::bf16;
    // add(x, 0) rounds x with from_f32; convert(f32 -> bf16) with from_f64.
    let add = {
        let r = region(
            "graph @k {\n  symbols N in [0, inf)\n  %0 = input {index = 0, name = \"x\"} : f32[N]\n  \
             %1 = convert(%0) {dtype = bf16} : bf16[N]\n  %2 = add(%1, %1) : bf16[N]\n  \
             %3 = convert(%2) {dtype = f32} : f32[N]\n  return %1, %2, %3\n}",
        );
        let layout = KernelLayout::of_target(&r, Target::Gpu).expect("layout");
        GpuKernel::Fusion { region: r, layout }
    };
    let mut xs: Vec<f32> = samples();
    // ties and near-ties of every kind in the low bits
    for m in [
        0x8000u32, 0x8001, 0x7fff, 0x18000, 0x18001, 0x8004, 0x8007, 0x10000,
    ] {
        for e in [
            0x3f80_0000u32,
            0x0000_0000,
            0x0080_0000,
            0x7f00_0000,
            0x7f80_0000,
        ] {
            xs.push(f32::from_bits(e | m));
            xs.push(-f32::from_bits(e | m));
        }
    }
    let n = xs.len();
    let mut c = vec![0u16; n];
    let mut s = vec![0u16; n];
    let mut back = vec![0f32; n];
    let bufs = [
        xs.as_ptr() as *mut u8,
        c.as_mut_ptr() as *mut u8,
        s.as_mut_ptr() as *mut u8,
        back.as_mut_ptr() as *mut u8,
    ];
    run(&add, &bufs, &fusion_params(&add, n), 5, 64);
    for (k, &x) in xs.iter().enumerate() {
        let conv = bf16::from_f64(f64::from(x));
        assert_eq!(c[k], conv.to_bits(), "convert({x:e} = {:#x})", x.to_bits());
        let sum = bf16::from_f32(conv.to_f32() + conv.to_f32());
        assert_eq!(s[k], sum.to_bits(), "add of {x:e}");
        assert_eq!(back[k].to_bits(), sum.to_f32().to_bits(), "to_f32 of {x:e}");
    }
}
