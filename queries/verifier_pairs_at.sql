-- verifier_pairs_at(c): verifier_pairs at a fixed coverage c in (0, 1] (docs/metrics.md §E).
-- Per pair i < j: the N candidates with known truth whose winning verdict from both
-- verifiers has a score (`n` = N); each verifier accepts its top m by score, m the
-- smallest integer >= c*N, computed exactly in decimal (c is read from its decimal
-- text as DECIMAL(38, 20), so 0.55 * 100 is 55 and 0.28000000001 * 25 rounds up to 8);
-- ties are broken by (episode label, revision, episode_id) ascending. threshold_i/_j is
-- the m-th score. Then n0..phi as in verifier_pairs, from those accepts. N = 0: no row.
-- The coverage placeholder is replaced by the argument of the table function, written
-- as the shortest decimal that round-trips; text in exponent form (c < 1e-4) does not
-- parse as a decimal string and is cast from the floating-point literal instead.
WITH
params AS (
    SELECT coalesce(try_cast(':coverage' AS DECIMAL(38, 20)),
                    CAST(:coverage AS DECIMAL(38, 20))) AS c
),
scored AS (SELECT * FROM verifier_judgements WHERE score IS NOT NULL),
scored_pairs AS (
    SELECT i.verifier AS verifier_i, j.verifier AS verifier_j, i.episode_id, i.episode, i.revision, i.y,
           i.score AS score_i, j.score AS score_j
    FROM scored i
    JOIN scored j ON j.episode_id = i.episode_id AND j.revision = i.revision AND i.verifier < j.verifier
),
ranked AS (
    SELECT b.*,
           count(*) OVER (PARTITION BY verifier_i, verifier_j) AS n,
           row_number() OVER (PARTITION BY verifier_i, verifier_j
                              ORDER BY score_i DESC, episode, revision, episode_id) AS rank_i,
           row_number() OVER (PARTITION BY verifier_i, verifier_j
                              ORDER BY score_j DESC, episode, revision, episode_id) AS rank_j
    FROM scored_pairs b
),
accepted AS (
    SELECT r.*, CAST(ceil(p.c * r.n) AS BIGINT) AS m
    FROM ranked r CROSS JOIN params p
),
counts AS (
    SELECT verifier_i, verifier_j, max(n) AS n,
           max(CASE WHEN rank_i = m THEN score_i END) AS threshold_i,
           max(CASE WHEN rank_j = m THEN score_j END) AS threshold_j,
           count(*) FILTER (WHERE y = 0) AS n0,
           count(*) FILTER (WHERE y = 0 AND rank_i <= m AND rank_j <= m) AS n11,
           count(*) FILTER (WHERE y = 0 AND rank_i <= m AND rank_j > m) AS n10,
           count(*) FILTER (WHERE y = 0 AND rank_i > m AND rank_j <= m) AS n01,
           count(*) FILTER (WHERE y = 0 AND rank_i > m AND rank_j > m) AS n00
    FROM accepted
    GROUP BY verifier_i, verifier_j
)
SELECT verifier_i, verifier_j, n, threshold_i, threshold_j, n0, n11, n10, n01, n00,
       CAST(n11 + n10 AS DOUBLE) / nullif(n0, 0) AS f_i,
       CAST(n11 + n01 AS DOUBLE) / nullif(n0, 0) AS f_j,
       CAST(n11 AS DOUBLE) / nullif(n0, 0) AS joint_false_accept,
       CAST(n11 AS DOUBLE) / nullif(n0, 0)
         - (CAST(n11 + n10 AS DOUBLE) / nullif(n0, 0)) * (CAST(n11 + n01 AS DOUBLE) / nullif(n0, 0)) AS excess_joint,
       CASE WHEN n0 = 0 THEN NULL ELSE
           (CAST(n11 AS DOUBLE) * n00 - CAST(n10 AS DOUBLE) * n01)
           / nullif(sqrt(CAST(n11 + n10 AS DOUBLE) * (n01 + n00) * (n11 + n01) * (n10 + n00)), 0)
       END AS phi
FROM counts
ORDER BY verifier_i, verifier_j
