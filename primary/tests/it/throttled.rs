//! 200 resources through the asynchronous testbed plugin with Throttling
//! injected: every resource is created once, InProgress operations are
//! polled to completion, and the request rate stays within the limit.

use crate::common;

use std::time::Instant;

use common::Scratch;

#[test]
fn a_throttled_200_resource_apply_completes_within_the_rate_limit() {
    let scratch = Scratch::new();
    let mut doc = String::from(
        "stack: throttled\ntargets:\n  - name: lab\n    plugin: testbed\n    config: { polls: 1, throttle_every: 7 }\nresources:\n",
    );
    for i in 0..200 {
        doc.push_str(&format!(
            "  - label: thing-{i}\n    type: Testbed::Async::Thing\n    target: lab\n    properties: {{ name: thing-{i}, value: {i} }}\n"
        ));
    }
    let file = scratch.write("throttled.yaml", &doc);
    let (rate, burst) = (400.0, 20.0);
    // The rate is judged by the test's own clock around the whole run (the
    // process's start included, which only loosens the bound), never by
    // the elapsed time the process under test reports.
    let started = Instant::now();
    let run = scratch.orrery(&[
        "apply",
        file.to_str().unwrap(),
        "--yes",
        "--output",
        "json",
        "--rate-limit",
        "Testbed/lab=400:20",
    ]);
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(run.code, 0, "{run:?}");
    let last_line = run.stdout.lines().last().unwrap();
    let report: serde_json::Value = serde_json::from_str(last_line).unwrap();
    assert_eq!(report["succeeded"], 200, "{report}");
    let retries = report["retries"].as_u64().unwrap();
    assert!(
        retries > 0,
        "throttling was injected, so some creates were retried: {report}"
    );
    // Every create answered InProgress once and was polled at least once.
    let requests = report["requests"].as_u64().unwrap() as f64;
    assert!(requests >= 400.0, "{report}");
    assert!(
        requests <= burst + rate * elapsed,
        "{requests} requests in {elapsed:.3} s (measured by the test) exceed {rate}/s with burst {burst}"
    );
    // The process cannot have run longer than the test waited for it.
    let reported = report["elapsed_ms"].as_u64().unwrap() as f64 / 1000.0;
    assert!(
        reported <= elapsed,
        "reported {reported} s, measured {elapsed} s"
    );
    // Each resource exists exactly once.
    let inventory: serde_json::Value =
        serde_json::from_str(&scratch.orrery(&["inventory", "--output", "json"]).stdout).unwrap();
    let mut ids: Vec<&str> = inventory
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["native_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 200);
    // A second apply is a no-op.
    let run = scratch.orrery(&["plan", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
}
