//! Progress of long work on standard error: an indicatif bar when stderr is a terminal, and
//! otherwise plain lines (`ebb bench: ebb 3/12 B=8,S=379 (25%, 41.2 s)`), which indicatif
//! would hide: a line when a phase has run for [`Progress::interval`] since the last one
//! (`EBB_PROGRESS_SECS`, default 5 s; `0`: at every tenth of the phase), and a closing line
//! for a phase that printed any.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// See the module docs.
pub struct Progress {
    who: String,
    bar: Option<ProgressBar>,
    terminal: bool,
    interval: Duration,
    phase: String,
    len: u64,
    pos: u64,
    started: Instant,
    last_line: Instant,
    lines: usize,
}

impl Progress {
    /// Progress of the command `who` (`ebb bench`), to stderr.
    pub fn new(who: &str) -> Progress {
        let secs = std::env::var("EBB_PROGRESS_SECS")
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(5.0);
        Progress {
            who: who.to_string(),
            bar: None,
            terminal: std::io::stderr().is_terminal(),
            interval: Duration::from_secs_f64(secs),
            phase: String::new(),
            len: 0,
            pos: 0,
            started: Instant::now(),
            last_line: Instant::now(),
            lines: 0,
        }
    }

    /// The time between two progress lines when stderr is not a terminal.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// A new phase of `len` steps.
    pub fn start(&mut self, phase: &str, len: u64) {
        self.finish();
        self.phase = phase.to_string();
        self.len = len;
        self.pos = 0;
        self.started = Instant::now();
        self.last_line = self.started;
        self.lines = 0;
        if self.terminal {
            let style = ProgressStyle::with_template(
                "{prefix:>4} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            self.bar = Some(
                ProgressBar::new(len)
                    .with_style(style)
                    .with_prefix(phase.to_string()),
            );
        }
    }

    /// One more step done, with a short message.
    pub fn inc(&mut self, msg: &str) {
        self.set(self.pos + 1, msg);
    }

    /// `pos` steps done, with a short message.
    pub fn set(&mut self, pos: u64, msg: &str) {
        let before = self.pos;
        self.pos = pos;
        if let Some(b) = &self.bar {
            b.set_message(msg.to_string());
            b.set_position(self.pos);
            return;
        }
        let tenth = |p: u64| if self.len == 0 { 0 } else { 10 * p / self.len };
        let due = if self.interval.is_zero() {
            tenth(self.pos) > tenth(before)
        } else {
            self.last_line.elapsed() >= self.interval
        };
        if due {
            self.line(msg);
        }
    }

    /// The phase is over (a closing line if it printed progress lines).
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        } else if self.lines > 0 {
            self.pos = self.pos.max(self.len);
            self.line("done");
        }
        self.lines = 0;
    }

    fn line(&mut self, msg: &str) {
        let pct = if self.len == 0 {
            100.0
        } else {
            100.0 * self.pos as f64 / self.len as f64
        };
        let msg = if msg.is_empty() {
            String::new()
        } else {
            format!(" {msg}")
        };
        eprintln!(
            "{}: {} {}/{}{msg} ({pct:.0}%, {:.1} s)",
            self.who,
            self.phase,
            self.pos,
            self.len,
            self.started.elapsed().as_secs_f64()
        );
        self.last_line = Instant::now();
        self.lines += 1;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
