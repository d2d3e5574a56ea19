-- revision_correctness: correctness over revisions per cell (docs/metrics.md §D), from
-- oracle verdicts only (never outcome.correct).
-- Y(k,t) is the verdict at the highest evaluated revision s <= t of episode k: a state
-- is held until changed, also past the episode's own final revision, up to the cell's
-- largest evaluated revision. Episodes with no evaluated revision <= t are left out at
-- t; `n` counts those kept. Revisions where no episode is kept give no row.
--
-- The numbers are those of queries/revision_held.sql (which builds every episode's held
-- state at every revision, and which intervals and leaderboards resample; a test holds
-- the two equal), computed from where held states change instead (`revision_changes`,
-- per episode, stored ahead in every columnar segment): summed per (cell, revision) and
-- accumulated over revisions, that costs one pass over the changes and (cells x
-- revisions^2) for the accumulation, where the held rows cost episodes x revisions.
-- Sums of 0/1 values are exact in doubles, so s / n is bit for bit the avg.
WITH
deltas AS (
    SELECT model, harness_level, task, revision, sum(d_n) AS d_n, sum(d_y) AS d_y, sum(d_ever) AS d_ever
    FROM revision_changes
    GROUP BY model, harness_level, task, revision
),
-- Every evaluated revision has a row in revision_changes (d_y may be 0), so the
-- changes know each cell's last evaluated revision.
cell_revisions AS (
    SELECT model, harness_level, task, max(revision) AS cell_last
    FROM deltas
    GROUP BY model, harness_level, task
),
revision_numbers AS (
    SELECT unnest(range(0, (SELECT max(revision) + 1 FROM deltas))) AS t
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
