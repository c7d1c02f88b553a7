//! The OpenTelemetry layer's filter, [`traced_only`], in a subscriber as
//! `init` builds it: which spans and events the layer behind it sees.

use std::sync::{Arc, Mutex};

use opentelemetry::trace::TracerProvider as _;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::traced_only;

/// What the inner layer was shown, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn push(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Seen {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        self.push(format!("new {}", attrs.metadata().name()));
    }

    fn on_record(&self, id: &Id, _: &Record<'_>, ctx: Context<'_, S>) {
        self.push(format!("record {}", ctx.span(id).unwrap().name()));
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut message = String::new();
        event.record(&mut |f: &tracing::field::Field, v: &dyn std::fmt::Debug| {
            if f.name() == "message" {
                message = format!("{v:?}");
            }
        });
        self.push(format!("event {message}"));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.push(format!("close {}", ctx.span(&id).unwrap().name()));
    }
}

fn with_layer(logs: LevelFilter, f: impl FnOnce()) -> Vec<String> {
    let seen = Seen::default();
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::sink)
                .with_filter(logs),
        )
        .with(seen.clone().with_filter(traced_only()));
    tracing::subscriber::with_default(subscriber, f);
    seen.take()
}

#[test]
fn a_sampled_entry_span_and_what_runs_inside_it_are_passed_on() {
    // Whether the logs want the debug span or not, OpenTelemetry does not.
    for logs in [LevelFilter::INFO, LevelFilter::DEBUG] {
        a_sampled_entry_span_with_logs_at(logs);
    }
}

fn a_sampled_entry_span_with_logs_at(logs: LevelFilter) {
    let seen = with_layer(logs, || {
        let entry = entry_span!(true, "entry", outcome = tracing::field::Empty);
        entry.in_scope(|| {
            let child = tracing::info_span!("child");
            let explicit = tracing::info_span!(parent: &child, "explicit");
            // Too fine to be traced, whatever its parent.
            let fine = tracing::debug_span!("fine");
            child.in_scope(|| tracing::info!("inside"));
            drop((explicit, fine, child));
        });
        entry.record("outcome", "ok");
    });
    assert_eq!(
        seen,
        [
            "new entry",
            "new child",
            "new explicit",
            "event inside",
            "close explicit",
            "close child",
            "record entry",
            "close entry",
        ],
        "logs at {logs}"
    );
}

#[test]
fn an_untraced_entry_span_and_what_runs_inside_it_are_not() {
    let seen = with_layer(LevelFilter::INFO, || {
        // Not even made inside a traced span: the decision was made where
        // the request entered.
        let elsewhere = entry_span!(true, "elsewhere",);
        let entry =
            elsewhere.in_scope(|| entry_span!(false, "entry", outcome = tracing::field::Empty));
        entry.in_scope(|| {
            let child = tracing::info_span!("child");
            child.in_scope(|| tracing::info!("inside"));
            // An entry span marked sampled starts a trace even here.
            let _sampled = entry_span!(true, "sampled",);
        });
        entry.record("outcome", "ok");
        // A root span that is no entry span is not traced either.
        let _root = tracing::info_span!(parent: None, "root");
        drop(elsewhere);
    });
    assert_eq!(
        seen,
        [
            "new elsewhere",
            "new sampled",
            "close sampled",
            "close elsewhere"
        ]
    );
}

#[test]
fn callsites_finer_than_info_and_untraced_entry_spans_are_ruled_out_when_registered() {
    use tracing_subscriber::Registry;
    let filter = traced_only::<Registry>();
    assert_eq!(filter.max_level_hint(), Some(LevelFilter::INFO));
    let everything = tracing_subscriber::registry().with(LevelFilter::TRACE);
    tracing::subscriber::with_default(everything, || {
        let interest = |span: tracing::Span| filter.callsite_enabled(span.metadata().unwrap());
        assert!(interest(tracing::debug_span!("debug")).is_never());
        assert!(interest(entry_span!(false, "untraced",)).is_never());
        assert!(interest(entry_span!(true, "sampled",)).is_always());
        assert!(interest(tracing::info_span!("info")).is_sometimes());
        assert!(interest(tracing::warn_span!("warn")).is_sometimes());
    });
}

#[test]
fn opentelemetry_finds_its_layer_through_the_filter() {
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("test"))
        .with_context_activation(false);
    let subscriber = tracing_subscriber::registry().with(otel.with_filter(traced_only()));
    tracing::subscriber::with_default(subscriber, || {
        let traced = entry_span!(true, "traced",);
        let trace = traced
            .in_scope(|| tracing::info_span!("child").in_scope(crate::telemetry::current_trace));
        let trace = trace.expect("a sampled span has a trace context");
        assert!(
            crate::telemetry::sampled_flag(&trace.traceparent),
            "{trace:?}"
        );
        let untraced = entry_span!(false, "untraced",);
        assert_eq!(untraced.in_scope(crate::telemetry::current_trace), None);
    });
}
