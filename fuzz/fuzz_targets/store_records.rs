//! The store's record decoders on arbitrary bytes: `epistore_store::decode_record_bytes`
//! (an episode record: bincode) and `epistore_store::decode_traces` (the per-episode
//! trace record: a tag byte, raw or zstd, then bincode).
//!
//! Seeds: run the target with `EPISTORE_FUZZ_SEED_DIR=<dir>` set (`fuzz/seed.sh` does)
//! and, instead of fuzzing, it ingests `datasets/login-validation` into a scratch store
//! and writes every episode's record bytes and trace bytes (as stored, and with the
//! zstd ones also written uncompressed under the raw tag) into `<dir>`, then exits.
#![no_main]

use std::path::{Path, PathBuf};

use epistore_store::{decode_record_bytes, decode_traces, IngestOptions, Store};
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        if let Some(out) = std::env::var_os("EPISTORE_FUZZ_SEED_DIR") {
            write_seeds(Path::new(&out));
            std::process::exit(0);
        }
    },
    |data: &[u8]| {
        let _ = decode_record_bytes(data);
        let _ = decode_traces(data);
    }
);

fn write_seeds(out: &Path) {
    let packages = std::env::var_os("EPISTORE_FUZZ_SEED_PACKAGES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/login-validation"));
    let scratch = epistore_fuzz::scratch("store_records");
    let store_dir = scratch.join("store");
    let store = Store::open_or_create(&store_dir).expect("cannot create the seed store");
    let sources = epistore_package::discover(&[packages]).expect("cannot find the seed packages");
    let report = store.ingest(&sources, &IngestOptions::default(), |_| {}).expect("cannot ingest the seed packages");
    assert!(report.added() > 0, "no seed package was added: {report:?}");
    std::fs::create_dir_all(out).expect("cannot create the seed directory");
    let snapshot = store.snapshot().expect("cannot read the seed store");
    let mut written = 0;
    for record in snapshot.episodes().expect("cannot list the seed episodes") {
        let id = epistore_package::hex(&record.id);
        let short = &id[..12];
        let bytes = snapshot.record_bytes(&record.id).unwrap().expect("record bytes");
        std::fs::write(out.join(format!("record-{short}")), &bytes).unwrap();
        let traces = snapshot.traces_bytes(&record.id).unwrap().expect("trace bytes");
        std::fs::write(out.join(format!("traces-{short}")), &traces).unwrap();
        written += 2;
        if traces.first() == Some(&1) {
            // The zstd-compressed form hides the bincode from the mutator: also seed the
            // same record under the raw tag (0).
            let mut raw = vec![0u8];
            raw.extend(zstd::stream::decode_all(&traces[1..]).expect("stored traces decompress"));
            std::fs::write(out.join(format!("traces-raw-{short}")), &raw).unwrap();
            written += 1;
        }
    }
    drop(snapshot);
    drop(store);
    let _ = std::fs::remove_dir_all(scratch);
    eprintln!("store_records: wrote {written} seeds to {}", out.display());
}
