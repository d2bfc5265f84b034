//! ezmq's streams, made on connect where they are missing.

use async_nats::jetstream::{self, stream};
use ezmq_core::{Error, Result};

use crate::error::NatsBackendError;

/// The stream `config` names, created when it is missing; an existing
/// stream is used as it is (its settings are the operator's).
pub(crate) async fn ensure(
    js: &jetstream::Context,
    addr: &str,
    config: stream::Config,
) -> Result<stream::Stream> {
    use jetstream::context::GetStreamErrorKind;
    use jetstream::ErrorCode;
    let err = match js.get_stream(&config.name).await {
        Ok(stream) => return Ok(stream),
        Err(err) => err,
    };
    match err.kind() {
        GetStreamErrorKind::JetStream(e) if e.error_code() == ErrorCode::STREAM_NOT_FOUND => {
            create(js, addr, config).await
        }
        GetStreamErrorKind::JetStream(e)
            if e.error_code() == ErrorCode::JETSTREAM_NOT_ENABLED
                || e.error_code() == ErrorCode::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT =>
        {
            Err(Error::connect(addr, NatsBackendError::NoJetStream))
        }
        GetStreamErrorKind::Request if no_responders(&err) => {
            Err(Error::connect(addr, NatsBackendError::NoJetStream))
        }
        _ => Err(Error::connect(addr, err)),
    }
}

/// Creates the stream `config` names. Clients that connect at once to a
/// server without it all find it missing and all create it: the server
/// makes it for one and refuses the others (its name, or its subjects,
/// already taken), who then use the one that was made.
async fn create(
    js: &jetstream::Context,
    addr: &str,
    config: stream::Config,
) -> Result<stream::Stream> {
    use jetstream::context::CreateStreamErrorKind;
    use jetstream::ErrorCode;
    let name = config.name.clone();
    let err = match js.create_stream(config).await {
        Ok(stream) => return Ok(stream),
        Err(err) => err,
    };
    match err.kind() {
        CreateStreamErrorKind::JetStream(e)
            if e.error_code() == ErrorCode::STREAM_NAME_EXIST
                || e.error_code() == ErrorCode::STREAM_SUBJECT_OVERLAP =>
        {
            tracing::debug!(stream = %name, "another client created the stream first");
            js.get_stream(&name)
                .await
                .map_err(|_| Error::connect(addr, err))
        }
        _ => Err(Error::connect(addr, err)),
    }
}

/// True when a request in `err`'s chain found no responder (a server
/// without JetStream does not answer its API subjects).
fn no_responders(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(req) = e.downcast_ref::<jetstream::context::RequestError>() {
            if req.kind() == jetstream::context::RequestErrorKind::NoResponders {
                return true;
            }
        }
        if let Some(req) = e.downcast_ref::<async_nats::RequestError>() {
            if req.kind() == async_nats::RequestErrorKind::NoResponders {
                return true;
            }
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use ezmq_test_support::{nats_url, skip_or_require};
    use futures::FutureExt;

    /// A stream another client created between this one's lookup and its
    /// create (with other settings, so the server refuses the create
    /// instead of answering it with the stream) is used; a stream of
    /// another name holding the subjects is still an error.
    #[tokio::test]
    async fn a_stream_created_meanwhile_is_used() {
        let url = nats_url();
        let client = match async_nats::connect(url.trim_start_matches("nats://")).await {
            Ok(client) => client,
            Err(err) => return skip_or_require("nats", &url, &err),
        };
        let js = jetstream::new(client);
        let name = format!("ezmq_race_{}", uuid::Uuid::new_v4().simple());
        let config = |description: &str| stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.>")],
            description: Some(description.to_owned()),
            ..Default::default()
        };
        // The streams are deleted whatever the checks find (the second
        // exists only if the server wrongly made it), then their failure,
        // if any, goes on.
        let checks = async {
            js.create_stream(config("the first client's"))
                .await
                .expect("the first create");
            let used = create(&js, &url, config("this client's"))
                .await
                .expect("the stream made meanwhile");
            assert_eq!(
                used.cached_info().config.description.as_deref(),
                Some("the first client's")
            );
            let other = stream::Config {
                name: format!("{name}_other"),
                ..config("overlapping")
            };
            let err = create(&js, &url, other)
                .await
                .expect_err("subjects held by another stream");
            assert!(err.to_string().contains("overlap"), "{err}");
        };
        let outcome = std::panic::AssertUnwindSafe(checks).catch_unwind().await;
        for made in [name.clone(), format!("{name}_other")] {
            let _ = js.delete_stream(made).await;
        }
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}
