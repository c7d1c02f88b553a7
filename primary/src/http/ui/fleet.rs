//! The fleet: in distributed mode the satellites as their NATS service
//! answers (`$SRV.INFO`, `$SRV.STATS`) describe them — plugins, versions,
//! targets served, in-flight load, restarts, health; the plugins this
//! process runs itself (embedded mode); rate-limit waits per bucket from
//! this process's metrics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use futures::StreamExt;
use maud::{html, Markup};
use serde_json::Value;

use super::layout::{self, Nav};
use super::session::Session;
use super::UiResult;
use crate::http::auth::{Principal, Role};
use crate::http::{handlers, Shared};

/// How long satellites have to answer.
const ANSWER_WITHIN: Duration = Duration::from_millis(500);
/// Most satellite answers read (a bound, whatever answers).
const MAX_ANSWERS: usize = 1000;

/// One satellite, from its service info and stats.
#[derive(Default)]
struct Satellite {
    version: String,
    satellite_id: String,
    /// Plugin → (version, targets).
    plugins: BTreeMap<String, (String, Vec<String>)>,
    /// Plugin → (state, restarts, in flight).
    health: BTreeMap<String, (String, u64, u64)>,
    requests: u64,
    errors: u64,
}

async fn gather(client: &async_nats::Client, verb: &str) -> Vec<Value> {
    let inbox = client.new_inbox();
    let Ok(mut sub) = client.subscribe(inbox.clone()).await else {
        return Vec::new();
    };
    let subject = format!("$SRV.{verb}.{}", orrery_bus::subjects::SERVICE_NAME);
    if client
        .publish_with_reply(subject, inbox, "".into())
        .await
        .is_err()
        || client.flush().await.is_err()
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    while out.len() < MAX_ANSWERS {
        match tokio::time::timeout(ANSWER_WITHIN, sub.next()).await {
            Ok(Some(msg)) => {
                if let Ok(v) = serde_json::from_slice(&msg.payload) {
                    out.push(v);
                }
            }
            _ => break,
        }
    }
    out
}

async fn satellites(client: &async_nats::Client) -> BTreeMap<String, Satellite> {
    let (infos, stats) = futures::join!(gather(client, "INFO"), gather(client, "STATS"));
    let mut by_id: BTreeMap<String, Satellite> = BTreeMap::new();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    for info in infos {
        let s = by_id.entry(text(&info["id"])).or_default();
        s.version = text(&info["version"]);
        s.satellite_id = text(&info["metadata"]["satellite_id"]);
        for e in info["endpoints"].as_array().into_iter().flatten() {
            let m = &e["metadata"];
            let entry = s.plugins.entry(text(&m["plugin"])).or_default();
            entry.0 = text(&m["version"]);
            entry.1.push(text(&m["target"]));
        }
    }
    for st in stats {
        let s = by_id.entry(text(&st["id"])).or_default();
        for e in st["endpoints"].as_array().into_iter().flatten() {
            s.requests += e["num_requests"].as_u64().unwrap_or(0);
            s.errors += e["num_errors"].as_u64().unwrap_or(0);
            let d = &e["data"];
            if let Some(plugin) = d["plugin"].as_str() {
                // The endpoints of one plugin (one per target) share a host.
                s.health.insert(
                    plugin.to_owned(),
                    (
                        text(&d["state"]),
                        d["restarts"].as_u64().unwrap_or(0),
                        d["in_flight"].as_u64().unwrap_or(0),
                    ),
                );
            }
        }
    }
    by_id
}

/// `orrery_ratelimit_wait…{bucket="…"} SECONDS` lines of the metrics text.
fn rate_limit_waits(metrics: &str) -> Vec<(String, String)> {
    metrics
        .lines()
        .filter(|l| l.starts_with("orrery_ratelimit_wait"))
        .filter_map(|l| {
            let bucket = l.split("bucket=\"").nth(1)?.split('"').next()?;
            let value = l.rsplit(' ').next()?;
            Some((bucket.to_owned(), value.to_owned()))
        })
        .collect()
}

/// `GET /ui/fleet`.
pub async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(session): Extension<Session>,
    principal: Principal,
) -> UiResult {
    principal.require_some(Role::Viewer)?;
    let satellites = match &shared.config.nats {
        Some(client) => Some(satellites(client).await),
        None => None,
    };
    let plugins = handlers::plugins_handler(State(shared.clone()), principal)
        .await?
        .0;
    let waits = shared
        .config
        .metrics
        .as_ref()
        .map(|m| rate_limit_waits(&m.prometheus_text()))
        .unwrap_or_default();
    let body = html! {
        h1 { "Fleet" }
        @match &satellites {
            Some(sats) => (satellite_table(sats)),
            None => p { "Embedded mode: this primary runs the plugins itself (no satellites)." },
        }
        h2 { "Plugins of this process" }
        (plugin_table(&plugins["plugins"]))
        h2 { "Rate-limit waits" }
        @if waits.is_empty() {
            p { "No request has waited for a rate-limit token (or metrics are off)." }
        } @else {
            table.list {
                thead { tr { th scope="col" { "Bucket" } th scope="col" { "Seconds waited" } } }
                tbody { @for (b, v) in &waits { tr { td { code { (b) } } td { (v) } } } }
            }
        }
    };
    Ok(layout::page("Fleet", Nav::Fleet, &session, body).into_response())
}

fn satellite_table(sats: &BTreeMap<String, Satellite>) -> Markup {
    html! {
        h2 { "Satellites (" (sats.len()) ")" }
        @if sats.is_empty() {
            p role="status" { "No satellite answered within " (ANSWER_WITHIN.as_millis()) " ms." }
        } @else {
            div.scroll {
                table.list #satellites {
                    thead { tr {
                        th scope="col" { "Satellite" } th scope="col" { "Version" }
                        th scope="col" { "Plugins (targets served)" } th scope="col" { "Health" }
                        th scope="col" { "In flight" } th scope="col" { "Restarts" }
                        th scope="col" { "Requests" } th scope="col" { "Errors" }
                    } }
                    tbody {
                        @for (id, s) in sats {
                            @let healthy = s.health.values().all(|(state, _, _)| state == "running");
                            tr {
                                td { (s.satellite_id) br; small { code { (id) } } }
                                td { (s.version) }
                                td { ul.plain { @for (p, (v, targets)) in &s.plugins {
                                    li { (p) " " (v) ": " (targets.join(", ")) }
                                } } }
                                td {
                                    @if healthy { span.badge.st-ok { "healthy" } }
                                    @for (p, (state, _, _)) in &s.health {
                                        @if state != "running" { span.badge.st-failed { (p) ": " (state) } " " }
                                    }
                                }
                                td { (s.health.values().map(|h| h.2).sum::<u64>()) }
                                td { (s.health.values().map(|h| h.1).sum::<u64>()) }
                                td { (s.requests) }
                                td { (s.errors) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn plugin_table(plugins: &Value) -> Markup {
    let rows = plugins.as_array().cloned().unwrap_or_default();
    html! {
        @if rows.is_empty() {
            p { "None running." }
        } @else {
            table.list {
                thead { tr {
                    th scope="col" { "Plugin" } th scope="col" { "Version" } th scope="col" { "State" }
                    th scope="col" { "Resource types" }
                } }
                tbody {
                    @for p in &rows {
                        tr {
                            td { (layout::value_text(&p["name"])) }
                            td { (layout::value_text(&p["version"])) }
                            td { (layout::value_text(&p["status"]["state"])) }
                            td { (p["resource_types"].as_array().map(|a| a.len()).unwrap_or(0)) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_waits_by_bucket() {
        let text = "# HELP x\norrery_ratelimit_wait_seconds_total{bucket=\"aws/prod\",otel_scope_name=\"o\"} 1.5\nother 2\n";
        assert_eq!(
            rate_limit_waits(text),
            vec![("aws/prod".to_owned(), "1.5".to_owned())]
        );
    }
}
