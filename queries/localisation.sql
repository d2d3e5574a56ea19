-- localisation: fault localisation per cell (docs/metrics.md §F), over episodes with a
-- non-empty outcome.fault_locations (`n`; localisation_facts). topN_all: every truth
-- region matched by a prediction of rank <= N; topN_any: at least one. Every cell has
-- a row; with n = 0 the shares are NULL.
WITH
counts AS (
    SELECT model, harness_level, task,
           count(*) AS n,
           count(*) FILTER (WHERE rank_all <= 1) AS all1, count(*) FILTER (WHERE rank_any <= 1) AS any1,
           count(*) FILTER (WHERE rank_all <= 3) AS all3, count(*) FILTER (WHERE rank_any <= 3) AS any3,
           count(*) FILTER (WHERE rank_all <= 5) AS all5, count(*) FILTER (WHERE rank_any <= 5) AS any5
    FROM localisation_facts
    GROUP BY model, harness_level, task
)
SELECT c.model, c.harness_level, c.task,
       coalesce(k.n, 0) AS n,
       CAST(k.all1 AS DOUBLE) / nullif(k.n, 0) AS top1_all, CAST(k.any1 AS DOUBLE) / nullif(k.n, 0) AS top1_any,
       CAST(k.all3 AS DOUBLE) / nullif(k.n, 0) AS top3_all, CAST(k.any3 AS DOUBLE) / nullif(k.n, 0) AS top3_any,
       CAST(k.all5 AS DOUBLE) / nullif(k.n, 0) AS top5_all, CAST(k.any5 AS DOUBLE) / nullif(k.n, 0) AS top5_any
FROM (SELECT DISTINCT model, harness_level, task FROM episodes) c
LEFT JOIN counts k ON k.model = c.model AND k.harness_level = c.harness_level AND k.task = c.task
ORDER BY c.model, c.harness_level, c.task
