//! A real nats-server per test, on a free port, killed when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A nats-server process on a free port with its own storage directory,
/// killed when dropped.
pub struct NatsServer {
    /// `nats://127.0.0.1:<port>`.
    pub url: String,
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// A nats-server on `port` keeping its storage in `dir`, with the
/// configuration file `dir/nats.conf` when there is one.
fn spawn(port: u16, dir: &std::path::Path) -> Child {
    let binary = nats_server_binary();
    let mut command = Command::new(&binary);
    let conf = dir.join(CONFIG_FILE);
    if conf.exists() {
        command.arg("-c").arg(conf);
    }
    command
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()))
}

/// The configuration file a server started with [`NatsServer::start_with_config`] reads.
const CONFIG_FILE: &str = "nats.conf";

/// Waits (bounded) until a server at `url` accepts connections (TCP: one
/// with authorization configured refuses an anonymous client).
async fn accepting(url: &str) {
    let addr = url.trim_start_matches("nats://").to_owned();
    crate::wait::wait_until_async(
        "nats-server accepting connections",
        Duration::from_secs(10),
        move || {
            let addr = addr.clone();
            async move { tokio::net::TcpStream::connect(addr).await.is_ok() }
        },
    )
    .await;
}

impl NatsServer {
    /// Starts one with JetStream and waits (bounded) until it accepts
    /// connections.
    ///
    /// # Panics
    ///
    /// When it cannot start or does not accept connections within 10 s.
    pub async fn start() -> NatsServer {
        Self::start_with_config("").await
    }

    /// [`NatsServer::start`] with `config` as its configuration file (an
    /// `authorization { users: [...] }` block with subject permissions,
    /// say); the address, port and storage stay as `start` sets them.
    ///
    /// # Panics
    ///
    /// When it cannot start or does not accept connections within 10 s.
    pub async fn start_with_config(config: &str) -> NatsServer {
        let dir = tempfile::tempdir().unwrap();
        if !config.is_empty() {
            std::fs::write(dir.path().join(CONFIG_FILE), config).unwrap();
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = NatsServer {
            url: format!("nats://127.0.0.1:{port}"),
            child: spawn(port, dir.path()),
            port,
            dir,
        };
        accepting(&server.url).await;
        server
    }

    /// Kills it (SIGKILL), leaves it down for `down`, and starts it again
    /// on the same port and storage: a NATS restart as its clients see it.
    ///
    /// # Panics
    ///
    /// When it does not accept connections again within 10 s.
    pub async fn restart(&mut self, down: Duration) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The fault's own length, not a wait for a condition.
        tokio::time::sleep(down).await;
        self.child = spawn(self.port, self.dir.path());
        accepting(&self.url).await;
    }

    /// A client of it.
    ///
    /// # Panics
    ///
    /// When it cannot connect.
    pub async fn client(&self) -> async_nats::Client {
        async_nats::connect(&self.url).await.unwrap()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The nats-server to use: `ORRERY_NATS_SERVER` (set by scripts/test.sh),
/// else the one scripts/ensure-nats.sh installs.
///
/// # Panics
///
/// When neither is there.
pub fn nats_server_binary() -> PathBuf {
    if let Ok(path) = std::env::var("ORRERY_NATS_SERVER") {
        return PathBuf::from(path);
    }
    let local = crate::workspace_root().join(".tools/nats/bin/nats-server");
    assert!(
        local.exists(),
        "no nats-server: run ./scripts/test.sh (or scripts/ensure-nats.sh)"
    );
    local
}

// What tests that start a nats-server also need, under the same path.
pub use crate::binaries::{binary, workspace_root};
