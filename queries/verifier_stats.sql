-- verifier_stats: per verifier, over its winning verdicts on candidates with known
-- truth (docs/metrics.md §E; `n` counts them): coverage = accepts / n; risk = accepts on
-- wrong / accepts; false_accept_rate = accepts on wrong / verdicts on wrong;
-- accuracy = verdicts agreeing with the truth / n.
SELECT verifier,
       count(*) AS n,
       CAST(sum(accept) AS DOUBLE) / nullif(count(*), 0) AS verifier_coverage,
       CAST(sum(accept * (1 - y)) AS DOUBLE) / nullif(sum(accept), 0) AS verifier_risk,
       CAST(sum(accept * (1 - y)) AS DOUBLE) / nullif(sum(1 - y), 0) AS false_accept_rate,
       CAST(sum(CASE WHEN accept = y THEN 1 ELSE 0 END) AS DOUBLE) / nullif(count(*), 0) AS verifier_accuracy
FROM verifier_judgements
GROUP BY verifier
ORDER BY verifier
