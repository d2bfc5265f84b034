//! Cluster-wide concurrency
//! ([`ConsumeOptions::with_global_concurrency`](ezmq_core::ConsumeOptions::with_global_concurrency)):
//! listeners on several clients together never run more handlers than the
//! limit, and the slots of a client that dies come back.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt, PushOptions};
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use crate::support::{channel, listener_option_gate, recv, shutdown_all, until_held_back, SOON};
use crate::{Ctx, Doomed};

/// The limit, over every listener.
const LIMIT: usize = 5;
/// Each listener's own concurrency.
const CONCURRENCY: usize = 8;
/// The slot lease: a dead client's slots are free within 2¼ of it.
const LEASE: Duration = Duration::from_secs(1);
/// Jobs in the backlog (at 5 × 10 per second: 20 s of work, more than the case needs).
const JOBS: usize = 1000;
/// How long a handler runs.
const WORK: Duration = Duration::from_millis(100);

/// Handlers running now on the doomed client and on the others, the most
/// ever seen at once, and the survivors' own count once the doomed client
/// is dead.
///
/// A killed client runs nothing: once it is killed its handlers no longer
/// count, though its runtime drops their futures in the background (on a
/// slow broker, dropping its connections can hold that up for seconds).
#[derive(Default)]
struct Running {
    doomed_now: AtomicUsize,
    others_now: AtomicUsize,
    most: AtomicUsize,
    survivors: AtomicUsize,
    killed: AtomicBool,
}

/// What handlers report.
#[derive(Debug)]
enum Event {
    /// A handler started on the doomed client.
    DoomedStarted,
    /// A handler started on a survivor.
    Started,
    /// After the kill, the survivors ran `LIMIT` handlers at once.
    SurvivorsFull,
}

/// Listeners on three clients at concurrency 8 under one global limit of 5
/// drain a backlog: sampled from the handlers, never more than 5 run at
/// once, and 5 do. The first client takes the slots before the others
/// listen; it is then killed (its runtime dropped with its connections, as
/// `kill -9` would) while it holds them, and the two others, competing for
/// the slots it left, reach 5 at once within a few leases and never more.
/// A limit of 0 is refused at registration.
pub async fn global_concurrency_holds_across_clients(ctx: Ctx) {
    let a = ctx.client();
    let name = ctx.topic("slots");
    let limited = ConsumeOptions::new()
        .with_concurrency(CONCURRENCY)
        .with_global_concurrency(LIMIT as u32)
        .with_slot_lease(LEASE);
    let bad = ConsumeOptions::new().with_global_concurrency(0);
    let gate = listener_option_gate(
        &ctx,
        &name,
        limited.clone(),
        Capability::GlobalConcurrency,
        bad,
        "global_concurrency",
    );
    if !gate.await {
        return;
    }
    let jobs = (0..JOBS)
        .map(|n| (format!("job-{n}").into(), PushOptions::new()))
        .collect();
    for pushed in a.push_batch(&name, jobs).await.expect("backlog") {
        pushed.expect("backlog job");
    }

    let running = Arc::new(Running::default());
    let (tx, mut rx) = channel::<Event>();
    let doomed = {
        let (name, options) = (name.clone(), limited.clone());
        let (running, tx) = (Arc::clone(&running), tx.clone());
        Doomed::start(&ctx, move |client| async move {
            listen(&client, &name, options, running, tx, true).await;
            client
        })
        .await
    };
    // The doomed client alone first, until it holds slots (slots stay with
    // the client that keeps them busy).
    let mut doomed_started = 0;
    while doomed_started < LIMIT {
        if let Event::DoomedStarted = recv(&mut rx, SOON, "handlers on the doomed client").await {
            doomed_started += 1;
        }
    }
    let b = ctx.connect().await;
    for client in [a, &b] {
        listen(
            client,
            &name,
            limited.clone(),
            Arc::clone(&running),
            tx.clone(),
            false,
        )
        .await;
    }
    // Tools see the limit, and the survivors held back.
    until_held_back(a, &name, |limits| {
        limits.global_concurrency == Some(LIMIT as u32)
    })
    .await;
    // Let the survivors probe for slots while the doomed client holds them all.
    while doomed_started < 4 * LIMIT {
        if let Event::DoomedStarted = recv(&mut rx, SOON, "handlers on the doomed client").await {
            doomed_started += 1;
        }
    }
    let before = running.most.load(Ordering::SeqCst);
    assert!(
        before <= LIMIT,
        "{before} handlers ran at once under a global limit of {LIMIT}"
    );

    running.killed.store(true, Ordering::SeqCst);
    doomed.kill();
    let killed_at = Instant::now();
    let bound = LEASE * 4 + Duration::from_secs(5);
    loop {
        if let Event::SurvivorsFull = recv(
            &mut rx,
            bound,
            "the two survivors to run 5 handlers at once after the kill",
        )
        .await
        {
            break;
        }
    }
    let recovered = killed_at.elapsed();
    let most = running.most.load(Ordering::SeqCst);
    assert!(
        most <= LIMIT,
        "{most} handlers ran at once under a global limit of {LIMIT}"
    );
    assert_eq!(most, LIMIT, "the limit was reached");
    println!(
        "{}: at most {most} of {LIMIT} handlers at once; the survivors had all {LIMIT} slots {recovered:?} after the kill (slot lease {LEASE:?})",
        ctx.backend()
    );
    shutdown_all(&[a, &b]).await;
}

/// A listener on `name` whose handler counts itself running for `WORK`.
async fn listen(
    client: &Client,
    name: &str,
    options: ConsumeOptions,
    running: Arc<Running>,
    tx: UnboundedSender<Event>,
    doomed: bool,
) {
    let tx = Arc::new(tx);
    client
        .add_consume_listener_with(name, options, move |_job: Job| {
            let (running, tx) = (Arc::clone(&running), Arc::clone(&tx));
            async move {
                let _guard = Guard::enter(&running, doomed, &tx);
                tokio::time::sleep(WORK).await;
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("a listener with a global concurrency limit");
}

/// Counts a handler running until dropped (also when its runtime is).
struct Guard {
    running: Arc<Running>,
    doomed: bool,
    survivor: bool,
}

impl Guard {
    fn enter(running: &Arc<Running>, doomed: bool, tx: &UnboundedSender<Event>) -> Guard {
        // Each counter is raised before the other is read: of two handlers
        // starting at once, one sees both.
        let (on_doomed, on_others) = if doomed {
            let on_doomed = running.doomed_now.fetch_add(1, Ordering::SeqCst) + 1;
            (on_doomed, running.others_now.load(Ordering::SeqCst))
        } else {
            let on_others = running.others_now.fetch_add(1, Ordering::SeqCst) + 1;
            (running.doomed_now.load(Ordering::SeqCst), on_others)
        };
        let alive_doomed = if running.killed.load(Ordering::SeqCst) {
            0
        } else {
            on_doomed
        };
        running
            .most
            .fetch_max(alive_doomed + on_others, Ordering::SeqCst);
        let survivor = !doomed && running.killed.load(Ordering::SeqCst);
        if survivor {
            let survivors = running.survivors.fetch_add(1, Ordering::SeqCst) + 1;
            if survivors == LIMIT {
                let _ = tx.send(Event::SurvivorsFull);
            }
        }
        let _ = tx.send(if doomed {
            Event::DoomedStarted
        } else {
            Event::Started
        });
        Guard {
            running: Arc::clone(running),
            doomed,
            survivor,
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let count = if self.doomed {
            &self.running.doomed_now
        } else {
            &self.running.others_now
        };
        count.fetch_sub(1, Ordering::SeqCst);
        if self.survivor {
            self.running.survivors.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
