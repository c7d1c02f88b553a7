//! # orrery-plugin-testbed
//!
//! An in-memory plugin for testing the runtime, not for managing anything:
//!
//! - `Testbed::Async::Thing` answers create and delete with `InProgress`
//!   and finishes after `polls` status polls (target config, default 2);
//! - `Testbed::Noop::Thing` answers every operation at once, as cheaply as
//!   possible, for benchmarks;
//! - `Testbed::Cloud::Thing` behaves like a cloud API's resource ([`cloud`]):
//!   the plugin assigns ids, deduplicates creates only by request id, and a
//!   create takes `create_ms` on the provider's side, so a host that sends a
//!   create twice makes two things.
//!
//! Faults are injected through the target config ([`faults::Config`]):
//! `throttle_every`, `fail_code` + `fail_every`, `crash_on` + `crash_after`
//! (the process aborts), `delay_ms` and `panic_on`. Fault counters belong to
//! the plugin instance, so in the binary they are global to the process.
//! `listed` + `listed_bytes` make `list` of the async and noop types return
//! that many more things of that size, for tests of message sizes.
//!
//! Things live in the plugin's memory unless the target config names a
//! `store` file (the binary also reads `ORRERY_TESTBED_STORE`): then they
//! live in SQLite ([`store`]), shared by every testbed process, and a
//! retried create (same `request_id`) finds the thing it made instead of
//! `AlreadyExists`.
//!
//! A `Testbed::Noop::Thing` may attach to another (`attached_to`, edge kind
//! `attachesTo`): it cannot be created attached to a thing that does not
//! exist, and a thing with attachments cannot be deleted, so the order of
//! a replacement shows. Likewise a thing another `needs` (edge kind
//! `runtimeDependency`, a name) cannot be deleted, so the order of a
//! destroy shows.

mod cloud;
pub mod faults;
pub mod store;
mod things;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
use store::{Created, Store};
use things::{Key, Memory, Things};

/// The asynchronous resource type.
pub const ASYNC_THING: &str = "Testbed::Async::Thing";
/// The instant resource type.
pub const NOOP_THING: &str = "Testbed::Noop::Thing";
/// The cloud-like resource type (see [`cloud`]).
pub const CLOUD_THING: &str = "Testbed::Cloud::Thing";

/// How long the runtime is asked to wait between status polls.
pub const POLL_AFTER_MS: u64 = 10;

/// The testbed plugin: things kept in memory per target.
#[derive(Debug, Default)]
pub struct TestbedPlugin {
    memory: Memory,
    /// Store files opened so far, by path.
    stores: Mutex<HashMap<PathBuf, Arc<Store>>>,
    /// The store of targets whose config names none.
    default_store: Option<PathBuf>,
    counters: Counters,
    rate_limit: Option<RateLimit>,
    /// Whether any thing was ever attached or needed another: deletes look
    /// for attachments and users only then, so benchmarks' deletes stay O(1).
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

    /// This testbed, announcing `rate_limit` instead of "unlimited".
    pub fn rate_limited(self, rate_limit: RateLimit) -> Self {
        TestbedPlugin {
            rate_limit: Some(rate_limit),
            ..self
        }
    }

    /// A testbed keeping the things of every target whose config names no
    /// `store` in the SQLite file at `path`.
    pub fn with_store(path: impl Into<PathBuf>) -> Self {
        TestbedPlugin {
            default_store: Some(path.into()),
            ..Default::default()
        }
    }

    /// The things of a request: in the store its config names, else in
    /// memory.
    fn things(&self, config: &Config) -> Result<Things<'_>, PluginError> {
        Ok(match self.store(config)? {
            Some(store) => Things::Stored(store),
            None => Things::Memory(&self.memory),
        })
    }

    /// The store file a request's config names (or the default one).
    fn store(&self, config: &Config) -> Result<Option<Arc<Store>>, PluginError> {
        let path = match (&config.store, &self.default_store) {
            (Some(path), _) => Path::new(path),
            (None, Some(path)) => path.as_path(),
            (None, None) => return Ok(None),
        };
        let mut stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = stores.get(path) {
            return Ok(Some(store.clone()));
        }
        let store = Arc::new(Store::open(path)?);
        stores.insert(path.to_owned(), store.clone());
        Ok(Some(store))
    }

    /// The cloud of a request: its store, which a cloud thing requires.
    fn cloud(&self, config: &Config) -> Result<Arc<Store>, PluginError> {
        self.store(config)?.ok_or_else(|| {
            PluginError::invalid(format!(
                "{CLOUD_THING} lives in a store file: set the target's `store` (or ORRERY_TESTBED_STORE)"
            ))
        })
    }

    /// A thing may attach only to a thing that exists on its target.
    fn attachable(
        &self,
        things: &Things<'_>,
        target: &Target,
        properties: &PropertyMap,
    ) -> Result<(), PluginError> {
        if properties.contains_key("needs") {
            self.any_attached.store(true, Ordering::Relaxed);
        }
        let Some(to) = properties.get("attached_to").and_then(Value::as_str) else {
            return Ok(());
        };
        if things.get(&key(target, NOOP_THING, to))?.is_none() {
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
    Cloud,
}

fn kind(resource_type: &str) -> Result<Kind, PluginError> {
    match resource_type {
        ASYNC_THING => Ok(Kind::Async),
        NOOP_THING => Ok(Kind::Noop),
        CLOUD_THING => Ok(Kind::Cloud),
        other => Err(PluginError::invalid(format!(
            "unknown resource type `{other}`; the testbed manages {ASYNC_THING}, {NOOP_THING} and {CLOUD_THING}"
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
fn thing(kind: Kind, properties: PropertyMap) -> Result<(String, PropertyMap), PluginError> {
    let name = match properties.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => return Err(PluginError::invalid("`name` must be a non-empty string")),
    };
    let mut stored = properties;
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
            resource(CLOUD_THING)
                .describe(
                    "A thing like a cloud API's: ids assigned by the plugin, creates deduplicated \
                     by request id only, taking `create_ms` (target config) on the provider's side",
                )
                .identifier(["name"])
                .field(name())
                .field(field::any("value"))
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
        let (name, stored) = thing(kind, request.properties)?;
        if kind == Kind::Cloud {
            let accepted = self.cloud(&config)?.cloud_create(
                &request.target.name,
                &request.resource_type,
                &name,
                &stored,
                &request.request_id,
                config.create_ms.unwrap_or(0),
            )?;
            // The provider works on it whether or not anyone waits.
            tokio::time::sleep(accepted.remaining()).await;
            return done(cloud::native_id(accepted.id), accepted.properties);
        }
        let key = key(&request.target, &request.resource_type, &name);
        let things = self.things(&config)?;
        self.attachable(&things, &request.target, &stored)?;
        // A retried create (`Again`) answers as the first attempt did.
        if things.create(key, &stored, &request.request_id)? == Created::Exists {
            return Err(PluginError::new(
                ErrorCode::AlreadyExists,
                format!("{} `{name}` already exists", request.resource_type),
            ));
        }
        if kind == Kind::Async && config.polls() > 0 {
            return in_progress(name, polled(0), POLL_AFTER_MS);
        }
        done(name, stored)
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        let config = self.begin(&request.target, Operation::Read).await?;
        if kind(&request.resource_type)? == Kind::Cloud {
            let found = match cloud::row_of(&request.native_id) {
                Some(id) => self.cloud(&config)?.cloud_get(&request.target.name, id)?,
                None => None,
            };
            return match found {
                Some(properties) => done(request.native_id, properties),
                None => Err(cloud::not_found(&request.resource_type, &request.native_id)),
            };
        }
        let key = key(&request.target, &request.resource_type, &request.native_id);
        match self.things(&config)?.get(&key)? {
            Some(properties) => done(request.native_id, properties),
            None => Err(not_found(&request.resource_type, &request.native_id)),
        }
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        let config = self.begin(&request.target, Operation::Update).await?;
        let kind = kind(&request.resource_type)?;
        let (name, stored) = thing(kind, request.properties)?;
        if kind == Kind::Cloud {
            let updated = match cloud::row_of(&request.native_id) {
                Some(id) => self
                    .cloud(&config)?
                    .cloud_update(&request.target.name, id, &stored)?,
                None => false,
            };
            if !updated {
                return Err(cloud::not_found(&request.resource_type, &request.native_id));
            }
            return done(request.native_id, stored);
        }
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
        let things = self.things(&config)?;
        self.attachable(&things, &request.target, &stored)?;
        if !things.update(&key, &stored)? {
            return Err(not_found(&request.resource_type, &name));
        }
        done(name, stored)
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let config = self.begin(&request.target, Operation::Delete).await?;
        let kind = kind(&request.resource_type)?;
        if kind == Kind::Cloud {
            let removed = match cloud::row_of(&request.native_id) {
                Some(id) => self
                    .cloud(&config)?
                    .cloud_remove(&request.target.name, id)?,
                None => false,
            };
            if !removed {
                return Err(cloud::not_found(&request.resource_type, &request.native_id));
            }
            return deleted(request.native_id);
        }
        let key = key(&request.target, &request.resource_type, &request.native_id);
        let things = self.things(&config)?;
        if things.get(&key)?.is_none() {
            return Err(not_found(&request.resource_type, &request.native_id));
        }
        if kind == Kind::Noop && self.any_attached.load(Ordering::Relaxed) {
            if let Some((by, uses)) = things.user_of(&request.target.name, &request.native_id)? {
                return Err(PluginError::new(
                    ErrorCode::ResourceConflict,
                    format!(
                        "`{}` cannot be deleted: `{by}` {uses} it",
                        request.native_id
                    ),
                ));
            }
        }
        if kind == Kind::Async && config.polls() > 0 {
            // Removed when the last status poll reports success.
            return in_progress(request.native_id, polled(0), POLL_AFTER_MS);
        }
        things.remove(&key)?;
        deleted(request.native_id)
    }

    async fn status(&self, request: StatusRequest) -> OpResult {
        let config = self.begin(&request.target, Operation::Status).await?;
        if kind(&request.resource_type)? != Kind::Async {
            return Err(PluginError::invalid(format!(
                "{} operations answer when they finish; there is nothing to poll",
                request.resource_type
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
        let things = self.things(&config)?;
        match request.operation {
            Operation::Create => match things.get(&key)? {
                Some(properties) => done(request.native_id, properties),
                None => Err(not_found(&request.resource_type, &request.native_id)),
            },
            Operation::Delete => {
                things.remove(&key)?;
                deleted(request.native_id)
            }
            other => Err(PluginError::invalid(format!(
                "{ASYNC_THING} has no asynchronous `{other}` to poll"
            ))),
        }
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let config = self.begin(&request.target, Operation::List).await?;
        let kind = kind(&request.resource_type)?;
        let listed_now = match kind {
            // A target without a store has no cloud: nothing to list
            // (discovery lists every type of every target).
            Kind::Cloud => match self.store(&config)? {
                Some(cloud) => cloud.cloud_list(&request.target.name, &request.resource_type)?,
                None => Vec::new(),
            },
            _ => self
                .things(&config)?
                .list(&request.target.name, &request.resource_type)?,
        };
        let mut things: Vec<ListedResource> = listed_now
            .into_iter()
            .map(|(native_id, properties)| ListedResource {
                native_id,
                properties,
            })
            .collect();
        if kind != Kind::Cloud {
            things.extend(listed(&config));
        }
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
