//! Invalid stack documents: a message naming the resource and the problem,
//! a non-zero exit, and no resource touched.

use crate::common;

use common::{Run, Scratch};

const HEAD: &str = "stack: bad\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n";

/// What `orrery apply` printed from its `error: ` line on, the scratch
/// directory left out of paths (`bad.yaml:7`, not `/tmp/…/bad.yaml:7`).
fn error_lines(run: &Run, scratch: &Scratch) -> Vec<String> {
    let dir = format!("{}/", scratch.path().display());
    run.stderr
        .lines()
        .skip_while(|l| !l.starts_with("error: "))
        .map(|l| l.replace(&dir, ""))
        .collect()
}

/// Applies the stack with `resources` and checks that it failed with
/// exactly `expected` as the error lines, having touched nothing.
fn check(resources: &str, expected: &[&str]) {
    let scratch = Scratch::new();
    let file = scratch.write("bad.yaml", &format!("{HEAD}{resources}"));
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(error_lines(&run, &scratch), expected, "{run:?}");
    let site = scratch.path().join("site");
    let touched = std::fs::read_dir(&site).map(|d| d.count()).unwrap_or(0);
    assert_eq!(touched, 0, "no resource was created");
    assert!(
        !scratch.path().join("state/state.db").exists()
            || scratch
                .orrery(&["inventory"])
                .stdout
                .contains("0 resources")
    );
}

/// A stack that does not validate: each problem as a compiler shows it
/// (message, `file:line:column`, the line, a caret), then this line.
const INVALID_1: &str = "error: the stack is invalid (1 problem); nothing was changed";

#[test]
fn unknown_type() {
    check(
        "  - label: x\n    type: Local::Fs::Socket\n    target: home\n    properties: { path: a }\n",
        &[
            "error: resource `x`: unknown type `Local::Fs::Socket`: plugin `local` does not announce it",
            "  --> bad.yaml:8:11",
            "  |",
            "8 |     type: Local::Fs::Socket",
            "  |           ^^^^^^^^^^^^^^^^^",
            "",
            INVALID_1,
        ],
    );
}

#[test]
fn missing_required_field() {
    check(
        "  - label: d\n    type: Local::Fs::Directory\n    target: home\n    properties: { mode: 493 }\n",
        &[
            "error: resource `d`: missing required field `path`",
            "   --> bad.yaml:10:5",
            "   |",
            "10 |     properties: { mode: 493 }",
            "   |     ^^^^^^^^^^",
            "",
            INVALID_1,
        ],
    );
}

#[test]
fn unknown_field() {
    check(
        "  - label: d\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: a, colour: blue }\n",
        &[
            "error: resource `d`: unknown field `colour` for type `Local::Fs::Directory`",
            "   --> bad.yaml:10:28",
            "   |",
            "10 |     properties: { path: a, colour: blue }",
            "   |                            ^^^^^^",
            "",
            INVALID_1,
        ],
    );
}

#[test]
fn reference_to_missing_resource_and_property() {
    check(
        "  - label: d\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${nope.path}\" }\n  - label: e\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${d.size}\" }\n",
        &[
            "error: resource `d`: references resource `nope`, which the stack does not declare",
            "   --> bad.yaml:10:28",
            "   |",
            "10 |     properties: { path: \"${nope.path}\" }",
            "   |                            ^^^^",
            "",
            "error: resource `e`: references `d.size`, but that resource's type has no property `size`",
            "   --> bad.yaml:14:28",
            "   |",
            "14 |     properties: { path: \"${d.size}\" }",
            "   |                            ^^^^^^",
            "",
            "error: the stack is invalid (2 problems); nothing was changed",
        ],
    );
}

#[test]
fn dependency_cycle_names_every_member() {
    check(
        "  - label: a\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${c.path}/a\" }\n  - label: b\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${a.path}/b\" }\n  - label: c\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${b.path}/c\" }\n",
        &[
            "error: resource `b`: dependency cycle: b -> c -> a -> b",
            "   --> bad.yaml:11:12",
            "   |",
            "11 |   - label: b",
            "   |            ^",
            "",
            INVALID_1,
        ],
    );
}

#[test]
fn syntax_errors_name_the_line() {
    // Found where the parser meets it: a stray `:` on its line, an
    // unclosed list where the text ends.
    check(
        "  - label: a\n    type: Local::Fs::Directory: x\n    target: home\n",
        &[
            "error: mapping values are not allowed in this context",
            "  --> bad.yaml:8:31",
            "  |",
            "8 |     type: Local::Fs::Directory: x",
            "  |                               ^",
            "",
            INVALID_1,
        ],
    );
    check(
        "  - label: [unclosed\n",
        &[
            "error: while parsing a flow sequence, expected ',' or ']'",
            "  --> bad.yaml:8:1",
            "  |",
            "8 | ",
            "  | ^",
            "",
            INVALID_1,
        ],
    );
}

#[test]
fn shape_errors_name_the_line() {
    check(
        "  - label: a\n    type: Local::Fs::Directory\n    target: home\n    colour: blue\n",
        &[
            "error: resources[0]: unknown field `colour`, expected one of `label`, `type`, `target`, `properties`, `for_each`, `count`, `enabled`, `depends_on`, `protect`, `ignore_changes`, `import`",
            "   --> bad.yaml:10:5",
            "   |",
            "10 |     colour: blue",
            "   |     ^",
            "",
            INVALID_1,
        ],
    );
}

#[test]
fn unknown_target_and_plugin() {
    let scratch = Scratch::new();
    let file = scratch.write(
        "bad.yaml",
        "stack: bad\ntargets:\n  - name: far\n    plugin: nosuch\nresources: []\n",
    );
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 1, "{run:?}");
    let lines = error_lines(&run, &scratch);
    assert_eq!(lines.len(), 7, "{run:?}");
    assert!(
        lines[0]
            .starts_with("error: plugin `nosuch` not found: looked for `orrery-plugin-nosuch` in "),
        "{run:?}"
    );
    assert_eq!(
        lines[1..],
        [
            "  --> bad.yaml:4:13",
            "  |",
            "4 |     plugin: nosuch",
            "  |             ^^^^^^",
            "",
            INVALID_1
        ],
        "{run:?}"
    );
}
