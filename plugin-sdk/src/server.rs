//! The plugin side of the link: the provided main.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use orrery_schema::{
    Announcement, Capability, EncodeError, Envelope, ErrorCode, ListRequest, ListResult,
    MessageKind, Operation, OperationStatus, ProgressEvent, ProtocolError, Request, Uuid,
    MAX_FRAME_BYTES, PROTOCOL_MAJOR,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio_util::codec::FramedRead;
use tracing::Instrument;

use crate::frame_io::{FrameCodec, FrameSink};
use crate::plugin::ResourcePlugin;
use crate::result::{OpResult, PluginError};

/// How long in-flight requests may run after the link closes or SIGTERM arrives.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The announcement the SDK sends for `plugin`.
pub fn announcement<P: ResourcePlugin>(plugin: &P) -> Announcement {
    let info = plugin.info();
    Announcement {
        protocol: PROTOCOL_MAJOR,
        name: info.name,
        version: info.version,
        namespace: info.namespace,
        capabilities: vec![
            Capability::Cancel,
            Capability::Concurrent,
            Capability::Ping,
            Capability::TraceContext,
            Capability::List,
        ],
        rate_limit: plugin.rate_limit(),
        discovery_filters: plugin.discovery_filters(),
        label_config: plugin.label_config(),
        resources: plugin.resources(),
        target_config: plugin.target_config(),
        sdk: concat!("orrery-plugin-sdk/", env!("CARGO_PKG_VERSION")).to_owned(),
    }
}

/// Runs `plugin` on this process's stdin and stdout until stdin closes or
/// SIGTERM arrives, then exits. Logs go to stderr.
///
/// Before serving, stdout is moved to a private descriptor and descriptor 1
/// is pointed at stderr: a stray `println!` in plugin code lands in the log
/// instead of corrupting the frame stream.
///
/// Requests are handled concurrently on one thread unless
/// [`WORKER_THREADS_ENV`] asks for more; handlers must never block.
pub fn serve<P: ResourcePlugin>(plugin: P) -> ! {
    let telemetry = crate::logging::init(&plugin.info().name);
    let code = match serve_stdio(plugin) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = %e, "plugin link failed");
            1
        }
    };
    // `exit` runs no destructors: flush the spans still queued first.
    drop(telemetry);
    std::process::exit(code)
}

/// Environment variable choosing the plugin's runtime: unset, empty or `0`
/// runs everything on one thread (a current-thread runtime); `N` runs a
/// multi-thread runtime with `N` workers.
///
/// One thread is the default because it is the cheapest: the link's reader,
/// the handlers and the writer hand work to each other without waking other
/// threads, which on a busy host costs more CPU than a no-op request itself.
/// Handlers must not block in either case (use `tokio::fs` or
/// `spawn_blocking`); a plugin doing heavy computation in its handlers can
/// ask for workers to spread it over cores.
pub const WORKER_THREADS_ENV: &str = "ORRERY_PLUGIN_WORKER_THREADS";

fn serve_stdio<P: ResourcePlugin>(plugin: P) -> std::io::Result<()> {
    let frames_out = crate::stdio::take_stdout_for_frames()?;
    let workers = match std::env::var(WORKER_THREADS_ENV) {
        Err(_) => 0,
        Ok(v) if v.trim().is_empty() => 0,
        Ok(v) => v.trim().parse::<usize>().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{WORKER_THREADS_ENV} must be a number of threads, not `{v}`"),
            )
        })?,
    };
    let runtime = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    runtime.block_on(async move {
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        serve_io(
            Arc::new(plugin),
            frames_in(),
            frames_out_writer(frames_out),
            async move {
                sigterm.recv().await;
                tracing::info!("SIGTERM: finishing in-flight requests");
            },
        )
        .await
    })
}

/// Stdin as an async reader. A pipe (what every host gives a plugin) is
/// read without blocking, on the runtime's reactor; anything else (a file, a
/// terminal) falls back to tokio's stdin, which reads on a blocking thread:
/// one thread hand-off per read, several microseconds of CPU per frame.
fn frames_in() -> Box<dyn AsyncRead + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(e) => {
            tracing::debug!(error = %e, "stdin is not a pipe; reading it on a blocking thread");
            Box::new(tokio::io::stdin())
        }
    }
}

/// The frames descriptor as an async writer: non-blocking when it is a
/// pipe, as for [`frames_in`].
fn frames_out_writer(frames_out: std::fs::File) -> Box<dyn AsyncWrite + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = frames_out
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(e) => {
            tracing::debug!(error = %e, "stdout is not a pipe; writing it on a blocking thread");
            Box::new(tokio::fs::File::from_std(frames_out))
        }
    }
}

type InFlight = Arc<Mutex<foldhash::HashMap<Uuid, oneshot::Sender<()>>>>;

/// Serves `plugin` over any pair of byte streams until the reader ends or
/// `shutdown` completes; in-flight requests get [`SHUTDOWN_GRACE`] to finish.
///
/// # Errors
///
/// When the announcement cannot be encoded (the plugin's schemas are over
/// the message limit), or the writer's first I/O error (the link broke).
/// A reader that ends or fails ends serving without an error.
pub async fn serve_io<P, R, W>(
    plugin: Arc<P>,
    reader: R,
    writer: W,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    P: ResourcePlugin,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, writer) = FrameSink::new(writer);
    let hello = Envelope::new(MessageKind::Announce, &announcement(plugin.as_ref()))
        .map_err(std::io::Error::other)?
        .with_max_message_bytes(Some(MAX_FRAME_BYTES as u64));
    let _ = out.send(&hello).await;

    let in_flight: InFlight = Arc::default();
    // On one thread, requests are polled by this loop: a task of their own
    // would cost a spawn and a scheduler hand-off per request and buy no
    // parallelism. With workers, each request is a task, to spread them.
    let inline = tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::CurrentThread;
    let mut polled = FuturesUnordered::new();
    let mut tasks = JoinSet::new();
    let mut frames = FramedRead::new(reader, FrameCodec::default());
    tokio::pin!(shutdown);
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            Some(()) = polled.next(), if !polled.is_empty() => continue,
            () = &mut shutdown => break,
        };
        // Reap finished tasks so the set does not grow with the link's age.
        while tasks.try_join_next().is_some() {}
        let bytes = match frame {
            None => break,
            Some(Err(e)) => {
                tracing::error!(error = %e, "reading frames failed");
                break;
            }
            Some(Ok(Err(e))) => {
                tracing::warn!(error = %e, "ignoring an oversized frame");
                continue;
            }
            Some(Ok(Ok(bytes))) => bytes,
        };
        let envelope = match Envelope::decode(&bytes) {
            Ok(envelope) => envelope,
            Err(e) => {
                tracing::warn!(error = %e, len = bytes.len(), "ignoring a frame that is not an envelope");
                continue;
            }
        };
        match handle(&plugin, envelope, &out, &in_flight) {
            Next::Done => {}
            Next::Reply(reply) => send(&out, reply, false).await,
            Next::Run(request) if inline => polled.push(request),
            Next::Run(request) => {
                tasks.spawn(request);
            }
        }
    }

    let drain = async {
        tokio::join!(async { while polled.next().await.is_some() {} }, async {
            while tasks.join_next().await.is_some() {}
        },)
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tracing::warn!("in-flight requests still running after the grace period; abandoning them");
    }
    // The abandoned requests hold the sink too: the stream closes, and the
    // host sees the end, only once they are gone.
    drop((polled, tasks, out));
    match writer.await {
        Ok(result) => result,
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// What a frame from the host asks of the serving loop.
enum Next<F> {
    /// Nothing more (a cancel, handled).
    Done,
    /// Answer at once: a pong or a refusal.
    Reply(Result<Envelope, orrery_schema::EncodeError>),
    /// Run a request: the future that runs and answers it, boxed: it is
    /// kilobytes (the handler's own future is in it), and unboxed each move
    /// on its way to the poller (out of here, into the poller's task) is a
    /// copy of all of it (with the handler's moves, pinned in `run_request`,
    /// 14 % of the plugin's instructions per request).
    Run(Pin<Box<F>>),
}

/// Answers what needs no handler; a request comes back as the future
/// that runs it. Not async: a future of its own per frame would be built
/// and moved for the few frames that need a write here.
fn handle<P: ResourcePlugin>(
    plugin: &Arc<P>,
    envelope: Envelope,
    out: &FrameSink,
    in_flight: &InFlight,
) -> Next<impl Future<Output = ()> + Send + 'static> {
    let reply_error = |code: ErrorCode, message: String| {
        tracing::warn!(kind = %envelope.kind, %code, %message, "refusing a message");
        Next::Reply(envelope.reply(MessageKind::Error, &ProtocolError { code, message }))
    };
    if envelope.protocol != PROTOCOL_MAJOR {
        let msg = format!(
            "message speaks protocol {} but this plugin speaks protocol {PROTOCOL_MAJOR}",
            envelope.protocol
        );
        return reply_error(ErrorCode::UnsupportedProtocol, msg);
    }
    match envelope.kind {
        MessageKind::Ping => Next::Reply(envelope.reply(MessageKind::Pong, &())),
        MessageKind::Cancel => {
            let target = envelope.correlation;
            let cancel = target.and_then(|id| lock(in_flight).remove(&id));
            match cancel {
                Some(tx) => {
                    let _ = tx.send(());
                }
                None => tracing::debug!(?target, "cancel for a request that is not in flight"),
            }
            Next::Done
        }
        _ => match Request::from_envelope(&envelope) {
            Ok(request) => {
                let (cancel_tx, cancel_rx) = oneshot::channel();
                lock(in_flight).insert(envelope.id, cancel_tx);
                // Made in its box (`Box::write` into an uninitialised one),
                // not on the stack and then copied into it.
                Next::Run(Box::into_pin(Box::write(
                    Box::new_uninit(),
                    run_request(
                        plugin.clone(),
                        envelope,
                        request,
                        cancel_rx,
                        out.clone(),
                        in_flight.clone(),
                    ),
                )))
            }
            Err(orrery_schema::RequestError::NotARequest(kind)) => {
                let msg = format!("unknown message kind `{kind}`");
                reply_error(ErrorCode::UnsupportedOperation, msg)
            }
            Err(e) => reply_error(ErrorCode::MalformedMessage, e.to_string()),
        },
    }
}

fn lock(
    in_flight: &InFlight,
) -> std::sync::MutexGuard<'_, foldhash::HashMap<Uuid, oneshot::Sender<()>>> {
    // A poisoned map only means a panic elsewhere while holding it; the map
    // itself is still consistent (single inserts and removes).
    in_flight.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends `reply`: written at once, or with `batched`, left to the sink's
/// next batch.
async fn send(out: &FrameSink, reply: Result<Envelope, orrery_schema::EncodeError>, batched: bool) {
    match reply {
        Ok(envelope) if batched => {
            let _ = out.enqueue(&envelope).await;
        }
        Ok(envelope) => {
            let _ = out.send(&envelope).await;
        }
        Err(e) => tracing::error!(error = %e, "cannot encode a reply"),
    }
}

enum Reply {
    Progress(ProgressEvent),
    List(ListResult),
    /// A successful list page, already encoded to measure it.
    Page(Vec<u8>),
}

/// How many times a list handler is asked again with a smaller
/// `page_size` before an answer that does not fit is given up.
const PAGE_CUTS: u32 = 8;

/// The most a reply may take: what the request says the host accepts,
/// never more than a frame.
fn reply_budget(envelope: &Envelope) -> usize {
    envelope.accepts_bytes().min(MAX_FRAME_BYTES)
}

async fn run_request<P: ResourcePlugin>(
    plugin: Arc<P>,
    envelope: Envelope,
    request: Request,
    cancel: oneshot::Receiver<()>,
    out: FrameSink,
    in_flight: InFlight,
) {
    let operation = request.operation();
    let request_id = request.request_id().to_owned();
    let resource_type = request.resource_type().to_owned();
    let sampled = crate::telemetry::is_sampled(envelope.trace.as_ref());
    let span = crate::entry_span!(
        sampled,
        "plugin.handle",
        otel.kind = "server",
        // As `&str`, not `%`: the same text in the log line, without a
        // pass through `fmt` per field for every request.
        operation = operation.as_str(),
        resource_type = resource_type.as_str(),
        request_id = request_id.as_str(),
        trace_id = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    if let Some(trace) = &envelope.trace {
        crate::telemetry::set_parent(&span, trace);
    }
    let fail = |code: ErrorCode, message: String| {
        failure(
            &operation,
            &request_id,
            &resource_type,
            PluginError::new(code, message),
        )
    };
    let deadline = envelope.deadline_ms.map(deadline_instant);
    let budget = reply_budget(&envelope);
    // What the reply's envelope adds to its body (an upper bound).
    let overhead = Envelope {
        kind: MessageKind::ListResult,
        trace: envelope.trace.clone(),
        ..Envelope::default()
    }
    .encoded_len_bound();
    let body_budget = budget.saturating_sub(overhead);
    // Pinned where it is made: the wrappers below then move a pointer, not
    // the handler's future (each move of that is a copy of all of it).
    let work = std::pin::pin!(dispatch(plugin.as_ref(), request, body_budget));
    let work = AssertUnwindSafe(work).catch_unwind();
    // The handler is polled first: an answer that is ready wins over a
    // cancel or deadline that arrives at the same moment, and a handler that
    // answers at once never arms the deadline timer (arming the earliest
    // timer of an idle runtime costs a wake-up of its own).
    let reply = tokio::select! {
        biased;
        result = work.instrument(span.clone()) => match result {
            Ok(reply) => reply,
            Err(panic) => {
                let what = panic_message(panic.as_ref());
                span.in_scope(|| tracing::error!(panic = %what, "handler panicked"));
                fail(ErrorCode::InternalFailure, format!("plugin handler panicked: {what}"))
            }
        },
        _ = cancel => fail(ErrorCode::Canceled, "canceled by the host".into()).canceled(),
        () = sleep_until(deadline) => fail(
            ErrorCode::DeadlineExceeded,
            "the request's deadline passed before the handler finished".into(),
        ),
    };
    lock(&in_flight).remove(&envelope.id);
    let status = match &reply {
        Reply::Progress(p) => &p.status,
        Reply::List(l) => &l.status,
        Reply::Page(_) => &OperationStatus::Success,
    };
    // Only a traced span carries its outcome: recording a field makes the
    // JSON log layer format all of the span's fields again, a fifth of the
    // plugin's instructions per request, for log lines that no longer come.
    if sampled {
        span.record("outcome", tracing::field::display(status));
    }
    // An answer too large to send must still answer: the host would
    // otherwise wait for its deadline.
    let reply = match encode_reply(&envelope, reply) {
        // The bound first: measuring exactly costs an encode of the header.
        Ok(reply) if reply.encoded_len_bound() <= budget => Ok(reply),
        Ok(reply) => match reply.encoded_len() {
            Ok(len) if len <= budget => Ok(reply),
            Ok(len) => encode_reply(
                &envelope,
                fail(ErrorCode::MessageTooLarge, too_large(len, budget)),
            ),
            Err(e) => encode_reply(
                &envelope,
                fail(
                    ErrorCode::InternalFailure,
                    format!("the plugin's answer cannot be sent: {e}"),
                ),
            ),
        },
        Err(EncodeError::TooLarge { len, .. }) => encode_reply(
            &envelope,
            fail(ErrorCode::MessageTooLarge, too_large(len, budget)),
        ),
        Err(e) => encode_reply(
            &envelope,
            fail(
                ErrorCode::InternalFailure,
                format!("the plugin's answer cannot be sent: {e}"),
            ),
        ),
    };
    // With other requests running, the answer joins the writer's next
    // batch; alone, it is written at once (on a one-thread runtime, once
    // this task yields: see `FrameSink`).
    let batched = !lock(&in_flight).is_empty();
    send(&out, reply, batched).await;
}

fn encode_reply(envelope: &Envelope, reply: Reply) -> Result<Envelope, EncodeError> {
    match reply {
        Reply::Progress(p) => p
            .encode()
            .map(|body| envelope.reply_with_body(MessageKind::Progress, body)),
        Reply::List(l) => envelope.reply(MessageKind::ListResult, &l),
        Reply::Page(body) => Ok(envelope.reply_with_body(MessageKind::ListResult, body)),
    }
}

fn too_large(len: usize, budget: usize) -> String {
    format!(
        "the plugin's answer of {len} bytes (envelope included) is larger than the {budget} \
         bytes the host accepts (the request's max_message_bytes, at most one frame)"
    )
}

impl Reply {
    fn canceled(self) -> Self {
        match self {
            Reply::Progress(mut p) => {
                p.status = OperationStatus::Canceled;
                Reply::Progress(p)
            }
            Reply::List(mut l) => {
                l.status = OperationStatus::Canceled;
                Reply::List(l)
            }
            page @ Reply::Page(_) => page,
        }
    }
}

/// Sleeps until `deadline`; forever without one.
pub(crate) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn deadline_instant(deadline_ms: u64) -> tokio::time::Instant {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    tokio::time::Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Lists a page whose encoding fits `body_budget` bytes: a page that does
/// not is asked for again with a `page_size` scaled down to fit, so large
/// resources are listed over more pages instead of failing.
async fn list_within<P: ResourcePlugin>(
    plugin: &P,
    mut request: ListRequest,
    body_budget: usize,
) -> Reply {
    let request_id = request.request_id.clone();
    let resource_type = request.resource_type.clone();
    let mut cuts = 0;
    loop {
        let page = match plugin.list(request.clone()).await {
            Ok(page) => page,
            Err(e) => return failure(&Operation::List, &request_id, &resource_type, e),
        };
        let listed = page.resources.len();
        let result = ListResult {
            request_id: request_id.clone(),
            resource_type: resource_type.clone(),
            status: OperationStatus::Success,
            resources: page.resources,
            next_page_token: page.next_page_token,
            ..Default::default()
        };
        let len = match orrery_schema::encode(&result) {
            Ok(body) if body.len() <= body_budget => return Reply::Page(body),
            Ok(body) => body.len(),
            Err(EncodeError::TooLarge { len, .. }) => len,
            Err(e) => {
                let e = PluginError::new(
                    ErrorCode::InternalFailure,
                    format!("the plugin's list page cannot be encoded: {e}"),
                );
                return failure(&Operation::List, &request_id, &resource_type, e);
            }
        };
        if listed <= 1 || cuts == PAGE_CUTS {
            let message = format!(
                "a list page of {listed} resources takes {len} bytes, more than the \
                 {body_budget} bytes the host accepts, even after {cuts} smaller pages were asked for"
            );
            let e = PluginError::new(ErrorCode::MessageTooLarge, message);
            return failure(&Operation::List, &request_id, &resource_type, e);
        }
        cuts += 1;
        request.page_size = smaller_page(listed, len, body_budget);
        tracing::debug!(
            listed,
            len,
            body_budget,
            page_size = request.page_size,
            "list page too large; asking for a smaller one"
        );
    }
}

/// A page size for which `listed` resources taking `len` bytes would fit
/// `budget`, with a tenth to spare for resources larger than the average;
/// always fewer than `listed`.
fn smaller_page(listed: usize, len: usize, budget: usize) -> u32 {
    let scaled = (listed as u128 * budget as u128 * 9 / (len.max(1) as u128 * 10)) as usize;
    u32::try_from(scaled.clamp(1, listed - 1)).unwrap_or(u32::MAX)
}

fn failure(operation: &Operation, request_id: &str, resource_type: &str, e: PluginError) -> Reply {
    if operation == &Operation::List {
        return Reply::List(ListResult {
            request_id: request_id.to_owned(),
            resource_type: resource_type.to_owned(),
            status: OperationStatus::Failure,
            error_code: Some(e.code),
            message: Some(e.message),
            ..Default::default()
        });
    }
    let mut event = ProgressEvent::failure(
        operation.clone(),
        request_id,
        resource_type,
        e.code,
        e.message,
    );
    event.retry_after_ms = e.retry_after_ms;
    Reply::Progress(event)
}

async fn dispatch<P: ResourcePlugin>(plugin: &P, request: Request, body_budget: usize) -> Reply {
    let request_id = request.request_id().to_owned();
    let resource_type = request.resource_type().to_owned();
    let (operation, result): (Operation, OpResult) = match request {
        Request::Create(r) => (Operation::Create, plugin.create(r).await),
        Request::Read(r) => (Operation::Read, plugin.read(r).await),
        Request::Update(r) => (Operation::Update, plugin.update(r).await),
        Request::Delete(r) => (Operation::Delete, plugin.delete(r).await),
        Request::Status(r) => (r.operation.clone(), plugin.status(r).await),
        Request::List(r) => return list_within(plugin, r, body_budget).await,
    };
    match result {
        Ok(mut event) => {
            event.operation = operation;
            if event.request_id.is_empty() {
                event.request_id = request_id;
            }
            if event.resource_type.is_empty() {
                event.resource_type = resource_type;
            }
            Reply::Progress(event)
        }
        Err(e) => failure(&operation, &request_id, &resource_type, e),
    }
}
