//! Edge kinds end to end, through a real satellite running the testbed
//! plugin (one process across applies, so its things persist): a thing
//! attached (`attachesTo`) to one that is replaced is detached first and
//! attached again to the new one; a `runtimeDependency` reference to a
//! thing created in the same apply waits for it, and on destroy the thing
//! that needs another is deleted first.

use crate::common;

use common::fleet::{orrery_through_nats, testbed_satellite};
use common::Scratch;
use orrery_testing::nats;

fn stack(resources: &str) -> String {
    format!(
        "stack: edges\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {{}}\nresources:\n{resources}"
    )
}

fn thing(label: &str, properties: &str) -> String {
    format!("  - label: {label}\n    type: Testbed::Noop::Thing\n    target: lab\n    properties: {{ {properties} }}\n")
}

fn report(run: &common::Run) -> serde_json::Value {
    serde_json::from_str(run.stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_is_removed_before_its_host_is_replaced_and_made_again_after() {
    let server = nats::NatsServer::start().await;
    let _satellite = testbed_satellite(&server).await;
    let scratch = Scratch::new();
    let apply = |doc: String| {
        let file = scratch.write("edges.yaml", &doc);
        let state = scratch.state();
        let url = server.url.clone();
        async move {
            orrery_through_nats(
                &state,
                &url,
                &["apply", file.to_str().unwrap(), "--yes", "--output", "json"],
            )
            .await
        }
    };
    let attached = thing("volume", "name: vol, attached_to: \"${host.name}\"");
    let first = apply(stack(&(attached.clone() + &thing("host", "name: host-1")))).await;
    assert_eq!(first.code, 0, "{first:?}");

    // `name` is create-only: the host is replaced, delete before create.
    // The testbed refuses to delete a thing something is attached to, and
    // to attach to a thing that does not exist: only detach, replace,
    // attach again succeeds.
    let second = apply(stack(&(attached + &thing("host", "name: host-2")))).await;
    let second_report = report(&second);
    assert_eq!(second.code, 0, "{second:?}");
    assert_eq!(
        second_report["failed"],
        serde_json::json!([]),
        "{second_report}"
    );
    assert_eq!(
        second_report["retries"], 0,
        "no conflict was met: {second_report}"
    );

    let status = orrery_through_nats(
        &scratch.state(),
        &server.url,
        &["inventory", "--stack", "edges", "--output", "json"],
    )
    .await;
    assert_eq!(status.code, 0, "{status:?}");
    assert!(
        status.stdout.contains("host-2") && !status.stdout.contains("host-1"),
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_dependency_on_a_thing_of_the_same_apply_waits_for_it() {
    let server = nats::NatsServer::start().await;
    let _satellite = testbed_satellite(&server).await;
    let scratch = Scratch::new();
    // Declared first, so it is not ordered by position.
    let doc =
        stack(&(thing("user", "name: user, needs: \"${db.name}\"") + &thing("db", "name: db-1")));
    let file = scratch.write("runtime.yaml", &doc);
    let run = orrery_through_nats(
        &scratch.state(),
        &server.url,
        &["apply", file.to_str().unwrap(), "--yes", "--output", "json"],
    )
    .await;
    let report = report(&run);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(report["succeeded"], 2, "{report}");
    assert_eq!(report["failed"], serde_json::json!([]), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thing_with_a_runtime_dependency_is_destroyed_before_what_it_needs() {
    let server = nats::NatsServer::start().await;
    let _satellite = testbed_satellite(&server).await;
    let scratch = Scratch::new();
    // The testbed refuses to delete a thing another `needs`: only deleting
    // `user` first succeeds without a conflict. Labels sort `db` first.
    let doc =
        stack(&(thing("user", "name: user, needs: \"${db.name}\"") + &thing("db", "name: db-1")));
    let file = scratch.write("runtime.yaml", &doc);
    let apply = orrery_through_nats(
        &scratch.state(),
        &server.url,
        &["apply", file.to_str().unwrap(), "--yes", "--output", "json"],
    )
    .await;
    assert_eq!(apply.code, 0, "{apply:?}");
    let destroy = orrery_through_nats(
        &scratch.state(),
        &server.url,
        &["destroy", "--stack", "edges", "--yes", "--output", "json"],
    )
    .await;
    let report = report(&destroy);
    assert_eq!(destroy.code, 0, "{destroy:?}");
    assert_eq!(report["succeeded"], 2, "{report}");
    assert_eq!(report["retries"], 0, "no conflict was met: {report}");
}
