//! Invalid stack documents: a message naming the resource and the problem,
//! a non-zero exit, and no resource touched.

mod common;

use common::Scratch;

const HEAD: &str = "stack: bad\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n";

fn check(resources: &str, expected: &[&str]) {
    let scratch = Scratch::new();
    let file = scratch.write("bad.yaml", &format!("{HEAD}{resources}"));
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 1, "{run:?}");
    for needle in expected {
        assert!(
            run.stderr.contains(needle),
            "expected {needle:?} in {run:?}"
        );
    }
    assert!(
        run.stderr.contains("nothing was changed") || run.stderr.contains("error"),
        "{run:?}"
    );
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

#[test]
fn unknown_type() {
    check(
        "  - label: x\n    type: Local::Fs::Socket\n    target: home\n    properties: { path: a }\n",
        &["bad.yaml:7: resource `x`: unknown type `Local::Fs::Socket`: plugin `local` does not announce it"],
    );
}

#[test]
fn missing_required_field() {
    check(
        "  - label: d\n    type: Local::Fs::Directory\n    target: home\n    properties: { mode: 493 }\n",
        &["resource `d`: missing required field `path`"],
    );
}

#[test]
fn unknown_field() {
    check(
        "  - label: d\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: a, colour: blue }\n",
        &["resource `d`: unknown field `colour` for type `Local::Fs::Directory`"],
    );
}

#[test]
fn reference_to_missing_resource_and_property() {
    check(
        "  - label: d\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${nope.path}\" }\n  - label: e\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${d.size}\" }\n",
        &[
            "resource `d`: references resource `nope`, which the stack does not declare",
            "resource `e`: references `d.size`, but that resource's type has no property `size`",
        ],
    );
}

#[test]
fn dependency_cycle_names_every_member() {
    check(
        "  - label: a\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${c.path}/a\" }\n  - label: b\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${a.path}/b\" }\n  - label: c\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: \"${b.path}/c\" }\n",
        &["dependency cycle:", "a", "b", "c"],
    );
}

#[test]
fn syntax_errors_name_the_line() {
    check("  - label: [unclosed\n", &["bad.yaml:7"]);
}

#[test]
fn unknown_target_and_plugin() {
    let scratch = Scratch::new();
    let file = scratch.write(
        "bad.yaml",
        "stack: bad\ntargets:\n  - name: far\n    plugin: nosuch\nresources: []\n",
    );
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("plugin `nosuch` not found"), "{run:?}");
}
