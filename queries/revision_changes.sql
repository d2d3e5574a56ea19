-- revision_changes: where each episode's held correctness changes (docs/metrics.md §D),
-- the per-episode rows `revision_correctness` sums. One row per change, each naming
-- what changes at its revision: `d_n` 1 at the episode's first evaluated revision (it
-- enters the count there), `d_y` its verdict minus the previous one (the first verdict
-- minus 0), `d_ever` 1 at its first pass. From oracle verdicts only. Every window and
-- group is within one episode, so columnar segments store it computed ahead.
SELECT model, harness_level, task, "cluster", episode_id, revision, 0 AS d_n,
       y - coalesce(lag(y) OVER (PARTITION BY episode_id ORDER BY revision), 0) AS d_y, 0 AS d_ever
FROM oracle_verdicts
UNION ALL
SELECT model, harness_level, task, "cluster", episode_id, min(revision) AS revision, 1 AS d_n, 0 AS d_y,
       0 AS d_ever
FROM oracle_verdicts
GROUP BY model, harness_level, task, "cluster", episode_id
UNION ALL
SELECT model, harness_level, task, "cluster", episode_id, min(revision) AS revision, 0 AS d_n, 0 AS d_y,
       1 AS d_ever
FROM oracle_verdicts
WHERE y = 1
GROUP BY model, harness_level, task, "cluster", episode_id
