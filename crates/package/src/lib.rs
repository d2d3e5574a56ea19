//! Episode packages, format `episode-package/1`: finding them on disk and in archives,
//! validating them against the contract, hashing them, and deriving the state the
//! store computes (observed revisions, freshness, evidence posture).
//!
//! This crate knows nothing about storage or SQL. It turns bytes into a validated
//! [`Episode`] or into a [`Problem`] that names the package, file, line and field.
//!
//! The contract is `docs/format.md` (the contract `episode-package-v1` in the project's
//! own words).

mod budget;
mod builder;
mod derive;
mod error;
mod fields;
mod location;
mod model;
mod parse;
mod source;

pub use budget::{MemoryBudget, Reservation};
pub use builder::{sorted, BuiltPackage, JsonStyle, Layout, PackageBuilder};
pub use derive::{derive_state, Posture};
pub use error::{Error, Problem, Result};
pub use location::Location;
pub use model::*;
pub use parse::{json_from_slice, json_from_str, output_text, parse_json_text, parse_package, OUTPUT_TEXT_CAP};
pub use parse::{MANIFEST_FILE, MAX_JSON_DEPTH, OUTCOME_FILE};
pub use source::{discover, read_source, read_source_within, Limits, PackageFile, RawPackage, Source};

/// Package format revision 1.
pub const FORMAT_V1: &str = "episode-package/1";
/// Revision 1.1 (docs/format.md §8): revision 1 plus a verification `result` of
/// `unknown`, a `null` outcome `label` and a manifest `provenance` object.
pub const FORMAT_V1_1: &str = "episode-package/1.1";
/// Revision 1.2 (docs/format.md §9): revision 1.1 plus the run's content: a messages
/// trace, a diff per edit, `task.prompt` and `final_message`.
pub const FORMAT_V1_2: &str = "episode-package/1.2";
/// Every package format this build reads.
pub const FORMATS: &[&str] = &[FORMAT_V1, FORMAT_V1_1, FORMAT_V1_2];

/// A package format revision. Later revisions allow everything earlier ones do, so
/// "allowed from revision R" is `revision >= R`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Revision {
    V1,
    V1_1,
    V1_2,
}

impl Revision {
    /// The revision a `format` string declares, `None` for one this build does not read.
    pub fn of(format: &str) -> Option<Revision> {
        match format {
            FORMAT_V1 => Some(Revision::V1),
            FORMAT_V1_1 => Some(Revision::V1_1),
            FORMAT_V1_2 => Some(Revision::V1_2),
            _ => None,
        }
    }
    /// The `format` string that declares it.
    pub fn format(self) -> &'static str {
        match self {
            Revision::V1 => FORMAT_V1,
            Revision::V1_1 => FORMAT_V1_1,
            Revision::V1_2 => FORMAT_V1_2,
        }
    }
}

/// A 32-byte blake3 hash.
pub type Hash = [u8; 32];

/// The episode id of a package (docs/format.md §6.4): blake3 over, for every file in bytewise path
/// order, the path bytes, a 0x00 byte and the 32-byte blake3 of the file's bytes.
///
/// `files` must already be sorted by path bytes (as [`RawPackage`] keeps them).
pub fn episode_id<'a>(files: impl IntoIterator<Item = (&'a str, &'a Hash)>) -> Hash {
    let mut hasher = blake3::Hasher::new();
    for (path, hash) in files {
        hasher.update(path.as_bytes());
        hasher.update(&[0u8]);
        hasher.update(hash);
    }
    *hasher.finalize().as_bytes()
}

/// Lowercase hex of a hash, the form ids take everywhere outside the store.
pub fn hex(hash: &Hash) -> String {
    blake3::Hash::from_bytes(*hash).to_hex().to_string()
}

/// Parses a 64-character hex id (case-insensitive).
pub fn parse_hex(text: &str) -> Option<Hash> {
    blake3::Hash::from_hex(text.trim()).ok().map(|h| *h.as_bytes())
}
