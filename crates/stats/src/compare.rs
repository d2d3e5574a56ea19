//! Paired comparisons, Holm adjustment and tie groups.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::bootstrap::{percentile, Bootstrap};
use crate::Result;

/// Up to this many clusters the sign-flip p-value enumerates all 2^n sign patterns.
pub const EXACT_SIGN_FLIP_MAX_CLUSTERS: usize = 16;
/// Above it, this many random sign patterns are drawn.
pub const MONTE_CARLO_DRAWS: usize = 100_000;

/// Two entries compared on the clusters both have.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedComparison {
    /// Clusters present in both entries with the metric defined in both.
    pub clusters: usize,
    /// Mean over those clusters of (first entry's cluster metric - second's).
    pub mean_difference: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Two-sided sign-flip permutation p-value.
    pub p_value: f64,
    /// True when every sign pattern was enumerated (n <= 16 clusters).
    pub exact: bool,
}

/// Compares two entries from their per-cluster differences (first minus second; one
/// value per shared cluster, in cluster-name order). `None` when there is none.
pub fn paired_comparison(differences: &[f64], settings: &Bootstrap) -> Result<Option<PairedComparison>> {
    settings.validate()?;
    let n = differences.len();
    if n == 0 {
        return Ok(None);
    }
    let mean_difference = differences.iter().sum::<f64>() / n as f64;

    // Bootstrap of the mean difference: resample the shared clusters.
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed);
    let mut means: Vec<f64> = (0..settings.replicates)
        .map(|_| (0..n).map(|_| differences[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let (a, b) = settings.tails();

    let (p_value, exact) = sign_flip_p_value(differences, settings.seed);
    Ok(Some(PairedComparison {
        clusters: n,
        mean_difference,
        lo: percentile(&means, a),
        hi: percentile(&means, b),
        p_value,
        exact,
    }))
}

/// Two-sided sign-flip permutation p-value of the mean of `differences` against 0:
/// the share of sign patterns whose |sum| is at least the observed |sum|. Exact (all
/// 2^n patterns, the observed one included) for n <= 16; otherwise
/// (1 + hits) / (1 + draws) over 100,000 random patterns, which never reports 0.
pub fn sign_flip_p_value(differences: &[f64], seed: u64) -> (f64, bool) {
    let n = differences.len();
    if n == 0 {
        return (1.0, true);
    }
    let observed: f64 = differences.iter().sum::<f64>().abs();
    // Sums of the same numbers in another order differ in the last bits; a pattern
    // that ties the observed statistic must count as "at least as extreme".
    let tolerance = 1e-9 * observed.max(1.0);
    let extreme = |s: f64| s.abs() >= observed - tolerance;
    if n <= EXACT_SIGN_FLIP_MAX_CLUSTERS {
        let patterns = 1u64 << n;
        let hits = (0..patterns)
            .filter(|mask| {
                let s: f64 =
                    differences.iter().enumerate().map(|(i, d)| if mask >> i & 1 == 1 { -d } else { *d }).sum();
                extreme(s)
            })
            .count();
        (hits as f64 / patterns as f64, true)
    } else {
        // A stream of its own, so the p-value does not depend on B.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5167_4E5F_F11F_0000);
        let mut hits = 0usize;
        for _ in 0..MONTE_CARLO_DRAWS {
            let mut s = 0.0;
            let mut bits = 0u64;
            for (i, d) in differences.iter().enumerate() {
                if i % 64 == 0 {
                    bits = rng.random::<u64>();
                }
                s += if bits >> (i % 64) & 1 == 1 { -d } else { *d };
            }
            if extreme(s) {
                hits += 1;
            }
        }
        ((1 + hits) as f64 / (1 + MONTE_CARLO_DRAWS) as f64, false)
    }
}

/// Holm's step-down adjustment of a family of p-values (same order as given):
/// sorted ascending, p(i) * (m - i + 1), made monotone, capped at 1.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0f64;
    for (i, &idx) in order.iter().enumerate() {
        let scaled = (p_values[idx] * (m - i) as f64).min(1.0);
        running = running.max(scaled);
        adjusted[idx] = running;
    }
    adjusted
}

/// Tie groups of a ranked list of `n` entries from all pairwise tests: the first entry
/// leads group 1; each next entry joins the current group unless it is `separable`
/// from the group's leader (its first entry), in which case it leads the next group.
/// So every member of a group is not separable from its leader, and each leader is
/// separable from the leader of the group above. Groups are numbered from 1.
pub fn leader_groups(n: usize, separable: impl Fn(usize, usize) -> bool) -> Vec<usize> {
    let mut groups = Vec::with_capacity(n);
    let mut leader = 0;
    for i in 0..n {
        if i == 0 {
            groups.push(1);
        } else if separable(leader, i) {
            leader = i;
            groups.push(groups[i - 1] + 1);
        } else {
            groups.push(groups[i - 1]);
        }
    }
    groups
}
