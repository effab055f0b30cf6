//! `--listen ADDR`: serve the running program's aggregations as OpenMetrics text on
//! `GET /metrics`, so that a Prometheus server scrapes many hosts through one small exporter.
//!
//! The run loop renders the merged table after every aggregation snapshot (`aggrate`) and
//! publishes the text here; the server thread only hands out the latest text.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Content type of the OpenMetrics text exposition format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The latest metrics text, shared between the run loop and the server.
#[derive(Clone, Default)]
pub struct Metrics(Arc<Mutex<String>>);

impl Metrics {
    /// Replaces the published text.
    pub fn publish(&self, text: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }

    fn get(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Binds `addr` and serves `metrics` from a background thread; returns the bound address.
pub fn serve(addr: &str, metrics: Metrics) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("oxtrace-exporter".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                // One slow client must not stall the others for long.
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
                let _ = answer(conn, &metrics);
            }
        })?;
    Ok(local)
}

fn answer(mut conn: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Skip the headers.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut parts = request.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => ("200 OK", CONTENT_TYPE, metrics.get()),
        ("GET", _) => (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics\n".into(),
        ),
        _ => ("405 Method Not Allowed", "text/plain", "only GET\n".into()),
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn serves_the_latest_text() {
        let m = Metrics::default();
        let addr = serve("127.0.0.1:0", m.clone()).unwrap();
        m.publish("a 1\n# EOF\n".into());
        let r = get(addr, "/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains(CONTENT_TYPE));
        assert!(r.ends_with("\r\n\r\na 1\n# EOF\n"), "{r}");
        m.publish("a 2\n# EOF\n".into());
        assert!(get(addr, "/metrics").ends_with("a 2\n# EOF\n"));
        assert!(get(addr, "/other").starts_with("HTTP/1.1 404"));
    }
}
