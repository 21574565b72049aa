//! The `ebb` command-line tool's library half: its flags ([`flags`], clap), the bench harness
//! ([`bench`]: sweeps over shapes, the XLA comparison, SVG plots), `ebb pack` ([`pack`]) and
//! the import summary ([`report`]). The importers are `ebb_import`, the pipeline and what the
//! CLI shares with Python and C are `ebb_pipeline`.

pub mod bench;
pub mod flags;
pub mod pack;
pub mod progress;
pub mod report;
pub mod units;
