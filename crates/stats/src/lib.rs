//! Honest statistics for populations of episodes (docs/metrics.md §G).
//!
//! Every metric of the store is a function of counts summed over episodes, and the
//! sampling unit is the task cluster (`task.cluster`): episodes of one cluster share a
//! task family, so they are not independent draws. This crate therefore works on
//! *per-cluster sums* of a metric's components (numerator, denominator, or the four
//! cells of a 2x2 table) and knows nothing about SQL or Arrow:
//!
//! - [`cluster_bootstrap`]: percentile bootstrap over clusters, seeded; replicates where
//!   the metric is undefined (NULL) are dropped and counted.
//! - [`paired_comparison`]: mean per-cluster difference between two entries, its
//!   bootstrap interval, and a two-sided sign-flip permutation p-value (exact up to 16
//!   clusters, Monte Carlo above).
//! - [`holm`] and [`leader_groups`]: family-wise adjustment and leaderboard tie groups.
//! - [`mcnemar_exact`]: McNemar's exact test where each shared cluster has one binary
//!   outcome per entry, beside the sign-flip test.
//! - [`split_half_stability`]: how often each rank holds over random halves of the
//!   clusters.

mod bootstrap;
mod compare;
mod paired_binary;
mod stability;

pub use bootstrap::{
    bootstrap_with_plan, cluster_bootstrap, percentile, Bootstrap, Interval, ResamplePlan, MAX_REPLICATES,
};
pub use compare::{
    holm, leader_groups, paired_comparison, sign_flip_p_value, PairedComparison, EXACT_SIGN_FLIP_MAX_CLUSTERS,
    MONTE_CARLO_DRAWS,
};
pub use paired_binary::{mcnemar_exact, mcnemar_p, McNemar};
pub use stability::split_half_stability;

/// Errors from this crate: only bad settings; data never makes a computation fail
/// (undefined values are `None`).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("bootstrap replicates must be at least 1 (got {0})")]
    NoReplicates(usize),
    #[error("bootstrap replicates must be at most {max} (got {0})", max = bootstrap::MAX_REPLICATES)]
    TooManyReplicates(usize),
    #[error("interval level must be strictly between 0 and 1 (got {0})")]
    BadLevel(f64),
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests;
