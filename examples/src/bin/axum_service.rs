//! A web service that enqueues in its request's transaction and runs its worker in the same
//! process.
//!
//! `POST /signup` with `{"email": "…"}` inserts the user and enqueues `SendWelcome` in one
//! transaction: the job exists iff the user does. The worker runs beside the server on the
//! same pool and stops gracefully with it (SIGTERM or Ctrl-C: the server stops accepting,
//! running jobs finish, buffered ones go back to the queue).
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo run -p docket-examples --bin axum_service
//! curl -s localhost:3000/signup -H 'content-type: application/json' -d '{"email":"ada@example.com"}'
//! ```
//! `LISTEN_ADDR` moves it off 127.0.0.1:3000 (the tests use port 0 and read the line it
//! prints).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use docket::prelude::*;
use docket_examples::{app_schema, registry, start, SendWelcome, QUEUE};
use serde::Deserialize;

#[derive(Deserialize)]
struct Signup {
    email: String,
}

async fn signup(
    State(store): State<PgStore>,
    Json(body): Json<Signup>,
) -> Result<Json<serde_json::Value>, (StatusCode, String)> {
    // The database's error goes to the log, not to the client (it can name tables and
    // values).
    let internal = |e: &dyn std::fmt::Display| {
        eprintln!("signup failed: {e}");
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error".to_string(),
        )
    };
    let mut tx = store.pool().begin().await.map_err(|e| internal(&e))?;
    let user_id: i64 = sqlx::query_scalar(&format!(
        "INSERT INTO {}.users (email) VALUES ($1) RETURNING id",
        app_schema()
    ))
    .bind(&body.email)
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| internal(&e))?;
    let job = docket::new_tx_job::<PgStore, _>(&SendWelcome {
        user_id,
        email: body.email,
    })
    .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    let enqueued = store
        .enqueue_tx(&mut tx, &job)
        .await
        .map_err(|e| internal(&e))?;
    tx.commit().await.map_err(|e| internal(&e))?;
    Ok(Json(
        serde_json::json!({ "user_id": user_id, "job_id": enqueued.id.0 }),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = start(10).await?;

    let shutdown = Shutdown::on_signals();
    let worker = Worker::new(
        store.clone(),
        registry(),
        WorkerConfig::default().queue(QUEUE, 8),
    )?;
    let tokens = shutdown.clone();
    let worker = tokio::spawn(async move { worker.run(tokens).await });

    let app = Router::new()
        .route("/signup", post(signup))
        .with_state(store);
    let addr = std::env::var("LISTEN_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let stop = shutdown.graceful.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await?;
    let report = worker.await??;
    println!("stopped: {report:?}");
    Ok(())
}
