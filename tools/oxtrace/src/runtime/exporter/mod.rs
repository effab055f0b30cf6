//! `--listen ADDR`: serve the running program's aggregations as OpenMetrics text on
//! `GET /metrics`, so that a Prometheus server scrapes many hosts through one small exporter.
//!
//! The run loop renders the merged table after every aggregation snapshot (`aggrate`) and
//! publishes the text here; the server only hands out the latest text. The server is
//! `hyper` (HTTP/1.1) on a single-threaded `tokio` runtime in a thread of its own: the run
//! loop that drains the kernel's buffers never waits for it (publishing swaps one pointer
//! under a lock that the server holds only to clone that pointer).
//!
//! The exporter faces the network, so every resource a client can make it spend is bounded:
//!
//! - a request's head (request line and headers) is at most [`MAX_HEAD`] bytes and
//!   [`MAX_HEADERS`] headers (a longer one is answered 431 and the connection closed), and
//!   a request body is never read;
//! - a connection lives at most [`CONNECTION_LIFETIME`] in total, TLS handshake, requests and
//!   answers together (then it finishes the answer under way and closes; [`GRACE`] later it
//!   is closed whatever it does): a client that trickles bytes renews nothing;
//! - at most [`MAX_CONNECTIONS`] connections are served at once; a new one beyond closes
//!   the oldest, so that a flood of idle connections cannot lock scrapers out;
//! - scrapes are served concurrently; a body is shared by reference, never copied.
//!
//! TLS and basic authentication come from a web configuration file (`--web-config`,
//! [`webconfig`]).

pub mod webconfig;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE as CTYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio::time::{timeout_at, Instant};
pub use webconfig::WebConfig;

/// Content type of the OpenMetrics text exposition format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The most connections served at once; a new one beyond closes the oldest.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a connection lives in total (TLS handshake, requests, answers).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(10);
/// How long a connection past its lifetime may take to finish the answer under way.
pub const GRACE: Duration = Duration::from_secs(5);
/// How long a client has to send a request's head once it has started one.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest request head (request line and headers), in bytes.
pub const MAX_HEAD: usize = 8192;
/// The most headers in a request.
pub const MAX_HEADERS: usize = 32;
/// The kernel's queue of connections not yet accepted.
const BACKLOG: u32 = 1024;

/// The latest metrics text, shared between the run loop and the server.
#[derive(Clone, Default)]
pub struct Metrics(Arc<Mutex<Bytes>>);

impl Metrics {
    /// Replaces the published text.
    pub fn publish(&self, text: String) {
        let text = Bytes::from(text);
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }

    fn get(&self) -> Bytes {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The address `--listen SPEC` binds: a bare port (`9109`) or `:PORT` means the loopback
/// interface (127.0.0.1); any other interface is named (`0.0.0.0:9109`, `[::]:9109`).
pub fn listen_addr(spec: &str) -> String {
    let port = spec.strip_prefix(':').unwrap_or(spec);
    if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        format!("127.0.0.1:{port}")
    } else {
        spec.to_string()
    }
}

/// Everything a connection needs, shared by all of them.
struct Server {
    metrics: Metrics,
    web: WebConfig,
    http: hyper::server::conn::http1::Builder,
}

/// The connections being served, oldest first, to close the oldest when there are too many.
#[derive(Default)]
struct Live {
    next: u64,
    conns: BTreeMap<u64, AbortHandle>,
}

/// Binds `spec` (see [`listen_addr`]) and serves `metrics` from a thread of its own, with
/// the TLS and users of `web`; returns the bound address.
pub fn serve(spec: &str, metrics: Metrics, web: WebConfig) -> std::io::Result<SocketAddr> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        // bcrypt runs here, one check at a time, never on the thread that serves.
        .max_blocking_threads(1)
        .thread_name("oxtrace-exporter")
        .build()?;
    let listener = rt.block_on(bind(&listen_addr(spec)))?;
    let local = listener.local_addr()?;
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let server = Arc::new(Server { metrics, web, http });
    std::thread::Builder::new()
        .name("oxtrace-exporter".into())
        .spawn(move || rt.block_on(accept_loop(listener, server)))?;
    Ok(local)
}

/// Binds the first of `addr`'s addresses that binds, with a backlog deep enough for a burst.
async fn bind(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let sock = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        sock.set_reuseaddr(true)?;
        match sock.bind(a).and_then(|()| sock.listen(BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the address resolves to nothing")))
}

async fn accept_loop(listener: tokio::net::TcpListener, server: Arc<Server>) {
    let live = Arc::new(Mutex::new(Live::default()));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of descriptors or memory: let connections end, then accept again.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
        while l.conns.len() >= MAX_CONNECTIONS {
            if let Some((_, oldest)) = l.conns.pop_first() {
                // Dropping the task closes its socket.
                oldest.abort();
            }
        }
        let id = l.next;
        l.next += 1;
        let (server, done) = (server.clone(), live.clone());
        let task = tokio::spawn(async move {
            connection(stream, &server).await;
            done.lock()
                .unwrap_or_else(|e| e.into_inner())
                .conns
                .remove(&id);
        });
        // The runtime has one thread, which runs this loop: the task cannot have ended yet.
        l.conns.insert(id, task.abort_handle());
    }
}

/// Serves one connection for at most its lifetime (and the grace after it).
async fn connection(stream: TcpStream, server: &Arc<Server>) {
    let end = Instant::now() + CONNECTION_LIFETIME;
    let _ = timeout_at(end + GRACE, async {
        match &server.web.tls {
            Some(tls) => {
                if let Ok(Ok(s)) = timeout_at(end, tls.accept(stream)).await {
                    http(TokioIo::new(s), server, end).await;
                }
            }
            None => http(TokioIo::new(stream), server, end).await,
        }
    })
    .await;
}

async fn http<I>(io: I, server: &Arc<Server>, end: Instant)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let s = server.clone();
    let svc = hyper::service::service_fn(move |req| answer(req, s.clone()));
    let conn = server.http.serve_connection(io, svc);
    let mut conn = std::pin::pin!(conn);
    if timeout_at(end, conn.as_mut()).await.is_err() {
        // Finish the answer under way, take no new request.
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    }
}

fn reply(status: StatusCode, ctype: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CTYPE, HeaderValue::from_static(ctype));
    r
}

async fn answer(
    req: Request<Incoming>,
    server: Arc<Server>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if let Some(users) = &server.web.users {
        if !users.allows(req.headers()).await {
            let mut r = reply(
                StatusCode::UNAUTHORIZED,
                "text/plain",
                Bytes::from_static(b"Unauthorized\n"),
            );
            r.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"oxtrace\""),
            );
            return Ok(r);
        }
    }
    let head = req.method() == Method::HEAD;
    if req.method() != Method::GET && !head {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            Bytes::from_static(b"only GET\n"),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ok(r);
    }
    let r = if req.uri().path() == "/metrics" {
        reply(StatusCode::OK, CONTENT_TYPE, server.metrics.get())
    } else {
        reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"not found: try /metrics\n"),
        )
    };
    Ok(r)
}

#[cfg(test)]
mod tests;
