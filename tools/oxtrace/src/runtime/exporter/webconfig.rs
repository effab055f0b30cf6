//! `--web-config FILE`: TLS and basic authentication for the exporter, in the web
//! configuration file that Prometheus exporters read (the Prometheus exporter toolkit's):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt     # PEM: the certificate, then its chain
//!   key_file: server.key      # PEM: its private key
//! basic_auth_users:
//!   prometheus: $2y$10$...    # bcrypt hash of the password (htpasswd -nBC 10 USER)
//! ```
//!
//! Relative paths are relative to the file's folder. A key oxtrace does not implement is
//! refused (rather than ignored, which could leave the exporter less protected than its
//! configuration says), and every refusal names the file's line.

use base64::Engine;
use hyper::header::{HeaderMap, AUTHORIZATION};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

/// What the exporter enforces: TLS, basic authentication, both or neither.
#[derive(Default)]
pub struct WebConfig {
    pub(super) tls: Option<TlsAcceptor>,
    pub(super) users: Option<Users>,
}

impl WebConfig {
    /// Whether connections are TLS (the URL to print is `https`).
    pub fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether requests need a user and password.
    pub fn auth(&self) -> bool {
        self.users.is_some()
    }

    /// Reads and checks `path`; an error is `PATH:LINE: what is wrong`.
    pub fn load(path: &str) -> Result<WebConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let dir = Path::new(path).parent().unwrap_or(Path::new("."));
        Self::parse(&text, path, dir)
    }

    /// Checks the configuration `text` (named `name`, its relative paths under `dir`).
    pub fn parse(text: &str, name: &str, dir: &Path) -> Result<WebConfig, String> {
        let blank = text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#') || l == "---");
        if blank {
            return Ok(WebConfig::default());
        }
        let file: File = serde_saphyr::from_str(text).map_err(|e| {
            let e = e.without_snippet();
            let msg = e.to_string();
            // The position goes in front, the way compilers say it.
            let msg = match msg.rfind(" at line ") {
                Some(i) => &msg[..i],
                None => &msg,
            };
            match e.location() {
                Some(l) => format!("{name}:{}:{}: {msg}", l.line(), l.column()),
                None => format!("{name}: {msg}"),
            }
        })?;
        let at = |key: &str, msg: String| format!("{name}:{}: {msg}", line_of(text, key));
        let tls = match file.tls_server_config {
            Some(t) => {
                let cert = dir.join(&t.cert_file);
                let key = dir.join(&t.key_file);
                let certs = read_certs(&cert).map_err(|e| at("cert_file", e))?;
                let key_der = PrivateKeyDer::from_pem_file(&key)
                    .map_err(|e| at("key_file", format!("{}: {}", key.display(), pem_err(e))))?;
                let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
                let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("{name}: TLS: {e}"))?
                    .with_no_client_auth()
                    .with_single_cert(certs, key_der)
                    .map_err(|e| {
                        at(
                            "key_file",
                            format!("{} does not go with {}: {e}", key.display(), cert.display()),
                        )
                    })?;
                cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
                Some(TlsAcceptor::from(Arc::new(cfg)))
            }
            None => None,
        };
        let users = match file.basic_auth_users {
            Some(u) if u.is_empty() => None,
            Some(u) => Some(Users {
                hashes: u.into_iter().map(|(k, v)| (k, v.0)).collect(),
                good: Arc::new(Mutex::new(HashSet::new())),
            }),
            None => None,
        };
        Ok(WebConfig { tls, users })
    }
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, Hash>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: String,
    key_file: String,
}

/// A bcrypt hash, checked where it is read (so that the error has its line).
struct Hash(String);

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse::<bcrypt::HashParts>().map_err(|e| {
            D::Error::custom(format!(
                "not a bcrypt hash ({e}); make one with `htpasswd -nBC 10 USER`"
            ))
        })?;
        Ok(Hash(s))
    }
}

/// The first line (1-based) whose text starts with `key:`, for errors found after parsing.
fn line_of(text: &str, key: &str) -> usize {
    let pat = format!("{key}:");
    text.lines()
        .position(|l| l.trim_start().starts_with(&pat))
        .map_or(1, |i| i + 1)
}

fn pem_err(e: rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(e) => e.to_string(),
        rustls_pki_types::pem::Error::NoItemsFound => "no PEM private key in it".into(),
        e => format!("not a PEM file ({e:?})"),
    }
}

fn read_certs(path: &PathBuf) -> Result<Vec<CertificateDer<'static>>, String> {
    let bad = |e| format!("{}: {}", path.display(), pem_err(e));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(bad)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// A hash no password matches quickly: checked for unknown users, so that the time of an
/// answer does not tell which users exist.
const NOBODY: &str = "$2b$10$a36Ul/FjJnvBCIjKGPPn9OKGINqKJE1elJR48Lv2A14jJpGPlsmRm";
/// How many good (user, password) digests are remembered.
const REMEMBERED: usize = 64;

/// The users of `basic_auth_users`.
pub(super) struct Users {
    hashes: BTreeMap<String, String>,
    /// SHA-256 digests of (user, password, hash) already checked good: bcrypt is slow by
    /// design, and a scraper sends the same credentials every few seconds.
    good: Arc<Mutex<HashSet<[u8; 32]>>>,
}

impl Users {
    /// Whether the request's `Authorization: Basic` header names a user and their password.
    pub(super) async fn allows(&self, headers: &HeaderMap) -> bool {
        let Some((user, pass)) = basic(headers) else {
            return false;
        };
        let known = self.hashes.get(&user);
        let hash = known.map_or(NOBODY, |h| h.as_str()).to_string();
        let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        for part in [user.as_bytes(), pass.as_slice(), hash.as_bytes()] {
            ctx.update(&(part.len() as u64).to_le_bytes());
            ctx.update(part);
        }
        let mut digest = [0u8; 32];
        digest.copy_from_slice(ctx.finish().as_ref());
        let known = known.is_some();
        if known && lock(&self.good).contains(&digest) {
            return true;
        }
        // bcrypt takes tens of milliseconds (seconds in an emulator): on the blocking
        // thread, one at a time. It remembers a good check itself, so that a scraper that
        // gave up waiting (its scrape timeout) gets in the next time.
        let good = self.good.clone();
        tokio::task::spawn_blocking(move || {
            let ok = bcrypt::verify(pass, &hash).unwrap_or(false) && known;
            if ok {
                let mut good = lock(&good);
                if good.len() >= REMEMBERED {
                    good.clear();
                }
                good.insert(digest);
            }
            ok
        })
        .await
        .unwrap_or(false)
    }
}

fn lock(m: &Mutex<HashSet<[u8; 32]>>) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The user and password of an `Authorization: Basic` header.
fn basic(headers: &HeaderMap) -> Option<(String, Vec<u8>)> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, b64) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let i = raw.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(raw[..i].to_vec()).ok()?;
    Some((user, raw[i + 1..].to_vec()))
}
