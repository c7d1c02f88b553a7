//! The processes of one soak run: nats-server on a fixed port (so it can
//! be restarted where everyone expects it), three satellites each behind
//! its own [`Proxy`], and `orrery primary`. Every one carries the run's
//! marker in its environment (satellites pass it on to their plugins), so
//! what survives the run can be found in `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::proxy::Proxy;
use crate::common::server::{free_port, Server, ServerOptions};

/// The variable holding the run's marker.
pub const MARKER_ENV: &str = "ORRERY_SOAK_RUN";

/// A child killed (SIGKILL) and reaped on drop.
pub struct Proc(pub Child);

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Where a run keeps its files, and its marker.
pub struct RunDir {
    pub path: PathBuf,
    pub marker: String,
}

impl RunDir {
    pub fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path.join(name))
            .unwrap()
    }

    pub fn store(&self) -> PathBuf {
        self.path.join("testbed.sqlite")
    }

    pub fn state(&self) -> PathBuf {
        self.path.join("state")
    }
}

/// nats-server on `port`, its JetStream files in `dir`.
pub struct Nats {
    pub port: u16,
    proc: Option<Proc>,
}

impl Nats {
    pub fn start(run: &RunDir) -> Nats {
        let mut nats = Nats {
            port: free_port(),
            proc: None,
        };
        nats.restart(run);
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    /// Starts it (again) on its port; returns once it accepts connections.
    pub fn restart(&mut self, run: &RunDir) {
        self.kill();
        let child = Command::new(orrery_testing::nats::nats_server_binary())
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(run.path.join("nats"))
            .env(MARKER_ENV, &run.marker)
            .stdout(Stdio::null())
            .stderr(run.log("nats.log"))
            .spawn()
            .unwrap();
        self.proc = Some(Proc(child));
        let port = self.port;
        orrery_testing::wait_until("nats-server listens", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
    }
}

/// A satellite serving the testbed (rate limited, its things in the run's
/// store), reaching NATS through its own proxy.
pub struct Satellite {
    pub id: String,
    pub proxy: Proxy,
    pub proc: Option<Proc>,
}

impl Satellite {
    pub fn new(i: usize, nats: &Nats, run: &RunDir, rate_limit: &str) -> Satellite {
        let mut sat = Satellite {
            id: format!("sat-{i}"),
            proxy: Proxy::start(nats.port),
            proc: None,
        };
        sat.start(run, rate_limit);
        sat
    }

    pub fn start(&mut self, run: &RunDir, rate_limit: &str) {
        let child = Command::new(orrery_testing::binary("orrery-satellite"))
            .args([
                "--nats-url",
                &format!("nats://127.0.0.1:{}", self.proxy.port),
            ])
            .args(["--id", &self.id, "--receipts"])
            .arg("--plugin")
            .arg(orrery_testing::binary("orrery-plugin-testbed"))
            .args(["--plugin-env", MARKER_ENV])
            .args(["--plugin-env", "ORRERY_TESTBED_RATE_LIMIT"])
            .env(MARKER_ENV, &run.marker)
            .env("ORRERY_TESTBED_RATE_LIMIT", rate_limit)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(run.log(&format!("{}.log", self.id)))
            .spawn()
            .unwrap();
        self.proc = Some(Proc(child));
    }

    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(|p| p.0.id())
    }
}

/// `orrery primary` on the run's store, through NATS.
pub fn primary(run: &RunDir, nats: &Nats, request_timeout: &str) -> Server {
    Server::start_with(ServerOptions {
        data_dir: Some(run.state()),
        args: vec![
            "--nats-url".into(),
            nats.url(),
            "--request-timeout".into(),
            request_timeout.into(),
            "--lease-ttl".into(),
            "5s".into(),
        ],
        env: vec![(MARKER_ENV.into(), run.marker.clone())],
        ..Default::default()
    })
}

/// Pids of live processes carrying `marker` in their environment.
pub fn marked(marker: &str) -> Vec<u32> {
    let needle = format!("{MARKER_ENV}={marker}");
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

/// The parent pid of `pid`, from `/proc/PID/stat`.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start
    // after the last `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(1)?.parse().ok()
}

/// The marked children of `pid` (a satellite's plugin processes).
pub fn children(marker: &str, pid: u32) -> Vec<u32> {
    marked(marker)
        .into_iter()
        .filter(|p| parent(*p) == Some(pid))
        .collect()
}

/// `kill -KILL pid`.
pub fn sigkill(pid: u32) {
    // SAFETY: a plain syscall on a pid this run started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// The files of a run's logs, for a failure message.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
