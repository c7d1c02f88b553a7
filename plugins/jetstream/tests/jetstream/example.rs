//! `examples/jetstream/stack.yaml` applies as its README says, against a
//! server the test starts in place of the README's 127.0.0.1:4222.

use async_nats::jetstream;

use crate::common::NatsServer;
use crate::orrery::Orrery;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_applies_converges_and_destroys() {
    let managed = NatsServer::start().await;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/jetstream/stack.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("nats://127.0.0.1:4222"));
    let orrery = Orrery::embedded();
    let file = orrery.write(
        "stack.yaml",
        &text.replace("nats://127.0.0.1:4222", &managed.url),
    );

    let run = orrery.run_file("apply", &file, &["--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("3 succeeded"), "{run:?}");
    let js = jetstream::new(managed.client().await);
    let mut orders = js.get_stream("ORDERS").await.unwrap();
    assert_eq!(orders.info().await.unwrap().config.subjects, ["orders.>"]);
    let shipping = orders.consumer_info("shipping").await.unwrap();
    let filters = [
        shipping.config.filter_subjects,
        vec![shipping.config.filter_subject],
    ]
    .concat();
    assert!(filters.contains(&"orders.paid".to_owned()), "{filters:?}");
    js.get_key_value("shop-settings")
        .await
        .unwrap()
        .put("currency", "EUR".into())
        .await
        .unwrap();
    let run = orrery.run_file("apply", &file, &["--yes"]);
    assert!(run.stdout.contains("No changes: 3 resources"), "{run:?}");

    let run = orrery.run(&["destroy", "--stack", "jetstream-example", "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(js.get_stream("ORDERS").await.is_err());
    assert!(js.get_stream("KV_shop-settings").await.is_err());
}
