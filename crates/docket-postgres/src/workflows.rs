//! Workflows on PostgreSQL: the graph's enqueue (`enqueue_workflow()`), the nodes'
//! completion (`complete_nodes_fenced()`) and the parents' outputs a child reads. The rule
//! itself — each edge consumed once by the transaction that ends its parent — lives in the
//! schema (`workflow_resolve()` and the trigger `jobs_workflow_ended`, migration 0030), so it
//! holds whichever path ends a node.

use docket_core::workflow::{
    Graph, NodeDone, WorkflowDetail, WorkflowEdge, WorkflowNode, WorkflowSummary,
};
use docket_core::*;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::rows;
use crate::store::PgStore;

impl PgStore {
    /// Enqueues a workflow inside the caller's transaction on `conn`: it exists iff that
    /// transaction commits.
    pub async fn enqueue_workflow_tx(
        &self,
        conn: &mut PgConnection,
        graph: &Graph,
    ) -> Result<WorkflowEnqueued> {
        graph.validate(self.limits())?;
        self.insert_workflow(conn, graph).await
    }

    /// A checked graph written by `enqueue_workflow()` on `conn`.
    async fn insert_workflow(
        &self,
        conn: &mut PgConnection,
        graph: &Graph,
    ) -> Result<WorkflowEnqueued> {
        let text = serde_json::to_value(graph).map_err(|e| StoreError::Database(e.into()))?;
        let rows = self
            .query(&self.queries().enqueue_workflow)
            .bind(text)
            .fetch_all(&mut *conn)
            .await
            .map_err(workflow_err)?;
        enqueued(&rows)
    }

    pub(crate) async fn enqueue_workflow_impl(&self, graph: &Graph) -> Result<WorkflowEnqueued> {
        // Checked before a transaction is opened for it, and once.
        graph.validate(self.limits())?;
        let mut tx = self.begin_bounded().await?;
        let out = self.insert_workflow(&mut tx, graph).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    pub(crate) async fn spawn_nodes_impl(
        &self,
        owner: &str,
        lease: Lease,
        step: &str,
        graph: &Graph,
    ) -> Result<WorkflowEnqueued> {
        graph.validate(self.limits())?;
        docket_core::workflow::spawn_step(step)?;
        let text = serde_json::to_value(graph).map_err(|e| StoreError::Database(e.into()))?;
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().spawn_nodes)
                    .bind(lease.id.0)
                    .bind(lease.attempt)
                    .bind(owner)
                    .bind(step)
                    .bind(text.clone())
                    .fetch_all(&mut *c)
                    .await
                    .map_err(workflow_err)
            })
            .await?;
        if rows.is_empty() {
            let lost = self.explain_lost(vec![lease]).await?;
            return Err(StoreError::LeaseLost(
                lost.into_iter().next().expect("one lease"),
            ));
        }
        let mut out = enqueued(&rows)?;
        out.jobs.sort_by_key(|(_, id)| *id);
        Ok(out)
    }

    pub(crate) async fn complete_nodes_impl(
        &self,
        owner: &str,
        nodes: &[NodeDone],
    ) -> Result<BatchOutcome> {
        if nodes.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let mut sorted = nodes.to_vec();
        sorted.sort_by_key(|n| n.lease.id);
        sorted.dedup_by_key(|n| n.lease.id);
        for n in &sorted {
            if let Some(v) = &n.output {
                docket_core::output::check(v, docket_core::output::MAX_OUTPUT_BYTES)?;
            }
        }
        let leases: Vec<Lease> = sorted.iter().map(|n| n.lease).collect();
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().complete_nodes)
                    .bind(sorted.iter().map(|n| n.lease.id.0).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|n| n.lease.attempt).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|n| n.output.clone()).collect::<Vec<_>>())
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        self.fenced(&leases, rows).await
    }

    pub(crate) async fn dep_outputs_impl(&self, id: JobId) -> Result<Vec<DepOutput>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().dep_outputs)
                    .bind(id.0)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state").map_err(db_err)?;
                Ok(DepOutput {
                    node: r.try_get("node").map_err(db_err)?,
                    id: JobId(r.try_get("id").map_err(db_err)?),
                    state: rows::state(&state)?,
                    output: r.try_get("output").map_err(db_err)?,
                })
            })
            .collect()
    }
}

impl PgStore {
    pub(crate) async fn workflows_impl(&self, limit: i64) -> Result<Vec<WorkflowSummary>> {
        docket_core::workflow::check_limit(limit)?;
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().workflows_list)
                    .bind(limit)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut list = Vec::with_capacity(rows.len());
        for r in &rows {
            let state: Option<String> = r.try_get("state").map_err(db_err)?;
            list.push((
                r.try_get("id").map_err(db_err)?,
                r.try_get("name").map_err(db_err)?,
                r.try_get("created_at").map_err(db_err)?,
                r.try_get("nodes").map_err(db_err)?,
                state.map(|s| rows::state(&s)).transpose()?,
                r.try_get("n").map_err(db_err)?,
            ));
        }
        Ok(docket_core::workflow::summaries(list))
    }

    pub(crate) async fn workflow_impl(&self, id: i64) -> Result<WorkflowDetail> {
        let (nodes, edges) = self
            .run(async |c: &mut PgConnection| {
                let nodes = self
                    .query(&self.queries().workflow_nodes)
                    .bind(id)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)?;
                let edges = self
                    .query(&self.queries().workflow_edges)
                    .bind(id)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)?;
                Ok((nodes, edges))
            })
            .await?;
        let Some(first) = nodes.first() else {
            return Err(StoreError::NotFound(JobId(id)));
        };
        let mut out = Vec::new();
        for r in &nodes {
            let Some(job) = r.try_get::<Option<i64>, _>("id").map_err(db_err)? else {
                continue;
            };
            let state = rows::state(&r.try_get::<String, _>("state").map_err(db_err)?)?;
            out.push(WorkflowNode {
                name: r.try_get("node").map_err(db_err)?,
                id: JobId(job),
                state,
                kind: r.try_get("kind").map_err(db_err)?,
            });
        }
        let summary = WorkflowSummary::of_nodes(
            first.try_get("workflow_id").map_err(db_err)?,
            first.try_get("name").map_err(db_err)?,
            first.try_get("created_at").map_err(db_err)?,
            first.try_get("nodes").map_err(db_err)?,
            &out,
        );
        let edges = edges
            .iter()
            .map(|r| {
                Ok(WorkflowEdge {
                    parent: JobId(r.try_get("parent_id").map_err(db_err)?),
                    child: JobId(r.try_get("child_id").map_err(db_err)?),
                    on_failure: r.try_get("on_failure").map_err(db_err)?,
                    state: r.try_get("state").map_err(db_err)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(WorkflowDetail {
            summary,
            nodes: out,
            edges,
        })
    }
}

/// The rows of `enqueue_workflow()` or `spawn_nodes()` (workflow_id, node, job_id).
fn enqueued(rows: &[sqlx::postgres::PgRow]) -> Result<WorkflowEnqueued> {
    let mut out = WorkflowEnqueued {
        id: 0,
        jobs: Vec::with_capacity(rows.len()),
    };
    for r in rows {
        out.id = r.try_get("workflow_id").map_err(db_err)?;
        out.jobs.push((
            r.try_get("node").map_err(db_err)?,
            JobId(r.try_get("job_id").map_err(db_err)?),
        ));
    }
    Ok(out)
}

/// The function's refusals ("workflow refused: …") as the library's own.
fn workflow_err(e: sqlx::Error) -> StoreError {
    match db_err(e) {
        StoreError::Invalid(ValidationError::Other { reason, .. }) => {
            StoreError::Invalid(ValidationError::Other {
                what: "workflow",
                reason: reason.trim_start_matches("workflow refused: ").to_string(),
            })
        }
        other => other,
    }
}

impl PgStore {
    pub(crate) async fn skip_edge_impl(&self, parent: JobId, child: JobId) -> Result<JobRecord> {
        let outcome: String = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().skip_edge)
                    .bind(parent.0)
                    .bind(child.0)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)?
                    .try_get("outcome")
                    .map_err(db_err)
            })
            .await?;
        if let Some(e) = docket_core::workflow::skip_refusal(parent, child, &outcome) {
            return Err(e);
        }
        self.get(child).await
    }
}
