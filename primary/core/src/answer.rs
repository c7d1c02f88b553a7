//! What a plugin's answer means: "retry this", "poll again" or "give up".
//! Resuming and paced requests (resume, discovery, drift, import) use it;
//! the executor does not use it yet (it has rules of its own).

use std::time::Duration;

use orrery_schema::{ErrorCode, ListResult, OperationStatus, ProgressEvent, ProtocolError};

/// What came back for a request.
#[derive(Clone, Copy, Debug)]
pub enum Reply<'a> {
    /// A progress event (create, read, update, delete, status).
    Progress(&'a ProgressEvent),
    /// A list page.
    List(&'a ListResult),
    /// The plugin could not understand the request.
    Error(&'a ProtocolError),
    /// Nothing came back: the transport failed with this code.
    Transport {
        /// The transport's error code.
        code: &'a ErrorCode,
        /// Its message.
        message: &'a str,
    },
}

/// Which answer a request wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A progress event.
    Progress,
    /// A list page.
    List,
}

/// What an answer means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It finished and took effect.
    Succeeded,
    /// It goes on: poll again, after `retry_after` if given.
    InProgress {
        /// The plugin's requested poll interval.
        retry_after: Option<Duration>,
    },
    /// It failed, and trying again may succeed.
    Retryable {
        /// Why.
        code: ErrorCode,
        /// The plugin's (or transport's) message.
        message: String,
        /// Wait at least this long first.
        retry_after: Option<Duration>,
    },
    /// It failed for good.
    Terminal {
        /// Why.
        code: ErrorCode,
        /// The message.
        message: String,
    },
}

fn failed(code: ErrorCode, message: String, retry_after: Option<Duration>) -> Verdict {
    if code.is_retryable() {
        Verdict::Retryable {
            code,
            message,
            retry_after,
        }
    } else {
        Verdict::Terminal { code, message }
    }
}

/// Classifies `reply` to a request that wants `expect`. An answer of the
/// wrong kind is a terminal `InternalFailure` (the plugin is broken); a
/// failure without a code is one too.
pub fn classify(reply: Reply<'_>, expect: Expect) -> Verdict {
    let retry_after = |ms: Option<u64>| ms.map(Duration::from_millis);
    match (reply, expect) {
        (Reply::Progress(p), Expect::Progress) => match p.status {
            OperationStatus::Success => Verdict::Succeeded,
            OperationStatus::InProgress | OperationStatus::Pending => Verdict::InProgress {
                retry_after: retry_after(p.retry_after_ms),
            },
            _ => failed(
                p.error_code.clone().unwrap_or(ErrorCode::InternalFailure),
                p.message.clone().unwrap_or_default(),
                retry_after(p.retry_after_ms),
            ),
        },
        (Reply::List(l), Expect::List) => match l.status {
            OperationStatus::Success => Verdict::Succeeded,
            _ => failed(
                l.error_code.clone().unwrap_or(ErrorCode::InternalFailure),
                l.message.clone().unwrap_or_default(),
                None,
            ),
        },
        (Reply::Error(e), _) => failed(e.code.clone(), e.message.clone(), None),
        (Reply::Transport { code, message }, _) => failed(code.clone(), message.to_owned(), None),
        (Reply::List(_), Expect::Progress) => Verdict::Terminal {
            code: ErrorCode::InternalFailure,
            message: "plugin answered with a list page".into(),
        },
        (Reply::Progress(_), Expect::List) => Verdict::Terminal {
            code: ErrorCode::InternalFailure,
            message: "plugin answered a list request with a progress event".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(status: OperationStatus, code: Option<ErrorCode>) -> ProgressEvent {
        ProgressEvent {
            status,
            error_code: code,
            message: Some("m".into()),
            retry_after_ms: Some(250),
            ..Default::default()
        }
    }

    fn list(status: OperationStatus, code: Option<ErrorCode>) -> ListResult {
        ListResult {
            status,
            error_code: code,
            message: Some("m".into()),
            ..Default::default()
        }
    }

    fn retryable(code: ErrorCode, retry_after: Option<u64>) -> Verdict {
        Verdict::Retryable {
            code,
            message: "m".into(),
            retry_after: retry_after.map(Duration::from_millis),
        }
    }

    fn terminal(code: ErrorCode, message: &str) -> Verdict {
        Verdict::Terminal {
            code,
            message: message.into(),
        }
    }

    /// A reply's parts, owned, for the table.
    enum Owned {
        P(ProgressEvent),
        L(ListResult),
        E(ProtocolError),
        T(ErrorCode),
    }

    impl Owned {
        fn reply(&self) -> Reply<'_> {
            match self {
                Owned::P(p) => Reply::Progress(p),
                Owned::L(l) => Reply::List(l),
                Owned::E(e) => Reply::Error(e),
                Owned::T(code) => Reply::Transport { code, message: "m" },
            }
        }
    }

    #[test]
    fn every_kind_of_answer_is_classified() {
        use ErrorCode as C;
        use OperationStatus as S;
        let protocol = ProtocolError {
            code: C::InvalidRequest,
            message: "m".into(),
        };
        let busy = ProtocolError {
            code: C::ServiceInternalError,
            message: "m".into(),
        };
        let cases: Vec<(Owned, Expect, Verdict)> = vec![
            (
                Owned::P(progress(S::Success, None)),
                Expect::Progress,
                Verdict::Succeeded,
            ),
            (
                Owned::P(progress(S::InProgress, None)),
                Expect::Progress,
                Verdict::InProgress {
                    retry_after: Some(Duration::from_millis(250)),
                },
            ),
            (
                Owned::P(progress(S::Pending, None)),
                Expect::Progress,
                Verdict::InProgress {
                    retry_after: Some(Duration::from_millis(250)),
                },
            ),
            (
                Owned::P(progress(S::Failure, Some(C::Throttling))),
                Expect::Progress,
                retryable(C::Throttling, Some(250)),
            ),
            (
                Owned::P(progress(S::Failure, Some(C::NotFound))),
                Expect::Progress,
                terminal(C::NotFound, "m"),
            ),
            (
                Owned::P(progress(S::Failure, None)),
                Expect::Progress,
                terminal(C::InternalFailure, "m"),
            ),
            (
                Owned::L(list(S::Success, None)),
                Expect::List,
                Verdict::Succeeded,
            ),
            (
                Owned::L(list(S::Failure, Some(C::NetworkFailure))),
                Expect::List,
                retryable(C::NetworkFailure, None),
            ),
            (
                Owned::L(list(S::Failure, Some(C::AccessDenied))),
                Expect::List,
                terminal(C::AccessDenied, "m"),
            ),
            (
                Owned::E(protocol.clone()),
                Expect::Progress,
                terminal(C::InvalidRequest, "m"),
            ),
            (
                Owned::E(busy.clone()),
                Expect::List,
                retryable(C::ServiceInternalError, None),
            ),
            (
                Owned::T(C::NetworkFailure),
                Expect::Progress,
                retryable(C::NetworkFailure, None),
            ),
            // Certain failures end at once: no satellite serves the
            // target, the plugin is not installed, the plugin refused.
            (
                Owned::T(C::NoSatellite),
                Expect::Progress,
                terminal(C::NoSatellite, "m"),
            ),
            (
                Owned::T(C::PluginNotFound),
                Expect::List,
                terminal(C::PluginNotFound, "m"),
            ),
            (
                Owned::P(progress(S::Failure, Some(C::InvalidRequest))),
                Expect::Progress,
                terminal(C::InvalidRequest, "m"),
            ),
            (
                Owned::L(list(S::Success, None)),
                Expect::Progress,
                terminal(C::InternalFailure, "plugin answered with a list page"),
            ),
            (
                Owned::P(progress(S::Success, None)),
                Expect::List,
                terminal(
                    C::InternalFailure,
                    "plugin answered a list request with a progress event",
                ),
            ),
        ];
        for (i, (owned, expect, verdict)) in cases.iter().enumerate() {
            let reply = owned.reply();
            assert_eq!(classify(reply, *expect), *verdict, "case {i}: {reply:?}");
        }
    }
}
