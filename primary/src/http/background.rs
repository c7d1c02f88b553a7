//! The server's periodic jobs, one at a time, on a [`Timetable`]:
//!
//! - **resume**: interrupted commands (see `resume.rs`), at start and then
//!   every lease time to live;
//! - **discover**: discovery of every recorded target (`--discover-every`),
//!   its plugins started in the server's pool as a request would;
//! - **drift**: drift sync of every stack with no command running
//!   (`--drift-every`), so a sync never races an apply writing the same
//!   records.
//!
//! Discovery and drift run once per fleet of primaries on one store: a
//! job lease decides which ([`fleet_turn`]).
//!
//! Each job's first run is at start. A command that stopped because the
//! state store failed wakes the resume job at once, which then tries again
//! with backoff until the store answers ([`STORE_RETRY`]), so the command
//! goes on within seconds of the store's return, not a lease period later.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{blocking, Shared};
use crate::discovery::{self, Options, UNMANAGED_STACK};
use crate::service::Needs;
use crate::state::{CommandFilter, CommandStatus};
use crate::timetable::Timetable;

/// The first and the longest wait between resume scans while the state
/// store fails.
const STORE_RETRY: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(5));

#[derive(Clone, Debug, PartialEq, Eq)]
enum Job {
    Resume,
    Discover,
    Drift,
}

/// Runs the jobs until `stop` turns true (or its sender is gone).
pub(super) async fn run(state: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let config = &state.config;
    let mut timetable = Timetable::new(
        [
            (Job::Resume, Some(config.lease.ttl)),
            (Job::Discover, config.discover_every),
            (Job::Drift, config.drift_every),
        ],
        Instant::now(),
    );
    loop {
        for job in timetable.take_due(Instant::now()) {
            if *stop.borrow() {
                return;
            }
            match job {
                Job::Resume => {
                    super::resume::resume_interrupted(&state).await;
                }
                Job::Discover => {
                    if fleet_turn(&state, "discover", config.discover_every).await {
                        discover(&state).await;
                    }
                }
                Job::Drift => {
                    if fleet_turn(&state, "drift", config.drift_every).await {
                        drift(&state).await;
                    }
                }
            }
        }
        let Some(next) = timetable.next_due() else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep_until(next.into()) => {}
            changed = stop.changed() => if changed.is_err() { return },
            () = state.commands.store_failure() => {
                if !resume_when_the_store_answers(&state, &mut stop).await {
                    return;
                }
            }
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// Whether this primary runs the scheduled job `job` now: a schedule runs
/// once per fleet, not once per primary. The job's lease
/// (`job:<job>` in the lease table) lasts one and a half periods, so its
/// holder keeps it by taking it again at its next run, every other primary
/// finds it held and skips, and when the holder stops, another takes the
/// job within one and a half periods. A store that cannot say skips the
/// run.
async fn fleet_turn(state: &Shared, job: &str, every: Option<Duration>) -> bool {
    let Some(every) = every else { return false };
    let ttl_ms = i64::try_from((every * 3 / 2).as_millis()).unwrap_or(i64::MAX);
    let (store, owner) = (state.store.clone(), state.config.lease.owner.to_string());
    let key = format!("job:{job}");
    let granted = blocking(move || {
        let now = store.now_ms()?;
        Ok(store.acquire_lease(&key, &owner, now, ttl_ms)?)
    })
    .await;
    match granted {
        Ok(crate::state::LeaseGrant::Granted) => true,
        Ok(crate::state::LeaseGrant::HeldBy(lease)) => {
            tracing::debug!(job, holder = %lease.owner, "another primary runs this job");
            false
        }
        Err(e) => {
            tracing::warn!(job, error = %e.message, "cannot take the job's turn; skipped");
            false
        }
    }
}

/// Resume scans with backoff until one meets no state store failure;
/// false when asked to stop meanwhile.
async fn resume_when_the_store_answers(
    state: &Arc<Shared>,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let (mut wait, longest) = STORE_RETRY;
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { return false },
        }
        if super::resume::resume_interrupted(state).await {
            return true;
        }
        wait = (wait * 2).min(longest);
    }
}

/// Discovery of every recorded target.
async fn discover(state: &Shared) {
    let store = state.store.clone();
    let targets =
        blocking(move || Ok(discovery::targets_to_discover(store.as_ref(), None, None)?)).await;
    let targets = match targets {
        Ok(t) if t.is_empty() => return,
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e.message, "discovery: cannot read the recorded targets");
            return;
        }
    };
    let needs: Needs = targets
        .iter()
        .map(|t| (t.decl.plugin.clone(), t.decl.name.clone()))
        .collect();
    let plugins = match state.service.plugins().ensure(&needs).await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "discovery: plugins did not start");
            return;
        }
    };
    let report = discovery::discover(
        plugins.transport.as_ref(),
        &plugins.catalog,
        &plugins.rates,
        state.store.as_ref(),
        &targets,
        &Options::default(),
    )
    .await;
    match report {
        Ok(r) => tracing::info!(
            targets = r.targets,
            pages = r.pages,
            unmanaged = r.unmanaged,
            written = r.written,
            forgotten = r.forgotten,
            failures = r.failures.len(),
            elapsed_ms = r.elapsed_ms,
            "discovery done"
        ),
        Err(e) => tracing::warn!(error = %e, "discovery failed"),
    }
}

/// Drift sync of every stack that has no command running (here or in
/// another primary).
async fn drift(state: &Shared) {
    let store = state.store.clone();
    let stacks = blocking(move || {
        let busy: BTreeSet<String> = store
            .commands(&CommandFilter {
                before: None,
                stack: None,
                status: Some(CommandStatus::Running),
                limit: usize::MAX,
            })?
            .into_iter()
            .map(|c| c.stack)
            .collect();
        let mut stacks = Vec::new();
        for name in store.resource_counts()?.into_keys() {
            if name != UNMANAGED_STACK && !busy.contains(&name) {
                let plugins: Needs = store
                    .targets(&name)?
                    .into_iter()
                    .map(|t| (t.plugin, t.name))
                    .collect();
                stacks.push((name, plugins));
            }
        }
        Ok(stacks)
    })
    .await;
    let stacks = match stacks {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e.message, "drift sync: cannot read the stacks");
            return;
        }
    };
    for (stack, names) in stacks {
        if state.commands.running_for(&stack).is_some() {
            continue;
        }
        let plugins = match state.service.plugins().ensure(&names).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(stack = %stack, error = %e, "drift sync: plugins did not start");
                continue;
            }
        };
        let report = discovery::sync_drift(
            plugins.transport.as_ref(),
            &plugins.catalog,
            &plugins.rates,
            state.store.as_ref(),
            Some(&stack),
            &Options::default(),
        )
        .await;
        match report {
            Ok(r) => tracing::info!(stack = %stack, checked = r.checked,
                drifted = r.drifted.len(), failures = r.failures.len(),
                elapsed_ms = r.elapsed_ms, "drift sync done"),
            Err(e) => tracing::warn!(stack = %stack, error = %e, "drift sync failed"),
        }
    }
}
