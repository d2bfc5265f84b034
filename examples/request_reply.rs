//! Request-reply: a caller waits for the answer of whichever worker took
//! its request.
//!
//! ```sh
//! cargo run --example request_reply
//! ```

mod support;

use std::time::Duration;

use ezmq::prelude::*;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

#[derive(Debug, Serialize, Deserialize)]
struct Quote {
    sku: String,
    quantity: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Price {
    cents: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    support::init_logging();
    let (url, server) = support::broker().await?;
    let client = ezmq::connect_url(&url).await?;

    // Three workers share the requests; an unknown SKU is a remote error.
    for worker in 1..=3 {
        client
            .add_json_reply_listener("pricing.quote", move |quote: Quote| async move {
                let unit = match quote.sku.as_str() {
                    "book" => 2_500,
                    "pen" => 150,
                    other => anyhow::bail!("unknown sku {other:?}"),
                };
                info!(worker, sku = %quote.sku, "quoted");
                Ok(Price {
                    cents: unit * u64::from(quote.quantity),
                })
            })
            .await?;
    }

    for (sku, quantity) in [("book", 2), ("pen", 10), ("lamp", 1)] {
        let quote = Quote {
            sku: sku.into(),
            quantity,
        };
        let answer: ezmq::Result<Price> = client
            .request_json("pricing.quote", &quote, Duration::from_secs(5))
            .await;
        match answer {
            Ok(price) => info!(sku, quantity, cents = price.cents, "price"),
            Err(ezmq::Error::Remote { message }) => warn!(sku, %message, "the worker refused"),
            Err(other) => return Err(other.into()),
        }
    }

    client.shutdown(Duration::from_secs(5)).await?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    Ok(())
}
