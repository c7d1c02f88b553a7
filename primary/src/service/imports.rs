//! `import:` while planning: the declared resources the stack has no
//! record of and adopts (`plan::import::wanted`, the core's decision) are
//! read through their plugins — the read `orrery import` makes, within
//! the same rate limits — into records the plan is made against, so the
//! plan shows the usual diff of the document against what exists. Nothing
//! is written here; the command writes them before its operations.

use std::sync::Mutex;

use futures::StreamExt;
use orrery_schema::ErrorCode;

use super::{moved_records, on_store, Plugins, ServiceError};
use crate::apply::{Options, Pacer};
use crate::discovery::{self, DiscoveryError, ImportSpec};
use crate::plan::import;
use crate::scheduler::Jitter;
use crate::stack::{Graph, Problem, Stack, StackError};
use crate::state::{StateStore, Store, StoredResource};

/// Reads the resources `stack` adopts (none when no resource declares
/// `import:`, without touching the store). Each one that cannot be read,
/// or that a stack declaring the same target manages already, is an
/// error naming the resource; every such error is reported.
pub(super) async fn read(
    store: &Store,
    plugins: &Plugins,
    stack: &Stack,
    graph: &Graph,
    options: &Options,
) -> Result<Vec<StoredResource>, ServiceError> {
    if stack.resources.iter().all(|r| r.import.is_none()) {
        return Ok(Vec::new());
    }
    let owned = stack.clone();
    let checked = on_store(store, move |store| {
        let (stored, _) = moved_records(&owned, store.resources(Some(&owned.name))?)?;
        let wanted = import::wanted(&owned, &stored);
        let all = if wanted.is_empty() {
            Vec::new()
        } else {
            store.resources(None)?
        };
        let mut checked = Vec::with_capacity(wanted.len());
        for w in wanted {
            let spec = spec(&owned, &w);
            let result = match &spec {
                Some(spec) => discovery::check_importable(store, &all, spec),
                None => Ok(()),
            };
            checked.push((w, spec, result));
        }
        Ok(checked)
    })
    .await?;
    let options = discovery::Options {
        timeout: options.request_timeout,
        retry: options.retry.clone(),
        rate_overrides: options.rate_overrides.clone(),
        seed: options.seed,
        ..discovery::Options::default()
    };
    let catalog = &plugins.catalog;
    let pacer = Pacer::new(catalog, &options.rate_overrides, &plugins.rates);
    let jitter = Mutex::new(Jitter::new(options.seed));
    let (pacer, jitter, options) = (&pacer, &jitter, &options);
    let results: Vec<_> = futures::stream::iter(checked)
        .map(|(wanted, spec, checked)| async move {
            // Validation made sure the target exists.
            let Some(spec) = spec else {
                return (
                    wanted,
                    Err(DiscoveryError::Invalid("no such target".into())),
                );
            };
            if let Err(e) = checked {
                return (wanted, Err(e));
            }
            let read = discovery::read_existing(
                plugins.transport.as_ref(),
                catalog,
                pacer,
                jitter,
                &spec,
                options,
            )
            .await
            .map_err(|e| match e {
                DiscoveryError::Plugin {
                    code: ErrorCode::NotFound,
                    ..
                } => DiscoveryError::Invalid(format!(
                    "{} `{}` does not exist on target `{}`",
                    spec.resource_type, spec.native_id, spec.target.name
                )),
                other => other,
            });
            (wanted, read)
        })
        .buffered(options.max_in_flight.max(1))
        .collect()
        .await;
    let mut records = Vec::with_capacity(results.len());
    let mut errors = Vec::new();
    for (wanted, read) in results {
        match read {
            Ok((native_id, properties)) => records.push(import::record(
                stack, graph, catalog, &wanted, native_id, properties,
            )),
            Err(e) => errors.push(StackError::of_resource(
                stack,
                Some(&stack.resources[wanted.index]),
                Problem::Import {
                    native_id: wanted.native_id.clone(),
                    message: e.to_string(),
                },
            )),
        }
    }
    if errors.is_empty() {
        Ok(records)
    } else {
        Err(ServiceError::InvalidStack(errors))
    }
}

/// What `orrery import` would be asked to adopt `wanted` (`None` when its
/// target is not declared, which validation refuses first).
fn spec(stack: &Stack, wanted: &import::Wanted) -> Option<ImportSpec> {
    let decl = &stack.resources[wanted.index];
    Some(ImportSpec {
        stack: stack.name.clone(),
        label: decl.label.clone(),
        resource_type: decl.resource_type.clone(),
        target: stack.target(&decl.target)?.clone(),
        native_id: wanted.native_id.clone(),
    })
}

/// Writes the records `imported` adopted into `stack`, and forgets their
/// unmanaged (discovered) records, under the identifier the document
/// named and the one the plugin answered.
pub(super) fn write(
    store: &dyn StateStore,
    stack: &Stack,
    imported: &[StoredResource],
) -> Result<(), ServiceError> {
    for record in imported {
        store.put_resource(record)?;
        let named = stack
            .resource(&record.label)
            .and_then(|r| r.import.as_deref());
        for id in named.into_iter().chain([record.native_id.as_str()]) {
            discovery::forget_unmanaged(store, &record.target, &record.resource_type, id)?;
        }
    }
    Ok(())
}
