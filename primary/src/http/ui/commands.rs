//! The commands list: kind, stack, principal, start, duration, counts,
//! outcome — `GET /v1/commands` as a table.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use maud::html;
use serde_json::{json, Value};

use super::layout::{self, Nav};
use super::session::Session;
use super::{UiError, UiResult};
use crate::http::auth::Principal;
use crate::http::error::ApiError;
use crate::http::extract::QueryParams;
use crate::http::{handlers, Shared};

/// Commands listed (the API's largest page).
const LISTED: usize = 200;

/// `GET /ui/commands`.
pub async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(session): Extension<Session>,
    principal: Principal,
) -> UiResult {
    let query = serde_json::from_value(json!({ "limit": LISTED.to_string() }))
        .map_err(|e| UiError(ApiError::internal(e.to_string())))?;
    let list = handlers::commands_handler(State(shared), principal, QueryParams(query))
        .await?
        .0;
    let rows = list["commands"].as_array().cloned().unwrap_or_default();
    let body = html! {
        h1 { "Commands" }
        @if rows.is_empty() {
            p { "No command has run yet." }
        } @else {
            div.scroll {
                table.list {
                    caption.visually-hidden { "The latest commands, newest first" }
                    thead { tr {
                        th scope="col" { "Command" } th scope="col" { "Kind" }
                        th scope="col" { "Stack" } th scope="col" { "Principal" }
                        th scope="col" { "Started (UTC)" } th scope="col" { "Duration" }
                        th scope="col" { "Operations" } th scope="col" { "Outcome" }
                    } }
                    tbody {
                        @for c in &rows { (row(c)) }
                    }
                }
            }
        }
    };
    Ok(layout::page("Commands", Nav::Commands, &session, body).into_response())
}

fn row(c: &Value) -> maud::Markup {
    let id = c["id"].as_str().unwrap_or_default();
    let status = c["status"].as_str().unwrap_or_default();
    let started = c["started_ms"].as_i64();
    let duration = match (started, c["finished_ms"].as_i64()) {
        (Some(s), Some(f)) => layout::duration(f - s),
        _ => String::new(),
    };
    let counts = c["operations"].as_object().cloned().unwrap_or_default();
    let outcome = if c["active"] == true {
        "running"
    } else {
        status
    };
    html! {
        tr {
            td { a href={ "/ui/commands/" (id) } { code { (id.get(..8).unwrap_or(id)) } } }
            td { (layout::value_text(&c["kind"])) }
            td { (layout::value_text(&c["stack"])) }
            td { (layout::value_text(&c["principal"])) }
            td { @if let Some(s) = started { (layout::utc(s)) } }
            td { (duration) }
            td.counts {
                @for (name, n) in &counts {
                    span class={ "count " (layout::status_class(name)) } { (name) " " (layout::value_text(n)) }
                    " "
                }
            }
            td { span class={ "badge " (layout::status_class(outcome)) } { (outcome) } }
        }
    }
}
