-- label_audit: one row per episode, flagging labels that disagree with the evidence
-- the store derived. The label, the agent's completion claim, the evidence posture and
-- the admission decision stay four separate columns.
--   avs_without_fresh_coverage: labelled autonomous_verified_success, but no passing
--     agent check on the final revision, or some manifest requirement not covered by one;
--   avs_with_missing_harness_intervention: labelled autonomous, yet a human or evaluator
--     stood in for a missing harness responsibility;
--   verified_without_current_posture: a *_verified_success label whose derived posture
--     is not current;
--   verified_but_incorrect: a *_verified_success label on a delivered state judged wrong;
--   success_without_completion_claim: a success label while the agent did not claim
--     completion.
-- A flag that needs an unknown fact (`correct` or `agent_reported_complete` NULL) is
-- NULL, not false; `disagrees` is true when any flag holds, else false (never NULL).
WITH flags AS (
    SELECT episode_id, episode, model, harness_level, task, label, agent_reported_complete, posture, admission,
           correct, requirements_verified, requirements_total, missing_harness_interventions,
           label = 'autonomous_verified_success'
               AND (passing_final_checks = 0 OR requirements_verified < requirements_total) AS avs_without_fresh_coverage,
           label = 'autonomous_verified_success' AND missing_harness_interventions > 0 AS avs_with_missing_harness_intervention,
           label IN ('autonomous_verified_success', 'assisted_verified_success') AND posture <> 'current'
               AS verified_without_current_posture,
           label IN ('autonomous_verified_success', 'assisted_verified_success') AND correct = false
               AS verified_but_incorrect,
           label IN ('autonomous_verified_success', 'assisted_verified_success', 'unverified_success')
               AND agent_reported_complete = false AS success_without_completion_claim
    FROM episode_facts
)
SELECT *,
       coalesce(avs_without_fresh_coverage OR avs_with_missing_harness_intervention
                OR verified_without_current_posture OR verified_but_incorrect
                OR success_without_completion_claim, false) AS disagrees
FROM flags
ORDER BY model, harness_level, task, episode_id
