//! A TCP relay in front of a real broker whose traffic can be frozen: the
//! broker then looks hung to its clients (connections stay open, nothing
//! is answered), as a stopped process or a stalled network looks.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Relays `127.0.0.1:<port>` to an upstream address until dropped;
/// [`StallingProxy::stall`] freezes every byte in both directions until
/// [`StallingProxy::resume`].
///
/// ```no_run
/// # async fn demo() {
/// use ezmq_test_support::StallingProxy;
///
/// let proxy = StallingProxy::start("127.0.0.1:5672").await;
/// let url = format!("amqp://guest:guest@{}/%2f", proxy.addr());
/// // ... connect through `url`, then:
/// proxy.stall(); // the broker now looks hung
/// proxy.resume();
/// # }
/// ```
#[derive(Debug)]
pub struct StallingProxy {
    addr: SocketAddr,
    stalled: watch::Sender<bool>,
    /// The accept loop; it owns the relays, so aborting it ends them all.
    relay: tokio::task::JoinHandle<()>,
}

impl StallingProxy {
    /// Listens on a free loopback port and relays each connection to
    /// `upstream` (`host:port`). Panics when it cannot listen (a test
    /// helper, not library code).
    pub async fn start(upstream: &str) -> StallingProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy's port");
        let addr = listener.local_addr().expect("the proxy's address");
        let (stalled, watching) = watch::channel(false);
        let upstream = upstream.to_owned();
        let relay = tokio::spawn(accept(listener, upstream, watching));
        StallingProxy {
            addr,
            stalled,
            relay,
        }
    }

    /// Relays to the `host:port` of a broker URL
    /// (`scheme://[user[:password]@]host:port[/path]`).
    pub async fn in_front_of(url: &str) -> StallingProxy {
        StallingProxy::start(url_host_port(url)).await
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `url` with its `host:port` replaced by the proxy's, credentials and
    /// path kept.
    pub fn route(&self, url: &str) -> String {
        let (start, end) = authority_host_port(url);
        format!("{}{}{}", &url[..start], self.addr, &url[end..])
    }

    /// Stops relaying: bytes already read are held, nothing more is read.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Relays again, held bytes first.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.relay.abort();
    }
}

/// The `host:port` of `scheme://[user[:password]@]host:port[/path]`.
fn url_host_port(url: &str) -> &str {
    let (start, end) = authority_host_port(url);
    &url[start..end]
}

/// Byte range of the `host:port` in a URL: after `://` and the last `@` of
/// the authority, up to the path.
fn authority_host_port(url: &str) -> (usize, usize) {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let end = url[authority..]
        .find('/')
        .map_or(url.len(), |i| authority + i);
    let start = url[authority..end]
        .rfind('@')
        .map_or(authority, |i| authority + i + 1);
    (start, end)
}

async fn accept(listener: TcpListener, upstream: String, stalled: watch::Receiver<bool>) {
    let mut relays = JoinSet::new();
    while let Ok((client, _)) = listener.accept().await {
        while relays.try_join_next().is_some() {}
        let Ok(server) = TcpStream::connect(&upstream).await else {
            continue;
        };
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        relays.spawn(pump(client_read, server_write, stalled.clone()));
        relays.spawn(pump(server_read, client_write, stalled.clone()));
    }
}

/// Copies `from` to `to`, waiting out stalls before each read and before
/// each write.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_of_broker_urls() {
        assert_eq!(
            url_host_port("amqp://guest:guest@127.0.0.1:5672/ezmq-ci"),
            "127.0.0.1:5672"
        );
        assert_eq!(
            url_host_port("redis://:p@ss@127.0.0.1:6379/2"),
            "127.0.0.1:6379"
        );
        assert_eq!(url_host_port("redis://127.0.0.1:6379"), "127.0.0.1:6379");
    }

    #[tokio::test]
    async fn route_keeps_credentials_and_path() {
        let proxy = StallingProxy::start("127.0.0.1:9").await;
        let port = proxy.addr().port();
        assert_eq!(
            proxy.route("amqp://guest:guest@127.0.0.1:5672/%2f"),
            format!("amqp://guest:guest@127.0.0.1:{port}/%2f")
        );
        assert_eq!(
            proxy.route("redis://127.0.0.1:6379"),
            format!("redis://127.0.0.1:{port}")
        );
    }
}
