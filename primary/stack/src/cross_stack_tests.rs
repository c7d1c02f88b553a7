//! `${stacks.NAME.outputs.X}`: another stack's recorded outputs, read
//! through the caller's reader when the document is parsed.

use orrery_schema::{PropertyMap, Value};

use super::*;

fn recorded(name: &str) -> Option<PropertyMap> {
    let entry = |k: &str, v: Value| Value::Map(PropertyMap::from([(k.to_owned(), v)]));
    (name == "network").then(|| {
        PropertyMap::from([
            (
                "subnet".to_owned(),
                entry("value", Value::from("10.0.1.0/24")),
            ),
            ("token".to_owned(), entry("secret", Value::Bool(true))),
            ("late".to_owned(), entry("unknown", Value::Bool(true))),
        ])
    })
}

fn parse_reading(property: &str) -> Result<Stack, StackError> {
    let text = format!(
        "stack: app\ntargets:\n  - name: t\n    plugin: p\nresources:\n  - label: a\n    type: Dir\n    target: t\n    properties: {{ path: \"{property}\" }}\n"
    );
    parse_with_inputs(
        "app.yaml",
        &text,
        "/srv",
        &Inputs {
            stacks: Some(&recorded),
            ..Inputs::default()
        },
    )
}

#[test]
fn another_stacks_output_is_read_when_parsed() {
    let stack = parse_reading("net-${stacks.network.outputs.subnet}").unwrap();
    assert_eq!(
        literal(&stack.resources[0].properties["path"]),
        Some(&Value::from("net-10.0.1.0/24"))
    );
    assert!(
        stack.supplied,
        "the document alone does not say what was applied"
    );
}

#[test]
fn a_missing_stack_or_output_names_both() {
    let message = |p: &str| parse_reading(p).unwrap_err().to_string();
    assert_eq!(
        message("${stacks.nets.outputs.subnet}"),
        "app.yaml:6: resource `a`: property `path`: `stacks.nets.outputs.subnet`: stack `nets` has recorded no outputs (apply it first)"
    );
    assert_eq!(
        message("${stacks.network.outputs.vpc}"),
        "app.yaml:6: resource `a`: property `path`: `stacks.network.outputs.vpc`: stack `network` has no output `vpc`"
    );
    assert_eq!(
        message("${stacks.network.outputs.token}"),
        "app.yaml:6: resource `a`: property `path`: `stacks.network.outputs.token`: the output is secret: its value is never stored, so another stack cannot read it"
    );
    assert!(message("${stacks.network.outputs.late}").contains("the output is unknown"));
    assert!(message("${stacks.network.subnet}").contains("`stacks.network.outputs.NAME`"));
    // Without a reader (a document read offline) nothing is read.
    let text = "stack: app\nvariables:\n  x: \"${stacks.network.outputs.subnet}\"\n";
    assert_eq!(
        parse("app.yaml", text, "/srv").unwrap_err().to_string(),
        "app.yaml:3: variable `x`: `stacks.network.outputs.subnet`: other stacks' outputs cannot be read here (only by plan and apply)"
    );
}
