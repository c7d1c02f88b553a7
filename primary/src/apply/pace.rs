//! Requests outside the scheduler — resuming an interrupted command,
//! discovery, drift sync, import — paced by the same token buckets, limits
//! and retry policy as a command's (the process's `RateRegistry`,
//! `orrery_core::tasks::bucket_limit`, `RetryPolicy::retry_after_failure`,
//! `orrery_core::answer::classify`).
//! This is the I/O edge: it only waits and sends; every decision is the
//! core's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use orrery_bus::transport::Transport;
use orrery_core::answer::{self, Expect, Reply, Verdict};
use orrery_core::tasks::{bucket, bucket_limit};
use orrery_plugin_sdk::Answer;
use orrery_schema::{ErrorCode, Request};

use crate::scheduler::{BucketLimit, Jitter, RateRegistry, RetryPolicy};
use crate::stack::Catalog;

/// One run's requests, paced by the process's token buckets (by
/// `namespace/target`, shared with every other run of the process), with
/// the run's own counts.
pub struct Pacer {
    catalog: Catalog,
    overrides: HashMap<String, BucketLimit>,
    rates: RateRegistry,
    waited: Mutex<Duration>,
    requests: Mutex<u64>,
}

impl Pacer {
    /// Takes tokens from `rates`, the process's registry, with the limits
    /// `catalog` announces, `overrides` first.
    pub fn new(
        catalog: &Catalog,
        overrides: &HashMap<String, BucketLimit>,
        rates: &RateRegistry,
    ) -> Pacer {
        Pacer {
            catalog: catalog.clone(),
            overrides: overrides.clone(),
            rates: rates.clone(),
            waited: Mutex::new(Duration::ZERO),
            requests: Mutex::new(0),
        }
    }

    /// Waits for a token of `plugin` on `target`.
    pub async fn acquire(&self, plugin: &str, target: &str) {
        let key = bucket(&self.catalog, plugin, target);
        let limit = bucket_limit(&self.catalog, &self.overrides, plugin, &key);
        let started = Instant::now();
        // Another run may take the token this one waited for: then wait
        // again, for the next.
        while let Err(at) = self.rates.try_take(&key, limit, Instant::now(), 1) {
            tokio::time::sleep_until(at.into()).await;
        }
        *self.waited.lock().unwrap_or_else(|p| p.into_inner()) += started.elapsed();
        *self.requests.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    }

    /// Time spent waiting for tokens.
    pub fn waited(&self) -> Duration {
        *self.waited.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Requests let through.
    pub fn requests(&self) -> u64 {
        *self.requests.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `request` to `plugin` within its rate limit, retrying what the
    /// retry policy retries. The answer when it succeeded (or is still in
    /// progress), else the last failure's code and message.
    pub async fn call(
        &self,
        transport: &dyn Transport,
        plugin: &str,
        request: &Request,
        timeout: Duration,
        retry: &RetryPolicy,
        jitter: &Mutex<Jitter>,
    ) -> Result<Answer, (ErrorCode, String)> {
        let expect = match request {
            Request::List(_) => Expect::List,
            _ => Expect::Progress,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.acquire(plugin, &request.target().name).await;
            let answer = transport.send(plugin, request, timeout).await;
            let verdict = match &answer {
                Ok(a) => answer::classify(reply(a), expect),
                Err(e) => answer::classify(
                    Reply::Transport {
                        code: &e.code(),
                        message: &e.to_string(),
                    },
                    expect,
                ),
            };
            let (code, message, retry_after) =
                match verdict {
                    Verdict::Succeeded => return answer.map_err(|e| (e.code(), e.to_string())),
                    // Lists and reads finish at once; nothing polls them.
                    Verdict::InProgress { .. } => return Err((
                        ErrorCode::InternalFailure,
                        "the plugin answered `in progress` to a request that must finish at once"
                            .into(),
                    )),
                    Verdict::Terminal { code, message } => return Err((code, message)),
                    Verdict::Retryable {
                        code,
                        message,
                        retry_after,
                    } => (code, message, retry_after),
                };
            let delay = {
                let mut jitter = jitter.lock().unwrap_or_else(|p| p.into_inner());
                retry.retry_after_failure(attempt, &code, retry_after, &mut jitter)
            };
            match delay {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return Err((code, message)),
            }
        }
    }
}

/// The core's view of an answer.
pub fn reply(answer: &Answer) -> Reply<'_> {
    match answer {
        Answer::Progress(p) => Reply::Progress(p),
        Answer::List(l) => Reply::List(l),
        Answer::Error(e) => Reply::Error(e),
    }
}
