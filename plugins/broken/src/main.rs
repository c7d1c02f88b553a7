//! A deliberately broken plugin: the `local` plugin with one contract
//! violation, chosen by `ORRERY_BROKEN_DEFECT`. The conformance suite must
//! fail against each, naming the check (see primary/tests/plugin_test.rs).

use std::sync::Mutex;

use orrery_plugin_local::LocalPlugin;
use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, ListRequest, ListedResource, ReadRequest, ResourceSchema,
    UpdateRequest, Value,
};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError, PluginInfo, ResourcePlugin};

/// The defects, by the value of `ORRERY_BROKEN_DEFECT`.
#[derive(Clone, Copy, PartialEq)]
enum Defect {
    ReadReturnsWriteOnly,
    UpdateChangesNativeId,
    DeleteLeavesListable,
    HandlerPanics,
    StrayPrint,
}

struct Broken {
    defect: Defect,
    deleted: Mutex<Vec<String>>,
}

impl ResourcePlugin for Broken {
    fn info(&self) -> PluginInfo {
        LocalPlugin.info()
    }
    fn resources(&self) -> Vec<ResourceSchema> {
        LocalPlugin.resources()
    }
    async fn create(&self, request: CreateRequest) -> OpResult {
        if self.defect == Defect::HandlerPanics {
            panic!("deliberate panic in create");
        }
        LocalPlugin.create(request).await
    }
    async fn read(&self, request: ReadRequest) -> OpResult {
        let mut result = LocalPlugin.read(request).await;
        if let (Defect::ReadReturnsWriteOnly, Ok(event)) = (self.defect, &mut result) {
            if let Some(props) = event.properties.as_mut() {
                props.insert("owner_note".into(), Value::from("leaked secret"));
            }
        }
        result
    }
    async fn update(&self, request: UpdateRequest) -> OpResult {
        let mut result = LocalPlugin.update(request).await;
        if let (Defect::UpdateChangesNativeId, Ok(event)) = (self.defect, &mut result) {
            event.native_id = event.native_id.take().map(|id| format!("{id}.v2"));
        }
        result
    }
    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let id = request.native_id.clone();
        let result = LocalPlugin.delete(request).await;
        if self.defect == Defect::DeleteLeavesListable && result.is_ok() {
            if let Ok(mut deleted) = self.deleted.lock() {
                deleted.push(id);
            }
        }
        result
    }
    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let mut page = LocalPlugin.list(request).await?;
        if page.next_page_token.is_none() {
            if let Ok(deleted) = self.deleted.lock() {
                page.resources
                    .extend(deleted.iter().map(|id| ListedResource {
                        native_id: id.clone(),
                        ..Default::default()
                    }));
            }
        }
        Ok(page)
    }
}

fn main() {
    let defect = match std::env::var("ORRERY_BROKEN_DEFECT").as_deref() {
        Ok("read-returns-write-only") => Defect::ReadReturnsWriteOnly,
        Ok("update-changes-native-id") => Defect::UpdateChangesNativeId,
        Ok("delete-leaves-listable") => Defect::DeleteLeavesListable,
        Ok("handler-panics") => Defect::HandlerPanics,
        Ok("stray-print") => Defect::StrayPrint,
        other => {
            eprintln!("set ORRERY_BROKEN_DEFECT to one of read-returns-write-only, update-changes-native-id, delete-leaves-listable, handler-panics, stray-print (got {other:?})");
            std::process::exit(2);
        }
    };
    if defect == Defect::StrayPrint {
        // The classic mistake: a banner on stdout before the SDK guards it.
        println!("starting the broken plugin...");
    }
    orrery_plugin_sdk::serve(Broken {
        defect,
        deleted: Mutex::new(Vec::new()),
    })
}
