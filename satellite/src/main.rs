//! `orrery-satellite`: supervises plugin processes and serves their
//! operations over NATS until SIGTERM/SIGINT, then drains and exits 0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use orrery_hub as hub;
use orrery_plugin_sdk::telemetry::{self, MetricsReader, Telemetry, TelemetryConfig};
use orrery_satellite::held_targets::HeldTargets;
use orrery_satellite::hub::serve;
use orrery_satellite::nats_client::{self, NatsClientConfig};
use orrery_satellite::plugin_host::{PluginHost, PluginSpec};
use orrery_satellite::relay::{self, RelayConfig};
use serde::{Deserialize, Serialize};

// Every relayed request allocates in one task and is freed in another,
// often on the other worker thread: with glibc's arenas each such free
// takes a lock the allocating thread holds, a futex storm under load.
// mimalloc frees across threads without one (BENCHMARKS.md, relay round 9).
#[global_allocator]
static ALLOCATOR: orrery_plugin_sdk::Allocator = orrery_plugin_sdk::Allocator;

/// Serve Orrery plugins over NATS.
///
/// Settings come from, in increasing priority: defaults, the TOML file given
/// by --config, environment variables prefixed ORRERY_SATELLITE_ (for
/// example ORRERY_SATELLITE_NATS_URL), and flags.
#[derive(Parser, Debug, Serialize, Deserialize, Default)]
#[command(name = "orrery-satellite", version)]
struct Flags {
    /// TOML configuration file.
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// NATS server URL(s), comma-separated. Default nats://127.0.0.1:4222.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    nats_url: Option<String>,
    /// NATS credentials file (JWT + nkey seed).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    nats_creds: Option<PathBuf>,
    /// NATS nkey seed file.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    nats_nkey: Option<PathBuf>,
    /// CA certificate (PEM) to verify the NATS server's TLS certificate.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS; needs --tls-key.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key: Option<PathBuf>,
    /// This satellite's id in service info. Default: the host name and pid.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// A plugin binary to run; repeat for several.
    #[arg(long = "plugin")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    plugins: Vec<PathBuf>,
    /// Pass this variable of the satellite's environment on to the plugins
    /// (which start with a cleared environment but for PATH, HOME, USER,
    /// LANG, LC_*, TZ, TMPDIR, RUST_LOG, OTEL_* and ORRERY_PLUGIN_*); repeat
    /// for several. Config key `plugin_env` (a list).
    #[arg(long = "plugin-env", value_name = "NAME")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    plugin_env: Vec<String>,
    /// Serve only this target; repeat for several. Default: every target.
    #[arg(long = "target")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    targets: Vec<String>,
    /// Directory of secret files that `${file:NAME}` in a stack's target
    /// configuration may read (plain file names only). Without it, such
    /// references are refused. The operator's own `[target_config]` in the
    /// --config file may name any file.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    secrets_dir: Option<PathBuf>,
    /// A variable of this host's environment that `${env:NAME}` in a
    /// stack's target configuration may read; repeat for several. Config
    /// key `secret_env` (a list).
    #[arg(long = "secret-env", value_name = "NAME")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    secret_env: Vec<String>,
    /// Most requests in flight per plugin (default 256).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_in_flight: Option<usize>,
    /// Threads that relay: 0 (the default) runs the satellite on one
    /// thread; N runs N worker threads. One thread relays tens of thousands
    /// of operations a second and wakes no other thread per request
    /// (BENCHMARKS.md, relay round 9); raise it when one core is not enough.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_threads: Option<usize>,
    /// Seconds a drain waits for in-flight requests (default 30).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    drain_grace_secs: Option<u64>,
    /// Seconds a plugin may take to announce itself (default 10).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    handshake_timeout_secs: Option<u64>,
    /// Log JSON lines instead of text.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    log_json: bool,
    /// OTLP/HTTP endpoint to export traces and metrics to, e.g.
    /// http://collector:4318. Default: OTEL_EXPORTER_OTLP_ENDPOINT; unset
    /// exports nothing.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    otlp_endpoint: Option<String>,
    /// Share of new traces recorded when exporting, 0 to 1. Default:
    /// OTEL_TRACES_SAMPLER_ARG, else 1.
    #[arg(long, value_parser = telemetry::parse_ratio)]
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_sampling: Option<f64>,
    /// Serve /healthz, /readyz and /metrics on this port. Off unless set.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    health_port: Option<u16>,
    /// Address the health port binds (default 127.0.0.1, this host only;
    /// 0.0.0.0 or :: for probes and scrapes from other hosts or pods).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    health_addr: Option<std::net::IpAddr>,
    /// Install a plugin from the hub and serve it: NAME@REQ, e.g.
    /// local@^1.2 (Cargo requirements; `=1.2.3` is exact); repeat for several.
    #[arg(long = "install", value_name = "NAME@REQ")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    installs: Vec<String>,
    /// NATS URL of the hub (JetStream buckets orrery-hub-index and
    /// orrery-hub-artifacts). Default: the satellite's own NATS connection.
    #[arg(long, conflicts_with = "hub_dir")]
    #[serde(skip_serializing_if = "Option::is_none")]
    hub_url: Option<String>,
    /// A directory-backed hub (embedded mode, air-gapped sites) instead of JetStream.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    hub_dir: Option<PathBuf>,
    /// A publisher public key file to trust, with the plugin names it may
    /// sign: FILE=local,acme-* (`*` matches any run of characters). A bare
    /// FILE (the old form) trusts it for every name, with a warning. Repeat
    /// for several. Nothing is trusted unless given here.
    #[arg(long = "trusted-key", value_name = "FILE[=PLUGIN,...]")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    trusted_keys: Vec<hub::TrustedKeySpec>,
    /// Where verified plugin binaries are cached, by digest.
    /// Default: $XDG_CACHE_HOME/orrery/plugins or ~/.cache/orrery/plugins.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_dir: Option<PathBuf>,
    /// Lock file pinning the installed versions and digests; read at start,
    /// written with what was resolved, watched: a changed entry rolls that
    /// plugin to the pinned version.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_file: Option<PathBuf>,
    /// Seconds between checks of the lock file for changes (default 2).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_poll_secs: Option<u64>,
    /// Let a lock file change move a plugin to a lower or a yanked version
    /// (logged at WARN). Without it such a change is refused and the
    /// running version keeps serving.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_downgrade: bool,
    /// Confirm receipt of each request to the primary that asks for it
    /// (`Orrery-Receipt-By`), so primaries steer work away from a
    /// satellite that stops taking it (hung, partitioned, killed). Each
    /// request is then answered with two messages: the NATS identity needs
    /// `allow_responses` max 2 (deploy/nats, gen-nkeys.py's default).
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    receipts: bool,
}

#[derive(Debug, Clone, Deserialize)]
struct Settings {
    #[serde(default = "default_url")]
    nats_url: String,
    nats_creds: Option<PathBuf>,
    nats_nkey: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    id: Option<String>,
    #[serde(default)]
    plugins: Vec<PathBuf>,
    #[serde(default)]
    plugin_env: Vec<String>,
    #[serde(default)]
    targets: Vec<String>,
    /// Operator-held configuration per target (`[target_config.NAME]` in
    /// the config file), added to each request on this host.
    #[serde(default)]
    target_config: std::collections::BTreeMap<String, orrery_schema::PropertyMap>,
    /// Which stacks may use a target, and which of its fields stay open
    /// while it holds a credential (`[target_access.NAME]`).
    #[serde(default)]
    target_access: std::collections::BTreeMap<String, orrery_satellite::held_targets::Access>,
    secrets_dir: Option<PathBuf>,
    #[serde(default)]
    secret_env: Vec<String>,
    #[serde(default = "default_in_flight")]
    max_in_flight: usize,
    #[serde(default)]
    worker_threads: usize,
    #[serde(default = "default_grace")]
    drain_grace_secs: u64,
    #[serde(default = "default_handshake")]
    handshake_timeout_secs: u64,
    #[serde(default)]
    log_json: bool,
    otlp_endpoint: Option<String>,
    trace_sampling: Option<f64>,
    health_port: Option<u16>,
    #[serde(default = "default_health_addr")]
    health_addr: std::net::IpAddr,
    #[serde(default)]
    installs: Vec<String>,
    hub_url: Option<String>,
    hub_dir: Option<PathBuf>,
    #[serde(default)]
    trusted_keys: Vec<hub::TrustedKeySpec>,
    cache_dir: Option<PathBuf>,
    lock_file: Option<PathBuf>,
    #[serde(default = "default_lock_poll")]
    lock_poll_secs: u64,
    #[serde(default)]
    allow_downgrade: bool,
    #[serde(default)]
    receipts: bool,
}

/// What this host's operator holds for its targets; logged by field name,
/// never by value.
fn held_targets(settings: &Settings) -> std::sync::Arc<HeldTargets> {
    let mut held = HeldTargets::default().expose_env(settings.secret_env.iter().cloned());
    if let Some(dir) = &settings.secrets_dir {
        held = held.secrets_dir(dir);
    }
    for (target, config) in &settings.target_config {
        if !settings.targets.is_empty() && !settings.targets.contains(target) {
            tracing::warn!(%target, "configuration held for a target this satellite does not serve (--target)");
        }
        let fields: Vec<&str> = config.keys().map(String::as_str).collect();
        tracing::info!(%target, ?fields, "holding target configuration");
        if !settings.target_access.contains_key(target) {
            tracing::warn!(%target, "configuration held for a target every stack may use: name the stacks in [target_access.{target}] stacks = [...]");
        }
        held = held.hold(target.clone(), config.clone());
    }
    for (target, access) in &settings.target_access {
        tracing::info!(%target, stacks = ?access.stacks, open_fields = ?access.open_fields, "target restricted to stacks");
        held = held.restrict(target.clone(), access.clone());
    }
    std::sync::Arc::new(held)
}

fn default_url() -> String {
    "nats://127.0.0.1:4222".into()
}
fn default_health_addr() -> std::net::IpAddr {
    std::net::Ipv4Addr::LOCALHOST.into()
}
fn default_in_flight() -> usize {
    256
}
fn default_grace() -> u64 {
    30
}
fn default_handshake() -> u64 {
    10
}
fn default_lock_poll() -> u64 {
    2
}

/// One thread unless `workers` asks for more: the relay, the NATS
/// connection and the plugin links then hand work to each other without a
/// thread wake-up (plugin processes run on one thread by default too).
fn runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
    }
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    let mut figment = Figment::new();
    if let Some(path) = &flags.config {
        figment = figment.merge(Toml::file_exact(path));
    }
    let settings: Settings = match figment
        .merge(Env::prefixed("ORRERY_SATELLITE_"))
        .merge(Serialized::defaults(&flags))
        .extract()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let telemetry = match init_telemetry(&settings) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: invalid telemetry configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime(settings.worker_threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(settings, telemetry.metrics())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(settings: Settings, metrics: MetricsReader) -> anyhow::Result<()> {
    // Handlers first: from here on a signal drains rather than kills. While
    // the satellite is still starting it abandons the start instead, as
    // nothing is in flight yet (a plugin that never finishes its handshake
    // must not make the process unstoppable).
    let signal = shutdown_signal();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        signal.await;
        let _ = stop_tx.send(true);
    });
    let stopped = || {
        let mut stop = stop_rx.clone();
        async move { orrery_satellite::plugin_host::stopped(&mut stop).await }
    };
    anyhow::ensure!(
        !settings.plugins.is_empty() || !settings.installs.is_empty(),
        "no plugins configured: pass --plugin PATH or --install NAME@REQ"
    );
    // Parse hub settings before starting anything, so mistakes fail fast.
    let requirements = settings
        .installs
        .iter()
        .map(|s| s.parse::<hub::Requirement>())
        .collect::<Result<Vec<_>, _>>()?;
    let trusted = hub::TrustedKeys::load_specs(&settings.trusted_keys)?;
    if !requirements.is_empty() && trusted.is_empty() {
        tracing::warn!("no --trusted-key given: every hub package will be refused as untrusted");
    }
    let held = held_targets(&settings);
    let start = async {
        // All at once: a plugin slow to announce itself does not hold up
        // the others. One that fails its first handshake is served as
        // unhealthy and retried (PluginHost::start_or_retry); the others
        // serve regardless.
        let starts = settings.plugins.iter().map(|path| {
            let mut spec = PluginSpec::new(path);
            spec.handshake_timeout = Duration::from_secs(settings.handshake_timeout_secs);
            spec.env_allow = settings.plugin_env.clone();
            spec.held = held.clone();
            PluginHost::start_or_retry(spec)
        });
        let mut hosts = Vec::new();
        let mut failures = Vec::new();
        for (path, started) in settings
            .plugins
            .iter()
            .zip(futures::future::join_all(starts).await)
        {
            match started {
                Ok(host) if host.is_announced() => {
                    tracing::info!(plugin = %host.name(), version = %host.announcement().version, "plugin ready");
                    hosts.push(host);
                }
                Ok(host) => {
                    let reason = host.status().reason.unwrap_or_default();
                    failures.push(format!(
                        "plugin `{}` ({}): {reason}",
                        host.name(),
                        path.display()
                    ));
                    hosts.push(host);
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "plugin cannot be served");
                    failures.push(format!("{}: {e}", path.display()));
                }
            }
        }
        // Nothing to serve at all: a misconfiguration, reported by exiting
        // rather than by a satellite that only ever answers unhealthy.
        if settings.installs.is_empty() && !hosts.iter().any(PluginHost::is_announced) {
            for host in &hosts {
                host.stop(Duration::from_secs(1)).await;
            }
            anyhow::bail!("no plugin could be started:\n  {}", failures.join("\n  "));
        }
        let client = connect(&settings).await?;
        anyhow::Ok((hosts, client))
    };
    let (hosts, client) = tokio::select! {
        started = start => started?,
        () = stopped() => {
            tracing::info!("stopped while starting; exiting");
            return Ok(());
        }
    };
    if let Some(port) = settings.health_port {
        let addr = std::net::SocketAddr::new(settings.health_addr, port);
        let (client, hosts) = (client.clone(), hosts.clone());
        tokio::spawn(async move {
            if let Err(e) = orrery_satellite::health::serve(
                addr,
                client,
                hosts,
                Some(metrics),
                std::future::pending(),
            )
            .await
            {
                tracing::error!(%addr, error = %e, "health endpoints failed");
            }
        });
    }
    let id = settings.id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    let config = RelayConfig {
        satellite_id: id,
        targets: settings.targets.clone(),
        max_in_flight: settings.max_in_flight,
        drain_grace: Duration::from_secs(settings.drain_grace_secs),
        receipts: settings.receipts,
        ..RelayConfig::default()
    };
    if requirements.is_empty() {
        relay::serve(client, hosts, config, stopped()).await?;
        tracing::info!("drained; exiting");
        return Ok(());
    }
    let hub = start_hub_plugins(&settings, &client, &config, requirements, trusted);
    let hub = tokio::select! {
        hub = hub => hub,
        () = stopped() => {
            tracing::info!("stopped while installing from the hub; exiting");
            return Ok(());
        }
    };
    let mut installed = match hub {
        Ok(installed) => Some(installed),
        // Without a reachable hub, the --plugin plugins are still served.
        Err(e) if !hosts.is_empty() => {
            eprintln!("error: cannot install from the hub: {e:#}");
            None
        }
        Err(e) => return Err(e),
    };
    if let Some(installed) = &installed {
        for (requirement, error) in installed.failures() {
            eprintln!("error: {requirement}: {error}");
        }
    }
    anyhow::ensure!(
        hosts.iter().any(PluginHost::is_announced)
            || installed.as_ref().is_some_and(|i| !i.running().is_empty()),
        "no plugin could be started"
    );
    let local = async {
        if hosts.is_empty() {
            return Ok(());
        }
        relay::serve(client.clone(), hosts, config, stopped()).await
    };
    let from_hub = async {
        if let Some(installed) = installed.as_mut() {
            installed.watch(stopped()).await;
        }
        if let Some(installed) = installed.take() {
            installed.shutdown().await;
        }
    };
    let (local, ()) = tokio::join!(local, from_hub);
    local?;
    tracing::info!("drained; exiting");
    Ok(())
}

/// Opens the hub, installs the requirements and serves them.
async fn start_hub_plugins(
    settings: &Settings,
    client: &async_nats::Client,
    relay: &RelayConfig,
    requirements: Vec<hub::Requirement>,
    trusted: hub::TrustedKeys,
) -> anyhow::Result<serve::HubPlugins> {
    let hub = match (&settings.hub_dir, &settings.hub_url) {
        (Some(dir), _) => hub::Hub::dir(dir)?,
        (None, Some(url)) => {
            let hub_settings = Settings {
                nats_url: url.clone(),
                ..settings.clone()
            };
            hub::Hub::nats_existing(connect(&hub_settings).await?).await?
        }
        (None, None) => hub::Hub::nats_existing(client.clone()).await?,
    };
    let cache_dir = settings.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let installer = hub::Installer::new(hub, trusted, cache_dir);
    let mut serve_config = serve::ServeConfig::new(requirements);
    serve_config.lock_file = settings.lock_file.clone();
    serve_config.lock_poll = Duration::from_secs(settings.lock_poll_secs.max(1));
    serve_config.relay = relay.clone();
    serve_config.handshake_timeout = Duration::from_secs(settings.handshake_timeout_secs);
    serve_config.allow_downgrade = settings.allow_downgrade;
    serve_config.plugin_env = settings.plugin_env.clone();
    serve_config.held = held_targets(settings);
    Ok(serve::HubPlugins::start(client.clone(), installer, serve_config).await?)
}

/// `$XDG_CACHE_HOME/orrery/plugins`, else `~/.cache/orrery/plugins`, else
/// a directory under the system's temporary directory.
fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("orrery").join("plugins")
}

async fn connect(settings: &Settings) -> anyhow::Result<async_nats::Client> {
    let config = NatsClientConfig {
        urls: settings.nats_url.clone(),
        creds: settings.nats_creds.clone(),
        nkey: settings.nats_nkey.clone(),
        tls_ca: settings.tls_ca.clone(),
        tls_client: settings.tls_cert.clone().zip(settings.tls_key.clone()),
    };
    Ok(
        nats_client::connect(&config, "orrery-satellite", |options| {
            options
                .retry_on_initial_connect()
                .event_callback(|event| async move {
                    tracing::info!(%event, "NATS connection event");
                })
        })
        .await?,
    )
}

/// Installs the SIGTERM/SIGINT handlers now, not at the first poll, and
/// returns the future that completes on the first of them: until a handler
/// is installed, a signal kills the process undrained.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = handlers else {
            tracing::error!("cannot install signal handlers; SIGTERM will not drain");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
    }
}

fn init_telemetry(settings: &Settings) -> anyhow::Result<Telemetry> {
    let config = TelemetryConfig::from_env("orrery-satellite")?.with_overrides(
        settings.otlp_endpoint.as_deref(),
        settings.trace_sampling,
        settings.log_json,
    );
    Ok(telemetry::init(&config)?)
}
