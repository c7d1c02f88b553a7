//! A token bucket with continuous refill, kept as a single instant.
//!
//! The bucket is represented the way GCRA does it: instead of a token count
//! it remembers `full_at`, the instant at which it would be full again. With
//! an emission interval `T = 1 / rate` (rounded *up* to a whole nanosecond, so
//! the effective rate is never above the configured one) and capacity `b`,
//! the bucket holds `b - (full_at - now) / T` tokens at `now`. Taking `n`
//! tokens is allowed when `full_at - now <= (b - n) * T`, and pushes
//! `full_at` forward by `n * T`.
//!
//! The arithmetic is exact (integer nanoseconds), so in every window of
//! length `W` at most `b + W / T <= burst + rate * W` tokens are taken.

use std::time::{Duration, Instant};

use super::{later, BucketLimit};

/// One rate-limit key's bucket.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Time to earn one token; `None` for an unlimited bucket.
    interval: Option<Duration>,
    /// Capacity, at least 1.
    burst: u32,
    /// When the bucket would be full again; at or before `now`, it is full.
    full_at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`. A rate of 0 (or a negative or non-finite
    /// rate) means unlimited; a burst of 0 is taken as 1.
    pub fn new(limit: BucketLimit, now: Instant) -> TokenBucket {
        let interval = if !limit.is_unlimited() {
            // Float-to-int casts saturate, so a tiny rate gives a huge (not
            // wrapped) interval. Round up: never faster than configured.
            let nanos = (1e9 / limit.rate_per_sec).ceil() as u64;
            Some(Duration::from_nanos(nanos.max(1)))
        } else {
            None
        };
        TokenBucket {
            interval,
            burst: limit.burst.max(1),
            full_at: now,
        }
    }

    /// Changes the limit at `now`, keeping the tokens owed: a bucket that
    /// lacked `n` tokens of a full one still lacks `n`, earned at the new
    /// rate (rounded up). A bucket that was unlimited starts full.
    pub fn set_limit(&mut self, limit: BucketLimit, now: Instant) {
        let next = TokenBucket::new(limit, now);
        if let (Some(old), Some(new)) = (self.interval, next.interval) {
            let owed = self.full_at.saturating_duration_since(now).as_nanos();
            let (old, new) = (old.as_nanos().max(1), new.as_nanos());
            let nanos = (owed.saturating_mul(new)).div_ceil(old);
            let owed = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
            *self = TokenBucket {
                full_at: later(now, owed),
                ..next
            };
        } else {
            *self = next;
        }
    }

    /// Whether the bucket is full at `now`: the same as a fresh one.
    pub fn is_full(&self, now: Instant) -> bool {
        self.interval.is_none() || self.full_at <= now
    }

    /// Takes `cost` tokens at `now`, or says when they will be there.
    ///
    /// A cost above the capacity is allowed when the bucket is full (it
    /// could otherwise never be paid) and leaves the bucket in debt.
    pub fn try_take(&mut self, now: Instant, cost: u32) -> Result<(), Instant> {
        let Some(interval) = self.interval else {
            return Ok(());
        };
        let need = cost.min(self.burst);
        let slack = mul(interval, self.burst - need);
        let owed = self.full_at.saturating_duration_since(now);
        if owed <= slack {
            self.full_at = later(self.full_at.max(now), mul(interval, cost));
            Ok(())
        } else {
            // owed > slack, so full_at - slack is after `now`.
            Err(self.full_at.checked_sub(slack).unwrap_or(self.full_at))
        }
    }
}

/// `d * n`, saturating instead of panicking.
fn mul(d: Duration, n: u32) -> Duration {
    d.checked_mul(n).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(rate: f64, burst: u32) -> BucketLimit {
        BucketLimit {
            rate_per_sec: rate,
            burst,
        }
    }

    #[test]
    fn starts_full_then_refills_continuously() {
        let t0 = crate::test_clock::epoch();
        let mut b = TokenBucket::new(limit(10.0, 3), t0);
        for _ in 0..3 {
            assert_eq!(b.try_take(t0, 1), Ok(()));
        }
        let next = b.try_take(t0, 1).unwrap_err();
        assert_eq!(next, t0 + Duration::from_millis(100));
        assert!(b.try_take(next - Duration::from_nanos(1), 1).is_err());
        assert_eq!(b.try_take(next, 1), Ok(()));
    }

    #[test]
    fn unlimited_and_degenerate_limits() {
        let t0 = crate::test_clock::epoch();
        let mut b = TokenBucket::new(limit(0.0, 0), t0);
        for _ in 0..10_000 {
            assert_eq!(b.try_take(t0, 1), Ok(()));
        }
        let mut b = TokenBucket::new(limit(f64::NAN, 1), t0);
        for _ in 0..10_000 {
            assert_eq!(b.try_take(t0, 5), Ok(()));
        }
        // Burst 0 behaves as 1.
        let mut b = TokenBucket::new(limit(1.0, 0), t0);
        assert_eq!(b.try_take(t0, 1), Ok(()));
        assert_eq!(b.try_take(t0, 1), Err(t0 + Duration::from_secs(1)));
        // A tiny rate does not overflow.
        let mut b = TokenBucket::new(limit(1e-30, 2), t0);
        assert_eq!(b.try_take(t0, 1), Ok(()));
        assert_eq!(b.try_take(t0, 1), Ok(()));
        assert!(b.try_take(t0, 1).is_err());
    }

    #[test]
    fn a_new_limit_keeps_the_tokens_owed() {
        let t0 = crate::test_clock::epoch();
        let mut b = TokenBucket::new(limit(10.0, 2), t0);
        assert_eq!(b.try_take(t0, 2), Ok(()));
        assert!(!b.is_full(t0));
        // Two tokens owed, earned at 20/s: the first is due after 50 ms.
        b.set_limit(limit(20.0, 2), t0);
        assert_eq!(b.try_take(t0, 1), Err(t0 + Duration::from_millis(50)));
        assert!(b.is_full(t0 + Duration::from_millis(100)));
        // Unlimited, then limited again: full.
        b.set_limit(limit(0.0, 1), t0);
        assert!(b.is_full(t0));
        b.set_limit(limit(1.0, 1), t0);
        assert_eq!(b.try_take(t0, 1), Ok(()));
    }

    #[test]
    fn cost_two_needs_two_tokens() {
        let t0 = crate::test_clock::epoch();
        let mut b = TokenBucket::new(limit(1.0, 2), t0);
        assert_eq!(b.try_take(t0, 1), Ok(()));
        // One token left: a cost-2 take waits for the second.
        assert_eq!(b.try_take(t0, 2), Err(t0 + Duration::from_secs(1)));
        assert_eq!(b.try_take(t0 + Duration::from_secs(1), 2), Ok(()));
        // Cost above capacity is paid from a full bucket, leaving debt.
        let mut b = TokenBucket::new(limit(1.0, 1), t0);
        assert_eq!(b.try_take(t0, 2), Ok(()));
        assert_eq!(b.try_take(t0, 1), Err(t0 + Duration::from_secs(2)));
    }
}
