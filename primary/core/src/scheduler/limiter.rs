//! The rate-limit registry: where every run of a process takes its tokens.
//!
//! A plugin's rate limit holds per `namespace/target` bucket
//! ([`crate::tasks::bucket`]) for the whole process, not per run: a
//! command, a resume, a discovery, a drift sync and an import on one target
//! all draw from one bucket. The [`Scheduler`](super::Scheduler) and the
//! primary's pacer ask a [`RateRegistry`] for tokens; the registry hands the
//! question to a [`RateLimiter`]. [`LocalRateLimiter`] keeps the buckets in
//! this process's memory. A limiter shared by several primaries would be
//! another implementation of the same trait.
//!
//! Like the scheduler, this does no I/O and never reads the clock: `now` is
//! an argument.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{BucketLimit, TokenBucket};

/// A source of rate-limit tokens, by bucket.
///
/// Implementations are shared by every run of a process (and may be shared
/// further), so `try_take` takes `&self` and must be safe to call from
/// several threads at once.
pub trait RateLimiter: Send + Sync {
    /// Takes `cost` tokens from `bucket` at `now`, under `limit` (the
    /// plugin's announced limit or the operator's override,
    /// [`crate::tasks::bucket_limit`]); or says when they are due.
    ///
    /// The instant is a hint: another user of the bucket may take the
    /// tokens first, and the caller then asks again.
    ///
    /// # Errors
    ///
    /// The instant at which `cost` tokens are expected to be there.
    fn try_take(
        &self,
        bucket: &str,
        limit: BucketLimit,
        now: Instant,
        cost: u32,
    ) -> Result<(), Instant>;
}

/// Buckets kept in this process's memory; a clone shares them.
///
/// A bucket is made full the first time it is asked for. When a bucket is
/// asked for with another limit than before (the operator changed an
/// override, the plugin announced another one), the latest limit applies
/// from then on; the tokens already taken stay taken. An unlimited take
/// ([`BucketLimit::UNLIMITED`], a rate of 0) goes through without touching
/// the bucket.
#[derive(Clone, Debug, Default)]
pub struct LocalRateLimiter {
    buckets: Arc<Mutex<HashMap<String, Entry>>>,
}

#[derive(Debug)]
struct Entry {
    limit: BucketLimit,
    bucket: TokenBucket,
}

/// Past this many buckets, full ones are forgotten when a new one is made
/// (a full bucket is the same as a fresh one).
const PRUNE_ABOVE: usize = 1024;

impl LocalRateLimiter {
    /// An empty registry: every bucket starts full.
    pub fn new() -> LocalRateLimiter {
        LocalRateLimiter::default()
    }
}

impl RateLimiter for LocalRateLimiter {
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
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(bucket) && buckets.len() >= PRUNE_ABOVE {
            buckets.retain(|_, e| !e.bucket.is_full(now));
        }
        let entry = buckets.entry(bucket.to_owned()).or_insert_with(|| Entry {
            limit,
            bucket: TokenBucket::new(limit, now),
        });
        if entry.limit != limit {
            entry.limit = limit;
            entry.bucket.set_limit(limit, now);
        }
        entry.bucket.try_take(now, cost)
    }
}

/// The process's rate-limit registry: a cheap, shared handle on one
/// [`RateLimiter`]. Clones share the limiter, so every run given a clone
/// draws from the same buckets.
#[derive(Clone)]
pub struct RateRegistry {
    limiter: Arc<dyn RateLimiter>,
}

impl RateRegistry {
    /// A registry over `limiter`.
    pub fn new(limiter: impl RateLimiter + 'static) -> RateRegistry {
        RateRegistry {
            limiter: Arc::new(limiter),
        }
    }

    /// A registry of buckets in this process's memory
    /// ([`LocalRateLimiter`]). Make one per process and share it.
    pub fn local() -> RateRegistry {
        RateRegistry::new(LocalRateLimiter::new())
    }

    /// Takes `cost` tokens from `bucket` at `now` under `limit`, or says
    /// when they are due (see [`RateLimiter::try_take`]).
    ///
    /// # Errors
    ///
    /// The instant at which the tokens are expected to be there.
    pub fn try_take(
        &self,
        bucket: &str,
        limit: BucketLimit,
        now: Instant,
        cost: u32,
    ) -> Result<(), Instant> {
        self.limiter.try_take(bucket, limit, now, cost)
    }

    /// Whether `self` and `other` share their limiter.
    pub fn same_as(&self, other: &RateRegistry) -> bool {
        Arc::ptr_eq(&self.limiter, &other.limiter)
    }
}

impl fmt::Debug for RateRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateRegistry").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const LIMIT: BucketLimit = BucketLimit {
        rate_per_sec: 10.0,
        burst: 2,
    };

    #[test]
    fn two_users_of_one_bucket_share_its_tokens() {
        let t0 = crate::test_clock::epoch();
        let registry = RateRegistry::local();
        let (a, b) = (registry.clone(), registry.clone());
        assert_eq!(a.try_take("Testbed/t", LIMIT, t0, 1), Ok(()));
        assert_eq!(b.try_take("Testbed/t", LIMIT, t0, 1), Ok(()));
        // The burst is spent by the two together: neither gets a third.
        let due = t0 + Duration::from_millis(100);
        assert_eq!(a.try_take("Testbed/t", LIMIT, t0, 1), Err(due));
        assert_eq!(b.try_take("Testbed/t", LIMIT, t0, 1), Err(due));
        // One token refills; whoever comes first takes it.
        assert_eq!(b.try_take("Testbed/t", LIMIT, due, 1), Ok(()));
        assert_eq!(
            a.try_take("Testbed/t", LIMIT, due, 1),
            Err(due + Duration::from_millis(100))
        );
        // Another target is another bucket, full.
        assert_eq!(a.try_take("Testbed/u", LIMIT, t0, 1), Ok(()));
        assert_eq!(a.try_take("Testbed/u", LIMIT, t0, 1), Ok(()));
    }

    #[test]
    fn separate_registries_do_not_share() {
        let t0 = crate::test_clock::epoch();
        let (a, b) = (RateRegistry::local(), RateRegistry::local());
        assert!(!a.same_as(&b) && a.same_as(&a.clone()));
        for r in [&a, &b] {
            assert_eq!(r.try_take("Testbed/t", LIMIT, t0, 2), Ok(()));
        }
    }

    #[test]
    fn the_latest_limit_applies_and_taken_tokens_stay_taken() {
        let t0 = crate::test_clock::epoch();
        let registry = RateRegistry::local();
        assert_eq!(registry.try_take("N/t", LIMIT, t0, 2), Ok(()));
        // Twice the rate: the two tokens owed are earned at the new rate,
        // so a token is due sooner than at the old one.
        let faster = BucketLimit {
            rate_per_sec: 20.0,
            burst: 2,
        };
        let due = registry.try_take("N/t", faster, t0, 1).unwrap_err();
        assert!(
            due > t0 && due <= t0 + Duration::from_millis(100),
            "{due:?}"
        );
        // Unlimited lets everything through and leaves the bucket as it was.
        for _ in 0..100 {
            assert_eq!(
                registry.try_take("N/t", BucketLimit::UNLIMITED, t0, 1),
                Ok(())
            );
        }
        assert_eq!(registry.try_take("N/t", faster, t0, 1), Err(due));
    }

    #[test]
    fn many_buckets_are_pruned_only_when_full() {
        let t0 = crate::test_clock::epoch();
        let limiter = LocalRateLimiter::new();
        for i in 0..PRUNE_ABOVE {
            assert_eq!(limiter.try_take(&format!("N/{i}"), LIMIT, t0, 2), Ok(()));
        }
        // All are empty at t0: nothing is forgotten, N/0 stays empty.
        assert!(limiter.try_take("N/new", LIMIT, t0, 1).is_ok());
        assert!(limiter.try_take("N/0", LIMIT, t0, 1).is_err());
        // A second later they are full again: forgetting them changes nothing.
        let later = t0 + Duration::from_secs(1);
        assert!(limiter.try_take("N/newer", LIMIT, later, 1).is_ok());
        let kept = limiter.buckets.lock().unwrap().len();
        assert!(kept < PRUNE_ABOVE, "{kept} buckets kept");
        assert_eq!(limiter.try_take("N/0", LIMIT, later, 2), Ok(()));
    }
}
