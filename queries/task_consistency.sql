-- task_consistency: how alike repeated runs of one task are: one row per model,
-- harness level and task with at least two runs (docs/metrics.md §K):
--   outcome_consistency: the chance that two different runs of a task agree on
--     `correct` (c of n judged runs correct: (c(c-1) + (n-c)(n-c-1)) / (n(n-1))),
--     over its n >= 2 judged runs;
--   trajectory_consistency: 1 - the Jensen-Shannon divergence (base 2, 0 for the
--     same mix of tools, 1 for disjoint tools) between two runs' tool-call
--     distributions (each tool's share of the run's calls), the mean over every pair
--     of runs of a task with calls.
-- NULL where the task has fewer than two judged runs (runs with calls).
WITH judged AS (
    SELECT model, harness_level, task, coalesce("cluster", task) AS "cluster",
           count(*) AS n, sum(CASE WHEN correct THEN 1 ELSE 0 END) AS c
    FROM episodes
    WHERE correct IS NOT NULL
    GROUP BY model, harness_level, task, coalesce("cluster", task)
),
outcome_tasks AS (
    SELECT model, harness_level, task, "cluster",
           CAST(c * (c - 1) + (n - c) * (n - c - 1) AS DOUBLE) / CAST(n * (n - 1) AS DOUBLE) AS agree
    FROM judged
    WHERE n >= 2
),
calls AS (
    SELECT episode_id, tool, count(*) AS k FROM tools GROUP BY episode_id, tool
),
shares AS (
    SELECT episode_id, tool, CAST(k AS DOUBLE) / CAST(sum(k) OVER (PARTITION BY episode_id) AS DOUBLE) AS p
    FROM calls
),
runs AS (
    SELECT model, harness_level, task, coalesce("cluster", task) AS "cluster", episode_id
    FROM episodes
    WHERE episode_id IN (SELECT episode_id FROM calls)
),
pairs AS (
    SELECT a.model, a.harness_level, a.task, a."cluster", a.episode_id AS ea, b.episode_id AS eb
    FROM runs a
    JOIN runs b ON a.model = b.model AND a.harness_level = b.harness_level AND a.task = b.task
               AND a.episode_id < b.episode_id
),
pair_tools AS (
    SELECT p.model, p.harness_level, p.task, p."cluster", p.ea, p.eb, s.tool, s.p AS pa, 0.0 AS pb
    FROM pairs p JOIN shares s ON s.episode_id = p.ea
    UNION ALL
    SELECT p.model, p.harness_level, p.task, p."cluster", p.ea, p.eb, s.tool, 0.0 AS pa, s.p AS pb
    FROM pairs p JOIN shares s ON s.episode_id = p.eb
),
pair_mix AS (
    SELECT model, harness_level, task, "cluster", ea, eb, tool, sum(pa) AS pa, sum(pb) AS pb
    FROM pair_tools
    GROUP BY model, harness_level, task, "cluster", ea, eb, tool
),
divergence AS (
    SELECT model, harness_level, task, "cluster", ea, eb,
           sum(CASE WHEN pa > 0 THEN 0.5 * pa * log2(pa / ((pa + pb) / 2.0)) ELSE 0.0 END
             + CASE WHEN pb > 0 THEN 0.5 * pb * log2(pb / ((pa + pb) / 2.0)) ELSE 0.0 END) AS jsd
    FROM pair_mix
    GROUP BY model, harness_level, task, "cluster", ea, eb
),
trajectory_tasks AS (
    SELECT model, harness_level, task, "cluster", 1.0 - avg(jsd) AS same
    FROM divergence
    GROUP BY model, harness_level, task, "cluster"
)
SELECT coalesce(o.model, t.model) AS model, coalesce(o.harness_level, t.harness_level) AS harness_level,
       coalesce(o.task, t.task) AS task, coalesce(o."cluster", t."cluster") AS "cluster",
       o.agree AS outcome_agreement, t.same AS trajectory_similarity
FROM outcome_tasks o
FULL OUTER JOIN trajectory_tasks t
  ON o.model = t.model AND o.harness_level = t.harness_level AND o.task = t.task
