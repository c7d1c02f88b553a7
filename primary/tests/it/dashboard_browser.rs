//! The dashboard in a real browser: a real nats-server, two satellites
//! serving the testbed plugin, `orrery primary`, and
//! `tests/browser/dashboard.mjs` (Playwright driving Debian's chromium,
//! headless) signing in, following a 300-resource apply with failures to
//! its end, opening an error, canceling a slow apply from its page and
//! reading the fleet. Screenshots go to `target/dashboard-screenshots/`.
//!
//! `scripts/test.sh` installs chromium and `playwright-core`; without
//! them this test prints `SKIP: <reason>` and asserts nothing.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::fleet::{wait_registered, Killed};
use common::server::{Server, ServerOptions};
use orrery_testing::Wait;

/// The whole browser script's bound.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium, node and the script's module, or why not.
fn tools(browser_dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let chromium = match std::env::var_os("CHROMIUM") {
        Some(c) => Some(PathBuf::from(c)).filter(|c| c.is_file()),
        None => on_path("chromium"),
    }
    .ok_or("chromium is not installed (apt-get install chromium; or set CHROMIUM)")?;
    let node = on_path("node").ok_or("node is not installed")?;
    if !browser_dir.join("node_modules/playwright-core").is_dir() {
        return Err(format!(
            "playwright-core is not installed in {} (npm ci there)",
            browser_dir.display()
        ));
    }
    Ok((chromium, node))
}

fn satellite(url: &str, id: &str, targets: &[&str]) -> Killed {
    let mut command = Command::new(orrery_testing::binary("orrery-satellite"));
    command
        .args(["--nats-url", url, "--id", id])
        .arg("--plugin")
        .arg(orrery_testing::binary("orrery-plugin-testbed"));
    for t in targets {
        command.args(["--target", t]);
    }
    Killed(
        command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_in_a_real_browser() {
    let root = common::root();
    let browser_dir = root.join("tests/browser");
    let (chromium, node) = match tools(&browser_dir) {
        Ok(t) => t,
        Err(reason) => {
            println!("SKIP: {reason}");
            return;
        }
    };
    let nats = orrery_testing::nats::NatsServer::start().await;
    let _a = satellite(&nats.url, "sat-a", &["lab", "flaky"]);
    let _b = satellite(&nats.url, "sat-b", &["lab", "slow"]);
    let client = nats.client().await;
    wait_registered(&client, 2, Duration::from_secs(30)).await;
    let server = tokio::task::spawn_blocking({
        let url = nats.url.clone();
        move || {
            Server::start_with(ServerOptions {
                args: vec![
                    "--nats-url".into(),
                    url,
                    "--concurrency".into(),
                    "16".into(),
                ],
                env: vec![("ORRERY_PLUGIN_DIR".into(), "/nonexistent".into())],
                ..Default::default()
            })
        }
    })
    .await
    .unwrap();
    let shots = root.join("target/dashboard-screenshots");
    let mut child = Command::new(node)
        .arg(browser_dir.join("dashboard.mjs"))
        .current_dir(&browser_dir)
        .env("ORRERY_URL", server.url(""))
        .env("ORRERY_TOKEN", server.token.clone().unwrap())
        .env("CHROMIUM", chromium)
        .env("SCREENSHOT_DIR", &shots)
        .env("SATELLITES", "sat-a,sat-b")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    // On the timeout the script is killed first, so its output can be shown.
    let wait = Wait::new("the browser script", SCRIPT_TIMEOUT).every(Duration::from_millis(100));
    let status = wait
        .poll_async(|| std::future::ready(child.try_wait().unwrap().ok_or(())))
        .await;
    if status.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    println!("{out}");
    let status = status
        .unwrap_or_else(|()| wait.fail(format_args!("killed it:\n{out}\n{err}\n{}", server.log())));
    assert!(
        status.success(),
        "the browser script failed ({status}):\n{out}\n{err}\nserver log:\n{}",
        server.log()
    );
    assert!(out.contains("dashboard browser test passed"), "{out}");
    for name in [
        "01-login",
        "02-command-finished",
        "06-fleet",
        "08-slow-canceled",
    ] {
        let path = shots.join(format!("{name}.png"));
        assert!(
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 1000),
            "{}",
            path.display()
        );
    }
}
