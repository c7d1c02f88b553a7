//! Schemas come from where they can be trusted (issue 43, attack 2): a
//! satellite of another site cannot describe a plugin for a target it does
//! not serve, and two satellites that disagree about a plugin's schemas fail
//! the plan instead of racing.
//!
//! The attack runs under a real nats-server with the per-target satellite
//! permissions deploy/nats/gen-nkeys.py writes (`--satellite
//! NAME=PLUGIN:TARGET`), site B's key held by a raw NATS client that
//! answers every describe subject it can with a schema whose write-only
//! field is not write-only.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use orrery_schema::{Announcement, Envelope, MessageKind};
use orrery_testing::nats::NatsServer;

use common::fleet::{
    apply_through_nats, orrery_through_nats, satellite_command, wait_registered, Killed,
};

/// The write-only value of site C's resources.
pub(crate) const SECRET: &str = "c-site-write-only-4e71b9";
/// Plans the attack gets.
const PLANS: usize = 20;

/// The subjects deploy/nats/gen-nkeys.py's `subscribe_subjects` grants a
/// satellite identity serving `plugin` on `target` (check.sh proves the
/// generated users.conf against a running server; this mirrors it).
fn satellite_subjects(plugin: &str, target: &str) -> Vec<String> {
    let mut subjects = vec![
        format!("orrery.op.{plugin}.{target}"),
        format!("orrery.describe.{plugin}.{target}"),
    ];
    if target == "*" {
        subjects.push(format!("orrery.describe.{plugin}"));
    }
    subjects.extend(
        [
            "$SRV.PING",
            "$SRV.INFO",
            "$SRV.STATS",
            "$SRV.*.orrery-satellite",
            "$SRV.*.orrery-satellite.*",
        ]
        .map(String::from),
    );
    subjects
}

/// A nats-server configuration with the primary's permission set of
/// deploy/nats/permissions.conf, one per-target satellite identity per
/// `(key, plugin, target)`, and `tester` allowed everything.
fn nats_config(primary: &str, satellites: &[(&str, &str, &str)], tester: &str) -> String {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut users = format!(
        "    {{ nkey: {primary}, permissions: {{ publish: {{ allow: [\"orrery.op.>\", \"orrery.describe.>\", \"$SRV.>\", \"$JS.API.>\", \"$JS.ACK.>\", \"$JS.FC.>\", \"$KV.>\", \"$O.>\"] }}, subscribe: {{ allow: [\"_INBOX.>\"] }} }} }}\n"
    );
    for (key, plugin, target) in satellites {
        users.push_str(&format!(
            "    {{ nkey: {key}, permissions: {{ publish: {{ allow: [] }}, subscribe: {{ allow: [{}] }}, allow_responses: {{ max: 2, expires: \"15m\" }} }} }}\n",
            list(&satellite_subjects(plugin, target))
        ));
    }
    users.push_str(&format!("    {{ nkey: {tester} }}\n"));
    format!("authorization {{\n  users: [\n{users}  ]\n}}\n")
}

/// A user nkey: its seed written to `dir/name.nk`, and its public key.
fn identity(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let pair = nkeys::KeyPair::new_user();
    let path = dir.join(format!("{name}.nk"));
    std::fs::write(&path, pair.seed().unwrap()).unwrap();
    (path, pair.public_key())
}

async fn connect(url: &str, seed: &std::path::Path) -> async_nats::Client {
    let seed = std::fs::read_to_string(seed).unwrap();
    async_nats::ConnectOptions::with_nkey(seed.trim().to_owned())
        .connect(url)
        .await
        .unwrap()
}

/// The announcement of `local` as the satellites of `target` give it.
pub(crate) async fn honest(client: &async_nats::Client, target: &str) -> Announcement {
    let subject = format!("orrery.describe.local.{target}");
    let message = orrery_testing::wait_for_async(
        "the honest satellite describes `local`",
        Duration::from_secs(20),
        || {
            let subject = subject.clone();
            async move {
                client
                    .request(subject, "".into())
                    .await
                    .map_err(|e| e.to_string())
            }
        },
    )
    .await;
    Envelope::decode(&message.payload).unwrap().body().unwrap()
}

/// `announcement` with `Local::Fs::File`'s `owner_note` no longer secret
/// and `content` create-only: a forged schema.
pub(crate) fn forged(mut announcement: Announcement) -> Announcement {
    let file = announcement
        .resources
        .iter_mut()
        .find(|r| r.type_name == "Local::Fs::File")
        .unwrap();
    for field in &mut file.fields {
        match field.name.as_str() {
            "owner_note" => {
                assert!(field.hints.write_only, "the honest schema hides it");
                field.hints.write_only = false;
                field.hints.opaque = false;
            }
            "content" => field.hints.create_only = true,
            _ => {}
        }
    }
    announcement
}

pub(crate) fn encoded(announcement: &Announcement) -> Vec<u8> {
    Envelope::new(MessageKind::Announce, announcement)
        .unwrap()
        .encode()
        .unwrap()
}

/// A raw responder: how many requests it received; dropping it stops it.
pub(crate) struct Forger {
    pub(crate) received: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Forger {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers every message of `subjects` (a queue group when given) with
/// `payload`, naming itself `name` as a satellite does.
pub(crate) async fn forger(
    client: async_nats::Client,
    subjects: &[(&str, Option<&str>)],
    name: &str,
    payload: Vec<u8>,
) -> Forger {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Orrery-Satellite", name);
    forger_with_headers(client, subjects, headers, payload).await
}

/// As [`forger`], answering with `headers`.
pub(crate) async fn forger_with_headers(
    client: async_nats::Client,
    subjects: &[(&str, Option<&str>)],
    headers: async_nats::HeaderMap,
    payload: Vec<u8>,
) -> Forger {
    let received = Arc::new(AtomicUsize::new(0));
    let mut all = futures::stream::SelectAll::new();
    for (subject, queue) in subjects {
        let sub = match queue {
            Some(q) => client
                .queue_subscribe(subject.to_string(), q.to_string())
                .await
                .unwrap(),
            None => client.subscribe(subject.to_string()).await.unwrap(),
        };
        all.push(sub);
    }
    client.flush().await.unwrap();
    let count = received.clone();
    let task = tokio::spawn(async move {
        while let Some(message) = all.next().await {
            count.fetch_add(1, Ordering::SeqCst);
            if let Some(reply) = message.reply {
                let _ = client
                    .publish_with_headers(reply, headers.clone(), payload.clone().into())
                    .await;
            }
        }
    });
    Forger { received, task }
}

pub(crate) fn document(stack: &str, root: &std::path::Path) -> String {
    format!(
        "stack: {stack}\ntargets:\n  - name: site-c\n    plugin: local\n    config: {{ root: \"{}\", create_root: true }}\nresources:\n  - label: note\n    type: Local::Fs::File\n    target: site-c\n    properties: {{ path: note.txt, content: \"hello\", owner_note: \"{SECRET}\" }}\n",
        root.display()
    )
}

pub(crate) fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_satellite_cannot_describe_a_plugin_for_a_target_it_does_not_serve() {
    let scratch = common::Scratch::new();
    let keys = scratch.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (primary_seed, primary) = identity(&keys, "primary");
    let (b_seed, b) = identity(&keys, "site-b");
    let (c_seed, c) = identity(&keys, "site-c");
    let (tester_seed, tester) = identity(&keys, "tester");
    let server = NatsServer::start_with_config(&nats_config(
        &primary,
        &[(&b, "local", "site-b"), (&c, "local", "site-c")],
        &tester,
    ))
    .await;

    // Site C's satellite serves `local` for site-c only, with its key.
    let mut command = satellite_command(&server.url, "sat-c");
    command
        .args(["--target", "site-c", "--nats-nkey"])
        .arg(&c_seed);
    let _site_c = Killed(command.spawn().unwrap());
    let client = connect(&server.url, &tester_seed).await;
    wait_registered(&client, 1, Duration::from_secs(20)).await;
    let payload = encoded(&forged(honest(&client, "site-c").await));

    // Site B's key answers every describe subject it can ask for: the
    // plugin-wide one in the old queue group, site-c's, every target's.
    // The server refuses the subscriptions it may not have.
    let violations = Arc::new(AtomicUsize::new(0));
    let seen = violations.clone();
    let b_client = async_nats::ConnectOptions::with_nkey(
        std::fs::read_to_string(&b_seed).unwrap().trim().to_owned(),
    )
    .event_callback(move |event| {
        let seen = seen.clone();
        async move {
            if let async_nats::Event::ServerError(e) = event {
                if e.to_string().contains("Permissions Violation") {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    })
    .connect(&server.url)
    .await
    .unwrap();
    let stolen = forger(
        b_client,
        &[
            ("orrery.describe.local", Some("orrery-local-describe")),
            ("orrery.describe.local.site-c", None),
            ("orrery.describe.local.*", None),
            ("orrery.describe.>", None),
        ],
        "sat-b",
        payload,
    )
    .await;
    orrery_testing::wait_for_async(
        "the server refuses site B's describe subscriptions",
        Duration::from_secs(10),
        || {
            let violations = violations.clone();
            async move {
                match violations.load(Ordering::SeqCst) {
                    4 => Ok(()),
                    n => Err(format!("{n} refused")),
                }
            }
        },
    )
    .await;

    let state = scratch.path().join("state");
    let primary_seed = primary_seed.to_str().unwrap().to_owned();
    let mut forged_plans = 0;
    for i in 0..PLANS {
        let root = scratch.path().join(format!("site-c-{i}"));
        let file = scratch.write(
            &format!("attack-{i}.yaml"),
            &document(&format!("attack-{i}"), &root),
        );
        // The plan as a program reads it (every value it may show), then
        // the apply.
        let plan = orrery_through_nats(
            &state,
            &server.url,
            &[
                "plan",
                file.to_str().unwrap(),
                "--output",
                "json",
                "--nats-nkey",
                &primary_seed,
            ],
        )
        .await;
        assert_eq!(plan.code, 2, "{plan:?}");
        let run = apply_through_nats(
            &file,
            &server.url,
            &state,
            &[("ORRERY_NATS_NKEY", primary_seed.as_str())],
        )
        .await;
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(
            std::fs::read_to_string(root.join("note.txt")).unwrap(),
            "hello",
            "site C's satellite applied it"
        );
        let shown = format!("{}{}{}{}", plan.stdout, plan.stderr, run.stdout, run.stderr);
        if contains(shown.as_bytes(), SECRET) {
            forged_plans += 1;
        }
    }
    eprintln!("forged schema used in {forged_plans} of {PLANS} plans");
    assert_eq!(
        forged_plans, 0,
        "site C's write-only value showed in {forged_plans} of {PLANS} plans"
    );
    assert_eq!(
        stolen.received.load(Ordering::SeqCst),
        0,
        "site B received a describe request"
    );

    // Nor is it in the store: the documents as recorded (a document
    // holding a secret is not recorded at all, by the honest schema), and
    // every file.
    let mut commands = 0;
    for entry in std::fs::read_dir(&state).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        assert!(!contains(&bytes, SECRET), "in clear in {}", path.display());
        if path.extension().is_some_and(|e| e == "db") {
            let db = rusqlite::Connection::open(&path).unwrap();
            let texts: Vec<String> = db
                .prepare("SELECT text FROM command_documents")
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(
                texts.iter().all(|t| !t.contains(SECRET)),
                "in clear in command_documents"
            );
            commands += db
                .query_row("SELECT count(*) FROM commands", [], |row| {
                    row.get::<_, i64>(0)
                })
                .unwrap();
        }
    }
    assert_eq!(
        commands, PLANS as i64,
        "the store read is the applies' store"
    );
}

/// A document planning `local` on each of `targets`.
fn plain(stack: &str, targets: &[&str], root: &std::path::Path) -> String {
    let mut doc = format!("stack: {stack}\ntargets:\n");
    for t in targets {
        doc.push_str(&format!(
            "  - name: {t}\n    plugin: local\n    config: {{ root: \"{}/{stack}/{t}\", create_root: true }}\n",
            root.display()
        ));
    }
    doc.push_str("resources:\n");
    for t in targets {
        doc.push_str(&format!(
            "  - label: f-{t}\n    type: Local::Fs::File\n    target: {t}\n    properties: {{ path: f, content: x }}\n"
        ));
    }
    doc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn satellites_that_disagree_about_a_plugins_schema_fail_the_plan() {
    let server = NatsServer::start().await;
    let scratch = common::Scratch::new();
    let mut command = satellite_command(&server.url, "sat-c");
    command.args(["--target", "site-c"]);
    let _site_c = Killed(command.spawn().unwrap());
    let mut command = satellite_command(&server.url, "sat-b");
    command.args(["--target", "site-b"]);
    let _site_b = Killed(command.spawn().unwrap());
    let client = server.client().await;
    wait_registered(&client, 2, Duration::from_secs(20)).await;
    let announcement = honest(&client, "site-c").await;
    let version = announcement.version.clone();
    let payload = encoded(&forged(announcement));
    let state = scratch.path().join("state");

    // Agreeing satellites: the plan runs.
    let file = scratch.write(
        "both.yaml",
        &plain("both", &["site-b", "site-c"], scratch.path()),
    );
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_eq!(run.code, 0, "{run:?}");

    // A second satellite of site-c answering the same plugin version with
    // another schema: every plan fails, naming both, none uses either.
    let rogue = forger(
        server.client().await,
        &[("orrery.describe.local.site-c", None)],
        "rogue-c",
        payload.clone(),
    )
    .await;
    let file = scratch.write("one.yaml", &plain("one", &["site-c"], scratch.path()));
    for _ in 0..5 {
        let run = apply_through_nats(&file, &server.url, &state, &[]).await;
        assert_ne!(run.code, 0, "{run:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains("satellites disagree about the schemas of plugin `local`")
                && said.contains("`sat-c`")
                && said.contains("`rogue-c`")
                && said.contains(&format!("version {version}")),
            "{said}"
        );
    }
    assert!(
        rogue.received.load(Ordering::SeqCst) >= 5,
        "the rogue was asked"
    );
    drop(rogue);

    // A satellite allowed site-b only cannot push its schema onto site-c's
    // resources through a document naming both: the targets' satellites
    // disagree, and the plan fails.
    let _rogue_b = forger(
        server.client().await,
        &[("orrery.describe.local.site-b", None)],
        "rogue-b",
        payload,
    )
    .await;
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_eq!(
        run.code, 0,
        "a document naming site-c alone never asks site-b: {run:?}"
    );
    let file = scratch.write(
        "both2.yaml",
        &plain("both2", &["site-b", "site-c"], scratch.path()),
    );
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("satellites disagree") && said.contains("`rogue-b`"),
        "{said}"
    );
}

/// Satellites older than per-target describe answer only the plugin-wide
/// subject: with nobody on the per-target one the primary asks there, and
/// two answers that differ still fail the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_satellites_are_asked_on_the_plugin_wide_subject_and_checked_too() {
    let server = NatsServer::start().await;
    let scratch = common::Scratch::new();
    let state = scratch.path().join("state");
    let honest = orrery_plugin_sdk::server::announcement(&orrery_plugin_local::LocalPlugin);
    let _old = forger(
        server.client().await,
        &[("orrery.describe.local", None)],
        "old-1",
        encoded(&honest),
    )
    .await;
    let file = scratch.write("old.yaml", &plain("old", &["site-c"], scratch.path()));
    let file = file.to_str().unwrap();
    let run = orrery_through_nats(&state, &server.url, &["plan", file]).await;
    assert_eq!(run.code, 2, "described by the older satellite: {run:?}");

    let _other = forger(
        server.client().await,
        &[("orrery.describe.local", None)],
        "old-2",
        encoded(&forged(honest)),
    )
    .await;
    let run = orrery_through_nats(&state, &server.url, &["plan", file]).await;
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("satellites disagree") && said.contains("on the plugin-wide subject"),
        "{said}"
    );
}
