//! Test certificates made with `openssl`.

use std::path::Path;
use std::process::Command;

/// `openssl` making a CA, a server certificate for 127.0.0.1 and a client
/// certificate for `alice.example.com`.
pub fn make_certs(dir: &Path) -> bool {
    let sh = format!(
        r#"set -e
cd "{0}"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out client.csr -subj /CN=alice.example.com 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext 2>/dev/null
"#,
        dir.display()
    );
    Command::new("sh")
        .arg("-c")
        .arg(sh)
        .status()
        .is_ok_and(|s| s.success())
}

/// `orrery primary` on `127.0.0.1:port` over TLS with [`make_certs`]'s
/// server certificate, admitting client certificates of its CA, with the
/// principals of `tokens` and its state under `dir`. The caller chooses
/// its output and spawns it.
pub fn tls_primary(dir: &Path, port: u16, tokens: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
    cmd.arg("primary")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--auth-tokens")
        .arg(tokens)
        .arg("--api-tls-cert")
        .arg(dir.join("server.pem"))
        .arg("--api-tls-key")
        .arg(dir.join("server.key"))
        .arg("--tls-client-ca")
        .arg(dir.join("ca.pem"))
        .env("ORRERY_DATA_DIR", dir.join("state"));
    cmd
}
