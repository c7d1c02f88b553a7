//! Resuming a command the primary did not finish (it was killed), and
//! finding out whether a create whose answer was lost took effect.
//!
//! Every operation is recorded `running` with its request id before it is
//! sent, and `in_progress` with the plugin's native id and context after an
//! `InProgress` answer. When `orrery apply` starts for a stack whose latest
//! command is still `running`, [`Executor::resume`] settles that command's
//! ambiguous operations before anything is planned:
//!
//! - `in_progress` ones are polled with `status` (the saved request id,
//!   native id and context) until they finish, and recorded as the
//!   uninterrupted command would have recorded them;
//! - creates that were sent but never answered (`running`, or failed with an
//!   ambiguous code) are looked up: the plugin has no native id for them, so
//!   the type is listed on the target (every page) and matched against the
//!   desired values of the schema's `identifier` fields. A match is adopted
//!   as created. No match once the lost attempt's deadline (its record's
//!   time plus the request timeout) has passed means the create never took
//!   effect; before that deadline it may still land (a cloud API's create
//!   takes seconds), so it is reported "still landing". Either way the plan
//!   sends it again.
//! - A create sent again, by the resumed command or by the next one after
//!   a command that ended unsure of it, carries the request id recorded for
//!   the lost attempt ([`carried_request_ids`]): a plugin that deduplicates
//!   by request id (the protocol's idempotency key) answers with what the
//!   lost attempt made instead of making a second. A create is never sent
//!   blindly a second time under a new request id.
//! - `running` updates and deletes need nothing: the plan repeats them
//!   (updates are idempotent; deleting what is gone counts as success).
//!
//! The command then goes on under its own id (see [`Executor::run`]).
//!
//! The same list-and-match check serves the scheduler's `verify_first`
//! retries of creates (an earlier attempt's outcome was ambiguous, e.g. the
//! satellite running it died) and creates of a continued command answered
//! `AlreadyExists` (the lost attempt landed after all).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use orrery_bus::transport::Transport;
use orrery_plugin_sdk::Answer;
use orrery_schema::{
    ErrorCode, ListRequest, ListedResource, Operation, OperationStatus, ProgressEvent, PropertyMap,
    Request, ResourceSchema, StatusRequest, Target,
};

use super::pace::{self, Pacer};
use super::{operation_of, Executor, Op, OpKind};
use crate::scheduler::Jitter;
use crate::stack::{Graph, Stack, TargetDecl};
use crate::state::{CommandStatus, OpStatus, OperationRecord, StoreError, StoredResource};
use orrery_core::answer::{self, Expect, Reply, Verdict};

/// Page size asked of `list` when looking for a resource.
const LIST_PAGE_SIZE: u32 = 500;

/// Most pages read in one lookup (a plugin whose tokens loop stops here).
const MAX_LIST_PAGES: usize = 100_000;

/// What resuming an interrupted command did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Resumed {
    /// The command that goes on.
    pub command_id: String,
    /// Operations whose outcome was settled.
    pub resolved: usize,
    /// Labels of creates found by listing and adopted as created.
    pub adopted: Vec<String>,
    /// Labels of creates that had not taken effect (they are planned again).
    pub not_found: Vec<String>,
    /// Labels of creates not found whose lost attempt may still land (its
    /// deadline has not passed): planned again, under the lost attempt's
    /// request id like every create sent again.
    pub resent: Vec<String>,
    /// The command was canceled by force, not interrupted: what it left in
    /// flight is settled, but it does not go on (a new command plans).
    pub canceled: bool,
}

/// Why an interrupted command could not be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An operation's outcome is still unknown: nothing was planned, and the
    /// command stays `running` for the next attempt.
    #[error("cannot resume command {command_id}: the outcome of {operation} `{label}` is still unknown ({code}: {message}); nothing was planned, try again")]
    Unresolved {
        /// The interrupted command.
        command_id: String,
        /// The resource.
        label: String,
        /// `create`, `update`, `delete`.
        operation: String,
        /// The last error.
        code: ErrorCode,
        /// Its message.
        message: String,
    },
}

/// What identifies a resource to create among listed ones.
#[derive(Clone, Debug)]
pub(super) struct Lookup {
    pub plugin: String,
    pub resource_type: String,
    pub target: Target,
    /// Field → desired value; a listed resource matches when it has all.
    pub identity: PropertyMap,
    /// Native ids already recorded for other resources (never adopted twice).
    pub claimed: Arc<HashSet<String>>,
}

/// The values that identify `desired`: the schema's `identifier` fields, or
/// (when it declares none) every desired field that is neither write-only
/// nor opaque (a plugin never lists those).
pub(super) fn identity(schema: Option<&ResourceSchema>, desired: &PropertyMap) -> PropertyMap {
    match schema {
        Some(s) if !s.identifier.is_empty() => s
            .identifier
            .iter()
            .filter_map(|f| desired.get(f).map(|v| (f.clone(), v.clone())))
            .collect(),
        _ => desired
            .iter()
            .filter(|(k, _)| {
                !schema
                    .and_then(|s| s.field(k))
                    .is_some_and(|f| f.hints.is_secret())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

impl Lookup {
    /// Lists every page of the type on the target and returns the first
    /// resource carrying every identity value. An empty identity matches
    /// nothing (it cannot tell resources apart). A failed list is returned
    /// as its code and message.
    pub async fn find(
        &self,
        transport: &dyn Transport,
        timeout: Duration,
        pacer: Option<&Pacer>,
    ) -> Result<Option<ListedResource>, (ErrorCode, String)> {
        if self.identity.is_empty() {
            return Ok(None);
        }
        let mut token: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let request = Request::List(ListRequest {
                parent: None,
                request_id: uuid::Uuid::now_v7().to_string(),
                resource_type: self.resource_type.clone(),
                target: self.target.clone(),
                page_size: LIST_PAGE_SIZE,
                page_token: token.take(),
            });
            if let Some(pacer) = pacer {
                pacer.acquire(&self.plugin, &self.target.name).await;
            }
            let page = match transport.send(&self.plugin, &request, timeout).await {
                Ok(Answer::List(page)) => page,
                Ok(Answer::Error(e)) => return Err((e.code, e.message)),
                Ok(Answer::Progress(p)) => {
                    return Err((
                        p.error_code.unwrap_or(ErrorCode::InternalFailure),
                        p.message
                            .unwrap_or_else(|| "plugin answered a list with progress".into()),
                    ))
                }
                Err(e) => return Err((e.code(), e.to_string())),
            };
            if page.status != OperationStatus::Success {
                return Err((
                    page.error_code.unwrap_or(ErrorCode::InternalFailure),
                    page.message.unwrap_or_default(),
                ));
            }
            let found = page.resources.into_iter().find(|r| {
                !self.claimed.contains(&r.native_id)
                    && self
                        .identity
                        .iter()
                        .all(|(k, v)| r.properties.get(k) == Some(v))
            });
            if found.is_some() {
                return Ok(found);
            }
            match page.next_page_token {
                Some(next) if !next.is_empty() => token = Some(next),
                _ => return Ok(None),
            }
        }
        Err((
            ErrorCode::InternalFailure,
            format!("list of {} did not end", self.resource_type),
        ))
    }
}

/// The answer recorded for a create found by listing: a success carrying
/// the listed resource.
pub(super) fn adopted(resource_type: &str, request_id: &str, found: ListedResource) -> Answer {
    let mut event = ProgressEvent::success(
        Operation::Create,
        request_id,
        resource_type,
        found.native_id,
        found.properties,
    );
    event.message = Some("found existing; adopted".into());
    Answer::Progress(event)
}

/// Whether a create's answer says the resource exists already.
pub(super) fn already_exists(answer: &Result<Answer, orrery_bus::bus::BusError>) -> bool {
    match answer {
        Ok(Answer::Progress(p)) => p.error_code == Some(ErrorCode::AlreadyExists),
        Ok(Answer::Error(e)) => e.code == ErrorCode::AlreadyExists,
        _ => false,
    }
}

/// A create's send, with the lookups `verify_first` and a continued command
/// ask for: before sending when `verify_first`, after an `AlreadyExists`
/// answer always (when a lookup is given).
pub(super) async fn send_create(
    transport: Arc<dyn Transport>,
    request: Request,
    lookup: Option<Lookup>,
    verify_first: bool,
    timeout: Duration,
) -> Result<Answer, orrery_bus::bus::BusError> {
    let (request_id, resource_type) = match &request {
        Request::Create(c) => (c.request_id.clone(), c.resource_type.clone()),
        _ => Default::default(),
    };
    let plugin = lookup
        .as_ref()
        .map(|l| l.plugin.clone())
        .unwrap_or_default();
    if let (Some(lookup), true) = (&lookup, verify_first) {
        // A failed check is this attempt's outcome; the scheduler retries,
        // checking again first.
        let doing = "checking whether it exists already";
        if let Some(settled) = settle(
            lookup,
            &*transport,
            timeout,
            &request_id,
            &resource_type,
            doing,
        )
        .await
        {
            return Ok(settled);
        }
    }
    let answer = transport.send(&plugin, &request, timeout).await;
    if let (Some(lookup), true) = (&lookup, already_exists(&answer)) {
        // Not knowing whether it is ours is not `AlreadyExists` (which is
        // terminal): the lookup's failure is this attempt's outcome, and
        // the scheduler retries it (found by the chaos soak).
        let doing = "it exists already; checking whether it is this one";
        if let Some(settled) = settle(
            lookup,
            &*transport,
            timeout,
            &request_id,
            &resource_type,
            doing,
        )
        .await
        {
            return Ok(settled);
        }
    }
    answer
}

/// What a lookup settles a create with: adopted when it finds the
/// resource, this attempt's failure (with the lookup's code, so the
/// scheduler retries) when the lookup fails, nothing when it is absent.
async fn settle(
    lookup: &Lookup,
    transport: &dyn Transport,
    timeout: Duration,
    request_id: &str,
    resource_type: &str,
    doing: &str,
) -> Option<Answer> {
    match lookup.find(transport, timeout, None).await {
        Ok(Some(found)) => Some(adopted(resource_type, request_id, found)),
        Ok(None) => None,
        Err((code, message)) => Some(Answer::Progress(ProgressEvent::failure(
            Operation::Create,
            request_id,
            resource_type,
            code,
            format!("{doing}: {message}"),
        ))),
    }
}

/// Labels whose create `command` (finished) failed with its outcome
/// unknown: an ambiguous code, or `AlreadyExists` (an earlier attempt may
/// have landed). The next command looks them up when their create is
/// answered `AlreadyExists`, instead of failing them again and again.
pub(super) fn unsure_creates(command: &crate::state::CommandRecord) -> HashMap<String, String> {
    command
        .operations
        .iter()
        .filter(|o| o.operation == "create" && o.status == OpStatus::Failed)
        .filter(|o| {
            let code = ErrorCode::from_wire(o.error_code.as_deref().unwrap_or_default());
            // A create a forced cancel left in flight and settling did not
            // find may still land after the listing.
            let late = command.status == CommandStatus::Canceled && code == ErrorCode::NotFound;
            code.is_ambiguous() || code == ErrorCode::AlreadyExists || late
        })
        .map(|o| (o.label.clone(), o.request_id.clone()))
        .collect()
}

/// The request id each create of a run sends, by label, when an earlier
/// attempt of it may have landed: for a command that goes on, every create
/// it recorded without success; for a new one, the creates the stack's
/// previous command ended unsure of ([`unsure_creates`]). Sending the lost
/// attempt's id again lets the plugin deduplicate (found by the cloud-like
/// testbed: three kills of an apply of 48 made 20 duplicates when a create
/// sent again carried a new id).
pub(super) fn carried_request_ids(
    continuing: Option<&crate::state::CommandRecord>,
    previous: Option<&crate::state::CommandRecord>,
) -> HashMap<String, String> {
    match continuing {
        Some(command) => command
            .operations
            .iter()
            .filter(|o| o.operation == "create" && o.status != OpStatus::Succeeded)
            .map(|o| (o.label.clone(), o.request_id.clone()))
            .collect(),
        None => previous.map(unsure_creates).unwrap_or_default(),
    }
}

/// Whether `command` has operations sent without an outcome (`running`,
/// or `in_progress`): what a crash, or a forced cancel, leaves.
pub(super) fn unsettled(command: &crate::state::CommandRecord) -> bool {
    command
        .operations
        .iter()
        .any(|o| matches!(o.status, OpStatus::Running | OpStatus::InProgress))
}

/// An ambiguous operation of the interrupted command and what settles it.
enum Pending {
    /// Poll `status` until it finishes.
    Poll { op: Op, record: OperationRecord },
    /// Look for the resource a create may have made.
    Find {
        op: Op,
        record: OperationRecord,
        lookup: Option<Lookup>,
    },
}

impl Executor {
    /// Settles the ambiguous operations of `stack`'s latest command when it
    /// is still `running` (the primary stopped mid-command), and returns the
    /// command to go on under; `None` when there is nothing to resume. Call
    /// it before planning, then plan and [`Executor::run`] with the returned
    /// command id.
    pub async fn resume(
        &self,
        stack: &Stack,
        graph: &Graph,
    ) -> Result<Option<Resumed>, ResumeError> {
        let Some(command) = self.store.latest_command_of(&stack.name)? else {
            return Ok(None);
        };
        // A forced cancel leaves what was in flight as a crash does, and it
        // is settled the same way; only a command still `running` goes on.
        let canceled = command.status == CommandStatus::Canceled && unsettled(&command);
        if command.status != CommandStatus::Running && !canceled {
            return Ok(None);
        }
        let command_id = command.id.clone();
        let mut resumed = Resumed {
            command_id: command_id.clone(),
            canceled,
            ..Default::default()
        };
        let stored = self.store.resources(Some(&stack.name))?;
        // Targets as recorded, overridden by the document's.
        let mut targets: HashMap<String, TargetDecl> = self
            .store
            .targets(&stack.name)?
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        for t in &stack.targets {
            targets.insert(t.name.clone(), t.clone());
        }
        let by_label: HashMap<&str, &StoredResource> =
            stored.iter().map(|s| (s.label.as_str(), s)).collect();
        let mut outputs: HashMap<String, PropertyMap> = stored
            .iter()
            .map(|s| (s.label.clone(), s.properties.clone()))
            .collect();
        let claimed: Arc<HashSet<String>> =
            Arc::new(stored.iter().map(|s| s.native_id.clone()).collect());
        let ctx = Some((stack, graph));

        // What each record needs.
        let mut polls = Vec::new();
        let mut finds = Vec::new();
        for record in &command.operations {
            let ambiguous_failure = record.status == OpStatus::Failed
                && record
                    .error_code
                    .as_deref()
                    .is_some_and(|c| ErrorCode::from_wire(c).is_ambiguous());
            let in_progress = record.status == OpStatus::InProgress;
            if !(in_progress || record.status == OpStatus::Running || ambiguous_failure) {
                continue;
            }
            let op = match record.operation.as_str() {
                "create" | "update" => {
                    let Some((index, decl)) = stack
                        .resources
                        .iter()
                        .enumerate()
                        .find(|(_, r)| r.label == record.label)
                    else {
                        // No longer declared: nothing to compare a listing
                        // with; the plan deals with the stored record.
                        continue;
                    };
                    Op {
                        label: record.label.clone(),
                        kind: if record.operation == "create" {
                            OpKind::Create
                        } else {
                            OpKind::Update
                        },
                        index: Some(index),
                        stored: by_label.get(record.label.as_str()).map(|s| (*s).clone()),
                        plugin: targets
                            .get(&decl.target)
                            .map(|t| t.plugin.clone())
                            .unwrap_or_default(),
                        target: decl.target.clone(),
                        resource_type: decl.resource_type.clone(),
                    }
                }
                "delete" => {
                    let Some(s) = by_label.get(record.label.as_str()) else {
                        // The record is gone: the delete succeeded.
                        continue;
                    };
                    // The record points elsewhere when a replacement's new
                    // resource took its place: keep it then.
                    let deleted = record.native_id.clone().unwrap_or(s.native_id.clone());
                    let keep_record = deleted != s.native_id;
                    Op {
                        label: record.label.clone(),
                        kind: OpKind::Delete { keep_record },
                        index: None,
                        stored: Some(StoredResource {
                            native_id: deleted,
                            ..(*s).clone()
                        }),
                        plugin: s.plugin.clone(),
                        target: s.target.clone(),
                        resource_type: s.resource_type.clone(),
                    }
                }
                _ => continue,
            };
            if in_progress && record.native_id.is_some() {
                polls.push(Pending::Poll {
                    op,
                    record: record.clone(),
                });
            } else if op.kind == OpKind::Create {
                finds.push((op, record.clone()));
            }
            // Updates and deletes sent but unanswered: planned again.
        }

        // Poll what was in progress.
        let results = self
            .settle_all(&stack.name, &command_id, polls, &targets)
            .await;
        for result in results {
            let (op, record, answer) = result?;
            let mut progress = record
                .native_id
                .clone()
                .map(|n| (n, record.context.clone()));
            let (outcome, _) = self.complete(
                &command_id,
                ctx,
                &op,
                &record.request_id,
                record.attempts.max(1) as u32,
                Ok(answer),
                &mut outputs,
                &mut progress,
                false,
            )?;
            match outcome {
                crate::scheduler::Outcome::Success => resumed.resolved += 1,
                // A create that failed may still have left something behind
                // (or the plugin forgot the operation): look.
                _ if op.kind == OpKind::Create => finds.push((op, record)),
                // A failed update or delete is planned again.
                _ => resumed.resolved += 1,
            }
        }

        self.flush()?;

        // Look for what unanswered creates may have made. References are
        // resolved now, after the polls recorded their outputs.
        let configs: HashMap<String, PropertyMap> = targets
            .iter()
            .map(|(name, t)| (name.clone(), t.config.clone()))
            .collect();
        let finds: Vec<Pending> = finds
            .into_iter()
            .map(|(op, record)| {
                let lookup = self
                    .request(
                        &stack.name,
                        ctx,
                        &configs,
                        &op,
                        &record.request_id,
                        &outputs,
                    )
                    .ok()
                    .and_then(|r| match r {
                        Request::Create(c) => Some(Lookup {
                            plugin: op.plugin.clone(),
                            resource_type: op.resource_type.clone(),
                            identity: identity(self.schema(&op), &c.properties),
                            target: c.target,
                            claimed: claimed.clone(),
                        }),
                        _ => None,
                    });
                Pending::Find { op, record, lookup }
            })
            .collect();
        let results = self
            .settle_all(&stack.name, &command_id, finds, &targets)
            .await;
        // A lost attempt whose deadline has not passed may still land after
        // the listing: not found is then not "never landed".
        let now_ms = self.store.now_ms()?;
        let timeout_ms =
            i64::try_from(self.options.request_timeout.as_millis()).unwrap_or(i64::MAX);
        for result in results {
            let (op, record, answer) = result?;
            resumed.resolved += 1;
            let found =
                matches!(&answer, Answer::Progress(p) if p.status == OperationStatus::Success);
            if found {
                resumed.adopted.push(op.label.clone());
                self.complete(
                    &command_id,
                    ctx,
                    &op,
                    &record.request_id,
                    record.attempts.max(1) as u32,
                    Ok(answer),
                    &mut outputs,
                    &mut None,
                    false,
                )?;
            } else {
                let landing = record.updated_ms.saturating_add(timeout_ms) > now_ms;
                let message = match (landing, canceled) {
                    (true, _) => "not found yet, but its attempt may still land: sent again under the same request id",
                    (false, true) => "not found after a forced cancel: it did not take effect and is planned again",
                    (false, false) => "not found after the primary restarted: it did not take effect and is planned again",
                };
                match landing {
                    true => resumed.resent.push(op.label.clone()),
                    false => resumed.not_found.push(op.label.clone()),
                }
                self.store.put_operation(
                    &command_id,
                    &OperationRecord {
                        status: OpStatus::Failed,
                        error_code: Some(ErrorCode::NotFound.to_string()),
                        message: Some(message.into()),
                        native_id: None,
                        context: None,
                        ..record
                    },
                )?;
            }
        }
        self.flush()?;
        if canceled {
            // Updates and deletes sent unanswered are planned again, as
            // after a crash; the canceled command will not repeat them, so
            // its records say so (and the next apply settles nothing more).
            // A create left unsettled (no longer declared: nothing to look
            // for) stays as it is, for an apply that declares it again.
            let left = self.store.command(Some(&command_id))?;
            for record in left.into_iter().flat_map(|c| c.operations) {
                if record.operation != "create"
                    && matches!(record.status, OpStatus::Running | OpStatus::InProgress)
                {
                    self.store.put_operation(
                        &command_id,
                        &OperationRecord {
                            status: OpStatus::Canceled,
                            error_code: Some("Canceled".into()),
                            message: Some(
                                "canceled by force before its answer came; its outcome is left to the plan"
                                    .into(),
                            ),
                            ..record
                        },
                    )?;
                }
            }
        }
        resumed.adopted.sort();
        resumed.not_found.sort();
        resumed.resent.sort();
        Ok(Some(resumed))
    }

    /// Polls (or lists) until the outcome is known; the final answer.
    /// [`Self::settle`] for each of `pending`, as many at once as the
    /// command's concurrency allows.
    async fn settle_all(
        &self,
        stack: &str,
        command_id: &str,
        pending: Vec<Pending>,
        targets: &HashMap<String, TargetDecl>,
    ) -> Vec<Result<(Op, OperationRecord, Answer), ResumeError>> {
        let pacer = Pacer::new(&self.catalog, &self.options.rate_overrides, &self.rates);
        let jitter = Mutex::new(Jitter::new(self.options.seed));
        let (pacer, jitter) = (&pacer, &jitter);
        stream::iter(
            pending
                .into_iter()
                .map(|p| self.settle(stack, command_id, p, targets, pacer, jitter)),
        )
        .buffer_unordered(self.options.max_concurrency.max(1))
        .collect()
        .await
    }

    async fn settle(
        &self,
        stack: &str,
        command_id: &str,
        pending: Pending,
        targets: &HashMap<String, TargetDecl>,
        pacer: &Pacer,
        jitter: &Mutex<Jitter>,
    ) -> Result<(Op, OperationRecord, Answer), ResumeError> {
        let started = Instant::now();
        let policy = self.options.scheduler_config();
        let mut transient = 0u32;
        // The policy's retry decision, after failure number `transient`.
        let retry_delay = |transient: u32, code: &ErrorCode, retry_after: Option<Duration>| {
            let mut jitter = jitter.lock().unwrap_or_else(|p| p.into_inner());
            policy
                .retry
                .retry_after_failure(transient, code, retry_after, &mut jitter)
        };
        let unresolved = |op: &Op, code: ErrorCode, message: String, record: &OperationRecord| {
            ResumeError::Unresolved {
                command_id: command_id.to_owned(),
                label: op.label.clone(),
                operation: record.operation.clone(),
                code,
                message,
            }
        };
        match pending {
            Pending::Poll { op, mut record } => {
                let target = Target {
                    name: op.target.clone(),
                    config: targets
                        .get(&op.target)
                        .map(|t| t.config.clone())
                        .unwrap_or_default(),
                    stack: Some(stack.to_owned()),
                };
                loop {
                    let request = Request::Status(StatusRequest {
                        request_id: record.request_id.clone(),
                        operation: operation_of(&op.kind),
                        resource_type: op.resource_type.clone(),
                        target: target.clone(),
                        native_id: record.native_id.clone().unwrap_or_default(),
                        context: record.context.clone(),
                    });
                    pacer.acquire(&op.plugin, &op.target).await;
                    let answer = self
                        .transport
                        .send(&op.plugin, &request, self.options.request_timeout)
                        .await;
                    let verdict = match &answer {
                        Ok(a) => answer::classify(pace::reply(a), Expect::Progress),
                        Err(e) => answer::classify(
                            Reply::Transport {
                                code: &e.code(),
                                message: &e.to_string(),
                            },
                            Expect::Progress,
                        ),
                    };
                    let (code, message, retry_after) = match (verdict, answer) {
                        (Verdict::Succeeded, Ok(a)) => return Ok((op, record, a)),
                        (Verdict::InProgress { retry_after }, Ok(Answer::Progress(p))) => {
                            // Still in progress: keep its latest context, so
                            // another restart polls from here.
                            if p.native_id.is_some() {
                                record.native_id = p.native_id.clone();
                            }
                            record.context = p.context.clone();
                            record.status = OpStatus::InProgress;
                            record.error_code = None;
                            record.message = p.message.clone();
                            self.store.put_operation(command_id, &record)?;
                            if started.elapsed() > policy.poll_timeout {
                                let f = failure(
                                    &op,
                                    &record,
                                    ErrorCode::NotStabilized,
                                    "still in progress after the poll timeout",
                                );
                                return Ok((op, record, f));
                            }
                            tokio::time::sleep(policy.poll_delay(retry_after)).await;
                            continue;
                        }
                        // Nothing came back: the outcome is still unknown.
                        (Verdict::Terminal { code, message }, Err(_)) => {
                            return Err(unresolved(&op, code, message, &record))
                        }
                        // A failed operation's own answer is what is recorded.
                        (Verdict::Terminal { .. }, Ok(a @ Answer::Progress(_))) => {
                            return Ok((op, record, a))
                        }
                        (Verdict::Terminal { code, message }, Ok(_)) => {
                            let f = failure(&op, &record, code, &message);
                            return Ok((op, record, f));
                        }
                        (
                            Verdict::Retryable {
                                code,
                                message,
                                retry_after,
                            },
                            _,
                        ) => (code, message, retry_after),
                        // Classification never gives these; a bug, not an answer.
                        (Verdict::Succeeded | Verdict::InProgress { .. }, _) => {
                            let f = failure(
                                &op,
                                &record,
                                ErrorCode::InternalFailure,
                                "the answer contradicts its classification",
                            );
                            return Ok((op, record, f));
                        }
                    };
                    transient += 1;
                    match retry_delay(transient, &code, retry_after) {
                        Some(delay) => tokio::time::sleep(delay).await,
                        None => return Err(unresolved(&op, code, message, &record)),
                    }
                }
            }
            Pending::Find { op, record, lookup } => {
                let Some(lookup) = lookup else {
                    // Its references are not known yet: its dependencies
                    // were never created, so it was never sent.
                    let f = failure(&op, &record, ErrorCode::NotFound, "never sent");
                    return Ok((op, record, f));
                };
                loop {
                    match lookup
                        .find(&*self.transport, self.options.request_timeout, Some(pacer))
                        .await
                    {
                        Ok(Some(found)) => {
                            let a = adopted(&op.resource_type, &record.request_id, found);
                            return Ok((op, record, a));
                        }
                        Ok(None) => {
                            let f = failure(&op, &record, ErrorCode::NotFound, "not found");
                            return Ok((op, record, f));
                        }
                        Err((code, message)) => {
                            transient += 1;
                            match retry_delay(transient, &code, None) {
                                Some(delay) => tokio::time::sleep(delay).await,
                                None => return Err(unresolved(&op, code, message, &record)),
                            }
                        }
                    }
                }
            }
        }
    }
}

fn failure(op: &Op, record: &OperationRecord, code: ErrorCode, message: &str) -> Answer {
    Answer::Progress(ProgressEvent::failure(
        operation_of(&op.kind),
        record.request_id.clone(),
        op.resource_type.clone(),
        code,
        message,
    ))
}

#[cfg(test)]
#[path = "resume_tests.rs"]
mod tests;
