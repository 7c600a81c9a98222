//! The engine contract (docket-testkit's conformance suite) on SQLite: the same cases as
//! PostgreSQL, unchanged.

docket_testkit::conformance_suite!(docket_testkit::conformance::SqliteHarness);
