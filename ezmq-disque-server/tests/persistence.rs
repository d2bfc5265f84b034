//! Persistence: the server binary is killed with SIGKILL under load and
//! restarted on the same directory; every job it acknowledged comes back.

mod support;

use ezmq_disque_server::{AppendFsync, EmbeddedDisque, ServerConfig};
use redis::aio::MultiplexedConnection;
use redis::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "ezmq-aof-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts the server binary with the AOF in `dir`; returns it and its address.
async fn spawn_server(dir: &Path, fsync: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ezmq-disque-server"))
        .args(["--port", "0", "--appendonly", "yes", "--appendfsync", fsync])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the server binary");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .expect("ready line within 30 s")
    .expect("read the ready line");
    let addr = line
        .split_whitespace()
        .nth(2)
        .expect("ready on ADDR")
        .to_string();
    (child, addr)
}

async fn connect(addr: &str) -> MultiplexedConnection {
    redis::Client::open(format!("redis://{addr}/"))
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// How many of `ids` SHOW still knows.
async fn known(c: &mut MultiplexedConnection, ids: &[String]) -> usize {
    let mut n = 0;
    for chunk in ids.chunks(500) {
        let mut pipe = redis::pipe();
        for id in chunk {
            pipe.cmd("SHOW").arg(id);
        }
        let replies: Vec<Value> = pipe.query_async(c).await.expect("SHOW pipeline");
        n += replies.iter().filter(|v| !matches!(v, Value::Nil)).count();
    }
    n
}

#[derive(Default)]
struct Acknowledged {
    added: Vec<String>,
    acked: Vec<String>,
}

/// Producers add jobs (and ACK every third) until the server dies; the
/// server is killed once `kill_after` jobs were acknowledged.
async fn kill_under_load(fsync: &str) {
    let dir = TempDir::new(fsync);
    let (mut child, addr) = spawn_server(&dir.0, fsync).await;
    let log = Arc::new(Mutex::new(Acknowledged::default()));
    let count = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(tokio::sync::Notify::new());
    let kill_after = 1500;
    let mut producers = Vec::new();
    for p in 0..8 {
        let mut c = connect(&addr).await;
        let (log, count, enough) = (log.clone(), count.clone(), enough.clone());
        producers.push(tokio::spawn(async move {
            for i in 0..20_000 {
                let r: redis::RedisResult<String> = redis::cmd("ADDJOB")
                    .arg(format!("crash-q{}", p % 3))
                    .arg(format!("body-{p}-{i}"))
                    .arg(0)
                    .arg("RETRY")
                    .arg(60)
                    .query_async(&mut c)
                    .await;
                let Ok(id) = r else { return };
                let acked = if i % 3 == 0 {
                    let r: redis::RedisResult<i64> =
                        redis::cmd("ACKJOB").arg(&id).query_async(&mut c).await;
                    match r {
                        Ok(1) => true,
                        Ok(_) => panic!("ACKJOB of a fresh job did not count it"),
                        Err(_) => {
                            // Unknown outcome: the job may or may not be acked.
                            return;
                        }
                    }
                } else {
                    false
                };
                {
                    let mut l = log.lock().expect("lock");
                    if acked {
                        l.acked.push(id);
                    } else {
                        l.added.push(id);
                    }
                }
                if count.fetch_add(1, Ordering::AcqRel) + 1 == kill_after {
                    enough.notify_one();
                }
            }
        }));
    }
    tokio::time::timeout(Duration::from_secs(120), enough.notified())
        .await
        .expect("1500 jobs acknowledged within 120 s");
    child.kill().await.expect("SIGKILL the server"); // kill -9 while producers run
    for p in producers {
        p.await.expect("producer");
    }
    let (added, acked) = {
        let l = log.lock().expect("lock");
        (l.added.clone(), l.acked.clone())
    };
    assert!(added.len() + acked.len() >= kill_after);
    let (mut child, addr) = spawn_server(&dir.0, fsync).await;
    let mut c = connect(&addr).await;
    let back = known(&mut c, &added).await;
    assert_eq!(back, added.len(), "acknowledged jobs lost with {fsync}");
    assert_eq!(known(&mut c, &acked).await, 0, "acked jobs came back");
    // They are queued at once, not after their 60 s RETRY.
    let queued: i64 = redis::cmd("QLEN")
        .arg("crash-q0")
        .query_async(&mut c)
        .await
        .expect("QLEN");
    assert!(queued > 0);
    child.kill().await.expect("kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_acknowledged_job_with_fsync_always() {
    kill_under_load("always").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_acknowledged_job_with_fsync_everysec() {
    // Replies wait for the write(2) with every policy, so a killed process
    // loses nothing; everysec only risks the last second on a machine crash.
    kill_under_load("everysec").await;
}

#[tokio::test]
async fn a_torn_last_record_is_dropped_and_the_server_starts() {
    let dir = TempDir::new("torn");
    let config = ServerConfig::default()
        .with_port(0)
        .with_appendonly(true)
        .with_dir(&dir.0)
        .with_appendfsync(AppendFsync::Always);
    let server = EmbeddedDisque::start(config.clone()).await.expect("start");
    let node_id = server.node_id().to_string();
    let mut c = conn(&server).await;
    let keep = addjob(&mut c, "torn-q", "kept", &[]).await;
    let gone = addjob(&mut c, "torn-q", "acked", &[]).await;
    assert_eq!(int(&mut c, &["ACKJOB", &gone]).await, 1);
    server.shutdown().await;
    // A crash in the middle of the next record: its header and half its body.
    let path = dir.0.join("appendonly.aof");
    let good = std::fs::metadata(&path).expect("aof").len();
    let mut data = std::fs::read(&path).expect("read");
    data.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3, 4, 1, b'D', b'-']);
    std::fs::write(&path, &data).expect("write");

    let server = EmbeddedDisque::start(config)
        .await
        .expect("starts despite the torn tail");
    assert_eq!(server.node_id(), node_id, "node id kept in --dir");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        good,
        "torn tail truncated"
    );
    let mut c = conn(&server).await;
    assert!(matches!(
        value(&mut c, &["SHOW", &gone]).await.unwrap(),
        Value::Nil
    ));
    let got = value(&mut c, &["GETJOB", "NOHANG", "FROM", "torn-q"])
        .await
        .unwrap();
    assert!(format!("{got:?}").contains(&keep), "{got:?}");
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(info.contains("aof_last_load_dropped_bytes:11"), "{info}");
    server.shutdown().await;
}

#[tokio::test]
async fn rewrite_compacts_and_keeps_the_state() {
    let dir = TempDir::new("rewrite");
    let config = ServerConfig::default()
        .with_port(0)
        .with_appendonly(true)
        .with_dir(&dir.0);
    let server = EmbeddedDisque::start(config.clone()).await.expect("start");
    let mut c = conn(&server).await;
    let mut kept = Vec::new();
    for i in 0..200 {
        let id = addjob(&mut c, "rw-q", &format!("b{i}"), &[]).await;
        if i % 2 == 0 {
            assert_eq!(int(&mut c, &["ACKJOB", &id]).await, 1);
        } else {
            kept.push(id);
        }
    }
    let path = dir.0.join("appendonly.aof");
    let before = std::fs::metadata(&path).unwrap().len();
    let r = value(&mut c, &["BGREWRITEAOF"]).await.unwrap();
    assert_eq!(
        r,
        Value::SimpleString("Background append only file rewriting started".into())
    );
    let done = wait_for(Duration::from_secs(20), || {
        let mut c = c.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(&mut c)
                .await
                .unwrap();
            info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrites:1")
        }
    })
    .await;
    assert!(done.is_some(), "rewrite finished");
    // Changes after the rewrite go to the new file.
    let late = addjob(&mut c, "rw-q", "late", &[]).await;
    assert_eq!(int(&mut c, &["ACKJOB", &kept[0]]).await, 1);
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(after < before / 2, "{before} -> {after} bytes");
    server.shutdown().await;

    let server = EmbeddedDisque::start(config).await.expect("restart");
    let mut c = conn(&server).await;
    assert_eq!(int(&mut c, &["QLEN", "rw-q"]).await, 100);
    assert_eq!(known(&mut c, &kept[1..]).await, 99);
    assert_eq!(known(&mut c, &[late, kept[0].clone()]).await, 1);
    server.shutdown().await;
}
