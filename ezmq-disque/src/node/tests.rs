//! Unit tests of `node.rs`: HELLO parsing, affinity, and the connection
//! pool against the embedded server.

use super::*;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

#[test]
fn hello_standalone_uses_dialed_address() {
    let v = Value::Array(vec![
        Value::Int(1),
        bulk("abcd"),
        Value::Array(vec![bulk("abcd"), bulk(""), bulk("7711"), bulk("1")]),
    ]);
    let (me, nodes) = parse_hello(&v, "10.0.0.9:7711").unwrap();
    assert_eq!(me, "abcd");
    assert_eq!(
        nodes,
        [NodeInfo {
            id: "abcd".into(),
            addr: "10.0.0.9:7711".into(),
            priority: 1
        }]
    );
}

#[test]
fn hello_cluster() {
    let v = Value::Array(vec![
        Value::Int(1),
        bulk("a"),
        Value::Array(vec![bulk("a"), bulk("10.0.0.1"), bulk("7711"), bulk("1")]),
        Value::Array(vec![
            bulk("b"),
            bulk("10.0.0.2"),
            Value::Int(7712),
            bulk("100"),
        ]),
    ]);
    let (_, nodes) = parse_hello(&v, "x:1").unwrap();
    assert_eq!(nodes[1].addr, "10.0.0.2:7712");
    assert_eq!(nodes[1].priority, 100);
    assert!(parse_hello(&Value::Nil, "x:1").is_none());
}

#[test]
fn affinity_is_stable_and_spread() {
    assert_eq!(affinity_score("t", "n1"), affinity_score("t", "n1"));
    let ids = ["n1", "n2", "n3"];
    let mut wins = [0usize; 3];
    for i in 0..300 {
        let topic = format!("topic-{i}");
        let best = (0..3)
            .max_by_key(|&k| affinity_score(&topic, ids[k]))
            .unwrap();
        wins[best] += 1;
    }
    assert!(wins.iter().all(|&w| w > 50), "{wins:?}");
}

/// A node on a fresh embedded server, with at most `max` shared
/// connections.
async fn node_on_server(max: usize) -> (ezmq_disque_server::EmbeddedDisque, Node) {
    let server = ezmq_disque_server::EmbeddedDisque::start(
        ezmq_disque_server::ServerConfig::default().with_port(0),
    )
    .await
    .expect("embedded server");
    let info = NodeInfo {
        id: String::new(),
        addr: server.addr().to_string(),
        priority: 1,
    };
    let config = DisqueConfig::default().with_connections_per_node(max);
    let node = Node::new(info, &config, 0).expect("node");
    (server, node)
}

/// Sends `DEBUG SLEEP secs` (the server holds that connection's replies)
/// and, once it is under way, a `PING`; returns how long the `PING` took.
async fn ping_behind_a_slow_command(node: &Node, secs: f64) -> Duration {
    let timeout = Duration::from_secs(10);
    node.query("PING", &redis::cmd("PING"), timeout)
        .await
        .expect("first PING opens the connection");
    let mut sleep = redis::cmd("DEBUG");
    sleep.arg("SLEEP").arg(secs);
    let slow = node.query("DEBUG", &sleep, timeout);
    let ping = async {
        // Past the held-up threshold, so the pool may move on.
        tokio::time::sleep(pool::HELD_UP * 3).await;
        let started = std::time::Instant::now();
        node.query("PING", &redis::cmd("PING"), timeout)
            .await
            .expect("PING");
        started.elapsed()
    };
    let (slept, took) = tokio::join!(slow, ping);
    slept.expect("DEBUG SLEEP");
    took
}

#[tokio::test]
async fn a_slow_reply_does_not_hold_up_the_next_command() {
    let (server, node) = node_on_server(4).await;
    let took = ping_behind_a_slow_command(&node, 1.0).await;
    assert!(
        took < Duration::from_millis(500),
        "PING waited {took:?} behind a slow command"
    );
    assert_eq!(node.pool.len(), 2, "one more connection was opened");
    // A quiet node keeps to its first connection.
    for _ in 0..50 {
        node.query("PING", &redis::cmd("PING"), Duration::from_secs(5))
            .await
            .expect("PING");
    }
    assert_eq!(node.pool.len(), 2);
    node.disconnect(Duration::from_secs(1)).await;
    server.shutdown().await;
}

#[tokio::test]
async fn one_connection_answers_in_order() {
    // With a single connection allowed, the PING waits for the slow reply
    // before it, as a Disque node answers one connection in order.
    let (server, node) = node_on_server(1).await;
    let took = ping_behind_a_slow_command(&node, 0.6).await;
    assert!(
        took >= Duration::from_millis(400),
        "PING took {took:?}: not behind the slow command"
    );
    node.disconnect(Duration::from_secs(1)).await;
    server.shutdown().await;
}
