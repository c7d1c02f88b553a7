//! Plugins start with a cleared environment: of the satellite's, only the
//! standard variables and those named by `--plugin-env` (or `plugin_env` in
//! its configuration file) reach them.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use orrery_testing::wait_for_async;

/// The environment of every child process of `pid` running `exe` (so
/// after its exec: a forked child shows its parent's environment before).
fn children_environ(pid: u32, exe: &Path) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_whitespace() {
            let running = std::fs::read_link(format!("/proc/{child}/exe")).ok();
            if running.as_deref() != Some(exe) {
                continue;
            }
            let Ok(raw) = std::fs::read(format!("/proc/{child}/environ")) else {
                continue;
            };
            out.push(
                raw.split(|b| *b == 0)
                    .filter_map(|kv| {
                        let text = String::from_utf8_lossy(kv);
                        text.split_once('=')
                            .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    })
                    .collect(),
            );
        }
    }
    out
}

/// Starts a satellite with `args` and the planted environment; the
/// environment of its plugin once it runs.
async fn plugin_environ(nats: &str, args: &[&str]) -> BTreeMap<String, String> {
    let plugin = std::fs::canonicalize(common::binary("orrery-plugin-testbed")).unwrap();
    let mut satellite = Command::new(common::binary("orrery-satellite"))
        .args(["--nats-url", nats])
        .args(args)
        .arg("--plugin")
        .arg(&plugin)
        .env(
            "ORRERY_DATABASE_URL",
            "postgres://orrery:db-Secret-1@db/orrery",
        )
        .env("SECRET_THING", "env-Secret-2")
        .env("ALLOWED_THING", "allowed-3")
        .env("FROM_CONFIG", "config-4")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let env = wait_for_async("the plugin process", Duration::from_secs(20), || {
        let env = children_environ(satellite.id(), &plugin).pop();
        std::future::ready(env.ok_or("none yet"))
    })
    .await;
    let _ = satellite.kill();
    let _ = satellite.wait();
    env
}

fn assert_clean(env: &BTreeMap<String, String>) {
    assert!(env.contains_key("PATH"), "{env:?}");
    for leaked in ["ORRERY_DATABASE_URL", "SECRET_THING"] {
        assert!(
            !env.contains_key(leaked),
            "{leaked} reached the plugin: {env:?}"
        );
    }
    assert!(
        !env.values().any(|v| v.contains("Secret")),
        "a planted secret reached the plugin: {env:?}"
    );
}

#[tokio::test]
async fn plugins_get_only_the_standard_and_the_named_variables() {
    let server = common::NatsServer::start().await;
    let env = plugin_environ(&server.url, &["--plugin-env", "ALLOWED_THING"]).await;
    assert_clean(&env);
    assert_eq!(
        env.get("ALLOWED_THING").map(String::as_str),
        Some("allowed-3")
    );
    assert!(!env.contains_key("FROM_CONFIG"), "not named: {env:?}");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("satellite.toml");
    std::fs::write(&config, "plugin_env = [\"FROM_CONFIG\"]\n").unwrap();
    let env = plugin_environ(&server.url, &["--config", path(&config)]).await;
    assert_clean(&env);
    assert_eq!(env.get("FROM_CONFIG").map(String::as_str), Some("config-4"));
    assert!(!env.contains_key("ALLOWED_THING"), "not named: {env:?}");
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}
