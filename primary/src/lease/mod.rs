//! Command leases at the I/O edge: taking one before a command runs or is
//! resumed, renewing it while the command runs, giving it back at the end.
//!
//! Every primary (`orrery apply`, `orrery destroy`, `orrery primary`) holds
//! the lease of each command it runs, so two primaries sharing a store never
//! run (or resume) the same command. A lease is taken when it is free,
//! expired, or held by a process this one can see has died (see
//! [`OwnerId::sees_dead`]); it is renewed every third of its time to live on
//! the store's clock. A command whose lease cannot be kept is canceled
//! (nothing new starts), since another primary may resume it once the lease
//! has expired. The records themselves are in `state::lease`.

mod owner;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use owner::{process_alive, OwnerId};

use crate::apply::Stop;

use crate::state::{CommandFilter, CommandStatus, LeaseGrant, StateStore, Store, StoreError};

/// How long a lease lasts without renewal, unless configured.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// Who takes leases, for how long.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// This primary.
    pub owner: OwnerId,
    /// How long a lease lasts without renewal.
    pub ttl: Duration,
}

impl LeaseConfig {
    /// This process, with leases of `ttl` (at least a second).
    pub fn new(ttl: Duration) -> Self {
        LeaseConfig {
            owner: OwnerId::current(),
            ttl: ttl.max(Duration::from_secs(1)),
        }
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Why a lease could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another primary runs the command.
    #[error("command {command_id} is being run by another primary ({owner}) holding its lease until {expires_ms} (Unix ms); try again once it has finished or its lease has expired")]
    Held {
        /// The command.
        command_id: String,
        /// Its holder.
        owner: String,
        /// When the holder's lease expires unless renewed.
        expires_ms: i64,
    },
    /// Another process holds the stack: it is planning or running a
    /// command of it.
    #[error("stack `{stack}` is held by another command's process ({owner}){running} until {expires_ms} (Unix ms) unless it renews; try again once that command has finished", running = .command_id.as_deref().map(|id| format!(", running command {id},")).unwrap_or_default())]
    StackHeld {
        /// The stack.
        stack: String,
        /// The stack's running command, when one is recorded.
        command_id: Option<String>,
        /// Its holder.
        owner: String,
        /// When the holder's lease expires unless renewed.
        expires_ms: i64,
    },
    /// The stack's commands kept changing while this primary claimed one.
    #[error("the commands of stack `{stack}` kept changing while this primary claimed one (other primaries run it); try again")]
    Contended {
        /// The stack.
        stack: String,
    },
}

/// Takes the lease of `command_id` for `config.owner`, replacing a holder
/// this process can see has died.
pub fn acquire(
    store: &dyn StateStore,
    command_id: &str,
    config: &LeaseConfig,
) -> Result<(), LeaseError> {
    let owner = config.owner.to_string();
    let mut replaced_dead = false;
    loop {
        let now = store.now_ms()?;
        let lease = match store.acquire_lease(command_id, &owner, now, config.ttl_ms())? {
            LeaseGrant::Granted => return Ok(()),
            LeaseGrant::HeldBy(lease) => lease,
        };
        let dead = OwnerId::parse(&lease.owner)
            .is_some_and(|holder| config.owner.sees_dead(&holder, process_alive));
        if dead && !replaced_dead {
            tracing::info!(command = %command_id, holder = %lease.owner,
                "the lease holder's process is gone; taking its lease");
            // Only that holder's lease goes: if another primary takes it
            // first, the next acquire says so.
            store.release_lease(command_id, &lease.owner)?;
            replaced_dead = true;
            continue;
        }
        return Err(LeaseError::Held {
            command_id: command_id.to_owned(),
            owner: lease.owner,
            expires_ms: lease.expires_ms,
        });
    }
}

/// The command a run on a stack goes on with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// A new command, with this id.
    New(String),
    /// The stack's latest command, still `running` (a primary stopped
    /// mid-command): resume it under its id.
    Interrupted(String),
}

impl Claim {
    /// The command's id.
    pub fn command_id(&self) -> &str {
        match self {
            Claim::New(id) | Claim::Interrupted(id) => id,
        }
    }
}

/// How often a claim looks again when the stack's commands changed under
/// it before it gives up (each time means another primary made progress).
const CLAIM_ATTEMPTS: usize = 8;

/// Decides which command a run on `stack` goes on with and takes its
/// lease: the stack's latest command when it is still `running`, else a new
/// command (`new_id`). Fails when another primary holds the running
/// command's lease.
pub fn claim(
    store: &dyn StateStore,
    stack: &str,
    new_id: &str,
    config: &LeaseConfig,
) -> Result<Claim, LeaseError> {
    // The stack first: a new command's id is always free, so without it two
    // processes could each claim a new command of one stack and plan and
    // run it twice (a command is listed running only once planned).
    let key = stack_key(stack);
    match acquire(store, &key, config) {
        Ok(()) => {}
        Err(LeaseError::Held {
            owner, expires_ms, ..
        }) => {
            return Err(LeaseError::StackHeld {
                stack: stack.to_owned(),
                command_id: running_command(store, stack)?,
                owner,
                expires_ms,
            })
        }
        Err(other) => return Err(other),
    }
    let claimed = running_command(store, stack)
        .and_then(|listed| claim_listed(store, stack, listed, new_id, config));
    if claimed.is_err() {
        store.release_lease(&key, &config.owner.to_string())?;
    }
    claimed
}

/// The lease key of `stack` itself, held (beside its command's) from the
/// claim until the command ends. Command ids are UUIDs: no id is one.
pub fn stack_key(stack: &str) -> String {
    format!("stack:{stack}")
}

/// [`claim`] from a listing already made: `listed` is the stack's running
/// command as it was seen, which may have changed since.
fn claim_listed(
    store: &dyn StateStore,
    stack: &str,
    mut listed: Option<String>,
    new_id: &str,
    config: &LeaseConfig,
) -> Result<Claim, LeaseError> {
    for _ in 0..CLAIM_ATTEMPTS {
        let claim = match &listed {
            Some(id) => Claim::Interrupted(id.clone()),
            None => Claim::New(new_id.to_owned()),
        };
        acquire(store, claim.command_id(), config)?;
        // Between the listing and the lease, another primary may have
        // finished the listed command and let its lease go (resuming it
        // again would run a finished command), or begun one (a new command
        // beside it would run the stack twice). Under the lease, the
        // listing cannot change: look again.
        let now = running_command(store, stack)?;
        if now == listed {
            return Ok(claim);
        }
        store.release_lease(claim.command_id(), &config.owner.to_string())?;
        listed = now;
    }
    Err(LeaseError::Contended {
        stack: stack.to_owned(),
    })
}

/// The id of `stack`'s latest command when it is still `running`.
fn running_command(store: &dyn StateStore, stack: &str) -> Result<Option<String>, LeaseError> {
    let latest = store.commands(&CommandFilter {
        before: None,
        stack: Some(stack.to_owned()),
        status: None,
        limit: 1,
    })?;
    Ok(latest
        .into_iter()
        .next()
        .filter(|head| head.status == CommandStatus::Running)
        .map(|head| head.id))
}

/// A held lease, renewed in the background until released (or dropped,
/// which releases it too).
pub struct Keeper {
    store: Store,
    command_id: String,
    owner: String,
    lost: watch::Receiver<bool>,
    task: JoinHandle<()>,
    released: bool,
}

impl Keeper {
    /// Keeps the lease of `command_id`, which `config.owner` holds: renews
    /// it every third of its time to live. Must be called inside a tokio
    /// runtime.
    pub fn start(store: Store, command_id: &str, config: &LeaseConfig) -> Keeper {
        let (lost_tx, lost) = watch::channel(false);
        let owner = config.owner.to_string();
        let task = tokio::spawn(renew_until_lost(
            store.clone(),
            command_id.to_owned(),
            owner.clone(),
            config.ttl,
            lost_tx,
        ));
        Keeper {
            store,
            command_id: command_id.to_owned(),
            owner,
            lost,
            task,
            released: false,
        }
    }

    /// The command.
    pub fn command_id(&self) -> &str {
        &self.command_id
    }

    /// Turns true when the lease could not be kept.
    pub fn lost(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    /// Stops renewing and frees the lease.
    pub fn release(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        self.task.abort();
        if let Err(e) = self.store.release_lease(&self.command_id, &self.owner) {
            tracing::warn!(command = %self.command_id, error = %e,
                "cannot release the command's lease; it expires on its own");
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn renew_until_lost(
    store: Store,
    command_id: String,
    owner: String,
    ttl: Duration,
    lost: watch::Sender<bool>,
) {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    // Without a renewal, the lease lapses at the latest this long after the
    // last successful one started (measured here, conservatively).
    let mut lapses = Instant::now() + ttl;
    loop {
        tokio::time::sleep(ttl / 3).await;
        let attempt = Instant::now();
        let (store, id, who) = (Arc::clone(&store), command_id.clone(), owner.clone());
        let renewed = tokio::task::spawn_blocking(move || {
            let now = store.now_ms()?;
            store.renew_lease(&id, &who, now, ttl_ms)
        })
        .await;
        match renewed {
            Ok(Ok(true)) => lapses = attempt + ttl,
            Ok(Ok(false)) => {
                tracing::warn!(command = %command_id,
                    "the command's lease was taken by another primary; canceling the command");
                let _ = lost.send(true);
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(command = %command_id, error = %e, "cannot renew the command's lease")
            }
            Err(e) => {
                tracing::warn!(command = %command_id, error = %e, "the lease renewal failed")
            }
        }
        if Instant::now() >= lapses {
            tracing::warn!(command = %command_id,
                "the command's lease could not be renewed before it lapsed; canceling the command");
            let _ = lost.send(true);
            return;
        }
    }
}

/// A cancel signal that asks what `cancel` asks, and at least a graceful
/// stop once `lost` turns true (the command's lease is gone: nothing new
/// may start, since another primary may resume it). It only escalates.
/// Must be called inside a tokio runtime.
pub fn cancel_on_loss(
    mut cancel: watch::Receiver<Stop>,
    mut lost: watch::Receiver<bool>,
) -> watch::Receiver<Stop> {
    let combined = |cancel: Stop, lost: bool| match lost {
        true => cancel.escalate(Stop::Graceful),
        false => cancel,
    };
    let (tx, rx) = watch::channel(combined(*cancel.borrow(), *lost.borrow()));
    tokio::spawn(async move {
        let (mut cancel_open, mut lost_open) = (true, true);
        while cancel_open || lost_open {
            tokio::select! {
                changed = cancel.changed(), if cancel_open => cancel_open = changed.is_ok(),
                changed = lost.changed(), if lost_open => lost_open = changed.is_ok(),
                () = tx.closed() => return,
            }
            let now = combined(*cancel.borrow(), *lost.borrow());
            tx.send_if_modified(|asked| {
                let more = now > *asked;
                *asked = asked.escalate(now);
                more
            });
            if now == Stop::Force {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests;
