//! The engine conformance suite (`docket_testkit::conformance`), run for PostgreSQL: the
//! same cases every engine must pass, written against the seam with the clock moved by the
//! harness.

docket_testkit::conformance_suite!(docket_testkit::conformance::PgHarness);
