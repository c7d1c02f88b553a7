//! The dashboard over TLS against a real `orrery primary`: signing in with
//! the client certificate (mTLS) and a `Secure` session cookie.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::certs::{make_certs, tls_primary};
use common::fleet::Killed;
use common::server::free_port;

/// `curl` over HTTPS: the status, the headers and the body.
fn curl(dir: &Path, args: &[&str], cert: bool) -> (String, String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-D", "-", "--max-time", "10", "--cacert"])
        .arg(dir.join("ca.pem"));
    if cert {
        cmd.arg("--cert")
            .arg(dir.join("client.pem"))
            .arg("--key")
            .arg(dir.join("client.key"));
    }
    let out = cmd.args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).unwrap_or_default().to_owned();
    (status, head.to_owned(), body.to_owned())
}

#[test]
fn the_client_certificate_signs_in_with_a_secure_cookie() {
    let dir = tempfile::tempdir().unwrap();
    if Command::new("openssl").arg("version").output().is_err()
        || Command::new("curl").arg("--version").output().is_err()
    {
        println!("SKIP: no openssl or curl");
        return;
    }
    assert!(make_certs(dir.path()), "openssl failed");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[principal]]\nname = \"alice\"\ncertificates = [\"alice.example.com\"]\nroles = [\"operator\"]\n",
    )
    .unwrap();
    let port = free_port();
    let _primary = Killed(
        tls_primary(dir.path(), port, &tokens)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("https://127.0.0.1:{port}");
    let at = |path: &str| format!("{base}{path}");
    orrery_testing::wait_until("/healthz over TLS", Duration::from_secs(30), || {
        curl(dir.path(), &[&at("/healthz")], false).0 == "200"
    });
    let (status, _, body) = curl(dir.path(), &[&at("/ui/login")], true);
    assert_eq!(status, "200");
    assert!(
        body.contains("Sign in with the client certificate"),
        "{body}"
    );
    let origin = format!("Origin: {base}");
    let login = |cert| {
        curl(
            dir.path(),
            &["-H", &origin, "--data", "", &at("/ui/login")],
            cert,
        )
    };
    // Without a certificate (or a token) nobody signs in.
    let (status, head, _) = login(false);
    assert_eq!(status, "401", "{head}");
    assert!(!head.to_ascii_lowercase().contains("set-cookie"), "{head}");
    let (status, head, body) = login(true);
    assert_eq!(status, "303", "{head}{body}");
    let cookie = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .expect("a session cookie")
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/ui"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let pair = cookie
        .split_once(':')
        .unwrap()
        .1
        .split(';')
        .next()
        .unwrap()
        .trim()
        .to_owned();
    let (status, head, body) = curl(
        dir.path(),
        &["-H", &format!("Cookie: {pair}"), &at("/ui/commands")],
        true,
    );
    assert_eq!(status, "200", "{head}");
    assert!(body.contains("alice"), "the principal is the certificate's");
    assert!(
        head.contains("content-security-policy: default-src 'self'"),
        "{head}"
    );
}
