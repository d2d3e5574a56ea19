-- revision_correctness: correctness over revisions per cell (metrics-v1 D), from
-- oracle verdicts only (never outcome.correct).
-- Y(k,t) is the verdict at the highest evaluated revision s <= t of episode k: a state
-- is held until changed, also past the episode's own final revision, up to the cell's
-- largest evaluated revision. Episodes with no evaluated revision <= t are left out at
-- t; `n` counts those kept. Revisions where no episode is kept give no row.
WITH
cell_span AS (
    SELECT model, harness_level, task, max(revision) AS last_revision
    FROM oracle_verdicts
    GROUP BY model, harness_level, task
),
revisions AS (
    SELECT model, harness_level, task, unnest(range(0, last_revision + 1)) AS t
    FROM cell_span
),
held AS (
    SELECT r.model, r.harness_level, r.task, r.t, v.episode_id,
           last_value(v.y ORDER BY v.revision) AS y_t,
           max(v.y) AS ever
    FROM revisions r
    JOIN oracle_verdicts v
      ON v.model = r.model AND v.harness_level = r.harness_level AND v.task = r.task
     AND v.revision <= r.t
    GROUP BY r.model, r.harness_level, r.task, r.t, v.episode_id
)
SELECT model, harness_level, task, t AS revision,
       count(*) AS n,
       avg(CAST(y_t AS DOUBLE)) AS current_correctness,
       avg(CAST(ever AS DOUBLE)) AS ever_correct,
       avg(CAST(ever AS DOUBLE)) - avg(CAST(y_t AS DOUBLE)) AS lost_correctness
FROM held
GROUP BY model, harness_level, task, t
ORDER BY model, harness_level, task, revision
