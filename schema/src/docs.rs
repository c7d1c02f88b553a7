//! The generated part of `docs/protocol.md`: every enum value, every error
//! code with its classification, and the limits. A test keeps the document
//! and this output identical.

use std::fmt::Write;

use crate::announce::{Capability, MatchOp};
use crate::codec::{MAX_DEPTH, MAX_MESSAGE_BYTES};
use crate::envelope::{MessageKind, PROTOCOL_MAJOR};
use crate::error_code::ErrorCode;
use crate::frame::{FRAME_HEADER_BYTES, MAX_FRAME_BYTES};
use crate::progress::{Operation, OperationStatus};
use crate::resource_schema::{EdgeKind, FieldType, UpdateMethod};

/// Marks the start of the generated section in `docs/protocol.md`.
pub const BEGIN_MARKER: &str = "<!-- BEGIN GENERATED: orrery_schema::docs::protocol_tables -->";
/// Marks the end of the generated section in `docs/protocol.md`.
pub const END_MARKER: &str = "<!-- END GENERATED -->";

fn table(out: &mut String, title: &str, rows: &[(&str, &str)]) {
    let _ = writeln!(out, "### {title}\n\n| value | meaning |\n|---|---|");
    for (wire, doc) in rows {
        let _ = writeln!(out, "| `{wire}` | {} |", without_rustdoc_links(doc.trim()));
    }
    out.push('\n');
}

/// Rustdoc links such as ``[`crate::CreateRequest`]`` read as plain code
/// names (`` `CreateRequest` ``) in markdown meant for any language.
fn without_rustdoc_links(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some(start) = rest.find("[`crate::") {
        let name_start = start + "[`crate::".len();
        let Some(len) = rest[name_start..].find("`]") else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push('`');
        out.push_str(&rest[name_start..name_start + len]);
        out.push('`');
        rest = &rest[name_start + len + "`]".len()..];
    }
    out.push_str(rest);
    out
}

/// The markdown tables, exactly as they appear in `docs/protocol.md`.
pub fn protocol_tables() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Constants\n\n| name | value |\n|---|---|\n\
         | protocol major | {PROTOCOL_MAJOR} |\n\
         | frame header | {FRAME_HEADER_BYTES} bytes, big-endian payload length |\n\
         | largest frame payload | {MAX_FRAME_BYTES} bytes |\n\
         | largest message | {MAX_MESSAGE_BYTES} bytes |\n\
         | deepest nesting | {MAX_DEPTH} levels |\n"
    );
    table(
        &mut out,
        "Message kinds (`Envelope.kind`)",
        MessageKind::VARIANTS,
    );
    table(&mut out, "Operations", Operation::VARIANTS);
    table(&mut out, "Operation status", OperationStatus::VARIANTS);
    table(
        &mut out,
        "Edge kinds (`FieldHint.edge_kind`)",
        EdgeKind::VARIANTS,
    );
    table(
        &mut out,
        "Update methods (`FieldHint.update_method`)",
        UpdateMethod::VARIANTS,
    );
    table(
        &mut out,
        "Field types (`FieldSchema.type`)",
        FieldType::VARIANTS,
    );
    table(&mut out, "Capabilities", Capability::VARIANTS);
    table(&mut out, "Discovery match operators", MatchOp::VARIANTS);
    let _ = writeln!(
        out,
        "### Error codes\n\n| code | retryable | outcome unknown | meaning |\n|---|---|---|---|"
    );
    for (wire, doc) in ErrorCode::VARIANTS {
        let code = ErrorCode::from_wire(wire);
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "| `{wire}` | {} | {} | {} |",
            yes_no(code.is_retryable()),
            yes_no(code.is_ambiguous()),
            doc.trim()
        );
    }
    out
}
