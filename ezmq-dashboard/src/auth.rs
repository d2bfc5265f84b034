//! HTTP basic authentication, when the options ask for it.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use subtle::ConstantTimeEq;

use crate::state::AppState;

/// Lets the request through when no credential is configured or when it
/// carries the right one (compared in constant time); 401 with a
/// `WWW-Authenticate` challenge otherwise.
pub(crate) async fn require(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some((user, password)) = state.options.basic_auth() else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(|encoded| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .ok()
        });
    let expected = format!("{user}:{password}");
    if given.is_some_and(|given| bool::from(given.ct_eq(expected.as_bytes()))) {
        return next.run(request).await;
    }
    let mut response = (StatusCode::UNAUTHORIZED, "authentication required").into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Basic realm="ezmq dashboard", charset="UTF-8""#),
    );
    response
}
