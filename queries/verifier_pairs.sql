-- verifier_pairs: per pair of verifiers i < j (by name), over candidates both judged
-- (docs/metrics.md §E; verifier_pair_judgements). Among the n0 wrong candidates: n11 both accept, n10 only i, n01 only
-- j, n00 neither. f_i, f_j: false-accept rates; joint_false_accept = n11/n0;
-- excess_joint D_ij = n11/n0 - f_i*f_j; phi = the phi coefficient of the 2x2 table.
-- Every pair of verifiers with judgements has a row; all ratios are NULL when n0 = 0,
-- and phi is NULL when its denominator is 0.
WITH
names AS (SELECT DISTINCT verifier FROM verifier_judgements),
counts AS (
    SELECT verifier_i, verifier_j,
           count(*) FILTER (WHERE y = 0) AS n0,
           count(*) FILTER (WHERE y = 0 AND accept_i = 1 AND accept_j = 1) AS n11,
           count(*) FILTER (WHERE y = 0 AND accept_i = 1 AND accept_j = 0) AS n10,
           count(*) FILTER (WHERE y = 0 AND accept_i = 0 AND accept_j = 1) AS n01,
           count(*) FILTER (WHERE y = 0 AND accept_i = 0 AND accept_j = 0) AS n00
    FROM verifier_pair_judgements
    GROUP BY verifier_i, verifier_j
),
pairs AS (
    SELECT a.verifier AS verifier_i, b.verifier AS verifier_j,
           coalesce(c.n0, 0) AS n0, coalesce(c.n11, 0) AS n11, coalesce(c.n10, 0) AS n10,
           coalesce(c.n01, 0) AS n01, coalesce(c.n00, 0) AS n00
    FROM names a
    JOIN names b ON a.verifier < b.verifier
    LEFT JOIN counts c ON c.verifier_i = a.verifier AND c.verifier_j = b.verifier
)
SELECT verifier_i, verifier_j, n0, n11, n10, n01, n00,
       CAST(n11 + n10 AS DOUBLE) / nullif(n0, 0) AS f_i,
       CAST(n11 + n01 AS DOUBLE) / nullif(n0, 0) AS f_j,
       CAST(n11 AS DOUBLE) / nullif(n0, 0) AS joint_false_accept,
       CAST(n11 AS DOUBLE) / nullif(n0, 0)
         - (CAST(n11 + n10 AS DOUBLE) / nullif(n0, 0)) * (CAST(n11 + n01 AS DOUBLE) / nullif(n0, 0)) AS excess_joint,
       CASE WHEN n0 = 0 THEN NULL ELSE
           (CAST(n11 AS DOUBLE) * n00 - CAST(n10 AS DOUBLE) * n01)
           / nullif(sqrt(CAST(n11 + n10 AS DOUBLE) * (n01 + n00) * (n11 + n01) * (n10 + n00)), 0)
       END AS phi
FROM pairs
ORDER BY verifier_i, verifier_j
