//! Rate limits held across several processes on one state store: each
//! process's buckets hold its *share* of a limit, the limit divided by the
//! number of processes that want that bucket now.
//!
//! A process wants a bucket while it takes (or waits for) its tokens; it
//! says so in the state store every [`SHARE_PERIOD`] (the primary's
//! `rates` driver), and the store answers how many processes said so for
//! each bucket within the last [`SHARE_WINDOW`]. An idle process stops
//! saying so, and a dead one cannot: either way its share returns to the
//! others one window later. So the fleet stays within the limit (plus one
//! refresh period's lag when a process joins), and no idle process holds
//! rate it does not use.
//!
//! This is the sans-IO half: plain data, `now` passed in. The driver does
//! the store I/O.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{BucketLimit, LocalRateLimiter, RateLimiter};

/// How often a process tells the store which buckets it wants.
pub const SHARE_PERIOD: Duration = Duration::from_millis(250);

/// How long a process counts as wanting a bucket after it last said so.
pub const SHARE_WINDOW: Duration = Duration::from_secs(2);

/// A [`RateLimiter`] whose buckets hold this process's share of each
/// limit. Clones share their state.
#[derive(Clone, Debug, Default)]
pub struct SharedRateLimiter {
    local: LocalRateLimiter,
    state: Arc<Mutex<Shares>>,
}

#[derive(Debug, Default)]
struct Shares {
    /// Processes wanting each bucket (this one included), as last counted.
    sharers: HashMap<String, u32>,
    /// When this process last wanted each bucket.
    wanted: HashMap<String, Instant>,
}

impl BucketLimit {
    /// One of `n` equal shares of this limit: the rate divided by `n`, the
    /// burst too (at least 1).
    pub fn share(self, n: u32) -> BucketLimit {
        let n = n.max(1);
        BucketLimit {
            rate_per_sec: self.rate_per_sec / f64::from(n),
            burst: self.burst.max(1).div_ceil(n),
        }
    }
}

impl SharedRateLimiter {
    /// A limiter alone in the fleet until told otherwise.
    pub fn new() -> SharedRateLimiter {
        SharedRateLimiter::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shares> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The buckets this process wanted at or after `since`: what it tells
    /// the store. Forgets older ones.
    pub fn wanted(&self, since: Instant) -> Vec<String> {
        let mut state = self.lock();
        state.wanted.retain(|_, at| *at >= since);
        let mut buckets: Vec<String> = state.wanted.keys().cloned().collect();
        buckets.sort();
        buckets
    }

    /// How many processes want each bucket (this one included), as the
    /// store counted them; buckets not named go back to one.
    pub fn set_sharers(&self, counts: HashMap<String, u32>) {
        self.lock().sharers = counts;
    }
}

impl RateLimiter for SharedRateLimiter {
    fn try_take(
        &self,
        bucket: &str,
        limit: BucketLimit,
        now: Instant,
        cost: u32,
    ) -> Result<(), Instant> {
        if limit.is_unlimited() {
            return Ok(());
        }
        let share = {
            let mut state = self.lock();
            state.wanted.insert(bucket.to_owned(), now);
            limit.share(state.sharers.get(bucket).copied().unwrap_or(1))
        };
        self.local.try_take(bucket, share, now, cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: BucketLimit = BucketLimit {
        rate_per_sec: 20.0,
        burst: 4,
    };

    #[test]
    fn a_share_divides_the_rate_and_the_burst() {
        let half = LIMIT.share(2);
        assert_eq!((half.rate_per_sec, half.burst), (10.0, 2));
        let third = LIMIT.share(3);
        assert_eq!(third.burst, 2, "rounded up");
        assert_eq!(LIMIT.share(0).burst, 4, "no sharer is one");
        assert_eq!(LIMIT.share(100).burst, 1, "at least one");
    }

    #[test]
    fn two_processes_wanting_a_bucket_each_take_half() {
        let t0 = crate::test_clock::epoch();
        let a = SharedRateLimiter::new();
        let b = SharedRateLimiter::new();
        // Alone at first: the whole burst.
        for _ in 0..4 {
            assert_eq!(a.try_take("Testbed/t", LIMIT, t0, 1), Ok(()));
        }
        assert_eq!(a.wanted(t0), ["Testbed/t"]);
        // The store counted both: each has half from now on.
        let both = HashMap::from([("Testbed/t".to_owned(), 2)]);
        a.set_sharers(both.clone());
        b.set_sharers(both);
        assert_eq!(b.try_take("Testbed/t", LIMIT, t0, 1), Ok(()));
        assert_eq!(b.try_take("Testbed/t", LIMIT, t0, 1), Ok(()));
        assert!(b.try_take("Testbed/t", LIMIT, t0, 1).is_err(), "burst 2");
        // Over the next second the two together take the whole rate, no
        // more.
        let mut taken = 0;
        for ms in (10..=1000).step_by(10) {
            let now = t0 + Duration::from_millis(ms);
            for p in [&a, &b] {
                while p.try_take("Testbed/t", LIMIT, now, 1).is_ok() {
                    taken += 1;
                }
            }
        }
        assert!((15..=20).contains(&taken), "{taken}");
        // B alone again: its share comes back whole, the whole burst.
        b.set_sharers(HashMap::new());
        let later = t0 + Duration::from_secs(10);
        for _ in 0..4 {
            assert_eq!(b.try_take("Testbed/t", LIMIT, later, 1), Ok(()));
        }
        assert!(b.try_take("Testbed/t", LIMIT, later, 1).is_err());
    }

    #[test]
    fn a_bucket_not_wanted_within_the_window_is_not_announced() {
        let t0 = crate::test_clock::epoch();
        let a = SharedRateLimiter::new();
        assert_eq!(a.try_take("Testbed/t", LIMIT, t0, 1), Ok(()));
        let later = t0 + SHARE_WINDOW + Duration::from_millis(1);
        assert_eq!(a.try_take("Testbed/u", LIMIT, later, 1), Ok(()));
        assert_eq!(a.wanted(later - SHARE_WINDOW), ["Testbed/u"]);
        // Unlimited buckets are never wanted.
        assert_eq!(
            a.try_take("Testbed/v", BucketLimit::UNLIMITED, later, 1),
            Ok(())
        );
        assert_eq!(a.wanted(t0), ["Testbed/u"]);
    }
}
