#!/usr/bin/env python3
"""README's cluster recipe, run for real on one machine: `ray up` / `ray submit` / `ray down` over SSH
on a head and two worker "hosts" made of Linux namespaces, a worker lost mid-run, and a client
without the cluster's token refused.

    sudo PYTHONPATH=$PWD .venv/bin/python bench/cluster_smoke.py      # root only; ~15 min on 2 cores

Each host is a network namespace on a private bridge (its address exists only inside the
namespaces made here), a PID namespace (so one host's `ray stop` sees only its own processes),
a UTS namespace (its own hostname) and a mount namespace in which its own folders are mounted
over /root and /tmp (its own home, Ray temp folder and core claims). Each runs `sshd`; a fourth
namespace, the client, runs Ray's cluster launcher against them with the config made from
cluster.yaml: the IPs, `root` and a fresh key; the setup commands link the project's venv built
on this machine instead of installing from the package registries (unreachable from the
namespaces) and put the synced checkout first on PYTHONPATH; each host's `ray start` gets its
share of this machine (--num-cpus, --object-store-memory) and one worker declares an `edgetpu`.

Checks, in order: the node list (3 nodes, the edgetpu on its worker, and a task asking for it runs
there); a client without the token, and one with a wrong token, refused while a client with it
gets in; `partition`; a HARL grid sweep whose trials ran on both workers (Tune's `node_ip`);
`tune --runners 0` with one worker's Ray killed once the records hold some trials, then every
trial in the records once, none failed, and the lost runner's candidates measured on the other
worker; `ray down`. Everything made here (namespaces, processes, mounts, the work folder's
keys and token) is torn down on exit, also on failure or Ctrl-C. Writes bench/results/cluster_smoke.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
VENV = Path(sys.prefix)  # the project's venv this script runs in; the hosts use it too
PREFIX = "hts"  # namespace and link names
SUBNET = "10.222.0"
HOSTS = {"client": f"{SUBNET}.2", "head": f"{SUBNET}.10", "w1": f"{SUBNET}.11", "w2": f"{SUBNET}.12"}
MB = 1024**2
# this machine split over the hosts: the head only drives (no CPUs for tasks), one core per worker
HOST_RAY_FLAGS = {
    "head": f"--num-cpus=0 --object-store-memory={200 * MB}",
    "w1": f"--num-cpus=1 --object-store-memory={150 * MB}",
    "w2": f"--num-cpus=1 --object-store-memory={150 * MB}",
}
HOST_PROBE_FLAGS = {"head": "--edgetpu 0 --gpus 0", "w1": "--edgetpu 0 --gpus 0", "w2": "--edgetpu 1 --gpus 0"}
TUNE_TRIALS = 48
KILL_AT = 16  # records holding this many trials: the lost host goes
SUBMIT_TIMEOUT_S = 1800


def sh(cmd: str, check: bool = True, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, check=check, text=True, capture_output=True, **kw)


def say(text: str) -> None:
    print(text, flush=True)


class Machine:
    """The namespaces, host processes and work folder; `close` undoes all of it."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.holders: dict[str, subprocess.Popen] = {}
        self.made_netns: list[str] = []

    # ------------------------------------------------------------------ build
    def build(self) -> None:
        self._ensure_packages()
        self._remove_leftovers()
        sw = f"{PREFIX}-sw"
        self._netns(sw)
        sh(f"ip -n {sw} link set lo up && ip -n {sw} link add br0 type bridge && ip -n {sw} link set br0 up")
        key = self.work / "client" / "home" / ".ssh" / "id_ed25519"
        for name in HOSTS:
            home = self.work / name / "home"
            (home / ".ssh").mkdir(parents=True, exist_ok=True)
            (self.work / name / "tmp").mkdir(parents=True, exist_ok=True)
            os.chmod(self.work / name / "tmp", 0o1777)
        sh(f"ssh-keygen -q -t ed25519 -N '' -f {key}")
        for index, (name, ip) in enumerate(HOSTS.items()):
            ns = f"{PREFIX}-{name}"
            self._netns(ns)
            a, b = f"{PREFIX}{index}a", f"{PREFIX}{index}b"
            sh(f"ip link add {a} type veth peer name {b}")
            sh(f"ip link set {a} netns {sw} && ip link set {b} netns {ns}")
            sh(f"ip -n {sw} link set {a} master br0 up")
            sh(f"ip -n {ns} link set {b} name eth0 && ip -n {ns} addr add {ip}/24 dev eth0 "
               f"&& ip -n {ns} link set eth0 up && ip -n {ns} link set lo up")
            if name != "client":
                self._write_host_files(name, ip, key)
            self._start_holder(name)
        for name, ip in HOSTS.items():
            if name != "client":
                self._wait_ssh(ip)

    def _ensure_packages(self) -> None:
        missing = [pkg for pkg, binary in (("openssh-server", "/usr/sbin/sshd"), ("openssh-client", "ssh"),
                                           ("rsync", "rsync")) if shutil.which(binary) is None]
        if missing:
            say(f"installing {' '.join(missing)}")
            sh("apt-get update -qq")
            sh(f"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {' '.join(missing)}")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation folder

    def _remove_leftovers(self) -> None:
        """Namespaces of an earlier run that was killed before it could clean up."""
        for line in sh("ip netns list").stdout.splitlines():
            name = line.split()[0] if line.strip() else ""
            if name.startswith(f"{PREFIX}-"):
                self._kill_netns_processes(name)
                sh(f"ip netns del {name}", check=False)

    def _netns(self, name: str) -> None:
        sh(f"ip netns add {name}")
        self.made_netns.append(name)

    def _write_host_files(self, name: str, ip: str, key: Path) -> None:
        base = self.work / name
        home = base / "home"
        shutil.copy(key.with_suffix(".pub"), home / ".ssh" / "authorized_keys")
        sh(f"ssh-keygen -q -t ed25519 -N '' -f {base / 'host_key'}")
        (base / "sshd_config").write_text("\n".join([
            "Port 22", f"ListenAddress {ip}", f"HostKey {base / 'host_key'}", f"PidFile {base / 'sshd.pid'}",
            "AuthorizedKeysFile /root/.ssh/authorized_keys", "PermitRootLogin prohibit-password",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "PrintMotd no", "Subsystem sftp internal-sftp", "",
        ]))
        # what this "machine" holds: its share of the real one, and the devices it declares
        (home / ".hiertune-smoke-ray-flags").write_text(HOST_RAY_FLAGS[name] + "\n")
        (home / ".hiertune-smoke-probe-flags").write_text(HOST_PROBE_FLAGS[name] + "\n")

    def _start_holder(self, name: str) -> None:
        """The host's first process: its namespaces, its folders over /root and /tmp, then sshd
        (PID 1 of the host: it reaps the daemons `ray start` leaves behind)."""
        base = self.work / name
        last = "exec sleep infinity" if name == "client" else f"exec /usr/sbin/sshd -D -e -f {base / 'sshd_config'}"
        inner = (f"hostname {PREFIX}-{name} && mount --bind {base / 'home'} /root && "
                 f"mount --bind {base / 'tmp'} /tmp && {last}")
        log = open(base / "holder.log", "w")
        self.holders[name] = subprocess.Popen(
            ["ip", "netns", "exec", f"{PREFIX}-{name}", "unshare", "--mount", "--uts", "--pid", "--fork",
             "--kill-child", "--mount-proc", "--propagation", "private", "sh", "-c", inner],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def _wait_ssh(self, ip: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.client(f"ssh -o StrictHostKeyChecking=no -o BatchMode=yes -o ConnectTimeout=3 "
                           f"root@{ip} hostname", check=False, timeout=20).returncode == 0:
                return
            time.sleep(0.5)
        raise RuntimeError(f"sshd on {ip} did not answer within {timeout_s:.0f}s; see {self.work}/*/holder.log")

    # ------------------------------------------------------------------ run inside
    def host_pid(self, name: str) -> int:
        """Root-namespace pid of the host's PID 1 (the child of its `unshare`)."""
        parent = self.holders[name].pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
            if children:
                return int(children[0])
            time.sleep(0.1)
        raise RuntimeError(f"host {name} did not start; see {self.work / name / 'holder.log'}")

    def client_argv(self, command: str, env: dict[str, str] | None = None) -> list[str]:
        base_env = {"HOME": "/root", "PATH": f"{VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                    "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT), "TERM": "dumb"}
        base_env.update(env or {})
        return ["nsenter", "-t", str(self.host_pid("client")), "-m", "-n", "-u", "-p", "--", "env", "-i",
                *[f"{k}={v}" for k, v in base_env.items()], "bash", "-c", f"cd {shlex.quote(str(ROOT))} && {command}"]

    def client(self, command: str, check: bool = True, timeout: float = 600,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.client_argv(command, env), text=True, capture_output=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"client: `{command}` failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def on_head(self, command: str, check: bool = True, timeout: float = 300,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """A command on the head, over SSH from the client (a driver needs a Ray node where it runs)."""
        head_env = {"HOME": "/root", "PATH": f"{VENV}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **(env or {})}
        remote = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in head_env.items()) + \
            f" bash -c {shlex.quote(command)}"
        return self.client(f"ssh -o StrictHostKeyChecking=no -o BatchMode=yes root@{HOSTS['head']} "
                           f"{shlex.quote(remote)}", check=check, timeout=timeout)

    def kill_ray_on(self, name: str) -> list[str]:
        """SIGKILL every process of a host but its sshd: its raylet, object store, workers, runners."""
        return self._kill_netns_processes(f"{PREFIX}-{name}", spare_pid=self.host_pid(name))

    @staticmethod
    def _kill_netns_processes(netns: str, spare_pid: int | None = None) -> list[str]:
        killed = []
        for pid in sh(f"ip netns pids {netns}", check=False).stdout.split():
            if int(pid) == spare_pid:
                continue
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
                os.kill(int(pid), signal.SIGKILL)
                killed.append(name)
            except (OSError, ValueError):
                continue
        return killed

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        for name, proc in self.holders.items():
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its PID-namespace child dies with it (--kill-child)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)
        for ns in reversed(self.made_netns):
            self._kill_netns_processes(ns)
            sh(f"ip netns del {ns}", check=False)
        shutil.rmtree(self.work, ignore_errors=True)  # keys and the cluster's token go with it


# ---------------------------------------------------------------------- the cluster config
def smoke_config(key_path: str) -> dict[str, Any]:
    """cluster.yaml with this machine's hosts; what differs from the real recipe is said inline."""
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["cluster_name"] = "hiertune-smoke"
    config["provider"]["head_ip"] = HOSTS["head"]
    config["provider"]["worker_ips"] = [HOSTS["w1"], HOSTS["w2"]]
    config["auth"] = {"ssh_user": "root", "ssh_private_key": key_path}
    config["max_workers"] = 2
    setup = []
    for command in config["setup_commands"]:
        if "python3 -m venv" in command:  # no registries here: the venv already built on this machine
            setup.append(f"ln -sfn {VENV} ~/hiertune-venv")
        elif "pip install" in command:
            continue
        else:
            setup.append(command)
    # that venv has hiertune installed from elsewhere: the synced checkout comes first
    setup.append("grep -qs 'PYTHONPATH=$HOME/hiertune' ~/.bashrc || echo 'export PYTHONPATH=$HOME/hiertune' >> ~/.bashrc")
    config["setup_commands"] = setup
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = config[key][-1]
        assert "--ray-start-args)" in start and "ray start" in start, start
        start = start.replace("--ray-start-args)", "--ray-start-args $(cat ~/.hiertune-smoke-probe-flags))")
        start = start.replace("ray start ", "ray start $(cat ~/.hiertune-smoke-ray-flags) ", 1)
        config[key][-1] = "export PYTHONPATH=$HOME/hiertune; " + start
    return config


# ---------------------------------------------------------------------- probes run on the client
NODES_PROBE = """
import json, ray
ray.init(address="{head}:6379", log_to_driver=False)
nodes = [dict(ip=n["NodeManagerAddress"], alive=n["Alive"], cpu=n["Resources"].get("CPU", 0),
              store_mb=round(n["Resources"].get("object_store_memory", 0) / 2**20),
              edgetpu=n["Resources"].get("edgetpu", 0)) for n in ray.nodes()]
found = None
if any(n["edgetpu"] for n in nodes if n["alive"]):
    @ray.remote(num_cpus=0, resources={{"edgetpu": 1}})
    def where():
        return ray.util.get_node_ip_address()
    found = ray.get(where.remote(), timeout=60)
print(json.dumps(dict(nodes=nodes, edgetpu_task_ran_on=found)))
"""

TOKENLESS_PROBE = """
import ray
ray.init(address="{head}:6379", log_to_driver=False)
print("CONNECTED", len(ray.nodes()))
"""


def node_list(machine: Machine) -> dict[str, Any]:
    out = machine.on_head(f"python -c {shlex.quote(NODES_PROBE.format(head=HOSTS['head']))}", timeout=120,
                          env={"RAY_AUTH_MODE": "token"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def wait_for_nodes(machine: Machine, count: int, timeout_s: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            listing = node_list(machine)
            if sum(n["alive"] for n in listing["nodes"]) >= count and listing["edgetpu_task_ran_on"]:
                return listing
        except (RuntimeError, json.JSONDecodeError, subprocess.TimeoutExpired):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster did not reach {count} live nodes within {timeout_s:.0f}s")
        time.sleep(10)


def _verdict(proc: subprocess.CompletedProcess, let_in: str) -> dict[str, Any]:
    text = (proc.stdout + proc.stderr).strip()
    refused = let_in not in proc.stdout and proc.returncode != 0
    reason = next((line.strip() for line in text.splitlines()
                   if "auth" in line.lower() or "token" in line.lower()), text.splitlines()[-1] if text else "")
    return {"refused": refused, "returncode": proc.returncode, "says": reason[:300]}


def auth_checks(machine: Machine) -> dict[str, Any]:
    """`ray.init(address=...)` on the head without the token or with a wrong one, and `ray status`
    from another host without it, must be refused; `ray status` with the token gets in."""
    results = {}
    no_token_home = "/tmp/no-token-home"  # no ~/.ray/auth_token there
    for label, env in {"ray.init on the head, no token (RAY_AUTH_MODE=disabled)": {"RAY_AUTH_MODE": "disabled"},
                       "ray.init on the head, wrong token": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 32}}.items():
        proc = machine.on_head(f"mkdir -p {no_token_home} && "
                               f"timeout 90 python -c {shlex.quote(TOKENLESS_PROBE.format(head=HOSTS['head']))}",
                               check=False, timeout=150, env={**env, "HOME": no_token_home})
        results[label] = _verdict(proc, "CONNECTED")
    status = f"timeout 90 ray status --address={HOSTS['head']}:6379"
    results["ray status from the client host, no token"] = _verdict(
        machine.client(status, check=False, timeout=150, env={"RAY_AUTH_MODE": "disabled", "HOME": "/tmp"}), "Node status")
    with_token = machine.client(status, check=False, timeout=150, env={"RAY_AUTH_MODE": "token"})
    results["ray status from the client host, with the token"] = {
        "refused": "Node status" not in with_token.stdout, "returncode": with_token.returncode,
        "says": " ".join(line.strip() for line in with_token.stdout.splitlines() if "node_" in line or "CPU" in line)[:300]}
    return results


# ---------------------------------------------------------------------- submits
def submit_argv(machine: Machine, config: Path, args: str) -> list[str]:
    return machine.client_argv(f"ray submit {config} hiertune/cluster_entry.py -- {args}")


def run_submit(machine: Machine, config: Path, args: str, log: Path) -> str:
    say(f"\n$ ray submit {config.name} hiertune/cluster_entry.py -- {args}")
    with log.open("w") as out:
        proc = subprocess.run(submit_argv(machine, config, args), stdout=out, stderr=subprocess.STDOUT,
                              text=True, timeout=SUBMIT_TIMEOUT_S)
    text = log.read_text()
    say(tables_of(text))
    if proc.returncode != 0:
        raise RuntimeError(f"ray submit ... {args} failed ({proc.returncode}); see {log}:\n{text[-3000:]}")
    return text


def tables_of(text: str) -> str:
    """The lines a reader wants from a submit's output: rich tables, summaries, warnings."""
    keep = []
    for line in text.splitlines():
        line = line.rstrip()
        if line[:1] in "┏┃┡│└━╇┗" or line.lstrip()[:1] in "┏┃┡│└" or any(
                w in line for w in ("hiertune on the Ray cluster", "best:", "search ", "measured again",
                                    "resuming", "stopped at", "plan ->", "error")):
            keep.append(line)
    return "\n".join(keep)


def tune_with_a_lost_host(machine: Machine, config: Path, log: Path) -> dict[str, Any]:
    records = machine.work / "head" / "home" / "runs" / "smoke_tune.jsonl"
    args = f"tune --workload GMM-S --trials {TUNE_TRIALS} --runners 0 --records runs/smoke_tune.jsonl"
    say(f"\n$ ray submit {config.name} hiertune/cluster_entry.py -- {args}   (w1 lost at {KILL_AT} trials)")
    killed: list[str] = []
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(submit_argv(machine, config, args), stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            while proc.poll() is None and time.monotonic() - start < SUBMIT_TIMEOUT_S:
                if not killed and records.exists() and records.read_text().count('"kind":"measure"') >= KILL_AT:
                    killed = machine.kill_ray_on("w1")
                    at = records.read_text().count('"kind":"measure"')
                    say(f"w1 lost: killed {len(killed)} processes ({', '.join(sorted(set(killed)))}) "
                        f"with {at} trials in the records")
                time.sleep(0.5)
            proc.wait(timeout=max(1, SUBMIT_TIMEOUT_S - (time.monotonic() - start)))
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    say(tables_of(text))
    if proc.returncode != 0:
        raise RuntimeError(f"tune submit failed ({proc.returncode}); see {log}:\n{text[-3000:]}")
    measures = [json.loads(line) for line in records.read_text().splitlines() if '"kind":"measure"' in line]
    numbers = Counter(m["trial"] for m in measures)
    keys = Counter(m["key"] for m in measures)
    failed = [m["error"] for m in measures if m.get("error")]
    moved = [line.strip() for line in text.splitlines() if "measured again on" in line]
    check = {
        "killed_processes": len(killed), "trials_in_records": len(measures),
        "trial_numbers_once": sorted(numbers) == list(range(1, TUNE_TRIALS + 1)) and set(numbers.values()) == {1},
        "keys_once": set(keys.values()) == {1}, "failed_trials": failed,
        "lost_runner_candidates_measured_elsewhere": moved, "seconds": round(time.monotonic() - start, 1),
    }
    check["ok"] = (bool(killed) and len(measures) == TUNE_TRIALS and check["trial_numbers_once"]
                   and check["keys_once"] and not any("runner" in f for f in failed)
                   and any(f"lost runner at {HOSTS['w1']}" in m and HOSTS["w2"] in m for m in moved))
    return check


def sweep_spread(machine: Machine, text: str) -> dict[str, Any]:
    summary = json.loads((machine.work / "head" / "home" / "runs" / "smoke_sweep" / "sweep.json").read_text())
    spread = Counter(t["metrics"].get("node_ip") for t in summary["trials"])
    statuses = Counter(t["status"] for t in summary["trials"])
    return {"trials_per_node": dict(spread), "statuses": dict(statuses),
            "ok": {HOSTS["w1"], HOSTS["w2"]} <= set(spread) and len(summary["trials"]) == 4}


# ---------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep-logs", default=str(RESULTS / "cluster_smoke_logs"),
                        help="folder for the submits' full output")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("cluster_smoke: needs root (network, PID and mount namespaces, sshd); run it with sudo", file=sys.stderr)
        return 2
    logs = Path(args.keep_logs)
    logs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hiertune-cluster-smoke-", dir="/var/tmp"))  # not under /tmp: hosts mount over it
    machine = Machine(work)
    report: dict[str, Any] = {"hosts": HOSTS, "ray_flags": HOST_RAY_FLAGS, "probe_flags": HOST_PROBE_FLAGS}

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    config_path = work / "client" / "home" / "cluster.smoke.yaml"
    started = time.monotonic()
    ok = False
    try:
        machine.build()
        say(f"hosts up: {', '.join(f'{n} {ip}' for n, ip in HOSTS.items())} (work folder {work})")
        config_path.write_text(yaml.safe_dump(smoke_config("~/.ssh/id_ed25519"), sort_keys=False))
        machine.client("ray get-auth-token --generate >/dev/null")  # the cluster's token, client side only
        say("\n$ ray up -y cluster.smoke.yaml")
        up = machine.client(f"ray up -y {config_path} --no-config-cache", timeout=900)
        (logs / "ray_up.log").write_text(up.stdout + up.stderr)
        listing = wait_for_nodes(machine, 3)
        report["nodes"] = listing
        say("node list (a client holding the token):")
        for n in listing["nodes"]:
            say(f"  {n['ip']:<12} alive={n['alive']} CPU={n['cpu']:g} object_store={n['store_mb']} MiB "
                f"edgetpu={n['edgetpu']:g}")
        say(f"  a task asking for edgetpu ran on {listing['edgetpu_task_ran_on']}")
        report["auth"] = auth_checks(machine)
        for label, result in report["auth"].items():
            say(f"{label}: {'refused' if result['refused'] else 'let in'} - {result['says']}")
        report["partition_ok"] = bool(run_submit(machine, config_path, "partition --model resnet152 --stages 6",
                                                 logs / "partition.log"))
        sweep_text = run_submit(machine, config_path, "sweep harl --param c=0.1,0.25 --param tau=64,256 --search grid "
                                "--concurrent 2 --out runs/smoke_sweep", logs / "sweep.log")
        report["sweep"] = sweep_spread(machine, sweep_text)
        say(f"sweep trials per node (Tune's node_ip): {report['sweep']['trials_per_node']}")
        report["lost_host"] = tune_with_a_lost_host(machine, config_path, logs / "tune.log")
        lost = report["lost_host"]
        say(f"lost-host check: {lost['trials_in_records']} trials in the records, numbers 1-{TUNE_TRIALS} once: "
            f"{lost['trial_numbers_once']}, keys once: {lost['keys_once']}, failed: {len(lost['failed_trials'])}; "
            + "; ".join(lost["lost_runner_candidates_measured_elsewhere"]))
        say("\n$ ray down -y cluster.smoke.yaml")
        down = machine.client(f"ray down -y {config_path}", timeout=300)
        (logs / "ray_down.log").write_text(down.stdout + down.stderr)
        report["down_ok"] = True
        refusals = [r["refused"] for label, r in report["auth"].items() if "with the token" not in label]
        let_in = [not r["refused"] for label, r in report["auth"].items() if "with the token" in label]
        ok = (all(refusals) and all(let_in) and report["sweep"]["ok"] and lost["ok"]
              and listing["edgetpu_task_ran_on"] == HOSTS["w2"])
    finally:
        report["seconds"] = round(time.monotonic() - started, 1)
        report["ok"] = ok
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "cluster_smoke.json").write_text(json.dumps(report, indent=1))
        machine.close()
        left = [line for line in sh("ip netns list").stdout.splitlines() if line.startswith(f"{PREFIX}-")]
        say(f"torn down: namespaces left {left or 'none'}, work folder {'gone' if not work.exists() else 'LEFT'}")
    say(f"cluster smoke {'PASSED' if ok else 'FAILED'} in {report['seconds']:.0f} s -> {RESULTS / 'cluster_smoke.json'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
