//! Criterion benchmarks of the hot paths: validating a package, ingesting a population,
//! opening a session, running the metric suite and rendering a long episode's page. The end-to-end comparison with
//! DuckDB lives in `benches/bench.py`.
//!
//! `cargo bench --bench epistore` (release profile). Populations come from
//! `epistore-synth`, so every run measures the same bytes.

use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use epistore_package::{discover, parse_package, read_source, Limits};
use epistore_sql::Engine;
use epistore_store::{IngestOptions, Store};

const SUITE: &[&str] = &[
    "cell_metrics",
    "label_shares",
    "posture_shares",
    "revision_correctness",
    "revision_transitions",
    "verifier_stats",
    "verifier_pairs",
    "localisation",
];

fn population(dir: &Path, episodes: usize) -> u64 {
    let config = epistore_synth::Config { episodes, seed: 1, ..Default::default() };
    epistore_synth::generate(&config, dir, |_| {}).unwrap().bytes
}

fn bench_parse(c: &mut Criterion) {
    let work = tempfile::tempdir().unwrap();
    population(work.path(), 50);
    let sources = discover(&[work.path().to_path_buf()]).unwrap();
    let raws: Vec<_> = sources.iter().flat_map(|s| read_source(s, &Limits::default())).map(Result::unwrap).collect();
    let bytes: u64 = raws.iter().map(|r| r.total_bytes()).sum();
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("validate_50_packages", |b| {
        b.iter(|| raws.iter().map(|r| parse_package(r).unwrap().derived.final_revision).sum::<u64>())
    });
    group.finish();
}

/// Copies a store directory (the redb file; no columnar segments are built here).
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The cost of one batch must not grow with the store: the same 500 new episodes into
/// an empty store and into a store already holding 20,000 (with small tool outputs, so
/// the setup stays quick; what grows is the number of keys in every B-tree).
fn bench_batch_cost(c: &mut Criterion) {
    let work = tempfile::tempdir().unwrap();
    let batch = work.path().join("batch");
    let bytes = population(&batch, 500);
    let sources = discover(&[batch]).unwrap();
    let base = work.path().join("base-store");
    {
        let packages = work.path().join("base");
        let config = epistore_synth::Config { episodes: 20_000, seed: 2, output_scale: 0.05, ..Default::default() };
        epistore_synth::generate(&config, &packages, |_| {}).unwrap();
        let store = Store::open_or_create(&base).unwrap();
        let report = store.ingest(&discover(&[packages]).unwrap(), &IngestOptions::default(), |_| {}).unwrap();
        assert_eq!(report.added(), 20_000);
    }
    let mut group = c.benchmark_group("ingest");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    for held in [0usize, 20_000] {
        group.bench_function(format!("500_episodes_into_a_store_of_{held}"), |b| {
            b.iter_batched(
                || {
                    let dir = tempfile::tempdir().unwrap();
                    if held > 0 {
                        copy_store(&base, dir.path());
                    }
                    dir
                },
                |dir| {
                    let store = Store::open_or_create(dir.path()).unwrap();
                    let report = store.ingest(&sources, &IngestOptions::default(), |_| {}).unwrap();
                    assert_eq!(report.added(), 500);
                    dir
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

fn bench_queries(c: &mut Criterion) {
    let work = tempfile::tempdir().unwrap();
    let packages = work.path().join("packages");
    population(&packages, 2_000);
    let store = Store::open_or_create(work.path().join("store")).unwrap();
    store.ingest(&discover(&[packages]).unwrap(), &IngestOptions::default(), |_| {}).unwrap();
    epistore_sql::columnar::refresh(&store, &|_, _| {}).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("query_2000_episodes");
    group.sample_size(10);
    group.bench_function("open_session", |b| b.iter(|| runtime.block_on(Engine::open(&store)).unwrap()));
    let engine = runtime.block_on(Engine::open(&store)).unwrap();
    group.bench_function("metric_suite", |b| {
        b.iter(|| {
            for view in SUITE {
                runtime.block_on(engine.query(&format!("SELECT * FROM {view}"))).unwrap();
            }
        })
    });
    group.bench_function("one_cell_of_checks", |b| {
        b.iter(|| runtime.block_on(engine.query("SELECT count(*) FROM checks WHERE model = 'gpt-oss-20b'")).unwrap())
    });
    group.finish();
}

/// An episode page of 10,000 trace records, rendered as `epistore ui` renders it (read
/// the record and traces, build the page's data, embed it): the target is under 200 ms.
fn bench_episode_page(c: &mut Criterion) {
    let work = tempfile::tempdir().unwrap();
    let package = work.path().join("long-episode");
    write_long_episode(&package, 2_500);
    let store = Store::open_or_create(work.path().join("store")).unwrap();
    store.ingest(&discover(&[package]).unwrap(), &IngestOptions::default(), |_| {}).unwrap();
    let snapshot = store.snapshot().unwrap();
    let id = snapshot.episodes().unwrap()[0].id;
    let mut group = c.benchmark_group("episode_page");
    group.sample_size(20);
    group.bench_function("render_10000_records", |b| {
        b.iter(|| {
            let doc = epistore_view::episode_doc(
                &snapshot,
                &id,
                &epistore_view::Links::Server,
                epistore_view::FilePolicy::SERVER,
            )
            .unwrap();
            epistore_view::render(&doc).unwrap().len()
        })
    });
    group.finish();
}

/// A package with `n` records in each of actions, tools, context and verification: an
/// edit every 50 actions, a check after each tool call.
fn write_long_episode(dir: &Path, n: usize) {
    use std::fmt::Write as _;
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    let manifest = r#"{"format":"episode-package/1","episode":"bench/long","model":{"name":"m"},"harness":{"level":"H3"},"task":{"id":"t"},"requirements":[{"id":"R1"}]}"#;
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    std::fs::write(dir.join("outcome.json"), r#"{"label":"failed","correct":false}"#).unwrap();
    let (mut actions, mut tools, mut context, mut checks) =
        (String::new(), String::new(), String::new(), String::new());
    for i in 0..n {
        let seq = 4 * i;
        let kind = if i % 50 == 49 { "edit" } else { "run" };
        let _ = writeln!(context, r#"{{"seq":{seq},"artifact":"docs/f{i}.md","used":true}}"#);
        let _ = writeln!(
            tools,
            r#"{{"seq":{},"tool":"shell","command":"npm test -- --grep case{i}","exit_code":{},"duration_ms":120}}"#,
            seq + 1,
            i % 7
        );
        let _ = writeln!(
            actions,
            r#"{{"seq":{},"kind":"{kind}","paths":["src/f{}.js"],"tool_seq":{},"summary":"step {i}"}}"#,
            seq + 2,
            i % 13,
            seq + 1
        );
        let result = if i % 7 == 0 { "pass" } else { "fail" };
        let _ = writeln!(
            checks,
            r#"{{"seq":{},"check_id":"c{i}","actor":"agent","method":"targeted_test","result":"{result}","requirements":["R1"]}}"#,
            seq + 3
        );
    }
    for (file, text) in [("actions", actions), ("tools", tools), ("context", context), ("verification", checks)] {
        std::fs::write(dir.join(format!("traces/{file}.jsonl")), text).unwrap();
    }
}

criterion_group!(benches, bench_parse, bench_batch_cost, bench_queries, bench_episode_page);
criterion_main!(benches);
