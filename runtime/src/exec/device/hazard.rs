//! The hazard checker: a command sequence ([`Cmd`]) is race-free when every two commands on
//! different streams that touch a common byte, one of them writing it, are ordered by the
//! events between the streams; and no value is brought onto bytes another value still holds.
//!
//! Happens-before is tracked with vector clocks (Lamport; Fidge/Mattern): each stream's clock
//! counts its commands; recording an event stores the recording stream's vector, waiting for
//! it joins that vector into the waiting stream's. Command `a` (stream `s`, count `c`)
//! happens before a later command `b` iff `b`'s vector has at least `c` for `s`, as CUDA's
//! stream and event semantics order them (a wait covers the work issued before the last
//! record at the time of the wait). The check runs over the issue order alone, so it finds a
//! missing event whether or not the device's timing would have exposed it.
//!
//! What it reports, by the kinds of the two accesses: a kernel reading or writing bytes a
//! pending copy writes (a reload not waited for), a copy reading bytes a kernel still writes
//! (an offload before its value is complete), a kernel writing bytes a pending offload still
//! reads, a reload writing bytes a kernel still reads; and, through the
//! [`super::tracker::Tracker`], a reload or result landing on bytes still live.

use super::program::{Cmd, Label};
use super::tracker::Tracker;
use super::{Access, DevRange, Stream, STREAMS};

/// A race or a write onto live bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("hazard: {0}")]
pub struct Hazard(pub String);

/// What the checker saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HazardStats {
    /// Commands on each stream.
    pub commands: [u64; STREAMS],
    /// Events recorded.
    pub records: u64,
    /// Waits.
    pub waits: u64,
    /// Pairs of accesses on different streams compared.
    pub pairs_checked: u64,
}

struct Past {
    stream: Stream,
    clock: u64,
    write: bool,
    range: DevRange,
    label: String,
}

type Clock = [u64; STREAMS];

/// Checks `cmds` (see the module docs).
///
/// # Errors
/// [`Hazard`] naming the two commands and the bytes.
pub fn check(cmds: &[Cmd]) -> Result<HazardStats, Hazard> {
    let mut vc: [Clock; STREAMS] = [[0; STREAMS]; STREAMS];
    let mut events: Vec<Option<Clock>> = Vec::new();
    let mut past: Vec<Past> = Vec::new();
    let mut stats = HazardStats::default();
    let mut tracker = Tracker::default();
    for cmd in cmds {
        match cmd {
            Cmd::Point(p) => tracker.point(*p),
            Cmd::Claim { range, value } => tracker.claim(*range, *value).map_err(Hazard)?,
            Cmd::Release { range } => tracker.release(*range),
            Cmd::Charge(_) => {}
            Cmd::Record { stream, event } => {
                let e = *event as usize;
                if events.len() <= e {
                    events.resize(e + 1, None);
                }
                events[e] = Some(vc[*stream]);
                stats.records += 1;
            }
            Cmd::Wait { stream, event } => {
                let Some(Some(v)) = events.get(*event as usize) else {
                    return Err(Hazard(format!("a wait for event {event}, never recorded")));
                };
                for s in 0..STREAMS {
                    vc[*stream][s] = vc[*stream][s].max(v[s]);
                }
                stats.waits += 1;
            }
            _ => {
                let Some((stream, access, label)) = cmd.device_work() else {
                    continue;
                };
                vc[stream][stream] += 1;
                stats.commands[stream] += 1;
                let now = vc[stream];
                let mine = |p: &Past| p.stream == stream || now[p.stream] >= p.clock;
                for (write, ranges) in [(false, &access.reads), (true, &access.writes)] {
                    for r in ranges.iter().filter(|r| r.bytes > 0) {
                        for p in past.iter().filter(|p| !mine(p)) {
                            stats.pairs_checked += 1;
                            if (write || p.write) && p.range.overlaps(r) {
                                return Err(Hazard(describe(p, write, r, &label)));
                            }
                        }
                    }
                }
                record(&mut past, stream, now[stream], access, &label);
                // Forget, now and then, what every other stream is ordered after.
                if stats.commands.iter().sum::<u64>() % 64 == 0 {
                    past.retain(|p| {
                        (0..STREAMS).any(|s| s != p.stream && vc[s][p.stream] < p.clock)
                    });
                }
            }
        }
    }
    Ok(stats)
}

fn record(past: &mut Vec<Past>, stream: Stream, clock: u64, a: &Access, label: &str) {
    for (write, ranges) in [(false, &a.reads), (true, &a.writes)] {
        for r in ranges.iter().filter(|r| r.bytes > 0) {
            past.push(Past {
                stream,
                clock,
                write,
                range: *r,
                label: label.to_string(),
            });
        }
    }
}

fn describe(p: &Past, write: bool, r: &DevRange, label: &str) -> String {
    let verb = |w: bool| if w { "writes" } else { "reads" };
    let (lo, hi) = (
        r.ptr.offset.max(p.range.ptr.offset),
        (r.ptr.offset + r.bytes).min(p.range.ptr.offset + p.range.bytes),
    );
    format!(
        "{label} {} bytes [{lo}, {hi}) of the {:?} that {} (stream {}) {} and is not ordered before it \
         by an event",
        verb(write),
        r.ptr.space,
        p.label,
        p.stream,
        verb(p.write)
    )
}

impl Cmd {
    /// The stream, access and label of a command that runs on a stream.
    pub(crate) fn device_work(&self) -> Option<(Stream, &Access, String)> {
        match self {
            Cmd::Work {
                stream,
                access,
                label,
                ..
            } => Some((*stream, access, label.to_string())),
            Cmd::Host { access, label, .. } => Some((super::COMPUTE, access, label.to_string())),
            Cmd::Input { access, label, .. } => Some((super::COMPUTE, access, label.to_string())),
            _ => None,
        }
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at point {}", self.what, self.point)
    }
}
