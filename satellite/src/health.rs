//! Liveness, readiness and metrics over HTTP, for probes and scrapers.
//!
//! - `GET /healthz`: 200 while the process runs.
//! - `GET /readyz`: 200 when NATS is connected and no plugin is unhealthy;
//!   503 with the reasons otherwise.
//! - `GET /metrics`: Prometheus text format.

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use orrery_plugin_sdk::telemetry::{write_prometheus_family, MetricsReader};

use orrery_bus::plugin_host::PluginHost;

#[derive(Clone)]
struct Health {
    client: async_nats::Client,
    hosts: Vec<PluginHost>,
    recorded: Option<MetricsReader>,
}

/// Serves the health endpoints on `addr` until `shutdown` resolves.
/// `recorded` adds the process's OpenTelemetry metrics (relay latencies) to
/// `/metrics`.
pub async fn serve(
    addr: SocketAddr,
    client: async_nats::Client,
    hosts: Vec<PluginHost>,
    recorded: Option<MetricsReader>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(Health {
            client,
            hosts,
            recorded,
        });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "health endpoints listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn readyz(State(h): State<Health>) -> (StatusCode, String) {
    let mut problems = Vec::new();
    if h.client.connection_state() != async_nats::connection::State::Connected {
        problems.push(format!("NATS is {:?}", h.client.connection_state()));
    }
    for host in &h.hosts {
        let status = host.status();
        if status.state == "unhealthy" {
            problems.push(format!(
                "plugin {} is unhealthy: {}",
                host.name(),
                status.reason.unwrap_or_default()
            ));
        }
    }
    if problems.is_empty() {
        (StatusCode::OK, "ready\n".into())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, problems.join("\n") + "\n")
    }
}

async fn metrics(State(h): State<Health>) -> String {
    let mut out = String::new();
    let statuses: Vec<_> = h
        .hosts
        .iter()
        .map(|host| (host.name(), host.status()))
        .collect();
    let per_plugin = |value: &dyn Fn(&orrery_bus::plugin_host::PluginStatus) -> u64| {
        statuses
            .iter()
            .map(|(name, status)| (vec![("plugin".to_owned(), name.to_string())], value(status)))
            .collect::<Vec<_>>()
    };
    write_prometheus_family(
        &mut out,
        "orrery_plugin_up",
        "Whether the plugin process is running and answering (1) or not (0).",
        "gauge",
        per_plugin(&|s| u64::from(s.state == "running")),
    );
    write_prometheus_family(
        &mut out,
        "orrery_plugin_restarts_total",
        "Plugin processes restarted after a failure.",
        "counter",
        per_plugin(&|s| s.restarts),
    );
    write_prometheus_family(
        &mut out,
        "orrery_plugin_requests_in_flight",
        "Requests waiting for the plugin's answer.",
        "gauge",
        per_plugin(&|s| s.in_flight as u64),
    );
    let connected =
        u64::from(h.client.connection_state() == async_nats::connection::State::Connected);
    write_prometheus_family(
        &mut out,
        "orrery_nats_connected",
        "Whether the satellite is connected to NATS.",
        "gauge",
        [(Vec::new(), connected)],
    );
    if let Some(recorded) = &h.recorded {
        out.push_str(&recorded.prometheus_text());
    }
    out
}
