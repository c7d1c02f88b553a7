//! Targeted runs end to end, with the real `local` plugin on a layered
//! stack (`net` ← `db`, `cache` ← `app` ← `web`, `worker`; `logs` alone):
//! `--target` brings what a resource depends on, `--exclude` leaves out
//! what depends on it, `--replace` replaces an unchanged resource, a
//! targeted destroy takes the dependents along; remotely the same.

use crate::common;

use std::collections::BTreeMap;

use common::server::{Server, ADMIN_TOKEN};
use common::{Run, Scratch};
use serde_json::Value;

const STACK: &str = r#"stack: layers
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
resources:
  - { label: net, type: Local::Fs::Directory, target: home, properties: { path: net } }
  - { label: db, type: Local::Fs::File, target: home, properties: { path: "${net.path}/db.txt", content: "db" } }
  - { label: cache, type: Local::Fs::File, target: home, properties: { path: "${net.path}/cache.txt", content: "cache" } }
  - { label: app, type: Local::Fs::File, target: home, properties: { path: app.txt, content: "${db.path} ${cache.path}" } }
  - { label: web, type: Local::Fs::File, target: home, properties: { path: web.txt, content: "${app.path}" } }
  - { label: worker, type: Local::Fs::File, target: home, properties: { path: worker.txt, content: "${app.path}" } }
  - { label: logs, type: Local::Fs::File, target: home, properties: { path: logs.txt, content: "logs" } }
"#;

/// The planned action of each resource in a `--output json` plan.
fn actions(run: &Run) -> BTreeMap<String, String> {
    let plan: Value = serde_json::from_str(run.stdout.lines().last().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {run:?}"));
    plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["label"].as_str().unwrap().to_owned(),
                c["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(l, a)| (l.to_string(), a.to_string()))
        .collect()
}

#[test]
fn targeted_plan_apply_replace_and_destroy_select_the_expected_subsets() {
    let scratch = Scratch::new();
    let file = scratch.write("layers.yaml", STACK);
    let file = file.to_str().unwrap();
    let site = scratch.path().join("site");
    let json = ["--output", "json"];

    let plan = scratch.orrery(&[&["plan", file, "--target", "app"][..], &json].concat());
    assert_eq!(plan.code, 2, "{plan:?}");
    assert_eq!(
        actions(&plan),
        expect(&[
            ("app", "create"),
            ("cache", "create"),
            ("db", "create"),
            ("net", "create")
        ])
    );
    let plan = scratch.orrery(&[&["plan", file, "--exclude", "db"][..], &json].concat());
    assert_eq!(
        actions(&plan),
        expect(&[("cache", "create"), ("logs", "create"), ("net", "create")])
    );
    let plan = scratch.orrery(
        &[
            &["plan", file, "--target", "web", "--exclude", "cache"][..],
            &json,
        ]
        .concat(),
    );
    assert_eq!(
        actions(&plan),
        expect(&[("db", "create"), ("net", "create")])
    );

    // Applied: only the target and what it depends on exist.
    let applied = scratch.orrery(&["apply", file, "--yes", "--target", "app"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    assert!(applied.stdout.contains("Done in"), "{applied:?}");
    assert!(site.join("app.txt").is_file() && site.join("net/db.txt").is_file());
    assert!(!site.join("web.txt").exists() && !site.join("logs.txt").exists());
    let rest = scratch.orrery(&[&["plan", file][..], &json].concat());
    let rest = actions(&rest);
    assert_eq!(rest["web"], "create");
    assert_eq!(rest["app"], "no-op");

    // --replace: an unchanged resource is replaced; not one not created yet.
    let plan = scratch.orrery(
        &[
            &["plan", file, "--target", "db", "--replace", "db"][..],
            &json,
        ]
        .concat(),
    );
    assert_eq!(
        actions(&plan),
        expect(&[("db", "replace"), ("net", "no-op")])
    );
    let refused = scratch.orrery(&["plan", file, "--replace", "logs"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("cannot replace `logs`: it is not created yet"),
        "{refused:?}"
    );
    let unknown = scratch.orrery(&["plan", file, "--target", "nope"]);
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(unknown.stderr.contains("no resource `nope`"), "{unknown:?}");

    // Remotely: the same selection, the same plan.
    let server = Server::start();
    let url = server.url("");
    let remote = Run::from(
        scratch
            .command(&[
                "plan",
                file,
                "--target",
                "web",
                "--exclude",
                "cache",
                "--primary",
                &url,
            ])
            .env("ORRERY_TOKEN", ADMIN_TOKEN)
            .env("ORRERY_DATA_DIR", scratch.path().join("elsewhere"))
            .output()
            .unwrap(),
    );
    let local = Run::from(
        scratch
            .command(&["plan", file, "--target", "web", "--exclude", "cache"])
            .env("ORRERY_DATA_DIR", scratch.path().join("fresh"))
            .output()
            .unwrap(),
    );
    assert_eq!((remote.code, local.code), (2, 2), "{remote:?}\n{local:?}");
    assert_eq!(remote.stdout, local.stdout);

    // A targeted destroy takes what depends on the target along.
    let destroyed = scratch.orrery(&["destroy", file, "--yes", "--target", "db"]);
    assert_eq!(destroyed.code, 0, "{destroyed:?}");
    assert!(!site.join("net/db.txt").exists() && !site.join("app.txt").exists());
    assert!(
        site.join("net/cache.txt").is_file(),
        "cache does not depend on db"
    );
}
