//! `orrery satellites` and `orrery plugins`: live view of the fleet from the
//! satellites' NATS service info and stats.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use orrery_primary::nats::NatsAuth;

use super::Output;

#[derive(clap::Args, Debug)]
pub struct FleetArgs {
    /// The NATS server the satellites use.
    #[arg(long, env = "ORRERY_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    #[command(flatten)]
    pub nats_auth: NatsAuth,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// One satellite, merged from `$SRV.INFO` and `$SRV.STATS`.
#[derive(serde::Serialize, Default)]
struct Satellite {
    id: String,
    satellite_id: String,
    version: String,
    plugins: String,
    requests: u64,
    errors: u64,
    average_processing_ms: f64,
    /// Requests waiting for a plugin's answer right now.
    in_flight: u64,
    /// Plugin restarts after failures, summed.
    restarts: u64,
    /// Plugins not `running` (starting, restarting, unhealthy), with their state.
    unhealthy: Vec<String>,
    endpoints: Vec<String>,
}

/// Every satellite's answer to `$SRV.<verb>.orrery-satellite` within half a second.
pub(super) async fn gather(
    client: &async_nats::Client,
    verb: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await?;
    client
        .publish_with_reply(format!("$SRV.{verb}.orrery-satellite"), inbox, "".into())
        .await?;
    client.flush().await?;
    let mut out = Vec::new();
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
        if let Ok(v) = serde_json::from_slice(&msg.payload) {
            out.push(v);
        }
    }
    Ok(out)
}

async fn satellites(url: &str, auth: &NatsAuth) -> anyhow::Result<Vec<Satellite>> {
    let client = orrery_primary::nats::connect(url, "orrery", auth)
        .await
        .with_context(|| format!("cannot connect to NATS at {url}"))?;
    let mut by_id: BTreeMap<String, Satellite> = BTreeMap::new();
    for info in gather(&client, "INFO").await? {
        let id = info["id"].as_str().unwrap_or_default().to_owned();
        let s = by_id.entry(id.clone()).or_default();
        s.id = id;
        s.version = info["version"].as_str().unwrap_or_default().to_owned();
        s.satellite_id = info["metadata"]["satellite_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        s.plugins = info["metadata"]["plugins"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        s.endpoints = info["endpoints"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["subject"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
    }
    for stats in gather(&client, "STATS").await? {
        let id = stats["id"].as_str().unwrap_or_default().to_owned();
        let s = by_id.entry(id.clone()).or_default();
        s.id = id;
        let endpoints = stats["endpoints"].as_array().cloned().unwrap_or_default();
        s.requests = endpoints
            .iter()
            .filter_map(|e| e["num_requests"].as_u64())
            .sum();
        s.errors = endpoints
            .iter()
            .filter_map(|e| e["num_errors"].as_u64())
            .sum();
        let total_ns: f64 = endpoints
            .iter()
            .filter_map(|e| e["processing_time"].as_f64())
            .sum();
        // Endpoints of one plugin (one per target) report the same host.
        let mut plugins = BTreeMap::new();
        for data in endpoints.iter().map(|e| &e["data"]) {
            if let Some(plugin) = data["plugin"].as_str() {
                plugins.insert(plugin.to_owned(), data.clone());
            }
        }
        s.in_flight = plugins
            .values()
            .filter_map(|d| d["in_flight"].as_u64())
            .sum();
        s.restarts = plugins
            .values()
            .filter_map(|d| d["restarts"].as_u64())
            .sum();
        s.unhealthy = plugins
            .iter()
            .filter(|(_, d)| d["state"] != "running")
            .map(|(p, d)| format!("{p}: {}", d["state"].as_str().unwrap_or("unknown")))
            .collect();
        s.average_processing_ms = if s.requests > 0 {
            total_ns / s.requests as f64 / 1e6
        } else {
            0.0
        };
    }
    Ok(by_id.into_values().collect())
}

pub async fn satellites_cmd(args: FleetArgs) -> anyhow::Result<ExitCode> {
    let sats = satellites(&args.nats_url, &args.nats_auth).await?;
    if args.output.is_json() {
        println!("{}", serde_json::to_string(&sats)?);
    } else {
        for s in &sats {
            let health = if s.unhealthy.is_empty() {
                "healthy".to_owned()
            } else {
                s.unhealthy.join(", ")
            };
            println!(
                "{:<24} v{:<8} plugins {:<28} requests {:>8} errors {:>5} avg {:.2} ms in-flight {:>4} restarts {:>3} {health}",
                s.satellite_id,
                s.version,
                s.plugins,
                s.requests,
                s.errors,
                s.average_processing_ms,
                s.in_flight,
                s.restarts
            );
        }
        println!("{} satellites", sats.len());
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn plugins_cmd(args: FleetArgs) -> anyhow::Result<ExitCode> {
    let sats = satellites(&args.nats_url, &args.nats_auth).await?;
    // plugin@version -> satellites running it: mixed versions show as separate rows.
    let mut by_plugin: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in &sats {
        for p in s.plugins.split(',').filter(|p| !p.is_empty()) {
            by_plugin
                .entry(p.to_owned())
                .or_default()
                .push(s.satellite_id.clone());
        }
    }
    if args.output.is_json() {
        println!("{}", serde_json::to_string(&by_plugin)?);
    } else {
        for (plugin, on) in &by_plugin {
            let name = plugin.split('@').next().unwrap_or_default();
            let on: Vec<String> = on
                .iter()
                .map(|id| {
                    let unhealthy = sats.iter().find(|s| &s.satellite_id == id).and_then(|s| {
                        s.unhealthy
                            .iter()
                            .find(|u| u.starts_with(&format!("{name}: ")))
                    });
                    match unhealthy {
                        Some(u) => format!("{id} ({})", &u[name.len() + 2..]),
                        None => id.clone(),
                    }
                })
                .collect();
            println!(
                "{plugin:<28} on {} satellite(s): {}",
                on.len(),
                on.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
