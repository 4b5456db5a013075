//! Request bodies, shared by the webhook routes and the render API: the `Content-Type` check (a
//! present type must be JSON: `application/json` or `*/*+json`, else 415) and the bounded read
//! (413 above the limit, also when `Content-Length` already says so).

use axum::body::Body;
use axum::http::{header, HeaderMap};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};

use super::error::{ApiError, ErrorCode};

pub(super) fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let mime = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim();
    // Compared without lowercasing into a new string: this runs on every review.
    let json_suffix = mime
        .len()
        .checked_sub("+json".len())
        .and_then(|at| mime.get(at..))
        .is_some_and(|tail| tail.eq_ignore_ascii_case("+json"));
    if mime.eq_ignore_ascii_case("application/json") || json_suffix {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!(
                "Content-Type must be application/json, found {:?}",
                mime.to_ascii_lowercase()
            ),
        ))
    }
}

/// Reads a request body of at most `limit` bytes (413 above, also when `Content-Length` already
/// says so). The headers are read before the returned future, which borrows nothing: a caller can
/// drop the request head before awaiting the body.
pub(super) fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> impl std::future::Future<Output = Result<bytes::Bytes, ApiError>> + Send + 'static {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    async move {
        let too_large = || {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the request body is larger than {limit} bytes"),
            )
        };
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        match Limited::new(body, limit).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.is::<LengthLimitError>() => Err(too_large()),
            Err(e) => Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("reading the request body: {e}"),
            )),
        }
    }
}
