//! Planner tests: every action, replacement order from the hints, secrets
//! compared by keyed hash, unknown-until-applied references, reconcile and
//! patch modes.

use orrery_plugin_sdk::{field, resource};
use orrery_schema::{EdgeKind, PropertyMap, ResourceSchema, UpdateMethod, Value};

use super::*;
use crate::test_support::{self as ts, s, stack, stored, StackBuilder};

/// One type with a field of every planning-relevant kind.
fn schema_t() -> ResourceSchema {
    resource("T")
        .field(field::string("path").required().create_only())
        .field(field::integer("mode"))
        .field(field::string("zone").update_method(UpdateMethod::CreateBeforeDelete))
        .field(
            field::string("size")
                .create_only()
                .update_method(UpdateMethod::CreateBeforeDelete),
        )
        .field(field::string("rack").update_method(UpdateMethod::DeleteBeforeCreate))
        .field(field::string("owner").provider_default())
        .field(field::string("note"))
        .field(field::string("password").write_only())
        .field(field::string("token").opaque())
        .field(field::string("key").write_only().create_only())
        .field(field::string("id").read_only())
        .build()
}

/// A type that references others: `src` in place, `anchor` create-only,
/// `mount` an attachment, `after` needed only at run time.
fn schema_u() -> ResourceSchema {
    resource("U")
        .field(field::string("src"))
        .field(field::string("anchor").create_only())
        .field(field::string("mount").edge_kind(EdgeKind::AttachesTo))
        .field(field::string("after").edge_kind(EdgeKind::RuntimeDependency))
        .build()
}

fn catalog() -> Catalog {
    ts::catalog(vec![schema_t(), schema_u()])
}

fn hash(field: &str, value: &str) -> String {
    ts::hasher().hash(field, &s(value))
}

/// A stored `T` labelled `a` with `props` and secret hashes `secrets` (clear
/// values, hashed here).
fn stored_a(props: &[(&str, Value)], secrets: &[(&str, &str)]) -> StoredResource {
    let mut r = stored("a", "T", props);
    for (k, v) in secrets {
        r.secret_hashes.insert((*k).to_owned(), hash(k, v));
    }
    r
}

fn one(stack: StackBuilder, stored: &[StoredResource]) -> Change {
    let plan = ts::plan(&stack.build(), &catalog(), stored, Mode::Reconcile);
    assert_eq!(plan.changes.len(), 1, "{plan:?}");
    plan.changes.into_iter().next().unwrap()
}

const DBC: Action = Action::Replace {
    create_before_delete: false,
};
const CBD: Action = Action::Replace {
    create_before_delete: true,
};

#[test]
fn each_field_kind_plans_the_right_action() {
    let base = || vec![("path", s("x")), ("mode", Value::Int(1))];
    type Case = (
        &'static str,
        Vec<(&'static str, Value)>,
        Vec<(&'static str, &'static str)>,
        Action,
        &'static [&'static str],
    );
    let with = |extra: &[(&'static str, Value)]| {
        let mut p = base();
        p.extend(extra.iter().cloned());
        p
    };
    // (what, desired properties, stored secret values, action, fields);
    // the stored properties are always path=x, mode=1, zone=z1, size=m,
    // rack=r1, note=n, id=i-1.
    let cases: Vec<Case> = vec![
        (
            "identical",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
            ]),
            vec![],
            Action::NoOp,
            &[],
        ),
        (
            "in-place change",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("other")),
            ]),
            vec![],
            Action::Update,
            &["note"],
        ),
        (
            "in-place field removed",
            with(&[("zone", s("z1")), ("size", s("m")), ("rack", s("r1"))]),
            vec![],
            Action::Update,
            &["note"],
        ),
        (
            "two in-place changes, sorted",
            vec![
                ("path", s("x")),
                ("mode", Value::Int(2)),
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("o")),
            ],
            vec![],
            Action::Update,
            &["mode", "note"],
        ),
        (
            "create-only change: delete before create",
            vec![
                ("path", s("y")),
                ("mode", Value::Int(1)),
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
            ],
            vec![],
            DBC,
            &["path"],
        ),
        (
            "createBeforeDelete change",
            with(&[
                ("zone", s("z2")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
            ]),
            vec![],
            CBD,
            &["zone"],
        ),
        (
            "create-only with createBeforeDelete",
            with(&[
                ("zone", s("z1")),
                ("size", s("l")),
                ("rack", s("r1")),
                ("note", s("n")),
            ]),
            vec![],
            CBD,
            &["size"],
        ),
        (
            "explicit deleteBeforeCreate without create-only",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r2")),
                ("note", s("n")),
            ]),
            vec![],
            DBC,
            &["rack"],
        ),
        (
            "both orders: delete-before-create wins",
            with(&[
                ("zone", s("z2")),
                ("size", s("m")),
                ("rack", s("r2")),
                ("note", s("n")),
            ]),
            vec![],
            DBC,
            &["rack", "zone"],
        ),
        (
            "both orders, with an in-place change",
            vec![
                ("path", s("y")),
                ("mode", Value::Int(1)),
                ("zone", s("z2")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("o")),
            ],
            vec![],
            DBC,
            &["note", "path", "zone"],
        ),
        (
            "in-place and createBeforeDelete",
            with(&[
                ("zone", s("z2")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("o")),
            ]),
            vec![],
            CBD,
            &["note", "zone"],
        ),
        (
            "read-only output differs: ignored",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("id", s("i-2")),
            ]),
            vec![],
            Action::NoOp,
            &[],
        ),
        (
            "provider default absent: not a change",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
            ]),
            vec![],
            Action::NoOp,
            &[],
        ),
        (
            "provider default given: compared",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("owner", s("me")),
            ]),
            vec![],
            Action::Update,
            &["owner"],
        ),
        (
            "unchanged secret",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("password", s("hunter2")),
            ]),
            vec![("password", "hunter2")],
            Action::NoOp,
            &[],
        ),
        (
            "changed secret",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("password", s("hunter3")),
            ]),
            vec![("password", "hunter2")],
            Action::Update,
            &["password"],
        ),
        (
            "secret never applied",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("password", s("hunter2")),
            ]),
            vec![],
            Action::Update,
            &["password"],
        ),
        (
            "secret removed",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
            ]),
            vec![("password", "hunter2")],
            Action::Update,
            &["password"],
        ),
        (
            "unchanged opaque",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("token", s("tok")),
            ]),
            vec![("token", "tok")],
            Action::NoOp,
            &[],
        ),
        (
            "changed opaque",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("token", s("tok2")),
            ]),
            vec![("token", "tok")],
            Action::Update,
            &["token"],
        ),
        (
            "changed create-only secret",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("key", s("k2")),
            ]),
            vec![("key", "k1")],
            DBC,
            &["key"],
        ),
        (
            "unchanged create-only secret",
            with(&[
                ("zone", s("z1")),
                ("size", s("m")),
                ("rack", s("r1")),
                ("note", s("n")),
                ("key", s("k1")),
            ]),
            vec![("key", "k1")],
            Action::NoOp,
            &[],
        ),
    ];
    let stored_props = [
        ("path", s("x")),
        ("mode", Value::Int(1)),
        ("zone", s("z1")),
        ("size", s("m")),
        ("rack", s("r1")),
        ("note", s("n")),
        ("id", s("i-1")),
    ];
    for (what, desired, secrets, action, fields) in cases {
        let change = one(
            stack().resource("a", "T", &desired),
            &[stored_a(&stored_props, &secrets)],
        );
        assert_eq!(change.action, action, "{what}");
        assert_eq!(change.fields, *fields, "{what}");
        assert_eq!(change.index, Some(0), "{what}");
        assert_eq!(
            (
                change.label.as_str(),
                change.resource_type.as_str(),
                change.target.as_str()
            ),
            ("a", "T", "t"),
            "{what}"
        );
    }
}

#[test]
fn the_order_of_hints_does_not_decide_which_replacement_wins() {
    // The delete-before-create field declared before and after the
    // create-before-delete one.
    for dbc_first in [true, false] {
        let dbc = field::string("d").create_only();
        let cbd = field::string("c").update_method(UpdateMethod::CreateBeforeDelete);
        let (f1, f2) = if dbc_first { (dbc, cbd) } else { (cbd, dbc) };
        let catalog = ts::catalog(vec![resource("T").field(f1).field(f2).build()]);
        let st = stack()
            .resource("a", "T", &[("d", s("2")), ("c", s("2"))])
            .build();
        let old = stored("a", "T", &[("d", s("1")), ("c", s("1"))]);
        let plan = ts::plan(&st, &catalog, &[old], Mode::Reconcile);
        assert_eq!(plan.changes[0].action, DBC, "dbc_first={dbc_first}");
        assert_eq!(plan.changes[0].fields, ["c", "d"]);
    }
}

#[test]
fn a_new_label_is_created() {
    let change = one(stack().resource("a", "T", &[("path", s("x"))]), &[]);
    assert_eq!(change.action, Action::Create);
    assert!(change.fields.is_empty());
    assert_eq!(change.index, Some(0));
}

#[test]
fn a_changed_type_or_target_replaces_delete_before_create() {
    for (what, old) in [
        ("type", stored("a", "U", &[("src", s("x"))])),
        (
            "target",
            StoredResource {
                target: "u".into(),
                ..stored("a", "T", &[("path", s("x"))])
            },
        ),
    ] {
        let change = one(stack().resource("a", "T", &[("path", s("x"))]), &[old]);
        assert_eq!(change.action, DBC, "{what}");
        assert_eq!(change.fields, ["type/target"], "{what}");
    }
}

#[test]
fn secret_values_never_appear_in_the_plan() {
    let st = stack().resource(
        "a",
        "T",
        &[("path", s("x")), ("password", s("hunter3-very-secret"))],
    );
    let old = stored_a(&[("path", s("x"))], &[("password", "hunter2-very-secret")]);
    let plan = ts::plan(&st.build(), &catalog(), &[old], Mode::Reconcile);
    assert_eq!(plan.changes[0].action, Action::Update);
    let shown = format!("{plan:?}");
    assert!(!shown.contains("hunter"), "{shown}");
    // Nor does the hash reveal it: it is keyed.
    let other = SecretHasher::new(b"another key".to_vec());
    assert_ne!(
        other.hash("password", &s("x")),
        ts::hasher().hash("password", &s("x"))
    );
    assert_ne!(
        ts::hasher().hash("password", &s("x")),
        ts::hasher().hash("token", &s("x")),
        "the field name is part of the hash"
    );
    assert_eq!(
        ts::hasher().hash("password", &s("x")).len(),
        64,
        "hex of SHA-256"
    );
    assert_eq!(format!("{:?}", ts::hasher()), "SecretHasher(..)");
}

#[test]
fn a_secret_hashed_under_another_key_counts_as_changed() {
    let mut old = stored("a", "T", &[("path", s("x"))]);
    old.secret_hashes.insert(
        "password".into(),
        SecretHasher::new(b"old key".to_vec()).hash("password", &s("pw")),
    );
    let change = one(
        stack().resource("a", "T", &[("path", s("x")), ("password", s("pw"))]),
        &[old],
    );
    assert_eq!(change.action, Action::Update);
    assert_eq!(change.fields, ["password"]);
}

#[test]
fn secret_fields_lists_write_only_and_opaque_fields() {
    let fields: Vec<String> = secret_fields(&schema_t()).into_keys().collect();
    assert_eq!(fields, ["key", "password", "token"]);
}

/// `b` (type U) references `a` through `field`; `a` is planned as `a_action`
/// would make it, `b` is stored with `src`/`anchor` = `b_stored`.
fn plan_dependent(
    a_desired: &[(&str, Value)],
    a_stored: Option<StoredResource>,
    b_desired: &[(&str, Value)],
    b_stored: &[(&str, Value)],
) -> Plan {
    let st = stack()
        .resource("b", "U", b_desired)
        .resource("a", "T", a_desired)
        .build();
    let mut stored_list: Vec<StoredResource> = a_stored.into_iter().collect();
    stored_list.push(stored("b", "U", b_stored));
    ts::plan(&st, &catalog(), &stored_list, Mode::Reconcile)
}

fn actions(plan: &Plan) -> Vec<(String, Action, Vec<String>)> {
    plan.changes
        .iter()
        .map(|c| (c.label.clone(), c.action.clone(), c.fields.clone()))
        .collect()
}

#[test]
fn references_unknown_until_applied_count_as_changes() {
    let a_old = || {
        stored(
            "a",
            "T",
            &[("path", s("x")), ("mode", Value::Int(1)), ("id", s("i-1"))],
        )
    };
    let a_same = [("path", s("x")), ("mode", Value::Int(1))];
    let a_mode2 = [("path", s("x")), ("mode", Value::Int(2))];
    let a_new_path = [("path", s("y")), ("mode", Value::Int(1))];
    type Case<'a> = (
        &'a str,
        &'a [(&'a str, Value)],
        Option<StoredResource>,
        Vec<(&'a str, Value)>,
        Vec<(&'a str, Value)>,
        Action,
        Action,
        &'a [&'a str],
    );
    // (what, a desired, a stored, b desired, b stored, a's action, b's action, b's fields)
    let cases: Vec<Case<'_>> = vec![
        (
            "a created: b's input unknown",
            &a_same,
            None,
            vec![("src", s("${a.path}"))],
            vec![("src", s("x"))],
            Action::Create,
            Action::Update,
            &["src"],
        ),
        (
            "a created: a create-only input unknown replaces b",
            &a_same,
            None,
            vec![("anchor", s("${a.id}"))],
            vec![("anchor", s("i-1"))],
            Action::Create,
            DBC,
            &["anchor"],
        ),
        (
            "a replaced: its outputs unknown",
            &a_new_path,
            Some(a_old()),
            vec![("src", s("${a.mode}"))],
            vec![("src", Value::Int(1))],
            DBC,
            Action::Update,
            &["src"],
        ),
        (
            "a unchanged: resolved from its record",
            &a_same,
            Some(a_old()),
            vec![("src", s("${a.path}"))],
            vec![("src", s("x"))],
            Action::NoOp,
            Action::NoOp,
            &[],
        ),
        (
            "a unchanged, b's stored value differs",
            &a_same,
            Some(a_old()),
            vec![("src", s("${a.path}"))],
            vec![("src", s("old"))],
            Action::NoOp,
            Action::Update,
            &["src"],
        ),
        (
            "template resolved from the record",
            &a_same,
            Some(a_old()),
            vec![("src", s("${a.path}/${a.mode}/f"))],
            vec![("src", s("x/1/f"))],
            Action::NoOp,
            Action::NoOp,
            &[],
        ),
        (
            "whole reference keeps its type",
            &a_same,
            Some(a_old()),
            vec![("src", s("${a.mode}"))],
            vec![("src", Value::Int(1))],
            Action::NoOp,
            Action::NoOp,
            &[],
        ),
        (
            "a updated: its changed field unknown",
            &a_mode2,
            Some(a_old()),
            vec![("src", s("${a.mode}"))],
            vec![("src", Value::Int(1))],
            Action::Update,
            Action::Update,
            &["src"],
        ),
        (
            "a updated: its read-only outputs unknown",
            &a_mode2,
            Some(a_old()),
            vec![("src", s("${a.id}"))],
            vec![("src", s("i-1"))],
            Action::Update,
            Action::Update,
            &["src"],
        ),
        (
            "a updated: its unchanged inputs known",
            &a_mode2,
            Some(a_old()),
            vec![("src", s("${a.path}"))],
            vec![("src", s("x"))],
            Action::Update,
            Action::NoOp,
            &[],
        ),
        (
            "a updated: a template with a changed field unknown",
            &a_mode2,
            Some(a_old()),
            vec![("src", s("${a.path}-${a.mode}"))],
            vec![("src", s("x-1"))],
            Action::Update,
            Action::Update,
            &["src"],
        ),
    ];
    for (what, a_desired, a_stored, b_desired, b_stored, a_action, b_action, b_fields) in cases {
        let plan = plan_dependent(a_desired, a_stored, &b_desired, &b_stored);
        let got = actions(&plan);
        // Dependencies first, whatever the declaration order.
        assert_eq!(got[0].0, "a", "{what}: {got:?}");
        assert_eq!(got[0].1, a_action, "{what}: {got:?}");
        assert_eq!(got[1].0, "b", "{what}: {got:?}");
        assert_eq!(got[1].1, b_action, "{what}: {got:?}");
        assert_eq!(got[1].2, *b_fields, "{what}: {got:?}");
        assert_eq!(
            (plan.changes[0].index, plan.changes[1].index),
            (Some(1), Some(0)),
            "{what}: indices are declaration indices"
        );
    }
}

#[test]
fn unknown_propagates_down_a_chain() {
    // c -> b -> a; a is created, so b's input is unknown, so b is updated,
    // so b's changed field is unknown to c.
    let st = stack()
        .resource("a", "T", &[("path", s("x"))])
        .resource("b", "U", &[("src", s("${a.path}"))])
        .resource("c", "U", &[("src", s("${b.src}"))])
        .build();
    let stored_list = [
        stored("b", "U", &[("src", s("x"))]),
        stored("c", "U", &[("src", s("x"))]),
    ];
    let plan = ts::plan(&st, &catalog(), &stored_list, Mode::Reconcile);
    assert_eq!(
        actions(&plan),
        [
            ("a".to_owned(), Action::Create, vec![]),
            ("b".to_owned(), Action::Update, vec!["src".to_owned()]),
            ("c".to_owned(), Action::Update, vec!["src".to_owned()]),
        ]
    );
}

#[test]
fn reconcile_deletes_what_the_document_no_longer_declares_and_patch_keeps_it() {
    let st = stack().resource("b", "U", &[("src", s("x"))]).build();
    let unmanaged = StoredResource {
        managed: false,
        stack: String::new(),
        ..stored("z", "T", &[("path", s("z"))])
    };
    let stored_list = [
        stored("d", "T", &[("path", s("d"))]),
        stored("b", "U", &[("src", s("x"))]),
        StoredResource {
            target: "u".into(),
            ..stored("c", "U", &[])
        },
        unmanaged,
    ];
    let reconcile = ts::plan(&st, &catalog(), &stored_list, Mode::Reconcile);
    let got: Vec<_> = reconcile
        .changes
        .iter()
        .map(|c| {
            (
                c.label.as_str(),
                c.action.name(),
                c.target.as_str(),
                c.index,
            )
        })
        .collect();
    // Declared first, then deletes sorted by label; the unmanaged record is
    // left alone.
    assert_eq!(
        got,
        [
            ("b", "no-op", "t", Some(0)),
            ("c", "delete", "u", None),
            ("d", "delete", "t", None)
        ]
    );
    assert_eq!(reconcile.changes[1].resource_type, "U");
    assert!(reconcile.has_changes());
    assert_eq!(reconcile.counts(), [0, 0, 0, 2, 1]);

    let patch = ts::plan(&st, &catalog(), &stored_list, Mode::Patch);
    assert_eq!(patch.changes.len(), 1);
    assert_eq!(patch.changes[0].action, Action::NoOp);
    assert!(!patch.has_changes());
    assert_eq!(patch.counts(), [0, 0, 0, 0, 1]);
    assert_eq!(Mode::default(), Mode::Reconcile);
}

#[test]
fn an_unmanaged_record_with_a_declared_label_is_not_adopted() {
    let old = StoredResource {
        managed: false,
        ..stored("a", "T", &[("path", s("x"))])
    };
    let change = one(stack().resource("a", "T", &[("path", s("x"))]), &[old]);
    assert_eq!(change.action, Action::Create);
}

#[test]
fn destroy_deletes_every_managed_record_by_label() {
    let unmanaged = StoredResource {
        managed: false,
        ..stored("a", "T", &[])
    };
    let plan = plan_destroy(&[stored("c", "T", &[]), unmanaged, stored("b", "U", &[])]);
    let got: Vec<_> = plan
        .changes
        .iter()
        .map(|c| {
            (
                c.label.as_str(),
                c.resource_type.as_str(),
                c.action.clone(),
                c.index,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("b", "U", Action::Delete, None),
            ("c", "T", Action::Delete, None)
        ]
    );
    assert_eq!(plan.counts(), [0, 0, 0, 2, 0]);
    assert!(!plan_destroy(&[]).has_changes());
}

#[test]
fn counts_and_names_cover_every_action() {
    let plan = Plan {
        changes: [
            Action::Create,
            Action::Update,
            DBC,
            CBD,
            Action::Delete,
            Action::NoOp,
        ]
        .into_iter()
        .map(|action| Change {
            label: "x".into(),
            resource_type: "T".into(),
            target: "t".into(),
            action,
            fields: vec![],
            diffs: vec![],
            index: None,
        })
        .collect(),
        ..Plan::default()
    };
    assert_eq!(plan.counts(), [1, 1, 2, 1, 1]);
    let names: Vec<_> = plan.changes.iter().map(|c| c.action.name()).collect();
    assert_eq!(
        names,
        ["create", "update", "replace", "replace", "delete", "no-op"]
    );
    assert!(Plan::default().changes.is_empty());
    assert!(!Plan::default().has_changes());
}

#[test]
fn changes_show_each_field_before_and_after_and_never_a_secret() {
    // An update: the changed field's old and new value; a changed secret
    // shown only as sensitive.
    let c = one(
        stack().resource(
            "a",
            "T",
            &[
                ("path", s("x")),
                ("mode", Value::Int(488)),
                ("password", s("new")),
            ],
        ),
        &[stored_a(
            &[("path", s("x")), ("mode", Value::Int(448))],
            &[("password", "old")],
        )],
    );
    assert_eq!(c.action, Action::Update);
    assert_eq!(
        c.diffs,
        vec![
            FieldDiff {
                field: "mode".into(),
                before: Shown::Value(Value::Int(448)),
                after: Shown::Value(Value::Int(488)),
                forces_replacement: false,
            },
            FieldDiff {
                field: "password".into(),
                before: Shown::Sensitive,
                after: Shown::Sensitive,
                forces_replacement: false,
            },
        ]
    );
    assert!(!format!("{c:?}").contains("new"), "{c:?}");
    // A replace names the field that forces it.
    let c = one(
        stack().resource("a", "T", &[("path", s("y"))]),
        &[stored_a(&[("path", s("x"))], &[])],
    );
    assert_eq!(c.action, DBC);
    assert_eq!(c.diffs.len(), 1);
    assert!(c.diffs[0].forces_replacement, "{c:?}");
    // A create shows every desired field; a reference to a resource being
    // created is known after apply.
    let plan = ts::plan(
        &stack()
            .resource("a", "T", &[("path", s("x")), ("token", s("t0"))])
            .resource("b", "U", &[("src", s("${a.path}"))])
            .build(),
        &catalog(),
        &[],
        Mode::Reconcile,
    );
    let a = plan.changes.iter().find(|c| c.label == "a").unwrap();
    assert_eq!(a.diffs[0].after, Shown::Value(s("x")));
    assert_eq!(a.diffs[1].after, Shown::Sensitive);
    let b = plan.changes.iter().find(|c| c.label == "b").unwrap();
    assert_eq!(b.diffs[0].after, Shown::KnownAfterApply);
    // A delete shows what was recorded.
    let plan = ts::plan(
        &stack().build(),
        &catalog(),
        &[stored_a(&[("path", s("x"))], &[("password", "p")])],
        Mode::Reconcile,
    );
    let d = &plan.changes[0];
    assert_eq!(d.action, Action::Delete);
    assert_eq!(d.diffs[0].before, Shown::Sensitive);
    assert_eq!(d.diffs[0].field, "password");
    assert_eq!(d.diffs[1].before, Shown::Value(s("x")));
}

#[test]
fn an_attachment_to_a_replaced_resource_is_replaced_delete_before_create() {
    let a_old = || stored("a", "T", &[("path", s("x")), ("zone", s("z1"))]);
    // (what, a desired, b's action, b's fields)
    type Case = (
        &'static str,
        Vec<(&'static str, Value)>,
        Action,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "a replaced delete before create",
            vec![("path", s("y")), ("zone", s("z1"))],
            DBC,
            vec!["mount"],
        ),
        (
            // Even when the new `a` comes first, the attachment is made
            // again to it, not moved.
            "a replaced create before delete",
            vec![("path", s("x")), ("zone", s("z2"))],
            DBC,
            vec!["mount"],
        ),
        (
            "a updated in place: the attachment stays",
            vec![("path", s("x")), ("zone", s("z1")), ("note", s("n"))],
            Action::NoOp,
            vec![],
        ),
    ];
    for (what, a_desired, b_action, b_fields) in cases {
        let plan = plan_dependent(
            &a_desired,
            Some(a_old()),
            &[("mount", s("${a.zone}"))],
            &[("mount", s("z1"))],
        );
        let b = plan.changes.iter().find(|c| c.label == "b").unwrap();
        assert_eq!(b.action, b_action, "{what}: {plan:?}");
        assert_eq!(b.fields, b_fields, "{what}");
        if b_action == DBC {
            let mount = b.diffs.iter().find(|d| d.field == "mount").unwrap();
            assert!(mount.forces_replacement, "{what}: {mount:?}");
        }
    }
}

#[test]
fn a_runtime_dependency_on_a_resource_not_yet_applied_plans_its_value_as_unknown() {
    // Not a plan-time error: the value is known after `a` is applied, and
    // tasks order `b` after it (tasks::tests).
    let plan = plan_dependent(
        &[("path", s("x"))],
        None,
        &[("after", s("${a.path}"))],
        &[("after", s("old"))],
    );
    let b = plan.changes.iter().find(|c| c.label == "b").unwrap();
    assert_eq!(b.action, Action::Update, "{plan:?}");
    let after = b.diffs.iter().find(|d| d.field == "after").unwrap();
    assert_eq!(after.after, Shown::KnownAfterApply);
}

#[test]
fn an_import_is_read_then_diffed_not_created() {
    let mut st = stack()
        .resource("a", "T", &[("path", s("x")), ("mode", Value::Int(1))])
        .resource("b", "U", &[("src", s("${a.path}"))])
        .build();
    st.resources[0].import = Some("x".into());
    let cat = catalog();
    let g = ts::graph(&st, &cat);
    // Unrecorded: adopted by reading `x`; `b` has no import and is created.
    let wanted = import::wanted(&st, &[]);
    assert_eq!(
        wanted,
        [import::Wanted {
            index: 0,
            label: "a".into(),
            native_id: "x".into()
        }]
    );
    // What the plugin read: the same path and mode, and a value that must
    // never be stored.
    let read = PropertyMap::from([
        ("path".to_owned(), s("x")),
        ("mode".to_owned(), Value::Int(1)),
        ("password".to_owned(), s("hunter2")),
    ]);
    let record = import::record(&st, &g, &cat, &wanted[0], None, read.clone());
    assert!(record.managed && record.stack == "s" && record.native_id == "x");
    assert!(!record.properties.contains_key("password"), "{record:?}");
    let plan = super::plan(
        &st,
        &g,
        &cat,
        std::slice::from_ref(&record),
        Mode::Reconcile,
        &ts::hasher(),
    );
    assert_eq!(
        actions(&plan),
        [
            ("a".into(), Action::NoOp, vec![]),
            ("b".into(), Action::Create, vec![])
        ]
    );
    // The reference to the adopted resource is known: its value was read.
    let b = &plan.changes[1].diffs[0];
    assert_eq!(b.after, Shown::Value(s("x")));
    // A document that differs from what was read updates it.
    let mut changed = read;
    changed.insert("mode".into(), Value::Int(2));
    let record = import::record(&st, &g, &cat, &wanted[0], Some("x2".into()), changed);
    assert_eq!(record.native_id, "x2", "the plugin's identifier wins");
    let plan = ts::plan(&st, &cat, std::slice::from_ref(&record), Mode::Reconcile);
    assert_eq!(plan.changes[0].action, Action::Update);
    assert_eq!(plan.changes[0].fields, ["mode"]);
    // Once recorded, `import:` is ignored.
    assert!(import::wanted(&st, &[record]).is_empty());
    // Adopting alone is a change to make.
    let only = Plan {
        imported: vec![import::record(
            &st,
            &g,
            &cat,
            &wanted[0],
            None,
            PropertyMap::new(),
        )],
        ..Plan::default()
    };
    assert!(only.has_changes());
}

#[test]
fn protect_marks_are_what_the_document_changes() {
    let mut st = stack()
        .resource("a", "T", &[("path", s("x"))])
        .resource("b", "T", &[("path", s("y"))])
        .resource("c", "T", &[("path", s("z"))])
        .build();
    st.resources[0].protect = true;
    st.resources[1].protect = true;
    // `b` is marked already, `c` is marked but no longer protected, `gone`
    // (not declared) keeps its mark.
    let recorded: BTreeSet<String> = ["b", "c", "gone"].map(String::from).into();
    assert_eq!(
        protect_marks(&st, &recorded),
        [("a".to_owned(), true), ("c".to_owned(), false)]
    );
    // A plan that records only marks is a change.
    let marks_only = Plan {
        protect: protect_marks(&st, &recorded),
        ..Plan::default()
    };
    assert!(marks_only.has_changes());
    // Deleting a resource with a recorded mark is refused like a declared one.
    let gone = stored("gone", "T", &[("path", s("g"))]);
    let plan = ts::plan(&st, &catalog(), &[gone], Mode::Reconcile);
    assert_eq!(protected_changes(&plan, &recorded), ["gone"]);
}
