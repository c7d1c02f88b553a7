//! Liveness, readiness and metrics over HTTP, for probes and scrapers.
//!
//! - `GET /healthz`: 200 while the process runs.
//! - `GET /readyz`: 200 when NATS is connected and no plugin is unhealthy;
//!   503 with the reasons otherwise.
//! - `GET /metrics`: Prometheus text format.

use std::fmt::Write;
use std::net::SocketAddr;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use orrery_plugin_sdk::telemetry::MetricsReader;

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
    let _ = writeln!(out, "# HELP orrery_plugin_up Whether the plugin process is running and answering (1) or not (0).");
    let _ = writeln!(out, "# TYPE orrery_plugin_up gauge");
    for host in &h.hosts {
        let up = u8::from(host.status().state == "running");
        let _ = writeln!(out, "orrery_plugin_up{{plugin=\"{}\"}} {up}", host.name());
    }
    let _ = writeln!(
        out,
        "# HELP orrery_plugin_restarts_total Plugin processes restarted after a failure."
    );
    let _ = writeln!(out, "# TYPE orrery_plugin_restarts_total counter");
    for host in &h.hosts {
        let _ = writeln!(
            out,
            "orrery_plugin_restarts_total{{plugin=\"{}\"}} {}",
            host.name(),
            host.status().restarts
        );
    }
    let _ = writeln!(
        out,
        "# HELP orrery_plugin_requests_in_flight Requests waiting for the plugin's answer."
    );
    let _ = writeln!(out, "# TYPE orrery_plugin_requests_in_flight gauge");
    for host in &h.hosts {
        let _ = writeln!(
            out,
            "orrery_plugin_requests_in_flight{{plugin=\"{}\"}} {}",
            host.name(),
            host.status().in_flight
        );
    }
    let connected =
        u8::from(h.client.connection_state() == async_nats::connection::State::Connected);
    let _ = writeln!(
        out,
        "# HELP orrery_nats_connected Whether the satellite is connected to NATS."
    );
    let _ = writeln!(out, "# TYPE orrery_nats_connected gauge");
    let _ = writeln!(out, "orrery_nats_connected {connected}");
    if let Some(recorded) = &h.recorded {
        out.push_str(&recorded.prometheus_text());
    }
    out
}
