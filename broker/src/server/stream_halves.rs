//! A connection's stream split into a read half and a write half, for its reader and writer
//! tasks, keeping the read half's uninitialised reads (I199).
//!
//! Why not `futures::io::split`: its `ReadHalf` offers only `AsyncRead`, so a read into a
//! frame's uninitialised room ([`ReadUninit`]) would fall back to zeroing it first.
//!
//! Contract:
//! - Both halves share the stream on one shard's thread (`Rc`, not `Send`); each `poll_*`
//!   borrows it for that call only. No poll of one half polls the other, so the borrows never
//!   overlap (an overlap would be a bug here and panics, never a data race).
//! - The read half forwards `poll_read` and `poll_read_uninit`; the write half forwards
//!   every `AsyncWrite` method, vectored writes included. The stream is dropped (closing the
//!   socket) when both halves are.

use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures::io::{AsyncRead, AsyncWrite};
use minikafka_core::backend::ReadUninit;

/// Splits `stream` into its read half and its write half.
pub fn split<S: AsyncRead + AsyncWrite + Unpin>(stream: S) -> (ReadHalf<S>, WriteHalf<S>) {
    let shared = Rc::new(RefCell::new(stream));
    (
        ReadHalf {
            stream: Rc::clone(&shared),
        },
        WriteHalf { stream: shared },
    )
}

/// The reading half of a split stream.
#[derive(Debug)]
pub struct ReadHalf<S> {
    stream: Rc<RefCell<S>>,
}

/// The writing half of a split stream.
#[derive(Debug)]
pub struct WriteHalf<S> {
    stream: Rc<RefCell<S>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for ReadHalf<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.stream.borrow_mut()).poll_read(cx, buf)
    }
}

impl<S: ReadUninit> ReadUninit for ReadHalf<S> {
    fn poll_read_uninit(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.stream.borrow_mut()).poll_read_uninit(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteHalf<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.stream.borrow_mut()).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.stream.borrow_mut()).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.stream.borrow_mut()).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.stream.borrow_mut()).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use futures::{AsyncReadExt, AsyncWriteExt};

    /// A stream whose reads give `data` and whose writes are kept.
    #[derive(Default)]
    struct Memory {
        data: futures::io::Cursor<Vec<u8>>,
        written: Vec<u8>,
        closed: bool,
    }

    impl AsyncRead for Memory {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.data).poll_read(cx, buf)
        }
    }

    impl ReadUninit for Memory {}

    impl AsyncWrite for Memory {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.written.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.closed = true;
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn each_half_reaches_the_one_stream_i199() {
        let stream = Memory {
            data: futures::io::Cursor::new(b"hello world".to_vec()),
            ..Memory::default()
        };
        let (mut reader, mut writer) = split(stream);
        let mut head = [0u8; 5];
        block_on(reader.read_exact(&mut head)).expect("read");
        assert_eq!(&head, b"hello");
        let mut room = [MaybeUninit::new(0xA5u8); 16];
        let n = block_on(futures::future::poll_fn(|cx| {
            Pin::new(&mut reader).poll_read_uninit(cx, &mut room)
        }))
        .expect("uninit read");
        assert_eq!(n, 6);
        // SAFETY: `room` was initialised (the pattern) before the read.
        let rest: Vec<u8> = room[..n]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(rest, b" world");
        block_on(writer.write_all(b"answer")).expect("write");
        block_on(writer.close()).expect("close");
        let shared = Rc::clone(&writer.stream);
        drop((reader, writer));
        let stream = shared.borrow();
        assert_eq!(stream.written, b"answer");
        assert!(stream.closed);
    }
}
