//! The exact mode's graph-level part (feature `exact`): [`checkmate`], the full fixed-schedule
//! Checkmate MILP (every op recomputable), for tiny graphs only, to measure what restricting
//! decisions to the plan's candidates costs. The ILP over the candidates themselves, which the
//! runtime's greedy is measured against, is `ebb_plan::exact`; its tests, which build plans
//! with this crate's plan builder and check them with its checker, are in `tests/exact.rs`.

pub mod checkmate;
