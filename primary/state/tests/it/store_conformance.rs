//! The store conformance suite: every behaviour of `StateStore`, written
//! once as functions taking a store, run against the embedded SQLite store
//! (a fresh temporary directory per test) and against PostgreSQL (a fresh
//! database per test on the server `ORRERY_TEST_DATABASE_URL` names).
//!
//! The PostgreSQL half never skips: without the variable its tests fail and
//! say how to run them, through `scripts/with-postgres.sh`, which starts a
//! throwaway server:
//!
//! ```text
//! ./scripts/with-postgres.sh cargo test -p orrery-state --test it store_conformance
//! ```
//!
//! After the shared cases come each backend's own: format upgrades of
//! SQLite files (`tests/fixtures/state/sqlite_format0.sql`), PostgreSQL
//! migrations (from version 1, concurrently, refused when newer) and
//! reconnection after a broken connection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use orrery_core::select::Selection;
use orrery_schema::{PropertyMap, Value};
use orrery_stack::TargetDecl;
use orrery_state::{
    AuditEntry, AuditFilter, CommandDocument, CommandFilter, CommandStatus, DiscoveredKey, Lease,
    LeaseGrant, ManagedKey, Move, OpStatus, OperationPage, OperationRecord, PgStore, SqliteStore,
    StateStore, Store, StoreError, StoredResource, Write, MIGRATIONS, PG_SCHEMA_VERSION,
    RECORD_FORMAT,
};

// ---------------------------------------------------------------------------
// Backends

/// A fresh store and where it lives (a directory or a database URL), so a
/// case can open it again through `orrery_state::open`.
struct Fixture {
    store: Store,
    location: String,
    _cleanup: Cleanup,
}

impl Fixture {
    /// Opens the same store again, as a restarted primary would.
    fn reopen(&self) -> Store {
        orrery_state::open(&self.location).expect("reopen the store")
    }
}

enum Cleanup {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Database { admin_url: String, name: String },
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Cleanup::Database { admin_url, name } = self {
            if let Ok(mut admin) = pg_connect(admin_url) {
                let _ = admin
                    .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"));
            }
        }
    }
}

fn sqlite_fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("data").display().to_string();
    let store = orrery_state::open(&location).expect("open a fresh SQLite store");
    Fixture {
        store,
        location,
        _cleanup: Cleanup::Dir(dir),
    }
}

const NO_SERVER: &str = "ORRERY_TEST_DATABASE_URL is not set: the PostgreSQL half of the store \
conformance suite needs a server. Run the tests through scripts/with-postgres.sh, which starts a \
throwaway PostgreSQL and sets the variable, e.g. \
`./scripts/with-postgres.sh cargo test -p orrery-state --test it store_conformance`";

/// The server's URL (a superuser on a throwaway server).
fn server_url() -> String {
    match std::env::var("ORRERY_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("{NO_SERVER}"),
    }
}

/// A plain (sync) connection to `url`, with the TLS the store would use
/// (the suite's URL asks for verify-full).
fn pg_connect(url: &str) -> Result<postgres::Client, String> {
    let (config, tls) = orrery_state::pg_connect_config(url).map_err(|e| e.to_string())?;
    let mut config = postgres::Config::from(config);
    // Not the store's name: cases count the store's connections by it.
    config.application_name("orrery-test");
    config.connect(tls).map_err(|e| e.to_string())
}

/// `url` with its database replaced by `db`.
fn with_dbname(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let base = match base[after_scheme..].find('/') {
        Some(slash) => &base[..after_scheme + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}

/// Creates an empty database of its own for one test, with a locale whose
/// collation is not bytewise where the server has ICU (so ordering is
/// tested for real), and returns its URL and the cleanup that drops it.
fn fresh_database(case: &str) -> (String, Cleanup) {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let admin_url = server_url();
    let short: String = case.chars().take(32).collect();
    let name = format!(
        "orrery_{short}_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = pg_connect(&admin_url).unwrap_or_else(|e| {
        panic!("cannot connect to ORRERY_TEST_DATABASE_URL ({admin_url}): {e}; {NO_SERVER}")
    });
    let icu = format!(
        "CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' \
         LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"
    );
    if admin.batch_execute(&icu).is_err() {
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .expect("create a test database");
    }
    let url = with_dbname(&admin_url, &name);
    (url, Cleanup::Database { admin_url, name })
}

fn pg_fixture(case: &str) -> Fixture {
    let (url, cleanup) = fresh_database(case);
    let store = orrery_state::open(&url).expect("open a fresh PostgreSQL store");
    Fixture {
        store,
        location: url,
        _cleanup: cleanup,
    }
}

/// Every shared case, run once per backend: `on_sqlite::NAME` and
/// `on_postgres::NAME`.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[test] fn $case() { super::$case(&super::sqlite_fixture()); })*
        }
        mod on_postgres {
            $(#[test] fn $case() { super::$case(&super::pg_fixture(stringify!($case))); })*
        }
    };
}

conformance!(
    secret_key_is_32_bytes_and_stable,
    empty_store_has_nothing,
    put_then_read_round_trips_every_field,
    put_bumps_version_and_replaces_every_field,
    resources_are_ordered_by_stack_then_label_bytewise,
    resources_filter_by_stack,
    resource_pages_walk_the_order_with_filters,
    remove_resource_forgets_only_that_one,
    property_values_round_trip_exactly,
    text_fields_keep_any_unicode_and_quotes,
    targets_round_trip_ordered_by_name,
    put_targets_upserts_and_keeps_the_others,
    begin_command_records_it_running,
    a_command_records_its_first_principal,
    begin_command_with_a_used_id_fails,
    latest_command_is_the_last_begun,
    finish_command_records_status_and_time,
    operations_upsert_by_label_and_operation,
    a_batch_applies_its_writes_in_order,
    a_batch_that_removes_and_records_again_starts_over,
    a_failing_batch_writes_nothing,
    operations_are_ordered_by_last_update,
    operation_pages_walk_label_order_with_a_status_filter,
    operations_do_not_need_their_command_first,
    operations_keep_native_id_and_context,
    latest_command_of_a_stack,
    everything_survives_a_reopen,
    concurrent_writers_lose_no_update,
    usable_from_inside_tokio_runtimes,
    put_if_version_writes_only_over_the_version_read,
    resource_counts_are_by_stack,
    managed_keys_are_the_managed_ids_of_one_type_on_one_target,
    discovered_keys_fingerprint_the_recorded_properties,
    commands_list_newest_first_by_stack_and_status,
    operation_counts_are_by_status,
    command_stacks_are_distinct_and_ordered,
    command_documents_round_trip_and_are_replaced,
    now_ms_is_unix_milliseconds,
    a_second_owner_cannot_take_an_unexpired_lease,
    a_lease_can_be_taken_after_it_expires,
    rate_sharers_count_the_owners_seen_within_the_window,
    only_the_holder_renews_or_releases_a_lease,
    one_of_many_racing_owners_gets_a_lease,
    outputs_round_trip_and_are_replaced_per_stack,
    moves_re_address_records_in_one_write,
    a_move_onto_a_recorded_label_writes_nothing,
    protect_marks_stay_with_their_records,
    audit_records_list_newest_first_with_filters,
    audit_keeps_only_the_newest_records,
);

// ---------------------------------------------------------------------------
// Helpers

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn props(pairs: &[(&str, Value)]) -> PropertyMap {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn resource(stack: &str, label: &str) -> StoredResource {
    StoredResource {
        stack: stack.into(),
        label: label.into(),
        resource_type: "local.File".into(),
        target: "home".into(),
        plugin: "local".into(),
        native_id: format!("/srv/{stack}/{label}"),
        properties: props(&[
            ("path", Value::from(format!("/srv/{stack}/{label}"))),
            ("mode", Value::Int(0o644)),
        ]),
        secret_hashes: BTreeMap::from([("content".to_owned(), "5b2c1f".to_owned())]),
        deps: vec!["base".into()],
        managed: !stack.is_empty(),
        version: 0,
    }
}

fn op(label: &str, operation: &str, status: &str) -> OperationRecord {
    OperationRecord {
        label: label.into(),
        operation: operation.into(),
        request_id: format!("req-{label}-{operation}"),
        status: OpStatus::parse(status),
        attempts: 1,
        error_code: None,
        message: None,
        native_id: None,
        context: None,
        updated_ms: 0,
    }
}

fn target(name: &str, plugin: &str, root: &str) -> TargetDecl {
    TargetDecl {
        name: name.into(),
        plugin: plugin.into(),
        config: props(&[("root", Value::from(root))]),
    }
}

/// `r` as the store returns it after `n` puts.
fn stored(r: &StoredResource, n: i64) -> StoredResource {
    StoredResource {
        version: n,
        ..r.clone()
    }
}

fn labels(rs: &[StoredResource]) -> Vec<(String, String)> {
    rs.iter()
        .map(|r| (r.stack.clone(), r.label.clone()))
        .collect()
}

/// Sleeps until the wall clock has moved past the current millisecond (by a
/// margin), so consecutive writes get distinct timestamps.
fn next_ms() {
    std::thread::sleep(Duration::from_millis(5));
}

// ---------------------------------------------------------------------------
// Shared cases

fn secret_key_is_32_bytes_and_stable(f: &Fixture) {
    let key = f.store.secret_key().unwrap();
    assert_eq!(key.len(), 32);
    assert!(key.iter().any(|b| *b != 0), "a random key, not zeros");
    assert_eq!(f.store.secret_key().unwrap(), key);
    assert_eq!(
        f.reopen().secret_key().unwrap(),
        key,
        "kept across a reopen"
    );
}

fn empty_store_has_nothing(f: &Fixture) {
    let s = &f.store;
    assert!(s.resources(None).unwrap().is_empty());
    assert!(s.resources(Some("web")).unwrap().is_empty());
    assert!(s.resources(Some("")).unwrap().is_empty());
    assert!(s.targets("web").unwrap().is_empty());
    assert_eq!(s.command(None).unwrap(), None);
    assert_eq!(s.command(Some("nope")).unwrap(), None);
    s.remove_resource("web", "nope").unwrap();
}

fn put_then_read_round_trips_every_field(f: &Fixture) {
    let r = resource("web", "config");
    f.store.put_resource(&r).unwrap();
    assert_eq!(f.store.resources(None).unwrap(), vec![stored(&r, 1)]);
    assert_eq!(f.store.resources(Some("web")).unwrap(), vec![stored(&r, 1)]);

    let unmanaged = StoredResource {
        secret_hashes: BTreeMap::new(),
        deps: Vec::new(),
        properties: PropertyMap::new(),
        ..resource("", "found-1")
    };
    assert!(!unmanaged.managed);
    f.store.put_resource(&unmanaged).unwrap();
    assert_eq!(
        f.store.resources(Some("")).unwrap(),
        vec![stored(&unmanaged, 1)]
    );
}

fn put_bumps_version_and_replaces_every_field(f: &Fixture) {
    let first = StoredResource {
        version: 42, // what the caller passes is ignored: the store counts
        ..resource("web", "config")
    };
    f.store.put_resource(&first).unwrap();
    assert_eq!(f.store.resources(None).unwrap()[0].version, 1);
    f.store.put_resource(&first).unwrap();
    assert_eq!(f.store.resources(None).unwrap(), vec![stored(&first, 2)]);

    let changed = StoredResource {
        stack: "web".into(),
        label: "config".into(),
        resource_type: "local.Directory".into(),
        target: "other".into(),
        plugin: "local2".into(),
        native_id: "/elsewhere".into(),
        properties: props(&[("path", Value::from("/elsewhere"))]),
        secret_hashes: BTreeMap::new(),
        deps: vec!["a".into(), "b".into()],
        managed: false,
        version: 0,
    };
    f.store.put_resource(&changed).unwrap();
    assert_eq!(f.store.resources(None).unwrap(), vec![stored(&changed, 3)]);
}

fn resources_are_ordered_by_stack_then_label_bytewise(f: &Fixture) {
    // Bytewise (SQLite's BINARY, PostgreSQL's "C"): digits < upper < lower
    // < non-ASCII, '-' < '_', and "" first.
    let mut expected = Vec::new();
    for stack in ["", "Web", "api", "web"] {
        for label in ["10", "9", "B", "Z", "a", "a-b", "a_b", "b", "ä", "é"] {
            expected.push((stack.to_owned(), label.to_owned()));
        }
    }
    let mut shuffled = expected.clone();
    // A fixed permutation (no RNG needed): stride through the list.
    let n = shuffled.len();
    shuffled = (0..n).map(|i| shuffled[(i * 17) % n].clone()).collect();
    for (stack, label) in &shuffled {
        f.store.put_resource(&resource(stack, label)).unwrap();
    }
    assert_eq!(labels(&f.store.resources(None).unwrap()), expected);
    let web: Vec<_> = expected
        .iter()
        .filter(|(s, _)| s == "web")
        .cloned()
        .collect();
    assert_eq!(labels(&f.store.resources(Some("web")).unwrap()), web);
}

fn resource_pages_walk_the_order_with_filters(f: &Fixture) {
    use orrery_state::ResourcePage;
    for stack in ["a", "b"] {
        for i in 0..25 {
            let mut r = resource(stack, &format!("r{i:02}"));
            if i % 5 == 0 {
                r.resource_type = "local.Directory".into();
                r.target = "other".into();
            }
            f.store.put_resource(&r).unwrap();
        }
    }
    let all = labels(&f.store.resources(None).unwrap());
    assert_eq!(all.len(), 50);
    // Pages of 7 from the start, each after the last of the one before:
    // every resource once, in order.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = f
            .store
            .resource_page(&ResourcePage {
                after: after.clone(),
                limit: Some(7),
                ..Default::default()
            })
            .unwrap();
        assert!(page.len() <= 7);
        let Some(last) = page.last() else { break };
        after = Some((last.stack.clone(), last.label.clone()));
        seen.extend(labels(&page));
    }
    assert_eq!(seen, all);
    // Filters, with a page crossing nothing it should not.
    let dirs = f
        .store
        .resource_page(&ResourcePage {
            stack: Some("b".into()),
            resource_type: Some("local.Directory".into()),
            target: Some("other".into()),
            after: Some(("b".into(), "r05".into())),
            limit: Some(2),
        })
        .unwrap();
    assert_eq!(
        labels(&dirs),
        [
            ("b".to_owned(), "r10".to_owned()),
            ("b".to_owned(), "r15".to_owned())
        ]
    );
}

fn resources_filter_by_stack(f: &Fixture) {
    for (stack, label) in [("a", "x"), ("a", "y"), ("b", "x"), ("", "x"), ("ab", "x")] {
        f.store.put_resource(&resource(stack, label)).unwrap();
    }
    f.store.put_resource(&resource("a", "x")).unwrap();
    let a = f.store.resources(Some("a")).unwrap();
    assert_eq!(
        labels(&a),
        [("a", "x"), ("a", "y")].map(|(s, l)| (s.to_owned(), l.to_owned()))
    );
    assert_eq!(a[0].version, 2, "a/x was put twice");
    let b = f.store.resources(Some("b")).unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(
        b[0].version, 1,
        "same label in another stack: its own record"
    );
    assert_eq!(f.store.resources(Some("")).unwrap().len(), 1);
    assert!(f.store.resources(Some("missing")).unwrap().is_empty());
    assert!(
        f.store.resources(Some("A")).unwrap().is_empty(),
        "case matters"
    );
    assert_eq!(f.store.resources(None).unwrap().len(), 5);
}

fn moves_re_address_records_in_one_write(f: &Fixture) {
    let mut user = resource("web", "user");
    user.deps = vec!["old".into()];
    for r in [
        resource("web", "old"),
        user,
        resource("web", "a"),
        resource("api", "old"),
    ] {
        f.store.put_resource(&r).unwrap();
    }
    let m = |from: &str, to: &str| Move {
        from: from.into(),
        to: to.into(),
    };
    let moves = [
        m("old", "module.db[\"eu\"].old"),
        m("a", "b"),
        m("b", "c"),
        m("ghost", "anywhere"),
    ];
    f.store.move_resources("web", &moves).unwrap();
    let web = f.store.resources(Some("web")).unwrap();
    assert_eq!(
        labels(&web),
        ["c", "module.db[\"eu\"].old", "user"].map(|l| ("web".to_owned(), l.to_owned()))
    );
    let moved = &web[1];
    assert_eq!(
        (moved.native_id.as_str(), &moved.properties),
        ("/srv/web/old", &resource("web", "old").properties),
        "the same resource, under its new address"
    );
    assert_eq!(web[0].native_id, "/srv/web/a", "a chain of moves");
    assert_eq!(
        web[2].deps,
        ["module.db[\"eu\"].old"],
        "dependencies follow"
    );
    assert_eq!(
        labels(&f.store.resources(Some("api")).unwrap()),
        [("api".to_owned(), "old".to_owned())],
        "other stacks are untouched"
    );
    // Made once, the same moves change nothing.
    f.store.move_resources("web", &moves).unwrap();
    assert_eq!(f.store.resources(Some("web")).unwrap().len(), 3);
}

fn a_move_onto_a_recorded_label_writes_nothing(f: &Fixture) {
    for label in ["a", "b", "c"] {
        f.store.put_resource(&resource("web", label)).unwrap();
    }
    let before = f.store.resources(Some("web")).unwrap();
    let moves = [
        Move {
            from: "a".into(),
            to: "z".into(),
        },
        Move {
            from: "b".into(),
            to: "c".into(),
        },
    ];
    let e = f.store.move_resources("web", &moves).unwrap_err();
    assert!(
        matches!(e, StoreError::MoveTaken { ref label, .. } if label == "c"),
        "{e}"
    );
    assert_eq!(f.store.resources(Some("web")).unwrap(), before);
}

fn remove_resource_forgets_only_that_one(f: &Fixture) {
    for (stack, label) in [("web", "a"), ("web", "b"), ("api", "a")] {
        f.store.put_resource(&resource(stack, label)).unwrap();
    }
    f.store.put_resource(&resource("web", "a")).unwrap();
    f.store.remove_resource("web", "a").unwrap();
    assert_eq!(
        labels(&f.store.resources(None).unwrap()),
        [("api", "a"), ("web", "b")].map(|(s, l)| (s.to_owned(), l.to_owned()))
    );
    f.store.remove_resource("web", "a").unwrap(); // already gone: fine
    f.store.remove_resource("nowhere", "b").unwrap();
    f.store.put_resource(&resource("web", "a")).unwrap();
    let again = f.store.resources(Some("web")).unwrap();
    assert_eq!(
        again[0],
        stored(&resource("web", "a"), 1),
        "a new record starts at 1"
    );
}

fn property_values_round_trip_exactly(f: &Fixture) {
    let nested = props(&[
        (
            "list",
            Value::List(vec![Value::Int(1), Value::Null, Value::from("x")]),
        ),
        ("empty_map", Value::Map(PropertyMap::new())),
        ("empty_list", Value::List(Vec::new())),
    ]);
    let all = props(&[
        ("null", Value::Null),
        ("true", Value::Bool(true)),
        ("false", Value::Bool(false)),
        ("min", Value::Int(i64::MIN)),
        ("max", Value::Int(i64::MAX)),
        ("zero", Value::Int(0)),
        ("huge", Value::UInt(u64::MAX)),
        ("pi", Value::Float(std::f64::consts::PI)),
        ("tiny", Value::Float(f64::MIN_POSITIVE)),
        ("inf", Value::Float(f64::INFINITY)),
        ("neg", Value::Float(-1.5e300)),
        ("text", Value::from("héllo ✓ 🚀 \u{0} nul inside")),
        ("empty", Value::from("")),
        ("bytes", Value::Bytes((0..=255).collect())),
        ("nested", Value::Map(nested)),
        ("", Value::from("an empty key")),
        (
            "deep",
            (0..40).fold(Value::Int(7), |v, _| Value::List(vec![v])),
        ),
    ]);
    let big = props(&[("blob", Value::Bytes(vec![0xA5; 1 << 20]))]);
    let r = StoredResource {
        properties: all,
        secret_hashes: (0..50)
            .map(|i| (format!("field{i}"), format!("{i:064x}")))
            .collect(),
        deps: vec!["ä".into(), "b c".into(), "\"quoted\"".into()],
        ..resource("web", "all")
    };
    let b = StoredResource {
        properties: big,
        ..resource("web", "big")
    };
    f.store.put_resource(&r).unwrap();
    f.store.put_resource(&b).unwrap();
    assert_eq!(
        f.store.resources(Some("web")).unwrap(),
        vec![stored(&r, 1), stored(&b, 1)]
    );
}

fn text_fields_keep_any_unicode_and_quotes(f: &Fixture) {
    let odd = "it's \"q\" \\ %_ ; DROP TABLE resources; -- ✓ 🚀 עברית\n\ttab";
    let r = StoredResource {
        stack: format!("stack {odd}"),
        label: format!("label {odd}"),
        resource_type: format!("type {odd}"),
        target: format!("target {odd}"),
        plugin: format!("plugin {odd}"),
        native_id: format!("id {odd}"),
        ..resource("x", "y")
    };
    f.store.put_resource(&r).unwrap();
    assert_eq!(
        f.store.resources(Some(&r.stack)).unwrap(),
        vec![stored(&r, 1)]
    );
    f.store
        .put_targets(&r.stack, &[target(odd, odd, odd)])
        .unwrap();
    assert_eq!(
        f.store.targets(&r.stack).unwrap(),
        vec![target(odd, odd, odd)]
    );
    let id = format!("cmd {odd}");
    f.store.begin_command(&id, &r.stack, odd).unwrap();
    let o = OperationRecord {
        error_code: Some(format!("code {odd}")),
        message: Some(format!("message {odd}")),
        ..op(odd, odd, odd)
    };
    f.store.put_operation(&id, &o).unwrap();
    let c = f.store.command(Some(&id)).unwrap().unwrap();
    assert_eq!(
        (c.id.as_str(), c.stack.as_str(), c.kind.as_str()),
        (id.as_str(), r.stack.as_str(), odd)
    );
    assert_eq!(c.operations, vec![o]);
    f.store.remove_resource(&r.stack, &r.label).unwrap();
    assert!(f.store.resources(None).unwrap().is_empty());
}

fn targets_round_trip_ordered_by_name(f: &Fixture) {
    let ts = [
        target("b-home", "local", "/b"),
        target("A", "testbed", "/A"),
        target("a", "local", "/a"),
    ];
    f.store.put_targets("web", &ts).unwrap();
    let with_rich_config = TargetDecl {
        config: props(&[
            ("root", Value::from("/r")),
            ("limits", Value::Map(props(&[("rps", Value::Float(2.5))]))),
            (
                "tags",
                Value::List(vec![Value::from("x"), Value::Bool(true)]),
            ),
        ]),
        ..target("rich", "local", "")
    };
    f.store
        .put_targets("web", std::slice::from_ref(&with_rich_config))
        .unwrap();
    assert_eq!(
        f.store.targets("web").unwrap(),
        vec![
            ts[1].clone(),
            ts[2].clone(),
            ts[0].clone(),
            with_rich_config
        ]
    );
    assert!(f.store.targets("api").unwrap().is_empty());
}

fn outputs_round_trip_and_are_replaced_per_stack(f: &Fixture) {
    assert_eq!(f.store.outputs("web").unwrap(), None);
    let first = props(&[
        (
            "url",
            Value::Map(props(&[("value", Value::from("http://x"))])),
        ),
        ("token", Value::Map(props(&[("secret", Value::Bool(true))]))),
        (
            "ports",
            Value::Map(props(&[(
                "value",
                Value::List(vec![Value::Int(80), Value::Int(443)]),
            )])),
        ),
    ]);
    f.store.put_outputs("web", &first).unwrap();
    f.store.put_outputs("api", &props(&[])).unwrap();
    assert_eq!(f.store.outputs("web").unwrap(), Some(first));
    let second = props(&[(
        "url",
        Value::Map(props(&[("value", Value::from("http://y"))])),
    )]);
    f.store.put_outputs("web", &second).unwrap();
    assert_eq!(f.store.outputs("web").unwrap(), Some(second));
    assert_eq!(f.store.outputs("api").unwrap(), Some(props(&[])));
}

fn protect_marks_stay_with_their_records(f: &Fixture) {
    let set = |stack: &str, marks: &[(&str, bool)]| {
        let marks: Vec<(String, bool)> = marks.iter().map(|(l, p)| ((*l).to_owned(), *p)).collect();
        f.store.set_protected(stack, &marks).unwrap();
    };
    let marked = |stack: &str| -> Vec<String> {
        f.store
            .protected_labels(stack)
            .unwrap()
            .into_iter()
            .collect()
    };
    for (stack, label) in [("web", "a"), ("web", "b"), ("api", "a")] {
        f.store.put_resource(&resource(stack, label)).unwrap();
    }
    assert!(marked("web").is_empty(), "a new record is unprotected");
    // Only the stack's named records; a label not recorded is no record.
    set("web", &[("a", true), ("ghost", true)]);
    assert_eq!(marked("web"), ["a"]);
    assert!(marked("api").is_empty());
    // Marking is not a change of the record.
    let version = |label: &str| {
        f.store
            .resources(Some("web"))
            .unwrap()
            .into_iter()
            .find(|r| r.label == label)
            .unwrap()
            .version
    };
    assert_eq!(version("a"), 1);
    // Writing the record again (an update) keeps its mark, in a batch too.
    f.store.put_resource(&resource("web", "a")).unwrap();
    f.store
        .write_batch(&[Write::Resource(resource("web", "a"))])
        .unwrap();
    assert_eq!(marked("web"), ["a"]);
    // A record not named keeps its mark; named, it is unmarked.
    set("web", &[("b", false)]);
    assert_eq!(marked("web"), ["a"]);
    set("web", &[("a", false), ("b", true)]);
    assert_eq!(marked("web"), ["b"]);
    // Removed and recorded again, it starts unprotected.
    f.store.remove_resource("web", "b").unwrap();
    f.store.put_resource(&resource("web", "b")).unwrap();
    assert!(marked("web").is_empty());
    set("web", &[]);
}

fn put_targets_upserts_and_keeps_the_others(f: &Fixture) {
    f.store
        .put_targets(
            "web",
            &[
                target("home", "local", "/h"),
                target("lab", "testbed", "/l"),
            ],
        )
        .unwrap();
    f.store
        .put_targets("api", &[target("home", "local", "/api")])
        .unwrap();
    f.store
        .put_targets(
            "web",
            &[
                target("home", "local2", "/h2"),
                target("new", "local", "/n"),
            ],
        )
        .unwrap();
    f.store.put_targets("web", &[]).unwrap();
    assert_eq!(
        f.store.targets("web").unwrap(),
        vec![
            target("home", "local2", "/h2"),
            target("lab", "testbed", "/l"),
            target("new", "local", "/n"),
        ],
        "replaced, kept, added; an empty put changes nothing"
    );
    assert_eq!(
        f.store.targets("api").unwrap(),
        vec![target("home", "local", "/api")],
        "another stack's target of the same name is its own"
    );
}

fn begin_command_records_it_running(f: &Fixture) {
    let before = now_ms();
    f.store.begin_command("c1", "web", "apply").unwrap();
    let after = now_ms();
    let c = f.store.command(Some("c1")).unwrap().unwrap();
    assert_eq!(c.id, "c1");
    assert_eq!(c.stack, "web");
    assert_eq!(c.kind, "apply");
    assert_eq!(c.status.as_str(), "running");
    assert_eq!(c.status, CommandStatus::Running);
    // The database's clock may be another host's: allow some skew.
    assert!(
        c.started_ms >= before - 60_000 && c.started_ms <= after + 60_000,
        "started_ms {} is Unix milliseconds (now {before})",
        c.started_ms
    );
    assert_eq!(c.finished_ms, None);
    assert!(c.operations.is_empty());
}

fn a_command_records_its_first_principal(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    f.store.begin_command("c2", "web", "apply").unwrap();
    assert_eq!(
        f.store.command(Some("c1")).unwrap().unwrap().principal,
        None
    );
    f.store.put_command_principal("c1", "ci-team-a").unwrap();
    // The first principal stays (a resume does not rewrite who began it).
    f.store.put_command_principal("c1", "someone-else").unwrap();
    let c = f.store.command(Some("c1")).unwrap().unwrap();
    assert_eq!(c.principal.as_deref(), Some("ci-team-a"));
    let heads = f
        .store
        .commands(&CommandFilter {
            before: None,
            stack: Some("web".into()),
            status: None,
            limit: 10,
        })
        .unwrap();
    let by_id: Vec<(&str, Option<&str>)> = heads
        .iter()
        .map(|h| (h.id.as_str(), h.principal.as_deref()))
        .collect();
    assert!(by_id.contains(&("c1", Some("ci-team-a"))), "{by_id:?}");
    assert!(by_id.contains(&("c2", None)), "{by_id:?}");
}

fn begin_command_with_a_used_id_fails(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    f.store
        .finish_command("c1", &CommandStatus::Completed)
        .unwrap();
    assert!(
        f.store.begin_command("c1", "api", "destroy").is_err(),
        "a command id is used once"
    );
    let c = f.store.command(Some("c1")).unwrap().unwrap();
    assert_eq!(
        (c.stack.as_str(), c.kind.as_str(), c.status.as_str()),
        ("web", "apply", "completed")
    );
    // The store still works after the failed call.
    f.store.begin_command("c2", "web", "apply").unwrap();
}

fn latest_command_is_the_last_begun(f: &Fixture) {
    // Begun in quick succession: several share a millisecond, and the one
    // begun last must still be the latest.
    for i in 0..20 {
        f.store
            .begin_command(&format!("c{i:02}"), "web", "apply")
            .unwrap();
    }
    assert_eq!(f.store.command(None).unwrap().unwrap().id, "c19");
    f.store
        .finish_command("c05", &CommandStatus::Failed)
        .unwrap();
    assert_eq!(
        f.store.command(None).unwrap().unwrap().id,
        "c19",
        "finishing an older command does not make it the latest"
    );
    // Ids do not decide: a later command with a smaller id is the latest.
    next_ms();
    f.store.begin_command("a-later", "api", "destroy").unwrap();
    let latest = f.store.command(None).unwrap().unwrap();
    assert_eq!(
        (latest.id.as_str(), latest.stack.as_str()),
        ("a-later", "api")
    );
    assert_eq!(f.store.command(Some("c07")).unwrap().unwrap().id, "c07");
}

fn finish_command_records_status_and_time(f: &Fixture) {
    for (i, status) in [
        CommandStatus::Completed,
        CommandStatus::Failed,
        CommandStatus::Canceled,
        CommandStatus::Running,
    ]
    .iter()
    .enumerate()
    {
        let id = format!("c{i}");
        f.store.begin_command(&id, "web", "apply").unwrap();
        f.store.finish_command(&id, status).unwrap();
        let c = f.store.command(Some(&id)).unwrap().unwrap();
        assert_eq!(c.status.as_str(), status.as_str());
        assert_eq!(&c.status, status);
        let finished = c.finished_ms.expect("finished_ms set");
        assert!(finished >= c.started_ms);
    }
    // Finishing again overwrites; finishing an unknown command is a no-op.
    f.store
        .finish_command("c0", &CommandStatus::Failed)
        .unwrap();
    assert_eq!(
        f.store.command(Some("c0")).unwrap().unwrap().status,
        CommandStatus::Failed
    );
    f.store
        .finish_command("nope", &CommandStatus::Completed)
        .unwrap();
    assert_eq!(f.store.command(Some("nope")).unwrap(), None);
}

fn operations_upsert_by_label_and_operation(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    f.store.begin_command("c2", "web", "apply").unwrap();
    let running = op("a", "create", "running");
    f.store.put_operation("c1", &running).unwrap();
    let c = f.store.command(Some("c1")).unwrap().unwrap();
    assert_eq!(c.operations, vec![running.clone()]);

    let failed = OperationRecord {
        request_id: "req-2".into(),
        status: OpStatus::Failed,
        attempts: 3,
        error_code: Some("Throttling".into()),
        message: Some("slow down".into()),
        ..running.clone()
    };
    next_ms();
    f.store.put_operation("c1", &failed).unwrap();
    assert_eq!(
        f.store.command(Some("c1")).unwrap().unwrap().operations,
        vec![failed]
    );
    let succeeded = OperationRecord {
        status: OpStatus::Succeeded,
        attempts: 4,
        ..running.clone()
    };
    next_ms();
    f.store.put_operation("c1", &succeeded).unwrap();
    next_ms();
    let delete = op("a", "delete", "running");
    f.store.put_operation("c1", &delete).unwrap();
    f.store
        .put_operation("c2", &op("a", "create", "in_progress"))
        .unwrap();
    assert_eq!(
        f.store.command(Some("c1")).unwrap().unwrap().operations,
        vec![succeeded, delete],
        "error code and message cleared; another operation on the label is its own record"
    );
    assert_eq!(
        f.store.command(Some("c2")).unwrap().unwrap().operations,
        vec![op("a", "create", "in_progress")],
        "commands do not share operations"
    );
}

fn a_batch_applies_its_writes_in_order(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    f.store.put_resource(&resource("web", "old")).unwrap();
    let running = op("a", "create", "running");
    let succeeded = OperationRecord {
        status: OpStatus::Succeeded,
        ..running.clone()
    };
    let a = resource("web", "a");
    f.store
        .write_batch(&[
            Write::Operation {
                command_id: "c1".into(),
                record: running,
            },
            Write::Resource(a.clone()),
            // The same record twice: the later write wins.
            Write::Operation {
                command_id: "c1".into(),
                record: succeeded.clone(),
            },
            Write::Resource(a.clone()),
            Write::Removal {
                stack: "web".into(),
                label: "old".into(),
            },
        ])
        .unwrap();
    f.store.write_batch(&[]).unwrap();
    assert_eq!(
        f.store.command(Some("c1")).unwrap().unwrap().operations,
        vec![succeeded]
    );
    assert_eq!(
        f.store.resources(Some("web")).unwrap(),
        vec![stored(&a, 2)],
        "`old` removed; `a` written twice, so at version 2"
    );
}

fn a_batch_that_removes_and_records_again_starts_over(f: &Fixture) {
    let (a, b) = (resource("web", "a"), resource("web", "b"));
    f.store.put_resource(&a).unwrap();
    f.store.put_resource(&a).unwrap();
    let removal = |label: &str| Write::Removal {
        stack: "web".into(),
        label: label.into(),
    };
    f.store
        .write_batch(&[
            removal("a"),
            Write::Resource(a.clone()),
            // Recorded, then removed: gone.
            Write::Resource(b.clone()),
            removal("b"),
        ])
        .unwrap();
    assert_eq!(
        f.store.resources(Some("web")).unwrap(),
        vec![stored(&a, 1)],
        "`a` re-created at version 1; `b` removed"
    );
}

fn a_failing_batch_writes_nothing(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    // The last write's properties are larger than a record may be: the
    // batch fails, and the writes before it are not kept either.
    let mut bad = resource("web", "bad");
    bad.properties
        .insert("huge".into(), Value::from("x".repeat(17 << 20)));
    let result = f.store.write_batch(&[
        Write::Resource(resource("web", "good")),
        Write::Operation {
            command_id: "c1".into(),
            record: op("good", "create", "succeeded"),
        },
        Write::Resource(bad),
    ]);
    assert!(result.is_err(), "the bad write fails the batch");
    assert!(f.store.resources(Some("web")).unwrap().is_empty());
    assert!(f
        .store
        .command(Some("c1"))
        .unwrap()
        .unwrap()
        .operations
        .is_empty());
}

fn operations_are_ordered_by_last_update(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    let order = |f: &Fixture| -> Vec<String> {
        f.store
            .command(Some("c1"))
            .unwrap()
            .unwrap()
            .operations
            .into_iter()
            .map(|o| o.label)
            .collect()
    };
    f.store
        .put_operation("c1", &op("b", "create", "running"))
        .unwrap();
    next_ms();
    f.store
        .put_operation("c1", &op("a", "create", "running"))
        .unwrap();
    next_ms();
    f.store
        .put_operation("c1", &op("c", "create", "running"))
        .unwrap();
    assert_eq!(order(f), ["b", "a", "c"]);
    next_ms();
    f.store
        .put_operation("c1", &op("b", "create", "succeeded"))
        .unwrap();
    assert_eq!(order(f), ["a", "c", "b"], "an update moves it last");
}

fn operation_pages_walk_label_order_with_a_status_filter(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    f.store.begin_command("c2", "web", "apply").unwrap();
    f.store
        .put_operation("c2", &op("a", "create", "failed"))
        .unwrap();
    // Written out of label order; a replace is two operations of one label.
    for (label, operation, status) in [
        ("c", "create", "succeeded"),
        ("a", "delete", "failed"),
        ("b", "create", "succeeded"),
        ("a", "create", "succeeded"),
        ("d", "update", "failed"),
    ] {
        f.store
            .put_operation("c1", &op(label, operation, status))
            .unwrap();
    }
    let page = |status: Option<&str>, after: Option<(&str, &str)>, limit| {
        let page = OperationPage {
            status: status.map(str::to_owned),
            after: after.map(|(l, o)| (l.to_owned(), o.to_owned())),
            limit,
        };
        let command = f.store.command_page(Some("c1"), &page).unwrap().unwrap();
        assert_eq!((command.id.as_str(), command.stack.as_str()), ("c1", "web"));
        command
            .operations
            .into_iter()
            .map(|o| format!("{}/{}", o.label, o.operation))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        page(None, None, Some(3)),
        ["a/create", "a/delete", "b/create"]
    );
    assert_eq!(
        page(None, Some(("a", "delete")), Some(3)),
        ["b/create", "c/create", "d/update"]
    );
    assert!(page(None, Some(("d", "update")), Some(3)).is_empty());
    assert_eq!(
        page(Some("failed"), Some(("a", "create")), None),
        ["a/delete", "d/update"]
    );
    assert_eq!(page(Some("failed"), None, Some(1)), ["a/delete"]);
    // Unpaged, filtered: in update order, as `command` gives them.
    let failed = f
        .store
        .command_page(
            Some("c1"),
            &OperationPage {
                status: Some("failed".into()),
                ..Default::default()
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(failed.operations.len(), 2);
    assert!(failed
        .operations
        .iter()
        .all(|o| o.status.as_str() == "failed"));
    assert!(f
        .store
        .command_page(Some("nope"), &OperationPage::default())
        .unwrap()
        .is_none());
}

fn operations_do_not_need_their_command_first(f: &Fixture) {
    f.store
        .put_operation("early", &op("a", "create", "running"))
        .unwrap();
    assert_eq!(f.store.command(Some("early")).unwrap(), None);
    f.store.begin_command("early", "web", "apply").unwrap();
    assert_eq!(
        f.store.command(Some("early")).unwrap().unwrap().operations,
        vec![op("a", "create", "running")]
    );
}

fn operations_keep_native_id_and_context(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    let context = Value::Map(props(&[
        ("polls", Value::Int(3)),
        ("token", Value::Bytes(vec![0, 255, 7])),
        ("nested", Value::List(vec![Value::from("x"), Value::Null])),
    ]));
    let in_progress = OperationRecord {
        native_id: Some("thing-1".into()),
        context: Some(context),
        ..op("a", "create", "in_progress")
    };
    f.store.put_operation("c1", &in_progress).unwrap();
    let no_context = OperationRecord {
        native_id: Some("thing-2".into()),
        ..op("b", "delete", "in_progress")
    };
    next_ms();
    f.store.put_operation("c1", &no_context).unwrap();
    let reopened = f.reopen();
    assert_eq!(
        reopened.command(Some("c1")).unwrap().unwrap().operations,
        vec![in_progress.clone(), no_context],
        "native id and context round-trip exactly, also after a reopen"
    );
    next_ms();
    let succeeded = op("a", "create", "succeeded");
    f.store.put_operation("c1", &succeeded).unwrap();
    assert_eq!(
        f.store.command(Some("c1")).unwrap().unwrap().operations[1],
        succeeded,
        "an upsert replaces (clears) native id and context"
    );
}

fn latest_command_of_a_stack(f: &Fixture) {
    assert_eq!(f.store.latest_command_of("web").unwrap(), None);
    for i in 0..5 {
        f.store
            .begin_command(&format!("w{i}"), "web", "apply")
            .unwrap();
    }
    f.store
        .put_operation("w4", &op("a", "create", "running"))
        .unwrap();
    next_ms();
    f.store.begin_command("a0", "api", "apply").unwrap();
    f.store
        .finish_command("w4", &CommandStatus::Completed)
        .unwrap();
    let web = f.store.latest_command_of("web").unwrap().unwrap();
    assert_eq!(
        (web.id.as_str(), web.status.as_str()),
        ("w4", "completed"),
        "the last begun of that stack, whatever other stacks did since"
    );
    assert_eq!(web.operations, vec![op("a", "create", "running")]);
    assert_eq!(f.store.latest_command_of("api").unwrap().unwrap().id, "a0");
    assert_eq!(f.store.latest_command_of("nope").unwrap(), None);
}

fn everything_survives_a_reopen(f: &Fixture) {
    let r = resource("web", "config");
    f.store.put_resource(&r).unwrap();
    f.store.put_resource(&r).unwrap();
    f.store
        .put_targets("web", &[target("home", "local", "/h")])
        .unwrap();
    f.store.begin_command("c1", "web", "apply").unwrap();
    f.store
        .put_operation("c1", &op("config", "update", "succeeded"))
        .unwrap();
    f.store
        .finish_command("c1", &CommandStatus::Completed)
        .unwrap();
    let before = f.store.command(None).unwrap();
    let key = f.store.secret_key().unwrap();

    let again = f.reopen();
    assert_eq!(again.resources(None).unwrap(), vec![stored(&r, 2)]);
    assert_eq!(
        again.targets("web").unwrap(),
        vec![target("home", "local", "/h")]
    );
    assert_eq!(again.command(None).unwrap(), before);
    assert_eq!(again.secret_key().unwrap(), key);
    // Both handles see each other's writes.
    again.put_resource(&r).unwrap();
    assert_eq!(f.store.resources(None).unwrap()[0].version, 3);
}

fn concurrent_writers_lose_no_update(f: &Fixture) {
    const THREADS: usize = 8;
    const EACH: usize = 25;
    let shared = resource("web", "shared");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let store = f.store.clone();
            let shared = &shared;
            s.spawn(move || {
                for i in 0..EACH {
                    store
                        .put_resource(&resource("web", &format!("t{t}-{i:02}")))
                        .unwrap();
                    store.put_resource(shared).unwrap();
                    let id = format!("c{t}-{i}");
                    store.begin_command(&id, "web", "apply").unwrap();
                    store
                        .put_operation(&id, &op("shared", "update", "succeeded"))
                        .unwrap();
                    assert!(store.resources(Some("web")).unwrap().len() > i);
                }
            });
        }
    });
    let all = f.store.resources(Some("web")).unwrap();
    assert_eq!(all.len(), THREADS * EACH + 1);
    let shared = all.iter().find(|r| r.label == "shared").unwrap();
    assert_eq!(
        shared.version,
        (THREADS * EACH) as i64,
        "every bump counted"
    );
    let c = f.store.command(Some("c3-7")).unwrap().unwrap();
    assert_eq!(c.operations.len(), 1);
}

fn usable_from_inside_tokio_runtimes(f: &Fixture) {
    // The executor calls the store from tokio worker threads, and a server
    // opens it from async code: both must work (the sync PostgreSQL client
    // must never run its own runtime on such a thread).
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let location = f.location.clone();
    multi.block_on(async move {
        let store = orrery_state::open(&location).expect("open from async code");
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .put_resource(&resource("rt", &format!("r{i:02}")))
                        .unwrap();
                    store
                        .begin_command(&format!("rt{i}"), "rt", "apply")
                        .unwrap();
                    tokio::task::yield_now().await;
                    store.resources(Some("rt")).unwrap().len()
                })
            })
            .collect();
        for t in tasks {
            assert!(t.await.unwrap() >= 1);
        }
        assert_eq!(store.resources(Some("rt")).unwrap().len(), 16);
    });
    drop(multi);
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = f.store.clone();
    current.block_on(async move {
        store.put_resource(&resource("rt", "current")).unwrap();
        assert_eq!(store.resources(Some("rt")).unwrap().len(), 17);
        assert!(store.command(None).unwrap().is_some());
    });
}

fn put_if_version_writes_only_over_the_version_read(f: &Fixture) {
    let r = resource("web", "a");
    assert!(
        !f.store.put_resource_if_version(&r, 0).unwrap(),
        "no record: nothing to replace"
    );
    assert!(f.store.resources(None).unwrap().is_empty());
    f.store.put_resource(&r).unwrap();
    let read = f.store.resources(None).unwrap().remove(0);
    let drifted = StoredResource {
        properties: props(&[("path", Value::from("/moved"))]),
        managed: false,
        ..read.clone()
    };
    // Someone else writes it after it was read: the write loses.
    f.store.put_resource(&r).unwrap();
    assert!(!f
        .store
        .put_resource_if_version(&drifted, read.version)
        .unwrap());
    assert_eq!(f.store.resources(None).unwrap(), vec![stored(&r, 2)]);
    // Over the version it read, it wins and bumps the version.
    assert!(f.store.put_resource_if_version(&drifted, 2).unwrap());
    assert_eq!(f.store.resources(None).unwrap(), vec![stored(&drifted, 3)]);
    assert!(
        !f.store.put_resource_if_version(&drifted, 2).unwrap(),
        "once"
    );
}

fn resource_counts_are_by_stack(f: &Fixture) {
    assert!(f.store.resource_counts().unwrap().is_empty());
    for (stack, label) in [
        ("web", "a"),
        ("web", "b"),
        ("api", "a"),
        ("", "x"),
        ("", "y"),
    ] {
        f.store.put_resource(&resource(stack, label)).unwrap();
    }
    f.store.put_resource(&resource("web", "a")).unwrap(); // a bump, not a new one
    assert_eq!(
        f.store.resource_counts().unwrap(),
        BTreeMap::from([
            (String::new(), 2),
            ("api".to_owned(), 1),
            ("web".to_owned(), 2)
        ])
    );
    f.store.remove_resource("api", "a").unwrap();
    assert!(!f.store.resource_counts().unwrap().contains_key("api"));
}

fn managed_keys_are_the_managed_ids_of_one_type_on_one_target(f: &Fixture) {
    let on = |stack: &str, label: &str, target: &str, ty: &str, id: &str, managed: bool| {
        StoredResource {
            target: target.into(),
            resource_type: ty.into(),
            native_id: id.into(),
            managed,
            ..resource(stack, label)
        }
    };
    for r in [
        on("web", "a", "home", "File", "f2", true),
        on("web", "b", "home", "File", "f1", true),
        on("api", "a", "home", "File", "f1", true), // another stack, same id
        on("web", "c", "home", "Dir", "d1", true),  // another type
        on("web", "d", "lab", "File", "f3", true),  // another target
        on("web", "gone", "home", "File", "f4", false), // a tombstone
        on("", "home/File/f5", "home", "File", "f5", false), // discovered
    ] {
        f.store.put_resource(&r).unwrap();
    }
    let key = |stack: &str, id: &str| ManagedKey {
        stack: stack.into(),
        native_id: id.into(),
    };
    assert_eq!(
        f.store.managed_keys("home", "File").unwrap(),
        vec![key("api", "f1"), key("web", "f1"), key("web", "f2")]
    );
    assert_eq!(
        f.store.managed_keys("home", "Dir").unwrap(),
        vec![key("web", "d1")]
    );
    assert!(f.store.managed_keys("home", "file").unwrap().is_empty());
    assert!(f.store.managed_keys("nowhere", "File").unwrap().is_empty());
    f.store.remove_resource("web", "b").unwrap();
    assert_eq!(
        f.store.managed_keys("home", "File").unwrap(),
        vec![key("api", "f1"), key("web", "f2")]
    );
}

fn discovered_keys_fingerprint_the_recorded_properties(f: &Fixture) {
    let found = |label: &str, target: &str, ty: &str, props: PropertyMap| StoredResource {
        stack: String::new(),
        label: label.into(),
        target: target.into(),
        resource_type: ty.into(),
        properties: props,
        managed: false,
        ..resource("", label)
    };
    let p1 = props(&[("path", Value::from("x")), ("size", Value::Int(1))]);
    let p2 = props(&[
        ("path", Value::from("y")),
        ("blob", Value::Bytes(vec![7; 4096])),
    ]);
    for r in [
        found("home/File/y", "home", "File", p2.clone()),
        found("home/File/x", "home", "File", p1.clone()),
        found("home/Dir/d", "home", "Dir", p1.clone()),
        found("lab/File/x", "lab", "File", p1.clone()),
        StoredResource {
            managed: false,
            ..resource("web", "tombstone") // not discovered: a stack's
        },
    ] {
        f.store.put_resource(&r).unwrap();
    }
    let keys = f.store.discovered_keys("home", "File").unwrap();
    assert_eq!(
        keys,
        vec![
            DiscoveredKey {
                label: "home/File/x".into(),
                fingerprint: orrery_state::fingerprint(&p1)
            },
            DiscoveredKey {
                label: "home/File/y".into(),
                fingerprint: orrery_state::fingerprint(&p2)
            },
        ],
        "the store's fingerprint is the one discovery computes from listed properties"
    );
    assert_ne!(keys[0].fingerprint, keys[1].fingerprint);
    f.store
        .put_resource(&found("home/File/x", "home", "File", p2.clone()))
        .unwrap();
    assert_eq!(
        f.store.discovered_keys("home", "File").unwrap()[0].fingerprint,
        orrery_state::fingerprint(&p2),
        "follows a rewrite"
    );
    assert!(f.store.discovered_keys("home", "Nope").unwrap().is_empty());
}

fn commands_list_newest_first_by_stack_and_status(f: &Fixture) {
    let all = |limit: usize| CommandFilter {
        limit,
        ..Default::default()
    };
    assert!(f.store.commands(&all(10)).unwrap().is_empty());
    // Begun in quick succession: ties of the clock break by insertion.
    for (id, stack) in [("w1", "web"), ("a1", "api"), ("w2", "web"), ("w3", "web")] {
        f.store.begin_command(id, stack, "apply").unwrap();
    }
    f.store
        .finish_command("w2", &CommandStatus::Completed)
        .unwrap();
    let ids = |filter: &CommandFilter| -> Vec<String> {
        f.store
            .commands(filter)
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect()
    };
    assert_eq!(ids(&all(10)), ["w3", "w2", "a1", "w1"]);
    assert_eq!(ids(&all(2)), ["w3", "w2"]);
    // The next page starts after the last command of the one before (ties
    // of the clock included); an unknown command lists none.
    let after = |before: &str, limit: usize| CommandFilter {
        before: Some(before.into()),
        ..all(limit)
    };
    assert_eq!(ids(&after("w2", 10)), ["a1", "w1"]);
    assert_eq!(ids(&after("w3", 1)), ["w2"]);
    assert_eq!(ids(&after("a1", 10)), ["w1"]);
    assert!(ids(&after("w1", 10)).is_empty());
    assert!(ids(&after("nope", 10)).is_empty());
    let web = CommandFilter {
        stack: Some("web".into()),
        ..all(10)
    };
    assert_eq!(ids(&web), ["w3", "w2", "w1"]);
    let running = CommandFilter {
        status: Some(CommandStatus::Running),
        ..all(10)
    };
    assert_eq!(ids(&running), ["w3", "a1", "w1"]);
    let web_running_latest = CommandFilter {
        before: None,
        stack: Some("web".into()),
        status: Some(CommandStatus::Running),
        limit: 1,
    };
    assert_eq!(ids(&web_running_latest), ["w3"]);
    let head = &f.store.commands(&all(10)).unwrap()[1];
    let full = f.store.command(Some("w2")).unwrap().unwrap();
    assert_eq!(
        (
            head.stack.as_str(),
            head.kind.as_str(),
            head.status.as_str(),
            head.started_ms,
            head.finished_ms
        ),
        (
            "web",
            "apply",
            "completed",
            full.started_ms,
            full.finished_ms
        ),
        "the head is the record without its operations"
    );
    assert!(ids(&CommandFilter {
        stack: Some("nope".into()),
        ..all(10)
    })
    .is_empty());
}

fn operation_counts_are_by_status(f: &Fixture) {
    f.store.begin_command("c1", "web", "apply").unwrap();
    assert!(f.store.operation_counts("c1").unwrap().is_empty());
    for (label, status) in [
        ("a", "succeeded"),
        ("b", "succeeded"),
        ("c", "failed"),
        ("d", "running"),
    ] {
        f.store
            .put_operation("c1", &op(label, "create", status))
            .unwrap();
    }
    f.store
        .put_operation("c2", &op("a", "create", "failed"))
        .unwrap();
    f.store
        .put_operation("c1", &op("d", "create", "succeeded"))
        .unwrap();
    assert_eq!(
        f.store.operation_counts("c1").unwrap(),
        BTreeMap::from([("failed".to_owned(), 1), ("succeeded".to_owned(), 3)])
    );
    assert!(f.store.operation_counts("nope").unwrap().is_empty());
}

fn command_stacks_are_distinct_and_ordered(f: &Fixture) {
    assert!(f.store.command_stacks().unwrap().is_empty());
    for (id, stack) in [("1", "web"), ("2", "api"), ("3", "web"), ("4", "Web")] {
        f.store.begin_command(id, stack, "apply").unwrap();
    }
    f.store
        .put_resource(&resource("only-resources", "a"))
        .unwrap();
    assert_eq!(f.store.command_stacks().unwrap(), ["Web", "api", "web"]);
}

fn command_documents_round_trip_and_are_replaced(f: &Fixture) {
    assert_eq!(f.store.command_document("c1").unwrap(), None);
    let doc = CommandDocument {
        engine: "embedded".into(),
        mode: "reconcile".into(),
        source: "stacks/web.yaml".into(),
        stack_dir: "/srv/stacks".into(),
        text: "stack: web\n# ✓ \"quoted\" \\ ; DROP TABLE commands; --\n".into(),
        selection: Default::default(),
    };
    f.store.put_command_document("c1", &doc).unwrap();
    assert_eq!(f.store.command_document("c1").unwrap(), Some(doc.clone()));
    // A targeted apply's selection is recorded with it (resumed alike).
    let newer = CommandDocument {
        mode: "patch".into(),
        text: "stack: web\n".into(),
        selection: Selection {
            target: vec!["app".into(), "db[\"é\"]".into()],
            exclude: vec!["cache".into()],
            replace: vec!["app".into()],
        },
        ..doc.clone()
    };
    f.store.put_command_document("c1", &newer).unwrap();
    f.store.put_command_document("c2", &doc).unwrap();
    assert_eq!(f.reopen().command_document("c1").unwrap(), Some(newer));
    assert_eq!(f.store.command_document("c2").unwrap(), Some(doc));
}

fn now_ms_is_unix_milliseconds(f: &Fixture) {
    let before = now_ms();
    let store_now = f.store.now_ms().unwrap();
    let after = now_ms();
    // The database's clock may be another host's: allow some skew.
    assert!(
        store_now >= before - 60_000 && store_now <= after + 60_000,
        "{store_now} vs {before}..{after}"
    );
    assert!(f.store.now_ms().unwrap() >= store_now, "never backwards");
}

const T0: i64 = 1_800_000_000_000;
const TTL: i64 = 30_000;

fn a_second_owner_cannot_take_an_unexpired_lease(f: &Fixture) {
    let s = &f.store;
    assert_eq!(
        s.acquire_lease("c1", "alice", T0, TTL).unwrap(),
        LeaseGrant::Granted
    );
    let held = LeaseGrant::HeldBy(Lease {
        command_id: "c1".into(),
        owner: "alice".into(),
        expires_ms: T0 + TTL,
    });
    assert_eq!(s.acquire_lease("c1", "bob", T0, TTL).unwrap(), held);
    assert_eq!(
        s.acquire_lease("c1", "bob", T0 + TTL - 1, TTL).unwrap(),
        held,
        "a millisecond before expiry"
    );
    assert_eq!(
        f.reopen().acquire_lease("c1", "bob", T0 + 1, TTL).unwrap(),
        held,
        "seen from another handle (another primary)"
    );
    // The holder asking again renews; other commands are other leases.
    assert_eq!(
        s.acquire_lease("c1", "alice", T0 + 10, TTL).unwrap(),
        LeaseGrant::Granted
    );
    assert_eq!(
        s.acquire_lease("c1", "bob", T0 + TTL, TTL).unwrap(),
        LeaseGrant::HeldBy(Lease {
            expires_ms: T0 + 10 + TTL,
            ..Lease {
                command_id: "c1".into(),
                owner: "alice".into(),
                expires_ms: 0
            }
        }),
        "alice's second acquire moved the expiry"
    );
    assert_eq!(
        s.acquire_lease("c2", "bob", T0, TTL).unwrap(),
        LeaseGrant::Granted
    );
}

fn rate_sharers_count_the_owners_seen_within_the_window(f: &Fixture) {
    let s = &f.store;
    let (t, u) = ("Testbed/t".to_owned(), "Testbed/u".to_owned());
    let counts = s
        .rate_sharers("alice", std::slice::from_ref(&t), 60_000)
        .unwrap();
    assert_eq!(counts, [(t.clone(), 1)].into());
    let counts = s
        .rate_sharers("bob", &[t.clone(), u.clone()], 60_000)
        .unwrap();
    assert_eq!(counts, [(t.clone(), 2), (u.clone(), 1)].into());
    // Saying so again counts once.
    let counts = s
        .rate_sharers("alice", std::slice::from_ref(&t), 60_000)
        .unwrap();
    assert_eq!(counts, [(t.clone(), 2)].into());
    // A window of nothing forgets everyone else.
    let counts = s
        .rate_sharers("carol", std::slice::from_ref(&t), -1)
        .unwrap();
    assert_eq!(counts, [(t, 1)].into(), "only carol, just now");
}

fn audit_entry(principal: Option<&str>, action: &str, stack: Option<&str>) -> AuditEntry {
    AuditEntry {
        principal: principal.map(str::to_owned),
        action: action.to_owned(),
        stack: stack.map(str::to_owned),
        command_id: None,
        plan_hash: None,
        outcome: format!("{action} outcome"),
        count: 1,
    }
}

fn audit_all(s: &Store, filter: AuditFilter) -> Vec<orrery_state::AuditRecord> {
    s.audit(&AuditFilter {
        limit: 1000,
        ..filter
    })
    .unwrap()
}

fn audit_records_list_newest_first_with_filters(f: &Fixture) {
    let s = &f.store;
    assert!(audit_all(s, AuditFilter::default()).is_empty());
    let before = s.now_ms().unwrap();
    let start = AuditEntry {
        command_id: Some("c1".into()),
        plan_hash: Some("ab12".into()),
        outcome: "running".into(),
        ..audit_entry(Some("alice"), "apply", Some("web"))
    };
    s.append_audit(
        &[
            start.clone(),
            AuditEntry {
                count: 3,
                ..audit_entry(None, "unauthorized", None)
            },
        ],
        1000,
    )
    .unwrap();
    s.append_audit(
        &[
            audit_entry(Some("bob"), "forbidden", Some("web")),
            AuditEntry {
                command_id: Some("c1".into()),
                ..audit_entry(Some("alice"), "cancel", Some("web"))
            },
        ],
        1000,
    )
    .unwrap();
    let all = audit_all(s, AuditFilter::default());
    let actions: Vec<&str> = all.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["cancel", "forbidden", "unauthorized", "apply"]);
    assert!(
        all.windows(2).all(|w| w[0].id > w[1].id),
        "ids grow: {all:?}"
    );
    let after = s.now_ms().unwrap();
    for r in &all {
        assert!(
            (before..=after).contains(&r.time_ms),
            "{r:?} at the store's clock"
        );
    }
    let apply = &all[3];
    assert_eq!(
        (
            apply.principal.as_deref(),
            apply.stack.as_deref(),
            apply.command_id.as_deref(),
            apply.plan_hash.as_deref(),
            apply.outcome.as_str(),
            apply.count
        ),
        (
            Some("alice"),
            Some("web"),
            Some("c1"),
            Some("ab12"),
            "running",
            1
        )
    );
    let refused = &all[2];
    assert_eq!(
        (
            refused.principal.as_deref(),
            refused.stack.as_deref(),
            refused.count
        ),
        (None, None, 3)
    );
    // The outcome lands on the start only, not on the cancel.
    s.set_audit_outcome("c1", "canceled").unwrap();
    let all = audit_all(s, AuditFilter::default());
    assert_eq!(all[3].outcome, "canceled");
    assert_eq!(all[0].outcome, "cancel outcome");
    // Filters, and pages along the ids.
    let alice = audit_all(
        s,
        AuditFilter {
            principal: Some("alice".into()),
            ..Default::default()
        },
    );
    assert_eq!(
        alice.iter().map(|r| r.action.as_str()).collect::<Vec<_>>(),
        ["cancel", "apply"]
    );
    let web = audit_all(
        s,
        AuditFilter {
            stack: Some("web".into()),
            ..Default::default()
        },
    );
    assert_eq!(web.len(), 3);
    assert!(audit_all(
        s,
        AuditFilter {
            since_ms: Some(after + 60_000),
            ..Default::default()
        }
    )
    .is_empty());
    assert_eq!(
        audit_all(
            s,
            AuditFilter {
                since_ms: Some(before),
                ..Default::default()
            }
        )
        .len(),
        4
    );
    let first = s
        .audit(&AuditFilter {
            limit: 2,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(first.len(), 2);
    let rest = audit_all(
        s,
        AuditFilter {
            before: Some(first[1].id),
            ..Default::default()
        },
    );
    assert_eq!(
        rest.iter().map(|r| r.action.as_str()).collect::<Vec<_>>(),
        ["unauthorized", "apply"]
    );
    // Kept across a reopen.
    assert_eq!(audit_all(&f.reopen(), AuditFilter::default()).len(), 4);
}

fn audit_keeps_only_the_newest_records(f: &Fixture) {
    let s = &f.store;
    let keep = 10;
    let mut newest = 0;
    for batch in 0..8 {
        let entries: Vec<AuditEntry> = (0..7)
            .map(|i| AuditEntry {
                outcome: format!("refusal {batch}.{i}"),
                ..audit_entry(None, "unauthorized", None)
            })
            .collect();
        s.append_audit(&entries, keep).unwrap();
        let kept = audit_all(s, AuditFilter::default());
        assert!(
            kept.len() as u64 <= keep,
            "{} records kept, bound {keep}",
            kept.len()
        );
        assert!(kept[0].id > newest, "ids never go back after a prune");
        newest = kept[0].id;
        assert_eq!(
            kept[0].outcome,
            format!("refusal {batch}.6"),
            "the newest is kept"
        );
    }
    let kept = audit_all(s, AuditFilter::default());
    assert_eq!(kept.len() as u64, keep);
    assert_eq!(
        kept.last().unwrap().outcome,
        "refusal 6.4",
        "the oldest kept is the 10th newest"
    );
}

fn a_lease_can_be_taken_after_it_expires(f: &Fixture) {
    let s = &f.store;
    assert_eq!(
        s.acquire_lease("c1", "alice", T0, TTL).unwrap(),
        LeaseGrant::Granted
    );
    assert_eq!(
        s.acquire_lease("c1", "bob", T0 + TTL, TTL).unwrap(),
        LeaseGrant::Granted,
        "free at its expiry"
    );
    // Now bob's: alice can neither take it back nor renew it.
    assert!(matches!(
        s.acquire_lease("c1", "alice", T0 + TTL + 1, TTL).unwrap(),
        LeaseGrant::HeldBy(Lease { ref owner, expires_ms, .. }) if owner == "bob" && expires_ms == T0 + 2 * TTL
    ));
    assert!(!s.renew_lease("c1", "alice", T0 + TTL + 1, TTL).unwrap());
    // Long expired, nobody took it: the holder may still renew it.
    assert!(s.renew_lease("c1", "bob", T0 + 10 * TTL, TTL).unwrap());
    assert!(matches!(
        s.acquire_lease("c1", "carol", T0 + 10 * TTL + 1, TTL).unwrap(),
        LeaseGrant::HeldBy(Lease { ref owner, .. }) if owner == "bob"
    ));
}

fn only_the_holder_renews_or_releases_a_lease(f: &Fixture) {
    let s = &f.store;
    assert!(
        !s.renew_lease("c1", "alice", T0, TTL).unwrap(),
        "nothing to renew"
    );
    assert_eq!(
        s.acquire_lease("c1", "alice", T0, TTL).unwrap(),
        LeaseGrant::Granted
    );
    assert!(s.renew_lease("c1", "alice", T0 + TTL / 2, TTL).unwrap());
    assert!(!s.renew_lease("c1", "bob", T0 + TTL / 2, TTL).unwrap());
    assert!(
        matches!(
            s.acquire_lease("c1", "bob", T0 + TTL, TTL).unwrap(),
            LeaseGrant::HeldBy(Lease { expires_ms, .. }) if expires_ms == T0 + TTL / 2 + TTL
        ),
        "renewed from its renewal time"
    );
    s.release_lease("c1", "bob").unwrap(); // not bob's: nothing happens
    assert!(matches!(
        s.acquire_lease("c1", "bob", T0 + TTL, TTL).unwrap(),
        LeaseGrant::HeldBy(_)
    ));
    s.release_lease("c1", "alice").unwrap();
    assert!(
        !s.renew_lease("c1", "alice", T0 + TTL, TTL).unwrap(),
        "released"
    );
    assert_eq!(
        s.acquire_lease("c1", "bob", T0 + TTL, TTL).unwrap(),
        LeaseGrant::Granted,
        "free at once after a release"
    );
    s.release_lease("nope", "bob").unwrap();
}

fn one_of_many_racing_owners_gets_a_lease(f: &Fixture) {
    const OWNERS: usize = 8;
    let grants: Vec<LeaseGrant> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..OWNERS)
            .map(|i| {
                let store = f.reopen();
                s.spawn(move || {
                    store
                        .acquire_lease("c1", &format!("owner-{i}"), T0, TTL)
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let granted = grants.iter().filter(|g| **g == LeaseGrant::Granted).count();
    assert_eq!(granted, 1, "{grants:?}");
    let holders: std::collections::BTreeSet<&str> = grants
        .iter()
        .filter_map(|g| match g {
            LeaseGrant::HeldBy(l) => Some(l.owner.as_str()),
            LeaseGrant::Granted => None,
        })
        .collect();
    assert_eq!(
        holders.len(),
        1,
        "every loser names the same winner: {grants:?}"
    );
}

// ---------------------------------------------------------------------------
// Choosing a backend

#[test]
fn open_picks_the_backend_by_location() {
    for url in [
        "postgres://u@h/db",
        "postgresql://u@h:5433/db?sslmode=disable",
        "POSTGRES://u@h/db",
        "  postgres://u@h/db",
    ] {
        assert!(orrery_state::is_database_url(url), "{url}");
    }
    for dir in ["/var/lib/orrery", "data", "postgres", "./postgres:/x", ""] {
        assert!(!orrery_state::is_database_url(dir), "{dir}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nested/data");
    orrery_state::open(dir.to_str().unwrap()).unwrap();
    assert!(
        dir.join("state.db").is_file(),
        "a directory: the embedded store"
    );
}

// ---------------------------------------------------------------------------
// SQLite: record format upgrades

const FORMAT0_SQL: &str = include_str!("../fixtures/state/sqlite_format0.sql");

/// A data directory holding a `state.db` built by `sql`.
fn sqlite_dir_from(sql: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    std::fs::create_dir_all(&dir).unwrap();
    let conn = rusqlite::Connection::open(dir.join("state.db")).unwrap();
    conn.execute_batch(sql).unwrap();
    (tmp, dir)
}

fn raw(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("state.db")).unwrap()
}

fn sqlite_tables(conn: &rusqlite::Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn sqlite_meta_format(conn: &rusqlite::Connection) -> Option<i64> {
    conn.query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| {
        r.get(0)
    })
    .ok()
}

#[test]
fn sqlite_format0_store_is_upgraded_on_open() {
    let (_tmp, dir) = sqlite_dir_from(FORMAT0_SQL);
    {
        let before = raw(&dir);
        assert!(!sqlite_tables(&before).contains(&"targets".to_owned()));
        assert_eq!(sqlite_meta_format(&before), None);
    }

    let store = SqliteStore::open(&dir).expect("a format 0 store opens");
    // Rows from before `protected` existed are unprotected.
    for r in store.resources(None).unwrap() {
        assert!(
            store.protected_labels(&r.stack).unwrap().is_empty(),
            "{r:?}"
        );
    }

    let conn = raw(&dir);
    assert_eq!(
        sqlite_tables(&conn),
        [
            "audit",
            "command_documents",
            "command_leases",
            "command_principals",
            "commands",
            "meta",
            "operations",
            "rate_sharers",
            "resources",
            "sqlite_sequence",
            "stack_outputs",
            "targets"
        ]
    );
    assert_eq!(
        sqlite_meta_format(&conn),
        Some(RECORD_FORMAT),
        "format bumped"
    );
    let formats: Vec<i64> = conn
        .prepare("SELECT format FROM resources UNION ALL SELECT format FROM commands")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(formats, vec![RECORD_FORMAT; 5], "every record rewritten");
    let kind: String = conn
        .query_row(
            "SELECT typeof(properties) FROM resources LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kind, "blob", "properties are MessagePack now");

    // Every record reads, with what format 0 held.
    assert_eq!(
        store.secret_key().unwrap(),
        (0u8..32).collect::<Vec<_>>(),
        "the secret key is kept"
    );
    let all = store.resources(None).unwrap();
    assert_eq!(
        labels(&all),
        [("", "found-1"), ("web", "app"), ("web", "config")]
            .map(|(s, l)| (s.to_owned(), l.to_owned()))
    );
    let config = &all[2];
    assert_eq!(config.version, 3);
    assert_eq!(config.native_id, "/srv/web/config.json");
    assert!(config.managed && !all[0].managed);
    assert_eq!(config.secret_hashes["content"], "5b2c1f");
    assert_eq!(all[1].deps, ["config"]);
    let expected = props(&[
        ("path", Value::from("/srv/web/config.json")),
        ("mode", Value::Int(420)),
        ("content", Value::from("listen = 8080\nname = \"héllo ✓\"")),
        (
            "tags",
            Value::List(vec![Value::from("a"), Value::from("b")]),
        ),
        ("owner", Value::Null),
        ("size", Value::Float(1.5)),
        ("executable", Value::Bool(false)),
        (
            "meta",
            Value::Map(props(&[(
                "nested",
                Value::Map(props(&[(
                    "deep",
                    Value::List(vec![Value::Int(1), Value::Int(-2), Value::UInt(u64::MAX)]),
                )])),
            )])),
        ),
    ]);
    assert_eq!(config.properties, expected);

    let latest = store.command(None).unwrap().unwrap();
    assert_eq!(
        (latest.id.as_str(), latest.status.as_str()),
        ("cmd-2", "running")
    );
    assert_eq!(latest.operations.len(), 1);
    assert_eq!(
        latest.operations[0].error_code.as_deref(),
        Some("Throttling")
    );
    let first = store.command(Some("cmd-1")).unwrap().unwrap();
    assert_eq!(first.finished_ms, Some(1_700_000_000_500));
    assert_eq!(
        first
            .operations
            .iter()
            .map(|o| o.label.as_str())
            .collect::<Vec<_>>(),
        ["config", "app"]
    );

    // And it is a working current store: targets, bumps, new commands.
    store
        .put_targets("web", &[target("home", "local", "/srv")])
        .unwrap();
    assert_eq!(store.targets("web").unwrap().len(), 1);
    store.put_resource(config).unwrap();
    assert_eq!(store.resources(Some("web")).unwrap()[1].version, 4);
    drop(store);

    // A second open finds nothing to do and changes nothing.
    let store = SqliteStore::open(&dir).unwrap();
    assert_eq!(store.resources(Some("web")).unwrap()[1].version, 4);
    assert_eq!(
        store.resources(Some("web")).unwrap()[1].properties,
        expected
    );
}

#[test]
fn sqlite_format0_upgrade_is_all_or_nothing() {
    let broken = format!(
        "{FORMAT0_SQL}
         INSERT INTO resources VALUES ('web', 'zz-broken', 'local.File', 'home', 'local', 'x',
             '{{not json', '{{}}', '[]', 1, 1, 0);"
    );
    let (_tmp, dir) = sqlite_dir_from(&broken);
    let err = SqliteStore::open(&dir)
        .err()
        .expect("a record that does not decode fails the open");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string().contains("zz-broken"),
        "names the record: {err}"
    );
    let conn = raw(&dir);
    assert!(
        !sqlite_tables(&conn).contains(&"targets".to_owned()),
        "rolled back"
    );
    let text: String = conn
        .query_row(
            "SELECT properties FROM resources WHERE label = 'config'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(text.starts_with('{'), "records untouched");
}

#[test]
fn sqlite_concurrent_opens_upgrade_once() {
    let (_tmp, dir) = sqlite_dir_from(FORMAT0_SQL);
    let stores: Vec<SqliteStore> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| SqliteStore::open(&dir)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    for store in &stores {
        assert_eq!(store.resources(None).unwrap().len(), 3);
        assert_eq!(
            store.resources(Some("web")).unwrap()[1].properties["mode"],
            Value::Int(420)
        );
    }
}

#[test]
fn sqlite_store_without_format_marker_is_marked() {
    // Written by the release before `meta.format`: format 1 records.
    let tmp = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    store.put_resource(&resource("web", "a")).unwrap();
    drop(store);
    raw(tmp.path())
        .execute("DELETE FROM meta WHERE key = 'format'", [])
        .unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    assert_eq!(sqlite_meta_format(&raw(tmp.path())), Some(RECORD_FORMAT));
    assert_eq!(
        store.resources(None).unwrap(),
        vec![stored(&resource("web", "a"), 1)]
    );
}

#[test]
fn sqlite_schema4_store_gains_the_command_selection_column() {
    // Written before a command's document carried its selection.
    let tmp = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    let doc = CommandDocument {
        engine: "embedded".into(),
        mode: "reconcile".into(),
        source: "web.yaml".into(),
        stack_dir: ".".into(),
        text: "stack: web\n".into(),
        selection: Selection::default(),
    };
    store.put_command_document("c1", &doc).unwrap();
    drop(store);
    raw(tmp.path())
        .execute_batch(
            "ALTER TABLE command_documents DROP COLUMN selection;
             UPDATE meta SET value = 4 WHERE key = 'schema';",
        )
        .unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    assert_eq!(store.command_document("c1").unwrap(), Some(doc.clone()));
    let targeted = CommandDocument {
        selection: Selection {
            target: vec!["a".into()],
            ..Default::default()
        },
        ..doc
    };
    store.put_command_document("c2", &targeted).unwrap();
    assert_eq!(store.command_document("c2").unwrap(), Some(targeted));
}

#[test]
fn sqlite_format1_store_gains_operation_progress_columns() {
    // Written before operations carried a native id and context.
    let tmp = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    store.begin_command("c1", "web", "apply").unwrap();
    store
        .put_operation("c1", &op("a", "create", "running"))
        .unwrap();
    drop(store);
    raw(tmp.path())
        .execute_batch(
            "ALTER TABLE operations DROP COLUMN native_id; ALTER TABLE operations DROP COLUMN context;",
        )
        .unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    assert_eq!(
        store.command(Some("c1")).unwrap().unwrap().operations,
        vec![op("a", "create", "running")]
    );
    let progress = OperationRecord {
        native_id: Some("n".into()),
        context: Some(Value::from("ctx")),
        ..op("a", "create", "in_progress")
    };
    store.put_operation("c1", &progress).unwrap();
    assert_eq!(
        store.command(Some("c1")).unwrap().unwrap().operations,
        vec![progress]
    );
    assert_eq!(sqlite_meta_format(&raw(tmp.path())), Some(RECORD_FORMAT));
}

#[test]
fn sqlite_store_from_a_newer_release_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    store.put_resource(&resource("web", "a")).unwrap();
    drop(store);
    raw(tmp.path())
        .execute(
            "UPDATE meta SET value = ?1 WHERE key = 'format'",
            [RECORD_FORMAT + 1],
        )
        .unwrap();
    let err = SqliteStore::open(tmp.path()).err().expect("refused");
    assert!(
        matches!(err, StoreError::NewerFormat { found, .. } if found == RECORD_FORMAT + 1),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade orrery"), "{err}");
}

#[test]
fn sqlite_records_carry_their_format() {
    let tmp = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(tmp.path()).unwrap();
    store.put_resource(&resource("web", "a")).unwrap();
    store.begin_command("c1", "web", "apply").unwrap();
    let conn = raw(tmp.path());
    let r: i64 = conn
        .query_row("SELECT format FROM resources", [], |r| r.get(0))
        .unwrap();
    let c: i64 = conn
        .query_row("SELECT format FROM commands", [], |r| r.get(0))
        .unwrap();
    assert_eq!((r, c), (RECORD_FORMAT, RECORD_FORMAT));
}

// ---------------------------------------------------------------------------
// PostgreSQL: migrations and connections

const PG_V1_DATA: &str = include_str!("../fixtures/state/postgres_v1_data.sql");

fn pg_client(url: &str) -> postgres::Client {
    pg_connect(url).unwrap()
}

fn pg_migrations(url: &str) -> Vec<(i32, String)> {
    pg_client(url)
        .query(
            "SELECT version, name FROM schema_migrations ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn all_migrations() -> Vec<(i32, String)> {
    MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_owned()))
        .collect()
}

fn pg_has_table(url: &str, table: &str) -> bool {
    pg_client(url)
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .unwrap()
        .get(0)
}

#[test]
fn pg_migrations_are_recorded_and_idempotent() {
    let (url, _cleanup) = fresh_database("migrations_idempotent");
    let store = PgStore::connect(&url).unwrap();
    assert_eq!(pg_migrations(&url), all_migrations());
    assert_eq!(MIGRATIONS.last().unwrap().version, PG_SCHEMA_VERSION);
    let stamps = |url: &str| -> Vec<String> {
        pg_client(url)
            .query(
                "SELECT applied_at::text FROM schema_migrations ORDER BY version",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let first = stamps(&url);
    store.put_resource(&resource("web", "a")).unwrap();
    drop(store);
    let again = PgStore::connect(&url).unwrap();
    assert_eq!(pg_migrations(&url), all_migrations());
    assert_eq!(stamps(&url), first, "nothing applied twice");
    assert_eq!(again.resources(None).unwrap().len(), 1);
}

#[test]
fn pg_primaries_starting_together_migrate_once() {
    let (url, _cleanup) = fresh_database("migrations_concurrent");
    let stores: Vec<PgStore> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(|| PgStore::connect(&url))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().expect("every primary starts"))
            .collect()
    });
    assert_eq!(pg_migrations(&url), all_migrations());
    let key = stores[0].secret_key().unwrap();
    for s in &stores {
        assert_eq!(s.secret_key().unwrap(), key, "one secret key for all");
    }
}

#[test]
fn pg_upgrades_from_migration_1_to_latest() {
    let (url, _cleanup) = fresh_database("upgrade_from_1");
    PgStore::migrate_to(&url, 1).unwrap();
    assert_eq!(pg_migrations(&url), all_migrations()[..1].to_vec());
    assert!(!pg_has_table(&url, "targets"), "version 1 had no targets");
    pg_client(&url).batch_execute(PG_V1_DATA).unwrap();

    let store = orrery_state::open(&url).expect("a version 1 database opens");
    assert_eq!(
        pg_migrations(&url),
        all_migrations(),
        "upgraded to the latest"
    );
    assert!(pg_has_table(&url, "targets"));
    // Rows from before `protected` existed are unprotected.
    assert!(store.protected_labels("web").unwrap().is_empty());
    assert_eq!(store.secret_key().unwrap(), (0u8..32).collect::<Vec<_>>());
    let all = store.resources(None).unwrap();
    assert_eq!(
        labels(&all),
        [("web", "app"), ("web", "config")].map(|(s, l)| (s.to_owned(), l.to_owned()))
    );
    assert_eq!(
        all[1].properties,
        props(&[
            ("path", Value::from("/srv/web/config.json")),
            ("mode", Value::Int(420)),
        ])
    );
    assert_eq!(
        (all[1].version, all[0].deps.clone()),
        (3, vec!["config".to_owned()])
    );
    let latest = store.command(None).unwrap().unwrap();
    assert_eq!((latest.id.as_str(), latest.operations.len()), ("cmd-2", 1));
    store
        .put_targets("web", &[target("home", "local", "/srv")])
        .unwrap();
    assert_eq!(store.targets("web").unwrap().len(), 1);
    store.put_resource(&all[1]).unwrap();
    assert_eq!(store.resources(Some("web")).unwrap()[1].version, 4);
}

#[test]
fn pg_schema_from_a_newer_release_is_refused() {
    let (url, _cleanup) = fresh_database("newer_schema");
    drop(PgStore::connect(&url).unwrap());
    pg_client(&url)
        .execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, 'from the future')",
            &[&(PG_SCHEMA_VERSION + 1)],
        )
        .unwrap();
    let err = PgStore::connect(&url).expect_err("refused");
    assert!(
        matches!(err, StoreError::NewerFormat { found, .. } if found == i64::from(PG_SCHEMA_VERSION + 1)),
        "{err}"
    );
}

/// The database name in `url`.
fn dbname(url: &str) -> String {
    url.rsplit('/')
        .next()
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_owned()
}

/// The pids of the store's connections to `db` (by application name), and
/// of those waiting for a lock.
fn store_backends(admin: &mut postgres::Client, db: &str) -> (Vec<i32>, Vec<i32>) {
    let rows = admin
        .query(
            "SELECT pid, wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity
             WHERE datname = $1 AND application_name = 'orrery-primary' ORDER BY pid",
            &[&db],
        )
        .unwrap();
    let all = rows.iter().map(|r| r.get(0)).collect();
    let waiting = rows
        .iter()
        .filter(|r| r.get::<_, bool>(1))
        .map(|r| r.get(0))
        .collect();
    (all, waiting)
}

/// Locks the resources table in `tx`, so the store's calls on it wait. The
/// server ends the locking session after 20 s idle, so a failing case
/// (whose blocked calls its thread scope waits for) cannot hang.
fn hold_resources_lock(tx: &mut postgres::Transaction<'_>) {
    tx.batch_execute(
        "SET LOCAL idle_in_transaction_session_timeout = '20s';
         LOCK TABLE resources IN ACCESS EXCLUSIVE MODE",
    )
    .unwrap();
}

/// Polls (bounded: 10 s) until `n` of the store's connections to `db` wait
/// for a lock; returns their pids.
fn wait_for_blocked(admin: &mut postgres::Client, db: &str, n: usize) -> Vec<i32> {
    orrery_testing::wait_for(
        &format!("{n} store connections waiting for the lock"),
        Duration::from_secs(10),
        || {
            let (_, waiting) = store_backends(admin, db);
            if waiting.len() >= n {
                Ok(waiting)
            } else {
                Err(format!("{} waiting", waiting.len()))
            }
        },
    )
}

/// Polls (bounded: 10 s) until none of `pids` is a backend any more.
fn wait_until_gone(admin: &mut postgres::Client, pids: &[i32]) {
    orrery_testing::wait_until("the ended backends gone", Duration::from_secs(10), || {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                &[&pids],
            )
            .unwrap()
            .get::<_, i64>(0)
            == 0
    });
}

#[test]
fn pg_broken_connection_fails_the_call_then_reconnects() {
    let (url, _cleanup) = fresh_database("reconnect");
    let store = PgStore::connect(&url).unwrap();
    store.put_resource(&resource("web", "a")).unwrap();
    let db = dbname(&url);

    // Kill the store's idle connections, as a server restart or a failover
    // would. The pool drops a connection it has seen close; one whose
    // closing it has not seen yet fails the call it is handed to.
    let mut admin = pg_client(&server_url());
    let (idle, _) = store_backends(&mut admin, &db);
    assert!(!idle.is_empty(), "the store holds a connection");
    for pid in &idle {
        admin
            .execute("SELECT pg_terminate_backend($1)", &[pid])
            .unwrap();
    }
    wait_until_gone(&mut admin, &idle);
    match store.resources(None) {
        Ok(all) => assert_eq!(all.len(), 1),
        Err(err) => assert!(matches!(err, StoreError::ConnectionLost { .. }), "{err}"),
    }
    assert_eq!(store.resources(None).unwrap().len(), 1);

    // Kill the connection of a call in flight (blocked behind a lock the
    // test holds): that call fails with ConnectionLost, by name.
    let mut locker = pg_client(&url);
    let mut tx = locker.transaction().unwrap();
    hold_resources_lock(&mut tx);
    std::thread::scope(|s| {
        let call = s.spawn(|| store.resources(None));
        let blocked = wait_for_blocked(&mut admin, &db, 1);
        admin
            .execute("SELECT pg_terminate_backend($1)", &[&blocked[0]])
            .unwrap();
        let err = call
            .join()
            .unwrap()
            .expect_err("the call on the broken connection fails");
        assert!(matches!(err, StoreError::ConnectionLost { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("broke") && text.contains(&db),
            "a clear error: {text}"
        );
        tx.rollback().unwrap();
    });

    // The next call gets another connection and sees everything.
    assert_eq!(store.resources(None).unwrap().len(), 1);
    store.put_resource(&resource("web", "a")).unwrap();
    assert_eq!(store.resources(None).unwrap()[0].version, 2);
}

#[test]
fn pg_concurrent_calls_use_several_connections_up_to_pool_size() {
    // Calls blocked behind a lock the test holds each hold a connection:
    // with pool_size=3, three of five calls wait in the server at once and
    // the store never opens a fourth connection.
    let (url, _cleanup) = fresh_database("pool");
    let url = format!("{url}&pool_size=3");
    let store = PgStore::connect(&url).unwrap();
    assert_eq!(store.pool().max_size(), 3);
    store.put_resource(&resource("web", "a")).unwrap();
    let db = dbname(&url);
    let mut admin = pg_client(&server_url());
    let mut locker = pg_client(&url);
    let mut tx = locker.transaction().unwrap();
    hold_resources_lock(&mut tx);
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..5).map(|_| s.spawn(|| store.resources(None))).collect();
        let blocked = wait_for_blocked(&mut admin, &db, 3);
        assert_eq!(blocked.len(), 3, "three connections at once");
        let (all, _) = store_backends(&mut admin, &db);
        assert_eq!(all.len(), 3, "no more connections than pool_size: {all:?}");
        tx.rollback().unwrap();
        for call in calls {
            assert_eq!(call.join().unwrap().unwrap().len(), 1);
        }
    });
}

#[test]
fn pg_store_connections_are_encrypted() {
    // The suite's URL asks for verify-full: every connection the store
    // opens is encrypted, as the server sees it.
    let f = pg_fixture("encrypted");
    f.store.put_resource(&resource("web", "a")).unwrap();
    let db = dbname(&f.location);
    let rows = pg_client(&server_url())
        .query(
            "SELECT s.ssl, s.version FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.datname = $1 AND a.application_name = 'orrery-primary'",
            &[&db],
        )
        .unwrap();
    assert!(!rows.is_empty(), "the store holds a connection");
    for r in &rows {
        assert!(r.get::<_, bool>(0), "a connection without TLS");
        assert!(r
            .get::<_, Option<String>>(1)
            .is_some_and(|v| v.starts_with("TLS")));
    }
}

/// `url` with its `sslmode`/`sslrootcert` replaced by `params`.
fn with_tls_params(url: &str, params: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("sslmode=") && !p.starts_with("sslrootcert="))
        .collect();
    if !params.is_empty() {
        kept.push(params);
    }
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

fn other_ca() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls/other_ca.crt")
        .display()
        .to_string()
}

#[test]
fn pg_sslmodes_are_honoured() {
    let (url, _cleanup) = fresh_database("sslmodes");
    let ca = std::env::var("ORRERY_TEST_DATABASE_CA")
        .expect("ORRERY_TEST_DATABASE_CA is not set: run through scripts/with-postgres.sh");
    // Encrypted either way: verify-full and verify-ca with the server's CA,
    // require (no check of who answers), prefer (the default).
    for params in [
        format!("sslmode=verify-full&sslrootcert={ca}"),
        format!("sslmode=verify-ca&sslrootcert={ca}"),
        "sslmode=require".to_owned(),
        "sslmode=prefer".to_owned(),
        String::new(),
    ] {
        let store = PgStore::connect(&with_tls_params(&url, &params))
            .unwrap_or_else(|e| panic!("{params}: {e}"));
        assert_eq!(store.secret_key().unwrap().len(), 32, "{params}");
    }
    // A CA that did not sign the server's certificate: refused, clearly,
    // whatever the mode that checks the chain.
    for mode in ["verify-full", "verify-ca", "require"] {
        let params = format!("sslmode={mode}&sslrootcert={}", other_ca());
        let err = PgStore::connect(&with_tls_params(&url, &params)).expect_err(&params);
        let text = err.to_string();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{text}");
        assert!(
            text.contains("TLS") && text.contains("certificate"),
            "{mode}: {text}"
        );
        assert!(text.contains(&dbname(&url)), "{text}");
    }
    // disable: plaintext, as the server sees it (the throwaway server still
    // allows it), unlike the suite's own connections (see
    // pg_store_connections_are_encrypted).
    let (plain_url, _plain_cleanup) = fresh_database("sslmode_disable");
    let plain = PgStore::connect(&with_tls_params(&plain_url, "sslmode=disable")).unwrap();
    plain.put_resource(&resource("web", "a")).unwrap();
    let ssl: Vec<bool> = pg_client(&server_url())
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.datname = $1 AND a.application_name = 'orrery-primary'",
            &[&dbname(&plain_url)],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ssl, [false], "one plaintext connection");
}

#[test]
fn pg_sslmode_require_against_a_server_without_tls_fails_clearly() {
    // A server that answers the TLS request with 'N' (no TLS), as one with
    // ssl = off does.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut conn, _) = listener.accept().unwrap();
        let mut request = [0u8; 8];
        conn.read_exact(&mut request).unwrap();
        conn.write_all(b"N").unwrap();
        request
    });
    let url = format!(
        "postgres://orrery:hunter2@127.0.0.1:{port}/orrery?sslmode=require&connect_timeout=5"
    );
    let err = orrery_state::open(&url).err().expect("no TLS, no store");
    let request = server.join().unwrap();
    // Length 8, code 80877103: the SSLRequest.
    assert_eq!(request, [0, 0, 0, 8, 4, 210, 22, 47]);
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("TLS"), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}/orrery")), "{text}");
    assert!(!text.contains("hunter2"), "never the password: {text}");
}

#[test]
fn pg_unreachable_server_fails_fast_without_the_password() {
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://orrery:hunter2@127.0.0.1:{port}/orrery?connect_timeout=5");
    let started = Instant::now();
    let err = orrery_state::open(&url)
        .err()
        .expect("nothing listens there");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}/orrery")), "{text}");
    assert!(!text.contains("hunter2"), "never the password: {text}");
}

#[test]
fn pg_records_carry_their_format() {
    let (url, _cleanup) = fresh_database("record_format");
    let store = PgStore::connect(&url).unwrap();
    store.put_resource(&resource("web", "a")).unwrap();
    store.begin_command("c1", "web", "apply").unwrap();
    let mut c = pg_client(&url);
    let r: i64 = c
        .query_one("SELECT format FROM resources", &[])
        .unwrap()
        .get(0);
    let k: i64 = c
        .query_one("SELECT format FROM commands", &[])
        .unwrap()
        .get(0);
    assert_eq!((r, k), (RECORD_FORMAT, RECORD_FORMAT));
}

#[test]
fn pg_store_is_shared_between_handles_as_one_database() {
    // Two primaries on one database see each other's writes at once.
    let f = pg_fixture("two_primaries");
    let other: Arc<dyn StateStore> = f.reopen();
    f.store.begin_command("c1", "web", "apply").unwrap();
    other
        .put_operation("c1", &op("a", "create", "running"))
        .unwrap();
    assert_eq!(f.store.command(None).unwrap().unwrap().operations.len(), 1);
}

// ---------------------------------------------------------------------------
// Secrets at rest: permissions, the key kept out of the store

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file of the store in `dir` (database, log, shared memory).
fn store_bytes(dir: &Path) -> Vec<u8> {
    ["state.db", "state.db-wal", "state.db-shm"]
        .iter()
        .filter_map(|f| std::fs::read(dir.join(f)).ok())
        .flatten()
        .collect()
}

#[test]
fn sqlite_files_are_private_and_too_open_ones_are_narrowed() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let store = SqliteStore::open(&dir).unwrap();
    store.put_resource(&resource("web", "a")).unwrap();
    assert_eq!(mode_of(&dir), 0o700, "the data directory");
    for f in ["state.db", "state.db-wal", "state.db-shm", "secret.key"] {
        assert_eq!(mode_of(&dir.join(f)), 0o600, "{f}");
    }
    drop(store);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in ["state.db", "secret.key"] {
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let again = SqliteStore::open(&dir).unwrap();
    assert_eq!(again.resources(None).unwrap().len(), 1);
    assert_eq!(mode_of(&dir), 0o700, "narrowed on open");
    for f in ["state.db", "secret.key"] {
        assert_eq!(mode_of(&dir.join(f)), 0o600, "{f} narrowed on open");
    }
}

#[test]
fn sqlite_store_files_hold_no_key_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let store = SqliteStore::open(&dir).unwrap();
    store.put_resource(&resource("web", "a")).unwrap();
    let key = store.secret_key().unwrap();
    let file = std::fs::read_to_string(dir.join("secret.key")).unwrap();
    assert_eq!(file.trim(), hex(&key), "the key is in the key file");
    let bytes = store_bytes(&dir);
    assert!(!bytes.is_empty());
    assert!(!contains(&bytes, &key), "no raw key bytes in the store");
    assert!(
        !contains(&bytes, hex(&key).as_bytes()),
        "no hex key in the store"
    );
}

/// A store as the previous release left it: the key in `meta.secret_key`,
/// no key file, no check row.
#[test]
fn sqlite_key_in_the_store_moves_out_once_and_hashes_stay_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let legacy: Vec<u8> = (100u8..132).collect();
    {
        let store = SqliteStore::open(&dir).unwrap();
        store.put_resource(&resource("web", "a")).unwrap();
    }
    std::fs::remove_file(dir.join("secret.key")).unwrap();
    let conn = raw(&dir);
    conn.execute("DELETE FROM meta WHERE key = 'secret_key_check'", [])
        .unwrap();
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('secret_key', ?1)",
        rusqlite::params![legacy],
    )
    .unwrap();
    drop(conn);
    assert!(contains(&store_bytes(&dir), &legacy), "the old layout");

    let store = SqliteStore::open(&dir).unwrap();
    assert_eq!(
        store.secret_key().unwrap(),
        legacy,
        "the same key: old hashes stay valid"
    );
    let file = std::fs::read_to_string(dir.join("secret.key")).unwrap();
    assert_eq!(file.trim(), hex(&legacy));
    assert_eq!(mode_of(&dir.join("secret.key")), 0o600);
    let rows: i64 = raw(&dir)
        .query_row(
            "SELECT count(*) FROM meta WHERE key = 'secret_key'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 0, "removed from the store");
    drop(store);
    assert!(
        !contains(&store_bytes(&dir), &legacy),
        "no key bytes left behind"
    );
    assert_eq!(
        SqliteStore::open(&dir).unwrap().secret_key().unwrap(),
        legacy
    );

    // A copied store without its key file is refused, not given a new key.
    let copy = tmp.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(dir.join("state.db"), copy.join("state.db")).unwrap();
    assert!(matches!(
        SqliteStore::open(&copy),
        Err(StoreError::SecretKey { .. })
    ));
    // Nor is another key file.
    let other = tmp.path().join("other.key");
    std::fs::write(&other, format!("{}\n", hex(&[9u8; 32]))).unwrap();
    assert!(matches!(
        SqliteStore::open_with_key_file(&dir, &other),
        Err(StoreError::SecretKey { .. })
    ));
}

#[test]
fn pg_key_in_the_database_moves_out_to_the_key_file() {
    let (url, _cleanup) = fresh_database("key_file");
    let legacy = PgStore::connect_with_key_file(&url, None)
        .unwrap()
        .secret_key()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("shared.key");
    let stores: Vec<PgStore> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| PgStore::connect_with_key_file(&url, Some(&file))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    for s in &stores {
        assert_eq!(s.secret_key().unwrap(), legacy, "one key, the old one");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), hex(&legacy));
    assert_eq!(mode_of(&file), 0o600);
    let left = pg_client(&url)
        .query("SELECT 1 FROM meta WHERE key = 'secret_key'", &[])
        .unwrap();
    assert!(left.is_empty(), "removed from the database");
    assert!(
        matches!(
            PgStore::connect_with_key_file(&url, None),
            Err(StoreError::SecretKey { .. })
        ),
        "a primary without the key file is refused, not given a new key"
    );
}
