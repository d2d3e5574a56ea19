-- oracle_verdicts: the evaluator's verdict on each evaluated revision (docs/metrics.md §D).
-- Oracle records are checks with actor 'evaluator' and method 'oracle'; results other
-- than pass/fail are dropped first, then of several verdicts on one revision the
-- highest seq wins. y = 1 for correct (pass), 0 for wrong (fail).
-- An aggregate, not row_number() over a window: a window computed after another
-- window's shuffle came out in the wrong order on Ballista (docs/scale-out.md).
SELECT model, harness_level, task, "cluster", episode_id, revision, max(seq) AS seq,
       CASE WHEN last_value(result ORDER BY seq) = 'pass' THEN 1 ELSE 0 END AS y
FROM checks
WHERE actor = 'evaluator' AND method = 'oracle' AND result IN ('pass', 'fail')
GROUP BY model, harness_level, task, "cluster", episode_id, revision
