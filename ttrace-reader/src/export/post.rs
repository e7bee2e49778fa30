//! Sending OTLP to a collector: an HTTP/1.1 `POST` of a protobuf `ExportTraceServiceRequest`
//! to an OTLP/HTTP receiver (`http://host:4318`, path `/v1/traces` unless the URL gives
//! one), on a blocking socket, with no async runtime. A request that fails to connect, times
//! out or gets 429 or 5xx is tried again, [`TRIES`] times in all, waiting longer each time;
//! then the error is one line naming the endpoint. TLS is not spoken: a collector on the
//! machine or the network receives plain HTTP and forwards to the backend.

use super::otlp::{self, Encoding};
use super::Written;
use crate::merge::{Filter, Merge};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Tries of one request, at most.
pub const TRIES: u32 = 3;

/// How long a connection or a reply may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Why spans could not be sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PostError {
    /// The URL is not `http://host[:port][/path]`.
    #[error("--otlp-endpoint {0:?}: not an http:// URL (an OTLP/HTTP receiver, e.g. http://localhost:4318)")]
    NotHttp(String),
    /// TLS is not spoken.
    #[error("--otlp-endpoint {0}: https is not supported; send to a local OpenTelemetry collector's http receiver")]
    Https(String),
    /// No connection or no reply, every try.
    #[error("--otlp-endpoint {0}: {1} (after {TRIES} tries)")]
    Unreachable(String, String),
    /// The receiver refused the spans.
    #[error("--otlp-endpoint {0}: the receiver answered {1}")]
    Refused(String, String),
}

/// An OTLP/HTTP traces endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
    host: String,
    port: u16,
    path: String,
}

impl Endpoint {
    /// Parses `url`.
    ///
    /// ```
    /// use ttrace_reader::export::post::Endpoint;
    /// let e = Endpoint::parse("http://localhost:4318").unwrap();
    /// assert_eq!(e.to_string(), "http://localhost:4318/v1/traces");
    /// assert!(Endpoint::parse("https://api.example.com").is_err());
    /// ```
    pub fn parse(url: &str) -> Result<Endpoint, PostError> {
        if url.starts_with("https://") {
            return Err(PostError::Https(url.to_string()));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| PostError::NotHttp(url.to_string()))?;
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
                h,
                p.parse().map_err(|_| PostError::NotHttp(url.to_string()))?,
            ),
            _ => (authority, 80),
        };
        if host.is_empty() {
            return Err(PostError::NotHttp(url.to_string()));
        }
        let path = match path {
            "" | "/" => "/v1/traces".to_string(),
            p => p.to_string(),
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let url = format!("http://{authority}{path}");
        Ok(Endpoint {
            url,
            host,
            port,
            path,
        })
    }

    /// Posts `body` (a protobuf `ExportTraceServiceRequest`), trying again as [`TRIES`]
    /// says.
    pub fn post(&self, body: &[u8]) -> Result<(), PostError> {
        let mut last = String::new();
        for attempt in 0..TRIES {
            if attempt > 0 {
                // 100 ms, then 400 ms.
                std::thread::sleep(Duration::from_millis(100 << (2 * (attempt - 1))));
            }
            match self.once(body) {
                Ok(status) if (200..300).contains(&status.0) => return Ok(()),
                Ok(status) if status.0 == 429 || status.0 >= 500 => last = status.1,
                Ok(status) => return Err(PostError::Refused(self.url.clone(), status.1)),
                Err(e) => last = e.to_string(),
            }
        }
        Err(PostError::Unreachable(self.url.clone(), last))
    }

    /// One request: the status code and line.
    fn once(&self, body: &[u8]) -> std::io::Result<(u16, String)> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::other(format!("{}: no address", self.host)))?;
        let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/x-protobuf\r\n\
             Content-Length: {}\r\nConnection: close\r\nUser-Agent: ttrace-reader/{}\r\n\r\n",
            self.path,
            self.host,
            self.port,
            body.len(),
            env!("CARGO_PKG_VERSION"),
        );
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        let mut reply = BufReader::new(stream);
        let mut status = String::new();
        reply.read_line(&mut status)?;
        let status = status.trim_end().to_string();
        let code = status
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("not an HTTP reply: {status:?}")))?;
        // The rest of the reply is not needed; read a little so the server is not reset.
        let _ = reply.take(1 << 16).read_to_end(&mut Vec::new());
        Ok((code, status))
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// Sends the spans of `view` (what `filter` selects; `device` names it in the resource) to
/// `endpoint`, a request per batch.
pub fn send(
    view: &devttrace::View<'_>,
    filter: &Filter,
    device: &str,
    endpoint: &Endpoint,
) -> Result<Written, PostError> {
    let items = Merge::view(view, filter);
    let mut failed = None;
    let mut batch = |b: &[u8]| {
        endpoint.post(b).map_err(|e| {
            failed = Some(e);
            std::io::Error::other("not sent")
        })
    };
    let sent = otlp::write(
        view.into(),
        &view.cpus,
        items,
        Encoding::Proto,
        device,
        &mut batch,
    );
    match (sent, failed) {
        (_, Some(e)) => Err(e),
        (Ok(written), None) => Ok(written),
        // The batches are the only output: an error is one of theirs.
        (Err(e), None) => Err(PostError::Unreachable(endpoint.url.clone(), e.to_string())),
    }
}
