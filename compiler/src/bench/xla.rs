//! The XLA peer: runs `examples/export/xla_peer.py`, which compiles the same JAX training step
//! at each concrete shape on XLA's CPU backend and prints `compiled.memory_analysis()` per shape
//! (without and with donation of the arguments) and, when asked, the time of one executed step,
//! one JSON object a line.
//!
//! The interpreter is `$EBB_PYTHON` (default `python3`); the script is `$EBB_XLA_PEER` or the
//! one in this source tree. When the interpreter cannot be run or JAX is not importable, the
//! peer is [`XlaOutcome::Unavailable`] with a plain reason: `ebb bench --xla` then prints the
//! table without the XLA column and fails with that reason (exit code 1); an interpreter that
//! cannot be started at all is refused before the sweep ([`check_python`]).

use ebb_ir::{Bindings, Graph};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// XLA's memory analysis of one compiled step at one shape (bytes; compile time in ms).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct XlaShape {
    /// The bindings, by symbol name.
    pub bind: BTreeMap<String, i64>,
    /// `argument_size_in_bytes`: parameters, optimizer state and inputs.
    pub argument_bytes: i64,
    /// `output_size_in_bytes`.
    pub output_bytes: i64,
    /// `alias_size_in_bytes`: outputs that reuse an argument's buffer.
    pub alias_bytes: i64,
    /// `temp_size_in_bytes`: XLA's temporary buffer (after fusion and buffer assignment).
    pub temp_bytes: i64,
    /// argument + output − alias + temp: XLA's device footprint of the step.
    pub total_bytes: i64,
    /// Time of `jit(step).lower(...).compile()`, ms.
    pub compile_ms: f64,
    /// With every argument donated (`jit(step, donate_argnums=all)`): outputs aliasing an
    /// argument, bytes (`None` from a peer that does not measure donation).
    #[serde(default)]
    pub donated_alias_bytes: Option<i64>,
    /// With donation: XLA's temporary buffer, bytes.
    #[serde(default)]
    pub donated_temp_bytes: Option<i64>,
    /// With donation: argument + output − alias + temp, bytes.
    #[serde(default)]
    pub donated_total_bytes: Option<i64>,
    /// Median wall time of one executed step (not donated) on XLA:CPU, ms; only when the
    /// peer was asked to time (`time_runs` ≥ 1).
    #[serde(default)]
    pub step_ms: Option<f64>,
}

/// What the peer gave.
#[derive(Clone, Debug, PartialEq)]
pub enum XlaOutcome {
    /// One analysis per requested shape, in order, and the JAX version.
    Ok {
        /// Per shape.
        shapes: Vec<XlaShape>,
        /// `jax.__version__`.
        jax_version: String,
    },
    /// Why there is no XLA column (no interpreter, no JAX, unknown fixture, peer failure).
    Unavailable(String),
}

/// One line of the peer's output.
#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Shape(XlaShape),
    Hello { jax_version: String },
    Error { error: String, message: String },
}

/// The interpreter: `$EBB_PYTHON`, default `python3`.
pub fn python() -> String {
    std::env::var("EBB_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether the interpreter ([`python`]) can be started at all, checked before a sweep that
/// needs it: the reason, and how to get one, when not.
///
/// # Errors
/// The interpreter cannot be run.
pub fn check_python() -> Result<(), String> {
    let py = python();
    match Command::new(&py)
        .args(["-c", ""])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "--xla needs a Python with jax==0.10.2: cannot run `{py}` ({e}); set EBB_PYTHON \
             (`export EBB_PYTHON=$(bash examples/export/make_env.sh)` creates one)"
        )),
    }
}

/// The peer script: `$EBB_XLA_PEER`, default `examples/export/xla_peer.py` of this source tree.
pub fn script() -> PathBuf {
    match std::env::var_os("EBB_XLA_PEER") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/export/xla_peer.py"
        )),
    }
}

/// What the peer compiles: a fixture of `export_all.py` by name (its JAX step), else a
/// StableHLO module with its signature ([`module_signature`]).
pub struct PeerStep<'a> {
    /// The fixture name in the `.json` metadata next to the module, if any.
    pub fixture: Option<&'a str>,
    /// The module file and its signature, for a `.mlir` input.
    pub module: Option<(&'a Path, &'a str)>,
}

/// The signature `xla_peer.py --module` needs to compile the StableHLO module `input` (a
/// `.mlir` file) that imported as `g`: JSON `{"symbols": [...], "inputs": ["f32[B,S]", ...],
/// "outputs": [...]}`, the types of `@main`'s arguments and results as Ebb reads them. `None`
/// for other inputs.
pub fn module_signature(input: &Path, g: &Graph) -> Option<String> {
    if input.extension()? != "mlir" {
        return None;
    }
    let symbols: Vec<String> = g
        .scope
        .symbols()
        .iter()
        .map(|s| s.name().to_string())
        .filter(|n| !n.starts_with('_'))
        .collect();
    let inputs: Vec<String> = g
        .inputs()
        .iter()
        .map(|&id| g.node(id).outputs[0].to_string())
        .collect();
    let outputs: Vec<String> = g
        .outputs()
        .iter()
        .map(|v| g.value_type(*v).to_string())
        .collect();
    Some(serde_json::json!({"symbols": symbols, "inputs": inputs, "outputs": outputs}).to_string())
}

/// Runs the peer on `step` at `shapes`, timing `time_runs` executions of the step per shape
/// (0: none); `tick` is called after each shape.
/// Never fails: every problem becomes [`XlaOutcome::Unavailable`] with the reason.
pub fn run_peer(
    step: &PeerStep,
    shapes: &[Bindings],
    time_runs: usize,
    mut tick: impl FnMut(),
) -> XlaOutcome {
    let py = python();
    let script = script();
    if !script.is_file() {
        return XlaOutcome::Unavailable(format!(
            "the XLA peer script {} does not exist (set EBB_XLA_PEER)",
            script.display()
        ));
    }
    let list = shapes
        .iter()
        .map(super::shapes::show_bindings)
        .collect::<Vec<_>>()
        .join(";");
    let mut cmd = Command::new(&py);
    cmd.arg(&script);
    if let Some(f) = step.fixture {
        cmd.args(["--fixture", f]);
    }
    if let Some((m, sig)) = step.module {
        cmd.arg("--module").arg(m).args(["--signature", sig]);
    }
    let child = cmd
        .args(["--shapes", &list])
        .args(["--time-runs", &time_runs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return XlaOutcome::Unavailable(format!(
                "cannot run `{py}` ({e}); set EBB_PYTHON to a Python with jax==0.10.2 \
                 (`export EBB_PYTHON=$(bash examples/export/make_env.sh)` creates one)"
            ))
        }
    };
    // Drain stderr on a thread so that a chatty peer cannot block on a full pipe.
    let mut err = child.stderr.take().expect("piped stderr");
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let stdout = child.stdout.take().expect("piped stdout");
    let mut out = Vec::new();
    let mut jax_version = String::new();
    let mut failure = None;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Shape(s)) => {
                out.push(s);
                tick();
            }
            Ok(Line::Hello { jax_version: v }) => jax_version = v,
            Ok(Line::Error { error, message }) => failure = Some(format!("{error}: {message}")),
            Err(e) => failure = Some(format!("unexpected peer output `{line}`: {e}")),
        }
    }
    let status = child.wait();
    let stderr = err_thread.join().unwrap_or_default();
    if let Some(f) = failure {
        return XlaOutcome::Unavailable(f);
    }
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return XlaOutcome::Unavailable(format!(
                "`{py} {}` exited with {s}: {}",
                script.display(),
                tail.join(" | ")
            ));
        }
        Err(e) => return XlaOutcome::Unavailable(format!("waiting for the XLA peer: {e}")),
    }
    let want: Vec<BTreeMap<String, i64>> = shapes
        .iter()
        .map(|b| b.iter().map(|(s, v)| (s.name().to_string(), *v)).collect())
        .collect();
    let got: Vec<_> = out.iter().map(|s| s.bind.clone()).collect();
    if got != want {
        return XlaOutcome::Unavailable(format!(
            "the XLA peer answered for {got:?}, expected {want:?}"
        ));
    }
    XlaOutcome::Ok {
        shapes: out,
        jax_version,
    }
}
