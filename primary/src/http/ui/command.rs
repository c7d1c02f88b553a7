//! The live command page: progress with counts, every operation (state,
//! attempts, duration, error), a filter, the plan's values diff (secrets
//! masked), and the cancel button. `app.js` keeps it current from the
//! command's event stream (`/ui/commands/{id}/events`, the API's SSE
//! stream behind the session cookie).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::Form;
use maud::{html, Markup};
use serde_json::Value;

use super::layout::{self, Nav};
use super::login::CsrfForm;
use super::session::Session;
use super::{check_csrf, see_other, UiResult};
use crate::http::auth::{Principal, Role};
use crate::http::extract::{OptionalJsonBody, PathParam, QueryParams};
use crate::http::pages::OperationsQuery;
use crate::http::{events as sse, handlers, Shared};
use crate::service::view::{ChangeView, FieldDiffView, PlanView};

/// Planned changes shown with their values; beyond, a count.
const SHOWN_CHANGES: usize = 2000;

/// Operation counts by status, every known status present.
fn counts(ops: &[Value]) -> BTreeMap<&'static str, usize> {
    let mut n: BTreeMap<&'static str, usize> = [
        "succeeded",
        "failed",
        "dependency_failed",
        "canceled",
        "running",
    ]
    .into_iter()
    .map(|s| (s, 0))
    .collect();
    for o in ops {
        let key = match o["status"].as_str().unwrap_or_default() {
            "succeeded" => "succeeded",
            "failed" => "failed",
            "dependency_failed" => "dependency_failed",
            "canceled" => "canceled",
            _ => "running",
        };
        *n.entry(key).or_default() += 1;
    }
    n
}

/// The command's record with every operation, read page after page
/// (`GET /v1/commands/{id}` pages them), as the page and the graph show it.
pub(super) async fn whole(
    shared: &Arc<Shared>,
    principal: &Principal,
    id: &str,
) -> UiResult<Value> {
    let mut record: Option<Value> = None;
    let mut cursor: Option<String> = None;
    loop {
        let mut page = handlers::command_handler(
            State(shared.clone()),
            principal.clone(),
            PathParam(id.to_owned()),
            QueryParams(OperationsQuery::largest_after(cursor.clone())),
        )
        .await?
        .0;
        let next = page
            .as_object_mut()
            .and_then(|p| p.remove("next_cursor"))
            .and_then(|c| c.as_str().map(str::to_owned));
        match (&mut record, page["operations"].as_array_mut()) {
            (Some(whole), Some(more)) => {
                if let Some(ops) = whole["operations"].as_array_mut() {
                    ops.append(more);
                }
            }
            (Some(_), None) => {}
            (None, _) => record = Some(page),
        }
        match next {
            // A cursor that does not move would loop for ever.
            Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
            _ => return Ok(record.unwrap_or_default()),
        }
    }
}

/// `GET /ui/commands/{id}`.
pub async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(session): Extension<Session>,
    principal: Principal,
    PathParam(id): PathParam,
) -> UiResult {
    let plan = shared.ui_plans.get(&id);
    let record = whole(&shared, &principal, &id).await?;
    let stack = record["stack"].as_str().unwrap_or_default().to_owned();
    let ops = record["operations"].as_array().cloned().unwrap_or_default();
    let active = record["active"] == true;
    let status = if active {
        "running"
    } else {
        record["status"].as_str().unwrap_or("running")
    };
    let n = counts(&ops);
    let done = ops.len() - n["running"];
    let may_cancel = active && principal.may(Role::Operator, &stack);
    let title = format!("{} {}", layout::value_text(&record["kind"]), stack);
    let body = html! {
        section #command data-events={ "/ui/commands/" (id) "/events" } {
            h1 { (title) }
            p.meta {
                "Command " code { (id) }
                @if let Some(p) = record["principal"].as_str() { " by " (p) }
                @if let Some(s) = record["started_ms"].as_i64() { ", started " (layout::utc(s)) " UTC" }
            }
            p { "Outcome: " span #outcome class={ "badge " (layout::status_class(status)) } aria-live="polite" { (status) } }
            label for="progress" { "Progress" }
            progress #progress max=(ops.len().max(1)) value=(done) { (done) " of " (ops.len()) }
            p.counts #counts aria-live="polite" {
                "Done " span #done { (done) } " of " span #total { (ops.len()) } ": "
                @for (name, count) in &n {
                    span class={ "count " (layout::status_class(name)) } {
                        (name.replace('_', " ")) " " span data-count=(name) { (count) }
                    }
                    " "
                }
            }
            @if may_cancel {
                form #cancel method="post" action={ "/ui/commands/" (id) "/cancel" } {
                    input type="hidden" name="csrf" value=(session.csrf);
                    button.danger type="submit" { "Cancel this command" }
                }
            }
            p { a href={ "/ui/commands/" (id) "/graph" } { "Dependency graph" } }
            h2 { "Operations" }
            label for="filter" { "Filter operations" }
            input #filter type="search" placeholder="label, state or error";
            div.scroll {
                table.list #ops {
                    thead { tr {
                        th scope="col" { "Resource" } th scope="col" { "Operation" }
                        th scope="col" { "State" } th scope="col" { "Attempts" }
                        th scope="col" { "Duration" } th scope="col" { "Error" }
                    } }
                    tbody {
                        @for o in &ops { (operation_row(o)) }
                    }
                }
            }
            h2 { "Plan" }
            @match &plan {
                Some(plan) => (plan_view(plan)),
                None => p { "The plan of this command is no longer kept (this server keeps the latest commands' plans it started)." },
            }
        }
    };
    Ok(layout::page(&title, Nav::Commands, &session, body).into_response())
}

fn operation_row(o: &Value) -> Markup {
    let label = o["label"].as_str().unwrap_or_default();
    let status = o["status"].as_str().unwrap_or_default();
    let code = o["error_code"].as_str();
    let message = o["message"].as_str();
    html! {
        tr id={ "op-" (label) } data-label=(label) data-status=(status) {
            td { code { (label) } }
            td { (layout::value_text(&o["operation"])) }
            td.state { span class={ "badge " (layout::status_class(status)) } { (status) } }
            td.attempts { (layout::value_text(&o["attempts"])) }
            td.duration {}
            td.error {
                @if code.is_some() || message.is_some() {
                    details {
                        summary { (code.unwrap_or("error")) }
                        pre { (message.unwrap_or_default()) }
                    }
                }
            }
        }
    }
}

fn plan_view(plan: &PlanView) -> Markup {
    let s = &plan.summary;
    let changes: Vec<&ChangeView> = plan
        .changes
        .iter()
        .filter(|c| c.action != "no_op")
        .collect();
    html! {
        p {
            (s.create) " to create, " (s.update) " to update, " (s.replace) " to replace, "
            (s.delete) " to delete, " (s.no_op) " unchanged."
        }
        @for c in changes.iter().take(SHOWN_CHANGES) {
            details.change {
                summary {
                    span class={ "action act-" (c.action) } { (c.action) } " "
                    code { (c.label) } " " span.type { (c.resource_type) }
                }
                table.diff {
                    thead { tr { th scope="col" { "Field" } th scope="col" { "Before" } th scope="col" { "After" } } }
                    tbody { @for d in &c.diffs { (diff_row(d)) } }
                }
            }
        }
        @if changes.len() > SHOWN_CHANGES {
            p { (changes.len() - SHOWN_CHANGES) " more changes are not shown." }
        }
    }
}

fn diff_row(d: &FieldDiffView) -> Markup {
    let side = |v: &Option<Value>, after: bool| -> Markup {
        if d.sensitive {
            html! { span.masked { "(sensitive)" } }
        } else if after && d.known_after_apply {
            html! { span.masked { "(known after apply)" } }
        } else {
            match v {
                Some(v) => html! { code { (layout::value_text(v)) } },
                None => html! { span.absent { "—" } },
            }
        }
    };
    html! {
        tr {
            th scope="row" {
                (d.field)
                @if d.forces_replacement { " " span.forces { "(forces replacement)" } }
            }
            td { (side(&d.before, false)) }
            td { (side(&d.after, true)) }
        }
    }
}

/// `GET /ui/commands/{id}/events`: the API's event stream.
pub async fn events(
    State(shared): State<Arc<Shared>>,
    principal: Principal,
    PathParam(id): PathParam,
    headers: HeaderMap,
) -> UiResult {
    Ok(sse::events_handler(State(shared), principal, PathParam(id), headers).await?)
}

/// `POST /ui/commands/{id}/cancel`: operators only, with the CSRF token.
pub async fn cancel(
    State(shared): State<Arc<Shared>>,
    Extension(session): Extension<Session>,
    principal: Principal,
    PathParam(id): PathParam,
    Form(form): Form<CsrfForm>,
) -> UiResult {
    check_csrf(&session, form.csrf.as_deref())?;
    principal.require_some(Role::Operator)?;
    handlers::cancel_handler(
        State(shared),
        principal,
        PathParam(id.clone()),
        OptionalJsonBody(Default::default()),
    )
    .await?;
    Ok(see_other(&format!("/ui/commands/{id}")))
}
