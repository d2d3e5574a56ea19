//! The bundled controlled task (`datasets/login-validation`): the harness-ladder
//! evidence table (level x artifacts present) and derived state, from SQL.

use epistore_store::Store;

use crate::util::*;

#[test]
fn evidence_table_of_the_harness_ladder() {
    let store = TestStore::new();
    let out = store.ingest(&[&dataset()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = store.run(&[
        "sql",
        "--format",
        "csv",
        "SELECT harness_level, has_actions, has_tools, has_context, has_verification, has_attribution, \
         has_interventions, n_interventions, has_entropy, has_patch, has_verification_report, \
         n_artifacts > 0 AS has_repro_log, posture \
         FROM episodes ORDER BY harness_level",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let expected = "\
harness_level,has_actions,has_tools,has_context,has_verification,has_attribution,has_interventions,n_interventions,has_entropy,has_patch,has_verification_report,has_repro_log,posture
H0,true,false,false,false,false,false,,false,true,false,false,gap
H1,true,true,false,false,false,false,,false,true,false,false,gap
H2,true,true,true,false,false,false,,false,true,false,false,gap
H3,true,true,true,true,true,true,0,true,true,true,true,failure
";
    assert_eq!(text(&out.stdout).trim(), expected.trim());
}

#[test]
fn the_full_regression_is_recorded_as_one_timeout_not_retried() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let id = store.h3_episode();
    let reader = Store::open_read_only(store.path()).unwrap();
    let snapshot = reader.snapshot().unwrap();
    let episode = snapshot.episode_traces(&epistore_package::parse_hex(&id).unwrap()).unwrap().unwrap();
    let regressions: Vec<_> =
        episode.checks.iter().flatten().filter(|c| c.method.as_deref() == Some("regression")).collect();
    assert_eq!(regressions.len(), 1, "the regression ran once");
    assert_eq!(regressions[0].result.as_deref(), Some("timeout"));
    assert!(regressions[0].fresh, "it ran on the final revision");
    let timed_out_tools = episode.tools.iter().flatten().filter(|t| t.failure_type == "timeout").count();
    assert_eq!(timed_out_tools, 1);
    // Every level delivers a working patch.
    let patched = store.sql("SELECT count(*) AS n FROM episodes WHERE has_patch AND correct");
    assert_eq!(patched[0]["n"], 4);
}
