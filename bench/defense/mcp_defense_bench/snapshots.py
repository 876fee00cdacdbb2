"""A configuration snapshot diff (`config-snapshot-diff`) as the gateway meets
it at run time: its own configuration rewritten under it and reloaded.

The `baseline` snapshot becomes the config the gateway starts on, the
`current` one the config file it is then given (SIGHUP, as an operator
reloads). By the snapshot's shape:

| snapshot | gateway config |
|---|---|
| `tls`: `required` | the upstream over https (the harness's CA) |
| `tls`: anything else (`optional`, `disabled`) | the upstream over plain http, `allow_plaintext = true` |
| `allowedHosts` | the upstream policy's `[url_mode] allowed_hosts` (`*`: the list left empty, any host) and `[arguments] allowed_hosts` (its names; `*` has no spelling there) |

Other snapshot keys are not translated (the verdict says which). The gateway
runs as the harness runs every fixture: the `untrusted` preset (the policy
extends it) and the gateway's defaults, so `[reload] on_weakened` is `apply`.
Detected: the reload's `config_weakened` audit event or
`portcullis_config_weakened_total`; enforced only if the reload was refused.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from harness.gateway import toml_value
from harness.observe import Outcome
from harness.session import Session
from harness.upstream import ServerScript

TRANSLATED = {"tls", "allowedHosts"}
HOST = re.compile(r"^(\*\.)?[A-Za-z0-9.-]+$")
ANY = "*"


def tls_required(snapshot: dict[str, Any]) -> bool:
    return str(snapshot.get("tls", "required")).lower() == "required"


def policy_text(snapshot: dict[str, Any]) -> str:
    hosts = [str(h) for h in snapshot.get("allowedHosts") or []]
    lines = ['extends = "untrusted"']
    if hosts:
        names = [h for h in hosts if h != ANY and HOST.match(h)]
        url_mode = [] if ANY in hosts else names
        lines += ["[url_mode]", f"allowed_hosts = {toml_value(url_mode)}",
                  "[arguments]", f"allowed_hosts = {toml_value(names)}"]
    return "\n".join(lines) + "\n"


def upstream_for(s: Session, snapshot: dict[str, Any], ca_file: str) -> None:
    """The session's one upstream as the snapshot says it is reached."""
    conf = s.gw.upstreams[0]
    address = conf.url.split("://", 1)[1]
    if tls_required(snapshot):
        conf.url, conf.ca_file = "https://" + address, ca_file
        conf.extra.pop("allow_plaintext", None)
    else:
        conf.url, conf.ca_file = "http://" + address, None
        conf.extra["allow_plaintext"] = True


def config_snapshot_diff(inp: dict[str, Any], certs: Any) -> Outcome:
    policies = Path(tempfile.mkdtemp(prefix="portcullis-bench-policies-"))
    try:
        return drift(inp, certs, policies)
    finally:
        shutil.rmtree(policies, ignore_errors=True)


def drift(inp: dict[str, Any], certs: Any, policies: Path) -> Outcome:
    baseline, current = inp.get("baseline") or {}, inp.get("current") or {}
    (policies / "snapshot.toml").write_text(policy_text(baseline))
    extra = f"\n[policies]\ndir = {toml_value(str(policies))}\n"
    server = ServerScript("server", tools=[{"name": "status", "inputSchema": {"type": "object"}}])
    secure = tls_required(baseline)
    s = Session([server], policy="snapshot", tls=certs.leaf("server") if secure else None,
                ca_file=str(certs.ca_cert) if secure else None, extra_config=extra,
                upstream_extra={} if secure else {"allow_plaintext": True})
    try:
        s.list_tools()
        (policies / "snapshot.toml").write_text(policy_text(current))
        upstream_for(s, current, str(certs.ca_cert))
        log = s.gw.reload(s.gw.upstreams, s.gw.routes, extra)
    except BaseException:
        s.close()
        raise
    out = s.outcome
    for line in log.splitlines():
        if "config reload refused" in line:
            out.refused.append("reload refused: " + line.split("config reload refused", 1)[1][:200])
        elif "config reload failed" in line:
            out.notes.append("the reload failed: " + line[-200:])
    weakened = [dict(labels).get("control") for (name, labels), value in s.gw.metrics().items()
                if name == "portcullis_config_weakened_total" and value > 0]
    out.recorded += [f"metric:config_weakened_total{{control={c}}}" for c in weakened]
    skipped = sorted((set(baseline) | set(current)) - TRANSLATED)
    if skipped:
        out.notes.append("not translated: " + ", ".join(skipped))
    return s.finish()
