//! The `testbed` plugin binary: serves [`TestbedPlugin`] on stdin/stdout.
//!
//! `ORRERY_TESTBED_STORE=path` keeps the things of every target whose config
//! names no `store` in that SQLite file; `ORRERY_TESTBED_RATE_LIMIT=RATE:BURST`
//! (or `RATE:BURST:MAX_IN_FLIGHT`) announces that rate limit instead of
//! "unlimited". A satellite passes them on with `--plugin-env`.

use orrery_plugin_sdk::schema::RateLimit;
use orrery_plugin_testbed::TestbedPlugin;

// Plugins allocate for every message they decode and answer: mimalloc's
// per-thread free lists cost a fraction of glibc's arenas (BENCHMARKS.md,
// relay round 9).
#[global_allocator]
static ALLOCATOR: orrery_plugin_sdk::Allocator = orrery_plugin_sdk::Allocator;

const STORE_ENV: &str = "ORRERY_TESTBED_STORE";
const RATE_LIMIT_ENV: &str = "ORRERY_TESTBED_RATE_LIMIT";

/// Parses `RATE:BURST[:MAX_IN_FLIGHT]`.
fn rate_limit(text: &str) -> Option<RateLimit> {
    let mut parts = text.split(':');
    let requests_per_second = parts.next()?.parse().ok()?;
    let burst = parts.next()?.parse().ok()?;
    let max_in_flight = parts.next().map_or(Some(0), |n| n.parse().ok())?;
    parts.next().is_none().then_some(RateLimit {
        requests_per_second,
        burst,
        max_in_flight,
    })
}

fn main() {
    let store = std::env::var_os(STORE_ENV).filter(|p| !p.is_empty());
    let limit = match std::env::var(RATE_LIMIT_ENV) {
        Ok(text) => match rate_limit(&text) {
            Some(limit) => Some(limit),
            None => {
                eprintln!("{RATE_LIMIT_ENV}={text:?}: expected RATE:BURST[:MAX_IN_FLIGHT]");
                std::process::exit(2);
            }
        },
        Err(_) => None,
    };
    let mut plugin = match store {
        Some(path) => TestbedPlugin::with_store(path),
        None => TestbedPlugin::default(),
    };
    if let Some(limit) = limit {
        plugin = plugin.rate_limited(limit);
    }
    orrery_plugin_sdk::serve(plugin)
}
