//! The log context of an untraced request, kept without a tracing span.
//!
//! A request that is not traced needs its span only so that the log lines
//! written while it runs name the request and its trace. Opening one cost a
//! quarter of a plugin's instructions per request (callgrind: a registry
//! slot, the fields written as JSON text at once, the span entered and left
//! at every poll), and most requests write no line at all. A [`LogScope`]
//! holds the same fields as they are, in a thread-local while its future is
//! polled; the JSON log formatter installed by [`init`](super::init) writes
//! them only when a line is written, as the `span` a line is in (when no
//! span of its own is) and the first of its `spans`.
//!
//! Where that formatter is not the one logging (text logs, or a subscriber
//! set before `init`), [`LogScope::enabled`] is false and callers open a
//! span as before.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use orrery_schema::TraceContext;
use serde_json::{Map, Value};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Set once the scoped JSON formatter logs for this process.
static ENABLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static CURRENT: RefCell<Option<Arc<LogScope>>> = const { RefCell::new(None) };
}

/// A request's name and fields for the log lines written inside it.
#[derive(Debug)]
pub struct LogScope {
    name: &'static str,
    fields: Vec<(&'static str, String)>,
    trace: Option<TraceContext>,
}

impl LogScope {
    /// Whether log lines show scopes: the JSON formatter of
    /// [`init`](super::init) is this process's. When false, open a span.
    pub fn enabled() -> bool {
        ENABLED.load(Ordering::Relaxed)
    }

    /// A scope named like the span it stands for, with room for `fields`.
    pub fn new(name: &'static str, fields: usize) -> Self {
        LogScope {
            name,
            fields: Vec::with_capacity(fields),
            trace: None,
        }
    }

    /// Adds a field, shown as a JSON string.
    pub fn field(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.fields.push((name, value.into()));
        self
    }

    /// The trace the request belongs to: lines show its `trace_id`, read
    /// from the `traceparent` only when a line is written.
    pub fn trace(mut self, trace: Option<&TraceContext>) -> Self {
        self.trace = trace.cloned();
        self
    }

    /// Runs `work` with this scope current at every poll.
    pub async fn scope<F: Future>(self: Arc<Self>, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| self.in_scope(|| work.as_mut().poll(cx))).await
    }

    /// Runs `f` with this scope current.
    pub fn in_scope<R>(self: &Arc<Self>, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Arc<LogScope>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(Some(self.clone()))));
        f()
    }

    /// The scope as a line's span object: its fields, `trace_id`, `name`.
    fn to_json(&self) -> Value {
        let mut object: Map<String, Value> = self
            .fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String(v.clone())))
            .collect();
        if let Some(id) = self.trace.as_ref().and_then(super::propagation::trace_id) {
            object.insert("trace_id".into(), Value::String(id));
        }
        object.insert("name".into(), Value::String(self.name.into()));
        Value::Object(object)
    }
}

/// Where a request's log lines find its fields: a tracing span (a traced
/// request, or where log lines do not show scopes) or a [`LogScope`].
#[derive(Debug)]
pub enum RequestContext {
    /// A span: exported when its trace is sampled.
    Span(tracing::Span),
    /// A scope: fields for log lines, nothing exported.
    Scope(Arc<LogScope>),
}

impl RequestContext {
    /// Runs `work` inside this context at every poll.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        match self {
            RequestContext::Span(span) => tracing::Instrument::instrument(work, span.clone()).await,
            RequestContext::Scope(scope) => scope.clone().scope(work).await,
        }
    }

    /// Runs `f` inside this context.
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        match self {
            RequestContext::Span(span) => span.in_scope(f),
            RequestContext::Scope(scope) => scope.in_scope(f),
        }
    }
}

fn current() -> Option<Arc<LogScope>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Marks scopes as shown: called once the formatter below is installed.
pub(crate) fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// A JSON event formatter that adds the current [`LogScope`] to the line
/// the inner formatter writes. Lines outside a scope are the inner
/// formatter's, untouched.
pub(crate) struct ScopedJson<F>(pub(crate) F);

impl<S, N, F> FormatEvent<S, N> for ScopedJson<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some(scope) = current() else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(&line) else {
            return writer.write_str(&line);
        };
        let span = scope.to_json();
        let mut spans = match map.remove("spans") {
            Some(Value::Array(spans)) => spans,
            _ => Vec::new(),
        };
        spans.insert(0, span.clone());
        map.entry("span").or_insert(span);
        map.insert("spans".into(), Value::Array(spans));
        writeln!(writer, "{}", Value::Object(map))
    }
}

#[cfg(test)]
#[path = "log_scope_tests.rs"]
mod tests;
