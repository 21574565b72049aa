//! The C ABI from C: `tests/c/finalize.c`, compiled with the system C compiler (`cc`) against
//! the generated header and `libebb_capi.so`, finalizes the 2-layer GPT's plan and prints the
//! same decisions as `ebb plan --json` (the report both build on: `plan_report_proven`);
//! errors come back as messages. Also: `include/ebb.h` is cbindgen's current output.

use ebb_pipeline::api::Compiler;
use ebb_pipeline::size::Budget;
use ebb_pipeline::{self as pipeline, Pricing};
use ebb_plan::device::DeviceProfile;
use ebb_plan::format::DecisionKind;
use std::path::PathBuf;
use std::process::Command;

fn generated_header_dir() -> PathBuf {
    PathBuf::from(env!("OUT_DIR"))
}

/// `tests/c/NAME.c` compiled with `cc -Wall -Wextra -Werror` against the generated header and
/// `libebb_capi.so` into `dir/NAME`.
fn compile_c(dir: &std::path::Path, name: &str) -> PathBuf {
    let exe = dir.join(name);
    let cc = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(generated_header_dir())
        .arg(format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR")))
        .arg("-L")
        .arg(ebb_testkit::deps_dir())
        .arg(format!("-Wl,-rpath,{}", ebb_testkit::deps_dir().display()))
        .arg("-lebb_capi")
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("the C compiler `cc`");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    exe
}

#[test]
fn committed_header_is_cbindgens_output() {
    let generated = std::fs::read_to_string(generated_header_dir().join("ebb.h")).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/ebb.h")).unwrap();
    assert!(
        generated == committed,
        "capi/include/ebb.h is stale: copy {}/ebb.h over it",
        generated_header_dir().display()
    );
}

#[test]
fn a_c_program_finalizes_a_plan_and_prints_the_cli_decisions() {
    let dir = ebb_testkit::scratch("capi");
    let plan = Compiler::default()
        .compile_file(&ebb_testkit::jax_fixture("gpt2_tiny_adamw"))
        .unwrap();
    let plan_path = dir.join("gpt2_tiny.plan.json");
    std::fs::write(&plan_path, plan.to_json()).unwrap();
    let b = pipeline::parse_bindings("B=8,S=256").unwrap();
    let scheduled = pipeline::plan_report(&plan, &b, None)
        .unwrap()
        .peak_bytes_scheduled;
    let budget = scheduled / 2;

    // What `ebb plan PLAN --bind B=8,S=256 --budget BYTES --device h100-sxm-pcie5 --json` prints.
    let pricing = Pricing {
        device: DeviceProfile::named("h100-sxm-pcie5").unwrap(),
        kinds: vec![DecisionKind::Recompute, DecisionKind::Swap],
    };
    let (report, _) =
        pipeline::plan_report_proven(&plan, &b, Some(Budget::Bytes(budget)), &pricing).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let expected: Vec<String> = json["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "decision {} {} value={} evict_after={} back_before={} bytes={}",
                d["candidate"],
                d["kind"].as_str().unwrap(),
                d["value"],
                d["evict_after"],
                d["back_before"],
                d["bytes"]
            )
        })
        .collect();
    assert!(!expected.is_empty(), "a half budget needs decisions");

    let exe = compile_c(&dir, "finalize");

    let out = Command::new(&exe)
        .arg(&plan_path)
        .arg("B=8,S=256")
        .arg(budget.to_string())
        .arg("h100-sxm-pcie5")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("decision "))
        .collect();
    assert_eq!(got, expected);
    assert!(stdout.contains("symbol B\nsymbol S\n"), "{stdout}");
    assert!(
        stdout.contains(&format!("scheduled_peak {scheduled}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("peak {}\n", json["peak_bytes_planned"])),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("arena {}\n", json["arena_bytes"])),
        "{stdout}"
    );
    assert!(stdout.contains("inside the arena"), "{stdout}");
    assert!(
        stdout.contains("budget 1: budget 1 bytes is infeasible: the smallest feasible budget"),
        "{stdout}"
    );
    assert!(
        stdout.contains("unknown symbol: ") && stdout.contains("Q"),
        "{stdout}"
    );
    assert!(
        stdout.contains("missing file: ") && stdout.contains("/nonexistent/plan.json"),
        "{stdout}"
    );
}

#[test]
fn the_report_json_is_the_cli_report() {
    use std::ffi::{CStr, CString};
    let dir = ebb_testkit::scratch("capi-json");
    let plan = Compiler::default()
        .compile_file(&ebb_testkit::jax_fixture("gpt_block_sgd"))
        .unwrap();
    let path = dir.join("block.plan.json");
    std::fs::write(&path, plan.to_json()).unwrap();
    let b = pipeline::parse_bindings("B=4,S=64").unwrap();
    let pricing = Pricing {
        device: DeviceProfile::named("a100-40g-pcie4").unwrap(),
        kinds: vec![DecisionKind::Recompute, DecisionKind::Swap],
    };
    let budget = pipeline::plan_report(&plan, &b, None)
        .unwrap()
        .peak_bytes_scheduled
        * 7
        / 10;
    let (want, _) =
        pipeline::plan_report_proven(&plan, &b, Some(Budget::Bytes(budget)), &pricing).unwrap();
    let want = serde_json::to_value(&want).unwrap();
    let p = CString::new(path.to_str().unwrap()).unwrap();
    let bind = CString::new("B=4,S=64").unwrap();
    let device = CString::new("a100-40g-pcie4").unwrap();
    // SAFETY: NUL-terminated strings that outlive the calls; the plan and string are freed once.
    unsafe {
        let plan = ebb_capi::ebb_plan_load(p.as_ptr());
        assert!(!plan.is_null());
        let s = ebb_capi::ebb_plan_report_json(plan, bind.as_ptr(), budget, device.as_ptr());
        assert!(!s.is_null());
        assert!(
            want["recompute_decisions"].as_u64().unwrap()
                + want["swap_decisions"].as_u64().unwrap()
                > 0
        );
        let mut got: serde_json::Value =
            serde_json::from_str(CStr::from_ptr(s).to_str().unwrap()).unwrap();
        ebb_capi::ebb_string_free(s);
        ebb_capi::ebb_plan_free(plan);
        for k in ["finalize_us", "prepare_us"] {
            got[k] = want[k].clone();
        }
        assert_eq!(got, want);
    }
}

/// The C ABI's file boundary: a FIFO, a device or a module nested too deep given to
/// `ebb_plan_load` is an error message (NULL), never a hang or a crash of the host process.
#[test]
fn hostile_files_are_errors_not_hangs_or_crashes() {
    use std::ffi::{CStr, CString};
    let dir = ebb_testkit::scratch("capi-hostile");
    let fifo = dir.join("plan.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Nested far deeper than MLIR's parser could recurse on a small host stack.
    let depth = 5000;
    let deep = dir.join("deep.mlir");
    std::fs::write(
        &deep,
        format!(
            "\"builtin.module\"() ({}{}) : () -> ()\n",
            "\"x.op\"() ({".repeat(depth),
            "}) : () -> ()".repeat(depth)
        ),
    )
    .unwrap();
    let cases = [
        (
            fifo.to_str().unwrap().to_string(),
            "it is a FIFO, not a regular file",
        ),
        ("/dev/zero".to_string(), "not a regular file"),
        (
            deep.to_str().unwrap().to_string(),
            "nested more than 1024 deep",
        ),
    ];
    for (path, want) in cases {
        let c = CString::new(path.clone()).unwrap();
        // A host thread with a small stack, as a C program's worker may have.
        let msg = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                // SAFETY: `c` is a NUL-terminated path; the result is NULL or a plan to free.
                let p = unsafe { ebb_capi::ebb_plan_load(c.as_ptr()) };
                assert!(p.is_null(), "{path} loaded");
                // SAFETY: after a failed call the last error is a NUL-terminated message.
                unsafe { CStr::from_ptr(ebb_capi::ebb_last_error()) }
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(msg.contains(want), "{msg}");
    }
}

/// The documented install (`scripts/install-capi.sh PREFIX`, here with the library this test
/// build made): a C program builds with `cc prog.c $(pkg-config --cflags --libs ebb)` alone and
/// runs against the installed library.
#[test]
fn the_installed_library_builds_a_program_through_pkg_config() {
    let dir = ebb_testkit::scratch("capi-install");
    let prefix = dir.join("prefix");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let install = Command::new("bash")
        .arg(repo.join("scripts/install-capi.sh"))
        .arg(&prefix)
        .env(
            "EBB_CAPI_LIB",
            ebb_testkit::deps_dir().join("libebb_capi.so"),
        )
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "ebb"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config (scripts/setup-debian.sh installs it)");
    assert!(
        flags.status.success(),
        "{}",
        String::from_utf8_lossy(&flags.stderr)
    );
    let flags = String::from_utf8_lossy(&flags.stdout).to_string();
    let exe = dir.join("finalize");
    let cc = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Werror"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/finalize.c"))
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let plan = Compiler::default()
        .compile_file(&ebb_testkit::jax_fixture("gpt_block_sgd"))
        .unwrap();
    let plan_path = dir.join("p.json");
    std::fs::write(&plan_path, plan.to_json()).unwrap();
    let out = Command::new(&exe)
        .arg(&plan_path)
        .arg("B=2,S=16")
        .arg("-1")
        .arg("h100-sxm-pcie5")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("symbol B\nsymbol S\n"), "{stdout}");
}

/// `tests/c/step.c` runs the MLP step through `EbbRuntime` on the `cpu` and `simt`
/// executors and finds their outputs equal byte for byte; an unknown executor is
/// `EBB_STATUS_INVALID_ARGUMENT` naming the choices, `cuda` on a machine without the NVIDIA
/// driver is `EBB_STATUS_DEVICE_UNAVAILABLE` naming the driver (on a machine with one: OK);
/// a plan atlas without a budget has no entry, and a bad sample is -1 with the error.
#[test]
fn a_c_program_runs_the_step_on_the_simt_executor_as_on_the_cpu() {
    let dir = ebb_testkit::scratch("capi-step");
    let plan = Compiler::default()
        .compile_file(&ebb_testkit::jax_fixture("mlp_sgd"))
        .unwrap();
    let plan_path = dir.join("mlp.plan.json");
    std::fs::write(&plan_path, plan.to_json()).unwrap();
    let b = pipeline::parse_bindings("B=8").unwrap();
    let rt = ebb_runtime::Runtime::new(plan, None).unwrap();
    let inputs = ebb_runtime::inputs::random_inputs(rt.graph(), &b, 3).unwrap();
    let mut bin = (inputs.len() as u64).to_ne_bytes().to_vec();
    for t in &inputs {
        let name = ebb_runtime::raw::numpy_name(t.dtype());
        bin.extend((name.len() as u64).to_ne_bytes());
        bin.extend(name.as_bytes());
        bin.extend((t.shape().len() as u64).to_ne_bytes());
        for &d in t.shape() {
            bin.extend((d as i64).to_ne_bytes());
        }
        let bytes = t.to_le_bytes();
        bin.extend((bytes.len() as u64).to_ne_bytes());
        bin.extend(bytes);
    }
    let inputs_path = dir.join("inputs.bin");
    std::fs::write(&inputs_path, bin).unwrap();

    let exe = compile_c(&dir, "step");
    let out = Command::new(&exe)
        .arg(&plan_path)
        .arg("B=8")
        .arg(&inputs_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .contains("executor tpu: 1 unknown executor `tpu` (known: cpu, reference, simt, cuda)"),
        "{stdout}"
    );
    let cuda = stdout
        .lines()
        .find(|l| l.starts_with("executor cuda: "))
        .unwrap_or_default();
    assert!(
        cuda == "executor cuda: 0 "
            || cuda.starts_with("executor cuda: 2 ")
                && (cuda.contains("NVIDIA driver") || cuda.contains("CUDA device")),
        "{cuda}"
    );
    assert!(stdout.contains("executor simt: 0\n"), "{stdout}");
    let n = rt.graph().outputs().len();
    assert!(stdout.contains(&format!("outputs {n} {n}\n")), "{stdout}");
    assert!(stdout.contains(&format!("equal {n}\n")), "{stdout}");
    assert!(stdout.contains("report simt\n"), "{stdout}");
    assert!(stdout.contains("bad bindings: "), "{stdout}");
    assert!(stdout.contains("atlas 0\n"), "{stdout}");
    assert!(stdout.contains("bad atlas sample: "), "{stdout}");
    // `95%` resolved at B=8 as `ebb run --budget 95%` resolves it; the decisions change no bit.
    let bytes =
        pipeline::resolve_budget(rt.plan(), rt.graph(), &b, Budget::Fraction(0.95)).unwrap();
    assert!(
        stdout.contains(&format!("budget 95% {bytes}\n")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("equal 95% {n}\n")), "{stdout}");
    assert!(stdout.contains("atlas 95% "), "{stdout}");
    assert!(stdout.contains("bad budget: budget `half`: "), "{stdout}");
}
