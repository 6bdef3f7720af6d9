"""Lints the files under Sources/KassaGateway/Resources, which Kassa embeds and serves.

- openapi.yaml and asyncapi.yaml are assembled as Kassa serves them: the line
  "    # kassa:shared-schemas" under components.schemas is replaced by schemas.yaml;
- schemas.yaml is indented by 4, refers only to '#/components/schemas/Name', and keeps to what
  OpenAPI 3.0.3 and JSON Schema draft-07 read alike (no const, no type lists or null type,
  nullable only beside no type); neither document defines a shared name again;
- openapi.yaml is then a valid OpenAPI 3 document (openapi-spec-validator);
- asyncapi.yaml says asyncapi 3.0.0, every $ref in it resolves, every channel message and every
  operation's channel, messages and reply name something that exists (an operation's messages
  are its channel's), every message has a payload, its schemas use only the keywords the Swift
  tests' validator knows, and every message example validates against its payload;
- every *.js parses (node --check; as an ES module when it imports or exports);
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
from jsonschema import Draft7Validator
from openapi_spec_validator import validate

MARKER = "    # kassa:shared-schemas"
SHARED = "schemas.yaml"
ASSEMBLED = ["openapi.yaml", "asyncapi.yaml"]
# The schema keywords the Swift tests' validator understands; asyncapi.yaml uses no others.
KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "oneOf", "anyOf",
            "allOf", "$ref", "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "nullable",
            "description", "examples", "example", "title"}


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


def assemble(text, shared):
    """The document as Kassa serves it: the marker line replaced by the shared schemas."""
    lines = text.split("\n")
    at = [i for i, line in enumerate(lines) if line.rstrip("\r") == MARKER]
    if len(at) != 1:
        raise ValueError(f"the line {MARKER.strip()!r} must appear once (found {len(at)})")
    above = [line for line in lines[:at[0]] if line.strip() and not line.lstrip().startswith("#")]
    if not above or above[-1].rstrip() != "  schemas:" or "components:" not in [line.rstrip() for line in above]:
        raise ValueError("the marker must stand directly under components: schemas:")
    return "\n".join(lines[:at[0]] + [shared.rstrip("\n")] + lines[at[0] + 1:])


def schemas_in(node, path):
    """Every schema inside `node` (a schema), with its path: through properties, items, and the rest."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            for name, child in value.items():
                yield from schemas_in(child, f"{path}/properties/{name}")
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            yield from schemas_in(value, f"{path}/{key}")
        elif key in ("oneOf", "anyOf", "allOf") and isinstance(value, list):
            for i, child in enumerate(value):
                yield from schemas_in(child, f"{path}/{key}/{i}")


def refs_in(node, path="#"):
    """Every $ref in a document, with where it stands."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield path, value
            else:
                yield from refs_in(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from refs_in(value, f"{path}/{i}")


def resolve(document, ref):
    """The node a local $ref names, or KeyError."""
    if not ref.startswith("#/"):
        raise KeyError(f"{ref} is not a local reference")
    node = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"{ref} names nothing")
    return node


def check_indentation(text):
    """schemas.yaml goes in under components.schemas: every line indented by at least 4."""
    return [f"{SHARED}:{number}: not indented by 4" for number, line in enumerate(text.split("\n"), 1)
            if line.strip() and not line.startswith("    ")]


def check_shared(shared):
    """schemas.yaml: a mapping of names, local schema refs only, the dialect both documents read alike."""
    failures = []
    if not isinstance(shared, dict) or not shared:
        return [f"{SHARED}: not a mapping of schema names"]
    for name, schema in shared.items():
        for path, node in schemas_in(schema, name):
            if "const" in node:
                failures.append(f"{SHARED}: {path}: const (OpenAPI 3.0 has none; use a one-value enum)")
            if isinstance(node.get("type"), list) or node.get("type") == "null":
                failures.append(f"{SHARED}: {path}: type must be one name, not null")
            if "nullable" in node and "type" in node:
                failures.append(f"{SHARED}: {path}: nullable beside a type (put null in an anyOf)")
            if "examples" in node:
                failures.append(f"{SHARED}: {path}: examples (OpenAPI 3.0 schemas take example)")
        for path, ref in refs_in(schema, name):
            target = ref[len("#/components/schemas/"):]
            if not ref.startswith("#/components/schemas/") or "/" in target:
                failures.append(f"{SHARED}: {path}: $ref {ref} must be '#/components/schemas/Name'")
    return failures


def nullable_as_null(node):
    """A copy in which nullable: true also admits null, as an OpenAPI reader takes it."""
    if isinstance(node, list):
        return [nullable_as_null(value) for value in node]
    if not isinstance(node, dict):
        return node
    schema = {key: nullable_as_null(value) for key, value in node.items()}
    if schema.pop("nullable", False) is True:
        return {"anyOf": [{"enum": [None]}, schema]}
    return schema


def check_asyncapi(document):
    name = "asyncapi.yaml"
    failures = []
    if not isinstance(document, dict):
        return [f"{name}: not a mapping"]
    if document.get("asyncapi") != "3.0.0":
        failures.append(f"{name}: asyncapi must be 3.0.0, not {document.get('asyncapi')!r}")
    for path, ref in refs_in(document):
        try:
            resolve(document, ref)
        except KeyError as error:
            failures.append(f"{name}: {path}: {error.args[0]}")
    channels = document.get("channels") or {}
    messages = {}
    for channel_name, channel in channels.items():
        for message_name, message in (channel.get("messages") or {}).items():
            try:
                messages[f"#/channels/{channel_name}/messages/{message_name}"] = (
                    resolve(document, message["$ref"]) if "$ref" in message else message)
            except KeyError:
                pass  # reported with the other $refs
    for message_name, message in ((document.get("components") or {}).get("messages") or {}).items():
        messages[f"#/components/messages/{message_name}"] = message
    for operation_name, operation in (document.get("operations") or {}).items():
        where = f"{name}: operations/{operation_name}"
        if operation.get("action") not in ("send", "receive"):
            failures.append(f"{where}: action must be send or receive")
        channel_ref = (operation.get("channel") or {}).get("$ref", "")
        if not channel_ref.startswith("#/channels/") or channel_ref[len("#/channels/"):] not in channels:
            failures.append(f"{where}: channel {channel_ref!r} is not one of the channels")
        parts = [("messages", operation.get("messages") or [])]
        reply = operation.get("reply")
        if reply is not None:
            reply_ref = (reply.get("channel") or {}).get("$ref", channel_ref)
            if not reply_ref.startswith("#/channels/") or reply_ref[len("#/channels/"):] not in channels:
                failures.append(f"{where}: reply channel {reply_ref!r} is not one of the channels")
            parts.append(("reply messages", reply.get("messages") or []))
            if not reply.get("messages"):
                failures.append(f"{where}: the reply names no message")
        for label, refs in parts:
            owner = channel_ref if label == "messages" else (reply.get("channel") or {}).get("$ref", channel_ref)
            for ref in refs:
                target = ref.get("$ref", "") if isinstance(ref, dict) else ""
                if not target.startswith(owner + "/messages/") or target not in messages:
                    failures.append(f"{where}: {label}: {target!r} is not a message of {owner}")
    schemas = (document.get("components") or {}).get("schemas") or {}
    for path, message in messages.items():
        if not isinstance(message, dict) or "payload" not in message:
            failures.append(f"{name}: {path}: no payload")
    for schema_name, schema in schemas.items():
        for path, node in schemas_in(schema, f"components/schemas/{schema_name}"):
            unknown = sorted(set(node) - KEYWORDS)
            if unknown:
                failures.append(f"{name}: {path}: keywords the Swift tests' validator does not know: {unknown}")
    if failures:
        return failures
    # Every example of a message validates against its payload (draft-07; nullable admits null).
    components = nullable_as_null(document.get("components") or {})
    for path, message in messages.items():
        if not path.startswith("#/components/messages/"):
            continue
        root = {"allOf": [nullable_as_null(message["payload"])], "components": components}
        validator = Draft7Validator(root)
        for i, example in enumerate(message.get("examples") or []):
            if "payload" in example:
                for error in validator.iter_errors(example["payload"]):
                    failures.append(f"{name}: {path}/examples/{i}: {error.message}")
    return failures


def check_documents(directory):
    failures = []
    with open(os.path.join(directory, SHARED)) as f:
        shared_text = f.read()
    failures += check_indentation(shared_text)
    if failures:
        return failures
    try:
        shared = yaml.safe_load(shared_text)
    except yaml.YAMLError as error:
        return [f"{SHARED}: {error}"]
    failures += check_shared(shared)
    documents = {}
    for name in ASSEMBLED:
        with open(os.path.join(directory, name)) as f:
            text = f.read()
        try:
            own = ((yaml.safe_load(text) or {}).get("components") or {}).get("schemas") or {}
            again = sorted(set(own) & set(shared or {}))
            if again:
                failures.append(f"{name}: defines shared schemas again: {', '.join(again)}")
            documents[name] = yaml.safe_load(assemble(text, shared_text))
        except (ValueError, yaml.YAMLError) as error:
            failures.append(f"{name}: {error}")
    if "openapi.yaml" in documents:
        try:
            validate(documents["openapi.yaml"])
        except Exception as error:  # noqa: BLE001 - any validation error is a failure to report
            failures.append(f"openapi.yaml: {error}")
    if "asyncapi.yaml" in documents:
        failures += check_asyncapi(documents["asyncapi.yaml"])
    return failures


def main(directory):
    files = sorted(os.listdir(directory))
    failures = check_documents(directory)
    for name in files:
        path = os.path.join(directory, name)
        if name.endswith(".js"):
            # A file with import/export is an ES module: plain `node --check` would not parse it as one.
            with open(path) as f:
                source = f.read()
            is_module = "\nimport " in "\n" + source or "\nexport " in "\n" + source
            if is_module:
                run = subprocess.run(["node", "--check", "--input-type=module"], input=source, capture_output=True, text=True)
            else:
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
