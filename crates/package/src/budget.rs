//! A memory budget shared by the threads that read packages: bytes of package files
//! held in memory at once, across all of them, whatever the thread count.
//!
//! A reader charges the bytes it is about to read to its [`Reservation`] (one per
//! source it reads) and gives them back when it drops the reservation. The rule that
//! keeps this free of deadlock: a reader that holds nothing waits until its bytes fit
//! (or nothing else is held); a reader that already holds bytes never waits for the
//! budget, because the others may be waiting for what it holds. If its next bytes do not
//! fit, it takes the one *overdraft* token instead (waiting only for that token, whose
//! holder never waits for anything and so always finishes), and reads past the budget
//! alone. So at most the budget, plus one source's own limit (`Limits`), is held.

use std::sync::{Condvar, Mutex, MutexGuard};

/// Bytes that all readers together may hold (see the module comment).
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    held: Mutex<u64>,
    freed: Condvar,
    overdraft: Mutex<()>,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget { limit: limit.max(1), held: Mutex::new(0), freed: Condvar::new(), overdraft: Mutex::new(()) }
    }

    /// A budget no reader ever waits for (reading outside an ingest).
    pub fn unlimited() -> MemoryBudget {
        MemoryBudget::new(u64::MAX)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held by all reservations now.
    pub fn held(&self) -> u64 {
        *self.held.lock().expect("budget lock")
    }

    /// An empty reservation; charge it with [`Reservation::charge`].
    pub fn reserve(&self) -> Reservation<'_> {
        Reservation { budget: self, bytes: 0, overdraft: None }
    }
}

/// Bytes charged by one reader, given back on drop.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a MemoryBudget,
    bytes: u64,
    overdraft: Option<MutexGuard<'a, ()>>,
}

impl Reservation<'_> {
    /// Charges `bytes` about to be read, waiting as the module comment says.
    pub fn charge(&mut self, bytes: u64) {
        let budget = self.budget;
        let mut held = budget.held.lock().expect("budget lock");
        if self.bytes == 0 {
            // Holding nothing: waiting cannot block anyone.
            while *held > 0 && held.saturating_add(bytes) > budget.limit {
                held = budget.freed.wait(held).expect("budget lock");
            }
        } else if self.overdraft.is_none() && held.saturating_add(bytes) > budget.limit {
            drop(held);
            self.overdraft = Some(budget.overdraft.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
            held = budget.held.lock().expect("budget lock");
        }
        *held = held.saturating_add(bytes);
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Charges `bytes` if that needs no overdraft: a reader holding nothing waits as
    /// [`charge`](Self::charge) does; one holding bytes gets `false` when the budget
    /// cannot take them (and may then [`release`](Self::release) and start again).
    pub fn try_charge(&mut self, bytes: u64) -> bool {
        if self.bytes > 0 && self.overdraft.is_none() {
            let mut held = self.budget.held.lock().expect("budget lock");
            if held.saturating_add(bytes) > self.budget.limit {
                return false;
            }
            *held = held.saturating_add(bytes);
            self.bytes = self.bytes.saturating_add(bytes);
            return true;
        }
        self.charge(bytes);
        true
    }

    /// Gives back everything charged so far (the reservation stays usable).
    pub fn release(&mut self) {
        let mut held = self.budget.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *held = held.saturating_sub(self.bytes);
        drop(held);
        self.bytes = 0;
        self.overdraft = None;
        self.budget.freed.notify_all();
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn readers_hold_at_most_the_budget_plus_one_overdraft_and_never_deadlock() {
        let budget = MemoryBudget::new(1000);
        let peak = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for reader in 0..16u64 {
                let (budget, peak) = (&budget, &peak);
                scope.spawn(move || {
                    for round in 0..50u64 {
                        let mut reservation = budget.reserve();
                        // Each source is read in pieces; some need more than the budget.
                        let pieces = 1 + (reader + round) % 5;
                        for _ in 0..pieces {
                            reservation.charge(300);
                            peak.fetch_max(budget.held(), Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert_eq!(budget.held(), 0);
        // The budget, plus one reader past it holding at most its 5 pieces.
        let peak = peak.into_inner();
        assert!(peak <= 1000 + 5 * 300, "peak {peak}");
        assert!(peak > 1000, "no reader ever needed the overdraft ({peak})");
    }
}
