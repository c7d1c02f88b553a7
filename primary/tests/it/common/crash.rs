//! Killing a primary at a chosen point: watch its embedded store
//! (read-only) while it writes, and SIGKILL it when the store shows the
//! point was reached.

use std::collections::HashMap;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use orrery_testing::Wait;

/// A child process killed (SIGKILL) and reaped on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The latest command and its operations' statuses, read from the state
/// store (read-only) while the primary writes it.
#[derive(Debug, Default)]
pub struct Seen {
    /// (id, status) of the latest command.
    pub command: Option<(String, String)>,
    /// (operation, status) → count.
    pub ops: HashMap<(String, String), usize>,
}

impl Seen {
    pub fn count(&self, operation: &str, status: &str) -> usize {
        self.ops
            .get(&(operation.to_owned(), status.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.ops.values().sum()
    }
}

/// What the store in data directory `state` shows now.
pub fn look(state: &Path) -> Seen {
    let db = state.join("state.db");
    if !db.exists() {
        return Seen::default();
    }
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return Seen::default();
    };
    let _ = conn.busy_timeout(Duration::from_secs(2));
    let command: Option<(String, String)> = conn
        .query_row(
            "SELECT id, status FROM commands ORDER BY started_ms DESC, rowid DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok();
    let mut seen = Seen {
        command: command.clone(),
        ops: HashMap::new(),
    };
    if let Some((id, _)) = command {
        if let Ok(mut stmt) = conn.prepare(
            "SELECT operation, status, count(*) FROM operations WHERE command_id = ?1 GROUP BY operation, status",
        ) {
            if let Ok(rows) = stmt.query_map([id], |r| {
                Ok(((r.get(0)?, r.get(1)?), r.get::<_, i64>(2)? as usize))
            }) {
                seen.ops = rows.filter_map(Result::ok).collect();
            }
        }
    }
    seen
}

/// Waits (bounded) until the store in `state` shows a running command for
/// which `ready` holds, then kills `child` with SIGKILL; returns what the
/// store showed at the kill.
pub fn kill_when(
    state: &Path,
    child: &mut Child,
    what: &str,
    ready: impl Fn(&Seen) -> bool,
) -> Seen {
    // Looked at every millisecond: some points are brief.
    let point = format!("{what}: the kill point");
    let wait = Wait::new(&point, Duration::from_secs(20)).every(Duration::from_millis(1));
    wait.poll(|| {
        let seen = look(state);
        if seen.command.as_ref().is_some_and(|(_, s)| s == "running") && ready(&seen) {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what}: the primary ended ({status}) before the kill point: {seen:?}");
        }
        Err(seen)
    })
    .unwrap_or_else(|seen| wait.fail(format_args!("last seen: {seen:?}")));
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "{what}: killed, not finished");
    let after = look(state);
    assert_eq!(
        after.command.as_ref().map(|(_, s)| s.as_str()),
        Some("running"),
        "{what}: the kill left the command running: {after:?}"
    );
    eprintln!("{what}: killed at {:?}", after.ops);
    after
}
