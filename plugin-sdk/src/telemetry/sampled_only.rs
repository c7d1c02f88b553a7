//! The OpenTelemetry layer, handed only the spans of sampled traces.
//!
//! A per-layer filter (`Layer::with_filter`) would say the same, but it
//! looks the span up in the registry on every enter, exit and close of
//! every span, traced or not, to read its own decision back: at 1 %
//! sampling that was most of what exporting cost an untraced request
//! (BENCHMARKS.md, relay round 14). This layer marks the spans it passes on
//! and counts the open ones by a hash of their id, so an untraced span's
//! enter, exit, close or record costs one atomic load (and a lookup only
//! in the rare case its counter is shared with an open traced span).
//!
//! Which spans are traced is decided when a span is made (see
//! `sampling.rs`): an entry span with the [`SAMPLED_FIELD`] field, and any
//! `INFO` or coarser span whose parent is traced, except an entry span
//! marked [`UNTRACED_FIELD`]. Only the parent is looked at, not its
//! ancestors: spans of a traced request nest directly.

use std::any::TypeId;
use std::sync::atomic::{AtomicUsize, Ordering};

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::sampling::{SAMPLED_FIELD, UNTRACED_FIELD};

/// Spans passed on and not yet closed, counted by a hash of their id, in
/// every subscriber of the process: a zero count says a span is not traced
/// without looking it up. 1,024 counters keep that answer at hand nearly
/// always while a few traces are open at a time.
static LIVE: [AtomicUsize; BUCKETS] = [const { AtomicUsize::new(0) }; BUCKETS];
const BUCKETS: usize = 1024;

#[inline(always)]
fn bucket(id: &Id) -> &'static AtomicUsize {
    // Fibonacci hashing: the registry's ids are slab slots, close together.
    let hash = id.into_u64().wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &LIVE[(hash >> (64 - BUCKETS.trailing_zeros())) as usize]
}

/// The mark of a span passed on; counted while the registry holds it (its
/// extensions are dropped once every layer has seen the close).
struct Traced(&'static AtomicUsize);

impl Traced {
    fn new(id: &Id) -> Self {
        let count = bucket(id);
        count.fetch_add(1, Ordering::Relaxed);
        Traced(count)
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether the span `id` was passed on. A span that is open was counted
/// before its id could reach another thread, so a zero count means no; the
/// count is read inline and the span looked up only when it is not zero.
#[inline(always)]
fn is_traced<S>(id: &Id, ctx: &Context<'_, S>) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    bucket(id).load(Ordering::Relaxed) > 0 && is_marked(id, ctx)
}

/// Whether the current span may be one this layer passed on: `false`
/// means it certainly is not (there is no current span, or no marked span
/// shares its bucket), so OpenTelemetry has no context for it. Without
/// the layer (no export) nothing is marked and this is always `false`.
pub(super) fn current_may_be_traced() -> bool {
    tracing::dispatcher::get_default(|dispatch| {
        dispatch
            .current_span()
            .id()
            .is_some_and(|id| bucket(id).load(Ordering::Relaxed) > 0)
    })
}

#[inline(never)]
fn is_marked<S>(id: &Id, ctx: &Context<'_, S>) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    ctx.span(id)
        .is_some_and(|span| span.extensions().get::<Traced>().is_some())
}

/// `inner` (the OpenTelemetry layer) seeing only the spans of sampled
/// traces and the events inside them.
pub(super) struct SampledOnly<L> {
    inner: L,
    /// The most verbose level the log layer may want: callsites finer than
    /// this and than `INFO` are off for good. `None` when the log filter
    /// cannot tell (it has span-field directives).
    logs: Option<LevelFilter>,
}

impl<L> SampledOnly<L> {
    /// `logs` is the log layer's filter's `max_level_hint`.
    pub(super) fn new(inner: L, logs: Option<LevelFilter>) -> Self {
        SampledOnly { inner, logs }
    }

    fn is_traced_callsite(meta: &Metadata<'_>) -> bool {
        *meta.level() <= Level::INFO
    }
}

impl<S, L> Layer<S> for SampledOnly<L>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    L: Layer<S>,
{
    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        self.inner.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber);
    }

    // This is a layer without a per-layer filter, so `never` here would
    // turn the callsite off for the log layer too: only callsites neither
    // wants are `never` (debug events in hot loops stay statically off);
    // the rest are left to the log layer's filter.
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        match self.logs {
            Some(logs) if !Self::is_traced_callsite(meta) && *meta.level() > logs => {
                Interest::never()
            }
            _ => Interest::always(),
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.logs.map(|logs| logs.max(LevelFilter::INFO))
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if !Self::is_traced_callsite(meta) {
            return;
        }
        let fields = meta.fields();
        let traced = fields.field(SAMPLED_FIELD).is_some()
            || (fields.field(UNTRACED_FIELD).is_none()
                && attrs
                    .parent()
                    .cloned()
                    .or_else(|| {
                        attrs
                            .is_contextual()
                            .then(|| ctx.current_span().id().cloned())?
                    })
                    .is_some_and(|parent| is_traced(&parent, &ctx)));
        if !traced {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Traced::new(id));
        }
        self.inner.on_new_span(attrs, id, ctx);
    }

    // Unless a traced span is open, the span at hand is not one.
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if is_traced(id, &ctx) {
            self.inner.on_record(id, values, ctx);
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        if is_traced(id, &ctx) {
            self.inner.on_follows_from(id, follows, ctx);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !Self::is_traced_callsite(event.metadata()) {
            return;
        }
        let in_traced = event
            .parent()
            .cloned()
            .or_else(|| {
                event
                    .is_contextual()
                    .then(|| ctx.current_span().id().cloned())?
            })
            .is_some_and(|span| is_traced(&span, &ctx));
        if in_traced {
            self.inner.on_event(event, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if is_traced(id, &ctx) {
            self.inner.on_enter(id, ctx);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if is_traced(id, &ctx) {
            self.inner.on_exit(id, ctx);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if is_traced(&id, &ctx) {
            self.inner.on_close(id, ctx);
        }
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }

    // `OpenTelemetrySpanExt` finds OpenTelemetry's layer by downcasting the
    // subscriber: it must see through this one.
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            Some(self as *const Self as *const ())
        } else {
            // SAFETY: forwarded unchanged; the inner layer answers for its
            // own types.
            unsafe { self.inner.downcast_raw(id) }
        }
    }
}

#[cfg(test)]
#[path = "sampled_only_tests.rs"]
mod tests;
