//! Server errors into Docket's typed errors: a lost connection is
//! [`StoreError::Unavailable`] (transient: the runtime retries), and so is a deadlock or a
//! lock-wait timeout (the server rolled the transaction back; running it again is safe);
//! anything else is [`StoreError::Database`].

use docket_core::StoreError;

/// The server's error number (`ER_*`), if any.
pub(crate) fn number(e: &sqlx::Error) -> Option<u16> {
    match e {
        sqlx::Error::Database(d) => d
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .map(|m| m.number()),
        _ => None,
    }
}

/// ER_DUP_ENTRY (1062).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    number(e) == Some(1062)
}

pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    match &e {
        // Server gone, shutting down, connection lost or refused, too many connections; a
        // deadlock victim or a lock-wait timeout (rolled back by the server).
        sqlx::Error::Database(_)
            if matches!(
                number(&e),
                Some(1040 | 1053 | 1205 | 1213 | 2002 | 2003 | 2006 | 2013 | 1927)
            ) =>
        {
            StoreError::Unavailable(Box::new(e))
        }
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => StoreError::Unavailable(Box::new(e)),
        _ => StoreError::Database(Box::new(e)),
    }
}

/// A value the store wrote itself but cannot read back (a hand-edited row).
pub(crate) fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Database(what.into().into())
}
