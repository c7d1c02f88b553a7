//! Spans to an OTLP/HTTP collector, as protobuf written by
//! `otlp_traces.rs` (not `opentelemetry-otlp`'s span exporter, whose
//! conversion cost a third of a traced request; metrics still go through
//! that crate).
//!
//! It reads the standard variables `opentelemetry-otlp` reads for spans:
//! `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (else `OTEL_EXPORTER_OTLP_HEADERS`),
//! `key=value` pairs separated by commas, values percent-decoded; and
//! `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` (else `OTEL_EXPORTER_OTLP_TIMEOUT`),
//! in milliseconds, 10 s by default. A batch the collector refuses for load
//! (429, 502, 503, 504) or that never reached it is sent again, four times
//! in all at most and none starting after the timeout; the batch processor
//! drops it after that.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};

use super::otlp_traces::{export_request, EncodedResource};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// What is read of a collector's answer: enough for an OTLP partial
/// success, and a bound on what a hostile one can make us read.
const ANSWER_LIMIT: u64 = 64 * 1024;

/// The span exporter of a process that exports.
pub(super) struct OtlpSpanExporter {
    client: reqwest::blocking::Client,
    url: String,
    timeout: Duration,
    resource: EncodedResource,
    shut_down: AtomicBool,
}

// Not derived: the URL may hold credentials and the client holds the
// headers; neither belongs in a log line.
impl std::fmt::Debug for OtlpSpanExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpSpanExporter")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl OtlpSpanExporter {
    /// An exporter posting to `url` (`…/v1/traces`), configured by the
    /// standard variables of this process's environment.
    pub(super) fn from_env(url: String) -> Result<Self, reqwest::Error> {
        let var = |signal: &str, general: &str| {
            std::env::var(signal)
                .or_else(|_| std::env::var(general))
                .ok()
        };
        let headers = var(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        )
        .map(|h| parse_headers(&h))
        .unwrap_or_default();
        let timeout = var(
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        )
        .and_then(|ms| ms.trim().parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        Self::new(url, headers, timeout)
    }

    /// An exporter posting to `url` with `headers` on every request, each
    /// request given `timeout`.
    fn new(url: String, headers: HeaderMap, timeout: Duration) -> Result<Self, reqwest::Error> {
        // The blocking client runs a runtime of its own, which may not be
        // made (nor dropped) on a thread that runs one: `init` may.
        let client = std::thread::spawn(move || {
            reqwest::blocking::Client::builder()
                .timeout(timeout)
                .default_headers(headers)
                .build()
        })
        .join()
        .expect("building an HTTP client does not panic")?;
        Ok(OtlpSpanExporter {
            client,
            url,
            timeout,
            resource: EncodedResource::default(),
            shut_down: AtomicBool::new(false),
        })
    }

    fn send(&self, body: bytes::Bytes) -> Result<(), Failure> {
        let response = self
            .client
            .post(&self.url)
            .header(CONTENT_TYPE, "application/x-protobuf")
            .body(body)
            .send()
            // The error names the URL, which may hold credentials.
            .map_err(|_| Failure::Network)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.trim().parse().ok())
            .map(Duration::from_secs);
        // Read to the end (within a bound) so the connection is reused.
        let _ = std::io::copy(&mut response.take(ANSWER_LIMIT), &mut std::io::sink());
        if status.is_success() {
            Ok(())
        } else {
            Err(Failure::Status(status.as_u16(), retry_after))
        }
    }
}

impl SpanExporter for OtlpSpanExporter {
    // The batch processor calls this on its own thread and waits for it,
    // so blocking here blocks nothing else.
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if self.shut_down.load(Ordering::Relaxed) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let body = bytes::Bytes::from(export_request(&self.resource, &batch));
        drop(batch);
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            let failure = match self.send(body.clone()) {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            match retry_delay(attempt, &failure, started.elapsed(), self.timeout) {
                Some(delay) => std::thread::sleep(delay),
                None => {
                    return Err(OTelSdkError::InternalFailure(format!(
                        "OTLP span export failed: {failure}"
                    )))
                }
            }
            attempt += 1;
        }
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.shut_down.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = EncodedResource::new(resource);
    }
}

/// Why one attempt at an export failed.
#[derive(Debug, PartialEq)]
enum Failure {
    /// No answer: refused, reset, timed out.
    Network,
    /// An answer other than 2xx, with its `Retry-After` in seconds.
    Status(u16, Option<Duration>),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Network => f.write_str("the collector could not be reached"),
            Failure::Status(code, _) => write!(f, "the collector answered HTTP {code}"),
        }
    }
}

/// After failed attempt number `attempt` (1-based), `spent` since the
/// first: how long to wait before the next, or `None` to give up. Network
/// failures and load (429, 502, 503, 504) are retried, 100 ms after the
/// first failure and twice as long after each next one, or after the
/// collector's `Retry-After` when longer (at most 30 s); four attempts at
/// most, and none that would start after `timeout`.
fn retry_delay(
    attempt: u32,
    failure: &Failure,
    spent: Duration,
    timeout: Duration,
) -> Option<Duration> {
    const ATTEMPTS: u32 = 4;
    const FIRST: Duration = Duration::from_millis(100);
    const LONGEST_ASKED: Duration = Duration::from_secs(30);
    if attempt >= ATTEMPTS {
        return None;
    }
    let backoff = FIRST * 2u32.pow(attempt.saturating_sub(1).min(16));
    let delay = match failure {
        Failure::Network => backoff,
        Failure::Status(429 | 502 | 503 | 504, asked) => {
            backoff.max(asked.unwrap_or_default().min(LONGEST_ASKED))
        }
        Failure::Status(..) => return None,
    };
    (spent + delay < timeout).then_some(delay)
}

/// `key=value,key2=value2`, values percent-decoded; a pair that is not a
/// valid header is left out. Values are marked sensitive: they are often
/// credentials.
fn parse_headers(text: &str) -> HeaderMap {
    text.split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let name = HeaderName::from_bytes(key.trim().as_bytes()).ok()?;
            let value = percent_encoding::percent_decode_str(value.trim())
                .decode_utf8()
                .ok()?;
            let mut value = HeaderValue::from_str(&value).ok()?;
            value.set_sensitive(true);
            Some((name, value))
        })
        .collect()
}

#[cfg(test)]
#[path = "span_export_tests.rs"]
mod http_tests;

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn network_failures_and_load_are_retried_with_a_doubling_delay() {
        let ms = Duration::from_millis;
        for failure in [
            Failure::Network,
            Failure::Status(429, None),
            Failure::Status(502, None),
            Failure::Status(503, None),
            Failure::Status(504, None),
        ] {
            let delays: Vec<_> = (1..=4)
                .map(|n| retry_delay(n, &failure, Duration::ZERO, 10 * SECOND))
                .collect();
            assert_eq!(
                delays,
                [Some(ms(100)), Some(ms(200)), Some(ms(400)), None],
                "{failure:?}"
            );
        }
    }

    #[test]
    fn a_refusal_is_not_retried() {
        for code in [400, 401, 403, 404, 413, 500] {
            let failure = Failure::Status(code, Some(SECOND));
            assert_eq!(retry_delay(1, &failure, Duration::ZERO, 10 * SECOND), None);
        }
    }

    #[test]
    fn retry_after_lengthens_the_delay_up_to_a_bound_and_within_the_timeout() {
        let asked = |s| Failure::Status(503, Some(Duration::from_secs(s)));
        let long = 100 * SECOND;
        assert_eq!(
            retry_delay(1, &asked(2), Duration::ZERO, long),
            Some(2 * SECOND)
        );
        assert_eq!(
            retry_delay(1, &asked(3600), Duration::ZERO, long),
            Some(30 * SECOND)
        );
        assert_eq!(
            retry_delay(1, &asked(0), Duration::ZERO, long),
            Some(SECOND / 10)
        );
        // A retry that would start after the timeout is not made.
        assert_eq!(retry_delay(1, &asked(2), 9 * SECOND, 10 * SECOND), None);
        assert_eq!(
            retry_delay(1, &Failure::Network, 10 * SECOND, 10 * SECOND),
            None
        );
    }

    #[test]
    fn headers_are_pairs_with_percent_decoded_values_marked_sensitive() {
        let headers = parse_headers("api-key=s3cr%3Dt, x-tenant = a b ,bad header=1,novalue,=x");
        assert_eq!(headers.len(), 2);
        assert_eq!(headers["api-key"], "s3cr=t");
        assert_eq!(headers["x-tenant"], "a b");
        assert!(headers["api-key"].is_sensitive());
    }

    #[test]
    fn the_debug_form_shows_no_url_and_no_header() {
        let exporter = OtlpSpanExporter::new(
            "http://user:pass@collector:4318/v1/traces".into(),
            parse_headers("api-key=s3cret"),
            SECOND,
        )
        .unwrap();
        let shown = format!("{exporter:?}");
        assert!(
            !shown.contains("pass") && !shown.contains("collector") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
