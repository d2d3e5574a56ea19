//! Leaderboards, paired comparisons and intervals (docs/metrics.md §G) end to end: hand-worked
//! tie groups, a golden seeded board, the SQL aggregate agreeing with `metrics --ci`,
//! the four formats, and the HTML page in headless Chromium.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::util::{dataset, repo_root, text, write_package, TestStore};

/// One package: model `model` on task `task` (its own cluster), accepted, with
/// `correct` as given.
fn package(dir: &Path, model: &str, task: &str, correct: bool) {
    let name = format!("{model}-{task}");
    let manifest = json!({
        "format": "episode-package/1", "episode": format!("board/{name}"),
        "model": {"name": model}, "harness": {"level": "H2"}, "task": {"id": task}, "seed": 1
    });
    let outcome = json!({
        "label": if correct { "unverified_success" } else { "failed" },
        "correct": correct, "admission": "accepted"
    });
    let files = BTreeMap::from([
        ("manifest.json".to_string(), manifest.to_string().into_bytes()),
        ("outcome.json".to_string(), outcome.to_string().into_bytes()),
    ]);
    write_package(&dir.join(name), &files);
}

fn board(store: &TestStore, args: &[&str]) -> Value {
    let mut all = vec!["leaderboard", "--format", "json"];
    all.extend_from_slice(args);
    let out = store.run(&all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Models alpha and beta are right on every task, gamma on none; one task per cluster.
/// Worked by hand:
/// - alpha and beta tie at 1.0 (alphabetical order); beta - alpha is 0 on every
///   cluster, so every sign pattern reaches |0|: p = 1.
/// - beta - gamma is 1 on each of the 7 clusters: only the all-plus and all-minus
///   patterns reach |7|, p = 2/128 = 0.015625, exact.
/// - Every pair is tested (the family `compare` uses): alpha-beta p = 1, alpha-gamma and
///   beta-gamma p = 0.015625 each. Holm over {1, 0.015625, 0.015625}: 0.015625 * 3 =
///   0.046875 for both small ones, 1 for the other.
/// - Groups from the group's leader: beta is not separable from alpha (p 1): group 1;
///   gamma against alpha: 0.046875 < 0.05, so gamma leads group 2.
/// - With 6 clusters (where task <> 't7'): p = 2/64 = 0.03125, Holm 0.09375 >= 0.05:
///   all three share group 1 (six clusters cannot separate them after adjustment).
#[test]
fn tie_groups_and_holm_worked_by_hand() {
    let store = TestStore::new();
    let packages = store.dir.path().join("packages");
    for t in 1..=7 {
        let task = format!("t{t}");
        package(&packages, "alpha", &task, true);
        package(&packages, "beta", &task, true);
        package(&packages, "gamma", &task, false);
    }
    assert!(store.ingest(&[&packages]).status.success());

    let b = board(&store, &["--metric", "sound_completion", "--replicates", "200"]);
    let entries = b["entries"].as_array().unwrap();
    let labels: Vec<&str> = entries.iter().map(|e| e["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["alpha", "beta", "gamma"]);
    let groups: Vec<i64> = entries.iter().map(|e| e["tie_group"].as_i64().unwrap()).collect();
    assert_eq!(groups, [1, 1, 2]);
    assert_eq!(entries[1]["vs_above"]["p"], json!(1.0));
    assert_eq!(entries[1]["vs_above"]["p_holm"], json!(1.0));
    assert_eq!(entries[2]["vs_above"]["p"], json!(0.015625));
    assert_eq!(entries[2]["vs_above"]["p_holm"], json!(0.046875));
    assert_eq!(entries[2]["vs_above"]["mean_difference"], json!(1.0));
    assert_eq!(entries[2]["vs_above"]["exact"], json!(true));
    assert_eq!(b["comparison"]["family"], json!(3));
    // Every cluster agrees, so every replicate does: the interval is the point.
    assert_eq!((entries[0]["lo"].clone(), entries[0]["hi"].clone()), (json!(1.0), json!(1.0)));
    assert_eq!(entries[2]["value"], json!(0.0));
    assert_eq!(entries[0]["episode_ids"].as_array().unwrap().len(), 7);
    assert_eq!(entries[0]["clusters"], json!(7));

    let six = board(&store, &["--metric", "sound_completion", "--replicates", "200", "--where", "task <> 't7'"]);
    let groups: Vec<i64> =
        six["entries"].as_array().unwrap().iter().map(|e| e["tie_group"].as_i64().unwrap()).collect();
    assert_eq!(groups, [1, 1, 1]);
    assert_eq!(six["entries"][2]["vs_above"]["p_holm"], json!(0.09375));

    // A lower-is-better metric ranks the other way: unsafe_completion is 1 for gamma.
    let risk = board(&store, &["--metric", "unsafe_completion", "--replicates", "200"]);
    assert_eq!(risk["direction"], json!("lower"));
    assert_eq!(risk["entries"][2]["label"], json!("gamma"));

    // compare: all three pairs, Holm over a family of three.
    let out = store.run(&["compare", "--metric", "sound_completion", "--format", "json", "--replicates", "200"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pairs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pairs.len(), 3);
    let alpha_gamma = pairs.iter().find(|p| p["a"] == "alpha" && p["b"] == "gamma").unwrap();
    // p-values {1, 0.015625, 0.015625}: Holm gives 0.046875 to both small ones.
    assert_eq!(alpha_gamma["p_holm"], json!(0.046875));
    let beta_gamma = pairs.iter().find(|p| p["a"] == "beta" && p["b"] == "gamma").unwrap();
    assert_eq!(beta_gamma["p_holm"], entries[2]["vs_above"]["p_holm"], "the board and compare disagree");
}

/// The board and `compare` are one family: on synthetic populations, by model and by
/// harness level, every entry's p against the entry above (raw and Holm-adjusted) is
/// `compare`'s for that pair, the family has as many members as `compare` has pairs,
/// and each tie group's members are not separable from its first entry by `compare`'s
/// p-values, while each group's first entry is separable from the one of the group above.
#[test]
fn the_board_and_compare_agree_on_every_pair() {
    for (episodes, seed) in [(160, 3), (240, 9)] {
        let store = TestStore::synthetic(episodes, seed);
        for by in ["model", "harness_level"] {
            let args = ["--metric", "sound_completion", "--by", by, "--replicates", "200", "--seed", "5"];
            let b = board(&store, &args);
            let out = store.run(&[&["compare", "--format", "json"][..], &args].concat());
            assert!(out.status.success(), "{}", text(&out.stderr));
            let pairs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            let p_of = |x: &str, y: &str| {
                pairs
                    .iter()
                    .find(|p| (p["a"] == x && p["b"] == y) || (p["a"] == y && p["b"] == x))
                    .map(|p| (p["p"].as_f64().unwrap(), p["p_holm"].as_f64().unwrap()))
            };
            let ranked: Vec<&Value> = b["entries"].as_array().unwrap().iter().filter(|e| e["rank"].is_u64()).collect();
            assert_eq!(b["comparison"]["family"].as_u64().unwrap() as usize, pairs.len(), "{by}");
            let alpha = b["comparison"]["alpha"].as_f64().unwrap();
            let mut leader = ranked.first().map(|e| e["label"].as_str().unwrap());
            for w in ranked.windows(2) {
                let (above, this) = (w[0]["label"].as_str().unwrap(), w[1]["label"].as_str().unwrap());
                match p_of(above, this) {
                    Some((p, p_holm)) => {
                        assert_eq!(w[1]["vs_above"]["p"].as_f64(), Some(p), "{by} {above} / {this}");
                        assert_eq!(w[1]["vs_above"]["p_holm"].as_f64(), Some(p_holm), "{by} {above} / {this}");
                    }
                    None => assert!(w[1]["vs_above"].is_null(), "{by} {above} / {this}"),
                }
                let separable = p_of(leader.unwrap(), this).is_some_and(|(_, p)| p < alpha);
                let new_group = w[1]["tie_group"] != w[0]["tie_group"];
                assert_eq!(new_group, separable, "{by}: {this} against its group's leader {:?}", leader);
                if new_group {
                    leader = Some(this);
                }
            }
        }
    }
}

fn synthetic_store(episodes: usize) -> TestStore {
    TestStore::synthetic(episodes, 7)
}

/// Golden output of a seeded bootstrap on a small synthetic population: the same seed
/// must give the same board byte for byte. `EPISTORE_GOLDEN_UPDATE=1` rewrites it.
#[test]
fn seeded_leaderboard_matches_its_golden_file() {
    let store = synthetic_store(120);
    let args = [
        "leaderboard",
        "--metric",
        "avs_rate",
        "--by",
        "harness_level",
        "--format",
        "json",
        "--replicates",
        "500",
        "--seed",
        "3",
    ];
    let out = store.run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let again = store.run(&args);
    assert_eq!(out.stdout, again.stdout, "the same seed gave another board");

    let mut value: Value = serde_json::from_slice(&out.stdout).unwrap();
    value["generated_by"] = json!("epistore");
    let produced = serde_json::to_string_pretty(&value).unwrap() + "\n";
    let golden = repo_root().join("tests/golden/leaderboard_avs_rate_by_level.json");
    if std::env::var_os("EPISTORE_GOLDEN_UPDATE").is_some() {
        std::fs::write(&golden, &produced).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).expect("golden file (EPISTORE_GOLDEN_UPDATE=1 writes it)");
    assert!(
        produced == expected,
        "board differs from {}; rerun with EPISTORE_GOLDEN_UPDATE=1 if intended",
        golden.display()
    );

    // The harness ladder: more evidence at higher levels.
    let matrix = &value["evidence_matrix"];
    assert_eq!(matrix["levels"], json!(["H0", "H1", "H2", "H3"]));
    let verification = matrix["artifacts"].as_array().unwrap().iter().position(|a| a == "verification").unwrap();
    let share = |level: usize| matrix["share"][level][verification].as_f64().unwrap();
    assert!(share(3) > share(0), "{matrix}");
}

/// The SQL aggregate and `metrics --ci` draw the same replicates from the same seed
/// over the same clusters, so they print the same interval.
#[test]
fn cluster_ci_in_sql_agrees_with_metrics_ci() {
    let store = synthetic_store(80);
    let out =
        store.run(&["metrics", "--ci", "--by", "model", "--format", "json", "--replicates", "300", "--seed", "11"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cli: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let sql = store.sql(
        "SELECT model, cluster_ci(accepted_correct, correct_known, \"cluster\", 300, 11) AS ci \
         FROM episode_facts GROUP BY model ORDER BY model",
    );
    assert!(!sql.is_empty());
    for row in &sql {
        let model = row["model"].as_str().unwrap();
        let cli_row = cli.iter().find(|r| r["model"] == model && r["metric"] == "sound_completion").unwrap();
        for (field, cli_field) in [("estimate", "value"), ("lo", "lo"), ("hi", "hi")] {
            assert_eq!(row["ci"][field], cli_row[cli_field], "{model} {field}");
        }
        assert_eq!(
            row["ci"]["replicates_used"].as_i64().unwrap() + row["ci"]["replicates_dropped"].as_i64().unwrap(),
            300
        );
    }
    // `cluster` may be a key too (each entry then has one cluster).
    let out = store.run(&["metrics", "--ci", "--by", "model,cluster", "--format", "json", "--replicates", "20"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rows.iter().all(|r| r["clusters"] == json!(1)));

    // Every metric of sections A-F has intervals with --all.
    let out = store.run(&["metrics", "--ci", "--all", "--by", "", "--format", "json", "--replicates", "50"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    for metric in [
        "avs_rate",
        "label_share:failed",
        "posture_share:current",
        "repair_rate",
        "current_correctness",
        "lost_correctness",
        "verifier_accuracy",
        "phi",
        "top3_any",
        "mean_score",
    ] {
        assert!(rows.iter().any(|r| r["metric"] == metric), "no interval for {metric}");
    }
}

/// `leaderboard ARGS --format FORMAT --out PATH`, which must succeed: the file written.
fn written_board(store: &TestStore, args: &[&str], format: &str, path: &Path) -> String {
    let mut command = vec!["leaderboard"];
    command.extend_from_slice(args);
    command.extend(["--format", format, "--out", path.to_str().unwrap()]);
    let out = store.run(&command);
    assert!(out.status.success(), "leaderboard {args:?} --format {format}: {}", text(&out.stderr));
    std::fs::read_to_string(path).unwrap()
}

/// The four formats on the bundled dataset, written atomically to --out.
#[test]
fn leaderboard_formats_on_the_bundled_dataset() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let dir = store.dir.path();
    for format in ["md", "html", "json", "csv"] {
        let path = dir.join(format!("board.{format}"));
        let body = written_board(&store, &["--metric", "avs_rate", "--by", "harness_level"], format, &path);
        match format {
            // One task cluster per entry: no interval, and the board says why.
            "md" => assert!(body.contains("| 1 | H3 | 1.000 | NULL (one task cluster) |"), "{body}"),
            "html" => {
                assert!(!body.contains("EPISTORE_LEADERBOARD_DATA") && !body.contains("EPISTORE_LEADERBOARD_TITLE"));
                assert!(body.contains("\"schema\":\"epistore-leaderboard/1\""));
                // The only URL allowed is the SVG namespace name, which is never fetched.
                let page = body.replace("http://www.w3.org/2000/svg", "");
                assert!(!page.contains("http://") && !page.contains("https://"), "the page must not reach the network");
            }
            "json" => {
                let v: Value = serde_json::from_str(&body).unwrap();
                assert_eq!(v["entries"].as_array().unwrap().len(), 4);
            }
            _ => assert_eq!(body.lines().count(), 5, "{body}"),
        }
    }
    // Text from packages or --where cannot end the page's script early.
    let path = dir.join("hostile.html");
    let body =
        written_board(&store, &["--metric", "avs_rate", "--where", "model <> '<!--<script></script>'"], "html", &path);
    let script = &body[body.find("const DATA =").unwrap()..];
    let data_line = script.lines().next().unwrap();
    assert!(!data_line.contains('<') && data_line.contains("\\u003c!--"), "{data_line}");

    let out = store.run(&["leaderboard", "--metric", "no_such_metric"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown metric `no_such_metric`"), "{}", text(&out.stderr));
}

/// The HTML page in headless Chromium: loads without console errors or network
/// requests, has the table, the interval chart, the evidence matrix and the revision
/// curves, sorts on click, and leaves a screenshot in target/. Needs Chromium and
/// playwright-core (`.ci/run` installs both and sets EPISTORE_REQUIRE_BROWSER=1, so
/// CI fails rather than ignores it when they are missing).
#[test]
#[cfg_attr(
    not(epistore_browser),
    ignore = "needs Chromium and playwright-core (CHROMIUM, PLAYWRIGHT_CORE; .ci/run installs them)"
)]
fn leaderboard_page_renders_in_headless_chromium() {
    let (chromium, playwright) = crate::viewer::browser();
    let store = synthetic_store(200);
    let page = store.dir.path().join("board.html");
    written_board(&store, &["--metric", "sound_completion"], "html", &page);
    // At laptop and at phone width: every row's value, interval and tie group in sight.
    let check = |page: &Path, screenshot: &Path, width: &str| -> Value {
        let out = std::process::Command::new("node")
            .arg(repo_root().join("tests/browser/check_leaderboard.mjs"))
            .arg(page)
            .arg(screenshot)
            .env("CHROMIUM", &chromium)
            .env("PLAYWRIGHT_CORE", &playwright)
            .env("EPISTORE_WIDTH", width)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    for width in ["1200", "400"] {
        let screenshot = repo_root().join(format!("target/leaderboard-screenshot-{width}.png"));
        let summary = check(&page, &screenshot, width);
        assert_eq!(summary["ok"], json!(true));
        assert_eq!(summary["rows"], json!(4));
        assert_eq!(summary["console"], json!([]));
        assert_eq!(summary["key_cells_out_of_sight"], json!([]), "at {width} px");
        assert!(summary["revision_series"].as_u64().unwrap() > 0);
        assert_eq!(summary["cost_points"], json!(4), "the synthetic episodes state their costs");
        assert!(std::fs::metadata(&screenshot).unwrap().len() > 10_000);
    }
    // A board whose entries share no cluster, each of one cluster: the page says the
    // order is untested and labels the intervals it cannot draw; no section without data.
    let store = TestStore::new();
    let real = repo_root().join("tests/fixtures/real");
    store.run(&["import", "--model", "m1", "--cluster", "c1", real.join("claude-code").to_str().unwrap()]);
    store.run(&["import", "--model", "m2", "--cluster", "c2", real.join("codex").to_str().unwrap()]);
    let page = store.dir.path().join("untested.html");
    written_board(&store, &["--metric", "stale_check_rate"], "html", &page);
    let summary = check(&page, &repo_root().join("target/leaderboard-untested.png"), "1200");
    assert_eq!(summary["single_cluster_entries"], json!(2));
    assert_eq!(summary["pass_k_series"], json!(0));
    assert_eq!(summary["revision_series"], json!(0));
    // Repeated attempts: the k curve, one pair of lines per model.
    let store = attempts_store();
    let page = store.dir.path().join("attempts.html");
    written_board(&store, &["--metric", "pass_rate"], "html", &page);
    let summary = check(&page, &repo_root().join("target/leaderboard-attempts.png"), "1200");
    assert_eq!(summary["pass_k_series"], json!(2));
}

/// Models steady and flaky, three judged attempts on each of six tasks (one cluster
/// each): steady resolves every attempt of t0..t3 and none of t4, t5; flaky resolves
/// one attempt of three on every task.
fn attempts_store() -> TestStore {
    let store = TestStore::new();
    let dir = tempfile::tempdir().unwrap();
    for (model, resolved) in [("steady", [3, 3, 3, 3, 0, 0]), ("flaky", [1, 1, 1, 1, 1, 1])] {
        for (t, &c) in resolved.iter().enumerate() {
            for a in 0..3 {
                let correct = a < c;
                let manifest = json!({"format": "episode-package/1", "episode": format!("k/{model}-t{t}-{a}"),
                    "model": {"name": model}, "harness": {"level": "H2"}, "task": {"id": format!("t{t}")}, "seed": a});
                let outcome =
                    json!({"label": if correct { "unverified_success" } else { "failed" }, "correct": correct});
                let files = BTreeMap::from([
                    ("manifest.json".to_string(), manifest.to_string().into_bytes()),
                    ("outcome.json".to_string(), outcome.to_string().into_bytes()),
                ]);
                write_package(&dir.path().join(format!("{model}-{t}-{a}")), &files);
            }
        }
    }
    assert!(store.ingest(&[dir.path()]).status.success());
    store
}

/// The board's k curve is the `pass_k(k)` table function, worked by hand for k = 1..3:
/// steady: pass@k = pass^k = 4/6 at every k (each task all or nothing); flaky: pass@1 =
/// 1/3, pass@2 = 1 - C(2,2)/C(3,2) = 2/3, pass@3 = 1; pass^1 = 1/3, pass^2 = pass^3 = 0.
#[test]
fn the_boards_k_curve_is_the_pass_k_function() {
    let store = attempts_store();
    let b = board(&store, &["--metric", "pass_rate", "--replicates", "200"]);
    let series = b["pass_k"].as_array().unwrap();
    let points = |label: &str| -> Vec<(f64, f64)> {
        let s = series.iter().find(|s| s["label"] == label).unwrap_or_else(|| panic!("{label}: {series:?}"));
        s["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["pass_at_k"].as_f64().unwrap(), p["pass_hat_k"].as_f64().unwrap()))
            .collect()
    };
    let close = |got: Vec<(f64, f64)>, want: &[(f64, f64)]| {
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g.0 - w.0).abs() < 1e-9 && (g.1 - w.1).abs() < 1e-9, "{got:?} against {want:?}");
        }
    };
    close(points("steady / H2"), &[(4.0 / 6.0, 4.0 / 6.0); 3]);
    close(points("flaky / H2"), &[(1.0 / 3.0, 1.0 / 3.0), (2.0 / 3.0, 0.0), (1.0, 0.0)]);
    for k in 1..=3 {
        for row in store.sql(&format!("SELECT model, pass_at_k, pass_hat_k FROM pass_k({k})")) {
            let (at, hat) = points(&format!("{} / H2", row["model"].as_str().unwrap()))[k - 1];
            assert_eq!((row["pass_at_k"].as_f64(), row["pass_hat_k"].as_f64()), (Some(at), Some(hat)), "k = {k}");
        }
    }
}

/// Every shipped view returns as many rows to `count(*)` as to `SELECT *`, and a
/// query reading one column sees them all too. (DataFusion 55 once dropped rows of
/// revision_correctness when a query read no column of its revision list.)
#[test]
fn every_view_counts_the_rows_it_returns() {
    let store = synthetic_store(150);
    for (view, _) in epistore_sql::views::VIEWS {
        let all = store.sql(&format!("SELECT * FROM {view}")).len() as i64;
        let counted = store.sql(&format!("SELECT count(*) AS c FROM {view}"))[0]["c"].as_i64().unwrap();
        assert_eq!(counted, all, "{view}: count(*) {counted}, SELECT * {all} rows");
        let first = store.sql(&format!("SELECT * FROM {view} LIMIT 1"));
        if let Some(column) = first.first().and_then(|r| r.as_object()).and_then(|o| o.keys().next().cloned()) {
            let one = store.sql(&format!("SELECT count(*) AS c FROM (SELECT \"{column}\" FROM {view})"))[0]["c"]
                .as_i64()
                .unwrap();
            assert_eq!(one, all, "{view}: reading only `{column}` saw {one} of {all} rows");
        }
    }
}

/// Sections that mean nothing for a population are left out: a store of one harness
/// level has no harness-ladder matrix (it compares nothing), and one without oracle
/// verdicts no revision curves (the page drew both on every board).
#[test]
fn a_board_of_one_harness_level_has_no_ladder_and_no_empty_curves() {
    let store = TestStore::new();
    let logs = repo_root().join("tests/fixtures/real/claude-code");
    store.run(&["import", "--model", "m", logs.to_str().unwrap()]);
    let out = store.run(&["leaderboard", "--metric", "stale_check_rate", "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let board: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(board["evidence_matrix"].is_null(), "{}", board["evidence_matrix"]);
    assert_eq!(board["revision_curves"], json!([]));
    let html = written_board(&store, &["--metric", "stale_check_rate"], "html", &store.dir.path().join("b.html"));
    assert!(html.contains("\"evidence_matrix\":null"), "the page's data carries no matrix");
}

/// Entries that share no task cluster cannot be compared; the board says so instead of
/// an unexplained "family of 0 comparisons".
#[test]
fn a_board_whose_entries_share_no_cluster_says_their_order_is_untested() {
    let store = TestStore::new();
    let real = repo_root().join("tests/fixtures/real");
    store.run(&["import", "--model", "m1", real.join("claude-code").to_str().unwrap()]);
    store.run(&["import", "--model", "m2", real.join("codex").to_str().unwrap()]);
    let md = written_board(&store, &["--metric", "stale_check_rate"], "md", &store.dir.path().join("b.md"));
    assert!(md.contains("(no comparisons: no two entries share a task cluster, so their order is untested)"), "{md}");
}

/// A pass-rate board over single attempts, one task per cluster, worked by hand:
/// - alpha resolves t0..t10 (11 of 12), beta t0..t2 (3 of 12): on the 12 shared tasks
///   alpha alone resolved 8, beta alone none, so McNemar's exact p = 2 / 2^8 = 0.0078125
///   (the sign-flip test on the same ±1 differences gives the same p);
/// - alpha has a 13th attempt that timed out before it was judged: with errors counted
///   as failures (the default) alpha's pass rate is 11/13, left out 11/12;
/// - `resolve_rate` is read as the pass rate, and `--errors` with another metric is refused.
#[test]
fn a_pass_rate_board_states_its_error_rule_and_tests_pairs_with_mcnemar() {
    let store = TestStore::new();
    let dir = tempfile::tempdir().unwrap();
    for t in 0..12 {
        package(dir.path(), "alpha", &format!("t{t:02}"), t < 11);
        package(dir.path(), "beta", &format!("t{t:02}"), t < 3);
    }
    let errored = BTreeMap::from([
        (
            "manifest.json".to_string(),
            json!({"format": "episode-package/1.1", "episode": "board/alpha-t12", "model": {"name": "alpha"},
                   "harness": {"level": "H2"}, "task": {"id": "t12"}, "seed": 1})
            .to_string()
            .into_bytes(),
        ),
        ("outcome.json".to_string(), json!({"label": null, "stop_reason": "timeout"}).to_string().into_bytes()),
    ]);
    write_package(&dir.path().join("alpha-t12"), &errored);
    assert!(store.ingest(&[dir.path()]).status.success());

    let args = ["--metric", "resolve_rate", "--replicates", "200", "--seed", "1"];
    let b = board(&store, &args);
    assert_eq!(
        (b["metric"].as_str(), b["errors"]["rule"].as_str(), b["errors"]["chosen"].as_str()),
        (Some("pass_rate_all"), Some("fail"), Some("default"))
    );
    let entries = b["entries"].as_array().unwrap();
    assert_eq!(entries[0]["label"], "alpha");
    assert!((entries[0]["value"].as_f64().unwrap() - 11.0 / 13.0).abs() < 1e-12);
    let vs = &entries[1]["vs_above"];
    assert_eq!((vs["mcnemar"]["first_only"].as_u64(), vs["mcnemar"]["second_only"].as_u64()), (Some(8), Some(0)));
    let near = |v: &Value, want: f64| v.as_f64().is_some_and(|x| (x - want).abs() < 1e-12);
    assert!(near(&vs["mcnemar"]["p"], 2.0 / 256.0), "{vs}");
    assert!(near(&vs["p"], 2.0 / 256.0), "the sign-flip test on ±1 differences is McNemar's: {vs}");
    assert!(entries.iter().all(|e| e["rank_stability"].as_f64().is_some_and(|r| (0.0..=1.0).contains(&r))));

    let excluded = board(&store, &[&args[..], &["--errors", "exclude"]].concat());
    assert_eq!(
        (excluded["metric"].as_str(), excluded["errors"]["chosen"].as_str()),
        (Some("pass_rate"), Some("given"))
    );
    assert!((excluded["entries"][0]["value"].as_f64().unwrap() - 11.0 / 12.0).abs() < 1e-12);
    let md = store.run(&["leaderboard", "--metric", "pass_rate", "--errors", "exclude", "--replicates", "200"]);
    assert!(text(&md.stdout).contains("Errors (left out, given)"), "{}", text(&md.stdout));

    let compare = store.run(&["compare", "--format", "json", "--metric", "resolve_rate", "--replicates", "200"]);
    assert!(compare.status.success(), "{}", text(&compare.stderr));
    let pairs: Vec<Value> = serde_json::from_slice(&compare.stdout).unwrap();
    assert!(near(&pairs[0]["mcnemar_p"], 2.0 / 256.0), "{}", pairs[0]);

    let refused = store.run(&["leaderboard", "--metric", "avs_rate", "--errors", "fail"]);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("--errors applies to a pass rate"), "{}", text(&refused.stderr));
}

/// Costs on a board (docs/metrics.md §L): model acme-fast costs 1,000 in + 100 out tokens
/// an attempt and resolves 1 of 2 tasks, acme-big 10,000 + 1,000 and resolves 2 of 2.
/// The shipped table lists neither (no cost); `EPISTORE_PRICES` naming a table with
/// acme at $1 / $2 per million tokens prices them: acme-fast 1,000 + 200 = 1,200
/// microdollars an episode, acme-big 10,000 + 2,000 = 12,000. Both are on the frontier
/// (one cheaper, the other better). A bad table is refused naming its field.
#[test]
fn costs_come_from_the_price_table_in_force_and_mark_the_frontier() {
    let store = TestStore::new();
    let dir = tempfile::tempdir().unwrap();
    for (model, tin, tout, resolved) in
        [("acme-fast", 1000, 100, [true, false]), ("acme-big", 10_000, 1000, [true, true])]
    {
        for (t, correct) in resolved.iter().enumerate() {
            let manifest = json!({"format": "episode-package/1.2", "episode": format!("cost/{model}-{t}"),
                "model": {"name": model}, "harness": {"level": "H2"}, "task": {"id": format!("t{t}")}});
            let outcome = json!({"label": null, "correct": correct, "cost": {"tokens_in": tin, "tokens_out": tout}});
            let files = BTreeMap::from([
                ("manifest.json".to_string(), manifest.to_string().into_bytes()),
                ("outcome.json".to_string(), outcome.to_string().into_bytes()),
            ]);
            write_package(&dir.path().join(format!("{model}-{t}")), &files);
        }
    }
    assert!(store.ingest(&[dir.path()]).status.success());
    let args = ["leaderboard", "--format", "json", "--metric", "pass_rate", "--replicates", "200"];

    let out = store.run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shipped: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((shipped["cost"]["derived"].as_i64(), shipped["cost"]["unknown"].as_i64()), (Some(0), Some(4)));
    assert!(shipped["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["cost_per_episode"].is_null() && e["pareto"] == false));

    let prices = dir.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"version": "test-1", "date": "2026-12-05", "models": [{"prefix": "acme", "input": 1, "output": 2}]}"#,
    )
    .unwrap();
    let out = store.command().args(args).env("EPISTORE_PRICES", &prices).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((b["cost"]["derived"].as_i64(), b["cost"]["price_version"].as_str()), (Some(4), Some("test-1")));
    let entry = |label: &str| b["entries"].as_array().unwrap().iter().find(|e| e["label"] == label).unwrap().clone();
    let (big, fast) = (entry("acme-big"), entry("acme-fast"));
    assert_eq!(big["cost_per_episode"]["value"].as_f64(), Some(0.012));
    assert_eq!(fast["cost_per_episode"]["value"].as_f64(), Some(0.0012));
    assert_eq!((big["pareto"].as_bool(), fast["pareto"].as_bool()), (Some(true), Some(true)));
    let sql = store
        .command()
        .args(["sql", "--format", "csv", "SELECT price_version, count(*) FROM episode_costs GROUP BY 1"])
        .env("EPISTORE_PRICES", &prices)
        .output()
        .unwrap();
    assert_eq!(text(&sql.stdout).trim(), "price_version,count(*)\ntest-1,4");

    std::fs::write(
        &prices,
        r#"{"version": "v", "date": "d", "models": [{"prefix": "acme", "input": "cheap", "output": 2}]}"#,
    )
    .unwrap();
    let bad = store.command().args(args).env("EPISTORE_PRICES", &prices).output().unwrap();
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("`models[0].input` must be a number"), "{}", text(&bad.stderr));
}
