//! Stacks and their resources: drift markers, last change, outputs; the
//! unmanaged (discovered) resources with how to import them.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use maud::{html, Markup};
use serde_json::Value;

use super::layout::{self, Nav};
use super::session::Session;
use super::UiResult;
use crate::discovery::UNMANAGED_STACK;
use crate::http::auth::{Principal, Role};
use crate::http::extract::{PathParam, QueryParams};
use crate::http::pages::ResourcesQuery;
use crate::http::{handlers, stacks, Shared};

/// Resources shown per stack; beyond, a count.
const SHOWN: u32 = 1000;

async fn resources(shared: &Arc<Shared>, principal: &Principal, stack: &str) -> UiResult<Value> {
    let query = ResourcesQuery {
        stack: Some(stack.to_owned()),
        limit: Some((SHOWN + 1).to_string()),
        ..Default::default()
    };
    Ok(
        handlers::resources_handler(State(shared.clone()), principal.clone(), QueryParams(query))
            .await?
            .0,
    )
}

/// `GET /ui/stacks`.
pub async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(session): Extension<Session>,
    principal: Principal,
) -> UiResult {
    let stacks = stacks::stacks_handler(State(shared.clone()), principal.clone())
        .await?
        .0;
    let mut sections = Vec::new();
    for s in stacks["stacks"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or_default().to_owned();
        let list = resources(&shared, &principal, &name).await?;
        let outputs = handlers::outputs_handler(
            State(shared.clone()),
            principal.clone(),
            PathParam(name.clone()),
        )
        .await
        .map(|j| j.0["outputs"].clone())
        .ok();
        sections.push(stack_section(s, &list, outputs.as_ref()));
    }
    let unmanaged = if principal.may(Role::Viewer, UNMANAGED_STACK) {
        Some(resources(&shared, &principal, UNMANAGED_STACK).await?)
    } else {
        None
    };
    let body = html! {
        h1 { "Stacks" }
        @if sections.is_empty() { p { "No stack has been applied yet." } }
        @for s in &sections { (s) }
        @if let Some(u) = &unmanaged { (unmanaged_section(u)) }
    };
    Ok(layout::page("Stacks", Nav::Stacks, &session, body).into_response())
}

fn properties(p: &Value) -> Markup {
    html! {
        details {
            summary { "properties" }
            dl.props {
                @for (k, v) in p.as_object().into_iter().flatten() {
                    dt { (k) } dd { code { (layout::value_text(v)) } }
                }
            }
        }
    }
}

fn stack_section(s: &Value, list: &Value, outputs: Option<&Value>) -> Markup {
    let name = s["name"].as_str().unwrap_or_default();
    let rows = list["resources"].as_array().cloned().unwrap_or_default();
    let drifted = rows.iter().filter(|r| !r["drift"].is_null()).count();
    let last = &s["last_command"];
    html! {
        section.stack aria-labelledby={ "stack-" (name) } {
            h2 id={ "stack-" (name) } { (name) }
            p.meta {
                (layout::value_text(&s["resources"])) " resources"
                @if drifted > 0 { ", " span.badge.st-failed { (drifted) " drifted" } }
                @if let Some(id) = last["id"].as_str() {
                    " · last change: " a href={ "/ui/commands/" (id) } {
                        (layout::value_text(&last["kind"])) " " (layout::value_text(&last["status"]))
                    }
                    @if let Some(ms) = last["finished_ms"].as_i64().or(last["started_ms"].as_i64()) {
                        " at " (layout::utc(ms)) " UTC"
                    }
                }
                @if let Some(id) = s["running_command"].as_str() {
                    " · " a.badge.st-running href={ "/ui/commands/" (id) } { "running now" }
                }
            }
            @if let Some(Value::Object(o)) = outputs {
                @if !o.is_empty() {
                    h3 { "Outputs" }
                    dl.props {
                        @for (k, v) in o {
                            dt { (k) }
                            dd { @if v["secret"] == true && v.as_object().is_some_and(|m| m.len() == 1) {
                                span.masked { "(secret)" }
                            } @else { code { (layout::value_text(v)) } } }
                        }
                    }
                }
            }
            div.scroll {
                table.list {
                    thead { tr {
                        th scope="col" { "Resource" } th scope="col" { "Type" } th scope="col" { "Target" }
                        th scope="col" { "Version" } th scope="col" { "Drift" } th scope="col" { "Properties" }
                    } }
                    tbody {
                        @for r in rows.iter().take(SHOWN as usize) {
                            tr {
                                td { code { (layout::value_text(&r["label"])) } }
                                td { (layout::value_text(&r["type"])) }
                                td { (layout::value_text(&r["target"])) }
                                td { (layout::value_text(&r["version"])) }
                                td { @if let Some(d) = r["drift"].as_str() {
                                    span.badge.st-failed title="changed out of band" { "drift: " (d) }
                                } }
                                td { (properties(&r["properties"])) }
                            }
                        }
                    }
                }
            }
            @if rows.len() > SHOWN as usize {
                p { "More resources than the " (SHOWN) " shown: " code { "GET /v1/resources?stack=" (name) } " pages through them." }
            }
        }
    }
}

fn unmanaged_section(list: &Value) -> Markup {
    let rows = list["resources"].as_array().cloned().unwrap_or_default();
    html! {
        section.stack aria-labelledby="unmanaged" {
            h2 #unmanaged { "Unmanaged resources" }
            @if rows.is_empty() {
                p { "Discovery has recorded no resource outside the stacks." }
            } @else {
                p { "Found by discovery on the targets, managed by no stack. Adopt one with "
                    code { "orrery import --stack STACK --label LABEL --type TYPE --target TARGET --native-id ID" } "." }
                div.scroll {
                    table.list {
                        thead { tr {
                            th scope="col" { "Native id" } th scope="col" { "Type" } th scope="col" { "Target" }
                            th scope="col" { "Import" }
                        } }
                        tbody {
                            @for r in rows.iter().take(SHOWN as usize) {
                                tr {
                                    td { code { (layout::value_text(&r["native_id"])) } }
                                    td { (layout::value_text(&r["type"])) }
                                    td { (layout::value_text(&r["target"])) }
                                    td { code.hint {
                                        "orrery import --type " (layout::value_text(&r["type"]))
                                        " --target " (layout::value_text(&r["target"]))
                                        " --native-id " (layout::value_text(&r["native_id"]))
                                        " --stack … --label …"
                                    } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
