//! The I/O half of rate limits held across primaries: every
//! [`SHARE_PERIOD`], tell the state store which buckets this process wants
//! and take the count of processes that want each as this process's
//! divisor (`orrery_core::scheduler::SharedRateLimiter` has the rules).
//! A store that does not answer leaves the last counts in place.

use std::collections::HashMap;
use std::time::Instant;

use tokio::sync::watch;

use crate::scheduler::{SharedRateLimiter, SHARE_PERIOD, SHARE_WINDOW};
use crate::state::Store;

/// Shares `limiter`'s buckets with every process on `store` as `owner`,
/// until `stop` turns true (or its sender is gone).
pub async fn share(
    limiter: SharedRateLimiter,
    store: Store,
    owner: String,
    mut stop: watch::Receiver<bool>,
) {
    let window_ms = i64::try_from(SHARE_WINDOW.as_millis()).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(SHARE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { return },
        }
        let since = Instant::now().checked_sub(SHARE_WINDOW);
        let wanted = since.map(|s| limiter.wanted(s)).unwrap_or_default();
        if wanted.is_empty() {
            limiter.set_sharers(HashMap::new());
            continue;
        }
        let (store, owner) = (store.clone(), owner.clone());
        let counted =
            tokio::task::spawn_blocking(move || store.rate_sharers(&owner, &wanted, window_ms))
                .await;
        match counted {
            Ok(Ok(counts)) => limiter.set_sharers(counts),
            Ok(Err(e)) => tracing::debug!(error = %e, "cannot share the rate limits this round"),
            Err(e) => tracing::debug!(error = %e, "the rate-sharing call failed"),
        }
    }
}
