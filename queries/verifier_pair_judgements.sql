-- verifier_pair_judgements: one row per pair of verifiers i < j (by name) and candidate
-- both judged (docs/metrics.md §E), with both winning verdicts and the truth y.
-- verifier_pairs counts these; intervals resample them by cluster.
SELECT e.model, e.harness_level, e.task, e."cluster", i.episode_id, i.revision,
       i.verifier AS verifier_i, j.verifier AS verifier_j,
       i.accept AS accept_i, j.accept AS accept_j, i.y
FROM verifier_judgements i
JOIN verifier_judgements j
  ON j.episode_id = i.episode_id AND j.revision = i.revision AND i.verifier < j.verifier
JOIN episodes e ON e.episode_id = i.episode_id
