use super::*;
use crate::plan::Change;

/// A layered stack: `net` ← `db`, `cache` ← `app` ← `web`, `worker`; and
/// `logs` on its own.
fn layered() -> BTreeMap<String, BTreeSet<String>> {
    let edges: [(&str, &[&str]); 7] = [
        ("net", &[]),
        ("db", &["net"]),
        ("cache", &["net"]),
        ("app", &["db", "cache"]),
        ("web", &["app"]),
        ("worker", &["app"]),
        ("logs", &[]),
    ];
    edges
        .iter()
        .map(|(l, on)| (l.to_string(), on.iter().map(|d| d.to_string()).collect()))
        .collect()
}

fn labels(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn sel(target: &[&str], exclude: &[&str]) -> Selection {
    Selection {
        target: target.iter().map(|s| s.to_string()).collect(),
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        replace: Vec::new(),
    }
}

#[test]
fn targets_bring_what_they_depend_on_and_excludes_take_their_dependents() {
    let deps = layered();
    let cases: [(&[&str], &[&str], &[&str]); 6] = [
        (
            &[],
            &[],
            &["net", "db", "cache", "app", "web", "worker", "logs"],
        ),
        (&["app"], &[], &["app", "db", "cache", "net"]),
        (
            &["web", "logs"],
            &[],
            &["web", "app", "db", "cache", "net", "logs"],
        ),
        (&[], &["db"], &["net", "cache", "logs"]),
        (&["web"], &["cache"], &["db", "net"]),
        (&["net"], &["net"], &[]),
    ];
    for (target, exclude, want) in cases {
        assert_eq!(
            selected(&deps, &sel(target, exclude)).unwrap(),
            labels(want),
            "--target {target:?} --exclude {exclude:?}"
        );
    }
}

#[test]
fn a_destroy_selects_over_dependents() {
    let dependents = reversed(&layered());
    assert_eq!(
        selected(&dependents, &sel(&["db"], &[])).unwrap(),
        labels(&["db", "app", "web", "worker"]),
        "destroying db destroys what depends on it"
    );
    assert_eq!(
        selected(&dependents, &sel(&[], &["app"])).unwrap(),
        labels(&["web", "worker", "logs"]),
        "keeping app keeps what it depends on"
    );
}

#[test]
fn unknown_labels_are_refused() {
    let deps = layered();
    assert_eq!(
        selected(&deps, &sel(&["nope"], &[])),
        Err(SelectError::UnknownLabel("nope".into()))
    );
    let replace = Selection {
        replace: vec!["gone".into()],
        ..Default::default()
    };
    assert_eq!(
        selected(&deps, &replace),
        Err(SelectError::UnknownLabel("gone".into()))
    );
}

fn change(label: &str, action: Action) -> Change {
    Change {
        label: label.into(),
        resource_type: "T".into(),
        target: "t".into(),
        action,
        fields: Vec::new(),
        diffs: Vec::new(),
        index: None,
    }
}

#[test]
fn restrict_drops_what_is_outside_and_forces_replaces() {
    let deps = layered();
    let all = ["net", "db", "cache", "app", "web", "worker", "logs"];
    let mut plan = Plan {
        changes: all.iter().map(|l| change(l, Action::NoOp)).collect(),
        ..Plan::default()
    };
    plan.changes[6].action = Action::Create;
    let selection = Selection {
        target: vec!["app".into()],
        exclude: Vec::new(),
        replace: vec!["db".into()],
    };
    restrict(&mut plan, &deps, &selection).unwrap();
    let kept: Vec<(&str, &Action)> = plan
        .changes
        .iter()
        .map(|c| (c.label.as_str(), &c.action))
        .collect();
    let replace = Action::Replace {
        create_before_delete: false,
    };
    assert_eq!(
        kept,
        [
            ("net", &Action::NoOp),
            ("db", &replace),
            ("cache", &Action::NoOp),
            ("app", &Action::NoOp)
        ]
    );

    let mut plan = Plan {
        changes: vec![change("logs", Action::Create)],
        ..Plan::default()
    };
    let replace_new = Selection {
        replace: vec!["logs".into()],
        ..Default::default()
    };
    assert_eq!(
        restrict(&mut plan, &deps, &replace_new),
        Err(SelectError::NotCreated("logs".into()))
    );
}
