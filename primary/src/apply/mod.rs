//! The executor: drives the scheduler's decisions through a transport and
//! records every transition in the state store before acting on it. All
//! decisions (order, rate, retries, polling) are the scheduler's; this is
//! the I/O edge.

use orrery_core::tasks as ops;
mod events;
mod pace;
mod resume;
mod stop;
mod trace;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use orrery_bus::transport::Transport;
use orrery_core::events::{EventBody, FinishedEvent, OpEvent, OperationEvent, PlannedEvent};
use orrery_plugin_sdk::Answer;
use orrery_schema::{
    CreateRequest, DeleteRequest, ErrorCode, Operation, OperationStatus, ProgressEvent,
    PropertyMap, Request, ResourceSchema, StatusRequest, Target, UpdateRequest, Value,
};
use tokio::sync::watch;
use tracing::Instrument;

pub use events::{Batch, EventSink};
pub use ops::{bucket, Op, OpKind};
pub use pace::Pacer;
pub use resume::{ResumeError, Resumed};
pub use stop::Stop;

use crate::plan::{Action, Plan, SecretHasher};
use crate::scheduler::{
    Action as Step, BucketLimit, Config, Outcome, RateRegistry, RetryPolicy, Scheduler, TaskState,
};
use crate::stack::{Catalog, Graph, Reference, Stack};
use crate::state::{
    CommandStatus, OpStatus, OperationRecord, Store, StoreError, StoredResource, Write,
};

/// How a command runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long one request may take.
    pub request_timeout: Duration,
    /// Most operations in flight at once.
    pub max_concurrency: usize,
    /// Retry policy for retryable failures.
    pub retry: RetryPolicy,
    /// How long an operation may stay InProgress.
    pub poll_timeout: Duration,
    /// Rate limits by bucket (`namespace/target`) overriding the announced ones.
    pub rate_overrides: HashMap<String, BucketLimit>,
    /// Seed of the scheduler's jitter.
    pub seed: u64,
    /// Where a run stops for good, for crash-resume tests that kill the
    /// process exactly there; `None` but in those tests. Only the `orrery`
    /// binary sets it (from `ORRERY_TEST_HANG_AT`, `cli::stop_point`).
    pub stop_at: Option<StopPoint>,
}

/// A point of a run at which a crash-resume test kills the primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopPoint {
    /// The command and its operations are recorded; nothing is sent.
    BeforeFirstOperation,
    /// Every operation is recorded; the command is not yet finished.
    BeforeFinish,
}

impl StopPoint {
    /// The point named `name` (`before_first_operation`, `before_finish`).
    pub fn parse(name: &str) -> Option<StopPoint> {
        match name {
            "before_first_operation" => Some(StopPoint::BeforeFirstOperation),
            "before_finish" => Some(StopPoint::BeforeFinish),
            _ => None,
        }
    }
}

impl Options {
    /// The scheduler's configuration for these options: the one retry and
    /// polling policy, used by commands and by resuming alike.
    pub fn scheduler_config(&self) -> Config {
        Config {
            max_concurrency: self.max_concurrency,
            retry: self.retry.clone(),
            poll_timeout: self.poll_timeout,
            default_poll_interval: Duration::from_millis(500),
            seed: self.seed,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            request_timeout: Duration::from_secs(60),
            max_concurrency: 64,
            retry: RetryPolicy {
                max_attempts: 8,
                base: Duration::from_millis(200),
                max: Duration::from_secs(30),
                throttle_factor: 4,
                jitter: 0.5,
            },
            stop_at: None,
            poll_timeout: Duration::from_secs(30 * 60),
            rate_overrides: HashMap::new(),
            seed: 0x5eed,
        }
    }
}

/// What an event says of a transition besides its status: the error code
/// and the message.
type Note = (Option<String>, Option<String>);

/// The outcome of a command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The command's id.
    pub command_id: String,
    /// Operations that succeeded.
    pub succeeded: usize,
    /// Operations that failed: label, operation, code, message.
    pub failed: Vec<(String, String, String, String)>,
    /// Operations not attempted because a dependency failed.
    pub dependency_failed: Vec<String>,
    /// Operations not started because the command was canceled.
    pub canceled: Vec<String>,
    /// Operations in flight when a forced cancel stopped waiting for them:
    /// recorded as sent without an outcome, settled by the next apply.
    pub unsettled: Vec<String>,
    /// Requests retried.
    pub retries: u64,
    /// Requests sent to plugins (operations, retries and status polls).
    pub requests: u64,
    /// Wall time.
    pub elapsed_ms: u64,
}

impl Report {
    /// Whether every operation succeeded.
    pub fn ok(&self) -> bool {
        self.failed.is_empty()
            && self.dependency_failed.is_empty()
            && self.canceled.is_empty()
            && self.unsettled.is_empty()
    }
}

/// Runs plans.
pub struct Executor {
    transport: Arc<dyn Transport>,
    store: Store,
    catalog: Catalog,
    hasher: SecretHasher,
    options: Options,
    /// The process's rate-limit registry, shared with its other runs.
    rates: RateRegistry,
    events: Option<EventSink>,
    cancel: watch::Receiver<Stop>,
    /// Transitions recorded since the last [`Executor::flush`]: written in
    /// one batch before the executor next sends a request, so every
    /// transition is still written before it is acted on.
    pending: std::sync::Mutex<Vec<Write>>,
}

struct Running {
    op: usize,
    answer: Result<Answer, orrery_bus::bus::BusError>,
    polled: bool,
    span: tracing::Span,
}

impl Executor {
    /// Stops here for good when the options name this point.
    async fn stop_if_asked(&self, point: StopPoint) {
        if self.options.stop_at == Some(point) {
            tracing::warn!(?point, "stopping here for good, as asked");
            std::future::pending::<()>().await;
        }
    }

    /// An executor over a transport and a store, taking rate-limit tokens
    /// from `rates`: the process's one registry (the service's is
    /// `Plugins::rates`), so that its runs share each target's rate.
    pub fn new(
        transport: Arc<dyn Transport>,
        store: Store,
        catalog: Catalog,
        hasher: SecretHasher,
        options: Options,
        rates: RateRegistry,
    ) -> Self {
        let (_, cancel) = watch::channel(Stop::Run);
        Executor {
            transport,
            store,
            catalog,
            hasher,
            options,
            rates,
            events: None,
            cancel,
            pending: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Emits the command's events into `events`.
    pub fn with_events(mut self, events: EventSink) -> Self {
        self.events = Some(events);
        self
    }

    /// Cancels the command as `cancel` asks (see [`Stop`]).
    pub fn with_cancel(mut self, cancel: watch::Receiver<Stop>) -> Self {
        self.cancel = cancel;
        self
    }

    /// Queues a write for the next [`Executor::flush`].
    fn queue(&self, write: Write) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(write);
    }

    /// Writes the queued transitions in one batch.
    fn flush(&self) -> Result<(), StoreError> {
        let writes = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if writes.is_empty() {
            return Ok(());
        }
        self.store.write_batch(&writes)
    }

    fn emit(&self, op: &Op, status: OpEvent, attempt: u32, failure: Note, since: Option<Instant>) {
        if let Some(sink) = &self.events {
            sink.emit(EventBody::Operation(OperationEvent {
                label: op.label.clone(),
                operation: op.kind.name().to_owned(),
                resource_type: op.resource_type.clone(),
                plugin: op.plugin.clone(),
                target: op.target.clone(),
                status,
                attempt,
                code: failure.0,
                message: failure.1.filter(|m| !m.is_empty()),
                elapsed_ms: since
                    .filter(|_| status.is_terminal())
                    .map(|t| t.elapsed().as_millis() as u64),
            }));
        }
    }

    fn emit_planned(&self, stack_name: &str, kind: &str, plan: &Plan, operations: usize) {
        let Some(sink) = &self.events else { return };
        let mut planned = PlannedEvent {
            stack: stack_name.to_owned(),
            kind: kind.to_owned(),
            operations,
            ..Default::default()
        };
        for change in &plan.changes {
            match change.action {
                Action::Create => planned.create += 1,
                Action::Update => planned.update += 1,
                Action::Replace { .. } => planned.replace += 1,
                Action::Delete => planned.delete += 1,
                Action::NoOp => planned.no_op += 1,
            }
        }
        sink.emit(EventBody::Planned(planned));
    }

    fn emit_finished(&self, status: &CommandStatus, report: &Report) {
        if let Some(sink) = &self.events {
            sink.emit(EventBody::Finished(FinishedEvent {
                status: status.to_string(),
                succeeded: report.succeeded,
                failed: report.failed.len(),
                dependency_failed: report.dependency_failed.len(),
                canceled: report.canceled.len(),
                unsettled: report.unsettled.len(),
                retries: report.retries,
                requests: report.requests,
                elapsed_ms: report.elapsed_ms,
                message: None,
            }));
        }
    }

    /// Runs `plan` as command `command_id` of `stack_name`. A command id
    /// still `running` in the store (returned by [`Executor::resume`]) goes
    /// on under that id; any other id starts a new command.
    ///
    /// The command is one trace: its span is the root of every operation's,
    /// attempt's and rate-limit wait's span, and of the satellites' and
    /// plugins' spans through the propagated context.
    pub async fn run(
        &self,
        command_id: &str,
        kind: &str,
        stack_name: &str,
        stack: Option<(&Stack, &Graph)>,
        plan: &Plan,
        stored: &[StoredResource],
    ) -> Result<Report, StoreError> {
        let span = orrery_plugin_sdk::entry_span!(
            orrery_plugin_sdk::telemetry::sample_root(),
            "orrery.command",
            command_id = %command_id,
            kind = %kind,
            stack = %stack_name,
            trace_id = tracing::field::Empty,
        );
        orrery_plugin_sdk::telemetry::record_trace_id(&span);
        self.run_traced(command_id, kind, stack_name, stack, plan, stored)
            .instrument(span)
            .await
    }

    async fn run_traced(
        &self,
        command_id: &str,
        kind: &str,
        stack_name: &str,
        stack: Option<(&Stack, &Graph)>,
        plan: &Plan,
        stored: &[StoredResource],
    ) -> Result<Report, StoreError> {
        let started = Instant::now();
        // Going on with an interrupted command: an attempt of it may have
        // landed unanswered, so a create answered `AlreadyExists` is looked
        // for before it counts as failed.
        let this = self
            .store
            .command(Some(command_id))?
            .filter(|c| c.status == CommandStatus::Running);
        let continuing = this.is_some();
        // Creates the stack's previous command ended with their outcome
        // unknown: they may have landed, so they get the same lookup.
        let previous = match continuing {
            true => None,
            false => self.store.latest_command_of(stack_name)?,
        };
        let unsure = previous
            .as_ref()
            .map(resume::unsure_creates)
            .unwrap_or_default();
        // A create an earlier attempt may have made is sent again under
        // that attempt's request id.
        let carried = resume::carried_request_ids(this.as_ref(), previous.as_ref());
        if !continuing {
            self.store.begin_command(command_id, stack_name, kind)?;
        }
        // The targets recorded before this run: a target the document no
        // longer names keeps its recorded configuration (`put_targets`
        // only adds and overwrites), and the deletes of its resources need
        // it (secret fields are never recorded: they are resolved as for a
        // destroy without a document).
        let recorded: HashMap<String, PropertyMap> = self
            .store
            .targets(stack_name)?
            .into_iter()
            .map(|t| (t.name, t.config))
            .collect();
        if let Some((stack, _)) = stack {
            // Secret-looking configuration is never stored in clear.
            let targets = orrery_core::plan::storable_targets(&stack.targets, &self.catalog);
            self.store.put_targets(&stack.name, &targets)?;
        }
        let (ops, tasks) = ops::build(stack, &self.catalog, plan, stored);
        self.emit_planned(stack_name, kind, plan, ops.len());
        let mut limits = HashMap::new();
        for op in &ops {
            let key = bucket(&self.catalog, &op.plugin, &op.target);
            let limit = orrery_core::tasks::bucket_limit(
                &self.catalog,
                &self.options.rate_overrides,
                &op.plugin,
                &key,
            );
            limits.insert(key, limit);
        }
        let config = self.options.scheduler_config();
        let mut scheduler =
            match Scheduler::new(tasks, limits, self.rates.clone(), config, Instant::now()) {
                Ok(s) => s,
                Err(e) => {
                    // The stack graph is acyclic; a cycle here means stored
                    // dependencies contradict it. Nothing has been started.
                    self.store
                        .finish_command(command_id, &CommandStatus::Failed)?;
                    let report = Report {
                        command_id: command_id.to_owned(),
                        failed: vec![(
                            String::new(),
                            String::new(),
                            "InvalidRequest".into(),
                            e.to_string(),
                        )],
                        ..Default::default()
                    };
                    self.emit_finished(&CommandStatus::Failed, &report);
                    return Ok(report);
                }
            };

        let mut outputs: HashMap<String, PropertyMap> = stored
            .iter()
            .map(|s| (s.label.clone(), s.properties.clone()))
            .collect();
        let request_ids: Vec<String> = ops
            .iter()
            .map(|op| match (&op.kind, carried.get(&op.label)) {
                (OpKind::Create, Some(id)) => id.clone(),
                _ => uuid::Uuid::now_v7().to_string(),
            })
            .collect();
        let mut progress: Vec<Option<(String, Option<Value>)>> = vec![None; ops.len()];
        // Native ids recorded for resources: never adopted for another label.
        let claimed: Arc<std::collections::HashSet<String>> =
            Arc::new(stored.iter().map(|s| s.native_id.clone()).collect());
        let mut attempts = vec![0u32; ops.len()];
        // When each operation's first attempt started, and whether its
        // terminal event was emitted (each is, exactly once).
        let mut since: Vec<Option<Instant>> = vec![None; ops.len()];
        let mut ended = vec![false; ops.len()];
        let mut spans = trace::OpSpans::new(ops.len());
        let mut report = Report {
            command_id: command_id.to_owned(),
            ..Default::default()
        };
        self.stop_if_asked(StopPoint::BeforeFirstOperation).await;
        let mut in_flight = FuturesUnordered::new();
        let mut cancel = self.cancel.clone();
        // A cancel asked before the run began counts as well.
        let mut stop = Stop::Run;
        let mut asked = *cancel.borrow_and_update();
        let mut cancel_gone = false;

        loop {
            if asked > stop {
                if stop == Stop::Run {
                    scheduler.cancel(Instant::now());
                }
                stop = asked;
            }
            if stop == Stop::Force {
                // What is in flight is dropped unanswered: its records say
                // `running` (or `in_progress`), as after a crash.
                break;
            }
            let steps = scheduler.poll(Instant::now());
            for task in scheduler.take_newly_rate_limited() {
                let op = &ops[task];
                spans.rate_limited(task, op, &bucket(&self.catalog, &op.plugin, &op.target));
                // A poll waits as the attempt it polls; a start as the next.
                let attempt = match scheduler.state(task) {
                    TaskState::InProgress { .. } => attempts[task],
                    _ => attempts[task] + 1,
                };
                self.emit(
                    op,
                    OpEvent::WaitingForRateLimit,
                    attempt,
                    (None, None),
                    None,
                );
            }
            for step in steps {
                let (task, polled, verify_first) = match step {
                    Step::Start {
                        task,
                        attempt,
                        verify_first,
                    } => {
                        attempts[task] = attempt;
                        if attempt > 1 {
                            report.retries += 1;
                        }
                        (task, false, verify_first)
                    }
                    Step::Poll { task } => (task, true, false),
                };
                let op = &ops[task];
                let request = if polled {
                    let (native_id, context) = progress[task].clone().unwrap_or_default();
                    Request::Status(StatusRequest {
                        request_id: request_ids[task].clone(),
                        operation: operation_of(&op.kind),
                        resource_type: op.resource_type.clone(),
                        target: self.target(stack_name, stack, &recorded, op),
                        native_id,
                        context,
                    })
                } else {
                    match self.request(
                        stack_name,
                        stack,
                        &recorded,
                        op,
                        &request_ids[task],
                        &outputs,
                    ) {
                        Ok(r) => r,
                        Err(message) => {
                            self.record(
                                command_id,
                                op,
                                &request_ids[task],
                                OpStatus::Failed,
                                attempts[task],
                                Some("InvalidRequest"),
                                Some(&message),
                                None,
                            )?;
                            scheduler.on_outcome(
                                task,
                                Outcome::Failed {
                                    code: ErrorCode::InvalidRequest,
                                    retry_after: None,
                                },
                                Instant::now(),
                            );
                            ended[task] = true;
                            self.emit(
                                op,
                                OpEvent::Failed,
                                attempts[task],
                                (Some("InvalidRequest".into()), Some(message)),
                                since[task],
                            );
                            continue;
                        }
                    }
                };
                // Written before the request is sent: a restarted primary
                // knows this request id may have taken effect.
                let status = if polled {
                    OpStatus::InProgress
                } else {
                    OpStatus::Running
                };
                self.record(
                    command_id,
                    op,
                    &request_ids[task],
                    status,
                    attempts[task],
                    None,
                    None,
                    if polled {
                        progress[task].as_ref()
                    } else {
                        None
                    },
                )?;
                if !polled {
                    let status = if attempts[task] > 1 {
                        OpEvent::Attempt
                    } else {
                        OpEvent::Started
                    };
                    since[task].get_or_insert_with(Instant::now);
                    self.emit(op, status, attempts[task], (None, None), None);
                }
                report.requests += 1;
                let span = spans.attempt(task, op, attempts[task], polled);
                let transport = self.transport.clone();
                let plugin = op.plugin.clone();
                let timeout = self.options.request_timeout;
                // A create retried after an ambiguous outcome (say, its
                // satellite died) first looks for what the lost attempt may
                // have made; so does one of a continued command (or one the
                // previous command left unsure) that finds its resource
                // exists already.
                let lookup = match &request {
                    Request::Create(c)
                        if verify_first || continuing || unsure.contains_key(&op.label) =>
                    {
                        Some(resume::Lookup {
                            plugin: plugin.clone(),
                            resource_type: c.resource_type.clone(),
                            target: c.target.clone(),
                            identity: resume::identity(self.schema(op), &c.properties),
                            claimed: claimed.clone(),
                        })
                    }
                    _ => None,
                };
                let attempt_span = span.clone();
                in_flight.push(
                    async move {
                        let answer = match lookup {
                            Some(lookup) => {
                                resume::send_create(
                                    transport,
                                    request,
                                    Some(lookup),
                                    verify_first,
                                    timeout,
                                )
                                .await
                            }
                            None => transport.send(&plugin, &request, timeout).await,
                        };
                        Running {
                            op: task,
                            answer,
                            polled,
                            span: attempt_span,
                        }
                    }
                    .instrument(span),
                );
            }
            // Nothing queued above is sent before this: the futures run
            // only when polled below.
            self.flush()?;
            if scheduler.is_finished() && in_flight.is_empty() {
                break;
            }
            let wake = scheduler.next_wakeup();
            tokio::select! {
                Some(done) = in_flight.next() => {
                    // Every answer already here joins the same batch.
                    let mut next = Some(done);
                    while let Some(done) = next {
                        let (outcome, note) = self.complete(command_id, stack, &ops[done.op], &request_ids[done.op], attempts[done.op], done.answer, &mut outputs, &mut progress[done.op], done.polled)?;
                        let error = match &outcome {
                            Outcome::Failed { code, .. } => Some(code.clone()),
                            _ => None,
                        };
                        scheduler.on_outcome(done.op, outcome, Instant::now());
                        let state = scheduler.state(done.op);
                        spans.answered(done.op, &ops[done.op], &done.span, error.as_ref(), state);
                        // What the answer made of the operation, as the scheduler decided.
                        let transition = match state {
                            TaskState::Succeeded => Some(OpEvent::Succeeded),
                            TaskState::Failed { .. } => Some(OpEvent::Failed),
                            TaskState::Canceled => Some(OpEvent::Canceled),
                            TaskState::BackingOff { .. } => Some(OpEvent::Retrying),
                            TaskState::InProgress { .. } if !done.polled => Some(OpEvent::InProgress),
                            _ => None,
                        };
                        if let Some(status) = transition {
                            ended[done.op] |= status.is_terminal();
                            self.emit(&ops[done.op], status, attempts[done.op], note, since[done.op]);
                        }
                        next = in_flight.next().now_or_never().flatten();
                    }
                }
                () = sleep_until(wake), if wake.is_some() => {}
                changed = cancel.changed(), if !cancel_gone => {
                    match changed {
                        Ok(()) => asked = asked.escalate(*cancel.borrow_and_update()),
                        // Nobody can cancel any more.
                        Err(_) => cancel_gone = true,
                    }
                }
            }
        }

        for (task, op) in ops.iter().enumerate() {
            match scheduler.state(task) {
                TaskState::Succeeded => report.succeeded += 1,
                TaskState::Failed { code, .. } => {
                    if !ended[task] {
                        // Failed by the scheduler itself (a poll timeout).
                        self.emit(
                            op,
                            OpEvent::Failed,
                            attempts[task],
                            (Some(code.to_string()), None),
                            since[task],
                        );
                    }
                    let message = String::new();
                    report.failed.push((
                        op.label.clone(),
                        op.kind.name().into(),
                        code.to_string(),
                        message,
                    ));
                }
                TaskState::DependencyFailed { root } => {
                    report.dependency_failed.push(op.label.clone());
                    let root = &ops[*root].label;
                    let message = format!("not attempted: dependency `{root}` failed");
                    self.record(
                        command_id,
                        op,
                        &request_ids[task],
                        OpStatus::DependencyFailed,
                        0,
                        Some("DependencyFailure"),
                        Some(&message),
                        None,
                    )?;
                    self.emit(
                        op,
                        OpEvent::DependencyFailed,
                        0,
                        (Some("DependencyFailure".into()), Some(message)),
                        None,
                    );
                }
                TaskState::Canceled => {
                    report.canceled.push(op.label.clone());
                    self.record(
                        command_id,
                        op,
                        &request_ids[task],
                        OpStatus::Canceled,
                        0,
                        Some("Canceled"),
                        None,
                        None,
                    )?;
                    if !ended[task] {
                        self.emit(
                            op,
                            OpEvent::Canceled,
                            attempts[task],
                            (None, None),
                            since[task],
                        );
                    }
                }
                // Left in flight by a forced cancel; nothing is recorded
                // over what was recorded when it was sent or polled.
                TaskState::Running { .. }
                | TaskState::Polling { .. }
                | TaskState::InProgress { .. }
                    if stop == Stop::Force =>
                {
                    report.unsettled.push(op.label.clone());
                }
                _ => {}
            }
        }
        // Their answers, should they come, are no longer waited for.
        drop(in_flight);
        self.flush()?;
        if continuing {
            // A resumed command's earlier runs did what this run's plan no
            // longer holds: its report counts the successes of every run,
            // from the command's operation records (issue 44, item 6).
            let counts = self.store.operation_counts(command_id)?;
            let recorded = counts.get(OpStatus::Succeeded.as_str()).copied();
            report.succeeded = recorded.unwrap_or(0) as usize;
        }
        // Messages of failures come from the operation records (read only
        // when there are failures: a command's records can be 100,000).
        let record = match report.failed.is_empty() {
            true => None,
            false => self.store.command(Some(command_id))?,
        };
        if let Some(record) = record {
            for failure in &mut report.failed {
                if let Some(o) = record
                    .operations
                    .iter()
                    .find(|o| o.label == failure.0 && o.operation == failure.1)
                {
                    failure.3 = o.message.clone().unwrap_or_default();
                }
            }
        }
        let status = if stop != Stop::Run {
            CommandStatus::Canceled
        } else if report.ok() {
            CommandStatus::Completed
        } else {
            CommandStatus::Failed
        };
        for (bucket, wait) in scheduler.rate_limit_waits() {
            crate::metrics::metrics().rate_limit_wait(bucket, wait);
        }
        self.stop_if_asked(StopPoint::BeforeFinish).await;
        self.store.finish_command(command_id, &status)?;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        self.emit_finished(&status, &report);
        Ok(report)
    }

    /// The target of `op` as its request carries it: the document's, else
    /// (a target removed from the document, whose resources are deleted)
    /// the configuration `recorded` for it.
    fn target(
        &self,
        stack_name: &str,
        stack: Option<(&Stack, &Graph)>,
        recorded: &HashMap<String, PropertyMap>,
        op: &Op,
    ) -> Target {
        let config = stack
            .and_then(|(s, _)| s.target(&op.target))
            .map(|t| t.config.clone())
            .or_else(|| recorded.get(&op.target).cloned())
            .unwrap_or_default();
        Target {
            name: op.target.clone(),
            config,
            stack: Some(stack_name.to_owned()),
        }
    }

    fn schema(&self, op: &Op) -> Option<&ResourceSchema> {
        self.catalog.schema(&op.plugin, &op.resource_type)
    }

    /// The request of an operation, references resolved from `outputs`.
    fn request(
        &self,
        stack_name: &str,
        stack: Option<(&Stack, &Graph)>,
        recorded: &HashMap<String, PropertyMap>,
        op: &Op,
        request_id: &str,
        outputs: &HashMap<String, PropertyMap>,
    ) -> Result<Request, String> {
        let target = self.target(stack_name, stack, recorded, op);
        let desired = || -> Result<PropertyMap, String> {
            let (stack, _) = stack.ok_or("no stack for a create or update")?;
            let decl = op
                .index
                .and_then(|i| stack.resources.get(i))
                .ok_or("resource not in the stack")?;
            let lookup = |r: &Reference| {
                outputs
                    .get(&r.resource)
                    .and_then(|p| p.get(&r.property))
                    .cloned()
            };
            decl.properties
                .iter()
                .map(|(k, e)| {
                    // An ignored field keeps its recorded value once the
                    // resource exists.
                    let recorded = op.stored.as_ref().and_then(|s| s.properties.get(k));
                    if let (true, Some(v)) = (decl.ignore_changes.contains(k), recorded) {
                        return Ok((k.clone(), v.clone()));
                    }
                    e.resolve(&lookup).map(|v| (k.clone(), v)).ok_or_else(|| {
                        format!("property `{k}` references a value that is not known")
                    })
                })
                .collect()
        };
        Ok(match op.kind {
            OpKind::Create => Request::Create(CreateRequest {
                request_id: request_id.to_owned(),
                resource_type: op.resource_type.clone(),
                label: op.label.clone(),
                target,
                properties: desired()?,
            }),
            OpKind::Update => {
                let stored = op
                    .stored
                    .as_ref()
                    .ok_or("update of a resource with no record")?;
                Request::Update(UpdateRequest {
                    request_id: request_id.to_owned(),
                    resource_type: op.resource_type.clone(),
                    label: op.label.clone(),
                    target,
                    native_id: stored.native_id.clone(),
                    prior_properties: stored.properties.clone(),
                    properties: desired()?,
                })
            }
            OpKind::Delete { .. } => {
                let stored = op
                    .stored
                    .as_ref()
                    .ok_or("delete of a resource with no record")?;
                Request::Delete(DeleteRequest {
                    request_id: request_id.to_owned(),
                    resource_type: op.resource_type.clone(),
                    target,
                    native_id: stored.native_id.clone(),
                    properties: stored.properties.clone(),
                })
            }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        command_id: &str,
        op: &Op,
        request_id: &str,
        status: OpStatus,
        attempts: u32,
        code: Option<&str>,
        message: Option<&str>,
        progress: Option<&(String, Option<Value>)>,
    ) -> Result<(), StoreError> {
        // The native id a restarted primary needs: the `InProgress` one, or
        // the stored resource's for updates and deletes.
        let native_id = progress
            .map(|(n, _)| n.clone())
            .or_else(|| op.stored.as_ref().map(|s| s.native_id.clone()))
            .filter(|n| !n.is_empty());
        self.queue(Write::Operation {
            command_id: command_id.to_owned(),
            record: OperationRecord {
                label: op.label.clone(),
                operation: op.kind.name().to_owned(),
                request_id: request_id.to_owned(),
                status,
                attempts: attempts as i64,
                error_code: code.map(str::to_owned),
                message: message.map(str::to_owned),
                native_id,
                context: progress.and_then(|(_, c)| c.clone()),
                // The store stamps its own clock on every write.
                updated_ms: 0,
            },
        });
        Ok(())
    }

    /// Records an answer and turns it into the scheduler's outcome.
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &self,
        command_id: &str,
        stack: Option<(&Stack, &Graph)>,
        op: &Op,
        request_id: &str,
        attempts: u32,
        answer: Result<Answer, orrery_bus::bus::BusError>,
        outputs: &mut HashMap<String, PropertyMap>,
        progress: &mut Option<(String, Option<Value>)>,
        polled: bool,
    ) -> Result<(Outcome, Note), StoreError> {
        let event = match answer {
            Ok(Answer::Progress(event)) => event,
            Ok(Answer::Error(e)) => ProgressEvent::failure(
                operation_of(&op.kind),
                request_id,
                &op.resource_type,
                e.code,
                e.message,
            ),
            Ok(Answer::List(_)) => ProgressEvent::failure(
                operation_of(&op.kind),
                request_id,
                &op.resource_type,
                ErrorCode::InternalFailure,
                "plugin answered with a list page",
            ),
            Err(e) => ProgressEvent::failure(
                operation_of(&op.kind),
                request_id,
                &op.resource_type,
                e.code(),
                e.to_string(),
            ),
        };
        match event.status {
            OperationStatus::Success => {
                self.apply_success(stack, op, &event, outputs)?;
                self.record(
                    command_id,
                    op,
                    request_id,
                    OpStatus::Succeeded,
                    attempts,
                    None,
                    None,
                    None,
                )?;
                Ok((Outcome::Success, (None, None)))
            }
            OperationStatus::InProgress | OperationStatus::Pending => {
                *progress = Some((
                    event.native_id.clone().unwrap_or_default(),
                    event.context.clone(),
                ));
                self.record(
                    command_id,
                    op,
                    request_id,
                    OpStatus::InProgress,
                    attempts,
                    None,
                    event.message.as_deref(),
                    progress.as_ref(),
                )?;
                Ok((
                    Outcome::InProgress {
                        retry_after: event.retry_after_ms.map(Duration::from_millis),
                    },
                    (None, event.message.clone()),
                ))
            }
            _ => {
                let code = event
                    .error_code
                    .clone()
                    .unwrap_or(ErrorCode::InternalFailure);
                // Deleting what is already gone is what a delete wants.
                if matches!(op.kind, OpKind::Delete { .. }) && code == ErrorCode::NotFound {
                    self.apply_success(stack, op, &event, outputs)?;
                    self.record(
                        command_id,
                        op,
                        request_id,
                        OpStatus::Succeeded,
                        attempts,
                        None,
                        Some("already gone"),
                        None,
                    )?;
                    return Ok((Outcome::Success, (None, Some("already gone".into()))));
                }
                let message = event.message.clone().unwrap_or_default();
                // A status poll that failed retryably says nothing about
                // the operation: it is still in progress (recorded so, with
                // what polling it needs); poll again rather than start the
                // operation over.
                if polled && code.is_retryable() {
                    self.record(
                        command_id,
                        op,
                        request_id,
                        OpStatus::InProgress,
                        attempts,
                        Some(code.as_str()),
                        Some(&message),
                        progress.as_ref(),
                    )?;
                    let retry_after = event.retry_after_ms.map(Duration::from_millis);
                    return Ok((
                        Outcome::InProgress {
                            retry_after: Some(retry_after.unwrap_or(Duration::from_millis(500))),
                        },
                        (Some(code.to_string()), Some(message)),
                    ));
                }
                self.record(
                    command_id,
                    op,
                    request_id,
                    OpStatus::Failed,
                    attempts,
                    Some(code.as_str()),
                    Some(&message),
                    None,
                )?;
                let note = (Some(code.to_string()), Some(message));
                Ok((
                    Outcome::Failed {
                        code,
                        retry_after: event.retry_after_ms.map(Duration::from_millis),
                    },
                    note,
                ))
            }
        }
    }

    fn apply_success(
        &self,
        stack: Option<(&Stack, &Graph)>,
        op: &Op,
        event: &ProgressEvent,
        outputs: &mut HashMap<String, PropertyMap>,
    ) -> Result<(), StoreError> {
        let stack_name = stack
            .map(|(s, _)| s.name.as_str())
            .or(op.stored.as_ref().map(|s| s.stack.as_str()))
            .unwrap_or("");
        match op.kind {
            OpKind::Delete { keep_record } => {
                if !keep_record {
                    self.queue(Write::Removal {
                        stack: stack_name.to_owned(),
                        label: op.label.clone(),
                    });
                    outputs.remove(&op.label);
                }
            }
            OpKind::Create | OpKind::Update => {
                let schema = self.schema(op);
                // A property fed by a secret parameter is as secret as a
                // write-only one.
                let decl = stack
                    .zip(op.index)
                    .and_then(|((s, _), i)| s.resources.get(i));
                let is_secret = |field: &str| match decl {
                    Some(d) => d.is_secret_field(schema, field),
                    None => schema
                        .and_then(|s| s.field(field))
                        .is_some_and(|f| f.hints.is_secret()),
                };
                let mut properties = event.properties.clone().unwrap_or_default();
                properties.retain(|k, _| !is_secret(k));
                let mut secret_hashes = std::collections::BTreeMap::new();
                let mut deps = Vec::new();
                if let (Some((stack, graph)), Some(index)) = (stack, op.index) {
                    let decl = &stack.resources[index];
                    let lookup = |r: &Reference| {
                        outputs
                            .get(&r.resource)
                            .and_then(|p| p.get(&r.property))
                            .cloned()
                    };
                    for (k, e) in &decl.properties {
                        if is_secret(k) {
                            if let Some(v) = e.resolve(&lookup) {
                                secret_hashes.insert(k.clone(), self.hasher.hash(k, &v));
                            }
                        }
                    }
                    deps = graph.deps[index]
                        .iter()
                        .map(|(d, _)| stack.resources[*d].label.clone())
                        .collect();
                }
                let native_id = event
                    .native_id
                    .clone()
                    .or_else(|| op.stored.as_ref().map(|s| s.native_id.clone()))
                    .unwrap_or_default();
                let record = StoredResource {
                    stack: stack_name.to_owned(),
                    label: op.label.clone(),
                    resource_type: op.resource_type.clone(),
                    target: op.target.clone(),
                    plugin: op.plugin.clone(),
                    native_id,
                    properties: properties.clone(),
                    secret_hashes,
                    deps,
                    managed: true,
                    version: 0,
                };
                // Recorded exactly so already (a resumed command settling an
                // operation whose success was written just before the
                // primary stopped): not a change, so no new version. Not so
                // when this run deleted the old resource and removed its
                // record (a replacement, delete before create, of a
                // resource whose properties did not change): `outputs`
                // holds what is recorded now, and the new resource's
                // record must be written even though it equals the old one.
                let still_recorded = outputs.contains_key(&op.label);
                let unchanged = still_recorded
                    && op.stored.as_ref().is_some_and(|s| {
                        record
                            == StoredResource {
                                version: 0,
                                ..s.clone()
                            }
                    });
                if !unchanged {
                    self.queue(Write::Resource(record));
                }
                outputs.insert(op.label.clone(), properties);
            }
        }
        Ok(())
    }
}

fn operation_of(kind: &OpKind) -> Operation {
    match kind {
        OpKind::Create => Operation::Create,
        OpKind::Update => Operation::Update,
        OpKind::Delete { .. } => Operation::Delete,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
