//! Broadcast groups: a row per group and per live member; a broadcast is
//! one `INSERT … SELECT` of a copy into every live group's queue
//! (`<topic>#<group>`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{FanOut, GroupInfo, GroupMembership};
use ezmq_core::{PushOptions, Result, Topic};

use crate::backend::{ms, Inner, PostgresBackend};
use crate::error::column;
use crate::push::Row as JobRow;

#[async_trait]
impl FanOut for PostgresBackend {
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        let inner = &self.inner;
        let row = JobRow::of(options)?;
        let done = inner
            .timed_push(
                topic,
                sqlx::query(&inner.sql.publish_to_groups)
                    .bind(topic.as_str())
                    .bind(row.id.as_str())
                    .bind(&body[..])
                    .bind(&row.headers)
                    .bind(row.attempt)
                    .bind(row.delay_ms)
                    .bind(row.ttl_ms)
                    .execute(&inner.pool),
            )
            .await?;
        Ok(Some(
            usize::try_from(done.rows_affected()).unwrap_or(usize::MAX),
        ))
    }

    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>> {
        let membership = PostgresMembership {
            inner: Arc::clone(&self.inner),
            topic: topic.clone(),
            group: group.clone(),
            retention,
        };
        membership.refresh().await?;
        Ok(Box::new(membership))
    }

    /// Live groups with their members (seen within the group's
    /// retention) and their due jobs.
    async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        let inner = &self.inner;
        let rows = inner
            .timed(
                "groups",
                sqlx::query(&inner.sql.groups)
                    .bind(topic.as_str())
                    .fetch_all(&inner.pool),
            )
            .await?;
        rows.into_iter()
            .map(|row| {
                let name: String = column(&row, 0, "groups")?;
                let members: i64 = column(&row, 1, "groups")?;
                let waiting: i64 = column(&row, 2, "groups")?;
                Ok(GroupInfo::new(name)
                    .with_members(u64::try_from(members).unwrap_or(0))
                    .with_waiting(u64::try_from(waiting).unwrap_or(0)))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}

/// This backend's place in one group.
struct PostgresMembership {
    inner: Arc<Inner>,
    topic: Topic,
    group: Topic,
    retention: Duration,
}

impl fmt::Debug for PostgresMembership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresMembership")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("member", &self.inner.member)
            .finish()
    }
}

#[async_trait]
impl GroupMembership for PostgresMembership {
    /// Keeps the group for another `retention`, and this member live as
    /// long.
    async fn refresh(&self) -> Result<()> {
        let inner = &self.inner;
        let retention = ms(self.retention);
        inner
            .timed(
                "join group",
                sqlx::query(&inner.sql.join_group)
                    .bind(self.topic.as_str())
                    .bind(self.group.as_str())
                    .bind(retention)
                    .execute(&inner.pool),
            )
            .await?;
        inner
            .timed(
                "join group",
                sqlx::query(&inner.sql.join_member)
                    .bind(self.topic.as_str())
                    .bind(self.group.as_str())
                    .bind(&inner.member)
                    .bind(retention)
                    .execute(&inner.pool),
            )
            .await
            .map(drop)
    }

    /// The member goes; the group stays for its retention.
    async fn leave(&self) -> Result<()> {
        let inner = &self.inner;
        inner
            .timed(
                "leave group",
                sqlx::query(&inner.sql.leave_member)
                    .bind(self.topic.as_str())
                    .bind(self.group.as_str())
                    .bind(&inner.member)
                    .execute(&inner.pool),
            )
            .await
            .map(drop)
    }
}
