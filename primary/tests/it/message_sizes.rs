//! Message sizes and deadlines end to end: a real nats-server with the
//! default `max_payload` (1 MiB), a real `orrery-satellite` running the
//! testbed plugin, and the `orrery` binary. A request that cannot fit
//! fails at once, a listing larger than a message is cut into pages that
//! fit, and a page that never comes ends discovery with a named error.

use crate::common;

use std::time::{Duration, Instant};

use common::fleet::{orrery_through_nats, served, testbed_satellite};
use common::Scratch;
use orrery_testing::nats;

/// What the satellite keeps of the server's `max_payload` for envelopes.
const LIMIT: usize = 1024 * 1024 - 1024;

fn stack(name: &str, config: &str, resources: &str) -> String {
    format!(
        "stack: {name}\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {{ {config} }}\nresources:{resources}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2_mib_create_fails_once_with_a_terminal_code_and_both_sizes() {
    let server = nats::NatsServer::start().await;
    assert_eq!(server.client().await.max_payload(), 1024 * 1024);
    let _satellite = testbed_satellite(&server).await;
    let scratch = Scratch::new();
    let value = "v".repeat(2 * 1024 * 1024);
    let doc = stack(
        "big",
        "",
        &format!(
            "\n  - label: big\n    type: Testbed::Noop::Thing\n    target: lab\n    properties: {{ name: big, value: \"{value}\" }}"
        ),
    );
    let file = scratch.write("big.yaml", &doc);
    let started = Instant::now();
    let run = orrery_through_nats(
        &scratch.state(),
        &server.url,
        &["apply", file.to_str().unwrap(), "--yes", "--output", "json"],
    )
    .await;
    let elapsed = started.elapsed();
    assert_ne!(run.code, 0, "{run:?}");
    let report: serde_json::Value =
        serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{report}");
    assert_eq!(failed[0]["code"], "MessageTooLarge", "{report}");
    let message = failed[0]["message"].as_str().unwrap();
    assert!(message.contains(&LIMIT.to_string()), "the limit: {message}");
    let size: usize = message
        .split_whitespace()
        .find_map(|w| w.parse().ok().filter(|n| *n > 2 * 1024 * 1024))
        .unwrap_or_else(|| panic!("the request's size: {message}"));
    assert!(size < 2 * 1024 * 1024 + 4096, "{message}");
    assert_eq!(report["retries"], 0, "tried once: {report}");
    // Refused before sending: the satellite never saw it.
    let served = served(&server.client().await).await;
    assert_eq!(served.values().sum::<u64>(), 0, "{served:?}");
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_5_mb_listing_is_discovered_completely_through_a_satellite() {
    let server = nats::NatsServer::start().await;
    let _satellite = testbed_satellite(&server).await;
    let scratch = Scratch::new();
    // 150 things of 10,000 bytes each, per resource type: 1.5 MB a listing.
    let doc = stack("wide", "listed: 150, listed_bytes: 10000", " []");
    let file = scratch.write("wide.yaml", &doc);
    let run = orrery_through_nats(
        &scratch.state(),
        &server.url,
        &["discover", file.to_str().unwrap(), "--output", "json"],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let out: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let report = &out["report"];
    assert_eq!(report["failures"], serde_json::json!([]), "{report}");
    assert_eq!(report["listed"], 300, "both types, every thing: {report}");
    let unmanaged = out["unmanaged"].as_array().unwrap();
    assert_eq!(unmanaged.len(), 300, "{report}");
    let mut ids: Vec<&str> = unmanaged
        .iter()
        .filter(|r| r["type"] == "Testbed::Noop::Thing")
        .map(|r| r["native_id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    let expected: Vec<String> = (0..150).map(|i| format!("listed-{i:05}")).collect();
    assert_eq!(ids, expected, "each thing exactly once");
    // 1.5 MB cannot travel in fewer than two 1 MiB messages per type.
    assert!(report["pages"].as_u64().unwrap() >= 4, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_never_answers_a_page_ends_discovery_with_a_named_error() {
    let server = nats::NatsServer::start().await;
    let _satellite = testbed_satellite(&server).await;
    let scratch = Scratch::new();
    // An hour's delay on every request: the page never comes in time.
    let doc = stack("stuck", "delay_ms: 3600000", " []");
    let file = scratch.write("stuck.yaml", &doc);
    let started = Instant::now();
    let run = orrery_through_nats(
        &scratch.state(),
        &server.url,
        &[
            "discover",
            file.to_str().unwrap(),
            "--timeout",
            "1s",
            "--output",
            "json",
        ],
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(run.code, 1, "{run:?}");
    // Five attempts of 1 s and their backoff (under 5 s with jitter), for
    // each of the three types, and the processes' start.
    assert!(elapsed < Duration::from_secs(45), "took {elapsed:?}");
    let out: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let failures = out["report"]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 3, "one per type: {out}");
    for f in failures {
        assert_eq!(f["code"], "DeadlineExceeded", "{f}");
        assert_eq!(f["page"], 1, "{f}");
        let message = f["message"].as_str().unwrap();
        assert!(
            message.contains("plugin `testbed`")
                && message.contains("target `lab`")
                && message.contains("page 1"),
            "{message}"
        );
    }
}
