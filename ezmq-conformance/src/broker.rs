//! `Broker`: what a backend's tests hand the suite.

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::{Client, Result};

/// A real broker the suite runs against, as a backend's `tests/` sees it:
/// where it is and how to connect clients to it.
///
/// Only the first four methods are required, and
/// [`Broker::expected_capabilities`]; the provided ones are hints
/// that make some cases faster or possible (each documents which case uses
/// it and what happens with the default).
///
/// ```no_run
/// use ezmq_conformance::Broker;
///
/// #[derive(Debug)]
/// struct MyBroker;
///
/// #[async_trait::async_trait]
/// impl Broker for MyBroker {
///     fn name(&self) -> &'static str {
///         "disque"
///     }
///     fn url(&self) -> String {
///         "disque://127.0.0.1:7711".into()
///     }
///     async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
///         todo!("the backend's connect")
///     }
///     fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
///         ezmq_core::spi::Capabilities::none()
///     }
/// }
/// ```
#[async_trait]
pub trait Broker: Send + Sync + 'static {
    /// Backend name as listed in `EZMQ_REQUIRE_BROKERS`: "disque", "redis", "rabbitmq".
    fn name(&self) -> &'static str;

    /// Where the broker is, for the skip line.
    fn url(&self) -> String;

    /// A new client (tests make several, acting as separate processes).
    async fn connect(&self) -> Result<Client>;

    /// The capabilities this backend must report, written down by its
    /// tests: `capabilities_are_consistent` fails when the backend reports
    /// one more or one less, so a capability cannot appear or vanish
    /// unnoticed (each lacking one is also a skip line in its case).
    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities;

    /// Restarts the broker (connections drop, confirmed messages survive); None when this broker cannot be restarted by the test.
    async fn restart(&self) -> Option<Result<(), String>> {
        None
    }

    /// Whether messages confirmed before [`Broker::restart`] are still there
    /// after it. Default `true`; an in-memory test server that restarts
    /// empty answers `false`, and `resumes_after_broker_restart` then only
    /// checks that listeners resume.
    fn restart_keeps_messages(&self) -> bool {
        true
    }

    /// A new client whose messages have a short lease, about
    /// [`Broker::short_lease`]: a message whose consumer stops answering is
    /// redelivered after that long (Disque: a short `default_retry`; Redis:
    /// a short claim idle time). Default `None`: the broker has no leases
    /// or no way to shorten them.
    ///
    /// `long_handler_gets_no_duplicate` needs it (it skips without);
    /// `at_least_once_when_consumer_dies` uses it to make its crash
    /// scenario fast (without it that scenario waits for the broker's
    /// normal redelivery, up to 60 s).
    async fn connect_with_short_lease(&self) -> Option<Result<Client>> {
        None
    }

    /// The lease of clients from [`Broker::connect_with_short_lease`].
    /// Default 1 s.
    fn short_lease(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// Whether a job whose consumer died holding it comes back with that
    /// delivery counted in its attempt. Default `true`. A broker that
    /// keeps no delivery count, where the backend keeps it in something
    /// the test broker does not store, answers `false` and says why in
    /// its tests (the Kafka backend keeps it in commit metadata, which
    /// nisshi 0.8.1 does not return); `at_least_once_when_consumer_dies`
    /// then prints a skip line for that one check.
    fn counts_attempts_after_a_crash(&self) -> bool {
        true
    }

    /// How much earlier than its nominal time a broker-timed event (a
    /// delay ending) may happen on this broker. Default zero; real Disque
    /// caches its clock every 100 ms, so a delay can end ~100 ms early.
    /// `delayed_delivery_never_early` subtracts it from its lower bound.
    fn clock_slack(&self) -> Duration {
        Duration::ZERO
    }

    /// How long after listeners on several clients start the broker may
    /// still be splitting a topic among them, while records of a partition
    /// changing hands wait (Kafka: a consumer group's rebalance, seconds on
    /// the test broker). Default zero.
    /// `high_jobs_overtake_a_backlog_without_starving_it` waits this long
    /// before it pushes its High job, so that it measures the overtaking,
    /// not a rebalance.
    fn listeners_settle(&self) -> Duration {
        Duration::ZERO
    }

    /// The least share of a rate limit that listeners on several clients
    /// must reach while a backlog waits, in
    /// `rate_limit_holds_across_clients`. Default `Some(0.9)`. A broker
    /// whose claims (core's limiter is kept in them) slow down under the
    /// suite's load so much that no floor holds answers `None` and says
    /// why in its tests: that check then prints a skip line with the rate
    /// reached. The upper bound, what a limit promises, is always checked.
    fn rate_limit_floor(&self) -> Option<f64> {
        Some(0.9)
    }
}
