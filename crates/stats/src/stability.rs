//! Split-half rank stability: how often each entry keeps its rank when the board is
//! computed on a random half of the task clusters.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// For each of `ranked` entries (in rank order, best first), the share of `halves`
/// random halves of the `clusters` on which it has the same rank. `value_on(entry,
/// half)` is the entry's metric on the clusters marked true (None: undefined there);
/// `higher_is_better` orders the values. An entry undefined on a half ranks after every
/// defined one, so it does not hold a rank it had. Entries with equal values on a half
/// are ordered at random among themselves (a half that cannot tell them apart confirms
/// neither's rank).
/// Seeded: the same seed gives the same shares.
pub fn split_half_stability(
    clusters: usize,
    ranked: usize,
    value_on: impl Fn(usize, &[bool]) -> Option<f64>,
    higher_is_better: bool,
    halves: usize,
    seed: u64,
) -> Vec<f64> {
    if ranked == 0 || halves == 0 || clusters < 2 {
        return vec![f64::NAN; ranked];
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5711_7A1F_0000_0001);
    let mut held = vec![0usize; ranked];
    let mut order: Vec<usize> = (0..clusters).collect();
    let mut mask = vec![false; clusters];
    for _ in 0..halves {
        order.shuffle(&mut rng);
        mask.iter_mut().for_each(|m| *m = false);
        for &c in &order[..clusters / 2] {
            mask[c] = true;
        }
        let values: Vec<Option<f64>> = (0..ranked).map(|e| value_on(e, &mask)).collect();
        // Shuffled, then sorted stably: ties stay in a random order.
        let mut by_value: Vec<usize> = (0..ranked).collect();
        by_value.shuffle(&mut rng);
        by_value.sort_by(|&a, &b| match (values[a], values[b]) {
            (Some(x), Some(y)) => {
                if higher_is_better {
                    y.total_cmp(&x)
                } else {
                    x.total_cmp(&y)
                }
            }
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        for (rank, &e) in by_value.iter().enumerate() {
            if rank == e && values[e].is_some() {
                held[e] += 1;
            }
        }
    }
    held.into_iter().map(|h| h as f64 / halves as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entry 0 is better than entry 1 on every cluster: it holds rank 1 on every half.
    /// Entries 1 and 2 alternate cluster by cluster: each holds its rank about half the
    /// time.
    #[test]
    fn a_clear_leader_always_holds_and_a_coin_flip_half_the_time() {
        let per_cluster: Vec<[f64; 3]> =
            (0..40).map(|c| if c % 2 == 0 { [0.9, 0.6, 0.4] } else { [0.9, 0.4, 0.6] }).collect();
        let value_on = |e: usize, half: &[bool]| {
            let chosen: Vec<f64> = per_cluster.iter().zip(half).filter(|(_, &m)| m).map(|(v, _)| v[e]).collect();
            (!chosen.is_empty()).then(|| chosen.iter().sum::<f64>() / chosen.len() as f64)
        };
        let s = split_half_stability(40, 3, value_on, true, 400, 7);
        assert_eq!(s[0], 1.0);
        assert!(s[1] > 0.3 && s[1] < 0.7, "{s:?}");
        // Entry 1 holds exactly when entry 2 holds (the two swap or not; on a half with
        // as many clusters of each kind they tie, and the tie is broken at random).
        assert_eq!(s[1], s[2]);
        // Two entries equal on every cluster: each holds its rank about half the time.
        let equal = |_: usize, _: &[bool]| Some(0.5);
        let t = split_half_stability(10, 2, equal, true, 1000, 3);
        assert!(t[0] > 0.4 && t[0] < 0.6 && (t[0] - t[1]).abs() < 1e-12, "{t:?}");
        assert_eq!(s, split_half_stability(40, 3, value_on, true, 400, 7));
    }

    #[test]
    fn lower_is_better_and_undefined_entries() {
        let value_on = |e: usize, half: &[bool]| match e {
            0 => Some(0.1),
            1 => half[0].then_some(0.5),
            _ => None,
        };
        let s = split_half_stability(4, 2, value_on, false, 200, 1);
        assert_eq!(s[0], 1.0);
        // Entry 1 is defined only on halves holding cluster 0: half of them.
        assert!(s[1] > 0.3 && s[1] < 0.7, "{s:?}");
        assert!(split_half_stability(1, 2, value_on, false, 10, 1).iter().all(|v| v.is_nan()));
    }
}
