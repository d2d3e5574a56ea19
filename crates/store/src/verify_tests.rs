//! `verify` must find damage, not only pass on intact stores: each test damages one
//! table of a store holding the bundled dataset, through redb directly, and checks that
//! `verify` names the problem (and that reads refuse what they cannot trust).

use epistore_package::{read_source, Source};
use redb::{ReadableTable, TableDefinition};

use crate::tables::{BLOB_DATA, CELLS, CHECKSUMS, EPISODE_DATA, EPISODE_INDEX, INGEST_LOG, TRACE_DATA};
use crate::{IngestOptions, Store};

fn dataset_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(dir.path().join("store")).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/login-validation");
    let sources: Vec<Source> = ["H0", "H1", "H2", "H3"].iter().map(|l| Source::Dir(root.join(l))).collect();
    let options = IngestOptions::default();
    let report =
        store.ingest_from(&sources, |s, _| read_source(s, &options.limits), &options, |_| {}, |_, _| Ok(())).unwrap();
    assert_eq!(report.added(), 4);
    (dir, store)
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
    let (_dir, store) = dataset_store();
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

/// The first episode's number and record, with its label's byte offset in the value.
fn first_label(txn: &redb::WriteTransaction) -> (u64, Vec<u8>, usize, String) {
    let number = first_number(txn, EPISODE_DATA);
    let value = txn.open_table(EPISODE_DATA).unwrap().get(number).unwrap().unwrap().value().to_vec();
    let label = crate::tables::decode_record(&value).unwrap().outcome.label.expect("the dataset labels its episodes");
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
        txn.open_table(EPISODE_DATA).unwrap().insert(number, value.as_slice()).unwrap();
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
        let mut record = crate::tables::decode_record(&value).unwrap();
        record.outcome.label = Some("not-a-label".into());
        let bytes = crate::codec::encode(&record);
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
        let mut record = crate::tables::decode_record(&value).unwrap();
        let old = (record.manifest.model.clone(), record.manifest.harness_level.clone(), record.manifest.task.clone());
        record.manifest.model = "fake-model".into();
        let bytes = crate::codec::encode(&record);
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
    // 4 records, 4 trace records, 1 ingest batch.
    assert_eq!(redb::ReadableTableMetadata::len(&sums).unwrap(), 9);
    drop((sums, txn));
    assert_eq!(problems(&store), Vec::<String>::new());
}
