-- verifier_judgements: each verifier's winning verdict on each candidate whose truth
-- is known (docs/metrics.md §E). A candidate is (episode, revision); its truth y is the
-- oracle verdict at that exact revision, else, for the final revision only,
-- outcome.correct. Of several verdicts of one verifier on one candidate the highest
-- seq wins, with its score. Candidates with unknown truth are left out.
WITH
-- An aggregate, not row_number() over a window: a window fed by a shuffle came out
-- wrong on Ballista (docs/scale-out.md).
verdicts AS (
    SELECT verifier, episode_id, revision, max(seq) AS seq,
           last_value(verdict ORDER BY seq) AS verdict, last_value(score ORDER BY seq) AS score
    FROM checks
    WHERE actor = 'verifier'
    GROUP BY verifier, episode_id, revision
),
truth AS (
    SELECT episode_id, revision, y FROM oracle_verdicts
    UNION ALL
    SELECT e.episode_id, e.final_revision, CASE WHEN e.correct THEN 1 ELSE 0 END
    FROM episodes e
    WHERE e.correct IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM oracle_verdicts o
          WHERE o.episode_id = e.episode_id AND o.revision = e.final_revision)
)
SELECT v.verifier, e.episode_id, e.episode, v.revision, v.seq,
       CASE WHEN v.verdict = 'accept' THEN 1 ELSE 0 END AS accept,
       v.score, t.y
FROM verdicts v
JOIN truth t ON t.episode_id = v.episode_id AND t.revision = v.revision
JOIN episodes e ON e.episode_id = v.episode_id
