//! The hosts of a scenario and the switch between them, inside the sandbox.
//!
//! ```text
//!   sandbox namespace: bridge "switch" 10.77.0.1/24; 10.77.1.0/24 on lo (delay lines)
//!      │ sw-dispatcher        │ sw-w1                 │ sw-reader
//!   ┌──┴────────────┐   ┌─────┴─────────┐   ┌─────────┴─────┐
//!   │ eth0 10.77.0.2 │   │ eth0 10.77.0.11│   │ eth0 10.77.0.100│   one network namespace per host
//!   └───────────────┘   └───────────────┘   └───────────────┘
//! ```
//!
//! Every host has one veth pair: `eth0` in its namespace, `sw-<name>` on the
//! switch. Links are cut without netfilter (not installed here): a host is
//! unplugged by taking its switch port down, and two groups of hosts are
//! partitioned by blackhole routes on both sides. Each host's default route
//! points at the switch, where the delay proxy listens on the host's
//! "delayed" address `10.77.1.<n>` (see `delay_proxy`).

use std::net::Ipv4Addr;
use std::process::Command;

/// The switch's address on the hosts' subnet.
pub const SWITCH: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// One host: a network namespace with one address.
#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    /// Its own address (`10.77.0.<n>`).
    pub address: Ipv4Addr,
    /// Its address behind the delay line (`10.77.1.<n>`), served by the
    /// proxy on the switch.
    pub delayed: Ipv4Addr,
    namespace: String,
    switch_port: String,
}

impl Host {
    /// `ip netns exec <its namespace> <program>`: a command run on this host.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.namespace, program]);
        command
    }

    /// `tfdata <args>` on this host.
    pub fn tfdata(&self, args: &[&str]) -> Command {
        let mut command = self.command(crate::common::process::BIN);
        command.args(args);
        command
    }
}

/// The switch and the hosts plugged into it. Dropping it deletes the
/// namespaces (the sandbox's end would too).
#[derive(Default)]
pub struct Network {
    hosts: Vec<Host>,
}

impl Network {
    /// The switch: a bridge in the sandbox's namespace.
    pub fn new() -> Network {
        run("ip", &["link", "set", "lo", "up"]);
        run("ip", &["link", "add", "switch", "type", "bridge"]);
        run(
            "ip",
            &["addr", "add", &format!("{SWITCH}/24"), "dev", "switch"],
        );
        run("ip", &["link", "set", "switch", "up"]);
        run("ip", &["addr", "add", "10.77.1.0/24", "dev", "lo"]);
        Network::default()
    }

    /// A new host `name` (at most 12 characters) at `10.77.0.<n>`, plugged in.
    pub fn add_host(&mut self, name: &str, n: u8) -> Host {
        assert!(name.len() <= 12, "interface names are at most 15 bytes");
        assert!((2..=254).contains(&n));
        let host = Host {
            name: name.to_string(),
            address: Ipv4Addr::new(10, 77, 0, n),
            delayed: Ipv4Addr::new(10, 77, 1, n),
            namespace: format!("tfdata-{name}"),
            switch_port: format!("sw-{name}"),
        };
        let ns = host.namespace.as_str();
        run("ip", &["netns", "add", ns]);
        let port = host.switch_port.as_str();
        run(
            "ip",
            &[
                "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ],
        );
        run("ip", &["link", "set", port, "master", "switch", "up"]);
        let address = format!("{}/24", host.address);
        run("ip", &["-n", ns, "addr", "add", &address, "dev", "eth0"]);
        run("ip", &["-n", ns, "link", "set", "eth0", "up"]);
        run("ip", &["-n", ns, "link", "set", "lo", "up"]);
        run(
            "ip",
            &[
                "-n",
                ns,
                "route",
                "add",
                "default",
                "via",
                &SWITCH.to_string(),
            ],
        );
        self.hosts.push(host.clone());
        host
    }

    /// Pulls `host`'s cable: its switch port goes down, so nothing reaches
    /// it or leaves it; open connections stall (TCP retransmits), they do
    /// not break.
    pub fn unplug(&self, host: &Host) {
        run("ip", &["link", "set", &host.switch_port, "down"]);
    }

    /// Plugs `host` back in.
    pub fn plug(&self, host: &Host) {
        run("ip", &["link", "set", &host.switch_port, "up"]);
    }

    /// Cuts every link between `a` and each of `others`, both ways, with
    /// blackhole routes (packets are dropped silently, as on a broken path);
    /// their links to everyone else stay up.
    pub fn partition(&self, a: &Host, others: &[&Host]) {
        self.blackholes("add", a, others);
    }

    /// Removes what [`partition`](Self::partition) added.
    pub fn heal(&self, a: &Host, others: &[&Host]) {
        self.blackholes("del", a, others);
    }

    fn blackholes(&self, action: &str, a: &Host, others: &[&Host]) {
        for b in others {
            for (from, to) in [(a, *b), (*b, a)] {
                for target in [to.address, to.delayed] {
                    let target = format!("{target}/32");
                    run(
                        "ip",
                        &["-n", &from.namespace, "route", action, "blackhole", &target],
                    );
                }
            }
        }
    }

    /// Makes `host` reach every other host only through the delay lines:
    /// their own addresses are blackholed on it.
    pub fn only_delayed_paths(&self, host: &Host) {
        for other in self.hosts.iter().filter(|h| h.name != host.name) {
            let target = format!("{}/32", other.address);
            run(
                "ip",
                &["-n", &host.namespace, "route", "add", "blackhole", &target],
            );
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for host in &self.hosts {
            let _ = Command::new("ip")
                .args(["netns", "del", &host.namespace])
                .output();
        }
    }
}

/// Makes every process of the sandbox resolve `name` to each of
/// `addresses` (DNS with several records, as a Kubernetes headless Service
/// answers): a hosts file bind-mounted over the sandbox's `/etc/hosts`. The
/// sandbox's mount namespace is its own, so nothing outside it sees the
/// change, and `ip netns exec` passes it on to every host.
pub fn resolve_name(name: &str, addresses: &[Ipv4Addr]) -> tempfile::NamedTempFile {
    use std::io::Write as _;
    let mut hosts = tempfile::NamedTempFile::new().expect("temp hosts file");
    writeln!(hosts, "127.0.0.1 localhost").expect("write hosts");
    for a in addresses {
        writeln!(hosts, "{a} {name}").expect("write hosts");
    }
    hosts.flush().expect("write hosts");
    let path = hosts.path().to_str().expect("utf-8 temp path").to_string();
    run("mount", &["--bind", &path, "/etc/hosts"]);
    hosts
}

/// Runs `program args` to completion; panics with its stderr if it fails.
pub fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}
