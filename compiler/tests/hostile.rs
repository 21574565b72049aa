//! Hostile and malformed inputs to the `ebb` command line: deeply nested modules, FIFOs and
//! devices given as files, archives with members that must not be read, limits on the
//! process's memory, closed standard output, invalid IR, signals during a write. Each gets a
//! clear error and a non-zero exit (never a crash, a hang or a wrong answer with exit 0) or,
//! where the input is valid, the right answer. Every input is generated here, from seeded
//! code where it varies.

use ebb_testkit::{jax_fixture, nested_case_module};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EBB: &str = env!("CARGO_BIN_EXE_ebb");

fn ebb(args: &[&str]) -> Output {
    timed(Command::new(EBB).args(args), 120)
}

/// Runs `cmd` to completion, failing the test (and killing it) after `secs` seconds: a hang
/// is a failure, not a stuck test run.
fn timed(cmd: &mut Command, secs: u64) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} hung for {secs} s: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scratch(tag: &str) -> ebb_testkit::Scratch {
    ebb_testkit::scratch(&format!("hostile-{tag}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a clean failure: exit code 1 (not a panic's 101, not a signal) and every one of
/// `want` in the message.
#[track_caller]
fn fails_with(o: &Output, want: &[&str]) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "exit {:?}: {e}", o.status);
    assert!(!e.contains("panicked"), "{e}");
    for w in want {
        assert!(e.contains(w), "expected `{w}` in: {e}");
    }
    e
}

#[track_caller]
fn succeeds(o: &Output) {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(o));
}

/// Compiles JAX fixture `name` into `dir/NAME.plan.json`.
fn compile_fixture(dir: &Path, name: &str) -> PathBuf {
    let plan = dir.join(format!("{name}.plan.json"));
    succeeds(&ebb(&["compile", s(&jax_fixture(name)), "-o", s(&plan)]));
    plan
}

/// A small LCG: the seeded choices of these tests.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A module `@main(%a: ARG) -> RES` with `body` (ops reading `%a`, the last defining `%0`).
fn module(arg: &str, body: &str, res: &str) -> String {
    format!(
        "\"builtin.module\"() ({{\n  \"func.func\"() <{{function_type = ({arg}) -> {res}, sym_name = \"main\"}}> ({{\n  ^bb0(%a: {arg}):\n{body}\n    \"func.return\"(%0) : ({res}) -> ()\n  }}) : () -> ()\n}}) : () -> ()\n"
    )
}

#[test]
fn nested_regions_are_bounded_with_a_location_and_what_compile_writes_loads() {
    let dir = scratch("nesting");
    // As deep as imports go: compile writes a plan that `plan` and `run` load.
    let ok = dir.join("deep64.mlir");
    std::fs::write(&ok, nested_case_module(64)).unwrap();
    let plan = dir.join("deep64.plan.json");
    succeeds(&ebb(&["compile", s(&ok), "-o", s(&plan)]));
    succeeds(&ebb(&["plan", s(&plan), "--bind", ""]));
    succeeds(&ebb(&["run", s(&plan), "--bind", ""]));
    // One level deeper: refused at import, at the op that opens the 65th level.
    let p = dir.join("deep65.mlir");
    std::fs::write(&p, nested_case_module(65)).unwrap();
    let e = fails_with(
        &ebb(&["compile", s(&p), "-o", s(&dir.join("x.json"))]),
        &[
            "deep65.mlir",
            "stablehlo.case",
            "regions nested more than 64 deep",
        ],
    );
    assert!(e.contains("deep65.mlir:"), "{e}");
    // Far deeper (MLIR's own parser would overflow its stack): refused before parsing, with
    // the line and column, never a crash. Seeded depths.
    let mut rng = Lcg(42);
    for _ in 0..3 {
        let depth = 600 + rng.next(3000) as usize;
        let p = dir.join(format!("deep{depth}.mlir"));
        std::fs::write(&p, nested_case_module(depth)).unwrap();
        for cmd in [
            vec!["import", s(&p)],
            vec!["import", "--allow-unsupported", s(&p)],
        ] {
            fails_with(
                &ebb(&cmd),
                &[&format!("deep{depth}.mlir:"), "nested more than 1024 deep"],
            );
        }
    }
    // Deep brackets in an attribute, not regions.
    let brackets = 100_000;
    let attr = format!("{}1{}", "[".repeat(brackets), "]".repeat(brackets));
    let p = dir.join("brackets.mlir");
    std::fs::write(
        &p,
        module(
            "tensor<4xf32>",
            &format!(
                "    %0 = \"stablehlo.abs\"(%a) {{x = {attr}}} : (tensor<4xf32>) -> tensor<4xf32>"
            ),
            "tensor<4xf32>",
        ),
    )
    .unwrap();
    fails_with(
        &ebb(&["import", s(&p)]),
        &["brackets.mlir:4:", "nested more than 1024 deep"],
    );
}

/// Each invalid op: (module body, result type, what the message must say). Each would
/// otherwise be accepted by import and compile and fail (or answer wrongly) at run time.
#[test]
fn attributes_out_of_range_are_refused_at_import_with_the_op_located() {
    let dir = scratch("ranges");
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "tensor<4xf32>",
            "    %0 = \"stablehlo.slice\"(%a) <{limit_indices = array<i64: 9>, start_indices = array<i64: 2>, strides = array<i64: 1>}> : (tensor<4xf32>) -> tensor<7xf32>",
            "tensor<7xf32>",
            &["stablehlo.slice", "0 <= start <= limit <= size"],
        ),
        (
            "tensor<4xf32>",
            "    %0 = \"stablehlo.iota\"() <{iota_dimension = 3 : i64}> : () -> tensor<4xf32>",
            "tensor<4xf32>",
            &["stablehlo.iota", "dimension 3 out of range for rank 1"],
        ),
        (
            "tensor<4xf32>",
            "    %c = \"stablehlo.constant\"() <{value = dense<[2, 2]> : tensor<2xi32>}> : () -> tensor<2xi32>\n    %d = \"stablehlo.concatenate\"(%c, %c) <{dimension = 3 : i64}> : (tensor<2xi32>, tensor<2xi32>) -> tensor<4xi32>\n    %0 = \"stablehlo.dynamic_reshape\"(%a, %d) : (tensor<4xf32>, tensor<4xi32>) -> tensor<?x?x?x?xf32>",
            "tensor<?x?x?x?xf32>",
            &["stablehlo.concatenate", "`dimension` 3 is out of range for operands of rank 1"],
        ),
        (
            "tensor<4xf32>",
            "    %c = \"stablehlo.constant\"() <{value = dense<2> : tensor<i32>}> : () -> tensor<i32>\n    %d = \"stablehlo.broadcast_in_dim\"(%c) : (tensor<i32>) -> tensor<2xi32>\n    %0 = \"stablehlo.dynamic_reshape\"(%a, %d) : (tensor<4xf32>, tensor<2xi32>) -> tensor<?x?xf32>",
            "tensor<?x?xf32>",
            &["stablehlo.broadcast_in_dim", "missing `broadcast_dimensions`"],
        ),
        (
            "tensor<4xf32>",
            "    %0 = \"stablehlo.broadcast_in_dim\"(%a) : (tensor<4xf32>) -> tensor<2x4xf32>",
            "tensor<2x4xf32>",
            &["stablehlo.broadcast_in_dim", "missing `broadcast_dimensions`"],
        ),
        (
            "tensor<4xf32>",
            "    %c = \"stablehlo.constant\"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>\n    %0 = \"stablehlo.reduce\"(%a, %c) <{dimensions = array<i64: 0>}> ({\n    ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n      %s = \"stablehlo.add\"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n      \"stablehlo.return\"(%s, %s) : (tensor<f32>, tensor<f32>) -> ()\n    }) : (tensor<4xf32>, tensor<f32>) -> tensor<f32>",
            "tensor<f32>",
            &["reduce", "its body takes 2 values and returns 2; over 1 input(s) it must take 2 scalars and return 1"],
        ),
        (
            "tensor<4xf32>",
            "    %0 = \"stablehlo.custom_call\"(%a) <{call_target_name = \"foo\"}> : (tensor<4xf32>) -> tensor<4xf32>",
            "tensor<4xf32>",
            &["stablehlo.custom_call", "custom_call @foo is not supported"],
        ),
        (
            "tensor<2x3xf32>",
            "    %0 = \"stablehlo.transpose\"(%a) <{permutation = array<i64: 0, 0>}> : (tensor<2x3xf32>) -> tensor<2x2xf32>",
            "tensor<2x2xf32>",
            &["stablehlo.transpose", "names dimension 0 twice"],
        ),
    ];
    for (k, (arg, body, res, want)) in cases.iter().enumerate() {
        let p = dir.join(format!("case{k}.mlir"));
        std::fs::write(&p, module(arg, body, res)).unwrap();
        let plan = dir.join(format!("case{k}.plan.json"));
        let e = fails_with(&ebb(&["compile", s(&p), "-o", s(&plan)]), want);
        assert!(e.contains(&format!("case{k}.mlir:")), "no location: {e}");
        assert!(!plan.exists(), "case {k}: a plan was written");
    }
}

/// `mkfifo PATH`.
fn mkfifo(p: &Path) {
    let o = Command::new("mkfifo").arg(p).output().unwrap();
    assert!(o.status.success(), "mkfifo: {}", stderr(&o));
}

#[test]
fn fifos_and_devices_given_as_input_files_are_refused_without_blocking() {
    let dir = scratch("fifo");
    let plan = compile_fixture(&dir, "mlp_sgd");
    for name in ["m.mlir", "m.onnx", "p.plan.json", "in.npz"] {
        mkfifo(&dir.join(name));
    }
    let fifo = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let cases: Vec<Vec<String>> = vec![
        vec!["import".into(), fifo("m.mlir")],
        vec![
            "compile".into(),
            fifo("m.onnx"),
            "-o".into(),
            fifo("x.json"),
        ],
        vec![
            "plan".into(),
            fifo("p.plan.json"),
            "--bind".into(),
            "B=4".into(),
        ],
        vec![
            "run".into(),
            s(&plan).into(),
            "--bind".into(),
            "B=4".into(),
            "--inputs".into(),
            fifo("in.npz"),
        ],
        vec![
            "import".into(),
            "/dev/zero".into(),
            "--format".into(),
            "stablehlo".into(),
        ],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = timed(Command::new(EBB).args(&args), 60);
        let e = fails_with(&o, &["not a regular file"]);
        assert!(
            e.contains("a FIFO") || e.contains("a character device"),
            "{args:?}: {e}"
        );
    }
}

/// Replaces the stored bytes of member `name` of zip archive `zip` by garbage (an invalid
/// deflate block), leaving the archive's directory intact.
fn corrupt_member(zip: &mut [u8], name: &str) {
    let sig = b"PK\x03\x04";
    let at = (0..zip.len() - 30)
        .find(|&i| {
            &zip[i..i + 4] == sig && {
                let n = u16::from_le_bytes([zip[i + 26], zip[i + 27]]) as usize;
                zip.get(i + 30..i + 30 + n) == Some(name.as_bytes())
            }
        })
        .expect("member not found");
    let n = u16::from_le_bytes([zip[at + 26], zip[at + 27]]) as usize;
    let extra = u16::from_le_bytes([zip[at + 28], zip[at + 29]]) as usize;
    let size = u32::from_le_bytes(zip[at + 18..at + 22].try_into().unwrap()) as usize;
    let data = at + 30 + n + extra;
    for b in &mut zip[data..data + size] {
        *b = 0xff;
    }
}

#[test]
fn npz_inputs_read_only_the_members_they_name() {
    let dir = scratch("npz-lazy");
    let reference = ebb_testkit::jax_fixtures_dir().join("mlp_sgd.ref0.npz");
    let all = ebb_runtime::npz::load_npz(&reference).unwrap();
    let junk = ebb_runtime::Tensor::new(
        vec![64, 64],
        ebb_runtime::Data::F32(vec![0.5f32; 64 * 64].into()),
    )
    .unwrap();
    let mut named: Vec<(String, &ebb_runtime::Tensor)> =
        all.iter().map(|(k, v)| (k.clone(), v)).collect();
    named.push(("junk".into(), &junk));
    let mut bytes = ebb_runtime::npz::npz_bytes(&named, "x.npz").unwrap();
    corrupt_member(&mut bytes, "junk.npy");
    let p = dir.join("with-junk.npz");
    std::fs::write(&p, &bytes).unwrap();
    // The member is broken: reading it fails ...
    assert!(ebb_runtime::npz::load_npz(&p).is_err());
    // ... but a run names only in_i and out_i, and never reads it.
    succeeds(&ebb(&[
        "run",
        s(&jax_fixture("mlp_sgd")),
        "--bind",
        "B=8",
        "--inputs",
        s(&p),
    ]));
}

/// The reference outputs of `mlp_sgd.ref0.npz` with element `at` of `out_0` replaced by `x`.
fn reference_with(dir: &Path, at: usize, x: f32, tag: &str) -> PathBuf {
    let reference = ebb_testkit::jax_fixtures_dir().join("mlp_sgd.ref0.npz");
    let mut all = ebb_runtime::npz::load_npz(&reference).unwrap();
    let out = all.remove("out_0").unwrap();
    let mut v: Vec<f32> = out.to_f64_vec().iter().map(|&y| y as f32).collect();
    let n = v.len();
    v[at % n] = x;
    let edited =
        ebb_runtime::Tensor::new(out.shape().to_vec(), ebb_runtime::Data::F32(v.into())).unwrap();
    all.insert("out_0".into(), edited);
    let named: Vec<(String, &ebb_runtime::Tensor)> =
        all.iter().map(|(k, v)| (k.clone(), v)).collect();
    let p = dir.join(format!("ref-{tag}.npz"));
    std::fs::write(&p, ebb_runtime::npz::npz_bytes(&named, "x.npz").unwrap()).unwrap();
    p
}

#[test]
fn an_infinite_or_nan_reference_value_fails_the_comparison() {
    let dir = scratch("npz-inf");
    let mut rng = Lcg(7);
    let mlp = jax_fixture("mlp_sgd");
    for (tag, x) in [
        ("pinf", f32::INFINITY),
        ("ninf", f32::NEG_INFINITY),
        ("nan", f32::NAN),
    ] {
        let p = reference_with(&dir, rng.next(1 << 20) as usize, x, tag);
        for check in [false, true] {
            let mut args = vec!["run", s(&mlp), "--bind", "B=8", "--inputs", s(&p)];
            if check {
                args.push("--check");
            }
            fails_with(
                &ebb(&args),
                &[
                    "outputs differ from the npz's `out_i`",
                    "out_0 `result[0]`: 1 element(s) NaN or infinite on one side only",
                ],
            );
        }
    }
}

#[test]
fn a_run_that_does_not_fit_the_process_limits_is_refused_naming_the_limit() {
    // `ulimit -v` (RLIMIT_AS): 3 GiB of address space for a step whose arena needs more.
    let plan = ebb(&[
        "plan",
        s(&jax_fixture("mlp_sgd")),
        "--bind",
        "B=1048576",
        "--json",
    ]);
    succeeds(&plan);
    let need: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let peak = need["peak_bytes_scheduled"].as_i64().unwrap();
    assert!(
        peak > 4 << 30,
        "the step must need more than the limit: {peak} bytes"
    );
    let o = timed(
        Command::new("bash").args([
            "-c",
            &format!(
                "ulimit -v {}; exec \"$0\" run \"$1\" --bind B=1048576",
                3 << 20
            ),
            EBB,
            s(&jax_fixture("mlp_sgd")),
        ]),
        120,
    );
    fails_with(&o, &["not enough host memory", "RLIMIT_AS (ulimit -v)"]);
}

#[test]
fn a_closed_standard_output_is_an_error_not_lost_output() {
    for cmd in ["ops", "ops --json", "import \"$1\""] {
        let o = timed(
            Command::new("sh").args([
                "-c",
                &format!("exec \"$0\" {cmd} >&-"),
                EBB,
                s(&jax_fixture("mlp_sgd")),
            ]),
            60,
        );
        fails_with(
            &o,
            &["cannot write to standard output", "closed when ebb started"],
        );
    }
    // Without standard output needed, a closed one is no error.
    let dir = scratch("closed-stdout");
    let o = timed(
        Command::new("sh").args([
            "-c",
            "exec \"$0\" import \"$1\" -o \"$2\" >&-",
            EBB,
            s(&jax_fixture("mlp_sgd")),
            s(&dir.join("out.txt")),
        ]),
        60,
    );
    succeeds(&o);
}

/// Asserts a usage error (clap's exit code 2) with every one of `want` in the message.
#[track_caller]
fn usage_error(o: &Output, want: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "exit {:?}: {e}", o.status);
    for w in want {
        assert!(e.contains(w), "expected `{w}` in: {e}");
    }
}

#[test]
fn count_flags_say_what_they_accept() {
    let mlp = jax_fixture("mlp_sgd");
    usage_error(
        &ebb(&["run", s(&mlp), "--bind", "B=4", "--repeat", "-1"]),
        &["--repeat", "`-1` is not a count (an integer from 0 to"],
    );
    usage_error(
        &ebb(&["bench", s(&mlp), "--dist", "longtail", "--seed", "-3"]),
        &["--seed", "`-3` is not a seed"],
    );
    usage_error(
        &ebb(&["bench", s(&mlp), "--dist", "longtail", "--samples", "2.5"]),
        &["--samples", "`2.5` is not a count"],
    );
}

#[test]
fn sizes_up_to_the_limit_are_accepted_and_the_limit_is_printed() {
    let mlp = jax_fixture("mlp_sgd");
    let plan = |budget: &str| ebb(&["plan", s(&mlp), "--bind", "B=4", "--budget", budget]);
    succeeds(&plan(&i64::MAX.to_string()));
    let e = fails_with(
        &plan("9223372036854775808"),
        &["budget `9223372036854775808` is too large: sizes are at most 9223372036854775807 bytes"],
    );
    assert!(!e.contains("size 9223372036854775807 is too large"), "{e}");
}

#[test]
fn bindings_and_symbols_are_checked_in_pack_and_bench() {
    let dir = scratch("pack-bind");
    let gpt = jax_fixture("gpt2_tiny_adamw");
    let lengths = dir.join("lengths.txt");
    std::fs::write(&lengths, "120\n33\n64\n").unwrap();
    for (bind, want) in [
        ("Q=3", "fixed symbol `Q` is not a symbol of the plan"),
        ("B=8.9", "`8.9` is not an integer"),
    ] {
        let args = [
            "pack",
            s(&gpt),
            "--lengths",
            s(&lengths),
            "--budget",
            "1GiB",
            "--bind",
            bind,
        ];
        fails_with(&ebb(&args), &[want]);
    }
    fails_with(
        &ebb(&["bench", s(&gpt), "--dist", "longtail", "--tokens", "1"]),
        &["--tokens 1 is less than the sequence length"],
    );
}

/// The temporary files of `dir` (what an interrupted write could leave).
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn signals_during_a_write_leave_no_temporary_file() {
    let dir = scratch("signals");
    let out = dir.join("gpt.ir");
    let args = |o: &Path| {
        vec![
            "import".to_string(),
            s(&jax_fixture("gpt2_small")).to_string(),
            "--emit".into(),
            "ir".into(),
            "-o".into(),
            s(o).to_string(),
        ]
    };
    // One uninterrupted run: how long a run takes, and the file it writes.
    let t0 = Instant::now();
    succeeds(&timed(Command::new(EBB).args(args(&out)), 300));
    let full = t0.elapsed();
    let want = std::fs::read(&out).unwrap();
    // Seeded kills spread over the run (the write is at its end).
    let mut rng = Lcg(2024);
    for k in 0..10 {
        let signal = ["TERM", "INT", "HUP"][k % 3];
        let at = full.mul_f64(0.5 + rng.next(1000) as f64 / 1500.0);
        let mut child = Command::new(EBB)
            .args(args(&out))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = Command::new("kill")
            .args(["-s", signal, &child.id().to_string()])
            .status();
        child.wait().unwrap();
        assert_eq!(
            temp_files(&dir),
            Vec::<String>::new(),
            "SIG{signal} at {at:?}"
        );
        assert_eq!(
            std::fs::read(&out).unwrap(),
            want,
            "the target was clobbered"
        );
    }
    // SIGKILL cannot be handled: what it leaves is removed by the next write to the target.
    let stale = dir.join(".gpt.ir.ebb999999999.abc123.tmp");
    std::fs::write(&stale, b"partial").unwrap();
    let other = dir.join(".other.json.ebb999999999.abc123.tmp");
    std::fs::write(&other, b"partial").unwrap();
    succeeds(&timed(Command::new(EBB).args(args(&out)), 300));
    assert!(!stale.exists(), "a dead writer's temporary file was kept");
    assert!(
        other.exists(),
        "another target's temporary file was removed"
    );
}

#[test]
fn tampered_plans_are_refused_whichever_variant_is_edited() {
    let dir = scratch("tamper");
    let plan = compile_fixture(&dir, "gpt2_tiny_adamw");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    // The variants with a recompute candidate (every edit below applies to them).
    let variant = |i: usize| {
        if i == 0 {
            &v
        } else {
            &v["alternatives"][i - 1]
        }
    };
    let variants: Vec<usize> = (0..1 + v["alternatives"].as_array().map_or(0, Vec::len))
        .filter(|&i| {
            variant(i)["candidates"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| !c["recompute"].as_array().unwrap().is_empty())
            })
        })
        .collect();
    assert!(!variants.is_empty());
    let mut rng = Lcg(99);
    // Each edit, in a seeded variant, returns what the refusal must name.
    type Edit = fn(&mut serde_json::Value, u64) -> String;
    let edits: [Edit; 4] = [
        |p, r| {
            let c = p["candidates"].as_array_mut().unwrap();
            let k = r as usize % c.len();
            let dup = c[k].clone();
            c.insert(k, dup);
            "listed out of order or twice".into()
        },
        |p, _| {
            p.as_object_mut().unwrap().remove("point_flops");
            "`point_flops` does not match the embedded graph: missing".into()
        },
        |p, r| {
            let f = p["point_flops"].as_array_mut().unwrap();
            let k = r as usize % f.len();
            f.remove(k);
            "point_flops".into()
        },
        |p, r| {
            let c = p["candidates"].as_array_mut().unwrap();
            let k = (0..c.len())
                .map(|i| (i + r as usize) % c.len())
                .find(|&i| !c[i]["recompute"].as_array().unwrap().is_empty())
                .unwrap();
            c[k]["recompute_reads"] = serde_json::json!([]);
            "recompute reads values".into()
        },
    ];
    for (k, edit) in edits.iter().enumerate() {
        let mut bad = v.clone();
        let which = variants[rng.next(variants.len() as u64) as usize];
        let target = if which == 0 {
            &mut bad
        } else {
            &mut bad["alternatives"][which - 1]
        };
        let want = edit(target, rng.next(1 << 30));
        let p = dir.join(format!("bad{k}.plan.json"));
        std::fs::write(&p, bad.to_string()).unwrap();
        for cmd in ["plan", "run"] {
            fails_with(
                &ebb(&[cmd, s(&p), "--bind", "B=2,S=64"]),
                &[
                    "the plan does not verify",
                    &format!("plan variant {which}"),
                    &want,
                ],
            );
        }
    }
}
