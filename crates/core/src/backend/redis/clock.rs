//! What a store knows of the Redis server's clock without asking for it: the server's time
//! (`TIME`, ms) that a script reply carries, read against this process's monotonic clock when the
//! reply arrives. The server read its time before the reply left, so `server - local at arrival`
//! is at most the true offset between the clocks: the largest such sample is a lower bound that
//! grows tight (its error is the reply's transit time of the best sample). A lower bound makes
//! times derived from it early, never late. A sample older than [`KEEP_MS`] is replaced by the
//! next one even when smaller, so a server clock set back is followed within that time.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// How long the best sample is kept against smaller ones.
const KEEP_MS: u64 = 10_000;

/// This process's monotonic clock, ms since its first reading.
pub fn local_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// The best lower bound of `server time - local_ms()` seen, and when it was taken (local ms).
#[derive(Default)]
pub struct ServerClock {
    best: Mutex<Option<(i64, u64)>>,
}

impl ServerClock {
    /// Learns from `server_ms`, the server's time in a reply that arrived at `arrived` (local ms).
    pub fn sample(&self, server_ms: i64, arrived: u64) {
        let offset = server_ms.saturating_sub(arrived as i64);
        let mut best = self.best.lock().unwrap_or_else(|p| p.into_inner());
        let keep = matches!(*best, Some((o, at)) if o >= offset && arrived.saturating_sub(at) < KEEP_MS);
        if !keep {
            *best = Some((offset, arrived));
        }
    }

    /// The server's time at local time `at`, at most the true one; None before any sample.
    pub fn server_at(&self, at: u64) -> Option<i64> {
        let best = *self.best.lock().unwrap_or_else(|p| p.into_inner());
        best.map(|(o, _)| o.saturating_add(at as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_sample_wins_until_it_is_old() {
        let c = ServerClock::default();
        assert_eq!(c.server_at(5), None);
        c.sample(1_000_100, 100); // offset 1_000_000
        c.sample(1_000_150, 160); // a slower reply: offset 999_990, kept out
        assert_eq!(c.server_at(200), Some(1_000_200));
        c.sample(1_000_305, 300); // offset 1_000_005: better
        assert_eq!(c.server_at(400), Some(1_000_405));
        // The server's clock set back: followed once the best sample is old.
        c.sample(5_000, 5_000);
        assert_eq!(c.server_at(5_000), Some(1_005_005));
        c.sample(20_000, 20_000);
        assert_eq!(c.server_at(20_000), Some(20_000));
    }
}
