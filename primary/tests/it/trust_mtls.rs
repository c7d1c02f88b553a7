//! Issue #43, attack 6, against a real `orrery primary` over mTLS: a
//! client certificate whose subject is `CN=reader` with an `OU` holding
//! the DER bytes of a commonName `admin-user` is `reader`, not the admin.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::certs::{make_certs, tls_primary};
use crate::common::fleet::Killed;
use crate::common::server::free_port;

/// The CA of `make_certs` issuing `spoof.pem`: subject
/// `OU=<06 03 55 04 03 0c 0a "admin-user">, CN=reader`, the OU first so
/// that a scan of the subject's bytes meets the forged commonName first.
fn make_spoof(dir: &Path) -> bool {
    let sh = format!(
        r#"set -e
cd "{0}"
OU=$(printf '\006\003\125\004\003\014\012admin-user')
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout spoof.key -out spoof.csr -subj "/OU=$OU/CN=reader" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > spoof.ext
openssl x509 -req -in spoof.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out spoof.pem -days 2 -extfile spoof.ext 2>/dev/null
"#,
        dir.display()
    );
    Command::new("sh")
        .arg("-c")
        .arg(sh)
        .status()
        .is_ok_and(|s| s.success())
}

/// `curl` over HTTPS with client certificate `cert` (`None`: without):
/// the status and the body.
fn curl(dir: &Path, url: &str, cert: Option<&str>) -> (String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10"])
        .arg("--cacert")
        .arg(dir.join("ca.pem"));
    if let Some(name) = cert {
        cmd.arg("--cert")
            .arg(dir.join(format!("{name}.pem")))
            .arg("--key")
            .arg(dir.join(format!("{name}.key")));
    }
    let out = cmd.arg(url).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
    (code.to_owned(), body.to_owned())
}

#[test]
fn an_ou_holding_a_common_name_does_not_make_the_certificate_that_name() {
    let dir = tempfile::tempdir().unwrap();
    if Command::new("openssl").arg("version").output().is_err()
        || Command::new("curl").arg("--version").output().is_err()
    {
        println!("SKIP: no openssl or curl");
        return;
    }
    assert!(make_certs(dir.path()), "openssl failed");
    assert!(make_spoof(dir.path()), "openssl failed (spoof)");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[principal]]\nname = \"reader\"\ncertificates = [\"reader\"]\nroles = [\"viewer\"]\n\n\
         [[principal]]\nname = \"admin-user\"\ncertificates = [\"admin-user\"]\nroles = [\"admin\"]\n",
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
    let at = |path: &str| format!("https://127.0.0.1:{port}{path}");
    orrery_testing::wait_until("/healthz over TLS", Duration::from_secs(30), || {
        curl(dir.path(), &at("/healthz"), None).0 == "200"
    });
    // Admitted, as `reader`: a viewer reads the stacks...
    let (code, body) = curl(dir.path(), &at("/v1/stacks"), Some("spoof"));
    assert_eq!(code, "200", "{body}");
    // ...but is no admin: the targets are refused, naming `reader`.
    let (code, body) = curl(dir.path(), &at("/v1/targets"), Some("spoof"));
    assert_eq!(code, "403", "admitted as the admin: {body}");
    assert!(body.contains("`reader`"), "{body}");
    assert!(!body.contains("admin-user"), "{body}");
}
