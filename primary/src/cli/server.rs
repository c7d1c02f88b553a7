//! `orrery primary`: run the primary server (HTTP API, embedded mode).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use orrery_bus::held_targets::HeldTargets;
use orrery_plugin_sdk::telemetry::MetricsReader;
use orrery_primary::apply::Options;
use orrery_primary::http::{self, Config, Primary, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_LIST_ITEMS};
use orrery_primary::lease::LeaseConfig;
use orrery_primary::nats::{connect, NatsAuth};
use orrery_primary::service::plugin_search_path;

use super::duration::parse_duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to serve the HTTP API on. Port 0 picks a free port; the
    /// address is printed on stdout either way.
    #[arg(long, env = "ORRERY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory of the embedded state store.
    #[arg(long, env = "ORRERY_DATA_DIR", default_value = ".orrery")]
    pub data_dir: PathBuf,
    /// PostgreSQL URL of the state store (`postgres://…`); without it the
    /// embedded store in --data-dir is used.
    #[arg(long, env = "ORRERY_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Directory holding plugin binaries `orrery-plugin-<name>` (also searched:
    /// $ORRERY_PLUGIN_DIR, the directory of `orrery`, PATH). Plugins start
    /// when a stack first needs them and keep running.
    #[arg(long)]
    pub plugin_dir: Option<PathBuf>,
    /// Pass this variable of the environment on to the plugins (which start
    /// with a cleared environment but for PATH, HOME, USER, LANG, LC_*, TZ,
    /// TMPDIR, RUST_LOG, OTEL_* and ORRERY_PLUGIN_*); repeat for several.
    #[arg(
        long = "plugin-env",
        value_name = "NAME",
        env = "ORRERY_PLUGIN_ENV",
        value_delimiter = ','
    )]
    pub plugin_env: Vec<String>,
    /// Directory of secret files that `${file:NAME}` in a target's
    /// configuration may read when this server runs the plugin itself
    /// (plain file names only; without it such references are refused).
    /// Through satellites, each satellite resolves them with its own.
    #[arg(long, env = "ORRERY_SECRETS_DIR")]
    pub secrets_dir: Option<PathBuf>,
    /// A variable of this server's environment that `${env:NAME}` in a
    /// target's configuration may read (in-process plugins); repeat for
    /// several.
    #[arg(
        long = "secret-env",
        value_name = "NAME",
        env = "ORRERY_SECRET_ENV",
        value_delimiter = ','
    )]
    pub secret_env: Vec<String>,
    /// The value of `${stack_dir}` in documents whose request names none
    /// (default: the working directory).
    #[arg(long, env = "ORRERY_STACK_DIR")]
    pub stack_dir: Option<PathBuf>,
    /// Largest request body in bytes (413 beyond).
    #[arg(long, env = "ORRERY_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Most bytes of request bodies received at once, from every client
    /// together (503 and `Retry-After` beyond).
    #[arg(long, env = "ORRERY_MAX_BODY_BYTES_IN_FLIGHT", default_value_t = http::InFlightLimits::default().total)]
    pub max_body_bytes_in_flight: usize,
    /// Most bytes of request bodies received at once from one principal
    /// (429 and `Retry-After` beyond).
    #[arg(long, env = "ORRERY_MAX_PRINCIPAL_BODY_BYTES", default_value_t = http::InFlightLimits::default().per_principal)]
    pub max_principal_body_bytes: usize,
    /// The most items an unpaged list (`?all=true` on `GET /v1/resources`,
    /// `GET /v1/commands/{id}`) returns; a longer one is refused (400,
    /// `too_many_items`) and must be paged.
    #[arg(long, env = "ORRERY_MAX_LIST_ITEMS", default_value_t = DEFAULT_MAX_LIST_ITEMS)]
    pub max_list_items: usize,
    /// How many audit records the state store keeps (the newest; older
    /// ones are pruned as new ones are written). See `GET /v1/audit`.
    #[arg(long, env = "ORRERY_AUDIT_RETENTION", default_value_t = http::DEFAULT_AUDIT_RETENTION,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub audit_retention: u64,
    /// Most operations in flight at once, per command.
    #[arg(long, env = "ORRERY_CONCURRENCY", default_value_t = 64)]
    pub concurrency: usize,
    /// Override a plugin's announced rate limit: `NAMESPACE/TARGET=RATE[:BURST]`
    /// in requests per second, e.g. `Local/home=50:10`. Repeatable. Every
    /// primary on one store shares it (give each the same overrides).
    #[arg(long = "rate-limit", value_parser = super::stack_cmds::parse_rate_limit)]
    pub rate_limits: Vec<(String, orrery_primary::scheduler::BucketLimit)>,
    /// How long one request to a plugin may take before it counts as lost
    /// (outcome unknown, retried as the policy says), e.g. `60s`.
    #[arg(long, env = "ORRERY_REQUEST_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// On SIGTERM or Ctrl-C: seconds running commands get to finish their
    /// operations in flight (nothing new starts) before the server exits.
    #[arg(long, env = "ORRERY_SHUTDOWN_GRACE", default_value_t = 20)]
    pub shutdown_grace: u64,
    /// Distributed mode: reach plugins through satellites on this NATS
    /// server instead of running them in this process.
    #[arg(long, env = "ORRERY_NATS_URL")]
    pub nats_url: Option<String>,
    #[command(flatten)]
    pub nats_auth: NatsAuth,
    #[command(flatten)]
    pub hub: super::hub::HubTrustArgs,
    /// Discover the unmanaged resources of every recorded target this
    /// often, e.g. `10m` (`0`: never).
    #[arg(long, env = "ORRERY_DISCOVER_EVERY", default_value = "0", value_parser = parse_duration)]
    pub discover_every: Duration,
    /// Check every stack's resources for drift this often, e.g. `5m`
    /// (`0`: never).
    #[arg(long, env = "ORRERY_DRIFT_EVERY", default_value = "0", value_parser = parse_duration)]
    pub drift_every: Duration,
    /// How long the lease on a running command lasts without renewal: how
    /// long another primary sharing the store waits before it resumes the
    /// commands of a primary that stopped answering.
    #[arg(long, env = "ORRERY_LEASE_TTL", default_value = "30s", value_parser = parse_duration)]
    pub lease_ttl: Duration,
    /// Tokens file: `[[principal]]` tables with `name`, `token_sha256`
    /// (hex SHA-256 of the bearer token), `certificates` (client
    /// certificate names) and `roles` (`viewer`, `planner`, `operator`,
    /// `admin`, `metrics`; `role:glob` for some stacks). See
    /// docs/security.md.
    #[arg(long, env = "ORRERY_AUTH_TOKENS")]
    pub auth_tokens: Option<PathBuf>,
    /// Serve the API without authentication (every caller is an admin).
    /// Only on a loopback listen address.
    #[arg(long, env = "ORRERY_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
    /// Names clients reach this server by (`Host`, `Origin`); repeat or
    /// separate with commas. Default: the listen address, plus
    /// `localhost`, `127.0.0.1` and `::1` on loopback.
    #[arg(long, env = "ORRERY_PUBLIC_NAME", value_delimiter = ',')]
    pub public_name: Vec<String>,
    /// How long a client has to send a request's headers, and how long an
    /// idle connection is kept (closed after).
    #[arg(long, env = "ORRERY_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// How long a client has, once its headers are in, to send a
    /// request's whole body (408 and the connection closed beyond).
    #[arg(long, env = "ORRERY_BODY_READ_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub body_read_timeout: Duration,
    /// Most connections served at once; one past it is answered 503 (over
    /// plain HTTP) and closed.
    #[arg(long, env = "ORRERY_MAX_CONNECTIONS", default_value_t = http::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Serve the API over TLS with this certificate chain (PEM); needs
    /// --api-tls-key.
    #[arg(long, env = "ORRERY_API_TLS_CERT", requires = "api_tls_key")]
    pub api_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --api-tls-cert.
    #[arg(long, env = "ORRERY_API_TLS_KEY", requires = "api_tls_cert")]
    pub api_tls_key: Option<PathBuf>,
    /// Verify client certificates against this CA (PEM) and admit those
    /// whose subject CN or DNS name --auth-tokens maps to a principal;
    /// needs --api-tls-cert.
    #[arg(long, env = "ORRERY_TLS_CLIENT_CA", requires = "api_tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

/// `up` or `primary`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `orrery primary`: refuses to start without authentication.
    Primary,
    /// `orrery up`: without a tokens file, generates a token.
    Up,
}

/// Who may call the API, from the flags; for `up` without any, a token
/// generated now and written to the data directory.
fn auth_config(args: &Args, mode: Mode) -> anyhow::Result<http::auth::Auth> {
    use http::auth::{self, Auth, Grant, HostPolicy, Role};
    let hosts = HostPolicy::new(&args.public_name, args.listen.ip());
    if args.insecure_no_auth {
        anyhow::ensure!(
            args.listen.ip().is_loopback(),
            "--insecure-no-auth is only allowed on a loopback listen address, not {}",
            args.listen
        );
        anyhow::ensure!(
            args.auth_tokens.is_none(),
            "--insecure-no-auth and --auth-tokens exclude each other"
        );
        tracing::warn!("serving the HTTP API without authentication (--insecure-no-auth)");
        return Ok(Auth::insecure().with_hosts(hosts));
    }
    let mut config = Auth::new();
    if let Some(path) = &args.auth_tokens {
        config.load_file(path)?;
    }
    if mode == Mode::Up && args.auth_tokens.is_none() {
        let token = auth::generate_token()?;
        let path = auth::write_local_token(&args.data_dir, &token)?;
        config.add_token(
            &format!("local:{}", super::local_user()),
            &token,
            vec![Grant {
                role: Role::Admin,
                stacks: "*".into(),
            }],
        );
        println!("API token written to {}", path.display());
    }
    if args.tls_client_ca.is_some() {
        anyhow::ensure!(
            config.has_certificates(),
            "--tls-client-ca needs --auth-tokens naming certificates (`certificates = [...]`) \
             of principals"
        );
    }
    anyhow::ensure!(
        config.is_configured(),
        "no authentication configured: give --auth-tokens FILE (see docs/security.md), \
         or --insecure-no-auth on a loopback address"
    );
    Ok(config.with_hosts(hosts))
}

pub async fn run(args: Args, mode: Mode, metrics: MetricsReader) -> anyhow::Result<ExitCode> {
    let shutdown = shutdown_signal();
    let auth = std::sync::Arc::new(auth_config(&args, mode)?);
    let tls = match (&args.api_tls_cert, &args.api_tls_key) {
        (Some(cert), Some(key)) => {
            Some(http::tls_config(cert, key, args.tls_client_ca.as_deref())?)
        }
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let stack_dir = match args.stack_dir {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the working directory")?,
    };
    let stack_dir = std::path::absolute(&stack_dir)
        .with_context(|| format!("bad --stack-dir {}", stack_dir.display()))?;
    orrery_primary::service::set_plugin_env(args.plugin_env.clone());
    let mut held = HeldTargets::default().expose_env(args.secret_env.iter().cloned());
    if let Some(dir) = &args.secrets_dir {
        held = held.secrets_dir(dir);
    }
    orrery_primary::service::set_held_targets(held);
    let nats = match &args.nats_url {
        Some(url) => Some(connect(url, "orrery-primary", &args.nats_auth).await?),
        None => None,
    };
    let config = Config {
        data_dir: args.data_dir.clone(),
        database_url: args.database_url.clone(),
        plugin_search: plugin_search_path(args.plugin_dir.as_deref()),
        stack_dir,
        max_body_bytes: args.max_body_bytes,
        max_list_items: args.max_list_items,
        in_flight_bodies: http::InFlightLimits {
            total: args.max_body_bytes_in_flight,
            per_principal: args.max_principal_body_bytes,
        },
        audit_retention: args.audit_retention,
        options: Options {
            max_concurrency: args.concurrency.max(1),
            request_timeout: args.request_timeout,
            rate_overrides: args.rate_limits.iter().cloned().collect(),
            stop_at: super::stop_point(),
            ..Options::default()
        },
        hub_schemas: args.hub.open(nats.as_ref(), &args.nats_auth).await?,
        nats,
        metrics: Some(metrics),
        discover_every: Some(args.discover_every).filter(|d| !d.is_zero()),
        drift_every: Some(args.drift_every).filter(|d| !d.is_zero()),
        lease: LeaseConfig::new(args.lease_ttl),
        auth,
    };
    let location = match &args.database_url {
        Some(_) => "the PostgreSQL state store".to_owned(),
        None => format!("the state in {}", args.data_dir.display()),
    };
    if let Some(client) = config.nats.clone() {
        tokio::spawn(count_satellites(client));
    }
    let primary = Primary::open(config).with_context(|| format!("cannot open {location}"))?;
    // Resumes interrupted commands, then discovers and syncs drift on the
    // configured intervals.
    primary.start_background();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("orrery primary listening on {scheme}://{addr}");
    println!("dashboard: {scheme}://{addr}/ui");
    tracing::info!(%addr, store = %location, "serving the HTTP API");
    let served = http::serve(
        listener,
        primary.router(),
        http::ServeOptions {
            header_read_timeout: args.header_read_timeout,
            body_read_timeout: args.body_read_timeout,
            tls,
            max_connections: args.max_connections,
        },
        shutdown,
    )
    .await;
    primary
        .shutdown(Duration::from_secs(args.shutdown_grace))
        .await;
    served.context("the HTTP server failed")?;
    Ok(ExitCode::SUCCESS)
}

/// Installs the SIGTERM and SIGINT handlers now and returns the future
/// that resolves on either. Installing at startup, not at the first poll,
/// matters: "listening" is printed before the server polls this, and a
/// signal in that window would otherwise kill the process without a
/// graceful shutdown.
#[cfg(unix)]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        match handlers {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            },
            _ => {
                tracing::error!(
                    "cannot install signal handlers; SIGTERM will not shut down gracefully"
                );
                std::future::pending::<()>().await;
            }
        }
        tracing::info!("shutting down");
    }
}

/// Resolves on Ctrl-C.
#[cfg(not(unix))]
async fn shutdown_signal() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
    tracing::info!("shutting down");
}

/// How often the distributed primary counts the satellites that answer.
const SATELLITE_COUNT_EVERY: Duration = Duration::from_secs(15);

/// Keeps the `orrery.satellites` gauge current: satellites answering
/// `$SRV.PING`, counted now and every [`SATELLITE_COUNT_EVERY`].
async fn count_satellites(client: async_nats::Client) {
    loop {
        match super::fleet::gather(&client, "PING").await {
            Ok(answers) => orrery_primary::metrics::metrics().satellites(answers.len() as u64),
            Err(e) => tracing::warn!(error = %e, "cannot count satellites"),
        }
        tokio::time::sleep(SATELLITE_COUNT_EVERY).await;
    }
}
