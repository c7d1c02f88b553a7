//! The exporter against a collector on a local socket that answers as a
//! test scripts it: what is sent, what is sent again, and what a hostile
//! collector cannot make it do.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use opentelemetry::InstrumentationScope;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_sdk::trace::SpanExporter as _;
use prost::Message;

use super::super::otlp_traces_tests::plain;
use super::*;

/// One request as the collector saw it.
struct Seen {
    request_line: String,
    headers: Vec<String>,
    body: Vec<u8>,
}

/// A collector that gives the scripted raw answers, one per request, on
/// any number of connections, and reports each request it read.
fn collector(answers: Vec<Vec<u8>>) -> (String, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let (seen, requests) = mpsc::channel();
    std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut stream = stream;
            // Requests on this connection until it closes.
            loop {
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                    break;
                }
                let mut headers = Vec::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let line = line.trim_end().to_owned();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    headers.push(line);
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let _ = seen.send(Seen {
                    request_line,
                    headers,
                    body,
                });
                let Some(answer) = answers.next() else { return };
                if stream.write_all(&answer).is_err() {
                    break;
                }
            }
        }
    });
    (url, requests)
}

fn answer(status: &str, extra: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n{extra}\r\n").into_bytes()
}

fn batch() -> Vec<SpanData> {
    let scope = InstrumentationScope::builder("orrery").build();
    vec![plain(&scope, 1), plain(&scope, 2)]
}

fn exporter(url: String, timeout: Duration) -> OtlpSpanExporter {
    OtlpSpanExporter::new(url, parse_headers("api-key=s3cret"), timeout).unwrap()
}

fn next(requests: &mpsc::Receiver<Seen>) -> Seen {
    requests
        .recv_timeout(Duration::from_secs(10))
        .expect("the collector saw a request")
}

#[test]
fn a_batch_is_one_protobuf_post_with_the_configured_headers() {
    let (url, requests) = collector(vec![answer("200 OK", "")]);
    let exporter = exporter(url, Duration::from_secs(10));
    futures::executor::block_on(exporter.export(batch())).unwrap();
    let seen = next(&requests);
    assert_eq!(seen.request_line.trim_end(), "POST /v1/traces HTTP/1.1");
    let has = |h: &str| seen.headers.iter().any(|l| l.eq_ignore_ascii_case(h));
    assert!(
        has("content-type: application/x-protobuf"),
        "{:?}",
        seen.headers
    );
    assert!(has("api-key: s3cret"), "{:?}", seen.headers);
    let request = ExportTraceServiceRequest::decode(seen.body.as_slice()).unwrap();
    assert_eq!(request.resource_spans[0].scope_spans[0].spans.len(), 2);
}

#[test]
fn a_batch_refused_for_load_is_sent_again_and_one_refused_outright_is_not() {
    let (url, requests) = collector(vec![
        answer("503 Service Unavailable", "retry-after: 0\r\n"),
        answer("200 OK", ""),
        answer("400 Bad Request", ""),
    ]);
    let exporter = exporter(url, Duration::from_secs(10));
    futures::executor::block_on(exporter.export(batch())).unwrap();
    let (first, second) = (next(&requests), next(&requests));
    assert_eq!(first.body, second.body);
    let refused = futures::executor::block_on(exporter.export(batch())).unwrap_err();
    next(&requests);
    let message = refused.to_string();
    assert!(message.contains("HTTP 400"), "{message}");
    assert!(
        !message.contains("s3cret") && !message.contains("127.0.0.1"),
        "{message}"
    );
    assert!(
        requests.recv_timeout(Duration::from_millis(300)).is_err(),
        "a 400 is not retried"
    );
}

#[test]
fn a_collector_that_sends_an_endless_answer_does_not_hold_the_export() {
    // Claims a gigabyte, sends a little more than is read of it, then
    // nothing: reading it to the end would wait for the 30 s timeout.
    let mut endless = b"HTTP/1.1 200 OK\r\ncontent-length: 1000000000\r\n\r\n".to_vec();
    endless.extend(vec![b'x'; 100 * 1024]);
    let (url, requests) = collector(vec![endless]);
    let exporter = exporter(url, Duration::from_secs(30));
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(futures::executor::block_on(exporter.export(batch())));
    });
    next(&requests);
    finished
        .recv_timeout(Duration::from_secs(10))
        .expect("the export ended after reading what it reads of an answer")
        .unwrap();
}

#[test]
fn an_unreachable_collector_fails_the_export_without_naming_it() {
    // A port nobody listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let exporter = exporter(
        format!("http://user:pw@127.0.0.1:{port}/v1/traces"),
        Duration::from_secs(2),
    );
    let error = futures::executor::block_on(exporter.export(batch())).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("could not be reached"), "{message}");
    assert!(
        !message.contains("pw") && !message.contains(&port.to_string()),
        "{message}"
    );
}

#[test]
fn after_shutdown_nothing_is_sent() {
    let (url, requests) = collector(vec![answer("200 OK", "")]);
    let exporter = exporter(url, Duration::from_secs(10));
    exporter.shutdown().unwrap();
    assert!(futures::executor::block_on(exporter.export(batch())).is_err());
    assert!(requests.recv_timeout(Duration::from_millis(300)).is_err());
}
