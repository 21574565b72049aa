//! ebb-plan's integration tests: one binary, a module per area.

mod arena;
mod atlas;
mod atlas_relative;
mod cover;
mod csr;
mod device;
mod format;
mod replay;
mod segtree;
