//! Lets clients that send the socket path as HTTP/2 `:authority` (grpcurl
//! `-unix /abs/path.sock`, grpc-go) talk to the server without `-authority`.
//!
//! h2 refuses such a request (`/tmp/x.sock` is no URI authority) with a stream
//! reset (PROTOCOL_ERROR). [`AuthorityFix`] wraps each accepted Unix connection
//! and looks at what the client sends until its first header block: if that
//! block's `:authority` is usable the connection is handed over unchanged and
//! reads go straight to the socket from then on; otherwise every header block
//! of the connection gets `:authority: localhost` (see [`frames`]). Writes
//! (server→client) are never touched.

pub(crate) mod frames;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};

use frames::ClientFrames;

/// How much is read from the socket at once while inspecting.
const READ_CHUNK: usize = 8 * 1024;

/// An accepted connection whose client→server header blocks get a usable
/// `:authority` if the client sent one the server would refuse.
#[derive(Debug)]
pub(crate) struct AuthorityFix<S> {
    inner: S,
    /// Present until the connection passes through unchanged.
    inspect: Option<Box<Inspect>>,
    /// Bytes for the server that it has not read yet.
    out: Vec<u8>,
    out_pos: usize,
}

#[derive(Debug)]
struct Inspect {
    frames: ClientFrames,
    scratch: Vec<u8>,
}

impl<S> AuthorityFix<S> {
    /// Wraps a freshly accepted connection.
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            inspect: Some(Box::new(Inspect { frames: ClientFrames::new(), scratch: vec![0; READ_CHUNK] })),
            out: Vec::new(),
            out_pos: 0,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out_pos = 0;
                    if this.inspect.is_some() {
                        this.out.clear();
                    } else {
                        this.out = Vec::new();
                    }
                }
                return Poll::Ready(Ok(()));
            }
            let Some(inspect) = this.inspect.as_mut() else {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            };
            let mut chunk = ReadBuf::new(&mut inspect.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut chunk))?;
            if chunk.filled().is_empty() {
                return Poll::Ready(Ok(()));
            }
            inspect
                .frames
                .feed(chunk.filled(), &mut this.out)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if inspect.frames.passes_through() {
                this.inspect = None;
            }
        }
    }
}

crate::io_delegate::delegate_write_and_connect!(AuthorityFix);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn reads_pass_straight_through_once_decided_and_writes_are_untouched() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut fixed = AuthorityFix::new(server);
        let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        let block = loona_hpack::Encoder::new().encode([(&b":authority"[..], &b"localhost"[..]), (b":path", b"/a")]);
        sent.extend_from_slice(&[0, 0, block.len() as u8, 0x1, 0x5, 0, 0, 0, 1]);
        sent.extend_from_slice(&block);
        sent.extend_from_slice(b"trailing bytes after the decision");
        let writer = tokio::spawn(async move {
            client.write_all(&sent).await.expect("write");
            let mut back = [0u8; 5];
            client.read_exact(&mut back).await.expect("read back");
            client.shutdown().await.expect("shutdown");
            (sent, back)
        });
        fixed.write_all(b"hello").await.expect("server writes");
        let mut got = Vec::new();
        fixed.read_to_end(&mut got).await.expect("read");
        let (sent, back) = writer.await.expect("join");
        assert_eq!(got, sent);
        assert_eq!(&back, b"hello");
        assert!(fixed.inspect.is_none(), "inspection ended after the first block");
    }

    #[tokio::test]
    async fn a_rewriting_connection_that_breaks_hpack_fails_the_read() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut fixed = AuthorityFix::new(server);
        let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        let block = loona_hpack::Encoder::new().encode([(&b":authority"[..], &b"/tmp/x.sock"[..])]);
        sent.extend_from_slice(&[0, 0, block.len() as u8, 0x1, 0x4, 0, 0, 0, 1]);
        sent.extend_from_slice(&block);
        sent.extend_from_slice(&[0, 0, 1, 0x1, 0x4, 0, 0, 0, 3, 0xff]);
        client.write_all(&sent).await.expect("write");
        drop(client);
        let mut got = Vec::new();
        let err = fixed.read_to_end(&mut got).await.expect_err("broken HPACK");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
