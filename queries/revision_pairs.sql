-- revision_pairs: one row per pair of consecutive evaluated revisions of one episode
-- (docs/metrics.md §D), with the oracle verdict before (y_before) and after (y_after).
-- revision_transitions counts these per cell; intervals resample them by cluster.
SELECT model, harness_level, task, "cluster", episode_id, revision_before, revision, y_before, y_after
FROM (
    SELECT model, harness_level, task, "cluster", episode_id, revision,
           lag(revision) OVER (PARTITION BY episode_id ORDER BY revision) AS revision_before,
           lag(y) OVER (PARTITION BY episode_id ORDER BY revision) AS y_before,
           y AS y_after
    FROM oracle_verdicts
)
WHERE y_before IS NOT NULL
