//! Durable pull consumers, created or found.

use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::stream::{ConsumerError, Stream};

/// The durable consumer `name` of `stream`: created with `config`, or the
/// one already there. A create comes first: JetStream answers it for an
/// existing consumer with the same settings too, while on a cluster a
/// lookup of a consumer that does not exist yet can go unanswered until
/// its timeout (the client's `get_or_create` looks first). A consumer
/// whose settings differ (another lease, say) is used as it is.
pub(crate) async fn consumer(
    stream: &Stream,
    name: &str,
    config: pull::Config,
) -> Result<PullConsumer, ConsumerError> {
    match stream.create_consumer(config).await {
        Ok(consumer) => Ok(consumer),
        Err(created) => match stream.get_consumer(name).await {
            Ok(consumer) => Ok(consumer),
            Err(_) => Err(created),
        },
    }
}
