//! Property: rolling a metric up over several cells pools counts, so the roll-up equals
//! the metric computed on the union of those cells' episodes as one population.
//!
//! Random populations are ingested twice: as generated (many cells), and with every
//! episode moved into one cell per model. `epistore metrics --by model` on the first
//! must equal `cell_metrics` on the second, column for column, NULLs included.

use std::path::Path;

use datafusion::arrow::record_batch::RecordBatch;
use epistore_sql::{format_batches, Engine, Format};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::slt::store_from_fixture;

#[derive(Debug, Clone)]
struct Spec {
    cell: (u8, u8, u8),
    label: u8,
    correct: Option<bool>,
    admission: u8,
    start: u8,
    budget_exhausted: bool,
    edits: u8,
    /// (result index, explicit revision 0?, covers R1)
    checks: Vec<(u8, bool, bool)>,
    /// (failed, recovered, attributed)
    tools: Vec<(bool, bool, bool)>,
    interventions: Option<Vec<bool>>,
    entropy: Option<(u8, u8)>,
    context: Vec<bool>,
    score: Option<u8>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (0u8..2, 0u8..2, 0u8..2),
        (0u8..5, prop::option::of(any::<bool>()), 0u8..4, 0u8..3, any::<bool>()),
        0u8..3,
        prop::collection::vec((0u8..5, any::<bool>(), any::<bool>()), 0..4),
        prop::collection::vec((any::<bool>(), any::<bool>(), any::<bool>()), 0..3),
        prop::option::of(prop::collection::vec(any::<bool>(), 0..3)),
        prop::option::of((0u8..4, 0u8..4)),
        prop::collection::vec(any::<bool>(), 0..3),
        prop::option::of(0u8..5),
    )
        .prop_map(
            |(
                cell,
                (label, correct, admission, start, budget_exhausted),
                edits,
                checks,
                tools,
                interventions,
                entropy,
                context,
                score,
            )| Spec {
                cell,
                label,
                correct,
                admission,
                start,
                budget_exhausted,
                edits,
                checks,
                tools,
                interventions,
                entropy,
                context,
                score,
            },
        )
}

const LABELS: [&str; 5] =
    ["autonomous_verified_success", "assisted_verified_success", "unverified_success", "failed", "unsafe_invalid"];
const RESULTS: [&str; 5] = ["pass", "fail", "timeout", "error", "skipped"];

/// The package files of one spec; `one_cell` moves it into the model's single cell.
fn package(i: usize, s: &Spec, one_cell: bool) -> Value {
    let (m, l, t) = s.cell;
    let (level, task) =
        if one_cell { ("ALL".to_string(), "ALL".to_string()) } else { (format!("H{l}"), format!("t{t}")) };
    let mut seq = 0u64;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut actions = vec![json!({"seq": next(), "kind": "read"})];
    let mut checks = Vec::new();
    let mut tools = Vec::new();
    let mut attributions = Vec::new();
    for (k, (result, explicit_zero, covers)) in s.checks.iter().enumerate() {
        if k < s.edits as usize {
            actions.push(json!({"seq": next(), "kind": "edit", "ok": k % 2 == 0 || s.edits > 1}));
        }
        let mut check = json!({"seq": next(), "check_id": format!("c{k}"), "actor": "agent",
            "result": RESULTS[*result as usize], "requirements": if *covers { json!(["R1"]) } else { json!(["R2", "X"]) }});
        if *explicit_zero {
            check["revision"] = json!(0);
        }
        checks.push(check);
    }
    for (failed, recovered, attributed) in &s.tools {
        let recovered_by = actions[0]["seq"].clone();
        let mut tool = json!({"seq": next(), "tool": "bash", "exit_code": if *failed { 1 } else { 0 }});
        if *recovered {
            tool["recovered_by"] = recovered_by;
        }
        if *attributed {
            attributions.push(json!({"seq": 0, "failure_seq": tool["seq"], "category": "tool"}));
        }
        tools.push(tool);
    }
    for a in &mut attributions {
        a["seq"] = json!(next());
    }
    let mut files = serde_json::Map::new();
    files.insert(
        "manifest.json".into(),
        json!({"format": "episode-package/1", "episode": format!("p/{i}"), "model": {"name": format!("m{m}")},
               "harness": {"level": level}, "task": {"id": task, "cluster": format!("c{t}")}, "seed": i,
               "requirements": [{"id": "R1"}, {"id": "R2"}]}),
    );
    let admission = [None, Some("accepted"), Some("rejected"), Some("pending")][s.admission as usize];
    let start_state = [None, Some("correct"), Some("wrong")][s.start as usize];
    let stop_reason = if s.budget_exhausted { "budget_exhausted" } else { "completed" };
    let mut outcome = json!({"label": LABELS[s.label as usize], "correct": s.correct, "admission": admission,
        "start_state": start_state, "stop_reason": stop_reason});
    if let Some(score) = s.score {
        outcome["score"] = json!(f64::from(score) / 4.0);
    }
    files.insert("outcome.json".into(), outcome);
    files.insert("traces/actions.jsonl".into(), json!(actions));
    if !checks.is_empty() {
        files.insert("traces/verification.jsonl".into(), json!(checks));
    }
    if !tools.is_empty() {
        files.insert("traces/tools.jsonl".into(), json!(tools));
    }
    if !attributions.is_empty() {
        files.insert("traces/attribution.jsonl".into(), json!(attributions));
    }
    if let Some(list) = &s.interventions {
        let records: Vec<Value> = list
            .iter()
            .map(|missing| {
                json!({"seq": next(), "actor": "human", "kind": "hint",
                "missing_responsibility": if *missing { json!("verification") } else { Value::Null }})
            })
            .collect();
        files.insert("traces/interventions.jsonl".into(), json!(records));
    }
    if let Some((pre, post)) = s.entropy {
        files.insert(
            "traces/entropy.jsonl".into(),
            json!([{"seq": next(), "category": "code", "severity": pre, "phase": "pre"},
                   {"seq": next(), "category": "code", "severity": post}]),
        );
    }
    if !s.context.is_empty() {
        let records: Vec<Value> =
            s.context.iter().map(|used| json!({"seq": next(), "artifact": "README.md", "used": used})).collect();
        files.insert("traces/context.jsonl".into(), json!(records));
    }
    Value::Object(files)
}

fn csv(store: &epistore_store::Store, sql: &str) -> String {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let batches: Vec<RecordBatch> = runtime.block_on(async {
        let engine = Engine::open(store).await.unwrap();
        engine.query(sql).await.unwrap()
    });
    format_batches(&batches, Format::Csv).unwrap()
}

fn store_of(specs: &[Spec], one_cell: bool, dir: &Path) -> epistore_store::Store {
    let fixture: serde_json::Map<String, Value> =
        specs.iter().enumerate().map(|(i, s)| (format!("p{i:03}"), package(i, s, one_cell))).collect();
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("fixture.json");
    std::fs::write(&path, Value::Object(fixture).to_string()).unwrap();
    store_from_fixture(Some(&path), &dir.join("store"))
}

/// Parses CSV cells so that 0.30000000000000004 and 0.3 compare equal.
fn cells(text: &str) -> Vec<Vec<Option<f64>>> {
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(|c| if c.is_empty() { None } else { c.parse().ok().or(Some(f64::NAN)) }).collect())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn pooled_rollups_equal_the_metric_on_the_union(specs in prop::collection::vec(spec(), 1..24)) {
        let work = tempfile::tempdir().unwrap();
        let many = store_of(&specs, false, &work.path().join("many"));
        let one = store_of(&specs, true, &work.path().join("one"));
        let rolled = csv(&many, &Engine::metrics_sql(&["model"], None).unwrap());
        let union = csv(&one, "SELECT * EXCLUDE (harness_level, task) FROM cell_metrics ORDER BY model");
        let (a, b) = (cells(&rolled), cells(&union));
        prop_assert_eq!(a.len(), b.len());
        for (ra, rb) in a.iter().zip(&b) {
            prop_assert_eq!(ra.len(), rb.len());
            for (x, y) in ra.iter().zip(rb) {
                match (x, y) {
                    (None, None) => {}
                    (Some(x), Some(y)) if x.is_nan() && y.is_nan() => {} // the model name
                    (Some(x), Some(y)) => prop_assert!((x - y).abs() < 1e-9, "{} vs {}\n{}\n{}", x, y, rolled, union),
                    _ => prop_assert!(false, "NULL differs:\n{}\n{}", rolled, union),
                }
            }
        }
    }
}

/// pass_k(k) against brute force: for random populations of runs (task, correct known or
/// not), every k-subset of each task's known runs is enumerated; pass@k is the share of
/// subsets with a correct run, pass^k the share with only correct runs, averaged over
/// tasks with at least k known runs (docs/metrics.md §K).
fn brute_force(runs: &[(u8, Option<bool>)], k: usize) -> Option<(f64, f64, usize)> {
    let mut by_task: std::collections::BTreeMap<u8, Vec<bool>> = std::collections::BTreeMap::new();
    for (task, correct) in runs {
        if let Some(c) = correct {
            by_task.entry(*task).or_default().push(*c);
        }
    }
    let (mut at, mut hat, mut tasks) = (0.0, 0.0, 0usize);
    for outcomes in by_task.values().filter(|o| o.len() >= k) {
        let n = outcomes.len();
        let (mut subsets, mut any, mut all) = (0u64, 0u64, 0u64);
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != k {
                continue;
            }
            let picked: Vec<bool> = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| outcomes[i]).collect();
            subsets += 1;
            any += u64::from(picked.iter().any(|c| *c));
            all += u64::from(picked.iter().all(|c| *c));
        }
        at += any as f64 / subsets as f64;
        hat += all as f64 / subsets as f64;
        tasks += 1;
    }
    (tasks > 0).then(|| (at / tasks as f64, hat / tasks as f64, tasks))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn pass_k_equals_brute_force_enumeration(
        runs in prop::collection::vec((0u8..4, prop::option::of(any::<bool>())), 1..20),
        k in 1usize..5,
    ) {
        let fixture: serde_json::Map<String, Value> = runs
            .iter()
            .enumerate()
            .map(|(i, (task, correct))| {
                let mut outcome = json!({"label": "failed"});
                if let Some(c) = correct {
                    outcome["correct"] = json!(c);
                }
                let manifest = json!({"format": "episode-package/1", "episode": format!("pk/{i}"), "model": {"name": "m"},
                    "harness": {"level": "H1"}, "task": {"id": format!("t{task}")}, "attempt": i + 1});
                (format!("p{i:03}"), json!({"manifest.json": manifest, "outcome.json": outcome}))
            })
            .collect();
        let work = tempfile::tempdir().unwrap();
        let path = work.path().join("fixture.json");
        std::fs::write(&path, Value::Object(fixture).to_string()).unwrap();
        let store = store_from_fixture(Some(&path), &work.path().join("store"));
        let got = cells(&csv(&store, &format!("SELECT pass_at_k, pass_hat_k, tasks FROM pass_k({k})")));
        match brute_force(&runs, k) {
            None => prop_assert!(got.is_empty(), "{:?}", got),
            Some((at, hat, tasks)) => {
                prop_assert_eq!(got.len(), 1);
                let row = &got[0];
                prop_assert!((row[0].unwrap() - at).abs() < 1e-9, "pass@{} {:?} vs {}", k, row[0], at);
                prop_assert!((row[1].unwrap() - hat).abs() < 1e-9, "pass^{} {:?} vs {}", k, row[1], hat);
                prop_assert_eq!(row[2], Some(tasks as f64));
            }
        }
    }
}
