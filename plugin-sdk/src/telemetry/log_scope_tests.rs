use std::io;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

use super::*;
use crate::telemetry::json_fields::JsonFields;

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The JSON lines `log` writes through the formatter `init` installs.
fn lines(log: impl FnOnce()) -> Vec<Value> {
    let lines = Lines::default();
    let writer = {
        let lines = lines.clone();
        move || lines.clone()
    };
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(true)
        .with_writer(writer)
        .fmt_fields(JsonFields)
        .map_event_format(ScopedJson);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), log);
    let bytes = lines.0.lock().unwrap().clone();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

fn trace(traceparent: &str) -> TraceContext {
    TraceContext {
        traceparent: traceparent.into(),
        tracestate: String::new(),
    }
}

fn scope(traceparent: &str) -> Arc<LogScope> {
    Arc::new(
        LogScope::new("plugin.handle", 2)
            .field("operation", "create")
            .field("request_id", "r-1 \"quoted\"")
            .trace(Some(&trace(traceparent))),
    )
}

#[test]
fn a_line_in_a_scope_reads_as_it_would_in_the_span() {
    let scoped = lines(|| scope(TRACEPARENT).in_scope(|| tracing::info!(answer = 42, "inside")));
    let spanned = lines(|| {
        let span = tracing::info_span!(
            "plugin.handle",
            operation = "create",
            request_id = "r-1 \"quoted\"",
            trace_id = tracing::field::Empty,
        );
        crate::telemetry::set_parent(&span, &trace(TRACEPARENT));
        span.in_scope(|| tracing::info!(answer = 42, "inside"));
    });
    let (scoped, spanned) = (&scoped[0], &spanned[0]);
    assert_eq!(scoped["span"], spanned["span"]);
    assert_eq!(scoped["spans"], spanned["spans"]);
    assert_eq!(scoped["fields"], spanned["fields"]);
    assert_eq!(scoped["level"], spanned["level"]);
    assert_eq!(scoped["target"], spanned["target"]);
    assert_eq!(
        scoped["span"]["trace_id"],
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(scoped["span"]["request_id"], "r-1 \"quoted\"");
}

#[test]
fn a_line_outside_every_scope_is_the_inner_formatters() {
    let lines = lines(|| {
        scope(TRACEPARENT).in_scope(|| {});
        tracing::info!("outside");
    });
    assert_eq!(lines.len(), 1);
    assert!(lines[0].get("span").is_none(), "{}", lines[0]);
    assert!(lines[0].get("spans").is_none(), "{}", lines[0]);
    assert_eq!(lines[0]["fields"]["message"], "outside");
}

#[test]
fn a_span_opened_in_a_scope_is_the_lines_span_under_the_scope() {
    let lines = lines(|| {
        scope(TRACEPARENT).in_scope(|| {
            let inner = tracing::info_span!("inner", step = 2u64);
            inner.in_scope(|| tracing::warn!("deeper"));
        })
    });
    let line = &lines[0];
    assert_eq!(line["span"]["name"], "inner");
    assert_eq!(line["spans"][0]["name"], "plugin.handle");
    assert_eq!(line["spans"][0]["request_id"], "r-1 \"quoted\"");
    assert_eq!(line["spans"][1]["step"], 2);
}

#[test]
fn a_malformed_traceparent_gives_no_trace_id() {
    for bad in [
        "",
        "garbage",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    ] {
        let lines = lines(|| scope(bad).in_scope(|| tracing::info!("inside")));
        assert!(
            lines[0]["span"].get("trace_id").is_none(),
            "{bad}: {}",
            lines[0]
        );
        assert_eq!(lines[0]["span"]["operation"], "create");
    }
}

#[test]
fn a_scope_is_current_only_while_its_future_is_polled() {
    let lines = lines(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let scoped = scope(TRACEPARENT).scope(async {
                tracing::info!("before the wait");
                rx.await.unwrap();
                tracing::info!("after the wait");
            });
            let other = async {
                tokio::task::yield_now().await;
                tracing::info!("another future");
                tx.send(()).unwrap();
            };
            futures::join!(scoped, other);
        });
    });
    let by_message = |m: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["message"] == m)
            .unwrap_or_else(|| panic!("no line {m}: {lines:?}"))
            .clone()
    };
    assert_eq!(
        by_message("before the wait")["span"]["name"],
        "plugin.handle"
    );
    assert_eq!(
        by_message("after the wait")["span"]["name"],
        "plugin.handle"
    );
    assert!(by_message("another future").get("span").is_none());
}
