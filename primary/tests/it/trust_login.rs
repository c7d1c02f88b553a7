//! Issue #43, attack 3, against a real `orrery primary`: the dashboard's
//! login (and the API) exhausted without a token by slow and oversized
//! bodies; a `metrics` token signing in; other principals' sessions
//! evicted by a flood of sign-ins.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::server::{with_principals, Server, ServerOptions, ADMIN_TOKEN};
use orrery_testing::Wait;

const VIEWER: &str = "orr_test_viewer_00000000000000000000000000000000";
const TEAM_A: &str = "orr_test_team_a_0000000000000000000000000000000";
const SCRAPER: &str = "orr_test_scraper_000000000000000000000000000000";

/// A server with the four principals; `env` as well (options given as
/// environment variables, so that a build without them still starts).
fn server(dir: &Path, env: &[(&str, &str)]) -> Server {
    server_logging(dir, env, false)
}

/// [`server`], with the server's own default log filter when
/// `default_log_filter`.
fn server_logging(dir: &Path, env: &[(&str, &str)], default_log_filter: bool) -> Server {
    with_principals(
        dir,
        &[
            ("watcher", VIEWER, r#"["viewer"]"#),
            ("team-a-ci", TEAM_A, r#"["operator:team-a-*"]"#),
            ("prometheus", SCRAPER, r#"["metrics"]"#),
        ],
        ServerOptions {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            default_log_filter,
            ..ServerOptions::default()
        },
    )
}

fn addr(s: &Server) -> String {
    s.url("").trim_start_matches("http://").to_owned()
}

/// Reads what the server sends until it closes the connection or `limit`
/// passes; returns the text and whether it closed.
fn read_until_closed(conn: &mut TcpStream, limit: Duration) -> (String, bool) {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (String::from_utf8_lossy(&got).into_owned(), false);
        }
        conn.set_read_timeout(Some(left.min(Duration::from_millis(200))))
            .unwrap();
        match conn.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), true),
        }
    }
}

fn status_of(answer: &str) -> Option<u16> {
    answer.split(' ').nth(1).and_then(|c| c.parse().ok())
}

/// A body sent a byte every 200 ms (the issue's attack sent one every
/// 2 s): the server answers 408 and closes the connection within the
/// body timeout, while the client would go on for a minute.
#[test]
fn a_slow_body_is_cut_off_within_the_body_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[("ORRERY_BODY_READ_TIMEOUT", "1s")]);
    let a = addr(&s);
    for (path, content_type, auth) in [
        (
            "/ui/login",
            "application/x-www-form-urlencoded",
            String::new(),
        ),
        (
            "/v1/stacks/plan",
            "application/json",
            format!("Authorization: Bearer {ADMIN_TOKEN}\r\n"),
        ),
    ] {
        let mut conn = TcpStream::connect(&a).unwrap();
        write!(
            conn,
            "POST {path} HTTP/1.1\r\nHost: {a}\r\nContent-Type: {content_type}\r\n{auth}Content-Length: 600\r\n\r\n"
        )
        .unwrap();
        let started = Instant::now();
        let mut answer = String::new();
        let mut closed = false;
        // 300 bytes at most over 60 s: the server must give up first.
        for _ in 0..300 {
            if conn.write_all(b"t").is_err() {
                closed = true;
                break;
            }
            let (text, eof) = read_until_closed(&mut conn, Duration::from_millis(200));
            answer.push_str(&text);
            if eof {
                closed = true;
                break;
            }
        }
        let waited = started.elapsed();
        assert!(closed, "{path}: still open after {waited:?}: {answer:?}");
        assert!(
            waited < Duration::from_secs(5),
            "{path}: closed only after {waited:?}"
        );
        assert_eq!(status_of(&answer), Some(408), "{path}: {answer:?}");
    }
    // Still serving.
    assert_eq!(s.get("/v1/stacks").0, 200);
}

/// A login form declaring 15 MiB: refused with 413 from its headers, the
/// body never read (the client sends 10 bytes of it and waits).
#[test]
fn an_oversize_login_form_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[]);
    let a = addr(&s);
    for length in [15 << 20, 64 << 10] {
        let mut conn = TcpStream::connect(&a).unwrap();
        write!(
            conn,
            "POST /ui/login HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\ntoken=orr_"
        )
        .unwrap();
        let started = Instant::now();
        let (answer, closed) = read_until_closed(&mut conn, Duration::from_secs(10));
        assert_eq!(status_of(&answer), Some(413), "{length}: {answer:?}");
        assert!(closed, "{length}: the connection stays open");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    // A chunked form (no length) past the limit is refused as it is read.
    let mut conn = TcpStream::connect(&a).unwrap();
    write!(
        conn,
        "POST /ui/login HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let chunk = "x".repeat(8 << 10);
    for _ in 0..4 {
        if write!(conn, "{:x}\r\n{chunk}\r\n", chunk.len()).is_err() {
            break;
        }
    }
    let (answer, _) = read_until_closed(&mut conn, Duration::from_secs(10));
    assert_eq!(status_of(&answer), Some(413), "{answer:?}");
    // The API's documents keep their own, larger limit.
    let (status, body) = s.post(
        "/v1/stacks/plan",
        &serde_json::json!({"document": format!("stack: s\n# {}\n", "x".repeat(64 << 10))}),
    );
    assert_eq!(status, 200, "{body}");
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// Signs in with `token`: the status and the session cookie, if any.
fn sign_in(agent: &ureq::Agent, s: &Server, token: &str) -> (u16, Option<String>) {
    let resp = agent
        .post(s.url("/ui/login"))
        .content_type("application/x-www-form-urlencoded")
        .send(format!("token={token}"))
        .unwrap();
    let cookie = resp
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned);
    (resp.status().as_u16(), cookie)
}

fn page_status(agent: &ureq::Agent, s: &Server, cookie: &str) -> u16 {
    agent
        .get(s.url("/ui/commands"))
        .header("cookie", cookie)
        .call()
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn a_metrics_token_cannot_sign_in_to_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[]);
    let agent = agent();
    let (status, cookie) = sign_in(&agent, &s, SCRAPER);
    assert_eq!(status, 403);
    assert_eq!(cookie, None);
    // It still scrapes.
    assert_eq!(s.text_as(Some(SCRAPER), "/metrics").0, 200);
    let (status, cookie) = sign_in(&agent, &s, VIEWER);
    assert_eq!(status, 303);
    assert_eq!(page_status(&agent, &s, &cookie.unwrap()), 200);
}

/// The issue's 10,000 sign-ins, by one principal: another principal's
/// session survives them.
#[test]
fn sign_ins_of_one_principal_do_not_evict_anothers_session() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[]);
    let agent = agent();
    let (status, cookie) = sign_in(&agent, &s, VIEWER);
    assert_eq!(status, 303);
    let watcher = cookie.unwrap();
    assert_eq!(page_status(&agent, &s, &watcher), 200);
    let mut last = None;
    for _ in 0..10_001 {
        let (status, cookie) = sign_in(&agent, &s, TEAM_A);
        assert_eq!(status, 303);
        last = cookie;
    }
    assert_eq!(
        page_status(&agent, &s, &watcher),
        200,
        "the watcher's session was evicted"
    );
    assert_eq!(page_status(&agent, &s, &last.unwrap()), 200);
}

/// Issue #43 (4): connections that never send a request are capped. With
/// `--max-connections 4`, of six idle connections at most four are held
/// and the others are answered 503 and closed at once; once the idle ones
/// go, the server serves again.
#[test]
fn connections_past_the_cap_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[("ORRERY_MAX_CONNECTIONS", "4")]);
    let a = addr(&s);
    let mut idle: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(&a).unwrap()).collect();
    let (mut held, mut refused) = (0, 0);
    for conn in &mut idle {
        let (answer, closed) = read_until_closed(conn, Duration::from_secs(2));
        if closed {
            assert_eq!(status_of(&answer), Some(503), "{answer:?}");
            assert!(answer.contains("too many connections"), "{answer:?}");
            refused += 1;
        } else {
            assert_eq!(answer, "", "an idle connection is sent nothing");
            held += 1;
        }
    }
    assert!(held <= 4, "{held} held past a cap of 4");
    assert!(refused >= 2, "only {refused} of 6 refused");
    drop(idle);
    Wait::new("a request served once the idle connections are gone", Duration::from_secs(20))
        .until(|| {
            let mut conn = TcpStream::connect(&a).unwrap();
            write!(
                conn,
                "GET /v1/stacks HTTP/1.1\r\nHost: {a}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            status_of(&read_until_closed(&mut conn, Duration::from_secs(5)).0) == Some(200)
        });
}

/// Issue #43 (9): the server's audit trail at its default log level: a 401
/// with what was asked, a 403 naming the principal, who started a command
/// and who canceled it; never a token.
#[test]
fn refusals_command_starts_and_cancels_are_logged_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let s = server_logging(dir.path(), &[], true);
    let wrong = "orr_test_wrong_000000000000000000000000000000000";
    assert_eq!(s.get_as(None, "/v1/stacks").0, 401);
    assert_eq!(s.get_as(Some(wrong), "/v1/stacks").0, 401);
    let other = serde_json::json!({"document": "stack: team-b-x\n"});
    assert_eq!(s.post_as(Some(VIEWER), "/v1/stacks/apply", &other).0, 403);

    // A chain of slow resources, canceled while it runs.
    let doc = crate::common::slow_chain("slow", 8, 400);
    let (status, accepted) = s.post("/v1/stacks/apply", &serde_json::json!({ "document": doc }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    let (status, reply) = s.post(&format!("/v1/commands/{id}/cancel"), &serde_json::json!({}));
    assert_eq!(status, 202, "{reply}");

    let log = Wait::new("the cancel in the server's log", Duration::from_secs(20)).until_ok(|| {
        let log = s.log();
        if log.contains("command canceled") {
            Ok(log)
        } else {
            Err(log)
        }
    });
    let line = |needles: &[&str]| {
        log.lines()
            .any(|l| l.contains("orrery_primary::audit") && needles.iter().all(|n| l.contains(n)))
    };
    assert!(line(&["401", "path=/v1/stacks"]), "{log}");
    assert!(line(&["403", "`watcher`"]), "{log}");
    assert!(
        line(&["command started", "principal=admin", &id, "stack=slow"]),
        "{log}"
    );
    assert!(line(&["command canceled", "principal=admin", &id]), "{log}");
    for token in [wrong, VIEWER, ADMIN_TOKEN] {
        assert!(!log.contains(token), "a token in the log: {log}");
    }
}

/// A `POST /v1/stacks/plan` of `token` declaring `length` bytes whose body
/// only starts: held until dropped. A probe racing it may take the last
/// bytes of a budget first, and then it is refused: [`Held::keep`] opens it
/// again.
struct Held {
    conn: TcpStream,
    addr: String,
    token: &'static str,
}

impl Held {
    fn open(addr: &str, token: &'static str) -> Held {
        let mut conn = TcpStream::connect(addr).unwrap();
        write!(
            conn,
            "POST /v1/stacks/plan HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer {token}\r\nContent-Length: 1048576\r\n\r\n{{\"document\": \""
        )
        .unwrap();
        Held {
            conn,
            addr: addr.to_owned(),
            token,
        }
    }

    /// Opens it again if the server answered it (refused it).
    fn keep(&mut self) {
        self.conn.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        let answered = !matches!(
            self.conn.read(&mut buf),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        self.conn.set_nonblocking(false).unwrap();
        if answered {
            *self = Held::open(&self.addr, self.token);
        }
    }
}

/// The status of a small, whole plan request of `token`.
fn small_plan(a: &str, token: &str) -> Option<u16> {
    let body = r#"{"document": "stack: team-a-s\n"}"#;
    let mut conn = TcpStream::connect(a).unwrap();
    write!(
        conn,
        "POST /v1/stacks/plan HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/json\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let (answer, _) = read_until_closed(&mut conn, Duration::from_secs(10));
    status_of(&answer)
}

/// Issue #44, item 5: one principal's large bodies held open cannot take
/// the memory every other principal needs. Past its own budget a
/// principal gets 429; past the server's, everyone gets 503; the bytes
/// come back when the bodies go.
#[test]
fn bodies_in_flight_are_bounded_per_principal_and_in_all() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(
        dir.path(),
        &[
            ("ORRERY_MAX_BODY_BYTES", "1048576"),
            ("ORRERY_MAX_PRINCIPAL_BODY_BYTES", "2097152"),
            ("ORRERY_MAX_BODY_BYTES_IN_FLIGHT", "3145728"),
        ],
    );
    let a = addr(&s);
    // Team A holds two 1 MiB bodies: its whole budget.
    let mut held_a = [Held::open(&a, TEAM_A), Held::open(&a, TEAM_A)];
    Wait::new("team A's third body refused (429)", Duration::from_secs(20))
        .every(Duration::from_millis(50))
        .until(|| {
            held_a.iter_mut().for_each(Held::keep);
            small_plan(&a, TEAM_A) == Some(429)
        });
    // The admin's bodies still go through.
    let status = small_plan(&a, ADMIN_TOKEN);
    assert!(
        !matches!(status, Some(429 | 503) | None),
        "the admin refused: {status:?}"
    );
    // With the admin's own 1 MiB held, the server's 3 MiB are in use.
    let mut held_admin = Held::open(&a, ADMIN_TOKEN);
    Wait::new("every body refused (503)", Duration::from_secs(20))
        .every(Duration::from_millis(50))
        .until(|| {
            held_a.iter_mut().for_each(Held::keep);
            held_admin.keep();
            small_plan(&a, ADMIN_TOKEN) == Some(503)
        });
    // Team A's bodies go: their bytes come back.
    drop(held_a);
    Wait::new("bodies served again", Duration::from_secs(20))
        .every(Duration::from_millis(50))
        .until(|| !matches!(small_plan(&a, ADMIN_TOKEN), Some(429 | 503) | None));
    drop(held_admin);
    assert_eq!(s.get("/v1/stacks").0, 200);
}
