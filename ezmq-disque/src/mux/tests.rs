//! The shared connection against a real (embedded) Disque server.

use super::*;
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};

/// A fresh embedded server and a connection to it.
async fn connected() -> (EmbeddedDisque, Mux) {
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0))
        .await
        .expect("embedded server");
    let mux = Mux::connect(&server.addr().to_string(), None, Duration::from_secs(5))
        .await
        .expect("connect");
    (server, mux)
}

#[tokio::test]
async fn close_fails_waiting_callers_and_joins_both_tasks() {
    let (server, mux) = connected().await;
    let pong = mux.send(&redis::cmd("PING")).await.expect("PING");
    assert_eq!(pong, Value::SimpleString("PONG".into()));

    // A command the node answers only after 30 s is in flight at close.
    let mut sleep = redis::cmd("DEBUG");
    sleep.arg("SLEEP").arg(30);
    let waiting = mux.send(&sleep);
    tokio::pin!(waiting);
    tokio::select! {
        biased;
        r = &mut waiting => panic!("DEBUG SLEEP 30 answered at once: {r:?}"),
        () = std::future::ready(()) => {}
    }

    tokio::time::timeout(
        Duration::from_secs(5),
        mux.close(Duration::from_millis(200)),
    )
    .await
    .expect("close gives up draining after its bound and joins both tasks");
    assert!(mux.owner.tasks.lock().expect("tasks").is_empty());
    let err = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting caller is answered at close")
        .expect_err("a closed connection answers with an error");
    assert!(
        matches!(&err, MuxError::Connection(e) if e.to_string().contains("closed by the client")),
        "{err:?}"
    );
    let after = mux.send(&redis::cmd("PING")).await;
    assert!(matches!(after, Err(MuxError::Unsent(_))), "{after:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn close_lets_commands_in_flight_finish_and_refuses_new_ones() {
    let (server, mux) = connected().await;
    let mut add = redis::cmd("ADDJOB");
    add.arg("close-drain").arg("body").arg(0);
    let mut sleep = redis::cmd("DEBUG");
    sleep.arg("SLEEP").arg(0.3);
    let in_flight = futures::future::join(mux.send(&sleep), mux.send(&add));
    tokio::pin!(in_flight);
    tokio::select! {
        biased;
        r = &mut in_flight => panic!("answered before close started: {r:?}"),
        () = std::future::ready(()) => {}
    }
    let close = mux.close(Duration::from_secs(10));
    tokio::pin!(close);
    tokio::select! {
        biased;
        () = &mut close => panic!("close finished while a command was in flight"),
        () = std::future::ready(()) => {}
    }
    let refused = mux.send(&redis::cmd("PING")).await;
    assert!(
        matches!(&refused, Err(MuxError::Unsent(e)) if e.to_string().contains("closed by the client")),
        "{refused:?}"
    );
    let ((slept, added), ()) = tokio::time::timeout(
        Duration::from_secs(5),
        futures::future::join(&mut in_flight, &mut close),
    )
    .await
    .expect("close drains in time");
    assert_eq!(slept.expect("DEBUG SLEEP"), Value::Okay);
    let id = match added.expect("ADDJOB answered during close") {
        Value::SimpleString(id) => id,
        other => panic!("ADDJOB reply {other:?}"),
    };
    assert!(id.starts_with("D-"), "{id}");
    server.shutdown().await;
}
