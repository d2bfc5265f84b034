//! What the backend's design (docs/proposals/kafka.md) takes from the
//! broker, checked on the test broker before anything is built on it:
//! explicit topic creation, an idempotent producer, broker-clock
//! timestamps, offsets by time, a commit into an empty group, and a
//! cooperative-sticky group that hands a leaving member's partitions to
//! the others. Each prints what it measured (`--nocapture`).

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ezmq_core::Topic;
use futures::StreamExt;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;

/// Bound for what should happen at once.
const SOON: Duration = Duration::from_secs(30);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Creates `name` with `partitions` and `configs` through the admin API.
async fn create(name: &str, partitions: i32, configs: &[(&str, &str)]) {
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(-1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(5)));
    let results = support::admin()
        .create_topics([&topic], &options)
        .await
        .expect("create topics");
    for result in results {
        result.expect("created");
    }
}

fn producer() -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", support::bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .create()
        .expect("a producer")
}

fn consumer(group: &str, fetch_wait_ms: u32) -> StreamConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", support::bootstrap())
        .set("group.id", group)
        .set("group.protocol", "classic")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("allow.auto.create.topics", "false")
        .set("session.timeout.ms", "6000")
        .set("fetch.wait.max.ms", fetch_wait_ms.to_string())
        .create()
        .expect("a consumer")
}

/// Assigns every partition of `topic` (0..partitions) from the start.
fn assign_all(consumer: &impl Consumer, topic: &str, partitions: i32) {
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning)
            .expect("offset");
    }
    consumer.assign(&list).expect("assign");
}

#[tokio::test]
async fn a_second_create_of_a_topic_says_it_exists() {
    let Some(cluster) = support::cluster().await else {
        return;
    };
    let name = format!("{}.spike-exists", cluster.config().prefix);
    create(&name, 1, &[]).await;
    let again = support::admin()
        .create_topics(
            [&NewTopic::new(&name, 1, TopicReplication::Fixed(-1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
        )
        .await
        .expect("create topics");
    assert!(
        matches!(
            again.as_slice(),
            [Err((_, RDKafkaErrorCode::TopicAlreadyExists))]
        ),
        "{again:?}"
    );
    support::delete_topics(&[&name]).await;
}

#[tokio::test]
async fn an_idempotent_producer_stores_each_message_once() {
    let Some(cluster) = support::cluster().await else {
        return;
    };
    const N: usize = 2_000;
    let name = cluster
        .queue_topic(&Topic::new("spike-idempotent").unwrap())
        .await
        .expect("topic");
    let producer = producer();
    let started = Instant::now();
    let sends = (0..N).map(|i| {
        let producer = producer.clone();
        let name = name.clone();
        async move {
            let body = i.to_string();
            producer
                .send(
                    FutureRecord::<(), _>::to(&name).payload(&body),
                    Duration::from_secs(10),
                )
                .await
                .map(|_| ())
                .map_err(|(err, _)| err)
        }
    });
    let results = futures::future::join_all(sends).await;
    let sent = started.elapsed();
    assert!(results.iter().all(Result::is_ok), "every send acknowledged");
    let consumer = consumer(&format!("{name}.reader"), 100);
    assign_all(&consumer, &name, cluster.config().partitions);
    let mut seen = HashSet::new();
    let mut stream = consumer.stream();
    let mut total = 0usize;
    let deadline = tokio::time::Instant::now() + SOON;
    while seen.len() < N {
        let message = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("every message within 30 s")
            .expect("a message")
            .expect("no consumer error");
        total += 1;
        seen.insert(message.payload().map(<[u8]>::to_vec));
    }
    // Anything more within a short while would be a duplicate.
    while let Ok(Some(extra)) =
        tokio::time::timeout(Duration::from_millis(500), stream.next()).await
    {
        extra.expect("no consumer error");
        total += 1;
    }
    assert_eq!(total, N, "each message stored once");
    println!(
        "{N} idempotent sends (acks=all) in {sent:?}: {:.0} msg/s",
        N as f64 / sent.as_secs_f64()
    );
    drop(stream);
    drop(consumer);
    support::delete_topics(&[&name]).await;
}

#[tokio::test]
async fn log_append_time_is_the_brokers_clock_and_offsets_are_found_by_time() {
    let Some(cluster) = support::cluster().await else {
        return;
    };
    let name = format!("{}.spike-time", cluster.config().prefix);
    create(&name, 1, &[("message.timestamp.type", "LogAppendTime")]).await;
    let producer = producer();
    let day_ago = now_ms() - 86_400_000;
    let before = now_ms();
    for i in 0..10 {
        let body = i.to_string();
        producer
            .send(
                FutureRecord::<(), _>::to(&name)
                    .payload(&body)
                    .timestamp(day_ago),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(err, _)| err)
            .expect("sent");
    }
    let after = now_ms();
    let consumer = consumer(&format!("{name}.reader"), 100);
    assign_all(&consumer, &name, 1);
    let mut stream = consumer.stream();
    let mut stamps = Vec::new();
    while stamps.len() < 10 {
        let message = tokio::time::timeout(SOON, stream.next())
            .await
            .expect("every message within 30 s")
            .expect("a message")
            .expect("no consumer error");
        stamps.push(message.timestamp());
    }
    println!(
        "sent with a timestamp a day old; read back as {:?}",
        stamps[0]
    );
    for stamp in stamps {
        match stamp {
            Timestamp::LogAppendTime(at) => assert!(
                (before - 5_000..=after + 5_000).contains(&at),
                "the broker's clock at append, not the producer's ({at} vs {before}..{after})"
            ),
            other => panic!("expected LogAppendTime, got {other:?}"),
        }
    }
    // Every message read before the drop: a consumer dropped with fetched
    // messages still queued hung in its close on nisshi (M0 finding).
    drop(stream);
    drop(consumer);
    // Offsets by time, on a client of its own: the first record at or
    // after a time.
    let lookup: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", support::bootstrap())
        .create()
        .expect("a consumer");
    let topic = name.clone();
    let (first, past_end) = tokio::task::spawn_blocking(move || {
        let at = |ms: i64| {
            let mut query = TopicPartitionList::new();
            query
                .add_partition_offset(&topic, 0, Offset::Offset(ms))
                .expect("query");
            lookup
                .offsets_for_times(query, Duration::from_secs(5))
                .expect("offsets for times")
                .find_partition(&topic, 0)
                .map(|p| p.offset())
        };
        (at(before - 5_000), at(after + 60_000))
    })
    .await
    .expect("joined");
    println!("offsets for a time before every record: {first:?}; after: {past_end:?}");
    assert_eq!(
        first,
        Some(Offset::Offset(0)),
        "every record is after that time"
    );
    assert!(
        matches!(
            past_end,
            Some(Offset::End | Offset::Invalid | Offset::Offset(10))
        ),
        "{past_end:?}"
    );
    support::delete_topics(&[&name]).await;
}

#[tokio::test]
async fn a_commit_into_an_empty_group_is_read_back() {
    let Some(cluster) = support::cluster().await else {
        return;
    };
    let name = format!("{}.spike-commit", cluster.config().prefix);
    create(&name, 2, &[]).await;
    let group = format!("{name}.group");
    let writer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", support::bootstrap())
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(&name, 0, Offset::Offset(7))
        .expect("offset");
    offsets
        .add_partition_offset(&name, 1, Offset::Offset(3))
        .expect("offset");
    let committing = tokio::task::spawn_blocking(move || {
        writer.commit(&offsets, CommitMode::Sync).map(|()| writer)
    });
    let writer = committing
        .await
        .expect("joined")
        .expect("a non-member commits into an empty group");
    drop(writer);
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", support::bootstrap())
        .set("group.id", &group)
        .create()
        .expect("a consumer");
    let mut asked = TopicPartitionList::new();
    asked.add_partition(&name, 0);
    asked.add_partition(&name, 1);
    let committed = tokio::task::spawn_blocking(move || {
        reader.committed_offsets(asked, Duration::from_secs(5))
    })
    .await
    .expect("joined")
    .expect("committed offsets");
    let read: Vec<Offset> = (0..2)
        .map(|p| {
            committed
                .find_partition(&name, p)
                .map_or(Offset::Invalid, |e| e.offset())
        })
        .collect();
    assert_eq!(read, [Offset::Offset(7), Offset::Offset(3)]);
    support::delete_topics(&[&name]).await;
}

/// The partitions `consumer` holds now.
fn held(consumer: &StreamConsumer) -> usize {
    consumer.assignment().map_or(0, |a| a.count())
}

/// Polls every consumer (rebalances run inside polls) until `done` holds
/// for their assignments, or the deadline.
async fn poll_until(
    consumers: &[StreamConsumer],
    within: Duration,
    done: impl Fn(&[usize]) -> bool,
) -> Vec<usize> {
    let deadline = Instant::now() + within;
    loop {
        for consumer in consumers {
            let _ = tokio::time::timeout(Duration::from_millis(20), consumer.recv()).await;
        }
        let counts: Vec<usize> = consumers.iter().map(held).collect();
        if done(&counts) || Instant::now() > deadline {
            return counts;
        }
    }
}

#[tokio::test]
async fn a_cooperative_sticky_group_gives_a_leavers_partitions_to_the_others() {
    let Some(cluster) = support::cluster().await else {
        return;
    };
    let name = format!("{}.spike-group", cluster.config().prefix);
    create(&name, 6, &[]).await;
    let group = format!("{name}.group");
    let mut members: Vec<StreamConsumer> = (0..3).map(|_| consumer(&group, 100)).collect();
    for member in &members {
        member.subscribe(&[&name]).expect("subscribe");
    }
    let started = Instant::now();
    let counts = poll_until(&members, SOON, |c| {
        c.iter().sum::<usize>() == 6 && c.iter().all(|n| *n > 0)
    })
    .await;
    println!(
        "three members hold {counts:?} after {:?}",
        started.elapsed()
    );
    assert_eq!(counts.iter().sum::<usize>(), 6, "{counts:?}");
    assert!(
        counts.iter().all(|n| *n > 0),
        "every member holds partitions: {counts:?}"
    );

    // A member that closes leaves the group; the two others take its
    // partitions and keep their own.
    let left = members.remove(0);
    drop(left);
    let before: Vec<usize> = members.iter().map(held).collect();
    let leaving = Instant::now();
    let counts = poll_until(&members, SOON, |c| c.iter().sum::<usize>() == 6).await;
    println!(
        "after one left: {before:?} -> {counts:?} in {:?}",
        leaving.elapsed()
    );
    assert_eq!(counts.iter().sum::<usize>(), 6, "{counts:?}");
    drop(members);
    support::delete_topics(&[&name]).await;
}

#[tokio::test]
async fn a_record_reaches_an_idle_consumer_within_its_fetch_wait() {
    let Some(cluster) = support::cluster().await else {
        return;
    };
    let name = format!("{}.spike-latency", cluster.config().prefix);
    create(&name, 1, &[]).await;
    let producer = producer();
    for fetch_wait in [20u32, 100] {
        let consumer = consumer(&format!("{name}.reader-{fetch_wait}"), fetch_wait);
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&name, 0, Offset::End)
            .expect("offset");
        consumer.assign(&list).expect("assign");
        // Let the consumer settle on the end of the partition.
        let _ = tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await;
        let mut took = Vec::new();
        for i in 0..10 {
            let body = format!("{fetch_wait}-{i}");
            let sent = Instant::now();
            producer
                .send(
                    FutureRecord::<(), _>::to(&name).payload(&body),
                    Duration::from_secs(10),
                )
                .await
                .map_err(|(err, _)| err)
                .expect("sent");
            let message = tokio::time::timeout(SOON, consumer.recv())
                .await
                .expect("delivered within 30 s")
                .expect("no consumer error");
            assert_eq!(message.payload(), Some(body.as_bytes()));
            took.push(sent.elapsed());
        }
        took.sort();
        println!(
            "fetch.wait.max.ms {fetch_wait}: produce -> consume median {:?}, max {:?}",
            took[took.len() / 2],
            took[took.len() - 1]
        );
        assert!(took[took.len() - 1] < Duration::from_secs(5), "{took:?}");
    }
    support::delete_topics(&[&name]).await;
}
