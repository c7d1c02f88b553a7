//! A real `orrery primary` on a free port, spoken to over HTTP.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How to start a server.
#[derive(Default)]
pub struct ServerOptions {
    /// Its data directory (default: `state` in a directory of its own).
    pub data_dir: Option<PathBuf>,
    /// Extra arguments after `primary`.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
}

/// A running `orrery primary`, killed on drop.
pub struct Server {
    pub child: Child,
    base: String,
    agent: ureq::Agent,
    log: PathBuf,
    data_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    /// A server with a fresh store of its own.
    pub fn start() -> Server {
        Server::start_with(ServerOptions::default())
    }

    /// A server as `options` say; returns once `/healthz` answers.
    pub fn start_with(options: ServerOptions) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let log_path = dir.path().join("server.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let data_dir = options.data_dir.unwrap_or_else(|| dir.path().join("state"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
        cmd.arg("primary")
            .args(&options.args)
            .env("ORRERY_LISTEN", format!("127.0.0.1:{port}"))
            .env("ORRERY_DATA_DIR", &data_dir)
            .env("ORRERY_PLUGIN_DIR", orrery_testing::target_debug())
            .env("RUST_LOG", "info")
            .env_remove("ORRERY_DATABASE_URL")
            .env_remove("ORRERY_TEST_HANG_AT")
            .envs(options.env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(cwd) = options.cwd {
            cmd.current_dir(cwd);
        }
        let child = cmd.spawn().unwrap();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            agent,
            log: log_path,
            data_dir,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("orrery primary exited with {status}:\n{}", server.log());
            }
            if let Ok(resp) = server.agent.get(server.url("/healthz")).call() {
                if resp.status() == 200 {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no /healthz within 30 s:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Its data directory (the embedded store's).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn answer(&self, resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Value) {
        let mut resp = resp.unwrap_or_else(|e| panic!("request failed: {e}\n{}", self.log()));
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("answer is not JSON ({e}): {text:?}"));
        (status, value)
    }

    /// `GET path` as text (for `/metrics`).
    pub fn text(&self, path: &str) -> String {
        let mut resp = self
            .agent
            .get(self.url(path))
            .call()
            .unwrap_or_else(|e| panic!("request failed: {e}\n{}", self.log()));
        resp.body_mut().read_to_string().unwrap()
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.answer(self.agent.get(self.url(path)).call())
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.answer(self.agent.post(self.url(path)).send_json(body))
    }

    pub fn post_raw(&self, path: &str, content_type: &str, body: &str) -> (u16, Value) {
        self.answer(
            self.agent
                .post(self.url(path))
                .header("content-type", content_type)
                .send(body),
        )
    }

    /// Polls `GET path` until `done` holds for the answer (bounded).
    pub fn wait_for(&self, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, value) = self.get(path);
            if status == 200 && done(&value) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within 60 s; last answer {status}: {value}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls a command until it is no longer running.
    pub fn wait_command(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, command) = self.get(&format!("/v1/commands/{id}"));
            assert_eq!(status, 200, "{command}");
            if command["status"] != "running" && command["active"] == false {
                return command;
            }
            assert!(
                Instant::now() < deadline,
                "command {id} still running after 120 s: {command}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
