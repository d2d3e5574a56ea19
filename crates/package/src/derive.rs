//! Derived state (docs/format.md §6): observed revisions, check freshness, evidence posture.
//! The store computes these; a recorder's own claims are kept beside them.

use crate::model::{Episode, FINAL_STATE_DIGEST, STATE_DIGEST, TRACE_FILES};

/// The evidence posture of an episode (docs/format.md §6.3). Its spelling, [`Posture::as_str`], is
/// the one the contract, the store and SQL use; [`crate::POSTURES`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posture {
    Current,
    Stale,
    Failure,
    Gap,
    Unknown,
}

impl Posture {
    /// Every posture, in the contract's order (the order of [`crate::POSTURES`]).
    pub const ALL: [Posture; 5] = [Posture::Current, Posture::Stale, Posture::Failure, Posture::Gap, Posture::Unknown];

    /// The spelling of every posture, in the order of [`Posture::ALL`].
    pub const NAMES: [&'static str; 5] = {
        let mut names = [""; 5];
        let mut i = 0;
        while i < names.len() {
            names[i] = Posture::ALL[i].as_str();
            i += 1;
        }
        names
    };

    /// The posture's name as the contract spells it (`outcome.evidence_posture`, the
    /// `posture` column): the only place it is spelled.
    pub const fn as_str(self) -> &'static str {
        match self {
            Posture::Current => "current",
            Posture::Stale => "stale",
            Posture::Failure => "failure",
            Posture::Gap => "gap",
            Posture::Unknown => "unknown",
        }
    }
}

/// Fills in every record's observed revision, every check's bound revision and
/// freshness, the final revision and the posture.
///
/// Fails with (file, line, message) when a check's recorded `revision` lies above the
/// final revision. Assumes `seq` values are unique (checked by the parser).
pub fn derive_state(e: &mut Episode) -> Result<(), (&'static str, u32, String)> {
    // Seqs of the ok mutating actions, sorted: the revision at seq s is the number of
    // them strictly below s (a mutating action sees the revision before its mutation).
    let mut mutations: Vec<u64> =
        e.actions.iter().flatten().filter(|a| a.advances_revision()).map(|a| a.common.seq).collect();
    mutations.sort_unstable();
    let revision_at = |seq: u64| mutations.partition_point(|&m| m < seq) as u64;
    let final_revision = mutations.len() as u64;

    macro_rules! stamp {
        ($trace:expr) => {
            for r in $trace.iter_mut().flatten() {
                r.common.revision = revision_at(r.common.seq);
            }
        };
    }
    stamp!(e.actions);
    stamp!(e.tools);
    stamp!(e.context);
    stamp!(e.checks);
    stamp!(e.attributions);
    stamp!(e.interventions);
    stamp!(e.entropy);

    // State identity (docs/format.md §9.5): where both the state a check started from
    // and the state at the end are recorded, they decide its freshness; elsewhere the
    // revisions do.
    // Only a 1.2 package's digests are read: in earlier revisions the field is unknown.
    let digests = e.manifest.revision() >= crate::Revision::V1_2;
    let final_state = extra_string(&e.outcome.extra, FINAL_STATE_DIGEST).filter(|_| digests);
    for check in e.checks.iter_mut().flatten() {
        if let Some(r) = check.recorded_revision {
            if r > final_revision {
                return Err((
                    TRACE_FILES[3].0,
                    check.common.line,
                    format!("revision {r} lies outside 0..={final_revision} (the final revision)"),
                ));
            }
        }
        check.bound_revision = check.recorded_revision.unwrap_or(check.common.revision);
        check.fresh =
            match (final_state.as_ref().and_then(|_| extra_string(&check.common.extra, STATE_DIGEST)), &final_state) {
                (Some(started), Some(end)) => started == *end,
                _ => check.bound_revision == final_revision,
            };
    }
    e.derived.final_revision = final_revision;
    e.derived.posture = posture(e).as_str().to_string();
    Ok(())
}

/// A string field kept in a record's `extra` (a field the typed records have no place
/// for); `None` when absent or not a string.
fn extra_string(extra: &Option<String>, name: &str) -> Option<String> {
    let text = extra.as_deref().filter(|t| t.contains(name))?;
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get(name)?.as_str().map(str::to_string)
}

/// The first rule of docs/format.md §6.3 that holds. "Bound to the final revision"
/// reads as "fresh" (§6.2): the same thing unless state digests say otherwise (§9.5).
/// Rule 3's "final revision > 0" follows from a check that is not fresh.
fn posture(e: &Episode) -> Posture {
    if !e.manifest.trace_complete {
        return Posture::Unknown;
    }
    let on_final = || e.agent_checks().filter(|c| c.fresh);
    if on_final().any(|c| c.failed()) {
        return Posture::Failure;
    }
    let passed_on_final = on_final().any(|c| c.passed());
    if !passed_on_final && e.agent_checks().any(|c| !c.fresh) {
        return Posture::Stale;
    }
    if e.agent_checks().next().is_none() {
        return Posture::Gap;
    }
    if passed_on_final {
        return Posture::Current;
    }
    Posture::Unknown
}

#[cfg(test)]
mod tests {
    //! Derived state (docs/format.md §6), on packages built in memory and run through the parser.

    use std::collections::BTreeMap;

    use serde_json::{json, Value};

    use super::Posture;
    use crate::model::{Episode, POSTURES};
    use crate::parse::tests::Pkg;

    fn action(seq: u64, kind: &str) -> Value {
        json!({"seq": seq, "kind": kind})
    }

    /// An ok mutating action (kind edit).
    fn edit(seq: u64) -> Value {
        action(seq, "edit")
    }

    /// Adds fields to a record.
    fn with(mut record: Value, fields: Value) -> Value {
        record.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        record
    }

    fn check(seq: u64, actor: &str, result: &str) -> Value {
        let mut r = json!({"seq": seq, "check_id": format!("check-{seq}"), "actor": actor, "result": result});
        if actor == "verifier" {
            let verdict = if result == "pass" { "accept" } else { "reject" };
            r = with(r, json!({"verifier": "judge-model", "verdict": verdict, "method": "judge"}));
        }
        r
    }

    fn agent(seq: u64, result: &str) -> Value {
        check(seq, "agent", result)
    }

    /// A record bound explicitly to `revision`.
    fn on(revision: u64, record: Value) -> Value {
        with(record, json!({"revision": revision}))
    }

    fn pkg(actions: &[Value], checks: Option<&[Value]>) -> Pkg {
        let pkg = Pkg::minimal().trace("actions", actions);
        match checks {
            Some(checks) => pkg.trace("verification", checks),
            None => pkg,
        }
    }

    #[track_caller]
    fn assert_posture(pkg: &Pkg, expected: Posture) {
        assert_eq!(pkg.ok().derived.posture, expected.as_str());
    }

    /// seq -> observed revision, over every record of every trace.
    fn revisions(e: &Episode) -> BTreeMap<u64, u64> {
        let mut out = BTreeMap::new();
        let mut add = |c: &crate::model::Common| assert!(out.insert(c.seq, c.revision).is_none());
        e.actions.iter().flatten().for_each(|r| add(&r.common));
        e.tools.iter().flatten().for_each(|r| add(&r.common));
        e.context.iter().flatten().for_each(|r| add(&r.common));
        e.checks.iter().flatten().for_each(|r| add(&r.common));
        e.attributions.iter().flatten().for_each(|r| add(&r.common));
        e.interventions.iter().flatten().for_each(|r| add(&r.common));
        e.entropy.iter().flatten().for_each(|r| add(&r.common));
        out
    }

    // ---- observed revision -----------------------------------------------------------

    #[test]
    fn every_record_gets_the_revision_current_at_its_seq() {
        // Ok mutating actions at seq 2 (edit), 7 (create), 9 (run with mutates) and 15
        // (delete): the revision moves to 1, 2, 3, 4 just after each. Records are
        // written out of seq order within and across files.
        let e = Pkg::minimal()
            .trace(
                "actions",
                &[
                    action(15, "delete"),
                    action(1, "read"),
                    action(20, "complete"),
                    action(7, "create"),
                    edit(2),
                    with(edit(12), json!({"mutates": false})),
                    action(3, "run"),
                    with(action(9, "run"), json!({"mutates": true})),
                    with(edit(5), json!({"ok": false})),
                ],
            )
            .trace(
                "tools",
                &[
                    json!({"seq": 8, "tool": "bash", "exit_code": 1}),
                    json!({"seq": 0, "tool": "bash"}),
                    json!({"seq": 4, "tool": "bash"}),
                ],
            )
            .trace("context", &[json!({"seq": 13, "artifact": "b"}), json!({"seq": 6, "artifact": "a"})])
            .trace("verification", &[agent(16, "pass"), agent(14, "fail")])
            .trace("attribution", &[json!({"seq": 17, "failure_seq": 8})])
            .trace("interventions", &[json!({"seq": 10, "actor": "human"})])
            .trace("entropy", &[json!({"seq": 19}), json!({"seq": 11}), json!({"seq": 18})])
            .ok();
        let expected: BTreeMap<u64, u64> = [
            (0, 0),
            (1, 0),
            (2, 0), // the edit itself sees the revision before its mutation
            (3, 1),
            (4, 1),
            (5, 1), // a failed edit does not advance
            (6, 1),
            (7, 1),
            (8, 2),
            (9, 2),
            (10, 3),
            (11, 3),
            (12, 3), // an edit with mutates false does not advance
            (13, 3),
            (14, 3),
            (15, 3),
            (16, 4),
            (17, 4),
            (18, 4),
            (19, 4),
            (20, 4),
        ]
        .into();
        assert_eq!(revisions(&e), expected);
        assert_eq!(e.derived.final_revision, 4);
    }

    #[test]
    fn seq_gaps_do_not_matter_only_order_does() {
        let e = pkg(&[edit(1000), edit(10), action(500, "read")], None).ok();
        assert_eq!(revisions(&e), [(10, 0), (500, 1), (1000, 1)].into());
        assert_eq!(e.derived.final_revision, 2);
    }

    #[test]
    fn final_revision_counts_ok_mutating_actions_only() {
        let cases: [(&[Value], u64); 5] = [
            (&[], 0),
            (&[action(0, "read"), action(1, "run"), action(2, "complete")], 0),
            (&[with(edit(0), json!({"ok": false})), with(action(1, "delete"), json!({"ok": false}))], 0),
            (&[edit(0), edit(1), edit(2)], 3),
            (
                &[
                    edit(0),
                    with(edit(1), json!({"ok": false})),
                    action(2, "create"),
                    with(action(3, "plan"), json!({"mutates": true})),
                ],
                3,
            ),
        ];
        for (actions, expected) in cases {
            let e = pkg(actions, None).ok();
            assert_eq!(e.derived.final_revision, expected, "{actions:?}");
        }
    }

    #[test]
    fn without_an_action_trace_everything_is_revision_zero() {
        let e = Pkg::minimal()
            .trace("tools", &[json!({"seq": 5, "tool": "bash"})])
            .trace("verification", &[agent(9, "pass")])
            .ok();
        assert_eq!(e.actions, None);
        assert_eq!(e.derived.final_revision, 0);
        assert_eq!(revisions(&e), [(5, 0), (9, 0)].into());
        assert!(e.checks.unwrap()[0].fresh);
    }

    // ---- bound revision and freshness --------------------------------------------------

    #[test]
    fn a_check_is_bound_to_its_revision_field_or_else_to_its_seq() {
        let e = pkg(
            &[edit(2), edit(5)],
            Some(&[
                agent(1, "pass"),
                on(0, agent(3, "pass")),
                on(2, check(4, "evaluator", "pass")),
                agent(6, "pass"),
                on(1, agent(7, "pass")),
                on(2, agent(8, "pass")),
            ]),
        )
        .ok();
        assert_eq!(e.derived.final_revision, 2);
        // (seq, observed revision, recorded revision, bound revision, fresh)
        let got: Vec<_> = e
            .checks
            .unwrap()
            .iter()
            .map(|c| (c.common.seq, c.common.revision, c.recorded_revision, c.bound_revision, c.fresh))
            .collect();
        assert_eq!(
            got,
            [
                (1, 0, None, 0, false),
                (3, 1, Some(0), 0, false),
                (4, 1, Some(2), 2, true),
                (6, 2, None, 2, true),
                (7, 2, Some(1), 1, false),
                (8, 2, Some(2), 2, true),
            ]
        );
    }

    // ---- evidence posture, rule by rule --------------------------------------------------

    #[test]
    fn posture_names_are_the_contract_names() {
        // Spelled out here as the contract (docs/format.md §6.3) writes them, to catch a rename.
        assert_eq!(POSTURES, ["current", "stale", "failure", "gap", "unknown"]);
        let names: Vec<&str> = Posture::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names, POSTURES);
    }

    #[test]
    fn rule1_incomplete_trace_is_unknown_whatever_the_checks_say() {
        let incomplete = |p: Pkg| p.set("manifest.json", "trace_complete", json!(false));
        assert_posture(&incomplete(pkg(&[edit(1)], Some(&[agent(2, "fail")]))), Posture::Unknown);
        assert_posture(&incomplete(pkg(&[edit(1)], Some(&[agent(2, "pass")]))), Posture::Unknown);
        assert_posture(&incomplete(pkg(&[edit(2)], Some(&[agent(1, "pass")]))), Posture::Unknown);
        assert_posture(&incomplete(pkg(&[edit(1)], None)), Posture::Unknown);
        // An explicit true is the default.
        let complete = pkg(&[edit(1)], Some(&[agent(2, "fail")])).set("manifest.json", "trace_complete", json!(true));
        assert_posture(&complete, Posture::Failure);
    }

    #[test]
    fn rule2_failed_agent_check_on_final_is_failure() {
        for result in ["fail", "timeout", "error"] {
            assert_posture(&pkg(&[edit(1)], Some(&[agent(2, result)])), Posture::Failure);
        }
        // With no mutation the final revision is 0.
        assert_posture(&pkg(&[action(0, "read")], Some(&[agent(1, "fail")])), Posture::Failure);
    }

    #[test]
    fn rule2_failure_wins_over_a_pass_on_final_in_either_order() {
        assert_posture(&pkg(&[edit(1)], Some(&[agent(2, "pass"), agent(3, "fail")])), Posture::Failure);
        assert_posture(&pkg(&[edit(1)], Some(&[agent(2, "timeout"), agent(3, "pass")])), Posture::Failure);
    }

    #[test]
    fn rule2_comes_before_rule3() {
        // An earlier-revision check exists and no pass on final: stale would hold too.
        assert_posture(&pkg(&[edit(1)], Some(&[agent(0, "pass"), agent(2, "error")])), Posture::Failure);
    }

    #[test]
    fn rule2_only_counts_failures_bound_to_final() {
        // Failed before the last edit: not a failure of the final revision.
        assert_posture(&pkg(&[edit(2)], Some(&[agent(1, "fail"), agent(3, "pass")])), Posture::Current);
        // Failed late, but recorded as about revision 0.
        assert_posture(&pkg(&[edit(1)], Some(&[on(0, agent(2, "fail")), agent(3, "pass")])), Posture::Current);
    }

    #[test]
    fn rule3_checks_only_on_earlier_revisions_are_stale() {
        assert_posture(&pkg(&[edit(2)], Some(&[agent(1, "pass")])), Posture::Stale);
        assert_posture(&pkg(&[edit(2)], Some(&[agent(1, "fail")])), Posture::Stale);
        assert_posture(&pkg(&[edit(1), edit(3)], Some(&[agent(2, "pass")])), Posture::Stale);
        // Bound to an earlier revision by its revision field, though run late.
        assert_posture(&pkg(&[edit(1)], Some(&[on(0, agent(2, "pass"))])), Posture::Stale);
    }

    #[test]
    fn rule3_a_skip_on_final_does_not_rescue_an_earlier_check() {
        assert_posture(&pkg(&[edit(2)], Some(&[agent(1, "pass"), agent(3, "skipped")])), Posture::Stale);
    }

    #[test]
    fn rule3_a_skipped_earlier_check_counts_as_run() {
        assert_posture(&pkg(&[edit(2)], Some(&[agent(1, "skipped")])), Posture::Stale);
    }

    #[test]
    fn rule3_needs_a_final_revision_above_zero() {
        // Every check is on revision 0 = final: never stale.
        assert_posture(&pkg(&[action(1, "read")], Some(&[agent(0, "skipped")])), Posture::Unknown);
    }

    #[test]
    fn rule4_no_verification_trace_is_gap() {
        assert_posture(&pkg(&[edit(1)], None), Posture::Gap);
        assert_posture(&Pkg::minimal(), Posture::Gap);
    }

    #[test]
    fn rule4_a_trace_without_agent_checks_is_gap() {
        assert_posture(&pkg(&[edit(1)], Some(&[])), Posture::Gap);
        let non_agent = [
            check(2, "evaluator", "fail"),
            with(check(3, "evaluator", "pass"), json!({"method": "oracle"})),
            check(4, "verifier", "fail"),
            check(5, "human", "pass"),
            on(0, check(6, "evaluator", "pass")),
            json!({"seq": 7, "check_id": "no-actor", "result": "pass"}),
        ];
        assert_posture(&pkg(&[edit(1)], Some(&non_agent)), Posture::Gap);
        assert_posture(&pkg(&[edit(1)], Some(&non_agent[..1])), Posture::Gap);
    }

    #[test]
    fn rule4_a_skipped_agent_check_counts_as_run() {
        // Not gap; no pass on final and nothing earlier: unknown (rule 6).
        assert_posture(&pkg(&[], Some(&[agent(0, "skipped")])), Posture::Unknown);
        assert_posture(&pkg(&[edit(1)], Some(&[agent(2, "skipped")])), Posture::Unknown);
        // An agent check with no result is run too.
        assert_posture(
            &pkg(&[edit(1)], Some(&[json!({"seq": 2, "check_id": "c", "actor": "agent"})])),
            Posture::Unknown,
        );
    }

    #[test]
    fn rule5_an_agent_pass_on_final_is_current() {
        assert_posture(&pkg(&[edit(1)], Some(&[agent(2, "pass")])), Posture::Current);
        assert_posture(&pkg(&[], Some(&[agent(0, "pass")])), Posture::Current);
        assert_posture(&pkg(&[edit(1)], Some(&[on(1, agent(0, "pass"))])), Posture::Current);
        // Earlier checks and skips beside a pass on final do not matter.
        assert_posture(
            &pkg(&[edit(2)], Some(&[agent(1, "fail"), agent(3, "skipped"), agent(4, "pass")])),
            Posture::Current,
        );
    }

    #[test]
    fn non_agent_checks_never_change_the_posture() {
        // Evaluator, verifier and human records of every result, on final and on 0.
        let mut others = Vec::new();
        for (i, actor) in ["evaluator", "verifier", "human"].into_iter().enumerate() {
            for (j, result) in ["pass", "fail", "timeout", "error", "skipped"].into_iter().enumerate() {
                let seq = 100 + 10 * i as u64 + j as u64;
                others.push(check(seq, actor, result));
                others.push(on(0, check(seq + 50, actor, result)));
            }
        }
        // (trace complete, agent checks or None for no verification trace, posture);
        // every base has one edit at seq 1, so the final revision is 1.
        let bases: [(bool, Option<Vec<Value>>, Posture); 6] = [
            (false, Some(vec![agent(2, "pass")]), Posture::Unknown),
            (true, Some(vec![agent(2, "fail")]), Posture::Failure),
            (true, Some(vec![agent(0, "pass")]), Posture::Stale),
            (true, None, Posture::Gap),
            (true, Some(vec![agent(2, "pass")]), Posture::Current),
            (true, Some(vec![agent(2, "skipped")]), Posture::Unknown),
        ];
        for (complete, agent_checks, expected) in bases {
            let build = |checks: Option<&[Value]>| {
                pkg(&[edit(1)], checks).set("manifest.json", "trace_complete", json!(complete))
            };
            assert_posture(&build(agent_checks.as_deref()), expected);
            let mut all = agent_checks.unwrap_or_default();
            all.extend(others.iter().cloned());
            let with_others = build(Some(&all));
            assert_eq!(with_others.ok().checks.unwrap().len(), all.len());
            assert_posture(&with_others, expected);
        }
    }

    // ---- state digests (revision 1.2, docs/format.md §9.5) -------------------------------

    fn revision_1_2(actions: &[Value], checks: &[Value], final_state: Option<&str>) -> Pkg {
        let mut p = pkg(actions, Some(checks)).set("manifest.json", "format", json!(crate::FORMAT_V1_2));
        if let Some(d) = final_state {
            p = p.set("outcome.json", "final_state_digest", json!(d));
        }
        p
    }

    fn in_state(digest: &str, record: Value) -> Value {
        with(record, json!({"state_digest": digest}))
    }

    #[test]
    fn an_undo_back_to_the_checked_state_keeps_the_check_fresh() {
        // edit (seq 1), a pass on state A (seq 2), an edit and its undo (seqs 3, 4): the
        // run ends in state A again, the state the test ran on.
        let p = revision_1_2(&[edit(1), edit(3), edit(4)], &[in_state("tree:a", agent(2, "pass"))], Some("tree:a"));
        let e = p.ok();
        assert_eq!(e.derived.final_revision, 3);
        assert!(e.checks.as_ref().unwrap()[0].fresh);
        assert_eq!(e.derived.posture, "current");
        // Without the end state the revisions decide: stale.
        assert_posture(
            &revision_1_2(&[edit(1), edit(3), edit(4)], &[in_state("tree:a", agent(2, "pass"))], None),
            Posture::Stale,
        );
    }

    #[test]
    fn a_change_no_action_shows_makes_the_check_stale() {
        // A pass on state A, no recorded mutation after it, and the run ends in state B
        // (a script wrote silently): the test did not test the end state.
        let p = revision_1_2(&[edit(1)], &[in_state("tree:a", agent(2, "pass"))], Some("tree:b"));
        let e = p.ok();
        assert_eq!((e.derived.final_revision, e.checks.as_ref().unwrap()[0].bound_revision), (1, 1));
        assert!(!e.checks.as_ref().unwrap()[0].fresh);
        assert_eq!(e.derived.posture, "stale");
        // A failure on a state that is not the end state is no failure of the end state.
        let p = revision_1_2(&[], &[in_state("tree:a", agent(2, "fail"))], Some("tree:b"));
        assert_posture(&p, Posture::Stale);
    }

    #[test]
    fn digests_are_read_only_in_revision_1_2_and_only_with_both_ends() {
        let checks = [in_state("tree:a", agent(2, "pass"))];
        // A 1.1 package: the fields are unknown, kept and not read.
        let p =
            revision_1_2(&[edit(1)], &checks, Some("tree:b")).set("manifest.json", "format", json!(crate::FORMAT_V1_1));
        assert_posture(&p, Posture::Current);
        // A check with no digest of its own: its revision decides.
        assert_posture(&revision_1_2(&[edit(1)], &[agent(2, "pass")], Some("tree:b")), Posture::Current);
    }
}
