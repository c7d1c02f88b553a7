//! A YAML alias bomb (issue #14 item 5) is refused, fast and in bounded
//! memory, by the HTTP API and by the CLI, naming the line. Before the
//! limits of `orrery_stack::limits`, this document cost `orrery plan`
//! 23 s and 1.6 GB, and killed a primary capped at 2 GiB.

use crate::common;

use std::time::{Duration, Instant};

use common::server::Server;
use common::Scratch;
use serde_json::json;

/// The line of the bomb on which the expanded size passes the limit: the
/// 4th alias of the 200,000-item list does.
const BOMB_LINE: usize = 12;

/// ~600 KB: a 200,000-item anchored list aliased 200 times, and that list
/// of copies aliased 200 times again (8 × 10⁹ nodes expanded).
fn bomb() -> String {
    let seed = vec!["x"; 200_000].join(", ");
    let copies = vec!["*a"; 200].join(", ");
    let again = vec!["*b"; 200].join(", ");
    let text = format!(
        "stack: bomb\n\
         targets:\n  - name: home\n    plugin: local\n    config: {{ root: /nonexistent, create_root: false }}\n\
         resources:\n  - label: bomb\n    type: Local::Fs::File\n    target: home\n    properties:\n\
         \x20     seed: &a [{seed}]\n\
         \x20     copies: &b [{copies}]\n\
         \x20     again: [{again}]\n"
    );
    assert!(text.len() > 590_000, "{}", text.len());
    assert!(text
        .lines()
        .nth(BOMB_LINE - 1)
        .unwrap()
        .contains("copies: &b"));
    text
}

/// A field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

const EXPECTED: &str =
    "the document expands to more than 1000000 nodes once its aliases are resolved";

#[test]
fn the_http_api_refuses_an_alias_bomb_fast_in_bounded_memory() {
    let server = Server::start();
    let pid = server.child.id();
    let document = bomb();
    // Warm the path (connection, JSON body, handler) with a small invalid
    // document so the baseline is a server that has served a request.
    let (status, _) = server.post(
        "/v1/stacks/plan",
        &json!({"document": "stack: [x\n", "source": "warm.yaml"}),
    );
    assert_eq!(status, 422);
    let baseline_kib = status_kib(pid, "VmRSS");
    for endpoint in ["/v1/stacks/plan", "/v1/stacks/apply"] {
        let started = Instant::now();
        let (status, answer) = server.post(
            endpoint,
            &json!({"document": document, "source": "bomb.yaml"}),
        );
        let elapsed = started.elapsed();
        eprintln!("{endpoint}: {status} in {elapsed:?}");
        assert_eq!(status, 413, "{endpoint}: {answer}");
        // Bounded, not fast: expanding the bomb would take minutes and
        // gigabytes; the bound leaves room for a loaded machine.
        assert!(
            elapsed < Duration::from_secs(15),
            "{endpoint}: answered in {elapsed:?}"
        );
        let error = &answer["errors"][0];
        assert_eq!(error["file"], "bomb.yaml", "{answer}");
        assert_eq!(error["line"], BOMB_LINE, "{answer}");
        assert_eq!(error["column"], 7, "{answer}");
        assert_eq!(error["message"], EXPECTED, "{answer}");
    }
    let peak_kib = status_kib(pid, "VmHWM");
    let rss_kib = status_kib(pid, "VmRSS");
    eprintln!(
        "server RSS: baseline {} KiB, now {} KiB, peak {} KiB",
        baseline_kib, rss_kib, peak_kib
    );
    assert!(
        peak_kib < baseline_kib + 100 * 1024,
        "peak RSS {peak_kib} KiB against a baseline of {baseline_kib} KiB"
    );
    // Still serving, and nothing was recorded.
    let (status, stacks) = server.get("/v1/stacks");
    assert_eq!(status, 200);
    assert_eq!(stacks["stacks"], json!([]), "{stacks}");
}

#[test]
fn orrery_plan_refuses_an_alias_bomb_fast_naming_the_line() {
    let scratch = Scratch::new();
    let file = scratch.write("bomb.yaml", &bomb());
    let started = Instant::now();
    let run = scratch.orrery(&["plan", file.to_str().unwrap()]);
    let elapsed = started.elapsed();
    eprintln!("orrery plan: exit {} in {elapsed:?}", run.code);
    assert_eq!(run.code, 1, "{run:?}");
    // Where: the line's content from its first column (the line is cut).
    let expected = format!(
        "error: {EXPECTED}\n   --> {}:{BOMB_LINE}:7\n",
        file.display()
    );
    assert!(
        run.stderr.contains(&expected),
        "expected {expected:?} in {run:?}"
    );
    // The process, its start included; building the bomb took 23 s. The
    // bound leaves room for a loaded machine.
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
}
