//! The clients connected to a node, for CLIENT LIST / KILL / SETNAME and
//! MONITOR.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Lines a MONITOR client may lag behind before it misses some.
const MONITOR_BACKLOG: usize = 4096;

/// What the node knows about one connection.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) id: u64,
    pub(crate) addr: SocketAddr,
    pub(crate) fd: i64,
    pub(crate) created: Instant,
    /// Milliseconds since `created` of the last command.
    pub(crate) last_ms: AtomicU64,
    /// Index in the command table of the last command.
    pub(crate) last_cmd: AtomicUsize,
    pub(crate) blocked: AtomicBool,
    pub(crate) monitor: AtomicBool,
    pub(crate) name: Mutex<Option<Bytes>>,
    /// Cancelled by CLIENT KILL.
    pub(crate) kill: CancellationToken,
}

impl Client {
    /// The CLIENT LIST line (without the newline).
    pub(crate) fn list_line(&self, cmd: &str) -> String {
        let name = self
            .name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        let age = self.created.elapsed().as_secs();
        let idle = age.saturating_sub(self.last_ms.load(Ordering::Relaxed) / 1000);
        let mut flags = String::new();
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if self.blocked.load(Ordering::Relaxed) {
            flags.push('b');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} fd={} name={name} age={age} idle={idle} flags={flags} qbuf=0 qbuf-free=0 obl=0 oll=0 omem=0 events=r cmd={cmd}",
            self.id, self.addr, self.fd
        )
    }
}

/// Every connected client of a node.
#[derive(Debug)]
pub(crate) struct Clients {
    next_id: AtomicU64,
    map: Mutex<BTreeMap<u64, Arc<Client>>>,
    /// The MONITOR feed.
    pub(crate) monitor: broadcast::Sender<Bytes>,
    /// Number of MONITOR clients (the feed is only built when > 0).
    pub(crate) monitors: AtomicUsize,
}

impl Clients {
    /// No clients.
    pub(crate) fn new() -> Clients {
        Clients {
            next_id: AtomicU64::new(1),
            map: Mutex::new(BTreeMap::new()),
            monitor: broadcast::channel(MONITOR_BACKLOG).0,
            monitors: AtomicUsize::new(0),
        }
    }

    /// Registers a new connection; [`ClientGuard`] unregisters it.
    pub(crate) fn register(
        self: &Arc<Self>,
        addr: SocketAddr,
        fd: i64,
        kill: CancellationToken,
    ) -> ClientGuard {
        let client = Arc::new(Client {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            addr,
            fd,
            created: Instant::now(),
            last_ms: AtomicU64::new(0),
            last_cmd: AtomicUsize::new(usize::MAX),
            blocked: AtomicBool::new(false),
            monitor: AtomicBool::new(false),
            name: Mutex::new(None),
            kill,
        });
        self.lock().insert(client.id, client.clone());
        ClientGuard {
            clients: self.clone(),
            client,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Client>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every client, by id.
    pub(crate) fn all(&self) -> Vec<Arc<Client>> {
        self.lock().values().cloned().collect()
    }
}

/// Keeps a client registered while its connection lives.
#[derive(Debug)]
pub(crate) struct ClientGuard {
    clients: Arc<Clients>,
    pub(crate) client: Arc<Client>,
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        if self.client.monitor.load(Ordering::Relaxed) {
            self.clients.monitors.fetch_sub(1, Ordering::Relaxed);
        }
        self.clients.lock().remove(&self.client.id);
    }
}

/// Quotes an argument for the MONITOR feed like Redis' `sdscatrepr`.
pub(crate) fn repr(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}
