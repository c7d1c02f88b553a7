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

use super::commands::Reservation;
use super::error::{ApiError, ApiResult};
use super::handlers::{blocking, launch, prepare, recorded_stack, Prepared, StackRequest, Work};
use super::plugins::Plugins;
use super::Shared;
use crate::lease::{self, Claim, Keeper};
use crate::plan::SecretHasher;
use crate::stack::Graph;
use crate::state::{CommandFilter, CommandHead, CommandStatus};

/// Most running commands looked at in one scan.
const SCAN_LIMIT: usize = 1000;

/// Takes the lease of the command a request on `stack` goes on with: the
/// stack's interrupted command (the reservation takes its id), or a new one
/// under the reservation's id. 409 when another primary holds it.
pub(super) async fn claim(
    state: &Shared,
    reservation: &mut Reservation,
    stack: &str,
) -> ApiResult<(Claim, Keeper)> {
    let store = state.store.clone();
    let config = state.config.lease.clone();
    let (stack, new_id) = (stack.to_owned(), reservation.id.clone());
    let claim =
        blocking(move || Ok(lease::claim(store.as_ref(), &stack, &new_id, &config)?)).await?;
    if let Claim::Interrupted(id) = &claim {
        reservation.rename(id);
    }
    let keeper = Keeper::start(state.store.clone(), claim.command_id(), &state.config.lease);
    Ok((claim, keeper))
}

/// One scan: resumes every interrupted command this primary may take.
pub(super) async fn resume_interrupted(state: &Arc<Shared>) {
    let store = state.store.clone();
    let running = blocking(move || {
        Ok(store.commands(&CommandFilter {
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
            return;
        }
    };
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
            Err(e) => warn_once(state, &id, &e.message),
        }
    }
}

/// Resumes `head` if this primary can; `false` when it is not for this
/// primary to resume (another holds it, or it is no longer the latest).
async fn resume_one(state: &Arc<Shared>, head: CommandHead) -> ApiResult<bool> {
    let Ok(mut reservation) = state.commands.reserve(&head.stack) else {
        return Ok(false);
    };
    let (claim, keeper) = match claim(state, &mut reservation, &head.stack).await {
        Ok(claimed) => claimed,
        // Run (or being resumed) by another primary: its business.
        Err(e) if e.status == axum::http::StatusCode::CONFLICT => return Ok(false),
        Err(e) => return Err(e),
    };
    if claim != Claim::Interrupted(head.id.clone()) {
        // A newer command of the stack began since the listing.
        return Ok(false);
    }
    let (kind, work, plugins) = match head.kind.as_str() {
        "apply" => {
            let (work, plugins) = apply_work(state, &head).await?;
            ("apply", work, plugins)
        }
        "destroy" => {
            let (stack, stored, hasher) = recorded_stack(&state.store, &head.stack).await?;
            let names: BTreeSet<String> = stored.iter().map(|s| s.plugin.clone()).collect();
            let plugins = state.plugins.ensure(&names).await?;
            let work = Work::Resume {
                stack,
                graph: Graph::default(),
                mode: None,
                hasher,
            };
            ("destroy", work, plugins)
        }
        other => {
            return Err(ApiError::internal(format!(
                "command {} is of an unknown kind `{other}`",
                head.id
            )))
        }
    };
    launch(state, reservation, kind, work, plugins, keeper);
    Ok(true)
}

/// An interrupted apply, from the document it was started with.
async fn apply_work(state: &Arc<Shared>, head: &CommandHead) -> ApiResult<(Work, Plugins)> {
    let store = state.store.clone();
    let id = head.id.clone();
    let document = blocking(move || Ok(store.command_document(&id)?)).await?;
    let Some(document) = document else {
        return Err(ApiError::internal(format!(
            "command {} of stack `{}` was interrupted, but its document was not recorded (it gives write-only or opaque values, which are never stored, or an older release ran it); applying the document again resumes it",
            head.id, head.stack
        )));
    };
    if document.engine != state.config.engine() {
        return Err(ApiError::internal(format!(
            "command {} of stack `{}` reached its plugins through `{}`, not as this primary does; a primary that reaches them so resumes it",
            head.id, head.stack, document.engine
        )));
    }
    let Prepared {
        stack,
        graph,
        plugins,
        mode,
        ..
    } = prepare(state, StackRequest::recorded(&document)).await?;
    if stack.name != head.stack {
        return Err(ApiError::internal(format!(
            "the document recorded for command {} is of stack `{}`, not `{}`",
            head.id, stack.name, head.stack
        )));
    }
    let store = state.store.clone();
    let hasher = blocking(move || Ok(SecretHasher::new(store.secret_key()?))).await?;
    Ok((
        Work::Resume {
            stack,
            graph,
            mode: Some(mode),
            hasher,
        },
        plugins,
    ))
}

/// Logs why `command_id` cannot be resumed, once per command.
fn warn_once(state: &Shared, command_id: &str, why: &str) {
    let mut warned = state.warned.lock().unwrap_or_else(|p| p.into_inner());
    if warned.insert(command_id.to_owned()) {
        tracing::warn!(command = %command_id, reason = %why,
            "cannot resume this interrupted command here; it stays `running`");
    }
}
