//! A deliberately broken plugin: the `local` plugin with one contract
//! violation, chosen by `ORRERY_BROKEN_DEFECT`. The conformance suite must
//! fail against each, naming the check (see primary/tests/it/plugin_test.rs);
//! `unknown-enum-values` is the exception that must pass, with warnings.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::sync::Mutex;

use orrery_plugin_local::LocalPlugin;
use orrery_plugin_sdk::schema::{
    encode_frame, Announcement, Condition, CreateRequest, DeleteRequest, DiscoveryFilter, EdgeKind,
    Envelope, FieldType, ListRequest, ListedResource, MatchOp, MessageKind, Operation,
    ProgressEvent, ReadRequest, ResourceSchema, UpdateMethod, UpdateRequest, Value,
    MAX_FRAME_BYTES, MAX_MESSAGE_BYTES,
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
    /// Answers every list with every resource, whatever `page_size` asked.
    ListIgnoresPageSize,
    /// Announces enum values this release does not know: not a defect at
    /// all (every wire enum is open), so the suite must pass, warning.
    UnknownEnumValues,
    /// Answers the first list with a frame over the 16 MiB limit, written
    /// as a plugin without the SDK's guard would.
    OversizedReply,
    /// Announces protocol major 2.
    ProtocolMismatch,
    /// Answers reads of files with a body just under the message limit, so
    /// that the envelope around it is just over the frame limit.
    ReplyAtFrameLimit,
}

const DEFECTS: [(&str, Defect); 10] = [
    ("read-returns-write-only", Defect::ReadReturnsWriteOnly),
    ("update-changes-native-id", Defect::UpdateChangesNativeId),
    ("delete-leaves-listable", Defect::DeleteLeavesListable),
    ("handler-panics", Defect::HandlerPanics),
    ("stray-print", Defect::StrayPrint),
    ("list-ignores-page-size", Defect::ListIgnoresPageSize),
    ("unknown-enum-values", Defect::UnknownEnumValues),
    ("oversized-reply", Defect::OversizedReply),
    ("protocol-mismatch", Defect::ProtocolMismatch),
    ("reply-at-frame-limit", Defect::ReplyAtFrameLimit),
];

struct Broken {
    defect: Defect,
    deleted: Mutex<Vec<String>>,
    /// For `oversized-reply`: the original stdout, kept before the SDK
    /// guards it, taken by the first list.
    raw_stdout: Mutex<Option<File>>,
}

impl ResourcePlugin for Broken {
    fn info(&self) -> PluginInfo {
        LocalPlugin.info()
    }
    fn resources(&self) -> Vec<ResourceSchema> {
        let mut resources = LocalPlugin.resources();
        if self.defect == Defect::UnknownEnumValues {
            for schema in &mut resources {
                for field in &mut schema.fields {
                    match (schema.type_name.as_str(), field.name.as_str()) {
                        ("Local::Fs::File", "mode") => {
                            field.field_type = FieldType::Unknown("octal".into());
                        }
                        ("Local::Fs::File", "content") => {
                            field.hints.update_method = UpdateMethod::Unknown("patch".into());
                        }
                        ("Local::Fs::Symlink", "target") => {
                            field.hints.edge_kind = EdgeKind::Unknown("weakReference".into());
                        }
                        _ => {}
                    }
                }
            }
        }
        resources
    }
    fn discovery_filters(&self) -> Vec<DiscoveryFilter> {
        let mut filters = LocalPlugin.discovery_filters();
        if self.defect == Defect::UnknownEnumValues {
            filters.push(DiscoveryFilter {
                resource_type: "Local::Fs::File".into(),
                exclude_when: vec![Condition {
                    property: "path".into(),
                    op: MatchOp::Unknown("glob".into()),
                    value: "*.tmp".into(),
                }],
            });
        }
        filters
    }
    async fn create(&self, request: CreateRequest) -> OpResult {
        if self.defect == Defect::HandlerPanics {
            panic!("deliberate panic in create");
        }
        LocalPlugin.create(request).await
    }
    async fn read(&self, request: ReadRequest) -> OpResult {
        let (request_id, resource_type) =
            (request.request_id.clone(), request.resource_type.clone());
        let mut result = LocalPlugin.read(request).await;
        if let (Defect::ReadReturnsWriteOnly, Ok(event)) = (self.defect, &mut result) {
            if let Some(props) = event.properties.as_mut() {
                props.insert("owner_note".into(), Value::from("leaked secret"));
            }
        }
        if let (Defect::ReplyAtFrameLimit, Ok(event)) = (self.defect, &mut result) {
            if resource_type == "Local::Fs::File" {
                event.request_id = request_id;
                event.resource_type = resource_type;
                event.operation = Operation::Read;
                pad_to_frame_limit(event);
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
    async fn list(&self, mut request: ListRequest) -> Result<ListPage, PluginError> {
        if self.defect == Defect::ListIgnoresPageSize {
            // 0 lets the plugin choose: a page of up to 32, whatever was asked.
            request.page_size = 0;
        }
        let raw = match self.defect {
            Defect::OversizedReply => self.raw_stdout.lock().ok().and_then(|mut s| s.take()),
            _ => None,
        };
        if let Some(mut stdout) = raw {
            // The host closes the link on reading the length; the rest of
            // the write then fails, which is the point.
            let _ = stdout.write_all(&oversized_list_result(&request));
            let _ = stdout.flush();
        }
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

/// One frame holding a `list_result` envelope whose body carries a blob of
/// 20 MiB: a well-formed envelope, over the frame limit. `Envelope::new`
/// refuses bodies over the limit, so the envelope's map is written by hand
/// (MessagePack: `protocol`, `id`, `kind`, `body`).
fn oversized_list_result(request: &ListRequest) -> Vec<u8> {
    fn str_(out: &mut Vec<u8>, s: &str) {
        out.push(0xa0 | s.len() as u8); // fixstr: every string here is short
        out.extend_from_slice(s.as_bytes());
    }
    fn bin32(out: &mut Vec<u8>, len: usize) {
        out.push(0xc6);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    let blob = 20 << 20;
    let mut body = Vec::with_capacity(blob + 256);
    body.push(0x84); // ListResult: 4 entries
    str_(&mut body, "request_id");
    str_(
        &mut body,
        &request.request_id[..request.request_id.len().min(31)],
    );
    str_(&mut body, "resource_type");
    str_(
        &mut body,
        &request.resource_type[..request.resource_type.len().min(31)],
    );
    str_(&mut body, "status");
    str_(&mut body, "Success");
    str_(&mut body, "resources");
    body.extend_from_slice(&[0x91, 0x82]); // one ListedResource of 2 entries
    str_(&mut body, "native_id");
    str_(&mut body, "huge");
    str_(&mut body, "properties");
    body.push(0x81);
    str_(&mut body, "blob");
    bin32(&mut body, blob);
    body.resize(body.len() + blob, b'x');

    let mut envelope = Vec::with_capacity(body.len() + 64);
    envelope.push(0x84);
    str_(&mut envelope, "protocol");
    envelope.push(0x01);
    str_(&mut envelope, "id");
    envelope.extend_from_slice(&[0xc4, 0x10]);
    envelope.extend_from_slice(&[0x42; 16]);
    str_(&mut envelope, "kind");
    str_(&mut envelope, "list_result");
    str_(&mut envelope, "body");
    bin32(&mut envelope, body.len());
    envelope.extend_from_slice(&body);
    assert!(envelope.len() > MAX_FRAME_BYTES);

    let mut frame = (envelope.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&envelope);
    frame
}

/// Pads `event`'s `content` so that the encoded event is 32 bytes under the
/// message limit: it encodes, but the envelope around it (id, correlation,
/// kind: some 80 bytes) does not fit in a frame.
fn pad_to_frame_limit(event: &mut ProgressEvent) {
    let target = MAX_MESSAGE_BYTES - 32;
    let mut set = |len: usize| {
        if let Some(props) = event.properties.as_mut() {
            props.insert("content".into(), Value::from("x".repeat(len)));
        }
        orrery_plugin_sdk::schema::encode(&*event).map_or(0, |b| b.len())
    };
    // Both lengths are str32, so the encoding grows one byte per byte.
    let base = 1 << 20;
    let encoded = set(base);
    set(base + target - encoded);
}

/// An `announce` frame claiming protocol major 2, in the envelope and in
/// the announcement.
fn protocol_2_announcement(plugin: &Broken) -> Vec<u8> {
    let announcement = Announcement {
        protocol: 2,
        ..orrery_plugin_sdk::announcement(plugin)
    };
    let mut envelope = match Envelope::new(MessageKind::Announce, &announcement) {
        Ok(envelope) => envelope,
        Err(e) => panic!("cannot encode the announcement: {e}"),
    };
    envelope.protocol = 2;
    match encode_frame(&envelope) {
        Ok(frame) => frame,
        Err(e) => panic!("cannot encode the announcement: {e}"),
    }
}

fn main() {
    let chosen = std::env::var("ORRERY_BROKEN_DEFECT").unwrap_or_default();
    let Some(&(name, defect)) = DEFECTS.iter().find(|(name, _)| *name == chosen) else {
        let names: Vec<&str> = DEFECTS.iter().map(|(name, _)| *name).collect();
        eprintln!(
            "set ORRERY_BROKEN_DEFECT to one of {} (got {chosen:?})",
            names.join(", ")
        );
        std::process::exit(2);
    };
    // A line on the log channel, so tests can tell whether it was shown.
    eprintln!("orrery-plugin-broken: defect {name}");
    // The names (never the values) of the environment it was given, so a
    // test can show which of its host's variables reach a plugin.
    let mut names: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    names.sort();
    eprintln!("orrery-plugin-broken: environment {}", names.join(","));
    let mut broken = Broken {
        defect,
        deleted: Mutex::new(Vec::new()),
        raw_stdout: Mutex::new(None),
    };
    match defect {
        // The classic mistake: a banner on stdout before the SDK guards it.
        Defect::StrayPrint => println!("starting the broken plugin..."),
        Defect::ProtocolMismatch => {
            let mut stdout = std::io::stdout();
            let _ = stdout.write_all(&protocol_2_announcement(&broken));
            let _ = stdout.flush();
        }
        Defect::OversizedReply => {
            // A second handle on the frame pipe, before `serve` moves it.
            let raw = std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map(File::from);
            match raw {
                Ok(raw) => broken.raw_stdout = Mutex::new(Some(raw)),
                Err(e) => {
                    eprintln!("cannot duplicate stdout: {e}");
                    std::process::exit(2);
                }
            }
        }
        _ => {}
    }
    orrery_plugin_sdk::serve(broken)
}
