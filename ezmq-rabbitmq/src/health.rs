//! The broker's health report ([`Backend::health`](ezmq_core::spi::Backend::health)):
//! the AMQP connection's state and negotiated settings, and one round
//! trip to tell that the broker answers now.
//!
//! lapin (4.x) does not keep the server properties the broker sends when
//! the connection opens (its product and version), so the report has no
//! version.

use ezmq_core::{BrokerHealth, Error, NodeHealth, Result};
use lapin::options::ExchangeDeclareOptions;
use lapin::types::FieldTable;
use lapin::ExchangeKind;

use crate::backend::Inner;
use crate::error::RabbitError;
use crate::names::short;

/// An exchange every virtual host has, declared passively to see the
/// broker answer (a passive declaration needs no permission and changes
/// nothing).
const PROBE_EXCHANGE: &str = "amq.direct";

/// `RabbitMQ` with its connection's state (`open`, `blocked` by a
/// resource alarm, `reconnecting`), how many times it was made again,
/// and the heartbeat, frame and channel limits agreed with the broker;
/// one node, `server`, up when a passive declaration of `amq.direct`
/// was answered now. A connection being made again (and failing) is
/// `reconnecting` with the node down.
pub(crate) async fn report(inner: &Inner) -> Result<BrokerHealth> {
    inner.ensure_open()?;
    let health = BrokerHealth::new("RabbitMQ");
    let session = match inner.connector.session().await {
        Ok(session) => session,
        Err(Error::Shutdown) => return Err(Error::Shutdown),
        Err(_) => {
            return Ok(health
                .with_fact("connection", "reconnecting")
                .with_node(NodeHealth::down("server")))
        }
    };
    let answered = session
        .declaring(PROBE_EXCHANGE, |channel| async move {
            channel
                .exchange_declare(
                    short("exchange", PROBE_EXCHANGE)?,
                    ExchangeKind::Direct,
                    ExchangeDeclareOptions {
                        passive: true,
                        ..ExchangeDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(|e| RabbitError::amqp("exchange.declare", PROBE_EXCHANGE, e))
        })
        .await
        .is_ok();
    let connection = session.connection();
    let status = connection.status();
    let state = if status.blocked() {
        "blocked (a resource alarm: publishes wait)"
    } else if status.connected() {
        "open"
    } else if status.reconnecting() || status.connecting() {
        "reconnecting"
    } else {
        "closed"
    };
    let settings = connection.configuration();
    let health = health
        .with_fact("connection", state)
        .with_fact("reconnects", session.generation)
        .with_fact("heartbeat", format!("{} s", settings.heartbeat()))
        .with_fact("frame max", format!("{} bytes", settings.frame_max()))
        .with_fact("channel max", settings.channel_max());
    let node = if answered {
        NodeHealth::up("server")
    } else {
        NodeHealth::down("server")
    };
    Ok(health.with_node(node))
}
