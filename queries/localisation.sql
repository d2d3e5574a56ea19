-- localisation: fault localisation per cell (metrics-v1 F), over episodes with a
-- non-empty outcome.fault_locations (`n`). Predictions are attribution records with a
-- rank and a location; a prediction matches a truth region when the paths are equal and
-- the inclusive line ranges overlap (a location without lines is the whole file:
-- location_overlaps). topN_all: every truth region matched by a prediction of rank <= N;
-- topN_any: at least one. Every cell has a row; with n = 0 the shares are NULL.
WITH
regions AS (
    SELECT t.episode_id, t.location, min(p.rank) AS best_rank
    FROM (SELECT DISTINCT episode_id, location FROM fault_locations) t
    LEFT JOIN (SELECT episode_id, rank, location FROM attributions
               WHERE rank IS NOT NULL AND location IS NOT NULL) p
      ON p.episode_id = t.episode_id AND location_overlaps(p.location, t.location)
    GROUP BY t.episode_id, t.location
),
per_episode AS (
    SELECT episode_id,
           -- the rank needed to match every region (NULL when some region is never matched)
           CASE WHEN count(best_rank) = count(*) THEN max(best_rank) END AS rank_all,
           min(best_rank) AS rank_any
    FROM regions
    GROUP BY episode_id
),
counts AS (
    SELECT e.model, e.harness_level, e.task,
           count(*) AS n,
           count(*) FILTER (WHERE p.rank_all <= 1) AS all1, count(*) FILTER (WHERE p.rank_any <= 1) AS any1,
           count(*) FILTER (WHERE p.rank_all <= 3) AS all3, count(*) FILTER (WHERE p.rank_any <= 3) AS any3,
           count(*) FILTER (WHERE p.rank_all <= 5) AS all5, count(*) FILTER (WHERE p.rank_any <= 5) AS any5
    FROM per_episode p JOIN episodes e ON e.episode_id = p.episode_id
    GROUP BY e.model, e.harness_level, e.task
)
SELECT c.model, c.harness_level, c.task,
       coalesce(k.n, 0) AS n,
       CAST(k.all1 AS DOUBLE) / nullif(k.n, 0) AS top1_all, CAST(k.any1 AS DOUBLE) / nullif(k.n, 0) AS top1_any,
       CAST(k.all3 AS DOUBLE) / nullif(k.n, 0) AS top3_all, CAST(k.any3 AS DOUBLE) / nullif(k.n, 0) AS top3_any,
       CAST(k.all5 AS DOUBLE) / nullif(k.n, 0) AS top5_all, CAST(k.any5 AS DOUBLE) / nullif(k.n, 0) AS top5_any
FROM (SELECT DISTINCT model, harness_level, task FROM episodes) c
LEFT JOIN counts k ON k.model = c.model AND k.harness_level = c.harness_level AND k.task = c.task
ORDER BY c.model, c.harness_level, c.task
