//! Every variant of the import, plan, finalize and runtime error enums, built with distinctive
//! field values, prints a message that names its subject (the file, and the line:column, node,
//! op, field or value it is about) and no internal type name. The `match`es list every variant:
//! a new variant does not compile until it is given a case here.

use ebb_import::onnx::{NodeLoc, OnnxError};
use ebb_import::stablehlo::ImportError;
use ebb_import::text::TextError;
use ebb_ir::dim::DimError;
use ebb_ir::verify::VerifyError;
use ebb_passes::plan::check::CheckError;
use ebb_passes::plan::PlanVerifyError;
use ebb_plan::finalize::FinalizeError;
use ebb_plan::format::PlanError;
use ebb_runtime::error::OpError;
use ebb_runtime::{ExecError, NpzError, RuntimeError};

/// Words that name Rust types or debug output rather than anything a user wrote.
const INTERNAL: &[&str] = &[
    "VersionOnly",
    "struct ",
    "Some(",
    "None",
    "NodeIndex",
    "OpPos(",
    "ValueId(",
    "Box<",
    "::",
];

/// Asserts that `msg` names each of `subjects` and no internal type name (`::` is allowed in
/// ONNX domains such as `ai.onnx::Relu`, so `ok_colons` lists those).
#[track_caller]
fn names(what: &str, msg: &str, subjects: &[&str], ok_colons: &[&str]) {
    for s in subjects {
        assert!(msg.contains(s), "{what}: `{s}` missing from: {msg}");
    }
    let mut scrubbed = msg.to_string();
    for c in ok_colons {
        scrubbed = scrubbed.replace(c, "");
    }
    for w in INTERNAL {
        assert!(!scrubbed.contains(w), "{what}: internal `{w}` in: {msg}");
    }
}

fn io() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory")
}

fn verify_error() -> VerifyError {
    VerifyError::Structure {
        graph: "main".into(),
        position: 7,
        op: "add".into(),
        loc: " at model.py:3:4".into(),
        msg: "operand 1 is not defined before use".into(),
    }
}

fn node() -> Box<NodeLoc> {
    Box::new(NodeLoc {
        name: "relu_3".into(),
        op_type: "Relu".into(),
        domain: "ai.onnx".into(),
    })
}

#[test]
fn stablehlo_import_errors_name_the_file_and_place() {
    let text = [
        TextError::Io {
            path: "m.mlir".into(),
            error: io(),
        },
        TextError::Utf8 {
            file: "m.mlir".into(),
            offset: 12,
            line: 2,
            col: 5,
        },
        TextError::Nul {
            file: "m.mlir".into(),
            offset: 12,
            line: 2,
            col: 5,
        },
    ];
    for e in text {
        let subjects: &[&str] = match &e {
            TextError::Io { .. } => &["m.mlir", "No such file"],
            TextError::Utf8 { .. } | TextError::Nul { .. } => &["m.mlir:2:5", "byte 12"],
        };
        names("TextError", &e.to_string(), subjects, &[]);
    }
    let errors = [
        ImportError::Io {
            path: "m.mlir".into(),
            source: io(),
        },
        ImportError::Text(TextError::Nul {
            file: "m.mlir".into(),
            offset: 1,
            line: 1,
            col: 2,
        }),
        ImportError::Parse {
            file: "m.mlir".into(),
            line: 3,
            col: 14,
            msg: "expected ')'".into(),
        },
        ImportError::Structure {
            file: "m.mlir".into(),
            msg: "no function @main".into(),
        },
        ImportError::UnsupportedOp {
            file: "m.mlir".into(),
            op: "stablehlo.fft".into(),
            loc: "m.mlir:9:3".into(),
        },
        ImportError::Op {
            file: "m.mlir".into(),
            op: "stablehlo.slice".into(),
            loc: "m.mlir:9:3".into(),
            msg: "limit 9 past the dimension".into(),
        },
        ImportError::Verify {
            file: "m.mlir".into(),
            source: Box::new(verify_error()),
        },
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            ImportError::Io { .. } => &["m.mlir", "No such file"],
            ImportError::Text(_) => &["m.mlir:1:2"],
            ImportError::Parse { .. } => &["m.mlir:3:14", "expected ')'"],
            ImportError::Structure { .. } => &["m.mlir", "@main"],
            ImportError::UnsupportedOp { .. } => &["m.mlir:9:3", "stablehlo.fft"],
            ImportError::Op { .. } => &["m.mlir:9:3", "stablehlo.slice", "limit 9"],
            ImportError::Verify { .. } => &["m.mlir", "op #7 `add`", "model.py:3:4"],
        };
        names("ImportError", &e.to_string(), subjects, &[]);
    }
}

#[test]
fn onnx_import_errors_name_the_file_and_node() {
    let decode = ebb_import::onnx::decode_model(b"\xff\xff\xff", "m.onnx").unwrap_err();
    let errors = [
        OnnxError::Io {
            path: "m.onnx".into(),
            source: io(),
        },
        decode,
        OnnxError::Structure {
            file: "m.onnx".into(),
            msg: "graph output `y` is never produced".into(),
        },
        OnnxError::DimParam {
            file: "m.onnx".into(),
            value: "x".into(),
            dim: 1,
            param: "2*".into(),
            msg: "expected a term".into(),
        },
        OnnxError::ShapeMismatch {
            file: "m.onnx".into(),
            node: node(),
            value: "h".into(),
            declared: "f32[B, 4]".into(),
            inferred: "f32[B, 5]".into(),
        },
        OnnxError::UnsupportedOp {
            file: "m.onnx".into(),
            node: node(),
            opset: 18,
            nested: String::new(),
        },
        OnnxError::Op {
            file: "m.onnx".into(),
            node: node(),
            msg: "output 0 defines value `y`, which is already defined".into(),
        },
        OnnxError::Verify {
            file: "m.onnx".into(),
            source: Box::new(verify_error()),
        },
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            OnnxError::Io { .. } => &["m.onnx", "No such file"],
            OnnxError::Decode { .. } => &["m.onnx", "not a valid ONNX model"],
            OnnxError::Structure { .. } => &["m.onnx", "`y`"],
            OnnxError::DimParam { .. } => &["m.onnx", "`x`", "dimension 1", "`2*`"],
            OnnxError::ShapeMismatch { .. } => &["m.onnx", "relu_3", "`h`", "f32[B, 5]"],
            OnnxError::UnsupportedOp { .. } => &["m.onnx", "Relu", "relu_3", "opset 18"],
            OnnxError::Op { .. } => &["m.onnx", "relu_3", "`y`"],
            OnnxError::Verify { .. } => &["m.onnx", "op #7 `add`"],
        };
        names("OnnxError", &e.to_string(), subjects, &["ai.onnx::Relu"]);
    }
}

#[test]
fn plan_errors_name_the_field_and_value() {
    let json = ebb_plan::format::Plan::from_json("{\"version\": \"three\"}").unwrap_err();
    let errors = [
        json,
        PlanError::Version { found: 9 },
        PlanError::OutOfRange {
            field: "candidates.value",
            index: 4,
            value: 99,
            limit: 12,
        },
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            PlanError::Json { .. } => &["line 1, column", "invalid type"],
            PlanError::Version { .. } => &["version 9", "expected"],
            PlanError::OutOfRange { .. } => &["candidates.value", "[4] = 99", "< 12"],
        };
        names("PlanError", &e.to_string(), subjects, &[]);
    }
    let errors = [
        PlanVerifyError::NoGraph,
        PlanVerifyError::Digest {
            recorded: "abc".into(),
            found: "def".into(),
        },
        PlanVerifyError::Graph("12:3: unknown op `frob`".into()),
        PlanVerifyError::Mismatch {
            variant: 1,
            field: "candidates[3]".into(),
            problem: "transient bytes 0, the search derives 4*B".into(),
        },
        PlanVerifyError::Check {
            variant: 0,
            bindings: "B=4".into(),
            source: CheckError::Overflow,
        },
        PlanVerifyError::NoBinding("at B=4".into()),
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            PlanVerifyError::NoGraph => &["graph_ir", "graph_digest"],
            PlanVerifyError::Digest { .. } => &["abc", "def"],
            PlanVerifyError::Graph(_) => &["embedded graph", "12:3", "`frob`"],
            PlanVerifyError::Mismatch { .. } => &["variant 1", "candidates[3]", "4*B"],
            PlanVerifyError::Check { .. } => &["variant 0", "B=4"],
            PlanVerifyError::NoBinding(_) => &["B=4"],
        };
        names("PlanVerifyError", &e.to_string(), subjects, &[]);
    }
}

#[test]
fn finalize_errors_name_the_binding_or_expression() {
    let errors = [
        FinalizeError::Fact(DimError::Unbound("S".into())),
        FinalizeError::Assertion {
            check: "S <= 512".into(),
            message: "S = 600 exceeds 512".into(),
        },
        FinalizeError::Eval {
            expr: "B*S".into(),
            source: DimError::Unbound("S".into()),
        },
        FinalizeError::Infeasible {
            budget: 1024,
            smallest: 4096,
            smallest_mib: 0.004,
        },
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            FinalizeError::Fact(_) => &["bindings", "`S`"],
            FinalizeError::Assertion { .. } => &["S = 600 exceeds 512"],
            FinalizeError::Eval { .. } => &["`B*S`", "`S`"],
            FinalizeError::Infeasible { .. } => &["1024 bytes", "4096 bytes"],
        };
        names("FinalizeError", &e.to_string(), subjects, &[]);
    }
}

#[test]
fn runtime_errors_name_the_graph_op_or_file() {
    let exec = || ExecError::Op {
        op: "dot_general".into(),
        loc: "model.py:7:20".into(),
        source: OpError::Invalid("contracting dimensions differ".into()),
    };
    let errors = [
        ExecError::InputCount {
            graph: "main".into(),
            expected: 4,
            got: 3,
        },
        ExecError::InputMismatch {
            graph: "main".into(),
            index: 2,
            name: "x".into(),
            expected: "f32[8, 32]".into(),
            got: "f64[8, 32]".into(),
        },
        ExecError::Plan {
            graph: "main".into(),
            msg: "decision 3 evicts an input".into(),
        },
        ExecError::Schedule {
            graph: "main".into(),
            msg: "op #4 runs before its operand".into(),
        },
        ExecError::Shape {
            graph: "main".into(),
            op: "reshape".into(),
            loc: "model.py:2:1".into(),
            msg: "symbol `S` is not bound".into(),
        },
        ExecError::Unsupported {
            op: "custom_call".into(),
            detail: " (target \"foo\")".into(),
            loc: "m.mlir:3:4".into(),
        },
        exec(),
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            ExecError::InputCount { .. } => &["`main`", "4 inputs", "got 3"],
            ExecError::InputMismatch { .. } => &["input 2", "`x`", "f32[8, 32]", "f64[8, 32]"],
            ExecError::Plan { .. } => &["`main`", "decision 3"],
            ExecError::Schedule { .. } => &["`main`", "op #4"],
            ExecError::Shape { .. } => &["`reshape`", "model.py:2:1", "`S`"],
            ExecError::Unsupported { .. } => &["`custom_call`", "foo", "m.mlir:3:4"],
            ExecError::Op { .. } => &["`dot_general`", "model.py:7:20", "contracting"],
        };
        names("ExecError", &e.to_string(), subjects, &[]);
    }
    let errors = [
        OpError::Dim(DimError::Overflow),
        OpError::Invalid("start index 9 past 4".into()),
        OpError::DType {
            dtype: ebb_ir::DType::BF16,
            what: " by `sort`".into(),
        },
        OpError::Region {
            region: "body".into(),
            source: Box::new(exec()),
        },
        OpError::Unsupported("a 5-d gather".into()),
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            OpError::Dim(_) => &["dimension", "overflow"],
            OpError::Invalid(_) => &["start index 9"],
            OpError::DType { .. } => &["bf16", "`sort`"],
            OpError::Region { .. } => &["`body`", "`dot_general`"],
            OpError::Unsupported(_) => &["5-d gather"],
        };
        names("OpError", &e.to_string(), subjects, &[]);
    }
    let errors = [
        RuntimeError::Graph("3:4: unknown op".into()),
        RuntimeError::Finalize(FinalizeError::Fact(DimError::Unbound("B".into()))),
        RuntimeError::Exec(exec()),
        RuntimeError::Memory(ebb_runtime::buffer::ArenaAllocError(1 << 40)),
        RuntimeError::Accounting {
            planned: 100,
            measured: 104,
        },
        RuntimeError::Device(ebb_runtime::exec::device::DeviceError::Unavailable(
            "libcuda.so.1 not found".into(),
        )),
        RuntimeError::Hazard(ebb_runtime::exec::device::hazard::Hazard(
            "command 7 on the copy stream".into(),
        )),
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            RuntimeError::Graph(_) => &["plan graph", "3:4"],
            RuntimeError::Finalize(_) => &["`B`"],
            RuntimeError::Exec(_) => &["`dot_general`"],
            RuntimeError::Memory(_) => &["1099511627776"],
            RuntimeError::Accounting { .. } => &["100 bytes", "104 bytes"],
            RuntimeError::Device(_) => &["libcuda.so.1"],
            RuntimeError::Hazard(_) => &["command 7"],
        };
        names("RuntimeError", &e.to_string(), subjects, &[]);
    }
    let errors = [
        NpzError::Io {
            path: "in.npz".into(),
            source: io(),
        },
        NpzError::Zip {
            path: "in.npz".into(),
            msg: "invalid Zip archive".into(),
        },
        NpzError::Npy {
            path: "in.npz".into(),
            name: "in_3".into(),
            msg: "bad header".into(),
        },
        NpzError::UnsupportedType {
            path: "in.npz".into(),
            name: "in_3".into(),
            descr: "<c8".into(),
        },
        NpzError::Missing {
            path: "in.npz".into(),
            name: "in_3".into(),
        },
        NpzError::TooLarge {
            path: "in.npz".into(),
            name: "junk".into(),
            limit: 1 << 30,
            limited_by: "RLIMIT_AS (ulimit -v)".into(),
        },
    ];
    for e in errors {
        let subjects: &[&str] = match &e {
            NpzError::Io { .. } => &["in.npz", "No such file"],
            NpzError::Zip { .. } => &["in.npz", "zip"],
            NpzError::Npy { .. } => &["in.npz", "`in_3`", "bad header"],
            NpzError::UnsupportedType { .. } => &["in.npz", "`in_3`", "`<c8`"],
            NpzError::Missing { .. } => &["in.npz", "`in_3`"],
            NpzError::TooLarge { .. } => &["in.npz", "`junk`", "1073741824", "ulimit -v"],
        };
        names("NpzError", &e.to_string(), subjects, &[]);
    }
}
