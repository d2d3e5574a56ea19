//! McNemar's exact test, for two entries with one binary outcome per shared cluster.

/// Two entries' binary outcomes on the clusters both have: only the discordant
/// clusters carry information.
#[derive(Clone, Debug, PartialEq)]
pub struct McNemar {
    /// Clusters where the first entry succeeded and the second failed.
    pub first_only: u64,
    /// Clusters where the second succeeded and the first failed.
    pub second_only: u64,
    /// Shared clusters with a binary outcome on both sides (concordant included).
    pub pairs: u64,
    /// Two-sided exact p-value: under the null each discordant cluster is a fair coin,
    /// `min(1, 2 P(X <= min(b, c)))` with X ~ Binomial(b + c, 1/2); 1 with no discordant
    /// cluster.
    pub p_value: f64,
}

/// McNemar's exact test from `(first, second)` outcomes, one pair per shared cluster
/// (true: success).
pub fn mcnemar_exact(outcomes: &[(bool, bool)]) -> McNemar {
    let first_only = outcomes.iter().filter(|(a, b)| *a && !*b).count() as u64;
    let second_only = outcomes.iter().filter(|(a, b)| !*a && *b).count() as u64;
    McNemar { first_only, second_only, pairs: outcomes.len() as u64, p_value: mcnemar_p(first_only, second_only) }
}

/// The two-sided exact p-value for `b` and `c` discordant pairs, summed in log space so
/// that thousands of pairs neither underflow nor lose the tail.
pub fn mcnemar_p(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    let ln2n = n as f64 * std::f64::consts::LN_2;
    // ln C(n, i), step by step from ln C(n, 0) = 0.
    let mut ln_choose = 0.0f64;
    let mut tail = 0.0f64;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_choose - ln2n).exp();
    }
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand: with b + c = n discordant pairs the p-value is
    /// 2 * sum_{i <= min(b, c)} C(n, i) / 2^n, capped at 1.
    #[test]
    fn exact_p_values_match_a_table_worked_by_hand() {
        // n = 10, b = 1: 2 * (1 + 10) / 1024 = 22 / 1024.
        assert!((mcnemar_p(1, 9) - 22.0 / 1024.0).abs() < 1e-12);
        // n = 10, b = 2: 2 * (1 + 10 + 45) / 1024 = 112 / 1024.
        assert!((mcnemar_p(8, 2) - 112.0 / 1024.0).abs() < 1e-12);
        // n = 6, b = 0: 2 / 64.
        assert!((mcnemar_p(0, 6) - 2.0 / 64.0).abs() < 1e-12);
        // n = 5, b = 2: 2 * (1 + 5 + 10) / 32 = 1 (capped).
        assert!((mcnemar_p(2, 3) - 1.0).abs() < 1e-12);
        // Equal counts are the least evidence: p = 1.
        assert!((mcnemar_p(4, 4) - 1.0).abs() < 1e-12);
        assert_eq!(mcnemar_p(0, 0), 1.0);
        // n = 20, b = 3: 2 * (1 + 20 + 190 + 1140) / 2^20.
        assert!((mcnemar_p(3, 17) - 2.0 * 1351.0 / 1_048_576.0).abs() < 1e-12);
    }

    #[test]
    fn large_counts_neither_underflow_nor_exceed_one() {
        // 3,000 discordant pairs, 1,400 against 1,600: a real but small difference.
        let p = mcnemar_p(1400, 1600);
        assert!(p > 0.0 && p < 0.001, "{p}");
        let p = mcnemar_p(1500, 1500);
        assert!((p - 1.0).abs() < 1e-9, "{p}");
        // All 5,000 on one side: 2 / 2^5000, below the smallest double.
        assert!(mcnemar_p(0, 5000) < 1e-300);
    }

    #[test]
    fn only_discordant_clusters_count() {
        let t = mcnemar_exact(&[(true, true), (false, false), (true, false), (true, false), (false, true)]);
        assert_eq!((t.first_only, t.second_only, t.pairs), (2, 1, 5));
        assert_eq!(t.p_value, mcnemar_p(2, 1));
    }
}
