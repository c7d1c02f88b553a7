//! Live progress that scales: without a terminal a 10,000-resource apply
//! prints a summary line every few seconds, not a line per transition; on
//! a pseudo-terminal it shows a progress bar and colours, and `NO_COLOR`
//! turns the colours off.

use crate::common;

use common::{pty, Scratch};

fn testbed_stack(name: &str, n: usize, config: &str) -> String {
    let mut doc = format!(
        "stack: {name}\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {config}\nresources:\n"
    );
    for i in 0..n {
        doc.push_str(&format!(
            "  - label: thing-{i}\n    type: Testbed::Async::Thing\n    target: lab\n    properties: {{ name: thing-{i}, value: {i} }}\n"
        ));
    }
    doc
}

#[test]
fn a_10000_resource_apply_without_a_terminal_prints_fewer_than_100_lines() {
    let scratch = Scratch::new();
    let file = scratch.write("big.yaml", &testbed_stack("big", 10_000, "{ polls: 1 }"));
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The plan names every resource; what follows it is the progress.
    let progress: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Plan: "))
        .skip(1)
        .collect();
    assert!(
        progress.len() < 100,
        "{} lines of progress:\n{}",
        progress.len(),
        progress.join("\n")
    );
    assert!(
        progress
            .iter()
            .any(|l| l.starts_with("Done in") && l.contains("10000 succeeded")),
        "{progress:?}"
    );
    assert!(
        progress.contains(&"  testbed/lab: 10000 succeeded, 0 did not"),
        "the end summary by plugin and target: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|l| l.starts_with("  slowest: create thing-")),
        "{progress:?}"
    );
    assert!(!run.stdout.contains('\x1b'), "no colour without a terminal");
}

#[test]
fn on_a_terminal_the_apply_shows_a_progress_bar_in_colour_unless_no_color() {
    let scratch = Scratch::new();
    let file = scratch.write(
        "tty.yaml",
        &testbed_stack("tty", 200, "{ polls: 1, delay_ms: 300 }"),
    );
    let file = file.to_str().unwrap();

    let mut plan = scratch.command(&["plan", file]);
    plan.env_remove("NO_COLOR");
    let (code, shown) = pty::run(plan);
    assert_eq!(code, 2, "{shown}");
    assert!(
        shown.contains("\x1b[32m  + create\x1b[0m thing-0"),
        "{shown:?}"
    );

    let mut plan = scratch.command(&["plan", file]);
    plan.env("NO_COLOR", "1");
    let (code, plain) = pty::run(plan);
    assert_eq!(code, 2, "{plain}");
    assert!(plain.contains("  + create thing-0"), "{plain:?}");
    assert!(!plain.contains("\x1b[3"), "NO_COLOR: no colour: {plain:?}");

    let mut apply = scratch.command(&["apply", file, "--yes"]);
    apply.env_remove("NO_COLOR");
    let (code, shown) = pty::run(apply);
    assert_eq!(code, 0, "{shown}");
    // The bar: counts, elapsed time and ETA, redrawn in place; no line
    // per operation.
    assert!(shown.contains("in flight"), "{shown:?}");
    assert!(shown.contains(" remaining ETA "), "{shown:?}");
    assert!(shown.contains("/200 "), "{shown:?}");
    assert!(!shown.contains("create thing-7: succeeded"), "{shown:?}");
    assert!(shown.contains("Done in"), "{shown:?}");
}
