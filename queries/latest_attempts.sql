-- latest_attempts: the episodes table restricted to the latest attempt of each
-- (cell, seed); of several episodes with that attempt, the first by episode_id.
-- Episodes without a seed form one (cell, seed) group of their own per cell.
SELECT * EXCLUDE (pick)
FROM (
    SELECT *, row_number() OVER (PARTITION BY model, harness_level, task, seed
                                 ORDER BY attempt DESC, episode_id) AS pick
    FROM episodes
)
WHERE pick = 1
ORDER BY model, harness_level, task, seed
