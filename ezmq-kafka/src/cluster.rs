//! `KafkaCluster`: a checked connection to the brokers, and the topics
//! ezmq creates on them (through the admin API, never by auto-creation).

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ezmq_core::spi::protocol_probe;
use ezmq_core::{ConnectFailure, Error, Result, Topic};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::metadata::Metadata;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::KafkaConfig;
use crate::names;

/// A connection to a Kafka cluster that answered its metadata request.
///
/// Milestone M0 of the backend (docs/proposals/kafka.md): it connects,
/// names and creates topics; jobs come with M1.
///
/// ```no_run
/// use ezmq_core::Topic;
/// use ezmq_kafka::{KafkaCluster, KafkaConfig};
///
/// # async fn run() -> ezmq_core::Result<()> {
/// let cluster = KafkaCluster::connect("kafka://127.0.0.1:9092".parse()?).await?;
/// let name = cluster.queue_topic(&Topic::new("orders")?).await?;
/// assert_eq!(name, "ezmq.q.orders");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct KafkaCluster {
    inner: Arc<Inner>,
}

struct Inner {
    config: KafkaConfig,
    admin: Arc<AdminClient<DefaultClientContext>>,
    brokers: usize,
    /// Topics this client created or found: not asked for again.
    created: Mutex<HashSet<String>>,
}

impl fmt::Debug for KafkaCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaCluster")
            .field("config", &self.inner.config)
            .field("brokers", &self.inner.brokers)
            .finish_non_exhaustive()
    }
}

impl KafkaCluster {
    /// Connects: checks the configuration, that a broker listens (a
    /// refused or silent address is an [`Error::Connect`] saying so), and
    /// that the cluster answers a metadata request within
    /// [`KafkaConfig::connect_timeout`].
    pub async fn connect(config: KafkaConfig) -> Result<Self> {
        config.validate()?;
        let redacted = config.redacted_url();
        reachable(&config, &redacted).await?;
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", config.brokers().join(","))
            .set("client.id", "ezmq")
            .set(
                "socket.connection.setup.timeout.ms",
                millis(config.connect_timeout),
            )
            .create()
            .map_err(|err| Error::connect_failed(redacted.clone(), ConnectFailure::Other, err))?;
        let admin = Arc::new(admin);
        let timeout = config.connect_timeout;
        let asking = Arc::clone(&admin);
        let metadata =
            tokio::task::spawn_blocking(move || asking.inner().fetch_metadata(None, timeout))
                .await
                .map_err(|err| Error::backend(err, false))?;
        let brokers = match metadata {
            Ok(metadata) => metadata.brokers().len(),
            Err(err) => {
                // Only now, when no Kafka answered, are bytes sent that
                // make another server name itself: a Kafka broker would
                // log them as a malformed request.
                if let Some(other) = another_server(&config).await {
                    return Err(Error::connect_failed(
                        redacted,
                        ConnectFailure::WrongProtocol,
                        other.advice(),
                    ));
                }
                let failure = match err.rdkafka_error_code() {
                    Some(
                        RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::RequestTimedOut,
                    ) => ConnectFailure::TimedOut,
                    _ => ConnectFailure::Other,
                };
                return Err(Error::connect_failed(redacted, failure, err));
            }
        };
        tracing::debug!(url = %redacted, brokers, "connected to Kafka");
        Ok(KafkaCluster {
            inner: Arc::new(Inner {
                config,
                admin,
                brokers,
                created: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// The configuration it was connected with.
    pub fn config(&self) -> &KafkaConfig {
        &self.inner.config
    }

    /// How many brokers the cluster's metadata listed at connect.
    pub fn broker_count(&self) -> usize {
        self.inner.brokers
    }

    /// The Kafka topic holding `topic`'s jobs, created first when this
    /// client has not seen it yet ([`KafkaConfig::partitions`] partitions,
    /// `cleanup.policy=delete`; one that exists already is used as it is).
    pub async fn queue_topic(&self, topic: &Topic) -> Result<String> {
        let name = names::queue(&self.inner.config.prefix, topic);
        self.ensure_topic(&name, self.inner.config.partitions, &[])
            .await?;
        Ok(name)
    }

    /// Creates topic `name` with `partitions` and `configs` unless this
    /// client created or found it before; a topic that exists already
    /// counts as created.
    pub(crate) async fn ensure_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<()> {
        if self.known(name) {
            return Ok(());
        }
        let replication = TopicReplication::Fixed(self.inner.config.replication);
        let mut topic =
            NewTopic::new(name, partitions, replication).set("cleanup.policy", "delete");
        for (key, value) in configs {
            topic = topic.set(key, value);
        }
        self.create(&[topic]).await?;
        tracing::debug!(topic = name, partitions, "Kafka topic ready");
        Ok(())
    }

    /// [`KafkaCluster::ensure_topic`] for several topics with no configs
    /// of their own, in one request.
    pub(crate) async fn ensure_topics(&self, names: &[String], partitions: i32) -> Result<()> {
        let replication = self.inner.config.replication;
        let topics: Vec<NewTopic<'_>> = names
            .iter()
            .filter(|name| !self.known(name))
            .map(|name| {
                NewTopic::new(name, partitions, TopicReplication::Fixed(replication))
                    .set("cleanup.policy", "delete")
            })
            .collect();
        if !topics.is_empty() {
            self.create(&topics).await?;
        }
        Ok(())
    }

    /// Creates `topics` in one request; one that exists already counts as
    /// created.
    async fn create(&self, topics: &[NewTopic<'_>]) -> Result<()> {
        let config = &self.inner.config;
        let options = AdminOptions::new().operation_timeout(Some(config.command_timeout));
        let results = self
            .inner
            .admin
            .create_topics(topics, &options)
            .await
            .map_err(|err| kafka_error("create topic", err))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(Error::backend(
                        format!("creating Kafka topic {topic:?} failed: {code}"),
                        false,
                    ));
                }
            }
        }
        if let Ok(mut created) = self.inner.created.lock() {
            created.extend(topics.iter().map(|topic| topic.name.to_owned()));
        }
        Ok(())
    }

    /// Deletes topic `name` (one that is gone already counts as deleted).
    pub(crate) async fn delete_topic(&self, name: &str) -> Result<()> {
        let options =
            AdminOptions::new().operation_timeout(Some(self.inner.config.command_timeout));
        let results = self
            .inner
            .admin
            .delete_topics(&[name], &options)
            .await
            .map_err(|err| kafka_error("delete topic", err))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((topic, code)) => {
                    return Err(Error::backend(
                        format!("deleting Kafka topic {topic:?} failed: {code}"),
                        true,
                    ));
                }
            }
        }
        if let Ok(mut created) = self.inner.created.lock() {
            created.remove(name);
        }
        Ok(())
    }

    /// The cluster's metadata: its brokers and every topic, within
    /// [`KafkaConfig::command_timeout`].
    pub(crate) async fn metadata(&self) -> Result<Metadata> {
        let admin = Arc::clone(&self.inner.admin);
        let timeout = self.inner.config.command_timeout;
        tokio::task::spawn_blocking(move || admin.inner().fetch_metadata(None, timeout))
            .await
            .map_err(|err| Error::backend(format!("reading Kafka metadata: {err}"), true))?
            .map_err(|err| kafka_error("metadata", err))
    }

    /// The names of the cluster's topics that start with `prefix`.
    pub(crate) async fn topics_starting_with(&self, prefix: &str) -> Result<Vec<String>> {
        let metadata = self.metadata().await?;
        Ok(metadata
            .topics()
            .iter()
            .map(|topic| topic.name())
            .filter(|name| name.starts_with(prefix))
            .map(str::to_owned)
            .collect())
    }

    fn known(&self, name: &str) -> bool {
        self.inner
            .created
            .lock()
            .map(|created| created.contains(name))
            .unwrap_or(false)
    }
}

/// Fails with a classified [`Error::Connect`] when no broker of `config`
/// accepts a TCP connection (librdkafka would only retry until its
/// timeout).
async fn reachable(config: &KafkaConfig, redacted: &str) -> Result<()> {
    let mut last = None;
    for addr in config.brokers() {
        let attempt = tokio::time::timeout(
            config.connect_timeout,
            tokio::net::TcpStream::connect(&addr),
        )
        .await;
        match attempt {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(err)) => last = Some(Error::connect(redacted, err)),
            Err(_) => {
                last = Some(Error::connect_failed(
                    redacted,
                    ConnectFailure::TimedOut,
                    format!(
                        "no TCP connection to {addr} within {:?}",
                        config.connect_timeout
                    ),
                ));
            }
        }
    }
    Err(last.unwrap_or_else(|| {
        Error::connect_failed(redacted, ConnectFailure::Other, "the URL names no broker")
    }))
}

/// Another server the probe recognizes at the first broker address that
/// accepts a connection (Kafka waits for the client's request; the
/// servers the probe knows speak first or answer its bytes).
async fn another_server(config: &KafkaConfig) -> Option<protocol_probe::ServerKind> {
    for addr in config.brokers() {
        if tokio::net::TcpStream::connect(&addr).await.is_ok() {
            return protocol_probe::identify(&addr, Duration::from_millis(500)).await;
        }
    }
    None
}

/// A Kafka error as ezmq's, retryable when the cluster may answer later.
pub(crate) fn kafka_error(request: &'static str, err: KafkaError) -> Error {
    let retryable = matches!(
        err.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::NotController
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::NotLeaderForPartition
        )
    );
    Error::backend(format!("Kafka {request} failed: {err}"), retryable)
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}
