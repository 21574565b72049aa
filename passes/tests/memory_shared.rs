//! The memory model's view built once and shared ([`GraphMemory`]) on a fused graph of
//! repeated identical layers: its liveness and lower bound equal those of [`liveness`] and
//! [`lower_bound`], which build the view afresh; the region transients, normalized once per
//! distinct expression, equal each fusion's own normalized tile bytes
//! ([`fusion_tile_bytes_in`]); and [`tile_bytes_per_element`] (a difference array over the
//! members) equals the direct count of what is live while each member runs.

use ebb_ir::op::fusion::{
    aligned_inputs, fusion_tile_bytes_in, member_last_uses, tile_bytes_per_element,
};
use ebb_ir::{Bindings, BindingsExt, Graph, OpKind, ValueRef};
use ebb_passes::fuse::FusePass;
use ebb_passes::manager::{Pass, PassContext};
use ebb_passes::memory::{liveness, lower_bound, program_order, GraphMemory, Liveness};

/// `layers` identical layers (a softmax over the last dimension, then a GELU-like loop of
/// `x`'s size, the layer's output the next one's input), fused.
fn layered(layers: usize) -> Graph {
    let mut body = String::new();
    let mut prev = "%x".to_string();
    for i in 0..layers {
        body += &format!(
            r#"  %max{i} = reduce({prev}, %ninf) {{dimensions = [1]}} : f32[B] {{
    region @body {{
      %a = input {{index = 0, name = ""}} : f32[]
      %b = input {{index = 1, name = ""}} : f32[]
      %m = maximum(%a, %b) : f32[]
      return %m
    }}
  }}
  %maxb{i} = broadcast_in_dim(%max{i}) {{broadcast_dimensions = [0], shape = dims[B, S]}} : f32[B,S]
  %sh{i} = subtract({prev}, %maxb{i}) : f32[B,S]
  %e{i} = exponential(%sh{i}) : f32[B,S]
  %sum{i} = reduce(%e{i}, %zero) {{dimensions = [1]}} : f32[B] {{
    region @body {{
      %a = input {{index = 0, name = ""}} : f32[]
      %b = input {{index = 1, name = ""}} : f32[]
      %s = add(%a, %b) : f32[]
      return %s
    }}
  }}
  %sumb{i} = broadcast_in_dim(%sum{i}) {{broadcast_dimensions = [0], shape = dims[B, S]}} : f32[B,S]
  %y{i} = divide(%e{i}, %sumb{i}) : f32[B,S]
  %t{i} = tanh(%y{i}) : f32[B,S]
  %u{i} = multiply(%t{i}, %y{i}) : f32[B,S]
  %v{i} = add(%u{i}, {prev}) : f32[B,S]
"#
        );
        prev = format!("%v{i}");
    }
    let text = format!(
        r#"graph @layers {{
  %x = input {{index = 0, name = "x"}} : f32[B,S]
  %ninf = constant {{value = dense<-1.0e30> : f32}} : f32[]
  %zero = constant {{value = dense<0.0> : f32}} : f32[]
{body}  return {prev}
}}"#
    );
    let mut g = ebb_testkit::graph(&text);
    FusePass.run(&mut g, &mut PassContext::new()).unwrap();
    ebb_ir::verify::verify(&g).unwrap();
    g
}

/// Everything a [`Liveness`] says, comparable.
fn summary(l: &Liveness) -> Vec<String> {
    let mut out: Vec<String> = l
        .ranges
        .iter()
        .map(|r| {
            format!(
                "{:?} {} {:?} {:?} {:?}",
                r.value, r.bytes, r.def, r.last_use, r.class
            )
        })
        .collect();
    out.extend(
        l.transients
            .iter()
            .map(|t| format!("{:?} {:?} {}", t.node, t.point, t.bytes)),
    );
    out.push(format!("points {}", l.points));
    out
}

fn fusions(g: &Graph) -> Vec<ebb_ir::NodeId> {
    g.order()
        .iter()
        .copied()
        .filter(|&id| g.node(id).kind() == OpKind::Fusion)
        .collect()
}

/// The shared view answers as the views built per call do, and the same when asked twice.
#[test]
fn shared_view_equals_fresh_views() {
    let g = layered(4);
    assert!(fusions(&g).len() >= 4, "the layers fuse");
    let s = program_order(&g);
    let shared = GraphMemory::new(&g);
    assert_eq!(summary(&shared.liveness(&s)), summary(&liveness(&g, &s)));
    // Asked twice, the shared view answers the same.
    assert_eq!(summary(&shared.liveness(&s)), summary(&shared.liveness(&s)));
    for (b, s_) in [(2, 3), (8, 4096), (1, 1)] {
        let b = Bindings::from_pairs(&[("B", b), ("S", s_)]);
        assert_eq!(shared.lower_bound(&b), lower_bound(&g, &b));
        assert_eq!(shared.liveness(&s).peak(&b), liveness(&g, &s).peak(&b));
    }
}

/// Each fusion's transient is its own normalized tile bytes (less in-place savings, which
/// these layers' fusions show as the layer's repeated expressions), though the view normalizes
/// each distinct expression once.
#[test]
fn memoized_transients_equal_per_fusion_ones() {
    let g = layered(4);
    let live = liveness(&g, &program_order(&g));
    let in_place = ebb_ir::op::in_place_writes(&g);
    let mut distinct = std::collections::HashSet::new();
    for t in &live.transients {
        let node = g.node(t.node);
        assert_eq!(node.kind(), OpKind::Fusion);
        let own = fusion_tile_bytes_in(&node.regions[0], &g.scope).unwrap();
        let want = match in_place.get(&t.node) {
            Some(w) => {
                let saved = ebb_ir::op::in_place_bytes(&g, t.node, w).unwrap();
                g.scope.normalize(&own.checked_sub(&saved).unwrap())
            }
            None => own,
        };
        assert_eq!(t.bytes, want, "fusion {:?}", t.node);
        distinct.insert(t.bytes.clone());
    }
    assert_eq!(live.transients.len(), fusions(&g).len());
    assert!(distinct.len() < live.transients.len(), "layers repeat");
}

/// [`tile_bytes_per_element`] against the direct count of its docs, member by member.
#[test]
fn tile_bytes_per_element_is_the_direct_count() {
    let g = layered(2);
    for id in fusions(&g) {
        let region = &g.node(id).regions[0];
        let (members, last) = member_last_uses(region);
        let aligned = aligned_inputs(region);
        let size = |v: ValueRef| region.value_type(v).dtype.size_bytes() as i64;
        let mut peak = 0;
        for k in 0..members.len() {
            let mut live = size(ValueRef::new(members[k], 0));
            for (&x, &al) in region.inputs().iter().zip(&aligned) {
                let v = ValueRef::new(x, 0);
                if al && last.get(&v).is_some_and(|&l| l >= k) {
                    live += size(v);
                }
            }
            for &m in &members[..k] {
                let v = ValueRef::new(m, 0);
                if last.get(&v).is_some_and(|&l| l >= k) {
                    live += size(v);
                }
            }
            peak = peak.max(live);
        }
        assert_eq!(tile_bytes_per_element(region), peak, "fusion {id:?}");
    }
}
