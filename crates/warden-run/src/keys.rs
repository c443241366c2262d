//! The keys warden signs and seals a batch's files with: what lets warden
//! tell the files it wrote into a batch directory from files someone else
//! wrote there, and keeps the secrets of the runs' requests (`--env
//! NAME=VALUE`) out of those files. Plain bytes and files, below every
//! run and batch: a session signs its reports with a [`ReportSigner`],
//! the sandbox hides [`keys_dir_outside_home`], and `batch_key` seals
//! and opens the saved requests with a [`BatchKey`].
//!
//! A batch directory is where its runs' agents may reach (a shared
//! directory on a cluster, a work tree), yet warden acts on what it reads
//! back from it: each entry's saved request is run again (`--resume`, a
//! Slurm task), `plan.json` names the program a cluster runs, a job's
//! `session.json` says how its entry ended, and earlier attempts' `run.json`
//! say what they spent. So each such file has a sidecar `<file>.mac`: an
//! HMAC-SHA256, with the batch's key, over the file's exact bytes and what
//! the file is for (its role and its entry's index, so one entry's request
//! cannot stand in for another's). A file whose MAC is missing or wrong is
//! refused by name and never acted on.
//!
//! The key (32 random bytes) is made when the batch starts and kept where
//! no run's agent looks: `$XDG_STATE_HOME/warden/keys/<batch id>` (by
//! default `~/.local/state/warden/keys/`), the file owner-only in an
//! owner-only directory, never in the batch directory. A cluster's job
//! reads it from that file ([`KEY_FILE_ENV`] in its script names it: the
//! key file must be on storage the nodes share, as HOME usually is), never
//! from its environment, which the engine keeps on disk with the job, and
//! warden in the job takes the variable out of its own environment before
//! it starts anything.
//!
//! `--env NAME=VALUE` values are sealed with the key (ChaCha20-Poly1305, a
//! fresh nonce for each value, bound to the entry and the name) in every
//! request warden saves: the batch directory never holds them in clear.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ring::aead::{self, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// The variable a program that runs a saved request (`warden
/// run-request`) may be given the batch's key in (hex).
pub const KEY_ENV: &str = "WARDEN_BATCH_KEY";

/// The variable a cluster's job script sets to the batch's key file: the
/// job, the batch's user on a node that shares the file, reads the key
/// there, so the key itself is never in the job's environment (which the
/// engine keeps on disk with the job).
pub const KEY_FILE_ENV: &str = "WARDEN_BATCH_KEY_FILE";

/// The suffix of a file's MAC sidecar.
pub const MAC_SUFFIX: &str = ".mac";

/// What each MAC sidecar starts with.
const MAC_PREFIX: &str = "hmac-sha256:";

const KEY_LEN: usize = 32;

/// The most a key file or a MAC sidecar may be.
const MAX_SMALL: u64 = 4096;

/// A batch's key. Its bytes are never printed.
#[derive(Clone)]
pub struct BatchKey {
    bytes: [u8; KEY_LEN],
}

impl std::fmt::Debug for BatchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchKey(..)")
    }
}

/// What a file warden authenticates is for: part of what its MAC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role<'a> {
    /// The batch's `plan.json`.
    Plan,
    /// Entry `n`'s saved request.
    Request(usize),
    /// Entry `n`'s `session.json`.
    Session(usize),
    /// The `run.json` of entry `n`'s run in the directory named so.
    Run(usize, &'a str),
}

impl Role<'_> {
    fn label(&self) -> String {
        match self {
            Role::Plan => "plan".into(),
            Role::Request(n) => format!("request {n}"),
            Role::Session(n) => format!("session {n}"),
            Role::Run(n, dir) => format!("run {n} {dir}"),
        }
    }
}

/// Why a file was not believed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("{} could not be read: {why}", .path.display())]
    Unreadable { path: PathBuf, why: String },
    #[error(
        "{} could not be authenticated: it has no MAC ({} is missing or unreadable: {why}); warden did not write it as it is",
        .path.display(),
        .mac.display()
    )]
    NoMac {
        path: PathBuf,
        mac: PathBuf,
        why: String,
    },
    #[error(
        "{} could not be authenticated: its MAC does not match, it was changed (tampered with) after warden wrote it",
        .path.display()
    )]
    Mismatch { path: PathBuf },
}

impl AuthError {
    /// Whether the file itself is not there.
    pub fn is_missing(&self) -> bool {
        matches!(self, AuthError::Unreadable { why, .. } if why == MISSING)
    }
}

const MISSING: &str = "no such file";

/// Where batch keys are kept: `$XDG_STATE_HOME/warden/keys`, else
/// `$HOME/.local/state/warden/keys`.
pub fn keys_dir() -> Result<PathBuf, String> {
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        let state = PathBuf::from(state);
        if state.is_absolute() {
            return Ok(state.join("warden/keys"));
        }
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/state/warden/keys")),
        None => Err(
            "neither XDG_STATE_HOME nor HOME is set: warden keeps each batch's key under $XDG_STATE_HOME/warden/keys (default ~/.local/state/warden/keys); set one of them"
                .into(),
        ),
    }
}

/// The keys' directory when it lies outside HOME (an `XDG_STATE_HOME`
/// elsewhere), where a sandbox's read-only root would show it; `None`
/// when HOME holds it, as every sandbox replaces HOME.
pub(crate) fn keys_dir_outside_home() -> Option<PathBuf> {
    let keys = keys_dir().ok()?;
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match home {
        Some(home) if keys.starts_with(&home) => None,
        _ => Some(keys),
    }
}

/// The key file of the batch `id`.
pub fn key_path(id: &str) -> Result<PathBuf, String> {
    let plain = id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if id.is_empty() || !plain || id.len() > 128 {
        return Err(format!(
            "`{id}` is not a batch id warden makes (letters, digits, `-` and `_`)"
        ));
    }
    Ok(keys_dir()?.join(id))
}

impl BatchKey {
    /// A new random key.
    pub fn generate() -> Result<Self, String> {
        let mut bytes = [0u8; KEY_LEN];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| "the system's random source failed".to_string())?;
        Ok(Self { bytes })
    }

    /// A new key for the batch `id`, saved in its key file (owner only,
    /// in owner-only directories); the file's path.
    pub fn create(id: &str) -> Result<(Self, PathBuf), String> {
        let path = key_path(id)?;
        let key = Self::generate()?;
        let dir = path.parent().unwrap_or(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir)
            .map_err(|e| format!("could not make {}: {e}", dir.display()))?;
        // Never through a symbolic link: where HOME or XDG_STATE_HOME lies
        // in an agent's work tree, it could have linked the directory to a
        // place of its own, and the key would be written there.
        let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        match std::fs::canonicalize(dir) {
            Ok(real) if real == absolute => {}
            Ok(real) => {
                return Err(format!(
                    "the keys' directory {} leads through a symbolic link to {}: warden keeps batch keys only in a directory reached without one; remove the link, or set XDG_STATE_HOME to a directory outside every agent's work tree",
                    dir.display(),
                    real.display()
                ));
            }
            Err(e) => return Err(format!("could not resolve {}: {e}", dir.display())),
        }
        // Made earlier with a looser mode (by hand, say): owner only now.
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        crate::regular_file::create_new(&path, 0o600)
            .and_then(|mut f| {
                f.write_all(format!("{}\n", key.to_hex()).as_bytes())?;
                f.sync_all()
            })
            .map_err(|e| format!("could not write the batch's key {}: {e}", path.display()))?;
        Ok((key, path))
    }

    /// The key of the batch `id`, from its key file.
    pub fn load(id: &str) -> Result<Self, String> {
        Self::load_file(&key_path(id)?)
    }

    /// A batch's key, from the key file at `path`.
    pub fn load_file(path: &Path) -> Result<Self, String> {
        let bytes = crate::regular_file::read(path, MAX_SMALL).map_err(|e| {
            if e.is_not_found() {
                format!(
                    "its key {} is not there: warden keeps it on the machine that started the batch, to check that the batch's files are the ones it wrote and to read their secrets. Resume on that machine (as the same user, with the same XDG_STATE_HOME or HOME), or copy the key file there (mode 600); a batch started by a warden before keys were kept cannot be resumed: start it again",
                    path.display()
                )
            } else {
                format!("could not read the batch's key {}: {e}", path.display())
            }
        })?;
        let text = String::from_utf8_lossy(&bytes);
        Self::from_hex(text.trim()).map_err(|e| format!("the batch's key {}: {e}", path.display()))
    }

    /// A key given as 64 hex digits.
    pub fn from_hex(text: &str) -> Result<Self, String> {
        let bytes = from_hex(text)
            .filter(|b| b.len() == KEY_LEN)
            .ok_or_else(|| format!("not a batch key (expected {} hex digits)", KEY_LEN * 2))?;
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&bytes);
        Ok(Self { bytes: key })
    }

    /// The key as hex, for a job's environment.
    pub fn to_hex(&self) -> String {
        to_hex(&self.bytes)
    }

    fn hmac_key(&self) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, &self.bytes)
    }

    fn mac_input(role: Role<'_>, bytes: &[u8]) -> Vec<u8> {
        let mut input = b"warden-mac-v1\0".to_vec();
        input.extend_from_slice(role.label().as_bytes());
        input.push(0);
        input.extend_from_slice(bytes);
        input
    }

    /// The MAC sidecar's text for `bytes` in `role`.
    pub fn sign(&self, role: Role<'_>, bytes: &[u8]) -> String {
        let tag = hmac::sign(&self.hmac_key(), &Self::mac_input(role, bytes));
        format!("{MAC_PREFIX}{}\n", to_hex(tag.as_ref()))
    }

    /// Whether `mac` (a sidecar's text) is `bytes`' MAC in `role`.
    pub fn verify(&self, role: Role<'_>, bytes: &[u8], mac: &[u8]) -> bool {
        let text = String::from_utf8_lossy(mac);
        let Some(tag) = text.trim().strip_prefix(MAC_PREFIX).and_then(from_hex) else {
            return false;
        };
        hmac::verify(&self.hmac_key(), &Self::mac_input(role, bytes), &tag).is_ok()
    }

    /// Writes `bytes` to the new file `path` (mode `mode`) and its MAC
    /// beside it.
    pub(crate) fn write_signed(
        &self,
        path: &Path,
        mode: u32,
        role: Role<'_>,
        bytes: &[u8],
    ) -> std::io::Result<()> {
        crate::regular_file::create_new(path, mode)?.write_all(bytes)?;
        crate::regular_file::create_new(&mac_path(path), 0o644)?
            .write_all(self.sign(role, bytes).as_bytes())
    }

    /// The bytes of `path` (at most `limit`), only if its MAC sidecar
    /// says warden wrote them for `role`.
    pub fn read_signed(
        &self,
        path: &Path,
        role: Role<'_>,
        limit: u64,
    ) -> Result<Vec<u8>, AuthError> {
        let bytes = crate::regular_file::read(path, limit).map_err(|e| AuthError::Unreadable {
            path: path.into(),
            why: if e.is_not_found() {
                MISSING.into()
            } else {
                e.to_string()
            },
        })?;
        let mac = mac_path(path);
        let tag = crate::regular_file::read(&mac, MAX_SMALL).map_err(|e| AuthError::NoMac {
            path: path.into(),
            mac: mac.clone(),
            why: e.to_string(),
        })?;
        if self.verify(role, &bytes, &tag) {
            Ok(bytes)
        } else {
            Err(AuthError::Mismatch { path: path.into() })
        }
    }

    fn aead_key(&self) -> LessSafeKey {
        LessSafeKey::new(
            UnboundKey::new(&CHACHA20_POLY1305, &self.bytes).expect("a 32-byte key is the length"),
        )
    }

    fn env_aad(index: usize, name: &str) -> Vec<u8> {
        format!("warden-env-v1\0request {index}\0{name}").into_bytes()
    }

    /// `value` sealed for entry `index`'s variable `name`: hex of the
    /// nonce and the ciphertext with its tag.
    pub fn seal(&self, index: usize, name: &str, value: &str) -> Result<String, String> {
        let mut nonce = [0u8; aead::NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| "the system's random source failed".to_string())?;
        let mut data = value.as_bytes().to_vec();
        self.aead_key()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(Self::env_aad(index, name)),
                &mut data,
            )
            .map_err(|_| format!("could not seal the value of {name}"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(to_hex(&out))
    }

    /// The value [`BatchKey::seal`] sealed, if this key sealed it for
    /// this entry and name.
    pub fn open(&self, index: usize, name: &str, sealed: &str) -> Option<String> {
        let bytes = from_hex(sealed)?;
        if bytes.len() < aead::NONCE_LEN + CHACHA20_POLY1305.tag_len() {
            return None;
        }
        let (nonce, data) = bytes.split_at(aead::NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut data = data.to_vec();
        let plain = self
            .aead_key()
            .open_in_place(
                nonce,
                aead::Aad::from(Self::env_aad(index, name)),
                &mut data,
            )
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
}

/// `path` with [`MAC_SUFFIX`] appended.
pub fn mac_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(MAC_SUFFIX);
    PathBuf::from(p)
}

/// What a session of a batch's entry signs its reports with: the batch's
/// key and the entry's index.
#[derive(Clone)]
pub struct ReportSigner {
    pub key: Arc<BatchKey>,
    pub index: usize,
}

impl std::fmt::Debug for ReportSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReportSigner {{ index: {} }}", self.index)
    }
}

impl PartialEq for ReportSigner {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index && self.key.bytes == other.key.bytes
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mac_binds_the_bytes_the_role_and_the_key() {
        let key = BatchKey::generate().unwrap();
        let mac = key.sign(Role::Request(1), b"{}");
        assert!(key.verify(Role::Request(1), b"{}", mac.as_bytes()));
        assert!(!key.verify(Role::Request(2), b"{}", mac.as_bytes()));
        assert!(!key.verify(Role::Session(1), b"{}", mac.as_bytes()));
        assert!(!key.verify(Role::Request(1), b"{ }", mac.as_bytes()));
        let other = BatchKey::generate().unwrap();
        assert!(!other.verify(Role::Request(1), b"{}", mac.as_bytes()));
        assert!(!key.verify(Role::Request(1), b"{}", b"hmac-sha256:zz"));
        assert_eq!(BatchKey::from_hex(&key.to_hex()).unwrap().bytes, key.bytes);
        assert!(BatchKey::from_hex("abcd").is_err());
    }

    #[test]
    fn a_signed_file_is_read_back_only_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let key = BatchKey::generate().unwrap();
        let path = dir.path().join("0.json");
        key.write_signed(&path, 0o600, Role::Request(0), b"{\"a\":1}")
            .unwrap();
        assert_eq!(
            key.read_signed(&path, Role::Request(0), 1024).unwrap(),
            b"{\"a\":1}"
        );
        std::fs::write(&path, b"{\"a\":2}").unwrap();
        let e = key.read_signed(&path, Role::Request(0), 1024).unwrap_err();
        assert!(matches!(e, AuthError::Mismatch { .. }), "{e}");
        assert!(e.to_string().contains("0.json"), "{e}");
        std::fs::remove_file(mac_path(&path)).unwrap();
        let e = key.read_signed(&path, Role::Request(0), 1024).unwrap_err();
        assert!(e.to_string().contains("0.json.mac"), "{e}");
        std::fs::remove_file(&path).unwrap();
        assert!(
            key.read_signed(&path, Role::Request(0), 1024)
                .unwrap_err()
                .is_missing()
        );
    }
}
