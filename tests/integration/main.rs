//! The one integration-test binary: drives the `epistore` executable and the library
//! crates end to end. Each module is one area of behaviour.

mod util;

mod annotations;
mod cli;
mod collect;
mod columnar;
mod concurrency;
mod content;
mod crash;
mod damage;
mod dataset;
mod disk_full;
mod export;
mod import;
mod ingest;
mod leaderboard;
mod mcp;
mod memory;
mod migrate;
mod observer;
mod properties;
mod pushdown;
mod python;
mod rejections;
mod scale_out;
mod secrets;
mod slt;
mod sql_limits;
mod viewer;
mod watch;
