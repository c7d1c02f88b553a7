//! Remote mode: `orrery plan|apply|destroy|status|inventory|output|cancel|history
//! --primary URL` submits to a running primary over its HTTP API
//! (`docs/http-api.md`) and renders what local mode renders, from the same
//! JSON views and the same command events.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use orrery_core::events::CommandEvent;
use serde_json::Value;
use tokio::sync::mpsc;

/// How to reach a primary.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RemoteArgs {
    /// Submit to the primary serving its HTTP API at this URL
    /// (`http://host:port` or `https://…`) instead of running the engine
    /// here. Its API token comes from $ORRERY_TOKEN, else --token-file,
    /// else <data-dir>/api-token (what `orrery up` writes).
    #[arg(long = "primary", env = "ORRERY_PRIMARY", value_name = "URL")]
    pub url: Option<String>,
    /// File holding the primary's API token.
    #[arg(long, env = "ORRERY_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// A primary spoken to over HTTP.
#[derive(Clone)]
pub struct Remote {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// Longest a request other than an event stream may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Reconnections of an event stream before giving up.
const RECONNECTS: u32 = 10;

impl RemoteArgs {
    /// The primary these options name, if any. `data_dir` is where `orrery
    /// up` wrote its token.
    pub fn remote(&self, data_dir: &Path) -> anyhow::Result<Option<Remote>> {
        let Some(url) = &self.url else {
            return Ok(None);
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("--primary must be an http:// or https:// URL, not `{url}`");
        }
        let token = match std::env::var("ORRERY_TOKEN").ok().filter(|t| !t.is_empty()) {
            Some(token) => Some(token),
            None => {
                let file = self
                    .token_file
                    .clone()
                    .or_else(|| Some(data_dir.join("api-token")).filter(|p| p.is_file()));
                match file {
                    Some(file) => Some(
                        std::fs::read_to_string(&file)
                            .with_context(|| format!("cannot read {}", file.display()))?
                            .trim()
                            .to_owned(),
                    ),
                    None => None,
                }
            }
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Some(Remote {
            base: url.trim_end_matches('/').to_owned(),
            token,
            agent,
        }))
    }
}

/// The API's answer to a request that did not succeed.
pub fn api_error(status: u16, body: &Value) -> anyhow::Error {
    let message = body["error"].as_str().unwrap_or("no error message");
    anyhow::anyhow!("the primary answered {status}: {message}")
}

impl Remote {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn authorized<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => req.header("authorization", format!("Bearer {t}")),
            None => req,
        }
    }

    fn answer(
        &self,
        resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut resp =
            resp.with_context(|| format!("cannot reach the primary at {}", self.base))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(256 << 20)
            .read_to_string()
            .context("cannot read the primary's answer")?;
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok((status, value))
    }

    /// `GET path`: the status and JSON answer.
    pub fn get_status(&self, path: &str) -> anyhow::Result<(u16, Value)> {
        let req = self
            .authorized(self.agent.get(self.url(path)))
            .config()
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build();
        tokio::task::block_in_place(|| self.answer(req.call()))
    }

    /// `GET path`: the JSON answer of a 2xx, an error otherwise.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        let (status, body) = self.get_status(path)?;
        if !(200..300).contains(&status) {
            return Err(api_error(status, &body));
        }
        Ok(body)
    }

    /// `POST path` with `body`: the status and JSON answer.
    pub fn post_status(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        let req = self
            .authorized(self.agent.post(self.url(path)))
            .config()
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build();
        tokio::task::block_in_place(|| self.answer(req.send_json(body)))
    }

    /// `POST path` with `body`: the JSON answer of a 2xx, an error otherwise.
    pub fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let (status, answer) = self.post_status(path, body)?;
        if !(200..300).contains(&status) {
            return Err(api_error(status, &answer));
        }
        Ok(answer)
    }

    /// Follows the events of command `id` on a thread of its own, sending
    /// them to the returned channel until the stream ends; a dropped
    /// connection is resumed with `Last-Event-ID`. An error ends it.
    pub fn follow(&self, id: &str) -> mpsc::UnboundedReceiver<anyhow::Result<CommandEvent>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (remote, path) = (self.clone(), format!("/v1/commands/{id}/events"));
        std::thread::spawn(move || {
            let mut last: Option<String> = None;
            let mut failures = 0;
            loop {
                match remote.read_stream(&path, last.as_deref(), &tx) {
                    Ok(Some(id)) => {
                        last = Some(id);
                        failures = 0;
                    }
                    // The stream ended after `finished`, or nobody listens.
                    Ok(None) => return,
                    Err(e) => {
                        failures += 1;
                        if failures > RECONNECTS {
                            let _ = tx.send(Err(e));
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(200 * u64::from(failures)));
                    }
                }
            }
        });
        rx
    }

    /// Reads one connection of an event stream. `Ok(None)`: it ended with
    /// the command (or the receiver is gone); `Ok(Some(id))`: it broke
    /// after event `id`.
    fn read_stream(
        &self,
        path: &str,
        last: Option<&str>,
        tx: &mpsc::UnboundedSender<anyhow::Result<CommandEvent>>,
    ) -> anyhow::Result<Option<String>> {
        let mut req = self.authorized(self.agent.get(self.url(path)));
        if let Some(id) = last {
            req = req.header("last-event-id", id);
        }
        let resp = req
            .call()
            .with_context(|| format!("cannot reach the primary at {}", self.base))?;
        let status = resp.status().as_u16();
        if status != 200 {
            let (_, body) = self.answer(Ok(resp))?;
            let error = api_error(status, &body);
            let _ = tx.send(Err(error));
            return Ok(None);
        }
        let reader = BufReader::new(resp.into_body().into_reader());
        let (mut id, mut data, mut seen) = (None::<String>, String::new(), last.map(str::to_owned));
        for line in reader.lines() {
            let Ok(line) = line else {
                return match seen {
                    Some(seen) => Ok(Some(seen)),
                    None => bail!("the event stream broke before its first event"),
                };
            };
            if line.is_empty() {
                if let Some(id) = id.take() {
                    let event: CommandEvent = serde_json::from_str(&data)
                        .with_context(|| format!("not a command event: {data}"))?;
                    let finished =
                        matches!(event.body, orrery_core::events::EventBody::Finished(_));
                    if tx.send(Ok(event)).is_err() || finished {
                        return Ok(None);
                    }
                    seen = Some(id);
                }
                data.clear();
            } else if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        // The server ends a stream only after `finished`.
        match seen {
            Some(seen) => Ok(Some(seen)),
            None => Ok(None),
        }
    }
}
