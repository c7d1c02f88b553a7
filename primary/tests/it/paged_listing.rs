//! `GET /v1/resources` page by page (cursor + limit, filters), a command's
//! operations and the commands in pages, from a real `orrery primary`
//! holding a 2,500-resource stack: paged by default, `all=true` up to the
//! server's `--max-list-items` (here 2,000) and a typed 400 past it.

use crate::common;

use std::collections::BTreeSet;

use common::server::{Server, ServerOptions};
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

/// The most items `all=true` returns on the test's server.
const CAP: usize = 2000;

/// Every page of `path` (which has its own query), following `next_cursor`.
fn pages(server: &Server, path: &str, key: &str) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let sep = if path.contains('?') { '&' } else { '?' };
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}{sep}cursor={c}"),
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

/// `GET path` must be a 400 with the typed error `code`.
fn refused(server: &Server, path: &str, code: &str) -> Value {
    let (status, answer) = server.get(path);
    assert_eq!(status, 400, "{path}: {answer}");
    assert_eq!(answer["code"], code, "{path}: {answer}");
    assert!(
        answer["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{answer}"
    );
    answer
}

fn labels_of(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|r| r["label"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn resources_and_operations_come_page_by_page() {
    let server = Server::start_with(ServerOptions {
        args: vec!["--max-list-items".into(), CAP.to_string()],
        ..Default::default()
    });
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

    // Without a limit, pages of 1,000 by default; following the cursors
    // gives every resource exactly once.
    let default = pages(&server, "/v1/resources?stack=paged", "resources");
    let sizes: Vec<usize> = default.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1000, 1000, 500]);
    assert_eq!(labels_of(&default.concat()), labels_of(&paged.concat()));
    let (_, first) = server.get("/v1/resources");
    assert_eq!(first["resources"].as_array().unwrap().len(), 1000);
    assert!(first["next_cursor"].is_string(), "paged by default");

    // `all=true`: everything at once, up to the cap.
    let (status, noop_all) =
        server.get("/v1/resources?stack=paged&type=Testbed::Noop::Thing&all=true");
    assert_eq!(status, 200, "{noop_all}");
    assert_eq!(noop_all["resources"].as_array().unwrap().len(), 250);
    assert!(
        noop_all.get("next_cursor").is_none(),
        "{}",
        noop_all["next_cursor"]
    );
    // The rest after the first page is 1,500, within the cap.
    let after = first["next_cursor"].as_str().unwrap();
    let (status, rest) = server.get(&format!("/v1/resources?all=true&cursor={after}"));
    assert_eq!(status, 200);
    let rest = rest["resources"].as_array().unwrap().clone();
    assert_eq!(rest.len(), 1500);
    assert_eq!(
        labels_of(&[first["resources"].as_array().unwrap().clone(), rest].concat()),
        labels_of(&paged.concat())
    );
    // 2,500 are past the cap: a typed error saying so, not a truncated list.
    let past = refused(
        &server,
        "/v1/resources?stack=paged&all=true",
        "too_many_items",
    );
    assert_eq!(past["max_items"], CAP);

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

    // The operations too are paged by default, `all=true` capped.
    let default = pages(&server, &format!("/v1/commands/{id}"), "operations");
    assert_eq!(
        default.iter().map(Vec::len).collect::<Vec<_>>(),
        [1000, 1000, 500]
    );
    let every: BTreeSet<(String, String)> = default
        .iter()
        .flatten()
        .map(|o| (o["label"].to_string(), o["operation"].to_string()))
        .collect();
    assert_eq!(every.len(), 2500, "each operation once");
    let past = refused(
        &server,
        &format!("/v1/commands/{id}?all=true"),
        "too_many_items",
    );
    assert_eq!(past["max_items"], CAP);
    let (_, first) = server.get(&format!("/v1/commands/{id}"));
    let after = first["next_cursor"].as_str().unwrap();
    let (status, rest) = server.get(&format!("/v1/commands/{id}?all=true&cursor={after}"));
    assert_eq!(status, 200, "{rest}");
    assert_eq!(rest["operations"].as_array().unwrap().len(), 1500);
    assert!(rest.get("next_cursor").is_none());

    // `orrery status --primary` follows the cursor: every operation, once.
    let scratch = common::Scratch::new();
    let url = server.url("");
    let status = scratch
        .command(&["status", &id, "--output", "json", "--primary", &url])
        .env("ORRERY_TOKEN", common::server::ADMIN_TOKEN)
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&status.stderr)));
    let ops = status["operations"].as_array().unwrap();
    let distinct: BTreeSet<String> = ops.iter().map(|o| o["label"].to_string()).collect();
    assert_eq!(
        (ops.len(), distinct.len()),
        (2500, 2500),
        "{}",
        status["id"]
    );
    assert!(status.get("next_cursor").is_none());

    // Hostile paging parameters are refused with a typed error, not obeyed.
    for (bad, code) in [
        ("/v1/resources?limit=0", "bad_limit"),
        ("/v1/resources?limit=10001", "bad_limit"),
        ("/v1/resources?limit=-1", "bad_limit"),
        ("/v1/resources?limit=many", "bad_limit"),
        ("/v1/resources?limit=10&all=true", "bad_limit"),
        ("/v1/resources?all=yes", "bad_all"),
        ("/v1/resources?cursor=not-a-cursor", "bad_cursor"),
        ("/v1/commands?limit=201", "bad_limit"),
        ("/v1/commands?cursor=zz", "bad_cursor"),
        ("/v1/commands?all=1", "bad_all"),
    ] {
        refused(&server, bad, code);
    }
    refused(
        &server,
        &format!("/v1/commands/{id}?cursor=x"),
        "bad_cursor",
    );
    refused(&server, &format!("/v1/commands/{id}?limit=0"), "bad_limit");
}

/// `GET /v1/commands` newest first, page by page with `next_cursor`, each
/// command exactly once; `all=true` every one.
#[test]
fn commands_come_page_by_page_newest_first() {
    let server = Server::start();
    let mut ids = Vec::new();
    for i in 0..5 {
        let doc = format!(
            "stack: tiny{}\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {{ polls: 0 }}\nresources:\n  - label: one\n    type: Testbed::Noop::Thing\n    target: lab\n    properties: {{ name: t{}, value: {i} }}\n",
            i % 2,
            i % 2
        );
        let (status, accepted) = server.post("/v1/stacks/apply", &json!({ "document": doc }));
        assert_eq!(status, 202, "{accepted}");
        let id = accepted["command_id"].as_str().unwrap().to_owned();
        let done = server.wait_command(&id);
        assert_eq!(done["status"], "completed", "{done}");
        ids.push(id);
    }
    ids.reverse(); // newest first
    let listed = |path: &str| -> Vec<String> {
        pages(&server, path, "commands")
            .iter()
            .flatten()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let paged = pages(&server, "/v1/commands?limit=2", "commands");
    assert_eq!(paged.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
    assert_eq!(listed("/v1/commands?limit=2"), ids);
    assert_eq!(listed("/v1/commands?limit=5"), ids);
    assert_eq!(
        listed("/v1/commands?stack=tiny0&limit=1"),
        [ids[0].clone(), ids[2].clone(), ids[4].clone()]
    );
    let (_, all) = server.get("/v1/commands?all=true");
    assert!(all.get("next_cursor").is_none());
    let all: Vec<&str> = all["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(all, ids);
    // The default page is 20: all five, no cursor.
    let (_, default) = server.get("/v1/commands");
    assert_eq!(default["commands"].as_array().unwrap().len(), 5);
    assert!(default.get("next_cursor").is_none());
}
