//! Percentile bootstrap over task clusters.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{Error, Result};

/// Settings of a bootstrap: replicates `B`, the seed and the interval level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bootstrap {
    pub replicates: usize,
    pub seed: u64,
    pub level: f64,
}

impl Default for Bootstrap {
    /// docs/metrics.md §G: B = 2000, 95%. The default seed is arbitrary but fixed, so two
    /// runs over the same store print the same interval.
    fn default() -> Self {
        Bootstrap { replicates: 2000, seed: 20_261_130, level: 0.95 }
    }
}

impl Bootstrap {
    pub fn validate(&self) -> Result<()> {
        if self.replicates == 0 {
            return Err(Error::NoReplicates(self.replicates));
        }
        if self.replicates > MAX_REPLICATES {
            return Err(Error::TooManyReplicates(self.replicates));
        }
        if !(self.level > 0.0 && self.level < 1.0) {
            return Err(Error::BadLevel(self.level));
        }
        Ok(())
    }

    /// The two tail probabilities of the interval, e.g. (0.025, 0.975).
    pub fn tails(&self) -> (f64, f64) {
        let a = (1.0 - self.level) / 2.0;
        (a, 1.0 - a)
    }
}

/// The most replicates a bootstrap may ask for: far beyond what a 95% interval needs
/// (2,000), and a bound on the work one SQL call can demand.
pub const MAX_REPLICATES: usize = 100_000;

/// An estimate with its interval. `lo`/`hi` are `None` when no replicate was defined or
/// there are fewer than two clusters (one cluster says nothing of how clusters vary);
/// `estimate` is `None` when the metric is undefined on the whole population.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    pub estimate: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Replicates where the metric was defined.
    pub used: usize,
    /// Replicates where it was NULL (e.g. a zero denominator), dropped from the interval.
    pub dropped: usize,
}

/// The multiplicities of the clusters in each replicate, shared by every metric of a
/// group: replicate `r` takes cluster `i` `counts[i]` times.
///
/// The draws depend only on the seed and the number of clusters, so the same seed over
/// the same clusters (in the same order: callers sort them by name) gives the same
/// replicates whichever metric or entry point asks. They are drawn afresh on each pass
/// (memory stays one replicate, whatever B is).
pub struct ResamplePlan {
    clusters: usize,
    replicates: usize,
    seed: u64,
}

impl ResamplePlan {
    pub fn new(clusters: usize, settings: &Bootstrap) -> ResamplePlan {
        ResamplePlan { clusters, replicates: settings.replicates, seed: settings.seed }
    }

    /// Calls `visit` with each replicate's cluster counts, in order.
    pub fn for_each(&self, mut visit: impl FnMut(&[u32])) {
        if self.clusters == 0 {
            return;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut counts = vec![0u32; self.clusters];
        for _ in 0..self.replicates {
            counts.iter_mut().for_each(|c| *c = 0);
            for _ in 0..self.clusters {
                counts[rng.random_range(0..self.clusters)] += 1;
            }
            visit(&counts);
        }
    }

    /// Every replicate's counts (for tests and small B).
    pub fn replicates(&self) -> Vec<Vec<u32>> {
        let mut out = vec![];
        self.for_each(|c| out.push(c.to_vec()));
        out
    }
}

/// Percentile bootstrap of a pooled metric over clusters.
///
/// `sums[i]` holds cluster `i`'s totals of the metric's components (for a ratio:
/// numerator and denominator); `metric` computes the pooled value from totals, `None`
/// when undefined. Each replicate draws as many clusters as there are, with
/// replacement, adds their totals and evaluates the metric on them.
pub fn cluster_bootstrap(
    sums: &[Vec<f64>],
    metric: impl Fn(&[f64]) -> Option<f64>,
    settings: &Bootstrap,
) -> Result<Interval> {
    settings.validate()?;
    let plan = ResamplePlan::new(sums.len(), settings);
    Ok(bootstrap_with_plan(sums, &metric, &plan, settings))
}

/// [`cluster_bootstrap`] with a plan drawn beforehand (to share draws across metrics).
pub fn bootstrap_with_plan(
    sums: &[Vec<f64>],
    metric: &dyn Fn(&[f64]) -> Option<f64>,
    plan: &ResamplePlan,
    settings: &Bootstrap,
) -> Interval {
    let width = sums.first().map_or(0, Vec::len);
    let mut total = vec![0.0; width];
    for cluster in sums {
        add(&mut total, cluster, 1.0);
    }
    let estimate = if sums.is_empty() { None } else { metric(&total) };

    let mut values = Vec::with_capacity(settings.replicates);
    let mut dropped = 0;
    plan.for_each(|counts| {
        total.iter_mut().for_each(|t| *t = 0.0);
        for (cluster, &k) in sums.iter().zip(counts) {
            if k > 0 {
                add(&mut total, cluster, f64::from(k));
            }
        }
        match metric(&total).filter(|v| v.is_finite()) {
            Some(v) => values.push(v),
            None => dropped += 1,
        }
    });
    if sums.is_empty() {
        dropped = settings.replicates;
    }
    values.sort_by(f64::total_cmp);
    if sums.len() < 2 {
        // One cluster: every replicate is that cluster again, so the "interval" would
        // be [x, x], a certainty the data cannot give (nothing measures how clusters
        // vary). No interval, as for an undefined one; the estimate stands.
        return Interval { estimate, lo: None, hi: None, used: values.len(), dropped };
    }
    let (a, b) = settings.tails();
    Interval { estimate, lo: percentile(&values, a), hi: percentile(&values, b), used: values.len(), dropped }
}

fn add(total: &mut [f64], cluster: &[f64], times: f64) {
    for (t, v) in total.iter_mut().zip(cluster) {
        *t += v * times;
    }
}

/// The `q` quantile of sorted values by linear interpolation between closest ranks
/// (Hyndman and Fan type 7, the default of R and NumPy): position `q * (n - 1)`.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    match sorted.len() {
        0 => None,
        1 => Some(sorted[0]),
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let below = pos.floor() as usize;
            let above = (below + 1).min(n - 1);
            let frac = pos - below as f64;
            Some(sorted[below] + (sorted[above] - sorted[below]) * frac)
        }
    }
}
