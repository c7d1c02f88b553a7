//! Codec throughput of the two messages that matter most on the wire.
//!
//! - `create frame`: a typical `CreateRequest` (a file resource with eight
//!   properties of mixed kinds, a target with config) in its `Envelope`, as
//!   it travels on the plugin link: encoded body, encoded envelope, frame.
//! - `announce frame`: an `Announcement` of 200 resource types with ten
//!   hinted fields each, in its `Envelope`.
//! - `create body` / `announce body`: the same messages without the envelope.
//!
//! The baseline is `serde_json` on the same values, measured in the same run.
//! For the enveloped rows the JSON side nests the body as a JSON object in
//! one document and decodes it in one pass, which is the cheapest a JSON
//! wire could do (MessagePack pays for a second, opaque `bin` level so that
//! relays can forward bodies without decoding them).
//!
//! Run: `cargo bench -p orrery-schema --bench codec`.
//! Smoke test: append `-- --quick`, or set `ORRERY_BENCH_QUICK=1`. Run
//! without cargo's `--bench` argument (as `cargo test --benches` does), the
//! program also runs in quick mode.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use orrery_schema::{
    decode, encode, encode_frame, Announcement, Capability, Condition, CreateRequest,
    DiscoveryFilter, EdgeKind, Envelope, FieldHint, FieldSchema, FieldType, LabelConfig, MatchOp,
    MessageKind, PropertyMap, RateLimit, ResourceSchema, Target, TraceContext, UpdateMethod, Uuid,
    Value, FRAME_HEADER_BYTES,
};
use serde::{Deserialize, Serialize};

type BoxError = Box<dyn std::error::Error>;

/// Wall time each codec runs for one figure, split into `ROUNDS` rounds that
/// alternate MessagePack and JSON, so both see the same machine load.
const PER_FIGURE: Duration = Duration::from_millis(1500);
const ROUNDS: u32 = 5;
const QUICK_ITERATIONS: u64 = 3;

/// The JSON baseline's envelope: the same header fields, the body nested.
#[derive(Serialize, Deserialize)]
struct JsonEnvelope<B> {
    protocol: u16,
    id: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation: Option<Uuid>,
    kind: MessageKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<TraceContext>,
    body: B,
}

impl<'a, B> JsonEnvelope<&'a B> {
    fn around(template: &Envelope, body: &'a B) -> Self {
        JsonEnvelope {
            protocol: template.protocol,
            id: template.id,
            correlation: template.correlation,
            kind: template.kind.clone(),
            deadline_ms: template.deadline_ms,
            trace: template.trace.clone(),
            body,
        }
    }
}

fn create_request() -> CreateRequest {
    let mut config = PropertyMap::new();
    config.insert("root".into(), "/srv/orrery".into());
    config.insert("create_parents".into(), true.into());
    config.insert("umask".into(), 0o022.into());

    let mut tags = PropertyMap::new();
    tags.insert("env".into(), "prod".into());
    tags.insert("team".into(), "platform".into());
    tags.insert("managed-by".into(), "orrery".into());

    let content = "Welcome to web-01.\n\
                   This host is managed by Orrery; local changes are overwritten.\n\
                   Maintenance window: Sundays 02:00-04:00 UTC.\n\
                   On-call: #platform-oncall, runbook at https://runbooks.example.com/web.\n\
                   Last provisioned by the production stack.\n";

    let mut properties = PropertyMap::new();
    properties.insert("path".into(), "/srv/orrery/etc/motd".into());
    properties.insert("content".into(), content.into());
    properties.insert("mode".into(), 0o644.into());
    properties.insert("executable".into(), false.into());
    properties.insert("max_size_mib".into(), 1.5.into());
    properties.insert("checksum".into(), Value::Bytes((0u8..32).collect()));
    properties.insert("tags".into(), Value::Map(tags));
    properties.insert(
        "watchers".into(),
        Value::List(vec!["nginx.service".into(), "sshd.service".into()]),
    );

    CreateRequest {
        request_id: "01906f1e-8c2a-7b3d-9e4f-a1b2c3d4e5f6".into(),
        resource_type: "Local::Fs::File".into(),
        label: "motd".into(),
        target: Target {
            name: "local".into(),
            config,
            ..Default::default()
        },
        properties,
    }
}

fn field(name: &str, field_type: FieldType, description: &str, hints: FieldHint) -> FieldSchema {
    FieldSchema {
        name: name.into(),
        field_type,
        description: description.into(),
        hints,
    }
}

fn resource_schema(i: usize) -> ResourceSchema {
    let hint = FieldHint::default;
    ResourceSchema {
        concurrency: None,
        parent: None,
        type_name: format!("Bench::Service::Type{i:03}"),
        description: format!("Resource type number {i}, generated for the codec benchmark."),
        identifier: vec!["name".into()],
        fields: vec![
            field(
                "name",
                FieldType::String,
                "The resource's name, unique per region.",
                FieldHint {
                    create_only: true,
                    required: true,
                    ..hint()
                },
            ),
            field(
                "region",
                FieldType::String,
                "Where the resource lives.",
                FieldHint {
                    create_only: true,
                    required_on_create: true,
                    update_method: UpdateMethod::CreateBeforeDelete,
                    ..hint()
                },
            ),
            field(
                "size",
                FieldType::Integer,
                "Capacity in GiB.",
                FieldHint {
                    provider_default: true,
                    ..hint()
                },
            ),
            field(
                "enabled",
                FieldType::Boolean,
                "Whether the resource serves traffic.",
                hint(),
            ),
            field(
                "tags",
                FieldType::Map,
                "Key/value tags.",
                FieldHint {
                    provider_default: true,
                    ..hint()
                },
            ),
            field(
                "password",
                FieldType::String,
                "The admin password; never returned.",
                FieldHint {
                    write_only: true,
                    opaque: true,
                    ..hint()
                },
            ),
            field(
                "subnet_id",
                FieldType::String,
                "The subnet the resource is placed in.",
                FieldHint {
                    create_only: true,
                    ..hint()
                },
            ),
            field(
                "volume_id",
                FieldType::String,
                "The volume attached to the resource.",
                FieldHint {
                    edge_kind: EdgeKind::AttachesTo,
                    ..hint()
                },
            ),
            field(
                "log_sink",
                FieldType::String,
                "Where logs go; needed only at run time.",
                FieldHint {
                    edge_kind: EdgeKind::RuntimeDependency,
                    ..hint()
                },
            ),
            field(
                "arn",
                FieldType::String,
                "The provider's identifier.",
                FieldHint {
                    read_only: true,
                    ..hint()
                },
            ),
        ],
        discoverable: i & 1 == 0,
    }
}

fn announcement() -> Announcement {
    Announcement {
        name: "bench".into(),
        version: "1.2.3".into(),
        namespace: "Bench".into(),
        capabilities: vec![
            Capability::Cancel,
            Capability::Concurrent,
            Capability::Ping,
            Capability::TraceContext,
            Capability::List,
        ],
        rate_limit: RateLimit {
            requests_per_second: 25.0,
            burst: 50,
            max_in_flight: 32,
        },
        discovery_filters: vec![DiscoveryFilter {
            resource_type: "Bench::Service::Type000".into(),
            exclude_when: vec![Condition {
                property: "name".into(),
                op: MatchOp::Prefix,
                value: "system-".into(),
            }],
        }],
        label_config: LabelConfig {
            name_property: Some("name".into()),
            tags_property: Some("tags".into()),
        },
        resources: (0..200).map(resource_schema).collect(),
        sdk: "orrery-plugin-sdk/0.1.0".into(),
        ..Announcement::default()
    }
}

fn envelope_template(kind: MessageKind) -> Envelope {
    Envelope {
        protocol: orrery_schema::PROTOCOL_MAJOR,
        id: Uuid::from_u128(0x0190_6f1e_8c2a_7b3d_9e4f_a1b2_c3d4_e5f6),
        correlation: None,
        kind,
        deadline_ms: Some(1_750_000_030_000),
        trace: Some(TraceContext {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: String::new(),
        }),
        max_message_bytes: None,
        body: Vec::new(),
    }
}

type Work<'a> = &'a mut dyn FnMut() -> Result<(), BoxError>;

/// Seconds per call of `f` over `n` calls.
fn time(f: Work<'_>, n: u64) -> Result<f64, BoxError> {
    let start = Instant::now();
    for _ in 0..n {
        f()?;
    }
    Ok(start.elapsed().as_secs_f64() / n as f64)
}

/// How many calls of `f` take about `wanted`; doubles as warm-up.
fn calibrate(f: Work<'_>, wanted: Duration) -> Result<u64, BoxError> {
    let mut n: u64 = 1;
    loop {
        let per_call = time(f, n)?;
        if per_call * n as f64 >= 0.05 {
            return Ok(((wanted.as_secs_f64() / per_call) as u64).max(1));
        }
        n *= 2;
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// One operation timed both ways.
struct Comparison {
    /// Median seconds per message, MessagePack.
    msgpack: f64,
    /// Median seconds per message, JSON.
    json: f64,
    /// Median over rounds of JSON time / MessagePack time: above 1, MessagePack is faster.
    speedup: f64,
}

/// Times `msgpack` against `json` in `ROUNDS` interleaved rounds.
fn compare(quick: bool, msgpack: Work<'_>, json: Work<'_>) -> Result<Comparison, BoxError> {
    if quick {
        let (m, j) = (
            time(msgpack, QUICK_ITERATIONS)?,
            time(json, QUICK_ITERATIONS)?,
        );
        return Ok(Comparison {
            msgpack: m,
            json: j,
            speedup: j / m,
        });
    }
    let round = PER_FIGURE / ROUNDS;
    let (n_msgpack, n_json) = (calibrate(msgpack, round)?, calibrate(json, round)?);
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        rounds.push((time(msgpack, n_msgpack)?, time(json, n_json)?));
    }
    Ok(Comparison {
        msgpack: median(rounds.iter().map(|r| r.0).collect()),
        json: median(rounds.iter().map(|r| r.1).collect()),
        speedup: median(rounds.iter().map(|r| r.1 / r.0).collect()),
    })
}

/// One message measured both ways.
struct Row {
    name: &'static str,
    msgpack_bytes: usize,
    json_bytes: usize,
    encode: Comparison,
    decode: Comparison,
}

type Encoder<'a> = Box<dyn FnMut() -> Result<Vec<u8>, BoxError> + 'a>;
type Decoder<'a> = Box<dyn FnMut(&[u8]) -> Result<(), BoxError> + 'a>;

struct Case<'a> {
    name: &'static str,
    msgpack: Vec<u8>,
    json: Vec<u8>,
    msgpack_encode: Encoder<'a>,
    msgpack_decode: Decoder<'a>,
    json_encode: Encoder<'a>,
    json_decode: Decoder<'a>,
}

fn run(quick: bool, mut case: Case<'_>) -> Result<Row, BoxError> {
    // Encoding must be deterministic for the sizes to mean anything.
    if (case.msgpack_encode)()? != case.msgpack || (case.json_encode)()? != case.json {
        return Err(format!("{}: encoding is not deterministic", case.name).into());
    }
    let encode = compare(
        quick,
        &mut || (case.msgpack_encode)().map(|b| drop(black_box(b))),
        &mut || (case.json_encode)().map(|b| drop(black_box(b))),
    );
    let decode = compare(
        quick,
        &mut || (case.msgpack_decode)(black_box(&case.msgpack)),
        &mut || (case.json_decode)(black_box(&case.json)),
    );
    let failed = |e: BoxError| -> BoxError { format!("{}: {e}", case.name).into() };
    Ok(Row {
        name: case.name,
        msgpack_bytes: case.msgpack.len(),
        json_bytes: case.json.len(),
        encode: encode.map_err(failed)?,
        decode: decode.map_err(failed)?,
    })
}

fn frame_case<'a, T>(
    name: &'static str,
    kind: MessageKind,
    value: &'a T,
) -> Result<Case<'a>, BoxError>
where
    T: Serialize + for<'de> Deserialize<'de> + PartialEq,
{
    let template = envelope_template(kind);
    let frame = encode_frame(&Envelope {
        body: encode(value)?,
        ..template.clone()
    })?;
    let back: T = Envelope::decode(&frame[FRAME_HEADER_BYTES..])?.body()?;
    if &back != value {
        return Err(format!("{name} does not round-trip").into());
    }
    let json = serde_json::to_vec(&JsonEnvelope::around(&template, value))?;
    let msgpack_template = template.clone();
    Ok(Case {
        name,
        msgpack: frame,
        json,
        // What a sender does: encode the body, wrap it, frame it.
        msgpack_encode: Box::new(move || {
            let envelope = Envelope {
                body: encode(value)?,
                ..msgpack_template.clone()
            };
            Ok(encode_frame(&envelope)?)
        }),
        // What a receiver does: decode the envelope, then its body.
        msgpack_decode: Box::new(|frame| {
            let envelope = Envelope::decode(&frame[FRAME_HEADER_BYTES..])?;
            black_box(envelope.body::<T>()?);
            Ok(())
        }),
        json_encode: Box::new(move || {
            Ok(serde_json::to_vec(&JsonEnvelope::around(&template, value))?)
        }),
        json_decode: Box::new(|bytes| {
            black_box(serde_json::from_slice::<JsonEnvelope<T>>(bytes)?);
            Ok(())
        }),
    })
}

fn body_case<'a, T>(name: &'static str, value: &'a T) -> Result<Case<'a>, BoxError>
where
    T: Serialize + for<'de> Deserialize<'de> + PartialEq,
{
    let msgpack = encode(value)?;
    if &decode::<T>(&msgpack)? != value {
        return Err(format!("{name} does not round-trip").into());
    }
    Ok(Case {
        name,
        msgpack,
        json: serde_json::to_vec(value)?,
        msgpack_encode: Box::new(move || Ok(encode(value)?)),
        msgpack_decode: Box::new(|bytes| {
            black_box(decode::<T>(bytes)?);
            Ok(())
        }),
        json_encode: Box::new(move || Ok(serde_json::to_vec(value)?)),
        json_decode: Box::new(|bytes| {
            black_box(serde_json::from_slice::<T>(bytes)?);
            Ok(())
        }),
    })
}

fn print_tables(rows: &[Row]) {
    println!("| message | MessagePack bytes | JSON bytes | size ratio (MessagePack / JSON) |");
    println!("|---|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.2} |",
            r.name,
            r.msgpack_bytes,
            r.json_bytes,
            r.msgpack_bytes as f64 / r.json_bytes as f64
        );
    }
    println!();
    println!(
        "| message | op | MessagePack msg/s | MessagePack MB/s | JSON msg/s | JSON MB/s | MessagePack speed-up (JSON time / MessagePack time) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for r in rows {
        for (op, c) in [("encode", &r.encode), ("decode", &r.decode)] {
            let mb = |bytes: usize, secs: f64| bytes as f64 / secs / 1e6;
            println!(
                "| {} | {op} | {:.0} | {:.1} | {:.0} | {:.1} | {:.2} |",
                r.name,
                1.0 / c.msgpack,
                mb(r.msgpack_bytes, c.msgpack),
                1.0 / c.json,
                mb(r.json_bytes, c.json),
                c.speedup
            );
        }
    }
}

fn bench_all(quick: bool) -> Result<Vec<Row>, BoxError> {
    let req = create_request();
    let ann = announcement();
    let rows = vec![
        run(
            quick,
            frame_case("create frame", MessageKind::Create, &req)?,
        )?,
        run(quick, body_case("create body", &req)?)?,
        run(
            quick,
            frame_case("announce frame", MessageKind::Announce, &ann)?,
        )?,
        run(quick, body_case("announce body", &ann)?)?,
    ];
    Ok(rows)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then a smoke test is all that is wanted.
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
        || !args.iter().any(|a| a == "--bench");

    println!(
        "orrery-schema codec benchmark: {}",
        if quick {
            format!("quick mode, {QUICK_ITERATIONS} iterations per figure (a smoke test; figures meaningless)")
        } else {
            format!(
                "each figure is the median of {ROUNDS} rounds alternating MessagePack and JSON, \
                 ~{} ms per codec",
                PER_FIGURE.as_millis()
            )
        }
    );
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "{cores} cores. A MessagePack frame is the length prefix ({FRAME_HEADER_BYTES} bytes) and \
         the envelope with the body as bin; its JSON baseline is the envelope's fields with \
         the body nested as an object, decoded in one pass. MB/s counts each codec's own bytes.\n"
    );
    match bench_all(quick) {
        Ok(rows) => {
            print_tables(&rows);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("codec bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}
