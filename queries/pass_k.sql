-- pass@k and pass^k per model and harness level (docs/metrics.md §K): the body of the
-- table function `pass_k(k)`; `:k` is replaced by k.
--
-- Per task (model, harness level, task) with n runs whose `correct` is known and c of
-- them correct, the unbiased estimators over all ways of drawing k of the n runs:
--   pass@k = 1 - C(n-c, k) / C(n, k)   (at least one of the k is correct)
--   pass^k = C(c, k) / C(n, k)          (all k are correct)
-- as products: C(a, k) / C(n, k) = prod_{i<k} (a - i) / (n - i). Each row's value is the
-- mean over its tasks with n >= k; tasks with fewer known runs are left out and counted
-- in `tasks_short`. Intervals resample task clusters (`cluster_ci`).
WITH runs AS (
    SELECT model, harness_level, task, coalesce("cluster", task) AS "cluster",
           count(*) AS n,
           sum(CASE WHEN correct THEN 1 ELSE 0 END) AS c
    FROM episodes
    WHERE correct IS NOT NULL
    GROUP BY model, harness_level, task, coalesce("cluster", task)
),
per_task AS (
    SELECT r.model, r.harness_level, r.task, r."cluster",
           CASE WHEN r.n - r.c < :k THEN 1.0
                ELSE 1.0 - exp(sum(ln(CAST(r.n - r.c - g.value AS DOUBLE) / CAST(r.n - g.value AS DOUBLE)))) END AS pass_at_k,
           CASE WHEN r.c < :k THEN 0.0
                ELSE exp(sum(ln(CAST(r.c - g.value AS DOUBLE) / CAST(r.n - g.value AS DOUBLE)))) END AS pass_hat_k
    FROM runs r
    CROSS JOIN generate_series(0, :k - 1) AS g
    WHERE r.n >= :k
    GROUP BY r.model, r.harness_level, r.task, r."cluster", r.n, r.c
),
short AS (
    SELECT model, harness_level, count(*) AS tasks_short FROM runs WHERE n < :k GROUP BY model, harness_level
),
pooled AS (
    SELECT model, harness_level,
           count(*) AS tasks,
           avg(pass_at_k) AS pass_at_k,
           avg(pass_hat_k) AS pass_hat_k,
           cluster_ci(pass_at_k, 1.0, "cluster") AS at_ci,
           cluster_ci(pass_hat_k, 1.0, "cluster") AS hat_ci
    FROM per_task
    GROUP BY model, harness_level
)
SELECT p.model, p.harness_level, CAST(:k AS BIGINT) AS k, p.tasks,
       coalesce(s.tasks_short, 0) AS tasks_short,
       p.pass_at_k, p.at_ci['lo'] AS pass_at_k_lo, p.at_ci['hi'] AS pass_at_k_hi,
       p.pass_hat_k, p.hat_ci['lo'] AS pass_hat_k_lo, p.hat_ci['hi'] AS pass_hat_k_hi,
       p.at_ci['clusters'] AS clusters
FROM pooled p
LEFT JOIN short s ON s.model = p.model AND s.harness_level = p.harness_level
ORDER BY p.model, p.harness_level
