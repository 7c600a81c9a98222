//! The dashboard in a real browser: headless Chromium driven through ChromeDriver (Debian's
//! `chromium` and `chromium-driver`, which `.ci/run` installs). It filters jobs by a JSON
//! path, opens a job, retries a dead one and sees it finish live (no reload), bulk-replays a
//! group of dead jobs, and pauses a queue — checking the database after each step. With
//! `DOCKET_SCREENSHOTS=DIR` it saves the main pages there (docs/screenshots is made so).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_dashboard::Options;
use docket_testkit::TestDb;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn browser(profile: &std::path::Path) -> (Driver, Client) {
    let exe = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("chromedriver is not installed: apt-get install chromium chromium-driver (.ci/run does)");
    let port = free_port();
    let child = Command::new(exe)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver(child);
    let caps: serde_json::Map<String, serde_json::Value> = serde_json::from_value(json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1400,1000",
                     format!("--user-data-dir={}", profile.display())]
        }
    }))
    .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let mut last = None;
    for _ in 0..100 {
        let http = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(http)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(c) => return (driver, c),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("could not start the browser through ChromeDriver: {last:?}");
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    if let Ok(dir) = std::env::var("DOCKET_SCREENSHOTS") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(format!("{dir}/{name}.png"), png).unwrap();
    }
}

/// Clicks `css`, finding it again when a live refresh replaced it in between.
async fn click(c: &Client, css: &str) {
    for _ in 0..200 {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            if e.click().await.is_ok() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("could not click {css}");
}

/// Types `text` into `css` (found again when a live refresh replaced it before the field had
/// focus; once it has, refreshes wait).
async fn type_into(c: &Client, css: &str, text: &str) {
    for _ in 0..200 {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            if e.click().await.is_ok() && e.send_keys(text).await.is_ok() {
                let v = e.prop("value").await.ok().flatten().unwrap_or_default();
                if v == text {
                    return;
                }
                let _ = e.clear().await;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("could not type into {css}");
}

/// The text of `css`, read again when a live refresh replaced the element in between.
async fn text(c: &Client, css: &str) -> String {
    let mut last = None;
    for _ in 0..200 {
        match c.find(Locator::Css(css)).await {
            Ok(e) => match e.text().await {
                Ok(t) => return t,
                Err(err) => last = Some(err),
            },
            Err(err) => last = Some(err),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{css}: {last:?}");
}

async fn wait_text(c: &Client, css: &str, want: &str) {
    // Generous: under a loaded CI machine Chromium and the server share two cores.
    for _ in 0..600 {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            if e.text().await.unwrap_or_default().contains(want) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{css} never showed {want:?}; it shows {:?}",
        text(c, css).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_filters_retries_replays_and_pauses_in_a_real_browser() {
    let db = TestDb::new().await;
    let s = &db.store;
    let mut jobs: Vec<NewJob> = (1..=12)
        .map(|i| {
            NewJob::new(
                "mail",
                "send_email",
                json!({"user_id": i, "to": format!("user{i}@example.com")}),
            )
        })
        .collect();
    jobs.push(NewJob::new(
        "mail",
        "send_email",
        json!({"user_id": 7, "to": "<b>second</b>"}),
    ));
    s.enqueue_many(&jobs).await.unwrap();
    s.enqueue_many(
        &(0..4)
            .map(|i| NewJob::new("billing", "charge", json!({"invoice": i})))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let dead = kill_all(s, "billing", "card declined: insufficient funds").await;
    s.enqueue(
        &NewJob::new("reports", "render", json!({"month": "2026-11"}))
            .delay(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    // A workflow for its pages: a charge, then a receipt and an audit entry, then a report.
    let wf = s
        .enqueue_workflow(
            docket_core::workflow::Workflow::new("signup")
                .add("charge", NewJob::new("billing-wf", "charge", json!({})))
                .add_after(
                    "receipt",
                    NewJob::new("mail-wf", "receipt", json!({})),
                    ["charge"],
                )
                .add_after(
                    "audit",
                    NewJob::new("mail-wf", "audit", json!({})),
                    ["charge"],
                )
                .add_after(
                    "report",
                    NewJob::new("mail-wf", "report", json!({})),
                    ["receipt", "audit"],
                )
                .graph(&docket_core::Limits::default())
                .unwrap(),
        )
        .await
        .unwrap();
    s.worker_beat(
        &WorkerBeat {
            owner: "web-1/worker-1".into(),
            host: "web-1".into(),
            pid: 4242,
            queues: vec!["mail".into(), "billing".into()],
            concurrency: 20,
            in_flight: 3,
            buffered: 2,
            buffered_by_queue: vec![2, 0],
        },
        Duration::from_secs(600),
    )
    .await
    .unwrap();
    let samples: Vec<Sample> = (0..60)
        .map(|m| Sample {
            queue: "mail".into(),
            minute: chrono::Utc::now() - chrono::Duration::minutes(m),
            succeeded: 900 + (m * 37 % 200),
            failed: m % 7,
            wait_ms_sum: (900 + m) * (3 + m % 5),
            wait_count: 900 + m,
            run_ms_sum: 0,
            wait_hist: Vec::new(),
            run_hist: Vec::new(),
        })
        .map(|mut x| {
            x.minute = x.minute.with_timezone(&chrono::Utc);
            x.minute =
                chrono::DurationRound::duration_trunc(x.minute, chrono::Duration::minutes(1))
                    .unwrap();
            x
        })
        .collect();
    s.record_samples(&samples).await.unwrap();
    // Three hours of the leader's depth samples: a backlog that built up and drained, and
    // the last minutes rising again (the page flags it).
    db.exec(
        "INSERT INTO {schema}.queue_depth (minute, queue, waiting, running, enqueued, hwm)
         SELECT date_trunc('minute', now()) - make_interval(mins => m), q,
                (CASE WHEN m <= 6 THEN 400 - 40 * m
                      ELSE greatest(0, 300 - abs(m - 90) * 4) END)::bigint,
                3, 900 + (m * 37 % 200), 0
         FROM generate_series(1, 180) m, (VALUES ('mail'), ('')) v(q)",
    )
    .await;

    let base = serve(
        s.clone(),
        Options {
            refresh: Duration::from_millis(300),
            ..Default::default()
        },
    )
    .await;
    let profile = tempfile::tempdir().unwrap();
    let (_driver, c) = browser(profile.path()).await;

    // Queues.
    c.goto(&format!("{base}/")).await.unwrap();
    wait_text(&c, "#queues", "billing").await;
    shot(&c, "queues").await;

    // Filter by a JSON path into args: two jobs of user 7, no other.
    c.goto(&format!("{base}/jobs")).await.unwrap();
    type_into(&c, "input[name=field]", "args.user_id = 7").await;
    click(&c, "form.filters button[type=submit]").await;
    wait_text(&c, "#jobs", "second").await;
    let rows = c
        .find_all(Locator::Css("#jobs tbody tr[data-id]"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "the filter keeps user 7's jobs only");
    assert!(
        text(&c, "#jobs").await.contains("<b>second</b>"),
        "shown as text, not markup"
    );
    shot(&c, "jobs").await;

    // "/" puts the cursor in the first filter field; the pause button stops live updates
    // and says so.
    c.execute("document.activeElement.blur();", vec![])
        .await
        .unwrap();
    c.active_element()
        .await
        .unwrap()
        .send_keys("/")
        .await
        .unwrap();
    let focused = c
        .execute("return document.activeElement.name || null;", vec![])
        .await
        .unwrap();
    assert_eq!(focused, json!("queue"), "/ focuses the filter");
    click(&c, "#pause").await;
    assert_eq!(
        c.execute(
            "return document.getElementById('pause').getAttribute('aria-pressed');",
            vec![]
        )
        .await
        .unwrap(),
        json!("true")
    );
    wait_text(&c, "#updated", "paused").await;
    click(&c, "#pause").await;
    let labelled = c
        .execute(
            "return Array.from(document.querySelectorAll('input[type=checkbox]')).every(function (b) { return b.getAttribute('aria-label'); });",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(labelled, json!(true), "every checkbox has a label");

    // Open a job from the list.
    let id = text(&c, "#jobs tbody tr[data-id] td a").await;
    click(&c, "#jobs tbody tr[data-id] td a").await;
    wait_text(&c, "h1", &format!("Job {id}")).await;
    assert!(
        text(&c, "#why").await.contains("next claim")
            || text(&c, "#why").await.contains("go first")
    );

    // Retry a dead job, then see it finish live: a worker completes it while the page stays.
    let d = dead[0];
    c.goto(&format!("{base}/jobs/{d}")).await.unwrap();
    wait_text(&c, "#state", "dead").await;
    assert!(text(&c, "#errors").await.contains("card declined"));
    shot(&c, "job").await;
    click(&c, "#actions button").await;
    wait_text(&c, "#state", "pending").await;
    assert_eq!(s.get(d).await.unwrap().state, JobState::Pending);
    c.execute("window.__stayed = 'yes';", vec![]).await.unwrap();
    let claimed = s
        .claim(&ClaimRequest {
            queue: "billing".into(),
            limit: 1,
            owner: "browser-test".into(),
            lease: Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed[0].id, d);
    s.complete_many("browser-test", &[claimed[0].lease()])
        .await
        .unwrap();
    wait_text(&c, "#state", "succeeded").await;
    let stayed = c
        .execute("return window.__stayed || null;", vec![])
        .await
        .unwrap();
    assert_eq!(stayed, json!("yes"), "updated in place, not reloaded");

    // Bulk-replay the rest of the dead group: first a confirmation naming the count; going
    // back changes nothing, confirming replays the three.
    c.goto(&format!("{base}/dead")).await.unwrap();
    wait_text(&c, "#dead", "card declined").await;
    shot(&c, "dead").await;
    click(&c, "#dead button").await;
    wait_text(&c, "#confirm-count", "3 jobs").await;
    click(&c, "#back").await;
    wait_text(&c, "h1", "Jobs").await;
    for id in &dead[1..] {
        assert_eq!(s.get(*id).await.unwrap().state, JobState::Dead, "dismissed");
    }
    c.goto(&format!("{base}/dead")).await.unwrap();
    click(&c, "#dead button").await;
    wait_text(&c, "#confirm-count", "3 jobs").await;
    click(&c, "#confirm button").await;
    wait_text(&c, "#status", "done").await;
    assert_eq!(text(&c, "#changed").await, "3");
    for id in &dead[1..] {
        assert_eq!(s.get(*id).await.unwrap().state, JobState::Pending);
    }

    // "Cancel all" on a filter: the count first, then the change.
    c.goto(&format!("{base}/jobs?queue=reports")).await.unwrap();
    click(&c, "button[value='cancel:matching']").await;
    wait_text(&c, "#confirm-count", "1 job").await;
    click(&c, "#back").await;
    wait_text(&c, "h1", "Jobs").await;
    let reports = s
        .search(&JobQuery {
            queue: Some("reports".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .jobs;
    assert_eq!(reports[0].state, JobState::Pending, "dismissed");
    click(&c, "button[value='cancel:matching']").await;
    click(&c, "#confirm button").await;
    wait_text(&c, "#status", "done").await;
    assert_eq!(
        s.get(reports[0].id).await.unwrap().state,
        JobState::Cancelled
    );

    // Pause a queue: the browser asks first; "no" posts nothing.
    c.goto(&format!("{base}/")).await.unwrap();
    c.execute(
        "window.confirm = function () { return false; }; window.__declined = 'yes';",
        vec![],
    )
    .await
    .unwrap();
    click(&c, "tr[data-queue=mail] form[action$='/pause'] button").await;
    // WebDriver's click waits for a navigation it starts: the page is still this one.
    let declined = c
        .execute("return window.__declined || null;", vec![])
        .await
        .unwrap();
    assert_eq!(declined, json!("yes"), "no form was posted");
    assert!(
        !s.queue_controls()
            .await
            .unwrap()
            .iter()
            .any(|q| q.queue == "mail" && q.paused_at.is_some()),
        "a declined pause changes nothing"
    );
    c.execute("window.confirm = function () { return true; };", vec![])
        .await
        .unwrap();
    click(&c, "tr[data-queue=mail] form[action$='/pause'] button").await;
    wait_text(&c, "tr[data-queue=mail]", "paused").await;
    let ctl = s.queue_controls().await.unwrap();
    assert!(ctl
        .iter()
        .any(|q| q.queue == "mail" && q.paused_at.is_some()));
    assert_eq!(s.audit_log(10).await.unwrap()[0].action, "queue.pause");

    c.goto(&format!("{base}/workers")).await.unwrap();
    wait_text(&c, "#workers", "web-1").await;
    shot(&c, "workers").await;

    // A workflow's page draws its graph, each node a link to its job.
    c.goto(&format!("{base}/workflows/{}", wf.id))
        .await
        .unwrap();
    wait_text(&c, "#nodes", "receipt").await;
    let linked = c
        .execute(
            "return document.querySelectorAll('#graph a rect.node').length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(linked, json!(4), "four nodes drawn, each a link");
    shot(&c, "workflow").await;

    // Accessibility: axe-core's WCAG 2.1 A and AA rules on every page, no critical or
    // serious violation.
    for path in [
        "/".to_string(),
        "/jobs".into(),
        format!("/jobs/{d}"),
        "/errors".into(),
        "/dead".into(),
        "/keys".into(),
        "/workers".into(),
        "/cron".into(),
        "/audit".into(),
        "/workflows".into(),
        format!("/workflows/{}", wf.id),
    ] {
        c.goto(&format!("{base}{path}")).await.unwrap();
        wait_text(&c, "h1", "").await;
        axe(&c, &path).await;
    }

    // The queues page at a desktop width and at a phone's (390 px): it wraps, and the page
    // never scrolls sideways (a wide table scrolls inside its own box).
    for (w, h) in [(1440, 900), (390, 844)] {
        c.set_window_size(w, h).await.unwrap();
        c.goto(&format!("{base}/")).await.unwrap();
        wait_text(&c, "#queues", "billing").await;
        let sideways = c
            .execute(
                "return document.documentElement.scrollWidth > window.innerWidth;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            sideways,
            json!(false),
            "at {w} px the page scrolls sideways"
        );
        shot(&c, &format!("queues-{w}")).await;
    }
    c.close().await.unwrap();
}

/// axe-core (scripts/fetch-axe.sh) on the current page: the violations of impact critical or
/// serious under the WCAG 2.0/2.1 A and AA rules, none expected.
async fn axe(c: &Client, page: &str) {
    let path = std::env::var("DOCKET_AXE_JS").unwrap_or_else(|_| {
        let home = std::env::var("XDG_CACHE_HOME")
            .unwrap_or_else(|_| format!("{}/.cache", std::env::var("HOME").unwrap_or_default()));
        format!("{home}/docket/axe/axe.min.js")
    });
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("axe-core is not at {path} ({e}): run scripts/fetch-axe.sh (.ci/run does)")
    });
    c.execute(&src, vec![]).await.unwrap();
    let found = c
        .execute_async(
            "var done = arguments[arguments.length - 1];
             axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
               .then(function (r) {
                 done(r.violations
                   .filter(function (v) { return v.impact === 'critical' || v.impact === 'serious'; })
                   .map(function (v) {
                     return v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3)
                       .map(function (n) { return n.target.join(' ') + ' [' + n.failureSummary + ']'; }).join(', ');
                   }));
               }, function (e) { done(['axe failed: ' + e]); });",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(found, json!([]), "axe-core on {page}");
}
