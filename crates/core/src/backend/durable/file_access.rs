//! Why a store file cannot be opened, asked of the file system itself: SQLite says only "unable
//! to open database file" (or "read-only") whatever the cause. Only reads: nothing is created.

use std::io::ErrorKind;
use std::path::Path;

/// The reason `path` cannot be opened for reading and writing (with its `-wal` and `-shm` files
/// beside it), when the file system tells one: a directory, a parent that is a file, a missing
/// directory, no permission, a read-only file system. `None` when it sees nothing wrong.
pub(super) fn reason(path: &Path) -> Option<String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Some("it is a directory, not a file".into()),
        Ok(_) => denied(path, "the file").or_else(|| denied(dir, "its directory")),
        Err(e) if e.kind() == ErrorKind::NotADirectory => Some(match not_a_directory(dir) {
            Some(file) => format!("its parent {} is not a directory", file.display()),
            None => "a parent of it is not a directory".into(),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => denied(dir, "its directory"),
            Ok(_) => Some(format!("its parent {} is not a directory", dir.display())),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                Some(format!("its directory {} does not exist", dir.display()))
            }
            Err(_) => {
                not_a_directory(dir).map(|file| format!("its parent {} is not a directory", file.display()))
            }
        },
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            Some("permission denied: this process cannot look into its directory".into())
        }
        Err(_) => None,
    }
}

/// The nearest of `dir` and its parents that exists and is not a directory.
fn not_a_directory(dir: &Path) -> Option<&Path> {
    dir.ancestors().find(|a| std::fs::metadata(a).is_ok_and(|m| !m.is_dir()))
}

/// Why this process cannot write `what` (the file, or its directory: where SQLite creates the
/// file and its `-wal` and `-shm` files), as the OS answers `access(2)`.
#[cfg(unix)]
#[allow(unsafe_code)]
fn denied(path: &Path, what: &str) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let dir = what != "the file";
    let mode = if dir { libc::W_OK | libc::X_OK } else { libc::R_OK | libc::W_OK };
    // SAFETY: a NUL-terminated path and access(2)'s documented mode bits.
    if unsafe { libc::access(c.as_ptr(), mode) } == 0 {
        return None;
    }
    let p = path.display();
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EROFS) => Some(format!("{what} {p} is on a read-only file system")),
        Some(libc::EACCES | libc::EPERM) if dir => Some(format!(
            "permission denied: this process cannot create files in {what} {p} (the store keeps its -wal and -shm files there)"
        )),
        Some(libc::EACCES | libc::EPERM) => {
            Some("permission denied: the file is read-only for this process".to_string())
        }
        _ => None,
    }
}

#[cfg(not(unix))]
fn denied(_: &Path, _: &str) -> Option<String> {
    None
}
