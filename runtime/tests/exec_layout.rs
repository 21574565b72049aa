//! Strided views (`ebb_runtime::exec::layout`): transposes, reverses, broadcasts, assignment.

use ebb_runtime::exec::layout::{assign_view, gather_view, istrides_of};

#[test]
fn transpose_view() {
    // [[0,1,2],[3,4,5]] transposed
    let src: Vec<i32> = (0..6).collect();
    let t = gather_view(&src, 0, &[1, 3], &[3, 2]).unwrap();
    assert_eq!(t, vec![0, 3, 1, 4, 2, 5]);
}

#[test]
fn reverse_and_broadcast_views() {
    let src: Vec<i32> = (0..4).collect();
    assert_eq!(gather_view(&src, 3, &[-1], &[4]).unwrap(), vec![3, 2, 1, 0]);
    assert_eq!(
        gather_view(&src, 0, &[0, 1], &[2, 4]).unwrap(),
        vec![0, 1, 2, 3, 0, 1, 2, 3]
    );
    assert!(gather_view(&src, 1, &[1], &[4]).is_err());
}

#[test]
fn large_views_match_small_ones() {
    let src: Vec<u32> = (0..(300 * 257)).collect();
    let big = gather_view(&src, 0, &[1, 300], &[300, 257]).unwrap();
    for i in 0..300 {
        for j in 0..257 {
            assert_eq!(big[i * 257 + j], src[j * 300 + i]);
        }
    }
}

/// Transposes of every pair of dimensions of rank-3 views, at sizes around the tile
/// (and the parallel split), against a naive gather.
#[test]
fn tiled_transposes_match_a_naive_gather() {
    for shape in [[3usize, 17, 33], [2, 40, 16], [1, 300, 129], [5, 1, 70]] {
        let src: Vec<u32> = (0..shape.iter().product::<usize>() as u32).collect();
        let st = istrides_of(&shape);
        for perm in [[0, 2, 1], [2, 1, 0], [1, 0, 2], [2, 0, 1], [1, 2, 0]] {
            let pst: Vec<isize> = perm.iter().map(|&d| st[d]).collect();
            let psh: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
            let got = gather_view(&src, 0, &pst, &psh).unwrap();
            let mut k = 0;
            for a in 0..psh[0] {
                for b in 0..psh[1] {
                    for c in 0..psh[2] {
                        let o = a as isize * pst[0] + b as isize * pst[1] + c as isize * pst[2];
                        assert_eq!(got[k], src[o as usize], "{shape:?} {perm:?} at {k}");
                        k += 1;
                    }
                }
            }
        }
    }
}

#[test]
fn assign_into_strided_destination() {
    let mut dst = vec![0i32; 12];
    assign_view(
        &mut dst,
        1,
        &[4, 1],
        &[7, 8, 9, 10, 11, 12],
        0,
        &[3, 1],
        &[2, 3],
    )
    .unwrap();
    assert_eq!(dst, vec![0, 7, 8, 9, 0, 10, 11, 12, 0, 0, 0, 0]);
}
