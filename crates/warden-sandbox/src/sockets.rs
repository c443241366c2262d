//! The host's listening unix sockets, so that every sandbox can cover
//! them (a daemon reached through one acts outside the sandbox), and
//! `warden doctor` can list them.
//!
//! A new network namespace cuts TCP/IP and abstract unix sockets (those
//! are per namespace), but a unix socket bound to a path is found through
//! the file system: `connect()` works on it from any namespace, even
//! through a read-only bind mount. The kernel lists every bound socket of a
//! network namespace in `/proc/<pid>/net/unix`; warden reads that list for
//! its own namespace and for every other one it can see (a container's
//! daemon may listen on a path that is also visible here).

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

/// Canonical paths of the unix sockets bound on this host that exist
/// here as sockets now.
pub fn host_unix_sockets() -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for table in unix_tables() {
        for path in parse_unix_table(&table) {
            // The kernel keeps the path as it was given to bind(): it may
            // be relative, go through symlinks, or be stale (renamed,
            // deleted, or bound in another mount namespace).
            if !path.is_absolute() {
                continue;
            }
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue;
            };
            if std::fs::symlink_metadata(&real).is_ok_and(|m| m.file_type().is_socket()) {
                found.insert(real);
            }
        }
    }
    found
}

/// The text of `/proc/net/unix` for this process's network namespace and
/// one per other network namespace seen in /proc.
fn unix_tables() -> Vec<String> {
    let mut tables: Vec<String> = std::fs::read_to_string("/proc/net/unix")
        .into_iter()
        .collect();
    let mut seen = BTreeSet::new();
    if let Ok(me) = std::fs::read_link("/proc/self/ns/net") {
        seen.insert(me);
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return tables;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let dir = entry.path();
        let Ok(ns) = std::fs::read_link(dir.join("ns/net")) else {
            continue;
        };
        if seen.insert(ns)
            && let Ok(t) = std::fs::read_to_string(dir.join("net/unix"))
        {
            tables.push(t);
        }
    }
    tables
}

/// The paths in a `/proc/net/unix` table: the eighth column, when it is
/// not an abstract name (`@…`). A path may hold spaces, so it is the rest
/// of the line after seven fields.
fn parse_unix_table(text: &str) -> Vec<PathBuf> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut rest = line.trim_start();
            for _ in 0..7 {
                let end = rest.find(' ')?;
                rest = rest[end..].trim_start();
            }
            (!rest.is_empty() && !rest.starts_with('@')).then(|| PathBuf::from(rest))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unix_table_gives_paths_but_not_abstract_names() {
        let table = "\
Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 20471 /run/docker.sock
0000000000000000: 00000002 00000000 00010000 0001 01 20472 @/tmp/.X11-unix/X0
0000000000000000: 00000003 00000000 00000000 0001 03 20473
0000000000000000: 00000002 00000000 00010000 0001 01 20474 /srv/with space.sock
";
        assert_eq!(
            parse_unix_table(table),
            [
                PathBuf::from("/run/docker.sock"),
                PathBuf::from("/srv/with space.sock")
            ]
        );
    }

    #[test]
    fn a_listening_socket_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let found = host_unix_sockets();
        assert!(
            found.contains(&std::fs::canonicalize(&path).unwrap()),
            "{found:?}"
        );
    }
}
