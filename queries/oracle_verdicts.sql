-- oracle_verdicts: the evaluator's verdict on each evaluated revision (docs/metrics.md §D).
-- Oracle records are checks with actor 'evaluator' and method 'oracle'; results other
-- than pass/fail are dropped first, then of several verdicts on one revision the
-- highest seq wins. y = 1 for correct (pass), 0 for wrong (fail).
SELECT model, harness_level, task, "cluster", episode_id, revision, seq,
       CASE WHEN result = 'pass' THEN 1 ELSE 0 END AS y
FROM (
    SELECT model, harness_level, task, "cluster", episode_id, revision, seq, result,
           row_number() OVER (PARTITION BY episode_id, revision ORDER BY seq DESC) AS pick
    FROM checks
    WHERE actor = 'evaluator' AND method = 'oracle' AND result IN ('pass', 'fail')
)
WHERE pick = 1
