-- posture_shares: one row per cell and evidence posture (docs/format.md §6.3), all five postures (one no episode has
-- gets 0 episodes and share 0). share = episodes in the posture / episodes in the cell.
WITH postures(posture, position) AS (
    VALUES ('current', 1), ('stale', 2), ('failure', 3), ('gap', 4), ('unknown', 5)
),
cells AS (
    SELECT model, harness_level, task, count(*) AS total
    FROM episodes GROUP BY model, harness_level, task
),
counts AS (
    SELECT model, harness_level, task, posture, count(*) AS n
    FROM episodes GROUP BY model, harness_level, task, posture
)
SELECT c.model, c.harness_level, c.task, l.posture,
       coalesce(k.n, 0) AS episodes,
       CAST(coalesce(k.n, 0) AS DOUBLE) / nullif(c.total, 0) AS share
FROM cells c
CROSS JOIN postures l
LEFT JOIN counts k
       ON k.model = c.model AND k.harness_level = c.harness_level AND k.task = c.task AND k.posture = l.posture
ORDER BY c.model, c.harness_level, c.task, l.position
