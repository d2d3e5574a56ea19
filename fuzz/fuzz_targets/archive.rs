//! The archive reader (`epistore_package::read_source` on a `Source::Archive`): tar,
//! tar.gz and tar.zst, then the parser on every package it yields.
//!
//! Input: the archive file's bytes. The reader picks the decompressor by file name, so
//! the input is written as `in.tar.gz` when it opens with the gzip magic (1f 8b),
//! `in.tar.zst` with the zstd magic (28 b5 2f fd), `in.tar` otherwise: every input is
//! a real archive that `epistore ingest` would read the same way.
//!
//! The limits are small so that a decompression bomb is refused by the reader's own
//! bounds (the thing under test) rather than exhausting the fuzzer's memory.
#![no_main]

use epistore_package::{parse_package, read_source, Limits, Source};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits {
    max_file_bytes: 1 << 20,
    max_package_bytes: 4 << 20,
    max_package_files: 1_000,
    max_archive_bytes: 8 << 20,
    max_archive_members: 10_000,
};

fuzz_target!(|data: &[u8]| {
    let name = if data.starts_with(&[0x1f, 0x8b]) {
        "in.tar.gz"
    } else if data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        "in.tar.zst"
    } else {
        "in.tar"
    };
    let dir = epistore_fuzz::scratch("archive");
    let path = epistore_fuzz::write(dir, name, data);
    for raw in read_source(&Source::Archive(path.clone()), &LIMITS).into_iter().flatten() {
        let _ = parse_package(&raw);
    }
    let _ = std::fs::remove_file(&path);
});
