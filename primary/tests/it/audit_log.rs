//! Issue #43, item 8: the audit log in the state store, read with
//! `GET /v1/audit` and `orrery audit`, against a real `orrery primary` on
//! each backend: who started and canceled which command (with its plan's
//! hash and outcome), every refusal (401, 403), no credential or secret in
//! any record, and a flood of refusals held to the retention bound.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::postgres::fresh_database;
use crate::common::server::{with_principals, Server, ServerOptions, ADMIN_TOKEN};
use crate::common::{slow_chain, Run, Scratch};
use orrery_testing::Wait;

const OPERATOR: &str = "orr_test_audit_ops_0000000000000000000000000000";
const VIEWER: &str = "orr_test_audit_view_000000000000000000000000000";
/// A token nobody holds: it must appear in no record.
const BAD_TOKEN: &str = "orr_test_audit_BADTOKEN_planted_0000000000000000";
/// Planted in the stack's target configuration.
const SECRET: &str = "audit-planted-secret-7f3a9c";

/// The slow chain on a target whose configuration carries [`SECRET`]
/// (under a key that does not look secret, so that it is recorded as is
/// and an operator may apply the targets the admin recorded).
fn stack(n: usize) -> String {
    slow_chain("audited", n, 300).replace(
        "config: { polls: 0, delay_ms: 300 }",
        &format!("config: {{ polls: 0, delay_ms: 300, motd: {SECRET} }}"),
    )
}

fn server(dir: &Path, database_url: Option<&str>, args: &[&str]) -> Server {
    let mut env = Vec::new();
    if let Some(url) = database_url {
        env.push(("ORRERY_DATABASE_URL".to_owned(), url.to_owned()));
    }
    with_principals(
        dir,
        &[
            ("ops", OPERATOR, r#"["operator"]"#),
            ("watcher", VIEWER, r#"["viewer"]"#),
        ],
        ServerOptions {
            env,
            args: args.iter().map(|a| a.to_string()).collect(),
            ..ServerOptions::default()
        },
    )
}

/// Every record of `GET /v1/audit` as the admin, oldest first, once there
/// are `n` of them.
fn records(s: &Server, n: usize) -> Vec<Value> {
    let what = format!("{n} audit records");
    let wait = Wait::new(&what, Duration::from_secs(20));
    wait.until_ok(|| {
        let (status, page) = s.get("/v1/audit?limit=1000");
        assert_eq!(status, 200, "{page}");
        let mut records = page["records"].as_array().cloned().unwrap_or_default();
        records.reverse();
        if records.len() >= n {
            Ok(records)
        } else {
            Err(page)
        }
    })
}

fn fields(r: &Value) -> (String, String, String) {
    let text = |v: &Value| v.as_str().unwrap_or("null").to_owned();
    (text(&r["principal"]), text(&r["action"]), text(&r["stack"]))
}

/// The whole scenario on one backend; `store_text` reads what the store
/// holds of the audit log (and whatever else can be searched).
fn who_did_what_is_recorded(database_url: Option<&str>, store_text: impl Fn(&Server) -> String) {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), database_url, &[]);
    // The admin records the stack's targets (an operator may only apply
    // targets recorded already).
    let (status, seeded) = s.post("/v1/stacks/apply", &json!({ "document": stack(1) }));
    assert_eq!(status, 202, "{seeded}");
    let seed = seeded["command_id"].as_str().unwrap().to_owned();
    assert_eq!(s.wait_command(&seed)["status"], "completed");

    // A bad token (401), then the viewer's apply (403).
    assert_eq!(s.get_as(Some(BAD_TOKEN), "/v1/stacks").0, 401);
    let doc = json!({ "document": stack(8) });
    let (status, refused) = s.post_as(Some(VIEWER), "/v1/stacks/apply", &doc);
    assert_eq!(status, 403, "{refused}");
    // Refusals are written in the background: wait for both before going on,
    // so that the order of ids is the order of events.
    records(&s, 3);

    // The operator's apply, canceled by the operator while it runs.
    let (status, accepted) = s.post_as(Some(OPERATOR), "/v1/stacks/apply", &doc);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    let plan_hash = accepted["plan"]["plan_hash"].as_str().map(str::to_owned);
    let (status, reply) = s.post_as(
        Some(OPERATOR),
        &format!("/v1/commands/{id}/cancel"),
        &json!({}),
    );
    assert_eq!(status, 202, "{reply}");
    assert_eq!(s.wait_command(&id)["status"], "canceled");

    let all = records(&s, 5);
    let got: Vec<(String, String, String)> = all.iter().map(fields).collect();
    let row = |p: &str, a: &str, st: &str| (p.to_owned(), a.to_owned(), st.to_owned());
    assert_eq!(
        got,
        [
            row("admin", "apply", "audited"),
            row("null", "unauthorized", "null"),
            // A viewer is an operator of no stack: refused before the
            // document (and its stack's name) is read.
            row("watcher", "forbidden", "null"),
            row("ops", "apply", "audited"),
            row("ops", "cancel", "audited"),
        ],
        "{all:#?}"
    );
    assert_eq!(all[0]["command_id"], seed.as_str());
    assert!(
        all[0]["outcome"]
            .as_str()
            .unwrap()
            .starts_with("completed: 1 succeeded"),
        "{all:#?}"
    );
    assert!(
        all[1]["outcome"]
            .as_str()
            .unwrap()
            .contains("authentication required"),
        "{all:#?}"
    );
    assert!(
        all[2]["outcome"]
            .as_str()
            .unwrap()
            .contains("`watcher` is not an operator of any stack"),
        "{all:#?}"
    );
    assert_eq!(all[3]["command_id"], id.as_str());
    assert!(
        all[3]["plan_hash"].as_str().is_some_and(|h| !h.is_empty()),
        "{all:#?}"
    );
    if let Some(hash) = &plan_hash {
        assert_eq!(
            all[3]["plan_hash"],
            hash.as_str(),
            "the hash of the plan it ran"
        );
    }
    let outcome = Wait::new("the apply's outcome", Duration::from_secs(20)).until_ok(|| {
        let all = records(&s, 5);
        match all[3]["outcome"].as_str() {
            Some(o) if o.starts_with("canceled") => Ok(o.to_owned()),
            _ => Err(all[3].clone()),
        }
    });
    assert!(outcome.starts_with("canceled:"), "{outcome}");
    assert_eq!(all[4]["command_id"], id.as_str());
    assert!(all.iter().all(|r| r["count"] == 1), "{all:#?}");

    // Nobody but an admin of every stack reads it; that refusal is audited.
    for token in [VIEWER, OPERATOR] {
        let (status, page) = s.get_as(Some(token), "/v1/audit");
        assert_eq!(status, 403, "{page}");
        assert!(page.get("records").is_none(), "{page}");
    }
    let all = records(&s, 7);
    assert_eq!(
        all[5..].iter().map(fields).collect::<Vec<_>>(),
        [
            row("watcher", "forbidden", "null"),
            row("ops", "forbidden", "null")
        ]
    );

    // Pages, filters and typed errors.
    let (_, first) = s.get("/v1/audit?limit=2");
    assert_eq!(first["records"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let (_, rest) = s.get(&format!("/v1/audit?limit=1000&cursor={cursor}"));
    assert_eq!(rest["records"].as_array().unwrap().len(), 5);
    assert!(rest.get("next_cursor").is_none(), "{rest}");
    let (_, ops) = s.get("/v1/audit?principal=ops");
    assert_eq!(ops["records"].as_array().unwrap().len(), 3, "{ops}");
    let (_, stack_only) = s.get("/v1/audit?stack=audited");
    assert_eq!(
        stack_only["records"].as_array().unwrap().len(),
        3,
        "{stack_only}"
    );
    let newest = all[6]["time_ms"].as_i64().unwrap();
    let (_, since) = s.get(&format!("/v1/audit?since={}", newest + 60_000));
    assert_eq!(since["records"].as_array().unwrap().len(), 0, "{since}");
    for (query, code) in [
        ("limit=0", "bad_limit"),
        ("limit=x", "bad_limit"),
        ("cursor=zz", "bad_cursor"),
        ("since=yesterday", "bad_since"),
    ] {
        let (status, answer) = s.get(&format!("/v1/audit?{query}"));
        assert_eq!(
            (status, answer["code"].as_str()),
            (400, Some(code)),
            "{query}: {answer}"
        );
    }

    // No credential or secret in any answer or in the store's records.
    let (_, page) = s.get("/v1/audit?limit=1000");
    let stored = store_text(&s);
    assert!(
        stored.contains("watcher"),
        "the store's records were read: {stored}"
    );
    for needle in [BAD_TOKEN, OPERATOR, VIEWER, ADMIN_TOKEN, SECRET] {
        assert!(
            !page.to_string().contains(needle),
            "{needle} in the answer: {page}"
        );
        assert!(!stored.contains(needle), "{needle} in the store: {stored}");
    }
}

/// The audit table as text, read from the SQLite file directly.
fn sqlite_audit_table(s: &Server) -> String {
    let db = s.data_dir().join("state.db");
    let conn =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut stmt = conn
        .prepare("SELECT id, time_ms, principal, action, stack, command_id, plan_hash, outcome, count FROM audit")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            (0..9)
                .map(|i| Ok(format!("{:?}", r.get::<_, rusqlite::types::Value>(i)?)))
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .unwrap();
    rows.map(|r| r.unwrap().join("|"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn who_did_what_is_recorded_in_the_store() {
    who_did_what_is_recorded(None, |s| {
        // No token anywhere in the file (nor its log), whatever table.
        for name in ["state.db", "state.db-wal"] {
            if let Ok(bytes) = std::fs::read(s.data_dir().join(name)) {
                for token in [BAD_TOKEN, OPERATOR, VIEWER, ADMIN_TOKEN] {
                    assert!(
                        !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                        "a token in {name}"
                    );
                }
            }
        }
        sqlite_audit_table(s)
    });
}

#[test]
fn who_did_what_is_recorded_in_the_postgresql_store() {
    let db = fresh_database("audit").expect(
        "ORRERY_TEST_DATABASE_URL is not set: run through scripts/with-postgres.sh (scripts/test.sh does)",
    );
    let url = db.clone();
    who_did_what_is_recorded(Some(&db), move |_| {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query("SELECT row_to_json(a)::text FROM audit a ORDER BY id", &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    });
}

/// A flood of 401s and 403s: every one is answered, the store keeps at
/// most `--audit-retention` records, and the newest survive.
#[test]
fn a_flood_of_refusals_stays_within_the_retention_bound() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), None, &["--audit-retention", "50"]);
    let floods = 2000;
    let started = std::time::Instant::now();
    for i in 0..floods {
        let (status, _) = match i % 2 {
            // Each on a path of its own: no two alike, none coalesced.
            0 => s.get_as(Some(BAD_TOKEN), &format!("/v1/flood-{i}")),
            _ => s.get_as(Some(VIEWER), "/v1/audit"),
        };
        assert!(status == 401 || status == 403, "refusal {i}: {status}");
    }
    let answered = started.elapsed();
    // The last refusal, unlike the flood, is one of its kind: once it is
    // written, everything before it was.
    assert_eq!(s.get_as(Some(OPERATOR), "/v1/audit").0, 403);
    let newest = Wait::new("the last refusal written", Duration::from_secs(30)).until_ok(|| {
        let (_, page) = s.get("/v1/audit?limit=1000");
        let records = page["records"].as_array().cloned().unwrap_or_default();
        if records.first().is_some_and(|r| r["principal"] == "ops") {
            Ok(records)
        } else {
            Err(page)
        }
    });
    let rows: i64 = rusqlite::Connection::open(s.data_dir().join("state.db"))
        .unwrap()
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert!(rows <= 50, "{rows} records in the store, bound 50");
    assert_eq!(rows as usize, newest.len());
    // The newest are the ones kept: the flood's last 401 and its 403s
    // (coalesced within a batch, a 403 is recorded where its first was).
    let kept = |needle: &str| newest.iter().any(|r| r.to_string().contains(needle));
    assert!(kept("/v1/flood-1998") && kept("watcher"), "{newest:#?}");
    assert!(!kept("/v1/flood-0)"), "the oldest was pruned: {newest:#?}");
    eprintln!("{floods} refusals answered in {answered:?}: {rows} records kept");
}

/// `orrery audit` against a real primary: a table for people, JSON and
/// NDJSON for scripts; a viewer's token is refused.
#[test]
fn orrery_audit_prints_the_primary_s_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), None, &[]);
    let (status, seeded) = s.post("/v1/stacks/apply", &json!({ "document": stack(1) }));
    assert_eq!(status, 202, "{seeded}");
    let seed = seeded["command_id"].as_str().unwrap().to_owned();
    s.wait_command(&seed);
    assert_eq!(s.get_as(Some(BAD_TOKEN), "/v1/stacks").0, 401);
    records(&s, 2);

    let scratch = Scratch::new();
    let url = s.url("");
    let audit = |token: &str, args: &[&str]| -> Run {
        let mut all = vec!["audit", "--primary", &url];
        all.extend(args);
        Run::from(
            scratch
                .command(&all)
                .env("ORRERY_TOKEN", token)
                .output()
                .unwrap(),
        )
    };
    let table = audit(ADMIN_TOKEN, &[]);
    assert_eq!(table.code, 0, "{table:?}");
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[0].contains("PRINCIPAL") && lines[0].contains("ACTION"),
        "{table:?}"
    );
    assert!(
        lines[1].contains("unauthorized") && lines[1].contains("authentication required"),
        "{table:?}"
    );
    assert!(
        lines[2].contains("admin") && lines[2].contains("apply") && lines[2].contains(&seed),
        "{table:?}"
    );

    let json_run = audit(ADMIN_TOKEN, &["--output", "json", "--principal", "admin"]);
    assert_eq!(json_run.code, 0, "{json_run:?}");
    let parsed: Value = serde_json::from_str(&json_run.stdout).unwrap();
    let records = parsed["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{parsed}");
    assert_eq!(records[0]["command_id"], seed.as_str());

    let ndjson = audit(ADMIN_TOKEN, &["--output", "ndjson", "--limit", "1"]);
    assert_eq!(ndjson.code, 0, "{ndjson:?}");
    let lines: Vec<Value> = ndjson
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["action"], "unauthorized");

    let refused = audit(VIEWER, &[]);
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused.stderr.contains("403") || refused.stderr.contains("admin"),
        "{refused:?}"
    );
    for run in [&table, &json_run, &ndjson, &refused] {
        assert!(!run.stdout.contains(BAD_TOKEN) && !run.stderr.contains(BAD_TOKEN));
    }
}
