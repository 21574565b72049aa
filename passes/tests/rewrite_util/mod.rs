//! Helpers shared by the `rewrite_*` tests: parse small graphs written in textual IR, run
//! rule groups, and the `rule_test!` macro (after egg's `test_fn!`): a start graph, the
//! groups to run, the forms the rules must prove equal to output 0, and forms they must not.

#![allow(dead_code)]

pub mod eval;

use ebb_ir::text::print;
use ebb_ir::Graph;
use ebb_passes::rewrite::{explore, rewrite, Explored, Limits, RewriteReport, RuleGroup};

/// Symbols line used by the small graphs.
pub const SYMBOLS: &str = "symbols B in [1, 64], S in [1, 4096]";

/// Parses a graph body (the lines between `graph @main {` and `}`), adding [`SYMBOLS`], and
/// verifies it.
pub fn graph(body: &str) -> Graph {
    ebb_testkit::graph(&format!("graph @main {{\n  {SYMBOLS}\n{body}\n}}\n"))
}

/// Saturates `g` with `groups` under the default limits.
pub fn saturate(g: &Graph, groups: &[RuleGroup]) -> Explored {
    explore(g, groups, &Limits::default()).unwrap_or_else(|e| panic!("explore: {e}"))
}

/// Rewrites `g` with `groups`; returns the printed result and the report.
pub fn run(g: &Graph, groups: &[RuleGroup]) -> (Graph, RewriteReport) {
    rewrite(g, groups, &Limits::default()).unwrap_or_else(|e| panic!("rewrite: {e}"))
}

/// The before/after text of a snapshot: the input, a separator naming the groups, the
/// result and the bytes the cost model saw.
pub fn before_after(g: &Graph, groups: &[RuleGroup]) -> String {
    let (out, rep) = run(g, groups);
    let names: Vec<&str> = groups.iter().map(|g| g.name()).collect();
    format!(
        "{}// ---- after {} (bytes {:?} -> {:?}) ----\n{}",
        print(g),
        names.join(", "),
        rep.bytes_before,
        rep.bytes_after,
        print(&out)
    )
}

/// `rule_test!(name, groups, "ir body" => "goal", ...; not "form", ...)`: the rules must
/// prove every goal pattern equal to output 0 and none of the `not` patterns.
#[macro_export]
macro_rules! rule_test {
    ($(#[$meta:meta])* $name:ident, $groups:expr, $body:expr => $($goal:literal),* $(; not $($neg:literal),+)? $(,)?) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            let g = rewrite_util::graph($body);
            let x = rewrite_util::saturate(&g, &$groups);
            $(
                assert!(x.output_matches(0, $goal).unwrap(), "expected `{}` to be proven; applied {:?}", $goal, x.applied);
            )*
            $($(
                assert!(!x.output_matches(0, $neg).unwrap(), "`{}` must not be proven; applied {:?}", $neg, x.applied);
            )+)?
        }
    };
}
