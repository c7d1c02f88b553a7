//! `GET /v1/stacks`: every stack with its resource count, targets and
//! latest command.
//!
//! Dashboards and scripts poll it, and counting the resources reads every
//! resource row, so the answer is kept briefly ([`StacksCache`]) instead of
//! being computed for each request.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use axum::Json;
use serde_json::{json, Value};

use super::auth::{Principal, Role};
use super::error::ApiResult;
use super::{blocking, Shared};
use crate::discovery::UNMANAGED_STACK;
use crate::state::CommandFilter;

/// How old a kept answer may be. Requests to this process that may write
/// (anything but `GET`/`HEAD`) and the start or end of its commands make
/// it stale at once; this bounds how late the answer sees writes made
/// elsewhere (another primary on the same PostgreSQL, a local CLI on the
/// same SQLite file, a running command's progress, background drift sync).
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// One stack as the store last said, without what this process knows
/// better (its running command).
struct Row {
    name: String,
    resources: u64,
    targets: Vec<String>,
    last_command: Value,
}

struct Kept {
    at: Instant,
    generation: u64,
    /// Each stack's running command when the rows were read: when a
    /// command starts or ends, its stack's row (its latest command) changes.
    running: Vec<Option<String>>,
    rows: Arc<Vec<Row>>,
}

/// The kept answer of `GET /v1/stacks`.
#[derive(Default)]
pub struct StacksCache {
    /// Bumped by every request that may write.
    generation: AtomicU64,
    kept: Mutex<Option<Kept>>,
    /// Held while the rows are read: when the kept answer goes stale under
    /// many clients, one reads the store and the others wait for its rows.
    reading: tokio::sync::Mutex<()>,
}

impl StacksCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the kept answer stale.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The kept rows, if still fresh at `now` with `running_for` telling
    /// each stack's running command.
    fn fresh(
        &self,
        now: Instant,
        running_for: impl Fn(&str) -> Option<String>,
    ) -> Option<Arc<Vec<Row>>> {
        let kept = self.lock();
        let kept = kept.as_ref()?;
        let fresh = kept.generation == self.generation.load(Ordering::SeqCst)
            && now.saturating_duration_since(kept.at) < MAX_AGE
            && kept
                .rows
                .iter()
                .zip(&kept.running)
                .all(|(row, running)| running_for(&row.name) == *running);
        fresh.then(|| kept.rows.clone())
    }

    fn keep(&self, kept: Kept) {
        *self.lock() = Some(kept);
    }
}

/// Invalidates the kept answer after every request that may write.
pub async fn invalidate_on_writes(
    State(state): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let writes = !matches!(*request.method(), Method::GET | Method::HEAD);
    let response = next.run(request).await;
    if writes {
        state.stacks.invalidate();
    }
    response
}

/// Reads every stack's row from the store, with each stack's running
/// command as it was before its latest command was read (so that a command
/// ending during the read makes the rows stale instead of wrong).
fn read_rows(shared: &Shared) -> ApiResult<(Vec<Row>, Vec<Option<String>>)> {
    let mut counts: BTreeMap<String, u64> = shared.store.resource_counts()?;
    counts.remove(UNMANAGED_STACK);
    for name in shared.store.command_stacks()? {
        counts.entry(name).or_default();
    }
    let mut rows = Vec::with_capacity(counts.len());
    let mut running = Vec::with_capacity(counts.len());
    for (name, resources) in counts {
        running.push(shared.commands.running_for(&name));
        let targets = shared
            .store
            .targets(&name)?
            .into_iter()
            .map(|t| t.name)
            .collect();
        let last_command = shared
            .store
            .commands(&CommandFilter {
                before: None,
                stack: Some(name.clone()),
                status: None,
                limit: 1,
            })?
            .into_iter()
            .next();
        rows.push(Row {
            name,
            resources,
            targets,
            last_command: json!(last_command),
        });
    }
    Ok((rows, running))
}

/// Reads the rows and keeps them.
async fn read_and_keep(state: &Arc<Shared>) -> ApiResult<Arc<Vec<Row>>> {
    // Read before the store so that a write racing the read makes what is
    // kept stale rather than lost.
    let generation = state.stacks.generation.load(Ordering::SeqCst);
    let at = Instant::now();
    let shared = state.clone();
    let (rows, running) = blocking(move || read_rows(&shared)).await?;
    let rows = Arc::new(rows);
    state.stacks.keep(Kept {
        at,
        generation,
        running,
        rows: rows.clone(),
    });
    Ok(rows)
}

/// `GET /v1/stacks`.
pub async fn stacks_handler(
    State(state): State<Arc<Shared>>,
    principal: Principal,
) -> ApiResult<Json<Value>> {
    principal.require_some(Role::Viewer)?;
    let running_for = |name: &str| state.commands.running_for(name);
    let rows = match state.stacks.fresh(Instant::now(), running_for) {
        Some(rows) => rows,
        None => {
            let _reading = state.stacks.reading.lock().await;
            match state.stacks.fresh(Instant::now(), running_for) {
                // Read by whoever held the lock before.
                Some(rows) => rows,
                None => read_and_keep(&state).await?,
            }
        }
    };
    let stacks: Vec<Value> = rows
        .iter()
        // Only the stacks this principal may view.
        .filter(|row| principal.may(Role::Viewer, &row.name))
        .map(|row| {
            json!({
                "name": row.name,
                "resources": row.resources,
                "targets": row.targets,
                "last_command": row.last_command,
                "running_command": running_for(&row.name),
            })
        })
        .collect();
    Ok(Json(json!({ "stacks": stacks })))
}
