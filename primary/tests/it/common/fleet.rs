//! Satellites as child processes for the distributed tests, and what each
//! served according to the NATS service stats.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;

/// A child process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `orrery-satellite` serving the `local` plugin as `id`; callers add
/// arguments and environment before spawning.
pub fn satellite_command(url: &str, id: &str) -> Command {
    let mut command = Command::new(orrery_testing::binary("orrery-satellite"));
    command
        .args(["--nats-url", url, "--id", id, "--receipts"])
        .arg("--plugin")
        .arg(orrery_testing::binary("orrery-plugin-local"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// A running satellite serving the `local` plugin.
pub fn satellite(url: &str, id: &str) -> Killed {
    Killed(satellite_command(url, id).spawn().unwrap())
}

/// Requests served per satellite id, from `$SRV.STATS`.
pub async fn served(client: &async_nats::Client) -> HashMap<String, u64> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply("$SRV.STATS.orrery-satellite", inbox, "".into())
        .await
        .unwrap();
    let mut out = HashMap::new();
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
        // No responders yet arrives as an empty status message.
        let Ok(stats) = serde_json::from_slice::<serde_json::Value>(&msg.payload) else {
            continue;
        };
        let n = stats["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["num_requests"].as_u64().unwrap())
            .sum();
        out.insert(stats["id"].as_str().unwrap_or_default().to_owned(), n);
    }
    out
}

/// Waits (bounded by `timeout`) until `n` satellites answer `$SRV.STATS`.
pub async fn wait_registered(client: &async_nats::Client, n: usize, timeout: Duration) {
    orrery_testing::wait_for_async(
        &format!("{n} satellite(s) registered"),
        timeout,
        move || async move {
            let seen = served(client).await.len();
            if seen >= n {
                Ok(())
            } else {
                Err(format!("{seen} registered"))
            }
        },
    )
    .await
}

/// A stack of `dirs` directories holding `files` files each, on a `local`
/// target rooted at `${stack_dir}/site`: `dirs * (files + 1)` resources.
pub fn spread_stack(name: &str, dirs: usize, files: usize) -> String {
    let mut doc = format!(
        "stack: {name}\ntargets:\n  - name: site\n    plugin: local\n    config: {{ root: \"${{stack_dir}}/site\", create_root: true }}\nresources:\n",
    );
    for d in 0..dirs {
        doc.push_str(&format!("  - label: dir{d}\n    type: Local::Fs::Directory\n    target: site\n    properties: {{ path: d{d} }}\n"));
        for f in 0..files {
            doc.push_str(&format!(
                "  - label: f{d}-{f}\n    type: Local::Fs::File\n    target: site\n    properties: {{ path: \"${{dir{d}.path}}/f{f}\", content: \"{d}.{f}\" }}\n"
            ));
        }
    }
    doc
}

/// `orrery apply FILE --yes --nats-url URL` with its state under `state`
/// and extra environment, run off the async runtime.
pub async fn apply_through_nats(
    file: &std::path::Path,
    url: &str,
    state: &std::path::Path,
    env: &[(&str, &str)],
) -> super::Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orrery"));
    command
        .args(["apply", file.to_str().unwrap(), "--yes", "--nats-url", url])
        .env("ORRERY_DATA_DIR", state)
        // Plugins must come through satellites, never from this machine.
        .env("ORRERY_PLUGIN_DIR", "/nonexistent");
    for (k, v) in env {
        command.env(k, v);
    }
    tokio::task::spawn_blocking(move || super::Run::from(command.output().unwrap()))
        .await
        .unwrap()
}

/// A satellite serving the testbed plugin, registered with the server.
pub async fn testbed_satellite(server: &orrery_testing::nats::NatsServer) -> Killed {
    let child = Command::new(orrery_testing::binary("orrery-satellite"))
        .args([
            "--nats-url",
            &server.url,
            "--id",
            "sat-testbed",
            "--receipts",
        ])
        .arg("--plugin")
        .arg(orrery_testing::binary("orrery-plugin-testbed"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let satellite = Killed(child);
    let client = server.client().await;
    wait_registered(&client, 1, Duration::from_secs(20)).await;
    satellite
}

/// `orrery ARGS --nats-url URL`, with plugins reachable only through NATS.
pub async fn orrery_through_nats(state: &std::path::Path, url: &str, args: &[&str]) -> super::Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orrery"));
    command
        .args(args)
        .args(["--nats-url", url])
        .env("ORRERY_DATA_DIR", state)
        .env("ORRERY_PLUGIN_DIR", "/nonexistent");
    tokio::task::spawn_blocking(move || super::Run::from(command.output().unwrap()))
        .await
        .unwrap()
}
