//! Snapshot tests of the fusion pass on small graphs (softmax, layer norm's statistics, GELU,
//! an AdamW update, siblings, a reduction that must not fuse): the groups, the named reasons for the
//! pairs left apart, and the IR before and after; and a check that the fused graph plans a
//! lower peak where intermediates vanish.

use ebb_passes::fuse::{FusePass, FusionReport};
use ebb_passes::manager::{Pass, PassContext};

/// Runs the fusion pass; returns the snapshot text (report, then before/after IR).
fn fused(text: &str) -> (String, ebb_ir::Graph) {
    let mut g = ebb_ir::text::parse(text).expect("test graph parses");
    ebb_ir::verify::verify(&g).expect("test graph verifies");
    let before = ebb_ir::text::print(&g);
    let mut cx = PassContext::new();
    FusePass.run(&mut g, &mut cx).expect("fusion runs");
    ebb_ir::verify::verify(&g).unwrap_or_else(|e| panic!("graph verifies after fusion: {e}"));
    let report = cx.get::<FusionReport>().expect("a report");
    (
        format!(
            "// groups\n{}// before\n{before}\n// after\n{}",
            report.to_text(),
            ebb_ir::text::print(&g)
        ),
        g,
    )
}

const SOFTMAX: &str = r#"graph @softmax {
  %x = input {index = 0, name = "x"} : f32[B,S]
  %ninf = constant {value = dense<-1.0e30> : f32} : f32[]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %max = reduce(%x, %ninf) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %m = maximum(%a, %b) : f32[]
      return %m
    }
  }
  %maxb = broadcast_in_dim(%max) {broadcast_dimensions = [0], shape = dims[B, S]} : f32[B,S]
  %sh = subtract(%x, %maxb) : f32[B,S]
  %e = exponential(%sh) : f32[B,S]
  %sum = reduce(%e, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %s = add(%a, %b) : f32[]
      return %s
    }
  }
  %sumb = broadcast_in_dim(%sum) {broadcast_dimensions = [0], shape = dims[B, S]} : f32[B,S]
  %y = divide(%e, %sumb) : f32[B,S]
  return %y
}"#;

/// Softmax: the max stays a plain `reduce` (nothing to fuse under it); `exp(x - max)`
/// is recomputed under the sum (an input fusion: `broadcast_in_dim`, `subtract`,
/// `exponential`, `reduce`) and again in the division's loop fusion, so it is never
/// materialized and only `x`, the max and the sum leave a group.
#[test]
fn softmax() {
    insta::assert_snapshot!(fused(SOFTMAX).0);
}

/// GELU (tanh form) over `[B, S, D]`: the whole chain is one group; the scalar constants stay
/// outside.
#[test]
fn gelu() {
    let text = r#"graph @gelu {
  %x = input {index = 0, name = "x"} : f32[B,S,4]
  %c0 = constant {value = dense<0.5> : f32} : f32[]
  %c1 = constant {value = dense<0.044715> : f32} : f32[]
  %c2 = constant {value = dense<0.7978846> : f32} : f32[]
  %one = constant {value = dense<1.0> : f32} : f32[]
  %h = broadcast_in_dim(%c0) {broadcast_dimensions = [], shape = dims[B, S, 4]} : f32[B,S,4]
  %a = broadcast_in_dim(%c1) {broadcast_dimensions = [], shape = dims[B, S, 4]} : f32[B,S,4]
  %k = broadcast_in_dim(%c2) {broadcast_dimensions = [], shape = dims[B, S, 4]} : f32[B,S,4]
  %o = broadcast_in_dim(%one) {broadcast_dimensions = [], shape = dims[B, S, 4]} : f32[B,S,4]
  %x2 = multiply(%x, %x) : f32[B,S,4]
  %x3 = multiply(%x2, %x) : f32[B,S,4]
  %ax3 = multiply(%a, %x3) : f32[B,S,4]
  %in = add(%x, %ax3) : f32[B,S,4]
  %kin = multiply(%k, %in) : f32[B,S,4]
  %t = tanh(%kin) : f32[B,S,4]
  %tp = add(%o, %t) : f32[B,S,4]
  %hx = multiply(%h, %x) : f32[B,S,4]
  %y = multiply(%hx, %tp) : f32[B,S,4]
  return %y
}"#;
    insta::assert_snapshot!(fused(text).0);
}

/// An AdamW update of one parameter: the moments' updates and the parameter's are one group
/// with three results (the new parameter and both moments are graph outputs).
#[test]
fn adamw_update() {
    let text = r#"graph @adamw {
  %p = input {index = 0, name = "p"} : f32[256,128]
  %g = input {index = 1, name = "g"} : f32[256,128]
  %m = input {index = 2, name = "m"} : f32[256,128]
  %v = input {index = 3, name = "v"} : f32[256,128]
  %lr = input {index = 4, name = "lr"} : f32[]
  %b1 = constant {value = dense<0.9> : f32} : f32[]
  %c1 = constant {value = dense<0.1> : f32} : f32[]
  %eps = constant {value = dense<1e-8> : f32} : f32[]
  %b1b = broadcast_in_dim(%b1) {broadcast_dimensions = [], shape = dims[256, 128]} : f32[256,128]
  %c1b = broadcast_in_dim(%c1) {broadcast_dimensions = [], shape = dims[256, 128]} : f32[256,128]
  %epsb = broadcast_in_dim(%eps) {broadcast_dimensions = [], shape = dims[256, 128]} : f32[256,128]
  %lrb = broadcast_in_dim(%lr) {broadcast_dimensions = [], shape = dims[256, 128]} : f32[256,128]
  %m1 = multiply(%b1b, %m) : f32[256,128]
  %m2 = multiply(%c1b, %g) : f32[256,128]
  %mn = add(%m1, %m2) : f32[256,128]
  %g2 = multiply(%g, %g) : f32[256,128]
  %v1 = multiply(%b1b, %v) : f32[256,128]
  %v2 = multiply(%c1b, %g2) : f32[256,128]
  %vn = add(%v1, %v2) : f32[256,128]
  %sq = sqrt(%vn) : f32[256,128]
  %den = add(%sq, %epsb) : f32[256,128]
  %u = divide(%mn, %den) : f32[256,128]
  %lu = multiply(%lrb, %u) : f32[256,128]
  %pn = subtract(%p, %lu) : f32[256,128]
  return %pn, %mn, %vn
}"#;
    let (snap, g) = fused(text);
    insta::assert_snapshot!(snap);
    // Above one chunk (2048 elements) the fused graph's program-order peak drops: the
    // update's intermediates vanish (at one chunk or less the tiles cost as much as they save:
    // aligned inputs are copied).
    let po = |g: &ebb_ir::Graph| {
        let s = ebb_passes::memory::program_order(g);
        ebb_passes::memory::liveness(g, &s)
            .peak(&ebb_ir::Bindings::new())
            .unwrap()
            .0
    };
    let before = po(&ebb_ir::text::parse(text).unwrap());
    assert!(po(&g) < before, "fused {} vs unfused {before}", po(&g));
}

/// A reduction over the outermost dimension (a column reduction, as a bias gradient) of a
/// transposed input: the transpose is not flat-aligned and stays outside, named; the reduce
/// roots a column input fusion with its elementwise producer, so `exp(t)` is never
/// materialized.
#[test]
fn a_column_reduction_roots_an_input_fusion_but_a_transpose_does_not_fuse() {
    let text = r#"graph @nofuse {
  %x = input {index = 0, name = "x"} : f32[8,4]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %t = transpose(%x) {permutation = [1, 0]} : f32[4,8]
  %e = exponential(%t) : f32[4,8]
  %s = reduce(%e, %zero) {dimensions = [0]} : f32[8] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %r = add(%a, %b) : f32[]
      return %r
    }
  }
  %n = negate(%s) : f32[8]
  return %n
}"#;
    let (snap, g) = fused(text);
    let kinds: Vec<ebb_ir::OpKind> = g.order().iter().map(|&n| g.node(n).kind()).collect();
    assert!(kinds.contains(&ebb_ir::OpKind::Transpose), "{snap}");
    assert!(!kinds.contains(&ebb_ir::OpKind::Exponential), "{snap}");
    assert!(!kinds.contains(&ebb_ir::OpKind::Reduce), "{snap}");
    insta::assert_snapshot!(snap);
}

/// A splat constant of full shape (what folding `broadcast_in_dim` of a scalar leaves, e.g.
/// AdamW's `0.9` for each parameter shape) read by two groups is copied into each, so it is
/// never materialized; a constant that is not a splat stays outside every group.
#[test]
fn splat_constants_are_copied_into_each_group() {
    let (snap, g) = fused(
        r#"graph @splat {
  %m = input {index = 0, name = "m"} : f32[4,8]
  %v = input {index = 1, name = "v"} : f32[4,8]
  %b = constant {value = dense<0.9> : f32} : f32[4,8]
  %k = constant {value = dense<"0x0000803F00000040"> : f32} : f32[2]
  %m1 = multiply(%m, %b) : f32[4,8]
  %m2 = negate(%m1) : f32[4,8]
  %v1 = multiply(%v, %b) : f32[4,8]
  %v2 = exponential(%v1) : f32[4,8]
  %k2 = negate(%k) : f32[2]
  return %m2, %v2, %k2
}"#,
    );
    insta::assert_snapshot!(snap);
    let top_constants = g
        .order()
        .iter()
        .filter(|&&n| g.node(n).kind() == ebb_ir::OpKind::Constant)
        .count();
    assert_eq!(
        top_constants, 1,
        "only the non-splat constant stays outside"
    );
}

/// GELU's residuals read by the backward: `tanh(x)` and `1 + tanh(x)` feed the forward's
/// output and, after a `dot_general`, the backward's product. Both are recomputable (every
/// reader is an aligned elementwise op, and their cone reads one full-size tensor, `x`), so
/// each group computes its own copy and neither is materialized. `e = exp(x)` is read by a
/// `reduce` and by the backward: it is recomputed under the reduce (an input fusion) and in
/// the backward's group. Negative case: `s = x + z`, read by both groups, reads two full-size
/// tensors (recomputing it would keep both alive), so it is materialized.
#[test]
fn residuals_are_recomputed_in_each_reader() {
    let (snap, g) = fused(
        r#"graph @residuals {
  %x = input {index = 0, name = "x"} : f32[B,8]
  %z = input {index = 1, name = "z"} : f32[B,8]
  %w = input {index = 2, name = "w"} : f32[8,8]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %one = constant {value = dense<1.0> : f32} : f32[B,8]
  %t = tanh(%x) : f32[B,8]
  %tp = add(%one, %t) : f32[B,8]
  %s = add(%x, %z) : f32[B,8]
  %y = multiply(%s, %tp) : f32[B,8]
  %e = exponential(%x) : f32[B,8]
  %d = dot_general(%y, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,8]
  %gt = multiply(%d, %tp) : f32[B,8]
  %gs = multiply(%d, %s) : f32[B,8]
  %ge = negate(%e) : f32[B,8]
  %es = reduce(%e, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %r = add(%a, %b) : f32[]
      return %r
    }
  }
  %o = add(%gt, %gs) : f32[B,8]
  %o2 = multiply(%o, %ge) : f32[B,8]
  return %o2, %es
}"#,
    );
    insta::assert_snapshot!(snap);
    // Outside the groups remain the dot and `s`; no `tanh`, no `exp`.
    let top: Vec<&str> = g.order().iter().map(|&n| g.node(n).kind().name()).collect();
    assert!(!top.contains(&"tanh"), "{top:?}");
    let before =
        ebb_ir::text::parse(&snap[snap.find("graph @").unwrap()..snap.find("// after").unwrap()])
            .unwrap();
    let mut recomputed: Vec<&str> = ebb_passes::fuse::duplicate::recomputable(&before)
        .into_iter()
        .map(|n| before.node(n).kind().name())
        .collect();
    recomputed.sort();
    // `tanh`, `1 + tanh`, `exp` and `-e` (whose one reader moves it anyway); not `x + z`.
    assert_eq!(recomputed, ["add", "exponential", "negate", "tanh"]);
    assert!(!top.contains(&"exponential"), "{top:?}");
}

/// Siblings: `exp(d)` and `-(d·k)` read the same `dot_general` result and are both graph
/// outputs, so their groups merge into one with two results (multi-output fusion) and `d` is
/// read once per chunk. Negative case: `-tanh(d)`, whose result the `dot_general` `k` reads
/// before the later sibling runs, stays a group of its own: the later sibling reads `k`, so a
/// path joins them and `k` cannot move after the merged op.
#[test]
fn siblings_share_one_group() {
    let (snap, g) = fused(
        r#"graph @siblings {
  %x = input {index = 0, name = "x"} : f32[B,64]
  %w = input {index = 1, name = "w"} : f32[64,64]
  %d = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,64]
  %t = tanh(%d) : f32[B,64]
  %t2 = negate(%t) : f32[B,64]
  %k = dot_general(%t2, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,64]
  %e = exponential(%d) : f32[B,64]
  %e2 = sqrt(%e) : f32[B,64]
  %m = multiply(%d, %k) : f32[B,64]
  %n = negate(%m) : f32[B,64]
  return %e2, %n, %k
}"#,
    );
    insta::assert_snapshot!(snap);
    let results: Vec<usize> = g
        .order()
        .iter()
        .filter(|&&n| g.node(n).kind() == ebb_ir::OpKind::Fusion)
        .map(|&n| g.node(n).outputs.len())
        .collect();
    assert_eq!(results, [1, 2], "{snap}");
}

/// A node copied into one group and moved into another: `jnp.take`'s `mode="fill"` index
/// clamp `w = select(x < 0, x + 16, x)`, broadcast to `[B, S, 1]`, is read by a `reduce`'s
/// input fusion (the in-bounds check, which copies the whole chain: it is cheap or
/// recomputable) and by something outside every group (the `gather`; here a graph output).
/// The broadcast then roots a group of its own that moves the chain; the reduce's group must
/// read that group's result instead of its copies (before the fix, outlining the first group
/// removed the nodes the second one copied, and the pass panicked).
#[test]
fn a_group_root_copied_into_another_group() {
    let text = r#"graph @take_fill {
  %x = input {index = 0, name = "x"} : f32[B,S]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %sixteen = constant {value = dense<16.0> : f32} : f32[]
  %zb = broadcast_in_dim(%zero) {broadcast_dimensions = [], shape = dims[B, S]} : f32[B,S]
  %sb = broadcast_in_dim(%sixteen) {broadcast_dimensions = [], shape = dims[B, S]} : f32[B,S]
  %c = compare(%x, %zb) {compare_type = "FLOAT", comparison_direction = "LT"} : i1[B,S]
  %a = add(%x, %sb) : f32[B,S]
  %w = select(%c, %a, %x) : f32[B,S]
  %wb = broadcast_in_dim(%w) {broadcast_dimensions = [0, 1], shape = dims[B, S, 1]} : f32[B,S,1]
  %n = negate(%wb) : f32[B,S,1]
  %r = reduce(%n, %zero) {dimensions = [2]} : f32[B,S] {
    region @body {
      %p = input {index = 0, name = ""} : f32[]
      %q = input {index = 1, name = ""} : f32[]
      %s = add(%p, %q) : f32[]
      return %s
    }
  }
  return %wb, %r
}"#;
    let g0 = ebb_ir::text::parse(text).expect("test graph parses");
    let p = ebb_passes::fuse::partition(&g0);
    // Disjoint but for copies, and no copy is moved by another group.
    for (i, a) in p.groups.iter().enumerate() {
        assert!(a.members.len() >= 2);
        for b in &p.groups[i + 1..] {
            for m in a.members.iter().filter(|m| b.members.contains(m)) {
                assert!(
                    a.duplicated.contains(m) && b.duplicated.contains(m),
                    "{m:?} is shared but not a copy in both groups"
                );
            }
        }
    }
    let (snap, g) = fused(text);
    let kinds: Vec<&str> = g.order().iter().map(|&n| g.node(n).kind().name()).collect();
    assert_eq!(
        kinds.iter().filter(|&&k| k == "fusion").count(),
        2,
        "{snap}"
    );
    // The chain is computed once, in the broadcast's group; the reduce's group reads it.
    assert!(!kinds.contains(&"select"), "{kinds:?}");
    assert_eq!(snap.matches("select(").count(), 2, "{snap}");
}

/// The trial RNN's forward scan body (`tests/data/rnn_forward_scan.ebb`): the residual
/// groups over the update gate `u` (the new hidden state's, `sigmoid(u)`, `1 - sigmoid(u)`,
/// `sigmoid(u)·(1 - sigmoid(u))`) and over the candidate `n` (`tanh(n)`, `1 - tanh(n)`) merge
/// into one group that computes each gate once, though every earlier group's result is
/// stacked by a `dynamic_update_slice` before the later group runs: those readers move after
/// the merged op. The reset gate's residual groups (`sigmoid(r)`, `sigmoid(r)·(1 -
/// sigmoid(r))`) merge too; the candidate's group, which also reads `sigmoid(r)`, stays apart
/// (merging it would extend the live ranges of two `[B,32]` slices of the matmul outputs
/// to delay one `[B,32]` result). The order stays topological (the graph verifies) and every stacked residual
/// still follows the group that computes it.
#[test]
fn rnn_forward_scan_residual_siblings_merge() {
    let (snap, g) = fused(include_str!("data/rnn_forward_scan.ebb"));
    insta::assert_snapshot!(snap);
    let results: Vec<usize> = g
        .order()
        .iter()
        .filter(|&&n| g.node(n).kind() == ebb_ir::OpKind::Fusion)
        .map(|&n| g.node(n).outputs.len())
        .collect();
    assert_eq!(results, [1, 2, 7], "{snap}");
}

/// The whole trial RNN step (`tests/data/rnn_step.ebb`): inside the forward loop's body,
/// whose own scope does not bound `B` and `S`, the residual groups merge as in
/// [`rnn_forward_scan_residual_siblings_merge`] (sizes are proved under the top-level scope):
/// three groups with 1, 2 and 7 results; the fused step computes the same bits as the
/// unfused one on the reference executor (moved readers and merged groups change no
/// arithmetic).
#[test]
fn rnn_step_forward_body_merges_under_the_top_level_scope() {
    let mut g = ebb_ir::text::parse(include_str!("data/rnn_step.ebb")).expect("parses");
    let unfused = crate::licm::run(&g);
    let mut cx = PassContext::new();
    FusePass.run(&mut g, &mut cx).expect("fusion runs");
    ebb_ir::verify::verify(&g).unwrap_or_else(|e| panic!("graph verifies after fusion: {e}"));
    let forward = g
        .order()
        .iter()
        .copied()
        .find(|&n| g.node(n).kind() == ebb_ir::OpKind::While)
        .expect("a loop");
    let body = &g.node(forward).regions[1];
    let results: Vec<usize> = body
        .order()
        .iter()
        .filter(|&&n| body.node(n).kind() == ebb_ir::OpKind::Fusion)
        .map(|&n| body.node(n).outputs.len())
        .collect();
    assert_eq!(results, [1, 2, 7]);
    assert!(
        crate::licm::run(&g) == unfused,
        "the fused step's bits differ"
    );
}
