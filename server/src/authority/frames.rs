//! The client→server half of an HTTP/2 connection, inspected frame by frame:
//! header blocks whose `:authority` the server would refuse get it replaced.
//!
//! Until the first header block is complete, bytes are held back. If that block
//! has a usable (or no) `:authority`, everything held is released unchanged and
//! the rest of the connection passes through untouched. Otherwise the
//! connection is rewritten for its whole life: every header block is
//! HPACK-decoded (keeping the client's dynamic table in step) and re-encoded as
//! literals without indexing, so the server's table stays empty and consistent.
//! Every other frame (SETTINGS, DATA, WINDOW_UPDATE, ...) passes unchanged.

use loona_hpack::Decoder;

/// What HTTP/2 clients send first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_LEN: usize = 9;

const HEADERS: u8 = 0x1;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
const PRIORITY_LEN: usize = 5;

/// Largest frame payload every HTTP/2 peer must accept (SETTINGS_MAX_FRAME_SIZE minimum).
const MAX_EMITTED_PAYLOAD: usize = 16_384;
/// Largest header block (all its frames) this front collects; gRPC headers are tiny.
const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// The HPACK dynamic table size the server advertises (h2's default, not changed by tonic).
const SERVER_HEADER_TABLE_SIZE: usize = 4096;

/// What replaces an unusable `:authority`.
const REPLACEMENT_AUTHORITY: &[u8] = b"localhost";

/// Why a rewritten connection cannot go on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The client broke HTTP/2 framing rules.
    #[error("HTTP/2 protocol violation by the client: {0}")]
    Protocol(&'static str),
    /// A header block could not be HPACK-decoded.
    #[error("HPACK decoding of a client header block failed: {0:?}")]
    Hpack(loona_hpack::decoder::DecoderError),
}

/// Whether the connection is still inspected or rewritten for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Waiting for the first header block; nothing has been changed yet.
    Deciding,
    /// The first block needed a new `:authority`; every block is re-encoded.
    Rewriting,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Preface,
    FrameHeader,
    /// Copying the payload of a frame that is not part of a header block.
    CopyPayload {
        left: usize,
    },
    /// Collecting the payload of a HEADERS or CONTINUATION frame.
    HeaderPayload {
        left: usize,
        kind: u8,
        flags: u8,
    },
    /// Everything from here on passes unchanged.
    PassThrough,
}

/// A header block being collected from a HEADERS frame and its CONTINUATIONs.
#[derive(Debug, Default)]
struct Block {
    stream: u32,
    /// END_STREAM as sent on the HEADERS frame.
    end_stream: bool,
    priority: Option<[u8; PRIORITY_LEN]>,
    fragment: Vec<u8>,
}

/// The client→server byte stream of one connection, turned into what the
/// server should read. Feed it bytes as they arrive.
pub(crate) struct ClientFrames {
    mode: Mode,
    stage: Stage,
    /// Bytes of the unit being collected (preface, frame header, header payload).
    pending: Vec<u8>,
    /// Raw bytes consumed but not yet released while deciding.
    held: Vec<u8>,
    block: Option<Block>,
    decoder: Decoder<'static>,
}

impl std::fmt::Debug for ClientFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFrames").field("mode", &self.mode).field("stage", &self.stage).finish_non_exhaustive()
    }
}

impl ClientFrames {
    /// A connection whose first byte has not arrived yet.
    pub(crate) fn new() -> Self {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(SERVER_HEADER_TABLE_SIZE);
        Self {
            mode: Mode::Deciding,
            stage: Stage::Preface,
            pending: Vec::new(),
            held: Vec::new(),
            block: None,
            decoder,
        }
    }

    /// True once nothing more will be changed: the caller may stop feeding and
    /// read the connection directly.
    pub(crate) fn passes_through(&self) -> bool {
        self.stage == Stage::PassThrough
    }

    /// Whether this connection's header blocks are being rewritten.
    pub(crate) fn is_rewriting(&self) -> bool {
        self.mode == Mode::Rewriting
    }

    /// Consumes `input` (the next bytes from the client) and appends to `out`
    /// what the server should read next.
    pub(crate) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
        while !input.is_empty() {
            match self.stage {
                Stage::PassThrough => {
                    out.extend_from_slice(input);
                    return Ok(());
                }
                Stage::Preface => {
                    input = self.collect(input, PREFACE.len());
                    if !PREFACE.starts_with(&self.pending) {
                        // Not HTTP/2 with prior knowledge: none of our business.
                        self.give_up(out);
                    } else if self.pending.len() == PREFACE.len() {
                        self.release_pending(out);
                        self.stage = Stage::FrameHeader;
                    }
                }
                Stage::FrameHeader => {
                    input = self.collect(input, FRAME_HEADER_LEN);
                    if self.pending.len() == FRAME_HEADER_LEN
                        && let Err(e) = self.start_frame(out)
                    {
                        self.fail(e, out)?;
                    }
                }
                Stage::CopyPayload { left } => {
                    let n = left.min(input.len());
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    self.stage = if n == left { Stage::FrameHeader } else { Stage::CopyPayload { left: left - n } };
                }
                Stage::HeaderPayload { left, kind, flags } => {
                    let n = left.min(input.len());
                    self.pending.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    if n == left {
                        if let Err(e) = self.end_header_frame(kind, flags, out) {
                            self.fail(e, out)?;
                        }
                    } else {
                        self.stage = Stage::HeaderPayload { left: left - n, kind, flags };
                    }
                }
            }
        }
        Ok(())
    }

    /// Moves up to `want - pending.len()` bytes of `input` into `pending`.
    fn collect<'a>(&mut self, input: &'a [u8], want: usize) -> &'a [u8] {
        let n = want.saturating_sub(self.pending.len()).min(input.len());
        self.pending.extend_from_slice(&input[..n]);
        &input[n..]
    }

    /// Releases the collected unit: to the server directly, or into `held`
    /// while a first header block is open.
    fn release_pending(&mut self, out: &mut Vec<u8>) {
        if self.mode == Mode::Deciding && self.block.is_some() {
            self.held.append(&mut self.pending);
        } else {
            out.append(&mut self.pending);
        }
    }

    /// Handles a complete frame header in `pending`.
    fn start_frame(&mut self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        let h = &self.pending;
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        match (kind, &self.block) {
            (CONTINUATION, Some(b)) if b.stream == stream => {}
            (_, Some(_)) => return Err(FrameError::Protocol("header block interrupted")),
            (CONTINUATION, None) => return Err(FrameError::Protocol("CONTINUATION without HEADERS")),
            (PUSH_PROMISE, None) => return Err(FrameError::Protocol("PUSH_PROMISE from a client")),
            (HEADERS, None) => {
                self.block = Some(Block { stream, end_stream: flags & END_STREAM != 0, ..Block::default() })
            }
            (_, None) => {
                out.append(&mut self.pending);
                self.stage = if len == 0 { Stage::FrameHeader } else { Stage::CopyPayload { left: len } };
                return Ok(());
            }
        }
        if self.block.as_ref().map_or(0, |b| b.fragment.len()) + len > MAX_HEADER_BLOCK {
            return Err(FrameError::Protocol("header block too large"));
        }
        if self.mode == Mode::Deciding {
            self.held.append(&mut self.pending);
        } else {
            self.pending.clear();
        }
        self.stage = Stage::HeaderPayload { left: len, kind, flags };
        if len == 0 {
            return self.end_header_frame(kind, flags, out);
        }
        Ok(())
    }

    /// Handles the complete payload (in `pending`) of a HEADERS or CONTINUATION frame.
    fn end_header_frame(&mut self, kind: u8, flags: u8, out: &mut Vec<u8>) -> Result<(), FrameError> {
        let payload = std::mem::take(&mut self.pending);
        if self.mode == Mode::Deciding {
            self.held.extend_from_slice(&payload);
        }
        let block = self.block.as_mut().ok_or(FrameError::Protocol("header payload without a block"))?;
        let mut p = payload.as_slice();
        if kind == HEADERS {
            let mut pad = 0;
            if flags & PADDED != 0 {
                let (&n, rest) = p.split_first().ok_or(FrameError::Protocol("PADDED HEADERS without pad length"))?;
                pad = usize::from(n);
                p = rest;
            }
            if flags & PRIORITY != 0 {
                let (prio, rest) =
                    p.split_first_chunk::<PRIORITY_LEN>().ok_or(FrameError::Protocol("short PRIORITY fields"))?;
                block.priority = Some(*prio);
                p = rest;
            }
            let end = p.len().checked_sub(pad).ok_or(FrameError::Protocol("padding exceeds HEADERS payload"))?;
            p = &p[..end];
        }
        block.fragment.extend_from_slice(p);
        self.stage = Stage::FrameHeader;
        if flags & END_HEADERS != 0 {
            self.end_block(out)?;
        }
        Ok(())
    }

    /// Handles a complete header block.
    fn end_block(&mut self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        let block = self.block.take().ok_or(FrameError::Protocol("no header block"))?;
        let mut headers = self.decoder.decode(&block.fragment).map_err(FrameError::Hpack)?;
        let changed = replace_unusable_authority(&mut headers);
        if self.mode == Mode::Deciding {
            if !changed {
                out.append(&mut self.held);
                self.held = Vec::new();
                self.stage = Stage::PassThrough;
                return Ok(());
            }
            tracing::debug!(
                "client sent an :authority the server cannot parse; rewriting this connection's header blocks"
            );
            self.mode = Mode::Rewriting;
            self.held = Vec::new();
        }
        emit_block(&block, &encode_block(&headers), out);
        Ok(())
    }

    /// While deciding, a problem means this connection is not ours to fix: the
    /// server gets the original bytes and judges them itself. Once rewriting,
    /// the connection cannot go on.
    fn fail(&mut self, e: FrameError, out: &mut Vec<u8>) -> Result<(), FrameError> {
        match self.mode {
            Mode::Deciding => {
                self.give_up(out);
                Ok(())
            }
            Mode::Rewriting => Err(e),
        }
    }

    fn give_up(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.held);
        out.append(&mut self.pending);
        self.block = None;
        self.stage = Stage::PassThrough;
    }
}

/// Replaces an `:authority` that does not parse as a URI authority (what h2
/// refuses) with `localhost`. Returns whether it did.
fn replace_unusable_authority(headers: &mut [(Vec<u8>, Vec<u8>)]) -> bool {
    let mut changed = false;
    for (name, value) in headers.iter_mut() {
        if name.as_slice() == b":authority" && http::uri::Authority::try_from(value.as_slice()).is_err() {
            *value = REPLACEMENT_AUTHORITY.to_vec();
            changed = true;
        }
    }
    changed
}

/// HPACK-encodes `headers` as literals without indexing (no Huffman), which
/// leaves the server's dynamic table untouched.
fn encode_block(headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.push(0x00); // literal header field without indexing, new name
        encode_string(name, &mut out);
        encode_string(value, &mut out);
    }
    out
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    encode_integer(s.len(), 7, 0x00, out);
    out.extend_from_slice(s);
}

/// RFC 7541 §5.1 integer with a `prefix_bits`-bit prefix after the `high` bits.
fn encode_integer(mut value: usize, prefix_bits: u8, high: u8, out: &mut Vec<u8>) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Writes `encoded` as a HEADERS frame (keeping END_STREAM and the priority
/// fields, dropping padding) plus CONTINUATION frames as needed.
fn emit_block(block: &Block, encoded: &[u8], out: &mut Vec<u8>) {
    let prio_len = if block.priority.is_some() { PRIORITY_LEN } else { 0 };
    let (first, mut rest) = encoded.split_at(encoded.len().min(MAX_EMITTED_PAYLOAD - prio_len));
    let mut flags = if block.end_stream { END_STREAM } else { 0 };
    if block.priority.is_some() {
        flags |= PRIORITY;
    }
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    frame_header(prio_len + first.len(), HEADERS, flags, block.stream, out);
    if let Some(p) = &block.priority {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(MAX_EMITTED_PAYLOAD));
        rest = tail;
        frame_header(chunk.len(), CONTINUATION, if rest.is_empty() { END_HEADERS } else { 0 }, block.stream, out);
        out.extend_from_slice(chunk);
    }
}

fn frame_header(len: usize, kind: u8, flags: u8, stream: u32, out: &mut Vec<u8>) {
    let len = len as u32; // at most MAX_EMITTED_PAYLOAD
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// What must hold for any client byte stream (the fuzz target's property):
/// `input` fed at once and fed in pieces of `step` bytes gives the same bytes
/// and the same verdict; a connection that is not rewritten reaches the
/// server unchanged (what was released is a prefix of what was sent); a
/// rewritten one reaches it as well-formed frames whose every header block
/// decodes with an empty HPACK table (literals only) and carries only usable
/// `:authority` values, in frames no larger than every peer accepts.
pub(crate) fn check_invariants(input: &[u8], step: usize) -> Result<(), String> {
    let mut whole = ClientFrames::new();
    let mut out_whole = Vec::new();
    let verdict_whole = whole.feed(input, &mut out_whole).is_ok();
    let mut pieces = ClientFrames::new();
    let mut out_pieces = Vec::new();
    let mut verdict_pieces = true;
    for chunk in input.chunks(step.max(1)) {
        if pieces.feed(chunk, &mut out_pieces).is_err() {
            verdict_pieces = false;
            break;
        }
    }
    if verdict_whole != verdict_pieces || out_whole != out_pieces {
        return Err(format!(
            "feeding at once (ok: {verdict_whole}, {} bytes out) and in pieces of {step} (ok: {verdict_pieces}, {} bytes out) differ",
            out_whole.len(),
            out_pieces.len()
        ));
    }
    if whole.is_rewriting() != pieces.is_rewriting() {
        return Err(format!(
            "rewriting once fed at once: {}, in pieces: {}",
            whole.is_rewriting(),
            pieces.is_rewriting()
        ));
    }
    if !whole.is_rewriting() {
        if !input.starts_with(&out_whole) {
            return Err("a connection that is not rewritten reached the server changed".into());
        }
        if whole.passes_through() && out_whole.len() != input.len() {
            return Err("a connection passing through lost bytes".into());
        }
        return Ok(());
    }
    check_rewritten(&out_whole)
}

/// The server side of a rewritten connection: the preface, then frames (the
/// last one may be cut off where the input ended); header blocks complete,
/// literal-only, with usable authorities, in frames of at most [`MAX_EMITTED_PAYLOAD`].
fn check_rewritten(out: &[u8]) -> Result<(), String> {
    let mut rest = out.strip_prefix(PREFACE).ok_or("a rewritten connection lost its preface")?;
    let mut block: Option<(u32, Vec<u8>)> = None;
    while rest.len() >= FRAME_HEADER_LEN {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let (kind, flags) = (rest[3], rest[4]);
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        let header_frame = kind == HEADERS || kind == CONTINUATION;
        if rest.len() < FRAME_HEADER_LEN + len {
            if header_frame || block.is_some() {
                return Err("a header frame reached the server cut off".into());
            }
            return Ok(());
        }
        let payload = &rest[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
        rest = &rest[FRAME_HEADER_LEN + len..];
        match (kind, block.as_mut()) {
            (CONTINUATION, Some((s, fragment))) if *s == stream => fragment.extend_from_slice(payload),
            (_, Some(_)) => return Err("a rewritten header block was interrupted".into()),
            (HEADERS, None) => {
                if flags & PADDED != 0 {
                    return Err("a rewritten HEADERS frame is padded".into());
                }
                let skip = if flags & PRIORITY != 0 { PRIORITY_LEN } else { 0 };
                let fragment = payload.get(skip..).ok_or("a rewritten HEADERS frame lost its priority fields")?;
                block = Some((stream, fragment.to_vec()));
            }
            (CONTINUATION, None) => return Err("a CONTINUATION reached the server without HEADERS".into()),
            _ => continue,
        }
        if len > MAX_EMITTED_PAYLOAD {
            return Err(format!("a rewritten header frame of {len} bytes"));
        }
        if flags & END_HEADERS != 0
            && let Some((_, fragment)) = block.take()
        {
            let mut fresh = Decoder::new();
            let headers = fresh.decode(&fragment).map_err(|e| format!("a rewritten block does not decode: {e:?}"))?;
            if headers.iter().any(|(n, v)| n == b":authority" && http::uri::Authority::try_from(v.as_slice()).is_err())
            {
                return Err("a rewritten block carries an unusable :authority".into());
            }
            if fragment.first().is_some_and(|b| b & 0xf0 != 0) {
                return Err("a rewritten block uses HPACK indexing".into());
            }
        }
    }
    if block.is_some() {
        return Err("a rewritten header block reached the server unfinished".into());
    }
    if !rest.is_empty() {
        return Err("part of a frame header reached the server".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: &[u8] = &[0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 0x3, 0, 0, 0, 100];
    const WINDOW_UPDATE: &[u8] = &[0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0, 0, 0x10, 0];

    fn request(authority: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/grpc.health.v1.Health/Check"),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("user-agent", "grpcurl/1.8.6 grpc-go/1.44.1-dev"),
        ]
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
    }

    /// A client-side encoder that indexes everything, as Go's does.
    fn client_block(enc: &mut loona_hpack::Encoder<'_>, headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        enc.encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
    }

    fn headers_frame(stream: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame_header(payload.len(), HEADERS, flags, stream, &mut f);
        f.extend_from_slice(payload);
        f
    }

    fn data_frame(stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame_header(payload.len(), 0x0, END_STREAM, stream, &mut f);
        f.extend_from_slice(payload);
        f
    }

    /// Splits the server-side byte stream into frames (after the preface).
    fn frames(bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        assert!(bytes.starts_with(PREFACE));
        let mut rest = &bytes[PREFACE.len()..];
        let mut v = Vec::new();
        while !rest.is_empty() {
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
            v.push((rest[3], rest[4], stream, rest[9..9 + len].to_vec()));
            rest = &rest[9 + len..];
        }
        v
    }

    /// Feeds `input` in pieces of `step` bytes.
    fn run(f: &mut ClientFrames, input: &[u8], step: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in input.chunks(step) {
            f.feed(chunk, &mut out).expect("feed");
        }
        out
    }

    fn connection(blocks: &[Vec<u8>]) -> Vec<u8> {
        let mut c = PREFACE.to_vec();
        c.extend_from_slice(SETTINGS);
        c.extend_from_slice(WINDOW_UPDATE);
        for (i, b) in blocks.iter().enumerate() {
            let stream = 1 + 2 * i as u32;
            c.extend(headers_frame(stream, END_HEADERS, b));
            c.extend(data_frame(stream, b"\0\0\0\0\0"));
        }
        c
    }

    #[test]
    fn a_usable_authority_passes_the_connection_through_byte_for_byte() {
        for authority in ["localhost", "x.sock", "127.0.0.1:50051"] {
            let mut enc = loona_hpack::Encoder::new();
            let input =
                connection(&[client_block(&mut enc, &request(authority)), client_block(&mut enc, &request(authority))]);
            for step in [1, 7, input.len()] {
                let mut f = ClientFrames::new();
                assert_eq!(run(&mut f, &input, step), input, "{authority} step {step}");
                assert!(f.passes_through() && !f.is_rewriting());
            }
        }
    }

    #[test]
    fn a_socket_path_authority_becomes_localhost_in_every_block_and_the_rest_is_intact() {
        let mut enc = loona_hpack::Encoder::new();
        // The second block leans on the client's dynamic table (indexed references).
        let input = connection(&[
            client_block(&mut enc, &request("/tmp/x.sock")),
            client_block(&mut enc, &request("/tmp/x.sock")),
        ]);
        for step in [1, 5, 64, input.len()] {
            let mut f = ClientFrames::new();
            let out = run(&mut f, &input, step);
            assert!(f.is_rewriting() && !f.passes_through());
            let fr = frames(&out);
            assert_eq!(fr.len(), 6, "step {step}");
            assert_eq!(&fr[0].3, &SETTINGS[9..]);
            assert_eq!(fr[0].0, 0x4);
            assert_eq!(fr[1].0, 0x8);
            let mut server = Decoder::new();
            for (i, stream) in [(2, 1), (4, 3)] {
                let (kind, flags, id, payload) = &fr[i];
                assert_eq!((*kind, *flags, *id), (HEADERS, END_HEADERS, stream));
                assert_eq!(server.decode(payload).expect("server decodes"), request("localhost"));
                assert_eq!(fr[i + 1], (0x0, END_STREAM, stream, b"\0\0\0\0\0".to_vec()));
            }
        }
    }

    #[test]
    fn frames_before_the_first_header_block_are_not_held_back() {
        let mut start = PREFACE.to_vec();
        start.extend_from_slice(SETTINGS);
        let mut f = ClientFrames::new();
        assert_eq!(run(&mut f, &start, 4), start, "the server must see SETTINGS before any request");
        let mut out = Vec::new();
        f.feed(&headers_frame(1, 0, &[0x82])[..5], &mut out).expect("feed");
        assert!(out.is_empty(), "an open header block is held until it is complete");
    }

    #[test]
    fn padding_priority_and_continuation_are_understood() {
        let mut enc = loona_hpack::Encoder::new();
        let block = client_block(&mut enc, &request("/run/mcm/driver.sock"));
        let (a, b) = block.split_at(10);
        let mut payload = vec![3u8]; // pad length
        payload.extend_from_slice(&[0x80, 0, 0, 0, 15]); // exclusive dependency on 0, weight 15
        payload.extend_from_slice(a);
        payload.extend_from_slice(&[0, 0, 0]);
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(1, END_STREAM | PADDED | PRIORITY, &payload));
        frame_header(b.len(), CONTINUATION, END_HEADERS, 1, &mut input);
        input.extend_from_slice(b);
        let mut f = ClientFrames::new();
        let fr = frames(&run(&mut f, &input, 3));
        assert_eq!(fr.len(), 1);
        let (kind, flags, id, payload) = &fr[0];
        assert_eq!((*kind, *flags, *id), (HEADERS, END_STREAM | PRIORITY | END_HEADERS, 1));
        assert_eq!(&payload[..5], &[0x80, 0, 0, 0, 15]);
        assert_eq!(Decoder::new().decode(&payload[5..]).expect("decodes"), request("localhost"));
    }

    #[test]
    fn large_rewritten_blocks_are_split_into_continuations() {
        let mut headers = request("/tmp/x.sock");
        headers.push((b"x-big".to_vec(), vec![b'a'; 40_000]));
        let mut input = PREFACE.to_vec();
        let block = client_block(&mut loona_hpack::Encoder::new(), &headers);
        for (i, chunk) in block.chunks(16_384).enumerate() {
            let last = (i + 1) * 16_384 >= block.len();
            let (kind, flags) = if i == 0 { (HEADERS, 0) } else { (CONTINUATION, 0) };
            frame_header(chunk.len(), kind, flags | if last { END_HEADERS } else { 0 }, 1, &mut input);
            input.extend_from_slice(chunk);
        }
        let fr = frames(&run(&mut ClientFrames::new(), &input, 1000));
        assert_eq!(
            fr.iter().map(|f| (f.0, f.1)).collect::<Vec<_>>(),
            [(HEADERS, 0), (CONTINUATION, 0), (CONTINUATION, END_HEADERS)]
        );
        assert!(fr.iter().all(|f| f.3.len() <= MAX_EMITTED_PAYLOAD && f.2 == 1));
        let whole: Vec<u8> = fr.iter().flat_map(|f| f.3.clone()).collect();
        let mut expected = request("localhost");
        expected.push((b"x-big".to_vec(), vec![b'a'; 40_000]));
        assert_eq!(Decoder::new().decode(&whole).expect("decodes"), expected);
    }

    #[test]
    fn non_http2_and_broken_first_blocks_are_handed_over_unchanged() {
        let http1 = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let mut f = ClientFrames::new();
        assert_eq!(run(&mut f, &http1, 4), http1);
        assert!(f.passes_through());

        let mut garbage = PREFACE.to_vec();
        garbage.extend(headers_frame(1, END_HEADERS, &[0xff, 0xff, 0xff, 0xff, 0x7f]));
        let mut f = ClientFrames::new();
        assert_eq!(run(&mut f, &garbage, 2), garbage);
        assert!(f.passes_through());
    }

    #[test]
    fn a_broken_block_after_rewriting_began_ends_the_connection() {
        let mut enc = loona_hpack::Encoder::new();
        let mut input = connection(&[client_block(&mut enc, &request("/tmp/x.sock"))]);
        input.extend(headers_frame(3, END_HEADERS, &[0xbf, 0x7f])); // index out of range
        let mut f = ClientFrames::new();
        assert!(matches!(f.feed(&input, &mut Vec::new()), Err(FrameError::Hpack(_))));
    }

    #[test]
    fn the_fuzz_property_holds_for_well_formed_and_broken_connections() {
        let mut enc = loona_hpack::Encoder::new();
        let socket = request("/tmp/x.sock");
        let rewritten = connection(&[client_block(&mut enc, &socket), client_block(&mut enc, &socket)]);
        let mut enc = loona_hpack::Encoder::new();
        let usable = connection(&[client_block(&mut enc, &request("localhost"))]);
        let mut broken = rewritten.clone();
        broken.extend_from_slice(&[0, 0, 1, HEADERS, END_HEADERS, 0, 0, 0, 5, 0xff]);
        for input in [&rewritten, &usable, &broken, &b"GET / HTTP/1.1\r\n\r\n".to_vec()] {
            for step in [1, 2, 9, 64, input.len()] {
                check_invariants(input, step).unwrap_or_else(|e| panic!("step {step}: {e}"));
                check_invariants(&input[..input.len() / 2], step).unwrap_or_else(|e| panic!("half, step {step}: {e}"));
            }
        }
        // The checker itself fails on what it must catch.
        let mut indexed = PREFACE.to_vec();
        indexed.extend(headers_frame(1, END_HEADERS, &[0x40, 1, b'a', 1, b'b']));
        assert!(check_rewritten(&indexed).is_err(), "incremental indexing");
        let mut bad_authority = PREFACE.to_vec();
        bad_authority.extend(headers_frame(1, END_HEADERS, &encode_block(&request("/tmp/x.sock"))));
        assert!(check_rewritten(&bad_authority).is_err(), "unusable authority");
        let mut unfinished = PREFACE.to_vec();
        unfinished.extend(headers_frame(1, 0, &encode_block(&request("localhost"))));
        assert!(check_rewritten(&unfinished).is_err(), "block without END_HEADERS");
    }

    #[test]
    fn integers_follow_rfc7541() {
        let mut v = Vec::new();
        encode_integer(10, 5, 0, &mut v);
        encode_integer(1337, 5, 0, &mut v);
        encode_integer(127, 7, 0, &mut v);
        assert_eq!(v, [10, 31, 154, 10, 127, 0]);
    }
}
