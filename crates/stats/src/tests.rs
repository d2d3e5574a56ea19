use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::*;

fn ratio(t: &[f64]) -> Option<f64> {
    (t[1] != 0.0).then(|| t[0] / t[1])
}

fn settings(replicates: usize, seed: u64) -> Bootstrap {
    Bootstrap { replicates, seed, level: 0.95 }
}

#[test]
fn percentile_interpolates_between_closest_ranks() {
    let v = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(percentile(&v, 0.25), Some(1.75));
    assert_eq!(percentile(&v, 0.0), Some(1.0));
    assert_eq!(percentile(&v, 1.0), Some(4.0));
    assert_eq!(percentile(&[7.0], 0.3), Some(7.0));
    assert_eq!(percentile(&[], 0.5), None);
}

#[test]
fn one_cluster_gives_no_interval() {
    // Every replicate would be the one cluster again: [0.75, 0.75] would read as a
    // certainty. The estimate stands; the interval is undefined.
    let i = cluster_bootstrap(&[vec![3.0, 4.0]], ratio, &settings(100, 1)).unwrap();
    assert_eq!(i.estimate, Some(0.75));
    assert_eq!((i.lo, i.hi), (None, None));
    assert_eq!((i.used, i.dropped), (100, 0));
    let two = cluster_bootstrap(&[vec![3.0, 4.0], vec![1.0, 4.0]], ratio, &settings(100, 1)).unwrap();
    assert!(two.lo.unwrap() < two.hi.unwrap(), "{two:?}");
}

#[test]
fn replicates_with_a_zero_denominator_are_dropped_and_counted() {
    // Cluster 0 has no denominator: a replicate drawing it twice is undefined, which
    // happens with probability 1/4.
    let sums = [vec![0.0, 0.0], vec![1.0, 2.0]];
    let i = cluster_bootstrap(&sums, ratio, &settings(2000, 3)).unwrap();
    assert_eq!(i.estimate, Some(0.5));
    assert_eq!(i.used + i.dropped, 2000);
    assert!((400..600).contains(&i.dropped), "dropped {}", i.dropped);
    assert_eq!((i.lo, i.hi), (Some(0.5), Some(0.5)));
}

#[test]
fn no_cluster_means_no_estimate_and_every_replicate_dropped() {
    let i = cluster_bootstrap(&[], ratio, &settings(50, 3)).unwrap();
    assert_eq!((i.estimate, i.lo, i.hi, i.used, i.dropped), (None, None, None, 0, 50));
}

#[test]
fn bad_settings_are_refused() {
    assert_eq!(cluster_bootstrap(&[], ratio, &settings(0, 1)), Err(Error::NoReplicates(0)));
    assert_eq!(
        cluster_bootstrap(&[], ratio, &settings(MAX_REPLICATES + 1, 1)),
        Err(Error::TooManyReplicates(MAX_REPLICATES + 1))
    );
    let bad = Bootstrap { level: 1.0, ..Bootstrap::default() };
    assert_eq!(cluster_bootstrap(&[], ratio, &bad), Err(Error::BadLevel(1.0)));
}

/// Golden output: five clusters, B = 2000, seed 7. The numbers are pinned so a change
/// of generator, draw order or quantile rule shows up as a diff.
#[test]
fn seeded_bootstrap_is_reproducible_golden() {
    let sums = [vec![2.0, 5.0], vec![4.0, 5.0], vec![1.0, 4.0], vec![5.0, 6.0], vec![0.0, 3.0]];
    let a = cluster_bootstrap(&sums, ratio, &settings(2000, 7)).unwrap();
    let b = cluster_bootstrap(&sums, ratio, &settings(2000, 7)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.estimate, Some(12.0 / 23.0));
    let golden = (0.21052631578947367, 0.7407407407407407);
    assert_eq!((a.lo.unwrap(), a.hi.unwrap()), golden, "{a:?}");
    // Another seed draws other replicates (the percentiles of five clusters may still
    // land on the same ratios).
    let draws = |seed| -> Vec<Vec<u32>> { ResamplePlan::new(5, &settings(20, seed)).replicates() };
    assert_eq!(draws(7), draws(7));
    assert_ne!(draws(7), draws(8));
    assert!(draws(7).iter().all(|r| r.iter().sum::<u32>() == 5));
}

#[test]
fn sign_flip_exact_p_values_by_hand() {
    // All eight patterns of three equal differences: only ++ + and - - - reach |3|.
    assert_eq!(sign_flip_p_value(&[1.0, 1.0, 1.0], 0), (0.25, true));
    // [3, 1]: sums 4, 2, -2, -4; two of four reach |4|.
    assert_eq!(sign_flip_p_value(&[3.0, 1.0], 0), (0.5, true));
    // A zero mean is reached by every pattern.
    assert_eq!(sign_flip_p_value(&[1.0, -1.0], 0), (1.0, true));
    // 0.1 + 0.2 + 0.3 vs 0.3 + 0.2 + 0.1 differ in the last bit: ties must count.
    assert_eq!(sign_flip_p_value(&[0.1, 0.2, 0.3], 0).0, 0.25);
}

#[test]
fn sign_flip_goes_monte_carlo_above_sixteen_clusters() {
    let (p, exact) = sign_flip_p_value(&[1.0; 16], 0);
    assert!(exact);
    assert_eq!(p, 2.0 / 65536.0);
    let (p, exact) = sign_flip_p_value(&[1.0; 17], 0);
    assert!(!exact);
    // Exact would be 2^-16; a Monte Carlo p-value is never below 1 / (draws + 1).
    assert!(p >= 1.0 / (MONTE_CARLO_DRAWS + 1) as f64 && p < 1e-4, "{p}");
    // Balanced differences: p near 1.
    let mixed: Vec<f64> = (0..40).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
    assert!(sign_flip_p_value(&mixed, 5).0 > 0.99);
}

#[test]
fn paired_comparison_reports_mean_interval_and_p() {
    let c = paired_comparison(&[0.5, 0.25, 0.25, 0.0], &settings(1000, 1)).unwrap().unwrap();
    assert_eq!(c.clusters, 4);
    assert_eq!(c.mean_difference, 0.25);
    // Patterns reaching |1.0|: signs of 0.5, 0.25, 0.25 all equal (the 0 is free): 4/16.
    assert_eq!((c.p_value, c.exact), (0.25, true));
    let (lo, hi) = (c.lo.unwrap(), c.hi.unwrap());
    assert!((0.0..0.25).contains(&lo) && 0.25 < hi && hi <= 0.5, "{lo} {hi}");
    assert_eq!(paired_comparison(&[], &settings(10, 1)).unwrap(), None);
}

#[test]
fn holm_by_hand() {
    // Sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> 0.06 (monotone).
    let adjusted = holm(&[0.01, 0.04, 0.03, 0.005]);
    let expected = [0.03, 0.06, 0.06, 0.02];
    for (a, e) in adjusted.iter().zip(expected) {
        assert!((a - e).abs() < 1e-12, "{adjusted:?}");
    }
    assert_eq!(holm(&[0.6, 0.9]), vec![1.0, 1.0]);
    assert!(holm(&[]).is_empty());
}

#[test]
fn leader_groups_by_hand() {
    // Separable pairs: (0,2), (0,3), (2,4), (2,5). Entry 1 joins 0; 2 leads group 2
    // (separable from 0); 3 is not separable from leader 2: joins; 4 leads group 3.
    let sep = |a: usize, b: usize| matches!((a, b), (0, 2) | (0, 3) | (2, 4) | (2, 5));
    assert_eq!(leader_groups(6, sep), vec![1, 1, 2, 2, 3, 3]);
    // Not separable from the leader, though separable from the entry just above: joins.
    let sep = |a: usize, b: usize| (a, b) == (1, 2);
    assert_eq!(leader_groups(3, sep), vec![1, 1, 1]);
    assert!(leader_groups(0, |_, _| true).is_empty());
    assert_eq!(leader_groups(3, |_, _| true), vec![1, 2, 3]);
}

/// A population of clusters with known rates: cluster rates drawn from a fixed set
/// (mean 0.36), cluster sizes 4..=12, Bernoulli outcomes.
fn population(rng: &mut ChaCha8Rng, clusters: usize, rates: &[f64]) -> Vec<(f64, usize)> {
    (0..clusters).map(|_| (rates[rng.random_range(0..rates.len())], rng.random_range(4..=12))).collect()
}

fn outcomes(rng: &mut ChaCha8Rng, rate: f64, size: usize) -> f64 {
    (0..size).filter(|_| rng.random::<f64>() < rate).count() as f64
}

/// Statistical validity by simulation: 95% intervals cover the true rate in 93-97% of
/// 1,000 simulated populations (standard error of the coverage estimate: 0.7 points).
#[test]
fn simulated_interval_coverage_is_near_nominal() {
    let rates = [0.1, 0.2, 0.3, 0.5, 0.7];
    let truth = rates.iter().sum::<f64>() / rates.len() as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let runs = 1000;
    let mut covered = 0;
    for run in 0..runs {
        let sums: Vec<Vec<f64>> = population(&mut rng, 60, &rates)
            .into_iter()
            .map(|(rate, size)| vec![outcomes(&mut rng, rate, size), size as f64])
            .collect();
        let i = cluster_bootstrap(&sums, ratio, &settings(1000, run)).unwrap();
        if i.lo.unwrap() <= truth && truth <= i.hi.unwrap() {
            covered += 1;
        }
    }
    let coverage = covered as f64 / runs as f64;
    eprintln!("coverage {coverage}");
    assert!((0.93..=0.97).contains(&coverage), "coverage {coverage}");
}

/// The paired test under the null (two models with the same per-cluster rates):
/// rejections at 0.05 in 3-7% of 1,000 simulated comparisons.
#[test]
fn simulated_paired_test_false_positive_rate_is_near_five_percent() {
    let rates = [0.1, 0.2, 0.3, 0.5, 0.7];
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let runs = 1000;
    let mut rejected = 0;
    for run in 0..runs {
        let diffs: Vec<f64> = population(&mut rng, 14, &rates)
            .into_iter()
            .map(|(rate, size)| (outcomes(&mut rng, rate, size) - outcomes(&mut rng, rate, size)) / size as f64)
            .collect();
        let c = paired_comparison(&diffs, &settings(10, run)).unwrap().unwrap();
        if c.p_value < 0.05 {
            rejected += 1;
        }
    }
    let rate = rejected as f64 / runs as f64;
    eprintln!("false-positive rate {rate}");
    assert!((0.03..=0.07).contains(&rate), "false-positive rate {rate}");
}

/// pass^k's interval by simulation (docs/metrics.md §K: the mean over tasks of the
/// unbiased per-task estimator C(c, k) / C(n, k), its interval the cluster bootstrap of
/// that mean, as `pass_k(k)` computes it with `cluster_ci`): tasks with a success rate
/// drawn from a fixed set, five attempts each, one to three tasks per cluster, 60
/// clusters. The 95% interval of pass^2 covers the true E[p^2] in 93-97% of 1,000
/// populations.
#[test]
fn simulated_pass_hat_k_interval_coverage_is_near_nominal() {
    let rates = [0.1, 0.3, 0.5, 0.7, 0.9];
    let (n, k) = (5usize, 2usize);
    let truth = rates.iter().map(|p| p * p).sum::<f64>() / rates.len() as f64;
    let choose = |a: usize, b: usize| -> f64 {
        if b > a {
            return 0.0;
        }
        (0..b).map(|i| (a - i) as f64 / (b - i) as f64).product()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(2026);
    let runs = 1000;
    let mut covered = 0;
    for run in 0..runs {
        let sums: Vec<Vec<f64>> = (0..60)
            .map(|_| {
                let tasks = rng.random_range(1..=3);
                let total: f64 = (0..tasks)
                    .map(|_| {
                        let p = rates[rng.random_range(0..rates.len())];
                        let c = outcomes(&mut rng, p, n) as usize;
                        choose(c, k) / choose(n, k)
                    })
                    .sum();
                vec![total, tasks as f64]
            })
            .collect();
        let i = cluster_bootstrap(&sums, ratio, &settings(1000, run)).unwrap();
        if i.lo.unwrap() <= truth && truth <= i.hi.unwrap() {
            covered += 1;
        }
    }
    let coverage = covered as f64 / runs as f64;
    eprintln!("pass^2 coverage {coverage}");
    assert!((0.93..=0.97).contains(&coverage), "coverage {coverage}");
}
