//! The throw-away cluster shared by all tests of one process.
//!
//! It runs `postgres` in the foreground as a child of a thread that lives as long as the
//! process, with `PR_SET_PDEATHSIG` so the server is stopped (SIGQUIT: immediate shutdown) when
//! the test process exits by any means — tests never leak servers. Stale directories of
//! earlier, killed runs are removed at start. This needs a raw `pre_exec`, which no crate
//! wraps for this combination (switch to the `postgres` user when root, then ask for the
//! parent-death signal, which a uid change would otherwise reset).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use docket_localpg::{free_port, LocalCluster};

use crate::TEST_SETTINGS;

fn postgres_ids() -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").arg(flag).arg("postgres").output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

fn remove_stale_dirs(tmp: &Path) {
    let Ok(rd) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix("docket-test-")
            .and_then(|s| s.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Starts the shared cluster and returns its URL.
pub(crate) fn start_shared_cluster() -> String {
    let tmp = std::env::temp_dir();
    remove_stale_dirs(&tmp);
    let dir = tmp.join(format!(
        "docket-test-{}-{}",
        std::process::id(),
        crate::fresh_schema()
    ));
    let cluster = LocalCluster::at(&dir, free_port().expect("free port"))
        .unwrap_or_else(|e| panic!("no DATABASE_URL and {e}"));
    cluster.init(TEST_SETTINGS).expect("initdb");
    let mut cmd = cluster.foreground_command();
    let log = std::fs::File::create(cluster.log_file()).expect("log file");
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
    let ids = if is_root() { postgres_ids() } else { None };
    #[allow(unsafe_code)]
    // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid, prctl, getppid) run
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = ids {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("parent already exited"));
            }
            Ok(())
        });
    }
    // The parent-death signal fires when the *thread* that forked exits, so fork from a
    // thread that lives as long as the process.
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("docket-test-postgres".into())
        .spawn(move || match cmd.spawn() {
            Ok(mut child) => {
                let _ = tx.send(Ok(()));
                let _ = child.wait();
                loop {
                    std::thread::park();
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        })
        .expect("spawn thread");
    rx.recv().expect("postgres thread").expect("start postgres");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster.is_ready() {
        assert!(
            Instant::now() < deadline,
            "test postgres did not start; see {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.url("postgres")
}

fn is_root() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions.
    unsafe {
        libc::geteuid() == 0
    }
}
