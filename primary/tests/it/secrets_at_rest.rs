//! Planted secrets: distinct secret values (a write-only property, a
//! write-only value of the wrong type, a target-config password, a
//! `postgres://user:pw@…` URL and a libpq `password=…` connection string
//! in a target config, a secret in the parent's
//! environment) go through `orrery apply` → `orrery drift` →
//! `orrery destroy` in embedded mode, with `orrery primary` on the same
//! store serving `/v1/resources`, `/v1/targets` and `/v1/commands/{id}`
//! during the cycle, debug logging on everywhere. None of them may be found
//! in the SQLite files, any process's output, or any API answer; the
//! plugins the primary starts see neither the secret variable nor the
//! primary's own configuration.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::server::{Server, ServerOptions};
use common::{Run, Scratch};
use serde_json::{json, Value};

const WRITE_ONLY: &str = "wo-Secret-7f3a91";
const WRONG_TYPE: i64 = 918_273_645;
const TARGET_PASSWORD: &str = "tpw-Secret-c4e2d8";
const URL_PASSWORD: &str = "url-Secret-9b1d55";
const DSN_PASSWORD: &str = "dsn-Secret-2a7c43";
const ENV_SECRET: &str = "env-Secret-5e8c20";
const ALLOWED: &str = "allowed-visible-31415";

fn planted() -> Vec<String> {
    vec![
        WRITE_ONLY.into(),
        WRONG_TYPE.to_string(),
        TARGET_PASSWORD.into(),
        URL_PASSWORD.into(),
        DSN_PASSWORD.into(),
        ENV_SECRET.into(),
    ]
}

fn document(stack: &str, root: &Path, note: &str) -> String {
    format!(
        "stack: {stack}\ntargets:\n  - name: home\n    plugin: local\n    config:\n      root: \"{}\"\n      create_root: true\n      password: \"{TARGET_PASSWORD}\"\n      database: {{ dsn: \"postgres://admin:{URL_PASSWORD}@db.example:5432/app\" }}\n      libpq: \"host=db.example password={DSN_PASSWORD} dbname=app\"\nresources:\n  - label: note\n    type: Local::Fs::File\n    target: home\n    properties: {{ path: note.txt, content: \"hello\\n\", owner_note: {note} }}\n",
        root.display()
    )
}

/// Everything a run showed, named for the failure message.
#[derive(Default)]
struct Seen(BTreeMap<String, String>);

impl Seen {
    fn run(&mut self, what: &str, run: &Run) {
        self.0
            .insert(what.into(), format!("{}\n{}", run.stdout, run.stderr));
    }

    fn answer(&mut self, what: &str, value: &Value) {
        self.0.insert(what.into(), value.to_string());
    }
}

fn orrery(scratch: &Scratch, args: &[&str]) -> Run {
    let mut cmd = scratch.command(args);
    cmd.env("RUST_LOG", "debug")
        .env("SECRET_THING", ENV_SECRET)
        .env_remove("ORRERY_DATABASE_URL")
        .env_remove("ORRERY_NATS_URL");
    Run::from(cmd.output().unwrap())
}

fn environ(pid: u64) -> BTreeMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("environ of plugin {pid}: {e}"));
    raw.split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .filter_map(|kv| {
            let text = String::from_utf8_lossy(kv);
            text.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

#[test]
fn planted_secrets_are_found_nowhere() {
    let scratch = Scratch::new();
    let site = scratch.path().join("site");
    let good = scratch.write(
        "planted.yaml",
        &document("planted", &site, &format!("\"{WRITE_ONLY}\"")),
    );
    let bad = scratch.write(
        "wrongtype.yaml",
        &document("wrongtype", &site, &WRONG_TYPE.to_string()),
    );
    let config = scratch.write(
        "orrery.toml",
        &format!(
            "stack_dir = \"{}\"\nconcurrency = 8\n",
            scratch.path().display()
        ),
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(scratch.state()),
        args: vec![
            "--config".into(),
            config.display().to_string(),
            "--plugin-env".into(),
            "ALLOWED_THING".into(),
        ],
        env: vec![
            ("RUST_LOG".into(), "debug".into()),
            ("SECRET_THING".into(), ENV_SECRET.into()),
            ("ALLOWED_THING".into(), ALLOWED.into()),
        ],
        cwd: None,
        no_default_auth: false,
        default_log_filter: false,
    });
    let mut seen = Seen::default();

    // A plugin the primary starts (planning a document over HTTP).
    let text = std::fs::read_to_string(&good).unwrap();
    let (status, plan) = server.post("/v1/stacks/plan", &json!({ "document": text }));
    assert_eq!(status, 200, "{plan}");
    seen.answer("POST /v1/stacks/plan", &plan);
    let (_, plugins) = server.get("/v1/plugins");
    let pid = plugins["plugins"][0]["status"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("a running plugin with a pid: {plugins}"));
    let env = environ(pid);
    assert!(env.contains_key("PATH"), "PATH is passed on: {env:?}");
    assert_eq!(
        env.get("ALLOWED_THING").map(String::as_str),
        Some(ALLOWED),
        "--plugin-env passes a named variable on"
    );
    for leaked in [
        "SECRET_THING",
        "ORRERY_DATABASE_URL",
        "ORRERY_DATA_DIR",
        "ORRERY_LISTEN",
        "ORRERY_STACK_DIR",
        "ORRERY_CONCURRENCY",
    ] {
        assert!(
            !env.contains_key(leaked),
            "{leaked} reached the plugin: {env:?}"
        );
    }
    assert!(
        !env.values().any(|v| v.contains(ENV_SECRET)),
        "the secret reached the plugin"
    );

    // apply → drift → destroy, the server answering during the cycle.
    let apply = orrery(&scratch, &["apply", good.to_str().unwrap(), "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    seen.run("orrery apply", &apply);
    // The store is private to its user after an apply, whatever the umask.
    let mode = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&scratch.state()), 0o700, "the data directory");
    for f in ["state.db", "state.db-wal", "state.db-shm", "secret.key"] {
        assert_eq!(mode(&scratch.state().join(f)), 0o600, "{f}");
    }
    assert_eq!(
        std::fs::read_to_string(site.join("note.txt")).unwrap(),
        "hello\n"
    );
    let wrong = orrery(&scratch, &["apply", bad.to_str().unwrap(), "--yes"]);
    assert_eq!(
        wrong.code, 1,
        "a write-only value of the wrong type fails: {wrong:?}"
    );
    assert!(
        wrong.stdout.contains("owner_note") || wrong.stderr.contains("owner_note"),
        "the error names the field: {wrong:?}"
    );
    seen.run("orrery apply (wrong type)", &wrong);

    let (_, resources) = server.get("/v1/resources?stack=planted");
    assert_eq!(resources["resources"][0]["label"], "note", "{resources}");
    seen.answer("GET /v1/resources (applied)", &resources);
    let (_, targets) = server.get("/v1/targets");
    let shown = targets.to_string();
    assert!(
        shown.contains(&site.display().to_string()),
        "the root is shown: {targets}"
    );
    assert!(
        shown.contains("postgres://admin:***@db.example:5432/app"),
        "{targets}"
    );
    seen.answer("GET /v1/targets", &targets);

    let drift = orrery(&scratch, &["drift", "--stack", "planted"]);
    assert_eq!(
        drift.code, 0,
        "nothing drifted, from the recorded targets: {drift:?}"
    );
    seen.run("orrery drift", &drift);

    let (_, commands) = server.get("/v1/commands");
    seen.answer("GET /v1/commands", &commands);
    let ids: Vec<String> = commands["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect();
    assert!(ids.len() >= 2, "both applies are listed: {commands}");
    let mut failed_message = false;
    for id in &ids {
        let (status, command) = server.get(&format!("/v1/commands/{id}"));
        assert_eq!(status, 200, "{command}");
        failed_message |= command.to_string().contains("owner_note");
        seen.answer(&format!("GET /v1/commands/{id}"), &command);
    }
    assert!(
        failed_message,
        "the failed create's recorded message names the field"
    );

    let destroy = orrery(&scratch, &["destroy", "--stack", "planted", "--yes"]);
    assert_eq!(
        destroy.code, 0,
        "destroyed from the recorded targets: {destroy:?}"
    );
    seen.run("orrery destroy", &destroy);
    assert!(!site.join("note.txt").exists());
    let (_, resources) = server.get("/v1/resources");
    seen.answer("GET /v1/resources (destroyed)", &resources);
    let (_, commands) = server.get("/v1/commands");
    for c in commands["commands"].as_array().unwrap() {
        let id = c["id"].as_str().unwrap();
        let (_, command) = server.get(&format!("/v1/commands/{id}"));
        seen.answer(&format!("GET /v1/commands/{id} (end)"), &command);
    }

    // The store: the database, its log and shared memory; the key file
    // apart, and none of its bytes in the store.
    let state = scratch.state();
    let mut store = Vec::new();
    for f in ["state.db", "state.db-wal", "state.db-shm"] {
        if let Ok(bytes) = std::fs::read(state.join(f)) {
            store.extend(bytes);
        }
    }
    assert!(store.len() > 4096, "the store was read");
    let key = std::fs::read_to_string(state.join("secret.key")).unwrap();
    let key = key.trim();
    assert_eq!(key.len(), 64);
    let key_bytes: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&key[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let holds = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    assert!(
        !holds(&store, key.as_bytes()),
        "the hex key is in the store"
    );
    assert!(!holds(&store, &key_bytes), "the raw key is in the store");

    let log = server.log();
    assert!(log.contains("plugin started"), "the server logged:\n{log}");
    let apply_log = &seen.0["orrery apply"];
    assert!(
        apply_log.contains("DEBUG"),
        "debug logging was on:\n{apply_log}"
    );
    seen.0.insert("orrery primary (stderr)".into(), log);

    let mut found = Vec::new();
    for secret in planted() {
        if holds(&store, secret.as_bytes()) {
            found.push(format!("`{secret}` in the SQLite files"));
        }
        for (what, text) in &seen.0 {
            if text.contains(&secret) {
                found.push(format!("`{secret}` in {what}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "planted secrets found:\n{}",
        found.join("\n")
    );
}
