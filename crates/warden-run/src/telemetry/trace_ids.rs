//! Trace and span ids: made here, read from and written to
//! `TRACEPARENT`, and shown in reports.

/// A span's place in a trace: the trace, the span, and its parent. In
/// reports as lower-case hex, as a `TRACEPARENT` writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIds {
    pub(super) trace_id: u128,
    pub(super) span_id: u64,
    pub(super) parent_span_id: Option<u64>,
    /// The parent is another process's (an inbound `TRACEPARENT`).
    pub(super) parent_is_remote: bool,
    /// The trace is recorded. Only an inbound `TRACEPARENT` whose
    /// sampled flag is off makes it false: whoever started the trace
    /// decided not to record it, and every span under it follows (the
    /// parent-based sampling OpenTelemetry SDKs do by default).
    pub(super) sampled: bool,
}

impl TraceIds {
    pub(crate) fn new_span_id() -> u64 {
        loop {
            let mut b = [0u8; 8];
            fill_random(&mut b);
            let id = u64::from_ne_bytes(b);
            if id != 0 {
                return id;
            }
        }
    }

    fn new_trace_id() -> u128 {
        loop {
            let mut b = [0u8; 16];
            fill_random(&mut b);
            let id = u128::from_ne_bytes(b);
            if id != 0 {
                return id;
            }
        }
    }

    /// A span that starts a trace of its own.
    pub fn root() -> Self {
        Self {
            trace_id: Self::new_trace_id(),
            span_id: Self::new_span_id(),
            parent_span_id: None,
            parent_is_remote: false,
            sampled: true,
        }
    }

    /// A new span under `parent` (`None`: a new trace).
    pub fn under(parent: Option<&TraceIds>) -> Self {
        match parent {
            Some(p) => p.child(),
            None => Self::root(),
        }
    }

    /// A new span whose parent is this one.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id: Self::new_span_id(),
            parent_span_id: Some(self.span_id),
            parent_is_remote: false,
            sampled: self.sampled,
        }
    }

    /// The span context of a `TRACEPARENT` value (version 00), as the
    /// parent of what this process makes: `None` when it is not a valid
    /// one (it is then ignored, as the W3C specification asks).
    pub fn from_traceparent(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if version != "00" || parts.next().is_some() || !hex(trace, 32) || !hex(span, 16) {
            return None;
        }
        if !hex(flags, 2) {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        let trace_id = u128::from_str_radix(trace, 16).ok().filter(|t| *t != 0)?;
        let span_id = u64::from_str_radix(span, 16).ok().filter(|s| *s != 0)?;
        // Used as a parent: the span "of" this value is the other
        // process's.
        Some(Self {
            trace_id,
            span_id,
            parent_span_id: None,
            parent_is_remote: false,
            sampled: flags & 1 == 1,
        })
    }

    /// The inbound context of this process (its `TRACEPARENT`), if any.
    pub fn from_env() -> Option<Self> {
        std::env::var("TRACEPARENT")
            .ok()
            .and_then(|v| Self::from_traceparent(&v))
    }

    /// A new span under an inbound context: its parent is remote.
    pub fn under_remote(parent: &TraceIds) -> Self {
        Self {
            parent_is_remote: true,
            ..parent.child()
        }
    }

    /// This span as a `TRACEPARENT` value, with its sampled flag.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }

    /// The trace is recorded (see the field).
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    pub fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    pub fn span_id_hex(&self) -> String {
        format!("{:016x}", self.span_id)
    }

    pub(crate) fn trace(&self) -> u128 {
        self.trace_id
    }

    pub(crate) fn span(&self) -> u64 {
        self.span_id
    }

    pub(crate) fn parent(&self) -> Option<u64> {
        self.parent_span_id
    }
}

/// Fills `buf` from the kernel's random source (getrandom). Span ids must
/// not repeat across the processes of a fleet; nothing here needs them to
/// be secret.
pub(super) fn fill_random(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            // Never seen on Linux ≥ 3.17; a clock-derived id is still
            // unique enough to keep a run going.
            Err(_) => {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos()
                    ^ u128::from(std::process::id()) << 64;
                for (i, b) in buf[filled..].iter_mut().enumerate() {
                    *b = (t >> ((i % 16) * 8)) as u8;
                }
                filled = buf.len();
            }
        }
    }
}
