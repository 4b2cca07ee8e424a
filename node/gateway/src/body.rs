//! The body of a forwarded response: the replica's frames passed on as they arrive (chunked
//! and server-sent-event responses stream through), counted on the request's [`Lease`], cut
//! off at the request's deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use tokio::time::Sleep;

use crate::pool::Lease;

/// Every body the gateway answers with: its own (errors, status) or a replica's.
pub type GatewayBody = BoxBody<Bytes, BodyError>;

/// Why a forwarded response body broke off.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The replica's connection failed mid-body.
    #[error("the replica's response broke off: {0}")]
    Replica(#[from] hyper::Error),
    /// The request's `serve.request_timeout_s` passed before the body ended.
    #[error("the response outlasted the service's request timeout")]
    Timeout,
}

/// A gateway-made body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> GatewayBody {
    http_body_util::Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A replica's response body, metered on `lease` and cut off when `deadline` fires.
pub(crate) struct Metered {
    inner: Incoming,
    lease: Option<Lease>,
    deadline: Pin<Box<Sleep>>,
    broken: bool,
}

impl Metered {
    pub(crate) fn new(inner: Incoming, lease: Lease, deadline: Pin<Box<Sleep>>) -> Self {
        let mut body = Self {
            inner,
            lease: Some(lease),
            deadline,
            broken: false,
        };
        body.finish_if_ended();
        body
    }

    /// Releases the lease as soon as the replica's body has ended: a server that knows the
    /// length stops polling after the last byte and may never ask for the end.
    fn finish_if_ended(&mut self) {
        if self.inner.is_end_stream()
            && let Some(mut lease) = self.lease.take()
        {
            lease.done();
        }
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.broken {
            return Poll::Ready(None);
        }
        if this.lease.is_some() && this.deadline.as_mut().poll(cx).is_ready() {
            this.broken = true;
            this.lease = None;
            return Poll::Ready(Some(Err(BodyError::Timeout)));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(lease)) = (frame.data_ref(), this.lease.as_mut()) {
                    lease.received(data.len() as u64);
                }
                this.finish_if_ended();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.broken = true;
                this.lease = None;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                if let Some(mut lease) = this.lease.take() {
                    lease.done();
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
