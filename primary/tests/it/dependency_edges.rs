//! The crate graph enforces the design: a forbidden dependency edge fails
//! this test (read from `cargo metadata`, normal dependencies only, followed
//! transitively).
//!
//! - `orrery-core` reaches no async runtime, database driver, HTTP server
//!   or NATS client: the cores do no I/O.
//! - nor does `orrery-stack`, the stack language, which reaches no other
//!   Orrery crate but `orrery-schema`: `orrery-core` depends on it, never
//!   the other way.
//! - nothing depends on the satellite daemon (`orrery-satellite`).
//! - `orrery-plugin-sdk` knows nothing of NATS.
//! - `orrery-testing` (every crate's test support) reaches no satellite or
//!   primary crate.
//! - `orrery-schema` depends on no other Orrery crate, nor does
//!   `orrery-pg-tls` (the TLS setup the postgres plugin and the PostgreSQL
//!   state store share, which must pull neither side into the other).
//! - no plugin reaches a primary crate (`orrery-core`, `orrery-stack`,
//!   `orrery-state`, `orrery-primary`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Normal (non-dev, non-build) dependency edges: package name → names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// What each crate must not reach, directly or through others.
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "orrery-core",
        &[
            "tokio",
            "rusqlite",
            "postgres",
            "tokio-postgres",
            "axum",
            "async-nats",
        ],
    ),
    (
        "orrery-stack",
        &[
            "tokio",
            "rusqlite",
            "postgres",
            "tokio-postgres",
            "axum",
            "async-nats",
            "orrery-core",
            "orrery-state",
            "orrery-bus",
            "orrery-hub",
            "orrery-plugin-sdk",
            "orrery-primary",
        ],
    ),
    ("orrery-plugin-sdk", &["async-nats"]),
    // Test support sits beside the SDK: every crate's tests take it, so it
    // must not pull the satellite's or the primary's crates into them.
    (
        "orrery-testing",
        &[
            "orrery-hub",
            "orrery-bus",
            "orrery-core",
            "orrery-stack",
            "orrery-state",
            "orrery-primary",
        ],
    ),
];

/// Crates that depend on no other Orrery crate.
const LEAVES: &[&str] = &["orrery-schema", "orrery-pg-tls"];

/// What no plugin may reach.
const PRIMARY_CRATES: &[&str] = &[
    "orrery-core",
    "orrery-stack",
    "orrery-state",
    "orrery-primary",
];

fn graph_from_metadata(metadata: &Value) -> Graph {
    let names: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph = Graph::new();
    for node in metadata["resolve"]["nodes"].as_array().expect("resolve") {
        let from = names[node["id"].as_str().unwrap()].to_owned();
        let entry = graph.entry(from).or_default();
        for dep in node["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                entry.insert(names[dep["pkg"].as_str().unwrap()].to_owned());
            }
        }
    }
    graph
}

/// Every package `from` reaches through normal dependencies.
fn reachable<'a>(graph: &'a Graph, from: &str) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = vec![from];
    while let Some(next) = todo.pop() {
        for dep in graph.get(next).into_iter().flatten() {
            if seen.insert(dep.as_str()) {
                todo.push(dep);
            }
        }
    }
    seen
}

/// Every forbidden edge of `graph`, described.
fn violations(graph: &Graph, workspace: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for (krate, banned) in FORBIDDEN {
        let reach = reachable(graph, krate);
        for b in *banned {
            if reach.contains(b) {
                found.push(format!("{krate} reaches {b}"));
            }
        }
    }
    for krate in workspace {
        if reachable(graph, krate).contains("orrery-satellite") {
            found.push(format!("{krate} depends on the satellite daemon"));
        }
    }
    for leaf in LEAVES {
        for dep in graph.get(*leaf).into_iter().flatten() {
            if dep.starts_with("orrery-") {
                found.push(format!("{leaf} depends on {dep}"));
            }
        }
    }
    let plugins = workspace
        .iter()
        .filter(|k| k.starts_with("orrery-plugin-") && *k != "orrery-plugin-sdk");
    for plugin in plugins {
        let reach = reachable(graph, plugin);
        for primary in PRIMARY_CRATES {
            if reach.contains(primary) {
                found.push(format!("{plugin} reaches {primary}"));
            }
        }
    }
    found
}

/// The host's target triple (`rustc -vV`).
fn host() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Offline, the graph can only be resolved for the platform whose
    // packages a build has fetched (others' platform-only dependencies,
    // such as Android's, are never downloaded): the host's.
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON")
}

fn workspace_members(metadata: &Value) -> BTreeSet<String> {
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap()))
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_workspace_has_no_forbidden_dependency_edge() {
    let metadata = metadata();
    let graph = graph_from_metadata(&metadata);
    let workspace = workspace_members(&metadata);
    for must in [
        "orrery-core",
        "orrery-stack",
        "orrery-state",
        "orrery-bus",
        "orrery-schema",
        "orrery-pg-tls",
        "orrery-plugin-postgres",
        "orrery-plugin-aws",
    ] {
        assert!(workspace.contains(must), "{must} is a workspace member");
    }
    assert_eq!(violations(&graph, &workspace), Vec::<String>::new());
}

#[test]
fn an_added_forbidden_edge_is_reported() {
    let metadata = metadata();
    let workspace = workspace_members(&metadata);
    let clean = graph_from_metadata(&metadata);
    let cases: &[(&str, &str, &str)] = &[
        ("orrery-core", "tokio", "orrery-core reaches tokio"),
        // Transitively: core → state → rusqlite.
        (
            "orrery-core",
            "orrery-state",
            "orrery-core reaches rusqlite",
        ),
        ("orrery-stack", "tokio", "orrery-stack reaches tokio"),
        // The direction: core depends on the stack language.
        (
            "orrery-stack",
            "orrery-core",
            "orrery-stack reaches orrery-core",
        ),
        // Transitively: stack → bus → async-nats.
        (
            "orrery-stack",
            "orrery-bus",
            "orrery-stack reaches async-nats",
        ),
        (
            "orrery-stack",
            "orrery-plugin-sdk",
            "orrery-stack reaches orrery-plugin-sdk",
        ),
        (
            "orrery-plugin-local",
            "orrery-stack",
            "orrery-plugin-local reaches orrery-stack",
        ),
        (
            "orrery-primary",
            "orrery-satellite",
            "orrery-primary depends on the satellite daemon",
        ),
        (
            "orrery-plugin-sdk",
            "async-nats",
            "orrery-plugin-sdk reaches async-nats",
        ),
        (
            "orrery-schema",
            "orrery-core",
            "orrery-schema depends on orrery-core",
        ),
        (
            "orrery-pg-tls",
            "orrery-schema",
            "orrery-pg-tls depends on orrery-schema",
        ),
        (
            "orrery-plugin-postgres",
            "orrery-state",
            "orrery-plugin-postgres reaches orrery-state",
        ),
    ];
    for (from, to, expected) in cases {
        let mut graph = clean.clone();
        graph.get_mut(*from).unwrap().insert((*to).to_owned());
        let found = violations(&graph, &workspace);
        assert!(
            found.iter().any(|v| v == expected),
            "adding {from} → {to} should report `{expected}`, got {found:?}"
        );
    }
}
