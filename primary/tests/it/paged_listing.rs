//! `GET /v1/resources` page by page (cursor + limit, filters) and a
//! command's operations in pages, from a real `orrery primary` holding a
//! 2,500-resource stack.

use crate::common;

use std::collections::BTreeSet;

use common::server::Server;
use serde_json::{json, Value};

fn stack(n: usize) -> String {
    let mut doc = String::from(
        "stack: paged\ntargets:\n  - name: lab\n    plugin: testbed\n    config: { polls: 0 }\n  - name: lab2\n    plugin: testbed\n    config: { polls: 0 }\nresources:\n",
    );
    for i in 0..n {
        let (ty, target) = if i % 10 == 0 {
            ("Testbed::Noop::Thing", "lab2")
        } else {
            ("Testbed::Async::Thing", "lab")
        };
        doc.push_str(&format!(
            "  - label: r{i:05}\n    type: {ty}\n    target: {target}\n    properties: {{ name: r{i}, value: {i} }}\n"
        ));
    }
    doc
}

/// Every page of `path` (which has its own query), following `next_cursor`.
fn pages(server: &Server, path: &str, key: &str) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}&cursor={c}"),
            None => path.to_owned(),
        };
        let (status, page) = server.get(&url);
        assert_eq!(status, 200, "{page}");
        out.push(page[key].as_array().unwrap().clone());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
        assert!(out.len() < 100, "pages never end");
    }
}

#[test]
fn resources_and_operations_come_page_by_page() {
    let server = Server::start();
    let (status, accepted) = server.post("/v1/stacks/apply", &json!({ "document": stack(2500) }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    let done = server.wait_command(&id);
    assert_eq!(done["status"], "completed", "{}", done["report"]);

    let paged = pages(&server, "/v1/resources?stack=paged&limit=1000", "resources");
    let sizes: Vec<usize> = paged.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1000, 1000, 500]);
    let labels: Vec<String> = paged
        .iter()
        .flatten()
        .map(|r| r["label"].as_str().unwrap().to_owned())
        .collect();
    let distinct: BTreeSet<&String> = labels.iter().collect();
    assert_eq!(distinct.len(), 2500, "each resource once");
    assert!(labels.windows(2).all(|w| w[0] < w[1]), "in label order");

    // Filters: by type and target, by drift.
    let noop = pages(
        &server,
        "/v1/resources?stack=paged&type=Testbed::Noop::Thing&target=lab2&limit=100",
        "resources",
    );
    let noop: Vec<&Value> = noop.iter().flatten().collect();
    assert_eq!(noop.len(), 250);
    assert!(noop.iter().all(|r| r["target"] == "lab2"));
    let drifted = pages(
        &server,
        "/v1/resources?stack=paged&drift=true&limit=1000",
        "resources",
    );
    assert_eq!(drifted.iter().flatten().count(), 0);
    // Without a limit, everything at once, as before.
    let (_, all) = server.get("/v1/resources?stack=paged");
    assert_eq!(all["resources"].as_array().unwrap().len(), 2500);
    assert!(all.get("next_cursor").is_none());

    // A command's operations in pages, filtered by status.
    let ops = pages(
        &server,
        &format!("/v1/commands/{id}?limit=400"),
        "operations",
    );
    let sizes: Vec<usize> = ops.iter().map(Vec::len).collect();
    assert_eq!(sizes, [400, 400, 400, 400, 400, 400, 100]);
    let labels: Vec<&str> = ops
        .iter()
        .flatten()
        .map(|o| o["label"].as_str().unwrap())
        .collect();
    assert!(
        labels.windows(2).all(|w| w[0] < w[1]),
        "each operation once, in label order"
    );
    // A last page that is exactly full says no more follow.
    let succeeded = pages(
        &server,
        &format!("/v1/commands/{id}?limit=500&status=succeeded"),
        "operations",
    );
    assert_eq!(succeeded.iter().map(Vec::len).collect::<Vec<_>>(), [500; 5]);
    let failed = pages(
        &server,
        &format!("/v1/commands/{id}?limit=400&status=failed"),
        "operations",
    );
    assert_eq!(failed.iter().flatten().count(), 0);

    // Hostile paging parameters are refused, not obeyed.
    for bad in [
        "/v1/resources?limit=0",
        "/v1/resources?limit=10001",
        "/v1/resources?cursor=not-a-cursor",
        "/v1/resources?limit=-1",
    ] {
        let (status, answer) = server.get(bad);
        assert_eq!(status, 400, "{bad}: {answer}");
    }
    let (status, _) = server.get(&format!("/v1/commands/{id}?cursor=x"));
    assert_eq!(status, 400);
}
