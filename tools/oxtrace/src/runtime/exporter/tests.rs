//! The exporter under normal use and under attack (host side; the guest's
//! exporter_test.sh measures memory and the trace while a real program runs).

use super::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

fn plain() -> WebConfig {
    WebConfig::default()
}

fn request(addr: SocketAddr, req: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(req).unwrap();
    let mut s = Vec::new();
    let _ = c.read_to_end(&mut s);
    String::from_utf8_lossy(&s).into_owned()
}

fn get(addr: SocketAddr, path: &str) -> String {
    request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

#[test]
fn listens_on_loopback_unless_told() {
    assert_eq!(listen_addr("9109"), "127.0.0.1:9109");
    assert_eq!(listen_addr(":9109"), "127.0.0.1:9109");
    assert_eq!(listen_addr("0.0.0.0:9109"), "0.0.0.0:9109");
    assert_eq!(listen_addr("[::]:9109"), "[::]:9109");
    assert_eq!(listen_addr("localhost:9109"), "localhost:9109");
    let addr = serve("0", Metrics::default(), plain()).unwrap();
    assert!(addr.ip().is_loopback(), "{addr}");
}

#[test]
fn serves_the_latest_text() {
    let m = Metrics::default();
    let addr = serve("127.0.0.1:0", m.clone(), plain()).unwrap();
    m.publish("a 1\n# EOF\n".into());
    let r = get(addr, "/metrics");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.contains(CONTENT_TYPE));
    assert!(r.ends_with("\r\n\r\na 1\n# EOF\n"), "{r}");
    m.publish("a 2\n# EOF\n".into());
    assert!(get(addr, "/metrics").ends_with("a 2\n# EOF\n"));
    assert!(get(addr, "/other").starts_with("HTTP/1.1 404"));
    let r = request(
        addr,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 405"), "{r}");
    let r = request(
        addr,
        b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 200") && !r.contains("a 2"), "{r}");
}

#[test]
fn keeps_answering_scrapes_on_one_connection() {
    let m = Metrics::default();
    m.publish("x 1\n# EOF\n".into());
    let addr = serve("127.0.0.1:0", m, plain()).unwrap();
    let mut c = TcpStream::connect(addr).unwrap();
    for _ in 0..3 {
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        while !got.ends_with(b"# EOF\n") {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 200"));
    }
}

/// A request line that never ends is cut at the head limit, not read into memory.
#[test]
fn refuses_an_endless_request_line() {
    let m = Metrics::default();
    m.publish("y 1\n# EOF\n".into());
    let addr = serve("127.0.0.1:0", m, plain()).unwrap();
    let mut c = TcpStream::connect(addr).unwrap();
    let chunk = vec![b'A'; 64 * 1024];
    let mut sent = 0usize;
    // The server answers 431 and closes: writing fails well before 64 MiB.
    while sent < 64 << 20 {
        match c.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    assert!(sent < 64 << 20, "the server kept reading {sent} bytes");
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    assert!(
        s.is_empty() || s.starts_with("HTTP/1.1 431") || s.starts_with("HTTP/1.1 414"),
        "{s}"
    );
    assert!(get(addr, "/metrics").ends_with("y 1\n# EOF\n"));
}

#[test]
fn answers_garbage_and_goes_on() {
    let m = Metrics::default();
    m.publish("z 1\n# EOF\n".into());
    let addr = serve("127.0.0.1:0", m, plain()).unwrap();
    for junk in [
        &b"\x00\xff\xfe garbage \x01\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"GET /metrics HTTP/9.9\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\nabc",
    ] {
        let r = request(addr, junk);
        assert!(r.is_empty() || r.starts_with("HTTP/1.1 "), "{r}");
        assert!(get(addr, "/metrics").ends_with("z 1\n# EOF\n"));
    }
    let mut many = b"GET /metrics HTTP/1.1\r\n".to_vec();
    for i in 0..MAX_HEADERS + 1 {
        many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(request(addr, &many).starts_with("HTTP/1.1 431"));
}

/// Idle connections beyond the limit close the oldest: a scraper still gets in.
#[test]
fn a_flood_of_idle_connections_does_not_lock_out_a_scrape() {
    let m = Metrics::default();
    m.publish("w 1\n# EOF\n".into());
    let addr = serve("127.0.0.1:0", m, plain()).unwrap();
    let idle: Vec<TcpStream> = (0..3 * MAX_CONNECTIONS)
        .map(|_| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"GET /met").unwrap();
            c
        })
        .collect();
    assert!(get(addr, "/metrics").ends_with("w 1\n# EOF\n"));
    // The oldest were closed by the server: end of file or a reset, not a wait.
    let mut first = &idle[0];
    let mut b = [0u8; 16];
    assert!(first.read(&mut b).map_or(true, |n| n == 0));
}

/// Many clients at once, each served (concurrently, over one thread).
#[test]
fn concurrent_scrapes() {
    let m = Metrics::default();
    m.publish("v 1\n# EOF\n".into());
    let addr = serve("127.0.0.1:0", m, plain()).unwrap();
    let threads: Vec<_> = (0..16)
        .map(|_| std::thread::spawn(move || get(addr, "/metrics")))
        .collect();
    for t in threads {
        assert!(t.join().unwrap().ends_with("v 1\n# EOF\n"));
    }
}

fn parse(text: &str) -> Result<WebConfig, String> {
    WebConfig::parse(text, "web.yml", Path::new("/nonexistent"))
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e,
    }
}

#[test]
fn web_config_errors_name_the_line() {
    assert!(!parse("").unwrap().tls());
    assert!(!parse("# nothing\n").unwrap().auth());
    let e = err("basic_auth_users:\n  alice: secret\n");
    assert!(e.starts_with("web.yml:2:"), "{e}");
    assert!(e.contains("not a bcrypt hash"), "{e}");
    let e =
        err("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: x\n");
    assert!(e.starts_with("web.yml:4:"), "{e}");
    assert!(e.contains("unknown field `client_auth_type`"), "{e}");
    let e = err("http_server_config:\n  http2: false\n");
    assert!(e.starts_with("web.yml:1:"), "{e}");
    let e = err("tls_server_config:\n  cert_file: a.crt\n");
    assert!(e.starts_with("web.yml:2:") && e.contains("key_file"), "{e}");
    let e = err("tls_server_config:\n  key_file: k\n  cert_file: missing.crt\n");
    assert!(
        e.starts_with("web.yml:3: /nonexistent/missing.crt: "),
        "{e}"
    );
    let e = err("basic_auth_users: [1, 2\n");
    assert!(e.starts_with("web.yml:"), "{e}");
}

/// A blocking TLS client that trusts `ca` (PEM) and sends `req` to `addr`.
fn tls_request(addr: SocketAddr, ca: &str, req: &[u8]) -> String {
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

#[test]
fn tls_and_basic_auth() {
    let dir = std::env::temp_dir().join(format!("oxt-webcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.join("s.crt"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("s.key"), ck.signing_key.serialize_pem()).unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let yml = dir.join("web.yml");
    std::fs::write(
        &yml,
        format!(
            "tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\nbasic_auth_users:\n  prom: '{hash}'\n"
        ),
    )
    .unwrap();
    let web = WebConfig::load(yml.to_str().unwrap()).unwrap();
    assert!(web.tls() && web.auth());
    let m = Metrics::default();
    m.publish("t 1\n# EOF\n".into());
    let addr = serve("127.0.0.1:0", m, web).unwrap();
    let ca = ck.cert.pem();
    let auth = |cred: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(cred);
        format!(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Basic {b64}\r\n\r\n"
        )
    };
    use base64::Engine;
    let r = tls_request(addr, &ca, auth("prom:s3cret").as_bytes());
    assert!(
        r.starts_with("HTTP/1.1 200") && r.ends_with("t 1\n# EOF\n"),
        "{r}"
    );
    // Again, from the cache of good credentials.
    assert!(tls_request(addr, &ca, auth("prom:s3cret").as_bytes()).starts_with("HTTP/1.1 200"));
    for bad in ["prom:wrong", "nobody:s3cret", "prom"] {
        let r = tls_request(addr, &ca, auth(bad).as_bytes());
        assert!(
            r.starts_with("HTTP/1.1 401")
                && r.to_ascii_lowercase().contains("www-authenticate: basic"),
            "{bad}: {r}"
        );
    }
    let r = tls_request(
        addr,
        &ca,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    // Plain HTTP to the TLS port gets no metrics.
    assert!(!get(addr, "/metrics").contains("t 1"));
    // A key that is not the certificate's.
    let other = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
    std::fs::write(dir.join("s.key"), other.signing_key.serialize_pem()).unwrap();
    let e = WebConfig::load(yml.to_str().unwrap()).err().unwrap();
    assert!(
        e.contains("web.yml:3: ") && e.contains("does not go with"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
