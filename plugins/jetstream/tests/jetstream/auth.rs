//! Credentials against a nats-server that requires them: user/password and
//! token work, a wrong password is `InvalidCredentials` (terminal) without
//! the password in the message, and `orrery apply` keeps the secret out of
//! its state store.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use orrery_plugin_jetstream::{stream::TYPE, JetstreamPlugin};
use orrery_plugin_sdk::schema::{ErrorCode, PropertyMap, Value};
use orrery_testing::nats::nats_server_binary;
use orrery_testing::wait_until;

use crate::cluster::free_port;
use crate::common::{config, failed, ok, props, PluginEnv};
use crate::orrery::Orrery;

const PASSWORD: &str = "pa55-w0rd-xyzzy";
const TOKEN: &str = "t0ken-plugh-1234";

/// A JetStream server with an `authorization` block.
struct Secured {
    url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Secured {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Secured {
    /// User `app` with [`PASSWORD`].
    fn with_password() -> Secured {
        Secured::start(&format!(
            "users: [ {{ user: app, password: \"{PASSWORD}\" }} ]"
        ))
    }

    fn start(authorization: &str) -> Secured {
        Secured::start_with(&format!("authorization {{ {authorization} }}\n"))
    }

    /// With `extra` server configuration.
    fn start_with(extra: &str) -> Secured {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let conf = format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n\
             {extra}",
            dir.path().join("js").display()
        );
        let file = dir.path().join("server.conf");
        std::fs::write(&file, conf).unwrap();
        let child = Command::new(nats_server_binary())
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("nats://127.0.0.1:{port}");
        wait_until(
            "the secured server listens",
            Duration::from_secs(10),
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        Secured {
            url,
            child,
            _dir: dir,
        }
    }

    fn with(&self, pairs: &[(&str, &str)]) -> PropertyMap {
        let mut target = config(&[&self.url]);
        target.extend(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::from(*v))),
        );
        target
    }
}

#[tokio::test]
async fn user_password_and_token_work_and_a_wrong_password_is_invalid_credentials() {
    let server = Secured::with_password();
    let by_password = PluginEnv::start(
        JetstreamPlugin::default(),
        server.with(&[("user", "app"), ("password", PASSWORD)]),
    )
    .await;
    ok(&by_password
        .create(TYPE, props([("name", "A".into())]))
        .await);
    let tokened = Secured::start(&format!("token: \"{TOKEN}\""));
    let by_token = PluginEnv::start(
        JetstreamPlugin::default(),
        tokened.with(&[("token", TOKEN)]),
    )
    .await;
    ok(&by_token.create(TYPE, props([("name", "B".into())])).await);

    let wrong = PluginEnv::start(
        JetstreamPlugin::default(),
        server.with(&[("user", "app"), ("password", "not-it-9876")]),
    )
    .await;
    let message = failed(&wrong.read(TYPE, "A").await, ErrorCode::InvalidCredentials);
    assert!(!message.contains("not-it-9876"), "{message}");
    let anonymous = PluginEnv::start(JetstreamPlugin::default(), server.with(&[])).await;
    failed(
        &anonymous.read(TYPE, "A").await,
        ErrorCode::InvalidCredentials,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_with_a_password_keeps_it_out_of_the_state_store() {
    let server = Secured::with_password();
    let orrery = Orrery::embedded();
    let doc = format!(
        "stack: secured\ntargets:\n  - name: nats\n    plugin: jetstream\n    config: {{ servers: [\"{}\"], user: app, password: \"{PASSWORD}\" }}\n\
         resources:\n  - label: s\n    type: Jetstream::Stream\n    target: nats\n    properties: {{ name: SECURED }}\n",
        server.url
    );
    let file = orrery.write("stack.yaml", &doc);
    let run = orrery.run_file("apply", &file, &["--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD),
        "{run:?}"
    );
    let mut leaked = Vec::new();
    for entry in walk(&orrery.dir.path().join("state")) {
        let bytes = std::fs::read(&entry).unwrap();
        if bytes
            .windows(PASSWORD.len())
            .any(|w| w == PASSWORD.as_bytes())
        {
            leaked.push(entry);
        }
    }
    assert!(leaked.is_empty(), "the password is in clear in {leaked:?}");
    let run = orrery.run(&["inventory", "--output", "json"]);
    assert!(!run.stdout.contains(PASSWORD), "{run:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn mutual_tls_with_the_ca_and_a_client_certificate() {
    let certs = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/nats/gen-certs.sh"
    );
    let made = Command::new("sh")
        .arg(script)
        .args(["--out", certs.path().to_str().unwrap(), "--client", "app"])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let path = |name: &str| certs.path().join(name).to_str().unwrap().to_owned();
    let server = Secured::start_with(&format!(
        "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true }}\n",
        path("server.crt"),
        path("server.key"),
        path("ca.crt")
    ));
    let (ca, cert, key) = (path("ca.crt"), path("app.crt"), path("app.key"));
    let mutual = server.with(&[
        ("tls_ca_file", &ca),
        ("tls_cert_file", &cert),
        ("tls_key_file", &key),
    ]);
    let mut required = mutual.clone();
    required.insert("tls_required".into(), true.into());
    for config in [mutual, required] {
        let env = PluginEnv::start(JetstreamPlugin::default(), config).await;
        let name = format!("TLS{}", env.target.config.len());
        ok(&env
            .create(TYPE, props([("name", name.as_str().into())]))
            .await);
    }
    let no_client_cert = PluginEnv::start(
        JetstreamPlugin::default(),
        server.with(&[("tls_ca_file", &ca)]),
    )
    .await;
    let message = failed(
        &no_client_cert.read(TYPE, "TLS4").await,
        ErrorCode::NetworkFailure,
    );
    assert!(message.contains("cannot connect"), "{message}");
    let half = server.with(&[("tls_ca_file", &ca), ("tls_cert_file", &cert)]);
    let half = PluginEnv::start(JetstreamPlugin::default(), half).await;
    failed(&half.read(TYPE, "TLS4").await, ErrorCode::InvalidRequest);
}

#[tokio::test]
async fn an_nkey_seed_authenticates_and_never_shows_in_a_message() {
    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().unwrap();
    let server = Secured::start(&format!("users: [ {{ nkey: \"{}\" }} ]", user.public_key()));
    let env = PluginEnv::start(
        JetstreamPlugin::default(),
        server.with(&[("nkey_seed", &seed)]),
    )
    .await;
    ok(&env.create(TYPE, props([("name", "N".into())])).await);
    let other = nkeys::KeyPair::new_user().seed().unwrap();
    let wrong = PluginEnv::start(
        JetstreamPlugin::default(),
        server.with(&[("nkey_seed", &other)]),
    )
    .await;
    let message = failed(&wrong.read(TYPE, "N").await, ErrorCode::InvalidCredentials);
    assert!(!message.contains(&other), "{message}");
    let garbage = PluginEnv::start(
        JetstreamPlugin::default(),
        server.with(&[("nkey_seed", "SUnot-a-seed")]),
    )
    .await;
    let message = failed(
        &garbage.read(TYPE, "N").await,
        ErrorCode::InvalidCredentials,
    );
    assert!(!message.contains("not-a-seed"), "{message}");
}
