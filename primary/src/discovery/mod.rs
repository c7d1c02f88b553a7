//! Discovery, import and drift sync: the I/O edge around [`core`].
//!
//! - **Discovery** ([`discover`]) pages through `list` for every
//!   discoverable type of every target, within the plugin's rate limit (one
//!   token of the `namespace/target` bucket per page, from the process's
//!   [`RateRegistry`] the executor's runs use too), one page at a
//!   time: a page is filtered and recorded, then dropped, so memory does not
//!   grow with the number of pages. Resources no stack declaring that target
//!   manages are recorded unmanaged: `stack` empty, `label`
//!   `<target>/<type>/<native id>`, `managed: false`. Unmanaged records the
//!   listing no longer returns (deleted, or imported) are forgotten.
//! - **Import** ([`import`]) reads one resource through its plugin and
//!   records it managed under a stack's label; nothing is created.
//! - **Drift sync** ([`sync_drift`]) reads every managed resource and
//!   compares it with its record (write-only, opaque and read-only fields
//!   ignored). Drift is recorded on the resource record itself, only if
//!   the record is still the one read (compare-and-set on its version: a
//!   command writing it meanwhile wins, and the next sync looks again):
//!   - changed out of band: the record takes the properties read (so the
//!     planner sees the difference from the document and the next apply
//!     corrects it) and a marker `changed:<fields>` under the reserved key
//!     [`core::DRIFT_KEY`] of `secret_hashes` (never a field name, never sent
//!     to a plugin); the executor rewrites `secret_hashes` on every create
//!     and update, so the marker disappears when apply corrects the resource;
//!   - deleted out of band: the record becomes a tombstone, `managed: false`
//!     in its stack with the marker `deleted`. The planner only considers
//!     managed records, so nothing happens until the user applies again,
//!     which plans a create (and the create's record replaces the tombstone).
//!
//! `orrery primary` runs both on intervals (`--discover-every`,
//! `--drift-every`; see `http/background.rs`).

pub use orrery_core::discovery as core;

use crate::metrics::metrics;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use orrery_bus::transport::Transport;
use orrery_plugin_sdk::Answer;
use orrery_schema::{
    Announcement, ErrorCode, ListRequest, ListedResource, ParentScope, PropertyMap, ReadRequest,
    Request, ResourceSchema, Target,
};
use serde::Serialize;

use crate::apply::Pacer;
use crate::plan::SecretHasher;
use crate::scheduler::{BucketLimit, Jitter, RateRegistry, RetryPolicy};
use crate::stack::{Catalog, TargetDecl};
use crate::state::{StateStore, StoreError, StoredResource};

use self::core::{
    changed_fields, excluded, inherit_from_parent, is_discovered, listing_order, merge_targets,
    secret_derived_changes, strip_secrets, unmanaged_label, with_drift, ManagedIds, MOVED_SECRET,
};
pub use self::core::{Drift, TargetRef, DRIFT_KEY, UNMANAGED_STACK};
use crate::state::fingerprint;

/// How discovery and drift sync call plugins.
#[derive(Clone, Debug)]
pub struct Options {
    /// Page size asked of `list`; 0 lets the plugin choose.
    pub page_size: u32,
    /// Rate limits by bucket (`namespace/target`) overriding the announced ones.
    pub rate_overrides: HashMap<String, BucketLimit>,
    /// How long one request may take.
    pub timeout: Duration,
    /// Most reads in flight at once during drift sync (the plugin's
    /// `max_in_flight` caps it further).
    pub max_in_flight: usize,
    /// How requests failing with a retryable error are retried (the
    /// scheduler's policy).
    pub retry: RetryPolicy,
    /// Seed of the retries' jitter.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 0,
            rate_overrides: HashMap::new(),
            timeout: Duration::from_secs(60),
            max_in_flight: 16,
            retry: RetryPolicy::default(),
            seed: 0x5eed,
        }
    }
}

/// Why discovery, import or drift sync stopped.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The plugin could not read the resource.
    #[error("{code}: {message}")]
    Plugin {
        /// Its error code.
        code: ErrorCode,
        /// Its message.
        message: String,
    },
    /// The request makes no sense in the current state.
    #[error("{0}")]
    Invalid(String),
}

/// A listing or read that failed (after retries).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Failure {
    /// The stack (drift) or empty (discovery).
    pub stack: String,
    /// The target.
    pub target: String,
    /// The resource type.
    pub resource_type: String,
    /// The label (drift) or empty (discovery).
    pub label: String,
    /// The plugin asked.
    pub plugin: String,
    /// The page of the listing that failed, from 1 (discovery); 0 for a read.
    pub page: usize,
    /// The error code.
    pub code: String,
    /// Why.
    pub message: String,
}

/// What a discovery run did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiscoverReport {
    /// Targets listed.
    pub targets: usize,
    /// (target, type) listings.
    pub listings: usize,
    /// `list` pages received.
    pub pages: u64,
    /// Resources listed.
    pub listed: u64,
    /// Left out by the plugin's discovery filters.
    pub excluded: u64,
    /// Managed by a stack.
    pub managed: u64,
    /// Unmanaged (recorded).
    pub unmanaged: u64,
    /// Unmanaged records written (new or changed).
    pub written: u64,
    /// Unmanaged records forgotten (no longer listed, or now managed).
    pub forgotten: u64,
    /// Time spent waiting for the rate limit, in milliseconds.
    pub rate_limited_ms: u64,
    /// Largest page received.
    pub largest_page: usize,
    /// Listings that failed.
    pub failures: Vec<Failure>,
    /// Wall time in milliseconds.
    pub elapsed_ms: u64,
}

/// One drifted resource.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Drifted {
    /// Its stack.
    pub stack: String,
    /// Its label.
    pub label: String,
    /// Its type.
    pub resource_type: String,
    /// Its target.
    pub target: String,
    /// Its native id.
    pub native_id: String,
    /// `changed` or `deleted`.
    pub drift: String,
    /// The fields that changed.
    pub fields: Vec<String>,
    /// Found by this run (`false`: found earlier, not yet corrected by apply).
    pub new: bool,
}

/// What a drift sync found.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct DriftReport {
    /// Managed resources read.
    pub checked: usize,
    /// Drifted resources (new and still uncorrected).
    pub drifted: Vec<Drifted>,
    /// Reads that failed.
    pub failures: Vec<Failure>,
    /// Records written by someone else (an apply) while they were being
    /// read: not judged, nothing written; the next sync looks again.
    pub changed_meanwhile: usize,
    /// Wall time in milliseconds.
    pub elapsed_ms: u64,
}

impl DriftReport {
    /// Whether anything drifted.
    pub fn has_drift(&self) -> bool {
        !self.drifted.is_empty()
    }
}

/// The targets of `stack` (every stack with records when `None`), merged
/// with identical declarations of other stacks. `document` supplies a
/// stack's targets in place of the recorded ones.
pub fn targets_to_discover(
    store: &dyn StateStore,
    stack: Option<&str>,
    document: Option<(&str, &[TargetDecl])>,
) -> Result<Vec<TargetRef>, StoreError> {
    let mut stacks: BTreeSet<String> = store
        .resource_counts()?
        .into_keys()
        .filter(|s| !s.is_empty())
        .collect();
    stacks.extend(stack.map(str::to_owned));
    let mut per_stack = Vec::new();
    for name in &stacks {
        match document {
            Some((doc, targets)) if doc == name => per_stack.push((name.clone(), targets.to_vec())),
            _ => per_stack.push((name.clone(), store.targets(name)?)),
        }
    }
    if let Some((doc, targets)) = document {
        if !stacks.contains(doc) {
            per_stack.push((doc.to_owned(), targets.to_vec()));
        }
    }
    let wanted = stack.or(document.map(|(d, _)| d));
    Ok(merge_targets(per_stack)
        .into_iter()
        .filter(|t| wanted.is_none_or(|w| t.stacks.iter().any(|s| s == w)))
        .collect())
}

/// Lists every discoverable type on `targets` and records what no stack
/// manages as unmanaged, taking rate-limit tokens from `rates`, the
/// process's registry.
pub async fn discover(
    transport: &dyn Transport,
    catalog: &Catalog,
    rates: &RateRegistry,
    store: &dyn StateStore,
    targets: &[TargetRef],
    options: &Options,
) -> Result<DiscoverReport, StoreError> {
    let started = Instant::now();
    let pacer = Pacer::new(catalog, &options.rate_overrides, rates);
    let jitter = Mutex::new(Jitter::new(options.seed));
    let mut report = DiscoverReport {
        targets: targets.len(),
        ..Default::default()
    };
    for target in targets {
        let Some(announcement) = catalog.plugin(&target.decl.plugin) else {
            report.failures.push(Failure {
                stack: String::new(),
                target: target.decl.name.clone(),
                resource_type: String::new(),
                label: String::new(),
                plugin: target.decl.plugin.clone(),
                page: 0,
                code: ErrorCode::PluginUnavailable.to_string(),
                message: format!("plugin `{}` is not running", target.decl.plugin),
            });
            continue;
        };
        let listing = Listing {
            transport,
            store,
            options,
            pacer: &pacer,
            jitter: &jitter,
            target,
            announcement,
            wire_target: Target {
                name: target.decl.name.clone(),
                config: target.decl.config.clone(),
                // Every stack here declares the target alike; a satellite
                // holding it checks that one of them may use it.
                stack: target.stacks.first().cloned(),
            },
        };
        // Types some other type is listed under: their listed resources
        // are kept (for this target only) to list the children of each.
        let parent_types: BTreeSet<&str> = announcement
            .resources
            .iter()
            .filter_map(|r| r.parent.as_ref().map(|p| p.resource_type.as_str()))
            .collect();
        let mut parents: HashMap<&str, Vec<ListedResource>> = HashMap::new();
        for schema in listing_order(&announcement.resources) {
            report.listings += 1;
            // What the store knows of this type on this target, by key
            // only: memory grows with one type's keys, never with records.
            let managed = ManagedIds::new(
                store.managed_keys(&target.decl.name, &schema.type_name)?,
                &target.stacks,
            );
            let mut recorded: HashMap<String, u128> = store
                .discovered_keys(&target.decl.name, &schema.type_name)?
                .into_iter()
                .map(|k| (k.label, k.fingerprint))
                .collect();
            let mut kept = parent_types
                .contains(schema.type_name.as_str())
                .then(Vec::new);
            let mut pass = Pass {
                schema,
                managed: &managed,
                recorded: &mut recorded,
                report: &mut report,
                kept: kept.as_mut(),
            };
            let scoped = schema.parent.as_ref().and_then(|scope| {
                parents
                    .get(scope.resource_type.as_str())
                    .map(|list| (scope, list))
            });
            let complete = match scoped {
                None => listing.pages(&mut pass, None).await?,
                Some((scope, list)) => {
                    let mut complete = true;
                    for parent in list {
                        complete &= listing.pages(&mut pass, Some((scope, parent))).await?;
                    }
                    complete
                }
            };
            // Recorded, not listed again: gone, or managed now. (After an
            // incomplete listing nothing is known of the rest.)
            if complete {
                for label in recorded.keys() {
                    store.remove_resource(UNMANAGED_STACK, label)?;
                    report.forgotten += 1;
                }
            }
            if let Some(kept) = kept {
                parents.insert(&schema.type_name, kept);
            }
        }
    }
    report.rate_limited_ms = pacer.waited().as_millis() as u64;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// What one discovery run lists on one target with.
struct Listing<'a> {
    transport: &'a dyn Transport,
    store: &'a dyn StateStore,
    options: &'a Options,
    pacer: &'a Pacer,
    jitter: &'a Mutex<Jitter>,
    target: &'a TargetRef,
    announcement: &'a Announcement,
    wire_target: Target,
}

/// The listing of one type on one target, over one or more parents.
struct Pass<'p> {
    schema: &'p ResourceSchema,
    managed: &'p ManagedIds,
    /// Unmanaged records not listed yet.
    recorded: &'p mut HashMap<String, u128>,
    report: &'p mut DiscoverReport,
    /// Every listed resource, when other types are listed under this one.
    kept: Option<&'p mut Vec<ListedResource>>,
}

impl Listing<'_> {
    /// Pages through `list` of the pass's type (under `parent`, for a
    /// parent-scoped type), recording what no stack manages. Whether every
    /// page arrived.
    async fn pages(
        &self,
        pass: &mut Pass<'_>,
        parent: Option<(&ParentScope, &ListedResource)>,
    ) -> Result<bool, StoreError> {
        let (target, announcement, schema) = (self.target, self.announcement, pass.schema);
        let mut token: Option<String> = None;
        let mut page_number = 0;
        loop {
            page_number += 1;
            let request = Request::List(ListRequest {
                request_id: uuid::Uuid::now_v7().to_string(),
                resource_type: schema.type_name.clone(),
                target: self.wire_target.clone(),
                page_size: self.options.page_size,
                page_token: token.take(),
                parent: parent.map(|(_, p)| p.clone()),
            });
            let page = match self
                .pacer
                .call(
                    self.transport,
                    &announcement.name,
                    &request,
                    self.options.timeout,
                    &self.options.retry,
                    self.jitter,
                )
                .await
            {
                Ok(Answer::List(page)) => page,
                Ok(_) => {
                    pass.report.failures.push(failure(
                        target,
                        &schema.type_name,
                        page_number,
                        ErrorCode::InternalFailure,
                        "the plugin did not answer `list` with a list page".into(),
                    ));
                    return Ok(false);
                }
                Err((code, message)) => {
                    pass.report.failures.push(failure(
                        target,
                        &schema.type_name,
                        page_number,
                        code,
                        message,
                    ));
                    return Ok(false);
                }
            };
            let report = &mut *pass.report;
            report.pages += 1;
            report.largest_page = report.largest_page.max(page.resources.len());
            for listed in page.resources {
                report.listed += 1;
                let mut properties = listed.properties;
                if let Some((scope, parent)) = parent {
                    inherit_from_parent(scope, parent, &mut properties);
                }
                strip_secrets(Some(schema), &mut properties);
                if let Some(kept) = pass.kept.as_deref_mut() {
                    kept.push(ListedResource {
                        native_id: listed.native_id.clone(),
                        properties: properties.clone(),
                    });
                }
                if excluded(
                    &announcement.discovery_filters,
                    &schema.type_name,
                    &properties,
                ) {
                    report.excluded += 1;
                    continue;
                }
                let is_managed = pass.managed.contains(&listed.native_id);
                metrics().discovered(&target.decl.plugin, is_managed, 1);
                if is_managed {
                    report.managed += 1;
                    continue;
                }
                report.unmanaged += 1;
                let label =
                    unmanaged_label(&target.decl.name, &schema.type_name, &listed.native_id);
                if pass.recorded.remove(&label) == Some(fingerprint(&properties)) {
                    continue;
                }
                self.store.put_resource(&StoredResource {
                    stack: UNMANAGED_STACK.to_owned(),
                    label,
                    resource_type: schema.type_name.clone(),
                    target: target.decl.name.clone(),
                    plugin: announcement.name.clone(),
                    native_id: listed.native_id,
                    properties,
                    managed: false,
                    ..Default::default()
                })?;
                report.written += 1;
            }
            match page.next_page_token {
                Some(next) if !next.is_empty() => token = Some(next),
                _ => return Ok(true),
            }
        }
    }
}

/// A listing that stopped at `page`; the message names the plugin, target
/// and page, so a line of output says which listing could not complete.
fn failure(
    target: &TargetRef,
    resource_type: &str,
    page: usize,
    code: ErrorCode,
    message: String,
) -> Failure {
    let plugin = &target.decl.plugin;
    Failure {
        stack: String::new(),
        target: target.decl.name.clone(),
        resource_type: resource_type.to_owned(),
        label: String::new(),
        plugin: plugin.clone(),
        page,
        code: code.to_string(),
        message: format!(
            "plugin `{plugin}`, target `{}`, {resource_type} page {page}: {message}",
            target.decl.name
        ),
    }
}

/// Reads every managed resource of `stack` (all stacks when `None`) and
/// records what changed or disappeared out of band (see the module docs),
/// taking rate-limit tokens from `rates`, the process's registry.
pub async fn sync_drift(
    transport: &dyn Transport,
    catalog: &Catalog,
    rates: &RateRegistry,
    store: &dyn StateStore,
    stack: Option<&str>,
    options: &Options,
) -> Result<DriftReport, StoreError> {
    let started = Instant::now();
    let pacer = Pacer::new(catalog, &options.rate_overrides, rates);
    let jitter = Mutex::new(Jitter::new(options.seed));
    let hasher = SecretHasher::new(store.secret_key()?);
    let mut report = DriftReport::default();
    let resources: Vec<StoredResource> = store
        .resources(stack)?
        .into_iter()
        .filter(|r| !is_discovered(r))
        .collect();
    let mut targets: HashMap<String, Vec<TargetDecl>> = HashMap::new();
    for r in &resources {
        if !targets.contains_key(&r.stack) {
            targets.insert(r.stack.clone(), store.targets(&r.stack)?);
        }
    }
    let mut to_read = Vec::new();
    for r in resources {
        if r.managed {
            to_read.push(r);
        } else if let Some(d @ Drift::Deleted) = Drift::of(&r) {
            // A tombstone: reported until the user applies again.
            report.drifted.push(drifted(&r, &d, false));
        }
    }
    report.checked = to_read.len();
    // The plugins' own `max_in_flight` caps concurrency further.
    let limit = to_read
        .iter()
        .filter_map(|r| catalog.plugin(&r.plugin))
        .map(|a| a.rate_limit.max_in_flight as usize)
        .filter(|&n| n > 0)
        .fold(options.max_in_flight.max(1), usize::min);
    let reads = futures::stream::iter(to_read.into_iter().map(|r| {
        let config = targets
            .get(&r.stack)
            .and_then(|ts| ts.iter().find(|t| t.name == r.target))
            .map(|t| t.config.clone())
            .unwrap_or_default();
        let (pacer, jitter) = (&pacer, &jitter);
        async move {
            let request = Request::Read(ReadRequest {
                request_id: uuid::Uuid::now_v7().to_string(),
                resource_type: r.resource_type.clone(),
                target: Target {
                    name: r.target.clone(),
                    config,
                    stack: Some(r.stack.clone()),
                },
                native_id: r.native_id.clone(),
                properties: r.properties.clone(),
            });
            let answer = pacer
                .call(
                    transport,
                    &r.plugin,
                    &request,
                    options.timeout,
                    &options.retry,
                    jitter,
                )
                .await;
            (r, answer)
        }
    }))
    .buffer_unordered(limit);
    futures::pin_mut!(reads);
    while let Some((r, answer)) = reads.next().await {
        let schema = catalog.schema(&r.plugin, &r.resource_type);
        match answer {
            Ok(Answer::Progress(event)) => {
                let mut read: PropertyMap = event.properties.unwrap_or_default();
                strip_secrets(schema, &mut read);
                // A readable field set from a secret is compared by keyed
                // hash and never recorded (issue 42, item 4).
                let moved_secrets =
                    secret_derived_changes(|f, v| hasher.hash(f, v), &r.secret_hashes, &mut read);
                let mut changed = changed_fields(schema, &r.properties, &read);
                changed.extend(moved_secrets.iter().cloned());
                changed.sort();
                let prior = Drift::of(&r);
                if !changed.is_empty() {
                    let mut fields: BTreeSet<String> = match prior {
                        Some(Drift::Changed(f)) => f.into_iter().collect(),
                        _ => BTreeSet::new(),
                    };
                    fields.extend(changed.iter().cloned());
                    let d = Drift::Changed(fields.into_iter().collect());
                    let mut secret_hashes = with_drift(r.secret_hashes.clone(), Some(&d));
                    for field in &moved_secrets {
                        secret_hashes.insert(field.clone(), MOVED_SECRET.to_owned());
                    }
                    let record = StoredResource {
                        properties: read,
                        secret_hashes,
                        ..r.clone()
                    };
                    if !store.put_resource_if_version(&record, r.version)? {
                        report.changed_meanwhile += 1;
                        continue;
                    }
                    let mut item = drifted(&r, &d, true);
                    item.fields = changed;
                    metrics().drift(&r.plugin, &item.drift, 1);
                    report.drifted.push(item);
                } else {
                    if read != r.properties {
                        // Only read-only fields moved: keep the record current.
                        let record = StoredResource {
                            properties: read,
                            ..r.clone()
                        };
                        if !store.put_resource_if_version(&record, r.version)? {
                            report.changed_meanwhile += 1;
                            continue;
                        }
                    }
                    if let Some(d) = prior {
                        report.drifted.push(drifted(&r, &d, false));
                    }
                }
            }
            Err((ErrorCode::NotFound, _)) => {
                let d = Drift::Deleted;
                let tombstone = StoredResource {
                    managed: false,
                    secret_hashes: with_drift(r.secret_hashes.clone(), Some(&d)),
                    ..r.clone()
                };
                if !store.put_resource_if_version(&tombstone, r.version)? {
                    report.changed_meanwhile += 1;
                    continue;
                }
                let item = drifted(&r, &d, true);
                metrics().drift(&r.plugin, &item.drift, 1);
                report.drifted.push(item);
            }
            Err((code, message)) => report.failures.push(Failure {
                stack: r.stack.clone(),
                target: r.target.clone(),
                resource_type: r.resource_type.clone(),
                label: r.label.clone(),
                plugin: r.plugin.clone(),
                page: 0,
                code: code.to_string(),
                message: format!(
                    "plugin `{}`, target `{}`, read of `{}`: {message}",
                    r.plugin, r.target, r.label
                ),
            }),
            Ok(_) => report.failures.push(Failure {
                stack: r.stack.clone(),
                target: r.target.clone(),
                resource_type: r.resource_type.clone(),
                label: r.label.clone(),
                plugin: r.plugin.clone(),
                page: 0,
                code: ErrorCode::InternalFailure.to_string(),
                message: "the plugin answered `read` with a list page".into(),
            }),
        }
    }
    report
        .drifted
        .sort_by(|a, b| (&a.stack, &a.label).cmp(&(&b.stack, &b.label)));
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

fn drifted(r: &StoredResource, d: &Drift, new: bool) -> Drifted {
    Drifted {
        stack: r.stack.clone(),
        label: r.label.clone(),
        resource_type: r.resource_type.clone(),
        target: r.target.clone(),
        native_id: r.native_id.clone(),
        drift: match d {
            Drift::Changed(_) => "changed".into(),
            Drift::Deleted => "deleted".into(),
        },
        fields: match d {
            Drift::Changed(f) => f.clone(),
            Drift::Deleted => Vec::new(),
        },
        new,
    }
}

/// What to adopt into a stack.
#[derive(Clone, Debug)]
pub struct ImportSpec {
    /// The stack adopting it.
    pub stack: String,
    /// Its label there.
    pub label: String,
    /// Its type.
    pub resource_type: String,
    /// Its target (with the config to reach it).
    pub target: TargetDecl,
    /// The plugin's identifier of it.
    pub native_id: String,
}

/// Adopts an existing resource into a stack without recreating it: reads
/// it through its plugin, records it managed under the stack's label, and
/// forgets its unmanaged record. Its read takes a rate-limit token from
/// `rates`, the process's registry.
pub async fn import(
    transport: &dyn Transport,
    catalog: &Catalog,
    rates: &RateRegistry,
    store: &dyn StateStore,
    spec: &ImportSpec,
    options: &Options,
) -> Result<StoredResource, DiscoveryError> {
    check_importable(store, &store.resources(None)?, spec)?;
    let pacer = Pacer::new(catalog, &options.rate_overrides, rates);
    let jitter = Mutex::new(Jitter::new(options.seed));
    let (native_id, properties) =
        read_existing(transport, catalog, &pacer, &jitter, spec, options).await?;
    let record = StoredResource {
        stack: spec.stack.clone(),
        label: spec.label.clone(),
        resource_type: spec.resource_type.clone(),
        target: spec.target.name.clone(),
        plugin: spec.target.plugin.clone(),
        native_id: native_id.unwrap_or_else(|| spec.native_id.clone()),
        properties,
        managed: true,
        ..Default::default()
    };
    store.put_resource(&record)?;
    forget_unmanaged(
        store,
        &spec.target.name,
        &spec.resource_type,
        &spec.native_id,
    )?;
    Ok(record)
}

/// Forgets the unmanaged (discovered) record of a resource a stack adopted.
pub fn forget_unmanaged(
    store: &dyn StateStore,
    target: &str,
    resource_type: &str,
    native_id: &str,
) -> Result<(), StoreError> {
    store.remove_resource(
        UNMANAGED_STACK,
        &unmanaged_label(target, resource_type, native_id),
    )
}

/// Refuses an import under a label the stack already manages, or of a
/// resource a stack declaring the same target manages (`all`: every
/// record of the store).
pub fn check_importable(
    store: &dyn StateStore,
    all: &[StoredResource],
    spec: &ImportSpec,
) -> Result<(), DiscoveryError> {
    if let Some(r) = all
        .iter()
        .find(|r| r.managed && r.stack == spec.stack && r.label == spec.label)
    {
        return Err(DiscoveryError::Invalid(format!(
            "stack `{}` already manages a resource labelled `{}` ({} `{}`)",
            r.stack, r.label, r.resource_type, r.native_id
        )));
    }
    // Stacks declaring the same target: one of them may manage it already.
    // Recorded targets hold no secret-looking values; compare likewise.
    let recorded_form = crate::stack::TargetDecl {
        config: crate::plan::storable_config(&spec.target.config),
        ..spec.target.clone()
    };
    let mut declaring = BTreeSet::new();
    for name in all.iter().filter(|r| r.managed).map(|r| &r.stack) {
        if !declaring.contains(name)
            && (*name == spec.stack || store.targets(name)?.contains(&recorded_form))
        {
            declaring.insert(name.clone());
        }
    }
    if let Some(owner) = all.iter().find(|r| {
        r.managed
            && declaring.contains(&r.stack)
            && r.target == spec.target.name
            && r.resource_type == spec.resource_type
            && r.native_id == spec.native_id
    }) {
        return Err(DiscoveryError::Invalid(format!(
            "{} `{}` is already managed by stack `{}` as `{}`",
            spec.resource_type, spec.native_id, owner.stack, owner.label
        )));
    }
    Ok(())
}

/// Reads the existing resource `spec` names through its plugin, within
/// its rate limit (`pacer`'s buckets, shared by the reads of one run) and
/// with the retry policy: the identifier the plugin
/// answers (if any) and its properties, write-only and opaque ones
/// dropped. A resource that does not exist is
/// [`DiscoveryError::Plugin`] with [`ErrorCode::NotFound`].
pub async fn read_existing(
    transport: &dyn Transport,
    catalog: &Catalog,
    pacer: &Pacer,
    jitter: &Mutex<Jitter>,
    spec: &ImportSpec,
    options: &Options,
) -> Result<(Option<String>, PropertyMap), DiscoveryError> {
    let plugin = &spec.target.plugin;
    let Some(schema) = catalog.schema(plugin, &spec.resource_type) else {
        return Err(DiscoveryError::Invalid(format!(
            "plugin `{plugin}` of target `{}` has no resource type `{}`",
            spec.target.name, spec.resource_type
        )));
    };
    let request = Request::Read(ReadRequest {
        request_id: uuid::Uuid::now_v7().to_string(),
        resource_type: spec.resource_type.clone(),
        target: Target {
            name: spec.target.name.clone(),
            config: spec.target.config.clone(),
            stack: Some(spec.stack.clone()),
        },
        native_id: spec.native_id.clone(),
        properties: PropertyMap::new(),
    });
    let event = match pacer
        .call(
            transport,
            plugin,
            &request,
            options.timeout,
            &options.retry,
            jitter,
        )
        .await
    {
        Ok(Answer::Progress(event)) => event,
        Ok(_) => {
            return Err(DiscoveryError::Plugin {
                code: ErrorCode::InternalFailure,
                message: "the plugin answered `read` with a list page".into(),
            })
        }
        Err((code, message)) => {
            return Err(DiscoveryError::Plugin {
                code,
                message: format!(
                    "plugin `{plugin}`, target `{}`, read of {} `{}`: {message}",
                    spec.target.name, spec.resource_type, spec.native_id
                ),
            })
        }
    };
    let mut properties = event.properties.unwrap_or_default();
    strip_secrets(Some(schema), &mut properties);
    Ok((event.native_id, properties))
}
