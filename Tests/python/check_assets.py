"""Lints the files under Sources/KassaGateway/Resources, which Kassa embeds and serves.

- openapi.yaml is valid YAML and a valid OpenAPI 3 document (openapi-spec-validator);
- every *.js parses (node --check);
- every *.html parses, has no inline script, style element, style attribute or on* handler
  (the pages run under a CSP without 'unsafe-inline'), and each script or stylesheet it
  names is one of the embedded files.

Usage: python3 check_assets.py RESOURCES_DIR. Exit 0 when all hold; each failure is printed.
"""
import os
import subprocess
import sys
from html.parser import HTMLParser

import yaml
from openapi_spec_validator import validate


class PageLint(HTMLParser):
    def __init__(self, name, files):
        super().__init__()
        self.name, self.files, self.failures, self.open_script = name, files, [], False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for key in attributes:
            if key.startswith("on"):
                self.failures.append(f"{self.name}: inline handler {key} on <{tag}>")
            if key == "style":
                self.failures.append(f"{self.name}: style attribute on <{tag}>")
        if tag == "style":
            self.failures.append(f"{self.name}: <style> element")
        if tag == "script":
            self.open_script = True
            src = attributes.get("src")
            if not src:
                self.failures.append(f"{self.name}: inline <script>")
            elif src not in self.files:
                self.failures.append(f"{self.name}: script {src} is not an embedded file")
        if tag == "link" and attributes.get("rel") == "stylesheet" and attributes.get("href") not in self.files:
            self.failures.append(f"{self.name}: stylesheet {attributes.get('href')} is not an embedded file")

    def handle_endtag(self, tag):
        if tag == "script":
            self.open_script = False

    def handle_data(self, data):
        if self.open_script and data.strip():
            self.failures.append(f"{self.name}: script element with inline text")


def main(directory):
    files = sorted(os.listdir(directory))
    failures = []
    with open(os.path.join(directory, "openapi.yaml")) as f:
        try:
            validate(yaml.safe_load(f))
        except Exception as error:  # noqa: BLE001 - any validation error is a failure to report
            failures.append(f"openapi.yaml: {error}")
    for name in files:
        path = os.path.join(directory, name)
        if name.endswith(".js"):
            run = subprocess.run(["node", "--check", path], capture_output=True, text=True)
            if run.returncode != 0:
                failures.append(f"{name}: {run.stderr.strip()}")
        if name.endswith(".html"):
            lint = PageLint(name, files)
            with open(path) as f:
                lint.feed(f.read())
            failures += lint.failures
    for failure in failures:
        print(failure)
    print(f"checked {len(files)} files, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
