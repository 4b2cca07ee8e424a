//! Blockfrost's API conventions, shared by the HTTP APIs that speak them (the devnet's,
//! `ganglion-devnet up --http`, and the index's, `ganglion-indexer serve`): the error object
//! `{"status_code", "error", "message"}` and the paging parameters `?count=&page=&order=` with
//! Blockfrost's bounds (count 1–100, page 1–21 474 836, order `asc` or `desc`).
//!
//! With the `http` feature, [`ApiError`] is an axum response (its status and that object).

use serde::{Deserialize, Serialize};

/// Blockfrost's largest page size.
pub const MAX_COUNT: u32 = 100;
/// Blockfrost's largest page number.
pub const MAX_PAGE: u32 = 21_474_836;

/// Blockfrost's error object: an HTTP status, its reason phrase, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    /// The HTTP status code.
    pub status_code: u16,
    /// Its canonical reason phrase (`"Bad Request"`).
    pub error: &'static str,
    /// What was wrong, for a person.
    pub message: String,
}

/// The reason phrase of the statuses these APIs answer with.
fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        404 => "Not Found",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

impl ApiError {
    /// An error of `status` saying `message`.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status_code: status,
            error: reason(status),
            message: message.into(),
        }
    }

    /// A 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    /// A 404 with Blockfrost's own message, or `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, message)
    }

    /// A 404 as Blockfrost words it for anything it does not hold.
    pub fn component_not_found() -> Self {
        Self::not_found("The requested component has not been found.")
    }

    /// A 500: the server failed (a store or a task), never the request.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(500, e.to_string())
    }
}

#[cfg(feature = "http")]
impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        let status = axum::http::StatusCode::from_u16(self.status_code)
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self)).into_response()
    }
}

/// Blockfrost's paging parameters (`?count=&page=&order=`), each optional.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Paging {
    /// Items per page, 1–[`MAX_COUNT`]; default [`MAX_COUNT`].
    pub count: Option<u32>,
    /// Page number from 1, at most [`MAX_PAGE`]; default 1.
    pub page: Option<u32>,
    /// `asc` (default) or `desc`.
    pub order: Option<String>,
}

/// A checked page: how many items to skip and take, and in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Items before the page.
    pub skip: usize,
    /// Items on the page.
    pub take: usize,
    /// Newest (or last) first.
    pub descending: bool,
}

impl Paging {
    /// The page asked for.
    ///
    /// # Errors
    /// A 400 [`ApiError`] naming the parameter out of Blockfrost's bounds.
    pub fn window(&self) -> Result<Window, ApiError> {
        let count = self.count.unwrap_or(MAX_COUNT);
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(ApiError::bad_request(format!(
                "count must be between 1 and {MAX_COUNT}"
            )));
        }
        let page = self.page.unwrap_or(1);
        if !(1..=MAX_PAGE).contains(&page) {
            return Err(ApiError::bad_request(format!(
                "page must be between 1 and {MAX_PAGE}"
            )));
        }
        let descending = match self.order.as_deref() {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(o) => {
                return Err(ApiError::bad_request(format!(
                    "order must be asc or desc, not {o:?}"
                )));
            }
        };
        Ok(Window {
            skip: (page as usize - 1) * count as usize,
            take: count as usize,
            descending,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_is_checked_as_blockfrost_does() {
        let p = |count, page, order: Option<&str>| Paging {
            count,
            page,
            order: order.map(str::to_owned),
        };
        let w = |skip, take, descending| Window {
            skip,
            take,
            descending,
        };
        assert_eq!(p(None, None, None).window(), Ok(w(0, 100, false)));
        assert_eq!(
            p(Some(10), Some(3), Some("desc")).window(),
            Ok(w(20, 10, true))
        );
        for bad in [
            p(Some(0), None, None),
            p(Some(101), None, None),
            p(None, Some(0), None),
            p(None, Some(MAX_PAGE + 1), None),
            p(None, None, Some("up")),
        ] {
            let e = bad.window().expect_err("out of bounds");
            assert_eq!((e.status_code, e.error), (400, "Bad Request"));
        }
    }
}
