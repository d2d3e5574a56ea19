//! `verify` must find damage, not only pass on intact stores: each test damages one
//! table of a store holding the bundled dataset, through redb directly, and checks that
//! `verify` names the problem (and that reads refuse what they cannot trust).

use epistore_package::{read_source, Source};
use redb::{ReadableTable, TableDefinition};

use crate::tables::{
    BLOB_DATA, CELLS, CHECKSUMS, DICTIONARIES, DICTIONARY_COPIES, EPISODE_DATA, EPISODE_INDEX, FILE_DATA, INGEST_LOG,
    TRACE_DATA,
};
use crate::{IngestOptions, Store};

fn dataset_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/login-validation")
}

fn store_of(sources: &[Source], options: &IngestOptions) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(dir.path().join("store")).unwrap();
    let report =
        store.ingest_from(sources, |s, _| read_source(s, &options.limits), options, |_| {}, |_, _| Ok(())).unwrap();
    assert_eq!(report.added(), sources.len());
    (dir, store)
}

pub(crate) fn dataset_store() -> (tempfile::TempDir, Store) {
    let sources: Vec<Source> = ["H0", "H1", "H2", "H3"].iter().map(|l| Source::Dir(dataset_root().join(l))).collect();
    store_of(&sources, &IngestOptions::default())
}

/// The dataset's H0 and H1 with the same 4 KiB artifact each: one shared blob.
fn store_with_shared_file() -> (tempfile::TempDir, tempfile::TempDir, Store) {
    let packages = tempfile::tempdir().unwrap();
    let mut sources = Vec::new();
    for level in ["H0", "H1"] {
        let to = packages.path().join(level);
        copy_dir(&dataset_root().join(level), &to);
        std::fs::create_dir_all(to.join("artifacts")).unwrap();
        std::fs::write(to.join("artifacts/build.log"), "compiling login-app\n".repeat(200)).unwrap();
        sources.push(Source::Dir(to));
    }
    let (dir, store) = store_of(&sources, &IngestOptions::default());
    assert_eq!(store.snapshot().unwrap().blob_count().unwrap(), 1);
    (packages, dir, store)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs `damage` in one committed write transaction.
fn damage(store: &Store, damage: impl FnOnce(&redb::WriteTransaction)) {
    let txn = store.writer().unwrap().begin_write().unwrap();
    damage(&txn);
    txn.commit().unwrap();
}

fn problems(store: &Store) -> Vec<String> {
    store.snapshot().unwrap().verify().unwrap().problems
}

fn first_number(txn: &redb::WriteTransaction, def: TableDefinition<u64, &[u8]>) -> u64 {
    txn.open_table(def).unwrap().first().unwrap().unwrap().0.value()
}

#[test]
fn an_intact_store_verifies_clean() {
    let (_dir, store) = dataset_store();
    let report = store.snapshot().unwrap().verify().unwrap();
    assert_eq!(report.problems, Vec::<String>::new());
    assert_eq!((report.episodes, report.cells, report.batches), (4, 4, 1));
    assert_eq!(report.blobs, store.snapshot().unwrap().blob_count().unwrap());
}

#[test]
fn a_blob_whose_bytes_changed_is_found() {
    let (_packages, _dir, store) = store_with_shared_file();
    damage(&store, |txn| {
        let number = first_number(txn, BLOB_DATA);
        let mut blobs = txn.open_table(BLOB_DATA).unwrap();
        // Tag 0 (raw) and bytes that hash to something else.
        blobs.insert(number, [0u8, b'x', b'y'].as_slice()).unwrap();
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("does not hash to its key")), "{found:?}");
}

#[test]
fn a_missing_trace_record_is_found() {
    let (_dir, store) = dataset_store();
    damage(&store, |txn| {
        let number = first_number(txn, TRACE_DATA);
        txn.open_table(TRACE_DATA).unwrap().remove(number).unwrap();
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("no trace record")), "{found:?}");
}

#[test]
fn an_index_entry_pointing_elsewhere_is_found_and_reads_refuse_it() {
    let (_dir, store) = dataset_store();
    let mut ids = Vec::new();
    damage(&store, |txn| {
        let mut index = txn.open_table(EPISODE_INDEX).unwrap();
        let entries: Vec<([u8; 32], u64)> =
            index.iter().unwrap().map(|e| e.unwrap()).map(|(k, v)| (k.value(), v.value())).collect();
        // The first two ids swap numbers: each now points at the other's records.
        let ((a, na), (b, nb)) = (entries[0], entries[1]);
        index.insert(a, nb).unwrap();
        index.insert(b, na).unwrap();
        ids.push(a);
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("record names id")), "{found:?}");
    assert!(found.iter().any(|p| p.contains("which the index does not put there")), "{found:?}");
    let snapshot = store.snapshot().unwrap();
    let err = snapshot.traces_bytes(&ids[0]).unwrap_err();
    assert!(err.to_string().contains("belongs to"), "{err}");
    let err = snapshot.episode(&ids[0]).unwrap_err();
    assert!(err.to_string().contains("at the record of"), "{err}");
}

#[test]
fn an_index_entry_pointing_at_nothing_is_found() {
    let (_dir, store) = dataset_store();
    damage(&store, |txn| {
        let mut index = txn.open_table(EPISODE_INDEX).unwrap();
        let id = index.first().unwrap().unwrap().0.value();
        index.insert(id, 1_000_000).unwrap();
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("which holds no record")), "{found:?}");
    assert!(found.iter().any(|p| p.contains("is in no index entry")), "{found:?}");
}

#[test]
fn a_gap_in_the_ingest_log_is_found() {
    let (_dir, store) = dataset_store();
    damage(&store, |txn| {
        let mut log = txn.open_table(INGEST_LOG).unwrap();
        let first = log.get(1).unwrap().unwrap().value().to_vec();
        // Entry 1 again under key 3: entry 2 is missing.
        log.insert(3, first.as_slice()).unwrap();
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("ingest batch 3 where 2 was due")), "{found:?}");
}

/// The first episode's number and plain (unpacked) record, with its label's byte offset.
fn first_label(txn: &redb::WriteTransaction) -> (u64, Vec<u8>, usize, String) {
    let number = first_number(txn, EPISODE_DATA);
    let packed = txn.open_table(EPISODE_DATA).unwrap().get(number).unwrap().unwrap().value().to_vec();
    let value = crate::Decoder::without_dictionaries().plain(&packed).unwrap();
    let label = crate::codec::decode::<crate::EpisodeRecord>(&value)
        .unwrap()
        .outcome
        .label
        .expect("the dataset labels its episodes");
    let at = value.windows(label.len()).position(|w| w == label.as_bytes()).expect("the label is in the record");
    (number, value, at, label)
}

#[test]
fn a_flipped_byte_in_a_record_is_refused_by_reads_found_by_verify_and_repaired() {
    let (_dir, store) = dataset_store();
    let mut original = String::new();
    damage(&store, |txn| {
        let (number, mut value, at, label) = first_label(txn);
        original = label;
        value[at + 2] ^= 0x08; // "failed" -> "fanled": still valid UTF-8, still decodes
        let packed = crate::codec::encode_blob(&value);
        txn.open_table(EPISODE_DATA).unwrap().insert(number, packed.as_slice()).unwrap();
    });
    let snapshot = store.snapshot().unwrap();
    let err = snapshot.episodes().unwrap_err();
    assert!(err.to_string().contains("do not match their checksum"), "{err}");
    let report = snapshot.verify().unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("record: the stored bytes do not match")),
        "{:?}",
        report.problems
    );
    assert!(report.problems.iter().any(|p| p.contains("record's outcome differs")), "{:?}", report.problems);
    assert_eq!(report.repairable.len(), 1);
    drop(snapshot);

    let repair = store.repair().unwrap();
    assert_eq!((repair.repaired.len(), repair.remaining.clone()), (1, Vec::<String>::new()));
    let labels: Vec<String> =
        store.snapshot().unwrap().episodes().unwrap().into_iter().filter_map(|r| r.outcome.label).collect();
    assert!(labels.contains(&original), "{labels:?}");
}

#[test]
fn a_record_rewritten_with_a_matching_checksum_is_still_found_by_derivation() {
    // Damage that a checksum cannot see (the sum rewritten too): only deriving the
    // record again from the episode's files finds it.
    let (_dir, store) = dataset_store();
    damage(&store, |txn| {
        let (number, value, _, _) = first_label(txn);
        let mut record = crate::codec::decode::<crate::EpisodeRecord>(&value).unwrap();
        record.outcome.label = Some("not-a-label".into());
        let bytes = crate::codec::encode_blob(&crate::codec::encode(&record));
        txn.open_table(EPISODE_DATA).unwrap().insert(number, bytes.as_slice()).unwrap();
        let sum = crate::tables::checksum(&bytes);
        txn.open_table(CHECKSUMS).unwrap().insert((crate::tables::SUM_RECORD, number), sum).unwrap();
    });
    let report = store.snapshot().unwrap().verify().unwrap();
    assert!(report.problems.iter().any(|p| p.contains("record's outcome differs")), "{:?}", report.problems);
    assert_eq!(report.rederived, 4);
    store.repair().unwrap();
    assert_eq!(problems(&store), Vec::<String>::new());
}

#[test]
fn a_damaged_manifest_field_moves_the_cell_and_repair_moves_it_back() {
    let (_dir, store) = dataset_store();
    let cells_before = store.snapshot().unwrap().cells().unwrap();
    damage(&store, |txn| {
        let (number, value, _, _) = first_label(txn);
        let mut record = crate::codec::decode::<crate::EpisodeRecord>(&value).unwrap();
        let old = (record.manifest.model.clone(), record.manifest.harness_level.clone(), record.manifest.task.clone());
        record.manifest.model = "fake-model".into();
        let bytes = crate::codec::encode_blob(&crate::codec::encode(&record));
        txn.open_table(EPISODE_DATA).unwrap().insert(number, bytes.as_slice()).unwrap();
        let mut cells = txn.open_table(CELLS).unwrap();
        cells.remove((old.0.as_str(), old.1.as_str(), old.2.as_str(), record.id)).unwrap();
        cells.insert(("fake-model", old.1.as_str(), old.2.as_str(), record.id), number).unwrap();
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("record's manifest differs")), "{found:?}");
    assert!(found.iter().any(|p| p.contains("fake-model")), "{found:?}");
    let repair = store.repair().unwrap();
    assert_eq!(repair.remaining, Vec::<String>::new());
    assert_eq!(store.snapshot().unwrap().cells().unwrap(), cells_before);
}

#[test]
fn a_store_without_checksums_gets_them_on_its_next_writable_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_keep, store) = dataset_store();
        let src = store.dir().to_path_buf();
        damage(&store, |txn| {
            txn.delete_table(CHECKSUMS).unwrap();
        });
        drop(store);
        std::fs::copy(src.join(crate::DB_FILE), dir.path().join(crate::DB_FILE)).unwrap();
    }
    // Read-only, a store without the table reads unchecked.
    let reader = Store::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.snapshot().unwrap().episodes().unwrap().len(), 4);
    drop(reader);
    let store = Store::open_or_create(dir.path()).unwrap();
    let txn = redb::ReadableDatabase::begin_read(store.writer().unwrap()).unwrap();
    let sums = txn.open_table(CHECKSUMS).unwrap();
    // 4 records, 4 trace records, 4 file records, 1 ingest batch.
    assert_eq!(redb::ReadableTableMetadata::len(&sums).unwrap(), 13);
    drop((sums, txn));
    assert_eq!(problems(&store), Vec::<String>::new());
}

#[test]
fn a_flipped_byte_in_a_file_record_is_refused_by_reads_and_found_by_verify() {
    let (_dir, store) = dataset_store();
    damage(&store, |txn| {
        let number = first_number(txn, FILE_DATA);
        let mut files = txn.open_table(FILE_DATA).unwrap();
        let mut value = files.get(number).unwrap().unwrap().value().to_vec();
        let last = value.len() - 1;
        value[last] ^= 0x01;
        files.insert(number, value.as_slice()).unwrap();
    });
    let snapshot = store.snapshot().unwrap();
    let first = snapshot.episodes().unwrap().into_iter().next().unwrap();
    let err = snapshot.files(&first).unwrap_err();
    assert!(err.to_string().contains("do not match their checksum"), "{err}");
    let report = snapshot.verify().unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("file record") && p.contains("checksum")),
        "{:?}",
        report.problems
    );
    assert!(report.problems.iter().any(|p| p.contains("no intact file record")), "{:?}", report.problems);
    // Ingested bytes are not derived: nothing can repair them.
    assert!(!report.repairable.contains(&first.id), "{:?}", report.repairable);
}

#[test]
fn a_file_record_rewritten_with_a_matching_checksum_is_found_by_the_file_hashes() {
    let (_dir, store) = dataset_store();
    damage(&store, |txn| {
        let number = first_number(txn, FILE_DATA);
        let mut files = txn.open_table(FILE_DATA).unwrap();
        let mut plain =
            crate::Decoder::without_dictionaries().plain(files.get(number).unwrap().unwrap().value()).unwrap();
        plain[0] ^= 0x20; // `{` of manifest.json becomes `[`
        let value = crate::codec::encode_blob(&plain);
        files.insert(number, value.as_slice()).unwrap();
        let sum = crate::tables::checksum(&value);
        txn.open_table(CHECKSUMS).unwrap().insert((crate::tables::SUM_FILES, number), sum).unwrap();
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("does not hash to its listing")), "{found:?}");
}

#[test]
fn a_missing_file_record_is_found() {
    let (_dir, store) = dataset_store();
    damage(&store, |txn| {
        let number = first_number(txn, FILE_DATA);
        txn.open_table(FILE_DATA).unwrap().remove(number).unwrap();
    });
    let found = problems(&store);
    assert!(found.iter().any(|p| p.contains("no intact file record")), "{found:?}");
}

/// The dataset, with a dictionary trained after the first few values.
fn store_with_dictionary() -> (tempfile::TempDir, Store) {
    let sources: Vec<Source> = ["H0", "H1", "H2", "H3"].iter().map(|l| Source::Dir(dataset_root().join(l))).collect();
    let options = IngestOptions { dictionary_samples: 8, chunk_sources: 1, ..IngestOptions::default() };
    let (dir, store) = store_of(&sources, &options);
    (dir, store)
}

#[test]
fn values_packed_with_a_trained_dictionary_read_back_and_verify() {
    let (_dir, store) = store_with_dictionary();
    let snapshot = store.snapshot().unwrap();
    let txn = &snapshot.txn;
    let dictionaries = redb::ReadableTableMetadata::len(&txn.open_table(DICTIONARIES).unwrap()).unwrap();
    assert_eq!(dictionaries, 1, "eight samples train a dictionary");
    // Some values name it (tag 2), and every package still reads back as ingested.
    let tags = |def: TableDefinition<u64, &[u8]>, at: usize| -> Vec<u8> {
        txn.open_table(def).unwrap().iter().unwrap().map(|e| e.unwrap().1.value()[at]).collect()
    };
    let mut all = tags(EPISODE_DATA, 0);
    all.extend(tags(TRACE_DATA, 32));
    all.extend(tags(FILE_DATA, 0));
    assert!(all.contains(&2), "no value uses the dictionary: tags {all:?}");
    for record in snapshot.episodes().unwrap() {
        let level = &record.manifest.harness_level;
        for (file, bytes) in record.files.iter().zip(snapshot.files(&record).unwrap()) {
            let original = std::fs::read(dataset_root().join(level).join(&file.path)).unwrap();
            assert!(bytes == original, "{level}/{} differs", file.path);
        }
        snapshot.episode_traces(&record.id).unwrap().unwrap();
    }
    assert_eq!(snapshot.verify().unwrap().problems, Vec::<String>::new());
}

/// Flips a byte in the middle of dictionary 0 in `table`.
fn flip_dictionary(store: &Store, table: redb::TableDefinition<'static, u32, &'static [u8]>) {
    damage(store, |txn| {
        let mut table = txn.open_table(table).unwrap();
        let mut raw = table.get(0).unwrap().unwrap().value().to_vec();
        let middle = raw.len() / 2;
        raw[middle] ^= 0xff;
        table.insert(0, raw.as_slice()).unwrap();
    });
}

#[test]
fn a_damaged_dictionary_with_no_intact_copy_is_found_and_reads_that_need_it_refuse() {
    let (_dir, store) = store_with_dictionary();
    flip_dictionary(&store, DICTIONARIES);
    flip_dictionary(&store, DICTIONARY_COPIES);
    let snapshot = store.snapshot().unwrap();
    let err = snapshot.episodes().unwrap_err();
    assert!(err.to_string().contains("compression dictionary 0"), "{err}");
    let report = snapshot.verify().unwrap();
    let found = &report.problems;
    assert!(
        found.iter().any(|p| p.contains("compression dictionary 0") && p.contains("`--repair` cannot restore it")),
        "{found:?}"
    );
    assert!(found.iter().any(|p| p.contains("which the store does not hold")), "{found:?}");
    // Nothing claims to be repairable that repair cannot mend.
    assert_eq!(report.repairable, Vec::<epistore_package::Hash>::new(), "{found:?}");
    drop(snapshot);
    let repaired = store.repair().unwrap();
    assert!(repaired.dictionaries_restored.is_empty() && repaired.repaired.is_empty(), "{repaired:?}");
}

/// One damaged copy of a dictionary loses nothing: reads use the other, `verify` says
/// so, and `repair` writes the intact one back, whichever copy was hit.
#[test]
fn a_damaged_dictionary_reads_from_its_second_copy_and_repair_restores_it() {
    for hit in [DICTIONARIES, DICTIONARY_COPIES] {
        let (_dir, store) = store_with_dictionary();
        let before = store.snapshot().unwrap().episodes().unwrap();
        flip_dictionary(&store, hit);
        let snapshot = store.snapshot().unwrap();
        assert_eq!(snapshot.episodes().unwrap(), before, "reads after damage to {hit}");
        let report = snapshot.verify().unwrap();
        assert_eq!(report.dictionaries_to_restore, vec![0], "{:?}", report.problems);
        assert!(report.problems.iter().any(|p| p.contains("`epistore verify --repair`")), "{:?}", report.problems);
        drop(snapshot);
        let repaired = store.repair().unwrap();
        assert_eq!(repaired.dictionaries_restored, vec![0]);
        assert_eq!(repaired.remaining, Vec::<String>::new());
        let snapshot = store.snapshot().unwrap();
        assert_eq!(snapshot.verify().unwrap().problems, Vec::<String>::new());
        assert_eq!(snapshot.episodes().unwrap(), before);
    }
}

/// A copy of the file taken while its writer has it open is what a crash leaves: the
/// file marked as needing recovery. Opening it must read the allocator state the last
/// commit saved, never walk the file; a commit made without quick repair (as older
/// builds made them) is what makes redb walk it, and the counter sees that walk.
#[test]
fn a_store_left_by_a_crash_reopens_without_walking_the_file() {
    let (_dir, store) = dataset_store();
    let crashed = || {
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(store.dir().join(crate::DB_FILE), copy.path().join(crate::DB_FILE)).unwrap();
        copy
    };
    let before = crate::full_repairs();
    let copy = crashed();
    let raw = crate::builder().open_read_only(copy.path().join(crate::DB_FILE));
    assert!(matches!(raw, Err(redb::DatabaseError::RepairAborted)), "the copy is not marked as needing recovery");
    let reader = Store::open_read_only(copy.path()).unwrap();
    assert_eq!(reader.snapshot().unwrap().episode_count().unwrap(), 4);
    drop(reader);
    let copy = crashed();
    let writer = Store::open_or_create(copy.path()).unwrap();
    assert_eq!(writer.snapshot().unwrap().ingest_seq().unwrap(), 1);
    drop(writer);
    assert_eq!(crate::full_repairs(), before, "a crashed store written by this build was recovered by a walk");

    // The control: the last commit without quick repair.
    let txn = store.writer().unwrap().begin_write().unwrap();
    txn.commit().unwrap();
    let copy = crashed();
    let reader = Store::open_read_only(copy.path()).unwrap();
    assert_eq!(reader.snapshot().unwrap().episode_count().unwrap(), 4);
    assert!(crate::full_repairs() > before, "redb walked the file without the counter seeing it");
}
