//! The quickstart applied with its state in PostgreSQL instead of the
//! embedded store (run through scripts/with-postgres.sh, which sets
//! ORRERY_TEST_DATABASE_URL).

use crate::common;

use common::postgres::fresh_database;
use common::{root, Scratch};

#[test]
fn the_quickstart_applies_and_converges_with_state_in_postgresql() {
    let db = fresh_database("apply")
        .expect("ORRERY_TEST_DATABASE_URL is not set: run through scripts/with-postgres.sh (scripts/test.sh does)");
    let scratch = Scratch::new();
    let text = std::fs::read_to_string(root().join("examples/quickstart/stack.yaml")).unwrap();
    let stack = scratch.write("stack.yaml", &text);
    let stack = stack.to_str().unwrap();
    let run = scratch.orrery(&["apply", stack, "--yes", "--database-url", &db]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("12 succeeded"), "{run:?}");
    let run = scratch.orrery(&["plan", stack, "--database-url", &db]);
    assert_eq!(
        run.code, 0,
        "no changes against the PostgreSQL state: {run:?}"
    );
    // Nothing went to the embedded store.
    assert!(!scratch.path().join("state/state.db").exists());
    let run = scratch.orrery(&[
        "destroy",
        "--stack",
        "quickstart",
        "--yes",
        "--database-url",
        &db,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = scratch.orrery(&["inventory", "--database-url", &db]);
    assert!(run.stdout.contains("0 resources"), "{run:?}");
}
