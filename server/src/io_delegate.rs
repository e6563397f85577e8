//! The one delegation of a connection wrapper's write half and connect info
//! to the stream it wraps: the listener's connection count (`Counted`) and
//! the authority rewriter (`AuthorityFix`) change only how bytes are read.

/// Implements `AsyncWrite` and tonic's `Connected` for `$ty<S>` by passing
/// every call to its field `inner: S`.
macro_rules! delegate_write_and_connect {
    ($ty:ident) => {
        impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for $ty<S> {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
            }
        }

        impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for $ty<S> {
            type ConnectInfo = S::ConnectInfo;

            fn connect_info(&self) -> Self::ConnectInfo {
                self.inner.connect_info()
            }
        }
    };
}

pub(crate) use delegate_write_and_connect;
