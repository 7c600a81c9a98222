//! Real network partitions: a process in a network namespace of its own, joined to this
//! machine by a veth pair that the test slows, cuts, pulls and restores with the kernel's own
//! tools (`tc tbf`, `nft` drop rules, `ip link`). Nothing here simulates a network: the kernel
//! queues or drops the packets, TCP retransmits into the void, and a healed link delivers
//! whatever the endpoints retransmit — statements sent before the cut included, late.
//!
//! ```text
//!   host namespace                         namespace dkt<pid>-<k>
//!   forwarder on 10.x.y.1:P  ── veth ──   10.x.y.2  (the worker: `ip netns exec …`)
//!   → 127.0.0.1:<server port>
//! ```
//! The database servers listen on 127.0.0.1 only, so a [`crate::proxy::Proxy`] bound to the
//! host end of the link forwards to them; the link, not the proxy, is what the test cuts.
//!
//! Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), iproute2 and nftables; `.ci/run` installs them
//! and runs as root. Every namespace is deleted on drop (its veth pair with it), and those left
//! by test processes that no longer run are deleted when the next one creates its first.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

/// One namespace and the veth pair that joins it to the host.
pub struct Link {
    /// The namespace's name.
    pub ns: String,
    host_if: String,
    ns_if: String,
    /// The host end's address (bind the forwarder here).
    pub host_addr: Ipv4Addr,
    /// The namespace end's address.
    pub ns_addr: Ipv4Addr,
}

/// Runs `ip`/`tc` with `args`, panicking with its stderr on failure.
fn run(program: &str, args: &[&str]) {
    let o = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} is not installed ({e}): the partition tests need iproute2 (apt-get install iproute2)")
        });
    assert!(
        o.status.success(),
        "{program} {}: {}\nthe partition tests need root (network namespaces); .ci/run runs as root",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr).trim()
    );
}

/// Deletes the namespaces of test processes that are gone (a killed test leaves its own).
fn clean_stale() {
    let Ok(o) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let pid = name
            .strip_prefix("dkt")
            .and_then(|r| r.split_once('-'))
            .and_then(|(p, _)| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()) {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
            drop_host_table(name);
        }
    }
}

impl Link {
    /// A new namespace joined to the host by a veth pair, both ends up, with a /30 of
    /// 10.200.0.0/14 chosen from the process id and a counter (so test processes running at
    /// once never share an address).
    pub fn create() -> Link {
        static CLEAN: Once = Once::new();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        CLEAN.call_once(clean_stale);
        let pid = std::process::id();
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(k < 16, "at most 16 links per test process");
        let block = (pid % 4096) * 16 + k; // < 65,536 blocks of 4 addresses
        let base = u32::from(Ipv4Addr::new(10, 200, 0, 0)) + block * 4;
        let (host_addr, ns_addr) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
        let link = Link {
            ns: format!("dkt{pid}-{k}"),
            host_if: format!("dh{pid}-{k}"),
            ns_if: format!("dn{pid}-{k}"),
            host_addr,
            ns_addr,
        };
        let (ns, h, n) = (&link.ns, &link.host_if, &link.ns_if);
        run("ip", &["netns", "add", ns]);
        run(
            "ip",
            &[
                "link", "add", h, "type", "veth", "peer", "name", n, "netns", ns,
            ],
        );
        run("ip", &["addr", "add", &format!("{host_addr}/30"), "dev", h]);
        run("ip", &["link", "set", h, "up"]);
        run(
            "ip",
            &["-n", ns, "addr", "add", &format!("{ns_addr}/30"), "dev", n],
        );
        run("ip", &["-n", ns, "link", "set", n, "up"]);
        run("ip", &["-n", ns, "link", "set", "lo", "up"]);
        link
    }

    /// `cmd` run inside the namespace (`ip netns exec`, which execs it: the child's pid is the
    /// program's own, so signals reach it), with the same arguments and environment changes.
    pub fn wrap(&self, cmd: &Command) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            c.current_dir(d);
        }
        c
    }

    /// Runs an nft script (one transaction) in the host namespace, or in the link's.
    fn nft(&self, inside: bool, script: &str) {
        use std::io::Write;
        let mut c = if inside {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &self.ns, "nft", "-f", "-"]);
            c
        } else {
            let mut c = Command::new("nft");
            c.args(["-f", "-"]);
            c
        };
        let mut child = c
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("nft is not installed ({e}): apt-get install nftables (.ci/run does)")
            });
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write nft script");
        let o = child.wait_with_output().expect("nft");
        assert!(
            o.status.success(),
            "nft {script}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }

    /// The nft table that cuts this link (one per link, so links cut and heal apart).
    fn table(&self) -> String {
        format!("inet {}", self.ns.replace('-', "_"))
    }

    /// Partitions silently: each end drops every packet that arrives from the other (an
    /// input rule on the receiving side, so no sender sees an error — no reset, no
    /// "operation not permitted"; calls hang and TCP retransmits), while both ends stay up.
    pub fn cut(&self) {
        for (inside, dev) in [(false, &self.host_if), (true, &self.ns_if)] {
            let t = self.table();
            self.nft(
                inside,
                &format!(
                    "table {t} {{\n chain cut {{\n  type filter hook input priority -300;\n  iifname \"{dev}\" drop\n }}\n}}\n"
                ),
            );
        }
    }

    /// Undoes [`Link::cut`]: whatever TCP retransmits now arrives.
    pub fn heal(&self) {
        let t = self.table();
        self.nft(false, &format!("delete table {t}\n"));
        self.nft(true, &format!("delete table {t}\n"));
    }

    /// Makes the link slow both ways: a token bucket of `kbit` per second (and 1 s of queue)
    /// on each end, so every statement and every reply waits its turn on the wire. (The
    /// kernels these tests run on need not have `netem`; a token bucket is in every one.)
    pub fn throttle(&self, kbit: u32) {
        let rate = format!("{kbit}kbit");
        let tbf = [
            "root", "tbf", "rate", &rate, "burst", "4kb", "latency", "1s",
        ];
        let mut host = vec!["qdisc", "replace", "dev", &self.host_if];
        host.extend_from_slice(&tbf);
        run("tc", &host);
        let mut inner = vec![
            "netns",
            "exec",
            &self.ns,
            "tc",
            "qdisc",
            "replace",
            "dev",
            &self.ns_if,
        ];
        inner.extend_from_slice(&tbf);
        run("ip", &inner);
    }

    /// Takes the host end down: the namespace's end loses its carrier (a pulled cable).
    pub fn down(&self) {
        run("ip", &["link", "set", &self.host_if, "down"]);
    }

    /// Brings the host end back up (its address and route return with it).
    pub fn up(&self) {
        run("ip", &["link", "set", &self.host_if, "up"]);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth end, and with it the host's (and the
        // namespace's own nft table); a cut's table in the host namespace goes explicitly.
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        drop_host_table(&self.ns);
    }
}

/// Deletes the host namespace's nft table of the link named `ns`, if there is one.
fn drop_host_table(ns: &str) {
    let _ = Command::new("nft")
        .args(["delete", "table", "inet", &ns.replace('-', "_")])
        .stderr(std::process::Stdio::null())
        .status();
}
