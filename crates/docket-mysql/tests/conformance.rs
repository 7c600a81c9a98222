//! The engine contract (docket-testkit's conformance suite) on MariaDB / MySQL: the same
//! cases as PostgreSQL, unchanged. The server: `MYSQL_URL`, or a private `mariadbd`.

docket_testkit::conformance_suite!(docket_testkit::conformance::MySqlHarness);
