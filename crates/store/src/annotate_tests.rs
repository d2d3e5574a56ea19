//! Annotations against a store holding the bundled dataset: append, retract,
//! re-annotate, the refusals, writers racing, and `verify` finding damage.

use epistore_package::hex;
use redb::TableDefinition;

use crate::verify_tests::dataset_store;
use crate::{AnnotationKind, Error, Judgement};

fn judgement(label: &str) -> Judgement {
    Judgement { label: label.into(), note: Some("seen in the log".into()), author: Some("ana".into()) }
}

#[test]
fn annotate_retract_and_annotate_again() {
    let (_dir, store) = dataset_store();
    let episode = store.snapshot().unwrap().episodes().unwrap()[0].id;
    let prefix = &hex(&episode)[..8];
    let seq = store.snapshot().unwrap().ingest_seq().unwrap();
    let first = store.annotate(prefix, judgement(" flaky test ")).unwrap();
    assert!(first.added);
    assert_eq!(first.annotation.label, "flaky test", "trimmed");
    assert_eq!(first.annotation.episode, episode);
    let gone = store.retract(&hex(&first.id)[..6], Some("a real failure".into()), None).unwrap();
    assert_eq!(gone.annotation.kind, AnnotationKind::Retraction);
    assert_eq!(gone.annotation.retracts, Some(first.id));
    assert_eq!(gone.annotation.label, "flaky test");
    // Withdrawn once only; a retraction is not retracted.
    let again = store.retract(&hex(&first.id), None, None).unwrap_err().to_string();
    assert!(again.contains("already retracted by"), "{again}");
    let of_retraction = store.retract(&hex(&gone.id), None, None).unwrap_err().to_string();
    assert!(of_retraction.contains("it is a retraction"), "{of_retraction}");
    std::thread::sleep(std::time::Duration::from_millis(2));
    let restored = store.annotate(&hex(&episode), judgement("flaky test")).unwrap();
    assert_ne!(restored.id, first.id, "a new record");

    let snapshot = store.snapshot().unwrap();
    let all = snapshot.annotations().unwrap();
    assert_eq!(all.iter().map(|a| a.number).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(all.iter().map(|a| a.id).collect::<Vec<_>>(), [first.id, gone.id, restored.id]);
    assert_eq!(snapshot.annotation(&gone.id).unwrap().unwrap().annotation, gone.annotation);
    // Nothing the ingest log or the episodes hold changed.
    assert_eq!(snapshot.ingest_seq().unwrap(), seq);
    let report = snapshot.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.annotations, 3);
}

#[test]
fn refusals_name_what_is_wrong_and_write_nothing() {
    let (_dir, store) = dataset_store();
    let episode = hex(&store.snapshot().unwrap().episodes().unwrap()[0].id);
    let missing = "ab".repeat(32);
    assert!(matches!(store.annotate(&missing, judgement("x")), Err(Error::NoEpisode(_))));
    assert!(matches!(store.annotate(&episode, judgement("  ")), Err(Error::Annotation(_))));
    assert!(matches!(store.retract(&missing, None, None), Err(Error::NoAnnotation(_))));
    assert!(matches!(store.retract("zz", None, None), Err(Error::NoAnnotation(_))));
    assert!(store.snapshot().unwrap().annotations().unwrap().is_empty());
    // The same record twice (same millisecond is what makes it the same) is one.
    let a = store.annotate(&episode, judgement("x")).unwrap();
    let dup = store.append_annotation(a.annotation.clone()).unwrap();
    assert!(!dup.added);
    assert_eq!(dup.id, a.id);
    assert_eq!(store.snapshot().unwrap().annotations().unwrap().len(), 1);
}

#[test]
fn racing_writers_lose_nothing_and_withdraw_a_label_once() {
    let (_dir, store) = dataset_store();
    let episodes: Vec<_> = store.snapshot().unwrap().episodes().unwrap().iter().map(|e| hex(&e.id)).collect();
    let store = &store;
    std::thread::scope(|scope| {
        for (t, episode) in episodes.iter().cycle().take(8).enumerate() {
            scope.spawn(move || {
                for i in 0..10 {
                    store.annotate(episode, judgement(&format!("annotator {t} label {i}"))).unwrap();
                }
            });
        }
    });
    let all = store.snapshot().unwrap().annotations().unwrap();
    assert_eq!(all.len(), 80);
    let target = hex(&all[0].id);
    let target = &target;
    let wins: usize = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..6).map(|_| scope.spawn(move || store.retract(target, None, None).is_ok_and(|r| r.added))).collect();
        handles.into_iter().map(|h| h.join().unwrap() as usize).sum()
    });
    // The others are refused, or (same millisecond) write the same record again, which
    // adds nothing.
    assert_eq!(wins, 1, "one retraction of one label");
    let retractions =
        store.snapshot().unwrap().annotations().unwrap().iter().filter(|a| a.annotation.retracts.is_some()).count();
    assert_eq!(retractions, 1);
    assert!(store.snapshot().unwrap().verify().unwrap().problems.is_empty());
}

#[test]
fn verify_finds_a_damaged_or_misnamed_annotation() {
    let (_dir, store) = dataset_store();
    let episode = hex(&store.snapshot().unwrap().episodes().unwrap()[0].id);
    let a = store.annotate(&episode, judgement("reward hacking")).unwrap();
    const DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("annotation_data");
    let db = store.writer().unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut data = txn.open_table(DATA).unwrap();
        let text = String::from_utf8(a.annotation.to_bytes()).unwrap().replace("reward hacking", "reward hackinG");
        data.insert(0, text.as_bytes()).unwrap();
    }
    txn.commit().unwrap();
    let snapshot = store.snapshot().unwrap();
    let read = snapshot.annotations().unwrap_err().to_string();
    assert!(read.contains("do not match their checksum"), "{read}");
    let problems = snapshot.verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.contains("annotation 0") && p.contains("checksum")), "{problems:?}");
}
