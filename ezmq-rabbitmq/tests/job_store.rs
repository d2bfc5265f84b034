//! RabbitMQ has no job store (see "Job store" in the crate README): every
//! job-store call of `Admin` fails with `Error::Unsupported` naming
//! `Capability::JobStore`, before anything is sent, even for a job that
//! exists.

mod support;

use std::fmt::Debug;
use std::time::{Duration, SystemTime};

use ezmq_core::spi::{Capability, JobState};
use ezmq_core::{Client, ClientConfig, Error, JobId, MqClient, Result};

fn assert_no_job_store<T: Debug>(result: Result<T>, what: &str) {
    match result {
        Err(Error::Unsupported {
            backend: "rabbitmq",
            capability: Capability::JobStore,
        }) => {}
        other => panic!("{what} on RabbitMQ must fail with Unsupported(JobStore), got {other:?}"),
    }
}

#[tokio::test]
async fn job_store_calls_are_unsupported() {
    let Some(config) = support::config().await else {
        return;
    };
    // A prefix of its own: the delayed job's delay levels are deleted after.
    let own = support::OwnLevels::connect(config, "jobstore").await;
    let (topic, t) = (own.topic.clone(), own.t.clone());
    let client = Client::new(own.backend.clone(), ClientConfig::default());
    assert!(!client.capabilities().has(Capability::JobStore));
    let id = client
        .push_delay(&topic, "later".into(), Duration::from_secs(3600))
        .await
        .unwrap();
    let admin = client.admin();
    assert_no_job_store(admin.cancel_job(&t, &id).await, "cancel_job");
    assert_no_job_store(admin.scheduled(&t, 10).await, "scheduled");
    assert_no_job_store(admin.scheduled_len(&t).await, "scheduled_len");
    assert_no_job_store(admin.job(&t, &id).await, "job");
    assert_no_job_store(admin.jobs(&t, JobState::Scheduled, None, 10).await, "jobs");
    assert_no_job_store(admin.count_jobs(&t, JobState::Retrying).await, "count_jobs");
    assert_no_job_store(admin.promote_job(&t, &id).await, "promote_job");
    assert_no_job_store(
        admin
            .reschedule_job(&t, &JobId::new("nope"), SystemTime::now())
            .await,
        "reschedule_job",
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    // The shutdown closed the backend: delete the queue and levels alone.
    support::cleanup_prefixed(&own.prefix, &[topic]).await;
}
