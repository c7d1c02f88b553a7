//! Commands running in the background: one at a time per stack, each
//! cancellable, their reports kept for a while after they end.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::apply::{EventSink, Report, Stop};
use crate::service::{Command, Planned, ServiceError};

/// How many finished commands' reports are kept in memory.
const KEEP_FINISHED: usize = 256;
/// How many finished commands' events are kept in memory; older ones are
/// served from their records.
const KEEP_FINISHED_EVENTS: usize = 16;
/// A finished command with more events than this is served from its record
/// at once: five 100,000-resource commands kept 131,072 events each, about
/// half of an idle primary's memory (primary/benches/idle_memory.sh).
const KEEP_FINISHED_EVENTS_UP_TO: usize = 10_000;

/// How a command this process ran ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The executor's report.
    Report(Report),
    /// The executor could not run it (the state store failed, or a bug).
    Error(String),
}

struct Running {
    stack: String,
    events: EventSink,
    cancel: watch::Sender<Stop>,
    task: Option<JoinHandle<()>>,
    /// The command's own work, inside `task`: aborted to hand it over.
    work: Option<tokio::task::AbortHandle>,
}

#[derive(Default)]
struct Inner {
    running: HashMap<String, Running>,
    /// Stack → its running command.
    by_stack: HashMap<String, String>,
    finished: VecDeque<(String, Outcome)>,
    /// Finished commands' ids, stacks and events.
    finished_events: VecDeque<(String, String, EventSink)>,
    /// Set at shutdown: nothing new starts.
    closed: bool,
}

/// The registry of commands.
#[derive(Clone, Default)]
pub struct Commands {
    inner: Arc<Mutex<Inner>>,
    /// Woken when a command stopped because the state store failed: the
    /// background jobs resume it as soon as the store answers.
    store_failed: Arc<tokio::sync::Notify>,
}

/// Why a command could not be canceled.
#[derive(Debug, PartialEq, Eq)]
pub enum NotRunning {
    /// Not run by this process, or already finished.
    NotRunning,
}

/// A stack reserved for a command that has not started yet. Dropping it
/// releases the stack.
pub struct Reservation {
    commands: Commands,
    /// The command's id.
    pub id: String,
    cancel: Option<watch::Receiver<Stop>>,
    launched: bool,
}

impl Commands {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says a command stopped on a state store failure (it stays
    /// `running`, to be resumed).
    pub fn store_failed(&self) {
        self.store_failed.notify_one();
    }

    /// Waits for [`Commands::store_failed`].
    pub async fn store_failure(&self) {
        self.store_failed.notified().await;
    }

    /// Reserves `stack` for a new command.
    pub fn reserve(&self, stack: &str) -> Result<Reservation, ServiceError> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(ServiceError::ShuttingDown);
        }
        if let Some(id) = inner.by_stack.get(stack) {
            return Err(ServiceError::Busy {
                stack: stack.to_owned(),
                command_id: id.clone(),
            });
        }
        let id = uuid::Uuid::now_v7().to_string();
        let (cancel, rx) = watch::channel(Stop::Run);
        inner.by_stack.insert(stack.to_owned(), id.clone());
        inner.running.insert(
            id.clone(),
            Running {
                stack: stack.to_owned(),
                events: EventSink::new(&id),
                cancel,
                task: None,
                work: None,
            },
        );
        Ok(Reservation {
            commands: self.clone(),
            id,
            cancel: Some(rx),
            launched: false,
        })
    }

    /// Records how a command ended and releases its stack.
    fn finish(&self, id: &str, outcome: Option<Outcome>) {
        let mut inner = self.lock();
        if let Some(running) = inner.running.remove(id) {
            if inner.by_stack.get(&running.stack).map(String::as_str) == Some(id) {
                inner.by_stack.remove(&running.stack);
            }
            if outcome.is_some() && running.events.held() <= KEEP_FINISHED_EVENTS_UP_TO {
                inner
                    .finished_events
                    .push_back((id.to_owned(), running.stack, running.events));
                while inner.finished_events.len() > KEEP_FINISHED_EVENTS {
                    inner.finished_events.pop_front();
                }
            }
        }
        if let Some(outcome) = outcome {
            inner.finished.push_back((id.to_owned(), outcome));
            while inner.finished.len() > KEEP_FINISHED {
                inner.finished.pop_front();
            }
        }
    }

    /// Whether this process is running `id`.
    pub fn is_running(&self, id: &str) -> bool {
        self.lock().running.contains_key(id)
    }

    /// The stack of `id`, while this process runs it.
    pub fn stack_of(&self, id: &str) -> Option<String> {
        self.lock().running.get(id).map(|r| r.stack.clone())
    }

    /// The command running for `stack`, if any.
    pub fn running_for(&self, stack: &str) -> Option<String> {
        self.lock().by_stack.get(stack).cloned()
    }

    /// The events of `id`, while it runs here and for a while after.
    pub fn events(&self, id: &str) -> Option<EventSink> {
        self.events_of(id).map(|(_, events)| events)
    }

    /// The stack and the events of `id`, while it runs here and for a
    /// while after: whoever reads the events must be allowed that stack.
    pub fn events_of(&self, id: &str) -> Option<(String, EventSink)> {
        let inner = self.lock();
        match inner.running.get(id) {
            Some(running) => Some((running.stack.clone(), running.events.clone())),
            None => inner
                .finished_events
                .iter()
                .rev()
                .find(|(i, _, _)| i == id)
                .map(|(_, stack, events)| (stack.clone(), events.clone())),
        }
    }

    /// How a recent command of this process ended.
    pub fn outcome(&self, id: &str) -> Option<Outcome> {
        self.lock()
            .finished
            .iter()
            .rev()
            .find(|(i, _)| i == id)
            .map(|(_, o)| o.clone())
    }

    /// Asks a running command to stop as `stop` says (see [`Stop`]): a
    /// graceful cancel after a forced one asks nothing more.
    pub fn cancel(&self, id: &str, stop: Stop) -> Result<(), NotRunning> {
        let inner = self.lock();
        let running = inner.running.get(id).ok_or(NotRunning::NotRunning)?;
        running.cancel.send_if_modified(|asked| {
            let more = stop > *asked;
            *asked = asked.escalate(stop);
            more
        });
        Ok(())
    }

    /// Drains: nothing new starts; the running commands go on for up to
    /// `grace`; those still running then are handed over, not canceled:
    /// their tasks are dropped as a crash would drop them (what was in
    /// flight stays recorded `running`) and their leases are freed, so
    /// another primary on the store resumes them at its next scan, or this
    /// one when it starts again. Returns how many were handed over.
    pub async fn shutdown(&self, grace: Duration) -> usize {
        let (tasks, works): (Vec<JoinHandle<()>>, Vec<tokio::task::AbortHandle>) = {
            let mut inner = self.lock();
            inner.closed = true;
            inner
                .running
                .values_mut()
                .filter_map(|r| Some((r.task.take()?, r.work.clone()?)))
                .unzip()
        };
        let mut all = futures::future::join_all(tasks);
        if tokio::time::timeout(grace, &mut all).await.is_ok() {
            return 0;
        }
        // Dropping a command's future drops its lease keepers, which free
        // its leases; the task around it records the outcome.
        for work in &works {
            work.abort();
        }
        let left = works.len();
        all.await;
        left
    }
}

impl Reservation {
    /// Makes the reservation that of command `id` instead (the stack's
    /// interrupted command, which the request goes on with).
    pub fn rename(&mut self, id: &str) {
        let mut inner = self.commands.lock();
        if let Some(running) = inner.running.remove(&self.id) {
            running.events.rename(id);
            inner.by_stack.insert(running.stack.clone(), id.to_owned());
            inner.running.insert(id.to_owned(), running);
        }
        self.id = id.to_owned();
    }

    /// Runs `work` in the background as this command. `work` gets the
    /// cancel signal; its result is kept as the command's outcome. The stack
    /// is released when it ends, however it ends.
    pub fn launch<F, Fut>(mut self, work: F)
    where
        F: FnOnce(watch::Receiver<Stop>) -> Fut,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        self.launched = true;
        let cancel = self
            .cancel
            .take()
            .unwrap_or_else(|| watch::channel(Stop::Run).1);
        let inner_task = tokio::spawn(work(cancel));
        let work = inner_task.abort_handle();
        let commands = self.commands.clone();
        let id = self.id.clone();
        let task = tokio::spawn(async move {
            let outcome = match inner_task.await {
                Ok(outcome) => outcome,
                Err(e) if e.is_cancelled() => {
                    tracing::info!(command = %id,
                        "handed over at shutdown: it stays `running` for another primary (or this one's restart) to resume");
                    Outcome::Error(
                        "this primary shut down; the command stays running and is resumed by another primary or at restart".into(),
                    )
                }
                Err(e) => {
                    tracing::error!(command = %id, error = %e, "command task failed");
                    Outcome::Error(format!("internal error: the command's task failed: {e}"))
                }
            };
            commands.finish(&id, Some(outcome));
            // The command's memory is free now: hand it back while idle.
            let _ = tokio::task::spawn_blocking(crate::memory::give_back).await;
        });
        let mut inner = self.commands.lock();
        if let Some(running) = inner.running.get_mut(&self.id) {
            running.task = Some(task);
            running.work = Some(work);
        }
    }
}

/// Runs `command` in the background as `reservation`: `planned` as given,
/// or, for a command that resumes an interrupted one (`None`), settled
/// first and planned again. Operations are logged as they go, in a span
/// naming the command and who ran it (`principal`).
pub fn launch(
    reservation: Reservation,
    command: Command,
    planned: Option<Planned>,
    principal: Option<&str>,
    audit: Option<super::audit::Audit>,
) {
    use tracing::Instrument;
    let id = reservation.id.clone();
    let span = tracing::info_span!(
        "http_command",
        command = %id,
        principal = principal.unwrap_or("unrecorded")
    );
    let events = reservation
        .commands
        .events(&id)
        .unwrap_or_else(|| EventSink::new(&id));
    let commands = reservation.commands.clone();
    reservation.launch(move |cancel| {
        async move {
            let outcome = run(id.clone(), command, planned, events, commands, cancel).await;
            if let Some(audit) = audit {
                audit.finished(&id, &outcome).await;
            }
            outcome
        }
        .instrument(span)
    });
}

/// The command's run in the background: its outcome.
async fn run(
    id: String,
    command: Command,
    planned: Option<Planned>,
    events: EventSink,
    commands: Commands,
    cancel: watch::Receiver<Stop>,
) -> Outcome {
    use tracing::Instrument;
    {
        let log_id = id.clone();
        let log = events.clone();
        let logger = tokio::spawn(
            async move {
                log.follow(|e| log_event(&log_id, &e.body)).await;
            }
            .in_current_span(),
        );
        let planned = match planned {
            Some(planned) => Ok(planned),
            None => match command.settle().await {
                Ok(_) => command.plan().await,
                Err(e) => Err(e),
            },
        };
        let planned = match planned {
            Ok(planned) => planned,
            Err(e) => {
                if matches!(e, ServiceError::Store(_)) {
                    commands.store_failed();
                }
                tracing::warn!(command = %id, error = %e,
                    "cannot resume the interrupted command; it stays `running` for the next attempt");
                let message = format!("cannot resume: {e}");
                events.emit(crate::service::error_event(message.clone()));
                let _ = logger.await;
                return Outcome::Error(message);
            }
        };
        let result = command
            .execute(&planned, Some(events.clone()), cancel)
            .await;
        let _ = logger.await;
        match result {
            Ok(report) => Outcome::Report(report),
            Err(e) => {
                tracing::error!(command = %id, error = %e,
                    "the state store failed; the command stays `running` and is resumed when it answers");
                if matches!(e, ServiceError::Store(_)) {
                    commands.store_failed();
                }
                Outcome::Error(e.to_string())
            }
        }
    }
}

/// Logs an operation's failures as warnings, the rest at debug level.
fn log_event(command: &str, event: &orrery_core::events::EventBody) {
    use orrery_core::events::{EventBody, OpEvent};
    let EventBody::Operation(e) = event else {
        return;
    };
    let detail = format!(
        "{}{}",
        e.code
            .as_deref()
            .map(|c| format!("{c}: "))
            .unwrap_or_default(),
        e.message.as_deref().unwrap_or_default()
    );
    let status = e.status.name();
    if matches!(
        e.status,
        OpEvent::Failed | OpEvent::Retrying | OpEvent::DependencyFailed
    ) {
        tracing::warn!(%command, label = %e.label, operation = %e.operation, status, %detail, "operation");
    } else {
        tracing::debug!(%command, label = %e.label, operation = %e.operation, status, %detail, "operation");
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.launched {
            self.commands.finish(&self.id, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_command_per_stack_and_release_on_drop() {
        let commands = Commands::default();
        let r = commands.reserve("s").unwrap();
        assert!(
            matches!(commands.reserve("s"), Err(ServiceError::Busy { command_id, .. }) if command_id == r.id)
        );
        assert!(commands.reserve("t").is_ok());
        let id = r.id.clone();
        drop(r);
        assert!(!commands.is_running(&id));
        assert!(commands.reserve("s").is_ok());
    }

    #[tokio::test]
    async fn a_renamed_reservation_is_the_command_it_goes_on_with() {
        let commands = Commands::default();
        let mut r = commands.reserve("s").unwrap();
        let provisional = r.id.clone();
        r.rename("interrupted-1");
        assert_eq!(r.id, "interrupted-1");
        assert!(commands.is_running("interrupted-1"));
        assert!(!commands.is_running(&provisional));
        assert_eq!(commands.running_for("s").as_deref(), Some("interrupted-1"));
        commands.cancel("interrupted-1", Stop::Graceful).unwrap();
        drop(r);
        assert!(!commands.is_running("interrupted-1"));
        assert!(commands.reserve("s").is_ok());
    }

    #[tokio::test]
    async fn launched_command_records_outcome_and_cancels() {
        let commands = Commands::default();
        let r = commands.reserve("s").unwrap();
        let id = r.id.clone();
        r.launch(|mut cancel| async move {
            let _ = cancel.wait_for(|c| *c == Stop::Force).await;
            Outcome::Error("canceled".into())
        });
        assert!(commands.is_running(&id));
        assert_eq!(commands.running_for("s").as_deref(), Some(id.as_str()));
        commands.cancel(&id, Stop::Force).unwrap();
        // Graceful after forced asks nothing more.
        commands.cancel(&id, Stop::Graceful).unwrap();
        for _ in 0..200 {
            if !commands.is_running(&id) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!commands.is_running(&id));
        assert!(matches!(commands.outcome(&id), Some(Outcome::Error(m)) if m == "canceled"));
        assert_eq!(
            commands.cancel(&id, Stop::Graceful),
            Err(NotRunning::NotRunning)
        );
        assert!(commands.running_for("s").is_none());
    }

    #[tokio::test]
    async fn panicking_command_releases_its_stack() {
        let commands = Commands::default();
        let r = commands.reserve("s").unwrap();
        let id = r.id.clone();
        r.launch(|_| async move { panic!("boom") });
        for _ in 0..200 {
            if !commands.is_running(&id) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(matches!(commands.outcome(&id), Some(Outcome::Error(_))));
        assert!(commands.reserve("s").is_ok());
    }

    #[tokio::test]
    async fn shutdown_lets_commands_finish_within_the_grace_and_refuses_new_ones() {
        let commands = Commands::default();
        let r = commands.reserve("s").unwrap();
        let id = r.id.clone();
        r.launch(|_| async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Outcome::Error("finished".into())
        });
        assert_eq!(commands.shutdown(Duration::from_secs(5)).await, 0);
        assert!(
            matches!(commands.outcome(&id), Some(Outcome::Error(m)) if m == "finished"),
            "not canceled: it finished"
        );
        assert!(matches!(
            commands.reserve("t"),
            Err(ServiceError::ShuttingDown)
        ));
    }

    #[tokio::test]
    async fn shutdown_hands_over_what_outlasts_the_grace() {
        let commands = Commands::default();
        let r = commands.reserve("s").unwrap();
        let id = r.id.clone();
        let (dropped, gone) = tokio::sync::oneshot::channel::<()>();
        r.launch(|_| async move {
            // Dropped with the future, as a command's lease keepers are.
            let _dropped = dropped;
            std::future::pending::<()>().await;
            Outcome::Error("never".into())
        });
        assert_eq!(commands.shutdown(Duration::from_millis(50)).await, 1);
        assert!(gone.await.is_err(), "the command's work was dropped");
        assert!(
            matches!(commands.outcome(&id), Some(Outcome::Error(m)) if m.contains("resumed by another primary")),
            "{:?}",
            commands.outcome(&id)
        );
        assert!(commands.running_for("s").is_none());
    }
}
