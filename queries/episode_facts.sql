-- episode_facts: one row per episode holding the numerator and the denominator of
-- every per-cell metric of docs/metrics.md §A, §B and §C. Every metric view rolls
-- these up by summing numerators and denominators (pooling counts); none averages
-- ratios. A denominator of 0 for an episode means it does not count for that metric.
--
-- Conventions: an agent check is a `checks` row with actor = 'agent'; its `revision`
-- is the bound revision (docs/format.md §6.1). A failed tool record has failure_type <> 'none'
-- (column `failed`). A missing trace and an empty one differ: `has_<trace>` says which.
WITH
agent_checks AS (
    SELECT episode_id, seq, revision, final_revision, result, requirements
    FROM checks
    WHERE actor = 'agent'
),
check_facts AS (
    SELECT episode_id,
           count(*) AS agent_checks,
           count(*) FILTER (WHERE revision < final_revision) AS stale_agent_checks,
           count(*) FILTER (WHERE result = 'pass') AS passing_agent_checks,
           count(*) FILTER (WHERE result = 'pass' AND revision = final_revision) AS passing_final_checks,
           min(seq) FILTER (WHERE result = 'pass') AS first_pass_seq
    FROM agent_checks
    GROUP BY episode_id
),
last_edit AS (
    SELECT episode_id, max(seq) AS last_mutation_seq
    FROM actions
    WHERE mutates AND ok
    GROUP BY episode_id
),
-- Requirements (manifest ids) covered by a passing agent check on the final revision.
-- A requirement is its id: an id listed twice in the manifest counts once.
covered AS (
    SELECT DISTINCT episode_id, requirement
    FROM (
        SELECT episode_id, unnest(requirements) AS requirement
        FROM agent_checks
        WHERE result = 'pass' AND revision = final_revision
    )
),
requirement_facts AS (
    SELECT m.episode_id,
           count(*) AS requirements_total,
           count(c.requirement) AS requirements_verified
    FROM (SELECT DISTINCT episode_id, requirement FROM requirements) m
    LEFT JOIN covered c ON c.episode_id = m.episode_id AND c.requirement = m.requirement
    GROUP BY m.episode_id
),
-- Failed observations: failed tool records and agent checks that failed, timed out or
-- erred. `seq` is unique within an episode, so the union has no duplicates.
failed_observations AS (
    SELECT episode_id, seq FROM tools WHERE failed
    UNION ALL
    SELECT episode_id, seq FROM agent_checks WHERE result IN ('fail', 'timeout', 'error')
),
attribution_facts AS (
    SELECT f.episode_id,
           count(*) AS failed_observations,
           count(a.failure_seq) AS attributed_failures
    FROM failed_observations f
    LEFT JOIN (SELECT DISTINCT episode_id, failure_seq FROM attributions) a
           ON a.episode_id = f.episode_id AND a.failure_seq = f.seq
    GROUP BY f.episode_id
),
tool_facts AS (
    SELECT episode_id,
           count(*) AS failed_tools,
           count(recovered_by) AS recovered_tools
    FROM tools
    WHERE failed
    GROUP BY episode_id
),
intervention_facts AS (
    SELECT episode_id,
           count(*) FILTER (WHERE missing_responsibility IS NOT NULL) AS missing_harness_interventions
    FROM interventions
    GROUP BY episode_id
),
entropy_facts AS (
    SELECT episode_id,
           coalesce(sum(CASE WHEN phase = 'post' THEN severity END), 0)
         - coalesce(sum(CASE WHEN phase = 'pre' THEN severity END), 0) AS entropy_delta
    FROM entropy
    GROUP BY episode_id
),
context_facts AS (
    SELECT episode_id,
           count(*) AS context_records,
           count(*) FILTER (WHERE used) AS context_used
    FROM context
    GROUP BY episode_id
)
SELECT
    e.model, e.harness_level, e.task, e.cluster, e.episode_id, e.episode, e.seed, e.attempt,
    e.label, e.posture, e.agent_reported_complete, e.admission, e.correct, e.source_format,
    -- A. harness ladder
    1 AS episodes,
    -- Label metrics count adjudicated episodes only (docs/metrics.md §I): label NULL is an
    -- episode nobody judged (an import without an evaluator).
    CASE WHEN e.label IS NOT NULL THEN 1 ELSE 0 END AS adjudicated,
    CASE WHEN e.label = 'autonomous_verified_success' THEN 1 ELSE 0 END AS avs,
    CASE WHEN e.has_interventions THEN coalesce(i.missing_harness_interventions, 0) ELSE 0 END AS missing_harness_interventions,
    CASE WHEN e.has_interventions AND coalesce(i.missing_harness_interventions, 0) > 0 THEN 1 ELSE 0 END AS missing_harness_incident,
    CASE WHEN e.has_interventions THEN 1 ELSE 0 END AS with_interventions_trace,
    coalesce(r.requirements_verified, 0) AS requirements_verified,
    coalesce(r.requirements_total, 0) AS requirements_total,
    coalesce(a.attributed_failures, 0) AS attributed_failures,
    coalesce(a.failed_observations, 0) AS failed_observations,
    coalesce(t.recovered_tools, 0) AS recovered_tools,
    coalesce(t.failed_tools, 0) AS failed_tools,
    CASE WHEN e.has_entropy THEN coalesce(n.entropy_delta, 0) ELSE 0 END AS entropy_delta_sum,
    CASE WHEN e.has_entropy THEN 1 ELSE 0 END AS with_entropy_trace,
    coalesce(x.context_used, 0) AS context_used,
    coalesce(x.context_records, 0) AS context_records,
    -- B. evidence and freshness
    coalesce(k.stale_agent_checks, 0) AS stale_agent_checks,
    coalesce(k.agent_checks, 0) AS agent_checks,
    CASE WHEN k.first_pass_seq IS NOT NULL AND l.last_mutation_seq > k.first_pass_seq THEN 1 ELSE 0 END AS verify_then_edit,
    CASE WHEN coalesce(k.passing_agent_checks, 0) > 0 THEN 1 ELSE 0 END AS with_passing_agent_check,
    coalesce(k.passing_final_checks, 0) AS passing_final_checks,
    -- C. gates and completion (over episodes whose `correct` is known)
    CASE WHEN e.correct IS NOT NULL THEN 1 ELSE 0 END AS correct_known,
    CASE WHEN e.correct THEN 1 ELSE 0 END AS resolved,
    -- judged, or unjudged because the run errored, timed out or ran out of budget (a
    -- failure when errors count as failures; an import without an evaluator is neither)
    CASE WHEN e.correct IS NOT NULL
              OR e.stop_reason IN ('budget_exhausted', 'invalid_action', 'timeout', 'infra_error')
         THEN 1 ELSE 0 END AS attempted,
    CASE WHEN e.correct IS NOT NULL AND e.admission = 'accepted' THEN 1 ELSE 0 END AS accepted_known,
    CASE WHEN e.correct AND e.admission = 'accepted' THEN 1 ELSE 0 END AS accepted_correct,
    CASE WHEN NOT e.correct AND e.admission = 'accepted' THEN 1 ELSE 0 END AS accepted_wrong,
    CASE WHEN e.stop_reason = 'budget_exhausted' THEN 1 ELSE 0 END AS budget_exhausted,
    CASE WHEN e.start_state = 'wrong' AND e.correct IS NOT NULL THEN 1 ELSE 0 END AS wrong_start_known,
    CASE WHEN e.start_state = 'wrong' AND e.correct THEN 1 ELSE 0 END AS repaired_from_wrong,
    CASE WHEN e.start_state = 'correct' AND e.correct IS NOT NULL THEN 1 ELSE 0 END AS correct_start_known,
    CASE WHEN e.start_state = 'correct' AND NOT e.correct THEN 1 ELSE 0 END AS regressed_from_correct,
    -- F. graded tasks
    coalesce(e.score, 0.0) AS score_sum,
    CASE WHEN e.score IS NOT NULL THEN 1 ELSE 0 END AS scored
FROM episodes e
LEFT JOIN check_facts k ON k.episode_id = e.episode_id
LEFT JOIN last_edit l ON l.episode_id = e.episode_id
LEFT JOIN requirement_facts r ON r.episode_id = e.episode_id
LEFT JOIN attribution_facts a ON a.episode_id = e.episode_id
LEFT JOIN tool_facts t ON t.episode_id = e.episode_id
LEFT JOIN intervention_facts i ON i.episode_id = e.episode_id
LEFT JOIN entropy_facts n ON n.episode_id = e.episode_id
LEFT JOIN context_facts x ON x.episode_id = e.episode_id
