//! Resuming interrupted commands, as `orrery apply` does: at start, and
//! then every lease time to live (to take over from a primary that stopped
//! answering), each stack whose latest command is still `running` and
//! whose lease is free (or expired, or held by a process known dead) gets
//! that command settled and finished under its own id, in the background.
//!
//! An apply is resumed from the document recorded when it started (with
//! its mode and `${stack_dir}`); a destroy from the recorded targets. A
//! command that cannot be resumed here (no recorded document: one that
//! gives write-only or opaque values is never recorded; started through
//! satellites; its plugins missing) is left `running` and named in the log
//! once; applying the document again (HTTP or `orrery apply`) resumes it.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{blocking, commands, Shared};
use crate::service::ServiceError;
use crate::state::{CommandFilter, CommandHead, CommandStatus};

/// Most running commands looked at in one scan.
const SCAN_LIMIT: usize = 1000;

/// One scan: resumes every interrupted command this primary may take.
/// False when the state store failed on the way (the scan is worth
/// another try soon).
pub(super) async fn resume_interrupted(state: &Arc<Shared>) -> bool {
    let store = state.store.clone();
    let running = blocking(move || {
        Ok(store.commands(&CommandFilter {
            before: None,
            stack: None,
            status: Some(CommandStatus::Running),
            limit: SCAN_LIMIT,
        })?)
    })
    .await;
    let running = match running {
        Ok(heads) => heads,
        Err(e) => {
            tracing::warn!(error = %e.message, "cannot list the interrupted commands");
            return false;
        }
    };
    let mut answered = true;
    // Newest first: a stack's first one is the only one that may go on.
    let mut stacks = BTreeSet::new();
    for head in running {
        if !stacks.insert(head.stack.clone()) || state.commands.running_for(&head.stack).is_some() {
            continue;
        }
        let id = head.id.clone();
        match resume_one(state, head).await {
            Ok(true) => tracing::info!(command = %id, "resuming an interrupted command"),
            Ok(false) => {}
            Err(ServiceError::Store(e)) => {
                tracing::debug!(command = %id, error = %e, "the state store failed while resuming");
                answered = false;
            }
            Err(e) => warn_once(state, &id, &e.to_string()),
        }
    }
    answered
}

/// Resumes `head` if this primary can; `false` when it is not for this
/// primary to resume.
async fn resume_one(state: &Arc<Shared>, head: CommandHead) -> Result<bool, ServiceError> {
    let Ok(mut reservation) = state.commands.reserve(&head.stack) else {
        return Ok(false);
    };
    let Some(command) = state.service.begin_resume(&head, &reservation.id).await? else {
        return Ok(false);
    };
    reservation.rename(command.id());
    // The primary resumes it, for whoever started it (their record says so).
    state
        .audit
        .record(crate::state::AuditEntry {
            principal: None,
            action: "resume".into(),
            stack: Some(head.stack.clone()),
            command_id: Some(command.id().to_owned()),
            plan_hash: None,
            outcome: "running".into(),
            count: 1,
        })
        .await?;
    commands::launch(
        reservation,
        command,
        None,
        head.principal.as_deref(),
        Some(state.audit.clone()),
    );
    Ok(true)
}

/// Logs why `command_id` cannot be resumed, once per command.
fn warn_once(state: &Shared, command_id: &str, why: &str) {
    let mut warned = state.warned.lock().unwrap_or_else(|p| p.into_inner());
    if warned.insert(command_id.to_owned()) {
        tracing::warn!(command = %command_id, reason = %why,
            "cannot resume this interrupted command here; it stays `running`");
    }
}
