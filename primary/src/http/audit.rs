//! The audit log in the state store (`orrery_state::audit`), beside the
//! log target [`super::AUDIT`].
//!
//! - Command starts and cancels are written where they happen, before the
//!   answer (`Audit::record`): a command that ran has its record.
//! - Refusals (401, 403) must never make a refusal slow or let a flood
//!   grow the store: [`refusals`] hands each to a bounded channel
//!   ([`QUEUE`]) without waiting; when it is full the refusal is dropped
//!   and counted (`orrery.audit.dropped`, and a warning at most every
//!   10 s). One writer task drains it in batches of up to [`BATCH`],
//!   coalescing identical refusals of a batch into one record with a
//!   `count`, and each write prunes the store to the newest
//!   `--audit-retention` records.
//!
//! A record holds names and reasons, never a credential: the reason of a
//! 401 or 403 is the message the client gets, which names no token.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::mpsc;

use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::{Principal, Role};
use super::commands::Outcome;
use super::error::{ApiError, ApiResult};
use super::extract::QueryParams;
use super::{blocking, pages, Shared};
use crate::state::{AuditEntry, AuditFilter, OperationPage, Store};

/// How many refusals may wait for the writer; more are dropped, counted.
pub const QUEUE: usize = 4096;
/// The most refusals written in one transaction.
pub const BATCH: usize = 512;

/// Who was refused, carried from where a 401 or 403 is made to
/// [`refusals`] in the response's extensions.
#[derive(Clone, Debug, Default)]
pub struct Refused {
    /// The principal refused (none for a 401).
    pub principal: Option<String>,
    /// The stack it asked for, when there is one.
    pub stack: Option<String>,
    /// Why (the message the client gets).
    pub reason: String,
}

/// The primary's writer of audit records. Cheap to clone.
#[derive(Clone)]
pub struct Audit {
    store: Store,
    keep: u64,
    queue: mpsc::Sender<AuditEntry>,
    dropped: Arc<AtomicU64>,
}

impl Audit {
    /// Starts the writer of refusals (on the current tokio runtime); the
    /// store keeps the newest `keep` records.
    pub fn start(store: Store, keep: u64) -> Audit {
        let (audit, rx) = Audit::unstarted(store.clone(), keep, QUEUE);
        tokio::spawn(write_refusals(store, keep, rx));
        audit
    }

    /// The writer's handle and the queue's other end, `capacity` long.
    fn unstarted(store: Store, keep: u64, capacity: usize) -> (Audit, mpsc::Receiver<AuditEntry>) {
        let (queue, rx) = mpsc::channel(capacity);
        let audit = Audit {
            store,
            keep,
            queue,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        (audit, rx)
    }

    /// Writes `entry` now (a command's start or cancel), on a blocking thread.
    pub async fn record(&self, entry: AuditEntry) -> Result<(), crate::state::StoreError> {
        let (store, keep) = (self.store.clone(), self.keep);
        tokio::task::spawn_blocking(move || store.append_audit(&[entry], keep))
            .await
            .unwrap_or_else(|e| {
                Err(crate::state::StoreError::Unavailable {
                    target: "the audit log".into(),
                    reason: e.to_string(),
                })
            })
    }

    /// Records how command `id` ended, on the record of its start. A store
    /// that fails is logged: the command's own record says how it ended.
    pub async fn outcome(&self, id: &str, outcome: &str) {
        let (store, id, outcome) = (self.store.clone(), id.to_owned(), outcome.to_owned());
        let done =
            tokio::task::spawn_blocking(move || store.set_audit_outcome(&id, &outcome)).await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "cannot record a command's outcome in the audit log");
        }
    }

    /// Records on the start of command `id` how it ended: its recorded
    /// status with the count of operations that succeeded and failed, or
    /// the error that stopped it.
    pub async fn finished(&self, id: &str, outcome: &Outcome) {
        let text = match outcome {
            Outcome::Report(report) => {
                let (store, lookup) = (self.store.clone(), id.to_owned());
                let status = tokio::task::spawn_blocking(move || {
                    let head = OperationPage {
                        limit: Some(0),
                        ..Default::default()
                    };
                    store.command_page(Some(&lookup), &head)
                })
                .await;
                let status = match status {
                    Ok(Ok(Some(record))) => record.status.as_str().to_owned(),
                    _ => "ended".to_owned(),
                };
                format!(
                    "{status}: {} succeeded, {} failed",
                    report.succeeded,
                    report.failed.len() + report.dependency_failed.len()
                )
            }
            Outcome::Error(message) => format!("error: {}", clip(message)),
        };
        self.outcome(id, &text).await;
    }

    /// Queues a refusal without waiting; drops it (counted) when the queue
    /// is full.
    pub fn refusal(&self, entry: AuditEntry) {
        if self.queue.try_send(entry).is_err() {
            let before = self.dropped.fetch_add(1, Ordering::Relaxed);
            crate::metrics::metrics().audit_dropped();
            if before.is_multiple_of(1000) {
                tracing::warn!(target: super::AUDIT, dropped = before + 1,
                    "refusals come faster than the audit log is written; the excess is dropped (counted in orrery.audit.dropped)");
            }
        }
    }
}

/// Drains the queue: whatever is waiting (at most [`BATCH`]), identical
/// entries coalesced, in one write.
async fn write_refusals(store: Store, keep: u64, mut rx: mpsc::Receiver<AuditEntry>) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let entries = coalesce(std::mem::take(&mut batch));
        let store = store.clone();
        let written = tokio::task::spawn_blocking(move || store.append_audit(&entries, keep)).await;
        if let Ok(Err(e)) = written {
            tracing::warn!(target: super::AUDIT, error = %e, "cannot write refusals to the audit log");
        }
    }
}

/// `entries` with each run of identical ones (but for the count) as one.
fn coalesce(entries: Vec<AuditEntry>) -> Vec<AuditEntry> {
    type Key = (
        Option<String>,
        String,
        Option<String>,
        Option<String>,
        String,
    );
    let mut out: Vec<AuditEntry> = Vec::with_capacity(entries.len());
    let mut seen: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    for e in entries {
        let key = (
            e.principal.clone(),
            e.action.clone(),
            e.stack.clone(),
            e.command_id.clone(),
            e.outcome.clone(),
        );
        match seen.get(&key) {
            Some(&i) => out[i].count = out[i].count.saturating_add(e.count),
            None => {
                seen.insert(key, out.len());
                out.push(e);
            }
        }
    }
    out
}

/// The layer that sends every 401 and 403 to the audit log, with what
/// [`Refused`] says of it, or the path when nothing does.
pub async fn refusals(State(audit): State<Audit>, req: Request, next: Next) -> Response {
    let asked = format!("{} {}", req.method(), clip(req.uri().path()));
    let response = next.run(req).await;
    let action = match response.status() {
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        _ => return response,
    };
    let refused = response
        .extensions()
        .get::<Refused>()
        .cloned()
        .unwrap_or_default();
    let reason = match refused.reason.is_empty() {
        true => asked,
        false => format!("{} ({asked})", clip(&refused.reason)),
    };
    audit.refusal(AuditEntry {
        principal: refused.principal,
        action: action.to_owned(),
        stack: refused.stack,
        command_id: None,
        plan_hash: None,
        outcome: reason,
        count: 1,
    });
    response
}

/// Default and largest `limit` of `GET /v1/audit`.
const AUDIT_DEFAULT_LIMIT: u32 = 100;
const AUDIT_MAX_LIMIT: u32 = 1000;

/// `GET /v1/audit` query.
#[derive(Deserialize, Default)]
pub struct AuditQuery {
    /// Only records of this stack.
    #[serde(default)]
    stack: Option<String>,
    /// Only records of this principal.
    #[serde(default)]
    principal: Option<String>,
    /// Only records at or after this time (Unix milliseconds).
    #[serde(default)]
    since: Option<String>,
    /// Page size.
    #[serde(default)]
    limit: Option<String>,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    cursor: Option<String>,
}

/// `GET /v1/audit`: the audit log, newest first, for admins of every
/// stack (`admin:*`); a refusal here is audited like any other.
pub async fn audit_handler(
    State(state): State<Arc<Shared>>,
    principal: Principal,
    QueryParams(q): QueryParams<AuditQuery>,
) -> ApiResult<Json<Value>> {
    if !principal.may(Role::Admin, "*") {
        let message = format!(
            "`{}` is not an admin of every stack, whose log this is",
            principal.name
        );
        tracing::info!(target: super::AUDIT, refused = %message, "403");
        return Err(ApiError::new(StatusCode::FORBIDDEN, message).refusing(&principal.name, None));
    }
    let limit = match pages::span_within(
        q.limit.as_deref(),
        None,
        AUDIT_DEFAULT_LIMIT,
        AUDIT_MAX_LIMIT,
    )? {
        pages::Span::Page(n) => n,
        pages::Span::All => AUDIT_MAX_LIMIT,
    };
    let since_ms = match q.since.as_deref() {
        None => None,
        Some(text) => Some(text.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!(
                "`since` must be Unix milliseconds, not `{}`",
                clip(text)
            ))
            .with("code", json!("bad_since"))
        })?),
    };
    let before = q
        .cursor
        .as_deref()
        .map(pages::parse_number_cursor)
        .transpose()?;
    let filter = AuditFilter {
        stack: q.stack,
        principal: q.principal,
        since_ms,
        before,
        limit: limit + 1,
    };
    let store = state.store.clone();
    let mut records = blocking(move || Ok(store.audit(&filter)?)).await?;
    let next = (records.len() > limit as usize).then(|| {
        records.truncate(limit as usize);
        records.last().map(|r| pages::id_cursor(&r.id.to_string()))
    });
    let mut out = json!({ "records": records });
    if let Some(Some(next)) = next {
        out["next_cursor"] = json!(next);
    }
    Ok(Json(out))
}

/// At most 256 characters of `text` (a path or reason from a client).
fn clip(text: &str) -> String {
    text.chars().take(256).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that cannot keep up: refusals past the queue are dropped
    /// and counted, never waited for.
    #[tokio::test]
    async fn refusals_past_a_full_queue_are_dropped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::state::open_dir(dir.path()).unwrap();
        let (audit, mut rx) = Audit::unstarted(store, 10, 4);
        let started = std::time::Instant::now();
        for _ in 0..10 {
            audit.refusal(AuditEntry {
                action: "unauthorized".into(),
                outcome: "no".into(),
                count: 1,
                ..Default::default()
            });
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(audit.dropped.load(Ordering::Relaxed), 6);
        let mut queued = Vec::new();
        assert_eq!(rx.recv_many(&mut queued, 100).await, 4);
    }

    #[test]
    fn identical_refusals_are_coalesced_and_others_kept_in_order() {
        let e = |p: &str| AuditEntry {
            principal: Some(p.into()),
            action: "forbidden".into(),
            outcome: "no".into(),
            count: 1,
            ..Default::default()
        };
        let out = coalesce(vec![e("a"), e("b"), e("a"), e("a")]);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].principal.as_deref(), out[0].count), (Some("a"), 3));
        assert_eq!((out[1].principal.as_deref(), out[1].count), (Some("b"), 1));
    }
}
