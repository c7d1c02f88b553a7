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

use super::auth::{Principal, Role};
use super::commands::{self, NotRunning, Outcome, Reservation};
use super::error::{ApiError, ApiResult};
use super::extract::{JsonBody, OptionalJsonBody, PathParam, QueryParams};
use super::{blocking, pages, views, Shared};
use crate::discovery::UNMANAGED_STACK;
use crate::plan::Mode;
use crate::service::view::{self, ConfirmedPlan, PlanView, ReportView};
use crate::service::{Command, ServiceError, StackInputs, StackReads};
use crate::stack::Supplied;
use crate::state::{AuditEntry, CommandDocument, CommandFilter, CommandStatus};

type AppState = State<Arc<Shared>>;

/// How long readiness waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Default and largest `limit` of `GET /v1/commands`.
const COMMANDS_DEFAULT_LIMIT: u32 = 20;
const COMMANDS_MAX_LIMIT: u32 = 200;
/// How many commands one page of `GET /v1/commands` looks through for a
/// principal who may view only some stacks (a page may come shorter, with
/// a `next_cursor` to look further back).
const COMMANDS_FILTER_WINDOW: usize = 2000;

// ---------------------------------------------------------------- health

/// `GET /healthz`: the process is up and serving.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /readyz`: the state store answers a query.
/// `GET /metrics`: the process's metrics in the Prometheus text format.
pub async fn metrics(State(state): AppState, principal: Principal) -> Response {
    if !principal.metrics && !principal.may_some(Role::Viewer) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!("`{}` may not read the metrics", principal.name),
        )
        .refusing(&principal.name, None)
        .into_response();
    }
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
        .service
        .plugins()
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
    /// Parameter values, by name (`docs/stacks.md`).
    #[serde(default)]
    vars: Option<serde_json::Map<String, Value>>,
    /// Parameter values given as text, typed by the parameter's declaration
    /// as `--var NAME=TEXT` is (what the remote CLI sends for `--var` and
    /// `ORRERY_VAR_*`).
    #[serde(default)]
    var_texts: Option<BTreeMap<String, String>>,
    /// The files the document reads (module sources, `file()`), by the
    /// path it names them with; the server reads none of its own.
    #[serde(default)]
    files: Option<BTreeMap<String, String>>,
    /// Read every managed resource of the stack before planning, recording
    /// its drift (as `orrery plan --refresh`); the plan reports it under
    /// `refresh`.
    #[serde(default)]
    refresh: bool,
    /// A targeted run (`target`, `exclude`, `replace`).
    #[serde(flatten)]
    selection: SelectionRequest,
    /// For an apply: the plan the caller confirmed (its `plan_hash` and
    /// changes, as `POST /v1/stacks/plan` gave them). The apply then runs
    /// only that plan: when planning again under the stack's lease gives
    /// another, it is refused (409) naming what changed.
    #[serde(default)]
    confirmed_plan: Option<ConfirmedPlan>,
}

/// The labels of a targeted run, as `--target`, `--exclude`, `--replace`.
#[derive(Deserialize, Default)]
pub struct SelectionRequest {
    #[serde(default)]
    target: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    replace: Vec<String>,
}

impl SelectionRequest {
    fn take(&mut self) -> orrery_core::select::Selection {
        orrery_core::select::Selection {
            target: std::mem::take(&mut self.target),
            exclude: std::mem::take(&mut self.exclude),
            replace: std::mem::take(&mut self.replace),
        }
    }
}

/// The body of `POST /v1/commands/{id}/cancel`.
#[derive(Deserialize, Default)]
pub struct CancelRequest {
    /// Stop waiting for operations in flight (see [`crate::apply::Stop`]):
    /// they stay recorded without an outcome and the next apply settles
    /// them. By default in-flight operations finish.
    #[serde(default)]
    force: bool,
}

/// The body of `POST /v1/stacks/{name}/destroy`: a targeted destroy's labels.
#[derive(Deserialize, Default)]
pub struct DestroyBody {
    #[serde(flatten)]
    selection: SelectionRequest,
}

/// The most files one request may bring (the body's size limit bounds their
/// bytes).
const MAX_REQUEST_FILES: usize = 1024;

/// The parameter values a request gives. `file()` reads nothing: a
/// request must not read the server's files.
fn inputs(req: &mut StackRequest) -> ApiResult<StackInputs> {
    let mut vars = BTreeMap::new();
    for (name, v) in req.vars.take().unwrap_or_default() {
        let value: orrery_schema::Value = serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("`vars.{name}`: {e}")))?;
        vars.insert(name, Supplied::Value(value));
    }
    for (name, text) in req.var_texts.take().unwrap_or_default() {
        vars.insert(name, Supplied::Text(text));
    }
    let files = req.files.take();
    if files.as_ref().is_some_and(|f| f.len() > MAX_REQUEST_FILES) {
        return Err(ApiError::bad_request(format!(
            "`files`: more than {MAX_REQUEST_FILES} files"
        )));
    }
    Ok(StackInputs {
        vars,
        files: files.map(std::sync::Arc::new),
        ..StackInputs::default()
    })
}

/// The document a request gives, checked, as the service takes it.
fn document(state: &Shared, req: StackRequest) -> ApiResult<CommandDocument> {
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
        None => Mode::Reconcile,
        Some(name) => view::parse_mode(name).ok_or_else(|| {
            ApiError::bad_request(format!(
                "`mode` must be `reconcile` or `patch`, not `{name}`"
            ))
        })?,
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
    Ok(CommandDocument {
        engine: state.service.config().engine.name().into(),
        mode: view::mode_name(mode).into(),
        source: req.source.unwrap_or_else(|| "request".to_owned()),
        stack_dir,
        text,
        selection: Default::default(),
    })
}

/// 403 unless `principal` holds `role` on the stack `document` names:
/// checked before the document is evaluated or a plugin started, on its
/// `stack:` alone (a principal with `role` on no stack is refused before
/// even that is read), so that a token scoped elsewhere cannot make the
/// server evaluate a costly document (issue #43).
async fn authorize(principal: &Principal, role: Role, document: &CommandDocument) -> ApiResult<()> {
    principal.require_some(role)?;
    let (source, text) = (document.source.clone(), document.text.clone());
    let name = blocking(move || {
        crate::stack::stack_name(&source, &text)
            .map_err(|e| ApiError::from(ServiceError::InvalidStack(vec![e.locate(&text)])))
    })
    .await?;
    principal.require(role, &name)
}

/// `inputs` reading other stacks' outputs only where `principal` is a
/// viewer (`${stacks.X.outputs.Y}` shows what `GET
/// /v1/stacks/X/outputs` would).
fn reading_as(principal: &Principal, inputs: StackInputs) -> StackInputs {
    let reader = principal.clone();
    StackInputs {
        stack_reads: Some(StackReads::new(move |stack| {
            reader.may(Role::Viewer, stack)
        })),
        ..inputs
    }
}

/// A refused read of another stack's outputs as a 403, else `e`.
fn refused_reads(principal: &Principal, inputs: &StackInputs, e: ServiceError) -> ApiError {
    let refused = inputs
        .stack_reads
        .as_ref()
        .map(StackReads::refused)
        .unwrap_or_default();
    match refused.first() {
        Some(stack) => ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "`{}` is not a viewer of stack `{stack}`, whose outputs this document reads; nothing was changed",
                principal.name
            ),
        )
        .refusing(&principal.name, Some(stack)),
        None => e.into(),
    }
}

/// `POST /v1/stacks/plan`.
pub async fn plan_handler(
    State(state): AppState,
    principal: Principal,
    JsonBody(mut req): JsonBody<StackRequest>,
) -> ApiResult<Json<PlanView>> {
    let inputs = inputs(&mut req)?;
    let (selection, refresh) = (req.selection.take(), req.refresh);
    let document = document(&state, req)?;
    authorize(&principal, Role::Planner, &document).await?;
    let inputs = reading_as(&principal, inputs);
    let mut prepared = state
        .service
        .prepare_with(document, inputs.clone())
        .await
        .map_err(|e| refused_reads(&principal, &inputs, e))?;
    prepared.selection = selection;
    principal.require(Role::Planner, &prepared.stack.name)?;
    let refreshed = match refresh {
        true => Some(state.service.refresh(&prepared).await?),
        false => None,
    };
    let plan = state.service.plan(&prepared).await?;
    Ok(Json(
        PlanView::new(&prepared.stack.name, Some(prepared.mode), &plan).with_refresh(refreshed),
    ))
}

/// The 202 of a command started in the background.
fn accepted(command: &Command, plan: &PlanView) -> Response {
    let id = command.id();
    let mut body = json!({
        "command_id": id,
        "stack": command.stack().name,
        "kind": command.kind().name(),
        "status": "running",
        "plan": plan,
    });
    if command.resumes() {
        body["resumed"] = json!(true);
    }
    (
        StatusCode::ACCEPTED,
        [(LOCATION, format!("/v1/commands/{id}"))],
        Json(body),
    )
        .into_response()
}

/// Starts `command` in the background as `reservation` and answers 202
/// with its plan (a preview for a resumed command, which plans again once
/// settled), made after reading every managed resource when `refresh`.
async fn start(
    state: &Shared,
    mut reservation: Reservation,
    command: Command,
    principal: &Principal,
    refresh: bool,
    confirmed: Option<ConfirmedPlan>,
) -> ApiResult<Response> {
    if command.id() != reservation.id {
        reservation.rename(command.id());
    }
    if !command.resumes() {
        // What the stack's previous command, canceled by force, left in
        // flight (a resumed command settles in the background instead).
        command.settle().await?;
    }
    let refreshed = match refresh {
        true => Some(command.refresh().await?),
        false => None,
    };
    let planned = command.plan().await?;
    let view = command.view(&planned.plan).with_refresh(refreshed);
    // What runs is the plan that was confirmed, or nothing: planned again
    // here, under the stack's lease (no other command can move the stack
    // until this one ends), it must do nothing the confirmed plan did not
    // show (it may do less: what settling an interrupted command adopted
    // is no longer to create). A resumed command goes on with what an
    // earlier apply was confirmed for; a saved plan (`exact`) waits for it.
    if let Some(confirmed) = confirmed {
        let changed = match command.resumes() {
            false => view.stale_reasons(&confirmed),
            true if confirmed.exact => vec![view::interrupted_first(command.id())],
            true => Vec::new(),
        };
        if !changed.is_empty() {
            return Err(ApiError::conflict(format!(
                "the stack changed since your plan; plan again: {}",
                changed.join("; ")
            ))
            .with("stale_plan", json!(true))
            .with("changed", json!(changed))
            .with("plan_hash", json!(view.plan_hash)));
        }
    }
    // The dashboard shows it: the store keeps no plan.
    state.ui_plans.remember(command.id(), &view);
    let response = accepted(&command, &view);
    let planned = (!command.resumes()).then_some(planned);
    tracing::info!(
        target: super::AUDIT,
        principal = %principal.name,
        command = %command.id(),
        kind = %command.kind().name(),
        stack = %command.stack().name,
        "command started"
    );
    // Recorded before it runs: a command that ran has its audit record.
    let action = match command.resumes() {
        true => "resume",
        false => command.kind().name(),
    };
    state
        .audit
        .record(AuditEntry {
            principal: Some(principal.name.clone()),
            action: action.to_owned(),
            stack: Some(command.stack().name.clone()),
            command_id: Some(command.id().to_owned()),
            plan_hash: Some(view.plan_hash.clone()),
            outcome: "running".into(),
            count: 1,
        })
        .await?;
    commands::launch(
        reservation,
        command,
        planned,
        Some(&principal.name),
        Some(state.audit.clone()),
    );
    Ok(response)
}

/// `POST /v1/stacks/apply`.
pub async fn apply_handler(
    State(state): AppState,
    principal: Principal,
    JsonBody(mut req): JsonBody<StackRequest>,
) -> ApiResult<Response> {
    let inputs = inputs(&mut req)?;
    let (selection, refresh) = (req.selection.take(), req.refresh);
    let confirmed = req.confirmed_plan.take();
    let document = document(&state, req)?;
    authorize(&principal, Role::Operator, &document).await?;
    let inputs = reading_as(&principal, inputs);
    let mut prepared = state
        .service
        .prepare_with(document, inputs.clone())
        .await
        .map_err(|e| refused_reads(&principal, &inputs, e))?;
    prepared.selection = selection;
    principal.require(Role::Operator, &prepared.stack.name)?;
    if !principal.may(Role::Admin, &prepared.stack.name) {
        // Targets (where a plugin acts, e.g. a `local` root) are the
        // admin's: an operator applies only the targets recorded already.
        let name = prepared.stack.name.clone();
        let store = state.store.clone();
        let recorded = blocking(move || Ok(store.targets(&name)?)).await?;
        // Compared as they are recorded: secret fields are never stored,
        // so the document's own form would never match.
        let storable =
            orrery_core::plan::storable_targets(&prepared.stack.targets, prepared.catalog());
        let changed: Vec<&str> = storable
            .iter()
            .filter(|t| !recorded.contains(t))
            .map(|t| t.name.as_str())
            .collect();
        if !changed.is_empty() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "`{}` is not an admin of stack `{}`: adding or changing its targets (`{}`) needs one",
                    principal.name,
                    prepared.stack.name,
                    changed.join("`, `")
                ),
            )
            .refusing(&principal.name, Some(&prepared.stack.name)));
        }
    }
    let reservation = state.commands.reserve(&prepared.stack.name)?;
    let command = state
        .service
        .begin_apply(prepared, &reservation.id, Some(&principal.name))
        .await?;
    start(&state, reservation, command, &principal, refresh, confirmed).await
}

/// `POST /v1/stacks/{name}/destroy`.
pub async fn destroy_handler(
    State(state): AppState,
    principal: Principal,
    PathParam(name): PathParam,
    OptionalJsonBody(mut body): OptionalJsonBody<DestroyBody>,
) -> ApiResult<Response> {
    principal.require(Role::Operator, &name)?;
    let reservation = state.commands.reserve(&name)?;
    let command = state
        .service
        .begin_destroy(&name, None, &reservation.id, Some(&principal.name))
        .await?
        .with_selection(body.selection.take());
    start(&state, reservation, command, &principal, false, None).await
}

/// Query parameters naming a stack.
#[derive(Deserialize, Default)]
pub struct StackQuery {
    #[serde(default)]
    stack: Option<String>,
}

// ---------------------------------------------------------------- commands

/// Query parameters of `GET /v1/commands`.
#[derive(Deserialize, Default)]
pub struct CommandsQuery {
    #[serde(default)]
    stack: Option<String>,
    /// Page size, 1 to [`COMMANDS_MAX_LIMIT`].
    #[serde(default)]
    limit: Option<String>,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    cursor: Option<String>,
    /// `true`: every command (after `cursor`), up to the cap.
    #[serde(default)]
    all: Option<String>,
}

/// `GET /v1/stacks/{name}/outputs`: what the stack's last apply recorded;
/// secret outputs are `{"secret": true}`.
pub async fn outputs_handler(
    State(state): AppState,
    principal: Principal,
    PathParam(name): PathParam,
) -> ApiResult<Json<Value>> {
    principal.require(Role::Viewer, &name)?;
    let Some(recorded) = state.service.outputs(&name).await? else {
        return Err(ApiError::not_found(format!(
            "stack `{name}` has no recorded outputs"
        )));
    };
    let outputs: serde_json::Map<String, Value> = recorded
        .iter()
        .map(|(k, v)| (k.clone(), crate::service::outputs::to_json(v)))
        .collect();
    Ok(Json(json!({ "stack": name, "outputs": outputs })))
}

/// `GET /v1/commands`: newest first, a page at a time (`limit`, `cursor`),
/// or every one with `all=true` up to the server's cap.
pub async fn commands_handler(
    State(state): AppState,
    principal: Principal,
    QueryParams(q): QueryParams<CommandsQuery>,
) -> ApiResult<Json<Value>> {
    match &q.stack {
        Some(stack) => principal.require(Role::Viewer, stack)?,
        None => principal.require_some(Role::Viewer)?,
    }
    let span = pages::span_within(
        q.limit.as_deref(),
        q.all.as_deref(),
        COMMANDS_DEFAULT_LIMIT,
        COMMANDS_MAX_LIMIT,
    )?;
    let cap = state.config.max_list_items;
    let mut before = q
        .cursor
        .as_deref()
        .map(pages::parse_id_cursor)
        .transpose()?;
    let shared = state.clone();
    let (rows, next) = blocking(move || {
        // Filtered to the stacks this principal may view: one page looks
        // through at most a window of commands when some are left out.
        let scoped = !principal.may(Role::Viewer, "*") && q.stack.is_none();
        let mut kept = Vec::new();
        let mut scanned = 0;
        let next = loop {
            let chunk = match span {
                pages::Span::Page(n) if !scoped => n as usize + 1,
                _ => COMMANDS_FILTER_WINDOW,
            };
            let heads = shared.store.commands(&CommandFilter {
                stack: q.stack.clone(),
                status: None,
                limit: chunk,
                before: before.take(),
            })?;
            let exhausted = heads.len() < chunk;
            scanned += heads.len();
            before = heads.last().map(|h| h.id.clone());
            kept.extend(
                heads
                    .into_iter()
                    .filter(|h| principal.may(Role::Viewer, &h.stack)),
            );
            match span {
                pages::Span::All if kept.len() > cap => return Err(pages::too_many(cap)),
                pages::Span::All if exhausted => break None,
                pages::Span::All => {}
                pages::Span::Page(n) if kept.len() > n as usize => {
                    kept.truncate(n as usize);
                    break kept.last().map(|h| h.id.clone());
                }
                pages::Span::Page(_) if exhausted => break None,
                // Looked through a window: the client goes on from there.
                pages::Span::Page(_) if scanned >= COMMANDS_FILTER_WINDOW => break before,
                pages::Span::Page(_) => {}
            }
        };
        let mut rows = Vec::with_capacity(kept.len());
        for head in kept {
            let counts = shared.store.operation_counts(&head.id)?;
            let mut row = serde_json::to_value(&head).unwrap_or_default();
            row["operations"] = json!(counts);
            row["active"] = json!(shared.commands.is_running(&head.id));
            rows.push(row);
        }
        Ok((rows, next.map(|id| pages::id_cursor(&id))))
    })
    .await?;
    let mut out = json!({ "commands": rows });
    if let Some(next) = next {
        out["next_cursor"] = json!(next);
    }
    Ok(Json(out))
}

/// `GET /v1/commands/{id}`.
pub async fn command_handler(
    State(state): AppState,
    principal: Principal,
    PathParam(id): PathParam,
    QueryParams(page): QueryParams<pages::OperationsQuery>,
) -> ApiResult<Json<Value>> {
    let cap = state.config.max_list_items;
    let (span, page) = page.page(cap)?;
    let store = state.store.clone();
    let lookup = id.clone();
    let wanted = page.clone();
    let mut record = blocking(move || Ok(store.command_page(Some(&lookup), &wanted)?)).await?;
    let next_cursor = match record.as_mut() {
        Some(r) => pages::next_operations(span, &page, &mut r.operations, cap),
        None => Ok(None),
    };
    let active = state.commands.is_running(&id);
    match record
        .as_ref()
        .map(|r| r.stack.clone())
        .or_else(|| state.commands.stack_of(&id))
    {
        Some(stack) => principal.require(Role::Viewer, &stack)?,
        None => principal.require_some(Role::Viewer)?,
    }
    let mut out = match record {
        Some(record) => serde_json::to_value(&record).unwrap_or_default(),
        // Accepted, but the executor has not written its record yet.
        None if active => json!({"id": id, "status": "running", "operations": []}),
        None => return Err(ApiError::not_found(format!("no command `{id}`"))),
    };
    // Refused (past the cap of `all=true`) only once the caller may see it.
    if let Some(next) = next_cursor? {
        out["next_cursor"] = json!(next);
    }
    out["active"] = json!(active);
    match state.commands.outcome(&id) {
        Some(Outcome::Report(report)) => out["report"] = json!(ReportView::new(&report)),
        Some(Outcome::Error(error)) => out["error"] = json!(error),
        None => {}
    }
    Ok(Json(out))
}

/// `POST /v1/commands/{id}/cancel`.
pub async fn cancel_handler(
    State(state): AppState,
    principal: Principal,
    PathParam(id): PathParam,
    OptionalJsonBody(CancelRequest { force }): OptionalJsonBody<CancelRequest>,
) -> ApiResult<Response> {
    let stack = match state.commands.stack_of(&id) {
        Some(stack) => Some(stack),
        None => {
            let store = state.store.clone();
            let lookup = id.clone();
            blocking(move || Ok(store.command(Some(&lookup))?))
                .await?
                .map(|r| r.stack)
        }
    };
    match &stack {
        Some(stack) => principal.require(Role::Operator, stack)?,
        None => principal.require_some(Role::Viewer)?,
    }
    let stop = match force {
        true => crate::apply::Stop::Force,
        false => crate::apply::Stop::Graceful,
    };
    match state.commands.cancel(&id, stop) {
        Ok(()) => {
            tracing::info!(target: super::AUDIT, principal = %principal.name, command = %id, force, "command canceled");
            state
                .audit
                .record(AuditEntry {
                    principal: Some(principal.name.clone()),
                    action: "cancel".into(),
                    stack: stack.clone(),
                    command_id: Some(id.clone()),
                    plan_hash: None,
                    outcome: match force {
                        true => "canceling (force)".into(),
                        false => "canceling".into(),
                    },
                    count: 1,
                })
                .await?;
            Ok((
                StatusCode::ACCEPTED,
                Json(json!({"command_id": id, "status": "canceling", "force": force})),
            )
                .into_response())
        }
        Err(NotRunning::NotRunning) => {
            let store = state.store.clone();
            let lookup = id.clone();
            let record = blocking(move || Ok(store.command(Some(&lookup))?)).await?;
            match record {
                None => Err(ApiError::not_found(format!("no command `{id}`"))),
                Some(r) if r.status == CommandStatus::Running => Err(ApiError::conflict(format!(
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
    principal: Principal,
    QueryParams(q): QueryParams<pages::ResourcesQuery>,
) -> ApiResult<Json<Value>> {
    match &q.stack {
        Some(stack) => principal.require(Role::Viewer, stack)?,
        None => principal.require_some(Role::Viewer)?,
    }
    let span = pages::span(q.limit.as_deref(), q.all.as_deref())?;
    let cap = state.config.max_list_items;
    let mut after = q
        .cursor
        .as_deref()
        .map(pages::parse_pair_cursor)
        .transpose()?;
    let store = state.store.clone();
    let (rows, next) = blocking(move || {
        let read = match span {
            pages::Span::Page(l) => l,
            // Everything, read in the largest pages: what is kept (after
            // the filters) is refused once past the cap, so that one
            // request never holds more.
            pages::Span::All => pages::MAX_LIMIT,
        };
        let mut rows: Vec<Value> = Vec::new();
        loop {
            let resources = store.resource_page(&crate::state::ResourcePage {
                stack: q.stack.clone(),
                resource_type: q.resource_type.clone(),
                target: q.target.clone(),
                after: after.take(),
                limit: Some(read),
            })?;
            // A full page may have more after it; the cursor is the last
            // one read, whatever the filters below kept.
            let more = resources.len() == read as usize;
            after = resources
                .last()
                .filter(|_| more)
                .map(|last| (last.stack.clone(), last.label.clone()));
            rows.extend(
                resources
                    .iter()
                    .filter(|r| principal.may(Role::Viewer, &r.stack))
                    .filter(|r| {
                        q.drift
                            .is_none_or(|d| crate::discovery::Drift::of(r).is_some() == d)
                    })
                    .map(views::resource),
            );
            match span {
                pages::Span::Page(_) => break,
                pages::Span::All if rows.len() > cap => return Err(pages::too_many(cap)),
                pages::Span::All if after.is_none() => break,
                pages::Span::All => {}
            }
        }
        let next = after.map(|(stack, label)| pages::pair_cursor(&stack, &label));
        Ok((rows, next))
    })
    .await?;
    let mut out = json!({ "resources": rows });
    if let Some(next) = next {
        out["next_cursor"] = json!(next);
    }
    Ok(Json(out))
}

/// `GET /v1/targets`.
pub async fn targets_handler(
    State(state): AppState,
    principal: Principal,
    QueryParams(q): QueryParams<StackQuery>,
) -> ApiResult<Json<Value>> {
    // Targets carry their configuration: admins only.
    match &q.stack {
        Some(stack) => principal.require(Role::Admin, stack)?,
        None => principal.require_some(Role::Admin)?,
    }
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
        for name in stacks.into_iter().filter(|s| principal.may(Role::Admin, s)) {
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
pub async fn plugins_handler(
    State(state): AppState,
    principal: Principal,
) -> ApiResult<Json<Value>> {
    principal.require_some(Role::Viewer)?;
    let rows: Vec<Value> = state
        .service
        .plugins()
        .hosts()
        .iter()
        .map(views::plugin)
        .collect();
    Ok(Json(json!({ "plugins": rows })))
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
