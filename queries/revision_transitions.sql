-- revision_transitions: per cell, over pairs of consecutive evaluated revisions of one
-- episode (docs/metrics.md §D; revision_pairs): repair_rate = wrong -> correct pairs / pairs
-- starting wrong (wrong -> wrong included); regression_rate = correct -> wrong / pairs
-- starting correct. Every cell has a row; a rate with no qualifying pair is NULL.
WITH
counts AS (
    SELECT model, harness_level, task,
           count(*) FILTER (WHERE y_before = 0) AS from_wrong,
           count(*) FILTER (WHERE y_before = 0 AND y_after = 1) AS repaired,
           count(*) FILTER (WHERE y_before = 1) AS from_correct,
           count(*) FILTER (WHERE y_before = 1 AND y_after = 0) AS regressed
    FROM revision_pairs
    GROUP BY model, harness_level, task
)
SELECT c.model, c.harness_level, c.task,
       CAST(k.repaired AS DOUBLE) / nullif(k.from_wrong, 0) AS repair_rate,
       CAST(k.regressed AS DOUBLE) / nullif(k.from_correct, 0) AS regression_rate
FROM (SELECT DISTINCT model, harness_level, task FROM episodes) c
LEFT JOIN counts k ON k.model = c.model AND k.harness_level = c.harness_level AND k.task = c.task
ORDER BY c.model, c.harness_level, c.task
