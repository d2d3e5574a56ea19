-- run_consistency: how alike repeated runs of one task are, per model and harness
-- level (docs/metrics.md §K): the means over tasks of `task_consistency`
-- (`outcome_tasks` tasks with two judged runs or more, `trajectory_tasks` with two
-- runs with tool calls or more). Intervals over task clusters: `cluster_ci(
-- outcome_agreement, 1.0, "cluster")` over `task_consistency`.
SELECT model, harness_level,
       count(outcome_agreement) AS outcome_tasks, avg(outcome_agreement) AS outcome_consistency,
       count(trajectory_similarity) AS trajectory_tasks, avg(trajectory_similarity) AS trajectory_consistency
FROM task_consistency
GROUP BY model, harness_level
