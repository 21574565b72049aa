//! StableHLO as `jax.export(...).mlir_module()` prints it: MLIR's *pretty* form, where each op
//! of the `stablehlo` (and `sdy`) dialect uses its custom assembly format
//! (`stablehlo.add %0, %1 : tensor<4xf32>`, `stablehlo.reduce(%x init: %c) applies
//! stablehlo.add across dimensions = [1] : ...`). Upstream MLIR parses the generic form of any
//! op and the custom forms of the dialects it registers; `func` is upstream (registered for the
//! pretty form), StableHLO is not. So [`to_generic`] rewrites every StableHLO/Shardy op that is
//! in its custom form into the generic form — the grammar of each op is its assembly format in
//! the StableHLO specification and `StablehloOps.td` (operands, then the op's attributes in
//! their short spellings, then the type signature, either one type for all operands and
//! results or a function type) — and leaves everything else as it is; the module then parses
//! with `func` registered and is printed in the generic form, which the importer reads as it
//! reads any export. Ops that JAX prints generically anyway (`gather`, `scatter`, `sort`,
//! `case`, `reduce_window`, ...) are untouched.
//!
//! The rewrite works line by line (MLIR prints one op per line; the custom forms with regions
//! are `while` — `cond { ... } do { ... }` — and `reduce` — `reducer(...) { ... }` or the compact
//! `applies OP` — whose region lines are rewritten like any other). An op whose custom form
//! this reader does not know is an error naming the op and its line, never a guess.

use super::error::ImportError;

/// Whether `text` is a module in MLIR's pretty form: its first op (after attribute aliases
/// such as `#loc3 = loc(...)` and comments) is not quoted (`module @jit_f ...`,
/// `func.func @main(...)`).
pub fn is_pretty(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .find(|l| !(l.is_empty() || l.starts_with('#') || l.starts_with("//")))
        .is_some_and(|l| !l.starts_with('"'))
}

/// A region opened by a custom-form op, closed by a line `}` at this depth.
enum Frame {
    /// `stablehlo.while`: its loop-carried values (names, types) and result types.
    While {
        depth: usize,
        args: Vec<(String, String)>,
        types: Vec<String>,
        /// `cond` seen, `do` not yet.
        in_cond: bool,
    },
    /// The full form of `stablehlo.reduce`: its signature.
    Reduce { depth: usize, signature: String },
}

/// `text` with every StableHLO/Shardy op in custom form rewritten in the generic form (see the
/// module docs); `file` names the module in errors.
///
/// # Errors
/// [`ImportError::Parse`] at the line of an op whose custom form is not understood.
pub fn to_generic(text: &str, file: &str) -> Result<String, ImportError> {
    let mut out = String::with_capacity(text.len() * 5 / 4);
    let mut frames: Vec<Frame> = Vec::new();
    let mut depth = 0usize;
    let mut fresh = 0usize;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let line_no = i;
        let at = move |msg: String| ImportError::Parse {
            file: file.to_string(),
            line: (line_no + 1) as u32,
            col: (line.len() - line.trim_start().len() + 1) as u32,
            msg,
        };
        let t = line.trim();
        let indent = &line[..line.len() - line.trim_start().len()];
        // Region structure of the custom forms.
        if let Some(Frame::While {
            depth: d,
            args,
            in_cond,
            ..
        }) = frames.last_mut()
        {
            if t == "cond {" && depth == *d && !*in_cond {
                *in_cond = true;
                out.push_str(&format!("{indent}^bb0({}):\n", block_args(args)));
                depth += 1;
                i += 1;
                continue;
            }
            if t == "} do {" && depth == *d + 1 {
                out.push_str(&format!(
                    "{indent}}}, {{\n{indent}^bb0({}):\n",
                    block_args(args)
                ));
                i += 1;
                continue;
            }
        }
        if t.starts_with('}') {
            let closes_frame = match frames.last() {
                Some(Frame::While { depth: d, .. } | Frame::Reduce { depth: d, .. }) => {
                    depth == *d + 1
                }
                None => false,
            };
            if closes_frame {
                let loc = t.trim_start_matches('}').trim();
                let tail = match frames.pop() {
                    Some(Frame::While { types, .. }) => {
                        let tys = types.join(", ");
                        format!("}}) : ({tys}) -> ({tys})")
                    }
                    Some(Frame::Reduce { signature, .. }) => format!("}}) : {signature}"),
                    None => unreachable!("a frame was found above"),
                };
                depth -= 1;
                out.push_str(&format!("{indent}{tail} {loc}\n"));
                i += 1;
                continue;
            }
        }
        match custom_op(t) {
            None => {
                depth = (depth as isize + brace_balance(t)).max(0) as usize;
                out.push_str(line);
                out.push('\n');
            }
            Some(op) => {
                let converted = convert(&op, &mut fresh).map_err(|e| {
                    at(format!(
                        "the pretty form of `{}` is not understood ({e}); export the generic form \
                     (`module.operation.get_asm(print_generic_op_form=True)`, or ebb.jax.export)",
                        op.name
                    ))
                })?;
                match converted {
                    Converted::Line(s) => {
                        out.push_str(indent);
                        out.push_str(&s);
                        out.push('\n');
                    }
                    Converted::While { head, args, types } => {
                        out.push_str(indent);
                        out.push_str(&head);
                        out.push('\n');
                        frames.push(Frame::While {
                            depth,
                            args,
                            types,
                            in_cond: false,
                        });
                    }
                    Converted::Reduce { head, signature } => {
                        // The next line is `reducer(%a: T, %c: T) (%b: U, %d: U) {`.
                        i += 1;
                        let r = lines.get(i).map(|l| l.trim()).unwrap_or("");
                        let args = reducer_args(r)
                            .ok_or_else(|| at(format!("expected `reducer(...) {{`, got `{r}`")))?;
                        out.push_str(&format!("{indent}{head}\n{indent}^bb0({args}):\n"));
                        frames.push(Frame::Reduce { depth, signature });
                        depth += 1;
                    }
                }
            }
        }
        i += 1;
    }
    Ok(out)
}

/// `%a: T, %b: U` of a block's arguments.
fn block_args(args: &[(String, String)]) -> String {
    args.iter()
        .map(|(n, t)| format!("{n}: {t}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The block arguments of a reducer line `reducer(%a: T, %c: T) (%b: U, %d: U) {` in the
/// generic order: every pair's first argument, then every pair's second.
fn reducer_args(line: &str) -> Option<String> {
    let rest = line.strip_prefix("reducer")?.trim_end();
    let rest = rest.strip_suffix('{')?.trim_end();
    let groups = split_top(rest, ' ')
        .into_iter()
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(|g| g.strip_prefix('(')?.strip_suffix(')'))
        .collect::<Option<Vec<_>>>()?;
    let mut first = Vec::new();
    let mut second = Vec::new();
    for g in groups {
        let pair = split_top(g, ',');
        let [a, b] = pair.as_slice() else {
            return None;
        };
        first.push(a.trim().to_string());
        second.push(b.trim().to_string());
    }
    first.extend(second);
    Some(first.join(", "))
}

/// Change of `{`/`}` nesting over a line (outside strings).
fn brace_balance(s: &str) -> isize {
    let mut n = 0;
    let mut in_str = false;
    let mut esc = false;
    for c in s.chars() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => n += 1,
            '}' => n -= 1,
            _ => {}
        }
    }
    n
}

/// One op line in custom form: `RESULTS = NAME REST LOC`.
struct Op<'a> {
    /// `%0 = `, `%1:2 = `, `%a, %b = ` or empty.
    results: &'a str,
    /// Number of results.
    n_results: usize,
    /// `stablehlo.add`.
    name: &'a str,
    /// What follows the name, without the location.
    rest: &'a str,
    /// ` loc(...)` or empty.
    loc: &'a str,
}

/// The op of a trimmed line if it is a `stablehlo.`, `chlo.` or `sdy.` op in custom form.
fn custom_op(t: &str) -> Option<Op<'_>> {
    let (results, body) = if t.starts_with('%') {
        let k = find_top(t, " = ")?;
        (&t[..k + 3], &t[k + 3..])
    } else {
        ("", t)
    };
    let end = body
        .find(|c: char| c == ' ' || c == '(')
        .unwrap_or(body.len());
    let name = &body[..end];
    if !["stablehlo.", "chlo.", "sdy."]
        .iter()
        .any(|d| name.starts_with(d))
    {
        return None;
    }
    let (rest, loc) = split_loc(&body[end..]);
    let n_results = if results.is_empty() {
        0
    } else {
        let r = results.trim_end_matches(" = ");
        match r.split_once(':') {
            Some((_, n)) if !r.contains(',') => n.trim().parse().unwrap_or(1),
            _ => split_top(r, ',').len(),
        }
    };
    Some(Op {
        results,
        n_results,
        name,
        rest: rest.trim(),
        loc,
    })
}

/// `(body, " loc(...)")` of an op's text after its name.
fn split_loc(s: &str) -> (&str, &str) {
    let s = s.trim_end();
    match rfind_top(s, " loc(") {
        Some(k) if s.ends_with(')') => (&s[..k], &s[k..]),
        _ => (s, ""),
    }
}

/// What a custom-form line becomes.
enum Converted {
    /// One generic line.
    Line(String),
    /// The head of a generic `while` (`%r = "stablehlo.while"(...) ({`); the regions follow.
    While {
        head: String,
        args: Vec<(String, String)>,
        types: Vec<String>,
    },
    /// The head of a generic `reduce` whose region follows (`reducer(...) {`).
    Reduce { head: String, signature: String },
}

/// An op's type signature: operand types and result types.
struct Sig {
    operands: Vec<String>,
    results: Vec<String>,
}

impl Sig {
    fn text(&self) -> String {
        format!(
            "({}) -> ({})",
            self.operands.join(", "),
            self.results.join(", ")
        )
    }
}

/// Reads a signature: `(A, B) -> R`, `(A) -> (R, S)`, `A -> R`, or one type `T` for the
/// `n_operands` operands and `n_results` results.
fn signature(s: &str, n_operands: usize, n_results: usize) -> Result<Sig, String> {
    let s = s.trim();
    if let Some(k) = find_top(s, "->") {
        let (a, r) = (s[..k].trim(), s[k + 2..].trim());
        let list = |x: &str| -> Vec<String> {
            let x = x
                .strip_prefix('(')
                .and_then(|y| y.strip_suffix(')'))
                .filter(|_| x.starts_with('(') && matching_close(x, 0) == Some(x.len() - 1))
                .unwrap_or(x);
            split_top(x, ',')
                .into_iter()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect()
        };
        return Ok(Sig {
            operands: list(a),
            results: list(r),
        });
    }
    if s.is_empty() || s.contains(',') {
        return Err(format!("unexpected type signature `{s}`"));
    }
    Ok(Sig {
        operands: vec![s.to_string(); n_operands],
        results: vec![s.to_string(); n_results],
    })
}

/// `[1, 2]` → `array<i64: 1, 2>` (`array<i64>` for `[]`).
fn i64_array(s: &str) -> Result<String, String> {
    let inner = s
        .trim()
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .ok_or_else(|| format!("expected a list `[...]`, got `{s}`"))?
        .trim();
    Ok(if inner.is_empty() {
        "array<i64>".into()
    } else {
        format!("array<i64: {inner}>")
    })
}

/// The generic line `RESULTS"NAME"(OPERANDS) <{PROPS}> : SIG LOC`.
fn generic(op: &Op, operands: &[&str], props: &[String], sig: &Sig) -> String {
    let props = if props.is_empty() {
        String::new()
    } else {
        format!(" <{{{}}}>", props.join(", "))
    };
    format!(
        "{}\"{}\"({}){props} : {}{}",
        op.results,
        op.name,
        operands.join(", "),
        sig.text(),
        op.loc
    )
}

/// Splits `rest` into its comma-separated items and its signature (after the last top-level
/// ` : `).
fn items_and_sig(rest: &str) -> Result<(Vec<&str>, &str), String> {
    let k = rfind_top(rest, " : ").ok_or("no type signature `: ...`")?;
    let items = split_top(&rest[..k], ',')
        .into_iter()
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect();
    Ok((items, &rest[k + 3..]))
}

/// Whether `s` is one SSA value: `%name`, `%name#3`.
fn is_value(s: &str) -> bool {
    s.strip_prefix('%').is_some_and(|n| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_#.$-".contains(c))
    })
}

/// The operands (`%x` items) and the `key = value` items of `items`; anything else (keywords
/// such as `compare`'s direction) is left out.
fn operands_and_attrs<'a>(items: &[&'a str]) -> (Vec<&'a str>, Vec<(&'a str, &'a str)>) {
    let mut ops = Vec::new();
    let mut attrs = Vec::new();
    for it in items {
        if is_value(it) {
            ops.push(*it);
        } else if let Some((k, v)) = it.split_once(" = ") {
            attrs.push((k.trim(), v.trim()));
        }
    }
    (ops, attrs)
}

fn convert(op: &Op, fresh: &mut usize) -> Result<Converted, String> {
    let short = op.name.split_once('.').map_or(op.name, |(_, s)| s);
    let dialect = op.name.split_once('.').map_or("", |(d, _)| d);
    let line = |s: String| Ok(Converted::Line(s));
    match (dialect, short) {
        ("stablehlo", "constant") => {
            let k = rfind_top(op.rest, " : ").ok_or("no type")?;
            let ty = op.rest[k + 3..].trim();
            line(format!(
                "{}\"stablehlo.constant\"() <{{value = {}}}> : () -> {ty}{}",
                op.results, op.rest, op.loc
            ))
        }
        ("stablehlo", "iota") => {
            let (items, sig) = items_and_sig(op.rest)?;
            let (_, attrs) = operands_and_attrs(&items);
            let dim = attr(&attrs, "dim")?;
            line(format!(
                "{}\"stablehlo.iota\"() <{{iota_dimension = {dim} : i64}}> : () -> {}{}",
                op.results,
                sig.trim(),
                op.loc
            ))
        }
        ("stablehlo", "compare") => {
            let (items, sig) = items_and_sig(op.rest)?;
            let dir = items.first().ok_or("no direction")?;
            let (ops, _) = operands_and_attrs(&items);
            let mut props = vec![format!(
                "comparison_direction = #stablehlo<comparison_direction {dir}>"
            )];
            if let Some(ty) = items.get(3).filter(|x| !x.starts_with('%')) {
                props.insert(
                    0,
                    format!("compare_type = #stablehlo<comparison_type {ty}>"),
                );
            }
            let sig = signature(sig, ops.len(), op.n_results)?;
            line(generic(op, &ops, &props, &sig))
        }
        ("stablehlo", "select") => {
            let (items, sig) = items_and_sig(op.rest)?;
            let (ops, _) = operands_and_attrs(&items);
            let sig = match split_top(sig, ',').as_slice() {
                [p, t] if find_top(sig, "->").is_none() => Sig {
                    operands: vec![p.trim().into(), t.trim().into(), t.trim().into()],
                    results: vec![t.trim().into()],
                },
                _ => signature(sig, ops.len(), op.n_results)?,
            };
            line(generic(op, &ops, &[], &sig))
        }
        ("stablehlo", "return") | ("stablehlo", "optimization_barrier") => {
            let (ops, types) = if op.rest.is_empty() {
                (Vec::new(), Vec::new())
            } else {
                let (items, sig) = items_and_sig(op.rest)?;
                let types: Vec<String> = split_top(sig, ',')
                    .into_iter()
                    .map(|t| t.trim().to_string())
                    .collect();
                (operands_and_attrs(&items).0, types)
            };
            let results = if short == "return" {
                Vec::new()
            } else {
                types.clone()
            };
            let sig = Sig {
                operands: types,
                results,
            };
            line(generic(op, &ops, &[], &sig))
        }
        ("stablehlo", "custom_call") => {
            let rest = op.rest.strip_prefix('@').ok_or("no call target `@...`")?;
            let open = rest.find('(').ok_or("no operand list")?;
            let target = &rest[..open];
            let close = matching_close(rest, open).ok_or("unbalanced operand list")?;
            let ops: Vec<&str> = split_top(&rest[open + 1..close], ',')
                .into_iter()
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .collect();
            let after = rest[close + 1..].trim();
            let k = rfind_top(after, " : ")
                .or_else(|| after.starts_with(": ").then_some(0))
                .ok_or("no type signature")?;
            let dict = after[..k].trim();
            let sig_text = after[k..].trim_start().trim_start_matches(':').trim();
            let mut props = vec![format!("call_target_name = \"{target}\"")];
            if let Some(d) = dict.strip_prefix('{').and_then(|d| d.strip_suffix('}')) {
                props.extend(
                    split_top(d, ',')
                        .into_iter()
                        .map(|x| x.trim().to_string())
                        .filter(|x| !x.is_empty()),
                );
            }
            let sig = signature(sig_text, ops.len(), op.n_results)?;
            line(generic(op, &ops, &props, &sig))
        }
        ("stablehlo", "composite") => {
            // `"name" %a, %b {attrs} : sig`
            let rest = op.rest;
            let q = matching_quote(rest).ok_or("no composite name")?;
            let name = &rest[..=q];
            let after = rest[q + 1..].trim();
            let brace = after.find('{').ok_or("no attributes")?;
            let close = matching_close(after, brace).ok_or("unbalanced attributes")?;
            let ops: Vec<&str> = split_top(&after[..brace], ',')
                .into_iter()
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .collect();
            let mut props = vec![format!("name = {name}")];
            props.extend(
                split_top(&after[brace + 1..close], ',')
                    .into_iter()
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty()),
            );
            let sig_text = after[close + 1..]
                .trim_start()
                .strip_prefix(':')
                .ok_or("no type signature")?;
            let sig = signature(sig_text, ops.len(), op.n_results)?;
            line(generic(op, &ops, &props, &sig))
        }
        ("stablehlo", "while") => {
            // `(%iterArg = %c, ...) : T1, T2, ...`
            let open = op.rest.find('(').ok_or("no loop-carried values")?;
            let close = matching_close(op.rest, open).ok_or("unbalanced `(`")?;
            let mut args = Vec::new();
            let mut inits = Vec::new();
            for a in split_top(&op.rest[open + 1..close], ',') {
                let (n, v) = a.split_once(" = ").ok_or("expected `%arg = %init`")?;
                args.push(n.trim().to_string());
                inits.push(v.trim().to_string());
            }
            let types: Vec<String> = op.rest[close + 1..]
                .trim_start()
                .strip_prefix(':')
                .map(|t| {
                    split_top(t, ',')
                        .into_iter()
                        .map(|x| x.trim().to_string())
                        .collect()
                })
                .unwrap_or_default();
            if types.len() != args.len() {
                return Err(format!(
                    "{} loop-carried values, {} types",
                    args.len(),
                    types.len()
                ));
            }
            Ok(Converted::While {
                head: format!(
                    "{}\"stablehlo.while\"({}) ({{",
                    op.results,
                    inits.join(", ")
                ),
                args: args.into_iter().zip(types.iter().cloned()).collect(),
                types,
            })
        }
        ("stablehlo", "reduce") => reduce(op, fresh),
        ("stablehlo", "convolution") => convolution(op),
        ("sdy", "sharding_constraint") => {
            // `%x <@mesh, [{}]> : T`
            let (value, rest) = op.rest.split_once(' ').ok_or("no operand")?;
            let k = rfind_top(rest, " : ").ok_or("no type")?;
            let sharding = rest[..k].trim();
            let ty = rest[k + 3..].trim();
            let sig = Sig {
                operands: vec![ty.into()],
                results: vec![ty.into()],
            };
            line(generic(
                op,
                &[value],
                &[format!("sharding = #sdy.sharding{sharding}")],
                &sig,
            ))
        }
        ("sdy", "mesh") => {
            // `@name = <...> {attrs}`
            let rest = op.rest.strip_prefix('@').ok_or("no mesh name")?;
            let (name, rest) = rest.split_once(" = ").ok_or("no `=`")?;
            let rest = rest.trim();
            let close = matching_close(rest, 0).ok_or("unbalanced mesh")?;
            let mesh = &rest[..=close];
            let dict = rest[close + 1..].trim();
            line(format!(
                "\"sdy.mesh\"() <{{mesh = #sdy.mesh{mesh}, sym_name = \"{name}\"}}>{}{} : () -> (){}",
                if dict.is_empty() { "" } else { " " },
                dict,
                op.loc
            ))
        }
        ("stablehlo", _) => attributed(op, short),
        ("chlo", _) => {
            // `%x[, %y] {attrs}? : T -> R` or `: (T, U) -> R`.
            let (items, sig) = items_and_sig(op.rest)?;
            let (ops, attrs) = operands_and_attrs(&items);
            if !attrs.is_empty() {
                return Err("unexpected attributes".into());
            }
            let sig = signature(sig, ops.len(), op.n_results)?;
            line(generic(op, &ops, &[], &sig))
        }
        _ => Err("unknown op".into()),
    }
}

/// The value of attribute `key` in `attrs`.
fn attr<'a>(attrs: &[(&str, &'a str)], key: &str) -> Result<&'a str, String> {
    attrs
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .ok_or_else(|| format!("no `{key} = ...`"))
}

/// The StableHLO ops whose custom form is operands, then `key = value` attributes in short
/// spellings, then the signature (one type for all, or a function type); the elementwise ops
/// have no attributes.
fn attributed(op: &Op, short: &str) -> Result<Converted, String> {
    let (items, sig_text) = items_and_sig(op.rest)?;
    // `slice %x [0:4, 1:3:2]`: the ranges follow the operand without a comma.
    let mut items = items;
    let mut slice_ranges = None;
    if short == "slice" {
        let first = items.first().copied().ok_or("no operand")?;
        let (value, ranges) = first.split_once(' ').ok_or("no ranges `[a:b]`")?;
        items[0] = value;
        slice_ranges = Some(ranges.trim());
    }
    let (ops, attrs) = operands_and_attrs(&items);
    if items.len() != ops.len() + attrs.len() {
        return Err("unexpected items before the type signature".into());
    }
    let sig = signature(sig_text, ops.len(), op.n_results)?;
    let arr = |k: &str| -> Result<String, String> { i64_array(attr(&attrs, k)?) };
    let mut props = Vec::new();
    let allowed: &[&str] = match short {
        "broadcast_in_dim" => {
            props.push(format!("broadcast_dimensions = {}", arr("dims")?));
            &["dims"]
        }
        "dynamic_broadcast_in_dim" => {
            props.push(format!("broadcast_dimensions = {}", arr("dims")?));
            for k in [
                "known_expanding_dimensions",
                "known_nonexpanding_dimensions",
            ] {
                if let Ok(v) = attr(&attrs, k) {
                    props.push(format!("{k} = {}", i64_array(v)?));
                }
            }
            &[
                "dims",
                "known_expanding_dimensions",
                "known_nonexpanding_dimensions",
            ]
        }
        "transpose" => {
            props.push(format!("permutation = {}", arr("dims")?));
            &["dims"]
        }
        "reverse" => {
            props.push(format!("dimensions = {}", arr("dims")?));
            &["dims"]
        }
        "concatenate" => {
            props.push(format!("dimension = {} : i64", attr(&attrs, "dim")?));
            &["dim"]
        }
        "get_dimension_size" => {
            props.push(format!("dimension = {} : i64", attr(&attrs, "dim")?));
            &["dim"]
        }
        "dynamic_iota" => {
            props.push(format!("iota_dimension = {} : i64", attr(&attrs, "dim")?));
            &["dim"]
        }
        "dynamic_slice" => {
            props.push(format!("slice_sizes = {}", arr("sizes")?));
            &["sizes"]
        }
        "pad" => {
            props.push(format!("edge_padding_low = {}", arr("low")?));
            props.push(format!("edge_padding_high = {}", arr("high")?));
            props.push(format!("interior_padding = {}", arr("interior")?));
            &["low", "high", "interior"]
        }
        "reduce_precision" => {
            let f = attr(&attrs, "format")?;
            let (e, m) = f
                .strip_prefix('e')
                .and_then(|x| x.split_once('m'))
                .ok_or_else(|| format!("format `{f}` is not eXmY"))?;
            props.push(format!("exponent_bits = {e} : i32"));
            props.push(format!("mantissa_bits = {m} : i32"));
            &["format"]
        }
        "rng_bit_generator" => {
            let a = attr(&attrs, "algorithm")?;
            props.push(format!("rng_algorithm = #stablehlo<rng_algorithm {a}>"));
            &["algorithm"]
        }
        "dot_general" => {
            let mut dims = Vec::new();
            if let Ok(b) = attr(&attrs, "batching_dims") {
                let (l, r) = b
                    .split_once(" x ")
                    .ok_or("batching_dims: expected `[..] x [..]`")?;
                dims.push(format!("lhs_batching_dimensions = {}", l.trim()));
                dims.push(format!("rhs_batching_dimensions = {}", r.trim()));
            }
            let c = attr(&attrs, "contracting_dims")?;
            let (l, r) = c
                .split_once(" x ")
                .ok_or("contracting_dims: expected `[..] x [..]`")?;
            dims.push(format!("lhs_contracting_dimensions = {}", l.trim()));
            dims.push(format!("rhs_contracting_dimensions = {}", r.trim()));
            props.push(format!(
                "dot_dimension_numbers = #stablehlo.dot<{}>",
                dims.join(", ")
            ));
            if let Ok(p) = attr(&attrs, "precision") {
                let inner = p
                    .strip_prefix('[')
                    .and_then(|x| x.strip_suffix(']'))
                    .ok_or("precision: expected `[..]`")?;
                let list: Vec<String> = split_top(inner, ',')
                    .into_iter()
                    .map(|x| format!("#stablehlo<precision {}>", x.trim()))
                    .collect();
                props.push(format!("precision_config = [{}]", list.join(", ")));
            }
            if let Ok(a) = attr(&attrs, "algorithm") {
                props.push(format!("algorithm = #stablehlo.dot_algorithm{a}"));
            }
            &[
                "batching_dims",
                "contracting_dims",
                "precision",
                "algorithm",
            ]
        }
        "slice" => {
            let r = slice_ranges.ok_or("no ranges")?;
            let inner = r
                .strip_prefix('[')
                .and_then(|x| x.strip_suffix(']'))
                .ok_or("ranges: expected `[a:b, ...]`")?;
            let (mut start, mut limit, mut stride) = (Vec::new(), Vec::new(), Vec::new());
            for d in split_top(inner, ',').into_iter().map(str::trim) {
                if d.is_empty() {
                    continue;
                }
                let parts: Vec<&str> = d.split(':').map(str::trim).collect();
                match parts.as_slice() {
                    [a, b] => {
                        start.push(*a);
                        limit.push(*b);
                        stride.push("1");
                    }
                    [a, b, c] => {
                        start.push(*a);
                        limit.push(*b);
                        stride.push(*c);
                    }
                    _ => return Err(format!("bad range `{d}`")),
                }
            }
            for (k, v) in [
                ("start_indices", start),
                ("limit_indices", limit),
                ("strides", stride),
            ] {
                props.push(format!(
                    "{k} = {}",
                    i64_array(&format!("[{}]", v.join(", ")))?
                ));
            }
            &[]
        }
        _ => &[],
    };
    if let Some((k, _)) = attrs.iter().find(|(k, _)| !allowed.contains(k)) {
        return Err(format!("unexpected attribute `{k}`"));
    }
    Ok(Converted::Line(generic(op, &ops, &props, &sig)))
}

/// `stablehlo.reduce(%x init: %c)[, (%y init: %d)] (applies OP)? across dimensions = [..] :
/// SIG`: the compact form (`applies`) becomes a whole generic op with its one-op region; the
/// full form a head whose region follows on the next lines.
fn reduce(op: &Op, fresh: &mut usize) -> Result<Converted, String> {
    let rest = op.rest;
    let mut inputs = Vec::new();
    let mut inits = Vec::new();
    let mut k = 0;
    let b = rest.as_bytes();
    while k < rest.len() && b[k] == b'(' {
        let close = matching_close(rest, k).ok_or("unbalanced `(`")?;
        let (x, c) = rest[k + 1..close]
            .split_once(" init: ")
            .ok_or("expected `(%x init: %c)`")?;
        inputs.push(x.trim());
        inits.push(c.trim());
        k = close + 1;
        let t = rest[k..].trim_start();
        k = rest.len() - t.len();
        if let Some(t2) = t.strip_prefix(',') {
            k = rest.len() - t2.trim_start().len();
        }
    }
    let tail = rest[k..].trim();
    let (applies, tail) = match tail.strip_prefix("applies ") {
        Some(t) => {
            let (name, t) = t.split_once(' ').ok_or("no `across`")?;
            (Some(name), t.trim())
        }
        None => (None, tail),
    };
    let tail = tail
        .strip_prefix("across dimensions = ")
        .ok_or("no `across dimensions = [..]`")?;
    let close = matching_close(tail, 0).ok_or("unbalanced dimensions")?;
    let dims = i64_array(&tail[..=close])?;
    let sig_text = tail[close + 1..]
        .trim_start()
        .strip_prefix(':')
        .ok_or("no type signature")?;
    let sig = signature(sig_text, 2 * inputs.len(), op.n_results)?;
    let mut operands = inputs.clone();
    operands.extend(&inits);
    let head = format!(
        "{}\"stablehlo.reduce\"({}) <{{dimensions = {dims}}}> ({{",
        op.results,
        operands.join(", ")
    );
    let Some(body_op) = applies else {
        return Ok(Converted::Reduce {
            head,
            signature: sig.text(),
        });
    };
    if inputs.len() != 1 {
        return Err("`applies` with several inputs".into());
    }
    // The region: `(lhs, rhs) -> body_op(lhs, rhs)` on the init's scalar type.
    let scalar = sig.operands.get(1).ok_or("no init type")?;
    *fresh += 1;
    let n = *fresh;
    let (l, r, v) = (
        format!("%__ebb_l{n}"),
        format!("%__ebb_r{n}"),
        format!("%__ebb_v{n}"),
    );
    Ok(Converted::Line(format!(
        "{head}\n^bb0({l}: {scalar}, {r}: {scalar}):\n  {v} = \"{body_op}\"({l}, {r}) : ({scalar}, \
         {scalar}) -> {scalar}{loc}\n  \"stablehlo.return\"({v}) : ({scalar}) -> (){loc}\n}}) : {}{loc}",
        sig.text(),
        loc = op.loc
    )))
}

/// `stablehlo.convolution(%lhs, %rhs) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
/// window = {stride = [..], pad = [[l, h], ..], lhs_dilate = [..], rhs_dilate = [..],
/// reverse = [..]} {attrs} : SIG`.
fn convolution(op: &Op) -> Result<Converted, String> {
    let rest = op.rest;
    let close = matching_close(rest, 0).ok_or("no operand list")?;
    let ops: Vec<&str> = split_top(&rest[1..close], ',')
        .into_iter()
        .map(str::trim)
        .collect();
    let mut t = rest[close + 1..].trim();
    t = t
        .strip_prefix("dim_numbers = ")
        .ok_or("no `dim_numbers = `")?;
    let end = find_top(t, ", window = ")
        .or_else(|| find_top(t, " {"))
        .or_else(|| find_top(t, " : "))
        .ok_or("no end of dim_numbers")?;
    let mut props = vec![format!(
        "dimension_numbers = #stablehlo.conv<{}>",
        t[..end].trim()
    )];
    t = t[end..].trim_start_matches(',').trim();
    if let Some(w) = t.strip_prefix("window = ") {
        let close = matching_close(w, 0).ok_or("unbalanced window")?;
        // `window = {}`: every field at its default (a 1x1, stride-1, unpadded window)
        for item in split_top(&w[1..close], ',') {
            if item.trim().is_empty() {
                continue;
            }
            let (k, v) = item
                .split_once(" = ")
                .ok_or("window: expected `key = value`")?;
            let v = v.trim();
            match k.trim() {
                "stride" => props.push(format!("window_strides = {}", i64_array(v)?)),
                "lhs_dilate" => props.push(format!("lhs_dilation = {}", i64_array(v)?)),
                "rhs_dilate" => props.push(format!("rhs_dilation = {}", i64_array(v)?)),
                "pad" => {
                    let n = split_top(&v[1..v.len().saturating_sub(1)], ',').len();
                    props.push(format!("padding = dense<{v}> : tensor<{n}x2xi64>"));
                }
                "reverse" => {
                    let inner = v.trim_start_matches('[').trim_end_matches(']');
                    props.push(format!("window_reversal = array<i1: {inner}>"));
                }
                other => return Err(format!("unknown window field `{other}`")),
            }
        }
        t = w[close + 1..].trim();
    }
    if t.starts_with('{') {
        let close = matching_close(t, 0).ok_or("unbalanced attributes")?;
        props.extend(
            split_top(&t[1..close], ',')
                .into_iter()
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty()),
        );
        t = t[close + 1..].trim();
    }
    let sig_text = t.strip_prefix(':').ok_or("no type signature")?;
    let sig = signature(sig_text, ops.len(), op.n_results)?;
    Ok(Converted::Line(generic(op, &ops, &props, &sig)))
}

/// Splits `s` at the top-level occurrences of `sep` (outside brackets, angle brackets and
/// strings; the `>` of `->` closes nothing).
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    scan_top(s, |i, c| {
        if c == sep {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
        }
        false
    });
    out.push(&s[start..]);
    out
}

/// The first top-level occurrence of `pat` in `s`.
fn find_top(s: &str, pat: &str) -> Option<usize> {
    let mut found = None;
    scan_top(s, |i, _| {
        if s[i..].starts_with(pat) {
            found = Some(i);
            true
        } else {
            false
        }
    });
    found
}

/// The last top-level occurrence of `pat` in `s`.
fn rfind_top(s: &str, pat: &str) -> Option<usize> {
    let mut found = None;
    scan_top(s, |i, _| {
        if s[i..].starts_with(pat) {
            found = Some(i);
        }
        false
    });
    found
}

/// Calls `f(index, char)` for every character of `s` at nesting depth 0 (outside `()[]{}<>`
/// and strings) until it returns `true`. A nesting bracket itself is reported at the depth
/// outside it.
fn scan_top(s: &str, mut f: impl FnMut(usize, char) -> bool) {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    let mut prev = '\0';
    for (i, c) in s.char_indices() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            prev = c;
            continue;
        }
        if depth == 0 && c != '"' && f(i, c) {
            return;
        }
        match c {
            '"' => {
                if depth == 0 && f(i, c) {
                    return;
                }
                in_str = true;
            }
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '>' if prev != '-' => depth -= 1,
            _ => {}
        }
        prev = c;
    }
}

/// The index of the bracket closing the one at `open` in `s`.
fn matching_close(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    let mut prev = '\0';
    for (i, c) in s[open..].char_indices() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            prev = c;
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '>' if prev != '-' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return Some(open + i);
        }
        prev = c;
    }
    None
}

/// The index of the quote closing the string that starts `s`.
fn matching_quote(s: &str) -> Option<usize> {
    if !s.starts_with('"') {
        return None;
    }
    let mut esc = false;
    for (i, c) in s.char_indices().skip(1) {
        match (esc, c) {
            (true, _) => esc = false,
            (false, '\\') => esc = true,
            (false, '"') => return Some(i),
            _ => {}
        }
    }
    None
}
