-- cell_metrics: one row per cell (model, harness_level, task) with every scalar metric
-- of docs/metrics.md §A, §B and §C in table order, then mean_score.
-- Each ratio is a sum of per-episode numerators over a sum of per-episode denominators
-- (episode_facts); a zero denominator gives NULL, never 0.
-- `epistore metrics --by KEYS` runs this same text with the lines marked `@keys`
-- grouped by other keys, so every roll-up pools counts exactly like this view.
-- Every ratio says which way is better (`-- higher is better` / `-- lower is better`):
-- leaderboards and comparisons rank by it, and a ratio without it is refused.
SELECT
    model, harness_level, task, -- @keys
    sum(episodes) AS episodes,
    CAST(sum(avs) AS DOUBLE) / nullif(sum(adjudicated), 0) AS avs_rate, -- higher is better
    CAST(sum(missing_harness_interventions) AS DOUBLE) / nullif(sum(with_interventions_trace), 0) AS m_hir, -- lower is better
    CAST(sum(missing_harness_incident) AS DOUBLE) / nullif(sum(with_interventions_trace), 0) AS m_hir_incidence, -- lower is better
    CAST(sum(requirements_verified) AS DOUBLE) / nullif(sum(requirements_total), 0) AS verification_autonomy, -- higher is better
    CAST(sum(attributed_failures) AS DOUBLE) / nullif(sum(failed_observations), 0) AS attribution_completeness, -- higher is better
    CAST(sum(recovered_tools) AS DOUBLE) / nullif(sum(failed_tools), 0) AS tool_recovery, -- higher is better
    CAST(sum(entropy_delta_sum) AS DOUBLE) / nullif(sum(with_entropy_trace), 0) AS entropy_delta, -- lower is better
    CAST(sum(context_used) AS DOUBLE) / nullif(sum(context_records), 0) AS context_use, -- higher is better
    CAST(sum(stale_agent_checks) AS DOUBLE) / nullif(sum(agent_checks), 0) AS stale_check_rate, -- lower is better
    CAST(sum(verify_then_edit) AS DOUBLE) / nullif(sum(with_passing_agent_check), 0) AS verify_then_edit_rate, -- lower is better
    CAST(sum(resolved) AS DOUBLE) / nullif(sum(correct_known), 0) AS pass_rate, -- higher is better
    CAST(sum(resolved) AS DOUBLE) / nullif(sum(attempted), 0) AS pass_rate_all, -- higher is better
    CAST(sum(accepted_known) AS DOUBLE) / nullif(sum(correct_known), 0) AS coverage, -- higher is better
    CAST(sum(accepted_wrong) AS DOUBLE) / nullif(sum(accepted_known), 0) AS selective_risk, -- lower is better
    CAST(sum(accepted_correct) AS DOUBLE) / nullif(sum(correct_known), 0) AS sound_completion, -- higher is better
    CAST(sum(accepted_wrong) AS DOUBLE) / nullif(sum(correct_known), 0) AS unsafe_completion, -- lower is better
    CAST(sum(budget_exhausted) AS DOUBLE) / nullif(sum(episodes), 0) AS budget_exhaustion, -- lower is better
    CAST(sum(repaired_from_wrong) AS DOUBLE) / nullif(sum(wrong_start_known), 0) AS repair_from_wrong, -- higher is better
    CAST(sum(regressed_from_correct) AS DOUBLE) / nullif(sum(correct_start_known), 0) AS regression_from_correct, -- lower is better
    sum(score_sum) / nullif(sum(scored), 0) AS mean_score -- higher is better
FROM episode_facts
GROUP BY model, harness_level, task -- @keys
ORDER BY model, harness_level, task -- @keys
