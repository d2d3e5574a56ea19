-- revision_held: correctness over revisions (docs/metrics.md §D) from the held state of
-- every episode at every revision, from oracle verdicts only (never outcome.correct).
-- Not a view: the definition the `revision_correctness` view (queries/
-- revision_correctness.sql, which computes the same numbers from where the held states
-- change) is tested against, and the rows intervals and leaderboards resample.
-- Y(k,t) is the verdict at the highest evaluated revision s <= t of episode k: a state
-- is held until changed, also past the episode's own final revision, up to the cell's
-- largest evaluated revision. Episodes with no evaluated revision <= t are left out at
-- t; `n` counts those kept. Revisions where no episode is kept give no row.
--
-- Written without unnesting a range per row of a per-cell GROUP BY: DataFusion 55
-- carries the grouped key's uniqueness through the unnest that multiplies its rows,
-- then drops `t` from the final GROUP BY when a query reads few columns (count(*) over
-- this view came out short; docs/scale-out.md has the two-row reproduction). Each
-- verdict carries its cell's last evaluated revision (a window) instead.
--
-- Intervals and leaderboards group by other keys and read `held` per episode
-- (`views::revision_rows`), with the line marked `@keys`
-- partitioned by their keys, the line marked `@filter` filtered, and everything after
-- the line marked `@rows` replaced by their own projection.
WITH
verdicts AS (
    SELECT model, harness_level, task, "cluster", episode_id, revision, y,
           max(revision) OVER (PARTITION BY model, harness_level, task) AS cell_last -- @keys
    FROM oracle_verdicts -- @filter
),
revision_numbers AS (
    SELECT unnest(range(0, (SELECT max(revision) + 1 FROM oracle_verdicts))) AS t
),
held AS (
    SELECT v.model, v.harness_level, v.task, v."cluster", r.t, v.episode_id,
           last_value(v.y ORDER BY v.revision) AS y_t,
           max(v.y) AS ever
    FROM verdicts v
    JOIN revision_numbers r ON v.revision <= r.t AND r.t <= v.cell_last
    GROUP BY v.model, v.harness_level, v.task, v."cluster", r.t, v.episode_id
) -- @rows
SELECT model, harness_level, task, t AS revision,
       count(*) AS n,
       avg(CAST(y_t AS DOUBLE)) AS current_correctness,
       avg(CAST(ever AS DOUBLE)) AS ever_correct,
       avg(CAST(ever AS DOUBLE)) - avg(CAST(y_t AS DOUBLE)) AS lost_correctness
FROM held
GROUP BY model, harness_level, task, t
ORDER BY model, harness_level, task, revision
