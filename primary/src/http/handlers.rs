//! The endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::header::LOCATION;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::commands::{NotRunning, Outcome, Refused, Reservation};
use super::error::{ApiError, ApiResult};
use super::extract::{JsonBody, OptionalJsonBody, PathParam, QueryParams};
use super::plugins::Plugins;
use super::{resume, views, Shared};
use crate::apply::{Event, Executor};
use crate::discovery::UNMANAGED_STACK;
use crate::lease::{self, Claim, Keeper};
use crate::plan::{self, Mode, Plan, SecretHasher};
use crate::stack::{self, Catalog, Graph, Problem, Stack, StackError};
use crate::state::{CommandDocument, CommandFilter, CommandStatus, Store, StoredResource};

type AppState = State<Arc<Shared>>;

/// How long readiness waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Default and largest `limit` of `GET /v1/commands`.
const COMMANDS_DEFAULT_LIMIT: usize = 20;
const COMMANDS_MAX_LIMIT: usize = 200;

/// Runs blocking work (the store, parsing, planning) off the async threads.
pub(super) async fn blocking<T, F>(f: F) -> ApiResult<T>
where
    F: FnOnce() -> ApiResult<T> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f).await?
}

// ---------------------------------------------------------------- health

/// `GET /healthz`: the process is up and serving.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /readyz`: the state store answers a query.
/// `GET /metrics`: the process's metrics in the Prometheus text format.
pub async fn metrics(State(state): AppState) -> Response {
    let text = state
        .config
        .metrics
        .as_ref()
        .map(|m| m.prometheus_text())
        .unwrap_or_default();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    )
        .into_response()
}

pub async fn readyz(State(state): AppState) -> Response {
    let store = state.store.clone();
    let check = tokio::time::timeout(
        READY_TIMEOUT,
        tokio::task::spawn_blocking(move || store.secret_key().map(|_| ())),
    )
    .await;
    let plugins: BTreeMap<String, &'static str> = state
        .plugins
        .hosts()
        .iter()
        .map(|h| (h.name().to_owned(), h.status().state))
        .collect();
    let nats = state.config.nats.as_ref().map(|c| c.connection_state());
    let failure = match check {
        Ok(Ok(Ok(()))) => match nats {
            Some(s) if s != async_nats::connection::State::Connected => {
                Some(format!("NATS is {s:?}"))
            }
            _ => None,
        },
        Ok(Ok(Err(e))) => Some(e.to_string()),
        Ok(Err(e)) => Some(format!("the store check failed: {e}")),
        Err(_) => Some(format!(
            "the state store did not answer within {}s",
            READY_TIMEOUT.as_secs()
        )),
    };
    match failure {
        None => Json(json!({"status": "ready", "store": "ok", "plugins": plugins})).into_response(),
        Some(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unready", "error": error, "plugins": plugins})),
        )
            .into_response(),
    }
}

// ---------------------------------------------------------------- stacks

/// The body of `POST /v1/stacks/plan` and `POST /v1/stacks/apply`.
#[derive(Deserialize)]
pub struct StackRequest {
    /// The stack document: YAML or JSON text, or a JSON object.
    #[serde(default)]
    document: Option<Value>,
    /// `reconcile` (default) or `patch`.
    #[serde(default)]
    mode: Option<String>,
    /// How errors name the document (default `request`).
    #[serde(default)]
    source: Option<String>,
    /// The value of `${stack_dir}` (absolute; default: the server's).
    #[serde(default)]
    stack_dir: Option<String>,
}

/// The body of `POST /v1/stacks/{name}/destroy`: nothing yet.
#[derive(Deserialize, Default)]
pub struct DestroyRequest {}

impl StackRequest {
    /// The request an apply was started with, as recorded.
    pub(super) fn recorded(doc: &CommandDocument) -> Self {
        StackRequest {
            document: Some(Value::String(doc.text.clone())),
            mode: Some(doc.mode.clone()),
            source: Some(doc.source.clone()),
            stack_dir: Some(doc.stack_dir.clone()),
        }
    }
}

/// A parsed, validated stack with the plugins it needs running.
pub(super) struct Prepared {
    pub(super) stack: Stack,
    pub(super) graph: Graph,
    pub(super) plugins: Plugins,
    pub(super) mode: Mode,
    /// What to record so that the command can be resumed without the request.
    pub(super) document: CommandDocument,
}

fn invalid(errors: &[StackError]) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "the stack is invalid; nothing was changed",
    )
    .with(
        "errors",
        Value::Array(errors.iter().map(views::stack_error).collect()),
    )
}

/// A document past the parser's limits (`stack::limits`) is too large
/// (413); any other parse error makes the stack invalid (422).
fn unparsable(e: StackError) -> ApiError {
    match e.problem {
        Problem::TooLarge(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the stack document is too large; nothing was changed",
        )
        .with("errors", Value::Array(vec![views::stack_error(&e)])),
        _ => invalid(std::slice::from_ref(&e)),
    }
}

pub(super) async fn prepare(state: &Shared, req: StackRequest) -> ApiResult<Prepared> {
    let text = match req.document {
        Some(Value::String(text)) => text,
        // JSON is YAML: an object is taken as the document itself, laid out
        // one field a line so that errors can name lines.
        Some(doc @ Value::Object(_)) => serde_json::to_string_pretty(&doc)
            .map_err(|e| ApiError::bad_request(format!("`document`: {e}")))?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "`document` must be the stack document's text or a JSON object",
            ))
        }
        None => return Err(ApiError::bad_request("`document` is required")),
    };
    let mode = match req.mode.as_deref() {
        None | Some("reconcile") => Mode::Reconcile,
        Some("patch") => Mode::Patch,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`mode` must be `reconcile` or `patch`, not `{other}`"
            )))
        }
    };
    let stack_dir = match req.stack_dir {
        Some(dir) if Path::new(&dir).is_absolute() => dir,
        Some(dir) => {
            return Err(ApiError::bad_request(format!(
                "`stack_dir` must be an absolute path, not `{dir}`"
            )))
        }
        None => state.config.stack_dir.display().to_string(),
    };
    let source = req.source.unwrap_or_else(|| "request".to_owned());
    let document = CommandDocument {
        engine: state.config.engine().into(),
        mode: views::mode_name(mode).into(),
        source: source.clone(),
        stack_dir: stack_dir.clone(),
        text: text.clone(),
    };
    let stack =
        blocking(move || stack::parse(&source, &text, &stack_dir).map_err(unparsable)).await?;
    let names: BTreeSet<String> = stack.targets.iter().map(|t| t.plugin.clone()).collect();
    let plugins = state.plugins.ensure(&names).await?;
    let catalog = plugins.catalog.clone();
    let (stack, graph) = blocking(move || match stack::validate(&stack, &catalog) {
        Ok(graph) => Ok((stack, graph)),
        Err(errors) => Err(invalid(&errors)),
    })
    .await?;
    Ok(Prepared {
        stack,
        graph,
        plugins,
        mode,
        document,
    })
}

/// What a plan was made against.
pub(super) struct Planned {
    stack: Stack,
    graph: Graph,
    plan: Plan,
    stored: Vec<StoredResource>,
    hasher: SecretHasher,
}

async fn plan_stack(store: &Store, prepared: Prepared) -> ApiResult<(Planned, Plugins)> {
    let store = store.clone();
    let Prepared {
        stack,
        graph,
        plugins,
        mode,
        ..
    } = prepared;
    let catalog = plugins.catalog.clone();
    let planned = blocking(move || {
        let stored = store.resources(Some(&stack.name))?;
        let hasher = SecretHasher::new(store.secret_key()?);
        let plan = plan::plan(&stack, &graph, &catalog, &stored, mode, &hasher);
        Ok(Planned {
            stack,
            graph,
            plan,
            stored,
            hasher,
        })
    })
    .await?;
    Ok((planned, plugins))
}

/// `POST /v1/stacks/plan`.
pub async fn plan_handler(
    State(state): AppState,
    JsonBody(req): JsonBody<StackRequest>,
) -> ApiResult<Json<Value>> {
    let prepared = prepare(&state, req).await?;
    let mode = prepared.mode;
    let (planned, _) = plan_stack(&state.store, prepared).await?;
    Ok(Json(views::plan(
        &planned.stack.name,
        Some(mode),
        &planned.plan,
    )))
}

fn refused(stack: &str, r: Refused) -> ApiError {
    match r {
        Refused::Busy { command_id } => ApiError::conflict(format!(
            "stack `{stack}` has a command running: {command_id}"
        ))
        .with("command_id", json!(command_id)),
        Refused::ShuttingDown => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        ),
    }
}

/// What a launched command does.
pub(super) enum Work {
    /// Runs this plan.
    Plan(Planned),
    /// Settles what the interrupted command it goes on with left
    /// ambiguous, then plans against the settled records: `mode` for an
    /// apply of `stack`, a destroy when `None`.
    Resume {
        stack: Stack,
        graph: Graph,
        mode: Option<Mode>,
        hasher: SecretHasher,
    },
}

/// Runs `work` as command `reservation` in the background, holding the
/// command's lease (`keeper`) until it ends; losing the lease cancels it.
pub(super) fn launch(
    state: &Shared,
    reservation: Reservation,
    kind: &'static str,
    work: Work,
    plugins: Plugins,
    keeper: Keeper,
) {
    let store = state.store.clone();
    let options = state.config.options.clone();
    let id = reservation.id.clone();
    reservation.launch(move |cancel| async move {
        let cancel = lease::cancel_on_loss(cancel, keeper.lost());
        let (events, mut rx) = mpsc::unbounded_channel::<Event>();
        let log_id = id.clone();
        let logger = tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                if matches!(e.status, "failed" | "retrying" | "dependency_failed") {
                    tracing::warn!(command = %log_id, label = %e.label, operation = e.operation,
                        status = e.status, detail = %e.detail, "operation");
                } else {
                    tracing::debug!(command = %log_id, label = %e.label, operation = e.operation,
                        status = e.status, detail = %e.detail, "operation");
                }
            }
        });
        let hasher = match &work {
            Work::Plan(planned) => planned.hasher.clone(),
            Work::Resume { hasher, .. } => hasher.clone(),
        };
        let executor = Executor::new(
            plugins.transport,
            store.clone(),
            plugins.catalog.clone(),
            hasher,
            options,
        )
        .with_events(events)
        .with_cancel(cancel);
        let planned = match work {
            Work::Plan(planned) => planned,
            Work::Resume {
                stack,
                graph,
                mode,
                hasher,
            } => match settle_and_plan(&executor, &store, &plugins.catalog, stack, graph, mode, hasher)
                .await
            {
                Ok(planned) => planned,
                Err(e) => {
                    tracing::warn!(command = %id, error = %e,
                        "cannot resume the interrupted command; it stays `running` for the next attempt");
                    return Outcome::Error(format!("cannot resume: {e}"));
                }
            },
        };
        tracing::info!(command = %id, stack = %planned.stack.name, kind, "command started");
        let result = executor
            .run(
                &id,
                kind,
                &planned.stack.name,
                Some((&planned.stack, &planned.graph)),
                &planned.plan,
                &planned.stored,
            )
            .await;
        drop(executor);
        let _ = logger.await;
        keeper.release();
        match result {
            Ok(report) => {
                tracing::info!(command = %id, ok = report.ok(), succeeded = report.succeeded,
                    failed = report.failed.len(), elapsed_ms = report.elapsed_ms, "command finished");
                Outcome::Report(report)
            }
            Err(e) => {
                tracing::error!(command = %id, error = %e, "command failed in the state store");
                // Best effort: the store is what just failed.
                let _ = store.finish_command(&id, &CommandStatus::Failed);
                Outcome::Error(e.to_string())
            }
        }
    });
}

/// Settles an interrupted command (as `orrery apply` does) and plans what
/// is left against the settled records.
async fn settle_and_plan(
    executor: &Executor,
    store: &Store,
    catalog: &Catalog,
    stack: Stack,
    graph: Graph,
    mode: Option<Mode>,
    hasher: SecretHasher,
) -> Result<Planned, String> {
    let resumed = executor
        .resume(&stack, &graph)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(r) = &resumed {
        tracing::info!(command = %r.command_id, stack = %stack.name, settled = r.resolved,
            adopted = r.adopted.len(), to_create_again = r.not_found.len(), "resuming an interrupted command");
    }
    let stored = store
        .resources(Some(&stack.name))
        .map_err(|e| e.to_string())?;
    let plan = match mode {
        Some(mode) => plan::plan(&stack, &graph, catalog, &stored, mode, &hasher),
        None => plan::plan_destroy(&stored),
    };
    Ok(Planned {
        stack,
        graph,
        plan,
        stored,
        hasher,
    })
}

fn accepted(id: &str, stack: &str, kind: &str, plan: &Plan, claim: &Claim) -> Response {
    let mut body = json!({
        "command_id": id,
        "stack": stack,
        "kind": kind,
        "status": "running",
        "plan": views::plan(stack, None, plan),
    });
    if matches!(claim, Claim::Interrupted(_)) {
        body["resumed"] = json!(true);
    }
    (
        StatusCode::ACCEPTED,
        [(LOCATION, format!("/v1/commands/{id}"))],
        Json(body),
    )
        .into_response()
}

/// `POST /v1/stacks/apply`.
pub async fn apply_handler(
    State(state): AppState,
    JsonBody(req): JsonBody<StackRequest>,
) -> ApiResult<Response> {
    let prepared = prepare(&state, req).await?;
    let name = prepared.stack.name.clone();
    let mut reservation = state
        .commands
        .reserve(&name)
        .map_err(|r| refused(&name, r))?;
    // The stack's interrupted command, if any, goes on under its id.
    let (claim, keeper) = resume::claim(&state, &mut reservation, &name).await?;
    // Recorded for resuming without the request, unless it holds secrets
    // (never stored in clear).
    if !plan::declares_secrets(&prepared.stack, &prepared.plugins.catalog) {
        let (id, document) = (reservation.id.clone(), prepared.document.clone());
        let store = state.store.clone();
        blocking(move || Ok(store.put_command_document(&id, &document)?)).await?;
    }
    let mode = prepared.mode;
    let (planned, plugins) = plan_stack(&state.store, prepared).await?;
    let response = accepted(&reservation.id, &name, "apply", &planned.plan, &claim);
    let work = match claim {
        Claim::New(_) => Work::Plan(planned),
        Claim::Interrupted(_) => Work::Resume {
            stack: planned.stack,
            graph: planned.graph,
            mode: Some(mode),
            hasher: planned.hasher,
        },
    };
    launch(&state, reservation, "apply", work, plugins, keeper);
    Ok(response)
}

/// A stack as recorded (its targets, no resources: what a destroy needs),
/// its resources and the store's hasher; 404 when nothing is recorded.
pub(super) async fn recorded_stack(
    store: &Store,
    name: &str,
) -> ApiResult<(Stack, Vec<StoredResource>, SecretHasher)> {
    let (store, name) = (store.clone(), name.to_owned());
    blocking(move || {
        let stored = store.resources(Some(&name))?;
        let targets = store.targets(&name)?;
        if stored.is_empty() && targets.is_empty() {
            return Err(ApiError::not_found(format!(
                "no stack `{name}` is recorded"
            )));
        }
        let hasher = SecretHasher::new(store.secret_key()?);
        let stack = Stack {
            name,
            source: String::new(),
            targets,
            resources: Vec::new(),
        };
        Ok((stack, stored, hasher))
    })
    .await
}

/// `POST /v1/stacks/{name}/destroy`.
pub async fn destroy_handler(
    State(state): AppState,
    PathParam(name): PathParam,
    OptionalJsonBody(DestroyRequest {}): OptionalJsonBody<DestroyRequest>,
) -> ApiResult<Response> {
    let mut reservation = state
        .commands
        .reserve(&name)
        .map_err(|r| refused(&name, r))?;
    let (stack, stored, hasher) = recorded_stack(&state.store, &name).await?;
    let (claim, keeper) = resume::claim(&state, &mut reservation, &name).await?;
    let names: BTreeSet<String> = stored.iter().map(|s| s.plugin.clone()).collect();
    let plugins = state.plugins.ensure(&names).await?;
    let plan = plan::plan_destroy(&stored);
    let response = accepted(&reservation.id, &name, "destroy", &plan, &claim);
    let work = match claim {
        Claim::New(_) => Work::Plan(Planned {
            stack,
            graph: Graph::default(),
            plan,
            stored,
            hasher,
        }),
        Claim::Interrupted(_) => Work::Resume {
            stack,
            graph: Graph::default(),
            mode: None,
            hasher,
        },
    };
    launch(&state, reservation, "destroy", work, plugins, keeper);
    Ok(response)
}

/// Query parameters naming a stack.
#[derive(Deserialize, Default)]
pub struct StackQuery {
    #[serde(default)]
    stack: Option<String>,
}

/// `GET /v1/stacks`.
pub async fn stacks_handler(State(state): AppState) -> ApiResult<Json<Value>> {
    let shared = state.clone();
    let rows = blocking(move || {
        let mut counts = shared.store.resource_counts()?;
        counts.remove(UNMANAGED_STACK);
        for name in shared.store.command_stacks()? {
            counts.entry(name).or_default();
        }
        let mut rows = Vec::new();
        for (name, resources) in counts {
            let targets: Vec<String> = shared
                .store
                .targets(&name)?
                .into_iter()
                .map(|t| t.name)
                .collect();
            let last = shared
                .store
                .commands(&CommandFilter {
                    stack: Some(name.clone()),
                    status: None,
                    limit: 1,
                })?
                .into_iter()
                .next();
            rows.push(json!({
                "name": name,
                "resources": resources,
                "targets": targets,
                "last_command": last,
                "running_command": shared.commands.running_for(&name),
            }));
        }
        Ok(rows)
    })
    .await?;
    Ok(Json(json!({ "stacks": rows })))
}

// ---------------------------------------------------------------- commands

/// Query parameters of `GET /v1/commands`.
#[derive(Deserialize, Default)]
pub struct CommandsQuery {
    #[serde(default)]
    stack: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /v1/commands`.
pub async fn commands_handler(
    State(state): AppState,
    QueryParams(q): QueryParams<CommandsQuery>,
) -> ApiResult<Json<Value>> {
    let limit = q.limit.unwrap_or(COMMANDS_DEFAULT_LIMIT);
    if limit == 0 || limit > COMMANDS_MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "`limit` must be between 1 and {COMMANDS_MAX_LIMIT}"
        )));
    }
    let shared = state.clone();
    let rows = blocking(move || {
        let heads = shared.store.commands(&CommandFilter {
            stack: q.stack,
            status: None,
            limit,
        })?;
        let mut rows = Vec::with_capacity(heads.len());
        for head in heads {
            let counts = shared.store.operation_counts(&head.id)?;
            let mut row = serde_json::to_value(&head).unwrap_or_default();
            row["operations"] = json!(counts);
            row["active"] = json!(shared.commands.is_running(&head.id));
            rows.push(row);
        }
        Ok(rows)
    })
    .await?;
    Ok(Json(json!({ "commands": rows })))
}

/// `GET /v1/commands/{id}`.
pub async fn command_handler(
    State(state): AppState,
    PathParam(id): PathParam,
) -> ApiResult<Json<Value>> {
    let store = state.store.clone();
    let lookup = id.clone();
    let record = blocking(move || Ok(store.command(Some(&lookup))?)).await?;
    let active = state.commands.is_running(&id);
    let mut out = match record {
        Some(record) => serde_json::to_value(&record).unwrap_or_default(),
        // Accepted, but the executor has not written its record yet.
        None if active => json!({"id": id, "status": "running", "operations": []}),
        None => return Err(ApiError::not_found(format!("no command `{id}`"))),
    };
    out["active"] = json!(active);
    match state.commands.outcome(&id) {
        Some(Outcome::Report(report)) => out["report"] = views::report(&report),
        Some(Outcome::Error(error)) => out["error"] = json!(error),
        None => {}
    }
    Ok(Json(out))
}

/// `POST /v1/commands/{id}/cancel`.
pub async fn cancel_handler(
    State(state): AppState,
    PathParam(id): PathParam,
    OptionalJsonBody(DestroyRequest {}): OptionalJsonBody<DestroyRequest>,
) -> ApiResult<Response> {
    match state.commands.cancel(&id) {
        Ok(()) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({"command_id": id, "status": "canceling"})),
        )
            .into_response()),
        Err(NotRunning::NotRunning) => {
            let store = state.store.clone();
            let lookup = id.clone();
            let record = blocking(move || Ok(store.command(Some(&lookup))?)).await?;
            match record {
                None => Err(ApiError::not_found(format!("no command `{id}`"))),
                Some(r) if r.status == "running" => Err(ApiError::conflict(format!(
                    "command `{id}` is not running in this server (it was interrupted)"
                ))
                .with("status", json!(r.status))),
                Some(r) => Err(ApiError::conflict(format!(
                    "command `{id}` is not running: it is {}",
                    r.status
                ))
                .with("status", json!(r.status))),
            }
        }
    }
}

// ---------------------------------------------------------------- inventory

/// `GET /v1/resources`.
pub async fn resources_handler(
    State(state): AppState,
    QueryParams(q): QueryParams<StackQuery>,
) -> ApiResult<Json<Value>> {
    let store = state.store.clone();
    let rows = blocking(move || {
        let resources = store.resources(q.stack.as_deref())?;
        Ok(resources.iter().map(views::resource).collect::<Vec<_>>())
    })
    .await?;
    Ok(Json(json!({ "resources": rows })))
}

/// `GET /v1/targets`.
pub async fn targets_handler(
    State(state): AppState,
    QueryParams(q): QueryParams<StackQuery>,
) -> ApiResult<Json<Value>> {
    let shared = state.clone();
    let rows = blocking(move || {
        let stacks: BTreeSet<String> = match q.stack {
            Some(name) => BTreeSet::from([name]),
            None => {
                let mut names: BTreeSet<String> =
                    shared.store.resource_counts()?.into_keys().collect();
                names.remove(UNMANAGED_STACK);
                names.extend(shared.store.command_stacks()?);
                names
            }
        };
        let mut rows = Vec::new();
        for name in stacks {
            for t in shared.store.targets(&name)? {
                rows.push(views::target(&name, &t));
            }
        }
        Ok(rows)
    })
    .await?;
    Ok(Json(json!({ "targets": rows })))
}

/// `GET /v1/plugins`.
pub async fn plugins_handler(State(state): AppState) -> Json<Value> {
    let rows: Vec<Value> = state.plugins.hosts().iter().map(views::plugin).collect();
    Json(json!({ "plugins": rows }))
}

// ---------------------------------------------------------------- fallbacks

/// Unknown paths.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint")
}

/// Known paths, wrong method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this endpoint",
    )
}
