//! A real `orrery primary` on a free port, spoken to over HTTP.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use orrery_testing::Wait;
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
    /// Start without `--auth-tokens` (the test passes its own flags, e.g.
    /// `--insecure-no-auth`); by default a tokens file names the admin
    /// [`ADMIN_TOKEN`], which every request of [`Server`] presents.
    pub no_default_auth: bool,
    /// Start without `RUST_LOG`: the server logs as its own default filter
    /// says (the harness otherwise asks for `info`).
    pub default_log_filter: bool,
}

/// The token of the admin every test server knows.
pub const ADMIN_TOKEN: &str = "orr_test_admin_0123456789abcdef0123456789abcdef";

/// The hex SHA-256 of a token, as a tokens file keeps it.
pub fn sha256_hex(token: &str) -> String {
    orrery_primary::http::auth::token_sha256(token)
}

/// A running `orrery primary`, killed on drop.
pub struct Server {
    pub child: Child,
    base: String,
    agent: ureq::Agent,
    log: PathBuf,
    data_dir: PathBuf,
    /// The token every request presents (`None`: no `Authorization`).
    pub token: Option<String>,
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
        cmd.arg("primary").args(&options.args);
        let token = if options.no_default_auth {
            None
        } else {
            let tokens = dir.path().join("tokens.toml");
            std::fs::write(
                &tokens,
                format!(
                    "[[principal]]\nname = \"test-admin\"\ntoken_sha256 = \"{}\"\nroles = [\"admin\"]\n",
                    sha256_hex(ADMIN_TOKEN)
                ),
            )
            .unwrap();
            cmd.arg("--auth-tokens").arg(&tokens);
            Some(ADMIN_TOKEN.to_owned())
        };
        cmd.env("ORRERY_LISTEN", format!("127.0.0.1:{port}"))
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
        if options.default_log_filter {
            cmd.env_remove("RUST_LOG");
        }
        let child = cmd.spawn().unwrap();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            // A pooled connection idle longer than this may have been
            // closed by the server's idle timeout: reusing it after a long
            // pause (a 10 s store outage) met a reset (found by CI).
            .max_idle_age(Duration::from_secs(2))
            .build()
            .into();
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            agent,
            log: log_path,
            data_dir,
            token,
            _dir: dir,
        };
        let wait = Wait::new("orrery primary answering /healthz", Duration::from_secs(30))
            .every(Duration::from_millis(50));
        let healthy = wait.poll(|| {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("orrery primary exited with {status}:\n{}", server.log());
            }
            match server.agent.get(server.url("/healthz")).call() {
                Ok(resp) if resp.status() == 200 => Ok(()),
                _ => Err(()),
            }
        });
        if healthy.is_err() {
            wait.fail(format_args!("its log:\n{}", server.log()));
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

    fn authorized<B>(
        &self,
        req: ureq::RequestBuilder<B>,
        token: Option<&str>,
    ) -> ureq::RequestBuilder<B> {
        match token {
            Some(t) => req.header("authorization", format!("Bearer {t}")),
            None => req,
        }
    }

    /// `GET path` as text (for `/metrics`).
    pub fn text(&self, path: &str) -> String {
        let mut resp = self
            .authorized(self.agent.get(self.url(path)), self.token.as_deref())
            .call()
            .unwrap_or_else(|e| panic!("request failed: {e}\n{}", self.log()));
        resp.body_mut().read_to_string().unwrap()
    }

    /// `GET path` as text presenting `token`: the status and the text.
    pub fn text_as(&self, token: Option<&str>, path: &str) -> (u16, String) {
        let mut resp = self
            .authorized(self.agent.get(self.url(path)), token)
            .call()
            .unwrap_or_else(|e| panic!("request failed: {e}\n{}", self.log()));
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_to_string().unwrap())
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.get_as(self.token.as_deref(), path)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_as(self.token.as_deref(), path, body)
    }

    /// `GET path` presenting `token` (`None`: no credentials).
    pub fn get_as(&self, token: Option<&str>, path: &str) -> (u16, Value) {
        self.answer(
            self.authorized(self.agent.get(self.url(path)), token)
                .call(),
        )
    }

    /// `POST path` presenting `token` (`None`: no credentials).
    pub fn post_as(&self, token: Option<&str>, path: &str, body: &Value) -> (u16, Value) {
        self.answer(
            self.authorized(self.agent.post(self.url(path)), token)
                .send_json(body),
        )
    }

    pub fn post_raw(&self, path: &str, content_type: &str, body: &str) -> (u16, Value) {
        self.answer(
            self.authorized(self.agent.post(self.url(path)), self.token.as_deref())
                .header("content-type", content_type)
                .send(body),
        )
    }

    /// Polls `GET path` until `done` holds for the answer (bounded).
    pub fn wait_for(&self, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let wait = Wait::new(what, Duration::from_secs(60)).every(Duration::from_millis(50));
        wait.poll(|| {
            let (status, value) = self.get(path);
            if status == 200 && done(&value) {
                Ok(value)
            } else {
                Err((status, value))
            }
        })
        .unwrap_or_else(|(status, value)| {
            wait.fail(format_args!(
                "last answer {status}: {value}\n{}",
                self.log()
            ))
        })
    }

    /// Polls a command until it is no longer running.
    pub fn wait_command(&self, id: &str) -> Value {
        let what = format!("command {id} ended");
        let wait = Wait::new(&what, Duration::from_secs(120)).every(Duration::from_millis(50));
        wait.poll(|| {
            let (status, command) = self.get(&format!("/v1/commands/{id}"));
            assert_eq!(status, 200, "{command}");
            if command["status"] != "running" && command["active"] == false {
                Ok(command)
            } else {
                Err(command)
            }
        })
        .unwrap_or_else(|command| wait.fail(format_args!("last seen: {command}\n{}", self.log())))
    }
}

/// A server whose principals are `admin` (holding [`ADMIN_TOKEN`], which
/// its requests present) and `others` (name, token, TOML list of roles),
/// their tokens file written under `dir`; `options` as well.
pub fn with_principals(
    dir: &Path,
    others: &[(&str, &str, &str)],
    options: ServerOptions,
) -> Server {
    let tokens = dir.join("tokens.toml");
    let mut text = format!(
        "[[principal]]\nname = \"admin\"\ntoken_sha256 = \"{}\"\nroles = [\"admin\"]\n",
        sha256_hex(ADMIN_TOKEN)
    );
    for (name, token, roles) in others {
        text.push_str(&format!(
            "\n[[principal]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\nroles = {roles}\n",
            sha256_hex(token)
        ));
    }
    std::fs::write(&tokens, text).unwrap();
    let mut args = vec!["--auth-tokens".to_owned(), tokens.display().to_string()];
    args.extend(options.args.iter().cloned());
    let mut s = Server::start_with(ServerOptions {
        args,
        no_default_auth: true,
        ..options
    });
    s.token = Some(ADMIN_TOKEN.to_owned());
    s
}
