//! A value kept in the file (the stored clock, the items' expiry marks) that a connection
//! remembers between its transactions, so that it is not read again while nobody wrote.
//!
//! The value is remembered with the file's data version after this connection's last
//! transaction (`SQLITE_FCNTL_DATA_VERSION`, which changes with every commit to the file, from
//! this connection or any other, in any process): while it is unchanged, the file still holds
//! the remembered value.

use std::ffi::c_void;

use rusqlite::{ffi, Connection};

/// The data version of the connection's main database (see the module's comment).
#[allow(unsafe_code)]
fn data_version(c: &Connection) -> Option<u32> {
    let mut v: u32 = 0;
    // SAFETY: the connection's live handle, a NUL-terminated name, and a pointer to a u32 as
    // SQLITE_FCNTL_DATA_VERSION asks for.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            c.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_DATA_VERSION,
            &mut v as *mut u32 as *mut c_void,
        )
    };
    (rc == ffi::SQLITE_OK).then_some(v)
}

/// One remembered value of the file.
pub(super) struct Remembered<T> {
    /// (data version after the last transaction that saw it, the value then).
    seen: Option<(u32, T)>,
    /// The value as the transaction under way found or left it.
    pending: Option<T>,
}

impl<T> Default for Remembered<T> {
    fn default() -> Self {
        Remembered { seen: None, pending: None }
    }
}

impl<T: Copy> Remembered<T> {
    /// The value inside a transaction: as this transaction left it, else the remembered one
    /// when nobody wrote since, else `read` from the file.
    pub(super) fn get(
        &mut self,
        c: &Connection,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        if let Some(v) = self.pending {
            return Ok(v);
        }
        let v = match (self.seen, data_version(c)) {
            (Some((seen, v)), Some(now)) if seen == now => v,
            _ => read(c)?,
        };
        self.pending = Some(v);
        Ok(v)
    }

    /// The value as this transaction writes it to the file.
    pub(super) fn set(&mut self, v: T) {
        self.pending = Some(v);
    }

    /// After a transaction: remembers the value it left when it committed (`ok`); forgets it
    /// when the transaction failed (a rolled-back change is not in the file).
    pub(super) fn settle(&mut self, c: &Connection, ok: bool) {
        match (ok, self.pending.take()) {
            (true, Some(v)) => self.seen = data_version(c).map(|version| (version, v)),
            (true, None) => {}
            (false, _) => self.seen = None,
        }
    }
}
