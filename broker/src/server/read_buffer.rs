//! A connection's read buffer: the bytes read and not yet split into frames, and the room the
//! rest of a frame is read straight into once its size prefix has arrived (I194), without
//! zeroing it first (I199).
//!
//! Why: reading every byte into the shard's chunk and copying it into the frame buffer, whose
//! room grew by reallocation as a large frame arrived, was 7–9 % of the broker's CPU in
//! plaintext saturation and ~5 % under TLS (docs/perf-log/2026-12-06-read-path.md); zeroing
//! the room before the socket overwrote it was another 3.6–7.2 %
//! (docs/perf-log/2026-12-07-saturation-repeats.md, docs/perf-log/2026-12-07-uninit-reads.md).
//!
//! Contract (I194):
//! - Once the 4-byte size of the frame at the front has arrived and passed the decoder's
//!   checks (I10), the rest of the frame is read straight into the buffer's room after the
//!   bytes already there: no copy through the shard's chunk. Room for the whole frame is
//!   reserved once, when it is at most [`WHOLE_FRAME_RESERVE_BYTES`] (a larger frame's room
//!   grows as its bytes arrive), so a frame no longer regrows by reallocation.
//! - A read stops at the frame's end, so the next frame's start lands in the shard's chunk
//!   (I189) and is copied in; before that copy, room is reserved for the whole of a frame the
//!   read leaves incomplete, so its bytes are not copied a second time.
//! - A read is offered at most what has arrived of the frame again, plus
//!   [`RESERVE_CHUNK_BYTES`], and capacity beyond the whole-frame reserve grows only by that:
//!   a size prefix alone costs at most 64 KiB of touched memory (what a read writes, or a
//!   fallback read zeroes) and [`WHOLE_FRAME_RESERVE_BYTES`] of address space, never the size
//!   it announces; a size the decoder refuses reserves nothing.
//! - Emptied, the buffer holds no allocation (I189): [`ReadBuffer::release_if_empty`].
//! - Never: hands out a frame before its last byte arrived, or reorders bytes.
//!
//! Contract (I199): the room is reserved capacity past the buffer's length, never zeroed
//! here; the stream's [`ReadUninit::poll_read_uninit`] writes into it and the length grows by
//! the count it returns, which its contract says it initialised. The buffer's length is
//! always the bytes read, so no byte past it is ever read.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use minikafka_core::backend::ReadUninit;

use crate::protocol::frame::{FrameError, RESERVE_CHUNK_BYTES, SIZE_PREFIX_BYTES};
use crate::protocol::FrameDecoder;

/// Largest frame (size prefix included) whose room is reserved whole when its size arrives
/// (I194): Kafka's default `max.request.size`, 1 MiB; the most a connection's unanswered
/// requests hold before its reader stops (`MAX_UNANSWERED_REQUEST_BYTES`).
pub const WHOLE_FRAME_RESERVE_BYTES: usize = 1 << 20;

/// Bytes read from a connection and not yet split into frames.
#[derive(Debug, Default)]
pub struct ReadBuffer {
    /// The bytes read; its spare capacity is the (uninitialised) room for the rest of the
    /// frame at the front (I199).
    buf: BytesMut,
}

impl ReadBuffer {
    /// An empty buffer, holding no allocation.
    pub fn new() -> Self {
        ReadBuffer::default()
    }

    /// Bytes read and not yet split into frames.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes of memory reserved (for tests of what a size prefix costs).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Splits the next whole frame off the front (without its size prefix); `Ok(None)` when
    /// it has not fully arrived; an error when its size is refused (close the connection).
    pub fn next_frame(&mut self, decoder: &FrameDecoder) -> Result<Option<Bytes>, FrameError> {
        decoder.decode(&mut self.buf)
    }

    /// Drops the allocation once every frame is split off (frames split off share it: it
    /// goes with them), so a connection waiting for its client holds no buffer (I189).
    pub fn release_if_empty(&mut self) {
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
    }

    /// Reads what `reader` has now onto the end; the count read, 0 at end of stream. Into the
    /// room of the frame at the front when its size is known (at most up to its end, and
    /// without zeroing it, I199), else into `chunk` (the shard's, borrowed only within a
    /// poll, I189) and copied in.
    pub fn read_from<'a, R: ReadUninit>(
        &'a mut self,
        chunk: &'a RefCell<Box<[u8]>>,
        reader: &'a mut R,
        decoder: &'a FrameDecoder,
    ) -> impl std::future::Future<Output = io::Result<usize>> + 'a {
        futures::future::poll_fn(move |cx| self.poll_read_from(cx, chunk, reader, decoder))
    }

    fn poll_read_from<R: ReadUninit>(
        &mut self,
        cx: &mut Context<'_>,
        chunk: &RefCell<Box<[u8]>>,
        reader: &mut R,
        decoder: &FrameDecoder,
    ) -> Poll<io::Result<usize>> {
        if let Some(total) = self.incomplete_frame(decoder) {
            let room = self.make_room(total);
            let len = self.buf.len();
            let spare = &mut self.buf.spare_capacity_mut()[..room];
            let n = ready!(Pin::new(&mut *reader).poll_read_uninit(cx, spare))?;
            if n > room {
                // A broken reader: close the connection rather than trust the count.
                return Poll::Ready(Err(io::Error::other(format!(
                    "a read reported {n} bytes into {room} bytes of room"
                ))));
            }
            // SAFETY: `poll_read_uninit`'s contract (I199): on `Ready(Ok(n))`, `n` is at most
            // the room offered (checked above) and the room's first `n` bytes, which follow
            // `len` directly, were initialised by the read; capacity is `len + room` or more.
            unsafe { self.buf.set_len(len + n) };
            return Poll::Ready(Ok(n));
        }
        let mut fallback;
        // No poll of one stream polls another's, so the chunk is free; were it not, a small
        // buffer of this read's own serves.
        let mut shared = chunk.try_borrow_mut();
        let into: &mut [u8] = match shared.as_mut() {
            Ok(chunk) => chunk,
            Err(_) => {
                fallback = vec![0u8; 4096];
                &mut fallback
            }
        };
        let n = ready!(Pin::new(&mut *reader).poll_read(cx, into))?;
        let read = &into[..n];
        let wanted = self.bytes_to_hold(read, decoder);
        self.buf.reserve(wanted - self.buf.len());
        self.buf.extend_from_slice(read);
        Poll::Ready(Ok(n))
    }

    /// The whole size (prefix included) of the frame at the front, when its size has arrived
    /// and been accepted and the frame has not.
    fn incomplete_frame(&self, decoder: &FrameDecoder) -> Option<usize> {
        match decoder.peek_size(&self.buf) {
            Ok(Some(size)) => {
                let total = SIZE_PREFIX_BYTES.saturating_add(size);
                (total > self.buf.len()).then_some(total)
            }
            _ => None,
        }
    }

    /// Reserves room after what was read (I199: reserved, not zeroed) and returns how much of
    /// it a read may fill: up to `total`, and at most what has arrived again plus
    /// [`RESERVE_CHUNK_BYTES`]. The whole frame is reserved first when it is at most
    /// [`WHOLE_FRAME_RESERVE_BYTES`].
    fn make_room(&mut self, total: usize) -> usize {
        let len = self.buf.len();
        let target = total.min(len.saturating_add(len.max(RESERVE_CHUNK_BYTES)));
        // A no-op when the room is there already (reserved before the copy that brought
        // the frame's start, or by an earlier read).
        if total <= WHOLE_FRAME_RESERVE_BYTES {
            self.buf.reserve(total - len);
        } else {
            self.buf.reserve(target - len);
        }
        target - len
    }

    /// How many bytes the buffer should have room for once `read` is appended: what it holds,
    /// `read`, and the rest of a frame `read` leaves incomplete when its size is accepted and
    /// at most [`WHOLE_FRAME_RESERVE_BYTES`].
    fn bytes_to_hold(&self, read: &[u8], decoder: &FrameDecoder) -> usize {
        let held = &self.buf[..];
        let end = held.len() + read.len();
        let byte_at = |i: usize| {
            if i < held.len() {
                held[i]
            } else {
                read[i - held.len()]
            }
        };
        let mut at = 0;
        while end - at >= SIZE_PREFIX_BYTES {
            let prefix: [u8; SIZE_PREFIX_BYTES] = std::array::from_fn(|i| byte_at(at + i));
            let Ok(Some(size)) = decoder.peek_size(&prefix) else {
                // Refused: the decoder closes the connection; nothing is reserved for it.
                return end;
            };
            let total = SIZE_PREFIX_BYTES.saturating_add(size);
            if end - at < total {
                return if total <= WHOLE_FRAME_RESERVE_BYTES {
                    at + total
                } else {
                    end
                };
            }
            at += total;
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use std::mem::MaybeUninit;

    /// A reader giving at most `step` bytes per read; its uninit reads write only the bytes
    /// they count (I199), and it records the largest room a read was offered.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        largest_offer: usize,
    }

    impl Trickle {
        fn new(data: Vec<u8>, step: usize) -> Trickle {
            Trickle {
                data,
                at: 0,
                step,
                largest_offer: 0,
            }
        }

        /// The next bytes to give into `room` bytes, advancing past them.
        fn take(&mut self, room: usize) -> &[u8] {
            self.largest_offer = self.largest_offer.max(room);
            let n = room.min(self.step).min(self.data.len() - self.at);
            self.at += n;
            &self.data[self.at - n..self.at]
        }
    }

    impl futures::io::AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            let bytes = self.take(buf.len());
            buf[..bytes.len()].copy_from_slice(bytes);
            Poll::Ready(Ok(bytes.len()))
        }
    }

    impl ReadUninit for Trickle {
        fn poll_read_uninit(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut [MaybeUninit<u8>],
        ) -> Poll<io::Result<usize>> {
            let bytes = self.take(buf.len());
            for (slot, &byte) in buf.iter_mut().zip(bytes) {
                slot.write(byte);
            }
            Poll::Ready(Ok(bytes.len()))
        }
    }

    /// [`Trickle`] reading into its room through the zeroing fallback.
    struct Zeroing(Trickle);

    impl futures::io::AsyncRead for Zeroing {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl ReadUninit for Zeroing {}

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    fn body(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    /// Reads `data` in reads of at most `step` bytes through a chunk of `chunk_bytes`, into
    /// uninitialised room (I199).
    fn frames_of(
        data: Vec<u8>,
        step: usize,
        chunk_bytes: usize,
        max: usize,
    ) -> Result<Vec<Bytes>, FrameError> {
        frames_read_by(Trickle::new(data, step), chunk_bytes, max)
    }

    /// [`frames_of`] through `reader`.
    fn frames_read_by<R: ReadUninit>(
        mut reader: R,
        chunk_bytes: usize,
        max: usize,
    ) -> Result<Vec<Bytes>, FrameError> {
        let chunk = RefCell::new(vec![0u8; chunk_bytes].into_boxed_slice());
        let decoder = FrameDecoder::new(max);
        let mut buf = ReadBuffer::new();
        let mut frames = Vec::new();
        loop {
            while let Some(frame) = buf.next_frame(&decoder)? {
                frames.push(frame);
            }
            buf.release_if_empty();
            let n = block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
            if n == 0 {
                assert!(buf.is_empty(), "every byte was a whole frame");
                return Ok(frames);
            }
        }
    }

    #[test]
    fn frames_split_across_many_small_reads_arrive_whole_and_in_order_i194_i199() {
        // Frames below, at and above the whole-reserve bound, read 1 and 7 bytes at a time
        // (every prefix split) and in reads larger than the chunk.
        let small = vec![body(3, 1), body(70_000, 2), body(1, 3), body(65_532, 5)];
        let mut large = small.clone();
        large.extend([
            body(300_000, 4),
            body(WHOLE_FRAME_RESERVE_BYTES + 1, 6),
            body(9, 7),
        ]);
        for (step, chunk, bodies) in [
            (1, 64, &small),
            (7, 64, &small),
            (4096, 65_536, &large),
            (65_536, 65_536, &large),
            (1 << 20, 65_536, &large),
        ] {
            let stream: Vec<u8> = bodies.iter().flat_map(|b| framed(b)).collect();
            // Into uninitialised room, and through the zeroing fallback (I199).
            for zeroing in [false, true] {
                let reader = Trickle::new(stream.clone(), step);
                let frames = if zeroing {
                    frames_read_by(Zeroing(reader), chunk, 4 << 20)
                } else {
                    frames_read_by(reader, chunk, 4 << 20)
                }
                .expect("valid");
                assert_eq!(frames.len(), bodies.len(), "step {step}");
                for (frame, want) in frames.iter().zip(bodies) {
                    assert!(
                        frame[..] == want[..],
                        "step {step}, zeroing {zeroing}: a frame of {} bytes",
                        want.len()
                    );
                }
            }
        }
    }

    #[test]
    fn a_frame_of_exactly_the_limit_is_read_and_one_byte_more_is_refused_i10() {
        let max = 200_000;
        let frames = frames_of(framed(&body(max, 9)), 10_000, 65_536, max).expect("at the limit");
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].len(), max);
        assert_eq!(
            frames_of(framed(&body(max + 1, 9)), 10_000, 65_536, max),
            Err(FrameError::TooLarge {
                size_bytes: max as i32 + 1,
                max_bytes: max,
                looks_like: None,
            })
        );
    }

    #[test]
    fn a_refused_size_reserves_nothing_for_its_frame_i194() {
        let chunk = RefCell::new(vec![0u8; 64].into_boxed_slice());
        let decoder = FrameDecoder::new(1000);
        let mut reader = Trickle::new(i32::MAX.to_be_bytes().to_vec(), 64);
        let mut buf = ReadBuffer::new();
        let n = block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        assert_eq!(n, 4);
        assert!(buf.capacity() < 64, "reserved {}", buf.capacity());
        assert!(buf.next_frame(&decoder).is_err());
    }

    #[test]
    fn a_size_prefix_alone_costs_a_bounded_room_not_its_size_i194() {
        let max = 100 << 20;
        let chunk = RefCell::new(vec![0u8; 64].into_boxed_slice());
        let decoder = FrameDecoder::new(max);
        let mut data = (max as i32).to_be_bytes().to_vec();
        data.extend_from_slice(&[7; 10]);
        let mut reader = Trickle::new(data, 4);
        let mut buf = ReadBuffer::new();
        // The prefix, through the chunk: a frame over the whole-reserve bound gets no more
        // than the decoder's step (I10).
        block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        assert_eq!(buf.next_frame(&decoder), Ok(None));
        assert!(
            buf.capacity() <= SIZE_PREFIX_BYTES + RESERVE_CHUNK_BYTES,
            "{}",
            buf.capacity()
        );
        // The next reads go into uninitialised room (I199): a read is offered at most what
        // arrived plus 64 KiB (the most a fallback read zeroes), and no more is reserved.
        for _ in 0..3 {
            let before = buf.len();
            block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
            assert!(
                reader.largest_offer <= before + RESERVE_CHUNK_BYTES,
                "room {} offered for {before} bytes read",
                reader.largest_offer,
            );
            assert!(
                buf.capacity() <= 4 * RESERVE_CHUNK_BYTES,
                "{}",
                buf.capacity()
            );
        }
        assert_eq!(buf.len(), 14);
        assert_eq!(buf.next_frame(&decoder), Ok(None), "incomplete");
    }

    #[test]
    fn a_frame_whose_size_arrived_is_read_into_its_own_room_without_regrowth_i194() {
        // 64 KiB of a 100 KB frame through the chunk: room for the whole frame is reserved
        // before the copy, and the rest is read straight into it.
        let total = 100_000;
        let chunk = RefCell::new(vec![0u8; 64 * 1024].into_boxed_slice());
        let decoder = FrameDecoder::new(1 << 20);
        let mut reader = Trickle::new(framed(&body(total - SIZE_PREFIX_BYTES, 3)), 1 << 20);
        let mut buf = ReadBuffer::new();
        block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        assert_eq!(buf.len(), 64 * 1024);
        let reserved = buf.capacity();
        assert!(reserved >= total, "{reserved}");
        assert_eq!(buf.next_frame(&decoder), Ok(None));
        let n = block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        assert_eq!(
            n,
            total - 64 * 1024,
            "one read, stopping at the frame's end"
        );
        assert_eq!(buf.capacity(), reserved, "no regrowth");
        let frame = buf.next_frame(&decoder).expect("valid").expect("whole");
        assert_eq!(frame.len(), total - SIZE_PREFIX_BYTES);
        buf.release_if_empty();
        assert_eq!(buf.capacity(), 0, "an emptied buffer holds nothing (I189)");
    }

    /// The frames (or the error) the decoder gives for all of `data` at once.
    fn frames_at_once(data: &[u8], max: usize) -> Result<Vec<Bytes>, FrameError> {
        let decoder = FrameDecoder::new(max);
        let mut buf = BytesMut::from(data);
        let mut frames = Vec::new();
        while let Some(frame) = decoder.decode(&mut buf)? {
            frames.push(frame);
        }
        Ok(frames)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// Any stream, valid frames or not, read in any sizes through any chunk: the frames
        /// and the error the decoder gives for the whole stream at once, in order (I194).
        #[test]
        fn any_split_of_any_stream_gives_what_decoding_it_whole_gives_i194(
            sizes in proptest::collection::vec(0usize..3000, 0..12),
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
            step in 1usize..5000,
            chunk in 1usize..5000,
            max in 1usize..4000,
        ) {
            let mut stream: Vec<u8> = sizes
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| framed(&body(n, i as u8)))
                .collect();
            stream.extend(&garbage);
            let want = frames_at_once(&stream, max);
            let whole = want.as_ref().map_or(true, |frames| {
                frames.iter().map(|f| f.len() + SIZE_PREFIX_BYTES).sum::<usize>() == stream.len()
            });
            // A stream ending inside a frame is not an error to the decoder; `frames_of`
            // checks it ends on a frame's boundary, so compare only the whole ones.
            if whole {
                proptest::prop_assert_eq!(frames_of(stream, step, chunk, max), want);
            }
        }
    }

    #[test]
    fn a_read_borrows_the_shard_chunk_only_within_its_poll_i189() {
        let chunk = RefCell::new(vec![0u8; 8].into_boxed_slice());
        let decoder = FrameDecoder::new(1000);
        let mut reader = Trickle::new(b"\0\0\0\x07hello world".to_vec(), usize::MAX);
        let mut buf = ReadBuffer::new();
        let n = block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        assert_eq!(n, 8, "at most the chunk");
        assert!(chunk.try_borrow_mut().is_ok(), "released after the read");
        // Were the chunk borrowed, a read still reads, into a buffer of its own (here, the
        // frame's room, its size being known).
        let held = chunk.borrow_mut();
        let n = block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        drop(held);
        assert_eq!(n, 3, "up to the frame's end");
        assert_eq!(
            buf.next_frame(&decoder),
            Ok(Some(Bytes::from_static(b"hello w")))
        );
        let held = chunk.borrow_mut();
        let n = block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        drop(held);
        assert_eq!(n, 4);
        let n = block_on(buf.read_from(&chunk, &mut reader, &decoder)).expect("read");
        assert_eq!(n, 0, "end of stream");
    }
}
