//! `GET /v1/commands/{id}/events`: a command's events
//! (`orrery_core::events`) as server-sent events, resumable with
//! `Last-Event-ID` (`<run>:<seq>`, the `id` of every event sent).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream, StreamExt};
use orrery_core::events::{self, CommandEvent};

use super::auth::{Principal, Role};
use super::error::{ApiError, ApiResult};
use super::extract::PathParam;
use super::{blocking, Shared};
use crate::apply::EventSink;

/// Events sent per wake-up of a stream.
const BATCH: usize = 1024;

/// Where a reconnecting client left off: the run and the last sequence
/// number it saw.
#[derive(Debug, PartialEq, Eq)]
struct Resume {
    run: String,
    seq: u64,
}

fn parse_last_event_id(headers: &HeaderMap) -> Result<Option<Resume>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let bad = || ApiError::bad_request("`Last-Event-ID` must be `<run>:<seq>` as sent in `id`");
    let text = value.to_str().map_err(|_| bad())?;
    let (run, seq) = text.rsplit_once(':').ok_or_else(bad)?;
    let seq = seq.parse::<u64>().map_err(|_| bad())?;
    if run.is_empty() || run.len() > 64 {
        return Err(bad());
    }
    Ok(Some(Resume {
        run: run.to_owned(),
        seq,
    }))
}

/// Where to go on from in a run: after the event the client saw when it
/// is of this run, from the start of the run otherwise.
fn after(resume: Option<&Resume>, run: &str) -> u64 {
    resume.filter(|r| r.run == run).map_or(0, |r| r.seq)
}

fn sse(event: &CommandEvent) -> Result<Sse, Infallible> {
    Ok(Sse::default()
        .id(format!("{}:{}", event.run, event.seq))
        .data(serde_json::to_string(event).unwrap_or_default()))
}

/// Follows `sink` after `from` until its run finishes.
fn live(sink: EventSink, from: u64) -> impl Stream<Item = Result<Sse, Infallible>> {
    stream::unfold((sink, from, false), |(sink, seen, done)| async move {
        if done {
            return None;
        }
        loop {
            let batch = sink.after(seen, BATCH);
            if batch.events.is_empty() && !batch.done {
                sink.wait_after(seen).await;
                continue;
            }
            let last = batch.events.last().map_or(seen, |e| e.seq);
            let mut out = Vec::with_capacity(batch.events.len() + 1);
            if batch.gap {
                // Fell out of the ring: the client learns it missed some
                // (`GET /v1/commands/{id}` has every operation's state).
                let first = batch.events.first().map_or(last, |e| e.seq);
                out.push(Ok(Sse::default()
                    .event("gap")
                    .data(format!("{{\"after\":{seen},\"next\":{first}}}"))));
            }
            out.extend(batch.events.iter().map(|e| sse(e)));
            return Some((stream::iter(out), (sink, last, batch.done)));
        }
    })
    .flatten()
}

pub async fn events_handler(
    State(state): State<Arc<Shared>>,
    principal: Principal,
    PathParam(id): PathParam,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let resume = parse_last_event_id(&headers)?;
    let (stack, sink) = state.commands.events_of(&id).unzip();
    let store = state.store.clone();
    let lookup = id.clone();
    // The record only when the live events are gone: it carries every
    // operation, which a large command's stream should not wait for.
    let record = match &sink {
        Some(_) => None,
        None => blocking(move || Ok(store.command(Some(&lookup))?)).await?,
    };
    // The command's own stack, from its events or its record: the same
    // permission as `GET /v1/commands/{id}` (a finished command's events
    // are kept after it leaves the running ones).
    let stack = stack.or_else(|| record.as_ref().map(|r| r.stack.clone()));
    match &stack {
        Some(stack) => principal.require(Role::Viewer, stack)?,
        None => principal.require_some(Role::Viewer)?,
    }
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(15));
    let stream = match (sink, record) {
        (Some(sink), _) => {
            let from = after(resume.as_ref(), sink.run());
            live(sink, from).boxed()
        }
        (None, Some(record)) => {
            let from = after(resume.as_ref(), events::RECORD_RUN);
            let told: Vec<_> = events::from_record(&record)
                .iter()
                .filter(|e| e.seq > from)
                .map(sse)
                .collect();
            stream::iter(told).boxed()
        }
        (None, None) => return Err(ApiError::not_found(format!("no command `{id}`"))),
    };
    Ok(axum::response::Sse::new(stream)
        .keep_alive(keep_alive)
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("last-event-id", HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn last_event_id_is_run_colon_seq_or_refused() {
        assert_eq!(parse_last_event_id(&HeaderMap::new()).unwrap(), None);
        assert_eq!(
            parse_last_event_id(&with("0190-ab:42")).unwrap(),
            Some(Resume {
                run: "0190-ab".into(),
                seq: 42
            })
        );
        let long = format!("{}:1", "x".repeat(80));
        for bad in ["42", "r:", ":4", "r:-1", "r:99999999999999999999999", &long] {
            assert!(parse_last_event_id(&with(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_client_of_another_run_starts_from_the_first_event() {
        let seen = Resume {
            run: "old".into(),
            seq: 700,
        };
        assert_eq!(after(Some(&seen), "new"), 0);
        assert_eq!(after(Some(&seen), "old"), 700);
        assert_eq!(after(None, "new"), 0);
    }
}
