"""Checks that dashboards/ and docker/ agree with the gateway and with each other.

Usage: python3 check_ops_files.py REPO_ROOT SCRAPE_FILE
SCRAPE_FILE is a /metrics scrape of a running gateway after a payment flow. Every metric a
dashboard panel or an alert rule uses must be in it; paths, ports and job names in the
compose file, the Prometheus config and the Dockerfile must point at things that exist.
"""
import json
import os
import re
import sys

import yaml

failures = []
checks = 0


def check(condition, message):
    global checks
    checks += 1
    if not condition:
        failures.append(message)


def metric_names(expr):
    names = set()
    for name in re.findall(r"\bkassa_[a-z0-9_]+", expr):
        names.add(re.sub(r"_(bucket|sum|count)$", "", name))
    return names


def main(root, scrape_file):
    root = os.path.realpath(root)
    scrape = open(scrape_file).read()
    exported = set(re.findall(r"^# TYPE (\S+) ", scrape, re.M))
    check(len(exported) >= 15, f"the scrape exports only {len(exported)} metrics")

    dashboard = json.load(open(os.path.join(root, "dashboards/kassa.json")))
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    check("DS_PROMETHEUS" in variables, "the dashboard has no Prometheus data source variable")
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    for needed in ["Overview", "WebSocket", "Sessions", "Upstream (Swedbank Pay)", "Event log"]:
        check(needed in rows, f"the dashboard has no {needed} row")
    used = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            used |= metric_names(target["expr"])
            check(target["datasource"]["uid"] == "${DS_PROMETHEUS}", f"panel {panel['title']} does not use the data source variable")
    for name in sorted(used):
        check(name in exported, f"dashboard uses {name}, which the gateway does not export")

    rules = yaml.safe_load(open(os.path.join(root, "dashboards/alerts.yml")))
    alert_names = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            alert_names.append(rule["alert"])
            for name in metric_names(rule["expr"]):
                check(name in exported, f"alert {rule['alert']} uses {name}, which the gateway does not export")
    for needed in ["KassaUpstreamErrorRate", "KassaPushLatencyHigh", "KassaEventLogLag", "KassaSlowConsumerCloses", "KassaNotScraped"]:
        check(needed in alert_names, f"no alert {needed}")

    docker = os.path.join(root, "docker")
    prometheus = yaml.safe_load(open(os.path.join(docker, "prometheus.yml")))
    jobs = {j["job_name"]: j for j in prometheus["scrape_configs"]}
    check("kassa" in jobs, "Prometheus has no job named kassa")
    check(all('job="kassa"' in r["expr"] for g in rules["groups"] for r in g["rules"] if r["alert"] == "KassaNotScraped"),
          "the no-scrape alert does not name the kassa job")
    check(jobs["kassa"].get("metrics_path") == "/metrics", "Prometheus does not scrape /metrics")
    targets = jobs["kassa"]["static_configs"][0]["targets"]

    compose = yaml.safe_load(open(os.path.join(docker, "compose.yaml")))
    services = compose["services"]
    for needed in ["gateway", "simulator", "prometheus", "grafana"]:
        check(needed in services, f"compose has no {needed} service")
    gateway = services["gateway"]
    listen_port = gateway["environment"]["KASSA_LISTEN"].rsplit(":", 1)[1]
    check(f"gateway:{listen_port}" in targets, f"Prometheus scrapes {targets}, the gateway listens on {listen_port}")
    check(any(p.endswith(":" + listen_port) for p in gateway["ports"]), "the gateway's port is not published")
    sim_port = services["simulator"]["command"][-1].rsplit(":", 1)[1]
    check(gateway["environment"]["KASSA_UPSTREAM_URL"] == f"http://simulator:{sim_port}", "the gateway does not point at the simulator's port")
    check(gateway["environment"]["KASSA_ALLOWED_UPSTREAM_HOSTS"] == "simulator", "the simulator host is not allowed upstream")
    for name, service in services.items():
        build = service.get("build")
        if build:
            context = os.path.normpath(os.path.join(docker, build["context"]))
            check(os.path.isfile(os.path.join(context, build["dockerfile"])), f"{name}: no Dockerfile at {build['dockerfile']}")
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[0], volume.split(":")[1]
            if source.startswith("."):
                check(os.path.exists(os.path.normpath(os.path.join(docker, source))), f"{name}: {source} does not exist")
    mounts = {v.split(":")[1]: v.split(":")[0] for v in services["prometheus"]["volumes"]}
    for rule_file in prometheus["rule_files"]:
        check(rule_file in mounts and os.path.normpath(os.path.join(docker, mounts[rule_file])) == os.path.join(root, "dashboards/alerts.yml"),
              f"Prometheus loads {rule_file}, which is not the alert rules file")
    provider = yaml.safe_load(open(os.path.join(docker, "grafana/provisioning/dashboards/kassa.yaml")))
    path = provider["providers"][0]["options"]["path"]
    grafana_mounts = {v.split(":")[1]: v.split(":")[0] for v in services["grafana"]["volumes"]}
    check(path in grafana_mounts and os.path.normpath(os.path.join(docker, grafana_mounts[path])) == os.path.join(root, "dashboards"),
          "Grafana's dashboard provider does not read dashboards/")
    datasource = yaml.safe_load(open(os.path.join(docker, "grafana/provisioning/datasources/prometheus.yaml")))
    check(datasource["datasources"][0]["url"] == "http://prometheus:9090", "Grafana does not point at the prometheus service")

    dockerfile = open(os.path.join(docker, "Dockerfile")).read()
    for source in re.findall(r"^COPY (?!--from)(\S+)", dockerfile, re.M):
        check(os.path.exists(os.path.join(root, source)), f"the Dockerfile copies {source}, which does not exist")
    for library in ["libwebsockets17", "libcurl4", "libsqlite3-0", "liblz4-1"]:
        check(library in dockerfile, f"the runtime image lacks {library}")
    check(f"EXPOSE {listen_port}" in dockerfile and f"0.0.0.0:{listen_port}" in dockerfile, "the Dockerfile exposes another port")
    check("FROM debian:bookworm-slim" in dockerfile and " AS build" in dockerfile, "the Dockerfile is not multi-stage onto slim Debian")

    if failures:
        print("\n".join(failures))
        print(f"{len(failures)} of {checks} checks failed")
        return 1
    print(f"{checks} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
