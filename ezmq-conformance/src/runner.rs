//! `run`: connects the first client, applies the skip/require rules, runs
//! one case with an overall deadline.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{Client, MqClient};

use crate::broker::Broker;

/// The environment variable naming the backends whose broker must be
/// reachable: comma separated names (`disque,redis`) or `all`.
pub const REQUIRE_ENV: &str = "EZMQ_REQUIRE_BROKERS";

/// The longest one case may run before it fails as hung.
pub const CASE_DEADLINE: Duration = Duration::from_secs(300);

/// What a case gets: the broker and a first, connected client.
pub struct Ctx {
    broker: Arc<dyn Broker>,
    client: Client,
    case: &'static str,
}

impl fmt::Debug for Ctx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx")
            .field("broker", &self.broker.name())
            .field("url", &self.broker.url())
            .field("case", &self.case)
            .finish()
    }
}

impl Ctx {
    /// The broker under test.
    pub fn broker(&self) -> &dyn Broker {
        &*self.broker
    }

    /// The broker under test, to hand to another runtime
    /// ([`Doomed`](crate::Doomed)).
    pub fn broker_handle(&self) -> Arc<dyn Broker> {
        Arc::clone(&self.broker)
    }

    /// The first client, connected by [`run`]. The case shuts it down.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The case's name, e.g. `push_consume`.
    pub fn case(&self) -> &'static str {
        self.case
    }

    /// The backend's name as the client reports it.
    pub fn backend(&self) -> &'static str {
        self.client.backend_name()
    }

    /// One more client (another "process"). Panics when it cannot connect:
    /// the first client could.
    pub async fn connect(&self) -> Client {
        match self.broker.connect().await {
            Ok(client) => client,
            Err(e) => panic!(
                "{}: connecting another client to {} failed: {e}",
                self.case,
                self.broker.url()
            ),
        }
    }

    /// A client from [`Broker::connect_with_short_lease`], `None` when the
    /// broker has none. Panics when it cannot connect.
    pub async fn connect_with_short_lease(&self) -> Option<Client> {
        match self.broker.connect_with_short_lease().await? {
            Ok(client) => Some(client),
            Err(e) => panic!(
                "{}: connecting a short-lease client to {} failed: {e}",
                self.case,
                self.broker.url()
            ),
        }
    }

    /// A topic name unique to this run of this case: `conf.<case>.<label>.<uuid>`.
    pub fn topic(&self, label: &str) -> String {
        format!(
            "conf.{}.{label}.{}",
            self.case,
            uuid::Uuid::new_v4().simple()
        )
    }

    /// True when the backend reports `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.client.capabilities().has(capability)
    }

    /// Prints the skip line of a capability-gated case:
    /// `skipped: <backend> lacks <capability>: <case>`.
    pub fn skip_lacking(&self, capability: Capability) {
        println!(
            "skipped: {} lacks {capability}: {}",
            self.backend(),
            self.case
        );
    }

    /// Prints a skip line with another reason:
    /// `skipped: <backend> <reason>: <case>`.
    pub fn skip_because(&self, reason: &str) {
        println!("skipped: {} {reason}: {}", self.backend(), self.case);
    }
}

/// Runs one case against `broker`.
///
/// Connects a first client. When that fails with a connection error
/// ([`Error::is_connection_error`](ezmq_core::Error::is_connection_error)),
/// prints exactly one line `skipped: no broker at <url>` and returns —
/// unless [`REQUIRE_ENV`] names the backend (or is `all`), then it panics.
/// Any other connect error panics. The case must finish within
/// [`CASE_DEADLINE`].
pub async fn run<B, F, Fut>(broker: B, case: F)
where
    B: Broker,
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    ezmq_test_support::init_tracing();
    let case_name = case_name::<F>();
    let client = match broker.connect().await {
        Ok(client) => client,
        Err(e) if e.is_connection_error() => {
            if is_required(broker.name(), std::env::var(REQUIRE_ENV).ok().as_deref()) {
                panic!(
                    "{REQUIRE_ENV} requires the {} broker, but none answers at {}: {e}",
                    broker.name(),
                    broker.url()
                );
            }
            println!("skipped: no broker at {}", broker.url());
            return;
        }
        Err(e) => panic!(
            "{case_name}: connecting to {} at {} failed: {e}",
            broker.name(),
            broker.url()
        ),
    };
    let ctx = Ctx {
        broker: Arc::new(broker),
        client,
        case: case_name,
    };
    if tokio::time::timeout(CASE_DEADLINE, case(ctx))
        .await
        .is_err()
    {
        panic!("{case_name}: did not finish within {CASE_DEADLINE:?}");
    }
}

/// True when `require` (the value of [`REQUIRE_ENV`]) names `backend` or
/// is `all`.
pub fn is_required(backend: &str, require: Option<&str>) -> bool {
    require.is_some_and(|list| {
        list.split(',')
            .map(str::trim)
            .any(|name| name.eq_ignore_ascii_case("all") || name.eq_ignore_ascii_case(backend))
    })
}

/// The case's name: the last path segment of the function's type name
/// (`ezmq_conformance::cases::push_consume` -> `push_consume`).
fn case_name<F>() -> &'static str {
    let full = std::any::type_name::<F>();
    full.rsplit("::").next().unwrap_or(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_list() {
        assert!(!is_required("disque", None));
        assert!(!is_required("disque", Some("")));
        assert!(is_required("disque", Some("all")));
        assert!(is_required("disque", Some("redis, disque")));
        assert!(is_required("redis", Some("REDIS")));
        assert!(!is_required("rabbitmq", Some("redis,disque")));
    }

    #[test]
    fn names_cases_by_function() {
        async fn push_consume(_: Ctx) {}
        fn name_of<F, Fut>(_: F) -> &'static str
        where
            F: FnOnce(Ctx) -> Fut,
        {
            case_name::<F>()
        }
        assert_eq!(name_of(push_consume), "push_consume");
    }
}
