//! Waiting on a condition, bounded: what tests do instead of sleeping.

use std::time::{Duration, Instant};

/// How often a condition is looked at.
const EVERY: Duration = Duration::from_millis(10);

/// Waits until `ready` holds, looking every few milliseconds.
///
/// # Panics
///
/// When `timeout` passes first, naming `what`.
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(EVERY);
    }
}

/// [`wait_until`] for a condition that needs `.await`.
///
/// # Panics
///
/// When `timeout` passes first, naming `what`.
pub async fn wait_until_async<F, Fut>(what: &str, timeout: Duration, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !ready().await {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(EVERY).await;
    }
}
