//! A real moto_server (an AWS emulator) per test, on a free port, killed
//! when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A moto_server process on a free loopback port, killed when dropped.
pub struct MotoServer {
    /// `http://127.0.0.1:<port>`: every service's endpoint.
    pub url: String,
    child: Child,
}

impl MotoServer {
    /// Starts one and waits (bounded) until it answers; `None`, with a
    /// printed SKIP, when there is no moto_server on this machine.
    ///
    /// # Panics
    ///
    /// When it cannot start or does not answer within 30 s.
    pub async fn start() -> Option<MotoServer> {
        let Some(binary) = moto_server_binary() else {
            eprintln!(
                "SKIP: no moto_server (set ORRERY_MOTO_SERVER or run scripts/ensure-moto.sh)"
            );
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let server = MotoServer {
            url: format!("http://127.0.0.1:{port}"),
            child,
        };
        let addr = format!("127.0.0.1:{port}");
        // Python's start-up is slow on a loaded machine.
        crate::wait::wait_until_async(
            "moto_server accepting connections",
            Duration::from_secs(30),
            move || {
                let addr = addr.clone();
                async move { tokio::net::TcpStream::connect(addr).await.is_ok() }
            },
        )
        .await;
        Some(server)
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The moto_server to use: `ORRERY_MOTO_SERVER` (set by scripts/test.sh),
/// else the one scripts/ensure-moto.sh installs, else one on `PATH`.
pub fn moto_server_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ORRERY_MOTO_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let local = crate::workspace_root().join(".tools/moto/bin/moto_server");
    if local.exists() {
        return Some(local);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("moto_server"))
            .find(|p| p.is_file())
    })
}
