-- localisation_facts: one row per episode with a non-empty outcome.fault_locations
-- (docs/metrics.md §F). Predictions are attribution records with a rank and a location; a
-- prediction matches a truth region when the paths are equal and the inclusive line
-- ranges overlap (a location without lines is the whole file: location_overlaps).
-- rank_all: the rank needed to match every region (NULL when some region is never
-- matched); rank_any: the best rank matching some region (NULL when none does).
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
           CASE WHEN count(best_rank) = count(*) THEN max(best_rank) END AS rank_all,
           min(best_rank) AS rank_any
    FROM regions
    GROUP BY episode_id
)
SELECT e.model, e.harness_level, e.task, e."cluster", p.episode_id, p.rank_all, p.rank_any
FROM per_episode p JOIN episodes e ON e.episode_id = p.episode_id
