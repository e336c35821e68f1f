//! The dashboard: one page, its script and its style, compiled into the binary (nothing is
//! fetched from elsewhere, nothing is built at build time). The page asks the REST API of
//! the same server, once a second.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/style.css");

pub(crate) async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), crate::rest::NO_CACHE], INDEX).into_response()
}

pub(crate) async fn script() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), crate::rest::NO_CACHE], SCRIPT).into_response()
}

pub(crate) async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), crate::rest::NO_CACHE], STYLE).into_response()
}
