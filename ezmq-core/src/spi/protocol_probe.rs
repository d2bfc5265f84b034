//! Which kind of server answers at an address, for a connection error that
//! should say "this is a RabbitMQ port; use amqp://" instead of a parse
//! error, and whether its host name resolves at all. Backends run these
//! only after a connection failed in a way that suggests them.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A kind of server, recognised by the first bytes it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerKind {
    /// An AMQP 0-9-1 broker (RabbitMQ): answers bytes it cannot read with
    /// its protocol header `AMQP\0\0\x09\x01`.
    Amqp,
    /// A RESP server (Redis, Disque, the embedded server): answers `PING`
    /// with `+PONG` or an error line.
    Resp,
    /// A NATS server: greets every client with `INFO {...}`.
    Nats,
    /// An HTTP server.
    Http,
}

impl ServerKind {
    /// What the user should do: the scheme that talks to this server.
    pub fn advice(self) -> &'static str {
        match self {
            ServerKind::Amqp => "an AMQP broker (RabbitMQ) answers there; use an amqp:// URL",
            ServerKind::Resp => {
                "a RESP server (Redis or Disque) answers there; use a redis:// or disque:// URL"
            }
            ServerKind::Nats => "a NATS server answers there; use a nats:// URL",
            ServerKind::Http => "an HTTP server answers there, not a broker",
        }
    }
}

/// Connects to `addr`, sends a RESP `PING` (padded to eight bytes) and reads what comes back
/// within `within`; `None` when nothing recognisable answers.
pub async fn identify(addr: &str, within: Duration) -> Option<ServerKind> {
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        // NATS speaks first; give it a moment before writing.
        let mut head = [0u8; 8];
        let early = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut head)).await;
        let n = match early {
            Ok(Ok(n)) if n > 0 => n,
            _ => {
                // Eight bytes: an AMQP broker answers once it has read as
                // many as its protocol header; Redis skips the empty line.
                stream.write_all(b"PING\r\n\r\n").await.ok()?;
                stream.read(&mut head).await.ok()?
            }
        };
        classify(&head[..n])
    };
    tokio::time::timeout(within, probe).await.ok().flatten()
}

/// False when `addr` (`host:port`) does not resolve: the host name is
/// unknown (the resolver's answer, not an error message, says so).
pub async fn resolves(addr: &str) -> bool {
    tokio::net::lookup_host(addr).await.is_ok()
}

/// The `host:port` a URL names (`scheme://[user:pass@]host[:port][/...]`),
/// with `default_port` when it has none; `None` without a host.
pub fn host_port(url: &str, default_port: u16) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() {
        return None;
    }
    let has_port = authority
        .rfind(':')
        .is_some_and(|i| !authority[i..].contains(']'));
    if has_port {
        Some(authority.to_owned())
    } else {
        Some(format!("{authority}:{default_port}"))
    }
}

/// The kind of server whose first bytes are `head`.
fn classify(head: &[u8]) -> Option<ServerKind> {
    if head.starts_with(b"AMQP") {
        Some(ServerKind::Amqp)
    } else if head.starts_with(b"INFO ") {
        Some(ServerKind::Nats)
    } else if head.starts_with(b"HTTP/") {
        Some(ServerKind::Http)
    } else if head.first().is_some_and(|b| b"+-:$*%_#,(!=|~>".contains(b)) {
        Some(ServerKind::Resp)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_name_the_server() {
        assert_eq!(classify(b"AMQP\0\0\x09\x01"), Some(ServerKind::Amqp));
        assert_eq!(classify(b"+PONG\r\n"), Some(ServerKind::Resp));
        assert_eq!(classify(b"-NOAUTH"), Some(ServerKind::Resp));
        assert_eq!(classify(b"INFO {\"s"), Some(ServerKind::Nats));
        assert_eq!(classify(b"HTTP/1.1"), Some(ServerKind::Http));
        assert_eq!(classify(b"\x16\x03\x01"), None);
    }

    #[tokio::test]
    async fn names_under_invalid_do_not_resolve() {
        assert!(!resolves("no-such-host.invalid:6379").await);
        assert!(resolves("127.0.0.1:6379").await);
    }

    #[test]
    fn urls_name_their_address() {
        assert_eq!(
            host_port("redis://:p@h:7000/1", 6379).as_deref(),
            Some("h:7000")
        );
        assert_eq!(host_port("redis://h", 6379).as_deref(), Some("h:6379"));
        assert_eq!(
            host_port("amqp://u:p@[::1]/%2f", 5672).as_deref(),
            Some("[::1]:5672")
        );
        assert_eq!(
            host_port("amqp://h:1234?x=1", 5672).as_deref(),
            Some("h:1234")
        );
        assert_eq!(host_port("redis://", 6379), None);
    }
}
