//! # orrery-plugin-testbed
//!
//! An in-memory plugin for testing the runtime, not for managing anything:
//!
//! - `Testbed::Async::Thing` answers create and delete with `InProgress`
//!   and finishes after `polls` status polls (target config, default 2);
//! - `Testbed::Noop::Thing` answers every operation at once, as cheaply as
//!   possible, for benchmarks.
//!
//! Faults are injected through the target config ([`faults::Config`]):
//! `throttle_every`, `fail_code` + `fail_every`, `crash_on` + `crash_after`
//! (the process aborts), `delay_ms` and `panic_on`. Fault counters belong to
//! the plugin instance, so in the binary they are global to the process.
//! `listed` + `listed_bytes` make `list` return that many more things of
//! that size, for tests of message sizes.
//!
//! A `Testbed::Noop::Thing` may attach to another (`attached_to`, edge kind
//! `attachesTo`): it cannot be created attached to a thing that does not
//! exist, and a thing with attachments cannot be deleted, so the order of
//! a replacement shows. `needs` (edge kind `runtimeDependency`) is only
//! stored.

pub mod faults;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, EdgeKind, ErrorCode, ListRequest, ListedResource, Operation,
    PropertyMap, RateLimit, ReadRequest, ResourceSchema, StatusRequest, Target, UpdateRequest,
    Value,
};
use orrery_plugin_sdk::{
    deleted, done, field, in_progress, paginate, resource, ListPage, OpResult, PluginError,
    PluginInfo, ResourcePlugin,
};

use faults::{Config, Counters};

/// The asynchronous resource type.
pub const ASYNC_THING: &str = "Testbed::Async::Thing";
/// The instant resource type.
pub const NOOP_THING: &str = "Testbed::Noop::Thing";

/// How long the runtime is asked to wait between status polls.
pub const POLL_AFTER_MS: u64 = 10;

/// (target name, resource type, thing name).
type Key = (String, String, String);

/// The testbed plugin: things kept in memory per target.
#[derive(Debug, Default)]
pub struct TestbedPlugin {
    things: Mutex<HashMap<Key, PropertyMap>>,
    counters: Counters,
    rate_limit: Option<RateLimit>,
    /// Whether any thing was ever attached: deletes look for attachments
    /// only then, so benchmarks' deletes stay O(1).
    any_attached: AtomicBool,
}

impl TestbedPlugin {
    /// A testbed announcing `rate_limit` instead of "unlimited".
    pub fn with_rate_limit(rate_limit: RateLimit) -> Self {
        TestbedPlugin {
            rate_limit: Some(rate_limit),
            ..Default::default()
        }
    }

    fn things(&self) -> MutexGuard<'_, HashMap<Key, PropertyMap>> {
        // Injected panics never happen while the lock is held.
        self.things.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A thing may attach only to a thing that exists on its target.
    fn attachable(
        &self,
        things: &HashMap<Key, PropertyMap>,
        target: &Target,
        properties: &PropertyMap,
    ) -> Result<(), PluginError> {
        let Some(to) = properties.get("attached_to").and_then(Value::as_str) else {
            return Ok(());
        };
        if !things.contains_key(&key(target, NOOP_THING, to)) {
            return Err(PluginError::new(
                ErrorCode::NotFound,
                format!("cannot attach to `{to}`: no {NOOP_THING} of that name"),
            ));
        }
        self.any_attached.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Parses the target config and injects its faults.
    async fn begin(&self, target: &Target, operation: Operation) -> Result<Config, PluginError> {
        let config = Config::of(target)?;
        self.counters.inject(&config, &operation).await?;
        Ok(config)
    }
}

/// Which of the two types a request is about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Async,
    Noop,
}

fn kind(resource_type: &str) -> Result<Kind, PluginError> {
    match resource_type {
        ASYNC_THING => Ok(Kind::Async),
        NOOP_THING => Ok(Kind::Noop),
        other => Err(PluginError::invalid(format!(
            "unknown resource type `{other}`; the testbed manages {ASYNC_THING} and {NOOP_THING}"
        ))),
    }
}

fn key(target: &Target, resource_type: &str, name: &str) -> Key {
    (
        target.name.clone(),
        resource_type.to_owned(),
        name.to_owned(),
    )
}

/// Checks a thing's properties; returns its name and what is stored (no
/// write-only `secret`).
fn thing(kind: Kind, properties: &PropertyMap) -> Result<(String, PropertyMap), PluginError> {
    let name = match properties.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => return Err(PluginError::invalid("`name` must be a non-empty string")),
    };
    let mut stored = properties.clone();
    if kind == Kind::Async {
        match stored.remove("secret") {
            None | Some(Value::String(_)) => {}
            Some(other) => {
                return Err(PluginError::invalid(format!(
                    "`secret` must be a string, not {}",
                    other.kind_name()
                )))
            }
        }
    }
    Ok((name, stored))
}

fn not_found(resource_type: &str, native_id: &str) -> PluginError {
    PluginError::not_found(format!("no {resource_type} named `{native_id}`"))
}

/// The `InProgress` context: how many polls have happened.
fn polled(n: u64) -> Value {
    let mut context = PropertyMap::new();
    context.insert("polls".into(), Value::from(n));
    Value::Map(context)
}

impl ResourcePlugin for TestbedPlugin {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "testbed".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            namespace: "Testbed".into(),
        }
    }

    fn resources(&self) -> Vec<ResourceSchema> {
        let name = || field::string("name").required().create_only();
        vec![
            resource(ASYNC_THING)
                .describe("An in-memory thing whose create and delete take `polls` status polls")
                .identifier(["name"])
                .field(name())
                .field(field::any("value"))
                .field(field::string("secret").write_only().opaque())
                .build(),
            resource(NOOP_THING)
                .describe("An in-memory thing that answers every operation at once")
                .identifier(["name"])
                .field(name())
                .field(field::any("value"))
                .field(
                    field::string("attached_to")
                        .describe("The name of the thing this one attaches to")
                        .edge_kind(EdgeKind::AttachesTo),
                )
                .field(
                    field::any("needs")
                        .describe("Something this thing uses at run time")
                        .edge_kind(EdgeKind::RuntimeDependency),
                )
                .build(),
        ]
    }

    /// Unlimited unless built with [`TestbedPlugin::with_rate_limit`].
    fn rate_limit(&self) -> RateLimit {
        self.rate_limit.clone().unwrap_or(RateLimit {
            requests_per_second: 0.0,
            burst: 0,
            max_in_flight: 0,
        })
    }

    async fn create(&self, request: CreateRequest) -> OpResult {
        let config = self.begin(&request.target, Operation::Create).await?;
        let kind = kind(&request.resource_type)?;
        let (name, stored) = thing(kind, &request.properties)?;
        let key = key(&request.target, &request.resource_type, &name);
        {
            let mut things = self.things();
            self.attachable(&things, &request.target, &stored)?;
            if things.contains_key(&key) {
                return Err(PluginError::new(
                    ErrorCode::AlreadyExists,
                    format!("{} `{name}` already exists", request.resource_type),
                ));
            }
            things.insert(key, stored.clone());
        }
        if kind == Kind::Async && config.polls() > 0 {
            return in_progress(name, polled(0), POLL_AFTER_MS);
        }
        done(name, stored)
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        self.begin(&request.target, Operation::Read).await?;
        kind(&request.resource_type)?;
        let key = key(&request.target, &request.resource_type, &request.native_id);
        let found = self.things().get(&key).cloned();
        match found {
            Some(properties) => done(request.native_id, properties),
            None => Err(not_found(&request.resource_type, &request.native_id)),
        }
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        self.begin(&request.target, Operation::Update).await?;
        let kind = kind(&request.resource_type)?;
        let (name, stored) = thing(kind, &request.properties)?;
        if name != request.native_id {
            return Err(PluginError::new(
                ErrorCode::NotUpdatable,
                format!(
                    "`name` is create-only: changing it from `{}` to `{name}` requires replacing the thing",
                    request.native_id
                ),
            ));
        }
        let key = key(&request.target, &request.resource_type, &name);
        let mut things = self.things();
        self.attachable(&things, &request.target, &stored)?;
        match things.get_mut(&key) {
            Some(current) => *current = stored.clone(),
            None => return Err(not_found(&request.resource_type, &name)),
        }
        drop(things);
        done(name, stored)
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let config = self.begin(&request.target, Operation::Delete).await?;
        let kind = kind(&request.resource_type)?;
        let key = key(&request.target, &request.resource_type, &request.native_id);
        let mut things = self.things();
        if !things.contains_key(&key) {
            return Err(not_found(&request.resource_type, &request.native_id));
        }
        if kind == Kind::Noop && self.any_attached.load(Ordering::Relaxed) {
            if let Some(((_, _, by), _)) = things.iter().find(|((t, ty, _), p)| {
                *t == request.target.name
                    && ty == NOOP_THING
                    && p.get("attached_to").and_then(Value::as_str) == Some(&request.native_id)
            }) {
                return Err(PluginError::new(
                    ErrorCode::ResourceConflict,
                    format!(
                        "`{}` cannot be deleted: `{by}` is attached to it",
                        request.native_id
                    ),
                ));
            }
        }
        if kind == Kind::Async && config.polls() > 0 {
            // Removed when the last status poll reports success.
            return in_progress(request.native_id, polled(0), POLL_AFTER_MS);
        }
        things.remove(&key);
        deleted(request.native_id)
    }

    async fn status(&self, request: StatusRequest) -> OpResult {
        let config = self.begin(&request.target, Operation::Status).await?;
        if kind(&request.resource_type)? != Kind::Async {
            return Err(PluginError::invalid(format!(
                "{NOOP_THING} operations finish at once; there is nothing to poll"
            )));
        }
        let polls = request
            .context
            .as_ref()
            .and_then(Value::as_map)
            .and_then(|context| context.get("polls"))
            .and_then(Value::as_i64)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| PluginError::invalid("status context must be {polls: <count>}"))?
            + 1;
        if polls < config.polls() {
            return in_progress(request.native_id, polled(polls), POLL_AFTER_MS);
        }
        let key = key(&request.target, &request.resource_type, &request.native_id);
        match request.operation {
            Operation::Create => match self.things().get(&key).cloned() {
                Some(properties) => done(request.native_id, properties),
                None => Err(not_found(&request.resource_type, &request.native_id)),
            },
            Operation::Delete => {
                self.things().remove(&key);
                deleted(request.native_id)
            }
            other => Err(PluginError::invalid(format!(
                "{ASYNC_THING} has no asynchronous `{other}` to poll"
            ))),
        }
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let config = self.begin(&request.target, Operation::List).await?;
        kind(&request.resource_type)?;
        let mut things: Vec<ListedResource> = self
            .things()
            .iter()
            .filter(|((target, ty, _), _)| {
                *target == request.target.name && *ty == request.resource_type
            })
            .map(|((_, _, name), properties)| ListedResource {
                native_id: name.clone(),
                properties: properties.clone(),
            })
            .collect();
        things.extend(listed(&config));
        let token = request.page_token.as_deref();
        let (resources, next_page_token) =
            paginate(things, |t| &t.native_id, request.page_size, token);
        Ok(ListPage {
            resources,
            next_page_token,
        })
    }
}

/// The synthetic things `listed` asks for.
fn listed(config: &Config) -> impl Iterator<Item = ListedResource> + '_ {
    let bytes = usize::try_from(config.listed_bytes.unwrap_or(0)).unwrap_or(usize::MAX);
    (0..config.listed.unwrap_or(0)).map(move |i| {
        let name = format!("listed-{i:05}");
        let properties = PropertyMap::from([
            ("name".to_owned(), Value::from(name.clone())),
            ("value".to_owned(), Value::from("v".repeat(bytes))),
        ]);
        ListedResource {
            native_id: name,
            properties,
        }
    })
}
