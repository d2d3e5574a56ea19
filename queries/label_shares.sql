-- label_shares: one row per cell and label, all five labels (a label no episode has
-- gets 0 episodes and share 0). share = episodes with the label / adjudicated episodes
-- in the cell (label not NULL, docs/metrics.md §I): a cell nobody judged has share NULL.
WITH labels(label, position) AS (
    VALUES ('autonomous_verified_success', 1), ('assisted_verified_success', 2),
           ('unverified_success', 3), ('failed', 4), ('unsafe_invalid', 5)
),
cells AS (
    SELECT model, harness_level, task, count(label) AS total
    FROM episodes GROUP BY model, harness_level, task
),
counts AS (
    SELECT model, harness_level, task, label, count(*) AS n
    FROM episodes WHERE label IS NOT NULL GROUP BY model, harness_level, task, label
)
SELECT c.model, c.harness_level, c.task, l.label,
       coalesce(k.n, 0) AS episodes,
       CAST(coalesce(k.n, 0) AS DOUBLE) / nullif(c.total, 0) AS share
FROM cells c
CROSS JOIN labels l
LEFT JOIN counts k
       ON k.model = c.model AND k.harness_level = c.harness_level AND k.task = c.task AND k.label = l.label
ORDER BY c.model, c.harness_level, c.task, l.position
