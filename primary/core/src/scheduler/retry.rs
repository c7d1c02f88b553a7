//! Retry policy: exponential backoff with jitter, and the seeded generator
//! that draws the jitter.

use std::time::Duration;

/// How failed attempts are retried.
///
/// Only codes for which [`ErrorCode::is_retryable`] holds are retried;
/// anything else fails the task at once.
///
/// [`ErrorCode::is_retryable`]: orrery_schema::ErrorCode::is_retryable
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included (0 is taken as 1).
    pub max_attempts: u32,
    /// Delay after the first failed attempt; it doubles with every attempt.
    pub base: Duration,
    /// Longest delay (before the throttle factor).
    pub max: Duration,
    /// Multiplier of the delay after a `Throttling` failure (0 is taken as 1).
    /// It applies after the cap, so throttled backoff can reach
    /// `max * throttle_factor`.
    pub throttle_factor: u32,
    /// Fraction of the delay that is randomised, in `0..=1`: the delay is
    /// drawn uniformly from `(d * (1 - jitter), d]`.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base: Duration::from_millis(200),
            max: Duration::from_secs(20),
            throttle_factor: 4,
            jitter: 0.5,
        }
    }
}

impl RetryPolicy {
    /// Whether failed attempt number `failed_attempt` (1-based) with `code`
    /// is tried again, and after how long: `None` when the code is not
    /// retryable or the attempts are used up. Every retry of every path
    /// (commands, resuming, discovery) is decided here.
    pub fn retry_after_failure(
        &self,
        failed_attempt: u32,
        code: &orrery_schema::ErrorCode,
        retry_after: Option<Duration>,
        jitter: &mut Jitter,
    ) -> Option<Duration> {
        if !code.is_retryable() || failed_attempt >= self.max_attempts.max(1) {
            return None;
        }
        let throttled = *code == orrery_schema::ErrorCode::Throttling;
        Some(self.backoff(failed_attempt, throttled, retry_after, jitter.next_unit()))
    }

    /// The delay before the attempt that follows failed attempt number
    /// `failed_attempt` (1-based): `base * 2^(failed_attempt - 1)` capped at
    /// `max`, times `throttle_factor` if `throttled`, jittered with `unit`
    /// (a draw from `[0, 1)`), and at least `retry_after`.
    pub fn backoff(
        &self,
        failed_attempt: u32,
        throttled: bool,
        retry_after: Option<Duration>,
        unit: f64,
    ) -> Duration {
        let doublings = failed_attempt.saturating_sub(1);
        let exponential = 2u32
            .checked_pow(doublings)
            .and_then(|factor| self.base.checked_mul(factor))
            .unwrap_or(Duration::MAX);
        let mut delay = exponential.min(self.max);
        if throttled {
            delay = delay
                .checked_mul(self.throttle_factor.max(1))
                .unwrap_or(Duration::MAX);
        }
        let jitter = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if jitter > 0.0 && delay > Duration::ZERO {
            // The factor lies in (1 - jitter, 1], so this never overflows.
            let factor = 1.0 - jitter * unit.clamp(0.0, 1.0);
            if let Ok(jittered) = Duration::try_from_secs_f64(delay.as_secs_f64() * factor) {
                delay = jittered.min(delay);
            }
        }
        delay.max(retry_after.unwrap_or(Duration::ZERO))
    }
}

/// A small deterministic generator (SplitMix64): the same seed gives the
/// same jitter, so a schedule can be replayed exactly.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

/// The jitter source of retries: seeded, so a run can be replayed.
pub type Jitter = SplitMix64;

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next draw.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw from `[0, 1)`.
    pub fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(jitter: f64) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 10,
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
            throttle_factor: 3,
            jitter,
        }
    }

    #[test]
    fn backoff_doubles_caps_and_multiplies_for_throttling() {
        let p = policy(0.0);
        let ms = |d: Duration| d.as_millis();
        assert_eq!(ms(p.backoff(1, false, None, 0.5)), 100);
        assert_eq!(ms(p.backoff(2, false, None, 0.5)), 200);
        assert_eq!(ms(p.backoff(4, false, None, 0.5)), 800);
        assert_eq!(ms(p.backoff(5, false, None, 0.5)), 1000);
        assert_eq!(ms(p.backoff(u32::MAX, false, None, 0.5)), 1000);
        assert_eq!(ms(p.backoff(1, true, None, 0.5)), 300);
        assert_eq!(ms(p.backoff(9, true, None, 0.5)), 3000);
        assert_eq!(
            ms(p.backoff(1, false, Some(Duration::from_secs(7)), 0.5)),
            7000
        );
    }

    #[test]
    fn backoff_jitter_stays_in_range() {
        let p = policy(0.5);
        let mut rng = SplitMix64::new(7);
        for attempt in 1..6 {
            let full = policy(0.0).backoff(attempt, false, None, 0.0);
            for _ in 0..1000 {
                let d = p.backoff(attempt, false, None, rng.next_unit());
                assert!(d <= full && d > full / 2, "{d:?} vs {full:?}");
            }
        }
    }

    #[test]
    fn rng_is_deterministic_and_in_unit_range() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..1000 {
            let x = a.next_unit();
            assert_eq!(x, b.next_unit());
            assert!((0.0..1.0).contains(&x));
        }
    }
}
