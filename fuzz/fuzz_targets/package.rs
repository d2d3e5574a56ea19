//! The package parser and validator (`epistore_package::parse_package`) on an in-memory
//! package built from the input.
//!
//! Input: segments separated by the byte 0x1e (ASCII record separator). A segment's
//! first line is a package-relative path, the rest (after the `\n`) that file's bytes:
//!
//! ```text
//! manifest.json\n{...}\x1eoutcome.json\n{...}\x1etraces/actions.jsonl\n{...}\n{...}
//! ```
//!
//! Empty segments are skipped; a path given twice keeps the last bytes. `fuzz/seed.sh`
//! writes every package of `datasets/login-validation` in this form. Errors are
//! expected; a panic is a bug.
#![no_main]

use std::collections::BTreeMap;

use epistore_package::{parse_package, RawPackage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for segment in data.split(|&b| b == 0x1e) {
        if segment.is_empty() {
            continue;
        }
        let (path, bytes) = match segment.iter().position(|&b| b == b'\n') {
            Some(i) => (&segment[..i], &segment[i + 1..]),
            None => (segment, &[][..]),
        };
        // Paths come from a directory walk or an archive, both UTF-8 by then.
        let path = String::from_utf8_lossy(path).into_owned();
        files.insert(path, bytes.to_vec());
    }
    let raw = RawPackage::new("fuzz".to_string(), files);
    let _ = parse_package(&raw);
});
