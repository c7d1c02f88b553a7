//! Remote mode: `orrery plan|apply|destroy|status|inventory|output|cancel|history
//! --primary URL` submits to a running primary over its HTTP API
//! (`docs/http-api.md`) and renders what local mode renders, from the same
//! JSON views and the same command events.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use orrery_core::events::CommandEvent;
use orrery_primary::service::ServiceError;
use orrery_primary::stack::{Position, Problem, StackError};
use serde_json::Value;
use tokio::sync::mpsc;
use ureq::tls::{parse_pem, Certificate, PemItem, RootCerts, TlsConfig};

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
    /// PEM file of the certificate authorities an `https://` primary's
    /// certificate is checked against, instead of the public ones (a
    /// private CA).
    #[arg(long, env = "ORRERY_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

/// The certificates of the PEM file `path`: at least one, or an error
/// naming the file.
fn ca_certificates(path: &Path) -> anyhow::Result<Vec<Certificate<'static>>> {
    let pem = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut certs = Vec::new();
    for item in parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => bail!("{} is not a PEM file of certificates: {e}", path.display()),
        }
    }
    if certs.is_empty() {
        bail!("{} holds no PEM certificate", path.display());
    }
    Ok(certs)
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
        let mut config = ureq::Agent::config_builder().http_status_as_error(false);
        if let Some(ca_file) = &self.ca_file {
            let roots = RootCerts::new_with_certs(&ca_certificates(ca_file)?);
            config = config.tls_config(TlsConfig::builder().root_certs(roots).build());
        }
        let agent: ureq::Agent = config.build().into();
        Ok(Some(Remote {
            base: url.trim_end_matches('/').to_owned(),
            token,
            agent,
        }))
    }
}

/// The API's answer to a request that did not succeed: the stack errors
/// of a 422 as local mode renders them (against the files on this side),
/// anything else as one line.
pub fn api_error(status: u16, body: &Value) -> anyhow::Error {
    if let Some(errors) = stack_errors(body) {
        return ServiceError::InvalidStack(errors).into();
    }
    let message = body["error"].as_str().unwrap_or("no error message");
    anyhow::anyhow!("the primary answered {status}: {message}")
}

/// The stack errors of an answer (`errors`, `docs/http-api.md`), as the
/// CLI's own: the message as the problem, the column as a position whose
/// span runs to the end of the word there (the answer carries no span).
fn stack_errors(body: &Value) -> Option<Vec<StackError>> {
    let errors = body["errors"].as_array().filter(|e| !e.is_empty())?;
    let mut texts: Vec<(String, Option<String>)> = Vec::new();
    let errors = errors
        .iter()
        .map(|e| {
            let file = e["file"].as_str().unwrap_or("the document").to_owned();
            let line = e["line"].as_u64().map(|l| l as usize);
            let column = e["column"].as_u64().map(|c| c as usize);
            if !texts.iter().any(|(f, _)| *f == file) {
                texts.push((file.clone(), std::fs::read_to_string(&file).ok()));
            }
            let text = texts
                .iter()
                .find(|(f, _)| *f == file)
                .and_then(|(_, t)| t.as_deref());
            let position = match (text, line, column) {
                (Some(text), Some(line), Some(column)) => {
                    word_at(text, line, column).map(|span| Box::new(Position { column, span }))
                }
                _ => None,
            };
            StackError {
                file,
                line,
                position,
                resource: e["resource"].as_str().map(str::to_owned),
                problem: Problem::Syntax(e["message"].as_str().unwrap_or_default().to_owned()),
            }
        })
        .collect();
    Some(errors)
}

/// The byte range of the word at 1-based `line` and `column` (in
/// characters) of `text`: up to the next whitespace or the line's end
/// (empty at the end of a line).
fn word_at(text: &str, line: usize, column: usize) -> Option<std::ops::Range<usize>> {
    let before: Vec<&str> = text
        .split_inclusive('\n')
        .take(line.checked_sub(1)?)
        .collect();
    if before.len() + 1 < line {
        return None;
    }
    let start_of_line: usize = before.iter().map(|l| l.len()).sum();
    let rest = text.get(start_of_line..)?;
    let rest = &rest[..rest.find('\n').unwrap_or(rest.len())];
    // Just past the line's last character is where an end of input is.
    let offset = rest
        .char_indices()
        .map(|(i, _)| i)
        .chain([rest.len()])
        .nth(column.checked_sub(1)?)?;
    let word = &rest[offset..];
    let start = start_of_line + offset;
    Some(start..start + word.find(char::is_whitespace).unwrap_or(word.len()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_at_a_line_and_column_is_found_and_nothing_outside_the_text() {
        let text = "stack: a\nresources:\n  - target: tee  # x\n  - é: y\n";
        assert_eq!(word_at(text, 3, 13).map(|r| &text[r]), Some("tee"));
        assert_eq!(word_at(text, 4, 5).map(|r| &text[r]), Some("é:"));
        assert_eq!(word_at(text, 1, 9), Some(8..8), "the end of the line");
        for (line, column) in [(0, 1), (1, 0), (9, 1), (2, 40)] {
            assert_eq!(word_at(text, line, column), None, "{line}:{column}");
        }
    }

    #[test]
    fn a_422_carries_the_stack_errors_and_anything_else_is_one_line() {
        let body = serde_json::json!({"error": "the stack is invalid; nothing was changed",
            "errors": [{"file": "/nonexistent/a.yaml", "line": 5, "column": 13, "resource": "x",
                "message": "unknown target `t`"}]});
        let e = api_error(422, &body);
        let Some(ServiceError::InvalidStack(errors)) = e.downcast_ref::<ServiceError>() else {
            panic!("{e:#}");
        };
        assert_eq!(
            errors[0].to_string(),
            "/nonexistent/a.yaml:5: resource `x`: unknown target `t`"
        );
        let e = api_error(502, &Value::Null);
        assert_eq!(
            format!("{e:#}"),
            "the primary answered 502: no error message"
        );
    }
}
