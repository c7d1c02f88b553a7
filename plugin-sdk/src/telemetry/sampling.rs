//! Which requests are traced, decided where a trace enters a process.
//!
//! OpenTelemetry's own sampler runs after the tracing layer has already
//! built a span for every request, sampled or not: at 1 % that is most of
//! the cost of tracing. Orrery decides first. A trace starts only at a root
//! span that [`sample_root`] picks; a span entering a process (the
//! satellite's relay, the plugin's handler) is traced only when the request
//! carries a sampled W3C context. [`entry_span!`](crate::entry_span) gives
//! such a span the [`SAMPLED_FIELD`] field when traced (a callsite of its
//! own, so the decision is visible in the span's metadata); the
//! OpenTelemetry layer takes spans with that field and their descendants,
//! nothing else ([`traced_only`], its per-layer filter). Targets and names
//! stay as they are, for log filters.

use std::sync::atomic::{AtomicU64, Ordering};

use orrery_schema::TraceContext;
use tracing::subscriber::Interest;
use tracing::{Level, Subscriber};
use tracing_subscriber::filter::{dynamic_filter_fn, LevelFilter};
use tracing_subscriber::layer::Filter;
use tracing_subscriber::registry::LookupSpan;

/// The field that marks an entry span whose trace is sampled.
pub const SAMPLED_FIELD: &str = "sampled";

/// The field that marks an entry span whose trace is not: OpenTelemetry
/// never sees its callsite, so it costs what an untraced span costs.
pub const UNTRACED_FIELD: &str = "untraced";

/// The share of new traces recorded, as `f64` bits; 0 when not exporting.
static ROOT_RATIO: AtomicU64 = AtomicU64::new(0);

pub(super) fn set_root_ratio(ratio: f64) {
    ROOT_RATIO.store(ratio.to_bits(), Ordering::Relaxed);
}

/// Whether a new trace starting here is recorded: never when nothing is
/// exported, else at the configured ratio.
pub fn sample_root() -> bool {
    let ratio = f64::from_bits(ROOT_RATIO.load(Ordering::Relaxed));
    ratio > 0.0 && (ratio >= 1.0 || random_unit() < ratio)
}

/// Whether a request carrying `trace` continues a recorded trace: its
/// `traceparent` has the sampled flag, and this process exports.
pub fn is_sampled(trace: Option<&TraceContext>) -> bool {
    f64::from_bits(ROOT_RATIO.load(Ordering::Relaxed)) > 0.0
        && trace.is_some_and(|t| sampled_flag(&t.traceparent))
}

/// The sampled bit of a `traceparent` (`00-<trace>-<span>-<flags>`).
pub fn sampled_flag(traceparent: &str) -> bool {
    traceparent
        .rsplit('-')
        .next()
        .and_then(|flags| u8::from_str_radix(flags, 16).ok())
        .is_some_and(|flags| flags & 1 == 1)
}

/// A uniform number in [0, 1) from a per-thread xorshift generator seeded
/// by the clock and the thread: sampling needs spread, not secrecy.
fn random_unit() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x9e37_79b9, |d| d.as_nanos() as u64);
            let local = 0u8;
            (nanos ^ (&local as *const u8 as u64).rotate_left(32)) | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// The OpenTelemetry layer's filter (`Layer::with_filter`): an entry span
/// with the [`SAMPLED_FIELD`] field, and any `INFO` or coarser span or
/// event made inside a span this filter let through, except an entry span
/// marked [`UNTRACED_FIELD`]. Only the current span is looked at, not its
/// ancestors: spans of a traced request nest directly. Callsites finer than
/// `INFO` and untraced entry spans are ruled out when they are registered,
/// so the log layer alone decides about them and a callsite neither layer
/// wants is never asked about again.
pub(super) fn traced_only<S>() -> impl Filter<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    dynamic_filter_fn(|meta, cx| match callsite(meta) {
        Decision::Never => false,
        Decision::Always => true,
        Decision::InsideTraced => cx
            .current_span()
            .id()
            .is_some_and(|id| cx.span(id).is_some()),
    })
    .with_callsite_filter(|meta| match callsite(meta) {
        Decision::Never => Interest::never(),
        Decision::Always => Interest::always(),
        Decision::InsideTraced => Interest::sometimes(),
    })
    .with_max_level_hint(LevelFilter::INFO)
}

/// What [`traced_only`] can tell from a callsite alone.
enum Decision {
    /// Finer than `INFO`, or an untraced entry span.
    Never,
    /// A sampled entry span.
    Always,
    /// Traced when made inside a traced span.
    InsideTraced,
}

// The per-layer filter asks `enabled` whenever the log layer wants a
// callsite, whatever this filter's `Interest` in it was: the decision is
// made again there.
fn callsite(meta: &tracing::Metadata<'_>) -> Decision {
    let fields = meta.fields();
    if *meta.level() > Level::INFO || fields.field(UNTRACED_FIELD).is_some() {
        Decision::Never
    } else if fields.field(SAMPLED_FIELD).is_some() {
        Decision::Always
    } else {
        Decision::InsideTraced
    }
}

/// An INFO span that OpenTelemetry records only when `sampled`: the first
/// span of a trace in a process (see the module docs). Log lines see it
/// either way.
#[macro_export]
macro_rules! entry_span {
    ($sampled:expr, $name:expr, $($fields:tt)*) => {
        // Never-recorded marker fields: each branch is a callsite of its
        // own that filters can tell apart, and log lines do not show them.
        if $sampled {
            ::tracing::info_span!($name, sampled = ::tracing::field::Empty, $($fields)*)
        } else {
            ::tracing::info_span!($name, untraced = ::tracing::field::Empty, $($fields)*)
        }
    };
}

#[cfg(test)]
#[path = "sampling_tests.rs"]
mod filter_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampled_flag_is_read_from_the_traceparent() {
        assert!(sampled_flag(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        assert!(!sampled_flag(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        ));
        assert!(!sampled_flag("garbage"));
        assert!(!sampled_flag(""));
    }

    #[test]
    fn roots_are_sampled_at_the_ratio() {
        set_root_ratio(0.0);
        assert!(
            !(0..1000).any(|_| sample_root()),
            "never when not exporting"
        );
        set_root_ratio(1.0);
        assert!((0..1000).all(|_| sample_root()));
        set_root_ratio(0.25);
        let n = (0..100_000).filter(|_| sample_root()).count();
        assert!((22_000..28_000).contains(&n), "{n} of 100000 at 25%");
        set_root_ratio(0.0);
    }
}
