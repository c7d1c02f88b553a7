//! The checks themselves, in the order a resource lives: create, read,
//! update, list, delete; then concurrency and garbage.

use std::collections::BTreeSet;
use std::time::Duration;

use orrery_schema::{
    CreateRequest, DeleteRequest, ErrorCode, ListRequest, OperationStatus, ProgressEvent,
    PropertyMap, ReadRequest, Request, ResourceSchema, StatusRequest, Target, UpdateRequest, Value,
};

use super::fixture::{merged, substitute, Fixture};
use super::report::Report;
use super::Options;
use crate::client::{Answer, CallError, PluginClient};

pub(super) struct Suite {
    client: PluginClient,
    options: Options,
    report: Report,
    /// Contract violations seen in any answer: (check, type, detail).
    violations: Vec<(&'static str, String, String)>,
    /// The pages listed for the current fixture's type.
    pages: PageStats,
    /// What was not run because the link had closed.
    skipped: Vec<String>,
    counter: u64,
}

/// What the list pages of one type looked like.
#[derive(Default)]
struct PageStats {
    /// Pages received.
    pages: usize,
    /// Pages holding more resources than the non-zero `page_size` asked.
    oversized: Vec<String>,
}

/// The check that reports a link that closed mid-run.
const LINK_HEALTHY: &str = "link_healthy";

const IN_PROGRESS_IDS: &str = "in_progress_carries_ids";
const FAILURE_CODE: &str = "failure_has_valid_code";

type Step<T> = Result<T, String>;

impl Suite {
    pub(super) fn new(client: PluginClient, options: Options) -> Self {
        let ann = client.announcement();
        let report = Report {
            plugin: format!("{} {}", ann.name, ann.version),
            checks: Vec::new(),
        };
        Suite {
            client,
            options,
            report,
            violations: Vec::new(),
            pages: PageStats::default(),
            skipped: Vec::new(),
            counter: 0,
        }
    }

    pub(super) async fn run(mut self, fixtures: &[Fixture]) -> Report {
        let announcement = self.client.announcement().clone();
        let findings = super::announcement::check(&announcement);
        self.report.record_with_warnings(
            "announcement_valid",
            None,
            if findings.problems.is_empty() {
                Ok(format!("{} resource types", announcement.resources.len()))
            } else {
                Err(findings.problems.join("; "))
            },
            findings.warnings,
        );
        let mut last_target = None;
        for (done, fixture) in fixtures.iter().enumerate() {
            if self.client.closed_reason().is_some() {
                let left = fixtures.len() - done;
                self.skipped.push(format!("{left} fixture(s)"));
                break;
            }
            let ty = fixture.resource_type.clone();
            let Some(schema) = announcement.resource(&ty).cloned() else {
                self.report.record(
                    "fixture_type_announced",
                    Some(&ty),
                    Err(format!(
                        "{} names a type the plugin does not announce",
                        fixture.source.display()
                    )),
                );
                continue;
            };
            let tempdir = match tempfile::tempdir() {
                Ok(dir) => dir,
                Err(e) => {
                    self.report
                        .record("setup", Some(&ty), Err(format!("no temp dir: {e}")));
                    continue;
                }
            };
            let dir = tempdir.path().display().to_string();
            let mut fixture = fixture.clone();
            for map in [
                &mut fixture.target.config,
                &mut fixture.create,
                &mut fixture.update,
            ]
            .into_iter()
            .chain(fixture.replace.as_mut())
            {
                map.values_mut().for_each(|v| substitute(v, &dir));
            }
            last_target = Some(fixture.target.clone());
            self.pages = PageStats::default();
            if let Err(e) = self.lifecycle(&fixture, &schema).await {
                self.report
                    .record("lifecycle", Some(&ty), Err(format!("stopped early: {e}")));
            }
            if self.client.closed_reason().is_some() {
                self.skipped.push(format!("the rest of {ty}"));
                continue;
            }
            self.concurrency(&fixture, &schema).await;
            if schema.discoverable {
                self.page_size_respected(&ty);
            }
            self.garbage(&fixture, &schema).await;
        }
        match last_target {
            Some(_) if self.client.closed_reason().is_some() => {
                self.skipped.push("unknown_resource_type_rejected".into());
            }
            Some(target) => self.unknown_type(&target).await,
            None => {}
        }
        self.finish().await;
        self.report
    }

    fn request_id(&mut self) -> String {
        self.counter += 1;
        format!("conformance-{}-{}", std::process::id(), self.counter)
    }

    /// Sends a progress request, polls `status` while `InProgress`, and
    /// records contract violations on the way.
    async fn progress(&mut self, request: Request) -> Step<ProgressEvent> {
        let ty = request.resource_type().to_owned();
        let target = request.target().clone();
        let operation = request.operation();
        let mut event = self.send(&request).await?;
        let mut polls = 0;
        while event.status == OperationStatus::InProgress {
            polls += 1;
            if polls > self.options.max_polls {
                return Err(format!(
                    "still InProgress after {} status polls",
                    self.options.max_polls
                ));
            }
            let wait = event.retry_after_ms.unwrap_or(100).min(1000);
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let status = Request::Status(StatusRequest {
                request_id: event.request_id.clone(),
                operation: operation.clone(),
                resource_type: ty.clone(),
                target: target.clone(),
                native_id: event.native_id.clone().unwrap_or_default(),
                context: event.context.clone(),
            });
            event = self.send(&status).await?;
        }
        Ok(event)
    }

    async fn send(&mut self, request: &Request) -> Step<ProgressEvent> {
        let ty = request.resource_type().to_owned();
        match self
            .client
            .request(request, self.options.call_timeout)
            .await
        {
            Ok(Answer::Progress(event)) => {
                self.inspect(&ty, &event);
                Ok(event)
            }
            Ok(other) => Err(format!("answered {} with {other:?}", request.operation())),
            Err(e) => Err(call_failed(&request.operation().to_string(), &e)),
        }
    }

    fn inspect(&mut self, ty: &str, event: &ProgressEvent) {
        if event.status == OperationStatus::InProgress
            && (event.request_id.is_empty() || event.native_id.as_deref().unwrap_or("").is_empty())
        {
            self.violations.push((
                IN_PROGRESS_IDS,
                ty.to_owned(),
                format!(
                    "{} InProgress without request id and native id: {event:?}",
                    event.operation
                ),
            ));
        }
        if event.status == OperationStatus::Failure {
            match &event.error_code {
                Some(code) if code.is_known() => {}
                other => self.violations.push((
                    FAILURE_CODE,
                    ty.to_owned(),
                    format!("{} Failure with error code {other:?}", event.operation),
                )),
            }
        }
    }

    fn expect(&mut self, check: &str, ty: &str, result: Step<String>) -> bool {
        self.report.record(check, Some(ty), result)
    }

    async fn create(
        &mut self,
        target: &Target,
        ty: &str,
        properties: PropertyMap,
    ) -> Step<ProgressEvent> {
        let request = Request::Create(CreateRequest {
            request_id: self.request_id(),
            resource_type: ty.to_owned(),
            label: "conformance".into(),
            target: target.clone(),
            properties,
        });
        self.progress(request).await
    }

    async fn read(&mut self, target: &Target, ty: &str, native_id: &str) -> Step<ProgressEvent> {
        let request = Request::Read(ReadRequest {
            request_id: self.request_id(),
            resource_type: ty.to_owned(),
            target: target.clone(),
            native_id: native_id.to_owned(),
            properties: PropertyMap::new(),
        });
        self.progress(request).await
    }

    async fn delete(
        &mut self,
        target: &Target,
        ty: &str,
        native_id: &str,
        properties: &PropertyMap,
    ) -> Step<ProgressEvent> {
        let request = Request::Delete(DeleteRequest {
            request_id: self.request_id(),
            resource_type: ty.to_owned(),
            target: target.clone(),
            native_id: native_id.to_owned(),
            properties: properties.clone(),
        });
        self.progress(request).await
    }

    async fn update(
        &mut self,
        target: &Target,
        ty: &str,
        native_id: &str,
        prior: &PropertyMap,
        properties: PropertyMap,
    ) -> Step<ProgressEvent> {
        let request = Request::Update(UpdateRequest {
            request_id: self.request_id(),
            resource_type: ty.to_owned(),
            label: "conformance".into(),
            target: target.clone(),
            native_id: native_id.to_owned(),
            prior_properties: prior.clone(),
            properties,
        });
        self.progress(request).await
    }

    /// Every native id of `ty`, paging through all pages.
    async fn list_all(
        &mut self,
        target: &Target,
        schema: &ResourceSchema,
    ) -> Step<Vec<(String, PropertyMap)>> {
        let mut token = None;
        let mut out = Vec::new();
        for _page in 0..10_000 {
            let request = Request::List(ListRequest {
                request_id: self.request_id(),
                resource_type: schema.type_name.clone(),
                target: target.clone(),
                page_size: self.options.page_size,
                page_token: token.take(),
                parent: None,
            });
            let page = match self
                .client
                .request(&request, self.options.call_timeout)
                .await
            {
                Ok(Answer::List(page)) => page,
                Ok(other) => return Err(format!("answered list with {other:?}")),
                Err(e) => return Err(call_failed("list", &e)),
            };
            if page.status != OperationStatus::Success {
                return Err(format!(
                    "list answered {} {:?}: {}",
                    page.status,
                    page.error_code,
                    page.message.unwrap_or_default()
                ));
            }
            self.pages.pages += 1;
            let asked = self.options.page_size;
            if asked > 0 && page.resources.len() > asked as usize {
                self.pages.oversized.push(format!(
                    "a page of {} resources for page_size {asked}",
                    page.resources.len()
                ));
            }
            out.extend(
                page.resources
                    .into_iter()
                    .map(|r| (r.native_id, r.properties)),
            );
            match page.next_page_token {
                Some(next) => token = Some(next),
                None => return Ok(out),
            }
        }
        Err("more than 10000 pages; is next_page_token ever absent?".into())
    }

    async fn lifecycle(&mut self, fixture: &Fixture, schema: &ResourceSchema) -> Step<()> {
        let ty = fixture.resource_type.as_str();
        let target = &fixture.target;
        let created = self.create(target, ty, fixture.create.clone()).await?;
        let created_ok = success_with_id(&created);
        if !self.expect("create", ty, created_ok.clone()) {
            return Err("create did not succeed".into());
        }
        let native_id = created_ok?;
        let result = no_write_only(schema, created.properties.as_ref());
        self.expect("create_returns_no_write_only", ty, result);

        let read = self.read(target, ty, &native_id).await?;
        let result = success_with_id(&read)
            .and_then(|_| same_properties(schema, &fixture.create, read.properties.as_ref()));
        self.expect("read_after_create", ty, result);
        let result = no_write_only(schema, read.properties.as_ref());
        self.expect("read_returns_no_write_only", ty, result);
        let mut current = read.properties.clone().unwrap_or_default();

        if !schema.identifier.is_empty() {
            let again = self.create(target, ty, fixture.create.clone()).await?;
            let result = failure_with(&again, &ErrorCode::AlreadyExists);
            self.expect("create_existing_is_already_exists", ty, result);
        }

        let desired = merged(&fixture.create, &fixture.update);
        let updated = self
            .update(target, ty, &native_id, &current, desired.clone())
            .await?;
        let ok = success_with_id(&updated);
        if self.expect("update", ty, ok.clone().map(|_| String::new())) {
            let result = match ok {
                Ok(id) if id == native_id => Ok(format!("native id {id}")),
                Ok(id) => Err(format!("native id changed from {native_id:?} to {id:?}")),
                Err(e) => Err(e),
            };
            self.expect("update_keeps_native_id", ty, result);
            let read = self.read(target, ty, &native_id).await?;
            let result = success_with_id(&read)
                .and_then(|_| same_properties(schema, &desired, read.properties.as_ref()));
            self.expect("read_after_update", ty, result);
            current = read.properties.unwrap_or_default();
        }

        if let Some(replace) = &fixture.replace {
            let replacing = merged(&desired, replace);
            let refused = self
                .update(target, ty, &native_id, &current, replacing)
                .await?;
            let result = failure_with(&refused, &ErrorCode::NotUpdatable);
            self.expect("update_create_only_is_not_updatable", ty, result);
        }

        if schema.discoverable {
            let listed = self.list_all(target, schema).await;
            let result = listed.as_ref().map_err(Clone::clone).and_then(|all| {
                if all.iter().any(|(id, _)| *id == native_id) {
                    Ok(format!("{} resources listed", all.len()))
                } else {
                    Err(format!(
                        "{native_id:?} missing from {} listed resources",
                        all.len()
                    ))
                }
            });
            self.expect("list_includes_created", ty, result);
            let result = listed.and_then(|all| {
                all.iter()
                    .try_for_each(|(_, p)| no_write_only(schema, Some(p)).map(|_| ()))
                    .map(|_| String::new())
            });
            self.expect("list_returns_no_write_only", ty, result);
        }

        let deleted = self.delete(target, ty, &native_id, &current).await?;
        let result = if deleted.status == OperationStatus::Success {
            Ok(String::new())
        } else {
            Err(describe(&deleted))
        };
        self.expect("delete", ty, result);
        let read = self.read(target, ty, &native_id).await?;
        let result = failure_with(&read, &ErrorCode::NotFound);
        self.expect("read_after_delete_is_not_found", ty, result);
        let again = self.delete(target, ty, &native_id, &current).await?;
        let result = failure_with(&again, &ErrorCode::NotFound);
        self.expect("delete_after_delete_is_not_found", ty, result);
        if schema.discoverable {
            let result = self.list_all(target, schema).await.and_then(|all| {
                if all.iter().any(|(id, _)| *id == native_id) {
                    Err(format!("{native_id:?} still listed after delete"))
                } else {
                    Ok(String::new())
                }
            });
            self.expect("list_excludes_deleted", ty, result);
        }
        Ok(())
    }

    /// Creates, reads and deletes several resources at once on one link.
    async fn concurrency(&mut self, fixture: &Fixture, schema: &ResourceSchema) {
        let ty = fixture.resource_type.clone();
        let variants: Vec<PropertyMap> = (0..self.options.concurrency)
            .map(|i| with_suffix(schema, fixture, &format!("-c{i}")))
            .collect();
        let result = self.concurrent_round(fixture, schema, variants).await;
        self.expect("concurrent_operations", &ty, result);
    }

    async fn concurrent_round(
        &mut self,
        fixture: &Fixture,
        schema: &ResourceSchema,
        variants: Vec<PropertyMap>,
    ) -> Step<String> {
        let ty = fixture.resource_type.clone();
        let n = variants.len();
        let creates = variants.iter().map(|props| {
            let request = Request::Create(CreateRequest {
                request_id: self.request_id(),
                resource_type: ty.clone(),
                label: "conformance".into(),
                target: fixture.target.clone(),
                properties: props.clone(),
            });
            self.progress_detached(request)
        });
        let created = futures::future::join_all(creates.collect::<Vec<_>>()).await;
        let mut ids = Vec::new();
        for (i, result) in created.into_iter().enumerate() {
            let event = result?;
            ids.push(success_with_id(&event).map_err(|e| format!("create #{i}: {e}"))?);
        }
        if ids.iter().collect::<BTreeSet<_>>().len() != n {
            return Err(format!(
                "{n} concurrent creates returned duplicate native ids: {ids:?}"
            ));
        }
        let reads = ids.iter().map(|id| {
            self.progress_detached(Request::Read(ReadRequest {
                request_id: format!("conformance-read-{id}"),
                resource_type: ty.clone(),
                target: fixture.target.clone(),
                native_id: id.clone(),
                properties: PropertyMap::new(),
            }))
        });
        let reads = futures::future::join_all(reads.collect::<Vec<_>>()).await;
        for (i, read) in reads.into_iter().enumerate() {
            let read = read?;
            same_properties(schema, &variants[i], read.properties.as_ref())
                .map_err(|e| format!("resource #{i} read back another's properties: {e}"))?;
        }
        if schema.discoverable {
            // More resources than a page holds: paging is exercised for real.
            let pages_before = self.pages.pages;
            let listed = self.list_all(&fixture.target, schema).await;
            let pages = self.pages.pages - pages_before;
            let result = listed.and_then(|all| {
                let listed: BTreeSet<&String> = all.iter().map(|(id, _)| id).collect();
                let missing: Vec<&String> = ids.iter().filter(|id| !listed.contains(id)).collect();
                if missing.is_empty() {
                    Ok(format!(
                        "{n} resources created at once, all listed in {pages} pages"
                    ))
                } else {
                    Err(format!(
                        "{} of {n} resources created at once not listed ({} listed in {pages} \
                         pages): {missing:?}",
                        missing.len(),
                        all.len()
                    ))
                }
            });
            self.expect("list_includes_all_created", &ty, result);
        }
        let deletes = ids.iter().enumerate().map(|(i, id)| {
            self.progress_detached(Request::Delete(DeleteRequest {
                request_id: format!("conformance-delete-{id}"),
                resource_type: ty.clone(),
                target: fixture.target.clone(),
                native_id: id.clone(),
                properties: variants[i].clone(),
            }))
        });
        for (i, deleted) in futures::future::join_all(deletes.collect::<Vec<_>>())
            .await
            .into_iter()
            .enumerate()
        {
            let deleted = deleted?;
            if deleted.status != OperationStatus::Success {
                return Err(format!("delete #{i}: {}", describe(&deleted)));
            }
        }
        Ok(format!(
            "{n} resources created, read and deleted concurrently"
        ))
    }

    /// Every page listed for `ty` held at most the non-zero `page_size`
    /// asked (the protocol's MUST NOT in `ListRequest.page_size`).
    fn page_size_respected(&mut self, ty: &str) {
        let asked = self.options.page_size;
        let stats = std::mem::take(&mut self.pages);
        let result = match stats.oversized.first() {
            None => Ok(format!(
                "{} pages, none over page_size {asked}",
                stats.pages
            )),
            Some(first) => Err(format!(
                "{} of {} pages over page_size {asked}, first {first}",
                stats.oversized.len(),
                stats.pages
            )),
        };
        self.expect("list_respects_page_size", ty, result);
    }

    /// Like `progress`, without borrowing the suite (for concurrent use).
    fn progress_detached(
        &self,
        request: Request,
    ) -> impl std::future::Future<Output = Step<ProgressEvent>> {
        let client = self.client.clone();
        let options = self.options.clone();
        async move {
            let operation = request.operation();
            let mut answer = client.request(&request, options.call_timeout).await;
            for _ in 0..options.max_polls {
                let event = match answer {
                    Ok(Answer::Progress(event)) => event,
                    Ok(other) => return Err(format!("answered {operation} with {other:?}")),
                    Err(e) => return Err(call_failed(&operation.to_string(), &e)),
                };
                if event.status != OperationStatus::InProgress {
                    return Ok(event);
                }
                tokio::time::sleep(Duration::from_millis(
                    event.retry_after_ms.unwrap_or(100).min(1000),
                ))
                .await;
                let status = Request::Status(StatusRequest {
                    request_id: event.request_id.clone(),
                    operation: operation.clone(),
                    resource_type: request.resource_type().to_owned(),
                    target: request.target().clone(),
                    native_id: event.native_id.clone().unwrap_or_default(),
                    context: event.context.clone(),
                });
                answer = client.request(&status, options.call_timeout).await;
            }
            Err(format!(
                "{operation} still InProgress after {} polls",
                options.max_polls
            ))
        }
    }

    /// Properties of the wrong kind must be refused with InvalidRequest,
    /// and must not take the plugin down.
    async fn garbage(&mut self, fixture: &Fixture, schema: &ResourceSchema) {
        let ty = fixture.resource_type.as_str();
        let mut garbage = PropertyMap::new();
        let junk = Value::List(vec![Value::Map(PropertyMap::from([(
            "garbage".to_owned(),
            Value::Bytes(vec![0xc1, 0xff, 0x00]),
        )]))]);
        for field in &schema.fields {
            garbage.insert(field.name.clone(), junk.clone());
        }
        let result = match self.create(&fixture.target, ty, garbage).await {
            Ok(event) => failure_with(&event, &ErrorCode::InvalidRequest),
            Err(e) => Err(e),
        };
        self.expect("garbage_properties_rejected", ty, result);
    }

    /// A type the plugin never announced must be refused as invalid, on a
    /// target that is otherwise valid.
    async fn unknown_type(&mut self, target: &Target) {
        let result = match self
            .create(target, "Conformance::No::SuchType", PropertyMap::new())
            .await
        {
            Ok(event) => failure_with(&event, &ErrorCode::InvalidRequest),
            Err(e) => Err(e),
        };
        self.report
            .record("unknown_resource_type_rejected", None, result);
    }

    async fn finish(&mut self) {
        for check in [IN_PROGRESS_IDS, FAILURE_CODE] {
            let seen: Vec<_> = self.violations.iter().filter(|v| v.0 == check).collect();
            let result = match seen.first() {
                None => Ok(String::new()),
                Some((_, ty, detail)) => Err(format!(
                    "{} violation(s), first [{ty}]: {detail}",
                    seen.len()
                )),
            };
            self.report.record(check, None, result);
        }
        let result = match self.client.closed_reason() {
            Some(reason) => Err(format!(
                "the link closed during the run: {reason}{}",
                if self.skipped.is_empty() {
                    String::new()
                } else {
                    format!("; not run: {}", self.skipped.join(", "))
                }
            )),
            None => match self.client.ping(self.options.call_timeout).await {
                Ok(()) => Ok("answers ping after the whole suite".into()),
                Err(e) => Err(format!("link is not healthy at the end: {e}")),
            },
        };
        self.report.record(LINK_HEALTHY, None, result);
    }
}

fn describe(event: &ProgressEvent) -> String {
    format!(
        "{} {}{}",
        event.status,
        event
            .error_code
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        event
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    )
}

fn success_with_id(event: &ProgressEvent) -> Step<String> {
    match (&event.status, &event.native_id) {
        (OperationStatus::Success, Some(id)) if !id.is_empty() => Ok(id.clone()),
        (OperationStatus::Success, _) => Err("Success without a native id".into()),
        _ => Err(format!("expected Success, got {}", describe(event))),
    }
}

fn failure_with(event: &ProgressEvent, code: &ErrorCode) -> Step<String> {
    if event.status == OperationStatus::Failure && event.error_code.as_ref() == Some(code) {
        Ok(event.message.clone().unwrap_or_default())
    } else {
        Err(format!("expected Failure {code}, got {}", describe(event)))
    }
}

fn no_write_only(schema: &ResourceSchema, properties: Option<&PropertyMap>) -> Step<String> {
    let leaked: Vec<&str> = schema
        .fields
        .iter()
        .filter(|f| f.hints.write_only)
        .filter(|f| properties.is_some_and(|p| p.contains_key(&f.name)))
        .map(|f| f.name.as_str())
        .collect();
    if leaked.is_empty() {
        Ok(String::new())
    } else {
        Err(format!(
            "write-only field(s) returned: {}",
            leaked.join(", ")
        ))
    }
}

/// Desired properties must come back as sent, except write-only and
/// read-only fields.
fn same_properties(
    schema: &ResourceSchema,
    desired: &PropertyMap,
    got: Option<&PropertyMap>,
) -> Step<String> {
    let got = got.ok_or("no properties returned")?;
    let mut diffs = Vec::new();
    for (name, want) in desired {
        if schema
            .field(name)
            .is_some_and(|f| f.hints.write_only || f.hints.read_only)
        {
            continue;
        }
        match got.get(name) {
            Some(have) if have == want => {}
            Some(have) => diffs.push(format!("{name}: sent {want:?}, read {have:?}")),
            None => diffs.push(format!("{name}: sent {want:?}, read nothing")),
        }
    }
    if diffs.is_empty() {
        Ok(String::new())
    } else {
        Err(diffs.join("; "))
    }
}

/// The fixture's `create` with `suffix` appended to every string
/// identifier field (or those it names in `vary`), so concurrent resources
/// do not collide.
fn with_suffix(schema: &ResourceSchema, fixture: &Fixture, suffix: &str) -> PropertyMap {
    let mut out = fixture.create.clone();
    let varied = fixture.vary.as_ref().unwrap_or(&schema.identifier);
    for id in varied {
        if let Some(Value::String(s)) = out.get_mut(id) {
            s.push_str(suffix);
        }
    }
    out
}

/// Why a call got no answer. A closed link is reported once, by
/// `link_healthy`; the checks it interrupted point there.
fn call_failed(operation: &str, e: &CallError) -> String {
    match e {
        CallError::LinkClosed(_) => {
            format!("{operation} failed: the plugin link closed (see {LINK_HEALTHY})")
        }
        other => format!("{operation} failed: {other}"),
    }
}
