//! The one error type of warden's commands: what stopped a command, and
//! the documented exit code it maps to (the book's run directory chapter, "Verdicts and exit
//! codes"). A command returns it; `main` prints it, once.

use std::fmt;

use warden_run::batch::BatchError;
use warden_run::{ErrorKind, RequestError};

/// What kind of failure, and so which exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A bad request: flags, files, settings, a batch file (2).
    Usage,
    /// What this machine cannot do: an agent CLI not installed, a sandbox
    /// that cannot run here (6).
    Unavailable,
    /// warden could not keep the output (the disk is full, say).
    OutputLost,
    /// A signal came before anything started (130): said, not an error.
    Cancelled,
    /// warden itself failed (70).
    Internal,
}

/// Why a command stopped before its outcome.
#[derive(Debug)]
pub(crate) struct CliError {
    kind: Kind,
    message: String,
    /// Where it happened (a batch's run), said on a line of its own.
    context: Option<String>,
}

impl CliError {
    pub(crate) fn new(kind: Kind, message: impl fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
            context: None,
        }
    }

    /// Names what the error is about (a file) before the message.
    pub(crate) fn about(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// Says where the error happened, on a line after it.
    pub(crate) fn context(mut self, where_: impl fmt::Display) -> Self {
        self.context = Some(where_.to_string());
        self
    }

    /// The exit code for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self.kind {
            Kind::Usage => 2,
            Kind::Unavailable => 6,
            Kind::OutputLost => warden_run::report::OUTPUT_LOST_EXIT,
            Kind::Cancelled => 130,
            Kind::Internal => 70,
        }
    }

    /// Prints the error (the only place that does) and gives its code.
    pub(crate) fn report(self) -> u8 {
        match self.kind {
            Kind::Cancelled => eprintln!("warden: {}", self.message),
            _ => eprintln!("warden: error: {}", self.message),
        }
        if let Some(c) = &self.context {
            eprintln!("warden: ({c})");
        }
        self.exit_code()
    }
}

/// A bad request (exit code 2).
pub(crate) fn usage(msg: impl fmt::Display) -> CliError {
    CliError::new(Kind::Usage, msg)
}

/// The CLI's kind, and so its exit code, for a kind of the library's
/// errors.
fn kind_of(kind: ErrorKind) -> Kind {
    match kind {
        ErrorKind::Unavailable => Kind::Unavailable,
        ErrorKind::Storage => Kind::OutputLost,
        ErrorKind::Internal => Kind::Internal,
        _ => Kind::Usage,
    }
}

/// The library names a request's fields; the CLI says them by its flags.
impl From<RequestError> for CliError {
    fn from(e: RequestError) -> Self {
        Self::new(kind_of(e.kind()), e.render(crate::request::flag_of))
    }
}

impl From<warden_run::SetupError> for CliError {
    fn from(e: warden_run::SetupError) -> Self {
        match e {
            warden_run::SetupError::Request(e) => e.into(),
            e => Self::new(kind_of(e.kind()), e),
        }
    }
}

impl From<BatchError> for CliError {
    fn from(e: BatchError) -> Self {
        Self::new(kind_of(e.kind()), e)
    }
}

/// What a command ends with: its outcome's exit code, or the error that
/// stopped it.
pub(crate) type Outcome = Result<u8, CliError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_documented_code() {
        for (kind, code) in [
            (Kind::Usage, 2),
            (Kind::Unavailable, 6),
            (Kind::OutputLost, warden_run::report::OUTPUT_LOST_EXIT),
            (Kind::Cancelled, 130),
            (Kind::Internal, 70),
        ] {
            assert_eq!(CliError::new(kind, "x").exit_code(), code, "{kind:?}");
        }
        // Each kind of the library's errors has the code its kind says.
        for (kind, code) in [
            (ErrorKind::Invalid, 2),
            (ErrorKind::Unavailable, 6),
            (ErrorKind::Storage, warden_run::report::OUTPUT_LOST_EXIT),
            (ErrorKind::Internal, 70),
        ] {
            assert_eq!(CliError::new(kind_of(kind), "x").exit_code(), code);
        }
    }
}
