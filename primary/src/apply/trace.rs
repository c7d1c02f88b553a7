//! Spans of a command's operations: one per operation, one per attempt
//! (the NATS request, the satellite's relay and the plugin's handler become
//! its children), one per rate-limit wait. Metrics are recorded alongside.

use std::time::Instant;

use tracing::Span;

use super::Op;
use crate::metrics::metrics;
use crate::scheduler::TaskState;

struct OpSpan {
    span: Span,
    started: Instant,
}

/// The open spans of one command's operations, by task.
pub(super) struct OpSpans {
    ops: Vec<Option<OpSpan>>,
    waits: Vec<Option<Span>>,
}

impl OpSpans {
    pub(super) fn new(len: usize) -> Self {
        OpSpans {
            ops: (0..len).map(|_| None).collect(),
            waits: (0..len).map(|_| None).collect(),
        }
    }

    fn op(&mut self, task: usize, op: &Op) -> &Span {
        &self.ops[task]
            .get_or_insert_with(|| OpSpan {
                span: tracing::info_span!(
                    "orrery.operation",
                    label = %op.label,
                    operation = op.kind.name(),
                    plugin = %op.plugin,
                    target = %op.target,
                    resource_type = %op.resource_type,
                    outcome = tracing::field::Empty,
                ),
                started: Instant::now(),
            })
            .span
    }

    /// The task's next request waits for a rate-limit token from now.
    pub(super) fn rate_limited(&mut self, task: usize, op: &Op, bucket: &str) {
        let parent = self.op(task, op).clone();
        self.waits[task] =
            Some(tracing::info_span!(parent: &parent, "orrery.ratelimit.wait", bucket = %bucket));
    }

    /// A request of the task goes out: ends its rate-limit wait and opens the
    /// span of this attempt, to instrument the request with.
    pub(super) fn attempt(&mut self, task: usize, op: &Op, attempt: u32, polled: bool) -> Span {
        self.waits[task] = None;
        if attempt > 1 && !polled {
            metrics().retry(&op.plugin, op.kind.name());
        }
        metrics().in_flight(1);
        let parent = self.op(task, op).clone();
        tracing::info_span!(
            parent: &parent,
            "orrery.attempt",
            attempt,
            polled,
            error.code = tracing::field::Empty,
        )
    }

    /// The answer to an attempt arrived; `state` is the task's state after it.
    pub(super) fn answered(
        &mut self,
        task: usize,
        op: &Op,
        attempt: &Span,
        error: Option<&orrery_schema::ErrorCode>,
        state: &TaskState,
    ) {
        metrics().in_flight(-1);
        if let Some(code) = error {
            attempt.record("error.code", tracing::field::display(code));
            if *code == orrery_schema::ErrorCode::Throttling {
                metrics().throttled(&op.plugin);
            }
        }
        let outcome = match state {
            TaskState::Succeeded => "succeeded",
            TaskState::Failed { .. } => "failed",
            TaskState::Canceled => "canceled",
            _ => return,
        };
        if let Some(done) = self.ops[task].take() {
            done.span.record("outcome", outcome);
            metrics().operation(&op.plugin, op.kind.name(), outcome, done.started.elapsed());
        }
    }
}
