//! One output pipe of the agent: the reader, its buffer, and the decoder
//! its bytes go through after they are teed.

use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncReadExt};
use warden_events::{Agent, Event, LineKind, Stream, StreamDecoder, Summary};

pub type Reader = Pin<Box<dyn AsyncRead + Send>>;

const READ_CHUNK: usize = 64 * 1024;

pub struct Pipe {
    pub stream: Stream,
    pub reader: Option<Reader>,
    pub buf: Vec<u8>,
    /// stdout goes through the agent's decoder; stderr through its stderr
    /// decoder (plain lines, which become `stderr` events, and the retries
    /// some agents announce only there).
    decoder: StreamDecoder,
    /// Bytes read so far.
    pub bytes: u64,
    finished: bool,
}

impl Pipe {
    pub fn new(stream: Stream, agent: Agent, reader: Option<Reader>, max_line: usize) -> Self {
        let decoder = match stream {
            Stream::Stdout => StreamDecoder::new(agent, max_line),
            Stream::Stderr => StreamDecoder::stderr(agent, max_line),
        };
        Self {
            stream,
            reader,
            buf: vec![0; READ_CHUNK],
            decoder,
            bytes: 0,
            finished: false,
        }
    }

    pub fn open(&self) -> bool {
        self.reader.is_some()
    }

    pub fn summary(&self) -> &Summary {
        self.decoder.summary()
    }

    /// Decodes `len` bytes from the front of the buffer.
    pub fn decode(
        &mut self,
        len: usize,
        mut on_line: impl FnMut(Stream, LineKind, &mut Vec<Event>),
    ) {
        let stream = self.stream;
        self.decoder.push(&self.buf[..len], |kind, events| {
            on_line(stream, kind, events)
        });
    }

    /// Stops reading, and decodes a last line without newline (and closes
    /// what the stream left open). Safe to call twice.
    pub fn close(&mut self, mut on_line: impl FnMut(Stream, LineKind, &mut Vec<Event>)) {
        self.reader = None;
        if self.finished {
            return;
        }
        self.finished = true;
        let stream = self.stream;
        self.decoder
            .finish(|kind, events| on_line(stream, kind, events));
    }
}

/// Reads from the pipe; never resolves once it is closed.
pub async fn read(reader: &mut Option<Reader>, buf: &mut [u8]) -> std::io::Result<usize> {
    match reader {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}
