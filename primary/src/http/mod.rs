//! The primary's HTTP API (JSON), served by `orrery primary`.
//!
//! Every command goes through the command service (`crate::service`), as
//! the CLI's do; this layer turns requests into documents, service errors
//! into status codes (`error.rs`), and runs commands in the background. Applies and destroys run in the background as
//! commands, one at a time per stack ([`commands::Commands`]); their
//! progress is read back from the state store (SQLite or PostgreSQL). Each
//! command runs under its lease; commands a stopped primary left running
//! are resumed (`resume.rs`), and discovery and drift sync run on intervals
//! (`background.rs`). Every endpoint is described in `docs/http-api.md`.
//!
//! - `GET  /healthz`, `GET /readyz`: liveness, readiness (the store answers,
//!   NATS is connected in distributed mode).
//! - `GET  /metrics`: Prometheus text format.
//! - `POST /v1/stacks/plan`, `POST /v1/stacks/apply`, `POST /v1/stacks/{name}/destroy`
//! - `GET  /v1/commands`, `GET /v1/commands/{id}`, `POST /v1/commands/{id}/cancel`
//! - `GET  /v1/commands/{id}/events`: server-sent events (`events.rs`)
//! - `GET  /v1/stacks`, `GET /v1/resources`, `GET /v1/targets`, `GET /v1/plugins`
//! - `GET  /v1/audit`: the audit log in the store (`audit.rs`), admins only
//! - `/ui/...`: the web dashboard (`ui/`), signed in with a session cookie
//!
//! Errors are `{"error": "..."}` with a fitting status code. Every
//! endpoint but health and readiness needs a principal (`auth.rs`,
//! `docs/security.md`).

mod audit;
pub mod auth;
mod background;
mod body;
pub use body::InFlightLimits;
mod commands;
mod error;
mod events;
mod extract;
mod handlers;
mod listen;
pub(crate) mod pages;
mod resume;
mod stacks;
mod ui;
mod views;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;

pub use error::ApiError;
use error::ApiResult;
/// The log target of the audit trail: who started or canceled which
/// command, and every 401 and 403 with whom or why. On at `info` by
/// default, whatever else is filtered out. The same events are recorded in
/// the state store (`audit.rs`, `GET /v1/audit`).
pub const AUDIT: &str = "orrery_primary::audit";

pub use crate::state::DEFAULT_AUDIT_RETENTION;
pub use listen::{
    serve, tls_config, ServeOptions, TlsError, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
pub use pages::{DEFAULT_LIMIT, DEFAULT_MAX_LIST_ITEMS, MAX_LIMIT};
pub use ui::utc;

use crate::apply::Options;
use crate::lease::LeaseConfig;
use crate::scheduler::{RateRegistry, SharedRateLimiter};
use crate::service::{Engine, PluginPool, Service, ServiceConfig};
use crate::state::{self, Store, StoreError};

/// Default largest request body: 16 MiB, room for stacks of tens of
/// thousands of resources.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Directory of the embedded state store.
    pub data_dir: PathBuf,
    /// PostgreSQL URL of the state store; without it, the embedded store
    /// in `data_dir`.
    pub database_url: Option<String>,
    /// Where plugin binaries `orrery-plugin-<name>` are looked for, in order.
    pub plugin_search: Vec<PathBuf>,
    /// The value of `${stack_dir}` for documents whose request names none.
    pub stack_dir: PathBuf,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// The most items an unpaged list (`all=true`) returns; a longer one is
    /// refused (400, `too_many_items`).
    pub max_list_items: usize,
    /// How commands run.
    pub options: Options,
    /// Distributed mode: plugins are served by satellites over this NATS
    /// connection instead of running in this process.
    pub nats: Option<async_nats::Client>,
    /// With `nats`: the hub and the publisher keys this primary trusts,
    /// so satellites' schemas are held to their signed packages
    /// (`service::hub_schemas`). `None`: schemas as the satellites agree.
    pub hub_schemas: Option<Arc<crate::service::hub_schemas::HubSchemas>>,
    /// This process's metrics, served on `GET /metrics` when set.
    pub metrics: Option<orrery_plugin_sdk::telemetry::MetricsReader>,
    /// Discovery of the recorded targets' unmanaged resources every so
    /// often (never when `None`).
    pub discover_every: Option<Duration>,
    /// Drift sync of every stack every so often (never when `None`).
    pub drift_every: Option<Duration>,
    /// Who this primary is in command leases, and their time to live.
    pub lease: LeaseConfig,
    /// Who may call the API.
    pub auth: Arc<auth::Auth>,
    /// How many audit records the store keeps (the newest).
    pub audit_retention: u64,
    /// How many bytes of request bodies are received at once.
    pub in_flight_bodies: body::InFlightLimits,
}

/// What every request shares.
struct Shared {
    config: Config,
    /// The service's store, for the listings.
    store: Store,
    service: Service,
    commands: commands::Commands,
    /// Interrupted commands already logged as not resumable here.
    warned: Mutex<HashSet<String>>,
    /// Turns true at shutdown: the background jobs stop.
    stop: watch::Sender<bool>,
    /// The dashboard's sessions.
    ui_sessions: ui::session::Sessions,
    /// The latest commands' plans, for the dashboard.
    ui_plans: ui::Plans,
    /// The kept answer of `GET /v1/stacks`.
    stacks: stacks::StacksCache,
    /// The embedded store's serving lock, held while this primary lives.
    _serving: Option<state::ServeLock>,
    /// This primary's shares of the targets' rate limits.
    rates: SharedRateLimiter,
    /// The audit log's writer.
    audit: audit::Audit,
    /// The request bodies being received.
    bodies: body::InFlight,
}

/// A primary serving the HTTP API. Cheap to clone.
#[derive(Clone)]
pub struct Primary {
    shared: Arc<Shared>,
}

impl Primary {
    /// Opens the state store; plugins start later, when stacks need them.
    /// Call it on a tokio runtime (the audit log's writer starts on it).
    pub fn open(config: Config) -> Result<Self, StoreError> {
        let (store, serving) = match &config.database_url {
            Some(url) => (state::open(url)?, None),
            None => {
                // Opened first: it creates the directory the lock is in.
                let store = state::open_dir(&config.data_dir)?;
                (store, Some(state::serve_lock(&config.data_dir)?))
            }
        };
        let (plugins, engine) = match &config.nats {
            Some(client) => {
                let pool = PluginPool::distributed(client.clone());
                let pool = match &config.hub_schemas {
                    Some(hub) => pool.with_hub_schemas(hub.clone()),
                    None => pool,
                };
                (pool, Engine::Nats)
            }
            None => (
                PluginPool::new(config.plugin_search.clone()),
                Engine::Embedded,
            ),
        };
        // Every primary on this store takes an equal share of a target's
        // limit with the others that want it now (`service::rates`).
        let rates = SharedRateLimiter::new();
        let plugins = plugins.with_rates(RateRegistry::new(rates.clone()));
        let service = Service::new(
            store.clone(),
            plugins,
            ServiceConfig {
                options: config.options.clone(),
                lease: config.lease.clone(),
                engine,
            },
        );
        let audit = audit::Audit::start(store.clone(), config.audit_retention);
        Ok(Primary {
            shared: Arc::new(Shared {
                bodies: body::InFlight::new(config.in_flight_bodies),
                config,
                audit,
                store,
                service,
                commands: commands::Commands::default(),
                warned: Mutex::new(HashSet::new()),
                stop: watch::channel(false).0,
                ui_sessions: ui::session::Sessions::default(),
                ui_plans: ui::Plans::default(),
                stacks: stacks::StacksCache::default(),
                _serving: serving,
                rates,
            }),
        })
    }

    /// Starts the background jobs: resuming interrupted commands (now, then
    /// every lease time to live), and discovery and drift sync at their
    /// configured intervals. They stop at [`Primary::shutdown`].
    pub fn start_background(&self) {
        let stop = self.shared.stop.subscribe();
        tokio::spawn(background::run(self.shared.clone(), stop));
        tokio::spawn(crate::service::rates::share(
            self.shared.rates.clone(),
            self.shared.store.clone(),
            self.shared.config.lease.owner.to_string(),
            self.shared.stop.subscribe(),
        ));
    }

    /// The routes: the API behind [`auth::guard`], the dashboard (`/ui`)
    /// behind its session cookie.
    pub fn router(&self) -> Router {
        let api = Router::new()
            .route("/healthz", get(handlers::healthz))
            .route("/readyz", get(handlers::readyz))
            .route("/metrics", get(handlers::metrics))
            .route("/v1/stacks", get(stacks::stacks_handler))
            .route("/v1/stacks/plan", post(handlers::plan_handler))
            .route("/v1/stacks/apply", post(handlers::apply_handler))
            .route("/v1/stacks/{name}/destroy", post(handlers::destroy_handler))
            .route("/v1/stacks/{name}/outputs", get(handlers::outputs_handler))
            .route("/v1/commands", get(handlers::commands_handler))
            .route("/v1/commands/{id}", get(handlers::command_handler))
            .route("/v1/commands/{id}/cancel", post(handlers::cancel_handler))
            .route("/v1/commands/{id}/events", get(events::events_handler))
            .route("/v1/resources", get(handlers::resources_handler))
            .route("/v1/targets", get(handlers::targets_handler))
            .route("/v1/plugins", get(handlers::plugins_handler))
            .route("/v1/audit", get(audit::audit_handler))
            .fallback(handlers::not_found)
            .method_not_allowed_fallback(handlers::method_not_allowed)
            // Inside authentication: the body's bytes are counted for its
            // principal.
            .layer(axum::middleware::from_fn_with_state(
                self.shared.clone(),
                body::in_flight,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.shared.config.auth.clone(),
                auth::guard,
            ));
        ui::routes(self.shared.clone())
            .merge(api)
            .layer(axum::middleware::from_fn_with_state(
                self.shared.clone(),
                stacks::invalidate_on_writes,
            ))
            .layer(DefaultBodyLimit::max(self.shared.config.max_body_bytes))
            .layer(axum::middleware::from_fn_with_state(
                self.shared.clone(),
                body::declared_length,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.shared.audit.clone(),
                audit::refusals,
            ))
            .layer(CatchPanicLayer::custom(panicked))
            .with_state(self.shared.clone())
    }

    /// Stops taking commands, cancels the running ones (nothing new starts,
    /// operations in flight finish and are recorded), waits for them at
    /// most `grace`, then stops the plugins.
    pub async fn shutdown(&self, grace: Duration) {
        self.shared.stop.send_replace(true);
        let left = self.shared.commands.shutdown(grace).await;
        if left > 0 {
            tracing::warn!(
                commands = left,
                "commands still running at shutdown; their records say `running`"
            );
        }
        self.shared.service.shutdown().await;
    }
}

/// Runs blocking work (the store) off the async threads.
async fn blocking<T, F>(f: F) -> ApiResult<T>
where
    F: FnOnce() -> ApiResult<T> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f).await?
}

fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::internal("internal error").into_response()
}

#[cfg(test)]
mod tests;
