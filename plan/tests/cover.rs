//! The finalize greedy's cover heaps (`ebb_plan::finalize::cover`) against a scan in rank order.

use ebb_plan::finalize::cover::{CoverHeaps, CoverNodes, OptionTag, Rank, ScoreKey, Scores};
use ebb_plan::format::DecisionKind;
use ebb_plan::index::{CandidateIx, OptionIx, PointIx, Window};

/// Static scores: ranks from a table, nothing refreshed.
struct Static<'a> {
    rank: &'a [Rank],
    taken: &'a [bool],
}

impl Scores for Static<'_> {
    fn dead(&mut self, i: OptionIx) -> bool {
        self.taken[i.index()]
    }
    fn rank(&mut self, i: OptionIx) -> Rank {
        self.rank[i.index()]
    }
    fn taken(&self, candidate: CandidateIx) -> bool {
        self.taken[candidate.index()]
    }
    fn refresh(&mut self, _: OptionIx, _: ScoreKey) -> Option<ScoreKey> {
        None
    }
}

/// Static scores only: the heaps answer exactly what a scan in rank order answers.
#[test]
fn best_matches_a_scan() {
    let mut next = ebb_testkit::lcg(0x9e37_79b9_7f4a_7c15);
    for _ in 0..40 {
        let points = 1 + next(70) as usize;
        let n = next(60) as usize;
        let windows: Vec<Window> = (0..n)
            .map(|_| {
                let l = next(points as u64 + 3) as usize;
                Window::new(PointIx::new(l), PointIx::new(l + next(20) as usize))
            })
            .collect();
        // Option `i` is candidate `i`'s recompute.
        let rank: Vec<Rank> = (0..n)
            .map(|i| Rank {
                score: ScoreKey::of(next(8) as f64),
                larger_first: next(3),
                tag: OptionTag::new(CandidateIx::new(i), DecisionKind::Recompute),
            })
            .collect();
        let nodes = CoverNodes::new(points, windows.iter().copied());
        let mut heaps = CoverHeaps::new(&nodes);
        let mut taken = vec![false; n];
        for _ in 0..30 {
            let p = PointIx::new(next(points as u64) as usize);
            let want = (0..n)
                .filter(|&i| !taken[i] && windows[i].contains(p))
                .min_by_key(|&i| rank[i]);
            let got = heaps.best(
                p,
                &mut Static {
                    rank: &rank,
                    taken: &taken,
                },
            );
            assert_eq!(got.map(|g| g.1.index()), want);
            if let Some(i) = want {
                taken[i] = true;
            }
        }
    }
}
