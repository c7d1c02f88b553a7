//! Discovery walks parent-scoped types: the children of each listed parent
//! are listed with `ListRequest.parent` set, and inherit the properties
//! their scope maps from the parent. The plugin is an in-process transport
//! (the wire path is shown by the PostgreSQL plugin's tests); what is under
//! test is the primary's walk.

use std::sync::Mutex;
use std::time::Duration;

use orrery_bus::transport::{SendFuture, Transport};
use orrery_plugin_sdk::{field, resource, Answer};
use orrery_primary::discovery;
use orrery_primary::stack::{self, Catalog};
use orrery_primary::state;
use orrery_schema::{
    Announcement, ListResult, ListedResource, OperationStatus, PropertyMap, Request, Value,
};

/// Two databases with two schemas each; the second database's schemas come
/// over two pages. Records every list request it answers.
#[derive(Default)]
struct Catalogs {
    seen: Mutex<Vec<Listing>>,
}

/// A list request as seen: type, parent's native id, page token.
type Listing = (String, Option<String>, Option<String>);

fn listed(id: &str, props: &[(&str, &str)]) -> ListedResource {
    ListedResource {
        native_id: id.into(),
        properties: props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect::<PropertyMap>(),
    }
}

impl Transport for Catalogs {
    fn send<'a>(&'a self, _: &'a str, request: &'a Request, _: Duration) -> SendFuture<'a> {
        let Request::List(list) = request else {
            panic!("discovery sent {request:?}");
        };
        let parent = list.parent.as_ref().map(|p| p.native_id.clone());
        self.seen.lock().unwrap().push((
            list.resource_type.clone(),
            parent.clone(),
            list.page_token.clone(),
        ));
        let (resources, next) = match (list.resource_type.as_str(), parent.as_deref()) {
            ("Pg::Database", None) => (
                vec![
                    listed("app", &[("name", "app")]),
                    listed("billing", &[("name", "billing")]),
                ],
                None,
            ),
            ("Pg::Schema", Some("app")) => (
                vec![
                    // The plugin leaves `database` out: inherited.
                    listed("app.public", &[("name", "public")]),
                    listed("app.audit", &[("name", "audit")]),
                ],
                None,
            ),
            ("Pg::Schema", Some("billing")) if list.page_token.is_none() => (
                vec![listed(
                    "billing.public",
                    &[("name", "public"), ("database", "billing")],
                )],
                Some("2".to_owned()),
            ),
            ("Pg::Schema", Some("billing")) => {
                (vec![listed("billing.ledger", &[("name", "ledger")])], None)
            }
            other => panic!("unexpected listing {other:?}"),
        };
        let answer = Answer::List(ListResult {
            request_id: list.request_id.clone(),
            resource_type: list.resource_type.clone(),
            status: OperationStatus::Success,
            resources,
            next_page_token: next,
            ..Default::default()
        });
        Box::pin(async move { Ok(answer) })
    }
}

#[tokio::test]
async fn children_are_listed_per_parent_and_inherit_its_properties() {
    let mut catalog = Catalog::new();
    catalog.insert(Announcement {
        name: "pg".into(),
        namespace: "Pg".into(),
        // Announced child first: discovery still lists the parent first.
        resources: vec![
            resource("Pg::Schema")
                .field(field::string("name"))
                .field(field::string("database"))
                .parent("Pg::Database", [("database", "name")])
                .build(),
            resource("Pg::Database")
                .field(field::string("name"))
                .build(),
        ],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let store = state::open_dir(dir.path()).unwrap();
    let target = stack::TargetDecl {
        name: "t".into(),
        plugin: "pg".into(),
        config: PropertyMap::new(),
    };
    let targets = discovery::targets_to_discover(
        store.as_ref(),
        None,
        Some(("s", std::slice::from_ref(&target))),
    )
    .unwrap();
    let plugin = Catalogs::default();
    let report = discovery::discover(
        &plugin,
        &catalog,
        &orrery_primary::scheduler::RateRegistry::local(),
        store.as_ref(),
        &targets,
        &discovery::Options::default(),
    )
    .await
    .unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    let seen = plugin.seen.lock().unwrap().clone();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        seen,
        vec![
            ("Pg::Database".to_owned(), None, None),
            ("Pg::Schema".to_owned(), some("app"), None),
            ("Pg::Schema".to_owned(), some("billing"), None),
            ("Pg::Schema".to_owned(), some("billing"), some("2")),
        ]
    );
    assert_eq!(report.unmanaged, 6, "{report:?}");
    let mut schemas: Vec<(String, String)> = store
        .resources(Some(discovery::UNMANAGED_STACK))
        .unwrap()
        .into_iter()
        .filter(|r| r.resource_type == "Pg::Schema")
        .map(|r| {
            let db = r.properties.get("database").and_then(Value::as_str);
            (r.native_id.clone(), db.unwrap_or("").to_owned())
        })
        .collect();
    schemas.sort();
    assert_eq!(
        schemas,
        [
            ("app.audit".to_owned(), "app".to_owned()),
            ("app.public".to_owned(), "app".to_owned()),
            ("billing.ledger".to_owned(), "billing".to_owned()),
            ("billing.public".to_owned(), "billing".to_owned()),
        ]
    );
}
