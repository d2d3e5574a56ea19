-- revision_correctness: correctness over revisions per cell (docs/metrics.md §D), from
-- oracle verdicts only (never outcome.correct).
-- Y(k,t) is the verdict at the highest evaluated revision s <= t of episode k: a state
-- is held until changed, also past the episode's own final revision, up to the cell's
-- largest evaluated revision. Episodes with no evaluated revision <= t are left out at
-- t; `n` counts those kept. Revisions where no episode is kept give no row.
--
-- The numbers are those of queries/revision_held.sql (which builds every episode's held
-- state at every revision, and which intervals and leaderboards resample; a test holds
-- the two equal), computed from where held states change instead: an episode enters
-- `n` at its first evaluated revision, its verdict changes `y` by the difference from
-- its previous verdict, and `ever` turns 1 at its first pass. Summed per (cell,
-- revision) and accumulated over revisions, that costs one pass over the verdicts and
-- (cells x revisions^2) for the accumulation, where the held rows cost episodes x
-- revisions. Sums of 0/1 values are exact in doubles, so s / n is bit for bit the avg.
-- No window reads another window's output (Ballista computes that out of order,
-- docs/scale-out.md): the one window, lag(), reads oracle_verdicts.
WITH
changes AS (
    SELECT model, harness_level, task, revision, 0 AS d_n,
           y - coalesce(lag(y) OVER (PARTITION BY episode_id ORDER BY revision), 0) AS d_y, 0 AS d_ever
    FROM oracle_verdicts
    UNION ALL
    SELECT model, harness_level, task, min(revision) AS revision, 1 AS d_n, 0 AS d_y, 0 AS d_ever
    FROM oracle_verdicts
    GROUP BY model, harness_level, task, episode_id
    UNION ALL
    SELECT model, harness_level, task, min(revision) AS revision, 0 AS d_n, 0 AS d_y, 1 AS d_ever
    FROM oracle_verdicts
    WHERE y = 1
    GROUP BY model, harness_level, task, episode_id
),
deltas AS (
    SELECT model, harness_level, task, revision, sum(d_n) AS d_n, sum(d_y) AS d_y, sum(d_ever) AS d_ever
    FROM changes
    GROUP BY model, harness_level, task, revision
),
cell_revisions AS (
    SELECT model, harness_level, task, max(revision) AS cell_last
    FROM oracle_verdicts
    GROUP BY model, harness_level, task
),
revision_numbers AS (
    SELECT unnest(range(0, (SELECT max(revision) + 1 FROM oracle_verdicts))) AS t
),
held AS (
    SELECT c.model, c.harness_level, c.task, r.t,
           sum(d.d_n) AS n, sum(d.d_y) AS now_sum, sum(d.d_ever) AS ever_sum
    FROM cell_revisions c
    JOIN revision_numbers r ON r.t <= c.cell_last
    JOIN deltas d ON d.model = c.model AND d.harness_level = c.harness_level AND d.task = c.task
                 AND d.revision <= r.t
    GROUP BY c.model, c.harness_level, c.task, r.t
)
SELECT model, harness_level, task, t AS revision,
       CAST(n AS BIGINT) AS n,
       CAST(now_sum AS DOUBLE) / CAST(n AS DOUBLE) AS current_correctness,
       CAST(ever_sum AS DOUBLE) / CAST(n AS DOUBLE) AS ever_correct,
       CAST(ever_sum AS DOUBLE) / CAST(n AS DOUBLE) - CAST(now_sum AS DOUBLE) / CAST(n AS DOUBLE) AS lost_correctness
FROM held
ORDER BY model, harness_level, task, revision
