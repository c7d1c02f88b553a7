//! The API's authentication and authorization against a real `orrery
//! primary`: the attacks of issue #14 are refused.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::certs::{make_certs, tls_primary};
use common::server::{free_port, sha256_hex, Server, ServerOptions, ADMIN_TOKEN};
use orrery_testing::Wait;
use serde_json::json;

const VIEWER: &str = "orr_test_viewer_00000000000000000000000000000000";
const TEAM_A: &str = "orr_test_team_a_0000000000000000000000000000000";
const SCRAPER: &str = "orr_test_scraper_000000000000000000000000000000";

/// A tokens file: the admin, a viewer of everything, an operator of
/// `team-a-*` (viewer of the rest), a certificate principal.
fn tokens_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tokens.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[[principal]]
name = "admin"
token_sha256 = "{}"
roles = ["admin"]

[[principal]]
name = "watcher"
token_sha256 = "{}"
roles = ["viewer"]

[[principal]]
name = "team-a-ci"
token_sha256 = "{}"
roles = ["operator:team-a-*"]

[[principal]]
name = "prometheus"
token_sha256 = "{}"
roles = ["metrics"]

[[principal]]
name = "alice"
certificates = ["alice.example.com"]
roles = ["operator"]
"#,
            sha256_hex(ADMIN_TOKEN),
            sha256_hex(VIEWER),
            sha256_hex(TEAM_A),
            sha256_hex(SCRAPER)
        ),
    )
    .unwrap();
    path
}

fn server(dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec![
        "--auth-tokens".to_owned(),
        tokens_file(dir).display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut s = Server::start_with(ServerOptions {
        args,
        no_default_auth: true,
        ..ServerOptions::default()
    });
    s.token = Some(ADMIN_TOKEN.to_owned());
    s
}

/// A stack of one file under `root`; its target carries a token, which is
/// never recorded, so an operator's re-apply compares recorded forms.
fn file_stack(name: &str, root: &Path, file: &str) -> serde_json::Value {
    json!({"document": format!(
        "stack: {name}\ntargets:\n  - name: home\n    plugin: local\n    config:\n      root: \"{}\"\n      create_root: true\n      api_token: \"t-1\"\nresources:\n  - label: f\n    type: Local::Fs::File\n    target: home\n    properties:\n      path: \"{file}\"\n      content: \"ssh-ed25519 AAAA attacker\\n\"\n      mode: 384\n",
        root.display()
    )})
}

#[test]
fn unauthenticated_requests_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = server(dir.path(), &[]);
    // The attack: an apply of a local target rooted at a home directory.
    let body = file_stack("pwn", &home.join(".ssh"), "authorized_keys");
    let (status, answer) = s.post_as(None, "/v1/stacks/apply", &body);
    assert_eq!(status, 401, "{answer}");
    let (status, _) = s.post_as(Some("orr_wrong"), "/v1/stacks/apply", &body);
    assert_eq!(status, 401);
    assert!(!home.join(".ssh/authorized_keys").exists());
    assert!(!home.exists(), "nothing was created under the home");
    for path in [
        "/v1/stacks",
        "/v1/commands",
        "/v1/resources",
        "/v1/targets",
        "/v1/plugins",
        "/metrics",
    ] {
        assert_eq!(s.get_as(None, path).0, 401, "{path}");
    }
    let (status, _) = s.post_as(None, "/v1/stacks/x/destroy", &json!({}));
    assert_eq!(status, 401);
    // The WWW-Authenticate header, and probes stay open.
    let resp = ureq::get(s.url("/v1/stacks"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert!(resp
        .headers()
        .get("www-authenticate")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    assert_eq!(s.get_as(None, "/healthz").0, 200);
    assert_eq!(s.get_as(None, "/readyz").0, 200);
    // The token never reaches the log.
    assert!(!s.log().contains("orr_wrong"));
}

#[test]
fn roles_and_stack_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[]);
    let root = dir.path().join("files");
    // A viewer reads but cannot apply.
    assert_eq!(s.get_as(Some(VIEWER), "/v1/stacks").0, 200);
    let (status, answer) = s.post_as(
        Some(VIEWER),
        "/v1/stacks/apply",
        &file_stack("team-b-x", &root, "b"),
    );
    assert_eq!(status, 403, "{answer}");
    assert!(!root.join("b").exists());
    // The admin applies team-b-x; the team-a operator cannot destroy it.
    let (status, answer) = s.post("/v1/stacks/apply", &file_stack("team-b-x", &root, "b"));
    assert_eq!(status, 202, "{answer}");
    let id = answer["command_id"].as_str().unwrap().to_owned();
    assert_eq!(s.wait_command(&id)["status"], "completed");
    let (status, answer) = s.post_as(Some(TEAM_A), "/v1/stacks/team-b-x/destroy", &json!({}));
    assert_eq!(status, 403, "{answer}");
    assert!(root.join("b").exists());
    // ... nor see it.
    let (status, answer) = s.get_as(Some(TEAM_A), "/v1/stacks");
    assert_eq!(status, 200);
    assert_eq!(answer["stacks"], json!([]), "{answer}");
    assert_eq!(s.get_as(Some(TEAM_A), &format!("/v1/commands/{id}")).0, 403);
    // Targets are the admin's: the operator may not set one up (here: a
    // `local` root of its choosing) ...
    let (status, answer) = s.post_as(
        Some(TEAM_A),
        "/v1/stacks/apply",
        &file_stack("team-a-web", &root, "a"),
    );
    assert_eq!(status, 403, "{answer}");
    assert!(!root.join("a").exists());
    // ... but applies its stacks on the targets an admin recorded; the
    // audit names who did.
    let (status, answer) = s.post("/v1/stacks/apply", &file_stack("team-a-web", &root, "a0"));
    assert_eq!(status, 202, "{answer}");
    let first = answer["command_id"].as_str().unwrap().to_owned();
    assert_eq!(s.wait_command(&first)["status"], "completed");
    let (status, answer) = s.post_as(
        Some(TEAM_A),
        "/v1/stacks/apply",
        &file_stack("team-a-web", &dir.path().join("elsewhere"), "a"),
    );
    assert_eq!(status, 403, "a changed root: {answer}");
    let (status, answer) = s.post_as(
        Some(TEAM_A),
        "/v1/stacks/apply",
        &file_stack("team-a-web", &root, "a"),
    );
    assert_eq!(status, 202, "{answer}");
    let mine = answer["command_id"].as_str().unwrap().to_owned();
    let done = s.wait_command(&mine);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["principal"], "team-a-ci", "{done}");
    assert_eq!(s.wait_command(&id)["principal"], "admin");
    // The log names who began it, never a token.
    let log = s.log();
    assert!(
        log.lines()
            .any(|l| l.contains("command begun") && l.contains("principal=team-a-ci")),
        "{log}"
    );
    assert!(!log.contains(TEAM_A) && !log.contains(ADMIN_TOKEN));
    // A scrape-only principal reads /metrics and nothing else.
    assert_eq!(s.get_as(Some(SCRAPER), "/v1/stacks").0, 403);
    assert_eq!(s.text_as(Some(SCRAPER), "/metrics").0, 200);
    let (_, list) = s.get_as(Some(TEAM_A), "/v1/commands");
    let stacks: Vec<&str> = list["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["stack"].as_str().unwrap())
        .collect();
    assert_eq!(stacks, ["team-a-web", "team-a-web"], "{list}");
    assert_eq!(list["commands"][0]["principal"], "team-a-ci");
    // Targets are for admins.
    assert_eq!(s.get_as(Some(VIEWER), "/v1/targets").0, 403);
    assert_eq!(s.get("/v1/targets").0, 200);
}

/// A raw request with the given headers; the status code.
fn raw_status(s: &Server, headers: &str) -> u16 {
    let addr = s.url("").trim_start_matches("http://").to_owned();
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "GET /v1/stacks HTTP/1.1\r\n{headers}Authorization: Bearer {ADMIN_TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = conn.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

#[test]
fn foreign_hosts_and_origins_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[]);
    let port = s.url("").rsplit(':').next().unwrap().to_owned();
    assert_eq!(raw_status(&s, &format!("Host: 127.0.0.1:{port}\r\n")), 200);
    assert_eq!(raw_status(&s, &format!("Host: localhost:{port}\r\n")), 200);
    // DNS rebinding: the attacker's name, pointed at 127.0.0.1.
    assert_eq!(
        raw_status(&s, &format!("Host: rebind.attacker.example:{port}\r\n")),
        421
    );
    assert_eq!(
        raw_status(
            &s,
            &format!("Host: 127.0.0.1:{port}\r\nOrigin: http://attacker.example\r\n")
        ),
        403
    );
    assert_eq!(
        raw_status(
            &s,
            &format!("Host: 127.0.0.1:{port}\r\nOrigin: http://localhost:{port}\r\n")
        ),
        200
    );
}

#[test]
fn insecure_no_auth_only_on_loopback_and_no_auth_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_orrery"))
            .arg("primary")
            .args(args)
            .env("ORRERY_DATA_DIR", dir.path().join("state"))
            .env_remove("ORRERY_AUTH_TOKENS")
            .env_remove("ORRERY_INSECURE_NO_AUTH")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[
        "--insecure-no-auth",
        "--listen",
        &format!("0.0.0.0:{}", free_port()),
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("loopback"),
        "{out:?}"
    );
    let out = run(&["--listen", &format!("127.0.0.1:{}", free_port())]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no authentication configured"),
        "{out:?}"
    );
}

#[test]
fn a_half_open_connection_is_closed_within_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &["--header-read-timeout", "1s"]);
    let addr = s.url("").trim_start_matches("http://").to_owned();
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.write_all(b"GET /v1/stacks HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Partial: ")
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    // The server closes it (EOF, a reset, or a 408): the read returns
    // well before the 10 s of the client's own timeout.
    let result = conn.read_to_end(&mut buf);
    let waited = started.elapsed();
    assert!(
        result.is_ok()
            || result
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{result:?}"
    );
    assert!(waited < Duration::from_secs(5), "closed after {waited:?}");
    // An idle connection (nothing sent) is closed too.
    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let _ = idle.read_to_end(&mut Vec::new());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn mtls_client_certificates_are_principals() {
    let dir = tempfile::tempdir().unwrap();
    if Command::new("openssl").arg("version").output().is_err()
        || Command::new("curl").arg("--version").output().is_err()
    {
        eprintln!("skipped: no openssl or curl");
        return;
    }
    assert!(make_certs(dir.path()), "openssl failed");
    let port = free_port();
    let tokens = tokens_file(dir.path());
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let mut child = tls_primary(dir.path(), port, &tokens)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let curl = |path: &str, cert: bool| -> (String, String) {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-s",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "--max-time",
            "10",
            "--cacert",
        ])
        .arg(dir.path().join("ca.pem"));
        if cert {
            cmd.arg("--cert")
                .arg(dir.path().join("client.pem"))
                .arg("--key")
                .arg(dir.path().join("client.key"));
        }
        let out = cmd
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        (code.to_owned(), body.to_owned())
    };
    Wait::new("/healthz over TLS", Duration::from_secs(30))
        .every(Duration::from_millis(100))
        .until(|| {
            assert!(
                child.try_wait().unwrap().is_none(),
                "{}",
                std::fs::read_to_string(dir.path().join("log")).unwrap()
            );
            curl("/healthz", false).0 == "200"
        });
    let (code, body) = curl("/v1/stacks", false);
    assert_eq!(code, "401", "{body}");
    let (code, body) = curl("/v1/stacks", true);
    assert_eq!(code, "200", "{body}");
    let (code, body) = curl("/v1/targets", true);
    assert_eq!(code, "403", "alice is an operator, not an admin: {body}");
    assert!(body.contains("alice"), "{body}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn up_generates_a_private_token_that_admits_its_holder() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_orrery"))
        .arg("up")
        .env("ORRERY_LISTEN", format!("127.0.0.1:{port}"))
        .env("ORRERY_DATA_DIR", &data)
        .env_remove("ORRERY_AUTH_TOKENS")
        .env_remove("ORRERY_INSECURE_NO_AUTH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // It says where the token is, then that it listens (bounded: the
    // process exits, closing stdout, if it cannot start).
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let path = data.join("api-token");
    assert_eq!(first, format!("API token written to {}", path.display()));
    assert!(lines
        .next()
        .unwrap()
        .unwrap()
        .contains("listening on http://"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let token = orrery_primary::http::auth::find_local_token(&data)
        .unwrap()
        .expect("the token");
    assert!(token.starts_with("orr_") && token.len() > 60);
    assert!(!first.contains(&token), "the token itself is not printed");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("http://127.0.0.1:{port}/v1/stacks");
    assert_eq!(agent.get(&url).call().unwrap().status(), 401);
    let ok = agent
        .get(&url)
        .header("authorization", format!("Bearer {token}"))
        .call()
        .unwrap();
    assert_eq!(ok.status(), 200);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_cli_records_the_local_user_and_status_shows_it() {
    let scratch = common::Scratch::new();
    let root = scratch.path().join("files");
    let body = file_stack("cli-stack", &root, "f");
    let file = scratch.write("stack.yaml", body["document"].as_str().unwrap());
    let mut apply = scratch.command(&["apply", file.to_str().unwrap(), "--yes"]);
    apply.env("USER", "audit-tester");
    let run = common::Run::from(apply.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    let status = scratch.orrery(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(
        status.stdout.contains("by local:audit-tester"),
        "{status:?}"
    );
    let json = scratch.orrery(&["status", "--output", "json"]);
    let record: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(record["principal"], "local:audit-tester");
}

#[test]
fn the_remote_file_read_stack_is_refused_and_discovery_never_visits_it() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("id_ed25519"), "PRIVATE-KEY-3b7d").unwrap();
    let s = server(dir.path(), &["--discover-every", "1s"]);
    // The attack: a target rooted at a directory of secrets and no
    // resources, for background discovery to read its files and serve
    // them back through /v1/resources.
    let body = json!({"document": format!(
        "stack: team-a-loot\ntargets:\n  - name: loot\n    plugin: local\n    config: {{ root: \"{}\" }}\nresources: []\n",
        secrets.display()
    )});
    let (status, answer) = s.post_as(None, "/v1/stacks/apply", &body);
    assert_eq!(status, 401, "{answer}");
    let (status, answer) = s.post_as(Some(TEAM_A), "/v1/stacks/apply", &body);
    assert_eq!(status, 403, "{answer}");
    // No target was recorded, so no discovery can walk it.
    let (status, targets) = s.get("/v1/targets");
    assert_eq!(status, 200);
    assert!(!targets.to_string().contains("loot"), "{targets}");
    let (status, resources) = s.get("/v1/resources");
    assert_eq!(status, 200);
    assert!(
        !resources.to_string().contains("PRIVATE-KEY"),
        "{resources}"
    );
}
