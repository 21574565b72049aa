//! StableHLO front end: imports a JAX-exported training step (MLIR text, generic form or the
//! pretty form `jax.export(...).mlir_module()` prints, see [`pretty`]) into an
//! [`ebb_ir::Graph`] with symbolic shapes.
//!
//! The module is parsed by upstream MLIR through melior with unregistered dialects allowed, so
//! StableHLO ops are generic operations and their `#stablehlo<...>` attributes opaque
//! attributes, read from their text ([`mlir_text`]). Then:
//! 1. `@main`'s dynamic dimensions are named (`stablehlo/dims.rs`): `@main` computes each dimension
//!    variable from the input dimensions and passes it to `@_wrapped_jax_export_main`, whose
//!    parameters carry `jax.global_constant = "B"`, and asserts the other input dimensions
//!    equal to their specification (`4*m`, `B*S`, `S + 1`); solving these equations makes
//!    every input dimension an expression over the variables. A dynamic dimension that cannot
//!    be named this way gets a placeholder symbol `_argK_dJ` and counts as *unresolved*.
//! 2. Functions are inlined at their `func.call`s, regions become nested graphs.
//! 3. Integer shape computations are followed symbolically ([`sym`]), so dynamic ops become
//!    their static counterparts with symbolic payloads; `shape_assertion` custom calls become
//!    [`ebb_ir::ShapeAssertion`]s.
//! 4. Every result type is inferred ([`ebb_ir::shape::infer`]) and checked against the static
//!    dimensions MLIR declares; the graph is verified at the end.

mod dims;
pub mod error;
mod func;
pub mod mlir_text;
mod ops;
pub mod pretty;

pub use crate::{sym, ImportStats, UnsupportedUse};
pub use error::ImportError;

/// Internal helpers, public for the tests in `import/tests/` only.
#[doc(hidden)]
pub mod internals {
    pub use super::dims::solve;
    pub use super::ops::placement::dict_string;
}
pub use ops::supported_op_names;

use ebb_ir::Graph;
use melior::ir::Module;
use melior::Context;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

/// Reads and imports a StableHLO module from `path`.
///
/// Errors: [`ImportError`] for unreadable files, MLIR parse errors (with line:col),
/// unsupported ops or attributes (with the op name and location) and invalid graphs.
pub fn import_file(path: &Path) -> Result<(Graph, ImportStats), ImportError> {
    let text = crate::text::read(path)?;
    import_str(&text, &path.display().to_string())
}

/// Imports a StableHLO module from its text; `file` names it in error messages.
///
/// Errors: as [`import_file`]; a NUL byte in `text` is an error with its location (MLIR
/// cannot take one).
pub fn import_str(text: &str, file: &str) -> Result<(Graph, ImportStats), ImportError> {
    on_parser_stack(file, || {
        let context = Context::new();
        let module = parse(&context, text, file)?;
        func::import_module(&module, file)
    })
}

/// Stack of the thread that parses and imports a module: MLIR's parser and the importer
/// recurse once per nesting level, and [`MAX_NESTING`] levels must fit whatever thread the
/// caller runs on (a Python or C host thread may have a small stack).
const PARSER_STACK_BYTES: usize = 256 << 20;

/// Deepest nesting of brackets (`(`, `[`, `{`, and `<` after a name, as in `tensor<`) that
/// reaches MLIR's parser: enough for [`ebb_ir::graph::MAX_IMPORT_REGION_DEPTH`] levels of
/// regions (about three brackets each) with nested types and attributes inside; deeper text is
/// refused with its location before MLIR sees it.
pub const MAX_NESTING: usize = 1024;

/// Runs `f` (parsing and importing) on a thread with a [`PARSER_STACK_BYTES`] stack.
fn on_parser_stack<T: Send>(
    file: &str,
    f: impl FnOnce() -> Result<T, ImportError> + Send,
) -> Result<T, ImportError> {
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("ebb-mlir-parse".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(s, f)
            .map_err(|e| ImportError::Structure {
                file: file.into(),
                msg: format!("cannot start the parser's thread: {e}"),
            })?;
        match h.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Refuses text whose brackets nest deeper than [`MAX_NESTING`], naming the line and column
/// where that depth is passed. String literals are skipped; unbalanced brackets are left to
/// MLIR's parser.
fn check_nesting(text: &str, file: &str) -> Result<(), ImportError> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b'<' if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'>' if b.get(i.wrapping_sub(1)) != Some(&b'-') => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_NESTING {
            let (line, col) = crate::text::line_col(&b[..i]);
            return Err(ImportError::Parse {
                file: file.to_string(),
                line: line as u32,
                col: col as u32,
                msg: format!(
                    "brackets nested more than {MAX_NESTING} deep (Ebb parses at most \
                     {MAX_NESTING} levels of nested regions, types and attributes)"
                ),
            });
        }
        i += 1;
    }
    Ok(())
}

/// Every op of the module in `text` that the importer does not take, in first-seen order
/// (empty when it takes them all). It walks every function and region, so ops in functions
/// that are never called count too.
///
/// Errors: as [`import_str`] for text that does not parse.
pub fn unsupported_ops(text: &str, file: &str) -> Result<Vec<UnsupportedUse>, ImportError> {
    use melior::ir::block::BlockLike;
    use melior::ir::operation::OperationLike;
    use melior::ir::{OperationRef, RegionLike};
    fn walk(op: OperationRef, file: &str, out: &mut Vec<UnsupportedUse>) {
        if let Some(name) = ops::unsupported_name(&op) {
            crate::count_unsupported(out, name, || func::op_loc(&op, file));
        }
        for i in 0..op.region_count() {
            let Ok(r) = op.region(i) else { continue };
            let mut block = r.first_block();
            while let Some(b) = block {
                let mut inner = b.first_operation();
                while let Some(o) = inner {
                    walk(o, file, out);
                    inner = o.next_in_block();
                }
                block = b.next_in_region();
            }
        }
    }
    on_parser_stack(file, || {
        let context = Context::new();
        let module = parse(&context, text, file)?;
        let mut out = Vec::new();
        let mut op = module.body().first_operation();
        while let Some(o) = op {
            walk(o, file, &mut out);
            op = o.next_in_block();
        }
        Ok(out)
    })
}

/// Parses `text` into a module of `context` (unregistered dialects allowed). A module in MLIR's
/// pretty form (as `jax.export(...).mlir_module()` prints it) is first brought to the generic
/// form ([`generic_of_pretty`]), so the importer reads the same operations either way.
fn parse<'c>(context: &'c Context, text: &str, file: &str) -> Result<Module<'c>, ImportError> {
    crate::text::check_no_nul(text, file)?;
    check_nesting(text, file)?;
    if pretty::is_pretty(text) {
        let generic = generic_of_pretty(text, file)?;
        return parse_generic(context, &generic, file);
    }
    parse_generic(context, text, file)
}

/// The generic form of a module in pretty form: its StableHLO and Shardy ops rewritten by
/// [`pretty::to_generic`], the module parsed by MLIR with the upstream `func` dialect
/// registered (its `func.func`, `call` and `return` keep their custom forms) and printed in
/// the generic form with its locations.
///
/// # Errors
/// [`ImportError::Parse`] where the pretty form is not understood or does not parse.
pub fn generic_of_pretty(text: &str, file: &str) -> Result<String, ImportError> {
    use melior::ir::operation::{OperationLike, OperationPrintingFlags};
    let converted = pretty::to_generic(text, file)?;
    let context = Context::new();
    melior::dialect::DialectHandle::func().register_dialect(&context);
    let module = parse_generic(&context, &converted, file)?;
    module
        .as_operation()
        .to_string_with_flags(
            OperationPrintingFlags::new()
                .enable_debug_info(true, false)
                .print_generic_operation_form(),
        )
        .map_err(|e| ImportError::Parse {
            file: file.to_string(),
            line: 0,
            col: 0,
            msg: format!("printing the generic form: {e}"),
        })
}

/// [`parse`] of a module in generic form (or with only registered dialects in custom form).
fn parse_generic<'c>(
    context: &'c Context,
    text: &str,
    file: &str,
) -> Result<Module<'c>, ImportError> {
    context.set_allow_unregistered_dialects(true);
    let diags: Rc<RefCell<Vec<(String, String)>>> = Rc::default();
    let sink = diags.clone();
    let id = context.attach_diagnostic_handler(move |d| {
        sink.borrow_mut()
            .push((d.to_string(), d.location().to_string()));
        true
    });
    let module = Module::parse(context, text);
    context.detach_diagnostic_handler(id);
    let Some(module) = module else {
        let (msg, loc) = diags
            .borrow()
            .first()
            .cloned()
            .unwrap_or_else(|| ("unknown parse error".into(), String::new()));
        let (line, col) = line_col(&loc);
        return Err(ImportError::Parse {
            file: file.to_string(),
            line,
            col,
            msg,
        });
    };
    Ok(module)
}

/// Extracts `line:col` from an MLIR location text such as `loc("-":3:14)`.
pub fn line_col(loc: &str) -> (u32, u32) {
    let nums: Vec<u32> = loc
        .rsplit('"')
        .next()
        .unwrap_or("")
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    (
        nums.first().copied().unwrap_or(0),
        nums.get(1).copied().unwrap_or(0),
    )
}

/// [`short_loc`], naming `file` where the location names MLIR's parse buffer `-` (a module
/// without source locations: its ops are located in the `.mlir` file itself).
pub fn short_loc_in(loc: &str, file: &str) -> String {
    let short = short_loc(loc);
    let base = Path::new(file)
        .file_name()
        .map_or_else(|| file.to_string(), |n| n.to_string_lossy().into_owned());
    match short.strip_prefix("-:") {
        Some(rest) => format!("{base}:{rest}"),
        None => match short.split_once(" @ -:") {
            Some((name, rest)) => format!("{name} @ {base}:{rest}"),
            None => short,
        },
    }
}

/// A short, readable form of an MLIR location: the innermost `file:line:col` with the op's
/// name scope, e.g. `jit(step)/jvp()/dot_general @ mlp.py:7:20`.
pub fn short_loc(loc: &str) -> String {
    let mut name = None;
    let mut file = None;
    let b = loc.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let s = &loc[start..j.min(loc.len())];
            let rest = &loc[(j + 1).min(loc.len())..];
            if rest.starts_with(':') && file.is_none() {
                let digits: String = rest
                    .chars()
                    .skip(1)
                    .take_while(|c| c.is_ascii_digit() || *c == ':')
                    .collect();
                let base = s.rsplit('/').next().unwrap_or(s);
                file = Some(format!("{base}:{}", digits.trim_end_matches(':')));
            } else if name.is_none() && !rest.starts_with(':') {
                name = Some(s.to_string());
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    match (name, file) {
        (Some(n), Some(f)) => format!("{n} @ {f}"),
        (Some(n), None) => n,
        (None, Some(f)) => f,
        (None, None) => "unknown location".into(),
    }
}
