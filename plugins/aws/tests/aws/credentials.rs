//! Credentials brokered on the satellite (issue 46, item 2): a real
//! nats-server, a real `orrery-satellite` running this plugin's binary
//! with a held target whose credentials are `AssumeRole` (with an external
//! id and a session name) signed by keys from a file on the satellite's
//! host, and the `orrery` CLI applying a stack through NATS. A recording
//! proxy in front of moto learns the session STS handed out; then neither
//! the file's secret key nor the session's keys may be found on the bus,
//! in the state store, in the CLI's or the satellite's logs at
//! `RUST_LOG=trace` (the plugin's stderr is in the satellite's), or in
//! the plugin's `/proc/<pid>/environ`. A stack that brings its own
//! credential source, naming the operator's key file, is refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use orrery_testing::nats::NatsServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::*;

const BASE_KEY_ID: &str = "AKIAORRERYBASE7F3A01";
const BASE_SECRET: &str = "baseSecret/7f3a+held+on+the+satellite+c91e";
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/orrery-deployer";
const EXTERNAL_ID: &str = "ext-id-4411";
const SESSION_NAME: &str = "orrery-held-test";
const BUCKET: &str = "orrery-held-creds-assets";
const THIEF_BUCKET: &str = "orrery-held-creds-loot";

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every byte each way through the proxy.
#[derive(Default)]
struct Recorded {
    requests: Vec<u8>,
    responses: Vec<u8>,
}

/// Copies `from` to `to`, appending what passes to `log` (one side of
/// `Recorded`, chosen by `requests`).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    log: Arc<Mutex<Recorded>>,
    requests: bool,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut log = log.lock().unwrap();
            let side = if requests {
                &mut log.requests
            } else {
                &mut log.responses
            };
            side.extend_from_slice(&chunk[..n]);
        }
        if to.write_all(&chunk[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// A TCP proxy to `upstream` recording both directions: the test's own
/// view of what STS answered the plugin.
async fn recording_proxy(upstream: &str) -> (String, Arc<Mutex<Recorded>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Recorded::default()));
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let shared = log.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::spawn(pump(client_read, server_write, shared.clone(), true));
            tokio::spawn(pump(server_read, client_write, shared.clone(), false));
        }
    });
    (url, log)
}

/// The text between the first `<tag>` and `</tag>` of `xml`.
fn element(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{tag}>"))? + start;
    Some(xml[start..end].to_owned())
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// What surrounds the first `needle` in `text`, to say where a leak is.
fn line_with(text: &[u8], needle: &str) -> String {
    let at = text
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap_or_default();
    let line_start = text[..at]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |p| p + 1);
    let from = at.saturating_sub(400);
    let to = (at + needle.len() + 200).min(text.len());
    format!(
        "{} … {}",
        String::from_utf8_lossy(&text[line_start..(line_start + 150).min(text.len())]),
        String::from_utf8_lossy(&text[from..to])
    )
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The pids of `parent`'s children (of every thread of it).
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Finished `orrery` run.
struct Run {
    code: i32,
    output: String,
}

/// `orrery ARGS --nats-url URL` at `RUST_LOG=trace`, with plugins reachable
/// only through NATS, off the async runtime.
async fn orrery(state: &Path, url: &str, args: &[&str]) -> Run {
    let mut command = Command::new(orrery_testing::binary("orrery"));
    command
        .args(args)
        .args(["--nats-url", url])
        .env("ORRERY_DATA_DIR", state)
        .env("ORRERY_PLUGIN_DIR", "/nonexistent")
        .env("RUST_LOG", "trace");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn bucket_stack(stack: &str, target: &str, config: &str, bucket: &str) -> String {
    format!(
        "stack: {stack}\ntargets:\n  - name: {target}\n    plugin: aws\n{config}resources:\n  \
         - label: assets\n    type: AWS::S3::Bucket\n    target: {target}\n    properties: {{ bucket: {bucket} }}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_credentials_are_brokered_on_the_satellite_and_found_nowhere_else() {
    let Some(moto) = MotoServer::start().await else {
        return;
    };
    let server = NatsServer::start().await;
    let (endpoint, recorded) = recording_proxy(&moto.url).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();

    // The operator's key file (AWS's credentials format) and held config.
    let keys = dir.join("operator/aws/credentials");
    std::fs::create_dir_all(keys.parent().unwrap()).unwrap();
    std::fs::write(
        &keys,
        format!(
            "[base]\naws_access_key_id = {BASE_KEY_ID}\naws_secret_access_key = {BASE_SECRET}\n"
        ),
    )
    .unwrap();
    let config = dir.join("satellite.toml");
    std::fs::write(
        &config,
        format!(
            "[target_config.prod]\nregion = \"{REGION}\"\nendpoint_url = \"{endpoint}\"\n\
             credentials = {{ source = \"assume_role\", role_arn = \"{ROLE_ARN}\", external_id = \"{EXTERNAL_ID}\", \
             session_name = \"{SESSION_NAME}\", base = {{ source = \"profile\", profile = \"base\", credentials_file = \"{}\" }} }}\n\n\
             [target_access.prod]\nstacks = [\"web-*\"]\n",
            keys.display()
        ),
    )
    .unwrap();

    // Everything on the bus, replies included, for the whole test.
    let spy = server.client().await;
    let mut all = spy.subscribe(">").await.unwrap();
    let bus = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink = bus.clone();
    tokio::spawn(async move {
        while let Some(message) = all.next().await {
            let mut bus = sink.lock().unwrap();
            bus.extend_from_slice(message.subject.as_bytes());
            bus.extend_from_slice(&message.payload);
        }
    });

    let satellite_log = dir.join("satellite.log");
    let satellite = Killed(
        Command::new(orrery_testing::binary("orrery-satellite"))
            .args(["--nats-url", &server.url, "--id", "sat-aws"])
            .arg("--plugin")
            .arg(orrery_testing::binary("orrery-plugin-aws"))
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "trace")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&satellite_log).unwrap())
            .spawn()
            .unwrap(),
    );
    let satellite_pid = satellite.0.id();
    let plugin_pid = orrery_testing::wait_for(
        "the satellite running the aws plugin",
        Duration::from_secs(30),
        || match children(satellite_pid).as_slice() {
            [pid] => Ok(*pid),
            other => Err(format!("children {other:?}")),
        },
    );
    let state = dir.join("state");

    // The stack names the target only; the satellite adds the credential
    // source, the plugin assumes the role with the file's keys.
    let file = dir.join("web.yaml");
    std::fs::write(&file, bucket_stack("web-assets", "prod", "", BUCKET)).unwrap();
    let client = server.client().await;
    orrery_testing::wait_for_async(
        "the satellite's NATS service answering",
        Duration::from_secs(30),
        || {
            let client = client.clone();
            async move {
                client
                    .request("$SRV.PING.orrery-satellite", "".into())
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        },
    )
    .await;
    let applied = orrery(
        &state,
        &server.url,
        &["apply", file.to_str().unwrap(), "--yes"],
    )
    .await;
    assert_eq!(applied.code, 0, "{}", applied.output);
    let mut runs = Vec::new();
    runs.push(applied.output);
    moto_bucket_exists(&moto, BUCKET).await;

    // What STS was asked and answered, as the proxy saw it.
    let (requests, responses) = {
        let r = recorded.lock().unwrap();
        (
            String::from_utf8_lossy(&r.requests).into_owned(),
            String::from_utf8_lossy(&r.responses).into_owned(),
        )
    };
    assert!(requests.contains("Action=AssumeRole"), "no AssumeRole sent");
    assert!(
        requests.contains(&format!("ExternalId={EXTERNAL_ID}")),
        "the external id"
    );
    assert!(
        requests.contains(&format!("RoleSessionName={SESSION_NAME}")),
        "the session name"
    );
    assert!(
        requests.contains(&format!("Credential={BASE_KEY_ID}/")),
        "AssumeRole signed with the file's keys"
    );
    let session_key_id = element(&responses, "AccessKeyId").expect("STS answered keys");
    let session_secret = element(&responses, "SecretAccessKey").unwrap();
    let session_token = element(&responses, "SessionToken").unwrap();
    assert!(
        requests.contains(&format!("Credential={session_key_id}/")),
        "S3 called with the assumed role's session"
    );
    let assumed = requests.matches("Action=AssumeRole").count();

    // A stack bringing its own credential source, naming the operator's
    // key file, on a target nobody holds: refused on the satellite before
    // the plugin sees it.
    let thief = dir.join("thief.yaml");
    std::fs::write(
        &thief,
        bucket_stack(
            "web-thief",
            "loot",
            &format!(
                "    config: {{ region: {REGION}, endpoint_url: \"{endpoint}\", credentials: \
                 {{ source: profile, profile: base, credentials_file: \"{}\" }} }}\n",
                keys.display()
            ),
            THIEF_BUCKET,
        ),
    )
    .unwrap();
    let run = orrery(
        &state,
        &server.url,
        &["apply", thief.to_str().unwrap(), "--yes"],
    )
    .await;
    assert_ne!(run.code, 0, "{}", run.output);
    assert!(
        run.output
            .contains("`credentials` names credentials of the host that runs the plugin"),
        "{}",
        run.output
    );
    runs.push(run.output);
    // The same on the held target itself, and a bare profile name.
    let held = dir.join("held-thief.yaml");
    std::fs::write(
        &held,
        bucket_stack(
            "web-thief2",
            "prod",
            &format!(
                "    config: {{ credentials: {{ source: profile, profile: base, credentials_file: \"{}\" }} }}\n",
                keys.display()
            ),
            THIEF_BUCKET,
        ),
    )
    .unwrap();
    let run = orrery(
        &state,
        &server.url,
        &["apply", held.to_str().unwrap(), "--yes"],
    )
    .await;
    assert_ne!(run.code, 0, "{}", run.output);
    assert!(
        run.output.contains("`credentials` is set by the operator"),
        "{}",
        run.output
    );
    runs.push(run.output);
    let named = dir.join("profile-thief.yaml");
    std::fs::write(
        &named,
        bucket_stack(
            "web-thief3",
            "loot2",
            &format!(
                "    config: {{ region: {REGION}, endpoint_url: \"{endpoint}\", profile: base }}\n"
            ),
            THIEF_BUCKET,
        ),
    )
    .unwrap();
    let run = orrery(
        &state,
        &server.url,
        &["apply", named.to_str().unwrap(), "--yes"],
    )
    .await;
    assert_ne!(run.code, 0, "{}", run.output);
    assert!(
        run.output.contains("`profile` is a credential source"),
        "{}",
        run.output
    );
    runs.push(run.output);
    assert_eq!(
        recorded
            .lock()
            .unwrap()
            .requests
            .windows(b"Action=AssumeRole".len())
            .filter(|w| *w == b"Action=AssumeRole")
            .count(),
        assumed,
        "no refused stack assumed the role"
    );
    assert!(!moto_has_bucket(&moto, THIEF_BUCKET).await);

    // Where the secrets must not be.
    let environ = std::fs::read(format!("/proc/{plugin_pid}/environ")).unwrap();
    assert!(!environ.is_empty(), "the plugin's environment was read");
    assert!(
        !contains(&environ, "AWS_"),
        "no AWS variable in the plugin's environment"
    );
    client.flush().await.unwrap();
    spy.flush().await.unwrap();
    drop(satellite);
    let bus = bus.lock().unwrap().clone();
    assert!(contains(&bus, BUCKET), "the spy saw the operations");
    let satellite_log = std::fs::read(&satellite_log).unwrap();
    assert!(
        contains(&satellite_log, "TRACE"),
        "the satellite logged at trace"
    );
    let store = files_under(&state);
    assert!(store.iter().any(|p| p.ends_with("state.db")), "{store:?}");
    for (what, secret) in [
        ("the file's secret key", BASE_SECRET),
        ("the session's access key id", session_key_id.as_str()),
        ("the session's secret key", session_secret.as_str()),
        ("the session token", session_token.as_str()),
    ] {
        assert!(!contains(&bus, secret), "{what} crossed NATS");
        for path in &store {
            let bytes = std::fs::read(path).unwrap();
            assert!(!contains(&bytes, secret), "{what} in {}", path.display());
        }
        for run in &runs {
            assert!(
                !run.contains(secret),
                "{what} in the CLI's output: {}",
                line_with(run.as_bytes(), secret)
            );
        }
        assert!(
            !contains(&satellite_log, secret),
            "{what} in the satellite's log: {}",
            line_with(&satellite_log, secret)
        );
        assert!(
            !contains(&environ, secret),
            "{what} in the plugin's environment"
        );
    }
    eprintln!(
        "scanned: {} bytes of NATS, {} store files, {} bytes of CLI output, {} bytes of satellite log, {} bytes of environ",
        bus.len(),
        store.len(),
        runs.iter().map(String::len).sum::<usize>(),
        satellite_log.len(),
        environ.len()
    );
}

/// The test's own client of moto (moto's shared account takes any keys).
async fn moto_has_bucket(moto: &MotoServer, bucket: &str) -> bool {
    let raw = orrery_plugin_aws::target::clients(&config(&moto.url))
        .await
        .unwrap();
    raw.s3.head_bucket().bucket(bucket).send().await.is_ok()
}

async fn moto_bucket_exists(moto: &MotoServer, bucket: &str) {
    assert!(moto_has_bucket(moto, bucket).await, "`{bucket}` in moto");
}
