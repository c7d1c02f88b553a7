//! The reader's limits, each at the limit and one past it; its reading of
//! scalars and its errors, against `serde_norway`'s (the reader before it).

use proptest::prelude::*;

use super::*;

fn limits() -> Limits {
    Limits {
        max_document_bytes: 1 << 20,
        max_depth: 8,
        max_aliases: 10,
        max_nodes: 100,
        max_scalar_bytes: 1000,
    }
}

fn limit(text: &str, limits: &Limits) -> Option<(Option<usize>, Limit)> {
    match load(text, limits) {
        Ok(_) => None,
        Err(ReadError {
            line,
            problem: Problem::TooLarge(limit),
            ..
        }) => Some((line, limit)),
        Err(e) => panic!("not a limit: {e:?}"),
    }
}

/// `n` aliases of an anchored scalar, one a line, after the anchor on
/// line 1: the document is `2 + n` nodes (the list, the anchor, `n`
/// copies).
fn aliases(n: usize) -> String {
    let mut text = String::from("- &a x\n");
    for _ in 0..n {
        text.push_str("- *a\n");
    }
    text
}

#[test]
fn real_documents_pass_the_defaults() {
    let mut text = String::from(
        "stack: big\ntargets:\n  - name: home\n    plugin: local\n    config: &cfg { root: /srv, create_root: true }\nresources:\n",
    );
    for i in 0..10_000 {
        text.push_str(&format!(
            "  - label: r{i}\n    type: Local::Fs::File\n    target: home\n    properties: {{ path: \"f{i}\", content: hello, mode: 420, tags: [a, b] }}\n"
        ));
    }
    assert!(load(&text, &Limits::default()).is_ok());
}

#[test]
fn aliases_at_the_limit_pass_and_one_more_is_refused_on_its_line() {
    let limits = limits();
    assert_eq!(limit(&aliases(10), &limits), None);
    assert_eq!(
        limit(&aliases(11), &limits),
        Some((Some(12), Limit::Aliases { max: 10 }))
    );
}

#[test]
fn expanded_nodes_at_the_limit_pass_and_one_more_is_refused() {
    // An anchored list of 9 scalars is 10 nodes; the outer list, the
    // anchored list and 9 aliases of it are 1 + 10 + 9 × 10 = 101.
    let limits = Limits {
        max_aliases: 100,
        ..limits()
    };
    let items = ["x"; 9].join(", ");
    let mut at = format!("- &a [{items}]\n");
    for _ in 0..8 {
        at.push_str("- *a\n");
    }
    // 1 + 10 + 8 × 10 = 91 nodes; 9 more scalars make 100.
    for _ in 0..9 {
        at.push_str("- y\n");
    }
    assert_eq!(limit(&at, &limits), None);
    let over = format!("{at}- z\n");
    assert_eq!(
        limit(&over, &limits),
        Some((Some(19), Limit::Nodes { max: 100 }))
    );
    // The alias that passes the limit is named, not the end.
    let mut bomb = format!("- &a [{items}]\n");
    for _ in 0..9 {
        bomb.push_str("- *a\n");
    }
    bomb.push_str("- end\n");
    assert_eq!(
        limit(&bomb, &limits),
        Some((Some(10), Limit::Nodes { max: 100 }))
    );
}

#[test]
fn aliases_of_aliases_multiply() {
    // Each level aliases the previous one 4 times: 4^5 = 1024 scalars
    // from a few lines and 20 aliases.
    let limits = Limits {
        max_nodes: 1000,
        max_aliases: 100,
        max_scalar_bytes: 1 << 20,
        ..limits()
    };
    let mut text = String::from("a0: &a0 [x]\n");
    for i in 1..=5 {
        let p = i - 1;
        text.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}]\n"));
    }
    assert_eq!(
        limit(&text, &limits),
        Some((Some(6), Limit::Nodes { max: 1000 }))
    );
}

#[test]
fn expanded_scalar_bytes_at_the_limit_pass_and_one_more_is_refused() {
    let limits = Limits {
        max_scalar_bytes: 1000,
        ..limits()
    };
    // 100 bytes anchored, then 9 aliases: 1000 bytes.
    let value = "v".repeat(100);
    let mut at = format!("- &a {value}\n");
    for _ in 0..9 {
        at.push_str("- *a\n");
    }
    assert_eq!(limit(&at, &limits), None);
    let over = format!("{at}- w\n");
    assert_eq!(
        limit(&over, &limits),
        Some((Some(11), Limit::ScalarBytes { max: 1000 }))
    );
}

#[test]
fn depth_at_the_limit_passes_and_one_more_is_refused() {
    let limits = limits();
    let at = format!("{}x{}", "[".repeat(8), "]".repeat(8));
    assert_eq!(limit(&at, &limits), None);
    let over = format!("\n{}x{}", "[".repeat(9), "]".repeat(9));
    assert_eq!(
        limit(&over, &limits),
        Some((Some(2), Limit::Depth { max: 8 }))
    );
}

#[test]
fn depth_counts_what_an_alias_expands_to() {
    let limits = limits();
    // The anchored node is 4 deep; aliased 4 levels down it would be 8.
    let at = "a: &a [[[[x]]]]\nb: [[[*a]]]\n";
    assert_eq!(limit(at, &limits), None);
    let over = "a: &a [[[[x]]]]\nb: [[[[*a]]]]\n";
    assert_eq!(
        limit(over, &limits),
        Some((Some(2), Limit::Depth { max: 8 }))
    );
}

#[test]
fn document_length_at_the_limit_passes_and_one_byte_more_is_refused() {
    let limits = Limits {
        max_document_bytes: 64,
        ..limits()
    };
    let at = format!("a: {}", "b".repeat(61));
    assert_eq!(at.len(), 64);
    assert_eq!(limit(&at, &limits), None);
    assert_eq!(
        limit(&format!("{at}c"), &limits),
        Some((None, Limit::DocumentBytes { bytes: 65, max: 64 }))
    );
}

#[test]
fn an_alias_inside_the_node_it_names_is_refused() {
    match load("a: &a [x, *a]\n", &limits()) {
        Err(ReadError {
            line: Some(line),
            problem: Problem::Syntax(message),
            ..
        }) => {
            assert_eq!(line, 1);
            assert!(message.contains("contains it"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn syntax_errors_name_their_line() {
    match load("a: b\nc: [unclosed\n", &limits()) {
        Err(ReadError {
            line: Some(line),
            problem: Problem::Syntax(message),
            ..
        }) => {
            assert!(line >= 2, "{line}: {message}");
            assert!(message.contains(&format!("line {line}")), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// `text` read by this reader and by `serde_norway`, into `serde_norway`'s
/// own value type: `None` for an error.
fn both(text: &str) -> (Option<serde_norway::Value>, Option<serde_norway::Value>) {
    (
        read(text, &Limits::default()).ok(),
        serde_norway::from_str(text).ok(),
    )
}

#[test]
fn scalars_read_as_serde_norway_read_them() {
    for text in [
        "a: 1\nb: -2\nc: x y\nd: 'q''s'\ne: \"d\\n\\u00e9\"\nf:\ng: [1, two, 'three']\nh: {}\n",
        "- a\n- - b\n  - c\n- k: v\n  l: w\n",
        "---\na: 1\n...\n",
        "a: 0\nb: 18446744073709551615\nc: -9223372036854775808\n",
        "a: null\nb: Null\nc: NULL\nd: True\ne: FALSE\nf: yes\ng: no\nh: on\ni: ~\n",
        "a: 1.5\nb: 0x1f\nc: +1\nd: 007\ne: -0\nf: .inf\ng: -.inf\nh: 1e3\ni: 0o17\nj: 0b101\n",
        "c: inf\nd: nan\ne: Infinity\n",
        "a: '1'\nb: \"true\"\nc: '~'\nd: !!str 12\n",
        "\"quoted key\": 1\n'single': 2\nkey with spaces: 3\n",
        "a: é\nb: 日本\n日本: 1\n",
        "{\"a\": 1, \"b\": [true, null, -1.5e-7, \"x\\ny\"]}\n",
        "a: |\n  text\n  more\nb: >\n  folded\n  text\n",
        "a: plain\n  continued\n",
        "a: &x [1, 2]\nb: *x\n",
        "",
        "# only a comment\n",
    ] {
        let (ours, theirs) = both(text);
        assert!(ours.is_some(), "{text:?}");
        assert_eq!(ours, theirs, "{text:?}");
    }
    // Integers past 64 bits are refused by both, as values.
    for text in ["a: 18446744073709551616\n", "b: -9223372036854775809\n"] {
        assert_eq!(both(text), (None, None), "{text:?}");
    }
    // `.nan` is not equal to itself: read as a float all the same.
    let nan: orrery_schema::Value = read("x", &Limits::default()).unwrap();
    assert_eq!(nan, orrery_schema::Value::String("x".into()));
    let nan: f64 = read(".nan", &Limits::default()).unwrap();
    assert!(nan.is_nan());
}

#[test]
fn a_shape_error_names_the_path_line_and_column_of_its_node() {
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        size: Option<u32>,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        items: Vec<Item>,
    }
    let error = |text: &str| {
        let e = read::<Doc>(text, &Limits::default()).unwrap_err();
        let Problem::Syntax(message) = e.problem else {
            panic!("{e:?}")
        };
        (message, e.line, e.position.map(|p| (p.column, p.span)))
    };
    let text = "items:\n  - name: a\n  - name: b\n    colour: blue\n";
    assert_eq!(
        error(text),
        (
            "items[1]: unknown field `colour`, expected `name` or `size` at line 4 column 5"
                .to_owned(),
            Some(4),
            Some((5, 35..35))
        )
    );
    assert_eq!(
        error("items:\n  - size: 1\n").0,
        "items[0]: missing field `name` at line 2 column 5"
    );
    assert_eq!(
        error("items:\n  - name: [a]\n").0,
        "items[0].name: invalid type: sequence, expected a string at line 2 column 11"
    );
    assert_eq!(
        error("items:\n  - name: a\n    size: -1\n").0,
        "items[0].size: invalid value: integer `-1`, expected u32 at line 3 column 11"
    );
    assert_eq!(
        error("items:\n  - name: a\n    size: '1'\n").0,
        "items[0].size: invalid type: string \"1\", expected u32 at line 3 column 11"
    );
    // Columns count characters, spans bytes.
    let (message, line, at) = error("items:\n  - { name: é, size: x }\n");
    assert_eq!(
        message,
        "items[0].size: invalid type: string \"x\", expected u32 at line 2 column 22"
    );
    assert_eq!((line, at), (Some(2), Some((22, 29..29))));
    // The document itself: no path, and no place at its very start.
    assert_eq!(
        error("[]\n").0,
        "invalid type: sequence, expected struct Doc"
    );
    assert_eq!(error("").0, "missing field `items`");
    // What the parser refuses keeps its words and place.
    assert_eq!(
        error("items: [a\n").0,
        "while parsing a flow sequence, expected ',' or ']' at line 2 column 1"
    );
}

#[test]
fn one_document_without_tags_is_read() {
    let e = read::<serde_norway::Value>("a: 1\n---\nb: 2\n", &Limits::default()).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert_eq!(
        e.to_string(),
        "a second document at line 2 column 1: a file holds one"
    );
    let e = read::<serde_norway::Value>("a: 1\nb: !thing 2\n", &Limits::default()).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.to_string().starts_with("tags (`!thing`)"), "{e}");
    assert!(e.to_string().ends_with("at line 2 column 4"), "{e}");
    let e = read::<serde_norway::Value>("a: !!map {}\n", &Limits::default()).unwrap_err();
    assert_eq!(e.line, Some(1));
}

#[test]
fn an_alias_reads_as_what_it_names() {
    let v: serde_norway::Value = read(
        "a: &p { path: a, tags: &t [x, y] }\nb: *p\nc: *t\n",
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(v["b"], v["a"]);
    assert_eq!(v["c"], v["a"]["tags"]);
}

/// Scalars as a stack author might write them, plain or quoted.
fn scalar() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        "[a-zA-Z_/$][a-zA-Z0-9_./${}-]{0,8}",
        "-?[0-9]{1,21}",
        "[0-9.eE+-]{1,6}",
        Just("~".to_owned()),
        Just("null".to_owned()),
        Just("True".to_owned()),
        Just("false".to_owned()),
        Just("0x1F".to_owned()),
        Just("0o17".to_owned()),
        Just(".inf".to_owned()),
        Just("".to_owned()),
        "[a-zA-Zé日 ]{1,6}",
    ];
    (word, 0..4u8).prop_map(|(w, style)| match style {
        0 => format!("'{}'", w.replace('\'', "''")),
        1 => serde_json::to_string(&w).unwrap(),
        _ => w,
    })
}

fn node(indent: usize) -> BoxedStrategy<String> {
    let leaf = scalar().boxed();
    if indent > 6 {
        return leaf;
    }
    let pad = " ".repeat(indent + 2);
    prop_oneof![
        3 => leaf,
        1 => prop::collection::vec(scalar(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
        1 => prop::collection::vec((scalar(), scalar()), 0..4).prop_map(|v| {
            let items: Vec<String> = v.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!("{{{}}}", items.join(", "))
        }),
        1 => prop::collection::vec(node(indent + 2), 1..4).prop_map(move |v| {
            v.into_iter().map(|n| format!("\n{pad}- {n}")).collect::<String>()
        }),
        1 => prop::collection::vec((scalar(), node(indent + 2)), 1..4).prop_map({
            let pad = " ".repeat(indent + 2);
            move |v| v.into_iter().map(|(k, n)| format!("\n{pad}{k}: {n}")).collect::<String>()
        }),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Generated documents of every common form read as `serde_norway`
    /// read them.
    #[test]
    fn generated_documents_read_as_serde_norway_read_them(
        entries in prop::collection::vec((scalar(), node(0)), 1..5),
    ) {
        let text: String = entries.iter().map(|(k, n)| format!("{k}: {n}\n")).collect();
        if let (Some(ours), Some(theirs)) = both(&text) {
            prop_assert_eq!(ours, theirs, "{:?}", text);
        }
    }

    /// Any text at all: no panic, and an error names a line of the text.
    #[test]
    fn any_text_is_read_safely(
        body in prop::collection::vec(
            prop_oneof![
                Just(b'"'), Just(b'\''), Just(b'\\'), Just(b':'), Just(b'{'), Just(b'}'),
                Just(b'['), Just(b']'), Just(b','), Just(b'\n'), Just(b'-'), Just(b' '),
                Just(b'#'), Just(b'?'), Just(b'&'), Just(b'*'), Just(b'a'), Just(b'0'),
                any::<u8>(),
            ],
            0..64,
        ),
    ) {
        if let Ok(text) = std::str::from_utf8(&body) {
            if let Err(e) = read::<serde_norway::Value>(text, &Limits::default()) {
                if let Some(line) = e.line {
                    prop_assert!(line <= text.lines().count() + 2, "{:?}: {}", text, e);
                }
            }
        }
    }
}
