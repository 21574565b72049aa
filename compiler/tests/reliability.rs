//! Reliability of the `ebb` command line: malformed inputs, odd arguments and
//! unwritable outputs give a clear error and a non-zero exit, never a panic (exit 101), a
//! silent wrong answer, or a clobbered or half-written file. Every input is generated here.

use ebb_testkit::jax_fixture;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn ebb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .output()
        .unwrap()
}

/// A fresh scratch directory for one test, removed when dropped.
fn scratch(tag: &str) -> ebb_testkit::Scratch {
    ebb_testkit::scratch(&format!("rel-{tag}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a clean failure: exit code 1 (not a panic's 101) and `want` in the message.
#[track_caller]
fn fails_with(o: &Output, want: &str) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "exit {:?}: {e}", o.status);
    assert!(!e.contains("panicked"), "{e}");
    assert!(e.contains(want), "expected `{want}` in: {e}");
    e
}

/// The names in `dir` that look like temporary files.
fn temp_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.ends_with(".tmp~"))
        .collect()
}

/// A StableHLO module `@main(x) = x + x` with `x: tensor<DIMS x f32>` (no source locations).
fn add_module(dims: &str) -> String {
    let t = format!("tensor<{dims}xf32>");
    format!(
        "\"builtin.module\"() ({{\n  \"func.func\"() <{{function_type = ({t}) -> {t}, sym_name = \"main\"}}> ({{\n  ^bb0(%a: {t}):\n    %0 = \"stablehlo.add\"(%a, %a) : ({t}, {t}) -> {t}\n    \"func.return\"(%0) : ({t}) -> ()\n  }}) : () -> ()\n}}) : () -> ()\n"
    )
}

#[test]
fn nul_and_non_utf8_bytes_in_mlir_are_located_errors() {
    let dir = scratch("nul");
    let text = std::fs::read(jax_fixture("mlp_sgd")).unwrap();
    // Seeded positions (a small LCG), each turned into a NUL or an invalid UTF-8 byte.
    let mut x: u64 = 15;
    for k in 0..4 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = (x >> 33) as usize % text.len();
        let at = (0..=at).rev().find(|&i| text[i] < 0x80).unwrap(); // a character boundary
        let (byte, want) = if k % 2 == 0 {
            (0u8, "NUL byte at byte")
        } else {
            (0xffu8, "not valid UTF-8 at byte")
        };
        let mut bad = text.clone();
        bad.insert(at, byte);
        let p = dir.join(format!("bad{k}.mlir"));
        std::fs::write(&p, &bad).unwrap();
        let line = 1 + text[..at].iter().filter(|&&b| b == b'\n').count();
        let e = fails_with(&ebb(&["import", s(&p)]), want);
        assert!(
            e.contains(&format!("bad{k}.mlir:{line}:")),
            "no line {line}: {e}"
        );
        assert!(e.contains(&format!("at byte {at}")), "{e}");
        // One short line, not the file dumped as a byte list.
        assert!(e.len() < 300, "{e}");
    }
}

#[test]
fn huge_static_dimensions_are_errors_not_panics() {
    let dir = scratch("huge");
    let huge = [
        format!("{}x8", 1i64 << 62),
        format!("{}", i64::MAX),
        format!("{}x{}", 1i64 << 32, 1i64 << 32),
    ];
    for (i, dims) in huge.iter().enumerate() {
        let p = dir.join(format!("huge{i}.mlir"));
        std::fs::write(&p, add_module(dims)).unwrap();
        let out = dir.join("x.json");
        for args in [
            vec!["import", s(&p)],
            vec!["import", s(&p), "--emit", "ir"],
            vec!["compile", s(&p), "-o", s(&out)],
        ] {
            fails_with(&ebb(&args), "overflows 64-bit integers");
        }
        assert!(!out.exists());
    }
}

#[test]
fn huge_bindings_are_errors_naming_the_value() {
    let dir = scratch("hugebind");
    let mlp = jax_fixture("mlp_sgd");
    let plan = dir.join("mlp.json");
    assert!(ebb(&["compile", s(&mlp), "-o", s(&plan)]).status.success());
    for v in [1i64 << 62, i64::MAX, 1 << 56] {
        let bind = format!("B={v}");
        let e = fails_with(
            &ebb(&[
                "compile",
                s(&mlp),
                "-o",
                s(&dir.join("b.json")),
                "--bind",
                &bind,
            ]),
            "overflows 64-bit integers",
        );
        assert!(e.contains(&bind), "{e}");
        let e = fails_with(
            &ebb(&["plan", s(&plan), "--bind", &bind]),
            "overflows 64-bit integers",
        );
        // The value whose size overflows is named with its type and size expression.
        assert!(e.contains("f32[B,") && e.contains("*B bytes"), "{e}");
    }
}

#[test]
fn broken_pipe_ends_quietly() {
    // ~200 KiB of IR, more than a pipe holds: the write meets the closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["import", s(&jax_fixture("gpt2_tiny_adamw")), "--emit", "ir"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 5];
    out.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"graph");
    drop(out);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{:?}: {}", o.status, stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn write_errors_are_reported_and_nothing_is_clobbered() {
    let dir = scratch("writes");
    let mlp = jax_fixture("mlp_sgd");
    // Standard output that cannot be written.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["import", s(&mlp), "--emit", "ir"])
        .stdout(full)
        .output()
        .unwrap();
    fails_with(&o, "cannot write to standard output");
    // Devices, FIFOs and directories are refused, named, and left as they are.
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    for (target, what) in [
        (Path::new("/dev/full"), "character device"),
        (fifo.as_path(), "a FIFO"),
        (sub.as_path(), "a directory"),
    ] {
        for args in [
            vec!["compile", s(&mlp), "-o", s(target)],
            vec!["import", s(&mlp), "--emit", "ir", "-o", s(target)],
        ] {
            let e = fails_with(&ebb(&args), what);
            assert!(e.contains(s(target)), "{e}");
        }
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(sub.is_dir());
    // A missing directory: the path is named and nothing is left behind.
    let missing = dir.join("no/such/dir/plan.json");
    fails_with(&ebb(&["compile", s(&mlp), "-o", s(&missing)]), s(&missing));
    // A symbolic link is written through: the link stays, its target gets the plan.
    let real = dir.join("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = ebb(&["compile", s(&mlp), "-o", s(&link)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().starts_with('{'));
    // The `.json` plan and an `.ir` of the same stem do not share a temporary file.
    let o = ebb(&[
        "import",
        s(&mlp),
        "--emit",
        "ir",
        "-o",
        s(&dir.join("real.ir")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        temp_leftovers(&dir).is_empty(),
        "{:?}",
        temp_leftovers(&dir)
    );
}

#[test]
fn timeline_and_bench_outputs_name_the_path_and_leave_no_partial_file() {
    let dir = scratch("timeline");
    let mlp = jax_fixture("mlp_sgd");
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let e = fails_with(
        &ebb(&["run", s(&mlp), "--bind", "B=4", "--timeline", s(&sub)]),
        "a directory",
    );
    assert!(e.contains(s(&sub)), "{e}");
    let missing = dir.join("none/t.svg");
    fails_with(
        &ebb(&["run", s(&mlp), "--bind", "B=4", "--timeline", s(&missing)]),
        s(&missing),
    );
    let e = fails_with(
        &ebb(&["bench", s(&mlp), "--shapes", "B=4", "--json", "/dev/full"]),
        "/dev/full",
    );
    assert!(e.contains("character device"), "{e}");
    assert!(temp_leftovers(&dir).is_empty());
    let t = dir.join("t.svg");
    let o = ebb(&["run", s(&mlp), "--bind", "B=4", "--timeline", s(&t)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&t)
        .unwrap()
        .trim_end()
        .ends_with("</svg>"));
}

#[test]
fn bindings_naming_unknown_symbols_or_unevaluable_sweeps_are_errors() {
    let dir = scratch("bind");
    let mlp = jax_fixture("mlp_sgd");
    let out = dir.join("p.json");
    let plan_args = |bind: &'static str| vec!["plan", s(&mlp), "--bind", bind];
    let e = fails_with(&ebb(&plan_args("B=4,X=3")), "unknown symbol `X`");
    assert!(e.contains("the symbols are: B"), "{e}");
    fails_with(&ebb(&plan_args("B=4,B=5")), "bound twice");
    fails_with(&ebb(&plan_args("=4")), "empty name");
    fails_with(
        &ebb(&["compile", s(&mlp), "-o", s(&out), "--bind", "Q=3"]),
        "--bind: unknown symbol `Q`",
    );
    for (sweep, want) in [
        ("B=4;X=3", "--sweep entry 2 `X=3`: unknown symbol `X`"),
        ("B=0", "--sweep entry 1 `B=0`: symbol `B` = 0 violates"),
        ("B=4;;B=8", "--sweep entry 2 ``: symbol `B` is not bound"),
        ("B=4;B=-2", "--sweep entry 2 `B=-2`"),
    ] {
        fails_with(
            &ebb(&["compile", s(&mlp), "-o", s(&out), "--sweep", sweep]),
            want,
        );
    }
    assert!(!out.exists());
    fails_with(
        &ebb(&["bench", s(&mlp), "--shapes", "X=3"]),
        "shape X=3: unknown symbol `X`",
    );
}

/// A step without symbols plans and runs without `--bind`; a step with symbols and no
/// `--bind` is an error naming the unbound symbol (exit 1, nothing printed on standard output).
#[test]
fn bind_may_be_left_out_only_for_a_step_without_symbols() {
    let dir = scratch("nobind");
    let m = dir.join("static.mlir");
    std::fs::write(
        &m,
        "module @m {
  func.func public @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> (tensor<4x3xf32>) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}
",
    )
    .unwrap();
    for cmd in ["plan", "run"] {
        let o = ebb(&[cmd, s(&m)]);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
    }
    let mlp = jax_fixture("mlp_sgd");
    for cmd in ["plan", "run"] {
        let o = ebb(&[cmd, s(&mlp)]);
        fails_with(&o, "symbol `B` is not bound");
        assert!(o.stdout.is_empty(), "{cmd}");
    }
}

#[test]
fn budgets_say_what_they_accept_and_must_be_positive() {
    let mlp = jax_fixture("mlp_sgd");
    let plan = |budget: &str| ebb(&["plan", s(&mlp), "--bind", "B=4", "--budget", budget]);
    let e = fails_with(&plan("abc"), "--budget: `abc` is not a budget");
    for accepted in ["512MiB", "2GiB", "50%"] {
        assert!(e.contains(accepted), "{e}");
    }
    assert!(!e.contains("float"), "{e}");
    for neg in ["-5", "-50%", "0", "-1GiB"] {
        fails_with(&plan(neg), "must be positive");
    }
    fails_with(&plan("5 parsecs"), "unknown size unit `parsecs`");
    fails_with(&plan("1e400"), "is too large");
}

#[test]
fn run_refuses_a_step_that_does_not_fit_in_host_memory() {
    let mlp = jax_fixture("mlp_sgd");
    let e = fails_with(
        &ebb(&[
            "run",
            s(&mlp),
            "--bind",
            "B=64",
            "--max-host-memory",
            "64KiB",
        ]),
        "not enough host memory",
    );
    assert!(e.contains("65536 bytes"), "{e}");
    assert!(e.contains("arena"), "{e}");
    fails_with(
        &ebb(&["run", s(&mlp), "--bind", "B=4", "--max-host-memory", "lots"]),
        "--max-host-memory: `lots` is not a size",
    );
}

#[test]
fn messages_name_the_file_and_say_each_cause_once() {
    let dir = scratch("messages");
    // Not found: the system's message once (not twice, `X: X`).
    let e = fails_with(&ebb(&["import", "/nonexistent/x.mlir"]), "cannot read");
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
    let e = fails_with(
        &ebb(&["plan", "/nonexistent/p.json", "--bind", "B=1"]),
        "cannot read",
    );
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
    // A module without source locations: errors point into the file, not at MLIR's `-`.
    let p = dir.join("m.mlir");
    std::fs::write(
        &p,
        add_module("4x8").replace("stablehlo.add", "stablehlo.fft"),
    )
    .unwrap();
    let e = fails_with(&ebb(&["import", s(&p)]), "at m.mlir:4:");
    assert!(!e.contains("-:"), "{e}");
    // Wrong arity and a missing attribute are rejected at import, located.
    std::fs::write(
        &p,
        add_module("4x8").replace("(%a, %a) : (tensor<4x8xf32>, ", "(%a) : ("),
    )
    .unwrap();
    fails_with(&ebb(&["import", s(&p)]), "expects 2 operands, got 1");
    let bcast = add_module("4x8").replace(
        "\"stablehlo.add\"(%a, %a) : (tensor<4x8xf32>, tensor<4x8xf32>)",
        "\"stablehlo.broadcast_in_dim\"(%a) : (tensor<4x8xf32>)",
    );
    std::fs::write(&p, bcast).unwrap();
    fails_with(&ebb(&["import", s(&p)]), "missing `broadcast_dimensions`");
}

#[test]
fn onnx_negative_and_huge_dimensions_are_errors() {
    use ebb_import::onnx::encode_model;
    use ebb_import::onnx::proto::{
        tensor_shape_proto::{dimension::Value as D, Dimension},
        type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto,
        TypeProto, ValueInfoProto,
    };
    let dir = scratch("onnx");
    // y = Relu(x) with x's first dimension given by `first`.
    let model = |first: D| {
        let ty = |d: D| TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: [Some(d), Some(D::DimValue(4))]
                        .into_iter()
                        .map(|value| Dimension {
                            value,
                            denotation: None,
                        })
                        .collect(),
                }),
            })),
            denotation: None,
        };
        let vi = |n: &str, d: D| ValueInfoProto {
            name: Some(n.into()),
            r#type: Some(ty(d)),
            doc_string: None,
        };
        ModelProto {
            ir_version: Some(10),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(18),
            }],
            graph: Some(GraphProto {
                node: vec![NodeProto {
                    input: vec!["x".into()],
                    output: vec!["y".into()],
                    op_type: Some("Relu".into()),
                    ..Default::default()
                }],
                input: vec![vi("x", first.clone())],
                output: vec![vi("y", first)],
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let cases = [
        (
            D::DimParam("-1".into()),
            "dim_param `-1`: the dimension is negative",
        ),
        (D::DimValue(-3), "dim_value -3 is negative"),
        (D::DimValue(1 << 62), "overflows 64-bit integers"),
        (D::DimValue(i64::MAX), "overflows 64-bit integers"),
        (
            D::DimParam(format!("{}", 1i64 << 62)),
            "overflows 64-bit integers",
        ),
    ];
    for (i, (d, want)) in cases.into_iter().enumerate() {
        let p = dir.join(format!("m{i}.onnx"));
        std::fs::write(&p, encode_model(&model(d))).unwrap();
        fails_with(&ebb(&["import", s(&p)]), want);
        fails_with(
            &ebb(&["compile", s(&p), "-o", s(&dir.join("p.json"))]),
            want,
        );
    }
    // A symbolic dim_param still imports.
    let p = dir.join("ok.onnx");
    std::fs::write(&p, encode_model(&model(D::DimParam("batch".into())))).unwrap();
    let o = ebb(&["import", s(&p)]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Compiles JAX fixture `name` into `dir/<name>.plan.json`; the path and the plan as JSON.
fn compiled_plan(dir: &Path, name: &str) -> (std::path::PathBuf, serde_json::Value) {
    compiled_plan_with(dir, name, &[])
}

/// [`compiled_plan`] with extra `ebb compile` flags.
fn compiled_plan_with(
    dir: &Path,
    name: &str,
    flags: &[&str],
) -> (std::path::PathBuf, serde_json::Value) {
    let plan = dir.join(format!("{name}.plan.json"));
    let fixture = jax_fixture(name);
    let args = [&["compile", s(&fixture), "-o", s(&plan)][..], flags].concat();
    let o = ebb(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    (plan, v)
}

#[test]
fn tampered_plans_are_refused_by_plan_run_and_bench() {
    let dir = scratch("tamper");
    let (_, mut v) = compiled_plan(&dir, "mlp_sgd");
    // A smaller activation: every peak the plan would report shrinks.
    let size = v["values"][20]["bytes"].as_str().unwrap().to_string();
    v["values"][20]["bytes"] = serde_json::json!(format!("{size} - 4"));
    let bad = dir.join("bad.plan.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    for args in [
        vec!["plan", s(&bad), "--bind", "B=4"],
        vec!["run", s(&bad), "--bind", "B=4"],
        vec!["bench", s(&bad), "--shapes", "B=4"],
    ] {
        let e = fails_with(&ebb(&args), "the plan does not verify");
        assert!(e.contains("values[20]"), "{e}");
    }
}

#[test]
fn run_fails_when_outputs_differ_from_the_npz_beyond_the_tolerance() {
    let mlp = jax_fixture("mlp_sgd");
    let npz = ebb_testkit::jax_fixtures_dir().join("mlp_sgd.ref0.npz");
    let run = |tol: &str| {
        ebb(&[
            "run",
            s(&mlp),
            "--bind",
            "B=8",
            "--inputs",
            s(&npz),
            "--tolerance",
            tol,
        ])
    };
    assert!(run("0.02").status.success());
    fails_with(&run("-1"), "--tolerance -1 must be");
    // A reference whose loss is off by 1% fails at a tolerance of 0.1%, naming the output.
    let dir = scratch("npz_tol");
    let mut arrays = ebb_runtime::npz::load_npz(&npz).unwrap();
    let loss = arrays["out_0"].as_f32().unwrap()[0];
    arrays.insert(
        "out_0".into(),
        ebb_runtime::Tensor::from_f32(vec![], vec![loss * 1.01]).unwrap(),
    );
    let named: Vec<(String, &ebb_runtime::Tensor)> =
        arrays.iter().map(|(k, t)| (k.clone(), t)).collect();
    let off = dir.join("off.npz");
    std::fs::write(
        &off,
        ebb_runtime::npz::npz_bytes(&named, "off.npz").unwrap(),
    )
    .unwrap();
    let o = ebb(&[
        "run",
        s(&mlp),
        "--bind",
        "B=8",
        "--inputs",
        s(&off),
        "--tolerance",
        "1e-3",
    ]);
    let e = fails_with(&o, "1 of 7 outputs differ");
    assert!(e.contains("out_0 `result[0]`"), "{e}");
}

/// A candidate's claims (a recompute's transient bytes, its regeneration peak) are re-derived
/// when the plan is loaded: `plan` and `bench` refuse a plan with an edited claim instead of
/// reporting the peak of decisions built on it.
#[test]
fn edited_candidate_claims_are_refused_when_the_plan_loads() {
    let dir = scratch("claims");
    // Unfused: its recompute candidates carry transient claims at this budget.
    let (plan, mut v) = compiled_plan_with(
        &dir,
        "gpt2_tiny_adamw",
        &["--fusion", "off", "--donate", "keep"],
    );
    // In every schedule variant: the runtime may pick any of them at the shape.
    let zero = |p: &mut serde_json::Value| {
        for c in p["candidates"].as_array_mut().unwrap() {
            c["transient_bytes"] = serde_json::json!("0");
            c["regen_peak_bytes"] = serde_json::json!("0");
        }
    };
    zero(&mut v);
    for p in v["alternatives"].as_array_mut().into_iter().flatten() {
        zero(p);
    }
    let bad = dir.join("bad.plan.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let budget = ["--budget", "85%", "--kinds", "recompute"];
    let ok = ebb(&[&["plan", s(&plan), "--bind", "B=4,S=64"][..], &budget].concat());
    assert!(ok.status.success(), "{}", stderr(&ok));
    for cmd in [
        vec!["plan", s(&bad), "--bind", "B=4,S=64"],
        vec!["bench", s(&bad), "--shapes", "B=4,S=64"],
    ] {
        let e = fails_with(
            &ebb(&[&cmd[..], &budget].concat()),
            "the plan does not verify",
        );
        assert!(e.contains("transient bytes 0, the search derives"), "{e}");
    }
}
