//! The command event stream (`orrery_core::events`): read live as
//! server-sent events from `GET /v1/commands/{id}/events` of a real
//! `orrery primary` during a 500-resource testbed apply, disconnected and
//! resumed with `Last-Event-ID`; rebuilt from the record by a restarted
//! primary; and printed by `orrery apply --output ndjson`.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::server::{Server, ServerOptions};
use common::Scratch;
use orrery_core::events::{CommandEvent, EventBody, OpEvent, SCHEMA_VERSION};
use serde_json::json;

fn testbed_stack(name: &str, n: usize, config: &str) -> String {
    let mut doc = format!(
        "stack: {name}\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {config}\nresources:\n"
    );
    for i in 0..n {
        doc.push_str(&format!(
            "  - label: thing-{i}\n    type: Testbed::Async::Thing\n    target: lab\n    properties: {{ name: thing-{i}, value: {i} }}\n"
        ));
    }
    doc
}

/// One server-sent event: its `id` and the event in its `data`.
type Sent = (String, CommandEvent);

/// Reads the events of `path`, presenting `last_id` as `Last-Event-ID`,
/// until the server ends the stream or `stop_after` events were read.
fn read_events(server: &Server, path: &str, last_id: Option<&str>, stop_after: usize) -> Vec<Sent> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into();
    let mut req = agent.get(server.url(path)).header(
        "authorization",
        format!("Bearer {}", server.token.as_deref().unwrap()),
    );
    if let Some(id) = last_id {
        req = req.header("last-event-id", id);
    }
    let resp = req.call().unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let reader = BufReader::new(resp.into_body().into_reader());
    let mut out = Vec::new();
    let (mut id, mut data) = (None, String::new());
    for line in reader.lines() {
        let line = line.unwrap();
        if line.is_empty() {
            if let Some(id) = id.take() {
                let event: CommandEvent = serde_json::from_str(&data)
                    .unwrap_or_else(|e| panic!("not an event ({e}): {data}"));
                out.push((id, event));
                if out.len() == stop_after {
                    return out;
                }
            }
            data.clear();
        } else if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        } else if line.starts_with("event:") {
            panic!("no gap or other event expected here: {line}");
        }
    }
    out
}

/// Every operation's transitions, in the order sent.
fn transitions(events: &[CommandEvent]) -> BTreeMap<String, Vec<OpEvent>> {
    let mut by_label: BTreeMap<String, Vec<OpEvent>> = BTreeMap::new();
    for e in events {
        if let EventBody::Operation(op) = &e.body {
            by_label
                .entry(op.label.clone())
                .or_default()
                .push(op.status);
        }
    }
    by_label
}

#[test]
fn the_event_stream_of_a_500_resource_apply_resumes_without_loss_or_repeat() {
    let state = tempfile::tempdir().unwrap();
    let on_state = || ServerOptions {
        data_dir: Some(state.path().join("state")),
        ..Default::default()
    };
    let server = Server::start_with(on_state());
    let doc = testbed_stack("events", 500, "{ polls: 1, delay_ms: 20 }");
    let (status, accepted) = server.post("/v1/stacks/apply", &json!({ "document": doc }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/commands/{id}/events");

    // Disconnect part-way, then go on after the last event seen.
    let first = read_events(&server, &path, None, 300);
    assert_eq!(first.len(), 300);
    let last_id = first.last().unwrap().0.clone();
    let rest = read_events(&server, &path, Some(&last_id), usize::MAX);
    let sent: Vec<Sent> = first.into_iter().chain(rest).collect();
    let events: Vec<CommandEvent> = sent.iter().map(|(_, e)| e.clone()).collect();

    // One run, numbered 1, 2, 3… without a gap or a repeat, ids as sent.
    let run = &events[0].run;
    for (i, (sse_id, e)) in sent.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "event {i}: {e:?}");
        assert_eq!(&e.run, run);
        assert_eq!(sse_id, &format!("{}:{}", e.run, e.seq));
        assert_eq!(
            (e.schema, e.command_id.as_str()),
            (SCHEMA_VERSION, id.as_str())
        );
    }
    match &events[0].body {
        EventBody::Planned(p) => assert_eq!((p.create, p.operations), (500, 500), "{p:?}"),
        other => panic!("the first event is the plan: {other:?}"),
    }
    match &events.last().unwrap().body {
        EventBody::Finished(f) => {
            assert_eq!(
                (f.status.as_str(), f.succeeded, f.failed),
                ("completed", 500, 0)
            )
        }
        other => panic!("the last event is the end: {other:?}"),
    }
    // Each operation: started, in progress (one poll), succeeded — once each.
    let by_label = transitions(&events);
    assert_eq!(by_label.len(), 500);
    for (label, seen) in &by_label {
        assert_eq!(
            seen,
            &[OpEvent::Started, OpEvent::InProgress, OpEvent::Succeeded],
            "{label}"
        );
    }
    // The succeeded event says what it ran and how long it took.
    let done = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::Operation(op) if op.status == OpEvent::Succeeded => Some(op),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (
            done.resource_type.as_str(),
            done.plugin.as_str(),
            done.target.as_str()
        ),
        ("Testbed::Async::Thing", "testbed", "lab")
    );
    assert!(done.elapsed_ms.is_some(), "{done:?}");

    // A restarted primary has no live events: the record tells each
    // operation's last transition, then the end.
    drop(server);
    let restarted = Server::start_with(on_state());
    let told = read_events(&restarted, &path, Some(&last_id), usize::MAX);
    let told: Vec<CommandEvent> = told.into_iter().map(|(_, e)| e).collect();
    assert_eq!(told.len(), 501, "500 operations and the end");
    assert!(told.iter().all(|e| e.run == "record"));
    assert!(transitions(&told)
        .values()
        .all(|s| s == &[OpEvent::Succeeded]));
    assert!(matches!(&told[500].body, EventBody::Finished(f) if f.succeeded == 500));
    // A client that saw part of the record goes on after it.
    let after = read_events(&restarted, &path, Some("record:499"), usize::MAX);
    assert_eq!(
        after.iter().map(|(_, e)| e.seq).collect::<Vec<_>>(),
        [500, 501]
    );
    let (status, refused) = restarted.get_as(
        restarted.token.as_deref(),
        "/v1/commands/no-such-command/events",
    );
    assert_eq!(status, 404, "{refused}");
}

#[test]
fn apply_output_ndjson_prints_the_same_events_one_per_line() {
    let scratch = Scratch::new();
    let file = scratch.write("s.yaml", &testbed_stack("lines", 40, "{ polls: 1 }"));
    let run = scratch.orrery(&[
        "apply",
        file.to_str().unwrap(),
        "--yes",
        "--output",
        "ndjson",
        "--rate-limit",
        "Testbed/lab=400:4",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let events: Vec<CommandEvent> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not an event ({e}): {l}")))
        .collect();
    assert!(matches!(&events[0].body, EventBody::Planned(p) if p.operations == 40));
    assert!(
        matches!(&events.last().unwrap().body, EventBody::Finished(f) if f.succeeded == 40 && f.status == "completed")
    );
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let by_label = transitions(&events);
    assert_eq!(by_label.len(), 40);
    // A burst of 4 makes most creates wait for a token before they start.
    let waited = by_label
        .values()
        .filter(|s| s.first() == Some(&OpEvent::WaitingForRateLimit))
        .count();
    assert!(waited > 0, "{by_label:?}");
    for (label, seen) in &by_label {
        let started: Vec<_> = seen
            .iter()
            .filter(|s| **s != OpEvent::WaitingForRateLimit)
            .collect();
        assert_eq!(
            started,
            [&OpEvent::Started, &OpEvent::InProgress, &OpEvent::Succeeded],
            "{label}: {seen:?}"
        );
    }
}
