//! The chaos soak (issue #18): a long apply of `Testbed::Async::Thing`s
//! through three real satellites over a real nats-server, rate limited,
//! the things kept in the testbed's SQLite store, driven over the HTTP API
//! of `orrery primary`, while a seeded random schedule SIGKILLs
//! satellites, plugin processes and the primary (restarted: it resumes),
//! restarts nats-server on its port and partitions satellites from it.
//! After every round: each desired thing exists exactly once, nothing
//! else does, the inventory is the stack, no command is left `running`;
//! at the end no process of the run survives, within a bound.
//!
//! `ORRERY_SOAK_SECONDS` (apply time with faults, default 40) and
//! `ORRERY_SOAK_SEED` run it longer or with other faults;
//! `ORRERY_SOAK_RESOURCES` sets the things per round (default 2,000).

use crate::chaos;

use std::time::Duration;

use chaos::run::{Settings, Soak};
use chaos::schedule::KINDS;

const DEFAULT_SEED: u64 = 18;
const DEFAULT_SECONDS: u64 = 40;
const DEFAULT_RESOURCES: usize = 2_000;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// Prints how to replay the run when the test fails.
struct Replay(Settings);

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "\nsoak FAILED with seed {seed}; replay with:\n  ORRERY_SOAK_SEED={seed} ORRERY_SOAK_SECONDS={secs} ORRERY_SOAK_RESOURCES={n} \
                 cargo test -p orrery-primary --test it chaos_soak -- --nocapture\n",
                seed = self.0.seed,
                secs = self.0.window_s,
                n = self.0.resources,
            );
        }
    }
}

#[test]
fn a_long_apply_survives_random_faults_with_nothing_lost_or_duplicated() {
    let resources = env_or("ORRERY_SOAK_RESOURCES", DEFAULT_RESOURCES);
    let settings = Settings {
        seed: env_or("ORRERY_SOAK_SEED", DEFAULT_SEED),
        window_s: env_or("ORRERY_SOAK_SECONDS", DEFAULT_SECONDS),
        resources,
        shift: resources / 4,
        rate_limit: "150:30:48".into(),
        request_timeout: "10s".into(),
    };
    let _replay = Replay(settings.clone());
    // Two rounds at the least, each bounded; faults add at most the
    // window's worth of stalls.
    let bound = Duration::from_secs(3 * settings.window_s + 300);
    let mut soak = Soak::start(settings.clone());
    eprintln!(
        "soak: seed {}, {} s of faults, {} things per round (shift {}), rate limit {}; schedule:",
        settings.seed, settings.window_s, settings.resources, settings.shift, settings.rate_limit
    );
    for event in &soak.events {
        eprintln!(
            "soak:   at {:6.1} s  {}",
            event.at_ms as f64 / 1000.0,
            event.fault
        );
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| soak.run()));
    if let Err(panic) = outcome {
        eprintln!("{}", soak.diagnostics());
        std::panic::resume_unwind(panic);
    }
    let f = &soak.figures;
    eprintln!("soak: figures for seed {}:", settings.seed);
    for kind in KINDS {
        eprintln!(
            "soak:   faults {kind}: {}",
            f.injected.get(kind).copied().unwrap_or(0)
        );
    }
    eprintln!("soak:   faults skipped (victim down): {}", f.skipped);
    eprintln!(
        "soak:   rounds {}, commands {}, repairs {}, nudges {}",
        f.rounds, f.commands, f.repairs, f.nudges
    );
    eprintln!("soak:   operations by status {:?}", f.operations);
    eprintln!("soak:   failure codes before repair {:?}", f.failure_codes);
    eprintln!(
        "soak:   duplicates {}, lost {}, leftover {}, time {:.1} s (bound {} s)",
        f.duplicates,
        f.lost,
        f.leftover,
        f.elapsed.as_secs_f64(),
        bound.as_secs()
    );
    assert_eq!((f.duplicates, f.lost, f.leftover), (0, 0, 0));
    assert!(f.rounds >= 2, "{f:?}");
    let injected: u64 = f.injected.values().sum();
    assert!(
        injected >= KINDS.len() as u64,
        "every kind of fault at least once: {f:?}"
    );
    assert!(
        f.elapsed <= bound,
        "{:?} over the bound {bound:?}",
        f.elapsed
    );
}
