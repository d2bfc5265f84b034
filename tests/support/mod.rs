//! What the facade's broker tests share.

/// The client at `url`, or `None` (after printing the skip line) when no
/// broker answers there and `EZMQ_REQUIRE_BROKERS` does not name `backend`.
pub(crate) async fn connect(url: &str, backend: &str) -> Option<ezmq::Client> {
    match ezmq::connect_url(url).await {
        Ok(client) => Some(client),
        Err(e) if e.is_connection_error() => {
            let require = std::env::var(ezmq_conformance::REQUIRE_ENV).ok();
            assert!(
                !ezmq_conformance::is_required(backend, require.as_deref()),
                "{} requires {backend}, but nothing answers at {url}: {e}",
                ezmq_conformance::REQUIRE_ENV
            );
            println!("skipped: no broker at {url}");
            None
        }
        Err(e) => panic!("connecting to {url}: {e}"),
    }
}
