//! A batch's saved requests, sealed and opened with the batch's key, and
//! the key itself (see [`BatchKey`]).

use std::path::Path;

use crate::RunRequest;
pub use crate::keys::{
    AuthError, BatchKey, KEY_ENV, KEY_FILE_ENV, MAC_SUFFIX, ReportSigner, Role, key_path, keys_dir,
    mac_path,
};

/// The request's JSON as warden saves it for entry `index`: each
/// `--env NAME=VALUE` value sealed (`{"sealed": [NAME, HEX]}`), never in
/// clear.
pub fn seal_request(key: &BatchKey, index: usize, request: &RunRequest) -> Result<Vec<u8>, String> {
    let mut value = serde_json::to_value(request).map_err(|e| e.to_string())?;
    if let Some(env) = value.get_mut("env").and_then(|e| e.as_array_mut()) {
        for item in env.iter_mut() {
            let Some([name, clear]) = item
                .get("pair")
                .and_then(|p| p.as_array())
                .and_then(|p| <&[serde_json::Value; 2]>::try_from(p.as_slice()).ok())
            else {
                continue;
            };
            let (Some(name), Some(clear)) = (name.as_str(), clear.as_str()) else {
                continue;
            };
            let sealed = key.seal(index, name, clear)?;
            *item = serde_json::json!({ "sealed": [name, sealed] });
        }
    }
    serde_json::to_vec_pretty(&value).map_err(|e| e.to_string())
}

/// The request saved by [`seal_request`] for entry `index`, its values
/// opened with `key`. `what` names the file in errors. With no key, a
/// request with sealed values is refused, naming them.
pub fn open_request(
    key: Option<&BatchKey>,
    index: usize,
    bytes: &[u8],
    what: &Path,
) -> Result<RunRequest, String> {
    let mut value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("{} is not a request this warden reads: {e}", what.display()))?;
    if let Some(env) = value.get_mut("env").and_then(|e| e.as_array_mut()) {
        for item in env.iter_mut() {
            let Some(sealed) = item.get("sealed") else {
                continue;
            };
            let (name, text) = match sealed.as_array().map(Vec::as_slice) {
                Some([n, t]) => match (n.as_str(), t.as_str()) {
                    (Some(n), Some(t)) => (n.to_string(), t.to_string()),
                    _ => {
                        return Err(format!(
                            "{}: a sealed `env` value is not [NAME, HEX]",
                            what.display()
                        ));
                    }
                },
                _ => {
                    return Err(format!(
                        "{}: a sealed `env` value is not [NAME, HEX]",
                        what.display()
                    ));
                }
            };
            let Some(key) = key else {
                return Err(format!(
                    "{} holds the value of {name} sealed with its batch's key, and no key was given ({KEY_ENV}): run it from its batch (`warden batch --resume DIR`)",
                    what.display()
                ));
            };
            let clear = key.open(index, &name, &text).ok_or_else(|| {
                format!(
                    "{}: the sealed value of {name} could not be opened with the batch's key (it was changed, or sealed for another entry)",
                    what.display()
                )
            })?;
            *item = serde_json::json!({ "pair": [name, clear] });
        }
    }
    serde_json::from_value(value)
        .map_err(|e| format!("{} is not a request this warden reads: {e}", what.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_are_sealed_for_their_entry_and_name() {
        let key = BatchKey::generate().unwrap();
        let mut r = RunRequest::exec(["true"]);
        r.env = vec![
            crate::EnvArg::Pair("API_KEY".into(), "secretvalue123".into()),
            crate::EnvArg::Name("HOME".into()),
        ];
        let bytes = seal_request(&key, 3, &r).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains("secretvalue123"), "{text}");
        assert!(text.contains("sealed"), "{text}");
        let back = open_request(Some(&key), 3, &bytes, Path::new("r.json")).unwrap();
        assert_eq!(back, r);
        // Another entry's index, another key, or none: refused by name.
        let e = open_request(Some(&key), 4, &bytes, Path::new("r.json")).unwrap_err();
        assert!(e.contains("API_KEY"), "{e}");
        let other = BatchKey::generate().unwrap();
        assert!(open_request(Some(&other), 3, &bytes, Path::new("r.json")).is_err());
        let e = open_request(None, 3, &bytes, Path::new("r.json")).unwrap_err();
        assert!(e.contains("API_KEY") && e.contains(KEY_ENV), "{e}");
        // Two seals of one value differ (a nonce each).
        assert_ne!(
            key.seal(3, "A", "v").unwrap(),
            key.seal(3, "A", "v").unwrap()
        );
    }
}
