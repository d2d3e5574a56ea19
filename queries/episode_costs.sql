-- episode_costs: one row per episode with what it cost and how long it ran
-- (docs/metrics.md §L). A cost the log states (`outcome.cost.usd`) is observed; else
-- one is derived from the episode's tokens and the price table `model_prices` (the
-- shipped one, datasets/model_prices.json, or EPISTORE_PRICES=FILE), which holds each
-- model of the store priced by the longest prefix of its name (after any `provider/`)
-- the price file lists,
-- input tokens at the input price except those the log says were read from or written
-- to a prompt cache (`tokens_cache_read`, `tokens_cache_write`), at the
-- table's cache prices (the input price where it has none), output tokens at the output
-- price, in microdollars (tokens x USD per million tokens). No stated cost, no tokens
-- or no price: NULL, never 0. The duration is `outcome.cost.wall_ms`, else ended_at - started_at.
WITH priced AS (
    SELECT model, input_usd_per_mtok, output_usd_per_mtok,
           coalesce(cache_read_usd_per_mtok, input_usd_per_mtok) AS cache_read_usd_per_mtok,
           coalesce(cache_write_usd_per_mtok, input_usd_per_mtok) AS cache_write_usd_per_mtok,
           version
    FROM model_prices
),
tokens AS (
    SELECT e.*, coalesce(e.tokens_cache_read, 0) AS cache_read, coalesce(e.tokens_cache_write, 0) AS cache_write
    FROM episodes e
),
costed AS (
    SELECT e.model, e.harness_level, e.task, e."cluster", e.episode_id,
           e.tokens_in, e.tokens_out, e.cost_usd AS stated_cost_usd,
           CAST(round(CAST(greatest(e.tokens_in - e.cache_read - e.cache_write, 0) AS DOUBLE) * q.input_usd_per_mtok
                      + CAST(e.cache_read AS DOUBLE) * q.cache_read_usd_per_mtok
                      + CAST(e.cache_write AS DOUBLE) * q.cache_write_usd_per_mtok
                      + CAST(e.tokens_out AS DOUBLE) * q.output_usd_per_mtok) AS BIGINT) AS derived_micro_usd,
           q.version AS price_version,
           coalesce(e.wall_ms,
                    CAST(date_part('epoch', e.ended_at) - date_part('epoch', e.started_at) AS DOUBLE) * 1000.0)
               AS duration_ms
    FROM tokens e
    LEFT JOIN priced q ON q.model = e.model
)
SELECT model, harness_level, task, "cluster", episode_id, tokens_in, tokens_out,
       CASE WHEN stated_cost_usd IS NOT NULL THEN CAST(round(stated_cost_usd * 1000000.0) AS BIGINT)
            ELSE derived_micro_usd END AS cost_micro_usd,
       CASE WHEN stated_cost_usd IS NOT NULL THEN stated_cost_usd
            ELSE CAST(derived_micro_usd AS DOUBLE) / 1000000.0 END AS cost_usd,
       CASE WHEN stated_cost_usd IS NOT NULL THEN 'observed'
            WHEN derived_micro_usd IS NOT NULL THEN 'derived' END AS cost_grade,
       CASE WHEN stated_cost_usd IS NULL AND derived_micro_usd IS NOT NULL THEN price_version END AS price_version,
       duration_ms,
       -- components of the cost metrics (docs/metrics.md §L)
       1 AS episodes,
       CASE WHEN stated_cost_usd IS NOT NULL OR derived_micro_usd IS NOT NULL THEN 1 ELSE 0 END AS cost_known,
       coalesce(stated_cost_usd, CAST(derived_micro_usd AS DOUBLE) / 1000000.0, 0.0) AS cost_usd_sum,
       CASE WHEN duration_ms IS NOT NULL THEN 1 ELSE 0 END AS duration_known,
       coalesce(duration_ms, 0.0) AS duration_ms_sum
FROM costed
